/* server_replica: copies of each range on the servers after its master, and
 * a server that replaces a dead one (ring.h; docs/FAULTS.md).
 *
 * With replicas (LOOM_REPLICAS), the master of a range sends its changed
 * rows to the range's other holders in rounds, and holds a push's
 * acknowledgement until the round that carries its rows is acknowledged;
 * when a server dies, the first live replica of each of its ranges is their
 * master; a replacement gets full copies and is a replica again. The
 * sections below say how. This is fault tolerance beside the push and pull
 * path, which calls it only to note an applied push (srv_repl_note_push) and
 * to hold its acknowledgement (srv_repl_hold_ack). */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "loom/error.h"
#include "ps/server_impl.h"

/* ---- replication (ring.h; docs/FAULTS.md) ----
 *
 * With replicas, the master of a range sends, in rounds, the rows of the
 * range that changed since the previous round (values and updater state,
 * REPL) to the live servers after it on the ring; they overwrite their copy
 * and acknowledge (REPL_ACK). That is replication after aggregation: a round
 * carries each changed row once, however many pushes changed it since the
 * last round (BSP: all of a clock's pushes, applied at once when the clock
 * ends everywhere; other tables: what arrived since the last round). A round
 * is cut on the I/O thread's timer, which runs once the sockets are drained,
 * so everything that arrived meanwhile goes in one round. Copying states,
 * not deltas, makes a replica's rows equal to the master's for any updater,
 * and a repeated round harmless.
 *
 * A round also carries, per range, the last push sequence of each worker
 * applied to it: after a failover the new master applies a push a worker
 * sends again only if its sequence is newer (srv_apply_rows, after
 * srv_failover). When every
 * REPL of a round (and of every earlier one) is acknowledged, the pushes
 * applied before its cut are held by the replicas: their held
 * acknowledgements go out, and `durable` (what acknowledgements report in
 * h.clock) moves to what t->applied was at the cut. */

/* Whether server h gets this server's replication rounds of the ranges it
 * holds: a live one, or a replacement once it has its tables (REJOIN_COPY). */
static int repl_target(const server *s, int h)
{
    return h != loom_rank(s->node) && s->dead[h] != PS_DOWN &&
           (s->dead[h] != PS_JOINING || s->fed[h]);
}

/* How many live replicas part p has if this server is its master (else 0). */
static int live_replicas(server *s, srv_table *t, srv_part *p)
{
    int n = 0;
    for (int i = 0; i <= s->replicas; i++)
        n += repl_target(s, ps_ring_holder(&t->ring, p->range, i));
    return srv_is_master(s, t, p) ? n : 0;
}

/* A push put `count` rows into part p (srv_apply_rows): a round is due. */
void srv_repl_note_push(server *s, srv_table *t, srv_part *p, uint64_t count)
{
    s->repl_due = 1;
    /* Forwarding: this push's rows of the range, keys and deltas, in a
     * message of its own to each live replica. */
    s->naive_bytes +=
        (uint64_t)live_replicas(s, t, p) * (MSG_HEADER_SIZE + count * (8 + t->row_bytes));
}

/* Hold the acknowledgement of push m (applied: what it says was applied
 * from its worker) until the next round is acknowledged (rounds_done).
 * Returns 0 when there is no memory to hold it. */
int srv_repl_hold_ack(server *s, const node_msg *m, uint64_t applied, int status)
{
    held_ack *a = calloc(1, sizeof *a);
    if (!a) return 0;
    *a = (held_ack){m->from, m->h.table, m->h.req, applied, s->rounds_cut + 1, status, NULL};
    if (s->acks_tail)
        s->acks_tail->next = a;
    else
        s->acks = a;
    s->acks_tail = a;
    s->repl_due = 1;
    node_timer_poke(s->node, NODE_LAYER_PS);
    return 1;
}

static void free_round(repl_round *r)
{
    free(r->waiting);
    free(r->applied);
    free(r);
}

/* Tell the scheduler of the replacements whose full copies went in a round
 * that is now complete (`done`): they hold this server's ranges whole. */
static void copies_done(server *s, uint64_t done)
{
    for (int h = 0; h < s->num_servers; h++) {
        if (s->copy[h] != 2 || s->copy_round[h] > done) continue;
        s->copy[h] = 0;
        msg_header m = {.type = MSG_REJOIN_COPIED,
                        .req = s->copy_gen[h],
                        .a = node_server_id(s->num_servers, h)};
        node_send(s->node, 0, &m, NULL, 0);
    }
}

/* Complete the rounds at the head whose REPLs are all acknowledged, then send
 * the acknowledgements they held. */
static void rounds_done(server *s)
{
    uint64_t done = s->rounds ? s->rounds->round - 1 : s->rounds_cut;
    while (s->rounds && !s->rounds->nwaiting) {
        repl_round *r = s->rounds;
        for (uint32_t id = 0; id < r->cap && id < s->cap; id++)
            for (int w = 0; s->tables[id] && w < s->num_workers; w++) {
                uint64_t a = r->applied[(size_t)id * (size_t)s->num_workers + (size_t)w];
                if (a > s->tables[id]->durable[w]) s->tables[id]->durable[w] = a;
            }
        done = r->round;
        s->rounds = r->next;
        if (!s->rounds) s->rounds_tail = NULL;
        free_round(r);
    }
    while (s->acks && s->acks->round <= done) {
        held_ack *a = s->acks;
        s->acks = a->next;
        if (!s->acks) s->acks_tail = NULL;
        srv_table *t = srv_table_of(s, a->table);
        if (t) srv_ack_now(s, t, a->to, a->table, a->req, a->status, a->applied);
        free(a);
    }
    copies_done(s, done);
    if (s->hb_round && done >= s->hb_round) { /* the fenced ranges' last round is held */
        s->hb_round = 0;
        msg_header h = {.type = MSG_HANDBACK_ACK, .req = s->hb_gen};
        node_send(s->node, 0, &h, NULL, 0);
    }
}

/* Send part p's changed rows to its live replicas as part of round r; all its
 * rows when a replacement among them is due its full copy. */
static int replicate_part(server *s, uint32_t id, srv_table *t, srv_part *p, repl_round *r)
{
    int full = 0;
    for (int i = 0; i <= s->replicas; i++)
        full |= s->copy[ps_ring_holder(&t->ring, p->range, i)] == 1;
    blob_writer w = {0};
    row_writer rw = {&w, t->row_bytes, store_state_bytes(p->store), 0};
    int rc = store_for_each(p->store, !full, srv_put_row, &rw);
    if (rc || !rw.rows) {
        free(w.buf);
        return rc;
    }
    size_t alen = (size_t)s->num_workers * 8;
    for (int i = 0; i <= s->replicas && !rc; i++) {
        int h = ps_ring_holder(&t->ring, p->range, i);
        if (!repl_target(s, h)) continue;
        uint8_t *applied = malloc(alen), *rows = malloc(w.len);
        if (!applied || !rows) {
            free(applied);
            free(rows);
            rc = LOOM_ENOMEM;
            break;
        }
        for (int k = 0; k < s->num_workers; k++) msg_store_u64(applied + 8 * k, p->applied[k]);
        memcpy(rows, w.buf, w.len);
        msg_header hd = {
            .type = MSG_REPL, .table = id, .req = r->round, .a = p->range, .b = rw.rows};
        node_frame f[2] = {{applied, alen, srv_free_data, NULL, 0},
                           {rows, w.len, srv_free_data, NULL, 0}};
        r->waiting[h]++;
        r->nwaiting++;
        node_count(s->node, NODE_REPLICATED_BYTES, MSG_HEADER_SIZE + alen + w.len);
        s->repl_bytes += MSG_HEADER_SIZE + alen + w.len;
        s->repl_rows += rw.rows;
        s->repl_msgs++;
        node_send(s->node, node_server_id(s->num_servers, h), &hd, f, 2);
    }
    free(w.buf);
    return rc;
}

/* Cut a replication round: every changed row of every range this server is
 * master of goes to the range's live replicas. */
void srv_replicate(server *s)
{
    s->repl_due = 0;
    repl_round *r = calloc(1, sizeof *r);
    size_t W = (size_t)s->num_workers;
    if (r) {
        r->waiting = calloc((size_t)s->num_servers, sizeof *r->waiting);
        r->applied = calloc(s->cap ? (size_t)s->cap * W : 1, sizeof *r->applied);
    }
    if (!r || !r->waiting || !r->applied) {
        if (r) free_round(r);
        s->repl_due = 1; /* try again on the next tick */
        return;
    }
    r->round = ++s->rounds_cut;
    r->cap = s->cap;
    int rc = 0;
    for (uint32_t id = 0; id < s->cap; id++) {
        srv_table *t = s->tables[id];
        if (!t) continue;
        memcpy(r->applied + (size_t)id * W, t->applied, W * sizeof *t->applied);
        for (size_t i = 0; i < t->nparts && !rc; i++)
            if (live_replicas(s, t, &t->parts[i])) rc = replicate_part(s, id, t, &t->parts[i], r);
    }
    if (rc) log_error("replication round %" PRIu64 ": %s", r->round, loom_strerror(rc));
    for (int h = 0; h < s->num_servers && !rc; h++)
        if (s->copy[h] == 1) {
            s->copy[h] = 2;
            s->copy_round[h] = r->round;
        }
    if (s->rounds_tail)
        s->rounds_tail->next = r;
    else
        s->rounds = r;
    s->rounds_tail = r;
    rounds_done(s);
}

/* A replica: the master's changed rows of a range it holds a copy of. */
void srv_on_repl(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    srv_table *t = srv_table_of(s, m->h.table);
    int from;
    if (!t || node_peer_role(n, m->from, &from) != LOOM_SERVER || m->h.a >= t->ring.nranges ||
        t->part_of[m->h.a] == NO_PART || !ps_ring_holds(&t->ring, (size_t)m->h.a, from) ||
        node_frame_size(m, 0) != (size_t)s->num_workers * 8) {
        node_drop(n, m, "replication of a range this server does not replicate");
        return;
    }
    srv_part *p = &t->parts[t->part_of[m->h.a]];
    size_t state_bytes = store_state_bytes(p->store), per = 8 + t->row_bytes + state_bytes;
    const uint8_t *rows = node_frame_data(m, 1);
    if (m->h.b == 0 || node_frame_size(m, 1) / per != m->h.b || node_frame_size(m, 1) % per) {
        node_drop(n, m, "replicated rows do not match the table's rows");
        return;
    }
    for (uint64_t i = 0; i < m->h.b; i++) {
        uint64_t key = msg_load_u64(rows + i * per);
        if (key < p->lo || (ps_u128)key >= p->hi) {
            node_drop(n, m, "replicated row outside its range");
            return;
        }
    }
    t->version++;
    for (uint64_t i = 0; i < m->h.b; i++) {
        const uint8_t *r = rows + i * per;
        uint64_t key = msg_load_u64(r);
        void *state;
        void *row = store_row(p->store, key, &state);
        if (!row || srv_mark_changed(t, p, key)) {
            log_error("out of memory holding a replica of table \"%s\"", t->def.name);
            return; /* unacknowledged: the master's round never completes */
        }
        memcpy(row, r + 8, t->row_bytes);
        if (state_bytes) memcpy(state, r + 8 + t->row_bytes, state_bytes);
    }
    const uint8_t *applied = node_frame_data(m, 0);
    for (int w = 0; w < s->num_workers; w++) {
        uint64_t a = msg_load_u64(applied + 8 * w);
        if (a > p->applied[w]) p->applied[w] = a;
    }
    store_forget_changes(p->store); /* a copy: nothing of it to replicate on */
    msg_header h = {.type = MSG_REPL_ACK, .table = m->h.table, .req = m->h.req};
    node_send(n, m->from, &h, NULL, 0);
}

void srv_on_repl_ack(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    int from;
    repl_round *r = s->rounds;
    while (r && r->round != m->h.req) r = r->next;
    if (node_peer_role(n, m->from, &from) != LOOM_SERVER || !r || !r->waiting[from]) {
        node_drop(n, m, "acknowledgement of no replication");
        return;
    }
    r->waiting[from]--;
    r->nwaiting--;
    rounds_done(s);
}

/* The node's failover subscriber (node_add_failover): server `id` died. The ranges
 * it was master of now have the first live replica as master (ring.h); this
 * server takes pushes and pulls for every range it holds, so nothing changes
 * here but the rounds, which no longer wait for the dead server. */
int srv_failover(loom_node *n, void *ctx, uint32_t id)
{
    server *s = ctx;
    if (!ps_survives(n, s->replicas, s->dead, id)) return 0;
    s->deaths++;
    int d;
    node_peer_role(n, id, &d);
    for (repl_round *r = s->rounds; r; r = r->next) {
        r->nwaiting -= r->waiting[d];
        r->waiting[d] = 0;
    }
    size_t took = 0;
    for (uint32_t i = 0; i < s->cap; i++)
        for (size_t j = 0; s->tables[i] && j < s->tables[i]->nparts; j++) {
            srv_table *t = s->tables[i];
            took +=
                ps_ring_holder(&t->ring, t->parts[j].range, 0) == d &&
                ps_ring_master(&t->ring, t->parts[j].range, s->dead, s->returned) == loom_rank(n);
        }
    s->fed[d] = s->copy[d] = 0;
    log_warn("server %d died: this server is now master of %zu of its ranges", d, took);
    if (took) s->took_over = 1;
    /* A fence in progress is off (the registry aborts it); a range handed
     * back to the dead server comes back here if this is its master again. */
    s->fencing = 0;
    s->hb_round = 0;
    srv_reopen(s);
    rounds_done(s);
    return 1;
}

/* The end of a server: what replication sent, and its rounds and held
 * acknowledgements freed. */
void srv_repl_destroy(server *s)
{
    if (s->replicas)
        log_info("replicas: sent %" PRIu64 " bytes of changed rows (forwarding every push would "
                 "have sent %" PRIu64 "): %" PRIu64 " rows in %" PRIu64 " messages",
                 s->repl_bytes, s->naive_bytes, s->repl_rows, s->repl_msgs);
    if (s->duplicates)
        log_info("failover: %" PRIu64 " pushes sent again were already held, not applied twice",
                 s->duplicates);
    while (s->rounds) {
        repl_round *r = s->rounds;
        s->rounds = r->next;
        free_round(r);
    }
    while (s->acks) {
        held_ack *a = s->acks;
        s->acks = a->next;
        free(a);
    }
}

/* ---- a replacement (docs/FAULTS.md, "A replacement server") ----
 *
 * A process that takes a dead server's rank (NODE_REJOINED, to everyone and
 * to itself) is JOINING: it creates the tables (TABLE_CREATE from the
 * registry), then every live server, asked by REJOIN_COPY, sends it in its
 * next round all rows of every range it is master of that the newcomer
 * holds, and its later rounds as to any replica; once that round is
 * acknowledged it says so (REJOIN_COPIED). When all have, the registry
 * tells everyone (REJOIN_READY): the newcomer is BACK, a full replica, and
 * the master of a range once the range's UP holders are dead. No range moves
 * when it comes back, so no push is redirected. */

int srv_server_rank_of(loom_node *n, uint64_t id, int *rank)
{
    return id <= UINT32_MAX && node_peer_role(n, (uint32_t)id, rank) == LOOM_SERVER;
}

void srv_rejoin(loom_node *n, void *ctx, uint32_t id)
{
    server *s = ctx;
    int d;
    if (!srv_server_rank_of(n, id, &d)) return;
    s->dead[d] = PS_JOINING;
    s->fed[d] = s->copy[d] = 0;
}

void srv_on_rejoin_copy(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    int d;
    if (!srv_server_rank_of(n, m->h.a, &d) || d == loom_rank(n) || s->dead[d] != PS_JOINING) {
        node_drop(n, m, "REJOIN_COPY naming no joining server");
        return;
    }
    s->fed[d] = 1;
    s->copy[d] = 1;
    s->copy_gen[d] = m->h.req;
    s->repl_due = 1;
    node_timer_poke(n, NODE_LAYER_PS);
}

/* REJOIN_READY: server d is BACK. A replacement also hears it, after its
 * roster, for each server that came back before it joined (UP to it so far). */
void srv_on_rejoin_ready(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    int d;
    if (!srv_server_rank_of(n, m->h.a, &d) || (s->dead[d] != PS_JOINING && s->dead[d] != PS_UP)) {
        node_drop(n, m, "REJOIN_READY naming no joining server");
        return;
    }
    if (m->h.req == 0 || m->h.req > UINT32_MAX) {
        node_drop(n, m, "REJOIN_READY without the order of the return");
        return;
    }
    s->returned[d] = (uint32_t)m->h.req;
    s->dead[d] = PS_BACK;
    if (d != loom_rank(n)) return;
    /* A replacement learned only the deaths since it joined: REJOIN_READY
     * tells it the job's count (h.b), which its checkpoint parts report and
     * its cuts compare with the workers' CLOCKs once it is master of
     * anything, which it is not before now (ring.h). */
    s->deaths = m->h.b <= UINT32_MAX ? (uint32_t)m->h.b : UINT32_MAX;
    s->handbacks = m->h.clock > 0 && m->h.clock <= UINT32_MAX ? (uint32_t)m->h.clock : 0;
    log_info("this server holds full copies of its ranges again");
}
