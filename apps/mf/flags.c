/* flags: the command line of `loom train mf`.
 *
 * Parsed twice, like lr's: by the launching command, to refuse bad or
 * contradictory flags before any process starts, and by every node of the
 * job. The table below is both what the parser accepts and what the help
 * prints (apps/common parses); every rejection names the flag and says what
 * it expects. */
#include <stdio.h>
#include <string.h>

#include "mf/mf.h"

static const app_flag flags[] = {
    {.section = "data:",
     .name = "--train",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "ratings \"user item rating [timestamp]\" (required; MovieLens u.data\n"
             "and ratings.csv work); each worker reads its share"},
    {.name = "--test",
     .kind = APP_TEXT,
     .arg = "FILE",
     .excludes = "--test-fraction",
     .help = "held-out ratings, evaluated with the model (--eval-every)"},
    {.name = "--test-fraction",
     .kind = APP_NUM,
     .arg = "P",
     .min = 0,
     .max = 1,
     .help = "hold out a seeded fraction P of --train instead (0 < P < 1)"},
    {.name = "--format",
     .kind = APP_CHOICE,
     .arg = "tsv|csv|space",
     .def = "detect",
     .help = "field separator"},
    APP_FLAG_SKIP_BAD,
    APP_FLAGS_JOB,
    APP_FLAGS_CHECKPOINT,
    APP_FLAGS_FILTER,
    {.name = "--consistency",
     .kind = APP_TEXT,
     .arg = "bsp|ssp:S|asp",
     .def = "ssp:2",
     .help = "staleness bound in clocks"},
    {.section = "algorithm:",
     .name = "--rank",
     .kind = APP_INT,
     .arg = "K",
     .lo = 1,
     .hi = MF_MAX_RANK,
     .def = "16",
     .help = "factors per user and item"},
    {.name = "--epochs",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = 100000,
     .def = "40",
     .help = "passes over the data"},
    {.name = "--lr",
     .kind = APP_NUM,
     .arg = "X",
     .min = 1e-12,
     .max = 10,
     .def = "0.03",
     .help = "learning rate of the first epoch"},
    {.name = "--lr-decay",
     .kind = APP_NUM,
     .arg = "D",
     .min = 1e-6,
     .max = 1,
     .def = "0.95",
     .help = "learning rate of epoch e is lr * D^e"},
    {.name = "--reg",
     .kind = APP_NUM,
     .arg = "X",
     .min = 0,
     .max = 1e6,
     .def = "0.1",
     .help = "L2 regularisation of biases and factors"},
    {.name = "--init-std",
     .kind = APP_NUM,
     .arg = "X",
     .min = 0,
     .max = 10,
     .def = "0.1",
     .help = "standard deviation of the initial factors"},
    {.name = "--syncs",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = 1000000,
     .def = "1",
     .help = "clocks per epoch: a worker pulls, trains on 1/N of its\n"
             "ratings and pushes, N times an epoch (rotation: N full\n"
             "rotations of the item blocks, each over 1/N of the ratings)"},
    {.name = "--steps",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = 1000000,
     .def = "1",
     .help = "pull, train and push N times a clock, so that --priority has\n"
             "updates to send while the clock runs (docs/MF.md)"},
    {.name = "--eval-every",
     .kind = APP_INT,
     .arg = "N",
     .lo = 0,
     .hi = 100000,
     .def = "1",
     .help = "train and test RMSE after every N-th epoch and the last;\n"
             "0: after the last only"},
    {.name = "--merge",
     .kind = APP_CHOICE,
     .arg = "damped|sum",
     .def = "damped",
     .help = "how the workers' updates of a row combine on the servers:\n"
             "scaled so their sum moves a bias as far as one\n"
             "sequential pass would (damped), or added as they are"},
    {.name = "--schedule",
     .kind = APP_CHOICE,
     .arg = "auto|data|rotation",
     .def = "auto",
     .help = "rotation: model-parallel, each worker owns a block of users\n"
             "and blocks of items rotate among the workers, one writer per\n"
             "row, as sequential SGD (docs/SCHED.md); data: every worker\n"
             "trains its share of the ratings on all rows (clocks, merge);\n"
             "auto: rotation with more than one worker, unless a flag only\n"
             "data takes is given"},
    APP_FLAG_ROTATION_LOG,
    APP_FLAG_SEED("split, initial factors and order"),
    APP_FLAGS_COMM,
    APP_FLAGS_OUTPUT("JSON line per evaluation", "save the model (format: docs/MF.md)"),
};
#define NFLAGS (sizeof flags / sizeof flags[0])

void mf_train_help(FILE *out)
{
    fputs("usage: loom train mf --train FILE [options]\n"
          "\n"
          "Train a matrix-factorisation model with biases (rating = mean + b_u + b_i + p_u.q_i)\n"
          "by SGD, with the factor tables on the servers (docs/MF.md).\n"
          "\n",
          out);
    app_flags_help(out, flags, NFLAGS);
}

int mf_parse_flags(int argc, char **argv, void *cli, char *err, size_t errlen)
{
    mf_cli *c = cli;
    static const mf_train_opts defaults = MF_TRAIN_OPTS_DEFAULT;
    static const loom_ratings_opts data_defaults = LOOM_RATINGS_OPTS_DEFAULT;
    *c = (mf_cli){.train = defaults, .data = data_defaults};
    app_flag_value v[NFLAGS];
    int rc = app_train_flags(&c->job, 2, flags, NFLAGS, argc, argv, v, err, errlen);
    if (rc) return rc;
    mf_train_opts *o = &c->train;
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(flags, NFLAGS, v, name))
    static const char separators[] = {'\t', ',', ' '}; /* in the order of the choices */
    if (GIVEN("--format")) c->data.separator = separators[x->choice];
    if (GIVEN("--skip-bad")) c->data.skip_bad = 1;
    if (GIVEN("--merge")) o->merge = x->choice ? MF_MERGE_SUM : MF_MERGE_DAMPED;
    if (GIVEN("--rank")) o->rank = (uint32_t)x->u;
    if (GIVEN("--epochs")) o->epochs = (int)x->u;
    if (GIVEN("--syncs")) o->syncs = (int)x->u;
    if (GIVEN("--steps")) o->steps = (int)x->u;
    if (GIVEN("--eval-every")) o->eval_every = (int)x->u;
    if (GIVEN("--lr")) o->lr = x->x;
    if (GIVEN("--lr-decay")) o->lr_decay = x->x;
    if (GIVEN("--reg")) o->reg = x->x;
    if (GIVEN("--init-std")) o->init_std = x->x;
    if (GIVEN("--test-fraction")) {
        if (!(x->x > 0 && x->x < 1))
            return app_usage(err, errlen,
                             "--test-fraction takes a number above 0 and below 1, not '%s'",
                             x->text);
        o->test_fraction = x->x;
    }
    static const mf_schedule schedules[] = {MF_SCHEDULE_AUTO, MF_SCHEDULE_DATA,
                                            MF_SCHEDULE_ROTATION}; /* the choices' order */
    if (GIVEN("--schedule")) o->schedule = schedules[x->choice];
    if (GIVEN("--schedule-log")) o->schedule_log = x->text;
    /* The rotation hands rows over itself: nothing to merge, no clocks, one writer. */
    static const char *const data_only[] = {"--consistency", "--merge", "--steps", "--priority"};
    if (o->schedule == MF_SCHEDULE_AUTO) {
        /* A flag only data parallelism takes chooses it (train.c says so). */
        for (size_t k = 0; k < sizeof data_only / sizeof *data_only && !o->data_because; k++)
            if (GIVEN(data_only[k])) o->data_because = data_only[k];
        if (!o->data_because && c->job.threads > 1) o->data_because = "--threads";
        if (!o->data_because && c->job.checkpoint_dir) o->data_because = "--checkpoint-dir";
        if (!o->data_because && c->job.resume_dir) o->data_because = "--resume";
        if (!o->data_because && c->job.on_worker_failure == LOOM_WORKER_FAILURE_CONTINUE)
            o->data_because = "--on-worker-failure continue";
        if (o->data_because) o->schedule = MF_SCHEDULE_DATA;
    }
    if (o->schedule == MF_SCHEDULE_ROTATION) {
        for (size_t k = 0; k < sizeof data_only / sizeof *data_only; k++)
            if (GIVEN(data_only[k]))
                return app_usage(err, errlen, "%s is for --schedule data, not rotation",
                                 data_only[k]);
        if (c->job.threads > 1)
            return app_usage(err, errlen,
                             "--schedule rotation runs one thread per worker, "
                             "not --threads %d",
                             c->job.threads);
        if (c->job.checkpoint_dir || c->job.resume_dir)
            return app_usage(err, errlen,
                             "--schedule rotation has no checkpoints yet: leave out %s",
                             c->job.checkpoint_dir ? "--checkpoint-dir" : "--resume");
        /* Blocks travel through the workers: a lost one would take its block along. */
        if (c->job.on_worker_failure == LOOM_WORKER_FAILURE_CONTINUE)
            return app_usage(err, errlen,
                             "--schedule rotation cannot go on without a worker: leave out "
                             "--on-worker-failure continue");
    } else if (o->schedule_log) {
        return app_usage(err, errlen, "--schedule-log needs --schedule rotation");
    }
#undef GIVEN
    o->seed = c->job.seed;
    o->threads = c->job.threads;
    if (!c->job.train_path) return app_usage(err, errlen, "--train FILE is required");
    if (c->job.servers == 0)
        return app_usage(err, errlen,
                         "--servers 0: loom train mf keeps its model on the servers; "
                         "give --servers 1 or more");
    return 0;
}
