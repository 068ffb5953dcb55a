/* loom train: train a model (the table of models, tools/models.c) with a whole Loom job.
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
 * --interface NAME, --secret FILE and --insecure, job flags every model's
 * table holds (apps/common), are for the launcher: `loom run --interface NAME
 * --secret FILE` (or `--insecure`) for a local job, LOOM_INTERFACE and
 * LOOM_SECRET_FILE (or its absence) for a node.
 *
 * A model may instead train in this process, with no job, when its flags say
 * so: lasso --sequential, the reference of its scheduled engine. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loom/loom.h>

#include "commands.h"
#include "common/files.h"
#include "models.h"

static const char cmd_train_help[] =
    "usage: loom train MODEL [options]   (loom train MODEL --help)\n";

static void list_models(FILE *out)
{
    fputs(cmd_train_help, out);
    fputs("\nmodels:\n", out);
    for (size_t i = 0; i < num_models; i++)
        fprintf(out, "  %-6s %s\n", models[i].name, models[i].train.summary);
}

static const char cluster_help[] =
    "cluster (docs/CLUSTER.md):\n"
    "  Under mpirun or srun (e.g. mpirun -np 6 loom train MODEL ... --servers 2), rank 0\n"
    "  is the scheduler, the next S ranks servers and the rest workers.\n";

static void model_help(const model_row *m, FILE *out)
{
    m->train.help(out);
    fputs(cluster_help, out);
}

/* Whether arg is flag `name` (as "NAME VALUE" or "NAME=VALUE"). */
static int is_flag(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(arg, name, n) && (arg[n] == '\0' || arg[n] == '=');
}

/* Run the job on this machine: `loom run -S -W [--interface NAME] [--secret
 * FILE] -- <this binary> train MODEL ARGS`, ARGS without those two: the
 * launcher binds its address for every node (LOOM_BIND) and hands each the
 * secret (LOOM_SECRET_FILE). */
static int launch_locally(const app_job *j, int argc, char **argv)
{
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) {
        perror("loom train: cannot find this program");
        return 1;
    }
    self[len] = '\0';
    char servers[16], workers[16];
    snprintf(servers, sizeof servers, "%d", j->servers);
    snprintf(workers, sizeof workers, "%d", j->workers);
    /* argv here is {"train", MODEL, flags...}. */
    char **run = calloc((size_t)argc + 24, sizeof *run);
    if (!run) return 1;
    int k = 0;
    run[k++] = "run";
    run[k++] = "--servers";
    run[k++] = servers;
    run[k++] = "--workers";
    run[k++] = workers;
    if (j->interface) {
        run[k++] = "--interface";
        run[k++] = (char *)j->interface;
    }
    if (j->secret) {
        run[k++] = "--secret";
        run[k++] = (char *)j->secret;
    }
    if (j->insecure) run[k++] = "--insecure";
    if (j->no_status) run[k++] = "--no-status";
    if (j->replicas) { /* a server may die and the job go on: not stopped for it */
        char text[16];
        snprintf(text, sizeof text, "%d", j->replicas);
        if (setenv("LOOM_REPLICAS", text, 1)) {
            free(run);
            return 1;
        }
        run[k++] = "--on-failure";
        run[k++] = "wait";
        if (j->restart_servers) {
            run[k++] = "--on-server-failure";
            run[k++] = "restart";
        }
    }
    char max_restarts[16];
    if (j->on_worker_failure == LOOM_WORKER_FAILURE_RESTART) {
        snprintf(max_restarts, sizeof max_restarts, "%d", j->max_restarts);
        run[k++] = "--max-restarts";
        run[k++] = max_restarts;
    }
    run[k++] = "--";
    run[k++] = self;
    for (int i = 0; i < argc; i++) {
        if (i >= 2 && (is_flag(argv[i], "--interface") || is_flag(argv[i], "--secret"))) {
            i += !strchr(argv[i], '='); /* and its value */
            continue;
        }
        if (i >= 2 && !strcmp(argv[i], "--insecure")) continue;
        run[k++] = argv[i];
    }
    int rc = cmd_run(k, run);
    free(run);
    return rc;
}

/* Under a launcher: a count given on the command line becomes the library's
 * variable, unless that already says something else. */
static int export_count(const char *model, const char *flag, const char *var, int given, int value)
{
    if (!given) return 0;
    char text[16];
    snprintf(text, sizeof text, "%d", value);
    const char *now = getenv(var);
    if (now && strcmp(now, text)) {
        fprintf(stderr, "loom train %s: %s %d contradicts %s=%s\n", model, flag, value, var, now);
        return 2;
    }
    return setenv(var, text, 1) ? 1 : 0;
}

/* Under a launcher: the checkpoint and replica flags become the library's
 * variables (src/ft and src/ps read them in every process; docs/FAULTS.md). */
static int export_checkpoint(const model_row *m, const app_job *j)
{
    char full[24];
    const char *every = j->checkpoint_every;
    snprintf(full, sizeof full, "%llu", (unsigned long long)j->checkpoint_full_every);
    if (setenv("LOOM_CHECKPOINT_MODEL", m->name, 1)) return 1;
    if (j->checkpoint_dir && (setenv("LOOM_CHECKPOINT_DIR", j->checkpoint_dir, 1) ||
                              setenv("LOOM_CHECKPOINT_EVERY", every, 1) ||
                              setenv("LOOM_CHECKPOINT_FULL_EVERY", full, 1)))
        return 1;
    /* A job that `loom run` restarted (--on-worker-failure restart, LOOM_RESTART)
     * resumes where the launcher says: its newest checkpoint, not --resume's. */
    if (j->resume_dir && !getenv("LOOM_RESTART") && setenv("LOOM_RESUME", j->resume_dir, 1))
        return 1;
    if (j->replicas) {
        char k[16];
        snprintf(k, sizeof k, "%d", j->replicas);
        if (setenv("LOOM_REPLICAS", k, 1)) return 1;
    }
    return 0;
}

/* --on-worker-failure becomes LOOM_ON_WORKER_FAILURE, which the scheduler
 * and the local launcher read (docs/FAULTS.md). */
static int export_worker_failure(const app_job *j)
{
    static const char *const policy[] = {"fail", "continue", "restart"};
    if (j->on_worker_failure < 0) return 0;
    return setenv("LOOM_ON_WORKER_FAILURE", policy[j->on_worker_failure], 1) ? 1 : 0;
}

/* Before a local job starts: the checkpoint to resume from verifies and fits
 * this job, or the user hears why once (not once per process). */
static int check_resume(const model_row *m, const app_job *j)
{
    if (!j->resume_dir) return 0;
    loom_checkpoint *ck;
    if (loom_checkpoint_open(j->resume_dir, -1, &ck)) {
        fprintf(stderr, "loom train %s: cannot resume: %s\n", m->name, loom_last_error());
        return 2;
    }
    int rc = 0;
    if (strcmp(loom_checkpoint_model(ck), m->name)) {
        fprintf(stderr, "loom train %s: cannot resume from %s: its checkpoint is of model %s\n",
                m->name, j->resume_dir, loom_checkpoint_model(ck));
        rc = 2;
    } else if (loom_checkpoint_num_servers(ck) != j->servers ||
               loom_checkpoint_num_workers(ck) != j->workers) {
        fprintf(stderr,
                "loom train %s: cannot resume from %s: its checkpoint was made by %d servers and "
                "%d workers, this job has %d and %d (give the same numbers)\n",
                m->name, j->resume_dir, loom_checkpoint_num_servers(ck),
                loom_checkpoint_num_workers(ck), j->servers, j->workers);
        rc = 2;
    }
    loom_checkpoint_close(ck);
    return rc;
}

static int train_with(const model_row *m, int argc, char **argv)
{
    char err[512];
    int rc = 0;
    void *cli = calloc(1, m->train.cli_size);
    if (!cli) return 1;
    const app_job *j = cli; /* every model's cli starts with its app_job */
    int parsed = m->train.parse(argc - 1, argv + 1, cli, err, sizeof err);
    if (parsed == APP_FLAGS_HELP) {
        model_help(m, stdout);
    } else if (parsed) {
        fprintf(stderr, "loom train %s: %s\nTry 'loom train %s --help'.\n", m->name, err, m->name);
        rc = 2;
    } else if (m->train.here && m->train.wants_here(cli)) {
        if (app_check_job_files(j, err, sizeof err)) {
            fprintf(stderr, "loom train %s: %s\n", m->name, err);
            rc = 2;
        } else {
            rc = m->train.here(cli);
        }
    } else if (loom_launched()) {
        rc = export_count(m->name, "--servers", "LOOM_NUM_SERVERS", j->servers_given, j->servers);
        if (!rc)
            rc = export_count(m->name, "--workers", "LOOM_NUM_WORKERS", j->workers_given,
                              j->workers);
        if (!rc && j->interface && setenv("LOOM_INTERFACE", j->interface, 1)) rc = 1;
        if (!rc && j->secret && setenv("LOOM_SECRET_FILE", j->secret, 1)) rc = 1;
        if (!rc && j->insecure && unsetenv("LOOM_SECRET_FILE")) rc = 1;
        if (!rc && j->no_status && setenv("LOOM_STATUS_PORT", "-1", 1)) rc = 1;
        if (!rc) rc = export_checkpoint(m, j);
        if (!rc) rc = export_worker_failure(j);
        if (!rc) rc = m->train.node(cli);
    } else if (app_check_job_files(j, err, sizeof err)) {
        /* Before any process starts: a wrong --model-out must not wait for the last epoch. */
        fprintf(stderr, "loom train %s: %s\n", m->name, err);
        rc = 2;
    } else if (!(rc = check_resume(m, j)) && !(rc = export_worker_failure(j)) &&
               !(rc = export_checkpoint(m, j))) {
        /* The launcher, too, needs the checkpoint variables: it restarts the
         * job from the newest checkpoint (--on-worker-failure restart). */
        rc = launch_locally(j, argc, argv);
    }
    free(cli);
    return rc;
}

int cmd_train(int argc, char **argv)
{
    if (argc < 2) {
        list_models(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        /* `loom help train`: every model's flags, from their tables. */
        list_models(stdout);
        for (size_t i = 0; i < num_models; i++) {
            fputs("\n", stdout);
            models[i].train.help(stdout);
        }
        fputs("\n", stdout);
        fputs(cluster_help, stdout);
        return 0;
    }
    for (size_t i = 0; i < num_models; i++)
        if (!strcmp(argv[1], models[i].name)) return train_with(&models[i], argc, argv);
    fprintf(stderr, "loom train: unknown model '%s'\n", argv[1]);
    list_models(stderr);
    return 2;
}
