/* node_control: what the scheduler tells servers and workers, and how a node
 * ends: the roster, refusals, barriers, the end of a worker and of the job,
 * nodes that died, came back or were lost; the I/O thread's tick (node_tick:
 * core's parts' tick hooks), and a server's or worker's part of membership
 * (node_member_attach): the status heartbeat, a worker's metrics
 * (loom_report_metric). The scheduler's side is scheduler.c, the status page
 * it shows them on status.c.
 *
 * Liveness travels apart, on each node's heartbeat thread and socket
 * (heartbeat.c): only heartbeats there count as signs of life. At each tick
 * the I/O thread reads that thread's verdict (heartbeat_silence): the
 * scheduler declares a node dead after heartbeat_timeout_ms of silence
 * (sched_tick) and broadcasts NODE_FAILED; a node that has heard nothing
 * from the scheduler for as long declares the scheduler dead (node_tick).
 * Unless the layers' failover subscribers let the job go on (node_add_failover),
 * node_fail() prints which node died and, by default, ends the process with
 * LOOM_EXIT_PEER_FAILED. The HEARTBEAT the I/O thread sends here (member_tick)
 * only carries the byte totals for the status page. */
#include "core/node_priv.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/heartbeat.h"
#include "core/log.h"
#include "loom/error.h"

/* ---- failure and the end of the job ---- */

void node_finish(loom_node *n, int status)
{
    pthread_mutex_lock(&n->mu);
    if (n->state != NODE_FAILED) {
        n->state = NODE_DONE;
        n->end_status = status;
    }
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
}

void node_note_death(loom_node *n, uint32_t dead, const char *why, int fatal)
{
    for (int i = 0; i < n->nhooks; i++)
        if (n->hooks[i].h->death) n->hooks[i].h->death(n, n->hooks[i].ctx, dead, why, fatal);
}

void node_fail(loom_node *n, uint32_t dead, const char *fmt, ...)
{
    pthread_mutex_lock(&n->mu);
    int already = n->state == NODE_FAILED || n->state == NODE_DONE;
    if (!already) {
        n->state = NODE_FAILED;
        n->end_status = LOOM_EPEERFAIL;
    }
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
    if (already) return;

    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    log_error("%s; stopping", why);
    tracker_fail_all(&n->ts, LOOM_EPEERFAIL);

    node_note_death(n, dead, why, 1); /* the scheduler's: the page notes it, every node hears it */
    if (n->cfg.on_failure == LOOM_ON_FAILURE_EXIT) {
        /* Closing with linger, then terminating the context, gives the
         * NODE_FAILED broadcast its chance to leave before the process ends.
         * What waits for the dead node itself can never leave: lingering on
         * it would only delay the exit by the whole linger. */
        if (dead != n->id) node_drop_unsent(n, dead);
        node_close_all_sockets(n, LOOM_EPEERFAIL);
        zmq_ctx_term(n->zctx);
        fflush(stdout);
        _exit(LOOM_EXIT_PEER_FAILED);
    }
}

/* ---- control messages of servers and workers ---- */

/* Whether this process replaces a dead one (LOOM_REJOIN=1, set by loom run
 * --on-server-failure restart; docs/FAULTS.md). */
int node_rejoining(void)
{
    const char *v = getenv("LOOM_REJOIN");
    return v && !strcmp(v, "1");
}

/* Whether this process joins a running job as a new worker (LOOM_JOIN=1, set
 * by loom join; docs/ELASTIC.md). */
int node_joining(void)
{
    const char *v = getenv("LOOM_JOIN");
    return v && !strcmp(v, "1");
}

static int install_roster(loom_node *n, node_msg *m)
{
    if (m->from != 0 || m->nframes != 1 || m->h.a >= n->nnodes || m->h.b > 2 || m->h.req == 0 ||
        m->h.req > 65535)
        return LOOM_EPROTO;
    if (msg_roster_decode(node_frame_data(m, 0), node_frame_size(m, 0), n->nnodes,
                          (uint32_t)n->cfg.num_servers, n->peers[0].addr, n->peers[0].rid,
                          sizeof(peer)))
        return LOOM_EPROTO;
    if (n->id == NODE_NO_ID) {
        n->id = (uint32_t)m->h.a;
        node_peer_role(n, n->id, &n->cfg.rank);
    }
    if (n->id != m->h.a || memcmp(n->peers[n->id].rid, n->my_rid, MSG_RID_SIZE)) return LOOM_EPROTO;
    n->replacement = (int)m->h.b;
    if (n->replacement == 2) {
        /* Joined a running job: its next barrier is the job's next one. */
        if (n->cfg.role != LOOM_WORKER || m->h.clock < 0) return LOOM_EPROTO;
        n->barrier_gen_entered = n->barrier_gen_released = (uint64_t)m->h.clock;
        n->seq_base = (uint64_t)m->h.table << NODE_SEQ_BASE_SHIFT;
    }
    n->workers_started = 0;
    for (uint32_t id = 0; id < n->nnodes; id++) {
        peer *p = &n->peers[id];
        p->role = node_peer_role(n, id, &p->rank);
        n->workers_started += p->role == LOOM_WORKER && strcmp(p->addr, "-"); /* a free slot's */
        uint8_t rid[MSG_RID_SIZE];
        memcpy(rid, p->rid, sizeof rid);
        int rc = node_bind_rid(n, id, rid, sizeof rid);
        if (rc) return rc;
    }
    if (n->cfg.role == LOOM_WORKER) {
        for (int s = 0; s < n->cfg.num_servers; s++) {
            uint32_t id = node_server_id(n->cfg.num_servers, s);
            if (!strcmp(n->peers[id].addr, "-")) continue; /* a free slot: node_rebind connects */
            int rc = node_connect_dealer(n, id);
            if (rc) return rc;
        }
    }
    return 0;
}

static void on_roster(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    if (n->roster_installed) {
        node_drop(n, m, "second roster");
        return;
    }
    int rc = install_roster(n, m);
    if (rc) {
        node_drop(n, m, "invalid roster");
        return;
    }
    snprintf(n->tag, sizeof n->tag, "%s %d", node_role_name(n->cfg.role), n->cfg.rank);
    log_set_tag(n->tag);
    /* Liveness from now on, on the heartbeat thread (heartbeat.c); a
     * node_fuzz.c node has no sockets, and no heartbeats. */
    rc = n->seam ? 0 : heartbeat_start(n, (int)m->h.req);
    pthread_mutex_lock(&n->mu);
    if (rc) {
        n->state = NODE_FAILED;
        n->end_status = rc;
        pthread_cond_broadcast(&n->cv);
        pthread_mutex_unlock(&n->mu);
        return;
    }
    n->roster_installed = 1;
    n->state = NODE_RUNNING;
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
    /* A worker that joined acknowledges too: nobody hears of it before. */
    if (n->cfg.role == LOOM_SERVER || n->replacement == 2)
        node_send_control(n, 0, MSG_ROSTER_ACK, 0, 0);
}

static void on_reject(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    char why[256] = "no reason given";
    blob_reader r = {node_frame_data(m, 0), node_frame_size(m, 0), 0};
    blob_get_str(&r, why, sizeof why);
    if (m->h.a == LOOM_ESTATE &&
        (node_rejoining() || node_joining())) /* asked again in node_start */
        log_info("the scheduler refused this node for now: %s", why);
    else
        log_error("the scheduler refused this node: %s", why);
    pthread_mutex_lock(&n->mu);
    n->state = NODE_FAILED;
    n->end_status = m->h.a > 0 && m->h.a < LOOM_ERROR_COUNT_ ? (int)m->h.a : LOOM_ECONFIG;
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
}

static void on_barrier_release(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    pthread_mutex_lock(&n->mu);
    if (m->h.req > n->barrier_gen_released) n->barrier_gen_released = m->h.req;
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
}

static void on_done_ack(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx, (void)m;
    pthread_mutex_lock(&n->mu);
    n->done_acked = 1;
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
}

static void on_shutdown(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    if (m->h.a == 1) { /* it asked to leave (server_leave): the job went on without it */
        log_info("left the running job: its ranges are served by the other servers");
        node_finish(n, 0);
        return;
    }
    node_send_control(n, 0, MSG_SHUTDOWN_ACK, 0, 0);
    node_finish(n, 0);
}

/* A server asked to leave (loom_leave, a SIGTERM; docs/ELASTIC.md): the
 * scheduler lets the job go on without it, then ends it (SHUTDOWN a = 1). */
static void server_leave(loom_node *n)
{
    if (!atomic_load(&n->leave_requested) || atomic_exchange(&n->leave_sent, 1)) return;
    log_info("asked the scheduler to leave the running job");
    msg_header h = {.type = MSG_DONE, .a = 1};
    node_send(n, 0, &h, NULL, 0);
}

/* The scheduler refused to let this server leave (DONE_ACK a = why). */
static void on_leave_refused(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    if (!atomic_load(&n->leave_sent)) {
        node_drop(n, m, "DONE_ACK to a server that did not ask to leave");
        return;
    }
    log_error("the scheduler refused to let this server leave (%s: its ranges would have no live "
              "holder without it); it goes on serving",
              loom_strerror(m->h.a < LOOM_ERROR_COUNT_ ? (int)m->h.a : LOOM_EPROTO));
    atomic_store(&n->leave_requested, 0);
    atomic_store(&n->leave_sent, 0);
}

/* `loom leave` asked the scheduler that this worker leave (scheduler_leave.c):
 * the flag SIGTERM sets (loom_leave), so it leaves exactly as then, after the
 * part it trains on (loom/parts.h). */
static void on_leave(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    if (m->nframes || m->h.a || m->h.b) {
        node_drop(n, m, "LEAVE with a payload or arguments");
        return;
    }
    log_warn("the scheduler asks this worker to leave the running job (loom leave): it leaves "
             "after the part it trains on");
    loom_leave(n);
}

static void on_node_failed(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    char who[64];
    if (m->h.a >= n->nnodes) {
        node_drop(n, m, "dead node id out of range");
        return;
    }
    if (m->h.a == n->id) { /* this node went silent for too long (drop_from_dead) */
        node_fail(n, n->id,
                  "the scheduler declared this node dead and the job went on without it "
                  "(nothing heard from it for the heartbeat timeout: cut off, paused or too slow)");
        return;
    }
    node_describe(n, (uint32_t)m->h.a, who, sizeof who);
    /* b = 2: a server that left after handing its ranges over (req: the
     * handover), which the failover subscribers ask of node_peer_drained. */
    n->peers[m->h.a].drained = m->h.b == 2 ? m->h.req : 0;
    if (node_run_failover(n, (uint32_t)m->h.a)) {
        n->peers[m->h.a].failed = 1;
        if (m->h.b == 1) /* an elastic job's free server slot (docs/ELASTIC.md) */
            log_info("%s is a free slot: the others hold its ranges until a server joins", who);
        else if (m->h.b == 2)
            log_info("%s left the running job after handing its ranges over", who);
        else
            log_warn("%s died (reported by the scheduler); the job goes on without it", who);
        return;
    }
    node_fail(n, (uint32_t)m->h.a, "%s died (reported by the scheduler)", who);
}

/* A node the job went on without is back (the scheduler's rejoin): take its
 * new routing id and address, then let the layers react. */
static void on_node_rejoined(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    char addr[NODE_ADDR_MAX] = "";
    uint8_t rid[MSG_RID_SIZE];
    blob_reader r = {node_frame_data(m, 0), node_frame_size(m, 0), 0};
    blob_get_bytes(&r, rid, sizeof rid);
    blob_get_str(&r, addr, sizeof addr);
    if (m->h.a == 0 || m->h.a >= n->nnodes || r.bad || r.left || rid[0] != MSG_RID_TAG) {
        node_drop(n, m, "NODE_REJOINED naming no node, or a bad routing id or address");
        return;
    }
    uint32_t id = (uint32_t)m->h.a;
    char who[64];
    node_describe(n, id, who, sizeof who);
    if (id != n->id) { /* the newcomer got its own routing id with its roster */
        int rc = node_rebind(n, id, rid, addr);
        if (rc) {
            log_error("cannot reach %s, which rejoined from %s: %s", who, addr, loom_strerror(rc));
            return;
        }
        /* A worker's slot is taken only by a worker joining (docs/ELASTIC.md),
         * maybe a dead one's: a new worker, whose death would count again. */
        pthread_mutex_lock(&n->mu);
        n->peers[id].lost = 0;
        pthread_mutex_unlock(&n->mu);
        int rank;
        log_warn("%s %s from %s", who,
                 node_peer_role(n, id, &rank) == LOOM_WORKER ? "joined the running job"
                                                             : "rejoined",
                 addr);
    }
    node_run_rejoin(n, id);
    /* A server hears of a joining worker before the worker has its roster,
     * and says it knows it (docs/ELASTIC.md): the scheduler sends the roster
     * once every server did. */
    int rank;
    if (n->cfg.role == LOOM_SERVER && node_peer_role(n, id, &rank) == LOOM_WORKER)
        node_send_control(n, 0, MSG_ROSTER_ACK, 0, id);
}

void node_note_lost(loom_node *n, uint32_t id, double share)
{
    pthread_mutex_lock(&n->mu);
    if (!n->peers[id].lost) {
        n->peers[id].lost = 1;
        n->workers_lost++;
        n->lost_share += share;
    }
    pthread_mutex_unlock(&n->mu);
}

/* A worker: the job goes on without another one (the scheduler's lose_worker). */
static void on_worker_lost(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    int rank;
    if (m->h.a >= n->nnodes || node_peer_role(n, (uint32_t)m->h.a, &rank) != LOOM_WORKER ||
        m->h.a == n->id) {
        node_drop(n, m, "WORKER_LOST naming no other worker");
        return;
    }
    char who[64];
    log_warn("%s died; the job goes on without it: its share of the data is lost",
             node_describe(n, (uint32_t)m->h.a, who, sizeof who));
    node_note_lost(n, (uint32_t)m->h.a, (double)m->h.b);
}

int loom_workers_lost(loom_node *n, double *share)
{
    if (!n) return 0;
    pthread_mutex_lock(&n->mu);
    int lost = n->workers_lost;
    if (share) *share = n->lost_share;
    pthread_mutex_unlock(&n->mu);
    return lost;
}

/* Whether the node still runs. Under n->mu: an application thread changes the
 * state too (node_worker_done), while the I/O thread reads it here. */
int node_still_running(loom_node *n)
{
    pthread_mutex_lock(&n->mu);
    int running = n->state == NODE_RUNNING;
    pthread_mutex_unlock(&n->mu);
    return running;
}

void node_tick(loom_node *n, uint64_t now)
{
    for (int i = 0; i < n->nhooks; i++)
        if (n->hooks[i].h->tick) n->hooks[i].h->tick(n, n->hooks[i].ctx, now);
}

/* ---- a worker's metrics ---- */

int loom_report_metric(loom_node *n, const char *name, double value)
{
    if (!n || !name || !msg_metric_name_ok(name) || !isfinite(value)) return LOOM_EINVAL;
    if (n->cfg.role != LOOM_WORKER) return LOOM_EROLE;
    int rc = 0, fresh = 0;
    pthread_mutex_lock(&n->mu);
    msg_metrics *mm = &n->metrics;
    uint32_t k = 0;
    while (k < mm->count && strcmp(mm->name[k], name)) k++;
    if (k == MSG_METRICS_MAX) {
        rc = LOOM_ELIMIT;
    } else {
        fresh = k == mm->count;
        if (fresh) snprintf(mm->name[mm->count++], sizeof mm->name[0], "%s", name);
        mm->value[k] = value;
        n->metrics_dirty = 1;
    }
    pthread_mutex_unlock(&n->mu);
    /* A metric's first value goes at once, not with the next heartbeat: the
     * scheduler names a dead worker's share of the data from it (a "share"
     * reported at the start), however early the worker dies. */
    if (fresh) node_send_metrics(n);
    return rc;
}

void node_send_metrics(loom_node *n)
{
    msg_metrics mm;
    pthread_mutex_lock(&n->mu);
    int dirty = n->metrics_dirty;
    n->metrics_dirty = 0;
    mm = n->metrics;
    pthread_mutex_unlock(&n->mu);
    if (!dirty) return;
    blob_writer w = {0};
    msg_metrics_encode(&mm, &w);
    if (!w.bad) {
        msg_header h = {.type = MSG_METRICS};
        node_frame f = {w.buf, w.len, NULL, NULL, 1};
        node_send(n, 0, &h, &f, 1);
    }
    free(w.buf);
}

/* ---- a server's or worker's part ---- */

/* Its tick: the status heartbeat with this node's byte totals, which the
 * scheduler's status page shows, and a worker's new metrics (only a worker's
 * can be new: loom_report_metric), until a worker has sent its DONE; then the
 * scheduler's silence judged, until that DONE is acknowledged.
 *
 * Why nothing is sent after DONE: the scheduler may end the job as soon as it
 * has it, and when its process closes a connection while our data is still
 * arriving, its kernel resets that connection (Linux aborts an orphaned socket
 * on new data), discarding what it had not yet delivered: on a lossy link,
 * the DONE_ACK. The worker then waited for an acknowledgement that could not
 * come and, after the heartbeat timeout, ended with "lost the scheduler" a job
 * that had finished well. With the data path quiet, the scheduler's kernel
 * keeps retransmitting the DONE_ACK after its process has ended. */
static void member_tick(loom_node *n, void *ctx, uint64_t now)
{
    (void)ctx;
    if (!n->roster_installed || !node_still_running(n) || n->done_acked) return;
    if (n->cfg.role == LOOM_SERVER) server_leave(n);
    if (!atomic_load(&n->done_sent)) {
        msg_header h = {.type = MSG_HEARTBEAT,
                        .a = atomic_load(&n->bytes_sent),
                        .b = atomic_load(&n->bytes_received)};
        node_send_zmq(n, 0, &h, NULL, 0);
        node_send_metrics(n);
    }
    uint64_t silent = heartbeat_silence(n, 0, now, NULL);
    if (silent > heartbeat_limit(n, 0))
        node_fail(n, 0, "lost the scheduler: nothing heard from it for %" PRIu64 " ms", silent);
}

static const node_hooks member_hooks = {.tick = member_tick};

int node_member_attach(loom_node *n)
{
    node_set_handler(n, MSG_ROSTER, on_roster, NULL);
    node_set_handler(n, MSG_REJECT, on_reject, NULL);
    node_set_handler(n, MSG_NODE_FAILED, on_node_failed, NULL);
    node_set_handler(n, MSG_NODE_REJOINED, on_node_rejoined, NULL);
    if (n->cfg.role == LOOM_WORKER) {
        node_set_handler(n, MSG_BARRIER_RELEASE, on_barrier_release, NULL);
        node_set_handler(n, MSG_DONE_ACK, on_done_ack, NULL);
        node_set_handler(n, MSG_WORKER_LOST, on_worker_lost, NULL);
        node_set_handler(n, MSG_LEAVE, on_leave, NULL);
    } else {
        node_set_handler(n, MSG_SHUTDOWN, on_shutdown, NULL);
        node_set_handler(n, MSG_DONE_ACK, on_leave_refused, NULL);
    }
    return node_add_hooks(n, &member_hooks, NULL);
}
