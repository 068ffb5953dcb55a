/* node: one member of a Loom job, from its start to its end.
 *
 * A node of any role is four files, one concept each (node_priv.h holds what
 * they share):
 *
 *   node.c          identity, start-up, waiting on the node's state, layers'
 *                   state, timers and counters, the end, public accessors
 *   node_send.c     the sockets, and sending on them from any thread
 *   node_recv.c     receiving: reading, checking and dispatching messages,
 *                   on the I/O thread or on a thread in loom_wait()
 *   node_control.c  control messages of servers and workers (roster,
 *                   barriers, failure and the end of the job), the status
 *                   heartbeat, a worker's metrics
 *
 * What only one role does attaches at start-up through the node's hooks
 * (node_hooks, node_priv.h): the scheduler's membership (scheduler.c) and
 * status page (status.c), a server's or worker's side of membership
 * (node_control.c). Outside start-up no file of the node asks its role.
 *
 * Start-up: the scheduler binds the well-known address; every other node
 * binds a ROUTER on an ephemeral port, connects a DEALER to the scheduler and
 * sends REGISTER with its role, rank and address. ZeroMQ queues that message
 * until the scheduler is reachable, so start order does not matter. Once all
 * nodes registered, the scheduler sends the ROSTER (every node's id, role and
 * address) first to the servers and, once they acknowledged it, to the
 * workers; a worker therefore never sends data to a server that does not yet
 * know it. Workers then connect a DEALER to every server.
 *
 * Identity: each process draws a random routing id at start and uses it on
 * every connection. The scheduler binds it to the node's id when the REGISTER
 * (with the right job token) arrives and lists it in the roster, so a second
 * process started as the same rank, or a stranger that connects with a
 * guessed node id, is not taken for the node (docs/SECURITY.md). */
#include "core/node_priv.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/heartbeat.h"
#include "core/log.h"
#include "core/malloc_policy.h"
#include "core/status.h"
#include "loom/error.h"

uint64_t node_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

const char *node_role_name(int role)
{
    switch (role) {
    case LOOM_SCHEDULER:
        return "scheduler";
    case LOOM_SERVER:
        return "server";
    case LOOM_WORKER:
        return "worker";
    default:
        return "unknown";
    }
}

const char *node_describe(const loom_node *n, uint32_t id, char *buf, size_t len)
{
    if (id >= n->nnodes) {
        snprintf(buf, len, "node %" PRIu32, id);
    } else if (id == 0) {
        snprintf(buf, len, "scheduler");
    } else {
        int rank;
        int role = node_peer_role(n, id, &rank);
        snprintf(buf, len, "%s %d (node %" PRIu32 ")", node_role_name(role), rank, id);
    }
    return buf;
}

/* ---- identity ---- */

uint64_t node_max_payload(const loom_node *n)
{
    return (uint64_t)n->cfg.max_frame_mib << 20;
}

int node_peer_role(const loom_node *n, uint32_t id, int *rank)
{
    return msg_node_role(id, n->nnodes, (uint32_t)n->cfg.num_servers, rank);
}

uint64_t node_seq_base(const loom_node *n)
{
    return n->seq_base;
}

int node_peer_leaving(const loom_node *n, uint32_t id)
{
    return id < n->nnodes && n->cfg.role == LOOM_SCHEDULER && n->peers[id].left &&
           !n->peers[id].vacant;
}

int node_is_replacement(const loom_node *n)
{
    return n->replacement;
}

uint64_t node_heartbeat_timeout_ms(const loom_node *n)
{
    return (uint64_t)n->cfg.heartbeat_timeout_ms;
}

static uint32_t id_for(const loom_config *c, loom_role role, int rank)
{
    if (rank < 0) return NODE_NO_ID;
    switch (role) {
    case LOOM_SCHEDULER:
        return 0;
    case LOOM_SERVER:
        return node_server_id(c->num_servers, rank);
    default:
        return node_worker_id(c->num_servers, rank);
    }
}

/* ---- start-up ---- */

static int validate_config(const loom_config *c)
{
    if (c->role != LOOM_SCHEDULER && c->role != LOOM_SERVER && c->role != LOOM_WORKER)
        return LOOM_ECONFIG;
    if (c->num_servers < 0 || c->num_workers < 1 || c->num_servers > LOOM_MAX_SERVERS ||
        c->num_workers > LOOM_MAX_WORKERS)
        return LOOM_ECONFIG;
    int max_rank = c->role == LOOM_SERVER   ? c->num_servers
                   : c->role == LOOM_WORKER ? c->num_workers
                                            : 1;
    if (c->rank < -1 || c->rank >= max_rank) return LOOM_ECONFIG;
    if (c->role == LOOM_SCHEDULER && c->rank == -1) return LOOM_ECONFIG;
    if (!strchr(c->scheduler, ':')) return LOOM_ECONFIG;
    if (c->status_port < -1 || c->status_port > 65535) return LOOM_ECONFIG;
    if (c->heartbeat_interval_ms < 1 || c->heartbeat_timeout_ms <= c->heartbeat_interval_ms ||
        c->connect_timeout_ms < 1 || c->max_frame_mib < 0 || c->max_frame_mib > 2047)
        return LOOM_ECONFIG;
    return 0;
}

static int send_register(loom_node *n)
{
    /* Rank -2: a worker or server joining the running job (LOOM_JOIN=1),
     * which must not take a starting node's rank while the job assembles. */
    msg_register reg = {.role = n->cfg.role,
                        .rank = n->cfg.role != LOOM_SCHEDULER && node_joining() ? -2 : n->cfg.rank,
                        .num_servers = (uint32_t)n->cfg.num_servers,
                        .num_workers = (uint32_t)n->cfg.num_workers,
                        .max_frame_mib = (uint32_t)n->cfg.max_frame_mib};
    snprintf(reg.address, sizeof reg.address, "%s", n->address);
    snprintf(reg.token, sizeof reg.token, "%s", n->cfg.job_token);
    blob_writer w = {0};
    msg_register_encode(&reg, &w);
    if (w.bad) {
        free(w.buf);
        return LOOM_ENOMEM;
    }
    msg_header h = {.type = MSG_REGISTER};
    node_frame f = {w.buf, w.len, NULL, NULL, 1};
    int rc = node_send(n, 0, &h, &f, 1);
    free(w.buf);
    return rc;
}

/* Wait (with n->mu held) until pred(n) or the job failed or the deadline. */
static int wait_until(loom_node *n, int (*pred)(const loom_node *), uint64_t deadline_ms)
{
    while (!pred(n)) {
        if (n->state == NODE_FAILED) return n->end_status ? n->end_status : LOOM_EPEERFAIL;
        int rc = node_wait(n, deadline_ms);
        if (rc == LOOM_ETIMEDOUT) return rc;
    }
    return 0;
}

static int roster_ready(const loom_node *n)
{
    return n->roster_installed;
}

/* File descriptors a node may need: ZeroMQ holds one per TCP connection and
 * one per socket (its mailbox), so up to three per other node of the job (a
 * worker of a p2p job: its DEALER to a peer, that DEALER's connection and
 * the peer's connection to its ROUTER; the scheduler two: each node's
 * connections to its ROUTER and its heartbeat socket), and a few of its own. */
static rlim_t fds_needed(uint32_t nnodes)
{
    return 3 * (rlim_t)nnodes + 64;
}

/* Many systems start processes with a soft limit of 1024 descriptors, which
 * a job of a few hundred nodes exceeds: ZeroMQ then cannot accept or open
 * connections (EMFILE), which shows only as nodes that fall silent. So a
 * node whose soft limit is short raises it to the hard limit, which any
 * process may, and says so, with how to raise it, when even that is short. */
static void raise_fd_limit(const loom_node *n)
{
    rlim_t need = fds_needed(n->nnodes);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= need) return;
    rlim_t soft = rl.rlim_max == RLIM_INFINITY ? need : rl.rlim_max;
    struct rlimit raised = {soft, rl.rlim_max};
    if (!setrlimit(RLIMIT_NOFILE, &raised)) rl.rlim_cur = soft;
    if (rl.rlim_cur >= need) return;
    log_warn("a job of %" PRIu32 " nodes may need up to %llu open files in this process, but "
             "its limit is %llu (ulimit -n; hard limit %llu): raise the hard limit (ulimit -Hn "
             "as root, LimitNOFILE= of a systemd unit, nofile in /etc/security/limits.conf) or "
             "connections will fail with \"Too many open files\"",
             n->nnodes, (unsigned long long)need, (unsigned long long)rl.rlim_cur,
             (unsigned long long)rl.rlim_max);
}

int (*node_start_seam)(const loom_config *cfg, int (*attach)(loom_node *n), loom_node **out);

int node_start(const loom_config *cfg, int (*attach)(loom_node *n), loom_node **out)
{
    *out = NULL;
    int rc = validate_config(cfg);
    if (rc) return rc;
    if (node_start_seam) return node_start_seam(cfg, attach, out);
    loom_node *n = calloc(1, sizeof *n);
    if (!n) return LOOM_ENOMEM;
    n->cfg = *cfg;
    if (!n->cfg.max_frame_mib) n->cfg.max_frame_mib = MSG_MAX_PAYLOAD_MIB;
    log_set_level(cfg->verbose);
    n->nnodes = 1u + (uint32_t)cfg->num_servers + (uint32_t)cfg->num_workers;
    n->id = id_for(cfg, cfg->role, cfg->rank);
    n->peers = calloc(n->nnodes, sizeof *n->peers);
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->cv, NULL);
    pthread_mutex_init(&n->sock_mu, NULL);
    pthread_mutex_init(&n->recv_mu, NULL);
    pthread_mutex_init(&n->hb_mu, NULL);
    n->wake_fd = -1;
    n->hb_wake_fd = -1;
    n->zctx = zmq_ctx_new();
    /* Two of ZeroMQ's I/O threads: one for every socket of the job's work,
     * one for the heartbeat socket alone (heartbeat.c), whose heartbeats
     * would otherwise wait behind a large message's encryption and copy. */
    if (n->zctx) zmq_ctx_set(n->zctx, ZMQ_IO_THREADS, 2);
    /* ZeroMQ's default of 1023 sockets per context is short of a DEALER to
     * every other node (a worker of a p2p job of 1,100 nodes), plus the
     * ROUTER, the heartbeat socket and CURVE's two. */
    if (n->zctx && n->nnodes + 16 > 1023)
        zmq_ctx_set(n->zctx, ZMQ_MAX_SOCKETS, (int)n->nnodes + 16);
    if (!n->peers || !n->zctx || tracker_init(&n->ts)) {
        free(n->peers);
        free(n);
        return LOOM_ENOMEM;
    }
    /* A routing id nobody can predict: the tag, then 8 bytes from the kernel's
     * random source (a failure here is reported like any start-up failure). */
    n->my_rid[0] = MSG_RID_TAG;
    n->my_rid_len = MSG_RID_SIZE;
    if (getrandom(n->my_rid + 1, MSG_RID_SIZE - 1, 0) != MSG_RID_SIZE - 1 ||
        u64map_init(&n->rid_index, n->nnodes)) {
        log_error("cannot draw a random routing id or allocate its index");
        zmq_ctx_term(n->zctx);
        tracker_destroy(&n->ts);
        free(n->peers);
        free(n);
        return LOOM_ENOMEM;
    }
    if (cfg->rank >= 0)
        snprintf(n->tag, sizeof n->tag, "%s %d", node_role_name(cfg->role), cfg->rank);
    else
        snprintf(n->tag, sizeof n->tag, "%s ?", node_role_name(cfg->role));
    log_set_tag(n->tag);
    raise_fd_limit(n);
    malloc_policy_apply(); /* freed messages stay mapped: core/malloc_policy.c */
    if (cfg->role != LOOM_SCHEDULER) rc = node_member_attach(n);
    if (!rc && cfg->secret[0])
        rc = curve_start(n->zctx, cfg->secret, n->tag, &n->refused, &n->curve);
    if (!rc) rc = node_bind_router(n);
    if (!rc && cfg->role == LOOM_SCHEDULER) rc = status_attach(n);
    if (!rc && attach) rc = attach(n);
    if (!rc) {
        n->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (n->wake_fd < 0) rc = LOOM_ENOMEM;
    }
    if (!rc && cfg->role == LOOM_SCHEDULER) {
        rc = membership_attach(n);
        if (!rc) rc = heartbeat_start(n, 0);
        n->roster_installed = 1;
        n->state = NODE_RUNNING;
    } else if (!rc) {
        snprintf(n->peers[0].addr, sizeof n->peers[0].addr, "%s", cfg->scheduler);
        rc = node_connect_dealer(n, 0);
    }
    if (!rc) {
        n->next_heartbeat_ms = node_now_ms() + (uint64_t)cfg->heartbeat_interval_ms;
        if (pthread_create(&n->io_thread, NULL, node_io_main, n))
            rc = LOOM_ENOMEM;
        else
            n->io_started = 1;
    }
    if (!rc && cfg->role != LOOM_SCHEDULER) {
        rc = send_register(n);
        /* The request waits in the DEALER's queue until the scheduler is up,
         * so nodes may start before it (tests/mp/test_start_order.sh waits
         * for this line). */
        if (!rc)
            log_info("asked the scheduler at %s to join; waiting up to %d ms for it",
                     cfg->scheduler, cfg->connect_timeout_ms);
        uint64_t deadline = node_now_ms() + (uint64_t)cfg->connect_timeout_ms;
        pthread_mutex_lock(&n->mu);
        if (!rc) rc = wait_until(n, roster_ready, deadline);
        /* A replacement for a dead node (LOOM_REJOIN=1, set by loom run
         * --on-server-failure restart) may come before the scheduler has
         * declared the dead one dead, and is refused as a second process of
         * a live rank: it asks again every heartbeat interval until then. */
        /* So may a worker joining a running job (LOOM_JOIN=1) while the job's
         * workers are in a barrier, which it must not hold up. */
        while (rc == LOOM_ESTATE && (node_rejoining() || node_joining()) &&
               node_now_ms() < deadline) {
            n->state = NODE_STARTING;
            n->end_status = 0;
            node_wait(n, node_now_ms() + (uint64_t)cfg->heartbeat_interval_ms);
            pthread_mutex_unlock(&n->mu);
            rc = send_register(n);
            pthread_mutex_lock(&n->mu);
            if (!rc) rc = wait_until(n, roster_ready, deadline);
        }
        /* A refusal (the job did not assemble in time, among others) also
         * ends in LOOM_ETIMEDOUT; the scheduler's reason is logged already. */
        int refused = n->state == NODE_FAILED;
        pthread_mutex_unlock(&n->mu);
        if (rc == LOOM_ETIMEDOUT && !refused)
            log_error("could not join the job: the scheduler at %s did not answer within %d ms "
                      "(is it running, and are LOOM_NUM_SERVERS/LOOM_NUM_WORKERS right?)",
                      cfg->scheduler, cfg->connect_timeout_ms);
    }
    if (rc) {
        node_destroy(n);
        return rc;
    }
    log_info("joined the job as node %" PRIu32 ", listening on %s", n->id, n->address);
    *out = n;
    return 0;
}

void node_set_handler(loom_node *n, unsigned type, node_handler fn, void *ctx)
{
    if (type < MSG_TYPE_LIMIT) n->handlers[type] = (handler_entry){fn, ctx};
}

/* ---- waiting ---- */

void node_lock(loom_node *n)
{
    pthread_mutex_lock(&n->mu);
}

void node_unlock(loom_node *n)
{
    pthread_mutex_unlock(&n->mu);
}

void node_broadcast(loom_node *n)
{
    pthread_cond_broadcast(&n->cv);
}

int node_wait(loom_node *n, uint64_t deadline_ms)
{
    if (n->state == NODE_FAILED) return LOOM_EPEERFAIL;
    if (n->seam) {
        /* A node_fuzz.c node's messages arrive on the thread that would wait:
         * deliver one (its handler may need the lock), then let the caller
         * check again. */
        pthread_mutex_unlock(&n->mu);
        int moved = n->seam->pump(n->seam_ctx);
        pthread_mutex_lock(&n->mu);
        if (n->state == NODE_FAILED) return LOOM_EPEERFAIL;
        return moved ? 0 : LOOM_ETIMEDOUT;
    }
    /* What this thread waits for arrives through the I/O thread: it must
     * not sleep away from the sockets, as it may while loom_wait() callers
     * read them. */
    if (atomic_load(&n->io_gated)) node_wake_io_thread(n);
    if (!deadline_ms) {
        pthread_cond_wait(&n->cv, &n->mu);
    } else {
        uint64_t now = node_now_ms();
        if (now >= deadline_ms) return LOOM_ETIMEDOUT;
        /* The condition variable uses CLOCK_REALTIME: convert the remaining time. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t wait_ms = deadline_ms - now;
        ts.tv_sec += (time_t)(wait_ms / 1000);
        ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&n->cv, &n->mu, &ts);
    }
    return n->state == NODE_FAILED ? LOOM_EPEERFAIL : 0;
}

/* ---- core's parts ---- */

int node_add_hooks(loom_node *n, const node_hooks *h, void *ctx)
{
    if (n->nhooks == NODE_MAX_HOOKS) return LOOM_EINVAL;
    n->hooks[n->nhooks].h = h;
    n->hooks[n->nhooks++].ctx = ctx;
    return 0;
}

void *node_hooks_ctx(const loom_node *n, const node_hooks *h)
{
    for (int i = 0; i < n->nhooks; i++)
        if (n->hooks[i].h == h) return n->hooks[i].ctx;
    return NULL;
}

/* ---- layers and counters ---- */

/* The layers registered in this process, by slot (node_layer_register). */
static pthread_mutex_t layers_mu = PTHREAD_MUTEX_INITIALIZER;
static int layers_registered;

/* Why msg_register_types refused l's type i: its number, and who has it
 * (docs/PROTOCOL.md lists every number). */
static void log_refused(const node_layer_def *l, size_t i)
{
    const msg_type_info *t = &l->types[i];
    const char *name = t->name ? t->name : "with no name";
    int twice = 0;
    for (size_t j = 0; j < i; j++) twice |= l->types[j].type == t->type;
    if (!t->name || t->type < MSG_LAYER_TYPE_MIN)
        log_error("layer %s: message type %u (%s) refused: a layer's type needs a name and a "
                  "number of at least %d",
                  l->name, t->type, name, MSG_LAYER_TYPE_MIN);
    else if (twice)
        log_error("layer %s: message type %u (%s) refused: the layer lists the number twice",
                  l->name, t->type, name);
    else
        log_error("layer %s: message type %u (%s) refused: the number is taken by %s "
                  "(docs/PROTOCOL.md lists every number)",
                  l->name, t->type, name, msg_type_name(t->type));
}

int node_layer_register(node_layer_def *l)
{
    int rc = 0, full = 0;
    size_t refused = 0;
    pthread_mutex_lock(&layers_mu);
    if (!atomic_load(&l->slot)) {
        if (layers_registered == NODE_MAX_LAYERS) {
            rc = LOOM_ELIMIT;
            full = 1;
        } else if (msg_register_types(l->types, l->ntypes, &refused)) {
            rc = LOOM_EINVAL;
        } else {
            atomic_store(&l->slot, ++layers_registered);
        }
    }
    pthread_mutex_unlock(&layers_mu);
    if (full)
        log_error("layer %s: no slot left (%d layers registered)", l->name, NODE_MAX_LAYERS);
    else if (rc)
        log_refused(l, refused);
    return rc;
}

/* The layer's slot, or -1 if it never registered. */
static int slot_of(node_layer_def *l)
{
    return atomic_load_explicit(&l->slot, memory_order_relaxed) - 1;
}

void node_set_layer(loom_node *n, node_layer_def *l, void *state, void (*destroy)(void *state))
{
    int i = slot_of(l);
    n->layers[i].state = state;
    n->layers[i].destroy = destroy;
}

void *node_layer(const loom_node *n, node_layer_def *l)
{
    int i = slot_of(l);
    return i < 0 ? NULL : n->layers[i].state;
}

void node_set_stats(loom_node *n, node_layer_def *l, node_stats_fn fn, void *ctx)
{
    int i = slot_of(l);
    n->layers[i].stats = fn;
    n->layers[i].stats_ctx = ctx;
}

void *node_stats_area(loom_node *n, node_layer_def *l, size_t size)
{
    int i = slot_of(l);
    if (!n->layers[i].stats_area) n->layers[i].stats_area = calloc(1, size);
    return n->layers[i].stats_area;
}

int node_add_failover(loom_node *n, node_failover_fn fn, void *ctx)
{
    if (n->nfailover == NODE_HOOKS_MAX) return LOOM_ELIMIT;
    n->failover[n->nfailover].fn = fn;
    n->failover[n->nfailover++].ctx = ctx;
    return 0;
}

int node_add_rejoin(loom_node *n, node_rejoin_fn fn, void *ctx)
{
    if (n->nrejoin == NODE_HOOKS_MAX) return LOOM_ELIMIT;
    n->rejoin[n->nrejoin].fn = fn;
    n->rejoin[n->nrejoin++].ctx = ctx;
    return 0;
}

int node_add_lost(loom_node *n, node_lost_fn fn, void *ctx)
{
    if (n->nlost == NODE_HOOKS_MAX) return LOOM_ELIMIT;
    n->lost[n->nlost].fn = fn;
    n->lost[n->nlost++].ctx = ctx;
    return 0;
}

int node_run_lost(loom_node *n, uint32_t worker)
{
    int taken_over = 0;
    for (int i = 0; i < n->nlost; i++) taken_over |= n->lost[i].fn(n, n->lost[i].ctx, worker);
    return taken_over;
}

int node_add_join_gate(loom_node *n, node_join_gate_fn fn, void *ctx)
{
    if (n->njoin_gate == NODE_HOOKS_MAX) return LOOM_ELIMIT;
    n->join_gate[n->njoin_gate].fn = fn;
    n->join_gate[n->njoin_gate++].ctx = ctx;
    return 0;
}

int node_set_drain(loom_node *n, node_drain_fn fn, void *ctx)
{
    if (n->drain) return LOOM_ESTATE;
    n->drain = fn;
    n->drain_ctx = ctx;
    return 0;
}

uint64_t node_peer_drained(const loom_node *n, uint32_t id)
{
    return id < n->nnodes ? n->peers[id].drained : 0;
}

const char *node_join_refused(loom_node *n)
{
    const char *why = NULL;
    for (int i = 0; i < n->njoin_gate && !why; i++)
        why = n->join_gate[i].fn(n, n->join_gate[i].ctx);
    return why;
}

int node_set_leave_gate(loom_node *n, node_leave_gate_fn fn, void *ctx)
{
    if (n->leave_gate) return LOOM_ESTATE;
    n->leave_gate = fn;
    n->leave_gate_ctx = ctx;
    return 0;
}

int node_leave_allowed(loom_node *n, uint32_t worker)
{
    return n->leave_gate && n->leave_gate(n, n->leave_gate_ctx, worker);
}

int node_run_failover(loom_node *n, uint32_t dead)
{
    for (int i = 0; i < n->nfailover; i++)
        if (!n->failover[i].fn(n, n->failover[i].ctx, dead)) return 0;
    return n->nfailover > 0;
}

void node_run_rejoin(loom_node *n, uint32_t id)
{
    for (int i = 0; i < n->nrejoin; i++) n->rejoin[i].fn(n, n->rejoin[i].ctx, id);
}

void node_set_timer(loom_node *n, node_layer_def *l, node_timer_fn fn, void *ctx)
{
    int i = slot_of(l);
    n->layers[i].timer = fn;
    n->layers[i].timer_ctx = ctx;
    atomic_store(&n->layers[i].timer_due, UINT64_MAX);
}

void node_timer_poke(loom_node *n, node_layer_def *l)
{
    int i = slot_of(l);
    if (atomic_exchange(&n->layers[i].timer_due, 0) != 0 && !n->seam) node_wake_io_thread(n);
}

/* Run the layers' timers that are due (I/O thread, receive lock held);
 * returns the earliest next due time. */
uint64_t node_run_timers(loom_node *n, uint64_t now)
{
    uint64_t next = UINT64_MAX;
    for (int i = 0; i < NODE_MAX_LAYERS; i++) {
        if (!n->layers[i].timer) continue;
        if (atomic_load(&n->layers[i].timer_due) <= now) {
            /* A poke while fn runs turns UINT64_MAX into 0, which stays. */
            atomic_store(&n->layers[i].timer_due, UINT64_MAX);
            uint64_t due = n->layers[i].timer(n, n->layers[i].timer_ctx, now);
            uint64_t idle = UINT64_MAX;
            atomic_compare_exchange_strong(&n->layers[i].timer_due, &idle, due);
        }
        uint64_t due = atomic_load(&n->layers[i].timer_due);
        if (due < next) next = due;
    }
    return next;
}

void loom_node_stats(loom_node *n, loom_stats *out)
{
    *out = (loom_stats){
        .bytes_sent = atomic_load(&n->bytes_sent),
        .bytes_received = atomic_load(&n->bytes_received),
        .messages_sent = atomic_load(&n->messages_sent),
        .messages_received = atomic_load(&n->messages_received),
        .malformed_dropped = atomic_load(&n->malformed),
        .connections_refused = atomic_load(&n->refused),
    };
    /* Under the node's mutex, as their areas are freed at the node's end: an
     * in-process job's threads read each other's nodes (tests do), and the
     * mutex is what makes a read before the end visibly so. */
    pthread_mutex_lock(&n->mu);
    for (int i = 0; i < NODE_MAX_LAYERS; i++)
        if (n->layers[i].stats) n->layers[i].stats(n->layers[i].stats_ctx, out);
    pthread_mutex_unlock(&n->mu);
}

/* ---- the end ---- */

static int done_acked(const loom_node *n)
{
    return n->done_acked;
}

int node_worker_done(loom_node *n)
{
    node_send_metrics(n); /* the last ones reported, which no heartbeat will carry now */
    atomic_store(&n->done_sent, 1);
    /* a = 1: it leaves a running job (loom_leave), which goes on. */
    msg_header h = {.type = MSG_DONE, .a = atomic_load(&n->leave_requested) ? 1 : 0};
    int rc = node_send(n, 0, &h, NULL, 0);
    pthread_mutex_lock(&n->mu);
    if (!rc) rc = wait_until(n, done_acked, node_now_ms() + (uint64_t)n->cfg.connect_timeout_ms);
    if (!rc) n->state = NODE_DONE;
    pthread_mutex_unlock(&n->mu);
    return rc;
}

static int barrier_released(const loom_node *n)
{
    return n->barrier_gen_released >= n->barrier_gen_entered;
}

int node_barrier(loom_node *n)
{
    pthread_mutex_lock(&n->mu);
    uint64_t gen = ++n->barrier_gen_entered;
    pthread_mutex_unlock(&n->mu);
    msg_header h = {.type = MSG_BARRIER, .req = gen};
    int rc = node_send(n, 0, &h, NULL, 0);
    pthread_mutex_lock(&n->mu);
    if (!rc) rc = wait_until(n, barrier_released, 0);
    pthread_mutex_unlock(&n->mu);
    return rc;
}

static int job_over(const loom_node *n)
{
    return n->state == NODE_DONE;
}

int node_serve(loom_node *n)
{
    pthread_mutex_lock(&n->mu);
    int rc = wait_until(n, job_over, 0);
    if (!rc) rc = n->end_status;
    pthread_mutex_unlock(&n->mu);
    return rc;
}

void node_destroy(loom_node *n)
{
    if (!n) return;
    if (n->seam) n->seam->gone(n->seam_ctx, n);
    heartbeat_stop(n);
    if (n->io_started) {
        atomic_store(&n->io_exit, 1);
        node_wake_io_thread(n);
        pthread_join(n->io_thread, NULL);
    } else if (!n->seam) {
        node_close_all_sockets(n, LOOM_ESHUTDOWN);
    }
    if (n->wake_fd >= 0) close(n->wake_fd);
    if (n->zctx) zmq_ctx_term(n->zctx);
    /* The totals below name this node also when another thread than its
     * starter releases it (loom_serve() in a thread of its own). */
    log_set_tag(n->tag);
    curve_stop(n->curve);
    uint64_t refused = atomic_load(&n->refused);
    if (refused)
        log_warn("refused %" PRIu64 " connection(s) from peers without the job's secret in all",
                 refused);
    /* Work that can no longer complete fails now, so that every completion
     * callback runs once and frees what it holds (found by fuzz_handlers). */
    tracker_fail_all(&n->ts, LOOM_ESHUTDOWN);
    for (int i = 0; i < NODE_MAX_LAYERS; i++)
        if (n->layers[i].destroy) n->layers[i].destroy(n->layers[i].state);
    uint64_t bad = atomic_load(&n->malformed);
    if (bad) log_error("dropped %" PRIu64 " malformed message(s) in all", bad);
    for (int i = 0; i < n->nhooks; i++)
        if (n->hooks[i].h->destroy) n->hooks[i].h->destroy(n->hooks[i].ctx);
    u64map_free(&n->rid_index);
    tracker_destroy(&n->ts);
    pthread_mutex_lock(&n->mu); /* see loom_node_stats */
    for (int i = 0; i < NODE_MAX_LAYERS; i++) free(n->layers[i].stats_area);
    pthread_mutex_unlock(&n->mu);
    pthread_mutex_destroy(&n->mu);
    pthread_cond_destroy(&n->cv);
    pthread_mutex_destroy(&n->sock_mu);
    pthread_mutex_destroy(&n->recv_mu);
    pthread_mutex_destroy(&n->hb_mu);
    free(n->peers);
    free(n);
}

/* ---- public accessors ---- */

loom_role loom_node_role(const loom_node *n)
{
    return n->cfg.role;
}

int loom_is_worker(const loom_node *n)
{
    return n && n->cfg.role == LOOM_WORKER;
}

int loom_rank(const loom_node *n)
{
    return n->cfg.rank;
}

int loom_num_workers(const loom_node *n)
{
    return n->cfg.num_workers;
}

int loom_num_servers(const loom_node *n)
{
    return n->cfg.num_servers;
}

const char *loom_node_address(const loom_node *n)
{
    return n->address;
}

int loom_joined(const loom_node *n)
{
    if (!n) return 0;
    if (n->cfg.role == LOOM_SERVER) return n->replacement == 1 && node_joining();
    return n->cfg.role == LOOM_WORKER && n->replacement == 2;
}

void loom_leave(loom_node *n)
{
    if (n && n->cfg.role != LOOM_SCHEDULER) atomic_store(&n->leave_requested, 1);
}

int loom_workers_started(const loom_node *n)
{
    if (!n || n->cfg.role != LOOM_WORKER) return 0;
    return n->workers_started > 0 ? n->workers_started : n->cfg.num_workers;
}

int loom_leaving(const loom_node *n)
{
    return n && n->cfg.role != LOOM_SCHEDULER && atomic_load(&n->leave_requested);
}
