/* Synthetic multiclass data from a planted softmax model.
 *
 *   model   every feature j has a home class h_j (uniform) and a weight
 *           signal * (0.5 + U) for it, 0 for the other classes: W* is as
 *           sparse as a feature is informative, like words of a topic;
 *   rows    nnz distinct features drawn uniformly (Floyd's sampling), ids
 *           ascending, every value 1;
 *   labels  drawn from softmax(W*^T x) by the Gumbel-max trick: the class
 *           maximising score_k - log(-log U_k). The planted model is the
 *           Bayes-optimal classifier of the data.
 *
 * Deterministic for a seed with the same C library (labels use libm's log). */
#include "mlr/mlr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { STREAM_MODEL = 1, STREAM_ROWS };

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* nnz distinct ids below n (Floyd): for j = n - nnz .. n - 1 draw t in
 * [0, j]; take t unless taken, then j. */
static void draw_row(app_rng *r, uint64_t n, uint32_t nnz, uint64_t *ids)
{
    uint32_t got = 0;
    for (uint64_t j = n - nnz; j < n; j++) {
        uint64_t t = app_rng_next(r) % (j + 1);
        for (uint32_t i = 0; i < got; i++)
            if (ids[i] == t) {
                t = j;
                break;
            }
        ids[got++] = t;
    }
    qsort(ids, nnz, sizeof *ids, cmp_u64);
}

int mlr_generate(const mlr_gen_opts *o, FILE *out, mlr_model *planted, char *err, size_t errlen)
{
    if (o->classes < 2 || o->classes > MLR_MAX_CLASSES || o->features == 0 ||
        o->features > MLR_MAX_DIM || o->nnz == 0 || o->nnz > o->features)
        return app_error(err, errlen, "bad options (classes 2..%u, 1 <= nnz <= features <= %llu)",
                         MLR_MAX_CLASSES, (unsigned long long)MLR_MAX_DIM);
    uint32_t K = o->classes;
    uint32_t *home = malloc(o->features * sizeof *home);
    double *weight = malloc(o->features * sizeof *weight), *score = malloc(K * sizeof *score);
    uint64_t *ids = malloc(o->nnz * sizeof *ids);
    char *line = malloc(32 + (size_t)o->nnz * 24);
    int rc = 0;
    if (!home || !weight || !score || !ids || !line) {
        rc = app_error(err, errlen, "out of memory");
        goto out;
    }
    app_rng r;
    app_rng_seed(&r, o->seed, STREAM_MODEL);
    for (uint64_t j = 0; j < o->features; j++) {
        home[j] = app_rng_below(&r, K);
        weight[j] = o->signal * (0.5 + app_rng_uniform(&r));
    }
    if (planted) {
        *planted = (mlr_model){.classes = K,
                               .dim = o->features,
                               .w = calloc((size_t)(o->features + 1) * K, sizeof(double))};
        if (!planted->w) {
            rc = app_error(err, errlen, "out of memory");
            goto out;
        }
        for (uint64_t j = 0; j < o->features; j++) planted->w[j * K + home[j]] = weight[j];
    }
    app_rng_seed(&r, o->seed, STREAM_ROWS);
    for (uint64_t i = 0; i < o->rows; i++) {
        draw_row(&r, o->features, o->nnz, ids);
        memset(score, 0, K * sizeof *score);
        for (uint32_t e = 0; e < o->nnz; e++) score[home[ids[e]]] += weight[ids[e]];
        uint32_t best = 0;
        double top = -INFINITY;
        for (uint32_t k = 0; k < K; k++) {
            double u = app_rng_uniform(&r);
            double gumbel = -log(-log(u > 0 ? u : 0x1.0p-53));
            if (score[k] + gumbel > top) top = score[k] + gumbel, best = k;
        }
        int len = sprintf(line, "%u", best);
        for (uint32_t e = 0; e < o->nnz; e++)
            len += sprintf(line + len, " %llu:1", (unsigned long long)ids[e] + 1);
        line[len++] = '\n';
        if (fwrite(line, 1, (size_t)len, out) != (size_t)len) {
            rc = app_error(err, errlen, "write failed");
            break;
        }
    }
out:
    free(home), free(weight), free(score), free(ids), free(line);
    if (rc && planted) mlr_model_free(planted);
    return rc;
}
