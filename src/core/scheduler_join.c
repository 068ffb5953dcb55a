/* scheduler_join: nodes that take a slot in the running job (docs/FAULTS.md,
 * "A replacement server"; docs/ELASTIC.md), the scheduler's side.
 *
 * A replacement takes a dead server's rank (sched_rejoin), a server joins a
 * free server slot the same way (sched_join_server), and a worker joins a
 * free worker slot (sched_join): each gets the roster, then what it missed
 * of the job (tell_missed), and once it acknowledged the roster
 * (sched_announce_rejoin) everyone hears NODE_REJOINED and the layers bring
 * it in (node_add_rejoin). A joining worker's servers hear of it first and
 * answer (sched_join_acked) before it gets its roster, so that its first
 * message to a server comes from a node the server knows. scheduler.c calls
 * these from its stranger hook and its ROSTER_ACK handler. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/heartbeat.h"
#include "core/log.h"
#include "core/node_priv.h"
#include "loom/error.h"

static uint32_t num_servers(const loom_node *n)
{
    return (uint32_t)n->cfg.num_servers;
}

/* Tell node `dest`, which takes a slot in the running job, right after its
 * roster, what it missed: the servers the job goes on without (NODE_FAILED,
 * b = 1 for a free slot: nobody died) and, `workers` set (a server), the
 * workers it went on without (WORKER_LOST). */
static void tell_missed(loom_node *n, uint32_t dest, int workers)
{
    for (uint32_t i = 1; i < n->nnodes; i++) {
        if (i <= num_servers(n) && n->peers[i].failed)
            sched_send_control_ab(n, dest, MSG_NODE_FAILED, i, (uint64_t)n->peers[i].vacant);
        if (workers && n->peers[i].lost)
            sched_send_control_ab(n, dest, MSG_WORKER_LOST, i,
                                  n->peers[i].share > 0 ? (uint64_t)n->peers[i].share : 0);
    }
}

/* A replacement for node `id`, which died and which the job went on without
 * (survive): it takes the node's place with its own routing id. It gets the
 * roster, then what it missed of the job (which servers died, which workers
 * were lost); once it has acknowledged the roster (announce_rejoin),
 * everyone, the newcomer included, hears NODE_REJOINED, and the layers bring
 * the newcomer up to date from there (node_add_rejoin). Not before: the
 * others start sending it at once (a worker its clock), and a message that
 * reached it before its roster would come from no node it knows, and be
 * dropped. */
/* Whether a worker is joining (sched_join) and has not yet acknowledged its
 * roster, for less than the heartbeat timeout. A server that took a slot
 * then would not be among the servers told of the worker, nor in the
 * worker's roster as joining: it would take the worker's slot for a free one
 * (the registry tells a newcomer which slots are done) and drop its clocks,
 * and the worker would take it for up. So it asks again; such a join takes
 * milliseconds, and one that waits longer waits for a server that is dead
 * (whose replacement this may be) or declared so soon. */
static int worker_joining(loom_node *n)
{
    uint64_t now = node_now_ms();
    for (uint32_t i = 1 + num_servers(n); i < n->nnodes; i++) {
        const peer *w = &n->peers[i];
        if (w->joined && w->rejoining && now - w->join_ms < (uint64_t)n->cfg.heartbeat_timeout_ms)
            return 1;
    }
    return 0;
}

void sched_rejoin(loom_node *n, uint32_t id, const uint8_t *rid, size_t rid_len, const char *addr,
                  int joins)
{
    sched_state *s = &n->sched;
    if (s->shutting_down || n->state != NODE_RUNNING) {
        sched_reject(n, rid, rid_len, LOOM_ESHUTDOWN, "the job is ending");
        return;
    }
    if (worker_joining(n)) {
        log_info("a server asked to take slot %" PRIu32 " while a worker joins: it asks again", id);
        sched_send_reject(n, rid, rid_len, LOOM_ESTATE, "a worker is joining the job; ask again");
        return;
    }
    if (node_bind_rid(n, id, rid, rid_len)) {
        sched_reject(n, rid, rid_len, LOOM_ESTATE,
                     "its routing id is already in use by another node");
        return;
    }
    peer *p = &n->peers[id];
    p->failed = p->done = 0;
    p->drained = 0; /* its own death is a death */
    heartbeat_watch(n, id);
    snprintf(p->addr, sizeof p->addr, "%s", addr);
    s->servers_acked_shutdown--; /* survive() counted it as ended */
    sched_forget_roster(s);      /* it lists the dead node's routing id and address */
    char who[64];
    node_describe(n, id, who, sizeof who);
    if (joins) { /* a server joining the running job (join_server) */
        p->vacant = p->left = 0;
        p->registered = p->joined = 1; /* a free slot's never was */
        s->joins++;
        log_warn("%s joined the running job from %s: it takes its ranges from the live servers",
                 who, addr);
    } else {
        log_warn("%s rejoined from %s (a replacement for the dead one)", who, addr);
    }
    sched_send_roster(n, id, 1);
    tell_missed(n, id, 1);
    p->rejoining = 1;
}

/* A server joins the running job (docs/ELASTIC.md, LOOM_JOIN=1 with
 * LOOM_ROLE=server): it takes the lowest server rank the job goes on
 * without (a free slot, one that left, or a dead one) as a replacement
 * does (rejoin), which then copies that rank's ranges from the live servers
 * and takes them back through the handback (src/ft). */
void sched_join_server(loom_node *n, const uint8_t *rid, size_t rid_len, const char *addr)
{
    for (uint32_t i = 1; i <= num_servers(n); i++) {
        if (n->peers[i].failed && !n->peers[i].rejoining) {
            sched_rejoin(n, i, rid, rid_len, addr, 1);
            return;
        }
    }
    char why[256];
    snprintf(why, sizeof why,
             "every one of the job's %" PRIu32 " server slots is taken, so no server can join it "
             "(start the job with free slots: loom run --max-servers, LOOM_START_SERVERS)",
             num_servers(n));
    sched_reject(n, rid, rid_len, LOOM_ECONFIG, why);
}

/* The roster to worker node `id`, which joins the running job, and the
 * servers the job goes on without: it routes around them as the others do. */
static void send_joiner_roster(loom_node *n, uint32_t id)
{
    sched_send_roster(n, id, 2);
    tell_missed(n, id, 0);
}

/* A worker joins the running job (docs/ELASTIC.md) in free worker slot
 * `rank` (-1: the lowest free one, a free slot or one a worker left before a
 * dead worker's, --on-worker-failure continue): like a replacement (rejoin), it gets the
 * roster (b = 2, with the barrier generation it starts at), and once it
 * acknowledged it everyone hears NODE_REJOINED and the layers bring it in
 * (node_add_rejoin: its clock, its data parts). Not while the workers are in
 * a barrier, which would then wait for it, nor while a layer's join gate
 * says no (node_add_join_gate: workers on their way to one, a server copying
 * its ranges back): it is asked to ask again. */
void sched_join(loom_node *n, int rank, const uint8_t *rid, size_t rid_len, const char *addr)
{
    sched_state *s = &n->sched;
    uint32_t base = 1 + num_servers(n);
    if (s->shutting_down || n->state != NODE_RUNNING ||
        s->workers_done >= (uint32_t)n->cfg.num_workers) {
        sched_reject(n, rid, rid_len, LOOM_ESHUTDOWN, "the job is ending: no worker can join it");
        return;
    }
    for (int k = 0; k < n->cfg.num_workers && rank < 0; k++)
        if (n->peers[base + (uint32_t)k].vacant) rank = k;
    for (int k = 0; k < n->cfg.num_workers && rank < 0; k++) /* then a dead worker's */
        if (n->peers[base + (uint32_t)k].lost) rank = k;
    if (rank < 0) {
        char why[256];
        snprintf(why, sizeof why,
                 "every one of the job's %d worker slots is taken, so no worker can join it "
                 "(start the job with free slots: loom run --max-workers, LOOM_START_WORKERS)",
                 n->cfg.num_workers);
        sched_reject(n, rid, rid_len, LOOM_ECONFIG, why);
        return;
    }
    const char *busy = s->barrier_arrived ? "the workers are in a barrier" : node_join_refused(n);
    if (busy) {
        log_info("a worker asked to join while %s: it asks again", busy);
        char why[256];
        snprintf(why, sizeof why, "%s; ask again", busy);
        sched_send_reject(n, rid, rid_len, LOOM_ESTATE, why);
        return;
    }
    uint32_t id = base + (uint32_t)rank;
    if (node_bind_rid(n, id, rid, rid_len)) {
        sched_reject(n, rid, rid_len, LOOM_ESTATE,
                     "its routing id is already in use by another node");
        return;
    }
    peer *p = &n->peers[id];
    if (p->lost) { /* a dead worker's slot (--on-worker-failure continue) */
        s->workers_lost--;
        log_info("worker %d's slot was a dead worker's: the job went on without it", rank);
    }
    p->registered = p->joined = 1;
    p->done = p->vacant = p->left = p->lost = p->leave_asked = 0;
    p->leave_rid_len = 0;
    p->share = 0;
    s->workers_done--;
    s->joins++;
    heartbeat_watch(n, id);
    snprintf(p->addr, sizeof p->addr, "%s", addr);
    sched_forget_roster(s); /* it lists the free slot's placeholder */
    log_warn("worker %d joined the running job from %s: %" PRIu32 " of %d worker slots taken", rank,
             addr, (uint32_t)n->cfg.num_workers - s->workers_done, n->cfg.num_workers);
    p->rejoining = 1;
    p->join_ms = node_now_ms();
    /* The servers first, as when the job assembled: each must be able to tell
     * who sends before the newcomer's first message reaches it, which another
     * connection than the scheduler's could bring sooner. Each answers
     * ROSTER_ACK(a = id); the last answer sends the newcomer its roster. */
    blob_writer w = {0};
    blob_put_bytes(&w, p->rid, p->rid_len);
    blob_put_str(&w, p->addr);
    p->join_acks = 0;
    for (uint32_t i = 1; i <= num_servers(n) && !w.bad; i++) {
        if (!n->peers[i].registered || n->peers[i].done || n->peers[i].failed) continue;
        msg_header h = {.type = MSG_NODE_REJOINED, .a = id};
        node_frame f = {w.buf, w.len, NULL, NULL, 1};
        if (!node_send(n, i, &h, &f, 1)) p->join_acks++;
    }
    free(w.buf);
    if (!p->join_acks) send_joiner_roster(n, id);
}

/* A server knows the joining worker node `id` (ROSTER_ACK a = id). */
void sched_join_acked(loom_node *n, node_msg *m)
{
    int rank;
    peer *p = m->h.a < n->nnodes ? &n->peers[m->h.a] : NULL;
    if (!p || node_peer_role(n, (uint32_t)m->h.a, &rank) != LOOM_WORKER || !p->joined ||
        !p->rejoining || !p->join_acks) {
        node_drop(n, m, "a server's join acknowledgement naming no joining worker");
        return;
    }
    if (--p->join_acks == 0) send_joiner_roster(n, (uint32_t)m->h.a);
}

/* The replacement for node `id` installed its roster: tell everyone. */
void sched_announce_rejoin(loom_node *n, uint32_t id)
{
    peer *p = &n->peers[id];
    p->rejoining = 0;
    blob_writer w = {0};
    blob_put_bytes(&w, p->rid, p->rid_len);
    blob_put_str(&w, p->addr);
    for (uint32_t i = 1; i < n->nnodes && !w.bad; i++) {
        if (!n->peers[i].registered || n->peers[i].done) continue;
        /* A joining worker's servers were told before its roster (join). */
        if (p->joined && p->role == LOOM_WORKER && i <= num_servers(n)) continue;
        /* A worker joining too, whose roster is not sent yet: it will list this one. */
        if (n->peers[i].rejoining && n->peers[i].join_acks) continue;
        msg_header h = {.type = MSG_NODE_REJOINED, .a = id};
        node_frame f = {w.buf, w.len, NULL, NULL, 1};
        node_send(n, i, &h, &f, 1);
    }
    free(w.buf);
    node_run_rejoin(n, id);
}
