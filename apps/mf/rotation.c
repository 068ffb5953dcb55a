/* rotation: `loom train mf --schedule rotation`, model-parallel serialisable
 * SGD on the static engine of loom/sched.h (STRADS-Static's SGD-MF; Orion's
 * 2D schedule with ring rotation).
 *
 * The users are cut into W blocks and the items into W blocks, both at equal
 * numbers of training ratings (every worker reads the whole training file, so
 * all compute the same cuts). Worker m owns user block m: it trains only the
 * ratings of those users and keeps their rows in local memory. The item
 * table "mf.items" is the engine's rotated table: in sub-iteration i of an
 * epoch worker m holds item block (i + m) mod W and runs SGD over its ratings
 * whose items fall in that block, in the worker's seeded epoch order. No two
 * workers ever touch the same user or item row at once, so the epoch is a
 * serial SGD pass in some order: no merge, no damping, no staleness.
 *
 * At the end of an epoch (the engine's aggregate()) the worker pushes its
 * user rows' change of the epoch, so that "mf.users" holds the model for the
 * evaluation and the model file, and the engine's barrier follows.
 *
 * With one worker there is one block of each: the epoch is sgd.c's steps on
 * every rating in mf_epoch_order(seed, 0, epoch), and every row ends as
 * old + (new - old), as the servers add deltas: seq.c with --syncs 1, bit for
 * bit (tests/mf compare them). */
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "mf/mf.h"

struct mf_rotation {
    loom_node *node;
    loom_table *users;
    const mf_train_opts *o;
    const mf_data *train; /* this worker's: the ratings of its user block */
    double mean, lr;
    uint64_t ubegin, uend;  /* the user block */
    double *urows, *ustart; /* its rows now, and at the epoch's start */
    double *udelta;         /* their change in the epoch */
    uint64_t *ukeys;        /* their keys, for the push */
    size_t *order, *picked; /* the epoch order; a block's ratings in it */
    size_t lo, hi;          /* the current rotation's part of the order */
    loom_sched *engine;
};

int mf_balanced_bounds(const uint32_t *row, size_t n, size_t rows, int parts, uint64_t *bounds)
{
    size_t P = (size_t)parts, *count = calloc(rows ? rows : 1, sizeof *count);
    if (!count) return LOOM_ENOMEM;
    for (size_t k = 0; k < n; k++) count[row[k]]++;
    size_t r = 0, seen = 0;
    bounds[0] = 0;
    for (size_t p = 1; p < P; p++) {
        /* At least one row per part, and enough left for the parts after it. */
        do seen += count[r++];
        while (r < rows - (P - p) && seen * P < n * p);
        bounds[p] = r;
    }
    bounds[P] = rows;
    free(count);
    return 0;
}

void mf_data_keep_users(mf_data *d, uint64_t begin, uint64_t end)
{
    size_t kept = 0;
    for (size_t k = 0; k < d->n; k++)
        if (d->user[k] >= begin && d->user[k] < end) {
            d->user[kept] = d->user[k], d->item[kept] = d->item[k];
            d->rating[kept++] = d->rating[k];
        }
    d->n = kept;
}

/* update(): SGD over this worker's ratings of the task's item block, in the
 * epoch order, on its local user rows and the block's item rows. */
static int update(void *arg, const loom_sched_task *task)
{
    mf_rotation *r = arg;
    const mf_data *d = r->train;
    size_t w = (size_t)r->o->rank + 1, n = 0;
    uint64_t ib = task->block.begin, ie = task->block.end;
    for (size_t k = r->lo; k < r->hi; k++)
        if (d->item[r->order[k]] >= ib && d->item[r->order[k]] < ie) r->picked[n++] = r->order[k];
    double *items = task->block.rows;
    for (size_t k = 0; k < n; k++) {
        size_t x = r->picked[k];
        mf_sgd_step(r->urows + (d->user[x] - r->ubegin) * w, items + (d->item[x] - ib) * w,
                    r->o->rank, r->mean, d->rating[x], r->lr, r->o->reg);
    }
    return 0;
}

/* aggregate(): the user rows' change of the rotation to the servers; the local
 * rows become start + change, as the servers have them. */
static int aggregate(void *arg, int64_t iteration)
{
    (void)iteration;
    mf_rotation *r = arg;
    size_t rows = (size_t)(r->uend - r->ubegin), n = rows * (r->o->rank + 1);
    for (size_t j = 0; j < n; j++) r->udelta[j] = r->urows[j] - r->ustart[j];
    for (size_t j = 0; j < n; j++) r->ustart[j] = r->urows[j] = r->ustart[j] + r->udelta[j];
    return rows ? loom_push(r->users, r->ukeys, rows, r->udelta) : 0;
}

int mf_rotation_open(loom_table *users, loom_table *items, const mf_train_opts *o,
                     const mf_data *train, const uint64_t ublock[2], const uint64_t *ibounds,
                     double mean, const char *log_path, mf_rotation **out)
{
    mf_rotation *r = calloc(1, sizeof *r);
    if (!r) return LOOM_ENOMEM;
    *r = (mf_rotation){.node = loom_table_node(users),
                       .users = users,
                       .o = o,
                       .train = train,
                       .mean = mean,
                       .ubegin = ublock[0],
                       .uend = ublock[1]};
    size_t rows = (size_t)(r->uend - r->ubegin), w = (size_t)o->rank + 1;
    size_t vals = (rows ? rows : 1) * w, n = train->n ? train->n : 1;
    r->urows = malloc(vals * sizeof *r->urows);
    r->ustart = malloc(vals * sizeof *r->ustart);
    r->udelta = malloc(vals * sizeof *r->udelta);
    r->ukeys = malloc((rows ? rows : 1) * sizeof *r->ukeys);
    r->order = malloc(n * sizeof *r->order);
    r->picked = malloc(n * sizeof *r->picked);
    int rc =
        r->urows && r->ustart && r->udelta && r->ukeys && r->order && r->picked ? 0 : LOOM_ENOMEM;
    for (size_t k = 0; !rc && k < rows; k++) r->ukeys[k] = r->ubegin + k;
    /* The user rows as the setup left them on the servers. */
    if (!rc && rows) rc = loom_pull_range(users, r->ubegin, r->uend, r->urows);
    if (!rc) memcpy(r->ustart, r->urows, rows * w * sizeof *r->ustart);
    loom_sched_static_opts so = LOOM_SCHED_STATIC_OPTS_DEFAULT;
    so.bounds = ibounds;
    so.update = update;
    so.aggregate = aggregate;
    so.user = r;
    so.log_path = log_path;
    if (!rc) rc = loom_sched_static_open(items, &so, &r->engine);
    if (rc) {
        mf_rotation_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

int mf_rotation_epoch(mf_rotation *r, int epoch)
{
    r->lr = mf_epoch_lr(r->o->lr, r->o->lr_decay, epoch);
    mf_epoch_order(r->o->seed, loom_rank(r->node), epoch, r->train->n, r->order);
    for (int c = 0; c < r->o->syncs; c++) {
        mf_clock_range(r->train->n, r->o->syncs, c, &r->lo, &r->hi);
        int rc = loom_sched_run(r->engine, 1);
        if (rc) return rc;
    }
    return 0;
}

void mf_rotation_free(mf_rotation *r)
{
    if (!r) return;
    loom_sched_close(r->engine);
    free(r->urows), free(r->ustart), free(r->udelta), free(r->ukeys), free(r->order);
    free(r->picked);
    free(r);
}
