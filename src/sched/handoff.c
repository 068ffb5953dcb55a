/* handoff: blocks of a static engine change hands through their server.
 *
 * Until workers can send to each other, a block's "ring" runs through one
 * server: block b of engine e belongs to server (e + b) mod S, which keeps its
 * version (how many holders have released it) and its current holder. A
 * worker asks for the block at the version its schedule says it must see
 * (SCHED_ACQUIRE); the server grants it (SCHED_GRANT) once the previous holder
 * has released that version and nobody holds it, and keeps the request until
 * then. The holder pushes its new values to the table, waits for the servers'
 * acknowledgements, and only then releases the block one version later
 * (SCHED_RELEASE), so the next holder's pull reads the complete block.
 *
 * The server enforces one writer per block: a second request for a version
 * that is held, a request for a version already passed, or a release by a
 * worker that does not hold the block (or with another version than the next)
 * is refused (LOOM_ESTATE in the grant) or dropped and counted, never obeyed.
 *
 * Servers handle all of it on their I/O thread (no locks); workers keep the
 * requests they are waiting for under a mutex, since grants may be handled by
 * any thread waiting in loom_wait(). */
#include <pthread.h>
#include <stdlib.h>

#include "core/log.h"
#include "core/u64map.h"
#include "loom/error.h"
#include "sched/sched.h"

/* Requests a server keeps waiting, over all blocks: far more than M workers
 * each waiting for one block need; beyond it a request is refused. */
#define MAX_WAITING 65536

typedef struct block_state {
    uint64_t version;
    uint32_t holder; /* node id of the worker holding it; 0 (the scheduler's id): nobody */
} block_state;

typedef struct waiting {
    uint64_t key; /* engine << 32 | block */
    uint64_t version, req;
    uint32_t from;
} waiting;

typedef struct sched_server {
    u64map index; /* engine << 32 | block -> slot in blocks */
    block_state *blocks;
    size_t nblocks, cap;
    waiting *waits;
    size_t nwaits, wcap;
} sched_server;

typedef struct pending {
    uint64_t req;
    loom_ts ts;
    uint32_t server; /* node id the grant must come from */
} pending;

typedef struct sched_worker {
    pthread_mutex_t mu;
    uint32_t next_engine;
    uint64_t next_req;
    pending *p;
    size_t n, cap;
} sched_worker;

static uint64_t block_key(uint32_t engine, uint32_t block)
{
    return (uint64_t)engine << 32 | block;
}

static uint32_t block_server(loom_node *n, uint32_t engine, uint32_t block)
{
    int S = loom_num_servers(n);
    return node_server_id(S, (int)(((uint64_t)engine + block) % (uint64_t)S));
}

/* ---- servers ---- */

static block_state *block_find(sched_server *s, uint64_t key)
{
    if (s->nblocks == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        block_state *b = realloc(s->blocks, cap * sizeof *b);
        if (!b) return NULL;
        s->blocks = b, s->cap = cap;
    }
    int inserted;
    uint32_t slot = u64map_put(&s->index, key, (uint32_t)s->nblocks, &inserted);
    if (slot == UINT32_MAX) return NULL;
    if (inserted) s->blocks[s->nblocks++] = (block_state){0, 0};
    return &s->blocks[slot];
}

static void grant(loom_node *n, uint32_t to, uint64_t req, int status)
{
    msg_header h = {.type = MSG_SCHED_GRANT, .req = req, .a = (uint64_t)status};
    node_send(n, to, &h, NULL, 0); /* a worker that vanished fails the job anyway */
}

static void on_acquire(loom_node *n, void *ctx, node_msg *m)
{
    sched_server *s = ctx;
    uint64_t key = block_key(m->h.table, (uint32_t)m->h.a);
    if (m->h.a > UINT32_MAX ||
        block_server(n, m->h.table, (uint32_t)m->h.a) != node_server_id(0, loom_rank(n))) {
        node_drop(n, m, "block request for a block of another server");
        return;
    }
    block_state *b = block_find(s, key);
    if (!b) {
        grant(n, m->from, m->h.req, LOOM_ENOMEM);
        return;
    }
    uint64_t v = m->h.b;
    if (v < b->version || (v == b->version && b->holder)) {
        log_error("block %u of engine %u: worker node %u asked for version %llu, but it is at "
                  "version %llu%s: two writers scheduled at once",
                  (unsigned)m->h.a, (unsigned)m->h.table, (unsigned)m->from, (unsigned long long)v,
                  (unsigned long long)b->version, b->holder ? " and held" : "");
        grant(n, m->from, m->h.req, LOOM_ESTATE);
        return;
    }
    if (v == b->version) {
        b->holder = m->from;
        grant(n, m->from, m->h.req, 0);
        return;
    }
    if (s->nwaits == MAX_WAITING) {
        grant(n, m->from, m->h.req, LOOM_ELIMIT);
        return;
    }
    if (s->nwaits == s->wcap) {
        size_t cap = s->wcap ? 2 * s->wcap : 16;
        waiting *w = realloc(s->waits, cap * sizeof *w);
        if (!w) {
            grant(n, m->from, m->h.req, LOOM_ENOMEM);
            return;
        }
        s->waits = w, s->wcap = cap;
    }
    s->waits[s->nwaits++] = (waiting){key, v, m->h.req, m->from};
}

static void on_release(loom_node *n, void *ctx, node_msg *m)
{
    sched_server *s = ctx;
    uint32_t slot;
    uint64_t key = block_key(m->h.table, (uint32_t)m->h.a);
    if (m->h.a > UINT32_MAX || !u64map_get(&s->index, key, &slot)) {
        node_drop(n, m, "release of a block nobody holds");
        return;
    }
    block_state *b = &s->blocks[slot];
    if (b->holder != m->from || m->h.b != b->version + 1) {
        node_drop(n, m, "release of a block by a worker that does not hold it");
        return;
    }
    b->version = m->h.b;
    b->holder = 0;
    /* The one request waiting for this version gets it; one asking for a
     * later version keeps waiting. */
    for (size_t i = 0; i < s->nwaits; i++) {
        waiting *w = &s->waits[i];
        if (w->key != key || w->version != b->version) continue;
        b->holder = w->from;
        grant(n, w->from, w->req, 0);
        s->waits[i] = s->waits[--s->nwaits];
        break;
    }
}

static void server_destroy(void *state)
{
    sched_server *s = state;
    u64map_free(&s->index);
    free(s->blocks);
    free(s->waits);
    free(s);
}

/* ---- workers ---- */

static void on_grant(loom_node *n, void *ctx, node_msg *m)
{
    sched_worker *w = ctx;
    loom_ts ts = 0;
    pthread_mutex_lock(&w->mu);
    for (size_t i = 0; i < w->n; i++)
        if (w->p[i].req == m->h.req && w->p[i].server == m->from) {
            ts = w->p[i].ts;
            w->p[i] = w->p[--w->n];
            break;
        }
    pthread_mutex_unlock(&w->mu);
    if (!ts) {
        node_drop(n, m, "grant of no pending block request");
        return;
    }
    node_ts_done(n, ts, m->h.a < LOOM_ERROR_COUNT_ ? (int)m->h.a : LOOM_EPROTO);
}

static void worker_destroy(void *state)
{
    sched_worker *w = state;
    pthread_mutex_destroy(&w->mu);
    free(w->p);
    free(w);
}

uint32_t sched_next_engine(loom_node *n)
{
    sched_worker *w = node_layer(n, NODE_LAYER_SCHED);
    pthread_mutex_lock(&w->mu);
    uint32_t id = w->next_engine++;
    pthread_mutex_unlock(&w->mu);
    return id;
}

int sched_acquire_async(loom_node *n, uint32_t engine, uint32_t block, uint64_t version,
                        loom_ts *ts)
{
    sched_worker *w = node_layer(n, NODE_LAYER_SCHED);
    uint32_t server = block_server(n, engine, block);
    loom_ts t = node_ts_new(n, 1);
    if (!t) return LOOM_ENOMEM;
    pthread_mutex_lock(&w->mu);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 4;
        pending *p = realloc(w->p, cap * sizeof *p);
        if (!p) {
            pthread_mutex_unlock(&w->mu);
            node_ts_done(n, t, LOOM_ENOMEM);
            return LOOM_ENOMEM;
        }
        w->p = p, w->cap = cap;
    }
    uint64_t req = ++w->next_req;
    w->p[w->n++] = (pending){req, t, server};
    pthread_mutex_unlock(&w->mu);
    msg_header h = {
        .type = MSG_SCHED_ACQUIRE, .table = engine, .req = req, .a = block, .b = version};
    int rc = node_send(n, server, &h, NULL, 0);
    if (rc) { /* no grant will come: complete it here (the grant handler cannot) */
        pthread_mutex_lock(&w->mu);
        for (size_t i = 0; i < w->n; i++)
            if (w->p[i].req == req) w->p[i] = w->p[--w->n];
        pthread_mutex_unlock(&w->mu);
        node_ts_done(n, t, rc);
        return rc;
    }
    *ts = t;
    return 0;
}

int sched_release(loom_node *n, uint32_t engine, uint32_t block, uint64_t version)
{
    msg_header h = {.type = MSG_SCHED_RELEASE, .table = engine, .a = block, .b = version};
    return node_send(n, block_server(n, engine, block), &h, NULL, 0);
}

int sched_attach(loom_node *n)
{
    switch (loom_node_role(n)) {
    case LOOM_SERVER: {
        sched_server *s = calloc(1, sizeof *s);
        if (!s || u64map_init(&s->index, 64)) {
            free(s);
            return LOOM_ENOMEM;
        }
        node_set_layer(n, NODE_LAYER_SCHED, s, server_destroy);
        node_set_handler(n, MSG_SCHED_ACQUIRE, on_acquire, s);
        node_set_handler(n, MSG_SCHED_RELEASE, on_release, s);
        return 0;
    }
    case LOOM_WORKER: {
        sched_worker *w = calloc(1, sizeof *w);
        if (!w) return LOOM_ENOMEM;
        pthread_mutex_init(&w->mu, NULL);
        node_set_layer(n, NODE_LAYER_SCHED, w, worker_destroy);
        node_set_handler(n, MSG_SCHED_GRANT, on_grant, w);
        return 0;
    }
    default:
        return 0;
    }
}
