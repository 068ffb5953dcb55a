/* mf_check: compare a model trained by a one-worker BSP Loom job with the
 * sequential reference computed here, in-process, from the same flags.
 *
 *   mf_check MODEL_FILE [METRICS_FILE] -- TRAIN_FLAGS...
 *
 * TRAIN_FLAGS are those given to `loom train mf` (at least --train FILE).
 * Exit 0 when every number of the two models is bitwise equal (header, ids,
 * biases, factors), 1 otherwise, naming the first difference; 2 on errors.
 * With METRICS_FILE (the job's --metrics), also: one line per evaluation
 * the flags make due (--eval-every), for the same epochs, whose train_rmse
 * and test_rmse are, to the 9 digits written, those of a full evaluation of
 * the reference's model after that epoch on every training and test rating. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "mf/mf.h"

/* Bitwise: == would call -0 and +0 equal, and NaN unequal to itself. */
static int same(double a, double b)
{
    return !memcmp(&a, &b, sizeof a);
}

static int compare_rows(const char *what, const int64_t *ida, const int64_t *idb, const double *a,
                        const double *b, size_t n, size_t w)
{
    for (size_t r = 0; r < n; r++) {
        if (ida[r] != idb[r]) {
            printf("mf_check: %s %zu: id %lld, reference %lld\n", what, r, (long long)ida[r],
                   (long long)idb[r]);
            return 1;
        }
        for (size_t j = 0; j < w; j++)
            if (!same(a[r * w + j], b[r * w + j])) {
                printf("mf_check: %s %lld value %zu: %.17g, reference %.17g\n", what,
                       (long long)ida[r], j, a[r * w + j], b[r * w + j]);
                return 1;
            }
    }
    return 0;
}

/* The reference's evaluations, as the trainer writes them into its metrics. */
typedef struct evals {
    const mf_train_opts *opts;
    mf_data train, test;
    char (*lines)[128]; /* per epoch: "epoch E train_rmse X test_rmse Y", or "" */
} evals;

static void rmse_text(char *out, size_t len, double sse, size_t n)
{
    if (n)
        snprintf(out, len, "%.9g", sqrt(sse / (double)n));
    else
        snprintf(out, len, "null");
}

static void after_epoch(void *arg, int epoch, const mf_model *m)
{
    evals *e = arg;
    if (!mf_eval_due(e->opts, epoch)) return;
    char train[32], test[32];
    rmse_text(train, sizeof train, mf_model_sse(m, &e->train), e->train.n);
    rmse_text(test, sizeof test, mf_model_sse(m, &e->test), e->test.n);
    snprintf(e->lines[epoch], sizeof e->lines[epoch], "epoch %d train_rmse %s test_rmse %s",
             epoch + 1, train, test);
}

/* The text after "KEY": on line, up to the next ',' or '}'. */
static void field(const char *line, const char *key, char *out, size_t len)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(line, pat);
    size_t n = 0;
    if (p)
        for (p += strlen(pat); p[n] && p[n] != ',' && p[n] != '}' && n + 1 < len; n++)
            out[n] = p[n];
    out[n] = '\0';
}

/* Every due evaluation has its line in the metrics file, in order, and no other. */
static int compare_metrics(const char *path, const evals *e)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        perror(path);
        return 2;
    }
    char line[1024];
    int epoch = 0, rc = 0, lines = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        while (epoch < e->opts->epochs && !e->lines[epoch][0]) epoch++;
        char ep[32], train[32], test[32], got[128];
        field(line, "epoch", ep, sizeof ep);
        field(line, "train_rmse", train, sizeof train);
        field(line, "test_rmse", test, sizeof test);
        snprintf(got, sizeof got, "epoch %s train_rmse %s test_rmse %s", ep, train, test);
        if (epoch == e->opts->epochs) {
            printf("mf_check: %s: unexpected line \"%s\"\n", path, got);
            rc = 1;
        } else if (strcmp(got, e->lines[epoch])) {
            printf("mf_check: %s: \"%s\", reference \"%s\"\n", path, got, e->lines[epoch]);
            rc = 1;
        }
        epoch++, lines++;
    }
    while (!rc && epoch < e->opts->epochs && !e->lines[epoch][0]) epoch++;
    if (!rc && epoch < e->opts->epochs) {
        printf("mf_check: %s: no line for \"%s\"\n", path, e->lines[epoch]);
        rc = 1;
    }
    fclose(f);
    if (!rc) printf("mf_check: %d evaluations equal the reference's\n", lines);
    return rc;
}

int main(int argc, char **argv)
{
    int dashes = argc > 3 && !strcmp(argv[2], "--")   ? 2
                 : argc > 4 && !strcmp(argv[3], "--") ? 3
                                                      : 0;
    if (!dashes) {
        fprintf(stderr, "usage: mf_check MODEL [METRICS] -- TRAIN_FLAGS...\n");
        return 2;
    }
    const char *metrics = dashes == 3 ? argv[2] : NULL;
    mf_cli cli;
    char err[1024];
    /* mf_parse_flags skips argv[0]: hand it the "--" as the command name. */
    if (mf_parse_flags(argc - dashes, argv + dashes, &cli, err, sizeof err)) {
        fprintf(stderr, "mf_check: %s\n", err);
        return 2;
    }
    loom_ratings *r, *t = NULL;
    if (loom_ratings_read(cli.job.train_path, 0, 1, &cli.data, &r, err, sizeof err) ||
        (cli.job.test_path &&
         loom_ratings_read(cli.job.test_path, 0, 1, &cli.data, &t, err, sizeof err))) {
        fprintf(stderr, "mf_check: %s\n", err);
        return 2;
    }
    evals ev = {.opts = &cli.train, .lines = calloc((size_t)cli.train.epochs, sizeof *ev.lines)};
    int bad =
        !ev.lines || mf_data_split(r, cli.train.seed, cli.train.test_fraction, &ev.train, &ev.test);
    if (!bad && t) {
        mf_data_free(&ev.test);
        bad = mf_data_map(t, r, &ev.test);
    }
    mf_model ref, got;
    if (bad || mf_train_sequential(&cli.train, r, &ref, after_epoch, &ev)) {
        fprintf(stderr, "mf_check: reference training failed\n");
        return 2;
    }
    mf_data_free(&ev.train);
    mf_data_free(&ev.test);
    loom_ratings_free(r);
    loom_ratings_free(t);
    if (mf_model_load(argv[1], &got, err, sizeof err)) {
        fprintf(stderr, "mf_check: %s\n", err);
        return 2;
    }
    int rc = 0;
    if (got.rank != ref.rank || got.users != ref.users || got.items != ref.items) {
        printf("mf_check: shape rank %u users %zu items %zu, reference %u %zu %zu\n", got.rank,
               got.users, got.items, ref.rank, ref.users, ref.items);
        rc = 1;
    } else if (!same(got.mean, ref.mean) || !same(got.min, ref.min) || !same(got.max, ref.max)) {
        printf("mf_check: mean %.17g min %g max %g, reference %.17g %g %g\n", got.mean, got.min,
               got.max, ref.mean, ref.min, ref.max);
        rc = 1;
    } else {
        size_t w = (size_t)ref.rank + 1;
        rc = compare_rows("user", got.user_id, ref.user_id, got.user, ref.user, ref.users, w) ||
             compare_rows("item", got.item_id, ref.item_id, got.item, ref.item, ref.items, w);
    }
    if (!rc)
        printf("mf_check: %zu users and %zu items of rank %u: every value identical\n", ref.users,
               ref.items, ref.rank);
    if (!rc && metrics) rc = compare_metrics(metrics, &ev);
    free(ev.lines);
    mf_model_free(&ref);
    mf_model_free(&got);
    return rc;
}
