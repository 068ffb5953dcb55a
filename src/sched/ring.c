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
 * on whatever thread reads the message. */
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

int sched_send_block(loom_node *n, uint32_t engine, int to, uint32_t block, uint64_t version,
                     const void *rows, size_t bytes)
{
    msg_header h = {.type = MSG_SCHED_BLOCK, .table = engine, .a = block, .b = version};
    node_frame f = {.data = rows, .len = bytes, .copy = 1};
    return node_send(n, node_worker_id(loom_num_servers(n), to), &h, &f, 1);
}

int sched_take_block(loom_node *n, uint32_t engine, int from, uint32_t block, uint64_t version,
                     void *rows, size_t bytes)
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
    if (e->m.nframes == 1 && node_frame_size(&e->m, 0) == bytes) {
        memcpy(rows, node_frame_data(&e->m, 0), bytes);
    } else {
        log_error("block %u of engine %u from worker %d: %zu bytes, expected %zu", block, engine,
                  from, e->m.nframes == 1 ? node_frame_size(&e->m, 0) : 0, bytes);
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
