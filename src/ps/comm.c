/* comm: managed communication, after Bösen (Wei et al., SoCC'15; thesis
 * section 2.4).
 *
 * Without it a worker sends its update buffer only when its clock ends, and
 * readers see other workers' updates only after those clocks end: in between
 * the network is idle, and the updates of the clock in progress wait. Managed
 * communication spends a bandwidth budget on them while the clock runs:
 *
 *   - Every process of a job whose table sets `bandwidth_mbits` gets a
 *     budget (the largest of its tables'), kept as a token bucket: sending
 *     b bytes takes b tokens, which come back at the budget's rate. The
 *     mandatory traffic (a clock's flush, a server's pull replies) is paced
 *     to it too, so "SSP alone at budget B" is a fair baseline.
 *   - With a priority, the node's I/O thread runs the manager on a timer
 *     (node_set_timer): whenever the bucket has tokens and fewer than
 *     COMM_ACK_WINDOW managed messages wait for their acknowledgement (Bösen's
 *     defence against an overused network), a worker sends `queue_rows`
 *     buffered rows early, and a server pushes `queue_rows` rows that changed
 *     to the workers that cache them (Bösen's SSPPush), refreshing their
 *     caches in the middle of a clock.
 *   - The priority decides which rows: random, round robin (key order), the
 *     largest absolute accumulated change |d|, or the largest relative change
 *     |d/w| (a change to a small value matters more).
 *
 * Guarantees are those of the consistency model, unchanged: the clock's flush
 * still sends whatever is left, and a pull still waits for the clocks its
 * model requires. Early pushes are applied by servers on arrival (SSP, ASP
 * tables: readers may see more than the model promises, never less); rows a
 * server pushes carry its min clock and the last push it applied from that
 * worker, so the worker re-adds its own later writes exactly as for a pull
 * reply. BSP tables get the budget but no early sends or pushes: nothing
 * could become visible before the clock ends anyway, and a delta sent in two
 * parts is summed in another order, so results would no longer equal the
 * sequential reference bit for bit.
 *
 * This file holds the mechanisms (bucket, window, policies, magnitudes, a
 * server's set of changed rows); client_comm.c and server_comm.c decide what
 * to send. */
#include "ps/comm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rand.h"
#include "loom/error.h"

/* Tokens a bucket saves up while idle: a burst of this many ms of budget. */
#define COMM_BURST_MS 50.0

/* ---- the token bucket ---- */

void comm_bucket_init(comm_bucket *b, double mbits, uint64_t now_ms)
{
    b->rate = mbits * 1e6 / 8 / 1000;
    b->cap = b->rate * COMM_BURST_MS;
    b->tokens = b->cap;
    b->last_ms = now_ms;
}

static void refill(comm_bucket *b, uint64_t now_ms)
{
    if (now_ms <= b->last_ms) return;
    b->tokens += b->rate * (double)(now_ms - b->last_ms);
    if (b->tokens > b->cap) b->tokens = b->cap;
    b->last_ms = now_ms;
}

int comm_bucket_ready(comm_bucket *b, uint64_t now_ms)
{
    if (b->rate <= 0) return 1;
    refill(b, now_ms);
    return b->tokens >= 0;
}

void comm_bucket_charge(comm_bucket *b, uint64_t now_ms, uint64_t bytes)
{
    if (b->rate <= 0) return;
    refill(b, now_ms);
    b->tokens -= (double)bytes;
}

uint64_t comm_bucket_due(comm_bucket *b, uint64_t now_ms)
{
    if (comm_bucket_ready(b, now_ms)) return now_ms;
    return now_ms + (uint64_t)ceil(-b->tokens / b->rate);
}

/* ---- a process's manager ---- */

void comm_mgr_init(comm_mgr *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

void comm_mgr_destroy(comm_mgr *m)
{
    pthread_mutex_destroy(&m->mu);
}

void comm_mgr_budget(comm_mgr *m, double mbits, uint64_t now_ms)
{
    if (mbits <= 0) return;
    pthread_mutex_lock(&m->mu);
    if (!m->budgeted || mbits * 1e6 / 8 / 1000 > m->bucket.rate)
        comm_bucket_init(&m->bucket, mbits, now_ms);
    m->budgeted = 1;
    pthread_mutex_unlock(&m->mu);
}

uint64_t comm_mgr_wait(comm_mgr *m, uint64_t now_ms)
{
    pthread_mutex_lock(&m->mu);
    uint64_t due = m->unacked >= COMM_ACK_WINDOW           ? UINT64_MAX
                   : comm_bucket_ready(&m->bucket, now_ms) ? 0
                                                           : comm_bucket_due(&m->bucket, now_ms);
    pthread_mutex_unlock(&m->mu);
    return due;
}

void comm_mgr_sent(comm_mgr *m, uint64_t now_ms, uint64_t bytes, int managed)
{
    pthread_mutex_lock(&m->mu);
    comm_bucket_charge(&m->bucket, now_ms, bytes);
    if (managed) m->unacked++;
    pthread_mutex_unlock(&m->mu);
}

int comm_mgr_acked(comm_mgr *m)
{
    pthread_mutex_lock(&m->mu);
    int reopened = m->unacked == COMM_ACK_WINDOW;
    if (m->unacked > 0) m->unacked--;
    pthread_mutex_unlock(&m->mu);
    return reopened;
}

uint64_t comm_mgr_next(comm_mgr *m, uint64_t now_ms)
{
    pthread_mutex_lock(&m->mu);
    uint64_t next =
        m->budgeted ? comm_bucket_due(&m->bucket, now_ms) : now_ms + COMM_UNLIMITED_PERIOD_MS;
    pthread_mutex_unlock(&m->mu);
    return next;
}

uint64_t comm_mgr_due(comm_mgr *m, uint64_t now_ms)
{
    pthread_mutex_lock(&m->mu);
    uint64_t due = comm_bucket_due(&m->bucket, now_ms);
    pthread_mutex_unlock(&m->mu);
    return due;
}

/* ---- choosing rows ---- */

void comm_choice_seed(comm_choice *c, uint64_t seed)
{
    rand_seed(c->rng, seed);
    c->next_key = 0;
}

typedef struct ranking {
    loom_priority p;
    const uint64_t *keys;
    const double *abs, *rel;
    const uint64_t *order; /* random: draws; roundrobin: distance from next_key */
} ranking;

/* Whether candidate i ranks before candidate j. */
static int before(const ranking *r, uint32_t i, uint32_t j)
{
    switch (r->p) {
    case LOOM_PRIORITY_RANDOM:
        if (r->order[i] != r->order[j]) return r->order[i] > r->order[j];
        break;
    case LOOM_PRIORITY_ROUNDROBIN:
        return r->order[i] < r->order[j]; /* distinct keys: distinct distances */
    case LOOM_PRIORITY_ABS:
        if (r->abs[i] != r->abs[j]) return r->abs[i] > r->abs[j];
        break;
    default:
        if (r->rel[i] != r->rel[j]) return r->rel[i] > r->rel[j];
        break;
    }
    return r->keys[i] < r->keys[j];
}

/* Restore the heap below position at (the worst-ranked candidate on top). */
static void sift_down(const ranking *r, uint32_t *heap, size_t n, size_t at)
{
    for (;;) {
        size_t worst = at, l = 2 * at + 1, rt = l + 1;
        if (l < n && before(r, heap[worst], heap[l])) worst = l;
        if (rt < n && before(r, heap[worst], heap[rt])) worst = rt;
        if (worst == at) return;
        uint32_t tmp = heap[at];
        heap[at] = heap[worst];
        heap[worst] = tmp;
        at = worst;
    }
}

size_t comm_choose(loom_priority p, comm_choice *c, const uint64_t *keys, const double *abs,
                   const double *rel, size_t n, size_t k, uint32_t *out)
{
    if (k > n) k = n;
    if (!k) return 0;
    uint64_t *order = NULL;
    if (p == LOOM_PRIORITY_RANDOM || p == LOOM_PRIORITY_ROUNDROBIN) {
        order = malloc(n * sizeof *order);
        if (!order) return 0; /* nothing sent early now: the clock's flush sends it */
        for (size_t i = 0; i < n; i++)
            order[i] = p == LOOM_PRIORITY_RANDOM ? rand_next(c->rng) : keys[i] - c->next_key;
    }
    ranking r = {p, keys, abs, rel, order};
    /* The k best so far in a heap whose top is the worst of them. */
    size_t h = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (h < k) {
            out[h++] = i;
            if (h == k)
                for (size_t at = k / 2; at-- > 0;) sift_down(&r, out, k, at);
        } else if (before(&r, i, out[0])) {
            out[0] = i;
            sift_down(&r, out, k, 0);
        }
    }
    /* Heap sort: move the worst to the back, so out ends best first. */
    for (size_t end = h; end > 1; end--) {
        uint32_t tmp = out[0];
        out[0] = out[end - 1];
        out[end - 1] = tmp;
        sift_down(&r, out, end - 1, 0);
    }
    if (p == LOOM_PRIORITY_ROUNDROBIN) c->next_key = keys[out[h - 1]] + 1;
    free(order);
    return h;
}

void comm_row_magnitude(loom_type type, uint32_t width, const void *delta, const void *value,
                        double *abs, double *rel)
{
    double a = 0, r = 0;
    for (uint32_t j = 0; j < width; j++) {
        double d, w = 0;
        switch (type) {
        case LOOM_F32:
            d = ((const float *)delta)[j];
            if (value) w = ((const float *)value)[j];
            break;
        case LOOM_F64:
            d = ((const double *)delta)[j];
            if (value) w = ((const double *)value)[j];
            break;
        case LOOM_I32:
            d = ((const int32_t *)delta)[j];
            if (value) w = ((const int32_t *)value)[j];
            break;
        default:
            d = (double)((const int64_t *)delta)[j];
            if (value) w = (double)((const int64_t *)value)[j];
            break;
        }
        d = fabs(d);
        w = fabs(w);
        a += d;
        r += d / (w > COMM_REL_FLOOR ? w : COMM_REL_FLOOR);
    }
    *abs = a;
    *rel = r;
}

/* ---- a server's changed rows ---- */

int comm_rowset_init(comm_rowset *s, int num_workers)
{
    memset(s, 0, sizeof *s);
    s->words = ((size_t)num_workers + 63) / 64;
    return u64map_init(&s->idx, 1024);
}

void comm_rowset_free(comm_rowset *s)
{
    u64map_free(&s->idx);
    free(s->keys);
    free(s->subs);
    free(s->abs);
    free(s->rel);
    free(s->dirty);
}

static int grow_to(void **p, size_t elem, size_t cap)
{
    void *np = realloc(*p, elem * cap);
    if (!np) return LOOM_ENOMEM;
    *p = np;
    return 0;
}

int comm_rowset_subscribe(comm_rowset *s, uint64_t key, int w)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1024;
        if (grow_to((void **)&s->keys, sizeof *s->keys, cap) ||
            grow_to((void **)&s->subs, s->words * sizeof *s->subs, cap) ||
            grow_to((void **)&s->abs, sizeof *s->abs, cap) ||
            grow_to((void **)&s->rel, sizeof *s->rel, cap) ||
            grow_to((void **)&s->dirty, sizeof *s->dirty, cap))
            return LOOM_ENOMEM;
        s->cap = cap;
    }
    int inserted;
    uint32_t slot = u64map_put(&s->idx, key, (uint32_t)s->n, &inserted);
    if (slot == UINT32_MAX) return LOOM_ENOMEM;
    if (inserted) {
        s->n++;
        s->keys[slot] = key;
        memset(s->subs + (size_t)slot * s->words, 0, s->words * sizeof *s->subs);
        s->abs[slot] = s->rel[slot] = 0;
        s->dirty[slot] = 0;
    }
    s->subs[(size_t)slot * s->words + (size_t)w / 64] |= 1ull << ((unsigned)w % 64);
    return 0;
}

void comm_rowset_changed(comm_rowset *s, uint64_t key, double abs, double rel)
{
    uint32_t slot;
    if (!u64map_get(&s->idx, key, &slot)) return;
    if (!s->dirty[slot]) s->ndirty++;
    s->dirty[slot] = 1;
    s->abs[slot] += abs;
    s->rel[slot] += rel;
}
