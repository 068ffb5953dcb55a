/* node: one member of a Loom job, its sockets and its I/O thread.
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
 * Threads. Every socket is used under one mutex (sock_mu) by whichever thread
 * needs it: an application thread sends a request on the DEALER itself, with
 * no hand-over to another thread. Messages are read and their handlers run by
 * one thread at a time (recv_mu): the I/O thread, which polls the sockets'
 * file descriptors all the time, or an application thread blocked in
 * loom_wait(), which polls them too and so handles the reply it waits for
 * without being woken by the I/O thread (node_impl.h). ZeroMQ signals input
 * on a socket's descriptor edge-triggered and any use of the socket may take
 * the signal; so every thread that sent checks the socket for input
 * afterwards and, if some waits, wakes the I/O thread (wake_fd).
 *
 * Every received message is decoded and checked
 * (msg_decode_header, then the sender: a DEALER connection is trusted to be
 * its peer; on a ROUTER the routing id must be one the scheduler bound to a
 * node at registration, and that node must match the header's sender; then
 * the sender's role must be one that may send the type, so control messages
 * are obeyed only from the scheduler) before its handler runs. Anything else
 * is counted in `malformed` and dropped. With a job secret, every socket
 * uses CURVE (curve.c): a peer without the secret never gets that far.
 *
 * Identity: each process draws a random routing id at start and uses it on
 * every connection. The scheduler binds it to the node's id when the REGISTER
 * (with the right job token) arrives and lists it in the roster, so a second
 * process started as the same rank, or a stranger that connects with a
 * guessed node id, is not taken for the node (docs/SECURITY.md).
 *
 * Liveness: nodes send HEARTBEAT to the scheduler, the scheduler to every
 * node, every heartbeat_interval_ms; any message counts as a sign of life.
 * The scheduler declares a node dead after heartbeat_timeout_ms of silence and
 * broadcasts NODE_FAILED; a node that hears nothing from the scheduler for as
 * long declares the scheduler dead. Either way node_fail() prints which node
 * died and, by default, ends the process with LOOM_EXIT_PEER_FAILED. */
#include "core/node_priv.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "core/heartbeat.h"
#include "core/log.h"
#include "core/status.h"
#include "loom/error.h"

#define IO_BATCH 128 /* messages read from one socket before looking at the others */
/* the wake-up eventfd, the ROUTER, and a DEALER to the scheduler and to each server */
#define POLL_MAX (2 + 1 + LOOM_MAX_SERVERS)
/* The I/O thread's longest sleep while application threads read the
 * sockets: what arrives after the last of them stopped waits at most this
 * long for it (or until a send finds input and wakes it). */
#define READERS_POLL_MS 1

uint64_t node_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static const char *role_name(int role)
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
        snprintf(buf, len, "%s %d (node %" PRIu32 ")", role_name(role), rank, id);
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

int node_is_replacement(const loom_node *n)
{
    return n->replacement;
}

int node_assembled(const loom_node *n)
{
    return n->sched.roster_phase == 2;
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

/* ---- sockets ---- */

static void *make_socket(loom_node *n, int type)
{
    void *s = zmq_socket(n->zctx, type);
    if (!s) return NULL;
    int zero = 0, linger = NODE_LINGER_MS;
    uint64_t affinity = NODE_WORK_IO_THREAD;
    zmq_setsockopt(s, ZMQ_AFFINITY, &affinity, sizeof affinity);
    /* No high-water marks: the I/O thread must never block or drop on send,
     * and flow is bounded by the protocol (requests wait for answers). */
    zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVHWM, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    /* No frame larger than the job can legitimately send (msg.h): a peer
     * announcing one is disconnected before its frame is allocated. */
    int64_t max_frame = msg_max_frame(n->nnodes, node_max_payload(n));
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max_frame, sizeof max_frame);
    return s;
}

static int socket_fd(void *s)
{
    int fd = -1;
    size_t len = sizeof fd;
    zmq_getsockopt(s, ZMQ_FD, &fd, &len);
    return fd;
}

static void close_socket(void **s)
{
    if (*s) zmq_close(*s);
    *s = NULL;
}

/* Close every socket; later sends fail with `why`. */
static void close_all_sockets(loom_node *n, int why)
{
    pthread_mutex_lock(&n->sock_mu);
    if (!n->sock_closed) n->sock_closed = why;
    close_socket(&n->router);
    for (uint32_t i = 0; i < n->nnodes; i++) close_socket(&n->peers[i].dealer);
    pthread_mutex_unlock(&n->sock_mu);
}

static void wake_io_thread(loom_node *n)
{
    uint64_t one = 1;
    ssize_t w = write(n->wake_fd, &one, sizeof one); /* an eventfd: cannot fail short of EBADF */
    (void)w;
}

/* Connect a DEALER to peer_id's ROUTER (sock_mu held). */
static int connect_dealer_locked(loom_node *n, uint32_t peer_id)
{
    void *d = make_socket(n, ZMQ_DEALER);
    if (!d) return LOOM_ETRANSPORT;
    char ep[NODE_ADDR_MAX + 8];
    snprintf(ep, sizeof ep, "tcp://%s", n->peers[peer_id].addr);
    if (n->curve && curve_client(n->curve, d)) {
        zmq_close(d);
        return LOOM_ETRANSPORT;
    }
    if (zmq_setsockopt(d, ZMQ_ROUTING_ID, n->my_rid, n->my_rid_len) || zmq_connect(d, ep)) {
        log_error("cannot connect to %s: %s", ep, zmq_strerror(zmq_errno()));
        zmq_close(d);
        return LOOM_ETRANSPORT;
    }
    n->peers[peer_id].dealer = d;
    n->peers[peer_id].dealer_fd = socket_fd(d);
    atomic_store(&n->peers[peer_id].dealer_pending, 1);
    return 0;
}

static int connect_dealer(loom_node *n, uint32_t peer_id)
{
    if (n->seam) return 0; /* node_fuzz.c: every send goes to the seam */
    pthread_mutex_lock(&n->sock_mu);
    int rc = connect_dealer_locked(n, peer_id);
    pthread_mutex_unlock(&n->sock_mu);
    return rc;
}

/* Worker to worker, or server to server (replication): neither has the other
 * as a peer it sends requests to, so the sender connects a DEALER to the
 * receiver's ROUTER on its first message (after the roster, which gave it the
 * address and the receiver our routing id). Every such message travels sender
 * DEALER -> receiver ROUTER, where the routing id names the sender as for any
 * other node; such a DEALER is never read, as nobody answers on it (an answer
 * travels the other way on the answerer's own DEALER). */
static int peer_to_peer(const loom_node *n, uint32_t dest)
{
    int role = node_peer_role(n, dest, NULL);
    return (int)n->cfg.role == role && (role == LOOM_WORKER || role == LOOM_SERVER);
}

/* ---- sending ---- */

static void close_parts(zmq_msg_t *parts, size_t n)
{
    for (size_t i = 0; i < n; i++) zmq_msg_close(&parts[i]);
}

/* After a send on sock (sock_mu held): ZeroMQ may have taken the signal of
 * input waiting on it, which the I/O thread's poll would then never see. */
void node_wake_if_readable(loom_node *n, void *sock, atomic_int *pending)
{
    int events = 0;
    size_t len = sizeof events;
    if (zmq_getsockopt(sock, ZMQ_EVENTS, &events, &len) == 0 && (events & ZMQ_POLLIN)) {
        atomic_store(pending, 1);
        wake_io_thread(n);
    }
}

static int send_locked(loom_node *n, uint32_t dest, zmq_msg_t *hdr, zmq_msg_t *parts,
                       size_t nparts);

/* Send an encoded header and payload parts to dest, from any thread. */
static int send_parts(loom_node *n, uint32_t dest, zmq_msg_t *hdr, zmq_msg_t *parts, size_t nparts)
{
    if (dest >= n->nnodes) {
        zmq_msg_close(hdr);
        close_parts(parts, nparts);
        return LOOM_EINVAL;
    }
    if (n->seam) return n->seam->send(n->seam_ctx, n, dest, hdr, parts, nparts);
    pthread_mutex_lock(&n->sock_mu);
    int rc = n->sock_closed;
    if (rc) {
        zmq_msg_close(hdr);
        close_parts(parts, nparts);
    } else {
        rc = send_locked(n, dest, hdr, parts, nparts);
    }
    pthread_mutex_unlock(&n->sock_mu);
    return rc;
}

static int send_locked(loom_node *n, uint32_t dest, zmq_msg_t *hdr, zmq_msg_t *parts, size_t nparts)
{
    peer *p = &n->peers[dest];
    int rc = 0;
    if (!p->dealer && peer_to_peer(n, dest)) {
        if (dest == n->id) {
            rc = LOOM_EINVAL;
            goto fail;
        }
        if ((rc = connect_dealer_locked(n, dest))) goto fail;
    }
    void *sock = p->dealer ? p->dealer : n->router;
    size_t bytes = zmq_msg_size(hdr);
    for (size_t i = 0; i < nparts; i++) bytes += zmq_msg_size(&parts[i]);
    if (!p->dealer) {
        if (!p->rid_len || zmq_send(sock, p->rid, p->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
            rc = LOOM_ETRANSPORT;
            goto fail;
        }
    }
    if (zmq_msg_send(hdr, sock, (nparts ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0) {
        rc = LOOM_ETRANSPORT;
        goto fail;
    }
    for (size_t i = 0; i < nparts; i++) {
        if (zmq_msg_send(&parts[i], sock, (i + 1 < nparts ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0) {
            /* A multipart message is atomic in ZeroMQ: nothing was delivered. */
            close_parts(parts + i, nparts - i);
            rc = LOOM_ETRANSPORT;
            goto out;
        }
    }
    atomic_fetch_add(&n->bytes_sent, bytes);
    atomic_fetch_add(&n->messages_sent, 1);
    node_wake_if_readable(n, sock, p->dealer ? &p->dealer_pending : &n->router_pending);
    return 0;
fail:
    zmq_msg_close(hdr);
    close_parts(parts, nparts);
out:
    if (log_level() >= LOG_DEBUG) {
        char who[64];
        log_debug("send to %s failed: %s", node_describe(n, dest, who, sizeof who),
                  zmq_strerror(zmq_errno()));
    }
    return rc;
}

static int encode_header(loom_node *n, msg_header *h, size_t nframes, zmq_msg_t *out)
{
    h->sender = n->id;
    h->nframes = (uint16_t)nframes;
    if (zmq_msg_init_size(out, MSG_HEADER_SIZE)) return LOOM_ENOMEM;
    msg_encode_header(h, zmq_msg_data(out));
    return 0;
}

int node_send_zmq(loom_node *n, uint32_t dest, msg_header *h, zmq_msg_t *frames, size_t nframes)
{
    zmq_msg_t hdr;
    if (encode_header(n, h, nframes, &hdr)) {
        close_parts(frames, nframes);
        return LOOM_ENOMEM;
    }
    return send_parts(n, dest, &hdr, frames, nframes);
}

static int build_part(const node_frame *f, zmq_msg_t *out)
{
    if (f->free_fn) return zmq_msg_init_data(out, (void *)f->data, f->len, f->free_fn, f->hint);
    if (!f->copy) return zmq_msg_init_data(out, (void *)f->data, f->len, NULL, NULL);
    if (zmq_msg_init_size(out, f->len)) return -1;
    if (f->len) memcpy(zmq_msg_data(out), f->data, f->len);
    return 0;
}

int node_send(loom_node *n, uint32_t dest, msg_header *h, const node_frame *frames, size_t nframes)
{
    zmq_msg_t parts[MSG_MAX_FRAMES];
    size_t built = 0;
    int rc = 0;
    if (nframes > MSG_MAX_FRAMES) rc = LOOM_EINVAL;
    for (; !rc && built < nframes; built++)
        if (build_part(&frames[built], &parts[built])) rc = LOOM_ENOMEM;
    if (rc) {
        /* Ownership was promised: free what was not turned into a part. */
        close_parts(parts, built);
        for (size_t i = built; frames && i < nframes && i < MSG_MAX_FRAMES; i++)
            if (frames[i].free_fn) frames[i].free_fn((void *)frames[i].data, frames[i].hint);
        return rc;
    }
    return node_send_zmq(n, dest, h, parts, nframes);
}

/* Send a header-only control message. */
static void send_control(loom_node *n, uint32_t dest, uint8_t type, uint64_t req, uint64_t a)
{
    msg_header h = {.type = type, .req = req, .a = a};
    node_send_zmq(n, dest, &h, NULL, 0);
}

/* ---- receiving ---- */

void node_drop(loom_node *n, const node_msg *m, const char *why)
{
    uint64_t count = atomic_fetch_add(&n->malformed, 1) + 1;
    /* The first few are worth a line each; a flood must not flood the log. */
    if (count <= 5 || log_level() >= LOG_DEBUG) {
        char who[64];
        log_error("dropped a malformed %s message from %s: %s", msg_type_name(m->h.type),
                  node_describe(n, m->from, who, sizeof who), why);
    }
}

void node_drop_raw(loom_node *n, const char *why)
{
    uint64_t count = atomic_fetch_add(&n->malformed, 1) + 1;
    if (count <= 5 || log_level() >= LOG_DEBUG) log_error("dropped a malformed message: %s", why);
}

/* Read one whole multipart message. Keeps at most `max` parts; returns the
 * number of parts that arrived (which may exceed max), or -1 if none was ready. */
static int recv_message(loom_node *n, void *sock, zmq_msg_t *parts, int max)
{
    int count = 0, more = 1;
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, sock, count ? 0 : ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&part);
            if (count == 0) return -1;
            break; /* cannot happen for a message that began: parts arrive together */
        }
        atomic_fetch_add(&n->bytes_received, zmq_msg_size(&part));
        more = zmq_msg_more(&part);
        if (count < max)
            parts[count] = part;
        else
            zmq_msg_close(&part);
        count++;
    }
    atomic_fetch_add(&n->messages_received, 1);
    return count;
}

/* A node the job went on without (a server after a failover) may still be
 * alive: cut off by the network, paused, or slow to notice it lost the
 * scheduler, it comes back with stale rows and answers what the network held
 * for it. Nothing it sends may count (its REPL would overwrite the new
 * masters' rows), so all of it is dropped, said once; the scheduler answers
 * its heartbeats by telling it that it was declared dead, so it stops. */
static void drop_from_dead(loom_node *n, const node_msg *m)
{
    peer *p = &n->peers[m->from];
    if (p->failed == 1) {
        char who[64];
        log_warn("ignoring %s from %s and whatever it sends next: it was declared dead",
                 msg_type_name(m->h.type), node_describe(n, m->from, who, sizeof who));
        p->failed = 2;
    }
    if (n->cfg.role == LOOM_SCHEDULER && m->h.type == MSG_HEARTBEAT)
        send_control(n, m->from, MSG_NODE_FAILED, 0, m->from);
}

void node_dispatch(loom_node *n, node_msg *m)
{
    if (!msg_sender_allowed(m->h.type, node_peer_role(n, m->from, NULL))) {
        node_drop(n, m, "a node of its role never sends this type");
        return;
    }
    if (n->peers[m->from].failed) {
        drop_from_dead(n, m);
        return;
    }
    handler_entry *e = &n->handlers[m->h.type];
    if (!e->fn) {
        node_drop(n, m, "message type not accepted by this node");
        return;
    }
    e->fn(n, e->ctx, m);
}

static uint64_t rid_key(const uint8_t *rid)
{
    return msg_load_u64(rid + 1);
}

int node_bind_rid(loom_node *n, uint32_t id, const uint8_t *rid, size_t len)
{
    if (len != MSG_RID_SIZE || rid[0] != MSG_RID_TAG || id >= n->nnodes) return LOOM_EINVAL;
    int inserted;
    uint32_t slot = u64map_put(&n->rid_index, rid_key(rid), id, &inserted);
    if (slot == UINT32_MAX) return LOOM_ENOMEM;
    if (!inserted) return LOOM_EINVAL; /* two nodes drew the same 64 bits, or a replay */
    memcpy(n->peers[id].rid, rid, len);
    n->peers[id].rid_len = len;
    return 0;
}

/* The old routing id stays in rid_index, still naming id, but router_sender()
 * also compares it with the peer's current one, so the dead process's id
 * names nobody from now on. */
int node_rebind(loom_node *n, uint32_t id, const uint8_t *rid, const char *addr)
{
    if (id == 0 || id >= n->nnodes || id == n->id || strlen(addr) >= NODE_ADDR_MAX)
        return LOOM_EINVAL;
    peer *p = &n->peers[id];
    /* A replacement that joined after this one (its roster named it already). */
    if (p->rid_len == MSG_RID_SIZE && !memcmp(p->rid, rid, MSG_RID_SIZE) && !strcmp(p->addr, addr))
        return 0;
    int rc = node_bind_rid(n, id, rid, MSG_RID_SIZE);
    if (rc) return rc;
    p->failed = 0; /* a replacement: what it sends counts (drop_from_dead) */
    if (n->seam) { /* node_fuzz.c: no sockets */
        snprintf(p->addr, sizeof p->addr, "%s", addr);
        return 0;
    }
    pthread_mutex_lock(&n->sock_mu); /* a DEALER connects to addr under it */
    snprintf(p->addr, sizeof p->addr, "%s", addr);
    if (p->dealer && !n->sock_closed) {
        /* Ours, to the dead process's address: what it still queues is for
         * nobody. A worker reads its servers' DEALERs, so it connects at once;
         * a server's DEALER to another server is made on its next send. */
        close_socket(&p->dealer);
        if (!peer_to_peer(n, id)) rc = connect_dealer_locked(n, id);
    }
    pthread_mutex_unlock(&n->sock_mu);
    return rc;
}

/* Resolve the sender of a message that arrived on our ROUTER: only a routing
 * id bound to a node (node_bind_rid) names one. The scheduler never connects
 * to another node's ROUTER (it answers over their DEALERs), so on a server or
 * worker a routing id claiming to be the scheduler is a stranger's. */
static uint32_t router_sender(loom_node *n, const zmq_msg_t *rid)
{
    size_t len = zmq_msg_size(rid);
    const uint8_t *data = zmq_msg_data((zmq_msg_t *)rid);
    uint32_t id;
    if (len != MSG_RID_SIZE || !u64map_get(&n->rid_index, rid_key(data), &id)) return NODE_NO_ID;
    if (id == 0 || id == n->id || memcmp(n->peers[id].rid, data, len)) return NODE_NO_ID;
    return id;
}

static void take_frames(node_msg *m, zmq_msg_t *parts, int first, int count)
{
    m->nframes = 0;
    for (int i = first; i < count; i++) {
        zmq_msg_init(&m->frames[m->nframes]);
        zmq_msg_move(&m->frames[m->nframes++], &parts[i]);
    }
}

static void close_frames(node_msg *m)
{
    for (size_t i = 0; i < m->nframes; i++) zmq_msg_close(&m->frames[i]);
}

/* One message from a socket: the ROUTER if from_peer is NODE_NO_ID, else the
 * DEALER connected to from_peer. Returns 0 if no message was ready. The
 * caller holds recv_mu; the socket is locked only while reading, not while
 * the handler runs (it may send). */
static int receive_one(loom_node *n, uint32_t from_peer)
{
    enum { MAXP = 2 + MSG_MAX_FRAMES };
    zmq_msg_t parts[MAXP];
    pthread_mutex_lock(&n->sock_mu);
    void *sock = from_peer == NODE_NO_ID ? n->router : n->peers[from_peer].dealer;
    int count = sock && !n->sock_closed ? recv_message(n, sock, parts, MAXP) : -1;
    pthread_mutex_unlock(&n->sock_mu);
    if (count < 0) return 0;
    int kept = count < MAXP ? count : MAXP;
    int first = from_peer == NODE_NO_ID ? 1 : 0; /* skip the routing id */
    node_msg m = {0};
    int err = MSG_OK;
    if (count <= first) {
        err = MSG_ERR_SIZE;
    } else {
        zmq_msg_t *hdr = &parts[first];
        err = msg_decode_header(zmq_msg_data(hdr), zmq_msg_size(hdr), (size_t)(count - first - 1),
                                &m.h);
    }
    if (err == MSG_OK) {
        m.from = from_peer == NODE_NO_ID ? router_sender(n, &parts[0]) : from_peer;
        if (m.from == NODE_NO_ID && n->cfg.role == LOOM_SCHEDULER && m.h.type == MSG_REGISTER) {
            take_frames(&m, parts, first + 1, kept);
            sched_handle_unregistered(n, zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &m);
            close_frames(&m);
            close_parts(parts, (size_t)first + 1);
            return 1;
        }
        if (m.from == NODE_NO_ID || (m.h.sender != m.from && m.h.type != MSG_REGISTER))
            err = MSG_ERR_SENDER;
    }
    if (err == MSG_ERR_SENDER) {
        char why[128];
        snprintf(why, sizeof why, "%s from %s", msg_type_name(m.h.type),
                 m.from == NODE_NO_ID ? "a connection that is no node of this job"
                                      : "a node that signed it as another");
        node_drop_raw(n, why);
        close_parts(parts, (size_t)kept);
        return 1;
    }
    if (err != MSG_OK) {
        node_drop_raw(n, msg_error_name(err));
        close_parts(parts, (size_t)kept);
        return 1;
    }
    take_frames(&m, parts, first + 1, kept);
    close_parts(parts, (size_t)first + 1);
    node_dispatch(n, &m);
    close_frames(&m);
    return 1;
}

/* Read and handle what has arrived on every socket, at most IO_BATCH
 * messages from each (recv_mu held). Returns 1 if a socket may hold more.
 * Only the DEALERs to the scheduler and the servers are read: those to other
 * workers, or a server's to other servers, only send (peer_to_peer). */
static int drain_socket(loom_node *n, uint32_t from_peer, atomic_int *pending)
{
    if (!atomic_exchange(pending, 0)) return 0;
    int k = 0;
    while (k < IO_BATCH && receive_one(n, from_peer)) k++;
    if (k < IO_BATCH) return 0;
    atomic_store(pending, 1); /* not read to the end */
    return 1;
}

static int drain_sockets(loom_node *n)
{
    int more = drain_socket(n, NODE_NO_ID, &n->router_pending);
    for (uint32_t id = 0; id <= (uint32_t)n->cfg.num_servers && id < n->nnodes; id++)
        more |= drain_socket(n, id, &n->peers[id].dealer_pending);
    return more;
}

/* Fill fds with first_fd and the descriptors that signal input on each open
 * socket, and flags[i] with the pending flag of fds[i] (NULL for first_fd);
 * returns their number. */
static int poll_set(loom_node *n, int first_fd, struct pollfd fds[POLL_MAX],
                    atomic_int *flags[POLL_MAX])
{
    int k = 0;
    flags[k] = NULL;
    fds[k++] = (struct pollfd){first_fd, POLLIN, 0};
    pthread_mutex_lock(&n->sock_mu);
    if (n->router) {
        flags[k] = &n->router_pending;
        fds[k++] = (struct pollfd){n->router_fd, POLLIN, 0};
    }
    for (uint32_t id = 0; id <= (uint32_t)n->cfg.num_servers && id < n->nnodes; id++) {
        if (!n->peers[id].dealer) continue;
        flags[k] = &n->peers[id].dealer_pending;
        fds[k++] = (struct pollfd){n->peers[id].dealer_fd, POLLIN, 0};
    }
    pthread_mutex_unlock(&n->sock_mu);
    return k;
}

/* After poll(): mark the sockets whose descriptor signalled. */
static void mark_pending(const struct pollfd *fds, atomic_int *const *flags, int nfds)
{
    for (int i = 1; i < nfds; i++)
        if (fds[i].revents) atomic_store(flags[i], 1);
}

static void clear_eventfd(int fd)
{
    uint64_t count;
    ssize_t r = read(fd, &count, sizeof count); /* non-blocking: nothing to read is fine */
    (void)r;
}

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

    if (n->cfg.role == LOOM_SCHEDULER) {
        status_note_failure(n, dead, why);
        for (uint32_t i = 1; i < n->nnodes; i++)
            if (i != dead && n->peers[i].registered && !n->peers[i].done)
                send_control(n, i, MSG_NODE_FAILED, 0, dead);
    }
    if (n->cfg.on_failure == LOOM_ON_FAILURE_EXIT) {
        /* Closing with linger, then terminating the context, gives the
         * NODE_FAILED broadcast its chance to leave before the process ends. */
        close_all_sockets(n, LOOM_EPEERFAIL);
        zmq_ctx_term(n->zctx);
        fflush(stdout);
        _exit(LOOM_EXIT_PEER_FAILED);
    }
}

/* ---- control messages of servers and workers ---- */

/* Whether this process replaces a dead one (LOOM_REJOIN=1, set by loom run
 * --on-server-failure restart; docs/FAULTS.md). */
static int rejoining(void)
{
    const char *v = getenv("LOOM_REJOIN");
    return v && !strcmp(v, "1");
}

/* The scheduler: a node's status heartbeat, sent by its I/O thread with its
 * byte totals for the status page. Liveness travels apart (heartbeat.c). */
static void on_heartbeat(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    status_note_heartbeat(n, m->from, m->h.a, m->h.b, node_now_ms());
}

static int install_roster(loom_node *n, node_msg *m)
{
    if (m->from != 0 || m->nframes != 1 || m->h.a >= n->nnodes || m->h.b > 1 || m->h.req == 0 ||
        m->h.req > 65535)
        return LOOM_EPROTO;
    if (msg_roster_decode(zmq_msg_data(&m->frames[0]), zmq_msg_size(&m->frames[0]), n->nnodes,
                          (uint32_t)n->cfg.num_servers, n->peers[0].addr, n->peers[0].rid,
                          sizeof(peer)))
        return LOOM_EPROTO;
    if (n->id == NODE_NO_ID) {
        n->id = (uint32_t)m->h.a;
        node_peer_role(n, n->id, &n->cfg.rank);
    }
    if (n->id != m->h.a || memcmp(n->peers[n->id].rid, n->my_rid, MSG_RID_SIZE)) return LOOM_EPROTO;
    n->replacement = (int)m->h.b;
    for (uint32_t id = 0; id < n->nnodes; id++) {
        peer *p = &n->peers[id];
        p->role = node_peer_role(n, id, &p->rank);
        uint8_t rid[MSG_RID_SIZE];
        memcpy(rid, p->rid, sizeof rid);
        int rc = node_bind_rid(n, id, rid, sizeof rid);
        if (rc) return rc;
    }
    if (n->cfg.role == LOOM_WORKER) {
        for (int s = 0; s < n->cfg.num_servers; s++) {
            int rc = connect_dealer(n, node_server_id(n->cfg.num_servers, s));
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
    snprintf(n->tag, sizeof n->tag, "%s %d", role_name(n->cfg.role), n->cfg.rank);
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
    if (n->cfg.role == LOOM_SERVER) send_control(n, 0, MSG_ROSTER_ACK, 0, 0);
}

static void on_reject(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    char why[256] = "no reason given";
    blob_reader r = {zmq_msg_data(&m->frames[0]), zmq_msg_size(&m->frames[0]), 0};
    blob_get_str(&r, why, sizeof why);
    if (m->h.a == LOOM_ESTATE && rejoining()) /* asked again in node_start */
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
    (void)ctx, (void)m;
    send_control(n, 0, MSG_SHUTDOWN_ACK, 0, 0);
    node_finish(n, 0);
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
    if (n->failover && n->failover(n, n->failover_ctx, (uint32_t)m->h.a)) {
        n->peers[m->h.a].failed = 1;
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
    blob_reader r = {zmq_msg_data(&m->frames[0]), zmq_msg_size(&m->frames[0]), 0};
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
        log_warn("%s rejoined from %s", who, addr);
    }
    if (n->rejoin) n->rejoin(n, n->rejoin_ctx, id);
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
static int still_running(loom_node *n)
{
    pthread_mutex_lock(&n->mu);
    int running = n->state == NODE_RUNNING;
    pthread_mutex_unlock(&n->mu);
    return running;
}

static void tick(loom_node *n, uint64_t now)
{
    if (n->cfg.role == LOOM_SCHEDULER) {
        sched_tick(n, now);
        return;
    }
    if (!n->roster_installed || !still_running(n)) return;
    if (n->cfg.role == LOOM_WORKER && n->done_acked) return;
    /* With this node's byte totals, which the scheduler's status page shows. */
    msg_header h = {.type = MSG_HEARTBEAT,
                    .a = atomic_load(&n->bytes_sent),
                    .b = atomic_load(&n->bytes_received)};
    node_send_zmq(n, 0, &h, NULL, 0);
    if (n->cfg.role == LOOM_WORKER) node_send_metrics(n);
    uint64_t silent = heartbeat_silence(n, 0, now, NULL);
    if (silent > (uint64_t)n->cfg.heartbeat_timeout_ms)
        node_fail(n, 0, "lost the scheduler: nothing heard from it for %" PRIu64 " ms", silent);
}

/* ---- the I/O thread ---- */

/* The status page hands over zmq_pollitem_t items of plain descriptors;
 * translate their event bits to poll()'s and back, as zmq_poll() would. */
static short poll_events(short zmq_ev)
{
    return (short)((zmq_ev & ZMQ_POLLIN ? POLLIN : 0) | (zmq_ev & ZMQ_POLLOUT ? POLLOUT : 0));
}

static short zmq_events(short revents)
{
    return (short)((revents & POLLIN ? ZMQ_POLLIN : 0) | (revents & POLLOUT ? ZMQ_POLLOUT : 0) |
                   (revents & ~(POLLIN | POLLOUT) ? ZMQ_POLLERR : 0));
}

static void *io_main(void *arg)
{
    loom_node *n = arg;
    log_set_tag(n->tag);
    struct pollfd fds[POLL_MAX + STATUS_POLL_ITEMS];
    atomic_int *flags[POLL_MAX];
    zmq_pollitem_t page[STATUS_POLL_ITEMS];
    while (!atomic_load(&n->io_exit)) {
        pthread_mutex_lock(&n->recv_mu);
        int more = drain_sockets(n);
        atomic_fetch_add(&n->io_rounds, 1); /* progress, which the heartbeat thread vouches for */
        uint64_t now = node_now_ms();
        if (now >= n->next_heartbeat_ms) {
            n->next_heartbeat_ms = now + (uint64_t)n->cfg.heartbeat_interval_ms;
            tick(n, now);
        }
        uint64_t timer_due = still_running(n) ? node_run_timers(n, now) : UINT64_MAX;
        /* The set of DEALERs changes only when the roster arrives; building
         * it each round is a few stores and keeps the loop simple. Then the
         * scheduler's status page (status.c), whose items are plain fds.
         * While application threads wait reading the sockets (n->readers),
         * only the eventfd and the page. */
        int readers = atomic_load(&n->readers) > 0;
        int nfds = readers ? 1 : poll_set(n, n->wake_fd, fds, flags);
        if (readers) fds[0] = (struct pollfd){n->wake_fd, POLLIN, 0};
        int npage = status_poll_items(n, page);
        for (int i = 0; i < npage; i++)
            fds[nfds + i] = (struct pollfd){page[i].fd, poll_events(page[i].events), 0};
        pthread_mutex_unlock(&n->recv_mu);
        uint64_t wake = timer_due < n->next_heartbeat_ms ? timer_due : n->next_heartbeat_ms;
        int timeout = more || wake <= now ? 0 : (int)(wake - now);
        if (readers && timeout > READERS_POLL_MS) timeout = READERS_POLL_MS;
        atomic_store(&n->io_gated, readers);
        if (poll(fds, (nfds_t)(nfds + npage), timeout) < 0 && errno != EINTR) {
            log_error("poll failed: %s", strerror(errno));
            break;
        }
        atomic_store(&n->io_gated, 0);
        if (fds[0].revents & POLLIN) clear_eventfd(n->wake_fd);
        mark_pending(fds, flags, nfds);
        if (npage) {
            for (int i = 0; i < npage; i++) page[i].revents = zmq_events(fds[nfds + i].revents);
            pthread_mutex_lock(&n->recv_mu);
            status_serve(n, page, npage, node_now_ms());
            pthread_mutex_unlock(&n->recv_mu);
        }
    }
    pthread_mutex_lock(&n->recv_mu);
    close_all_sockets(n, LOOM_ESHUTDOWN);
    pthread_mutex_unlock(&n->recv_mu);
    return NULL;
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

static int bind_router(loom_node *n)
{
    n->router = make_socket(n, ZMQ_ROUTER);
    if (!n->router) return LOOM_ETRANSPORT;
    int one = 1;
    /* MANDATORY: sending to a vanished peer fails instead of vanishing.
     * HANDOVER: a DEALER that reconnects after its TCP connection broke
     * (a reset, a cut link) takes its routing id back even if this ROUTER
     * has not yet noticed the old connection is dead; without it the node
     * would be unreachable until then. It is safe because routing ids are
     * random per process and known only to the job's nodes (the roster):
     * another process, even one started as the same rank, draws its own and
     * cannot take over a live node's connection (docs/SECURITY.md). */
    zmq_setsockopt(n->router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(n->router, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
    if (n->curve && curve_server(n->curve, n->router)) return LOOM_ETRANSPORT;
    char ep[NODE_ADDR_MAX + 16];
    if (n->cfg.role == LOOM_SCHEDULER) {
        const char *colon = strrchr(n->cfg.scheduler, ':');
        const char *port = colon + 1;
        snprintf(ep, sizeof ep, "tcp://%.*s:%s", (int)(colon - n->cfg.scheduler), n->cfg.scheduler,
                 strcmp(port, "0") ? port : "*");
    } else {
        snprintf(ep, sizeof ep, "tcp://%s:*", n->cfg.bind_host[0] ? n->cfg.bind_host : "127.0.0.1");
    }
    n->router_fd = socket_fd(n->router);
    atomic_store(&n->router_pending, 1);
    if (zmq_bind(n->router, ep)) {
        log_error("cannot listen on %s: %s", ep, zmq_strerror(zmq_errno()));
        return LOOM_ETRANSPORT;
    }
    char last[NODE_ADDR_MAX + 16];
    size_t len = sizeof last;
    zmq_getsockopt(n->router, ZMQ_LAST_ENDPOINT, last, &len);
    const char *hostport = strncmp(last, "tcp://", 6) ? last : last + 6;
    if (strlen(hostport) >= sizeof n->address) return LOOM_ECONFIG;
    memcpy(n->address, hostport, strlen(hostport) + 1);
    return 0;
}

void node_set_core_handlers(loom_node *n)
{
    if (n->cfg.role == LOOM_SCHEDULER) { /* sched_init sets the rest of the scheduler's */
        node_set_handler(n, MSG_HEARTBEAT, on_heartbeat, NULL);
        return;
    }
    node_set_handler(n, MSG_ROSTER, on_roster, NULL);
    node_set_handler(n, MSG_REJECT, on_reject, NULL);
    node_set_handler(n, MSG_NODE_FAILED, on_node_failed, NULL);
    node_set_handler(n, MSG_NODE_REJOINED, on_node_rejoined, NULL);
    if (n->cfg.role == LOOM_WORKER) {
        node_set_handler(n, MSG_BARRIER_RELEASE, on_barrier_release, NULL);
        node_set_handler(n, MSG_DONE_ACK, on_done_ack, NULL);
        node_set_handler(n, MSG_WORKER_LOST, on_worker_lost, NULL);
    } else {
        node_set_handler(n, MSG_SHUTDOWN, on_shutdown, NULL);
    }
}

static int send_register(loom_node *n)
{
    msg_register reg = {.role = n->cfg.role,
                        .rank = n->cfg.rank,
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
        snprintf(n->tag, sizeof n->tag, "%s %d", role_name(cfg->role), cfg->rank);
    else
        snprintf(n->tag, sizeof n->tag, "%s ?", role_name(cfg->role));
    log_set_tag(n->tag);
    node_set_core_handlers(n);
    if (cfg->secret[0]) rc = curve_start(n->zctx, cfg->secret, n->tag, &n->refused, &n->curve);
    if (!rc) rc = bind_router(n);
    if (!rc && cfg->role == LOOM_SCHEDULER) rc = status_open(n);
    if (!rc && attach) rc = attach(n);
    if (!rc) {
        n->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (n->wake_fd < 0) rc = LOOM_ENOMEM;
    }
    if (!rc && cfg->role == LOOM_SCHEDULER) {
        rc = sched_init(n);
        if (!rc) rc = heartbeat_start(n, 0);
        n->roster_installed = 1;
        n->state = NODE_RUNNING;
    } else if (!rc) {
        snprintf(n->peers[0].addr, sizeof n->peers[0].addr, "%s", cfg->scheduler);
        rc = connect_dealer(n, 0);
    }
    if (!rc) {
        n->next_heartbeat_ms = node_now_ms() + (uint64_t)cfg->heartbeat_interval_ms;
        if (pthread_create(&n->io_thread, NULL, io_main, n))
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
        while (rc == LOOM_ESTATE && rejoining() && node_now_ms() < deadline) {
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
    if (type < MSG_TYPE_END_) n->handlers[type] = (handler_entry){fn, ctx};
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
    if (atomic_load(&n->io_gated)) wake_io_thread(n);
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

/* ---- timestamps ---- */

loom_ts node_ts_new(loom_node *n, uint32_t parts)
{
    return tracker_new(&n->ts, parts);
}

void node_ts_done(loom_node *n, loom_ts ts, int status)
{
    tracker_done(&n->ts, ts, status);
}

/* This thread's eventfd, made on first use and closed when the thread ends:
 * the completion of the timestamp it waits for writes to it. */
static pthread_key_t waiter_key;
static pthread_once_t waiter_once = PTHREAD_ONCE_INIT;

static void close_waiter_fd(void *v)
{
    close((int)(intptr_t)v - 1);
}

static void make_waiter_key(void)
{
    if (pthread_key_create(&waiter_key, close_waiter_fd)) waiter_key = 0;
}

static int waiter_fd(void)
{
    pthread_once(&waiter_once, make_waiter_key);
    intptr_t v = (intptr_t)pthread_getspecific(waiter_key);
    if (v) return (int)v - 1;
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd >= 0 && pthread_setspecific(waiter_key, (void *)(intptr_t)(fd + 1))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Wait for ts by reading the sockets on this thread: the answer that
 * completes ts is handled here, instead of on the I/O thread, which would
 * then have to wake this one (a context switch per round trip). The I/O
 * thread polls the same sockets; whichever takes recv_mu first reads what
 * arrived, and if the I/O thread completes ts, our eventfd wakes us. */
static void wait_reading(loom_node *n, loom_ts ts)
{
    int fd = waiter_fd();
    if (fd < 0) return; /* the caller waits on the condition variable */
    clear_eventfd(fd);
    if (tracker_set_waiter(&n->ts, ts, fd)) return;
    struct pollfd fds[POLL_MAX];
    atomic_int *flags[POLL_MAX];
    atomic_fetch_add(&n->readers, 1);
    for (;;) {
        pthread_mutex_lock(&n->recv_mu);
        int more = drain_sockets(n);
        int nfds = poll_set(n, fd, fds, flags);
        pthread_mutex_unlock(&n->recv_mu);
        if (tracker_test(&n->ts, ts)) break;
        if (poll(fds, (nfds_t)nfds, more ? 0 : -1) < 0 && errno != EINTR) break;
        if (fds[0].revents & POLLIN) clear_eventfd(fd);
        mark_pending(fds, flags, nfds);
    }
    atomic_fetch_sub(&n->readers, 1);
}

int loom_wait(loom_node *n, loom_ts ts)
{
    if (!n) return LOOM_EINVAL;
    if (n->seam) { /* as in node_wait() */
        while (!tracker_test(&n->ts, ts))
            if (!n->seam->pump(n->seam_ctx)) return LOOM_ETIMEDOUT;
    } else if (n->io_started && !tracker_test(&n->ts, ts)) {
        wait_reading(n, ts);
    }
    return tracker_wait(&n->ts, ts);
}

int loom_test(loom_node *n, loom_ts ts)
{
    return n ? tracker_test(&n->ts, ts) : 0;
}

int loom_on_complete(loom_node *n, loom_ts ts, loom_callback fn, void *arg)
{
    return n ? tracker_on_complete(&n->ts, ts, fn, arg) : LOOM_EINVAL;
}

/* ---- layers and counters ---- */

void node_set_layer(loom_node *n, int layer, void *state, void (*destroy)(void *state))
{
    n->layers[layer].state = state;
    n->layers[layer].destroy = destroy;
}

void *node_layer(const loom_node *n, int layer)
{
    return n->layers[layer].state;
}

void node_count(loom_node *n, enum node_counter c, uint64_t v)
{
    _Atomic uint64_t *counter[] = {&n->pulls_from_cache,     &n->pulls_from_server,
                                   &n->table_messages,       &n->table_bytes_raw,
                                   &n->table_bytes_wire,     &n->managed_rows_sent,
                                   &n->pushed_rows_received, &n->replicated_bytes};
    atomic_fetch_add(counter[c], v);
}

void node_set_failover(loom_node *n, node_failover_fn fn, void *ctx)
{
    n->failover = fn;
    n->failover_ctx = ctx;
}

void node_set_rejoin(loom_node *n, node_rejoin_fn fn, void *ctx)
{
    n->rejoin = fn;
    n->rejoin_ctx = ctx;
}

void node_set_timer(loom_node *n, int layer, node_timer_fn fn, void *ctx)
{
    n->layers[layer].timer = fn;
    n->layers[layer].timer_ctx = ctx;
    atomic_store(&n->layers[layer].timer_due, UINT64_MAX);
}

void node_timer_poke(loom_node *n, int layer)
{
    if (atomic_exchange(&n->layers[layer].timer_due, 0) != 0 && !n->seam) wake_io_thread(n);
}

/* Run the layers' timers that are due (I/O thread, receive lock held);
 * returns the earliest next due time. */
uint64_t node_run_timers(loom_node *n, uint64_t now)
{
    uint64_t next = UINT64_MAX;
    for (int i = 0; i < NODE_LAYER_COUNT; i++) {
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
        .pulls_from_cache = atomic_load(&n->pulls_from_cache),
        .pulls_from_server = atomic_load(&n->pulls_from_server),
        .table_messages = atomic_load(&n->table_messages),
        .table_bytes_raw = atomic_load(&n->table_bytes_raw),
        .table_bytes_wire = atomic_load(&n->table_bytes_wire),
        .managed_rows_sent = atomic_load(&n->managed_rows_sent),
        .pushed_rows_received = atomic_load(&n->pushed_rows_received),
        .replicated_bytes = atomic_load(&n->replicated_bytes),
    };
}

/* ---- the end ---- */

static int done_acked(const loom_node *n)
{
    return n->done_acked;
}

int node_worker_done(loom_node *n)
{
    node_send_metrics(n); /* the last ones reported, which no heartbeat will carry now */
    msg_header h = {.type = MSG_DONE};
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
        wake_io_thread(n);
        pthread_join(n->io_thread, NULL);
    } else if (!n->seam) {
        close_all_sockets(n, LOOM_ESHUTDOWN);
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
    for (int i = 0; i < NODE_LAYER_COUNT; i++)
        if (n->layers[i].destroy) n->layers[i].destroy(n->layers[i].state);
    uint64_t bad = atomic_load(&n->malformed);
    if (bad) log_error("dropped %" PRIu64 " malformed message(s) in all", bad);
    if (n->cfg.role == LOOM_SCHEDULER) sched_free(n);
    status_close(n);
    u64map_free(&n->rid_index);
    tracker_destroy(&n->ts);
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
