/* train: distributed matrix factorisation on Loom, run on every node of a job.
 *
 * The model is two dense f64 tables on the servers, "mf.users" and
 * "mf.items", one row per user (item) of width K + 1: the bias, then the K
 * factors. Their updater is "sum" and their consistency the job's
 * (--consistency, default SSP(2)), so staleness is counted in clocks.
 *
 * Data: worker r of W reads share r of the training file (the reader's byte
 * ranges); every worker knows the whole file's id mapping, so row indices
 * agree without talking. --test-fraction holds out ratings by a hash of
 * (seed, line), which no sharding changes; a --test file is read sharded too
 * and mapped through the training ids. The mean and the rating range come
 * from small tables every worker adds its share's sums and extremes into.
 *
 * Start: row r's initial values (sgd.c: a stream of (seed, table, r)) are
 * pushed by worker r mod W, then a clock and a barrier make them visible to
 * all, under every consistency model.
 *
 * An epoch is --syncs clocks. In each, a worker takes the next 1/syncs of its
 * ratings in a seeded order of (seed, rank, epoch), pulls the user and item
 * rows they touch, trains local copies by SGD over them in order, pushes new
 * - old for every touched row, and calls loom_clock(). Every worker runs the
 * same number of clocks whatever the size of its share.
 *
 * The servers add the workers' deltas. Rows several workers rate (popular
 * items) would then move up to W times as far as one sequential pass moves
 * them, and with W = 4 on MovieLens-like data that diverges, so by default
 * (--merge damped) each delta is first scaled per row by mf_merge_scale(),
 * from every worker's count of the row's ratings (agreed at start through
 * width-W count tables). A row only one worker rates keeps its delta as is:
 * under BSP with one worker this is exactly seq.c's algorithm.
 *
 * Compute threads (--threads T, apps/common/team.h) share the worker's
 * client. Each is a lane of its own: thread t of worker r is lane r T + t of
 * W T, with a contiguous part of the worker's ratings (app_team_split), its
 * own order and batches, and its own column in the count tables. In a clock
 * the lanes list their rows, pull them one lane after the other (nearly
 * every lane touches the popular items: after the first lane they come from
 * the shared cache, where concurrent pulls would each miss and fetch them),
 * train in parallel, and their deltas are pushed in lane order (the update
 * buffer adds them the same way in every run); the process clocks once. seq.c
 * computes the same with T lanes.
 *
 * After every --eval-every epochs and the last (evaluate()), each worker
 * pulls the rows of all of its training and test ratings, under BSP without
 * a barrier (the clock already waits for the epoch's updates), under SSP and
 * ASP after one, and adds its squared errors, counts, updates and traffic
 * into a BSP statistics table. The rows stay cached for the next epoch's
 * first pull in the same clock, so evaluating costs no second fetch. Worker
 * 0 reads the totals after its next clock (the read waits for every
 * worker's), instead of at a second barrier, with the next evaluation's rows
 * (one round trip for both), and prints a progress line and a metrics JSON
 * line; a last clock after the last epoch makes its totals readable. At the
 * end worker 0 pulls both tables and saves the model. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "common/files.h"

#include "mf/mf.h"

/* ST_MESSAGES, ST_RAW, ST_WIRE: table traffic as plain rows and as sent (docs/FILTERS.md);
 * ST_MANAGED, ST_PUSHED: rows sent early and cached rows servers' pushes refreshed (--priority). */
enum {
    ST_TRAIN_SSE,
    ST_TRAIN_N,
    ST_TEST_SSE,
    ST_TEST_N,
    ST_UPDATES,
    ST_SENT,
    ST_RECEIVED,
    ST_MESSAGES,
    ST_RAW,
    ST_WIRE,
    ST_MANAGED,
    ST_PUSHED,
    ST_N
};

#define PROG            "loom train mf"
#define TRY(what, expr) APP_TRY(PROG, what, expr)

/* Row [max, -min] of the ratings: the first push sets a column (its state
 * value says one came), later ones keep the larger. A "sum" table cannot do this,
 * and a row starting at 0 would clip negative ratings. */
static void range_updater(const loom_update *u, void *user)
{
    (void)user;
    double *v = u->value, *seen = u->state;
    const double *d = u->delta;
    for (uint32_t j = 0; j < u->width; j++)
        if (!seen[j] || d[j] > v[j]) v[j] = d[j], seen[j] = 1;
}

/* --merge damped: every worker's training-rating count of each row this
 * worker touches (a table of width W, each worker adding its column), and
 * the epoch's scale factor of each such row (mf_merge_scale). */
typedef struct row_counts {
    size_t n;       /* rows this worker touches */
    uint64_t *keys; /* those rows */
    double *count;  /* n x W counts */
    double *scale;  /* per row of the table (1 where untouched) */
    loom_table *t;  /* where the workers add their columns */
} row_counts;

/* One compute thread's part of the work (see the top of the file). */
typedef struct lane {
    mf_data part; /* a view of the worker's training ratings */
    mf_batch b;
    size_t *order;
} lane;

/* A worker's state. */
typedef struct worker {
    loom_node *node;
    const mf_cli *cli;
    const loom_ratings *r;
    mf_data train, test;
    loom_table *users, *items;
    app_stats stats;
    app_stats sum;     /* the shares' rating sums, counts and skipped lines */
    loom_table *range; /* the ratings' [max, -min] */
    app_team *team;
    int threads;
    lane *lanes;               /* one per compute thread */
    int clock;                 /* the epoch's clock the lanes work on */
    int step;                  /* the clock's step (--steps) the lanes work on */
    double lr;                 /* the epoch's learning rate */
    row_counts ucount, icount; /* --merge damped */
    double mean, min, max;
    double start;
    double train_s;        /* seconds of training clocks since the last evaluation */
    int epochs_since_eval; /* epochs trained since then */
    /* worker 0: the last evaluation, whose totals become readable at the next clock */
    struct {
        int epoch; /* -1: none to report */
        double time_s, train_s;
    } pending;
    /* This worker's last push of statistics, sent without waiting: waited
     * for before the next (its values must stay until then) and at the end. */
    double stats_v[ST_N];
    loom_ts stats_ts; /* 0: none in flight */
    FILE *metrics;
    size_t skipped[2]; /* malformed lines of this share of the training and test files */
    /* Resumed from a checkpoint: the setup's sums are on the servers already,
     * and training goes on from epoch `first_epoch`, clock `first_clock`. */
    int resuming, first_epoch, first_clock;
    /* --schedule rotation (rotation.c) */
    uint64_t ublock[2];  /* this worker's users */
    uint64_t *ibounds;   /* the item blocks: W + 1 keys */
    size_t *urow, *irow; /* the table row of each user and item index */
    mf_rotation *rot;
} worker;

/* Agree on the mean and range of the training ratings (after the split):
 * push this share's, and after the setup's barrier read everyone's;
 * worker 0 reports the malformed lines --skip-bad skipped, summed. */
static int push_summary(worker *w)
{
    TRY("open the summary table", app_stats_open(w->node, "mf.mean", 5, &w->sum));
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_F64;
    o.width = 2;
    o.storage = LOOM_DENSE;
    o.key_end = 1;
    o.consistency = LOOM_ASP;
    o.updater = "mf.range";
    o.cache = 0;
    TRY("open the range table", loom_table_open(w->node, "mf.range", &o, &w->range));
    double s, lo, hi;
    mf_data_summary(&w->train, &s, &lo, &hi);
    /* What the job would lose with this worker (--on-worker-failure continue). */
    loom_report_metric(w->node, "share", (double)w->train.n);
    double mine[5] = {s, (double)w->train.n, (double)w->skipped[0], (double)w->skipped[1],
                      (double)w->test.n};
    if (w->resuming) return 0; /* the checkpoint has the sums */
    TRY("push the mean", app_stats_add(&w->sum, 0, mine));
    if (w->train.n) {
        uint64_t key = 0;
        double ext[2] = {hi, -lo};
        TRY("push the range", loom_push(w->range, &key, 1, ext)); /* the barrier sends it */
    }
    return 0;
}

/* After the setup's barrier: this worker's columns of the counts (--merge
 * damped), the summary and the range, in one round trip. */
static int read_summary(worker *w, int damped)
{
    double all[5], ext[2];
    loom_ts ts[4];
    uint64_t key = 0;
    int started = 0, rc = app_stats_read_async(&w->sum, 0, all, &ts[0]);
    if (!rc) started++;
    if (!rc && !(rc = loom_pull_async(w->range, &key, 1, ext, &ts[started]))) started++;
    row_counts *counts[2] = {&w->ucount, &w->icount};
    for (int k = 0; k < 2 && damped && !rc; k++)
        if (counts[k]->n && !(rc = loom_pull_async(counts[k]->t, counts[k]->keys, counts[k]->n,
                                                   counts[k]->count, &ts[started])))
            started++;
    for (int k = 0; k < started; k++) { /* even after an error: they write into w */
        int done = loom_wait(w->node, ts[k]);
        if (!rc) rc = done;
    }
    TRY("read the ratings' summary and counts", rc);
    const char *path[2] = {w->cli->job.train_path, w->cli->job.test_path};
    for (int f = 0; f < 2; f++)
        if (loom_rank(w->node) == 0 && all[2 + f] > 0)
            fprintf(stderr, "loom train mf: skipped %.0f malformed line(s) in %s\n", all[2 + f],
                    path[f]);
    if (all[1] < 1) {
        fprintf(stderr, "loom train mf: %s: no training ratings\n", w->cli->job.train_path);
        return 1;
    }
    if (w->cli->job.test_path && all[4] < 1) { /* an RMSE of nothing is not 0 */
        fprintf(stderr, "loom train mf: %s: no test ratings\n", w->cli->job.test_path);
        return 1;
    }
    w->mean = all[0] / all[1];
    w->max = ext[0];
    w->min = -ext[1];
    return 0;
}

static int open_tables(worker *w)
{
    const mf_train_opts *o = &w->cli->train;
    loom_table_opts to = LOOM_TABLE_OPTS_DEFAULT;
    to.type = LOOM_F64;
    to.width = o->rank + 1;
    to.storage = LOOM_DENSE;
    to.consistency = (loom_consistency)w->cli->job.consistency;
    to.staleness = w->cli->job.staleness;
    to.filter_push = w->cli->job.filter_push;
    to.filter_pull = w->cli->job.filter_pull;
    app_job_comm(&w->cli->job, &to);
    if (o->schedule == MF_SCHEDULE_ROTATION) { /* what the static engine needs (loom/sched.h) */
        to.consistency = LOOM_ASP;
        to.cache = 0;
    }
    to.key_end = w->r->users ? w->r->users : 1;
    TRY("open mf.users", loom_table_open(w->node, "mf.users", &to, &w->users));
    to.key_end = w->r->items ? w->r->items : 1;
    TRY("open mf.items", loom_table_open(w->node, "mf.items", &to, &w->items));
    TRY("open the statistics table", app_stats_open_clocked(w->node, "mf.stats", ST_N, &w->stats));
    return 0;
}

/* Push the initial values of rows rank, rank + W, ... of table t (0 users, 1 items). */
static int push_initial(worker *w, loom_table *t, int table, size_t rows)
{
    const mf_train_opts *o = &w->cli->train;
    size_t width = (size_t)o->rank + 1, nw = (size_t)loom_num_workers(w->node);
    size_t me = (size_t)loom_rank(w->node), mine = rows > me ? (rows - me + nw - 1) / nw : 0;
    if (!mine || w->resuming) return 0;
    uint64_t *keys = malloc(mine * sizeof *keys);
    double *v = malloc(mine * width * sizeof *v);
    int rc = keys && v ? 0 : LOOM_ENOMEM;
    for (size_t k = 0; k < mine && !rc; k++) {
        keys[k] = me + k * nw;
        mf_init_row(v + k * width, o->rank, o->seed, table, keys[k], o->init_std);
    }
    if (!rc) rc = loom_push(t, keys, mine, v);
    free(keys);
    free(v);
    TRY("push the initial rows", rc);
    return 0;
}

static void row_counts_free(row_counts *rc)
{
    free(rc->keys), free(rc->count), free(rc->scale);
}

/* Push this worker's columns of the counts (one per lane); read_summary() reads all of
 * them after the setup's barrier. */
static int row_counts_push(worker *w, const char *name, int items, size_t rows, row_counts *rc)
{
    /* One column per lane: lane t of worker r is column r T + t. */
    size_t T = (size_t)w->threads, nw = (size_t)loom_num_workers(w->node) * T;
    size_t me = (size_t)loom_rank(w->node) * T;
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_F64;
    o.width = (uint32_t)nw;
    o.storage = LOOM_DENSE;
    o.key_end = rows ? rows : 1;
    o.consistency = LOOM_ASP;
    o.cache = 0;
    TRY("open the count table", loom_table_open(w->node, name, &o, &rc->t));
    rc->scale = malloc((rows ? rows : 1) * sizeof *rc->scale);
    double *mine = calloc((rows ? rows : 1) * T, sizeof *mine); /* rows x T */
    if (!rc->scale || !mine) {
        free(mine);
        return app_fail(PROG, "count the ratings of each row", LOOM_ENOMEM);
    }
    for (size_t r = 0; r < rows; r++) rc->scale[r] = 1;
    for (size_t l = 0; l < T; l++) {
        const mf_data *p = &w->lanes[l].part;
        for (size_t k = 0; k < p->n; k++) mine[(items ? p->item[k] : p->user[k]) * T + l]++;
    }
    for (size_t r = 0; r < rows; r++) {
        int touched = 0;
        for (size_t l = 0; l < T; l++) touched |= mine[r * T + l] > 0;
        rc->n += touched;
    }
    rc->keys = malloc((rc->n ? rc->n : 1) * sizeof *rc->keys);
    rc->count = calloc((rc->n ? rc->n : 1) * nw, sizeof *rc->count);
    int err = rc->keys && rc->count ? 0 : LOOM_ENOMEM;
    for (size_t r = 0, k = 0; r < rows && !err; r++) {
        int touched = 0;
        for (size_t l = 0; l < T; l++) touched |= mine[r * T + l] > 0;
        if (!touched) continue;
        rc->keys[k] = r;
        for (size_t l = 0; l < T; l++) rc->count[k * nw + me + l] = mine[r * T + l];
        k++;
    }
    free(mine);
    if (!err && rc->n && !w->resuming) err = loom_push(rc->t, rc->keys, rc->n, rc->count);
    TRY("count the ratings of each row", err);
    return 0;
}

/* The scale of every row of rc for an epoch's learning rate. */
static void row_counts_scale(row_counts *rc, int workers, int syncs, double lr, double reg)
{
    for (size_t k = 0; k < rc->n; k++)
        rc->scale[rc->keys[k]] =
            mf_merge_scale(rc->count + k * (size_t)workers, workers, syncs, lr, reg);
}

/* Scale the batch's deltas (rows of width w) by their rows' factors. */
static void scale_deltas(double *delta, const uint64_t *keys, size_t n, size_t w,
                         const double *scale)
{
    for (size_t s = 0; s < n; s++)
        if (scale[keys[s]] != 1)
            for (size_t j = 0; j < w; j++) delta[s * w + j] *= scale[keys[s]];
}

/* Pull batch b's rows into b->urows / b->irows, both tables at once (one
 * round trip instead of two). */
static int pull_rows(worker *w, mf_batch *b)
{
    loom_ts ts[2];
    int started = 0, rc = 0;
    if (b->nu && !(rc = loom_pull_async(w->users, b->ukeys, b->nu, b->urows, &ts[0]))) started++;
    if (!rc && b->ni && !(rc = loom_pull_async(w->items, b->ikeys, b->ni, b->irows, &ts[started])))
        started++;
    for (int k = 0; k < started; k++) { /* even after an error: they write into b */
        int done = loom_wait(w->node, ts[k]);
        if (!rc) rc = done;
    }
    TRY("pull rows", rc);
    return 0;
}

/* Lane l's ratings of the current step of the current clock: an epoch is
 * syncs clocks of --steps steps. */
static void step_range(const worker *w, const lane *l, size_t *lo, size_t *hi)
{
    int steps = w->cli->train.steps;
    mf_clock_range(l->part.n, w->cli->train.syncs * steps, w->clock * steps + w->step, lo, hi);
}

/* Lane t's batch of the current step: the rows its ratings touch. */
static int lane_collect(void *arg, int t)
{
    worker *w = arg;
    lane *l = &w->lanes[t];
    size_t lo, hi;
    step_range(w, l, &lo, &hi);
    TRY("batch", mf_batch_collect(&l->b, &l->part, l->order + lo, hi - lo));
    return 0;
}

/* Lane t, its rows pulled: train them and leave the (scaled) deltas in its
 * batch for the push. */
static int lane_train(void *arg, int t)
{
    worker *w = arg;
    lane *l = &w->lanes[t];
    const mf_train_opts *o = &w->cli->train;
    size_t lo, hi;
    step_range(w, l, &lo, &hi);
    mf_batch_train(&l->b, &l->part, l->order + lo, hi - lo, w->mean, w->lr, o->reg);
    if (o->merge == MF_MERGE_DAMPED) {
        scale_deltas(l->b.uold, l->b.ukeys, l->b.nu, o->rank + 1, w->ucount.scale);
        scale_deltas(l->b.iold, l->b.ikeys, l->b.ni, o->rank + 1, w->icount.scale);
    }
    return 0;
}

/* ---- checkpoints (docs/FAULTS.md) ----
 * A worker's state at the end of a clock (all of the clock's --steps pushed):
 * the epoch, the next clock of it, the evaluation bookkeeping and --steps (a
 * clock's slices of the ratings and the damping depend on it); the orders
 * and scales are recomputed from the seed and the counts, the factors are
 * the servers'. Then the users' and items'
 * file ids (the model file's mapping; tools/checkpoint.c reads them back). */
#define MF_STATE_MAGIC   0x3143464du /* "MFC1" */
#define MF_STATE_DOUBLES 10

static int save_state(worker *w, int epoch, int next_clock)
{
    double st[MF_STATE_DOUBLES] = {MF_STATE_MAGIC,     epoch,
                                   next_clock,         w->epochs_since_eval,
                                   w->pending.epoch,   w->pending.time_s,
                                   w->pending.train_s, w->train_s,
                                   (double)w->train.n, w->cli->train.steps};
    /* Then the file's ids of the rows, for `loom checkpoint export` (and a check on resume). */
    const loom_ratings *r = w->r;
    size_t len = sizeof st + 16 + (r->users + r->items) * 8;
    uint8_t *b = malloc(len);
    if (!b) return app_fail(PROG, "checkpoint", LOOM_ENOMEM);
    uint64_t counts[2] = {r->users, r->items};
    memcpy(b, st, sizeof st);
    memcpy(b + sizeof st, counts, 16);
    memcpy(b + sizeof st + 16, r->user_id, r->users * 8);
    memcpy(b + sizeof st + 16 + r->users * 8, r->item_id, r->items * 8);
    int rc = loom_checkpoint_save(w->node, b, len);
    free(b);
    TRY("checkpoint", rc);
    return 0;
}

static int load_state(worker *w)
{
    const void *data;
    size_t len;
    if (loom_checkpoint_resumed(w->node, &data, &len, NULL)) return 0;
    const loom_ratings *r = w->r;
    const uint8_t *b = data;
    double st[MF_STATE_DOUBLES] = {0};
    uint64_t counts[2] = {r->users, r->items};
    int ok = len == sizeof st + 16 + (r->users + r->items) * 8;
    if (ok) memcpy(st, data, sizeof st);
    ok = ok && st[0] == MF_STATE_MAGIC && st[8] == (double)w->train.n &&
         st[2] <= w->cli->train.syncs && st[9] == w->cli->train.steps &&
         !memcmp(b + sizeof st, counts, 16) &&
         !memcmp(b + sizeof st + 16, r->user_id, r->users * 8) &&
         !memcmp(b + sizeof st + 16 + r->users * 8, r->item_id, r->items * 8);
    if (!ok) {
        fprintf(stderr,
                PROG ": worker %d: the checkpoint does not fit this job (other training "
                     "data, --syncs or --steps?)\n",
                loom_rank(w->node));
        return 1;
    }
    w->resuming = 1;
    w->first_epoch = (int)st[1];
    w->first_clock = (int)st[2];
    w->epochs_since_eval = (int)st[3];
    w->pending.epoch = (int)st[4];
    w->pending.time_s = st[5];
    w->pending.train_s = st[6];
    w->train_s = st[7];
    return 0;
}

/* One epoch's clocks (a resumed one from clock `first`). */
static int train_epoch(worker *w, int epoch, int first)
{
    const mf_train_opts *o = &w->cli->train;
    double lr = mf_epoch_lr(o->lr, o->lr_decay, epoch);
    if (o->merge == MF_MERGE_DAMPED) {
        int lanes = loom_num_workers(w->node) * w->threads;
        /* With --steps each step's deltas are damped as a clock's, with or
         * without managed communication (--priority): the damping is then
         * the same in both, and a comparison of the two measures only what
         * the servers' row pushes bring while the clock runs (docs/MF.md). */
        int merges = o->syncs * o->steps;
        row_counts_scale(&w->ucount, lanes, merges, lr, o->reg);
        row_counts_scale(&w->icount, lanes, merges, lr, o->reg);
    }
    for (int t = 0; t < w->threads; t++)
        mf_epoch_order(o->seed, loom_rank(w->node) * w->threads + t, epoch, w->lanes[t].part.n,
                       w->lanes[t].order);
    w->lr = lr;
    for (w->clock = first; w->clock < o->syncs; w->clock++) {
        /* Later steps read their rows from the cache, which the servers'
         * row pushes (--priority) refresh while the clock runs. */
        for (w->step = 0; w->step < o->steps; w->step++) {
            if (app_team_run(w->team, lane_collect, w)) return 1;
            /* The lanes' rows one lane after the other: most rows of a lane
             * after the first (popular items) then come from the cache. */
            for (int t = 0; t < w->threads; t++)
                if (pull_rows(w, &w->lanes[t].b)) return 1;
            if (app_team_run(w->team, lane_train, w)) return 1;
            for (int t = 0; t < w->threads; t++) {
                mf_batch *b = &w->lanes[t].b;
                if (b->nu) TRY("push user rows", loom_push(w->users, b->ukeys, b->nu, b->uold));
                if (b->ni) TRY("push item rows", loom_push(w->items, b->ikeys, b->ni, b->iold));
            }
        }
        TRY("clock", loom_clock(w->node));
        /* The last training clock is the final checkpoint's (ft.h). */
        int last = epoch == o->epochs - 1 && w->clock == o->syncs - 1;
        if ((last ? loom_checkpoint_final(w->node) : loom_checkpoint_due(w->node)) &&
            save_state(w, epoch, w->clock + 1))
            return 1;
    }
    return 0;
}

/* Wait for this worker's last push of statistics, if one is in flight. */
static int stats_pushed(worker *w)
{
    loom_ts ts = w->stats_ts;
    w->stats_ts = 0;
    if (ts) TRY("push statistics", loom_wait(w->node, ts));
    return 0;
}

/* Worker 0, at least one clock after an evaluation: print the totals st of
 * that evaluation (read by the caller: the read waits for every worker's
 * clock) as a progress line and a metrics line. */
static int report(worker *w, const double *st)
{
    const mf_cli *c = w->cli;
    int epoch = w->pending.epoch;
    double train_s = w->pending.train_s, time_s = w->pending.time_s;
    w->pending.epoch = -1;
    double train_rmse = st[ST_TRAIN_N] > 0 ? sqrt(st[ST_TRAIN_SSE] / st[ST_TRAIN_N]) : 0;
    int has_test = st[ST_TEST_N] > 0;
    double test_rmse = has_test ? sqrt(st[ST_TEST_SSE] / st[ST_TEST_N]) : 0;
    double ups = train_s > 0 ? st[ST_UPDATES] / train_s : 0;
    loom_report_metric(w->node, "epoch", epoch + 1); /* for the status page */
    loom_report_metric(w->node, "train_rmse", train_rmse);
    if (has_test) loom_report_metric(w->node, "test_rmse", test_rmse);
    char lost_json[96], lost_text[128];
    app_lost_note(w->node, "ratings", lost_json, sizeof lost_json, lost_text, sizeof lost_text);
    if (!c->job.quiet) {
        char testpart[64] = "";
        if (has_test) snprintf(testpart, sizeof testpart, "  test rmse %.4f", test_rmse);
        fprintf(stderr,
                "epoch %3d  train rmse %.4f%s  %.0f updates/s  sent %.1f MB  recv %.1f MB  "
                "%.1f s%s\n",
                epoch + 1, train_rmse, testpart, ups, st[ST_SENT] / 1e6, st[ST_RECEIVED] / 1e6,
                time_s, lost_text);
    }
    if (w->metrics) {
        char testval[32] = "null";
        if (has_test) snprintf(testval, sizeof testval, "%.9g", test_rmse);
        fprintf(w->metrics,
                "{\"epoch\": %d, \"time_s\": %.3f, \"train_rmse\": %.9g, \"test_rmse\": %s, "
                "\"lr\": %.9g, \"updates_per_s\": %.1f, \"bytes_sent\": %.0f, "
                "\"bytes_received\": %.0f, \"messages\": %.0f, \"bytes_raw\": %.0f, "
                "\"bytes_wire\": %.0f, \"managed_rows_sent\": %.0f, \"pushed_rows_received\": "
                "%.0f%s}\n",
                epoch + 1, time_s, train_rmse, testval,
                mf_epoch_lr(c->train.lr, c->train.lr_decay, epoch), ups, st[ST_SENT],
                st[ST_RECEIVED], st[ST_MESSAGES], st[ST_RAW], st[ST_WIRE], st[ST_MANAGED],
                st[ST_PUSHED], lost_json);
        /* Each line now, so that a full disk stops the run rather than its end. */
        if (app_metrics_flush(PROG, w->metrics, c->job.metrics_path)) return 1;
    }
    if (!isfinite(train_rmse)) {
        fprintf(stderr,
                PROG ": the train rmse is %g after epoch %d: training diverged (try a smaller --lr "
                     "or a larger --reg)\n",
                train_rmse, epoch + 1);
        return 1;
    }
    return 0;
}

/* Worker 0 after a clock that ends the epoch after an evaluation (or the
 * last): read that evaluation's totals and report them. */
static int read_report(worker *w)
{
    double st[ST_N];
    if (loom_rank(w->node) || w->pending.epoch < 0) return 0;
    TRY("pull statistics", app_stats_read(&w->stats, w->pending.epoch, st));
    return report(w, st);
}

/* Every worker after the epochs due (mf_eval_due): the RMSE of its share of
 * the training and test ratings with the model as the epoch left it, added
 * into the epoch's statistics.
 *
 * Under BSP no barrier is needed: this clock's pulls wait until every worker
 * has ended the epoch's last clock, and then see all of its updates. Under
 * SSP and ASP a barrier makes every update visible. In both cases the rows
 * pulled here stay in the process cache for the next epoch's first pull,
 * made in the same clock, so a worker fetches its training rows once per
 * epoch whether it evaluates or not (with one clock per epoch).
 *
 * One round trip: the rows of the training and the test ratings are one
 * batch, and worker 0's read of the last evaluation's totals goes with their
 * pull; the statistics' push is not waited for here. */
static int evaluate(worker *w, int epoch)
{
    if (w->cli->job.consistency != LOOM_BSP) TRY("barrier", loom_barrier(w->node));
    if (stats_pushed(w)) return 1; /* before stats_v is written again */
    /* Lane 0's batch: idle between epochs, its pages touched already. */
    mf_batch *b = &w->lanes[0].b;
    TRY("evaluation", mf_batch_collect_two(b, &w->train, &w->test));
    double st[ST_N];
    loom_ts read = 0;
    int reporting = loom_rank(w->node) == 0 && w->pending.epoch >= 0;
    if (reporting)
        TRY("pull statistics", app_stats_read_async(&w->stats, w->pending.epoch, st, &read));
    int rc = pull_rows(w, b);
    if (reporting) {
        int done = loom_wait(w->node, read);
        TRY("pull statistics", done);
        if (!rc && report(w, st)) return 1;
    }
    if (rc) return 1;
    double *v = w->stats_v;
    memset(v, 0, sizeof w->stats_v);
    v[ST_TRAIN_SSE] = mf_batch_sse(b, 0, &w->train, NULL, w->train.n, w->mean, w->min, w->max);
    v[ST_TEST_SSE] =
        mf_batch_sse(b, w->train.n, &w->test, NULL, w->test.n, w->mean, w->min, w->max);
    v[ST_TRAIN_N] = (double)w->train.n;
    v[ST_TEST_N] = (double)w->test.n;
    v[ST_UPDATES] = (double)w->train.n * w->epochs_since_eval;
    loom_stats ns;
    loom_node_stats(w->node, &ns);
    v[ST_SENT] = (double)ns.bytes_sent;
    v[ST_RECEIVED] = (double)ns.bytes_received;
    v[ST_MESSAGES] = (double)ns.table_messages;
    v[ST_RAW] = (double)ns.table_bytes_raw;
    v[ST_WIRE] = (double)ns.table_bytes_wire;
    v[ST_MANAGED] = (double)ns.managed_rows_sent;
    v[ST_PUSHED] = (double)ns.pushed_rows_received;
    TRY("push statistics", app_stats_add_async(&w->stats, epoch, v, &w->stats_ts));
    w->pending.epoch = epoch;
    w->pending.time_s = app_now_s() - w->start;
    w->pending.train_s = w->train_s;
    w->train_s = 0;
    w->epochs_since_eval = 0;
    return 0;
}

/* rows[0..n) = the model's rows in index order: the table's rows 0..n-1,
 * or with the rotation's numbering (row_of[i]: table row of index i) in
 * that order. */
static int pull_model_rows(loom_table *t, size_t n, size_t w, const size_t *row_of, double *rows)
{
    if (!row_of) return loom_pull_range(t, 0, n, rows);
    double *table = malloc(n * w * sizeof *table);
    int rc = table ? loom_pull_range(t, 0, n, table) : LOOM_ENOMEM;
    for (size_t i = 0; !rc && i < n; i++)
        memcpy(rows + i * w, table + row_of[i] * w, w * sizeof *rows);
    free(table);
    return rc;
}

/* Worker 0 at the end: both tables and the id mapping into the model file. */
static int save_model(worker *w)
{
    const loom_ratings *r = w->r;
    mf_model m;
    if (mf_model_alloc(&m, w->cli->train.rank, r->users, r->items))
        return app_fail(PROG, "save the model", LOOM_ENOMEM);
    memcpy(m.user_id, r->user_id, r->users * sizeof *m.user_id);
    memcpy(m.item_id, r->item_id, r->items * sizeof *m.item_id);
    m.mean = w->mean, m.min = w->min, m.max = w->max;
    size_t width = (size_t)w->cli->train.rank + 1;
    int rc = r->users ? pull_model_rows(w->users, r->users, width, w->urow, m.user) : 0;
    if (!rc && r->items) rc = pull_model_rows(w->items, r->items, width, w->irow, m.item);
    char err[512];
    if (rc) {
        rc = app_fail(PROG, "pull the model", rc);
    } else if (mf_model_save(&m, w->cli->job.model_path, err, sizeof err)) {
        fprintf(stderr, "loom train mf: %s\n", err);
        rc = 1;
    }
    mf_model_free(&m);
    return rc;
}

static int epochs(worker *w)
{
    const mf_cli *c = w->cli;
    int rank = loom_rank(w->node);
    /* The setup needs one barrier: every worker pushes its share's summary,
     * row counts and initial rows and ends clock 0; after the barrier all of
     * it is on the servers (under BSP the initial rows once clock 0 has ended
     * everywhere, which the first pull waits for). */
    int rotation = c->train.schedule == MF_SCHEDULE_ROTATION;
    int damped = c->train.merge == MF_MERGE_DAMPED && !rotation;
    if (push_summary(w) || open_tables(w)) return 1;
    if (damped && (row_counts_push(w, "mf.user_counts", 0, w->r->users, &w->ucount) ||
                   row_counts_push(w, "mf.item_counts", 1, w->r->items, &w->icount)))
        return 1;
    if (push_initial(w, w->users, 0, w->r->users) || push_initial(w, w->items, 1, w->r->items))
        return 1;
    TRY("clock", loom_clock(w->node));
    if (!w->resuming && loom_checkpoint_due(w->node) && save_state(w, 0, 0)) return 1;
    TRY("barrier", loom_barrier(w->node));
    if (read_summary(w, damped)) return 1;
    if (rotation)
        TRY("start the rotation",
            mf_rotation_open(w->users, w->items, &c->train, &w->train, w->ublock, w->ibounds,
                             w->mean, c->train.schedule_log, &w->rot));
    if (!w->resuming) w->pending.epoch = -1;
    for (int epoch = w->first_epoch; epoch < c->train.epochs; epoch++) {
        double t0 = app_now_s();
        if (rotation) { /* the clock makes the epoch's statistics readable, as below */
            TRY("rotation", mf_rotation_epoch(w->rot, epoch));
            TRY("clock", loom_clock(w->node));
        } else if (train_epoch(w, epoch, epoch == w->first_epoch ? w->first_clock : 0)) {
            return 1;
        }
        TRY("epoch end", loom_checkpoint_epoch_end(w->node)); /* --checkpoint-every Ne */
        w->train_s += app_now_s() - t0;
        w->epochs_since_eval++;
        /* This epoch's clocks made the previous evaluation's totals
         * readable: an evaluation reads them with its rows. */
        if (mf_eval_due(&c->train, epoch) ? evaluate(w, epoch) : read_report(w)) return 1;
    }
    /* One more clock makes the last evaluation's totals readable. */
    if (stats_pushed(w)) return 1;
    TRY("clock", loom_clock(w->node));
    if (read_report(w)) return 1;
    return rank == 0 && c->job.model_path ? save_model(w) : 0;
}

/* Ratings of d renumbered: index u becomes row urow[u], i row irow[i]
 * (a test rating's unknown user or item stays unknown). */
static void renumber(mf_data *d, const size_t *urow, const size_t *irow)
{
    for (size_t k = 0; k < d->n; k++) {
        if (d->user[k] != UINT32_MAX) d->user[k] = (uint32_t)urow[d->user[k]];
        if (d->item[k] != UINT32_MAX) d->item[k] = (uint32_t)irow[d->item[k]];
    }
}

/* --schedule rotation: every worker read the whole training file; cut users
 * and items into blocks of equal numbers of ratings (the same cuts on every
 * worker) and keep this worker's users' ratings (--test-fraction's test part
 * likewise, so every test rating is evaluated once).
 *
 * The blocks are ranges of table rows, and the rows are the ids renumbered
 * in a seeded random order (the same on every worker), not the ids' order:
 * files number users as they joined and items as they were added, so blocks
 * of consecutive ids hold users (items) that resemble each other, and an
 * item's updates in a sub-iteration all come from one such group. Trained
 * so, an epoch is a worse pass than sequential SGD's: on ml-latest-small
 * with 4 workers, 22 epochs to test RMSE 0.87 against 15 (docs/MF.md). With
 * the rows shuffled every block is a sample of the whole. One worker has
 * one block of each and keeps the ids' order (seq.c's, bit for bit). */
static int rotation_blocks(worker *w)
{
    size_t nw = (size_t)loom_num_workers(w->node), me = (size_t)loom_rank(w->node);
    if (!w->train.n) { /* every worker read the whole file: all say it, as read_summary would */
        fprintf(stderr, PROG ": %s: no training ratings\n", w->cli->job.train_path);
        return 1;
    }
    const char *too_few = w->r->users < nw ? "users" : w->r->items < nw ? "items" : NULL;
    if (too_few) {
        fprintf(stderr,
                PROG ": %s: %zu %s for %zu workers: --schedule rotation gives each "
                     "worker a block of at least one\n",
                w->cli->job.train_path, too_few[0] == 'u' ? w->r->users : w->r->items, too_few, nw);
        return 1;
    }
    uint64_t *ub = malloc((nw + 1) * sizeof *ub);
    w->ibounds = malloc((nw + 1) * sizeof *w->ibounds);
    int rc = ub && w->ibounds ? 0 : LOOM_ENOMEM;
    if (!rc && nw > 1) {
        w->urow = malloc(w->r->users * sizeof *w->urow);
        w->irow = malloc(w->r->items * sizeof *w->irow);
        rc = w->urow && w->irow ? 0 : LOOM_ENOMEM;
    }
    if (!rc && nw > 1) {
        mf_permutation(w->cli->train.seed, MF_STREAM_BLOCKS, w->r->users, w->urow);
        mf_permutation(w->cli->train.seed, MF_STREAM_BLOCKS + 1, w->r->items, w->irow);
        renumber(&w->train, w->urow, w->irow);
        renumber(&w->test, w->urow, w->irow);
    }
    if (!rc) rc = mf_balanced_bounds(w->train.user, w->train.n, w->r->users, (int)nw, ub);
    if (!rc) rc = mf_balanced_bounds(w->train.item, w->train.n, w->r->items, (int)nw, w->ibounds);
    if (!rc) {
        w->ublock[0] = ub[me], w->ublock[1] = ub[me + 1];
        mf_data_keep_users(&w->train, ub[me], ub[me + 1]);
        if (!w->cli->job.test_path) mf_data_keep_users(&w->test, ub[me], ub[me + 1]);
    }
    free(ub);
    TRY("cut the blocks", rc);
    return 0;
}

/* Read this worker's shares of the training and test files. */
static int read_data(worker *w, loom_ratings **test_file)
{
    const mf_cli *c = w->cli;
    char err[1024];
    int rank = loom_rank(w->node), nw = loom_num_workers(w->node);
    if (c->job.test_path) {
        if (loom_ratings_read(c->job.test_path, rank, nw, &c->data, test_file, err, sizeof err)) {
            fprintf(stderr, "loom train mf: %s\n", err);
            return 1;
        }
        w->skipped[1] = (*test_file)->skipped;
        TRY("test data", mf_data_map(*test_file, w->r, &w->test));
        mf_data tmp;
        TRY("training data", mf_data_split(w->r, c->train.seed, 0, &w->train, &tmp));
        mf_data_free(&tmp);
    } else {
        TRY("training data",
            mf_data_split(w->r, c->train.seed, c->train.test_fraction, &w->train, &w->test));
    }
    if (c->train.schedule == MF_SCHEDULE_ROTATION && rotation_blocks(w)) return 1;
    w->threads = c->job.threads > 1 ? c->job.threads : 1;
    TRY("start the compute threads", app_team_start(&w->team, w->threads));
    w->lanes = calloc((size_t)w->threads, sizeof *w->lanes);
    if (!w->lanes) return app_fail(PROG, "training data", LOOM_ENOMEM);
    for (int t = 0; t < w->threads; t++) {
        lane *l = &w->lanes[t];
        size_t lo, hi;
        app_team_split(w->train.n, w->threads, t, &lo, &hi);
        l->part = (mf_data){.n = hi - lo,
                            .user = w->train.user + lo,
                            .item = w->train.item + lo,
                            .rating = w->train.rating + lo};
        l->order = malloc((hi > lo ? hi - lo : 1) * sizeof *l->order);
        if (!l->order) return app_fail(PROG, "training data", LOOM_ENOMEM);
        TRY("training data", mf_batch_init(&l->b, c->train.rank, w->r->users, w->r->items));
    }
    return 0;
}

/* --schedule auto, once the number of workers is known: rotation with more
 * than one, unless a flag only data parallelism takes chose that; worker 0
 * says which (the epochs differ: docs/MF.md). */
static mf_cli resolve_schedule(loom_node *n, const mf_cli *given)
{
    mf_cli c = *given;
    int nw = loom_num_workers(n);
    if (c.train.schedule == MF_SCHEDULE_AUTO)
        c.train.schedule = nw > 1 ? MF_SCHEDULE_ROTATION : MF_SCHEDULE_DATA;
    if (nw > 1 && loom_rank(n) == 0 && !c.job.quiet &&
        given->train.schedule != MF_SCHEDULE_ROTATION) {
        if (c.train.schedule == MF_SCHEDULE_ROTATION)
            fprintf(stderr,
                    PROG ": %d workers: item blocks rotate among them (--schedule "
                         "rotation; --schedule data for data parallelism)\n",
                    nw);
        else if (c.train.data_because)
            fprintf(stderr, PROG ": %d workers: data parallel, since %s needs --schedule data\n",
                    nw, c.train.data_because);
    }
    return c;
}

static int run_worker(loom_node *n, const mf_cli *given)
{
    char err[1024];
    const mf_cli resolved = resolve_schedule(n, given), *c = &resolved;
    loom_ratings *r = NULL, *test_file = NULL;
    /* Under any launcher, before the data is read: outputs that cannot be
     * written must not be found after the last epoch. */
    if (loom_rank(n) == 0 && app_check_job_files(&c->job, err, sizeof err)) {
        fprintf(stderr, PROG ": %s\n", err);
        return 1;
    }
    /* --schedule rotation: every worker reads the whole file and keeps its users' ratings. */
    int whole = c->train.schedule == MF_SCHEDULE_ROTATION;
    if (loom_ratings_read(c->job.train_path, whole ? 0 : loom_rank(n),
                          whole ? 1 : loom_num_workers(n), &c->data, &r, err, sizeof err)) {
        fprintf(stderr, "loom train mf: %s\n", err);
        return 1;
    }
    /* A whole file's malformed lines are counted by one worker. */
    worker w = {.node = n, .cli = c, .r = r, .skipped = {whole && loom_rank(n) ? 0 : r->skipped}};
    int rc = read_data(&w, &test_file);
    if (!rc) rc = load_state(&w);
    if (!rc && loom_rank(n) == 0 && c->job.metrics_path &&
        !(w.metrics = fopen(c->job.metrics_path, w.resuming ? "a" : "w"))) {
        fprintf(stderr, "loom train mf: cannot write %s: %s\n", c->job.metrics_path,
                strerror(errno));
        rc = 1;
    }
    w.start = app_now_s();
    if (!rc) rc = epochs(&w);
    if (w.stats_ts) loom_wait(n, w.stats_ts); /* after an error: it reads w.stats_v */
    if (w.metrics && fclose(w.metrics) && !rc) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", c->job.metrics_path, strerror(errno));
        rc = 1;
    }
    app_team_stop(w.team);
    for (int t = 0; w.lanes && t < w.threads; t++) {
        mf_batch_free(&w.lanes[t].b);
        free(w.lanes[t].order);
    }
    free(w.lanes);
    mf_data_free(&w.train);
    mf_data_free(&w.test);
    row_counts_free(&w.ucount);
    mf_rotation_free(w.rot);
    free(w.ibounds);
    free(w.urow);
    free(w.irow);
    row_counts_free(&w.icount);
    loom_ratings_free(test_file);
    loom_ratings_free(r);
    return rc;
}

static int worker_main(loom_node *n, const void *c)
{
    return run_worker(n, c);
}

int mf_train_node(const void *cli)
{
    loom_updater_register("mf.range", 1, range_updater, NULL);
    return app_node_main(PROG, worker_main, cli);
}
