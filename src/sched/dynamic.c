/* dynamic: a worker's side of the dynamic engine (loom_dyn_run), and the
 * attach that gives each role its part (workers: a queue of the
 * coordinator's messages; the scheduler: the coordinator, dynamic_coord.c).
 *
 * The handlers of a worker only queue the coordinator's messages; the thread
 * in loom_dyn_run takes them in arrival order and does the work there (the
 * shard's plan, the application's partial sums and apply), so that no
 * application code runs on the node's I/O thread. Arrival order is the
 * coordinator's send order (one connection), which is what makes every
 * worker see the same totals before the same plans (dynamic_coord.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/error.h"
#include "sched/dynamic.h"
#include "sched/msg_types.h"

/* ---- the worker's queue of coordinator messages ---- */

typedef struct queued {
    struct queued *next;
    node_msg m;
} queued;

typedef struct worker_queue {
    queued *head, *tail;
} worker_queue;

static void queue_destroy(void *state)
{
    worker_queue *q = state;
    while (q->head) {
        queued *e = q->head;
        q->head = e->next;
        node_msg_release(&e->m);
        free(e);
    }
    free(q);
}

static void on_coordinator_message(loom_node *n, void *ctx, node_msg *m)
{
    worker_queue *q = ctx;
    if (m->from != 0) return node_drop(n, m, "dynamic engine message not from the scheduler");
    queued *e = malloc(sizeof *e);
    if (!e) return node_drop(n, m, "out of memory for a dynamic engine message");
    node_msg_keep(&e->m, m);
    e->next = NULL;
    node_lock(n);
    if (q->tail)
        q->tail->next = e;
    else
        q->head = e;
    q->tail = e;
    node_broadcast(n);
    node_unlock(n);
}

/* The next message, waiting for it; NULL with *rc set when the job failed. */
static queued *next_message(loom_node *n, worker_queue *q, int *rc)
{
    node_lock(n);
    while (!q->head && !(*rc = node_wait(n, 0))) {
    }
    queued *e = q->head;
    if (e) {
        q->head = e->next;
        if (!q->head) q->tail = NULL;
    }
    node_unlock(n);
    return e;
}

static const msg_type_info dyn_types[] = {
    {MSG_DYN_START, "DYN_START", 0, 0, MSG_BY_WORKER},
    {MSG_DYN_PLAN_REQ, "DYN_PLAN_REQ", 0, 0, MSG_BY_SCHED},
    {MSG_DYN_PLAN, "DYN_PLAN", 1, 1, MSG_BY_SCHED | MSG_BY_WORKER},
    {MSG_DYN_PSUM, "DYN_PSUM", 1, 1, MSG_BY_WORKER},
    {MSG_DYN_SUM, "DYN_SUM", 1, 1, MSG_BY_SCHED},
    {MSG_DYN_END, "DYN_END", 0, 0, MSG_BY_SCHED},
};

node_layer_def dyn_layer_def = {"sched-dynamic", dyn_types, sizeof dyn_types / sizeof *dyn_types,
                                0};

int sched_dynamic_attach(loom_node *n)
{
    int rc = node_layer_register(&dyn_layer_def);
    if (rc) return rc;
    if (loom_node_role(n) == LOOM_SCHEDULER) return dyn_coord_attach(n);
    if (loom_node_role(n) != LOOM_WORKER) return 0;
    worker_queue *q = calloc(1, sizeof *q);
    if (!q) return LOOM_ENOMEM;
    node_set_layer(n, &dyn_layer_def, q, queue_destroy);
    node_set_handler(n, MSG_DYN_PLAN_REQ, on_coordinator_message, q);
    node_set_handler(n, MSG_DYN_PLAN, on_coordinator_message, q);
    node_set_handler(n, MSG_DYN_SUM, on_coordinator_message, q);
    node_set_handler(n, MSG_DYN_END, on_coordinator_message, q);
    return 0;
}

/* ---- options ---- */

void loom_dyn_shard_range(uint64_t dim, int workers, int rank, uint64_t *lo, uint64_t *hi)
{
    uint64_t w = workers > 0 ? (uint64_t)workers : 1, r = (uint64_t)rank;
    *lo = dim / w * r + (r < dim % w ? r : dim % w);
    *hi = *lo + dim / w + (r < dim % w);
}

int dyn_check_opts(const loom_dyn_opts *o, int workers, char *err, size_t errlen)
{
#define BAD(...) (err ? snprintf(err, errlen, __VA_ARGS__) : 0, LOOM_EINVAL)
    unsigned long long dim = (unsigned long long)o->dim;
    if (o->dim < (uint64_t)workers)
        return BAD("%llu parameters cannot give each of %d workers a shard to schedule", dim,
                   workers);
    if (o->parallel < 1 || o->parallel > LOOM_DYN_MAX_PARALLEL)
        return BAD("%u parallel updates: between 1 and %d", o->parallel, LOOM_DYN_MAX_PARALLEL);
    if (o->parallel > o->dim)
        return BAD("%u parallel updates exceed the %llu parameters", o->parallel, dim);
    uint64_t smallest = o->dim / (uint64_t)workers;
    if (o->parallel > smallest)
        return BAD("%u parallel updates exceed the %llu parameters of the smallest of %d shards",
                   o->parallel, (unsigned long long)smallest, workers);
    if (o->depth < 1 || o->depth > LOOM_DYN_MAX_DEPTH)
        return BAD("pipeline depth %u: between 1 and %d", o->depth, LOOM_DYN_MAX_DEPTH);
    if ((uint64_t)o->depth * o->parallel > smallest)
        return BAD("%u rounds in flight of %u updates exceed the %llu parameters of a shard",
                   o->depth, o->parallel, (unsigned long long)smallest);
    if (!(o->floor > 0)) return BAD("the priority floor must be above 0");
    if (o->extra > 1024) return BAD("%u extra values: at most 1024", o->extra);
    if (o->schedule < LOOM_DYN_PRIORITY || o->schedule > LOOM_DYN_USER)
        return BAD("unknown schedule %d", o->schedule);
    return 0;
#undef BAD
}

/* ---- a worker's run ---- */

typedef struct in_flight {
    uint64_t round;
    size_t n;
    uint64_t *keys;
} in_flight;

typedef struct run {
    loom_node *node;
    const loom_dyn_opts *o;
    const loom_dyn_app *app;
    int rank, workers;
    dyn_shard shard;
    in_flight *plans; /* depth of them: round t in slot t % depth */
    uint64_t next_plan, next_sum;
    uint64_t next_request; /* the round this shard plans next: rank, rank + W, ... */
    uint64_t *keys;
    double *values, *change;
    int stop;
} run;

static int send_to_coordinator(run *r, uint8_t type, uint64_t round, uint64_t a, const void *data,
                               size_t len)
{
    msg_header h = {.type = type, .req = round, .a = a};
    node_frame f = {.data = data, .len = len, .copy = 1};
    return node_send(r->node, 0, &h, &f, 1);
}

static int handle_plan_request(run *r, uint64_t round, char *err, size_t errlen)
{
    size_t n = 0;
    /* The coordinator asks for rounds in order, each once: a repeated or
     * skipped request would plan keys that no SUM ever brings back. */
    if (round != r->next_request) return LOOM_EPROTO;
    r->next_request += (uint64_t)r->workers;
    int rc = dyn_shard_plan(&r->shard, round, r->keys, &n, err, errlen);
    if (rc) return rc;
    uint8_t *wire = malloc(n * 8 + 1);
    if (!wire) return LOOM_ENOMEM;
    for (size_t i = 0; i < n; i++) msg_store_u64(wire + 8 * i, r->keys[i]);
    rc = send_to_coordinator(r, MSG_DYN_PLAN, round, 0, wire, n * 8);
    free(wire);
    return rc;
}

static int handle_plan(run *r, node_msg *m)
{
    uint64_t t = m->h.req;
    size_t len = node_frame_size(m, 0);
    if (t != r->next_plan || len % 8 || len / 8 > r->o->parallel) return LOOM_EPROTO;
    in_flight *p = &r->plans[t % r->o->depth];
    const uint8_t *data = node_frame_data(m, 0);
    p->round = t;
    p->n = len / 8;
    for (size_t i = 0; i < p->n; i++)
        if ((p->keys[i] = msg_load_u64(data + 8 * i)) >= r->o->dim) return LOOM_EPROTO;
    r->next_plan++;
    size_t width = p->n + r->o->extra;
    memset(r->values, 0, width * sizeof *r->values);
    r->app->partial(r->app->arg, t, p->keys, p->n, r->values);
    uint8_t *wire = malloc(width * 8 + 1);
    if (!wire) return LOOM_ENOMEM;
    for (size_t i = 0; i < width; i++) {
        uint64_t bits;
        memcpy(&bits, &r->values[i], 8);
        msg_store_u64(wire + 8 * i, bits);
    }
    int rc = send_to_coordinator(r, MSG_DYN_PSUM, t, (uint64_t)r->stop, wire, width * 8);
    free(wire);
    return rc;
}

static int handle_sum(run *r, node_msg *m)
{
    uint64_t u = m->h.req;
    if (u != r->next_sum || u >= r->next_plan) return LOOM_EPROTO;
    in_flight *p = &r->plans[u % r->o->depth];
    size_t width = p->n + r->o->extra;
    if (node_frame_size(m, 0) != width * 8) return LOOM_EPROTO;
    const uint8_t *data = node_frame_data(m, 0);
    for (size_t i = 0; i < width; i++) {
        uint64_t bits = msg_load_u64(data + 8 * i);
        memcpy(&r->values[i], &bits, 8);
    }
    memset(r->change, 0, p->n * sizeof *r->change);
    if (r->app->apply(r->app->arg, u, p->keys, p->n, r->values, r->change)) r->stop = 1;
    if (u % (uint64_t)r->workers == (uint64_t)r->rank)
        dyn_shard_done(&r->shard, p->keys, p->n, r->change);
    r->next_sum++;
    return 0;
}

static void free_run(run *r)
{
    if (r->plans)
        for (uint32_t i = 0; i < r->o->depth; i++) free(r->plans[i].keys);
    free(r->plans);
    free(r->keys);
    free(r->values);
    free(r->change);
    dyn_shard_free(&r->shard);
}

int loom_dyn_run(loom_node *node, const loom_dyn_opts *opts, const loom_dyn_app *app,
                 uint64_t *rounds, char *err, size_t errlen)
{
    if (rounds) *rounds = 0;
    if (err && errlen) err[0] = '\0';
    if (!node || !opts || !app || !app->partial || !app->apply) return LOOM_EINVAL;
    if (loom_node_role(node) != LOOM_WORKER) return LOOM_EROLE;
    worker_queue *q = node_layer(node, &dyn_layer_def);
    if (!q) return LOOM_ESTATE;
    run r = {.node = node, .o = opts, .app = app};
    r.rank = loom_rank(node);
    r.workers = loom_num_workers(node);
    int rc = dyn_check_opts(opts, r.workers, err, errlen);
    if (!rc && opts->schedule == LOOM_DYN_USER && !app->schedule) rc = LOOM_EINVAL;
    if (!rc && (opts->schedule == LOOM_DYN_PRIORITY || opts->schedule == LOOM_DYN_UNIFORM) &&
        !app->coupling)
        rc = LOOM_EINVAL;
    if (rc) return rc;
    uint64_t lo, hi;
    loom_dyn_shard_range(opts->dim, r.workers, r.rank, &lo, &hi);
    r.next_request = (uint64_t)r.rank;
    size_t width = (size_t)opts->parallel + opts->extra;
    r.plans = calloc(opts->depth, sizeof *r.plans);
    r.keys = malloc(opts->parallel * sizeof *r.keys);
    r.values = malloc(width * sizeof *r.values);
    r.change = malloc(opts->parallel * sizeof *r.change);
    rc = dyn_shard_init(&r.shard, opts, app, lo, hi, (uint64_t)r.rank);
    for (uint32_t i = 0; !rc && r.plans && i < opts->depth; i++)
        if (!(r.plans[i].keys = malloc(opts->parallel * sizeof *r.plans[i].keys))) rc = LOOM_ENOMEM;
    if (!rc && (!r.plans || !r.keys || !r.values || !r.change)) rc = LOOM_ENOMEM;
    if (!rc) {
        msg_header h = {.type = MSG_DYN_START,
                        .a = opts->dim,
                        .b = opts->max_rounds,
                        .req = opts->depth,
                        .table = opts->parallel,
                        .clock = opts->extra};
        rc = node_send(node, 0, &h, NULL, 0);
    }
    for (int done = 0; !rc && !done;) {
        queued *e = next_message(node, q, &rc);
        if (!e) break;
        switch (e->m.h.type) {
        case MSG_DYN_PLAN_REQ:
            rc = handle_plan_request(&r, e->m.h.req, err, errlen);
            break;
        case MSG_DYN_PLAN:
            rc = handle_plan(&r, &e->m);
            break;
        case MSG_DYN_SUM:
            rc = handle_sum(&r, &e->m);
            break;
        default: /* MSG_DYN_END */
            rc = (int)e->m.h.a;
            if (rc == 0 && e->m.h.req != r.next_sum) rc = LOOM_EPROTO;
            if (rc < 0 || rc >= LOOM_ERROR_COUNT_) rc = LOOM_EPROTO;
            done = 1;
            break;
        }
        node_msg_release(&e->m);
        free(e);
    }
    if (rounds) *rounds = r.next_sum;
    if (rc == LOOM_EPROTO && err && !err[0])
        snprintf(err, errlen, "the dynamic engine's coordinator and this worker disagree");
    free_run(&r);
    return rc;
}
