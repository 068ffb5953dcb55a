/* heartbeat: liveness on a thread and sockets of its own, so that no work of
 * a node can hold it up.
 *
 * Why its own thread and sockets. A node's I/O thread runs every handler: a
 * server's push, pull, checkpoint cut; the scheduler's barriers, status page
 * and coordinator. When liveness rode on it, one large operation (a 1 GiB
 * pull: seconds of gathering rows on a loaded machine) kept its heartbeats
 * from leaving, and the scheduler declared a live server dead (issue 24). On a
 * worker, an application thread in loom_wait() that copies a large reply
 * holds the receive lock just as long. Splitting every large operation would
 * bound each one but not their sum, nor a slow handler of a layer above; a
 * heartbeat thread bounds them all. So each node has one more thread, which
 * only sends, reads and judges heartbeats:
 *
 * - the scheduler's binds a ROUTER of its own on the host of its address
 *   (any free port, which the ROSTER carries to every node) and answers each
 *   heartbeat it accepts at once: from the routing id the roster binds to the
 *   sender's node id, of a node it watches;
 * - every other node's connects a DEALER to it and sends a HEARTBEAT every
 *   heartbeat_interval_ms; the scheduler's answers are its sign of life;
 * - the socket is served by a ZeroMQ I/O thread of its own (the context has
 *   two, NODE_HEARTBEAT_IO_THREAD): with CURVE, ZeroMQ's I/O thread encrypts
 *   and decrypts each message whole, which for a 1 GiB message takes seconds
 *   in which a shared I/O thread would move no heartbeat.
 *
 * Both sockets use CURVE with the job's keys when the job has a secret, like
 * every other socket of the node. Each thread ticks every interval and counts
 * its own late ticks as deaf time (node_note_tick): a thread that the machine
 * starved does not blame its peers for heartbeats it could not read. What it
 * judges, the silence of each peer at its latest tick (node_silence), the I/O
 * thread reads (heartbeat_silence) and acts on as before: the scheduler
 * declares a node dead, a node says it lost the scheduler. Acting may wait
 * for the I/O thread's work; judging never does. The I/O path still carries
 * the status heartbeat (byte totals, a worker's metrics) to the scheduler,
 * which may wait.
 *
 * A paused process (SIGSTOP) pauses this thread too and is declared dead as
 * before. An I/O thread that is truly wedged (a handler that never returns)
 * would be vouched for forever, and the job would hang: so the heartbeat
 * thread also watches the I/O loop's rounds (io_rounds), and when they have
 * not moved for WEDGED_TIMEOUTS heartbeat timeouts (at least WEDGED_MIN_MS) of
 * its own on-schedule ticks, it says so and ends the process with status 3,
 * as a node declared dead does; its peers then find it silent
 * (docs/FAULTS.md, "Liveness and long operations").
 *
 * Locking: hb_mu guards what the thread shares with the I/O thread: every
 * peer's last_heard_ms, deaf_at_heard_ms, hb_watched, hb_first and hb_rid, and the
 * node's last_tick_ms and deaf_ms. It is a leaf lock. The socket belongs to
 * the thread alone; heartbeat_start creates it before the thread starts. */
#include "core/heartbeat.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/log.h"
#include "core/node_priv.h"
#include "core/zmq_retry.h"
#include "loom/error.h"

/* An I/O loop that has not moved for this many heartbeat timeouts, and at
 * least WEDGED_MIN_MS, is wedged: far beyond any single operation Loom
 * performs (a 1 GiB pull takes seconds), so only a handler that never
 * returns gets there. */
#define WEDGED_TIMEOUTS 10
#define WEDGED_MIN_MS   60000u
/* Heartbeats queued for a peer that does not read them (a paused scheduler):
 * beyond this they are dropped, as they are worthless once late. */
#define HB_SNDHWM 16
/* CURVE's handshake commands (INITIATE carries metadata) are a few hundred
 * bytes, and libzmq holds them to the frame limit too. */
#define HB_MAX_FRAME 4096

/* A socket of the heartbeat path: nothing larger than a handshake's
 * commands may arrive (a heartbeat is a header; a peer announcing a larger
 * frame is disconnected before it is allocated), and nothing lingers at the
 * end. */
static void *hb_socket(loom_node *n, int type)
{
    void *s = zmq_socket(n->zctx, type);
    if (!s) return NULL;
    int zero = 0, hwm = HB_SNDHWM;
    uint64_t affinity = NODE_HEARTBEAT_IO_THREAD;
    zmq_setsockopt(s, ZMQ_AFFINITY, &affinity, sizeof affinity);
    int64_t max_frame = HB_MAX_FRAME;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max_frame, sizeof max_frame);
    int backlog = node_backlog(n->nnodes); /* every node connects at once */
    if (type == ZMQ_ROUTER) zmq_setsockopt(s, ZMQ_BACKLOG, &backlog, sizeof backlog);
    if (n->curve && (type == ZMQ_ROUTER ? curve_listen(n->curve, s) : curve_client(n->curve, s))) {
        zmq_close(s);
        return NULL;
    }
    return s;
}

/* The scheduler's ROUTER, on the host of its address, any free port. */
static int bind_hb(loom_node *n)
{
    const char *colon = strrchr(n->cfg.scheduler, ':');
    char ep[NODE_ADDR_MAX + 16], last[NODE_ADDR_MAX + 16];
    snprintf(ep, sizeof ep, "tcp://%.*s:*", (int)(colon - n->cfg.scheduler), n->cfg.scheduler);
    size_t len = sizeof last;
    if (zmq_bind(n->hb_sock, ep) || zmq_getsockopt(n->hb_sock, ZMQ_LAST_ENDPOINT, last, &len)) {
        log_error("cannot listen for heartbeats on %s: %s", ep, zmq_strerror(zmq_errno()));
        return LOOM_ETRANSPORT;
    }
    const char *port = strrchr(last, ':');
    n->hb_port = port ? atoi(port + 1) : 0;
    return n->hb_port > 0 ? 0 : LOOM_ETRANSPORT;
}

/* A node's DEALER to the scheduler's ROUTER at `port`, under the node's
 * routing id, which the scheduler knows from its REGISTER. */
static int connect_hb(loom_node *n, int port)
{
    const char *colon = strrchr(n->cfg.scheduler, ':');
    char ep[NODE_ADDR_MAX + 16];
    snprintf(ep, sizeof ep, "tcp://%.*s:%d", (int)(colon - n->cfg.scheduler), n->cfg.scheduler,
             port);
    if (zmq_setsockopt(n->hb_sock, ZMQ_ROUTING_ID, n->my_rid, n->my_rid_len) ||
        zmq_connect(n->hb_sock, ep)) {
        log_error("cannot connect for heartbeats to %s: %s", ep, zmq_strerror(zmq_errno()));
        return LOOM_ETRANSPORT;
    }
    return 0;
}

static void send_hb(loom_node *n, const void *rid, size_t rid_len)
{
    msg_header h = {.type = MSG_HEARTBEAT, .sender = n->id};
    uint8_t hdr[MSG_HEADER_SIZE];
    msg_encode_header(&h, hdr);
    if (rid) zmq_retry_send(n->hb_sock, rid, rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT);
    zmq_retry_send(n->hb_sock, hdr, sizeof hdr, ZMQ_DONTWAIT);
}

/* Read one message of at most `max` frames into frames; returns how many
 * frames it had (more than max: too many), or 0 if none waited. */
static int recv_frames(void *sock, zmq_msg_t *frames, int max)
{
    int count = 0, more = 1;
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_retry_msg_recv(&part, sock, count ? 0 : ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&part);
            return count;
        }
        more = zmq_msg_more(&part);
        if (count < max)
            frames[count] = part;
        else
            zmq_msg_close(&part);
        count++;
    }
    return count;
}

/* One heartbeat: [routing id] header. The scheduler accepts it from a node it
 * watches, over the routing id bound to that node, and answers; a node accepts
 * the scheduler's. Anything else is counted as malformed and dropped. */
static int read_hb(loom_node *n)
{
    int router = n->cfg.role == LOOM_SCHEDULER;
    zmq_msg_t f[2];
    int count = recv_frames(n->hb_sock, f, 2);
    if (!count) return 0;
    int want = router ? 2 : 1;
    const char *bad = NULL;
    msg_header h = {0};
    if (count != want)
        bad = "a heartbeat of the wrong number of frames";
    else if (msg_decode_header(zmq_msg_data(&f[want - 1]), zmq_msg_size(&f[want - 1]), 0, &h) ||
             h.type != MSG_HEARTBEAT)
        bad = "not a heartbeat on the heartbeat socket";
    else if (router ? h.sender == 0 || h.sender >= n->nnodes : h.sender != 0)
        bad = "a heartbeat from no node it could come from";
    if (!bad) {
        pthread_mutex_lock(&n->hb_mu);
        peer *p = &n->peers[h.sender];
        int ok = !router || (p->hb_watched && zmq_msg_size(&f[0]) == p->hb_rid_len &&
                             !memcmp(zmq_msg_data(&f[0]), p->hb_rid, p->hb_rid_len));
        if (ok) node_heard(n, h.sender);
        pthread_mutex_unlock(&n->hb_mu);
        /* A node the job went on without, or a stranger's, goes unanswered
         * (not malformed: a cut-off node's heartbeats come late). */
        if (ok && router) send_hb(n, zmq_msg_data(&f[0]), zmq_msg_size(&f[0]));
    }
    if (bad) node_drop_raw(n, bad);
    for (int i = 0; i < count && i < 2; i++) zmq_msg_close(&f[i]);
    return 1;
}

/* Whether the I/O loop is wedged: its rounds have not moved over `stuck` ms of
 * this thread's on-schedule ticks (a stall of this thread counts one interval,
 * so that a paused process is not taken for a wedged one when it resumes). */
static int wedged(loom_node *n, uint64_t now, uint64_t *last_rounds, uint64_t *last_tick,
                  uint64_t *stuck)
{
    uint64_t rounds = atomic_load(&n->io_rounds), interval = (uint64_t)n->cfg.heartbeat_interval_ms;
    if (rounds != *last_rounds || !*last_tick) {
        *stuck = 0;
    } else {
        uint64_t since = now - *last_tick;
        *stuck += since < interval ? since : interval;
    }
    *last_rounds = rounds;
    *last_tick = now;
    uint64_t limit = (uint64_t)n->cfg.heartbeat_timeout_ms * WEDGED_TIMEOUTS;
    return *stuck > (limit > WEDGED_MIN_MS ? limit : WEDGED_MIN_MS);
}

void node_heard(loom_node *n, uint32_t id)
{
    n->peers[id].hb_first = 0;
    n->peers[id].last_heard_ms = node_now_ms();
    n->peers[id].deaf_at_heard_ms = n->deaf_ms;
}

void node_note_tick(loom_node *n, uint64_t now)
{
    /* A tick up to twice the interval after the previous is on schedule: on
     * a busy machine ticks come a little late all the time, and forgiving
     * that jitter would only slow down finding a real death. */
    uint64_t interval = (uint64_t)n->cfg.heartbeat_interval_ms;
    if (n->last_tick_ms && now > n->last_tick_ms + 2 * interval)
        n->deaf_ms += now - n->last_tick_ms - interval;
    n->last_tick_ms = now;
}

uint64_t node_silence(const loom_node *n, uint32_t id, uint64_t now)
{
    const peer *p = &n->peers[id];
    uint64_t silent = now > p->last_heard_ms ? now - p->last_heard_ms : 0;
    uint64_t deaf = n->deaf_ms - p->deaf_at_heard_ms;
    return silent > deaf ? silent - deaf : 0;
}

static void *hb_main(void *arg)
{
    loom_node *n = arg;
    log_set_tag(n->tag);
    uint64_t interval = (uint64_t)n->cfg.heartbeat_interval_ms, next = 0;
    uint64_t last_rounds = 0, last_tick = 0, stuck = 0;
    zmq_pollitem_t items[2] = {{n->hb_sock, 0, ZMQ_POLLIN, 0},
                               {NULL, n->hb_wake_fd, ZMQ_POLLIN, 0}};
    while (!atomic_load(&n->hb_exit)) {
        uint64_t now = node_now_ms();
        if (now >= next) {
            pthread_mutex_lock(&n->hb_mu);
            node_note_tick(n, now);
            pthread_mutex_unlock(&n->hb_mu);
            if (wedged(n, now, &last_rounds, &last_tick, &stuck)) {
                log_error("the I/O thread has made no progress for %" PRIu64
                          " ms: it is wedged, and this node can no longer do its part; stopping",
                          stuck);
                fflush(stdout);
                _exit(LOOM_EXIT_PEER_FAILED);
            }
            if (n->cfg.role != LOOM_SCHEDULER) send_hb(n, NULL, 0);
            next = now + interval;
        }
        /* Ends with ETERM when a failing node terminates its context. */
        if (zmq_poll(items, 2, (long)(next - now)) < 0) {
            if (zmq_errno() == EINTR) continue;
            break;
        }
        if (items[0].revents & ZMQ_POLLIN)
            while (read_hb(n)) {
            }
    }
    zmq_close(n->hb_sock);
    return NULL;
}

int heartbeat_start(loom_node *n, int port)
{
    n->hb_wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    n->hb_sock = hb_socket(n, port ? ZMQ_DEALER : ZMQ_ROUTER);
    int rc = n->hb_wake_fd < 0 || !n->hb_sock ? LOOM_ETRANSPORT
             : port                           ? connect_hb(n, port)
                                              : bind_hb(n);
    if (!rc && port) {
        pthread_mutex_lock(&n->hb_mu);
        node_heard(n, 0);
        n->peers[0].hb_first = 1;
        pthread_mutex_unlock(&n->hb_mu);
    }
    if (!rc && pthread_create(&n->hb_thread, NULL, hb_main, n)) rc = LOOM_ETRANSPORT;
    if (rc) {
        if (n->hb_sock) zmq_close(n->hb_sock);
        n->hb_sock = NULL;
        return rc;
    }
    n->hb_started = 1;
    return 0;
}

int heartbeat_port(const loom_node *n)
{
    return n->hb_port;
}

void heartbeat_stop(loom_node *n)
{
    if (n->hb_started) {
        atomic_store(&n->hb_exit, 1);
        uint64_t one = 1;
        ssize_t w = write(n->hb_wake_fd, &one, sizeof one);
        (void)w;
        pthread_join(n->hb_thread, NULL);
        n->hb_started = 0;
    }
    if (n->hb_wake_fd >= 0) close(n->hb_wake_fd);
    n->hb_wake_fd = -1;
}

void heartbeat_watch(loom_node *n, uint32_t id)
{
    pthread_mutex_lock(&n->hb_mu);
    peer *p = &n->peers[id];
    memcpy(p->hb_rid, p->rid, p->rid_len);
    p->hb_rid_len = p->rid_len;
    p->hb_watched = 1;
    node_heard(n, id);
    p->hb_first = 1;
    pthread_mutex_unlock(&n->hb_mu);
}

void heartbeat_restart(loom_node *n, uint32_t id)
{
    pthread_mutex_lock(&n->hb_mu);
    node_heard(n, id);
    n->peers[id].hb_first = 1;
    pthread_mutex_unlock(&n->hb_mu);
}

/* The first heartbeat over a new connection waits for it to be made: on a
 * job of hundreds of processes sharing a few cores, every node connects to
 * the scheduler's heartbeat socket at once as the job assembles (and, with a
 * job secret, makes a CURVE handshake), which took longer than the default
 * heartbeat timeout of 5 s for a 256-worker job on 2 cores. Until a first
 * heartbeat came, the job's connect timeout bounds the silence instead, as
 * it bounds the rest of assembling; after it, the heartbeat timeout. */
uint64_t heartbeat_limit(loom_node *n, uint32_t id)
{
    uint64_t limit = (uint64_t)n->cfg.heartbeat_timeout_ms;
    pthread_mutex_lock(&n->hb_mu);
    if (n->peers[id].hb_first && (uint64_t)n->cfg.connect_timeout_ms > limit)
        limit = (uint64_t)n->cfg.connect_timeout_ms;
    pthread_mutex_unlock(&n->hb_mu);
    return limit;
}

void heartbeat_forget(loom_node *n, uint32_t id)
{
    pthread_mutex_lock(&n->hb_mu);
    n->peers[id].hb_watched = 0;
    pthread_mutex_unlock(&n->hb_mu);
}

uint64_t heartbeat_silence(loom_node *n, uint32_t id, uint64_t now, uint64_t *age)
{
    pthread_mutex_lock(&n->hb_mu);
    const peer *p = &n->peers[id];
    uint64_t silent = node_silence(n, id, n->last_tick_ms);
    if (age) *age = now > p->last_heard_ms ? now - p->last_heard_ms : 0;
    pthread_mutex_unlock(&n->hb_mu);
    return silent;
}
