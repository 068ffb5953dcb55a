/* filter_select: the filters that choose what a sender sends (kkt, sigmod,
 * skip), each in place on the chain's working rows (keys ascending, values as
 * doubles) and keeping them ascending.
 *
 * sigmod is the one with memory. On a push the rows are deltas: a key's
 * deltas add up in `held` until some coordinate of the sum exceeds the
 * threshold, and then the sum goes out and only the rounding to the table's
 * type stays behind, so nothing pushed is lost, only delayed (a flush sends
 * everything held). On a pull reply the rows are values: `held` is what the
 * receiver last got, and a row goes out again only when it has moved by more
 * than the threshold, so the receiver's copy is never further off than that. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loom/error.h"
#include "ps/filter_impl.h"

int filter_work_reserve(filter_chain *c, size_t n)
{
    filter_rows *w = &c->work;
    if (n <= w->cap) return 0;
    uint64_t *k = realloc(w->keys, n * sizeof *k);
    if (!k) return LOOM_ENOMEM;
    w->keys = k;
    double *v = realloc(w->vals, n * c->width * sizeof *v);
    if (!v) return LOOM_ENOMEM;
    w->vals = v;
    w->cap = n;
    return 0;
}

/* Keep working row i as row `kept` (kept <= i). */
static void keep_row(filter_chain *c, size_t i, size_t kept)
{
    if (i == kept) return;
    c->work.keys[kept] = c->work.keys[i];
    memmove(c->work.vals + kept * c->width, c->work.vals + i * c->width,
            c->width * sizeof *c->work.vals);
}

static double weight(const filter_chain *c, const void *weights, size_t i)
{
    return c->type == LOOM_F32 ? (double)((const float *)weights)[i] : ((const double *)weights)[i];
}

int filter_kkt(filter_chain *c, const filter_msg *m)
{
    if (!m->weights) return 0;
    double bound = c->spec.arg[FILTER_KKT];
    size_t kept = 0;
    for (size_t i = 0; i < c->work.n; i++) {
        const double *g = c->work.vals + i * c->width;
        int inactive = 1;
        for (size_t j = 0; j < c->width && inactive; j++)
            inactive = weight(c, m->weights, i * c->width + j) == 0 && fabs(g[j]) <= bound;
        if (!inactive) keep_row(c, i, kept++);
    }
    c->work.n = kept;
    return 0;
}

void filter_skip(filter_chain *c)
{
    double keep = c->spec.arg[FILTER_SKIP];
    size_t kept = 0;
    for (size_t i = 0; i < c->work.n; i++) {
        if (filter_uniform(c) >= keep) continue;
        keep_row(c, i, kept);
        double *v = c->work.vals + kept * c->width;
        for (size_t j = 0; j < c->width; j++) v[j] /= keep;
        kept++;
    }
    c->work.n = kept;
}

/* ---- sigmod ---- */

void filter_held_free(filter_held *h)
{
    u64map_free(&h->map);
    free(h->keys);
    free(h->rows);
}

/* The slot of key (a new one holds zeros and *fresh is set); UINT32_MAX if out of memory. */
static uint32_t held_slot(filter_chain *c, uint64_t key, int *fresh)
{
    filter_held *h = &c->held;
    if (h->nslots == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        uint64_t *k = realloc(h->keys, cap * sizeof *k);
        if (!k) return UINT32_MAX;
        h->keys = k;
        double *r = realloc(h->rows, cap * c->width * sizeof *r);
        if (!r) return UINT32_MAX;
        h->rows = r;
        h->cap = cap;
    }
    if (h->nslots >= UINT32_MAX - 1) return UINT32_MAX;
    uint32_t slot = u64map_put(&h->map, key, (uint32_t)h->nslots, fresh);
    if (slot == UINT32_MAX) return slot;
    if (*fresh) {
        h->keys[slot] = key;
        memset(h->rows + (size_t)slot * c->width, 0, c->width * sizeof *h->rows);
        h->nslots++;
    }
    return slot;
}

/* The value a table of the chain's type stores for x. */
static double as_stored(const filter_chain *c, double x)
{
    return c->type == LOOM_F32 ? (double)(float)x : x;
}

/* Send row v (width values) of held slot `held`: v becomes what goes out and
 * held keeps the rounding. */
static void send_sum(const filter_chain *c, double *v, double *held)
{
    for (size_t j = 0; j < c->width; j++) {
        double sent = as_stored(c, v[j]);
        held[j] = v[j] - sent;
        v[j] = sent;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Flush on a push: the keys held back that this message did not carry join it
 * (merged in key order), with their sums. */
static int flush_held(filter_chain *c, const unsigned char *carried)
{
    filter_held *h = &c->held;
    size_t extra = 0;
    uint64_t *more = malloc((h->nslots ? h->nslots : 1) * sizeof *more);
    if (!more) return LOOM_ENOMEM;
    for (size_t s = 0; s < h->nslots; s++) {
        if (carried[s]) continue;
        const double *row = h->rows + s * c->width;
        for (size_t j = 0; j < c->width; j++)
            if (row[j] != 0) {
                more[extra++] = h->keys[s];
                break;
            }
    }
    if (extra == 0) {
        free(more);
        return 0;
    }
    qsort(more, extra, sizeof *more, cmp_u64);
    size_t n = c->work.n, total = n + extra;
    uint64_t *keys = malloc(total * sizeof *keys);
    double *vals = malloc(total * c->width * sizeof *vals);
    if (!keys || !vals || filter_work_reserve(c, total)) {
        free(more);
        free(keys);
        free(vals);
        return LOOM_ENOMEM;
    }
    size_t a = 0, b = 0;
    for (size_t o = 0; o < total; o++) {
        double *dst = vals + o * c->width;
        if (b == extra || (a < n && c->work.keys[a] < more[b])) {
            keys[o] = c->work.keys[a];
            memcpy(dst, c->work.vals + a * c->width, c->width * sizeof *dst);
            a++;
        } else {
            uint32_t slot = 0;
            u64map_get(&h->map, more[b], &slot);
            double *held = h->rows + (size_t)slot * c->width;
            keys[o] = more[b++];
            memcpy(dst, held, c->width * sizeof *dst);
            send_sum(c, dst, held);
        }
    }
    memcpy(c->work.keys, keys, total * sizeof *keys);
    memcpy(c->work.vals, vals, total * c->width * sizeof *vals);
    c->work.n = total;
    free(more);
    free(keys);
    free(vals);
    return 0;
}

int filter_sigmod(filter_chain *c, int flush)
{
    double threshold = c->spec.arg[FILTER_SIGMOD];
    filter_held *h = &c->held;
    size_t kept = 0;
    int rc = 0;
    for (size_t i = 0; i < c->work.n; i++) {
        int fresh = 0;
        uint32_t slot = held_slot(c, c->work.keys[i], &fresh);
        if (slot == UINT32_MAX) {
            rc = LOOM_ENOMEM;
            break;
        }
        double *v = c->work.vals + i * c->width, *held = h->rows + (size_t)slot * c->width;
        double moved = 0;
        for (size_t j = 0; j < c->width; j++) {
            /* push: v becomes the sum so far; pull: how far the value moved. */
            double d = c->dir == FILTER_PUSH ? (v[j] += held[j]) : v[j] - held[j];
            if (fabs(d) > moved) moved = fabs(d);
        }
        int send = flush || moved > threshold || (fresh && c->dir == FILTER_PULL);
        if (c->dir == FILTER_PUSH) {
            if (send)
                send_sum(c, v, held);
            else
                memcpy(held, v, c->width * sizeof *held);
        } else if (send) {
            memcpy(held, v, c->width * sizeof *held);
        }
        if (send) keep_row(c, i, kept++);
    }
    c->work.n = kept;
    if (rc || !flush || c->dir != FILTER_PUSH) return rc;
    /* Mark the slots of the keys this message carried (all of them, sent or not:
     * with a flush every carried key was sent). */
    unsigned char *carried = calloc(h->nslots ? h->nslots : 1, 1);
    if (!carried) return LOOM_ENOMEM;
    for (size_t i = 0; i < kept; i++) {
        uint32_t slot;
        if (u64map_get(&h->map, c->work.keys[i], &slot)) carried[slot] = 1;
    }
    rc = flush_held(c, carried);
    free(carried);
    return rc;
}
