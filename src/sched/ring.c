/* ring: a static engine's blocks pass from worker to worker.
 *
 * The holder of a block sends its rows straight to the worker that holds the
 * block next (SCHED_BLOCK, worker to worker: core's node_send to a worker id),
 * with the version the block then has (table = engine, a = block, b =
 * version; one frame, the rows). The receiver keeps the message, without a
 * copy, until its engine takes it: a block that arrives before its taker asks
 * (a neighbour running ahead) waits in a list, and a taker that asks first
 * waits on the node's condition variable until its handler files it. A taker
 * names the sender the schedule makes its predecessor: a copy from anyone
 * else, or at another version, is never taken, so a block has one writer at
 * a time and each holder continues from its predecessor's complete block.
 *
 * The list is guarded by the node's lock (node_lock), which the handler takes
 * on whatever thread reads the message.
 *
 * A block travels in the smaller of two forms: dense (req = 0), its rows as
 * they are; or sparse (req = the size of one value, 4 or 8): a u64 count of
 * the values that are not zero, those values, then their positions among the
 * block's values as gaps, each the distance from the position after the one
 * before (from 0 for the first), in LEB128 (7 bits a byte, the low ones
 * first, the top bit saying that more follow). Rotated models are often
 * mostly zeros (LDA's word-topic counts at K = 1000 on AP: about one value in
 * twenty), and every block moves M - 1 times an iteration, so a dense
 * hand-over made rotation move ten times data parallelism's bytes; with
 * positions of 4 bytes it still moved more than data parallelism on a 50M
 * token corpus, where a gap takes one byte. A value is zero when all its bits
 * are: -0.0 and NaNs arrive as they were. */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "loom/error.h"
#include "sched/msg_types.h"
#include "sched/sched.h"

static const msg_type_info sched_types[] = {
    {MSG_SCHED_BLOCK, "SCHED_BLOCK", 1, 1, MSG_BY_WORKER},
};

static node_layer_def sched_layer_def = {"sched", sched_types, 1, 0};

/* Blocks a worker keeps waiting to be taken: a neighbour runs at most one
 * rotation ahead per engine, so this bounds M x engines; beyond it a block is
 * dropped and counted (a job sending that many is broken). */
#define MAX_WAITING 4096

typedef struct arrived {
    uint32_t engine, block, from;
    uint64_t version;
    node_msg m;
} arrived;

typedef struct sched_worker {
    uint32_t next_engine;
    arrived **a; /* entries allocated one by one: a kept message must not move */
    size_t n, cap;
} sched_worker;

static void on_block(loom_node *n, void *ctx, node_msg *m)
{
    sched_worker *w = ctx;
    int rank;
    if (m->h.a > UINT32_MAX || node_peer_role(n, m->from, &rank) != LOOM_WORKER) {
        node_drop(n, m, "block from a non-worker or with a bad block number");
        return;
    }
    arrived *e = malloc(sizeof *e);
    node_lock(n);
    if (w->n == w->cap && w->n < MAX_WAITING) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        arrived **a = realloc(w->a, cap * sizeof *a);
        if (a) w->a = a, w->cap = cap;
    }
    if (!e || w->n == w->cap) {
        node_unlock(n);
        free(e);
        node_drop(n, m, "too many blocks waiting to be taken");
        return;
    }
    *e = (arrived){
        .engine = m->h.table, .block = (uint32_t)m->h.a, .from = m->from, .version = m->h.b};
    node_msg_keep(&e->m, m);
    w->a[w->n++] = e;
    node_broadcast(n);
    node_unlock(n);
}

static void worker_destroy(void *state)
{
    sched_worker *w = state;
    for (size_t i = 0; i < w->n; i++) {
        node_msg_release(&w->a[i]->m);
        free(w->a[i]);
    }
    free(w->a);
    free(w);
}

uint32_t sched_next_engine(loom_node *n)
{
    sched_worker *w = node_layer(n, &sched_layer_def);
    node_lock(n);
    uint32_t id = w->next_engine++;
    node_unlock(n);
    return id;
}

/* Is value i (of `size` bytes) of p not zero? */
static int nonzero(const uint8_t *p, size_t i, size_t size)
{
    if (size == 4) {
        uint32_t v;
        memcpy(&v, p + i * 4, 4);
        return v != 0;
    }
    uint64_t v;
    memcpy(&v, p + i * 8, 8);
    return v != 0;
}

/* The number of the n values of `size` bytes that are not zero: a loop per
 * size, which the compiler vectorises (a hand-over counts its whole block). */
static uint64_t count_nonzero(const uint8_t *vals, size_t n, size_t size)
{
    uint64_t nnz = 0;
    if (size == 4)
        for (size_t i = 0; i < n; i++) {
            uint32_t v;
            memcpy(&v, vals + i * 4, 4);
            nnz += v != 0;
        }
    else
        for (size_t i = 0; i < n; i++) {
            uint64_t v;
            memcpy(&v, vals + i * 8, 8);
            nnz += v != 0;
        }
    return nnz;
}

/* Are the 32 bytes at p all zero? */
static int zero32(const uint8_t *p)
{
    uint64_t a, b, c, d;
    memcpy(&a, p, 8), memcpy(&b, p + 8, 8), memcpy(&c, p + 16, 8), memcpy(&d, p + 24, 8);
    return !(a | b | c | d);
}

/* Write v as LEB128 at p: the bytes written (at most 5). */
static size_t put_gap(uint8_t *p, uint32_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Read a LEB128 value of at most 32 bits from [*p, end) into *v and move *p
 * past it: 0, or -1 when it runs past end or past 32 bits. */
static int get_gap(const uint8_t **p, const uint8_t *end, uint32_t *v)
{
    uint32_t x = 0;
    for (unsigned shift = 0; *p < end && shift < 35; shift += 7) {
        uint8_t b = *(*p)++;
        if (shift == 28 && b > 0x0f) return -1; /* bits past 32 */
        x |= (uint32_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

/* The sparse form of n values of `size` bytes with nnz of them non-zero:
 * a buffer of *len bytes, or NULL when out of memory or when it would not
 * be smaller than the dense form's `dense` bytes (which the gaps' sizes
 * decide only as they are written). Rotated blocks are mostly zeros, so 32
 * zero bytes at a time are skipped. */
static uint8_t *encode_sparse(const uint8_t *vals, size_t n, size_t size, uint64_t nnz,
                              size_t dense, size_t *len)
{
    size_t most = 8 + (size_t)nnz * (size + 5); /* a gap takes 1 to 5 bytes */
    size_t cap = most < dense ? most : dense;
    uint8_t *buf = malloc(cap);
    if (!buf) return NULL;
    memcpy(buf, &nnz, 8);
    uint8_t *val = buf + 8, *gap = val + (size_t)nnz * size;
    const uint8_t *stop = buf + cap - 5; /* a gap written from here could pass cap */
    size_t per = 32 / size, next = 0;
    for (size_t i = 0; i < n;) {
        if (i % per == 0 && i + per <= n && zero32(vals + i * size)) {
            i += per;
            continue;
        }
        if (nonzero(vals, i, size)) {
            if (gap > stop) {
                free(buf);
                return NULL;
            }
            memcpy(val, vals + i * size, size);
            val += size;
            gap += put_gap(gap, (uint32_t)(i - next));
            next = i + 1;
        }
        i++;
    }
    *len = (size_t)(gap - buf);
    return buf;
}

static void free_encoded(void *data, void *hint)
{
    (void)hint;
    free(data);
}

int sched_send_block(loom_node *n, uint32_t engine, int to, uint32_t block, uint64_t version,
                     const void *rows, size_t bytes, size_t value_size)
{
    msg_header h = {.type = MSG_SCHED_BLOCK, .table = engine, .a = block, .b = version};
    node_frame f = {.data = rows, .len = bytes, .copy = 1};
    size_t nvals = (value_size == 4 || value_size == 8) ? bytes / value_size : 0;
    if (nvals && nvals <= UINT32_MAX && bytes % value_size == 0) {
        uint64_t nnz = count_nonzero(rows, nvals, value_size);
        size_t len;
        uint8_t *enc = 8 + nnz * (1 + value_size) < bytes
                           ? encode_sparse(rows, nvals, value_size, nnz, bytes, &len)
                           : NULL;
        if (enc) { /* else dense, which is also right */
            h.req = value_size;
            f = (node_frame){.data = enc, .len = len, .free_fn = free_encoded};
        }
    }
    return node_send(n, node_worker_id(loom_num_servers(n), to), &h, &f, 1);
}

/* A block's frame into rows (bytes of them): 0, or a sentence saying why it
 * cannot be this block. */
static const char *decode_block(const node_msg *m, void *rows, size_t bytes, size_t value_size)
{
    if (m->nframes != 1) return "not one frame";
    const uint8_t *p = node_frame_data(m, 0);
    size_t len = node_frame_size(m, 0);
    if (m->h.req == 0) {
        if (len != bytes) return "dense, of another size";
        memcpy(rows, p, bytes);
        return NULL;
    }
    if (m->h.req != value_size || bytes % value_size) return "sparse, of another value size";
    uint64_t nnz;
    if (len < 8) return "sparse, shorter than its count";
    memcpy(&nnz, p, 8);
    if (nnz > (len - 8) / (1 + value_size)) return "sparse, its count and its size disagree";
    memset(rows, 0, bytes);
    const uint8_t *val = p + 8, *gap = val + nnz * value_size, *end = p + len;
    uint64_t next = 0, nvals = bytes / value_size; /* the next position is at least next */
    for (uint64_t i = 0; i < nnz; i++) {
        uint32_t g;
        if (get_gap(&gap, end, &g)) return "sparse, a gap runs past its end or past 32 bits";
        if (next + g >= nvals) return "sparse, a position past the block's end";
        memcpy((uint8_t *)rows + (next + g) * value_size, val + i * value_size, value_size);
        next += (uint64_t)g + 1;
    }
    if (gap != end) return "sparse, its count and its size disagree";
    return NULL;
}

int sched_take_block(loom_node *n, uint32_t engine, int from, uint32_t block, uint64_t version,
                     void *rows, size_t bytes, size_t value_size)
{
    sched_worker *w = node_layer(n, &sched_layer_def);
    uint32_t sender = node_worker_id(loom_num_servers(n), from);
    arrived *e = NULL;
    int rc = 0;
    node_lock(n);
    while (!e && !rc) {
        for (size_t i = 0; i < w->n && !e; i++) {
            arrived *x = w->a[i];
            if (x->engine == engine && x->block == block && x->version == version &&
                x->from == sender) {
                e = x;
                w->a[i] = w->a[--w->n];
            }
        }
        if (!e) rc = node_wait(n, 0);
    }
    node_unlock(n);
    if (rc) return rc;
    const char *bad = decode_block(&e->m, rows, bytes, value_size);
    if (bad) {
        log_error("block %u of engine %u from worker %d: %s (%zu bytes; expected %zu of rows)",
                  block, engine, from, bad, e->m.nframes == 1 ? node_frame_size(&e->m, 0) : 0,
                  bytes);
        rc = LOOM_EPROTO;
    }
    node_msg_release(&e->m);
    free(e);
    return rc;
}

int sched_attach(loom_node *n)
{
    int rc = node_layer_register(&sched_layer_def);
    if (rc || loom_node_role(n) != LOOM_WORKER) return rc;
    sched_worker *w = calloc(1, sizeof *w);
    if (!w) return LOOM_ENOMEM;
    node_set_layer(n, &sched_layer_def, w, worker_destroy);
    node_set_handler(n, MSG_SCHED_BLOCK, on_block, w);
    return 0;
}
