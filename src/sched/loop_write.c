/* loop_write: what a loop body writes outside its declared accesses
 * (loom/loop.h; Orion, wei-thesis-bosen-orion.txt 3.8).
 *
 * Accumulators: each worker's value lives here; a run starts it at the
 * identity, and ends by sending it to every other worker (one SCHED_BLOCK
 * message per peer on the loop's engine number, all accumulators packed, at
 * a version of the run's own) and reducing the W values in rank order, so
 * every worker computes the same bytes without a coordinator.
 *
 * Buffers (DistArray Buffers): rows shaped like the target's, one per row the
 * worker may write (the local rows of a space-keyed target, all rows of a
 * whole one), with the list of those written since the last flush. A flush
 * calls the user's merge on each written row: a local target's row in place;
 * a whole target's row in the worker's copy, whose change (merged - copy) is
 * pushed into the table, after which the copy is read again (the other
 * workers' flushes included: their changes add up in the sum table); a
 * prefetched target's row as the current batch holds it (pulled with the
 * batch, or pulled at the flush for rows the batch lacks), whose change is
 * pushed alike, after which the batch is dropped (loop_prefetch.c). The
 * count of body calls since the last flush triggers one at the delay bound;
 * loop_run.c flushes at the end of every block and run as well.
 *
 * A flush within a block does not wait for its push: the table sums, so the
 * reads after it (the next batch's pull, the copy read again) add this
 * worker's pushes still in flight (read-my-writes, loom/table.h) and see the
 * merge as they would after the wait. Waiting was a sleep and a wake-up per
 * minibatch, a tenth of sparse LR's CPU on the loop API. Only the push's
 * arrays must stay until the servers have them, so a buffer sends from a
 * second pair (sent_keys, sent_delta) and waits for the last push before it
 * reuses them, which by then has long arrived; the end of a block or run
 * waits, so the other workers see every merge of it. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loom/error.h"
#include "sched/loop_impl.h"
#include "sched/sched.h"

/* the accumulators' messages: versions past the element exchange's 0 and 1 */
#define ACCUM_VERSION 2

static void identity(const loop_accum *x, void *out)
{
    const loom_loop_accum_decl *a = &x->a;
    if (a->op == LOOM_REDUCE_FN) {
        if (a->identity)
            memcpy(out, a->identity, x->bytes);
        else
            memset(out, 0, x->bytes);
        return;
    }
    int lo = a->op == LOOM_REDUCE_MAX;
    for (uint32_t i = 0; i < a->width; i++) switch (a->type) {
        case LOOM_F32:
            ((float *)out)[i] = a->op == LOOM_REDUCE_SUM ? 0.0f : lo ? -INFINITY : INFINITY;
            break;
        case LOOM_F64:
            ((double *)out)[i] = a->op == LOOM_REDUCE_SUM ? 0.0 : lo ? -INFINITY : INFINITY;
            break;
        case LOOM_I32:
            ((int32_t *)out)[i] = a->op == LOOM_REDUCE_SUM ? 0 : lo ? INT32_MIN : INT32_MAX;
            break;
        case LOOM_I64:
            ((int64_t *)out)[i] = a->op == LOOM_REDUCE_SUM ? 0 : lo ? INT64_MIN : INT64_MAX;
            break;
        }
}

#define COMBINE(T)                                                                                 \
    do {                                                                                           \
        T *d = into;                                                                               \
        const T *s = from;                                                                         \
        for (uint32_t i = 0; i < a->width; i++)                                                    \
            d[i] = a->op == LOOM_REDUCE_SUM   ? d[i] + s[i]                                        \
                   : a->op == LOOM_REDUCE_MIN ? (s[i] < d[i] ? s[i] : d[i])                        \
                                              : (s[i] > d[i] ? s[i] : d[i]);                       \
    } while (0)

static void combine(const loom_loop *l, const loop_accum *x, void *into, const void *from)
{
    const loom_loop_accum_decl *a = &x->a;
    if (a->op == LOOM_REDUCE_FN) {
        a->reduce(l->o.user, into, from);
        return;
    }
    switch (a->type) {
    case LOOM_F32:
        COMBINE(float);
        break;
    case LOOM_F64:
        COMBINE(double);
        break;
    case LOOM_I32:
        COMBINE(int32_t);
        break;
    case LOOM_I64:
        COMBINE(int64_t);
        break;
    }
}

static int check_accum(const loom_loop *l, size_t k, char *err, size_t errlen)
{
    const loom_loop_accum_decl *a = &l->o.accums[k];
    for (size_t j = 0; j < k; j++)
        if (l->o.accums[j].id == a->id)
            return loop_refuse(err, errlen, LOOM_EINVAL, "two accumulators have the number %u",
                               a->id);
    if (!a->width)
        return loop_refuse(err, errlen, LOOM_EINVAL, "accumulator %u has width 0", a->id);
    if (a->op == LOOM_REDUCE_FN && !a->reduce)
        return loop_refuse(err, errlen, LOOM_EINVAL,
                           "accumulator %u is reduced by a function, but none is given", a->id);
    if (a->op != LOOM_REDUCE_FN &&
        ((unsigned)a->op > LOOM_REDUCE_MAX || (unsigned)a->type > LOOM_I64))
        return loop_refuse(err, errlen, LOOM_EINVAL,
                           "accumulator %u: sum, min or max of f32, f64, i32 or i64 values", a->id);
    return 0;
}

static int check_buffer(const loom_loop *l, size_t k, char *err, size_t errlen)
{
    const loom_loop_buffer_decl *b = &l->o.buffers[k];
    for (size_t j = 0; j < k; j++)
        if (l->o.buffers[j].id == b->id)
            return loop_refuse(err, errlen, LOOM_EINVAL, "two buffers have the number %u", b->id);
    if (!b->delay)
        return loop_refuse(err, errlen, LOOM_EINVAL,
                           "buffer %u has delay 0: its writes must be merged within a number "
                           "of body calls, at least 1",
                           b->id);
    if (!b->merge)
        return loop_refuse(err, errlen, LOOM_EINVAL, "buffer %u has no merge function", b->id);
    int s = loop_slot_of(l, b->target);
    if (s < 0)
        return loop_refuse(err, errlen, LOOM_EINVAL,
                           "buffer %u targets array %u, which is not among this loop's arrays",
                           b->id, b->target);
    if (l->arr[s].role == ROLE_ROTATED || l->arr[s].role == ROLE_HOSTED)
        return loop_refuse(err, errlen, LOOM_EINVAL,
                           "buffer %u targets array %u, which %s: a buffer merges into an "
                           "array kept local or reached whole (A(*), copied or prefetched)",
                           b->id, b->target,
                           l->arr[s].role == ROLE_ROTATED ? "rotates among the workers"
                                                          : "is hosted on the servers by rows");
    return 0;
}

int loop_write_open(loom_loop *l, char *err, size_t errlen)
{
    const loom_loop_opts *o = &l->o;
    if ((o->naccums && !o->accums) || (o->nbuffers && !o->buffers))
        return loop_refuse(err, errlen, LOOM_EINVAL,
                           "accumulators or buffers counted but not given");
    int rc = 0;
    for (size_t k = 0; k < o->naccums && !rc; k++) rc = check_accum(l, k, err, errlen);
    for (size_t k = 0; k < o->nbuffers && !rc; k++) rc = check_buffer(l, k, err, errlen);
    if (rc) return rc;
    l->accum = calloc(o->naccums + 1, sizeof *l->accum);
    l->buf = calloc(o->nbuffers + 1, sizeof *l->buf);
    if (!l->accum || !l->buf) return LOOM_ENOMEM;
    for (size_t k = 0; k < o->naccums; k++) {
        loop_accum *x = &l->accum[k];
        x->a = o->accums[k];
        x->bytes =
            x->a.op == LOOM_REDUCE_FN ? x->a.width : (size_t)x->a.width * loom_type_size(x->a.type);
        x->mine = malloc(x->bytes);
        x->result = malloc(x->bytes);
        if (!x->mine || !x->result) return LOOM_ENOMEM;
        identity(x, x->mine);
        identity(x, x->result);
    }
    for (size_t k = 0; k < o->nbuffers; k++) {
        l->buf[k].l = l;
        l->buf[k].d = o->buffers[k];
        l->buf[k].target = &l->arr[loop_slot_of(l, o->buffers[k].target)];
    }
    return 0;
}

int loop_buffers_ready(loom_loop *l)
{
    for (size_t k = 0; k < l->o.nbuffers; k++) {
        struct loom_loop_buffer *b = &l->buf[k];
        size_t rows = (size_t)(b->target->hi - b->target->lo), rb = b->target->row_bytes;
        b->rows = calloc(rows + 1, rb);
        b->written = calloc(rows + 1, 1);
        b->list = malloc((rows + 1) * sizeof *b->list);
        b->scratch = malloc(rb);
        if (!b->rows || !b->written || !b->list || !b->scratch) return LOOM_ENOMEM;
    }
    return 0;
}

void loop_accum_reset(loom_loop *l)
{
    for (size_t k = 0; k < l->o.naccums; k++) identity(&l->accum[k], l->accum[k].mine);
}

void loop_diff(loom_type t, uint8_t *d, const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++) switch (t) {
        case LOOM_F32:
            ((float *)(void *)d)[i] =
                ((const float *)(const void *)a)[i] - ((const float *)(const void *)b)[i];
            break;
        case LOOM_F64:
            ((double *)(void *)d)[i] =
                ((const double *)(const void *)a)[i] - ((const double *)(const void *)b)[i];
            break;
        case LOOM_I32: /* counts: wrap-around is the sum table's too */
            ((int32_t *)(void *)d)[i] = (int32_t)((uint32_t)((const int32_t *)(const void *)a)[i] -
                                                  (uint32_t)((const int32_t *)(const void *)b)[i]);
            break;
        case LOOM_I64:
            ((int64_t *)(void *)d)[i] = (int64_t)((uint64_t)((const int64_t *)(const void *)a)[i] -
                                                  (uint64_t)((const int64_t *)(const void *)b)[i]);
            break;
        }
}

int loop_read_whole(loop_array *a)
{
    return loom_pull_range(a->t, 0, a->a.rows, a->rows);
}

/* A prefetched target's written rows as this worker sees them, into delta:
 * the batch's values where it holds the row (read when the batch was pulled,
 * as a whole copy would have been), the others pulled in one request. */
static int prefetched_rows(struct loom_loop_buffer *b)
{
    loop_array *t = b->target;
    size_t rb = t->row_bytes, missing = 0;
    for (size_t k = 0; k < b->nlist; k++) {
        const uint8_t *v = loop_prefetch_value(t, b->list[k]);
        if (v)
            memcpy(b->delta + k * rb, v, rb);
        else
            missing++;
    }
    if (!missing) return 0;
    uint64_t *want = malloc(missing * sizeof *want);
    uint8_t *got = malloc(missing * rb);
    int rc = want && got ? 0 : LOOM_ENOMEM;
    size_t m = 0;
    for (size_t k = 0; k < b->nlist && !rc; k++)
        if (!loop_prefetch_value(t, b->list[k])) want[m++] = b->list[k];
    if (!rc) rc = loom_pull(t->t, want, m, got);
    for (size_t k = 0, j = 0; k < b->nlist && !rc; k++)
        if (!loop_prefetch_value(t, b->list[k])) memcpy(b->delta + k * rb, got + j++ * rb, rb);
    if (!rc) t->pf->stats.rows_pulled += m;
    free(want);
    free(got);
    return rc;
}

/* Wait for the buffer's push in flight, if any. */
static int wait_sent(loom_loop *l, struct loom_loop_buffer *b)
{
    if (!b->sending) return 0;
    b->sending = 0;
    return loom_wait(l->node, b->sent_ts);
}

/* Push the n rows of b->list whose changes are at the front of b->delta,
 * without waiting (see the top). */
static int send_changes(loom_loop *l, struct loom_loop_buffer *b, size_t n)
{
    int rc = wait_sent(l, b);
    if (rc) return rc;
    if (n > b->sent_keys_cap) {
        uint64_t *k = realloc(b->sent_keys, n * sizeof *k);
        if (!k) return LOOM_ENOMEM;
        b->sent_keys = k, b->sent_keys_cap = n;
    }
    memcpy(b->sent_keys, b->list, n * sizeof *b->list);
    uint8_t *d = b->delta;
    size_t cap = b->delta_cap;
    b->delta = b->sent_delta, b->delta_cap = b->sent_delta_cap;
    b->sent_delta = d, b->sent_delta_cap = cap;
    rc = loom_push_async(b->target->t, b->sent_keys, n, b->sent_delta, &b->sent_ts);
    b->sending = !rc;
    return rc;
}

static int flush(loom_loop *l, struct loom_loop_buffer *b)
{
    b->calls = 0;
    if (b->bad) return LOOM_EKEYRANGE;
    if (!b->nlist) return 0;
    loop_array *t = b->target;
    size_t rb = t->row_bytes;
    int rc = 0;
    if (t->role != ROLE_SPACE && 2 * b->nlist > b->delta_cap) { /* the changes, the rows seen */
        uint8_t *d = realloc(b->delta, b->nlist * 2 * rb);
        if (!d) return LOOM_ENOMEM;
        b->delta = d, b->delta_cap = b->nlist * 2;
    }
    if (t->role == ROLE_PREFETCH) rc = prefetched_rows(b);
    for (size_t k = 0; k < b->nlist && !rc; k++) {
        uint64_t r = b->list[k];
        uint8_t *upd = b->rows + (r - t->lo) * rb;
        if (t->role == ROLE_SPACE) {
            b->d.merge(l->o.user, r, t->rows + (r - t->lo) * rb, upd);
        } else {
            /* the row as this worker sees it: its copy, or (prefetched) the
             * value prefetched_rows left in delta */
            uint8_t *d = b->delta + k * rb, *seen = b->delta + (b->nlist + k) * rb;
            memcpy(seen, t->role == ROLE_WHOLE ? t->rows + r * rb : d, rb);
            memcpy(d, seen, rb);
            b->d.merge(l->o.user, r, d, upd);
            loop_diff(t->a.type, d, d, seen, t->a.width);
        }
        memset(upd, 0, rb);
        b->written[r - t->lo] = 0;
    }
    size_t n = b->nlist;
    b->nlist = 0;
    if (rc || t->role == ROLE_SPACE) return rc;
    rc = send_changes(l, b, n);
    if (t->role == ROLE_PREFETCH) { /* the next elements pull the merged rows */
        loop_prefetch_drop(l);
        return rc;
    }
    return rc ? rc : loop_read_whole(t);
}

int loop_after_body(loom_loop *l)
{
    int rc = 0;
    for (size_t k = 0; k < l->o.nbuffers && !rc; k++)
        if (++l->buf[k].calls >= l->buf[k].d.delay) rc = flush(l, &l->buf[k]);
    return rc;
}

int loop_flush_all(loom_loop *l)
{
    int rc = 0;
    for (size_t k = 0; k < l->o.nbuffers && !rc; k++) rc = flush(l, &l->buf[k]);
    for (size_t k = 0; k < l->o.nbuffers; k++) {
        int w = wait_sent(l, &l->buf[k]);
        rc = rc ? rc : w;
    }
    loop_prefetch_drop(l); /* a block's end: the next block pulls its own rows */
    return rc;
}

int loop_accum_reduce(loom_loop *l)
{
    size_t total = 0;
    for (size_t k = 0; k < l->o.naccums; k++) total += l->accum[k].bytes;
    if (!total) return 0;
    uint8_t *msg = malloc(total * l->W);
    if (!msg) return LOOM_ENOMEM;
    uint8_t *mine = msg + total * l->rank;
    for (size_t k = 0, at = 0; k < l->o.naccums; at += l->accum[k++].bytes)
        memcpy(mine + at, l->accum[k].mine, l->accum[k].bytes);
    uint64_t version = ACCUM_VERSION + l->runs;
    int rc = 0;
    for (uint32_t w = 0; w < l->W && !rc; w++)
        if (w != l->rank)
            rc = sched_send_block(l->node, l->id, (int)w, l->rank, version, mine, total, 0);
    for (uint32_t w = 0; w < l->W && !rc; w++)
        if (w != l->rank)
            rc = sched_take_block(l->node, l->id, (int)w, w, version, msg + total * w, total, 0);
    for (size_t k = 0, at = 0; k < l->o.naccums && !rc; at += l->accum[k++].bytes) {
        loop_accum *x = &l->accum[k];
        identity(x, x->result);
        for (uint32_t w = 0; w < l->W; w++) combine(l, x, x->result, msg + total * w + at);
    }
    free(msg);
    return rc;
}

void *loom_loop_accum(loom_loop *l, uint32_t id)
{
    for (size_t k = 0; l && k < l->o.naccums; k++)
        if (l->accum[k].a.id == id) return l->accum[k].mine;
    return NULL;
}

int loom_loop_accum_result(const loom_loop *l, uint32_t id, void *out)
{
    for (size_t k = 0; l && out && k < l->o.naccums; k++)
        if (l->accum[k].a.id == id) {
            memcpy(out, l->accum[k].result, l->accum[k].bytes);
            return 0;
        }
    return LOOM_EINVAL;
}

loom_loop_buffer *loom_loop_buffer_of(loom_loop *l, uint32_t id)
{
    for (size_t k = 0; l && k < l->o.nbuffers; k++)
        if (l->buf[k].d.id == id) return &l->buf[k];
    return NULL;
}

void *loom_loop_buffer_row(loom_loop_buffer *b, uint64_t row)
{
    const loop_array *t = b->target;
    if (row < t->lo || row >= t->hi) {
        b->bad = 1;
        return b->scratch;
    }
    size_t i = (size_t)(row - t->lo);
    if (!b->written[i]) {
        b->written[i] = 1;
        b->list[b->nlist++] = row;
    }
    return b->rows + i * t->row_bytes;
}

void loop_write_close(loom_loop *l)
{
    for (size_t k = 0; l->accum && k < l->o.naccums; k++) {
        free(l->accum[k].mine);
        free(l->accum[k].result);
    }
    for (size_t k = 0; l->buf && k < l->o.nbuffers; k++) {
        free(l->buf[k].rows);
        free(l->buf[k].written);
        free(l->buf[k].list);
        free(l->buf[k].scratch);
        free(l->buf[k].delta);
        /* a push still in flight reads them until it arrives; if it cannot,
         * the job is failing and they stay until the process ends */
        if (wait_sent(l, &l->buf[k])) continue;
        free(l->buf[k].sent_keys);
        free(l->buf[k].sent_delta);
    }
    free(l->accum);
    free(l->buf);
}
