/* seq: the sequential reference of `loom train mlr`, and the arithmetic the
 * trainer shares with it.
 *
 * One process, no Loom job: the same row order, the same minibatches and the
 * same arithmetic in the same order as one worker of the trainer, so a
 * one-worker BSP job ends with exactly these weights (tests/mlr compare them
 * bit for bit). The two modes add the same per-example updates in a
 * different order, so the reference follows the mode:
 *
 *   ps   a minibatch's update G = sum_i c_i x_i^T is summed first (rows in
 *        order, each row's features in order, the bias last), then W += G:
 *        what the worker pushes and the server's "sum" updater adds; with
 *        --updater adagrad, c_i = (p_i - t_i) / n, the gradient, which the
 *        servers' "adagrad" updater applies (loom_svb_adagrad_step, the same
 *        arithmetic);
 *   svb  each example's sufficient vectors (u_i = c_i rounded to float, as
 *        they travel, and x_i with the bias) are applied one after the other,
 *        W += u_i x_i^T (loom_svb_apply), as every replica does; with
 *        --updater adagrad (u_i = (p_i - t_i) / n) they are summed first and
 *        W takes one AdaGrad step with the sum (loom_svb_adagrad_step).
 *
 * c_i = -(lr / n) (p_i - t_i), n the rows of the minibatch, or under SV
 * selection (--select C) the C rows loom_svb_select chose. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <loom/svb.h>

#include "mlr/mlr.h"

void mlr_epoch_order(uint64_t seed, int rank, int epoch, size_t rows, size_t *order)
{
    app_rng r;
    app_rng_seed(&r, seed, ((uint64_t)(uint32_t)rank << 32) | (uint32_t)epoch);
    for (size_t i = 0; i < rows; i++) order[i] = i;
    for (size_t i = rows; i > 1; i--) {
        size_t j = (size_t)(app_rng_next(&r) % i);
        size_t t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
}

void mlr_batch_range(size_t rows, size_t nbatches, size_t b, size_t *lo, size_t *hi)
{
    size_t per = (rows + nbatches - 1) / nbatches;
    *lo = b * per < rows ? b * per : rows;
    *hi = *lo + per < rows ? *lo + per : rows;
}

void mlr_batch_residuals(const double *w, uint32_t classes, uint64_t dim, const loom_dataset *d,
                         const size_t *rows, size_t n, double *r, double *loss)
{
    double sum = 0;
    for (size_t q = 0; q < n; q++) {
        double *s = r + q * classes;
        mlr_scores(w, classes, dim, d, rows[q], s);
        sum += mlr_residual(s, classes, (uint32_t)d->label[rows[q]]);
    }
    *loss = sum;
}

int mlr_svs_build(mlr_svs *s, const loom_dataset *d, const size_t *rows, size_t n, uint64_t dim)
{
    size_t nnz = 0;
    for (size_t q = 0; q < n; q++) nnz += d->row[rows[q] + 1] - d->row[rows[q]] + 1;
    if (nnz > s->cap) {
        free(s->idx), free(s->val);
        s->cap = 2 * nnz;
        s->idx = malloc(s->cap * sizeof *s->idx);
        s->val = malloc(s->cap * sizeof *s->val);
    }
    if (n + 1 > s->rows_cap) {
        free(s->off);
        s->rows_cap = 2 * (n + 1);
        s->off = malloc(s->rows_cap * sizeof *s->off);
    }
    if (!s->idx || !s->val || !s->off) return LOOM_ENOMEM;
    size_t k = 0;
    for (size_t q = 0; q < n; q++) {
        s->off[q] = k;
        for (size_t e = d->row[rows[q]]; e < d->row[rows[q] + 1]; e++)
            if (d->idx[e] < dim) s->idx[k] = d->idx[e], s->val[k++] = d->val[e];
        s->idx[k] = dim, s->val[k++] = 1; /* the bias */
    }
    s->off[n] = k;
    return 0;
}

void mlr_svs_free(mlr_svs *s)
{
    free(s->idx), free(s->val), free(s->off);
    *s = (mlr_svs){0};
}

size_t mlr_svs_choose(const mlr_train_opts *o, int rank, uint64_t clock, const double *r,
                      uint32_t classes, const mlr_svs *s, size_t n, size_t *chosen)
{
    if (!o->select || o->select >= n) {
        for (size_t q = 0; q < n; q++) chosen[q] = q;
        return n;
    }
    uint64_t seed = app_splitmix64(&(uint64_t){o->seed ^ ((uint64_t)(uint32_t)rank << 48) ^ clock});
    int got = loom_svb_select(r, classes, s->idx, s->val, s->off, n, o->select, seed, chosen);
    return got > 0 ? (size_t)got : 0;
}

void mlr_sv_u(const mlr_train_opts *o, size_t c, const double *r, uint32_t classes, float *u)
{
    /* AdaGrad's SVs carry the gradient; the replicas apply the rate. */
    double scale = o->updater == MLR_ADAGRAD ? 1.0 / (double)c : -o->lr / (double)c;
    for (uint32_t k = 0; k < classes; k++) u[k] = (float)(scale * r[k]);
}

size_t mlr_svs_keys(const mlr_svs *v, size_t n, uint8_t *seen, uint64_t *keys)
{
    size_t nk = 0;
    for (size_t e = v->off[0]; e < v->off[n]; e++)
        if (!seen[v->idx[e]]) seen[v->idx[e]] = 1, keys[nk++] = v->idx[e];
    for (size_t k = 0; k < nk; k++) seen[keys[k]] = 0;
    return nk;
}

void mlr_ps_accumulate(double *g, uint32_t K, const mlr_svs *v, size_t n, const double *r,
                       double scale)
{
    for (size_t q = 0; q < n; q++)
        for (size_t e = v->off[q]; e < v->off[q + 1]; e++) {
            double *row = g + v->idx[e] * K, x = v->val[e];
            for (uint32_t k = 0; k < K; k++) row[k] += (scale * r[q * K + k]) * x;
        }
}

void mlr_l2_rows(double *g, const double *w, uint32_t K, const uint64_t *keys, size_t nk,
                 uint64_t dim, double coef)
{
    if (coef == 0) return;
    for (size_t t = 0; t < nk; t++)
        if (keys[t] != dim)
            for (size_t e = keys[t] * K; e < (keys[t] + 1) * K; e++) g[e] += coef * w[e];
}

/* ps: the minibatch's G summed into g (a dense scratch of zeros, left zero
 * again), then applied to w as the servers' updater does: added ("sum"), or
 * by AdaGrad with accumulators acc. */
static void step_ps(const mlr_train_opts *o, double l2, double *w, double *acc, uint32_t K,
                    uint64_t dim, const mlr_svs *v, size_t n, const double *r, double *g,
                    uint64_t *keys, uint8_t *seen)
{
    size_t nk = mlr_svs_keys(v, n, seen, keys);
    if (o->updater == MLR_ADAGRAD) {
        mlr_ps_accumulate(g, K, v, n, r, 1.0 / (double)n);
        mlr_l2_rows(g, w, K, keys, nk, dim, l2);
        loom_svb_adagrad_step(w, acc, g, K, keys, nk, o->lr);
        return;
    }
    mlr_ps_accumulate(g, K, v, n, r, -o->lr / (double)n);
    mlr_l2_rows(g, w, K, keys, nk, dim, -o->lr * l2);
    for (size_t t = 0; t < nk; t++)
        for (uint32_t k = 0; k < K; k++) {
            w[keys[t] * K + k] += g[keys[t] * K + k];
            g[keys[t] * K + k] = 0;
        }
}

int mlr_train_sequential(const mlr_train_opts *o, const loom_dataset *d, uint32_t K, uint64_t dim,
                         mlr_model *out)
{
    size_t nw = (size_t)(dim + 1) * K, B = o->minibatch;
    *out = (mlr_model){.classes = K, .dim = dim, .w = calloc(nw, sizeof(double))};
    size_t *order = malloc((d->rows ? d->rows : 1) * sizeof *order);
    double *r = malloc(B * K * sizeof *r), *g = calloc(nw, sizeof *g);
    double *acc = o->updater == MLR_ADAGRAD ? calloc(nw, sizeof *acc) : NULL;
    uint64_t *touched = malloc((dim + 1) * sizeof *touched);
    uint8_t *seen = calloc(dim + 1, 1);
    size_t *chosen = malloc(B * sizeof *chosen);
    float *u = malloc(K * sizeof *u);
    mlr_svs v = {0};
    int rc = 0;
    if (!out->w || !order || !r || !g || !touched || !seen || !chosen || !u ||
        (o->updater == MLR_ADAGRAD && !acc))
        rc = LOOM_ENOMEM;
    size_t nbatches = d->rows ? (d->rows + B - 1) / B : 0;
    double l2 = o->l2 >= 0 ? o->l2 : d->rows ? 1.0 / (double)d->rows : 0;
    uint64_t clock = 0;
    for (int epoch = 0; epoch < o->epochs && !rc; epoch++) {
        mlr_epoch_order(o->seed, 0, epoch, d->rows, order);
        for (size_t b = 0; b < nbatches && !rc; b++, clock++) {
            size_t lo, hi;
            mlr_batch_range(d->rows, nbatches, b, &lo, &hi);
            size_t n = hi - lo;
            double loss;
            mlr_batch_residuals(out->w, K, dim, d, order + lo, n, r, &loss);
            if ((rc = mlr_svs_build(&v, d, order + lo, n, dim))) break;
            if (o->mode == MLR_MODE_PS) {
                step_ps(o, l2, out->w, acc, K, dim, &v, n, r, g, touched, seen);
                continue;
            }
            size_t c = mlr_svs_choose(o, 0, clock, r, K, &v, n, chosen);
            if (!c && n) rc = LOOM_ENOMEM;
            for (size_t i = 0; i < c; i++) {
                size_t q = chosen[i];
                mlr_sv_u(o, c, r + q * K, K, u);
                /* AdaGrad: the SVs summed into g first, then one step. */
                loom_svb_apply(acc ? g : out->w, K, u, v.idx + v.off[q], v.val + v.off[q],
                               (uint32_t)(v.off[q + 1] - v.off[q]));
            }
            if (acc) {
                size_t nk = mlr_svs_keys(&v, n, seen, touched);
                loom_svb_adagrad_step(out->w, acc, g, K, touched, nk, o->lr);
            }
        }
    }
    free(order), free(r), free(g), free(acc), free(touched), free(seen), free(chosen), free(u);
    mlr_svs_free(&v);
    if (rc) mlr_model_free(out);
    return rc;
}
