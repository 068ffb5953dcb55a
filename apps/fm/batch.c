/* batch: what a worker computes for one minibatch (thesis Algorithm 14's
 * worker): the batch's features J, which of them use V_i, and the gradients.
 *
 * The variable-length rows of DiFacto: every feature of J sends w_i, and only
 * the features of A (those past the memory-adaptive threshold, with w_i != 0)
 * also send V_i, through a second table of k-value rows. A feature outside A
 * has no V_i in this minibatch: it adds no interaction and gets no V
 * gradient, exactly as if V_i were 0, so the servers allocate V_i only when
 * a feature first enters some worker's A.
 *
 * The gradient is the mean over the batch's rows of the logistic loss's:
 *     dl/dw_i = e x_i,   dl/dV_if = e (x_i s_f - V_if x_i^2),   s = V^T x,
 * e = sigmoid(g(x)) - [y = +1] (thesis 10.15-10.16), plus l2_v V_i for every
 * feature of A: the frequency-adaptive penalty of thesis 10.14, paid only by
 * the features the batch holds. */
#include "fm/fm.h"

#include <stdlib.h>
#include <string.h>

int fm_share_init(fm_share *s, const loom_dataset *d, uint64_t dim, uint32_t k)
{
    *s = (fm_share){.d = d, .dim = dim, .k = k};
    s->keys = malloc((d->nnz ? d->nnz : 1) * sizeof *s->keys);
    s->col = malloc((d->nnz ? d->nnz : 1) * sizeof *s->col);
    if (!s->keys || !s->col) return LOOM_ENOMEM;
    memcpy(s->keys, d->idx, d->nnz * sizeof *s->keys);
    s->nkeys = app_sort_unique(s->keys, d->nnz);
    for (size_t e = 0; e < d->nnz; e++)
        s->col[e] = (uint32_t)app_lower_bound(s->keys, s->nkeys, d->idx[e]);
    size_t n = s->nkeys + 1; /* the bias, last */
    s->frequent = calloc(n, 1);
    s->counted = calloc(n, 1);
    s->stamp = calloc(n, sizeof *s->stamp);
    s->slot = malloc(n * sizeof *s->slot);
    return s->frequent && s->counted && s->stamp && s->slot ? 0 : LOOM_ENOMEM;
}

void fm_share_free(fm_share *s)
{
    free(s->keys);
    free(s->col);
    free(s->frequent);
    free(s->counted);
    free(s->stamp);
    free(s->slot);
    memset(s, 0, sizeof *s);
}

void fm_batch_free(fm_batch *b)
{
    free(b->keys), free(b->cols), free(b->counts), free(b->w), free(b->gw);
    free(b->vkeys), free(b->vslot), free(b->v), free(b->gv), free(b->sum);
    memset(b, 0, sizeof *b);
}

static int batch_reserve(fm_batch *b, size_t need, uint32_t k)
{
    if (need <= b->cap) return 0;
    fm_batch_free(b);
    b->cap = 2 * need;
    b->keys = malloc(b->cap * sizeof *b->keys);
    b->cols = malloc(b->cap * sizeof *b->cols);
    b->counts = malloc(b->cap * sizeof *b->counts);
    b->w = malloc(b->cap * sizeof *b->w);
    b->gw = malloc(b->cap * sizeof *b->gw);
    b->vkeys = malloc(b->cap * sizeof *b->vkeys);
    b->vslot = malloc(b->cap * sizeof *b->vslot);
    b->v = malloc(b->cap * k * sizeof *b->v);
    b->gv = malloc(b->cap * k * sizeof *b->gv);
    b->sum = malloc(k * sizeof *b->sum);
    if (b->keys && b->cols && b->counts && b->w && b->gw && b->vkeys && b->vslot && b->v && b->gv &&
        b->sum)
        return 0;
    fm_batch_free(b);
    return LOOM_ENOMEM;
}

int fm_batch_keys(fm_share *s, const size_t *order, size_t n, fm_batch *b)
{
    const loom_dataset *d = s->d;
    size_t nnz = 0;
    for (size_t r = 0; r < n; r++) nnz += d->row[order[r] + 1] - d->row[order[r]];
    int rc = batch_reserve(b, nnz + 1, s->k);
    if (rc) return rc;
    if (++s->batch == 0) { /* the stamps wrapped: forget them all */
        memset(s->stamp, 0, (s->nkeys + 1) * sizeof *s->stamp);
        s->batch = 1;
    }
    size_t nj = 0;
    for (size_t r = 0; r < n; r++)
        for (size_t e = d->row[order[r]]; e < d->row[order[r] + 1]; e++) {
            uint32_t c = s->col[e];
            if (s->stamp[c] != s->batch) {
                s->stamp[c] = s->batch;
                s->slot[c] = (uint32_t)nj;
                b->cols[nj] = c;
                b->counts[nj] = 0;
                b->keys[nj++] = s->keys[c];
            }
            b->counts[s->slot[c]]++;
        }
    b->cols[nj] = (uint32_t)s->nkeys;
    b->counts[nj] = (int64_t)n;
    b->keys[nj++] = s->dim; /* the bias, last */
    b->nj = nj;
    return 0;
}

void fm_batch_active(fm_share *s, fm_batch *b, uint64_t threshold)
{
    b->na = 0;
    for (size_t j = 0; j + 1 < b->nj; j++) {
        int on = (threshold == 0 || s->frequent[b->cols[j]]) && b->w[j] != 0;
        b->vslot[j] = on ? (uint32_t)b->na : UINT32_MAX;
        if (on) b->vkeys[b->na++] = b->keys[j];
    }
    b->vslot[b->nj - 1] = UINT32_MAX;
}

double fm_batch_gradient(const fm_share *s, const size_t *order, size_t n, double l2_v, fm_batch *b)
{
    const loom_dataset *d = s->d;
    const uint32_t k = s->k;
    memset(b->gw, 0, b->nj * sizeof *b->gw);
    memset(b->gv, 0, b->na * k * sizeof *b->gv);
    double loss = 0;
    for (size_t r = 0; r < n; r++) {
        size_t i = order[r];
        double m = b->w[b->nj - 1], sq = 0, ss = 0;
        memset(b->sum, 0, k * sizeof *b->sum);
        for (size_t e = d->row[i]; e < d->row[i + 1]; e++) {
            uint32_t j = s->slot[s->col[e]], a = b->vslot[j];
            double x = d->val[e];
            m += b->w[j] * x;
            if (a == UINT32_MAX) continue;
            const double *v = b->v + (size_t)a * k;
            for (uint32_t c = 0; c < k; c++) {
                b->sum[c] += v[c] * x;
                sq += v[c] * v[c] * x * x;
            }
        }
        for (uint32_t c = 0; c < k; c++) ss += b->sum[c] * b->sum[c];
        m += 0.5 * (ss - sq);
        loss += lr_logistic_loss(m, d->label[i]);
        double err = lr_sigmoid(m) - (d->label[i] > 0 ? 1.0 : 0.0);
        for (size_t e = d->row[i]; e < d->row[i + 1]; e++) {
            uint32_t j = s->slot[s->col[e]], a = b->vslot[j];
            double x = d->val[e];
            b->gw[j] += err * x;
            if (a == UINT32_MAX) continue;
            const double *v = b->v + (size_t)a * k;
            double *g = b->gv + (size_t)a * k;
            for (uint32_t c = 0; c < k; c++) g[c] += err * (x * b->sum[c] - v[c] * x * x);
        }
        b->gw[b->nj - 1] += err;
    }
    for (size_t j = 0; j < b->nj; j++) b->gw[j] /= (double)n;
    for (size_t a = 0; a < b->na * k; a++) b->gv[a] = b->gv[a] / (double)n + l2_v * b->v[a];
    return loss;
}
