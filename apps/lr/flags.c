/* flags: the command line of `loom train lr`.
 *
 * Parsed twice: by the launching command, to refuse bad or contradictory
 * flags before any process starts, and by every node of the job. The table
 * below is both what the parser accepts and what the help prints (apps/common
 * parses); the checks across flags are here. Every rejection names the flag
 * and says what it expects. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "lr/lr.h"

static const app_flag flags[] = {
    {.section = "data:",
     .name = "--train",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "LIBSVM training data (required); each worker reads its share"},
    {.name = "--test",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "LIBSVM test data, evaluated after every epoch"},
    {.name = "--format",
     .kind = APP_CHOICE,
     .arg = "libsvm",
     .def = "libsvm",
     .help = "the only format lr reads (accepted for symmetry)"},
    APP_FLAGS_PARTS,
    APP_FLAGS_IDS,
    APP_FLAG_SKIP_BAD,
    APP_FLAGS_JOB,
    APP_FLAGS_CHECKPOINT,
    APP_FLAGS_FILTER,
    {.section = "algorithm:",
     .name = "--algo",
     .kind = APP_CHOICE,
     .arg = "sgd|dbpg",
     .def = "sgd",
     .help = "minibatch SGD or delayed block proximal gradient"},
    {.name = "--epochs",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = 100000,
     .def = "10",
     .help = "passes over the data"},
    APP_FLAG_SEED("order of the rows"),
    {.name = "--lr",
     .kind = APP_NUM,
     .arg = "X",
     .min = 1e-12,
     .max = 1e6,
     .def = "sgd 0.1, dbpg 1",
     .help = "learning rate (dbpg: step scale eta)"},
    {.name = "--l1",
     .kind = APP_NUM,
     .arg = "X",
     .min = 0,
     .max = 1e9,
     .def = "0",
     .help = "L1 regularisation (ftrl or dbpg only)"},
    {.name = "--l2",
     .kind = APP_NUM,
     .arg = "X",
     .min = 0,
     .max = 1e9,
     .def = "0",
     .help = "L2 regularisation"},
    {.section = "sgd only:",
     .name = "--updater",
     .kind = APP_CHOICE,
     .arg = "sgd|adagrad|ftrl",
     .def = "adagrad",
     .help = "server-side optimiser"},
    {.name = "--minibatch",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = 100000000,
     .def = "100",
     .help = "rows per minibatch per worker (per thread with --threads)"},
    {.name = "--consistency",
     .kind = APP_TEXT,
     .arg = "bsp|ssp:S|asp",
     .def = "ssp:2",
     .help = "staleness bound in minibatches"},
    {.section = "dbpg only:",
     .name = "--blocks",
     .kind = APP_INT,
     .arg = "B",
     .lo = 1,
     .hi = 1000000,
     .def = "64",
     .help = "key blocks"},
    {.name = "--delay",
     .kind = APP_INT,
     .arg = "TAU",
     .lo = 0,
     .hi = 1000000,
     .def = "2",
     .help = "bounded delay between steps"},
    APP_FLAGS_COMM,
    APP_FLAGS_OUTPUT("JSON line per epoch", "save the model (format: docs/LR.md)"),
};
#define NFLAGS (sizeof flags / sizeof flags[0])

void lr_train_help(FILE *out)
{
    fputs("usage: loom train lr --train FILE [options]\n"
          "\n"
          "Train a sparse logistic-regression model on this machine (a scheduler, S servers\n"
          "and W workers under the local launcher), or on a cluster when started by "
          "mpirun/srun.\n"
          "\n",
          out);
    app_flags_help(out, flags, NFLAGS);
}

int lr_parse_flags(int argc, char **argv, void *cli, char *err, size_t errlen)
{
    lr_cli *c = cli;
    static const lr_train_opts defaults = LR_TRAIN_OPTS_DEFAULT;
    static const loom_libsvm_opts data_defaults = LOOM_LIBSVM_OPTS_DEFAULT;
    *c = (lr_cli){.train = defaults, .data = data_defaults};
    app_flag_value v[NFLAGS];
    int rc =
        app_train_flags(&c->job, defaults.staleness, flags, NFLAGS, argc, argv, v, err, errlen);
    if (rc) return rc;
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(flags, NFLAGS, v, name))
    if (GIVEN("--zero-based")) c->data.ids = LOOM_IDS_ZERO_BASED;
    if (GIVEN("--one-based")) c->data.ids = LOOM_IDS_ONE_BASED;
    if (GIVEN("--skip-bad")) c->data.skip_bad = 1;
    if (GIVEN("--algo")) c->train.algo = x->choice ? LR_ALGO_DBPG : LR_ALGO_SGD;
    if (GIVEN("--epochs")) c->train.epochs = (int)x->u;
    if (GIVEN("--l1")) c->train.l1 = x->x;
    if (GIVEN("--l2")) c->train.l2 = x->x;
    /* In the order of the choices above. */
    static const lr_updater updaters[] = {LR_UPD_SGD, LR_UPD_ADAGRAD, LR_UPD_FTRL};
    if (GIVEN("--updater")) c->train.updater = updaters[x->choice];
    if (GIVEN("--minibatch")) c->train.minibatch = (uint32_t)x->u;
    if (GIVEN("--blocks")) c->train.blocks = (int)x->u;
    if (GIVEN("--delay")) c->train.delay = (int)x->u;
    if ((rc = app_parts_flags(flags, NFLAGS, v, &c->data_parts, &c->part_timeout, err, errlen)))
        return rc;
    if (GIVEN("--lr"))
        c->train.lr = x->x;
    else if (c->train.algo == LR_ALGO_DBPG)
        /* The full step: DBPG's curvature already bounds the window's
         * overlap (lr_dbpg_window), so eta 1 stays stable (docs/LR.md). */
        c->train.lr = 1;
    c->train.consistency = c->job.consistency;
    c->train.staleness = c->job.staleness;
    c->train.seed = c->job.seed;
    c->train.threads = c->job.threads;
    if (!c->job.train_path) return app_usage(err, errlen, "--train FILE is required");
    if (c->job.servers == 0)
        return app_usage(err, errlen,
                         "--servers 0: loom train lr keeps its model on the servers; "
                         "give --servers 1 or more");
    if (c->train.algo == LR_ALGO_DBPG && (c->job.checkpoint_dir || c->job.resume_dir))
        return app_usage(err, errlen, "--algo dbpg has no checkpoints yet (docs/FAULTS.md)");
    if (c->train.algo == LR_ALGO_DBPG && c->job.on_worker_failure == LOOM_WORKER_FAILURE_CONTINUE)
        return app_usage(err, errlen,
                         "--algo dbpg cannot go on without a worker yet: leave out "
                         "--on-worker-failure continue");

    static const char *const sgd_only[] = {"--updater", "--minibatch", "--consistency"};
    static const char *const dbpg_only[] = {"--blocks", "--delay"};
    for (size_t k = 0; k < sizeof sgd_only / sizeof sgd_only[0]; k++)
        if (c->train.algo == LR_ALGO_DBPG && app_flag_get(flags, NFLAGS, v, sgd_only[k]))
            return app_usage(err, errlen, "%s is for --algo sgd; dbpg uses --blocks and --delay",
                             sgd_only[k]);
    for (size_t k = 0; k < sizeof dbpg_only / sizeof dbpg_only[0]; k++)
        if (c->train.algo == LR_ALGO_SGD && app_flag_get(flags, NFLAGS, v, dbpg_only[k]))
            return app_usage(err, errlen, "%s is for --algo dbpg", dbpg_only[k]);
    if (c->train.algo == LR_ALGO_SGD && c->train.l1 > 0 && c->train.updater != LR_UPD_FTRL)
        return app_usage(err, errlen, "--l1 needs --updater ftrl or --algo dbpg");
    /* DBPG's step is one block's gradient over the whole data in one clock,
     * every worker's rows at once with their margins kept by the worker that
     * holds them; a part is trained on whole by one worker at a time
     * (docs/LR.md, "Data parts on demand"). */
    if (c->data_parts && c->train.algo == LR_ALGO_DBPG)
        return app_usage(err, errlen,
                         "--data-parts does not work with --algo dbpg: each of its clocks "
                         "takes one block's gradient over every row of the data at once, "
                         "while a part is trained on whole by one worker at a time; use "
                         "--algo sgd, or dbpg with fixed shares");
    if ((rc = app_parts_job_check(&c->job, c->data_parts, err, errlen))) return rc;
#undef GIVEN
    return 0;
}
