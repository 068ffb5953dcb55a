/* seq: the sequential reference of `loom train mf`.
 *
 * One process, no Loom, all the ratings: the same split, the same mean, the
 * same initial rows, the same epoch order and clocks, and sgd.c's batch code.
 * What a one-worker BSP job does through the servers is written out here on
 * plain arrays:
 *   - a row starts at 0 and receives its initial values as a pushed delta
 *     (0 + init, which is init);
 *   - each clock reads its rows, trains local copies, and adds new - old
 *     back (the servers' "sum" updater);
 *   - the mean is the sum of the training ratings in file order over their
 *     count, as the one worker pushes them.
 * A job's model that differs from this one in any bit points at the data
 * path, the consistency machinery or the servers (tests/mf compare them). */
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "mf/mf.h"

/* Rows of batch b gathered from, and deltas added back into, table v. */
static void gather(double *rows, const double *v, const uint64_t *keys, size_t n, size_t w)
{
    for (size_t s = 0; s < n; s++) memcpy(rows + s * w, v + keys[s] * w, w * sizeof *rows);
}

static void add_back(double *v, const double *delta, const uint64_t *keys, size_t n, size_t w)
{
    for (size_t s = 0; s < n; s++)
        for (size_t j = 0; j < w; j++) v[keys[s] * w + j] += delta[s * w + j];
}

int mf_train_sequential(const mf_train_opts *o, const loom_ratings *r, mf_model *out,
                        mf_epoch_fn fn, void *arg)
{
    size_t w = (size_t)o->rank + 1;
    mf_data train = {0}, test = {0};
    mf_batch b = {0};
    size_t *order = NULL;
    int rc = LOOM_ENOMEM;
    if (mf_model_alloc(out, o->rank, r->users, r->items)) return LOOM_ENOMEM;
    memcpy(out->user_id, r->user_id, r->users * sizeof *out->user_id);
    memcpy(out->item_id, r->item_id, r->items * sizeof *out->item_id);
    if (mf_data_split(r, o->seed, o->test_fraction, &train, &test)) goto out;
    if (mf_batch_init(&b, o->rank, r->users, r->items)) goto out;
    if (!(order = malloc((train.n ? train.n : 1) * sizeof *order))) goto out;
    rc = LOOM_EINVAL;
    if (!train.n) goto out;
    double sum, zero = 0; /* a table's row starts at +0: 0 + x differs from x for x = -0 */
    mf_data_summary(&train, &sum, &out->min, &out->max);
    out->mean = sum / (double)train.n;
    double row[MF_MAX_RANK + 1];
    for (size_t u = 0; u < r->users; u++) {
        mf_init_row(row, o->rank, o->seed, 0, u, o->init_std);
        for (size_t j = 0; j < w; j++) out->user[u * w + j] = zero + row[j];
    }
    for (size_t i = 0; i < r->items; i++) {
        mf_init_row(row, o->rank, o->seed, 1, i, o->init_std);
        for (size_t j = 0; j < w; j++) out->item[i * w + j] = zero + row[j];
    }
    for (int epoch = 0; epoch < o->epochs; epoch++) {
        double lr = mf_epoch_lr(o->lr, o->lr_decay, epoch);
        mf_epoch_order(o->seed, 0, epoch, train.n, order);
        for (int c = 0; c < o->syncs; c++) {
            size_t lo, hi;
            mf_clock_range(train.n, o->syncs, c, &lo, &hi);
            if ((rc = mf_batch_collect(&b, &train, order + lo, hi - lo))) goto out;
            gather(b.urows, out->user, b.ukeys, b.nu, w);
            gather(b.irows, out->item, b.ikeys, b.ni, w);
            mf_batch_train(&b, &train, order + lo, hi - lo, out->mean, lr, o->reg);
            add_back(out->user, b.uold, b.ukeys, b.nu, w);
            add_back(out->item, b.iold, b.ikeys, b.ni, w);
        }
        if (fn) fn(arg, epoch, out);
    }
    rc = 0;
out:
    if (rc) mf_model_free(out);
    mf_data_free(&train);
    mf_data_free(&test);
    mf_batch_free(&b);
    free(order);
    return rc;
}
