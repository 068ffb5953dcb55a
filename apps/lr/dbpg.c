/* dbpg: delayed block proximal gradient (--algo dbpg, li-thesis chapter 6),
 * the worker's and the server's steps of the distributed lr trainer
 * (apps/lr/train.c runs them, one block a clock; the header of train.c says
 * how DBPG works): the server-side updater that applies the proximal step
 * once every worker pushed, a worker's column index of its share, the
 * margins refreshed with each pulled block, the sliding window of the
 * curvature bound, and the block's gradients, computed by the compute
 * threads and pushed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lr/train_impl.h"

/* DBPG's server step. Row: [w, g, u]; a push adds [0, g, u] of one worker;
 * state[0] counts pushes this step; params: [0] workers, [1] bias key (which,
 * as under SGD, neither l1 nor l2 penalises). */
void lr_dbpg_updater(const loom_update *u, void *user)
{
    (void)user;
    double *row = u->value, *count = u->state;
    const double *d = u->delta;
    const loom_table_opts *o = u->opts;
    row[1] += d[1];
    row[2] += d[2];
    if (++count[0] < o->params[0]) return;
    int bias = u->key == (uint64_t)o->params[1];
    row[0] = lr_dbpg_prox(row[0], row[1], row[2], o->lr, bias ? 0 : o->l1, bias ? 0 : o->l2);
    row[1] = row[2] = count[0] = 0;
}

/* The first of the rows row[0..n) (ascending) that is >= r. */
static uint32_t first_row_from(const uint32_t *row, uint32_t n, uint32_t r)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (row[mid] < r)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Thread t: the margins of its rows follow the change of every pulled weight. */
static int dbpg_margins(void *arg, int t)
{
    const dbpg_step *st = arg;
    const shard *s = st->s;
    const dbpg_index *x = st->x;
    size_t r0, r1;
    app_team_split(s->d->rows, st->threads, t, &r0, &r1);
    for (size_t f = st->f0; f < st->f1; f++) {
        double delta = st->rows3[3 * (f - st->f0)] - s->w[f];
        if (delta == 0) continue;
        if (f == s->nkeys - 1) { /* the bias */
            for (size_t i = r0; i < r1; i++) x->rows[i].margin += delta;
        } else {
            uint32_t p0 = x->ptr[f], n = x->ptr[f + 1] - p0;
            for (uint32_t p = p0 + first_row_from(x->row + p0, n, (uint32_t)r0);
                 p < p0 + n && x->row[p] < r1; p++)
                x->rows[x->row[p]].margin += delta * x->val[p];
        }
    }
    return 0;
}

/* Bring the local weights of block [lo, hi) up to the servers' values (as the
 * delay allows) and the margins with them: margins always equal X * local w.
 * Only the share's own features of the block are pulled. */
int lr_dbpg_refresh(loom_table *wt, app_team *team, dbpg_step *st, uint64_t lo, uint64_t hi)
{
    shard *s = st->s;
    st->f0 = app_lower_bound(s->keys, s->nkeys, lo);
    st->f1 = app_lower_bound(s->keys, s->nkeys, hi);
    if (st->f1 == st->f0) return 0;
    TRY("pull block", loom_pull(wt, s->keys + st->f0, st->f1 - st->f0, st->rows3));
    app_team_run(team, dbpg_margins, st); /* its jobs cannot fail */
    for (size_t f = st->f0; f < st->f1; f++) {
        double delta = st->rows3[3 * (f - st->f0)] - s->w[f];
        if (delta != 0) s->w[f] += delta;
    }
    return 0;
}

/* The window of the curvature bound slides to step t: block t mod B enters,
 * the block of step t - delay - 1 leaves (see lr_dbpg_window). */
void lr_dbpg_slide(const shard *s, dbpg_index *x, uint64_t dim, const lr_train_opts *o, int64_t t)
{
    int enter, leave;
    lr_dbpg_window(t, o->delay, o->blocks, &enter, &leave);
    int blocks[2] = {enter, leave}, change[2] = {1, -1};
    for (int k = 0; k < 2; k++) {
        if (blocks[k] < 0) continue;
        int *n = &x->in_window[blocks[k]];
        /* A block counts once however many of the window's steps it is. */
        if (change[k] > 0 ? (*n)++ != 0 : --*n != 0) continue;
        uint64_t lo, hi;
        lr_dbpg_block(dim, o->blocks, blocks[k], &lo, &hi);
        uint32_t add = (uint32_t)change[k]; /* wraps to subtract */
        for (size_t f = app_lower_bound(s->keys, s->nkeys, lo); f < s->nkeys && s->keys[f] < hi;
             f++) {
            if (f == s->nkeys - 1) {
                for (size_t i = 0; i < s->d->rows; i++) x->rows[i].overlap += add;
            } else {
                for (uint32_t q = x->ptr[f]; q < x->ptr[f + 1]; q++)
                    x->rows[x->row[q]].overlap += add;
            }
        }
    }
}

/* Thread t: gradient and curvature bound of its part of the block's features. */
static int dbpg_gradients(void *arg, int t)
{
    const dbpg_step *st = arg;
    const shard *s = st->s;
    const dbpg_index *x = st->x;
    size_t lo, hi;
    app_team_split(st->f1 - st->f0, st->threads, t, &lo, &hi);
    for (size_t f = st->f0 + lo; f < st->f0 + hi; f++) {
        double g = 0, h = 0;
        if (f == s->nkeys - 1) {
            for (size_t i = 0; i < s->d->rows; i++) {
                const dbpg_row *r = &x->rows[i];
                double p = lr_sigmoid(r->margin);
                g += p - r->y01;
                h += p * (1 - p) * r->overlap;
            }
        } else {
            for (uint32_t q = x->ptr[f]; q < x->ptr[f + 1]; q++) {
                const dbpg_row *r = &x->rows[x->row[q]];
                double v = x->val[q], p = lr_sigmoid(r->margin);
                g += (p - r->y01) * v;
                h += p * (1 - p) * v * v * r->overlap;
            }
        }
        /* KKT: a weight at 0 whose gradient here is within T stays out of
         * the push, curvature and all (sent as a zero row, which sparse rows
         * and zstd make almost free: the server step still hears from every
         * worker). */
        if (st->kkt >= 0 && f != s->nkeys - 1 && s->w[f] == 0 && fabs(g) <= st->kkt) g = h = 0;
        st->rows3[3 * (s->keys[f] - st->lo) + 1] = g;
        st->rows3[3 * (s->keys[f] - st->lo) + 2] = h;
    }
    return 0;
}

/* DBPG's KKT filter (li-thesis 6.3.1: leave out coordinate i while w_i = 0
 * and |g_i| <= lambda - delta), applied by the workers to their gradients: the
 * table keeps no cache, so the push chain's kkt would have no weights to test.
 * The threshold is kkt:T of --filter, or with the default filters l1 / W: if
 * every worker leaves a coordinate out, the gradients' sum is within l1 and the
 * step keeps the weight at 0, exactly as if they had been sent. Only a step
 * where some worker sends and another does not differs (the sum and the
 * curvature lack the small part). The test reads the worker's copy of w_i,
 * which is the servers' value after the block's previous step when there are
 * more blocks than the delay (that step is then refreshed before this one):
 * with fewer, the copy may miss a step, and a zero row for a weight that
 * moved would reset it, so KKT is off. -1: off (no --l1, --filter without
 * kkt, or blocks <= delay). */
double lr_dbpg_kkt_threshold(const char *filter_push, const lr_train_opts *o, int workers)
{
    double l1 = o->l1;
    if (!(l1 > 0) || o->blocks <= o->delay) return -1;
    if (!filter_push) return l1 / workers;
    const char *k = strstr(filter_push, "kkt:"); /* the spec was checked */
    return k ? strtod(k + 4, NULL) : -1;
}

/* Push block [lo, hi)'s gradient and curvature bound over every row of the
 * share (zeros for features the share lacks: each key must hear from every
 * worker for the server step to happen). */
int lr_dbpg_push(loom_table *wt, app_team *team, dbpg_step *st, uint64_t lo, uint64_t hi)
{
    shard *s = st->s;
    memset(st->rows3, 0, 3 * (size_t)(hi - lo) * sizeof *st->rows3);
    st->lo = lo;
    st->f0 = app_lower_bound(s->keys, s->nkeys, lo);
    st->f1 = app_lower_bound(s->keys, s->nkeys, hi);
    app_team_run(team, dbpg_gradients, st); /* its jobs cannot fail */
    loom_ts ts;
    TRY("push block", loom_push_range_async(wt, lo, hi, st->rows3, &ts));
    TRY("push block", loom_wait(loom_table_node(wt), ts));
    return 0;
}

/* Column index of the share: for every local feature, the rows containing it;
 * and the curvature window, empty. */
int lr_dbpg_index_init(const shard *s, const lr_train_opts *o, dbpg_index *x)
{
    const loom_dataset *d = s->d;
    x->ptr = calloc(s->nkeys + 1, sizeof *x->ptr);
    x->row = malloc((d->nnz ? d->nnz : 1) * sizeof *x->row);
    x->val = malloc((d->nnz ? d->nnz : 1) * sizeof *x->val);
    x->rows = calloc(d->rows ? d->rows : 1, sizeof *x->rows);
    x->in_window = calloc((size_t)o->blocks, sizeof *x->in_window);
    if (!x->ptr || !x->row || !x->val || !x->rows || !x->in_window) return LOOM_ENOMEM;
    for (size_t i = 0; i < d->rows; i++) x->rows[i].y01 = d->label[i] > 0 ? 1.0f : 0.0f;
    for (size_t k = 0; k < d->nnz; k++) x->ptr[s->col[k] + 1]++;
    for (size_t f = 0; f < s->nkeys; f++) x->ptr[f + 1] += x->ptr[f];
    uint32_t *fill = malloc((s->nkeys ? s->nkeys : 1) * sizeof *fill);
    if (!fill) return LOOM_ENOMEM;
    memcpy(fill, x->ptr, s->nkeys * sizeof *fill);
    for (size_t i = 0; i < d->rows; i++)
        for (size_t k = d->row[i]; k < d->row[i + 1]; k++) {
            uint32_t p = fill[s->col[k]]++;
            x->row[p] = (uint32_t)i;
            x->val[p] = d->val[k];
        }
    free(fill);
    return 0;
}
