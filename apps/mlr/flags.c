/* flags: the command line of `loom train mlr`.
 *
 * Parsed by the launching command (to refuse bad flags before any process
 * starts) and by every node. The table is both what the parser accepts and
 * what the help prints; the checks across flags are here. */
#include <stdio.h>
#include <string.h>

#include <loom/loom.h>

#include "mlr/mlr.h"

static const app_flag flags[] = {
    {.section = "data:",
     .name = "--train",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "LIBSVM training data, labels class ids 0..K-1 (required)"},
    {.name = "--test",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "LIBSVM test data, after every epoch"},
    {.name = "--format",
     .kind = APP_CHOICE,
     .arg = "libsvm",
     .def = "libsvm",
     .help = "the only format mlr reads (accepted for symmetry)"},
    APP_FLAGS_IDS,
    APP_FLAG_SKIP_BAD,
    APP_FLAGS_JOB,
    {.section = "algorithm:",
     .name = "--mode",
     .kind = APP_CHOICE,
     .arg = "ps|svb|reduce",
     .def = "ps",
     .help = "the model on the parameter server, or a replica on every worker\n"
             "kept in step by sufficient-vector broadcasting, or by stochastic\n"
             "reduce over a graph (docs/MLR.md)"},
    {.name = "--epochs",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = 100000,
     .def = "10",
     .help = "passes over the data"},
    APP_FLAG_SEED("order of the rows, SV selection, multicast peers"),
    {.name = "--updater",
     .kind = APP_CHOICE,
     .arg = "adagrad|sgd",
     .def = "adagrad",
     .help = "how a gradient moves the model: AdaGrad (ps: on the servers;\n"
             "svb and reduce: on every replica) or plain SGD"},
    {.name = "--lr",
     .kind = APP_NUM,
     .arg = "X",
     .min = 1e-12,
     .max = 1e6,
     .help = "learning rate (default: " MLR_LR_ADAGRAD_TEXT " with adagrad, " MLR_LR_SGD_TEXT
             " with sgd)"},
    {.name = "--l2",
     .kind = APP_NUM,
     .arg = "X",
     .min = 0,
     .max = 1e6,
     .help = "L2 regularisation: the objective is the mean log loss + X/2 |W|^2,\n"
             "the bias excluded (default: 1 / rows, liblinear's C = 1; ps and\n"
             "reduce)"},
    {.name = "--minibatch",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = 1000000,
     .def = "100",
     .help = "rows per minibatch per worker; one minibatch a clock"},
    {.name = "--consistency",
     .kind = APP_TEXT,
     .arg = "bsp|ssp:S",
     .def = "bsp",
     .help = "staleness bound in clocks (ps also takes asp)"},
    {.section = "svb only:",
     .name = "--select",
     .kind = APP_INT,
     .arg = "C",
     .lo = 1,
     .hi = 1000000,
     .help = "SV selection: send (and apply) C of a minibatch's SVs (default: all)"},
    {.name = "--peers",
     .kind = APP_INT,
     .arg = "Q",
     .lo = 1,
     .hi = 1000000,
     .help = "random multicast: SVs to Q peers a clock (default: every worker)"},
    {.name = "--average-every",
     .kind = APP_INT,
     .arg = "R",
     .lo = 1,
     .hi = 1000000000,
     .help = "replace every replica by their exact average every R clocks"},
    {.name = "--rotate-every",
     .kind = APP_INT,
     .arg = "S",
     .lo = 1,
     .hi = 1000000000,
     .help = "move every replica to the next worker every S clocks"},
    {.name = "--svlog",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "incremental SV checkpoint of worker 0's replica (each worker\n"
             "writes FILE.RANK)"},
    {.name = "--rollback",
     .kind = APP_INT,
     .arg = "CLOCK",
     .lo = 0,
     .hi = 1000000000,
     .help = "after training, restore the replica of CLOCK from --svlog and\n"
             "save that model (--model-out)"},
    {.section = "reduce only:",
     .name = "--graph",
     .kind = APP_TEXT,
     .arg = "SPEC",
     .def = "allreduce",
     .help = "the communication graph of stochastic reduce: allreduce, ring,\n"
             "expander, halton, star or an edge-list FILE (docs/P2P.md)"},
    {.name = "--sync",
     .kind = APP_CHOICE,
     .arg = "bsp|async|notify-ack",
     .def = "bsp",
     .help = "synchronisation of stochastic reduce"},
    APP_FLAGS_OUTPUT("JSON line per epoch", "save the model (format: docs/MLR.md)"),
};
#define NFLAGS (sizeof flags / sizeof flags[0])

void mlr_train_help(FILE *out)
{
    fputs("usage: loom train mlr --train FILE [options]\n"
          "\n"
          "Train a multiclass (softmax) logistic-regression model: on the parameter server\n"
          "(--mode ps), by sufficient-vector broadcasting between the workers (--mode svb),\n"
          "or by stochastic reduce over a communication graph (--mode reduce).\n"
          "\n",
          out);
    app_flags_help(out, flags, NFLAGS);
}

int mlr_parse_flags(int argc, char **argv, void *cli, char *err, size_t errlen)
{
    mlr_cli *c = cli;
    static const mlr_train_opts defaults = MLR_TRAIN_OPTS_DEFAULT;
    static const loom_libsvm_opts data_defaults = LOOM_LIBSVM_OPTS_DEFAULT;
    *c = (mlr_cli){.train = defaults, .data = data_defaults};
    c->data.labels = LOOM_LABELS_REAL; /* class ids, checked by mlr_check_labels */
    app_flag_value v[NFLAGS];
    int rc = app_train_flags(&c->job, 0, flags, NFLAGS, argc, argv, v, err, errlen);
    if (rc) return rc;
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(flags, NFLAGS, v, name))
    if (!GIVEN("--consistency")) c->job.consistency = LOOM_BSP;
    if (GIVEN("--zero-based")) c->data.ids = LOOM_IDS_ZERO_BASED;
    if (GIVEN("--one-based")) c->data.ids = LOOM_IDS_ONE_BASED;
    if (GIVEN("--skip-bad")) c->data.skip_bad = 1;
    static const mlr_mode modes[] = {MLR_MODE_PS, MLR_MODE_SVB, MLR_MODE_REDUCE};
    if (GIVEN("--mode")) c->train.mode = modes[x->choice];
    if (GIVEN("--graph")) c->train.graph = x->text;
    if (GIVEN("--sync")) c->train.sync = (int)x->choice; /* in loom_sync's order */
    if (GIVEN("--epochs")) c->train.epochs = (int)x->u;
    if (GIVEN("--updater")) c->train.updater = x->choice == 0 ? MLR_ADAGRAD : MLR_SGD;
    if (c->train.mode == MLR_MODE_SVB && GIVEN("--l2") && x->x != 0)
        return app_usage(err, errlen, "--l2 is for --mode ps and reduce (svb has none)");
    c->train.lr = c->train.updater == MLR_ADAGRAD ? MLR_LR_ADAGRAD : MLR_LR_SGD;
    if (GIVEN("--lr")) c->train.lr = x->x;
    if (GIVEN("--l2")) c->train.l2 = x->x;
    if (GIVEN("--minibatch")) c->train.minibatch = (uint32_t)x->u;
    if (GIVEN("--select")) c->train.select = (uint32_t)x->u;
    if (GIVEN("--peers")) c->train.peers = (uint32_t)x->u;
    if (GIVEN("--average-every")) c->train.average = (uint32_t)x->u;
    if (GIVEN("--rotate-every")) c->train.rotate = (uint32_t)x->u;
    if (GIVEN("--svlog")) c->train.svlog = x->text;
    if (GIVEN("--rollback")) c->train.rollback = (int64_t)x->u;
    c->train.consistency = c->job.consistency;
    c->train.staleness = c->job.staleness;
    c->train.seed = c->job.seed;
    if (!c->job.train_path) return app_usage(err, errlen, "--train FILE is required");
    if (c->job.servers_given && c->job.servers == 0)
        return app_usage(
            err, errlen,
            "--servers 0: loom train mlr agrees on sizes and adds up its statistics on "
            "a server (no model goes there in --mode svb or reduce); give --servers 1");
    if (c->job.threads > 1)
        return app_usage(err, errlen, "mlr has one compute thread: no --threads");
    static const char *const svb_only[] = {"--select",       "--peers", "--average-every",
                                           "--rotate-every", "--svlog", "--rollback"};
    for (size_t k = 0; k < sizeof svb_only / sizeof svb_only[0]; k++)
        if (c->train.mode != MLR_MODE_SVB && GIVEN(svb_only[k]))
            return app_usage(err, errlen, "%s is for --mode svb", svb_only[k]);
    static const char *const reduce_only[] = {"--graph", "--sync"};
    for (size_t k = 0; k < 2; k++)
        if (c->train.mode != MLR_MODE_REDUCE && GIVEN(reduce_only[k]))
            return app_usage(err, errlen, "%s is for --mode reduce", reduce_only[k]);
    if (c->train.mode == MLR_MODE_REDUCE && GIVEN("--consistency"))
        return app_usage(err, errlen, "--mode reduce synchronises with --sync, not --consistency");
    if (c->train.mode == MLR_MODE_SVB && c->train.consistency == LOOM_ASP)
        return app_usage(err, errlen, "--mode svb takes --consistency bsp or ssp:S");
    if (c->train.rollback >= 0 && (!c->train.svlog || !c->job.model_path))
        return app_usage(err, errlen, "--rollback needs --svlog FILE and --model-out FILE");
#undef GIVEN
    return 0;
}
