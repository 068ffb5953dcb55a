/* loom train: train a model with a whole Loom job.
 *
 * The same command runs in two ways. Typed by a user, it checks the flags,
 * then starts a job on this machine: the local launcher runs this very
 * binary, with the same arguments, as the scheduler, the servers and the
 * workers. Started as one node of a job (loom_launched(): LOOM_ROLE set by
 * loom run, a script or Kubernetes; or the variables of mpirun or srun), it
 * is that node. Under mpirun or srun the launcher's rank decides the role, so
 * --servers and --workers, when given, become LOOM_NUM_SERVERS and
 * LOOM_NUM_WORKERS for the library to map ranks with (and to check the job's
 * size against).
 *
 * --interface NAME belongs to this command, not to the model: it is taken
 * out of the arguments and becomes `loom run --interface NAME` for a local
 * job, LOOM_INTERFACE for a node. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loom/loom.h>

#include "commands.h"
#include "lr/lr.h"

const char cmd_train_help[] = "usage: loom train MODEL [options]\n"
                              "\n"
                              "models:\n"
                              "  lr    sparse logistic regression (loom train lr --help)\n";

static const char cluster_help[] =
    "cluster (docs/CLUSTER.md):\n"
    "  --interface NAME        network interface to bind and publish (LOOM_INTERFACE);\n"
    "                          default: 127.0.0.1 on this machine, the route to the\n"
    "                          scheduler under mpirun/srun\n"
    "  Under mpirun or srun (e.g. mpirun -np 6 loom train lr ... --servers 2), rank 0\n"
    "  is the scheduler, the next S ranks servers and the rest workers.\n";

/* Run the job on this machine: `loom run -S -W -- <this binary> train lr ARGS`. */
static int launch_locally(const lr_cli *c, const char *interface, int argc, char **argv)
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
    char **run = calloc((size_t)argc + 10, sizeof *run);
    if (!run) return 1;
    int k = 0;
    run[k++] = "run";
    run[k++] = "--servers";
    run[k++] = servers;
    run[k++] = "--workers";
    run[k++] = workers;
    if (interface) {
        run[k++] = "--interface";
        run[k++] = (char *)interface;
    }
    run[k++] = "--";
    run[k++] = self;
    for (int i = 0; i < argc; i++) run[k++] = argv[i];
    int rc = cmd_run(k, run);
    free(run);
    return rc;
}

/* Under a launcher: a count given on the command line becomes the library's
 * variable, unless that already says something else. */
static int export_count(const char *flag, const char *var, int value, int argc, char **argv)
{
    int given = 0;
    for (int i = 2; i < argc; i++) given |= !strcmp(argv[i], flag);
    if (!given) return 0;
    char text[16];
    snprintf(text, sizeof text, "%d", value);
    const char *now = getenv(var);
    if (now && strcmp(now, text)) {
        fprintf(stderr, "loom train lr: %s %d contradicts %s=%s\n", flag, value, var, now);
        return 2;
    }
    return setenv(var, text, 1) ? 1 : 0;
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
            fputs(cluster_help, stdout);
            return 0;
        }
    /* Take --interface NAME out; the model's parser sees the rest. */
    const char *interface = NULL;
    int n = 0;
    for (int i = 0; i < argc; i++) {
        if (i < 2 || strcmp(argv[i], "--interface")) {
            argv[n++] = argv[i];
        } else if (i + 1 < argc && argv[i + 1][0]) {
            interface = argv[++i];
        } else {
            fprintf(stderr, "loom train lr: --interface needs a network interface name\n");
            return 2;
        }
    }
    argc = n;
    lr_cli cli;
    char err[512];
    if (lr_parse_flags(argc - 1, argv + 1, &cli, err, sizeof err)) {
        fprintf(stderr, "loom train lr: %s\n", err);
        return 2;
    }
    if (loom_launched()) {
        int rc = export_count("--servers", "LOOM_NUM_SERVERS", cli.servers, argc, argv);
        if (!rc) rc = export_count("--workers", "LOOM_NUM_WORKERS", cli.workers, argc, argv);
        if (!rc && interface && setenv("LOOM_INTERFACE", interface, 1)) rc = 1;
        return rc ? rc : lr_train_node(&cli);
    }
    if (access(cli.train_path, R_OK)) {
        fprintf(stderr, "loom train lr: cannot read %s\n", cli.train_path);
        return 2;
    }
    return launch_locally(&cli, interface, argc, argv);
}
