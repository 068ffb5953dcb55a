/* flags: the command line of `loom train lda`.
 *
 * Parsed twice, like lr's: by the launching command, to refuse bad flags
 * before any process starts, and by every node of the job. The job flags
 * (--train, --workers, --consistency, ...) are apps/common's; every rejection
 * names the flag and says what it expects. */
#include <stdio.h>
#include <string.h>

#include <loom/loom.h>

#include "lda/lda.h"

const char lda_train_help[] =
    "usage: loom train lda --train FILE [options]\n"
    "\n"
    "Train an LDA topic model by collapsed Gibbs sampling (SparseLDA) on this machine\n"
    "(a scheduler, S servers and W workers under the local launcher), or on a cluster\n"
    "when started by mpirun/srun. See docs/LDA.md.\n"
    "\n"
    "data:\n"
    "  --train FILE            bag-of-words corpus; each worker reads its share of documents\n"
    "  --format ldac|uci       LDA-C (\"N id:count ...\") or UCI docword (default: detect)\n"
    "  --vocab FILE            one word per line (line i names word id i): top words by name\n"
    "  --skip-bad              skip malformed lines (and report how many) instead of stopping\n"
    "job:\n"
    "  --workers W             default 2\n"
    "  --servers S             default 1\n"
    "  --consistency bsp|ssp:S|asp  staleness bound in clocks (default ssp:1)\n"
    "  --seed N                initial topics and sampling (default 1)\n"
    "model:\n"
    "  --topics K              number of topics (default 50)\n"
    "  --alpha A               document-topic prior (default 0.1)\n"
    "  --beta B                topic-word prior (default 0.01)\n"
    "  --iterations N          sweeps over the corpus (default 100)\n"
    "  --syncs N               clocks per iteration: each pushes the changed counts and\n"
    "                          pulls fresh ones (default 1)\n"
    "output:\n"
    "  --eval-every N          log-likelihood every N iterations; 0: at the end (default 1)\n"
    "  --top-words N           words shown per topic at the end (default 10; 0: none)\n"
    "  --metrics FILE          JSON line per evaluation\n"
    "  --model-out FILE        save the word-topic counts (format: docs/LDA.md)\n"
    "  --quiet                 no progress lines\n"
    "  --test FILE             not supported: lda reports the training log-likelihood\n";

int lda_parse_flags(int argc, char **argv, lda_cli *c, char *err, size_t errlen)
{
    static const lda_train_opts defaults = LDA_TRAIN_OPTS_DEFAULT;
    static const loom_bow_opts data_defaults = LOOM_BOW_OPTS_DEFAULT;
    *c = (lda_cli){.train = defaults, .data = data_defaults, .top_words = 10};
    app_job_init(&c->job, LDA_DEFAULT_STALENESS);
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        int rc = app_job_flag(&c->job, argc, argv, &i, err, errlen);
        if (rc != APP_FLAG_NOT_MINE) {
            if (rc) return rc;
            if (!strcmp(f, "--test"))
                return app_usage(err, errlen,
                                 "--test: lda has no held-out evaluation; it reports the "
                                 "training log-likelihood (docs/LDA.md)");
            if (!strcmp(f, "--format")) {
                if (!strcmp(c->job.format, "ldac"))
                    c->data.format = LOOM_BOW_LDAC;
                else if (!strcmp(c->job.format, "uci"))
                    c->data.format = LOOM_BOW_UCI;
                else
                    return app_usage(err, errlen, "--format takes ldac or uci, not '%s'",
                                     c->job.format);
            }
            continue;
        }
        if (!strcmp(f, "--skip-bad")) {
            c->data.skip_bad = 1;
            continue;
        }
        if (strncmp(f, "--", 2))
            return app_usage(err, errlen, "unexpected argument '%s' (see loom train lda --help)",
                             f);
        if (!strcmp(f, "--topics") || !strcmp(f, "--alpha") || !strcmp(f, "--beta") ||
            !strcmp(f, "--iterations") || !strcmp(f, "--syncs") || !strcmp(f, "--eval-every") ||
            !strcmp(f, "--vocab") || !strcmp(f, "--top-words")) {
            if (i + 1 >= argc) return app_usage(err, errlen, "%s needs a value", f);
        } else {
            return app_usage(err, errlen, "unknown flag '%s' (see loom train lda --help)", f);
        }
        const char *v = argv[++i];
        rc = 0;
        long n = 0;
        double x = 0;
        if (!strcmp(f, "--topics")) {
            if (!(rc = app_parse_int(f, v, 1, LDA_MAX_TOPICS, &n, err, errlen)))
                c->train.topics = (uint32_t)n;
        } else if (!strcmp(f, "--alpha")) {
            if (!(rc = app_parse_num(f, v, 1e-9, 1e6, &x, err, errlen))) c->train.alpha = x;
        } else if (!strcmp(f, "--beta")) {
            if (!(rc = app_parse_num(f, v, 1e-9, 1e6, &x, err, errlen))) c->train.beta = x;
        } else if (!strcmp(f, "--iterations")) {
            if (!(rc = app_parse_int(f, v, 1, 1000000, &n, err, errlen)))
                c->train.iterations = (int)n;
        } else if (!strcmp(f, "--syncs")) {
            if (!(rc = app_parse_int(f, v, 1, 10000, &n, err, errlen))) c->train.syncs = (int)n;
        } else if (!strcmp(f, "--eval-every")) {
            if (!(rc = app_parse_int(f, v, 0, 1000000, &n, err, errlen)))
                c->train.eval_every = (int)n;
        } else if (!strcmp(f, "--top-words")) {
            if (!(rc = app_parse_int(f, v, 0, 100000, &n, err, errlen))) c->top_words = (int)n;
        } else { /* --vocab */
            if (!v[0]) return app_usage(err, errlen, "--vocab needs a file name");
            c->vocab_path = v;
        }
        if (rc) return rc;
    }
    c->train.seed = c->job.seed;
    if (!c->job.train_path) return app_usage(err, errlen, "--train FILE is required");
    return 0;
}
