/* client_failover: a worker's part in failover and handback (ring.h;
 * docs/FAULTS.md).
 *
 * With replicas the master of a key range changes when its server dies (the
 * range's first live holder takes over) and again when a replacement that
 * came back takes its ranges back (handback). The worker then recomputes the
 * masters and moves what waits on an old one: in-flight pushes go again to
 * the new master with their sequence numbers (a range skips one it already
 * holds), pull parts are asked again, cached rows are dropped (their versions
 * were another server's). During a handback the moving ranges are fenced:
 * their acting master parks the pushes it gets for them (PARKED: the worker
 * keeps them) and a server refuses pulls of a range it no longer serves; the
 * server says when they must go again (PARKED req 0).
 *
 * This is fault tolerance over the parameter server, kept apart to move to
 * the fault-tolerance layer: the push and pull paths only keep what it needs
 * (in-flight pushes with their clocks, pull slots by server, the servers
 * whose pulls were redirected) and accept what it causes (acknowledgements
 * and replies from an old master after a handback, refused pulls). It is
 * attached as the node's failover and rejoin subscribers and the handlers of its
 * own messages (client_failover_attach). */
#include "core/log.h"
#include "ps/client_impl.h"
#include "ps/msg_types.h"

/* ---- failover (ring.h; docs/FAULTS.md) ---- */

/* Send in-flight push f again, with its sequence number, to the master of
 * its range now, at the tail of that server's list (a push whose server
 * never acknowledged it completes when the new one does). A message with
 * nothing to apply (an empty flush) completes at once. Whether it went. Lock
 * held. */
static int resend_push(loom_table *t, inflight *f)
{
    f->next = NULL;
    if (!f->n || !f->vals) {
        if (!f->ts_done) node_ts_done(t->node, f->ts, 0);
        sbuf_unref(f->hold);
        free(f);
        return 0;
    }
    int s = server_of(t, f->keys ? f->keys[0] : f->begin);
    if (t->ifl_tail[s])
        t->ifl_tail[s]->next = f;
    else
        t->ifl_head[s] = f;
    t->ifl_tail[s] = f;
    f->ts_done = f->ts_done || f->acked;
    f->acked = f->parked = 0;
    msg_header h = {.type = MSG_PUSH, .table = t->id, .req = f->seq, .clock = f->clock};
    node_frame frames[2];
    size_t nf = 0;
    if (f->keys)
        frames[nf++] =
            (node_frame){f->keys, f->n * 8, f->hold ? sbuf_free_frame : NULL, sbuf_ref(f->hold), 0};
    else {
        h.flags = MSG_F_RANGE;
        h.a = f->begin;
        h.b = f->begin + f->n;
    }
    frames[nf++] = (node_frame){f->vals, f->n * t->row_bytes, f->hold ? sbuf_free_frame : NULL,
                                sbuf_ref(f->hold), 0};
    node_send(t->node, node_server_id(t->client->num_servers, s), &h, frames, nf);
    return 1;
}

/* Take out of server s's in-flight list the pushes that `move` selects and
 * send each again to its range's master now; returns how many went. Lock held. */
static size_t resend_from(loom_table *t, int s,
                          int (*move)(const loom_table *t, int s, const inflight *f))
{
    inflight *keep = NULL, *keep_tail = NULL, *moved = NULL, **moved_tail = &moved;
    for (inflight *f = t->ifl_head[s], *next; f; f = next) {
        next = f->next;
        f->next = NULL;
        if (move(t, s, f)) {
            *moved_tail = f;
            moved_tail = &f->next;
        } else {
            if (keep_tail)
                keep_tail->next = f;
            else
                keep = f;
            keep_tail = f;
        }
    }
    t->ifl_head[s] = keep;
    t->ifl_tail[s] = keep_tail;
    size_t resent = 0;
    for (inflight *f = moved, *next; f; f = next) {
        next = f->next;
        resent += (size_t)resend_push(t, f);
    }
    return resent;
}

static int every_push(const loom_table *t, int s, const inflight *f)
{
    (void)t, (void)s, (void)f;
    return 1;
}

static int parked_push(const loom_table *t, int s, const inflight *f)
{
    (void)t, (void)s;
    return f->parked;
}

/* A push whose range's master is not the server it was sent to any more. */
static int moved_push(const loom_table *t, int s, const inflight *f)
{
    return server_of(t, f->keys ? f->keys[0] : f->begin) != s;
}

/* Server d died: its ranges have new masters; every push it had not yet
 * reported as held by its replicas goes again, with its sequence number, to
 * the new master of its range (which applies it only if its replica had not
 * got it). Cached rows are dropped: their versions were the dead server's.
 * Returns pushes resent. */
static size_t failover_table(loom_table *t, int d)
{
    pthread_mutex_lock(&t->mu);
    compute_masters(t);
    cache_clear(t);
    size_t resent = resend_from(t, d, every_push);
    pthread_mutex_unlock(&t->mu);
    return resent;
}

/* The node's failover subscriber (node_add_failover): server `id` died. */
static int client_failover(loom_node *n, void *ctx, uint32_t id)
{
    ps_client *c = ctx;
    if (!ps_survives(n, c->replicas, c->dead, id)) return 0;
    int d;
    node_peer_role(n, id, &d);
    /* The tables' masters first, then the pulls: a pull routed to the dead
     * server after the pulls were taken finds it redirected (slot_alloc) and
     * asks the new master. */
    size_t ntables;
    loom_table **tables = client_snapshot_tables(c, &ntables);
    size_t resent = 0;
    for (size_t i = 0; tables && i < ntables; i++) resent += failover_table(tables[i], d);
    pthread_mutex_lock(&c->mu);
    c->redirected[d] = 1;
    /* Pull parts waiting for the dead server: taken now, asked again below. */
    size_t nmoved = 0;
    pull_slot *moved = malloc((c->nslots ? c->nslots : 1) * sizeof *moved);
    for (uint32_t i = 0; moved && i < c->nslots; i++) {
        if (!c->slots[i].req || c->slots[i].server != d) continue;
        moved[nmoved++] = c->slots[i];
        c->slots[i] = (pull_slot){.next_free = c->free_head};
        c->free_head = i;
    }
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < nmoved; i++) {
        pull_op *op = moved[i].op;
        client_send_pull(op, client_pull_master(op, moved[i].first), moved[i].first, moved[i].count,
                         required_clock(op->t, op->fetch_clock), 0);
    }
    if (!tables || !moved)
        log_error("out of memory redirecting requests after server %d died: the job may stall", d);
    else
        log_warn("server %d died: %zu pushes and %zu pulls sent again to its ranges' replicas", d,
                 resent, nmoved);
    free(tables);
    free(moved);
    atomic_fetch_add(&c->failovers_done, 1); /* after what went again: CLOCKs follow it */
    return 1;
}

/* A replacement took server `id`'s place (node_add_rejoin): the node has
 * connected to it; it gets this worker's clock now and every later one (its
 * clock rule needs them once it is master), and its acknowledgements start
 * from nothing. It is master of nothing until it is BACK and a range's UP
 * holders die (ring.h), so no request is moved. */
static void client_rejoin(loom_node *n, void *ctx, uint32_t id)
{
    ps_client *c = ctx;
    int d;
    if (node_peer_role(n, id, &d) != LOOM_SERVER) return;
    c->dead[d] = PS_JOINING;
    size_t ntables;
    loom_table **tables = client_snapshot_tables(c, &ntables);
    for (size_t i = 0; i < ntables; i++) {
        pthread_mutex_lock(&tables[i]->mu);
        tables[i]->durable[d] = 0;
        if (client_link_chains(tables[i], d))
            log_error("table \"%s\": out of memory making the filter chains of the link to "
                      "server %d's replacement: its pushes and pulls will fail",
                      tables[i]->def.name, d);
        pthread_mutex_unlock(&tables[i]->mu);
    }
    free(tables);
    pthread_mutex_lock(&c->mu);
    c->redirected[d] = 0; /* another process: it may be master again (ring.h) */
    msg_header h = {.type = MSG_CLOCK, .clock = c->clock_sent};
    node_send(n, id, &h, NULL, 0);
    pthread_mutex_unlock(&c->mu);
}

static void on_rejoin_ready(loom_node *n, void *ctx, node_msg *m)
{
    ps_client *c = ctx;
    int d;
    if (m->h.a > UINT32_MAX || node_peer_role(n, (uint32_t)m->h.a, &d) != LOOM_SERVER ||
        c->dead[d] != PS_JOINING || m->h.req == 0 || m->h.req > UINT32_MAX) {
        node_drop(n, m,
                  "REJOIN_READY naming no joining server, or without the order of the return");
        return;
    }
    c->returned[d] = (uint32_t)m->h.req;
    c->dead[d] = PS_BACK; /* no range moves (ring.h) */
}

/* ---- handback (src/ft/handback.c; docs/FAULTS.md) ---- */

/* PARKED from a server: req names a push of ours it did not apply (its
 * range is fenced, or an older push of ours to it is parked there), which
 * we keep; req 0: send again every push it parked,
 * and ask again every pull it refused (reroute_pull), of the masters of
 * their ranges now, then acknowledge (HANDBACK_ACK). */
static void on_parked(loom_node *n, void *ctx, node_msg *m)
{
    ps_client *c = ctx;
    int s;
    loom_table *t = m->h.table < PS_MAX_TABLES ? atomic_load(&c->by_id[m->h.table]) : NULL;
    if (node_peer_role(n, m->from, &s) != LOOM_SERVER || (m->h.req && !t)) {
        node_drop(n, m, "PARKED from a non-server or for an unknown table");
        return;
    }
    if (m->h.req) {
        pthread_mutex_lock(&t->mu);
        inflight *f = t->ifl_head[s];
        while (f && f->seq != m->h.req) f = f->next;
        if (f) f->parked = 1; /* not there: a handback sent it elsewhere already */
        pthread_mutex_unlock(&t->mu);
        return;
    }
    size_t ntables, resent = 0;
    loom_table **tables = client_snapshot_tables(c, &ntables);
    for (size_t i = 0; tables && i < ntables; i++) {
        pthread_mutex_lock(&tables[i]->mu);
        resent += resend_from(tables[i], s, parked_push);
        pthread_mutex_unlock(&tables[i]->mu);
    }
    /* The refused pulls: taken now, asked again below (the reply handlers
     * run on this thread, so their operations stay alive meanwhile). */
    pthread_mutex_lock(&c->mu);
    size_t nasked = 0;
    pull_slot *asked = malloc((c->nslots ? c->nslots : 1) * sizeof *asked);
    for (uint32_t i = 0; asked && i < c->nslots; i++) {
        if (!c->slots[i].req || c->slots[i].server != s || !c->slots[i].refused) continue;
        asked[nasked++] = c->slots[i];
        c->slots[i] = (pull_slot){.next_free = c->free_head};
        c->free_head = i;
    }
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < nasked; i++) {
        pull_op *op = asked[i].op;
        client_send_pull(op, client_pull_master(op, asked[i].first), asked[i].first, asked[i].count,
                         required_clock(op->t, op->fetch_clock), asked[i].resent);
    }
    if (!tables || !asked)
        log_error("out of memory sending parked pushes and refused pulls again: the job may stall");
    free(tables);
    free(asked);
    if (resent || nasked)
        log_info("sent %zu parked pushes and %zu refused pulls again", resent, nasked);
    msg_header h = {.type = MSG_HANDBACK_ACK, .req = m->h.a, .b = m->h.b};
    node_send(n, m->from, &h, NULL, 0);
}

/* A handback's commit: server d is UP and master of the ranges it took
 * back. Every push held for them goes to it again, every pull waiting for
 * them is asked of it again, cached rows are dropped (their versions were
 * another server's); then this worker acknowledges to d, whose pulls of
 * those ranges wait for every worker's acknowledgement. */
static void on_handback(loom_node *n, void *ctx, node_msg *m)
{
    ps_client *c = ctx;
    int d;
    if (m->from != 0 || m->h.b != 1 || m->h.a > UINT32_MAX ||
        node_peer_role(n, (uint32_t)m->h.a, &d) != LOOM_SERVER || c->dead[d] != PS_BACK) {
        node_drop(n, m, "HANDBACK naming no server back");
        return;
    }
    c->dead[d] = PS_UP;
    c->returned[d] = 0;
    c->handbacks_seen = 1;
    size_t ntables, resent = 0;
    loom_table **tables = client_snapshot_tables(c, &ntables);
    for (size_t i = 0; tables && i < ntables; i++) {
        loom_table *t = tables[i];
        pthread_mutex_lock(&t->mu);
        compute_masters(t);
        cache_clear(t);
        for (int s = 0; s < c->num_servers; s++)
            if (s != d) resent += resend_from(t, s, moved_push);
        pthread_mutex_unlock(&t->mu);
    }
    /* Pulls waiting at the old masters: the reply handlers run on this
     * thread, so their operations stay alive meanwhile. */
    pthread_mutex_lock(&c->mu);
    size_t nwait = 0, nmoved = 0;
    pull_slot *wait = malloc((c->nslots ? c->nslots : 1) * sizeof *wait);
    for (uint32_t i = 0; wait && i < c->nslots; i++)
        if (c->slots[i].req && c->slots[i].server != d) wait[nwait++] = c->slots[i];
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < nwait; i++) {
        pull_op *op = wait[i].op;
        int to = client_pull_master(op, wait[i].first);
        pull_slot taken;
        if (to != wait[i].server && client_slot_take(c, wait[i].req, wait[i].server, &taken)) {
            client_send_pull(op, to, taken.first, taken.count,
                             required_clock(op->t, op->fetch_clock), 0);
            nmoved++;
        }
    }
    if (!tables || !wait)
        log_error("out of memory moving requests to server %d, which took its ranges back: "
                  "the job may stall",
                  d);
    else
        log_info("server %d took its ranges back: %zu pushes and %zu pulls sent to it again", d,
                 resent, nmoved);
    free(tables);
    free(wait);
    atomic_fetch_add(&c->failovers_done, 1); /* CLOCKs after this one say so (cut_settled) */
    msg_header h = {.type = MSG_HANDBACK_ACK, .req = m->h.req};
    node_send(n, (uint32_t)m->h.a, &h, NULL, 0);
}

/* The node's subscribers for a dead server and its replacement, and the messages
 * of a server's return: its readiness, parked requests, the handback. */
int client_failover_attach(loom_node *n, ps_client *c)
{
    node_set_handler(n, MSG_REJOIN_READY, on_rejoin_ready, c);
    node_set_handler(n, MSG_PARKED, on_parked, c);
    node_set_handler(n, MSG_HANDBACK, on_handback, c);
    int rc = node_add_failover(n, client_failover, c);
    return rc ? rc : node_add_rejoin(n, client_rejoin, c);
}
