/* dynamic_coord: the coordinator of the dynamic engine, in the scheduler
 * process (the one process every worker already talks to).
 *
 * It runs entirely in message handlers. Once every worker has sent
 * DYN_START with the same options, it asks shard t mod W for the plan of
 * round t (DYN_PLAN_REQ), forwards each plan to every worker (DYN_PLAN),
 * collects each worker's partial sums (DYN_PSUM), adds them in worker order
 * (so the totals do not depend on arrival order) and sends the totals
 * (DYN_SUM). With depth s, what it sends every worker is one stream in a
 * fixed order:
 *
 *     PLAN 0, ..., PLAN s-1, SUM 0, PLAN s, SUM 1, PLAN s+1, SUM 2, ...
 *
 * PLAN t goes only after SUM t-s, and SUM u only after PLAN u+s-1, and a
 * worker handles its stream in order, so every worker computes round t's
 * partial sums after applying exactly the totals of rounds <= t-s: the same
 * residual everywhere, stale by s - 1 rounds. The plan of round t is
 * requested right after SUM t-s is sent, so the shard has those totals too.
 *
 * A run ends after max_rounds rounds, or when the partial sums of a round
 * carry the workers' stop (no plan is sent after that; rounds already sent
 * finish), once no plan request is outstanding: then DYN_END. A message that
 * breaks the protocol ends the run with DYN_END carrying LOOM_EPROTO (every
 * worker's loom_dyn_run returns it) instead of leaving the workers waiting. */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "loom/error.h"
#include "sched/dynamic.h"
#include "sched/msg_types.h"

typedef struct round_slot {
    uint64_t round;
    int have_plan;
    size_t nkeys;
    uint64_t *keys; /* parallel */
    int psums;      /* workers whose partial sums arrived */
    uint8_t *got;   /* per worker */
    int stop;       /* some worker asked to stop */
    double *values; /* workers x (parallel + extra), in worker order */
} round_slot;

typedef struct coord {
    int workers, num_servers;
    int started;     /* DYN_STARTs received, one per worker */
    uint8_t *joined; /* by rank: its DYN_START arrived (a repeat must not count twice) */
    uint64_t dim, max_rounds;
    uint32_t depth, parallel, extra;
    uint64_t next_plan;    /* next round whose PLAN goes to the workers */
    uint64_t next_sum;     /* next round whose SUM goes to the workers */
    uint64_t last_round;   /* rounds below it run */
    uint64_t next_request; /* next round whose plan is requested */
    round_slot *slots;     /* depth of them: round t in slot t % depth */
    double *sums;
} coord;

static void free_slots(coord *c)
{
    if (c->slots)
        for (uint32_t i = 0; i < c->depth; i++) {
            free(c->slots[i].keys);
            free(c->slots[i].got);
            free(c->slots[i].values);
        }
    free(c->slots);
    free(c->sums);
    free(c->joined);
    c->slots = NULL;
    c->sums = NULL;
    c->joined = NULL;
}

/* Back to waiting for a run's DYN_STARTs. */
static void reset(coord *c)
{
    free_slots(c);
    c->started = 0;
    c->next_plan = c->next_sum = c->next_request = c->last_round = 0;
}

static void coord_destroy(void *state)
{
    coord *c = state;
    free_slots(c);
    free(c);
}

static uint32_t worker_id(const coord *c, int rank)
{
    return node_worker_id(c->num_servers, rank);
}

static void send_all(loom_node *n, coord *c, uint8_t type, uint64_t round, uint64_t a,
                     const void *data, size_t len)
{
    for (int w = 0; w < c->workers; w++) {
        msg_header h = {.type = type, .req = round, .a = a};
        node_frame f = {.data = data, .len = len, .copy = 1};
        node_send(n, worker_id(c, w), &h, data ? &f : NULL, data ? 1 : 0);
    }
}

static void end_run(loom_node *n, coord *c, int status)
{
    send_all(n, c, MSG_DYN_END, c->next_sum, (uint64_t)status, NULL, 0);
    reset(c);
}

/* A peer broke the protocol: count it, end the run for everyone. */
static void fail_run(loom_node *n, coord *c, const node_msg *m, const char *why)
{
    node_drop(n, m, why);
    if (c->started) end_run(n, c, LOOM_EPROTO);
}

static void request_plan(loom_node *n, coord *c)
{
    uint64_t t = c->next_request++;
    round_slot *s = &c->slots[t % c->depth];
    s->round = t;
    s->have_plan = 0;
    s->nkeys = 0;
    s->psums = 0;
    s->stop = 0;
    memset(s->got, 0, (size_t)c->workers);
    msg_header h = {.type = MSG_DYN_PLAN_REQ, .req = t};
    node_send(n, worker_id(c, (int)(t % (uint64_t)c->workers)), &h, NULL, 0);
}

/* Send whatever the stream order allows now; end the run when all is done. */
static void advance(loom_node *n, coord *c)
{
    for (int progressed = 1; progressed && c->started == c->workers;) {
        progressed = 0;
        uint64_t t = c->next_plan;
        round_slot *p = &c->slots[t % c->depth];
        if (t < c->last_round && t < c->next_request && p->have_plan &&
            (t < c->depth || c->next_sum > t - c->depth)) {
            uint8_t *wire = malloc(p->nkeys * 8 + 1);
            if (!wire) return end_run(n, c, LOOM_ENOMEM);
            for (size_t i = 0; i < p->nkeys; i++) msg_store_u64(wire + 8 * i, p->keys[i]);
            send_all(n, c, MSG_DYN_PLAN, t, 0, wire, p->nkeys * 8);
            free(wire);
            c->next_plan++;
            progressed = 1;
        }
        uint64_t u = c->next_sum;
        round_slot *s = &c->slots[u % c->depth];
        if (u < c->next_plan && s->psums == c->workers &&
            (u + c->depth - 1 < c->next_plan || u + c->depth - 1 >= c->last_round)) {
            size_t len = s->nkeys + c->extra;
            memset(c->sums, 0, len * sizeof *c->sums);
            for (int w = 0; w < c->workers; w++)
                for (size_t i = 0; i < len; i++)
                    c->sums[i] += s->values[(size_t)w * (c->parallel + c->extra) + i];
            uint8_t *wire = malloc(len * 8 + 1);
            if (!wire) return end_run(n, c, LOOM_ENOMEM);
            for (size_t i = 0; i < len; i++) {
                uint64_t bits;
                memcpy(&bits, &c->sums[i], 8);
                msg_store_u64(wire + 8 * i, bits);
            }
            send_all(n, c, MSG_DYN_SUM, u, 0, wire, len * 8);
            free(wire);
            c->next_sum++;
            /* The workers' stop: no plan after the ones already sent. */
            if (s->stop && c->last_round > c->next_plan) c->last_round = c->next_plan;
            if (c->next_request < c->last_round && c->next_request < c->next_sum + c->depth)
                request_plan(n, c);
            progressed = 1;
        }
    }
    if (c->started == c->workers && c->next_sum >= c->next_plan && c->next_plan >= c->last_round) {
        /* Every requested plan came back (none is left to arrive after END). */
        int outstanding = 0;
        for (uint64_t t = c->next_plan; t < c->next_request; t++)
            outstanding |= !c->slots[t % c->depth].have_plan;
        if (!outstanding) end_run(n, c, 0);
    }
}

static int rank_of(loom_node *n, const node_msg *m)
{
    int rank = -1;
    if (node_peer_role(n, m->from, &rank) != LOOM_WORKER) return -1;
    return rank;
}

static void on_start(loom_node *n, void *ctx, node_msg *m)
{
    coord *c = ctx;
    const msg_header *h = &m->h;
    int rank = rank_of(n, m);
    if (rank < 0) return node_drop(n, m, "DYN_START from a non-worker");
    if (c->started == c->workers) return fail_run(n, c, m, "DYN_START during a run");
    if (c->started && c->joined[rank]) return fail_run(n, c, m, "DYN_START twice from one worker");
    if (c->started == 0) {
        char err[160];
        loom_dyn_opts o = {.dim = h->a,
                           .parallel = h->table,
                           .depth = (uint32_t)h->req,
                           .max_rounds = h->b,
                           .extra = (uint32_t)h->clock,
                           .floor = 1};
        o.candidates = o.parallel;
        if (h->req > LOOM_DYN_MAX_DEPTH || h->clock < 0 || h->clock > 1024 ||
            dyn_check_opts(&o, c->workers, err, sizeof err))
            return node_drop(n, m, "DYN_START with options that do not fit");
        c->dim = h->a;
        c->max_rounds = c->last_round = h->b;
        c->depth = o.depth;
        c->parallel = o.parallel;
        c->extra = o.extra;
        size_t width = (size_t)c->parallel + c->extra;
        c->slots = calloc(c->depth, sizeof *c->slots);
        c->sums = malloc(width * sizeof *c->sums);
        c->joined = calloc((size_t)c->workers, 1);
        int ok = c->slots && c->sums && c->joined;
        for (uint32_t i = 0; ok && i < c->depth; i++) {
            round_slot *s = &c->slots[i];
            s->keys = malloc(c->parallel * sizeof *s->keys);
            s->got = calloc((size_t)c->workers, 1);
            s->values = malloc((size_t)c->workers * width * sizeof *s->values);
            ok = s->keys && s->got && s->values;
        }
        if (!ok) {
            log_error("dynamic engine: out of memory for %u rounds in flight", c->depth);
            c->started = 1;
            return end_run(n, c, LOOM_ENOMEM);
        }
    } else if (h->a != c->dim || h->table != c->parallel || h->req != c->depth ||
               h->b != c->max_rounds || (uint64_t)h->clock != c->extra) {
        return fail_run(n, c, m, "DYN_START with options other workers did not give");
    }
    c->joined[rank] = 1;
    if (++c->started < c->workers) return;
    while (c->next_request < c->last_round && c->next_request < c->depth) request_plan(n, c);
    advance(n, c);
}

static void on_plan(loom_node *n, void *ctx, node_msg *m)
{
    coord *c = ctx;
    uint64_t t = m->h.req;
    int rank = rank_of(n, m);
    if (!c->started) return node_drop(n, m, "DYN_PLAN outside a run");
    round_slot *s = &c->slots[t % c->depth];
    size_t len = node_frame_size(m, 0);
    if (rank < 0 || t >= c->next_request || t < c->next_plan || s->round != t || s->have_plan ||
        (uint64_t)rank != t % (uint64_t)c->workers)
        return fail_run(n, c, m, "DYN_PLAN for a round not asked of that shard");
    if (len % 8 || len / 8 > c->parallel)
        return fail_run(n, c, m, "DYN_PLAN with more keys than parallel updates");
    const uint8_t *p = node_frame_data(m, 0);
    s->nkeys = len / 8;
    for (size_t i = 0; i < s->nkeys; i++) {
        s->keys[i] = msg_load_u64(p + 8 * i);
        if (s->keys[i] >= c->dim) return fail_run(n, c, m, "DYN_PLAN with a key out of range");
    }
    s->have_plan = 1;
    advance(n, c);
}

static void on_psum(loom_node *n, void *ctx, node_msg *m)
{
    coord *c = ctx;
    uint64_t u = m->h.req;
    int rank = rank_of(n, m);
    if (!c->started) return node_drop(n, m, "DYN_PSUM outside a run");
    round_slot *s = &c->slots[u % c->depth];
    if (rank < 0 || u < c->next_sum || u >= c->next_plan || s->round != u || s->got[rank])
        return fail_run(n, c, m, "DYN_PSUM for a round not in flight");
    size_t len = node_frame_size(m, 0);
    if (len != (s->nkeys + c->extra) * 8)
        return fail_run(n, c, m, "DYN_PSUM whose length is not its plan's");
    const uint8_t *p = node_frame_data(m, 0);
    double *to = &s->values[(size_t)rank * (c->parallel + c->extra)];
    for (size_t i = 0; i < len / 8; i++) {
        uint64_t bits = msg_load_u64(p + 8 * i);
        memcpy(&to[i], &bits, 8);
    }
    s->got[rank] = 1;
    s->stop |= m->h.a != 0;
    s->psums++;
    advance(n, c);
}

int dyn_coord_attach(loom_node *n)
{
    coord *c = calloc(1, sizeof *c);
    if (!c) return LOOM_ENOMEM;
    c->workers = loom_num_workers(n);
    c->num_servers = loom_num_servers(n);
    node_set_layer(n, &dyn_layer_def, c, coord_destroy);
    node_set_handler(n, MSG_DYN_START, on_start, c);
    node_set_handler(n, MSG_DYN_PLAN, on_plan, c);
    node_set_handler(n, MSG_DYN_PSUM, on_psum, c);
    return 0;
}
