/* registry: the scheduler's part of the parameter server.
 *
 * Table names: the first worker to open a name defines the table; the
 * scheduler numbers it, has every server create its partition, and answers
 * every worker that asked once all servers confirmed. A later open with other
 * options is refused (LOOM_EMISMATCH), so all workers agree on every table.
 *
 * Clocks: each worker reports the number of clocks it completed; the scheduler
 * tracks the slowest and tells the workers whenever it advances, which is
 * what loom_clock() waits on to keep workers within the staleness bound.
 *
 * A replacement server (with replicas; docs/FAULTS.md): when one registers
 * for a dead server's rank, the registry has it create every table. Its
 * copies and its return are src/ft's (src/ft/rejoin_coord.c, then
 * handback_coord.c), which learns through hooks (ps_registry_set_hooks,
 * part.h) that a replacement joins, was sent its tables and created them,
 * and reads and sets the server states kept here. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "loom/error.h"
#include "ps/minclock.h"
#include "ps/msg_types.h"
#include "ps/part.h"
#include "ps/ps.h"
#include "ps/ring.h"

typedef struct waiter {
    uint32_t worker;
    uint64_t req;
    struct waiter *next;
} waiter;

typedef struct reg_table {
    ps_table_def def;
    uint8_t *blob; /* canonical encoding, compared on every later open */
    size_t blob_len;
    uint8_t *acked; /* per server rank: its TABLE_CREATED counted */
    int status;     /* first error reported by a server */
    int ready;      /* every server answered */
    waiter *waiting;
} reg_table;

typedef struct registry {
    loom_node *node;
    int num_servers, num_workers;
    reg_table *tables[PS_MAX_TABLES];
    uint32_t ntables;
    ps_minclock clocks;    /* per worker rank, and the slowest (minclock.h) */
    int64_t min_clock;     /* the min clock the workers were last told */
    int replicas;          /* LOOM_REPLICAS */
    uint8_t *dead;         /* per server rank: PS_UP, PS_DOWN ... (ring.h, ps_survives) */
    uint32_t *tables_left; /* per rejoining server rank: tables it has still to create */
    uint32_t *returned;    /* per BACK server: the how-manieth return it was (REJOIN_READY's req) */
    ps_registry_hooks hooks; /* src/ft's copies and handbacks (part.h; ctx NULL: ps alone, none) */
    uint64_t min_since;      /* node_now_ms() when min_clock last moved */
    int64_t min_said;        /* the min clock report_stall last named (-1: none) */
    uint64_t stall_ms;       /* ps.h: PS_STALL_REPORT_MS */
    int64_t *join_floor;     /* per worker rank joining: the highest clock a server holds its
                                slot at (JOIN_CLOCK), -1 when no server does */
} registry;

/* Server `id` died (not left) and the job cannot go on without it: say that it is one
 * death too many for the replicas, and how many others are down, since the
 * death alone ("server 2 died: no heartbeat ...") reads like the one
 * failure a job with replicas survives. Other deaths (a worker's, a job
 * without replicas) say enough on their own. */
static void explain_lost(loom_node *n, const registry *r, uint32_t id)
{
    int rank, others = 0;
    if (!r->replicas || node_peer_role(n, id, &rank) != LOOM_SERVER || r->dead[rank] == PS_DOWN ||
        node_peer_leaving(n, id)) /* a leave refused: the scheduler says why */
        return;
    for (int s = 0; s < r->num_servers; s++)
        others += s != rank && (r->dead[s] == PS_DOWN || r->dead[s] == PS_JOINING);
    log_error("server %d died while %d other server(s) were dead or still copying their ranges "
              "back: more servers died than LOOM_REPLICAS=%d allows, so the job cannot go on",
              rank, others, r->replicas);
}

static void table_answered(loom_node *n, registry *r, uint32_t id);

/* Whether every server the job has not gone on without created table t: a
 * dead server, or an elastic job's free slot (docs/ELASTIC.md), creates it
 * only when a server takes its place (registry_rejoin), and the open does
 * not wait for that. */
static int table_complete(const registry *r, const reg_table *t)
{
    for (int s = 0; s < r->num_servers; s++)
        if (!t->acked[s] && r->dead[s] != PS_DOWN) return 0;
    return 1;
}

/* The node's failover subscriber (the first): the scheduler lets the job go on without a dead
 * server while its ranges have live replicas (docs/FAULTS.md). */
static int registry_failover(loom_node *n, void *ctx, uint32_t id)
{
    registry *r = ctx;
    int rank;
    if (!ps_survives(n, r->replicas, r->dead, id)) {
        explain_lost(n, r, id);
        return 0;
    }
    node_peer_role(n, id, &rank);
    r->tables_left[rank] = 0;                 /* a replacement that died while joining stops here */
    for (uint32_t i = 0; i < r->ntables; i++) /* a table it had not created yet */
        if (!r->tables[i]->ready && table_complete(r, r->tables[i])) table_answered(n, r, i);
    return 1;
}

/* A replacement registered for server node `id` (node_add_rejoin): it gets
 * every table (ready or still being created: its answer is the one the dead
 * server owed), then src/ft's copies (the hooks, around the tables). */
static void worker_joined(loom_node *n, registry *r, uint32_t id, int w);

static void registry_rejoin(loom_node *n, void *ctx, uint32_t id)
{
    registry *r = ctx;
    int d;
    if (node_peer_role(n, id, &d) == LOOM_WORKER) return worker_joined(n, r, id, d);
    if (node_peer_role(n, id, &d) != LOOM_SERVER) return;
    if (r->hooks.ctx) r->hooks.joining(r->hooks.ctx, d);
    r->dead[d] = PS_JOINING;
    r->tables_left[d] = r->ntables;
    for (uint32_t i = 0; i < r->ntables; i++) {
        msg_header h = {.type = MSG_TABLE_CREATE, .table = i};
        node_frame f = {r->tables[i]->blob, r->tables[i]->blob_len, NULL, NULL, 1};
        node_send(n, id, &h, &f, 1);
    }
    if (r->hooks.ctx) r->hooks.joined(r->hooks.ctx, d);
    /* Workers that finished before it joined will never send it their last
     * CLOCK: its min clock would wait for them. */
    for (int w = 0; w < r->num_workers; w++)
        if (r->clocks.of[w] == PS_CLOCK_DONE) {
            msg_header h = {
                .type = MSG_CLOCK, .clock = PS_CLOCK_DONE, .a = node_worker_id(r->num_servers, w)};
            node_send(n, id, &h, NULL, 0);
        }
    log_info("server %d rejoined: creating its %u table(s)", d, r->ntables);
    if (!r->ntables && r->hooks.ctx) r->hooks.created(r->hooks.ctx, d);
}

static void answer(loom_node *n, uint32_t worker, uint64_t req, uint32_t table, int status)
{
    msg_header h = {.type = MSG_TABLE_OPENED, .req = req, .table = table, .a = (uint64_t)status};
    node_send(n, worker, &h, NULL, 0);
}

static void on_table_open(loom_node *n, void *ctx, node_msg *m)
{
    registry *r = ctx;
    int rank;
    if (node_peer_role(n, m->from, &rank) != LOOM_WORKER) {
        node_drop(n, m, "only workers open tables");
        return;
    }
    const void *data = node_frame_data(m, 0);
    size_t len = node_frame_size(m, 0);
    ps_table_def def;
    if (ps_def_decode(data, len, &def)) {
        node_drop(n, m, "invalid table definition");
        return;
    }
    for (uint32_t i = 0; i < r->ntables; i++) {
        reg_table *t = r->tables[i];
        if (strcmp(t->def.name, def.name)) continue;
        if (t->blob_len != len || memcmp(t->blob, data, len)) {
            answer(n, m->from, m->h.req, i, LOOM_EMISMATCH);
        } else if (t->ready) {
            answer(n, m->from, m->h.req, i, t->status);
        } else {
            waiter *w = malloc(sizeof *w);
            if (!w) {
                answer(n, m->from, m->h.req, i, LOOM_ENOMEM);
                return;
            }
            *w = (waiter){m->from, m->h.req, t->waiting};
            t->waiting = w;
        }
        return;
    }
    if (r->ntables == PS_MAX_TABLES) {
        answer(n, m->from, m->h.req, 0, LOOM_ELIMIT);
        return;
    }
    reg_table *t = calloc(1, sizeof *t);
    waiter *w = malloc(sizeof *w);
    uint8_t *blob = malloc(len);
    if (!t || !w || !blob) {
        free(t), free(w), free(blob);
        answer(n, m->from, m->h.req, 0, LOOM_ENOMEM);
        return;
    }
    memcpy(blob, data, len);
    t->acked = calloc((size_t)(r->num_servers ? r->num_servers : 1), 1);
    if (!t->acked) {
        free(t), free(w), free(blob);
        answer(n, m->from, m->h.req, 0, LOOM_ENOMEM);
        return;
    }
    t->def = def;
    ps_def_fix_pointers(&t->def);
    t->blob = blob;
    t->blob_len = len;
    *w = (waiter){m->from, m->h.req, NULL};
    t->waiting = w;
    uint32_t id = r->ntables++;
    r->tables[id] = t;
    log_info("creating table \"%s\" (id %u) on %d server(s)", def.name, id, r->num_servers);
    for (int s = 0; s < r->num_servers; s++) {
        if (r->dead[s] == PS_DOWN) continue; /* created if a server takes its place */
        msg_header h = {.type = MSG_TABLE_CREATE, .table = id};
        node_frame f = {blob, len, NULL, NULL, 1};
        node_send(n, node_server_id(r->num_servers, s), &h, &f, 1);
    }
}

static void on_table_created(loom_node *n, void *ctx, node_msg *m)
{
    registry *r = ctx;
    int rank;
    if (node_peer_role(n, m->from, &rank) != LOOM_SERVER || m->h.table >= r->ntables ||
        (r->tables[m->h.table]->ready && !r->tables_left[rank])) {
        node_drop(n, m, "unexpected TABLE_CREATED");
        return;
    }
    reg_table *t = r->tables[m->h.table];
    int status = m->h.a < LOOM_ERROR_COUNT_ ? (int)m->h.a : LOOM_EPROTO;
    if (r->tables_left[rank]) { /* a replacement's (registry_rejoin) */
        if (status)
            log_error("server %d rejoined but cannot create table \"%s\": %s", rank, t->def.name,
                      loom_strerror(status));
        else if (--r->tables_left[rank] == 0 && r->hooks.ctx)
            r->hooks.created(r->hooks.ctx, rank);
    }
    if (t->ready || t->acked[rank]) return;
    t->acked[rank] = 1;
    if (status && !t->status) t->status = status;
    if (table_complete(r, t)) table_answered(n, r, m->h.table);
}

/* Table `id` is created on every server that counts: answer whoever waits. */
static void table_answered(loom_node *n, registry *r, uint32_t id)
{
    reg_table *t = r->tables[id];
    t->ready = 1;
    if (t->status)
        log_error("table \"%s\" could not be created: %s", t->def.name, loom_strerror(t->status));
    while (t->waiting) {
        waiter *w = t->waiting;
        t->waiting = w->next;
        answer(n, w->worker, w->req, id, t->status);
        free(w);
    }
}

static void advance(loom_node *n, registry *r, uint32_t from);

/* The join gate (node_add_join_gate): no worker joins while a server is
 * copying its ranges (JOINING) or waiting to take them back (BACK). A worker
 * learns the servers the job goes on without with its roster (DOWN), but not
 * those states, which only the workers there when they began hold: it would
 * take such a server for a range's master. They last seconds; it asks again. */
static const char *join_gate(loom_node *n, void *ctx)
{
    (void)n;
    const registry *r = ctx;
    for (int s = 0; s < r->num_servers; s++)
        if (r->dead[s] == PS_JOINING || r->dead[s] == PS_BACK)
            return "a server is copying its ranges or taking them back";
    return NULL;
}

/* A server holds the slot of worker node m->h.a, which joins the running job,
 * at its min clock (JOIN_CLOCK, m->h.clock): it heard of the worker
 * (NODE_REJOINED) and answers nothing past that clock until the worker's
 * first CLOCK. It sent this before its ROSTER_ACK, so every live server's
 * is here before the worker gets its roster, and so before worker_joined. */
static void on_join_clock(loom_node *n, void *ctx, node_msg *m)
{
    registry *r = ctx;
    int w, s;
    if (node_peer_role(n, m->from, &s) != LOOM_SERVER || m->h.a > UINT32_MAX ||
        node_peer_role(n, (uint32_t)m->h.a, &w) != LOOM_WORKER || m->h.clock < 0 ||
        r->clocks.of[w] != PS_CLOCK_DONE) {
        node_drop(n, m, "JOIN_CLOCK naming no joining worker");
        return;
    }
    if (m->h.clock > r->join_floor[w]) r->join_floor[w] = m->h.clock;
}

/* A worker joined the running job in slot w (docs/ELASTIC.md; core's join
 * is a rejoin of a worker slot): it starts at the highest clock a worker has
 * completed, so it holds nobody back, or at the highest clock a server holds
 * its slot at (on_join_clock) if that is higher: a server that answered
 * reads of clock c before it heard of the worker must not get pushes of an
 * earlier clock from it. The min clock, which it joins at or above, never
 * goes back. It hears that clock (MIN_CLOCK, a = 1, req = its clock) before
 * the answer to any table it opens, and tells the servers itself, before
 * anything it pushes (client.c). */
static void worker_joined(loom_node *n, registry *r, uint32_t id, int w)
{
    int64_t hi = r->join_floor[w];
    r->join_floor[w] = -1;
    for (int k = 0; k < r->num_workers; k++)
        if (k != w && r->clocks.of[k] != PS_CLOCK_DONE && r->clocks.of[k] > hi)
            hi = r->clocks.of[k];
    int64_t clock = ps_minclock_join(&r->clocks, w, hi >= 0 ? hi : 0);
    log_info("worker %d joins at clock %" PRId64 " (min clock %" PRId64 ")", w, clock,
             r->min_clock);
    msg_header h = {.type = MSG_MIN_CLOCK, .a = 1, .req = (uint64_t)clock, .clock = r->min_clock};
    node_send(n, id, &h, NULL, 0);
    advance(n, r, id);
}

/* The job goes on without worker node `id` (node_add_lost: lost, left, or a
 * free slot at the start): its clocks count as done, here and on every
 * server, which a worker that left told itself but a free slot cannot. */
static int registry_lost(loom_node *n, void *ctx, uint32_t id)
{
    registry *r = ctx;
    int w;
    if (node_peer_role(n, id, &w) != LOOM_WORKER) return 0;
    /* A worker that died joining, after the servers held its slot: they let it go. */
    int held = r->join_floor[w] >= 0;
    r->join_floor[w] = -1;
    if (r->clocks.of[w] == PS_CLOCK_DONE && !held) return 0;
    ps_minclock_set(&r->clocks, w, PS_CLOCK_DONE);
    msg_header h = {.type = MSG_CLOCK, .clock = PS_CLOCK_DONE, .a = id};
    for (int s = 0; s < r->num_servers; s++)
        node_send(n, node_server_id(r->num_servers, s), &h, NULL, 0);
    advance(n, r, id);
    return 0;
}

static void on_clock(loom_node *n, void *ctx, node_msg *m)
{
    registry *r = ctx;
    int rank;
    if (node_peer_role(n, m->from, &rank) != LOOM_WORKER || m->h.clock < r->clocks.of[rank]) {
        node_drop(n, m, "clock from a non-worker or going backwards");
        return;
    }
    ps_minclock_set(&r->clocks, rank, m->h.clock);
    advance(n, r, m->from);
}

/* The job goes on without a worker (--on-worker-failure continue; the
 * scheduler calls this itself): the min clock no longer waits for it. */
static void on_worker_lost(loom_node *n, void *ctx, node_msg *m)
{
    registry *r = ctx;
    int rank;
    if (node_peer_role(n, (uint32_t)m->h.a, &rank) != LOOM_WORKER) return;
    ps_minclock_set(&r->clocks, rank, PS_CLOCK_DONE);
    advance(n, r, (uint32_t)m->h.a);
}

/* Worker node `from`'s clock moved: tell the workers if the min did. */
static void advance(loom_node *n, registry *r, uint32_t from)
{
    int rank;
    node_peer_role(n, from, &rank);
    int64_t min = r->clocks.min; /* not a scan of every worker's: minclock.h */
    node_note_clock(n, from, r->clocks.of[rank], min > r->min_clock ? min : r->min_clock);
    if (min <= r->min_clock) return;
    r->min_clock = min;
    r->min_since = node_now_ms();
    if (min == PS_CLOCK_DONE) return; /* every worker finished: nobody is waiting */
    /* A job's only worker is the min itself and does not wait for this word
     * (ps_clock): a message and two wake-ups per clock saved. */
    if (r->num_workers == 1) return;
    for (int w = 0; w < r->num_workers; w++) {
        if (r->clocks.of[w] == PS_CLOCK_DONE) continue;
        msg_header h = {.type = MSG_MIN_CLOCK, .clock = min};
        node_send(n, node_worker_id(r->num_servers, w), &h, NULL, 0);
    }
}

/* The timer: when the min clock has not moved for stall_ms while a worker
 * is ahead of it (so, under BSP and SSP, waits for the slowest), name the
 * slowest once, with the servers' and workers' own reports (ps.h) a job that
 * stopped moving says where. A long clock of every worker alike says
 * nothing. */
static uint64_t report_stall(loom_node *n, void *ctx, uint64_t now)
{
    (void)n;
    registry *r = ctx;
    int64_t min = r->clocks.min;
    if (min == PS_CLOCK_DONE || min == r->min_said || now - r->min_since < r->stall_ms)
        return now + 1000;
    int slowest = -1, ahead = 0;
    for (int w = 0; w < r->num_workers; w++) {
        if (r->clocks.of[w] == min && slowest < 0) slowest = w;
        ahead += r->clocks.of[w] > min && r->clocks.of[w] != PS_CLOCK_DONE;
    }
    if (slowest >= 0 && ahead) {
        r->min_said = min;
        log_warn("worker %d has not finished clock %" PRId64 " in %" PRIu64
                 " s, and %d worker(s) that have may wait for it",
                 slowest, min, (now - r->min_since) / 1000, ahead);
    }
    return now + 1000;
}

/* ---- what src/ft's copies and handbacks read and set (part.h) ---- */

void ps_registry_set_hooks(loom_node *n, const ps_registry_hooks *hooks)
{
    registry *r = node_layer(n, &ps_layer_def);
    r->hooks = *hooks;
}

int ps_registry_state(loom_node *n, int rank, uint32_t *returned)
{
    registry *r = node_layer(n, &ps_layer_def);
    *returned = r->returned[rank];
    return r->dead[rank];
}

void ps_registry_set_state(loom_node *n, int rank, int state, uint32_t returned)
{
    registry *r = node_layer(n, &ps_layer_def);
    r->dead[rank] = (uint8_t)state;
    r->returned[rank] = state == PS_BACK ? returned : 0;
}

int ps_registry_may_leave(loom_node *n, int rank)
{
    registry *r = node_layer(n, &ps_layer_def);
    uint8_t was = r->dead[rank];
    int ok = ps_survives(n, r->replicas, r->dead, node_server_id(loom_num_servers(n), rank));
    r->dead[rank] = was;
    return ok;
}

int ps_registry_worker_done(loom_node *n, int rank)
{
    registry *r = node_layer(n, &ps_layer_def);
    return r->clocks.of[rank] == PS_CLOCK_DONE;
}

int ps_registry_ending(loom_node *n)
{
    registry *r = node_layer(n, &ps_layer_def);
    return r->min_clock == PS_CLOCK_DONE;
}

static void registry_destroy(void *state)
{
    registry *r = state;
    for (uint32_t i = 0; i < r->ntables; i++) {
        while (r->tables[i]->waiting) {
            waiter *w = r->tables[i]->waiting;
            r->tables[i]->waiting = w->next;
            free(w);
        }
        free(r->tables[i]->blob);
        free(r->tables[i]->acked);
        free(r->tables[i]);
    }
    ps_minclock_free(&r->clocks);
    free(r->dead);
    free(r->returned);
    free(r->join_floor);
    free(r->tables_left);
    free(r);
}

int ps_registry_attach(loom_node *n)
{
    registry *r = calloc(1, sizeof *r);
    if (!r) return LOOM_ENOMEM;
    r->node = n;
    r->num_servers = loom_num_servers(n);
    r->num_workers = loom_num_workers(n);
    int no_clocks = ps_minclock_init(&r->clocks, r->num_workers);
    size_t S = (size_t)(r->num_servers ? r->num_servers : 1);
    r->dead = calloc(S, 1);
    r->returned = calloc(S, sizeof *r->returned);
    r->tables_left = calloc(S, sizeof *r->tables_left);
    r->join_floor = malloc((size_t)(r->num_workers ? r->num_workers : 1) * sizeof *r->join_floor);
    for (int w = 0; r->join_floor && w < r->num_workers; w++) r->join_floor[w] = -1;
    int rc =
        !no_clocks && r->dead && r->returned && r->tables_left && r->join_floor ? 0 : LOOM_ENOMEM;
    if (!rc && r->num_servers) rc = ps_replicas_from_env(r->num_servers, &r->replicas);
    if (rc) {
        registry_destroy(r);
        return rc;
    }
    node_set_layer(n, &ps_layer_def, r, registry_destroy);
    node_set_handler(n, MSG_TABLE_OPEN, on_table_open, r);
    node_set_handler(n, MSG_TABLE_CREATED, on_table_created, r);
    node_set_handler(n, MSG_CLOCK, on_clock, r);
    node_set_handler(n, MSG_JOIN_CLOCK, on_join_clock, r);
    r->min_said = -1;
    r->min_since = node_now_ms();
    r->stall_ms = ps_stall_report_ms();
    node_set_timer(n, &ps_layer_def, report_stall, r);
    node_timer_poke(n, &ps_layer_def); /* the first look at the I/O thread's first turn */
    node_set_handler(n, MSG_WORKER_LOST, on_worker_lost, r);
    rc = node_add_failover(n, registry_failover, r);
    rc = rc ? rc : node_add_lost(n, registry_lost, r);
    rc = rc ? rc : node_add_join_gate(n, join_gate, r);
    return rc ? rc : node_add_rejoin(n, registry_rejoin, r);
}
