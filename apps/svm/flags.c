/* flags: the command line of `loom train svm`. The table is both what the parser accepts and
 * what the help prints (apps/common); every rejection names the flag. */
#include <stdio.h>
#include <string.h>

#include "svm/svm.h"

static const app_flag flags[] = {
    {.section = "data:",
     .name = "--train",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "LIBSVM training data, labels +1/-1 (required); each worker reads its share"},
    {.name = "--test",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "LIBSVM test data: worker 0's replica is evaluated after every epoch"},
    {.name = "--format",
     .kind = APP_CHOICE,
     .arg = "libsvm",
     .def = "libsvm",
     .help = "the only format svm reads (accepted for symmetry)"},
    APP_FLAGS_JOB,
    {.section = "stochastic reduce (docs/P2P.md):",
     .name = "--graph",
     .kind = APP_TEXT,
     .arg = "allreduce|ring|expander|halton|star|FILE",
     .def = "expander",
     .help = "who averages with whom; FILE: lines \"FROM TO\" of worker ranks"},
    {.name = "--sync",
     .kind = APP_CHOICE,
     .arg = "bsp|async|notify-ack",
     .def = "notify-ack",
     .help = "global barrier, none, or per-edge acknowledgements"},
    {.name = "--window",
     .kind = APP_INT,
     .arg = "W",
     .lo = 1,
     .hi = LOOM_REDUCE_WINDOW_MAX,
     .def = "2",
     .help = "notify-ack: rounds a worker may send ahead of a receiver's acknowledgement"},
    {.name = "--batch",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = 100000000,
     .def = "64",
     .help = "rows a worker trains on between two reduces"},
    {.section = "algorithm:",
     .name = "--epochs",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = 100000,
     .def = "10",
     .help = "passes over the data"},
    {.name = "--lr",
     .kind = APP_NUM,
     .arg = "X",
     .min = 1e-12,
     .max = 1e6,
     .def = "0.01",
     .help = "eta_0 of the step eta_t = eta_0 / (1 + eta_0 l2 t)"},
    {.name = "--l2",
     .kind = APP_NUM,
     .arg = "X",
     .min = 0,
     .max = 1e3,
     .def = "0.0001",
     .help = "L2 regularisation lambda"},
    APP_FLAG_SEED("order of the rows"),
    {.name = "--slow",
     .kind = APP_INT,
     .arg = "RANK",
     .lo = 0,
     .hi = 127,
     .help = "for benchmarks: worker RANK's steps take twice their time in every round\n"
             "(a slower machine; docs/SVM.md)"},
    {.name = "--straggle",
     .kind = APP_NUM,
     .arg = "P",
     .min = 0,
     .max = 1,
     .def = "0",
     .help = "for benchmarks: each worker's steps take twice their time in a round with\n"
             "probability P, drawn from the seed (intermittent stragglers)"},
    APP_FLAGS_OUTPUT("JSON line per epoch", "save worker 0's replica (format: docs/SVM.md)"),
};
#define NFLAGS (sizeof flags / sizeof flags[0])

void svm_train_help(FILE *out)
{
    fputs("usage: loom train svm --train FILE [options]\n"
          "\n"
          "Train a linear SVM (hinge loss, L2) by SGD on every worker, averaging replicas by\n"
          "stochastic reduce over a communication graph; needs no server (--servers 0).\n"
          "\n",
          out);
    app_flags_help(out, flags, NFLAGS);
}

int svm_parse_flags(int argc, char **argv, void *cli, char *err, size_t errlen)
{
    svm_cli *c = cli;
    static const svm_opts defaults = SVM_OPTS_DEFAULT;
    static const loom_libsvm_opts data_defaults = LOOM_LIBSVM_OPTS_DEFAULT;
    *c = (svm_cli){.train = defaults, .data = data_defaults};
    app_flag_value v[NFLAGS];
    int rc = app_train_flags(&c->job, 0, flags, NFLAGS, argc, argv, v, err, errlen);
    if (rc) return rc;
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(flags, NFLAGS, v, name))
    if (GIVEN("--graph")) c->train.graph = x->text;
    if (GIVEN("--sync")) c->train.sync = (loom_sync)x->choice; /* in loom_sync's order */
    if (GIVEN("--batch")) c->train.batch = (uint32_t)x->u;
    if (GIVEN("--epochs")) c->train.epochs = (int)x->u;
    if (GIVEN("--lr")) c->train.lr = x->x;
    if (GIVEN("--l2")) c->train.l2 = x->x;
    if (GIVEN("--window")) c->train.window = (int)x->u;
    if (GIVEN("--slow")) c->train.slow = (int)x->u;
    if (GIVEN("--straggle")) c->train.straggle = x->x;
#undef GIVEN
    c->train.seed = c->job.seed;
    if (!c->job.train_path) return app_usage(err, errlen, "--train FILE is required");
    if (c->job.threads != 1) return app_usage(err, errlen, "svm trains with --threads 1 only");
    /* A wrong graph (a file's error, a disconnected one) is refused before any process
     * starts when the number of workers is known here; the workers check it again. */
    loom_graph *g;
    loom_clear_last_error();
    if (c->job.workers_given && loom_graph_build(c->train.graph, c->job.workers, &g))
        return app_usage(err, errlen, "--graph %s: %s", c->train.graph, loom_last_error());
    if (c->job.workers_given) loom_graph_free(g);
    if (c->train.slow >= c->job.workers)
        return app_usage(err, errlen, "--slow %d: there are only %d workers", c->train.slow,
                         c->job.workers);
    return 0;
}
