/* ring: key ranges on a consistent-hash ring of virtual servers; see ring.h.
 *
 * A point's position is a fraction of the key span taken from a 64-bit hash
 * of (server, point number) (splitmix64's finaliser: fixed, so every process
 * agrees). Points are sorted by position (ties by server, then point); point
 * i owns [pos_i, pos_{i+1}), and the last point also owns the wrap-around
 * [key_begin, pos_0). Successors of a point are the points after it on the
 * ring; its replicas are the first `replicas` servers among their owners that
 * are neither its own server nor already chosen. */
#include "ps/ring.h"

#include <stdlib.h>
#include <string.h>

#include "core/rand.h"
#include "loom/error.h"
#include "ps/ps.h"

typedef struct point {
    ps_ring_key pos;
    int server, number;
} point;

static int point_order(const void *a, const void *b)
{
    const point *x = a, *y = b;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    if (x->server != y->server) return x->server < y->server ? -1 : 1;
    return (x->number > y->number) - (x->number < y->number);
}

/* The replicas of point i (sorted points p[0..np)) into out[0..k). */
static void successors(const point *p, size_t np, size_t i, int k, uint16_t *out)
{
    int got = 0;
    for (size_t step = 1; step < np && got < k; step++) {
        int s = p[(i + step) % np].server;
        int taken = s == p[i].server;
        for (int j = 0; j < got && !taken; j++) taken = out[j] == s;
        if (!taken) out[got++] = (uint16_t)s;
    }
}

int ps_ring_build(ps_ring *r, const loom_table_opts *o, int num_servers, int vnodes, int replicas)
{
    memset(r, 0, sizeof *r);
    if (num_servers < 1 || num_servers > 65535 || vnodes < 1 || replicas < 0 ||
        replicas >= num_servers || (size_t)vnodes > SIZE_MAX / 64 / (size_t)num_servers)
        return LOOM_EINVAL;
    ps_ring_key begin = o->key_begin;
    ps_ring_key end = o->key_end ? (ps_ring_key)o->key_end : (ps_ring_key)1 << 64;
    ps_ring_key span = end - begin;
    size_t np = (size_t)num_servers * (size_t)vnodes;
    point *p = malloc(np * sizeof *p);
    if (!p) return LOOM_ENOMEM;
    for (int s = 0; s < num_servers; s++)
        for (int v = 0; v < vnodes; v++) {
            point *q = &p[(size_t)s * (size_t)vnodes + (size_t)v];
            q->server = s;
            q->number = v;
            if (vnodes == 1) /* the even split */
                q->pos = ps_slice_start(o, num_servers, s);
            else /* a 64-bit fraction of the span */
                q->pos = begin + (span * (rand_hash64((uint64_t)s << 32 | (uint64_t)v) >> 1) >> 63);
        }
    qsort(p, np, sizeof *p, point_order);

    /* Ranges in key order: the wrap-around piece [begin, pos_0) of the last
     * point first, then each point's [pos_i, pos_{i+1}); empty ones dropped. */
    size_t per = (size_t)(1 + replicas);
    r->start = malloc((np + 2) * sizeof *r->start);
    r->holder = malloc((np + 1) * per * sizeof *r->holder);
    if (!r->start || !r->holder) {
        free(p);
        ps_ring_free(r);
        return LOOM_ENOMEM;
    }
    r->num_servers = num_servers;
    r->replicas = replicas;
    for (size_t k = 0; k <= np; k++) {
        size_t i = k == 0 ? np - 1 : k - 1; /* the point owning this piece */
        ps_ring_key lo = k == 0 ? begin : p[i].pos;
        ps_ring_key hi = k == np ? end : p[k].pos;
        if (lo >= hi) continue;
        uint16_t *h = &r->holder[r->nranges * per];
        h[0] = (uint16_t)p[i].server;
        successors(p, np, i, replicas, h + 1);
        r->start[r->nranges++] = lo;
    }
    r->start[r->nranges] = end;
    free(p);
    return 0;
}

void ps_ring_free(ps_ring *r)
{
    free(r->start);
    free(r->holder);
    memset(r, 0, sizeof *r);
}

size_t ps_ring_range_of(const ps_ring *r, uint64_t key)
{
    size_t lo = 0, hi = r->nranges; /* the answer lies in [lo, hi) */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->start[mid] <= (ps_ring_key)key)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

int ps_ring_master(const ps_ring *r, size_t rg, const uint8_t *dead, const uint32_t *returned)
{
    int back = -1;
    for (int i = 0; i <= r->replicas; i++) {
        int s = ps_ring_holder(r, rg, i);
        if (!dead || dead[s] == PS_UP) return s;
        if (dead[s] == PS_BACK && (back < 0 || returned[s] < returned[back])) back = s;
    }
    return back;
}

int ps_ring_holds(const ps_ring *r, size_t rg, int s)
{
    for (int i = 0; i <= r->replicas; i++)
        if (ps_ring_holder(r, rg, i) == s) return 1;
    return 0;
}
