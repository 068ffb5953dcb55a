/* loom train: train a model with a whole Loom job.
 *
 * The same command runs in two ways. Typed by a user (no LOOM_ROLE in the
 * environment), it checks the flags, then starts a job on this machine: the
 * local launcher runs this very binary, with the same arguments, as the
 * scheduler, the servers and the workers. Started by a launcher (LOOM_ROLE
 * set: loom run, mpirun wrappers, Kubernetes), it is one node of that job. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "lr/lr.h"

const char cmd_train_help[] = "usage: loom train MODEL [options]\n"
                              "\n"
                              "models:\n"
                              "  lr    sparse logistic regression (loom train lr --help)\n";

/* Run the job on this machine: `loom run -S -W -- <this binary> train lr ARGS`. */
static int launch_locally(const lr_cli *c, int argc, char **argv)
{
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        perror("loom train: cannot find this program");
        return 1;
    }
    self[len] = '\0';
    char servers[16], workers[16];
    snprintf(servers, sizeof servers, "%d", c->servers);
    snprintf(workers, sizeof workers, "%d", c->workers);
    /* argv here is {"train", "lr", flags...}. */
    char **run = calloc((size_t)argc + 8, sizeof *run);
    if (!run) return 1;
    int k = 0;
    run[k++] = "run";
    run[k++] = "--servers";
    run[k++] = servers;
    run[k++] = "--workers";
    run[k++] = workers;
    run[k++] = "--";
    run[k++] = self;
    for (int i = 0; i < argc; i++) run[k++] = argv[i];
    int rc = cmd_run(k, run);
    free(run);
    return rc;
}

int cmd_train(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fputs(cmd_train_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "lr")) {
        fprintf(stderr, "loom train: unknown model '%s'\n%s", argv[1], cmd_train_help);
        return 2;
    }
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(lr_train_help, stdout);
            return 0;
        }
    lr_cli cli;
    char err[512];
    if (lr_parse_flags(argc - 1, argv + 1, &cli, err, sizeof err)) {
        fprintf(stderr, "loom train lr: %s\n", err);
        return 2;
    }
    if (getenv("LOOM_ROLE")) return lr_train_node(&cli);
    if (access(cli.train_path, R_OK)) {
        fprintf(stderr, "loom train lr: cannot read %s\n", cli.train_path);
        return 2;
    }
    return launch_locally(&cli, argc, argv);
}
