/* sgd: what the distributed trainer and its sequential reference share.
 *
 * A one-worker BSP job must end with the very same doubles as the sequential
 * reference, so everything that decides a number lives here once: the SGD
 * step, the initial rows, the test split, the epoch order, how an epoch is
 * cut into clocks, and one clock's work on its batch of ratings.
 *
 * A clock's batch works on local copies of the rows its ratings touch: read
 * them (from the servers, or from the reference's arrays), keep the values
 * read, run SGD over the ratings in order, and hand back new - old per row.
 * The servers' "sum" updater then computes old + (new - old), which is not
 * always new in floating point; the reference applies the same deltas the
 * same way, so both agree exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "mf/mf.h"

double mf_sgd_step(double *urow, double *irow, uint32_t rank, double mean, double rating, double lr,
                   double reg)
{
    double e = rating - mf_dot_predict(mean, urow, irow, rank);
    urow[0] += lr * (e - reg * urow[0]);
    irow[0] += lr * (e - reg * irow[0]);
    for (uint32_t k = 1; k <= rank; k++) {
        double p = urow[k], q = irow[k];
        urow[k] += lr * (e * q - reg * p);
        irow[k] += lr * (e * p - reg * q);
    }
    return e;
}

void mf_init_row(double *out, uint32_t rank, uint64_t seed, int table, uint64_t row, double std)
{
    app_rng r;
    /* Streams 2^40 apart per table: rows of users and items never share one. */
    app_rng_seed(&r, seed, ((uint64_t)(table + 1) << 40) + row);
    out[0] = 0;
    for (uint32_t k = 1; k <= rank; k++) out[k] = std * app_rng_normal(&r);
}

int mf_is_test(uint64_t seed, uint64_t line, double p)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull ^ line;
    uint64_t h = app_splitmix64(&s);
    return (double)(h >> 11) * 0x1.0p-53 < p;
}

void mf_epoch_order(uint64_t seed, int rank, int epoch, size_t n, size_t *order)
{
    /* Stream numbers below 2^40, apart from mf_init_row's. */
    mf_permutation(seed, (uint64_t)rank * 1000003u + (uint64_t)epoch, n, order);
}

void mf_permutation(uint64_t seed, uint64_t stream, size_t n, size_t *order)
{
    app_rng r;
    app_rng_seed(&r, seed, stream);
    for (size_t i = 0; i < n; i++) order[i] = i;
    for (size_t i = n; i > 1; i--) { /* Fisher-Yates */
        size_t j = (size_t)(app_rng_next(&r) % i);
        size_t t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
}

double mf_epoch_lr(double lr, double decay, int epoch)
{
    double x = lr;
    for (int e = 0; e < epoch; e++) x *= decay; /* no pow(): the same bits everywhere */
    return x;
}

int mf_eval_due(const mf_train_opts *o, int epoch)
{
    return epoch + 1 == o->epochs || (o->eval_every > 0 && (epoch + 1) % o->eval_every == 0);
}

void mf_clock_range(size_t n, int syncs, int b, size_t *lo, size_t *hi)
{
    *lo = n * (size_t)b / (size_t)syncs;
    *hi = n * (size_t)(b + 1) / (size_t)syncs;
}

double mf_merge_scale(const double *counts, int workers, int syncs, double lr, double reg)
{
    /* Steps of a >= 1 overshoot on their own; (1 - a)^n is then taken as 0. */
    double keep = lr * (1 + reg) < 1 ? 1 - lr * (1 + reg) : 0, n = 0, local = 0;
    for (int w = 0; w < workers; w++) {
        if (counts[w] <= 0) continue;
        n += counts[w] / syncs;
        local += 1 - pow(keep, counts[w] / syncs);
    }
    /* One worker: both sides are the very same expression, so x / x = 1 exactly. */
    return local > 0 ? (1 - pow(keep, n)) / local : 1;
}

/* ---- ratings as row indices ---- */

void mf_data_free(mf_data *d)
{
    free(d->user);
    free(d->item);
    free(d->rating);
    *d = (mf_data){0};
}

static int data_alloc(mf_data *d, size_t n)
{
    size_t m = n ? n : 1;
    d->n = 0;
    d->user = malloc(m * sizeof *d->user);
    d->item = malloc(m * sizeof *d->item);
    d->rating = malloc(m * sizeof *d->rating);
    if (d->user && d->item && d->rating) return 0;
    mf_data_free(d);
    return LOOM_ENOMEM;
}

int mf_data_split(const loom_ratings *r, uint64_t seed, double p, mf_data *train, mf_data *test)
{
    if (data_alloc(train, r->n)) return LOOM_ENOMEM;
    if (data_alloc(test, p > 0 ? r->n : 0)) {
        mf_data_free(train);
        return LOOM_ENOMEM;
    }
    for (size_t k = 0; k < r->n; k++) {
        mf_data *d = p > 0 && mf_is_test(seed, r->line[k], p) ? test : train;
        d->user[d->n] = r->user[k];
        d->item[d->n] = r->item[k];
        d->rating[d->n] = r->rating[k];
        d->n++;
    }
    return 0;
}

int mf_data_map(const loom_ratings *test, const loom_ratings *train, mf_data *out)
{
    if (data_alloc(out, test->n)) return LOOM_ENOMEM;
    for (size_t k = 0; k < test->n; k++) {
        int64_t u = loom_ratings_user_index(train, test->user_id[test->user[k]]);
        int64_t i = loom_ratings_item_index(train, test->item_id[test->item[k]]);
        out->user[k] = u < 0 ? UINT32_MAX : (uint32_t)u;
        out->item[k] = i < 0 ? UINT32_MAX : (uint32_t)i;
        out->rating[k] = test->rating[k];
    }
    out->n = test->n;
    return 0;
}

void mf_data_summary(const mf_data *d, double *sum, double *min, double *max)
{
    double s = 0, lo = INFINITY, hi = -INFINITY;
    for (size_t k = 0; k < d->n; k++) {
        s += d->rating[k];
        lo = fmin(lo, d->rating[k]);
        hi = fmax(hi, d->rating[k]);
    }
    *sum = s, *min = lo, *max = hi;
}

double mf_model_sse(const mf_model *m, const mf_data *d)
{
    size_t w = (size_t)m->rank + 1;
    double sse = 0;
    for (size_t k = 0; k < d->n; k++) {
        const double *u = d->user[k] == UINT32_MAX ? NULL : m->user + (size_t)d->user[k] * w;
        const double *i = d->item[k] == UINT32_MAX ? NULL : m->item + (size_t)d->item[k] * w;
        double p = mf_predict_rows(m->mean, u, i, m->rank);
        p = p < m->min ? m->min : p > m->max ? m->max : p;
        sse += (d->rating[k] - p) * (d->rating[k] - p);
    }
    return sse;
}

/* ---- one clock's batch ---- */

int mf_batch_init(mf_batch *b, uint32_t rank, size_t users, size_t items)
{
    size_t w = rank + 1;
    *b = (mf_batch){.rank = rank, .users = users, .items = items};
    b->ukeys = malloc((users ? users : 1) * sizeof *b->ukeys);
    b->ikeys = malloc((items ? items : 1) * sizeof *b->ikeys);
    b->urows = malloc((users ? users : 1) * w * sizeof *b->urows);
    b->irows = malloc((items ? items : 1) * w * sizeof *b->irows);
    b->uold = malloc((users ? users : 1) * w * sizeof *b->uold);
    b->iold = malloc((items ? items : 1) * w * sizeof *b->iold);
    b->ustamp = calloc(users ? users : 1, sizeof *b->ustamp);
    b->istamp = calloc(items ? items : 1, sizeof *b->istamp);
    if (b->ukeys && b->ikeys && b->urows && b->irows && b->uold && b->iold && b->ustamp &&
        b->istamp)
        return 0;
    mf_batch_free(b);
    return LOOM_ENOMEM;
}

void mf_batch_free(mf_batch *b)
{
    free(b->ukeys), free(b->ikeys), free(b->uslot), free(b->islot);
    free(b->urows), free(b->irows), free(b->uold), free(b->iold);
    free(b->ustamp), free(b->istamp);
    *b = (mf_batch){0};
}

/* Add row x to the batch's keys on first touch. */
static void touch(uint32_t x, uint32_t *stamp, uint64_t *keys, size_t *nkeys)
{
    if (!stamp[x]) {
        keys[*nkeys] = x;
        stamp[x] = (uint32_t)++ * nkeys;
    }
}

/* Sort the batch's keys and stamp each row with 1 + its slot. Sorted keys
 * are what the client sends and indexes as they are: a pull then writes the
 * rows straight into urows/irows, without a buffer of its own in key order
 * (fresh pages cost a page fault each) and a copy back. A batch touching a
 * good part of the table's `rows` is sorted by a pass over the stamps. */
static void sort_keys(uint64_t *keys, size_t nkeys, uint32_t *stamp, size_t rows)
{
    if (nkeys * 16 < rows) {
        app_sort_unique(keys, nkeys);
        for (size_t s = 0; s < nkeys; s++) stamp[keys[s]] = (uint32_t)s + 1;
        return;
    }
    size_t s = 0;
    for (size_t x = 0; x < rows; x++)
        if (stamp[x]) keys[s] = x, stamp[x] = (uint32_t)++s;
}

/* One run of ratings to collect: d[idx[0..n)] (idx NULL: d[0..n)). */
typedef struct ratings_run {
    const mf_data *d;
    const size_t *idx;
    size_t n;
} ratings_run;

/* Collect the rows of the runs' ratings, run after run: the slots of run j's
 * ratings follow those of the runs before it. */
static int collect_runs(mf_batch *b, const ratings_run *runs, int nruns)
{
    /* Forget the previous batch's rows: only those stamps are set. */
    for (size_t s = 0; s < b->nu; s++) b->ustamp[b->ukeys[s]] = 0;
    for (size_t s = 0; s < b->ni; s++) b->istamp[b->ikeys[s]] = 0;
    b->nu = b->ni = 0;
    size_t n = 0;
    for (int j = 0; j < nruns; j++) n += runs[j].n;
    if (n > b->cap) {
        size_t cap = n > 2 * b->cap ? n : 2 * b->cap;
        uint32_t *us = realloc(b->uslot, cap * sizeof *us);
        if (us) b->uslot = us;
        uint32_t *is = realloc(b->islot, cap * sizeof *is);
        if (is) b->islot = is;
        if (!us || !is) return LOOM_ENOMEM;
        b->cap = cap;
    }
    for (int j = 0; j < nruns; j++) {
        const mf_data *d = runs[j].d;
        for (size_t r = 0; r < runs[j].n; r++) {
            size_t k = runs[j].idx ? runs[j].idx[r] : r;
            if (d->user[k] != UINT32_MAX) touch(d->user[k], b->ustamp, b->ukeys, &b->nu);
            if (d->item[k] != UINT32_MAX) touch(d->item[k], b->istamp, b->ikeys, &b->ni);
        }
    }
    sort_keys(b->ukeys, b->nu, b->ustamp, b->users);
    sort_keys(b->ikeys, b->ni, b->istamp, b->items);
    size_t at = 0;
    for (int j = 0; j < nruns; j++) {
        const mf_data *d = runs[j].d;
        for (size_t r = 0; r < runs[j].n; r++, at++) {
            size_t k = runs[j].idx ? runs[j].idx[r] : r;
            uint32_t u = d->user[k], i = d->item[k];
            b->uslot[at] = u == UINT32_MAX ? UINT32_MAX : b->ustamp[u] - 1;
            b->islot[at] = i == UINT32_MAX ? UINT32_MAX : b->istamp[i] - 1;
        }
    }
    return 0;
}

int mf_batch_collect(mf_batch *b, const mf_data *d, const size_t *idx, size_t n)
{
    ratings_run run = {d, idx, n};
    return collect_runs(b, &run, 1);
}

int mf_batch_collect_two(mf_batch *b, const mf_data *d1, const mf_data *d2)
{
    ratings_run runs[2] = {{d1, NULL, d1->n}, {d2, NULL, d2->n}};
    return collect_runs(b, runs, 2);
}

void mf_batch_train(mf_batch *b, const mf_data *d, const size_t *idx, size_t n, double mean,
                    double lr, double reg)
{
    size_t w = b->rank + 1;
    memcpy(b->uold, b->urows, b->nu * w * sizeof *b->uold);
    memcpy(b->iold, b->irows, b->ni * w * sizeof *b->iold);
    for (size_t r = 0; r < n; r++) {
        size_t k = idx ? idx[r] : r;
        mf_sgd_step(b->urows + b->uslot[r] * w, b->irows + b->islot[r] * w, b->rank, mean,
                    d->rating[k], lr, reg);
    }
    for (size_t j = 0; j < b->nu * w; j++) b->uold[j] = b->urows[j] - b->uold[j];
    for (size_t j = 0; j < b->ni * w; j++) b->iold[j] = b->irows[j] - b->iold[j];
}

double mf_batch_sse(const mf_batch *b, size_t first, const mf_data *d, const size_t *idx, size_t n,
                    double mean, double min, double max)
{
    size_t w = b->rank + 1;
    double sse = 0;
    for (size_t r = 0; r < n; r++) {
        size_t k = idx ? idx[r] : r;
        uint32_t us = b->uslot[first + r], is = b->islot[first + r];
        const double *urow = us == UINT32_MAX ? NULL : b->urows + us * w;
        const double *irow = is == UINT32_MAX ? NULL : b->irows + is * w;
        double p = mf_predict_rows(mean, urow, irow, b->rank);
        p = p < min ? min : p > max ? max : p;
        double e = d->rating[k] - p;
        sse += e * e;
    }
    return sse;
}
