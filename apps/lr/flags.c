/* flags: the command line of `loom train lr`.
 *
 * Parsed twice: by the launching command, to refuse bad or contradictory
 * flags before any process starts, and by every node of the job. Every
 * rejection names the flag and says what it expects. */
#include <errno.h>
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

static int parse_num(const char *flag, const char *v, double lo, double hi, double *out, char *err,
                     size_t errlen)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi)) {
        char fmt[128];
        snprintf(fmt, sizeof fmt, "%%s takes a number from %g to %g, not '%%s'", lo, hi);
        return bad(err, errlen, fmt, flag, v);
    }
    *out = x;
    return 0;
}

static int parse_int(const char *flag, const char *v, long lo, long hi, long *out, char *err,
                     size_t errlen)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        char fmt[128];
        snprintf(fmt, sizeof fmt, "%%s takes a whole number from %ld to %ld, not '%%s'", lo, hi);
        return bad(err, errlen, fmt, flag, v);
    }
    *out = x;
    return 0;
}

int lr_parse_flags(int argc, char **argv, lr_cli *c, char *err, size_t errlen)
{
    static const lr_train_opts defaults = LR_TRAIN_OPTS_DEFAULT;
    static const loom_libsvm_opts data_defaults = LOOM_LIBSVM_OPTS_DEFAULT;
    *c = (lr_cli){.train = defaults, .workers = 2, .servers = 1, .data = data_defaults};
    int seen_lr = 0, seen_sgd_only = 0, seen_dbpg_only = 0, seen_l1 = 0;
    const char *sgd_flag = NULL, *dbpg_flag = NULL;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        int takes_value = strcmp(f, "--zero-based") && strcmp(f, "--one-based") &&
                          strcmp(f, "--skip-bad") && strcmp(f, "--quiet");
        const char *v = NULL;
        if (takes_value) {
            if (i + 1 >= argc) return bad(err, errlen, "%s needs a value%s", f, NULL);
            v = argv[++i];
        }
        long n;
        double x;
        int rc = 0;
        if (!strcmp(f, "--train")) {
            c->train_path = v;
        } else if (!strcmp(f, "--test")) {
            c->test_path = v;
        } else if (!strcmp(f, "--metrics")) {
            c->metrics_path = v;
        } else if (!strcmp(f, "--model-out")) {
            c->model_path = v;
        } else if (!strcmp(f, "--zero-based")) {
            c->data.ids = LOOM_IDS_ZERO_BASED;
        } else if (!strcmp(f, "--one-based")) {
            c->data.ids = LOOM_IDS_ONE_BASED;
        } else if (!strcmp(f, "--skip-bad")) {
            c->data.skip_bad = 1;
        } else if (!strcmp(f, "--quiet")) {
            c->quiet = 1;
        } else if (!strcmp(f, "--workers")) {
            if (!(rc = parse_int(f, v, 1, 128, &n, err, errlen))) c->workers = (int)n;
        } else if (!strcmp(f, "--servers")) {
            if (!(rc = parse_int(f, v, 1, 128, &n, err, errlen))) c->servers = (int)n;
        } else if (!strcmp(f, "--epochs")) {
            if (!(rc = parse_int(f, v, 1, 100000, &n, err, errlen))) c->train.epochs = (int)n;
        } else if (!strcmp(f, "--seed")) {
            if (!(rc = parse_int(f, v, 0, 2147483647L, &n, err, errlen)))
                c->train.seed = (uint64_t)n;
        } else if (!strcmp(f, "--lr")) {
            if (!(rc = parse_num(f, v, 1e-12, 1e6, &x, err, errlen))) c->train.lr = x;
            seen_lr = 1;
        } else if (!strcmp(f, "--l1")) {
            if (!(rc = parse_num(f, v, 0, 1e9, &x, err, errlen))) c->train.l1 = x;
            seen_l1 = !rc && x > 0;
        } else if (!strcmp(f, "--l2")) {
            if (!(rc = parse_num(f, v, 0, 1e9, &x, err, errlen))) c->train.l2 = x;
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
            if (!(rc = parse_int(f, v, 1, 100000000L, &n, err, errlen)))
                c->train.minibatch = (uint32_t)n;
        } else if (!strcmp(f, "--consistency")) {
            seen_sgd_only = 1, sgd_flag = f;
            if (!strcmp(v, "bsp")) {
                c->train.consistency = LOOM_BSP;
                c->train.staleness = 0;
            } else if (!strcmp(v, "asp")) {
                c->train.consistency = LOOM_ASP;
            } else if (!strncmp(v, "ssp:", 4)) {
                c->train.consistency = LOOM_SSP;
                if (!(rc = parse_int(f, v + 4, 0, 1000000, &n, err, errlen)))
                    c->train.staleness = (int)n;
            } else {
                return bad(err, errlen, "%s takes bsp, asp or ssp:S (S a staleness >= 0), not '%s'",
                           f, v);
            }
        } else if (!strcmp(f, "--blocks")) {
            seen_dbpg_only = 1, dbpg_flag = f;
            if (!(rc = parse_int(f, v, 1, 1000000, &n, err, errlen))) c->train.blocks = (int)n;
        } else if (!strcmp(f, "--delay")) {
            seen_dbpg_only = 1, dbpg_flag = f;
            if (!(rc = parse_int(f, v, 0, 1000000, &n, err, errlen))) c->train.delay = (int)n;
        } else {
            return bad(err, errlen, "unknown flag '%s' (see loom help train)%s", f, NULL);
        }
        if (rc) return rc;
    }
    if (!c->train_path) return bad(err, errlen, "--train FILE is required%s%s", "", NULL);
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
