/* replica: copies of each range on the servers after its master, kept up
 * to date in replication rounds (src/ps/ring.h; docs/FAULTS.md).
 *
 * With replicas (LOOM_REPLICAS), the master of a range sends, in rounds,
 * the rows of the range that changed since the previous round (values and
 * updater state, REPL) to the live servers after it on the ring; they
 * overwrite their copy and acknowledge (REPL_ACK). That is replication after
 * aggregation: a round carries each changed row once, however many pushes
 * changed it since the last round (BSP: all of a clock's pushes, applied at
 * once when the clock ends everywhere; other tables: what arrived since the
 * last round). A round is cut on this layer's timer on the I/O thread, which
 * runs once the sockets are drained, so everything that arrived meanwhile
 * goes in one round. Copying states, not deltas, makes a replica's rows
 * equal to the master's for any updater, and a repeated round harmless.
 *
 * A round also carries, per range, the last push sequence of each worker
 * applied to it: after a failover (failover.c) the new master applies a push
 * a worker sends again only if its sequence is newer (src/ps applies it).
 * When every REPL of a round (and of every earlier one) is acknowledged, the
 * pushes applied before its cut are held by the replicas: their held
 * acknowledgements go out, and `durable` (what acknowledgements report in
 * h.clock) moves to what each table's applied sequences were at the cut.
 *
 * This is fault tolerance beside ps's push and pull path, so it lives here,
 * above ps: ps tells it of an applied push and hands it a push's
 * acknowledgement to hold through hooks (ps_repl_hooks), and it reads and
 * writes the server's parts through src/ps/part.h. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/msg.h"
#include "ft/ft_impl.h"
#include "ft/replica.h"
#include "loom/error.h"
#include "ps/msg_types.h"
#include "ps/part.h"
#include "ps/ring.h"

/* Whether server h gets this server's replication rounds of the ranges it
 * holds: a live one, or a replacement once it has its tables (REJOIN_COPY). */
static int repl_target(const ft_repl *r, int h)
{
    int state = ps_server_state(r->node, h);
    return h != ft_me(r) && state != PS_DOWN && (state != PS_JOINING || r->fed[h]);
}

/* How many live replicas a part has if this server is its master (else 0). */
static int live_replicas(ft_repl *r, uint32_t id, size_t part)
{
    if (!ps_part_is_master(r->node, id, part)) return 0;
    int n = 0;
    for (int i = 0; i <= r->replicas; i++)
        n += repl_target(r, ps_part_holder(r->node, id, part, i));
    return n;
}

void ft_repl_due(ft_repl *r)
{
    if (!r->due) node_timer_poke(r->node, &ft_layer_def);
    r->due = 1;
}

/* ps's hook: a push put rows (`bytes` of keys and values) into a part. */
static void on_pushed(void *ctx, uint32_t id, size_t part, uint64_t bytes)
{
    ft_repl *r = ctx;
    ft_repl_due(r);
    /* Forwarding: this push's rows of the range, keys and deltas, in a
     * message of its own to each live replica. */
    r->naive_bytes += (uint64_t)live_replicas(r, id, part) * (MSG_HEADER_SIZE + bytes);
}

/* ps's hook: hold the acknowledgement of push `req` (applied: what it says
 * was applied from its worker) until the next round is acknowledged
 * (ft_repl_rounds_done). Returns 0 when there is no memory to hold it. */
static int on_hold_ack(void *ctx, uint32_t to, uint32_t table, uint64_t req, uint64_t applied,
                       int status)
{
    ft_repl *r = ctx;
    held_ack *a = calloc(1, sizeof *a);
    if (!a) return 0;
    *a = (held_ack){to, table, req, applied, r->rounds_cut + 1, status, NULL};
    if (r->acks_tail)
        r->acks_tail->next = a;
    else
        r->acks = a;
    r->acks_tail = a;
    ft_repl_due(r);
    return 1;
}

static void free_round(repl_round *rd)
{
    free(rd->waiting);
    free(rd->applied);
    free(rd);
}

void ft_repl_rounds_done(ft_repl *r)
{
    uint64_t done = r->rounds ? r->rounds->round - 1 : r->rounds_cut;
    while (r->rounds && !r->rounds->nwaiting) {
        repl_round *rd = r->rounds;
        for (uint32_t id = 0; id < rd->cap; id++)
            ps_table_durable(r->node, id, rd->applied + (size_t)id * (size_t)r->num_workers,
                             rd->round);
        done = rd->round;
        r->rounds = rd->next;
        if (!r->rounds) r->rounds_tail = NULL;
        free_round(rd);
    }
    while (r->acks && r->acks->round <= done) {
        held_ack *a = r->acks;
        r->acks = a->next;
        if (!r->acks) r->acks_tail = NULL;
        ps_part_ack(r->node, a->to, a->table, a->req, a->status, a->applied);
        free(a);
    }
    ft_copies_done(r, done);
    ft_fence_done(r, done);
}

static void free_frame(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* Send a part's changed rows to its live replicas as part of round rd; all
 * its rows when a replacement among them is due its full copy. */
static int replicate_part(ft_repl *r, uint32_t id, size_t part, repl_round *rd)
{
    int full = 0;
    for (int i = 0; i <= r->replicas; i++)
        full |= r->copy[ps_part_holder(r->node, id, part, i)] == 1;
    blob_writer w = {0};
    uint64_t nrows;
    int rc = ps_part_rows(r->node, id, part, !full, &w, &nrows);
    if (rc || !nrows) {
        free(w.buf);
        return rc;
    }
    const uint64_t *applied_now = ps_part_applied(r->node, id, part);
    size_t alen = (size_t)r->num_workers * 8;
    for (int i = 0; i <= r->replicas && !rc; i++) {
        int h = ps_part_holder(r->node, id, part, i);
        if (!repl_target(r, h)) continue;
        uint8_t *applied = malloc(alen), *rows = malloc(w.len);
        if (!applied || !rows) {
            free(applied);
            free(rows);
            rc = LOOM_ENOMEM;
            break;
        }
        for (int k = 0; k < r->num_workers; k++) msg_store_u64(applied + 8 * k, applied_now[k]);
        memcpy(rows, w.buf, w.len);
        msg_header hd = {.type = MSG_REPL,
                         .table = id,
                         .req = rd->round,
                         .a = (uint64_t)ps_part_range(r->node, id, part),
                         .b = nrows};
        node_frame f[2] = {{applied, alen, free_frame, NULL, 0},
                           {rows, w.len, free_frame, NULL, 0}};
        rd->waiting[h]++;
        rd->nwaiting++;
        atomic_fetch_add(r->bytes, MSG_HEADER_SIZE + alen + w.len);
        r->rows += nrows;
        r->msgs++;
        node_send(r->node, node_server_id(r->num_servers, h), &hd, f, 2);
    }
    free(w.buf);
    return rc;
}

void ft_repl_cut(ft_repl *r)
{
    r->due = 0;
    uint32_t cap = ps_part_tables(r->node);
    size_t W = (size_t)r->num_workers;
    repl_round *rd = calloc(1, sizeof *rd);
    if (rd) {
        rd->waiting = calloc((size_t)r->num_servers, sizeof *rd->waiting);
        rd->applied = calloc(cap ? (size_t)cap * W : 1, sizeof *rd->applied);
    }
    if (!rd || !rd->waiting || !rd->applied) {
        if (rd) free_round(rd);
        r->due = 1; /* try again on the next tick */
        return;
    }
    rd->round = ++r->rounds_cut;
    rd->cap = cap;
    int rc = 0;
    for (uint32_t id = 0; id < cap; id++) {
        const uint64_t *applied = ps_table_applied(r->node, id, rd->round);
        if (!applied) continue;
        memcpy(rd->applied + (size_t)id * W, applied, W * sizeof *applied);
        size_t nparts = ps_part_count(r->node, id);
        for (size_t i = 0; i < nparts && !rc; i++)
            if (live_replicas(r, id, i)) rc = replicate_part(r, id, i, rd);
    }
    if (rc) log_error("replication round %" PRIu64 ": %s", rd->round, loom_strerror(rc));
    for (int h = 0; h < r->num_servers && !rc; h++)
        if (r->copy[h] == 1) {
            r->copy[h] = 2;
            r->copy_round[h] = rd->round;
        }
    if (r->rounds_tail)
        r->rounds_tail->next = rd;
    else
        r->rounds = rd;
    r->rounds_tail = rd;
    ft_repl_rounds_done(r);
}

/* ps's hook: cut a round now if one is due (if it cannot be cut, it stays
 * due). */
static void on_cut(void *ctx)
{
    ft_repl *r = ctx;
    if (r->due) ft_repl_cut(r);
}

/* loom_stats' replicated_bytes, read by any thread. */
static void replica_stats(void *ctx, loom_stats *out)
{
    _Atomic uint64_t *bytes = ctx;
    out->replicated_bytes = atomic_load(bytes);
}

/* The I/O thread's timer: a round when one is due. Poked when one becomes
 * due; a round that could not be cut (no memory) is tried again soon. */
static uint64_t on_timer(loom_node *n, void *ctx, uint64_t now)
{
    (void)n;
    ft_repl *r = ctx;
    if (r->due) ft_repl_cut(r);
    return r->due ? now + 10 : UINT64_MAX;
}

/* A replica: the master's changed rows of a range it holds a copy of. */
static void on_repl(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    int from;
    const char *why = "replication of a range this server does not replicate";
    int rc = node_peer_role(n, m->from, &from) != LOOM_SERVER
                 ? LOOM_EPROTO
                 : ps_part_replicated(n, m->h.table, m->h.a, from, node_frame_data(m, 0),
                                      node_frame_size(m, 0), node_frame_data(m, 1),
                                      node_frame_size(m, 1), m->h.b, &why);
    if (rc == LOOM_EPROTO) node_drop(n, m, why);
    if (rc) return; /* out of memory: unacknowledged, the master's round never completes */
    msg_header h = {.type = MSG_REPL_ACK, .table = m->h.table, .req = m->h.req};
    node_send(n, m->from, &h, NULL, 0);
}

static void on_repl_ack(loom_node *n, void *ctx, node_msg *m)
{
    ft_repl *r = ctx;
    int from;
    repl_round *rd = r->rounds;
    while (rd && rd->round != m->h.req) rd = rd->next;
    if (node_peer_role(n, m->from, &from) != LOOM_SERVER || !rd || !rd->waiting[from]) {
        node_drop(n, m, "acknowledgement of no replication");
        return;
    }
    rd->waiting[from]--;
    rd->nwaiting--;
    ft_repl_rounds_done(r);
}

/* The end of a server: what replication sent, and its rounds and held
 * acknowledgements freed. */
void ft_repl_destroy(ft_repl *r)
{
    if (r->replicas)
        log_info("replicas: sent %" PRIu64 " bytes of changed rows (forwarding every push would "
                 "have sent %" PRIu64 "): %" PRIu64 " rows in %" PRIu64 " messages",
                 atomic_load(r->bytes), r->naive_bytes, r->rows, r->msgs);
    while (r->rounds) {
        repl_round *rd = r->rounds;
        r->rounds = rd->next;
        free_round(rd);
    }
    while (r->acks) {
        held_ack *a = r->acks;
        r->acks = a->next;
        free(a);
    }
    free(r->fed);
    free(r->copy);
    free(r->copy_round);
    free(r->copy_gen);
    free(r);
}

int ft_repl_attach(loom_node *n, ft_repl **out)
{
    ft_repl *r = calloc(1, sizeof *r);
    if (!r) return LOOM_ENOMEM;
    r->node = n;
    r->replicas = ps_part_replicas(n);
    r->num_servers = loom_num_servers(n);
    r->num_workers = loom_num_workers(n);
    size_t S = (size_t)r->num_servers;
    r->fed = calloc(S, 1);
    r->copy = calloc(S, 1);
    r->copy_round = calloc(S, sizeof *r->copy_round);
    r->copy_gen = calloc(S, sizeof *r->copy_gen);
    r->bytes = node_stats_area(n, &ft_layer_def, sizeof *r->bytes);
    if (!r->fed || !r->copy || !r->copy_round || !r->copy_gen || !r->bytes) {
        free(r->fed);
        free(r->copy);
        free(r->copy_round);
        free(r->copy_gen);
        free(r);
        return LOOM_ENOMEM;
    }
    *out = r;
    ps_repl_hooks h = {.ctx = r, .pushed = on_pushed, .hold_ack = on_hold_ack, .cut = on_cut};
    ps_server_set_repl(n, &h);
    node_set_timer(n, &ft_layer_def, on_timer, r);
    node_set_stats(n, &ft_layer_def, replica_stats, r->bytes);
    node_set_handler(n, MSG_REPL, on_repl, r);
    node_set_handler(n, MSG_REPL_ACK, on_repl_ack, r);
    node_set_handler(n, MSG_REJOIN_COPY, ft_on_rejoin_copy, r);
    node_set_handler(n, MSG_REJOIN_READY, ft_on_rejoin_ready, r);
    node_set_handler(n, MSG_HANDBACK, ft_on_handback, r);
    node_set_handler(n, MSG_HANDBACK_ACK, ft_on_handback_ack, r);
    int rc = node_add_failover(n, ft_failover, r);
    return rc ? rc : node_add_rejoin(n, ft_rejoin, r);
}
