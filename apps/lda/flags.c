/* flags: the command line of `loom train lda`.
 *
 * Parsed twice, like lr's: by the launching command, to refuse bad flags
 * before any process starts, and by every node of the job. The table below
 * is both what the parser accepts and what the help prints (apps/common
 * parses); every rejection names the flag and says what it expects. */
#include <stdio.h>
#include <string.h>

#include <loom/loom.h>

#include "lda/lda.h"

static const app_flag flags[] = {
    {.section = "data:",
     .name = "--train",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "bag-of-words corpus (required); each worker reads its share of documents"},
    {.name = "--format",
     .kind = APP_CHOICE,
     .arg = "ldac|uci",
     .def = "detect",
     .help = "LDA-C (\"N id:count ...\") or UCI docword"},
    {.name = "--vocab",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "one word per line (line i names word id i): top words by name"},
    APP_FLAG_SKIP_BAD,
    {.name = "--test",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "held-out documents (same format): perplexity at each evaluation,\n"
             "by document completion (docs/LDA.md)"},
    APP_FLAGS_JOB,
    APP_FLAGS_CHECKPOINT,
    APP_FLAGS_FILTER,
    {.name = "--consistency",
     .kind = APP_TEXT,
     .arg = "bsp|ssp:S|asp",
     .def = "ssp:1",
     .help = "staleness bound in clocks"},
    APP_FLAG_SEED("initial topics and sampling"),
    {.section = "model:",
     .name = "--topics",
     .kind = APP_INT,
     .arg = "K",
     .lo = 1,
     .hi = LDA_MAX_TOPICS,
     .def = "50",
     .help = "number of topics"},
    {.name = "--alpha",
     .kind = APP_NUM,
     .arg = "A",
     .min = 1e-9,
     .max = 1e6,
     .def = "0.1",
     .help = "document-topic prior"},
    {.name = "--beta",
     .kind = APP_NUM,
     .arg = "B",
     .min = 1e-9,
     .max = 1e6,
     .def = "0.01",
     .help = "topic-word prior"},
    {.name = "--iterations",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = 1000000,
     .def = "100",
     .help = "sweeps over the corpus"},
    {.name = "--syncs",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = 10000,
     .def = "1",
     .help = "clocks per iteration: each pushes the changed counts and\n"
             "pulls fresh ones"},
    {.name = "--steps",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = 10000,
     .def = "1",
     .help = "sweep, push and refresh the counts N times a clock, so\n"
             "that --priority has changes to send while the clock runs\n"
             "(docs/LDA.md)"},
    {.name = "--sampler",
     .kind = APP_CHOICE,
     .arg = "sparse|mh|auto",
     .def = "auto",
     .help = "sparse: SparseLDA, exact Gibbs, a token costs its\n"
             "document's and word's non-zero topics; mh: Metropolis-\n"
             "Hastings (LightLDA, WarpLDA), O(1) a token, also exact,\n"
             "more iterations (docs/LDA.md); auto: mh above 10,000\n"
             "topics, else sparse"},
    {.name = "--eval-every",
     .kind = APP_INT,
     .arg = "N",
     .lo = 0,
     .hi = 1000000,
     .def = "1",
     .help = "log-likelihood every N iterations; 0: at the end"},
    APP_FLAG_ROTATION_SCHEDULE("data: every worker samples its documents from counts a\n"
                               "clock old (AD-LDA); rotation: blocks of words rotate among\n"
                               "the workers, each token sampled with its word's exact counts\n"
                               "(docs/SCHED.md)"),
    APP_FLAG_ROTATION_LOG,
    {.name = "--top-words",
     .kind = APP_INT,
     .arg = "N",
     .lo = 0,
     .hi = 100000,
     .def = "10",
     .help = "words shown per topic at the end (0: none)"},
    APP_FLAGS_COMM,
    APP_FLAGS_OUTPUT("JSON line per evaluation",
                     "save the word-topic counts (format: docs/LDA.md)"),
};
#define NFLAGS (sizeof flags / sizeof flags[0])

void lda_train_help(FILE *out)
{
    fputs("usage: loom train lda --train FILE [options]\n"
          "\n"
          "Train an LDA topic model by collapsed Gibbs sampling (SparseLDA, or Metropolis-\n"
          "Hastings for many topics) on this machine (a scheduler, S servers and W workers\n"
          "under the local launcher), or on a cluster when started by mpirun/srun.\n"
          "See docs/LDA.md.\n"
          "\n",
          out);
    app_flags_help(out, flags, NFLAGS);
}

int lda_parse_flags(int argc, char **argv, void *cli, char *err, size_t errlen)
{
    lda_cli *c = cli;
    static const lda_train_opts defaults = LDA_TRAIN_OPTS_DEFAULT;
    static const loom_bow_opts data_defaults = LOOM_BOW_OPTS_DEFAULT;
    *c = (lda_cli){.train = defaults, .data = data_defaults, .top_words = 10};
    app_flag_value v[NFLAGS];
    int rc =
        app_train_flags(&c->job, LDA_DEFAULT_STALENESS, flags, NFLAGS, argc, argv, v, err, errlen);
    if (rc) return rc;
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(flags, NFLAGS, v, name))
    if (GIVEN("--format")) c->data.format = x->choice ? LOOM_BOW_UCI : LOOM_BOW_LDAC;
    if (GIVEN("--vocab")) c->vocab_path = x->text;
    if (GIVEN("--skip-bad")) c->data.skip_bad = 1;
    if (GIVEN("--topics")) c->train.topics = (uint32_t)x->u;
    if (GIVEN("--alpha")) c->train.alpha = x->x;
    if (GIVEN("--beta")) c->train.beta = x->x;
    if (GIVEN("--iterations")) c->train.iterations = (int)x->u;
    if (GIVEN("--syncs")) c->train.syncs = (int)x->u;
    if (GIVEN("--steps")) c->train.steps = (int)x->u;
    if (GIVEN("--eval-every")) c->train.eval_every = (int)x->u;
    if (GIVEN("--sampler")) c->train.sampler = (lda_sampler_kind)x->choice;
    c->train.sampler = lda_sampler_choose(c->train.sampler, c->train.topics);
    if (GIVEN("--top-words")) c->top_words = (int)x->u;
    if (GIVEN("--schedule"))
        c->train.schedule = x->choice ? LDA_SCHEDULE_ROTATION : LDA_SCHEDULE_DATA;
    if (GIVEN("--schedule-log")) c->train.schedule_log = x->text;
    if (c->train.schedule == LDA_SCHEDULE_ROTATION) {
        /* The rotation hands rows over itself: no clocks, no staleness, one writer. */
        static const char *const data_only[] = {"--consistency", "--syncs", "--steps",
                                                "--priority"};
        for (size_t k = 0; k < sizeof data_only / sizeof *data_only; k++)
            if (app_flag_get(flags, NFLAGS, v, data_only[k]))
                return app_usage(err, errlen, "%s is for --schedule data, not rotation",
                                 data_only[k]);
        if (c->job.threads > 1)
            return app_usage(err, errlen,
                             "--schedule rotation runs one thread per worker, not --threads %d",
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
    } else if (c->train.schedule_log) {
        return app_usage(err, errlen, "--schedule-log needs --schedule rotation");
    }
#undef GIVEN
    c->train.seed = c->job.seed;
    c->train.threads = c->job.threads;
    if (!c->job.train_path) return app_usage(err, errlen, "--train FILE is required");
    if (c->job.servers == 0)
        return app_usage(err, errlen,
                         "--servers 0: loom train lda keeps its model on the servers; "
                         "give --servers 1 or more");
    return 0;
}
