/* loom keygen: write a new job secret (loom/secret.h, docs/SECURITY.md).
 *
 * The file is what --secret FILE and LOOM_SECRET_FILE name: every process of
 * a job that reads it can join the job, so it is created private (mode 0600)
 * and an existing file is never replaced unless asked, lest a running job's
 * secret be lost. */
#include "commands.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <loom/loom.h>

static const char cmd_keygen_help[] =
    "Usage: loom keygen [--force] FILE\n"
    "\n"
    "Write a new job secret (a CURVE key) into FILE, readable by its owner only\n"
    "(mode 0600). Give the same FILE to every process of a job with --secret FILE\n"
    "or LOOM_SECRET_FILE: their traffic is then encrypted, and processes without\n"
    "it are refused. `loom run` and `loom train` on one machine make a throw-away\n"
    "secret by themselves; under mpirun or srun, put the file on storage every\n"
    "node reads. See docs/SECURITY.md.\n"
    "\n"
    "Options:\n"
    "  --force     replace FILE if it exists\n"
    "  -h, --help  show this help\n";

int cmd_keygen(int argc, char **argv)
{
    const char *path = NULL;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(cmd_keygen_help, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--force")) {
            force = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "loom keygen: unknown option '%s'\nTry 'loom keygen --help'.\n",
                    argv[i]);
            return 2;
        } else if (path) {
            fprintf(stderr, "loom keygen: one FILE only, got '%s' and '%s'\n", path, argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "loom keygen: missing FILE\nTry 'loom keygen --help'.\n");
        return 2;
    }
    if (!force && access(path, F_OK) == 0) {
        fprintf(stderr, "loom keygen: %s already exists; left alone (--force replaces it)\n", path);
        return 1;
    }
    char err[512];
    if (loom_secret_generate(path, force, err, sizeof err)) {
        fprintf(stderr, "loom keygen: %s\n", err);
        return 1;
    }
    return 0;
}
