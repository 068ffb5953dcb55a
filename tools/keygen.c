/* loom keygen: write a new job secret (loom/secret.h, docs/SECURITY.md).
 *
 * The file is what --secret FILE and LOOM_SECRET_FILE name: every process of
 * a job that reads it can join the job, so it is created private (mode 0600)
 * and an existing file is never replaced unless asked, lest a running job's
 * secret be lost. */
#include "commands.h"

#include <stdarg.h>
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
    "  --force     replace FILE if it exists and is a regular file of yours\n"
    "              (never a link, device, FIFO, socket or directory)\n"
    "  -h, --help  show this help\n";

#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
static int
usage(const char *fmt, ...)
{
    fputs("loom keygen: ", stderr);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'loom keygen --help'.\n", stderr);
    return 2;
}

int cmd_keygen(int argc, char **argv)
{
    const char *path = NULL;
    int force = 0;
    /* The messages are those of the flag table (apps/common/flags.c) the
     * other commands use; keygen's one FILE is an argument of its own. */
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        size_t name_len = strcspn(arg, "=");
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            fputs(cmd_keygen_help, stdout);
            return 0;
        } else if (!strcmp(arg, "--force")) {
            force = 1;
        } else if (name_len == 7 && !strncmp(arg, "--force", 7)) {
            return usage("--force takes no value");
        } else if (arg[0] == '-' && arg[1]) {
            return usage("unknown flag '%.*s'", (int)name_len, arg);
        } else if (path) {
            return usage("unexpected argument '%s' (one FILE only)", arg);
        } else {
            path = arg;
        }
    }
    if (!path) return usage("missing FILE");
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
