/* node_priv: the node structure, and what the files of a node share: node.c
 * (start-up and the end), node_send.c (sockets, sending), node_recv.c
 * (receiving, the I/O thread) and node_control.c (control messages of servers
 * and workers); core's parts that attach to a node through its hooks
 * (node_hooks: the scheduler's membership in scheduler.c, its status page in
 * status.c) and the rest of core that needs the node's inside include it too
 * (heartbeat.c, node_fuzz.c). Outside core/ only a unit test
 * (tests/unit/test_liveness.c) includes this file; layers use node_impl.h. */
#ifndef LOOM_CORE_NODE_PRIV_H
#define LOOM_CORE_NODE_PRIV_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <zmq.h>

#include "core/curve.h"
#include "core/node_impl.h"
#include "core/tracker.h"
#include "core/u64map.h"

/* A received message's frames are ZeroMQ's, kept in node_msg's slots. */
_Static_assert(sizeof(zmq_msg_t) == sizeof(node_frame_slot) &&
                   _Alignof(zmq_msg_t) <= _Alignof(node_frame_slot),
               "node_frame_slot holds a zmq_msg_t");
static inline zmq_msg_t *node_msg_frame(node_msg *m, size_t i)
{
    return (zmq_msg_t *)(void *)m->frames[i].opaque;
}
/* Note where m's frames' bytes are (node_frame_data/size), once they came or moved. */
static inline void node_msg_note_frames(node_msg *m)
{
    for (size_t i = 0; i < m->nframes; i++) {
        m->frame_data[i] = zmq_msg_data(node_msg_frame(m, i));
        m->frame_size[i] = zmq_msg_size(node_msg_frame(m, i));
    }
}

#define NODE_ADDR_MAX  256
#define NODE_RID_MAX   16 /* room for a routing id (MSG_RID_SIZE bytes) */
#define NODE_NO_ID     UINT32_MAX
#define NODE_LINGER_MS 1000
/* ZMQ_AFFINITY masks of the node's context's two I/O threads: the job's
 * work on one, heartbeats on the other (heartbeat.c). */
#define NODE_WORK_IO_THREAD      1u
#define NODE_HEARTBEAT_IO_THREAD 2u

/* The listen backlog of a ROUTER that every node of the job may connect to
 * at once (the scheduler's two, every server's): ZeroMQ's default of 100
 * drops the SYNs of a larger job's simultaneous connects, which TCP retries
 * only after 1, 3, 7 s: long enough for a job of a few hundred nodes to miss
 * its heartbeat timeout while it assembles. The kernel caps it at somaxconn. */
static inline int node_backlog(uint32_t nnodes)
{
    return nnodes + 16 > 100 ? (int)nnodes + 16 : 100;
}

enum node_state { NODE_STARTING, NODE_RUNNING, NODE_DONE, NODE_FAILED };

/* An application thread reading the sockets in loom_wait() (node_recv.c):
 * its eventfd, on the node's reader_list. */
typedef struct node_reader {
    int fd;
    struct node_reader *next;
} node_reader;

typedef struct peer {
    int role; /* loom_role, or -1 before registration */
    int rank;
    char addr[NODE_ADDR_MAX];  /* "host:port" of its ROUTER */
    void *dealer;              /* our DEALER to it, if we send it requests */
    int dealer_fd;             /* its ZMQ_FD, which signals input */
    atomic_int dealer_pending; /* input may wait on the DEALER (see struct loom_node) */
    uint8_t rid[NODE_RID_MAX]; /* its routing id (from its REGISTER, or the roster) */
    size_t rid_len;
    /* Liveness (heartbeat.c), under hb_mu: when its heartbeat last came, our
     * deaf_ms then (node_silence); scheduler: whether its heartbeats are
     * answered, and the routing id they must come from. */
    uint64_t last_heard_ms;
    uint64_t deaf_at_heard_ms;
    int hb_watched;
    int hb_first; /* nothing heard on the heartbeat path since it was watched or restarted
                   * (heartbeat_limit) */
    uint8_t hb_rid[NODE_RID_MAX];
    size_t hb_rid_len;
    int registered; /* scheduler: REGISTER received */
    int done;       /* worker finished, or server acknowledged shutdown */
    int lost;       /* worker died and the job goes on without it (continue) */
    int failed;     /* died, and the job went on without it (failover): what it still sends
                     * is dropped (2 once said so); a replacement clears it (rejoin) */
    int rejoining;  /* scheduler: a replacement that has not acknowledged its roster */
    /* Scheduler, a worker or server slot of an elastic job (docs/ELASTIC.md):
     * no process in it (never started, or it left: `left`), which a joining
     * node takes; `joined`: its process joined the running job. */
    int vacant, left, joined;
    /* It left after handing its ranges over (NODE_FAILED b = 2): the
     * handover's generation (node_peer_drained), else 0. */
    uint64_t drained;
    uint32_t join_acks; /* scheduler: servers yet to say they know the joining worker */
    uint64_t join_ms;   /* scheduler: when the joining worker's join began */
    /* Scheduler: a worker `loom leave` asked to leave, and the routing id of
     * the request, which hears when it is gone (scheduler_leave.c). */
    int leave_asked;
    uint8_t leave_rid[NODE_RID_MAX];
    size_t leave_rid_len;
    double share; /* scheduler: the worker's "share" metric (rows, documents; 0 = none) */
} peer;

/* Note that the job goes on without worker node `id`, whose share was `share`. */
void node_note_lost(loom_node *n, uint32_t id, double share);

/* The scheduler's membership: scheduler.c's alone (the status page and the
 * fuzz seam go through sched_summary_of and sched_set_assembled). */
typedef struct sched_state {
    uint32_t registered;
    uint32_t workers_registered; /* of `registered`: the job assembles at start_workers */
    uint32_t joins, leaves;      /* nodes that joined and left the running job */
    uint32_t live_servers;       /* servers the job started with (not free slots) */
    int roster_phase;            /* 0 collecting, 1 servers installing, 2 job running */
    uint32_t roster_acks;
    uint64_t barrier_gen; /* generation currently collecting arrivals */
    uint32_t barrier_arrived;
    uint8_t *barrier_seen; /* per node id */
    uint32_t workers_done; /* finished or lost */
    uint32_t workers_lost;
    uint32_t servers_acked_shutdown;
    int shutting_down;
    uint64_t rendezvous_deadline_ms;
    uint64_t refused; /* REGISTERs refused (the first few are logged) */
    uint64_t shutdown_deadline_ms;
    zmq_msg_t roster; /* the roster as encoded for every node (send_roster), if roster_cached */
    int roster_cached;
} sched_state;

typedef struct handler_entry {
    node_handler fn;
    void *ctx;
} handler_entry;

/* ---- core's parts: the node's hooks ----
 * What the node does for one role only is a part of core that attaches at
 * start-up, the way a layer does, with the hooks below: the scheduler's
 * membership (scheduler.c: membership_attach) and its status page (status.c:
 * status_attach), a server's or worker's side of membership (node_control.c:
 * node_member_attach). The node's files call them only through these hooks,
 * in attachment order, and never ask the node's role outside start-up. A
 * node without a part that sets a hook pays one test of an empty list. Every
 * hook may be NULL; each runs on the thread that holds the receive lock
 * (the I/O thread), but destroy (node_destroy). */
#define NODE_MAX_HOOKS     2  /* the scheduler's two parts */
#define NODE_HOOK_POLL_MAX 65 /* descriptors one part may add to the I/O thread's poll */
typedef struct node_hooks {
    /* The I/O thread's tick, every heartbeat interval. */
    void (*tick)(loom_node *n, void *ctx, uint64_t now);
    /* Each round of the I/O thread: descriptors of the part's own to poll
     * with the sockets' (at most NODE_HOOK_POLL_MAX); returns how many. */
    int (*poll)(loom_node *n, void *ctx, struct pollfd *fds);
    /* After the poll: what it found on them (their revents). */
    void (*serve)(loom_node *n, void *ctx, const struct pollfd *fds, int count, uint64_t now);
    /* A REGISTER or a leave request (msg_stranger_type) on the ROUTER from
     * routing id `rid`, which no node owns yet: m is the message, its
     * routing id frame left out. */
    void (*stranger)(loom_node *n, void *ctx, const uint8_t *rid, size_t rid_len, node_msg *m);
    /* A message from a node the job went on without (dropped after this). */
    void (*from_dead)(loom_node *n, void *ctx, const node_msg *m);
    /* Node `dead` died (`why`): the job fails (fatal, node_fail) or goes on
     * without it (the membership's failover). */
    void (*death)(loom_node *n, void *ctx, uint32_t dead, const char *why, int fatal);
    /* The node's end, after the layers' states are destroyed. */
    void (*destroy)(void *ctx);
} node_hooks;

struct loom_node {
    loom_config cfg;
    uint32_t id;
    uint32_t nnodes; /* 1 + S + W */
    peer *peers;     /* indexed by node id */
    char tag[48];    /* "worker 3", for log lines */

    void *zctx;
    curve *curve; /* CURVE of every socket; NULL without a job secret */
    void *router;
    char address[NODE_ADDR_MAX];  /* "host:port" of our ROUTER */
    uint8_t my_rid[NODE_RID_MAX]; /* random, drawn at start (msg.h, MSG_RID_SIZE) */
    size_t my_rid_len;
    u64map rid_index; /* the random part of a routing id -> node id; under recv_mu */

    /* Every socket is used under sock_mu by whichever thread sends or
     * receives (ZeroMQ sockets may change threads across a memory barrier):
     * an application thread sends on the socket itself, with no hand-over
     * to the I/O thread. sock_mu is a leaf: nothing else is locked under it. */
    pthread_mutex_t sock_mu;
    int sock_closed; /* under sock_mu: 0, or why nothing can be sent any more */
    int router_fd;   /* the ROUTER's ZMQ_FD */
    /* Set when input may wait on the ROUTER: its descriptor polled readable,
     * a send found input on it, or a read stopped before the socket was
     * empty. A pass reads only such sockets: a read that finds nothing
     * costs ZeroMQ a system call. */
    atomic_int router_pending;
    /* Held by the thread that reads the sockets and runs the handlers: the
     * I/O thread, or an application thread in loom_wait(). One at a time, so
     * that each peer's messages are handled in arrival order. */
    pthread_mutex_t recv_mu;
    int wake_fd; /* eventfd: wakes the I/O thread's poll */
    pthread_t io_thread;
    int io_started;
    atomic_int io_exit; /* node_destroy: leave the loop */
    /* Application threads in loom_wait() reading the sockets themselves.
     * While there are any, the I/O thread leaves the sockets to them and
     * sleeps at most READERS_POLL_MS at a time, so a reply wakes one thread
     * instead of two (the I/O thread would find it handled). */
    atomic_int readers;
    atomic_int io_gated; /* the I/O thread sleeps without the sockets */
    /* Those readers' eventfds, under sock_mu: a DEALER connected while one
     * sleeps in poll() is not in its poll set, and nobody else polls the
     * sockets then; so a connect wakes them, to poll the new set. */
    struct node_reader *reader_list;

    handler_entry handlers[MSG_TYPE_LIMIT];

    /* State others wait on, guarded by mu and signalled on cv. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    enum node_state state;
    int end_status; /* result of serve/done once state is DONE or FAILED */
    int roster_installed;
    int replacement; /* the roster said: this process took a dead node's place (1), or
                      * joined the running job in a free worker slot (2, docs/ELASTIC.md) */
    /* A worker or server: the application or a signal asked it to leave the
     * job (loom_leave; set from a signal handler, hence atomic). */
    atomic_int leave_requested;
    atomic_int leave_sent; /* a server: its DONE (a = 1) asking to leave is on its way */
    int workers_started;   /* a worker: workers not in free slots when its roster came */
    uint64_t seq_base;     /* a worker that joined: node_seq_base */
    uint64_t barrier_gen_entered, barrier_gen_released;
    int done_acked;
    /* A worker sent DONE: it sends the scheduler nothing more (member_tick). */
    atomic_int done_sent;

    uint64_t next_heartbeat_ms; /* the I/O thread's next tick (status heartbeat, judging) */
    /* Liveness (heartbeat.c): the heartbeat thread, its socket (the
     * scheduler's ROUTER, whose port is hb_port, or a DEALER to it) and its
     * wake-up eventfd. */
    pthread_t hb_thread;
    int hb_started;
    void *hb_sock;
    int hb_port;
    int hb_wake_fd;
    atomic_int hb_exit;
    /* Rounds of the I/O loop: the heartbeat thread ends a node whose I/O
     * thread has stopped making them (wedged). */
    _Atomic uint64_t io_rounds;
    /* A leaf lock over the liveness fields of every peer and these: when the
     * heartbeat thread last ticked, and the total time its stalled ticks came
     * later than heartbeat_interval_ms after the previous one
     * (node_note_tick): time it was not listening on schedule (descheduled by
     * the OS), which node_silence does not count against its peers. */
    pthread_mutex_t hb_mu;
    uint64_t last_tick_ms, deaf_ms;

    tracker ts;
    sched_state sched;
    /* Core's parts (node_add_hooks), in attachment order. */
    struct {
        const node_hooks *h;
        void *ctx;
    } hooks[NODE_MAX_HOOKS];
    int nhooks;

    struct {
        void *state;
        void (*destroy)(void *);
        node_timer_fn timer;
        void *timer_ctx;
        _Atomic uint64_t timer_due; /* node_now_ms() of its next run */
        node_stats_fn stats;
        void *stats_ctx;
        void *stats_area; /* node_stats_area */
    } layers[NODE_MAX_LAYERS];
    struct { /* node_add_failover, in order; none: every death ends the job */
        node_failover_fn fn;
        void *ctx;
    } failover[NODE_HOOKS_MAX];
    int nfailover;
    struct { /* node_add_rejoin, in order */
        node_rejoin_fn fn;
        void *ctx;
    } rejoin[NODE_HOOKS_MAX];
    int nrejoin;
    struct { /* node_add_lost, in order */
        node_lost_fn fn;
        void *ctx;
    } lost[NODE_HOOKS_MAX];
    int nlost;
    struct { /* node_add_join_gate */
        node_join_gate_fn fn;
        void *ctx;
    } join_gate[NODE_HOOKS_MAX];
    int njoin_gate;
    node_leave_gate_fn leave_gate; /* node_set_leave_gate: NULL, or the one gate */
    void *leave_gate_ctx;
    node_drain_fn drain; /* node_set_drain: NULL, or the one hook */
    void *drain_ctx;

    _Atomic uint64_t bytes_sent, bytes_received, messages_sent, messages_received;
    _Atomic uint64_t malformed;
    _Atomic uint64_t send_failures; /* sends that failed, the first few logged (node_send.c) */
    _Atomic uint64_t refused;       /* handshakes refused for want of the secret (curve.c) */

    /* Worker: the application's latest metrics (loom_report_metric), under
     * mu; the I/O thread sends them with the next heartbeat when dirty. */
    msg_metrics metrics;
    int metrics_dirty;
    /* Scheduler and workers: the workers the job went on without
     * (--on-worker-failure continue) and the sum of their shares; under mu. */
    int workers_lost;
    double lost_share;

    /* The fuzzing seam: NULL, except in a node that node_fuzz.c made. */
    const struct node_seam *seam;
    void *seam_ctx;
};

/* The fuzzing seam (node_fuzz.c): an in-process job whose nodes have no
 * sockets and no I/O thread. It is compiled into every build, not only the
 * fuzzing ones, so that the replay drivers that ctest runs in every build test
 * the node code that ships, not a variant of it; what it costs the real node is
 * one pointer test on sending, waiting, starting and destroying. ZeroMQ stays
 * in core: the seam hands on zmq_msg_t frames to node_fuzz.c, whose messages
 * in flight carry plain bytes to the fuzz targets in tests/. */
struct node_seam {
    /* Takes a message that n sends to dest (the encoded header and nparts
     * payload parts, which it owns from then on); returns 0 or a loom error. */
    int (*send)(void *ctx, loom_node *n, uint32_t dest, zmq_msg_t *hdr, zmq_msg_t *parts,
                size_t nparts);
    /* Delivers one queued message of the job; 0 when none is left (a wait for
     * something that cannot come any more then times out instead of hanging). */
    int (*pump)(void *ctx);
    /* n is being destroyed: the job forgets it. */
    void (*gone)(void *ctx, loom_node *n);
};
/* When set, node_start() asks it for the node instead of making one with
 * sockets (node_fuzz_job_install). */
extern int (*node_start_seam)(const loom_config *cfg, int (*attach)(loom_node *n), loom_node **out);
/* Run n's layer timers that are due at `now` (node_now_ms()); returns when
 * the next is due. The I/O thread runs them; a node_fuzz.c node has none, so
 * node_fuzz_job_tick() runs them instead (a server's replication rounds: without
 * them an SSP or ASP push with replicas is never acknowledged). */
uint64_t node_run_timers(loom_node *n, uint64_t now);
/* Run the failover subscribers for node `dead` (node_add_failover): 1 if
 * the node survives the death. */
int node_run_failover(loom_node *n, uint32_t dead);
/* Run the lost subscribers for worker node `worker` (node_add_lost): 1 if
 * one of them hands the worker's data to the others. */
int node_run_lost(loom_node *n, uint32_t worker);
/* Why a worker may not join now (the first join gate that says so), or NULL. */
const char *node_join_refused(loom_node *n);
/* Whether worker node `worker` may leave when asked (the leave gate; 0 without one). */
int node_leave_allowed(loom_node *n, uint32_t worker);
/* Run the rejoin subscribers for node `id` (node_add_rejoin). */
void node_run_rejoin(loom_node *n, uint32_t id);

/* node.c */
/* Attach a part of core (at start-up): the node calls h's hooks with ctx
 * from now on. 0, or LOOM_EINVAL when NODE_MAX_HOOKS parts attached. */
int node_add_hooks(loom_node *n, const node_hooks *h, void *ctx);
/* The ctx the part of hooks h attached with, NULL if it did not attach. */
void *node_hooks_ctx(const loom_node *n, const node_hooks *h);
const char *node_describe(const loom_node *n, uint32_t id, char *buf, size_t len);
/* "scheduler", "server", "worker" or "unknown", for a loom_role. */
const char *node_role_name(int role);

/* node_send.c (node_send_zmq: node_send of parts already built; takes them over) */
int node_send_zmq(loom_node *n, uint32_t dest, msg_header *h, zmq_msg_t *frames, size_t nframes);
/* Send a header-only control message. */
void node_send_control(loom_node *n, uint32_t dest, uint8_t type, uint64_t req, uint64_t a);
/* After sending on sock (sock_mu held): wake the I/O thread if input waits
 * on it, since ZeroMQ may have taken the signal its poll waits for. */
void node_wake_if_readable(loom_node *n, void *sock, atomic_int *pending);
/* Whether this thread is reading the socket of this pending flag to its end
 * now (node_recv.c, drain_socket): a handler's reply on it needs no check
 * for input, as the reading goes on until the socket has nothing more (the
 * server's answers: one ZMQ_EVENTS query, two system calls, a request). */
int node_draining(const atomic_int *pending);
/* Wake the I/O thread's poll (wake_fd). */
void node_wake_io_thread(loom_node *n);
/* Make the ROUTER, bind it (the scheduler's address, or an ephemeral port) and
 * note its address in n->address; 0 or a loom error. */
int node_bind_router(loom_node *n);
/* Connect a DEALER to node peer_id's ROUTER (at its address in the roster). */
int node_connect_dealer(loom_node *n, uint32_t peer_id);
/* Close every socket; later sends fail with `why`. */
void node_close_all_sockets(loom_node *n, int why);
/* Drop what is still queued for `dead` when its socket closes. */
void node_drop_unsent(loom_node *n, uint32_t dead);
/* Node id's replacement: bind its new routing id and address, and replace our
 * DEALER to it if we had one (a new one connects to the new address). */
int node_rebind(loom_node *n, uint32_t id, const uint8_t *rid, const char *addr);
/* Close n payload parts (of a message not sent, or not kept); inline, as
 * every received message's routing id and header are closed with it. */
static inline void node_close_parts(zmq_msg_t *parts, size_t n)
{
    for (size_t i = 0; i < n; i++) zmq_msg_close(&parts[i]);
}

/* node_recv.c */
/* Count and (the first few) log a dropped message whose sender is unknown. */
void node_drop_raw(loom_node *n, const char *why);
/* Bind routing id rid (MSG_RID_SIZE bytes) to node id: from now on our ROUTER
 * accepts messages from that routing id as coming from that node. Returns 0,
 * LOOM_EINVAL if the id is malformed or already bound, LOOM_ENOMEM. */
int node_bind_rid(loom_node *n, uint32_t id, const uint8_t *rid, size_t len);
/* The part of core that takes REGISTERs from strangers (its stranger hook:
 * the scheduler's membership) and in *ctx its ctx; NULL if none. */
const node_hooks *node_stranger_hooks(const loom_node *n, void **ctx);
/* Run the handler of a received message whose header and sender were checked. */
void node_dispatch(loom_node *n, node_msg *m);
/* The I/O thread (pthread_create's start routine, arg the node). */
void *node_io_main(void *arg);

/* node_control.c */
void node_fail(loom_node *n, uint32_t dead, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void node_finish(loom_node *n, int status);
/* Tell core's parts that node `dead` died (their death hooks). */
void node_note_death(loom_node *n, uint32_t dead, const char *why, int fatal);
/* A server's or worker's side of membership (start-up): the handlers of the
 * scheduler's control messages of its role, and its tick (the status
 * heartbeat, a worker's metrics, the scheduler's silence judged). */
int node_member_attach(loom_node *n);
/* Whether this process replaces a dead one (LOOM_REJOIN=1). */
int node_rejoining(void);
/* Whether this process joins a running job as a new worker (LOOM_JOIN=1). */
int node_joining(void);
/* Whether the node is RUNNING (takes n->mu). */
int node_still_running(loom_node *n);
/* The I/O thread's periodic turn: its parts' tick hooks. */
void node_tick(loom_node *n, uint64_t now);
/* Worker: send the metrics its application reported since the last call, if any. */
void node_send_metrics(loom_node *n);

/* scheduler.c: the scheduler's membership (start-up, after the layers):
 * registration, the roster, barriers, liveness, the end of the job. */
int membership_attach(loom_node *n);
/* What the status page shows of it: nodes registered, workers finished or
 * lost, REGISTERs refused, whether the job is still assembling (its roster
 * not installed everywhere) or shutting down. */
typedef struct sched_summary {
    uint32_t registered;
    uint32_t workers_done;
    uint32_t joins, leaves; /* nodes that joined and left the running job */
    uint64_t refused;
    int assembling;
    int shutting_down;
} sched_summary;
void sched_summary_of(const loom_node *n, sched_summary *out);
/* The fuzz seam (node_fuzz.c): a job assembled without REGISTERs, its
 * `registered` other nodes in the roster and the roster installed. */
void sched_set_assembled(loom_node *n, uint32_t registered);
/* Send `text` in a message of `type` (a = a) to routing id rid, which need
 * be no node's (a REJECT, a leave request's answer). */
void sched_send_rid(loom_node *n, const uint8_t *rid, size_t rid_len, uint8_t type, uint64_t a,
                    const char *text);
/* Whether a REGISTER or (leave: 1) a leave request names this job: its
 * token and its sizes. 0, or LOOM_ECONFIG with the reason in why. */
int sched_check_job(const loom_node *n, const msg_register *reg, int leave, char *why, size_t len);
/* Server node `id` (rank `rank`) leaves the running job: it asked (DONE a = 1)
 * or `loom leave` asked for it (asked = 0). 1 if the job went on without it
 * (it was told to end), 0 if refused (its ranges would lose their last live
 * holder) or the job is ending. */
int sched_server_leaves(loom_node *n, uint32_t id, int asked);

/* What scheduler.c and its parts (scheduler_join.c, scheduler_leave.c)
 * share: a header-only message with a and b; a REJECT to routing id rid,
 * logged (sched_reject, the first few) or not; the roster to node dest
 * (replaces: 1 a replacement, 2 a worker joining), and dropping the encoded
 * one once an entry changed. */
void sched_send_control_ab(loom_node *n, uint32_t dest, uint8_t type, uint64_t a, uint64_t b);
void sched_send_reject(loom_node *n, const uint8_t *rid, size_t rid_len, int code, const char *why);
void sched_reject(loom_node *n, const uint8_t *rid, size_t rid_len, int code, const char *why);
int sched_send_roster(loom_node *n, uint32_t dest, int replaces);
void sched_forget_roster(sched_state *s);

/* scheduler_join.c: a node taking a slot in the running job. A replacement
 * (or, joins set, a server joining a free slot) for server node id; a server
 * joining (the lowest free server rank); a worker joining free slot `rank`
 * (-1: the lowest free one); a server's answer that it knows the joining
 * worker (ROSTER_ACK a = id); the newcomer installed its roster. */
void sched_rejoin(loom_node *n, uint32_t id, const uint8_t *rid, size_t rid_len, const char *addr,
                  int joins);
void sched_join_server(loom_node *n, const uint8_t *rid, size_t rid_len, const char *addr);
void sched_join(loom_node *n, int rank, const uint8_t *rid, size_t rid_len, const char *addr);
void sched_join_acked(loom_node *n, node_msg *m);
void sched_announce_rejoin(loom_node *n, uint32_t id);

/* scheduler_leave.c: `loom leave` (docs/ELASTIC.md). A leave request
 * (MSG_LEAVE) from routing id rid, which no node owns: answered there with
 * a REJECT or LEAVE_ACKs. */
void sched_leave_request(loom_node *n, const uint8_t *rid, size_t rid_len, const msg_register *reg);
/* Node `id` is gone from the job (`how`: "left the running job", "finished",
 * "died ..."): whoever asked it to leave hears it (LEAVE_ACK a = 1). */
void sched_leave_gone(loom_node *n, uint32_t id, const char *how);

#endif
