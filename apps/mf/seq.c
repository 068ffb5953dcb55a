/* seq: the sequential reference of `loom train mf`.
 *
 * One process, no Loom, all the ratings: the same split, the same mean, the
 * same initial rows, the same epoch order and clocks, and sgd.c's batch code.
 * What a one-worker BSP job does through the servers is written out here on
 * plain arrays:
 *   - a row starts at 0 and receives its initial values as a pushed delta
 *     (0 + init, which is init);
 *   - each clock reads its rows, trains local copies, and adds new - old
 *     back (the servers' "sum" updater); with --threads T, T lanes each do
 *     so on their part of the ratings from the rows as the clock found
 *     them, and their deltas are added in lane order first (the update
 *     buffer), scaled as --merge says;
 *   - the mean is the sum of the training ratings in file order over their
 *     count, as the one worker pushes them.
 * A job's model that differs from this one in any bit points at the data
 * path, the consistency machinery or the servers (tests/mf compare them). */
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "mf/mf.h"

/* Rows of a batch gathered from table v. */
static void gather(double *rows, const double *v, const uint64_t *keys, size_t n, size_t w)
{
    for (size_t s = 0; s < n; s++) memcpy(rows + s * w, v + keys[s] * w, w * sizeof *rows);
}

/* The clock's summed deltas of rows keys[0..n) (rows of sum, like v) added into v. */
static void add_back(double *v, const double *sum, const uint64_t *keys, size_t n, size_t w)
{
    for (size_t s = 0; s < n; s++)
        for (size_t j = 0; j < w; j++) v[keys[s] * w + j] += sum[keys[s] * w + j];
}

/* Deltas of lane batches into a clock's sum: the first lane to touch a row
 * gives its delta, later ones are added (the update buffer's coalescing). */
static void add_delta(double *sum, uint64_t *stamp, uint64_t now, uint64_t *touched,
                      size_t *ntouched, const double *delta, const uint64_t *keys, size_t n,
                      size_t w, const double *scale)
{
    for (size_t s = 0; s < n; s++) {
        double *row = sum + keys[s] * w, f = scale ? scale[keys[s]] : 1;
        const double *d = delta + s * w;
        int first = stamp[keys[s]] != now;
        if (first) stamp[keys[s]] = now, touched[(*ntouched)++] = keys[s];
        for (size_t j = 0; j < w; j++) {
            double x = f != 1 ? d[j] * f : d[j]; /* train.c scales rows whose factor is not 1 */
            row[j] = first ? x : row[j] + x;
        }
    }
}

/* --merge damped with several lanes: each row's scale for an epoch's lr
 * (mf_merge_scale) from every lane's count of its ratings (rows x lanes). */
static void lane_scales(double *scale, const double *counts, size_t rows, int lanes, int syncs,
                        double lr, double reg)
{
    for (size_t r = 0; r < rows; r++)
        scale[r] = mf_merge_scale(counts + r * (size_t)lanes, lanes, syncs, lr, reg);
}

int mf_train_sequential(const mf_train_opts *o, const loom_ratings *r, mf_model *out,
                        mf_epoch_fn fn, void *arg)
{
    size_t w = (size_t)o->rank + 1;
    const int lanes = o->threads > 1 ? o->threads : 1;
    const size_t L = (size_t)lanes;
    const int damped = lanes > 1 && o->merge == MF_MERGE_DAMPED;
    mf_data train = {0}, test = {0};
    mf_batch *b = calloc(L, sizeof *b);
    size_t *order = NULL;
    size_t nrows = r->users + r->items;
    double *sum = malloc((nrows ? nrows : 1) * w * sizeof *sum);
    uint64_t *stamp = calloc(nrows ? nrows : 1, sizeof *stamp), now = 0;
    uint64_t *touched = malloc((nrows ? nrows : 1) * sizeof *touched);
    double *counts = calloc((nrows ? nrows : 1) * L, sizeof *counts);
    double *scale = malloc((nrows ? nrows : 1) * sizeof *scale);
    int rc = LOOM_ENOMEM;
    if (mf_model_alloc(out, o->rank, r->users, r->items)) {
        free(b), free(sum), free(stamp), free(touched), free(counts), free(scale);
        return LOOM_ENOMEM;
    }
    if (!b || !sum || !stamp || !touched || !counts || !scale) goto out;
    memcpy(out->user_id, r->user_id, r->users * sizeof *out->user_id);
    memcpy(out->item_id, r->item_id, r->items * sizeof *out->item_id);
    if (mf_data_split(r, o->seed, o->test_fraction, &train, &test)) goto out;
    for (size_t t = 0; t < L; t++)
        if (mf_batch_init(&b[t], o->rank, r->users, r->items)) goto out;
    if (!(order = malloc((train.n ? train.n : 1) * sizeof *order))) goto out;
    rc = LOOM_EINVAL;
    if (!train.n) goto out;
    double total, zero = 0; /* a table's row starts at +0: 0 + x differs from x for x = -0 */
    mf_data_summary(&train, &total, &out->min, &out->max);
    out->mean = total / (double)train.n;
    double row[MF_MAX_RANK + 1];
    for (size_t u = 0; u < r->users; u++) {
        mf_init_row(row, o->rank, o->seed, 0, u, o->init_std);
        for (size_t j = 0; j < w; j++) out->user[u * w + j] = zero + row[j];
    }
    for (size_t i = 0; i < r->items; i++) {
        mf_init_row(row, o->rank, o->seed, 1, i, o->init_std);
        for (size_t j = 0; j < w; j++) out->item[i * w + j] = zero + row[j];
    }
    /* Lane t: ratings [part[t], part[t + 1]) of the training ratings. */
    size_t part[APP_MAX_THREADS + 1];
    for (int t = 0; t < lanes; t++) app_team_split(train.n, lanes, t, &part[t], &part[t + 1]);
    for (int t = 0; t < lanes; t++)
        for (size_t k = part[t]; k < part[t + 1]; k++) {
            counts[train.user[k] * L + (size_t)t]++;
            counts[(r->users + train.item[k]) * L + (size_t)t]++;
        }
    double *usum = sum, *isum = sum + r->users * w;
    uint64_t *ustamp = stamp, *istamp = stamp + r->users;
    for (int epoch = 0; epoch < o->epochs; epoch++) {
        double lr = mf_epoch_lr(o->lr, o->lr_decay, epoch);
        if (damped) lane_scales(scale, counts, nrows, lanes, o->syncs, lr, o->reg);
        for (int t = 0; t < lanes; t++)
            mf_epoch_order(o->seed, t, epoch, part[t + 1] - part[t], order + part[t]);
        for (int c = 0; c < o->syncs; c++) {
            size_t nu = 0, ni = 0;
            now++;
            /* Every lane reads the rows as they were when the clock began. */
            for (int t = 0; t < lanes; t++) {
                mf_data p = {part[t + 1] - part[t], train.user + part[t], train.item + part[t],
                             train.rating + part[t]};
                size_t lo, hi, *ord = order + part[t];
                mf_clock_range(p.n, o->syncs, c, &lo, &hi);
                if ((rc = mf_batch_collect(&b[t], &p, ord + lo, hi - lo))) goto out;
                gather(b[t].urows, out->user, b[t].ukeys, b[t].nu, w);
                gather(b[t].irows, out->item, b[t].ikeys, b[t].ni, w);
                mf_batch_train(&b[t], &p, ord + lo, hi - lo, out->mean, lr, o->reg);
            }
            for (int t = 0; t < lanes; t++) {
                add_delta(usum, ustamp, now, touched, &nu, b[t].uold, b[t].ukeys, b[t].nu, w,
                          damped ? scale : NULL);
                add_delta(isum, istamp, now, touched + r->users, &ni, b[t].iold, b[t].ikeys,
                          b[t].ni, w, damped ? scale + r->users : NULL);
            }
            add_back(out->user, usum, touched, nu, w);
            add_back(out->item, isum, touched + r->users, ni, w);
        }
        if (fn) fn(arg, epoch, out);
    }
    rc = 0;
out:
    if (rc) mf_model_free(out);
    mf_data_free(&train);
    mf_data_free(&test);
    for (size_t t = 0; b && t < L; t++) mf_batch_free(&b[t]);
    free(b), free(order), free(sum), free(stamp), free(touched), free(counts), free(scale);
    return rc;
}
