/* client_ft: what a worker's side of the parameter server does for the
 * fault-tolerance layer (client_ft.h; ring.h, docs/FAULTS.md).
 *
 * src/ft/client_failover.c decides when the masters change (a server's
 * death, a replacement's return, a handback) and what must go again; this
 * file keeps the routing and moves the requests: the server states the
 * masters follow, in-flight pushes sent again to their range's master now
 * with their sequence numbers (a range skips one it already holds), pull
 * parts asked again, cached rows dropped (their versions were another
 * server's), a replacement's links. The push and pull paths only keep what
 * it needs (in-flight pushes with their clocks, pull slots by server, the
 * servers whose pulls were redirected) and accept what it causes
 * (acknowledgements and replies from an old master after a handback,
 * refused pulls). */
#include <stdlib.h>

#include "core/log.h"
#include "ps/client_ft.h"
#include "ps/client_impl.h"
#include "ps/msg_types.h"

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

/* Take out of server s's in-flight list the pushes that `move` selects, and
 * append them to *tail (a list in their old order). Lock held. */
static inflight **take_from(loom_table *t, int s,
                            int (*move)(const loom_table *t, int s, const inflight *f),
                            inflight **tail)
{
    inflight *keep = NULL, *keep_tail = NULL;
    for (inflight *f = t->ifl_head[s], *next; f; f = next) {
        next = f->next;
        f->next = NULL;
        if (move(t, s, f)) {
            *tail = f;
            tail = &f->next;
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
    return tail;
}

static int by_seq(const void *a, const void *b)
{
    uint64_t x = (*(inflight *const *)a)->seq, y = (*(inflight *const *)b)->seq;
    return x < y ? -1 : x > y;
}

/* Send the pushes of list `moved` again, oldest sequence first; returns how
 * many went. A range applies a worker's push only if its sequence is newer
 * than the last it applied from that worker, so they must reach a master in
 * sequence order, and a list need not be in it: a push sent again (PARKED
 * req 0) goes to the tail of its server's list, behind later pushes that
 * were on their way meanwhile; moved on in list order, the later one would
 * be applied first and the older one then taken for a duplicate (an
 * acknowledged push lost: ft.handback_ssp, once in about 370 runs). When
 * there is no memory to sort, list order. Lock held. */
static size_t resend_in_order(loom_table *t, inflight *moved)
{
    size_t n = 0, resent = 0;
    for (inflight *f = moved; f; f = f->next) n++;
    inflight **v = n > 1 ? malloc(n * sizeof *v) : NULL;
    if (v) {
        size_t i = 0;
        for (inflight *f = moved; f; f = f->next) v[i++] = f;
        qsort(v, n, sizeof *v, by_seq);
        for (i = 0; i < n; i++) resent += (size_t)resend_push(t, v[i]);
        free(v);
        return resent;
    }
    if (n > 1) log_error("out of memory ordering pushes sent again: a range may skip one");
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

/* ---- what src/ft calls (client_ft.h) ---- */

int ps_client_server_state(loom_node *n, int rank)
{
    return client_of(n)->dead[rank];
}

void ps_client_set_server_state(loom_node *n, int rank, int state, uint32_t returned)
{
    ps_client *c = client_of(n);
    c->dead[rank] = (uint8_t)state;
    c->returned[rank] = state == PS_BACK ? returned : 0; /* read only when BACK (ring.h) */
}

int ps_client_survives(loom_node *n, uint32_t id)
{
    ps_client *c = client_of(n);
    return ps_survives(n, c->replicas, c->dead, id);
}

size_t ps_client_resend(loom_node *n, int which, int server, int *ok)
{
    ps_client *c = client_of(n);
    size_t ntables, resent = 0;
    loom_table **tables = client_snapshot_tables(c, &ntables);
    for (size_t i = 0; tables && i < ntables; i++) {
        loom_table *t = tables[i];
        pthread_mutex_lock(&t->mu);
        if (which != PS_RESEND_PARKED) {
            compute_masters(t);
            cache_clear(t);
        }
        inflight *moved = NULL, **tail = &moved;
        if (which == PS_RESEND_MOVED) {
            for (int s = 0; s < c->num_servers; s++)
                if (s != server) tail = take_from(t, s, moved_push, tail);
        } else {
            take_from(t, server, which == PS_RESEND_ALL ? every_push : parked_push, tail);
        }
        resent += resend_in_order(t, moved);
        pthread_mutex_unlock(&t->mu);
    }
    *ok = tables != NULL;
    free(tables);
    return resent;
}

size_t ps_client_drained(loom_node *n, int server)
{
    ps_client *c = client_of(n);
    size_t ntables, dropped = 0;
    loom_table **tables = client_snapshot_tables(c, &ntables);
    for (size_t i = 0; tables && i < ntables; i++) {
        loom_table *t = tables[i];
        pthread_mutex_lock(&t->mu);
        inflight **pp = &t->ifl_head[server], *last = NULL;
        while (*pp) {
            inflight *f = *pp;
            if (!f->acked || f->parked) {
                last = f;
                pp = &f->next;
                continue;
            }
            *pp = f->next; /* acknowledged: its timestamp part is done */
            sbuf_unref(f->hold);
            free(f);
            dropped++;
        }
        t->ifl_tail[server] = last;
        pthread_mutex_unlock(&t->mu);
    }
    free(tables);
    return dropped;
}

void ps_client_count_resent(loom_node *n, size_t resent, size_t redirected)
{
    ps_counters *k = client_of(n)->counters;
    atomic_fetch_add(&k->pushes_resent, resent);
    atomic_fetch_add(&k->pushes_redirected, redirected);
}

/* Whether pull slot p is one that ps_client_repull's `which` moves. */
static int repull_takes(const pull_slot *p, int which, int server)
{
    if (!p->req) return 0;
    if (which == PS_REPULL_MOVED) return p->server != server;
    return p->server == server && (which != PS_REPULL_REFUSED || p->refused);
}

size_t ps_client_repull(loom_node *n, int which, int server, int *ok)
{
    ps_client *c = client_of(n);
    /* Taken now (or, PS_REPULL_MOVED, copied, and taken below if their
     * master changed) and asked again below: the reply handlers run on
     * this thread, so their operations stay alive meanwhile. */
    pthread_mutex_lock(&c->mu);
    if (which == PS_REPULL_DEAD) c->redirected[server] = 1;
    size_t nslots = 0, asked = 0;
    pull_slot *slots = malloc((c->nslots ? c->nslots : 1) * sizeof *slots);
    for (uint32_t i = 0; slots && i < c->nslots; i++) {
        if (!repull_takes(&c->slots[i], which, server)) continue;
        slots[nslots++] = c->slots[i];
        if (which == PS_REPULL_MOVED) continue;
        c->slots[i] = (pull_slot){.next_free = c->free_head};
        c->free_head = i;
    }
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < nslots; i++) {
        pull_op *op = slots[i].op;
        int64_t required = required_clock(op->t, op->fetch_clock);
        if (which != PS_REPULL_MOVED) {
            client_send_pull(op, client_pull_master(op, slots[i].first), slots[i].first,
                             slots[i].count, required,
                             which == PS_REPULL_REFUSED ? slots[i].resent : 0);
            asked++;
            continue;
        }
        int to = client_pull_master(op, slots[i].first);
        pull_slot taken;
        if (to != slots[i].server && client_slot_take(c, slots[i].req, slots[i].server, &taken)) {
            client_send_pull(op, to, taken.first, taken.count, required, 0);
            asked++;
        }
    }
    *ok = slots != NULL;
    free(slots);
    return asked;
}

int ps_client_park(loom_node *n, uint32_t table, int server, uint64_t seq)
{
    ps_client *c = client_of(n);
    loom_table *t = table < PS_MAX_TABLES ? atomic_load(&c->by_id[table]) : NULL;
    if (!t) return LOOM_ENOTFOUND;
    pthread_mutex_lock(&t->mu);
    inflight *f = t->ifl_head[server];
    while (f && f->seq != seq) f = f->next;
    if (f) f->parked = 1; /* not there: a handback sent it elsewhere already */
    pthread_mutex_unlock(&t->mu);
    return 0;
}

void ps_client_rejoined(loom_node *n, int rank)
{
    ps_client *c = client_of(n);
    size_t ntables;
    loom_table **tables = client_snapshot_tables(c, &ntables);
    for (size_t i = 0; i < ntables; i++) {
        pthread_mutex_lock(&tables[i]->mu);
        tables[i]->durable[rank] = 0;
        if (client_link_chains(tables[i], rank))
            log_error("table \"%s\": out of memory making the filter chains of the link to "
                      "server %d's replacement: its pushes and pulls will fail",
                      tables[i]->def.name, rank);
        pthread_mutex_unlock(&tables[i]->mu);
    }
    free(tables);
    pthread_mutex_lock(&c->mu);
    c->redirected[rank] = 0; /* another process: it may be master again (ring.h) */
    msg_header h = {.type = MSG_CLOCK, .clock = c->clock_sent};
    node_send(n, node_server_id(c->num_servers, rank), &h, NULL, 0);
    pthread_mutex_unlock(&c->mu);
}

void ps_client_handback_seen(loom_node *n)
{
    client_of(n)->handbacks_seen = 1;
}

void ps_client_failover_done(loom_node *n)
{
    atomic_fetch_add(&client_of(n)->failovers_done, 1);
}
