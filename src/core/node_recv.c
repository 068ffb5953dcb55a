/* node_recv: receiving. A node's messages are read, checked and handed to
 * their handlers here.
 *
 * Messages are read and their handlers run by one thread at a time
 * (recv_mu): the I/O thread, which polls the sockets' file descriptors all
 * the time, or an application thread blocked in loom_wait(), which polls them
 * too and so handles the reply it waits for without being woken by the I/O
 * thread (node_impl.h). The I/O thread also runs its tick (node_tick,
 * node_control.c: core's parts' tick hooks), the layers' timers and the
 * descriptors core's parts poll (the scheduler's status page).
 *
 * Every received message is decoded and checked
 * (msg_decode_header, then the sender: a DEALER connection is trusted to be
 * its peer; on a ROUTER the routing id must be one the scheduler bound to a
 * node at registration, and that node must match the header's sender; then
 * the sender's role must be one that may send the type, so control messages
 * are obeyed only from the scheduler) before its handler runs. Anything else
 * is counted in `malformed` and dropped. With a job secret, every socket
 * uses CURVE (curve.c): a peer without the secret never gets that far. */
#include "core/node_priv.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/log.h"
#include "core/zmq_retry.h"
#include "loom/error.h"

#define IO_BATCH 128 /* messages read from one socket before looking at the others */
/* the wake-up eventfd, the ROUTER, and a DEALER to the scheduler and to each server */
#define POLL_MAX (2 + 1 + LOOM_MAX_SERVERS)
/* The I/O thread's longest sleep while application threads read the
 * sockets: what arrives after the last of them stopped waits at most this
 * long for it (or until a send finds input and wakes it). */
#define READERS_POLL_MS 1

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
 * number of parts that arrived (which may exceed max), or -1 if none was ready.
 * A signal can fail a read with EINTR: it is read again, since the socket's
 * descriptor, edge-triggered, would not say again that the message is there. */
static int recv_message(loom_node *n, void *sock, zmq_msg_t *parts, int max)
{
    int count = 0, more = 1;
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_retry_msg_recv(&part, sock, count ? 0 : ZMQ_DONTWAIT) < 0) {
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
 * masters' rows), so all of it is dropped, said once; core's parts see it
 * first (the scheduler's membership answers its status heartbeats by telling
 * it that it was declared dead, so it stops). */
static void drop_from_dead(loom_node *n, const node_msg *m)
{
    peer *p = &n->peers[m->from];
    if (p->failed == 1) {
        char who[64];
        log_warn("ignoring %s from %s and whatever it sends next: it was declared dead",
                 msg_type_name(m->h.type), node_describe(n, m->from, who, sizeof who));
        p->failed = 2;
    }
    for (int i = 0; i < n->nhooks; i++)
        if (n->hooks[i].h->from_dead) n->hooks[i].h->from_dead(n, n->hooks[i].ctx, m);
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
        zmq_msg_init(node_msg_frame(m, m->nframes));
        zmq_msg_move(node_msg_frame(m, m->nframes++), &parts[i]);
    }
    node_msg_note_frames(m);
}

const node_hooks *node_stranger_hooks(const loom_node *n, void **ctx)
{
    for (int i = 0; i < n->nhooks; i++) {
        if (!n->hooks[i].h->stranger) continue;
        *ctx = n->hooks[i].ctx;
        return n->hooks[i].h;
    }
    return NULL;
}

void node_msg_keep(node_msg *to, node_msg *from)
{
    to->h = from->h;
    to->from = from->from;
    to->nframes = from->nframes;
    for (size_t i = 0; i < from->nframes; i++) {
        zmq_msg_init(node_msg_frame(to, i));
        zmq_msg_move(node_msg_frame(to, i), node_msg_frame(from, i));
    }
    node_msg_note_frames(to);
}

void node_msg_release(node_msg *m)
{
    for (size_t i = 0; i < m->nframes; i++) zmq_msg_close(node_msg_frame(m, i));
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
        void *ctx;
        const node_hooks *h = m.from == NODE_NO_ID && msg_stranger_type(m.h.type)
                                  ? node_stranger_hooks(n, &ctx)
                                  : NULL;
        if (h) {
            take_frames(&m, parts, first + 1, kept);
            h->stranger(n, ctx, zmq_msg_data(&parts[0]), zmq_msg_size(&parts[0]), &m);
            node_msg_release(&m);
            node_close_parts(parts, (size_t)first + 1);
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
        node_close_parts(parts, (size_t)kept);
        return 1;
    }
    if (err != MSG_OK) {
        node_drop_raw(n, msg_error_name(err));
        node_close_parts(parts, (size_t)kept);
        return 1;
    }
    take_frames(&m, parts, first + 1, kept);
    node_close_parts(parts, (size_t)first + 1);
    node_dispatch(n, &m);
    node_msg_release(&m);
    return 1;
}

/* Read and handle what has arrived on every socket, at most IO_BATCH
 * messages from each (recv_mu held). Returns 1 if a socket may hold more.
 * Only the DEALERs to the scheduler and the servers are read: those to other
 * workers, or a server's to other servers, only send (peer_to_peer). */
static _Thread_local const atomic_int *draining; /* see node_draining */

int node_draining(const atomic_int *pending)
{
    return pending == draining;
}

static int drain_socket(loom_node *n, uint32_t from_peer, atomic_int *pending)
{
    if (!atomic_exchange(pending, 0)) return 0;
    const atomic_int *outer = draining;
    draining = pending;
    int k = 0;
    while (k < IO_BATCH && receive_one(n, from_peer)) k++;
    draining = outer;
    if (k < IO_BATCH) return 0;
    atomic_store(pending, 1); /* not read to the end */
    return 1;
}

/* The ROUTER after the DEALERs, and only once the roster is in: it binds the
 * routing ids that name the job's nodes, and it comes on the DEALER to the
 * scheduler, which sends it to one node after another. A worker that got its
 * roster first may already be sending to one that has not (a ring's first
 * block); read before the roster, that message would name nobody and be
 * dropped, and its taker would wait for ever. Left in the socket, it is read
 * in the round that installs the roster. Until then the ROUTER is not polled
 * either (poll_set): its descriptor stays readable until the socket is read,
 * and polling it would spin the thread (256 waiting workers on 2 cores took
 * the CPU the rest of the job needed to start). */
static int drain_sockets(loom_node *n)
{
    int more = 0, had_roster = n->roster_installed;
    for (uint32_t id = 0; id <= (uint32_t)n->cfg.num_servers && id < n->nnodes; id++)
        more |= drain_socket(n, id, &n->peers[id].dealer_pending);
    if (!n->roster_installed) return more;
    if (!had_roster) atomic_store(&n->router_pending, 1); /* unread, unpolled until now */
    return more | drain_socket(n, NODE_NO_ID, &n->router_pending);
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
    if (n->router && n->roster_installed) { /* see drain_sockets */
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

/* ---- the I/O thread ---- */

/* The descriptors of core's parts (their poll hooks) into fds, after the
 * sockets'; parts[i] counts the i-th part's. Returns their total. */
static int poll_parts(loom_node *n, struct pollfd *fds, int parts[NODE_MAX_HOOKS])
{
    int k = 0;
    for (int i = 0; i < n->nhooks; i++) {
        parts[i] = n->hooks[i].h->poll ? n->hooks[i].h->poll(n, n->hooks[i].ctx, fds + k) : 0;
        k += parts[i];
    }
    return k;
}

/* What the poll found on the parts' descriptors, to their serve hooks. */
static void serve_parts(loom_node *n, const struct pollfd *fds, const int parts[NODE_MAX_HOOKS])
{
    uint64_t now = node_now_ms();
    for (int i = 0, k = 0; i < n->nhooks; k += parts[i++])
        if (parts[i]) n->hooks[i].h->serve(n, n->hooks[i].ctx, fds + k, parts[i], now);
}

void *node_io_main(void *arg)
{
    loom_node *n = arg;
    log_set_tag(n->tag);
    struct pollfd fds[POLL_MAX + NODE_MAX_HOOKS * NODE_HOOK_POLL_MAX];
    atomic_int *flags[POLL_MAX];
    int parts[NODE_MAX_HOOKS];
    while (!atomic_load(&n->io_exit)) {
        pthread_mutex_lock(&n->recv_mu);
        int more = drain_sockets(n);
        atomic_fetch_add(&n->io_rounds, 1); /* progress, which the heartbeat thread vouches for */
        uint64_t now = node_now_ms();
        if (now >= n->next_heartbeat_ms) {
            n->next_heartbeat_ms = now + (uint64_t)n->cfg.heartbeat_interval_ms;
            node_tick(n, now);
        }
        uint64_t timer_due = node_still_running(n) ? node_run_timers(n, now) : UINT64_MAX;
        /* The set of DEALERs changes only when the roster arrives; building
         * it each round is a few stores and keeps the loop simple. Then the
         * descriptors of core's parts (the scheduler's status page).
         * While application threads wait reading the sockets (n->readers),
         * only the eventfd and the parts'. */
        int readers = atomic_load(&n->readers) > 0;
        int nfds = readers ? 1 : poll_set(n, n->wake_fd, fds, flags);
        if (readers) fds[0] = (struct pollfd){n->wake_fd, POLLIN, 0};
        int nparts = poll_parts(n, fds + nfds, parts);
        pthread_mutex_unlock(&n->recv_mu);
        uint64_t wake = timer_due < n->next_heartbeat_ms ? timer_due : n->next_heartbeat_ms;
        int timeout = more || wake <= now ? 0 : (int)(wake - now);
        if (readers && timeout > READERS_POLL_MS) timeout = READERS_POLL_MS;
        atomic_store(&n->io_gated, readers);
        if (poll(fds, (nfds_t)(nfds + nparts), timeout) < 0 && errno != EINTR) {
            log_error("poll failed: %s", strerror(errno));
            break;
        }
        atomic_store(&n->io_gated, 0);
        if (fds[0].revents & POLLIN) clear_eventfd(n->wake_fd);
        mark_pending(fds, flags, nfds);
        if (nparts) {
            pthread_mutex_lock(&n->recv_mu);
            serve_parts(n, fds + nfds, parts);
            pthread_mutex_unlock(&n->recv_mu);
        }
    }
    pthread_mutex_lock(&n->recv_mu);
    node_close_all_sockets(n, LOOM_ESHUTDOWN);
    pthread_mutex_unlock(&n->recv_mu);
    return NULL;
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
 * arrived, and if the I/O thread completes ts, our eventfd wakes us. So
 * does a DEALER connected meanwhile (to a server joining a slot we had no
 * socket to: the node's reader_list), which our poll set lacks; a replaced
 * DEALER wakes us anyway, as closing the old one signals its descriptor. */
static void wait_reading(loom_node *n, loom_ts ts)
{
    int fd = waiter_fd();
    if (fd < 0) return; /* the caller waits on the condition variable */
    clear_eventfd(fd);
    if (tracker_set_waiter(&n->ts, ts, fd)) return;
    struct pollfd fds[POLL_MAX];
    atomic_int *flags[POLL_MAX];
    node_reader me = {fd, NULL};
    pthread_mutex_lock(&n->sock_mu);
    me.next = n->reader_list;
    /* On the list only while this frame lives: taken off below, before return. */
    // cppcheck-suppress autoVariables
    n->reader_list = &me;
    pthread_mutex_unlock(&n->sock_mu);
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
    pthread_mutex_lock(&n->sock_mu);
    node_reader **pp = &n->reader_list;
    while (*pp != &me) pp = &(*pp)->next;
    *pp = me.next;
    pthread_mutex_unlock(&n->sock_mu);
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
