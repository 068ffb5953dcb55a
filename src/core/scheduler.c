/* scheduler: membership, barriers, liveness and the end of the job.
 *
 * The scheduler is the one fixed address of a job. It collects a REGISTER
 * from every server and worker (checking that each carries this job's token,
 * was started with the same job size and claims no rank that is taken), binds
 * the routing id the REGISTER came from to the node, then hands out the roster
 * (with every node's routing id) in two phases: servers first, workers once
 * every server has installed it, so that a worker's first request never
 * reaches a server that cannot yet check who sent it.
 *
 * A refused node gets a REJECT naming the reason, sent to the routing id it
 * came from, so a refusal never touches the node that holds the rank.
 *
 * While the job runs it releases worker barriers and declares a node dead
 * once its heartbeat thread (heartbeat.c) has heard nothing from it for
 * heartbeat_timeout_ms.
 * When every worker has reported DONE it tells the servers to shut down and
 * ends once they all acknowledged.
 *
 * It attaches to the scheduler's node at start-up (membership_attach) like any
 * part of core, through the node's hooks (node_priv.h): its tick, the
 * REGISTERs of strangers, what a dead node still sends, a death that ends
 * the job; the status page (status.c) learns what it shows through the
 * node's hooks too (node_note_death). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/heartbeat.h"
#include "core/log.h"
#include "core/node_priv.h"
#include "core/zmq_retry.h"
#include "loom/error.h"

void sched_send_control_ab(loom_node *n, uint32_t dest, uint8_t type, uint64_t a, uint64_t b)
{
    msg_header h = {.type = type, .a = a, .b = b};
    node_send_zmq(n, dest, &h, NULL, 0);
}

void sched_send_rid(loom_node *n, const uint8_t *rid, size_t rid_len, uint8_t type, uint64_t a,
                    const char *text)
{
    blob_writer w = {0};
    blob_put_str(&w, text);
    msg_header h = {.type = type, .sender = 0, .nframes = 1, .a = a};
    uint8_t hdr[MSG_HEADER_SIZE];
    msg_encode_header(&h, hdr);
    pthread_mutex_lock(&n->sock_mu); /* every use of a socket (node_priv.h) */
    if (!w.bad && !n->sock_closed) {
        zmq_retry_send(n->router, rid, rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_retry_send(n->router, hdr, sizeof hdr, ZMQ_SNDMORE | ZMQ_DONTWAIT);
        zmq_retry_send(n->router, w.buf, w.len, ZMQ_DONTWAIT);
        node_wake_if_readable(n, n->router, &n->router_pending);
    }
    pthread_mutex_unlock(&n->sock_mu);
    free(w.buf);
}

/* Answer routing id `rid` with a REJECT naming the reason. */
void sched_send_reject(loom_node *n, const uint8_t *rid, size_t rid_len, int code, const char *why)
{
    sched_send_rid(n, rid, rid_len, MSG_REJECT, (uint64_t)code, why);
}

/* Refuse a node that is not (or not yet) in the roster: answer its routing id
 * directly. A flood of refused REGISTERs must not flood the log. */
void sched_reject(loom_node *n, const uint8_t *rid, size_t rid_len, int code, const char *why)
{
    if (++n->sched.refused <= 5 || log_level() >= LOG_DEBUG) log_error("refused a node: %s", why);
    sched_send_reject(n, rid, rid_len, code, why);
}

static uint32_t num_servers(const loom_node *n)
{
    return (uint32_t)n->cfg.num_servers;
}

/* The servers the job starts with (LOOM_START_SERVERS, or all). */
static uint32_t start_servers(const loom_node *n)
{
    return n->cfg.start_servers > 0 ? (uint32_t)n->cfg.start_servers : num_servers(n);
}

/* Tell node `dest`, right after its roster, which server slots are free
 * (docs/ELASTIC.md): the job went on without them from its start, as
 * without a dead server (NODE_FAILED, b = 1: a free slot, nobody died). */
static void tell_free_servers(loom_node *n, uint32_t dest)
{
    for (uint32_t i = 1; i <= num_servers(n); i++)
        if (n->peers[i].vacant && n->peers[i].failed)
            sched_send_control_ab(n, dest, MSG_NODE_FAILED, i, 1);
}

/* The roster's payload is the same for every node (only the header names
 * the node it is for): it is encoded once into a ZeroMQ message that every
 * send shares by reference (zmq_msg_copy). Encoding and copying it once per
 * node would be O(N^2) on the scheduler as the job assembles: 1,100 rosters
 * of 1,100 entries, about 50 MB. A replacement changes its entry, so
 * rejoin() drops the encoded one (forget_roster). */
void sched_forget_roster(sched_state *s)
{
    if (s->roster_cached) zmq_msg_close(&s->roster);
    s->roster_cached = 0;
}

/* The roster to node `dest`; `replaces`: dest is a replacement for a dead
 * node (b = 1) or a worker joining the running job (b = 2, with the barrier
 * generation it starts at, and in `table` the joins so far: its sequence
 * numbers start above those of the slot's earlier workers, node_seq_base), which its layers need to
 * know before anyone's traffic can reach it (the roster is what makes that traffic attributable).
 */
int sched_send_roster(loom_node *n, uint32_t dest, int replaces)
{
    sched_state *s = &n->sched;
    if (!s->roster_cached) {
        blob_writer w = {0};
        msg_roster_encode(n->nnodes, num_servers(n), n->peers[0].addr, n->peers[0].rid,
                          sizeof(peer), &w);
        if (w.bad || zmq_msg_init_size(&s->roster, w.len)) {
            free(w.buf);
            return LOOM_ENOMEM;
        }
        memcpy(zmq_msg_data(&s->roster), w.buf, w.len);
        free(w.buf);
        s->roster_cached = 1;
    }
    zmq_msg_t part;
    zmq_msg_init(&part);
    if (zmq_msg_copy(&part, &s->roster)) {
        zmq_msg_close(&part);
        return LOOM_ENOMEM;
    }
    msg_header h = {.type = MSG_ROSTER,
                    .req = (uint64_t)heartbeat_port(n),
                    .a = dest,
                    .b = (uint64_t)replaces,
                    .clock = replaces == 2 ? (int64_t)s->barrier_gen : 0,
                    .table = replaces == 2 ? s->joins : 0}; /* node_seq_base */
    return node_send_zmq(n, dest, &h, &part, 1);
}

/* Every server has the roster (or there is none): the workers may start. */
static void send_worker_rosters(loom_node *n)
{
    n->sched.roster_phase = 2;
    uint32_t vacant = 0;
    for (uint32_t i = 1 + num_servers(n); i < n->nnodes; i++) {
        if (n->peers[i].vacant) {
            vacant++;
            continue;
        }
        heartbeat_restart(n, i);
        sched_send_roster(n, i, 0);
        tell_free_servers(n, i);
    }
    uint32_t free_servers = num_servers(n) - n->sched.live_servers;
    if (!vacant && !free_servers) {
        log_info("job assembled: %d server(s), %d worker(s)", n->cfg.num_servers,
                 n->cfg.num_workers);
        return;
    }
    log_info("job assembled: %" PRIu32 " server(s), %d worker(s), %" PRIu32
             " free server slot(s) and %" PRIu32 " free worker slot(s) for nodes that join",
             n->sched.live_servers, n->cfg.num_workers - (int)vacant, free_servers, vacant);
    /* The layers go on without the free slots as without a worker that left
     * (their lost subscribers: the min clock stops waiting for them). */
    for (uint32_t i = 1 + num_servers(n); i < n->nnodes; i++)
        if (n->peers[i].vacant) node_run_lost(n, i);
}

/* An elastic job (start_workers < num_workers) assembled with the worker
 * ranks nobody registered for free: they count as finished workers, and the
 * roster lists them with a placeholder address and a routing id nobody has
 * (a joining worker's replaces them, as a replacement's does). */
static int vacate_free_slots(loom_node *n)
{
    for (uint32_t i = 1; i < n->nnodes; i++) {
        peer *p = &n->peers[i];
        if (p->registered) continue;
        int server = i <= num_servers(n);
        p->role = server ? LOOM_SERVER : LOOM_WORKER;
        p->rank = (int)(server ? i - 1 : i - 1 - num_servers(n));
        p->vacant = 1;
        p->done = !server; /* a server slot's end: free_server_slots */
        n->sched.workers_done += !server;
        snprintf(p->addr, sizeof p->addr, "-");
        p->rid[0] = MSG_RID_TAG;
        if (getrandom(p->rid + 1, MSG_RID_SIZE - 1, 0) != MSG_RID_SIZE - 1) return LOOM_ENOMEM;
        p->rid_len = MSG_RID_SIZE;
    }
    return 0;
}

/* The free server slots of an elastic job (start_servers < num_servers;
 * docs/ELASTIC.md): the layers go on without them from the start, as
 * without dead servers whose ranges the live ones hold (the ps registry
 * says whether the replicas allow it), and a server that joins takes one's
 * place as a replacement does a dead server's (rejoin). 0, or the job
 * fails saying why. */
static int free_server_slots(loom_node *n)
{
    n->sched.live_servers = 0;
    for (uint32_t i = 1; i <= num_servers(n); i++) {
        peer *p = &n->peers[i];
        if (!p->vacant) {
            n->sched.live_servers++;
            continue;
        }
        if (!node_run_failover(n, i)) {
            node_fail(
                n, 0,
                "the job cannot start with %" PRIu32 " of its %" PRIu32
                " server slots free: the live servers hold the free slots' ranges as "
                "replicas, so it needs LOOM_REPLICAS (loom train --replicas) of at least %" PRIu32,
                num_servers(n) - start_servers(n), num_servers(n),
                num_servers(n) - start_servers(n));
            return LOOM_ECONFIG;
        }
        p->done = p->failed = 1;
        n->sched.servers_acked_shutdown++; /* as survive() counts a dead one */
    }
    return 0;
}

/* Whether the job can start: the servers and the workers it starts with
 * (start_servers and start_workers, or all) registered. */
static int can_assemble(const loom_node *n)
{
    const sched_state *s = &n->sched;
    uint32_t start =
        n->cfg.start_workers > 0 ? (uint32_t)n->cfg.start_workers : (uint32_t)n->cfg.num_workers;
    return s->registered - s->workers_registered >= start_servers(n) &&
           s->workers_registered >= start;
}

/* Compare job tokens in time independent of where they differ. */
static int tokens_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned diff = (unsigned)(la ^ lb);
    for (size_t i = 0; i < la && i < lb; i++) diff |= (unsigned)(a[i] ^ b[i]);
    return diff == 0;
}

int sched_check_job(const loom_node *n, const msg_register *reg, int leave, char *why, size_t len)
{
    char who[32];
    snprintf(who, sizeof who, "%s",
             leave                      ? "a leave request"
             : reg->role == LOOM_SERVER ? "a server"
                                        : "a worker");
    uint32_t ns = reg->num_servers, nw = reg->num_workers;
    if (!tokens_equal(reg->token, n->cfg.job_token)) {
        snprintf(why, len,
                 "%s of another job: its job token does not match this job's (%s LOOM_JOB_TOKEN)",
                 who, reg->token[0] ? "a different" : "it has no");
        return LOOM_ECONFIG;
    }
    if (ns != num_servers(n) || nw != (uint32_t)n->cfg.num_workers) {
        snprintf(why, len,
                 "%s %s for %" PRIu32 " servers and %" PRIu32
                 " workers, but this job has %d and %d",
                 who, leave ? "names a job" : "was started", ns, nw, n->cfg.num_servers,
                 n->cfg.num_workers);
        return LOOM_ECONFIG;
    }
    return 0;
}

/* A REGISTER on the ROUTER from a routing id no node owns yet (the stranger hook). */
static void on_stranger(loom_node *n, void *ctx, const uint8_t *rid, size_t rid_len, node_msg *m)
{
    sched_state *s = ctx;
    if (rid_len != MSG_RID_SIZE || rid[0] != MSG_RID_TAG || m->nframes != 1) {
        node_drop_raw(n, "REGISTER with a foreign routing id or a bad frame count");
        return;
    }
    msg_register reg;
    if (msg_register_decode(node_frame_data(m, 0), node_frame_size(m, 0), &reg)) {
        node_drop_raw(n, "invalid REGISTER");
        return;
    }
    if (m->h.type == MSG_LEAVE) { /* `loom leave` (scheduler_leave.c) */
        sched_leave_request(n, rid, rid_len, &reg);
        return;
    }
    int role = reg.role, rank = reg.rank;
    const char *addr = reg.address;
    char why[MSG_ADDR_MAX + 128];
    if (sched_check_job(n, &reg, 0, why, sizeof why)) {
        sched_reject(n, rid, rid_len, LOOM_ECONFIG, why);
        return;
    }
    if (reg.max_frame_mib != (uint32_t)n->cfg.max_frame_mib) {
        snprintf(why, sizeof why,
                 "a %s was started with a frame limit of %" PRIu32
                 " MiB, but this job's is %d MiB (LOOM_MAX_FRAME_MIB)",
                 role == LOOM_SERVER ? "server" : "worker", reg.max_frame_mib,
                 n->cfg.max_frame_mib);
        sched_reject(n, rid, rid_len, LOOM_ECONFIG, why);
        return;
    }
    int count = role == LOOM_SERVER ? n->cfg.num_servers : n->cfg.num_workers;
    uint32_t base = role == LOOM_SERVER ? 1 : 1 + num_servers(n);
    if (rank >= 0 && rank < count && n->peers[base + (uint32_t)rank].failed) {
        sched_rejoin(n, base + (uint32_t)rank, rid, rid_len, addr, 0);
        return;
    }
    if (role == LOOM_SERVER && rank == -2) { /* a joining server (LOOM_JOIN=1) */
        if (s->roster_phase == 2)
            sched_join_server(n, rid, rid_len, addr);
        else
            sched_send_reject(n, rid, rid_len, LOOM_ESTATE,
                              "the job has not started yet: a server that joins it asks again");
        return;
    }
    if (role == LOOM_WORKER && s->roster_phase == 2 &&
        (rank < 0 || (rank < count && (n->peers[base + (uint32_t)rank].vacant ||
                                       n->peers[base + (uint32_t)rank].lost)))) {
        sched_join(n, rank < 0 ? -1 : rank, rid, rid_len, addr);
        return;
    }
    if (role == LOOM_WORKER && rank == -2) { /* a joining worker (LOOM_JOIN=1) */
        sched_send_reject(n, rid, rid_len, LOOM_ESTATE,
                          "the job has not started yet: a worker that joins it asks again");
        return;
    }
    if (rank >= 0 && rank < count && n->peers[base + (uint32_t)rank].registered) {
        /* A second process started as a rank that is live (the same
         * environment twice, a stale script): refuse it; the routing id it
         * came from is its own, so the live node is not touched. */
        snprintf(why, sizeof why, "%s %d is already running (registered from %s)",
                 role == LOOM_SERVER ? "server" : "worker", rank,
                 n->peers[base + (uint32_t)rank].addr);
        sched_reject(n, rid, rid_len, LOOM_ESTATE, why);
        return;
    }
    if (s->roster_phase != 0) {
        sched_reject(n, rid, rid_len, LOOM_ESTATE, "the job is already running");
        return;
    }
    if (rank == -1) { /* assign the lowest free rank of that role */
        for (int k = 0; k < count && rank == -1; k++)
            if (!n->peers[base + (uint32_t)k].registered) rank = k;
        if (rank == -1) {
            snprintf(why, sizeof why, "all %d %s ranks are already running", count,
                     role == LOOM_SERVER ? "server" : "worker");
            sched_reject(n, rid, rid_len, LOOM_ESTATE, why);
            return;
        }
    }
    if (rank < 0 || rank >= count) {
        snprintf(why, sizeof why, "%s rank %d is out of range",
                 role == LOOM_SERVER ? "server" : "worker", rank);
        sched_reject(n, rid, rid_len, LOOM_ECONFIG, why);
        return;
    }
    if (node_bind_rid(n, base + (uint32_t)rank, rid, rid_len)) {
        sched_reject(n, rid, rid_len, LOOM_ESTATE,
                     "its routing id is already in use by another node");
        return;
    }
    peer *p = &n->peers[base + (uint32_t)rank];
    p->role = role;
    p->rank = rank;
    p->registered = 1;
    heartbeat_watch(n, base + (uint32_t)rank);
    snprintf(p->addr, sizeof p->addr, "%s", addr);
    char who[64];
    log_info("%s registered from %s", node_describe(n, base + (uint32_t)rank, who, sizeof who),
             addr);
    s->registered++;
    s->workers_registered += role == LOOM_WORKER;
    if (can_assemble(n)) {
        if (vacate_free_slots(n)) {
            node_fail(n, 0, "cannot draw the free slots' routing ids");
            return;
        }
        if (free_server_slots(n)) return;
        s->roster_phase = 1;
        for (uint32_t i = 1; i <= num_servers(n); i++) {
            if (n->peers[i].vacant) continue;
            sched_send_roster(n, i, 0);
            tell_free_servers(n, i);
        }
        if (num_servers(n) == 0) send_worker_rosters(n); /* a serverless job (docs/P2P.md) */
    }
}

static void on_register_again(loom_node *n, void *ctx, node_msg *m)
{
    (void)n, (void)ctx, (void)m; /* a node that registered already: nothing new to learn */
}

static void on_roster_ack(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    sched_state *s = &n->sched;
    int rank;
    if (s->roster_phase == 2 && m->h.a && node_peer_role(n, m->from, &rank) == LOOM_SERVER) {
        sched_join_acked(n, m);
        return;
    }
    if (s->roster_phase == 2 && n->peers[m->from].rejoining) {
        sched_announce_rejoin(n, m->from); /* a replacement's, or a joining worker's */
        return;
    }
    if (s->roster_phase == 2 && node_peer_role(n, m->from, &rank) == LOOM_SERVER) return;
    if (s->roster_phase != 1 || node_peer_role(n, m->from, &rank) != LOOM_SERVER) {
        node_drop(n, m, "unexpected roster acknowledgement");
        return;
    }
    if (++s->roster_acks == s->live_servers) send_worker_rosters(n);
}

static void maybe_release_barrier(loom_node *n)
{
    sched_state *s = &n->sched;
    uint32_t w = (uint32_t)n->cfg.num_workers;
    if (s->barrier_arrived == 0 || s->barrier_arrived + s->workers_done < w) return;
    s->barrier_gen++;
    for (uint32_t i = 1 + num_servers(n); i < n->nnodes; i++) {
        if (s->barrier_seen[i]) node_send_control(n, i, MSG_BARRIER_RELEASE, s->barrier_gen, 0);
        s->barrier_seen[i] = 0;
    }
    s->barrier_arrived = 0;
}

static void on_barrier(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    sched_state *s = &n->sched;
    int rank;
    if (node_peer_role(n, m->from, &rank) != LOOM_WORKER || m->h.req != s->barrier_gen + 1 ||
        s->barrier_seen[m->from] || n->peers[m->from].done) {
        node_drop(n, m, "barrier out of order");
        return;
    }
    s->barrier_seen[m->from] = 1;
    s->barrier_arrived++;
    maybe_release_barrier(n);
}

static void end_if_workers_done(loom_node *n);
static int survive(loom_node *n, uint32_t dead, const char *why);

/* The job goes on without server `id`, which leaves, as without a dead
 * server whose ranges its replicas hold (survive: every node moves its
 * ranges to their next holders; unless `drained`, workers send again what
 * the replicas may lack), then it is told to end (SHUTDOWN a = 1), its slot
 * free for a server that joins. Refused (0; if it asked, DONE_ACK a =
 * LOOM_ESTATE: it goes on serving) when the replicas would not cover its
 * ranges without it. */
static int server_left(loom_node *n, uint32_t id, uint64_t drained, int asked)
{
    sched_state *s = &n->sched;
    if (s->shutting_down) return 0;
    peer *p = &n->peers[id];
    int rank = p->rank;
    char why[96];
    snprintf(why, sizeof why, "server %d left the running job", rank);
    p->left = 1; /* before survive(): a leave, not a death, on the status page */
    p->drained = drained;
    if (!survive(n, id, why)) {
        p->left = 0;
        p->drained = 0;
        log_error("server %d %s to leave the running job, but its ranges would have no live "
                  "holder without it (LOOM_REPLICAS, the servers already gone): it stays",
                  rank, asked ? "asked" : "was asked (loom leave)");
        if (asked) node_send_control(n, id, MSG_DONE_ACK, 0, LOOM_ESTATE);
        return 0;
    }
    p->vacant = 1;
    s->leaves++;
    sched_send_control_ab(n, id, MSG_SHUTDOWN, 1, 0);
    return 1;
}

/* Server node `id` asks to leave the running job (DONE a = 1: loom_leave, a
 * SIGTERM; asked: 1) or `loom leave` asks for it (scheduler_leave.c, asked: 0;
 * docs/ELASTIC.md). A layer that hands its ranges over first takes the leave
 * over (node_set_drain: src/ft's fenced handover) and calls
 * node_server_left() when done; without one, or if it declines, the server
 * leaves at once, by the failover path. Returns 1 when the leave goes on, 0
 * when it is refused. */
int sched_server_leaves(loom_node *n, uint32_t id, int asked)
{
    if (n->sched.shutting_down) return 0; /* the job ends anyway: its SHUTDOWN is on its way */
    if (n->drain && n->drain(n, n->drain_ctx, id)) return 1;
    return server_left(n, id, 0, asked);
}

void node_server_left(loom_node *n, uint32_t id, uint64_t drained)
{
    server_left(n, id, drained, 1);
}

static void on_done(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    sched_state *s = &n->sched;
    int rank;
    if (m->h.a == 1 && node_peer_role(n, m->from, &rank) == LOOM_SERVER &&
        !n->peers[m->from].done && !n->peers[m->from].rejoining) {
        sched_server_leaves(n, m->from, 1);
        return;
    }
    if (node_peer_role(n, m->from, &rank) != LOOM_WORKER || n->peers[m->from].done) {
        node_drop(n, m, "unexpected DONE");
        return;
    }
    peer *p = &n->peers[m->from];
    p->done = 1;
    s->workers_done++;
    node_send_control(n, m->from, MSG_DONE_ACK, 0, 0);
    if (m->h.a == 1 && s->workers_done < (uint32_t)n->cfg.num_workers) {
        /* It left the running job (loom_leave; docs/ELASTIC.md): its slot is
         * free for a worker that joins, and the layers go on without it. */
        p->vacant = p->left = 1;
        s->leaves++;
        log_warn("worker %d left the running job: %" PRIu32 " of %d worker slots taken", rank,
                 (uint32_t)n->cfg.num_workers - s->workers_done, n->cfg.num_workers);
        node_run_lost(n, m->from);
    }
    sched_leave_gone(n, m->from, p->left ? "left the running job" : "finished");
    maybe_release_barrier(n);
    end_if_workers_done(n);
}

/* Every worker finished (or was lost): shut the servers down. */
static void end_if_workers_done(loom_node *n)
{
    sched_state *s = &n->sched;
    if (s->workers_done < (uint32_t)n->cfg.num_workers) return;
    if (num_servers(n) == 0) {
        log_info("every worker finished");
        node_finish(n, 0);
        return;
    }
    log_info("every worker finished; shutting the servers down");
    s->shutting_down = 1;
    for (uint32_t i = 1; i <= num_servers(n); i++) /* a dead one must not end as if well */
        if (!n->peers[i].failed) node_send_control(n, i, MSG_SHUTDOWN, 0, 0);
}

static void on_shutdown_ack(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    sched_state *s = &n->sched;
    int rank;
    if (!s->shutting_down || node_peer_role(n, m->from, &rank) != LOOM_SERVER ||
        n->peers[m->from].done) {
        node_drop(n, m, "unexpected SHUTDOWN_ACK");
        return;
    }
    n->peers[m->from].done = 1;
    if (++s->servers_acked_shutdown == num_servers(n)) node_finish(n, 0);
}

int node_assembled(const loom_node *n)
{
    return n->sched.roster_phase == 2;
}

void sched_summary_of(const loom_node *n, sched_summary *out)
{
    const sched_state *s = &n->sched;
    *out = (sched_summary){.registered = s->registered,
                           .workers_done = s->workers_done,
                           .joins = s->joins,
                           .leaves = s->leaves,
                           .refused = s->refused,
                           .assembling = s->roster_phase < 2,
                           .shutting_down = s->shutting_down};
}

void sched_set_assembled(loom_node *n, uint32_t registered)
{
    n->sched.registered = registered;
    n->sched.roster_phase = 2;
}

/* The job did not assemble in time: say who is missing, release those who came. */
static void rendezvous_failed(loom_node *n)
{
    char missing[512] = "";
    size_t used = 0;
    for (uint32_t i = 1; i < n->nnodes && used < sizeof missing - 64; i++) {
        if (n->peers[i].registered) continue;
        char who[64];
        used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%s", used ? ", " : "",
                                 node_describe(n, i, who, sizeof who));
    }
    char why[768];
    snprintf(why, sizeof why,
             "only %" PRIu32 " of %" PRIu32 " nodes registered within %d ms; missing: %s",
             n->sched.registered, n->nnodes - 1, n->cfg.connect_timeout_ms, missing);
    /* Said once, and as the job's failure, naming the missing: the nodes that
     * came are not at fault, so their rejects are not logged as refusals
     * (`loom run` names the missing ones from this line). */
    log_error("the job did not assemble: %s", why);
    for (uint32_t i = 1; i < n->nnodes; i++)
        if (n->peers[i].registered)
            sched_send_reject(n, n->peers[i].rid, n->peers[i].rid_len, LOOM_ETIMEDOUT, why);
    pthread_mutex_lock(&n->mu);
    n->state = NODE_FAILED;
    n->end_status = LOOM_ETIMEDOUT;
    pthread_cond_broadcast(&n->cv);
    pthread_mutex_unlock(&n->mu);
}

/* The layers let the job go on without dead node `dead` (node_add_failover):
 * it counts as ended (a server as one that acknowledged the shutdown), and
 * every other node hears NODE_FAILED. 1 if so. */
static int survive(loom_node *n, uint32_t dead, const char *why)
{
    if (!node_run_failover(n, dead)) return 0;
    log_warn("%s; the job goes on without it", why);
    if (!n->peers[dead].left) node_note_death(n, dead, why, 0);
    heartbeat_forget(n, dead);
    n->peers[dead].done = n->peers[dead].failed = 1;
    /* b = 2: a server that left after handing its ranges over (req: the
     * handover; node_server_left), as every node's layers need to know. */
    msg_header h = {.type = MSG_NODE_FAILED,
                    .a = dead,
                    .b = n->peers[dead].drained ? 2 : 0,
                    .req = n->peers[dead].drained};
    for (uint32_t i = 1; i < n->nnodes; i++)
        if (i != dead && n->peers[i].registered && !n->peers[i].done)
            node_send_zmq(n, i, &h, NULL, 0);
    if (dead <= num_servers(n) && ++n->sched.servers_acked_shutdown == num_servers(n) &&
        n->sched.shutting_down)
        node_finish(n, 0);
    return 1;
}

/* --on-worker-failure continue: the job goes on without worker node `id`. It
 * counts as done for barriers and the end of the job; the servers and the
 * registry (through the scheduler's own WORKER_LOST handler) stop waiting for
 * its clock and drop what it pushed for a clock it did not finish; the other
 * workers learn of it (loom_workers_lost). A worker that was only cut off
 * hears no more heartbeats and stops when it notices. */
static void lose_worker(loom_node *n, uint32_t id, const char *who, uint64_t silent)
{
    sched_state *s = &n->sched;
    peer *p = &n->peers[id];
    p->done = p->lost = 1;
    heartbeat_forget(n, id);
    s->workers_lost++;
    s->workers_done++;
    if (s->barrier_seen[id]) { /* it died waiting in a barrier: count it once, as done */
        s->barrier_seen[id] = 0;
        s->barrier_arrived--;
    }
    uint64_t b = p->share > 0 ? (uint64_t)p->share : 0;
    node_note_lost(n, id, p->share);
    for (uint32_t i = 1; i < n->nnodes; i++)
        if (!n->peers[i].done) sched_send_control_ab(n, i, MSG_WORKER_LOST, id, b);
    handler_entry *h = &n->handlers[MSG_WORKER_LOST];
    if (h->fn) {
        node_msg m = {.from = 0, .h = {.type = MSG_WORKER_LOST, .a = id, .b = b}};
        h->fn(n, h->ctx, &m);
    }
    /* After the subscribers, which know whether the worker's data is handed
     * to the others (data parts) or went with it (a fixed share). */
    const char *data = "its data goes to the other workers";
    char share[80] = "";
    if (!node_run_lost(n, id)) {
        data = "its share of the data is lost";
        if (p->share > 0)
            snprintf(share, sizeof share, ", %.0f rows, ratings or documents", p->share);
        else
            snprintf(share, sizeof share, ", size unknown: the app reported no \"share\" metric");
    }
    log_warn(
        "%s died: no heartbeat for %" PRIu64 " ms; going on without it "
        "(--on-worker-failure continue): %s (worker %d of %d%s); %" PRIu32 " of %d workers lost",
        who, silent, data, p->rank, n->cfg.num_workers, share, s->workers_lost, n->cfg.num_workers);
    sched_leave_gone(n, id, "died before it left");
    maybe_release_barrier(n);
    end_if_workers_done(n);
}

/* The I/O thread's tick: a node silent for too long is declared dead. */
static void sched_tick(loom_node *n, void *ctx, uint64_t now)
{
    sched_state *s = ctx;
    if (n->state != NODE_RUNNING) return;
    if (s->roster_phase == 0) {
        if (now > s->rendezvous_deadline_ms) rendezvous_failed(n);
        return;
    }
    for (uint32_t i = 1; i < n->nnodes; i++) {
        peer *p = &n->peers[i];
        if (p->done || (s->roster_phase == 1 && i > num_servers(n))) continue;
        uint64_t silent = heartbeat_silence(n, i, now, NULL), limit = heartbeat_limit(n, i);
        if (silent > limit && s->shutting_down && i <= num_servers(n)) {
            /* A server acknowledges the shutdown and exits at once; on a lossy
             * link its closing socket can reset the connection before the
             * acknowledgement is through. Every worker is done by now, so
             * nothing is lost either way. */
            char who[64];
            log_warn("%s did not acknowledge the shutdown within %" PRIu64
                     " ms; counting it as ended",
                     node_describe(n, i, who, sizeof who), silent);
            p->done = 1;
            if (++s->servers_acked_shutdown == num_servers(n)) node_finish(n, 0);
            continue;
        }
        if (silent > limit && p->rejoining && p->joined && p->role == LOOM_WORKER) {
            /* A joining worker that died before it acknowledged its roster:
             * no worker heard of it, and its slot is free again. The servers
             * did (NODE_REJOINED, before its roster), and their layers may
             * hold its slot: the layers go on without it (the lost
             * subscribers), as without a free slot at the start. */
            log_warn("worker %d died before it joined: no heartbeat for %" PRIu64
                     " ms; its slot is free again",
                     p->rank, silent);
            p->rejoining = p->joined = 0;
            p->vacant = p->done = 1;
            s->workers_done++;
            heartbeat_forget(n, i);
            node_run_lost(n, i);
            end_if_workers_done(n);
            continue;
        }
        if (silent > limit && p->rejoining) {
            /* A replacement that died before it acknowledged its roster: nobody
             * else heard of it, and its rank stays dead. */
            char who[64];
            log_warn("%s died before it joined: no heartbeat for %" PRIu64 " ms",
                     node_describe(n, i, who, sizeof who), silent);
            p->rejoining = 0;
            p->done = p->failed = 1;
            p->vacant = p->joined; /* a joining server's slot is free again */
            p->joined = 0;
            heartbeat_forget(n, i);
            ++s->servers_acked_shutdown; /* as survive() counted it */
            continue;
        }
        if (silent > limit) {
            char who[64], why[160];
            node_describe(n, i, who, sizeof who);
            if (i > num_servers(n) && s->roster_phase == 2 &&
                n->cfg.on_worker_failure == LOOM_WORKER_FAILURE_CONTINUE &&
                s->workers_lost + 1 < (uint32_t)n->cfg.num_workers) {
                lose_worker(n, i, who, silent);
                continue;
            }
            snprintf(why, sizeof why, "%s died: no heartbeat for %" PRIu64 " ms", who, silent);
            if (survive(n, i, why)) continue;
            node_fail(n, i, "%s", why);
            return;
        }
    }
}

/* A node the job went on without still sends: its status heartbeat is
 * answered with NODE_FAILED naming it, so that it stops. */
static void answer_dead(loom_node *n, void *ctx, const node_msg *m)
{
    (void)ctx;
    if (m->h.type == MSG_HEARTBEAT) node_send_control(n, m->from, MSG_NODE_FAILED, 0, m->from);
}

/* The job fails (node_fail): every node still in it hears who died. */
static void on_death(loom_node *n, void *ctx, uint32_t dead, const char *why, int fatal)
{
    (void)ctx, (void)why;
    if (!fatal) return; /* survive() tells the others itself */
    for (uint32_t i = 1; i < n->nnodes; i++)
        if (i != dead && n->peers[i].registered && !n->peers[i].done)
            node_send_control(n, i, MSG_NODE_FAILED, 0, dead);
}

static void sched_destroy(void *ctx)
{
    sched_state *s = ctx;
    free(s->barrier_seen);
    sched_forget_roster(s);
}

static const node_hooks sched_hooks = {.tick = sched_tick,
                                       .stranger = on_stranger,
                                       .from_dead = answer_dead,
                                       .death = on_death,
                                       .destroy = sched_destroy};

int membership_attach(loom_node *n)
{
    sched_state *s = &n->sched;
    *s = (sched_state){0};
    s->barrier_seen = calloc(n->nnodes, 1);
    if (!s->barrier_seen) return LOOM_ENOMEM;
    int rc = node_add_hooks(n, &sched_hooks, s);
    if (rc) {
        free(s->barrier_seen);
        return rc;
    }
    s->rendezvous_deadline_ms = node_now_ms() + (uint64_t)n->cfg.connect_timeout_ms;
    memcpy(n->peers[0].addr, n->address, sizeof n->address); /* the roster lists us too */
    memcpy(n->peers[0].rid, n->my_rid, MSG_RID_SIZE);
    node_set_handler(n, MSG_REGISTER, on_register_again, NULL);
    node_set_handler(n, MSG_ROSTER_ACK, on_roster_ack, NULL);
    node_set_handler(n, MSG_BARRIER, on_barrier, NULL);
    node_set_handler(n, MSG_DONE, on_done, NULL);
    node_set_handler(n, MSG_SHUTDOWN_ACK, on_shutdown_ack, NULL);
    return 0;
}
