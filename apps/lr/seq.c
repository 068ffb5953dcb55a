/* seq: the sequential reference of `loom train lr`.
 *
 * One process, no Loom: the same row order, the same minibatches, the same
 * gradient arithmetic in the same order, and the updaters' formulas
 * (docs/USAGE.md) written out again here. A one-worker run of the distributed
 * trainer must end with the same weights (tests/lr compare them): any
 * difference is a bug in the data path, the consistency machinery or the
 * server's updaters. With one worker, SGD under BSP applies each minibatch's
 * gradient before the next minibatch reads, and DBPG's delay has no one to
 * wait for, so both are plain sequential algorithms. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "lr/lr.h"

double lr_dbpg_prox(double w0, double g, double u, double eta, double l1, double l2)
{
    double z = u / eta * w0 - g;
    double shrunk = z > l1 ? z - l1 : z < -l1 ? z + l1 : 0;
    /* A coordinate no example touches has u = 0: only l2 moves it (to 0). */
    double denom = u / eta + l2;
    return denom > 0 ? shrunk / denom : 0;
}

void lr_dbpg_window(int64_t t, int delay, int blocks, int *enter, int *leave)
{
    *enter = (int)(t % blocks);
    int64_t gone = t - delay - 1;
    *leave = gone >= 0 ? (int)(gone % blocks) : -1;
}

void lr_dbpg_block(uint64_t dim, int blocks, int b, uint64_t *lo, uint64_t *hi)
{
    uint64_t n = dim + 1, size = (n + (uint64_t)blocks - 1) / (uint64_t)blocks;
    *lo = (uint64_t)b * size < n ? (uint64_t)b * size : n;
    *hi = *lo + size < n ? *lo + size : n;
}

/* --l2 for minibatch SGD, lazily. The objective is the mean log loss plus
 * (l2/2)||w||^2 over the feature weights (not the bias), so every step's
 * gradient holds l2 * w for every weight, not only for the features of the
 * minibatch. Touching every weight every step would make a step cost the
 * dimension, so a feature's decay waits until the feature is next pushed:
 * k steps after its last push, the pushed gradient carries all k steps' decay.
 *   sgd: in closed form. k - 1 pure decay steps and this one give
 *        w (1 - lr l2)^k - lr g, so the push adds w (1 - (1 - lr l2)^k) / lr
 *        to g (the server's own l2 stays 0).
 *   adagrad, ftrl: the step size is the server's (per coordinate, it
 *        depends on the accumulated squares), so the worker cannot write the
 *        closed form; it adds k l2 w, the sum of the k steps' decay gradients
 *        at the weight it read. Over any run of steps the pushes then add up
 *        to the gradient of the objective, so a fixed point of the updater is
 *        the objective's minimiser (the server's own l2 stays 0: FTRL's would
 *        be a penalty on the sum of the steps' losses, not on their mean).
 * The decay of a feature's last steps before the end waits for a push that
 * never comes: the weights saved differ from the lazy-free ones by at most
 * the decay of the steps since each feature's last use. With W workers each
 * pushes the decay of its own steps for its own features, scaled by W over
 * the number of shares holding the feature, so that every feature gets the
 * same decay per clock. */
double lr_l2_push(lr_updater u, double lr, double l2, double share_weight, double w, uint64_t k)
{
    double l2e = l2 * share_weight;
    if (u == LR_UPD_SGD) return w * (1 - pow(1 - lr * l2e, (double)k)) / lr;
    return (double)k * l2e * w;
}

/* The server updaters, per coordinate (LOOM_TABLE_OPTS_DEFAULT: beta 1, eps 1e-8). */
static void apply_update(const lr_train_opts *o, double *w, double *n, double *z, double g)
{
    const double beta = 1.0, eps = 1e-8;
    switch (o->updater) {
    case LR_UPD_SGD:
        *w -= o->lr * (g + o->l2 * *w);
        break;
    case LR_UPD_ADAGRAD:
        *n += g * g;
        *w -= o->lr * g / (sqrt(*n) + eps);
        break;
    case LR_UPD_FTRL: {
        double sigma = (sqrt(*n + g * g) - sqrt(*n)) / o->lr;
        *z += g - sigma * *w;
        *n += g * g;
        double sign = *z < 0 ? -1 : 1;
        *w = fabs(*z) <= o->l1 ? 0 : -(*z - sign * o->l1) / ((beta + sqrt(*n)) / o->lr + o->l2);
        break;
    }
    }
}

/* SGD in lanes: with o->threads = T, the worker's rows are cut into T
 * lanes (app_team_split), each with its own epoch order (lr_epoch_order
 * with lane number t), minibatches and --l2 bookkeeping. A step computes
 * every lane's minibatch gradient at the same weights, adds them in lane
 * order (the first lane to touch a weight gives its value, later ones are
 * added: the update buffer's coalescing) and applies the sum once per
 * weight. With T = 1 this is plain minibatch SGD. */
static int train_sgd(const lr_train_opts *o, const loom_dataset *d, uint64_t dim, double *w)
{
    const int lanes = o->threads > 1 ? o->threads : 1;
    size_t nw = dim + 1, L = (size_t)lanes;
    double *acc = calloc(nw, sizeof *acc), *z = calloc(nw, sizeof *z);
    double *sum = calloc(nw, sizeof *sum), *share = malloc(nw * sizeof *share);
    uint64_t *last = calloc(nw * L, sizeof *last), *step = calloc(L, sizeof *step);
    uint64_t *touched = malloc(nw * sizeof *touched), *seen = calloc(nw, sizeof *seen), stamp = 0;
    size_t *order = malloc((d->rows ? d->rows : 1) * sizeof *order);
    uint64_t *keys = malloc((d->nnz + 1) * sizeof *keys);
    double *g = malloc((d->nnz + 1) * sizeof *g);
    int rc = acc && z && sum && share && last && step && touched && seen && order && keys && g
                 ? 0
                 : LOOM_ENOMEM;
    /* --l2: with several lanes each decays its own features, scaled by T over
     * the number of lanes holding the feature (count_shares in train.c). */
    for (size_t f = 0; f < nw && !rc; f++) share[f] = 0;
    for (int t = 0; t < lanes && !rc; t++) {
        size_t plo, phi;
        app_team_split(d->rows, lanes, t, &plo, &phi);
        stamp++;
        for (size_t k = d->row[plo]; k < d->row[phi]; k++)
            if (seen[d->idx[k]] != stamp) seen[d->idx[k]] = stamp, share[d->idx[k]]++;
    }
    for (size_t f = 0; f < nw && !rc; f++) share[f] = lanes > 1 ? (double)lanes / share[f] : 1;
    size_t max_lane = (d->rows + L - 1) / L;
    size_t nbatches = (max_lane + o->minibatch - 1) / o->minibatch;
    if (!nbatches) nbatches = 1;
    lr_train_opts eff = *o;
    eff.l2 = 0; /* the workers push l2's share of the gradient */
    for (int epoch = 0; epoch < o->epochs && !rc; epoch++) {
        for (int t = 0; t < lanes; t++) {
            size_t plo, phi;
            app_team_split(d->rows, lanes, t, &plo, &phi);
            lr_epoch_order(o->seed, t, epoch, phi - plo, order + plo);
            for (size_t r = plo; r < phi; r++) order[r] += plo;
        }
        for (size_t b = 0; b < nbatches; b++) {
            size_t ntouched = 0;
            stamp++;
            for (int t = 0; t < lanes; t++) {
                size_t plo, phi;
                app_team_split(d->rows, lanes, t, &plo, &phi);
                size_t rows = phi - plo, per = (rows + nbatches - 1) / nbatches;
                size_t lo = b * per < rows ? b * per : rows;
                size_t hi = lo + per < rows ? lo + per : rows;
                if (hi == lo) continue;
                lo += plo, hi += plo;
                size_t nk = 0;
                for (size_t r = lo; r < hi; r++)
                    for (size_t k = d->row[order[r]]; k < d->row[order[r] + 1]; k++)
                        keys[nk++] = d->idx[k];
                keys[nk++] = dim;
                nk = app_sort_unique(keys, nk);
                memset(g, 0, nk * sizeof *g);
                for (size_t r = lo; r < hi; r++) {
                    size_t i = order[r];
                    double m = w[dim];
                    for (size_t k = d->row[i]; k < d->row[i + 1]; k++)
                        m += w[d->idx[k]] * d->val[k];
                    double err = lr_sigmoid(m) - (d->label[i] > 0 ? 1.0 : 0.0);
                    for (size_t k = d->row[i]; k < d->row[i + 1]; k++)
                        g[app_lower_bound(keys, nk, d->idx[k])] += err * d->val[k];
                    g[nk - 1] += err;
                }
                step[t]++;
                uint64_t *lane_last = last + (size_t)t * nw;
                for (size_t k = 0; k < nk; k++) {
                    uint64_t f = keys[k];
                    double gk = g[k] / (double)(hi - lo);
                    if (f != dim && o->l2 != 0)
                        gk += lr_l2_push(o->updater, o->lr, o->l2, share[f], w[f],
                                         step[t] - lane_last[f]);
                    lane_last[f] = step[t];
                    if (seen[f] != stamp) {
                        seen[f] = stamp;
                        sum[f] = gk;
                        touched[ntouched++] = f;
                    } else {
                        sum[f] += gk;
                    }
                }
            }
            for (size_t k = 0; k < ntouched; k++) {
                uint64_t f = touched[k];
                apply_update(&eff, &w[f], &acc[f], &z[f], sum[f]);
            }
        }
    }
    free(acc), free(z), free(sum), free(share), free(last), free(step), free(touched), free(seen);
    free(order), free(keys), free(g);
    return rc;
}

/* Margins follow local weights lw (the worker's copy), which follow the model
 * w with the delay: exactly the worker's bookkeeping in train.c. */
static void dbpg_refresh(uint64_t lo, uint64_t hi, uint64_t dim, const double *w, double *lw,
                         double *margin, const loom_dataset *d, const size_t *ptr,
                         const size_t *rowv, const size_t *nzv)
{
    for (uint64_t f = lo; f < hi; f++) {
        double delta = w[f] - lw[f];
        if (delta == 0) continue;
        lw[f] += delta;
        if (f == dim) {
            for (size_t i = 0; i < d->rows; i++) margin[i] += delta;
        } else {
            for (size_t q = ptr[f]; q < ptr[f + 1]; q++) margin[rowv[q]] += delta * d->val[nzv[q]];
        }
    }
}

static int train_dbpg(const lr_train_opts *o, const loom_dataset *d, uint64_t dim, double *w)
{
    /* Column index: rows of every feature, in row order (as the workers build it). */
    size_t *ptr = calloc(dim + 2, sizeof *ptr);
    size_t *rowv = malloc((d->nnz ? d->nnz : 1) * sizeof *rowv);
    size_t *nzv = malloc((d->nnz ? d->nnz : 1) * sizeof *nzv);
    double *margin = calloc(d->rows ? d->rows : 1, sizeof *margin);
    double *lw = calloc(dim + 1, sizeof *lw), *gh = malloc(2 * (dim + 1) * sizeof *gh);
    size_t *fill = malloc((dim + 1) * sizeof *fill);
    /* The curvature bound's window (lr_dbpg_window): per row, its non-zeros
     * in the blocks of the steps in flight; per block, its steps there. */
    uint32_t *overlap = calloc(d->rows ? d->rows : 1, sizeof *overlap);
    int *in_window = calloc((size_t)o->blocks, sizeof *in_window);
    int rc =
        ptr && rowv && nzv && margin && lw && gh && fill && overlap && in_window ? 0 : LOOM_ENOMEM;
    if (!rc) {
        for (size_t k = 0; k < d->nnz; k++) ptr[d->idx[k] + 1]++;
        for (uint64_t f = 0; f <= dim; f++) ptr[f + 1] += ptr[f];
        memcpy(fill, ptr, (dim + 1) * sizeof *fill);
        for (size_t i = 0; i < d->rows; i++)
            for (size_t k = d->row[i]; k < d->row[i + 1]; k++) {
                size_t p = fill[d->idx[k]]++;
                rowv[p] = i;
                nzv[p] = k;
            }
    }
    for (int epoch = 0; epoch < o->epochs && !rc; epoch++) {
        for (int b = 0; b < o->blocks; b++) {
            int64_t t = (int64_t)epoch * o->blocks + b, r = t - o->delay - 1;
            uint64_t lo, hi;
            if (r >= 0) {
                lr_dbpg_block(dim, o->blocks, (int)(r % o->blocks), &lo, &hi);
                dbpg_refresh(lo, hi, dim, w, lw, margin, d, ptr, rowv, nzv);
            }
            int moves[2], change[2] = {1, -1};
            lr_dbpg_window(t, o->delay, o->blocks, &moves[0], &moves[1]);
            for (int k = 0; k < 2; k++) {
                if (moves[k] < 0) continue;
                int *n = &in_window[moves[k]];
                if (change[k] > 0 ? (*n)++ != 0 : --*n != 0) continue;
                lr_dbpg_block(dim, o->blocks, moves[k], &lo, &hi);
                for (uint64_t f = lo; f < hi; f++) {
                    if (f == dim) {
                        for (size_t i = 0; i < d->rows; i++) overlap[i] += (uint32_t)change[k];
                    } else {
                        for (size_t q = ptr[f]; q < ptr[f + 1]; q++)
                            overlap[rowv[q]] += (uint32_t)change[k];
                    }
                }
            }
            lr_dbpg_block(dim, o->blocks, b, &lo, &hi);
            /* Jacobi within the block: every coordinate sees the same margins. */
            for (uint64_t f = lo; f < hi; f++) {
                double g = 0, h = 0;
                if (f == dim) {
                    for (size_t i = 0; i < d->rows; i++) {
                        double p = lr_sigmoid(margin[i]);
                        g += p - (d->label[i] > 0 ? 1.0 : 0.0);
                        h += p * (1 - p) * overlap[i];
                    }
                } else {
                    for (size_t q = ptr[f]; q < ptr[f + 1]; q++) {
                        size_t i = rowv[q];
                        double x = d->val[nzv[q]], p = lr_sigmoid(margin[i]);
                        g += (p - (d->label[i] > 0 ? 1.0 : 0.0)) * x;
                        h += p * (1 - p) * x * x * overlap[i];
                    }
                }
                gh[2 * f] = g;
                gh[2 * f + 1] = h;
            }
            for (uint64_t f = lo; f < hi; f++)
                w[f] = lr_dbpg_prox(w[f], gh[2 * f], gh[2 * f + 1], o->lr, f == dim ? 0 : o->l1,
                                    f == dim ? 0 : o->l2);
        }
        /* The epoch's loss reads every weight: the worker's copy catches up. */
        dbpg_refresh(0, dim + 1, dim, w, lw, margin, d, ptr, rowv, nzv);
    }
    free(ptr), free(rowv), free(nzv), free(margin), free(lw), free(gh), free(fill);
    free(overlap), free(in_window);
    return rc;
}

int lr_train_sequential(const lr_train_opts *o, const loom_dataset *train, uint64_t dim,
                        lr_model *out)
{
    double *w = calloc(dim + 1, sizeof *w);
    if (!w) return LOOM_ENOMEM;
    int rc = o->algo == LR_ALGO_SGD ? train_sgd(o, train, dim, w) : train_dbpg(o, train, dim, w);
    if (rc) {
        free(w);
        return rc;
    }
    out->dim = dim;
    out->bias = w[dim];
    out->w = w; /* the bias stays allocated past dim; lr_model_free frees the whole array */
    return 0;
}
