/* flags: the command line of `loom train mf`.
 *
 * Parsed twice, like lr's: by the launching command, to refuse bad or
 * contradictory flags before any process starts, and by every node of the
 * job. The job flags (--train, --workers, --consistency, ...) are
 * apps/common's; every rejection names the flag and says what it expects. */
#include <stdio.h>
#include <string.h>

#include "mf/mf.h"

const char mf_train_help[] =
    "usage: loom train mf --train FILE [options]\n"
    "\n"
    "Train a matrix-factorisation model with biases (rating = mean + b_u + b_i + p_u.q_i)\n"
    "by SGD, with the factor tables on the servers (docs/MF.md).\n"
    "\n"
    "data:\n"
    "  --train FILE            ratings \"user item rating [timestamp]\" (MovieLens u.data\n"
    "                          and ratings.csv work); each worker reads its share\n"
    "  --test FILE             held-out ratings, evaluated after every epoch\n"
    "  --test-fraction P       hold out a seeded fraction P of --train instead (0 < P < 1)\n"
    "  --format tsv|csv|space  field separator (default: detect)\n"
    "  --skip-bad              skip malformed lines (and report how many) instead of stopping\n"
    "job:\n"
    "  --workers W             default 2\n"
    "  --servers S             default 1\n"
    "  --consistency bsp|ssp:S|asp  staleness bound in clocks (default ssp:2)\n"
    "algorithm:\n"
    "  --rank K                factors per user and item (default 16)\n"
    "  --epochs N              passes over the data (default 40)\n"
    "  --lr X                  learning rate of the first epoch (default 0.03)\n"
    "  --lr-decay D            learning rate of epoch e is lr * D^e (default 0.95)\n"
    "  --reg X                 L2 regularisation of biases and factors (default 0.1)\n"
    "  --init-std X            standard deviation of the initial factors (default 0.1)\n"
    "  --syncs N               clocks per epoch: a worker pulls, trains on 1/N of its\n"
    "                          ratings and pushes, N times an epoch (default 1)\n"
    "  --merge damped|sum      how the workers' updates of a row combine on the servers:\n"
    "                          scaled so their sum moves a bias as far as one\n"
    "                          sequential pass would (default), or added as they are\n"
    "  --seed N                split, initial factors and order (default 1)\n"
    "output:\n"
    "  --metrics FILE          JSON line per epoch\n"
    "  --model-out FILE        save the model (format: docs/MF.md)\n"
    "  --quiet                 no progress lines\n";

int mf_parse_flags(int argc, char **argv, mf_cli *c, char *err, size_t errlen)
{
    static const mf_train_opts defaults = MF_TRAIN_OPTS_DEFAULT;
    static const loom_ratings_opts data_defaults = LOOM_RATINGS_OPTS_DEFAULT;
    *c = (mf_cli){.train = defaults, .data = data_defaults};
    app_job_init(&c->job, 2);
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        int rc = app_job_flag(&c->job, argc, argv, &i, err, errlen);
        if (rc != APP_FLAG_NOT_MINE) {
            if (rc) return rc;
            if (strcmp(f, "--format")) continue;
            const char *v = c->job.format;
            if (!strcmp(v, "tsv"))
                c->data.separator = '\t';
            else if (!strcmp(v, "csv"))
                c->data.separator = ',';
            else if (!strcmp(v, "space"))
                c->data.separator = ' ';
            else
                return app_usage(err, errlen, "--format takes tsv, csv or space, not '%s'", v);
            continue;
        }
        if (!strcmp(f, "--merge")) {
            if (i + 1 >= argc) return app_usage(err, errlen, "%s needs a value", f);
            const char *v = argv[++i];
            if (!strcmp(v, "damped"))
                c->train.merge = MF_MERGE_DAMPED;
            else if (!strcmp(v, "sum"))
                c->train.merge = MF_MERGE_SUM;
            else
                return app_usage(err, errlen, "--merge takes damped or sum, not '%s'", v);
            continue;
        }
        if (!strcmp(f, "--skip-bad")) {
            c->data.skip_bad = 1;
            continue;
        }
        static const char *const mine[] = {"--rank",          "--epochs", "--lr",
                                           "--lr-decay",      "--reg",    "--init-std",
                                           "--test-fraction", "--syncs"};
        size_t k = 0, nmine = sizeof mine / sizeof mine[0];
        while (k < nmine && strcmp(f, mine[k])) k++;
        if (k == nmine) return app_usage(err, errlen, "unknown flag '%s' (see loom help train)", f);
        if (i + 1 >= argc) return app_usage(err, errlen, "%s needs a value", f);
        const char *v = argv[++i];
        long n = 0;
        double x = 0;
        mf_train_opts *o = &c->train;
        if (!strcmp(f, "--rank")) {
            rc = app_parse_int(f, v, 1, 1024, &n, err, errlen);
            o->rank = (uint32_t)n;
        } else if (!strcmp(f, "--epochs")) {
            rc = app_parse_int(f, v, 1, 100000, &n, err, errlen);
            o->epochs = (int)n;
        } else if (!strcmp(f, "--syncs")) {
            rc = app_parse_int(f, v, 1, 1000000, &n, err, errlen);
            o->syncs = (int)n;
        } else if (!strcmp(f, "--lr")) {
            rc = app_parse_num(f, v, 1e-12, 10, &o->lr, err, errlen);
        } else if (!strcmp(f, "--lr-decay")) {
            rc = app_parse_num(f, v, 1e-6, 1, &o->lr_decay, err, errlen);
        } else if (!strcmp(f, "--reg")) {
            rc = app_parse_num(f, v, 0, 1e6, &o->reg, err, errlen);
        } else if (!strcmp(f, "--init-std")) {
            rc = app_parse_num(f, v, 0, 10, &o->init_std, err, errlen);
        } else { /* --test-fraction */
            rc = app_parse_num(f, v, 0, 1, &x, err, errlen);
            if (!rc && !(x > 0 && x < 1))
                rc = app_usage(err, errlen,
                               "--test-fraction takes a number above 0 and below 1, "
                               "not '%s'",
                               v);
            o->test_fraction = x;
        }
        if (rc) return rc;
    }
    c->train.seed = c->job.seed;
    if (!c->job.train_path) return app_usage(err, errlen, "--train FILE is required");
    if (c->job.test_path && c->train.test_fraction > 0)
        return app_usage(err, errlen, "give --test FILE or --test-fraction P, not both");
    return 0;
}
