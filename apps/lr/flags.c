/* flags: the command line of `loom train lr`.
 *
 * Parsed twice: by the launching command, to refuse bad or contradictory
 * flags before any process starts, and by every node of the job. Every
 * rejection names the flag and says what it expects. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "lr/lr.h"

const char lr_train_help[] =
    "usage: loom train lr --train FILE [options]\n"
    "\n"
    "Train a sparse logistic-regression model on this machine (a scheduler, S servers\n"
    "and W workers under the local launcher), or on a cluster when started by mpirun/srun.\n"
    "\n"
    "data:\n"
    "  --train FILE            LIBSVM training data; each worker reads its share\n"
    "  --test FILE             LIBSVM test data, evaluated after every epoch\n"
    "  --format libsvm         the only format lr reads (accepted for symmetry)\n"
    "  --zero-based | --one-based   feature ids (default: detect)\n"
    "  --skip-bad              skip malformed lines (and report how many) instead of stopping\n"
    "job:\n"
    "  --workers W             default 2\n"
    "  --servers S             default 1\n"
    "algorithm:\n"
    "  --algo sgd|dbpg         minibatch SGD (default) or delayed block proximal gradient\n"
    "  --epochs N              passes over the data (default 10)\n"
    "  --seed N                order of the rows (default 1)\n"
    "  --lr X                  learning rate (sgd: 0.1; dbpg: step damping, 0.25)\n"
    "  --l1 X, --l2 X          regularisation (l1: ftrl or dbpg only)\n"
    "  sgd only:\n"
    "  --updater sgd|adagrad|ftrl   server-side optimiser (default adagrad)\n"
    "  --minibatch N           rows per minibatch per worker (default 100)\n"
    "  --consistency bsp|ssp:S|asp  staleness bound in minibatches (default ssp:2)\n"
    "  dbpg only:\n"
    "  --blocks B              key blocks (default 8)\n"
    "  --delay TAU             bounded delay between steps (default 2)\n"
    "output:\n"
    "  --metrics FILE          JSON line per epoch\n"
    "  --model-out FILE        save the model (format: docs/LR.md)\n"
    "  --quiet                 no progress lines\n";

static int bad(char *err, size_t errlen, const char *fmt, const char *flag, const char *value)
{
    snprintf(err, errlen, fmt, flag, value ? value : "");
    return 2;
}

int lr_parse_flags(int argc, char **argv, lr_cli *c, char *err, size_t errlen)
{
    static const lr_train_opts defaults = LR_TRAIN_OPTS_DEFAULT;
    static const loom_libsvm_opts data_defaults = LOOM_LIBSVM_OPTS_DEFAULT;
    *c = (lr_cli){.train = defaults, .data = data_defaults};
    app_job_init(&c->job, defaults.staleness);
    int seen_lr = 0, seen_sgd_only = 0, seen_dbpg_only = 0, seen_l1 = 0;
    const char *sgd_flag = NULL, *dbpg_flag = NULL;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        int rc = app_job_flag(&c->job, argc, argv, &i, err, errlen);
        if (rc != APP_FLAG_NOT_MINE) {
            if (rc) return rc;
            if (!strcmp(f, "--consistency")) seen_sgd_only = 1, sgd_flag = f;
            if (!strcmp(f, "--format") && strcmp(c->job.format, "libsvm"))
                return bad(err, errlen, "%s: lr reads libsvm only, not '%s'", f, c->job.format);
            continue;
        }
        rc = 0;
        if (!strcmp(f, "--zero-based")) {
            c->data.ids = LOOM_IDS_ZERO_BASED;
            continue;
        } else if (!strcmp(f, "--one-based")) {
            c->data.ids = LOOM_IDS_ONE_BASED;
            continue;
        } else if (!strcmp(f, "--skip-bad")) {
            c->data.skip_bad = 1;
            continue;
        }
        if (i + 1 >= argc) return bad(err, errlen, "%s needs a value%s", f, NULL);
        const char *v = argv[++i];
        long n = 0;
        double x = 0;
        if (!strcmp(f, "--epochs")) {
            if (!(rc = app_parse_int(f, v, 1, 100000, &n, err, errlen))) c->train.epochs = (int)n;
        } else if (!strcmp(f, "--lr")) {
            if (!(rc = app_parse_num(f, v, 1e-12, 1e6, &x, err, errlen))) c->train.lr = x;
            seen_lr = 1;
        } else if (!strcmp(f, "--l1")) {
            if (!(rc = app_parse_num(f, v, 0, 1e9, &x, err, errlen))) c->train.l1 = x;
            seen_l1 = !rc && x > 0;
        } else if (!strcmp(f, "--l2")) {
            if (!(rc = app_parse_num(f, v, 0, 1e9, &x, err, errlen))) c->train.l2 = x;
        } else if (!strcmp(f, "--algo")) {
            if (!strcmp(v, "sgd"))
                c->train.algo = LR_ALGO_SGD;
            else if (!strcmp(v, "dbpg"))
                c->train.algo = LR_ALGO_DBPG;
            else
                return bad(err, errlen, "%s takes sgd or dbpg, not '%s'", f, v);
        } else if (!strcmp(f, "--updater")) {
            seen_sgd_only = 1, sgd_flag = f;
            if (!strcmp(v, "sgd"))
                c->train.updater = LR_UPD_SGD;
            else if (!strcmp(v, "adagrad"))
                c->train.updater = LR_UPD_ADAGRAD;
            else if (!strcmp(v, "ftrl"))
                c->train.updater = LR_UPD_FTRL;
            else
                return bad(err, errlen, "%s takes sgd, adagrad or ftrl, not '%s'", f, v);
        } else if (!strcmp(f, "--minibatch")) {
            seen_sgd_only = 1, sgd_flag = f;
            if (!(rc = app_parse_int(f, v, 1, 100000000L, &n, err, errlen)))
                c->train.minibatch = (uint32_t)n;
        } else if (!strcmp(f, "--blocks")) {
            seen_dbpg_only = 1, dbpg_flag = f;
            if (!(rc = app_parse_int(f, v, 1, 1000000, &n, err, errlen))) c->train.blocks = (int)n;
        } else if (!strcmp(f, "--delay")) {
            seen_dbpg_only = 1, dbpg_flag = f;
            if (!(rc = app_parse_int(f, v, 0, 1000000, &n, err, errlen))) c->train.delay = (int)n;
        } else {
            return bad(err, errlen, "unknown flag '%s' (see loom help train)%s", f, NULL);
        }
        if (rc) return rc;
    }
    c->train.consistency = c->job.consistency;
    c->train.staleness = c->job.staleness;
    c->train.seed = c->job.seed;
    if (!c->job.train_path) return bad(err, errlen, "--train FILE is required%s%s", "", NULL);
    if (c->train.algo == LR_ALGO_DBPG && seen_sgd_only)
        return bad(err, errlen, "%s is for --algo sgd; dbpg uses --blocks and --delay%s", sgd_flag,
                   NULL);
    if (c->train.algo == LR_ALGO_SGD && seen_dbpg_only)
        return bad(err, errlen, "%s is for --algo dbpg%s", dbpg_flag, NULL);
    if (c->train.algo == LR_ALGO_SGD && seen_l1 && c->train.updater != LR_UPD_FTRL)
        return bad(err, errlen, "--l1 needs --updater ftrl or --algo dbpg%s%s", "", NULL);
    /* Diagonal Newton steps on a block of correlated features overshoot;
     * 0.25 keeps a9a-like one-hot data stable (docs/LR.md). */
    if (c->train.algo == LR_ALGO_DBPG && !seen_lr) c->train.lr = 0.25;
    return 0;
}
