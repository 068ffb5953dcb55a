/* node_send: a node's sockets, and sending on them.
 *
 * Every socket is used under one mutex (sock_mu) by whichever thread needs
 * it: an application thread sends a request on the DEALER itself, with no
 * hand-over to another thread. ZeroMQ signals input on a socket's descriptor
 * edge-triggered and any use of the socket may take the signal; so every
 * thread that sent checks the socket for input afterwards and, if some
 * waits, wakes the I/O thread (wake_fd), which reads it (node_recv.c); all
 * but a thread that is reading that socket to its end (node_draining).
 *
 * The sockets: the ROUTER every node binds, a DEALER to each peer it sends
 * requests to (connected at start and when the roster comes), and a DEALER
 * made on the first message to a peer of its own role (peer_to_peer). With a
 * job secret, every socket uses CURVE (curve.c). */
#include "core/node_priv.h"
#include "core/zmq_retry.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "loom/error.h"

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

/* Messages still queued for `dead` are dropped when its socket closes
 * instead of lingering: a dead peer never takes them. When the dead one is
 * the scheduler, the job has ended for every node and nothing queued here
 * has anyone left to act on it, so every socket drops what it holds. */
void node_drop_unsent(loom_node *n, uint32_t dead)
{
    int zero = 0;
    pthread_mutex_lock(&n->sock_mu);
    for (uint32_t i = 0; i < n->nnodes; i++)
        if (n->peers[i].dealer && (i == dead || dead == 0))
            zmq_setsockopt(n->peers[i].dealer, ZMQ_LINGER, &zero, sizeof zero);
    if (dead == 0 && n->router) zmq_setsockopt(n->router, ZMQ_LINGER, &zero, sizeof zero);
    pthread_mutex_unlock(&n->sock_mu);
}

/* Close every socket; later sends fail with `why`. */
void node_close_all_sockets(loom_node *n, int why)
{
    pthread_mutex_lock(&n->sock_mu);
    if (!n->sock_closed) n->sock_closed = why;
    close_socket(&n->router);
    for (uint32_t i = 0; i < n->nnodes; i++) close_socket(&n->peers[i].dealer);
    pthread_mutex_unlock(&n->sock_mu);
}

void node_wake_io_thread(loom_node *n)
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
    /* A thread in loom_wait() polls the set of sockets it saw: the answer
     * it waits for may come on this one (a server joining a free slot). */
    uint64_t one = 1;
    for (node_reader *r = n->reader_list; r; r = r->next) {
        ssize_t w = write(r->fd, &one, sizeof one); /* an eventfd: cannot fail short of EBADF */
        (void)w;
    }
    return 0;
}

int node_connect_dealer(loom_node *n, uint32_t peer_id)
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

int node_bind_router(loom_node *n)
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
    int backlog = node_backlog(n->nnodes);
    zmq_setsockopt(n->router, ZMQ_BACKLOG, &backlog, sizeof backlog);
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
    if ((p->dealer || (n->cfg.role == LOOM_WORKER && !peer_to_peer(n, id))) && !n->sock_closed) {
        /* Ours, to the dead process's address: what it still queues is for
         * nobody. A worker reads its servers' DEALERs, so it connects at once
         * (also to a server joining a free slot, which it had none to);
         * a server's DEALER to another server is made on its next send. */
        close_socket(&p->dealer);
        if (!peer_to_peer(n, id)) rc = connect_dealer_locked(n, id);
    }
    pthread_mutex_unlock(&n->sock_mu);
    return rc;
}

/* ---- sending ---- */

/* After a send on sock (sock_mu held): ZeroMQ may have taken the signal of
 * input waiting on it, which the I/O thread's poll would then never see.
 * Asking for ZMQ_EVENTS processes the socket's commands, and a signal can
 * fail it with EINTR after it took that signal too: it is asked again, and
 * if it still cannot say, the socket is read anyway (a read that finds
 * nothing costs little; a message nobody reads stalls the job). */
void node_wake_if_readable(loom_node *n, void *sock, atomic_int *pending)
{
    if (node_draining(pending)) return; /* this thread reads it to its end */
    int events = 0;
    if (zmq_retry_events(sock, &events) < 0 || (events & ZMQ_POLLIN)) {
        atomic_store(pending, 1);
        node_wake_io_thread(n);
    }
}

static int send_locked(loom_node *n, uint32_t dest, zmq_msg_t *hdr, zmq_msg_t *parts,
                       size_t nparts);

/* Send an encoded header and payload parts to dest, from any thread. */
static int send_parts(loom_node *n, uint32_t dest, zmq_msg_t *hdr, zmq_msg_t *parts, size_t nparts)
{
    if (dest >= n->nnodes) {
        zmq_msg_close(hdr);
        node_close_parts(parts, nparts);
        return LOOM_EINVAL;
    }
    if (n->seam) return n->seam->send(n->seam_ctx, n, dest, hdr, parts, nparts);
    pthread_mutex_lock(&n->sock_mu);
    int rc = n->sock_closed;
    if (rc) {
        zmq_msg_close(hdr);
        node_close_parts(parts, nparts);
    } else {
        rc = send_locked(n, dest, hdr, parts, nparts);
    }
    pthread_mutex_unlock(&n->sock_mu);
    return rc;
}

/* One part of a message, without waiting (zmq_retry.h: a signal does not fail it). */
static int send_part(void *sock, zmq_msg_t *part, int more)
{
    return zmq_retry_msg_send(part, sock, (more ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT);
}

static int send_locked(loom_node *n, uint32_t dest, zmq_msg_t *hdr, zmq_msg_t *parts, size_t nparts)
{
    peer *p = &n->peers[dest];
    int rc, err = 0;
    if (!p->dealer && !strcmp(p->addr, "-")) {
        /* A free slot of an elastic job (docs/ELASTIC.md): nobody is there,
         * and what is sent is for nobody, as what a dead server's socket
         * still queues (a worker's CLOCKs: one that joins the slot gets the
         * current clock when it comes). */
        zmq_msg_close(hdr);
        node_close_parts(parts, nparts);
        return 0;
    }
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
        if (!p->rid_len ||
            zmq_retry_send(sock, p->rid, p->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
            rc = LOOM_ETRANSPORT;
            goto fail;
        }
    }
    if (send_part(sock, hdr, nparts > 0) < 0) {
        rc = LOOM_ETRANSPORT;
        goto fail;
    }
    for (size_t i = 0; i < nparts; i++) {
        if (send_part(sock, &parts[i], i + 1 < nparts) < 0) {
            /* A multipart message is atomic in ZeroMQ: nothing was delivered. */
            err = zmq_errno();
            node_close_parts(parts + i, nparts - i);
            rc = LOOM_ETRANSPORT;
            goto out;
        }
    }
    atomic_fetch_add(&n->bytes_sent, bytes);
    atomic_fetch_add(&n->messages_sent, 1);
    node_wake_if_readable(n, sock, p->dealer ? &p->dealer_pending : &n->router_pending);
    return 0;
fail:
    err = zmq_errno();
    zmq_msg_close(hdr);
    node_close_parts(parts, nparts);
out:
    /* The ROUTER refuses a routing id nobody is connected with (a node that
     * died or ended: expected). Any other failure is rare (no high-water
     * mark: a dead peer's messages queue) and fails the caller: the first
     * few say why. */
    if (log_level() >= LOG_DEBUG ||
        (err != EHOSTUNREACH && atomic_fetch_add(&n->send_failures, 1) < 5)) {
        char who[64];
        log_warn("send to %s failed: %s", node_describe(n, dest, who, sizeof who),
                 rc == LOOM_ETRANSPORT ? zmq_strerror(err) : loom_strerror(rc));
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
        node_close_parts(frames, nframes);
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
        node_close_parts(parts, built);
        for (size_t i = built; frames && i < nframes && i < MSG_MAX_FRAMES; i++)
            if (frames[i].free_fn) frames[i].free_fn((void *)frames[i].data, frames[i].hint);
        return rc;
    }
    return node_send_zmq(n, dest, h, parts, nframes);
}

/* Send a header-only control message. */
void node_send_control(loom_node *n, uint32_t dest, uint8_t type, uint64_t req, uint64_t a)
{
    msg_header h = {.type = type, .req = req, .a = a};
    node_send_zmq(n, dest, &h, NULL, 0);
}
