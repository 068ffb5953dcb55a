/* flags: the command line of `loom train fm`. The table is both what the
 * parser accepts and what the help prints (apps/common); the checks across
 * flags are below. Every rejection names the flag (exit 2). */
#include <stdio.h>
#include <string.h>

#include "fm/fm.h"

static const app_flag flags[] = {
    {.section = "data:",
     .name = "--train",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "LIBSVM training data, labels +1/-1 (required); each worker reads its share"},
    {.name = "--test",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "LIBSVM test data, evaluated after every epoch"},
    {.name = "--format",
     .kind = APP_CHOICE,
     .arg = "libsvm",
     .def = "libsvm",
     .help = "the only format fm reads (accepted for symmetry)"},
    APP_FLAGS_PARTS,
    APP_FLAGS_IDS,
    APP_FLAG_SKIP_BAD,
    APP_FLAGS_JOB,
    APP_FLAGS_CHECKPOINT,
    APP_FLAGS_FILTER,
    {.section = "model (docs/FM.md):",
     .name = "--dim",
     .kind = APP_INT,
     .arg = "K",
     .lo = 1,
     .hi = FM_MAX_FACTORS,
     .def = "16",
     .help = "factors per feature (the length of V_i)"},
    {.name = "--threshold",
     .kind = APP_INT,
     .arg = "N",
     .lo = 0,
     .hi = UINT32_MAX,
     .def = "50",
     .help = "memory-adaptive constraint: a feature gets V_i once it was in more\n"
             "than N rows (a Count-Min sketch on the servers counts); 0: every feature"},
    {.name = "--init",
     .kind = APP_NUM,
     .arg = "A",
     .min = 1e-12,
     .max = 1,
     .def = "0.01",
     .help = "a new V_i is uniform in [-A, A) (seeded per feature)"},
    {.name = "--sketch-width",
     .kind = APP_INT,
     .arg = "W",
     .lo = 1,
     .hi = (uint64_t)1 << 34,
     .def = "1048576",
     .help = "counters per row of the sketch"},
    {.name = "--sketch-depth",
     .kind = APP_INT,
     .arg = "D",
     .lo = 1,
     .hi = 32,
     .def = "4",
     .help = "rows (hashes) of the sketch"},
    {.section = "algorithm:",
     .name = "--epochs",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = 100000,
     .def = "10",
     .help = "passes over the data"},
    APP_FLAG_SEED("order of the rows, the initial V"),
    {.name = "--minibatch",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = 100000000,
     .def = "100",
     .help = "rows per minibatch per worker"},
    {.name = "--consistency",
     .kind = APP_TEXT,
     .arg = "bsp|ssp:S|asp",
     .def = "ssp:2",
     .help = "staleness bound in minibatches"},
    {.name = "--lr",
     .kind = APP_NUM,
     .arg = "X",
     .min = 1e-12,
     .max = 1e6,
     .def = "0.1",
     .help = "FTRL's alpha, of w and the bias"},
    {.name = "--beta",
     .kind = APP_NUM,
     .arg = "X",
     .min = 0,
     .max = 1e6,
     .def = "1",
     .help = "FTRL's beta"},
    {.name = "--l1",
     .kind = APP_NUM,
     .arg = "X",
     .min = 0,
     .max = 1e9,
     .def = "0",
     .help = "FTRL's L1 of w: a w_i at 0 also switches V_i off"},
    {.name = "--l2",
     .kind = APP_NUM,
     .arg = "X",
     .min = 0,
     .max = 1e9,
     .def = "0",
     .help = "FTRL's L2 of w, applied when the feature is in a minibatch"},
    {.name = "--lr-v",
     .kind = APP_NUM,
     .arg = "X",
     .min = 1e-12,
     .max = 1e6,
     .def = "0.03",
     .help = "AdaGrad's learning rate of V"},
    {.name = "--l2-v",
     .kind = APP_NUM,
     .arg = "X",
     .min = 0,
     .max = 1e9,
     .def = "0.001",
     .help = "L2 of V_i, applied when the feature is in a minibatch\n"
             "(frequency-adaptive, thesis 10.3.3)"},
    APP_FLAGS_OUTPUT("JSON line per epoch", "save the model (format: docs/FM.md)"),
};
#define NFLAGS (sizeof flags / sizeof flags[0])

void fm_train_help(FILE *out)
{
    fputs("usage: loom train fm --train FILE [options]\n"
          "\n"
          "Train a factorization machine (DiFacto) for binary labels: w by FTRL and the\n"
          "factors V by AdaGrad on the servers, V_i only for features seen in more than\n"
          "--threshold rows and while w_i != 0 (docs/FM.md).\n"
          "\n",
          out);
    app_flags_help(out, flags, NFLAGS);
}

int fm_parse_flags(int argc, char **argv, void *cli, char *err, size_t errlen)
{
    fm_cli *c = cli;
    static const fm_train_opts defaults = FM_TRAIN_OPTS_DEFAULT;
    static const loom_libsvm_opts data_defaults = LOOM_LIBSVM_OPTS_DEFAULT;
    *c = (fm_cli){.train = defaults, .data = data_defaults};
    app_flag_value v[NFLAGS];
    int rc =
        app_train_flags(&c->job, defaults.staleness, flags, NFLAGS, argc, argv, v, err, errlen);
    if (rc) return rc;
    fm_train_opts *o = &c->train;
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(flags, NFLAGS, v, name))
    if (GIVEN("--zero-based")) c->data.ids = LOOM_IDS_ZERO_BASED;
    if (GIVEN("--one-based")) c->data.ids = LOOM_IDS_ONE_BASED;
    if (GIVEN("--skip-bad")) c->data.skip_bad = 1;
    if (GIVEN("--dim")) o->k = (uint32_t)x->u;
    if (GIVEN("--threshold")) o->threshold = x->u;
    if (GIVEN("--init")) o->init = x->x;
    if (GIVEN("--sketch-width")) o->sketch_width = x->u;
    if (GIVEN("--sketch-depth")) o->sketch_depth = (uint32_t)x->u;
    if (GIVEN("--epochs")) o->epochs = (int)x->u;
    if (GIVEN("--minibatch")) o->minibatch = (uint32_t)x->u;
    if (GIVEN("--lr")) o->lr_w = x->x;
    if (GIVEN("--beta")) o->beta = x->x;
    if (GIVEN("--l1")) o->l1 = x->x;
    if (GIVEN("--l2")) o->l2 = x->x;
    if (GIVEN("--lr-v")) o->lr_v = x->x;
    if (GIVEN("--l2-v")) o->l2_v = x->x;
    int sketch_given = GIVEN("--sketch-width") || GIVEN("--sketch-depth");
#undef GIVEN
    if ((rc = app_parts_flags(flags, NFLAGS, v, &c->data_parts, &c->part_timeout, err, errlen)))
        return rc;
    o->consistency = c->job.consistency;
    o->staleness = c->job.staleness;
    o->seed = c->job.seed;
    if (!c->job.train_path) return app_usage(err, errlen, "--train FILE is required");
    if (c->job.servers == 0)
        return app_usage(err, errlen,
                         "--servers 0: loom train fm keeps its model on the servers; give "
                         "--servers 1 or more");
    if ((rc = app_parts_job_check(&c->job, c->data_parts, err, errlen))) return rc;
    if (o->threshold == 0 && sketch_given)
        return app_usage(err, errlen,
                         "--sketch-width and --sketch-depth size the sketch of --threshold; "
                         "with --threshold 0 there is none");
    if ((uint64_t)o->sketch_depth * o->sketch_width > (uint64_t)1 << 34)
        return app_usage(err, errlen,
                         "--sketch-depth x --sketch-width is %llu counters, more than 2^34",
                         (unsigned long long)o->sketch_depth * o->sketch_width);
    return 0;
}
