/* node_impl: what the layers above core (ps, sched, p2p, ft) use of a node.
 *
 * A node owns one ZeroMQ context, its sockets, one I/O thread and a
 * heartbeat thread (heartbeat.c, with a socket of its own). Sockets: a
 * ROUTER bound on this node's address (peers connect to it) and one DEALER per
 * peer this node sends requests to (workers -> scheduler and servers; servers
 * -> scheduler), plus, on a worker or a server, one DEALER to each node of
 * its own role it has sent to (connected on the first node_send to it: worker
 * to worker for the p2p, svb and sched layers, server to server for
 * replication; such messages arrive on the receiver's ROUTER, their sender
 * checked like any other's). Any
 * thread sends on them directly, under the node's socket
 * mutex (node_send). Incoming messages are read, their header and sender
 * validated, and the handler a layer registered for the type called, by one
 * thread at a time: the I/O thread, or an application thread blocked in
 * loom_wait(), which reads the sockets itself so that the answer it waits for
 * needs no hand-over between threads. Handlers therefore run in arrival order
 * per peer, on either of those threads (servers and the scheduler have only
 * the I/O thread), and must not block.
 *
 * Node ids follow from role and rank: the scheduler is 0, server r is 1 + r,
 * worker r is 1 + S + r.
 *
 * Asynchronous work is tracked by timestamps (loom_ts): a timestamp counts
 * outstanding parts (e.g. one per server a pull went to); it completes when
 * the count reaches zero, wakes loom_wait() and runs loom_on_complete()
 * callbacks. */
#ifndef LOOM_CORE_NODE_IMPL_H
#define LOOM_CORE_NODE_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "core/msg.h"
#include "loom/node.h"

/* Room for one received frame: core keeps ZeroMQ's zmq_msg_t in it
 * (node_priv.h checks that it fits), which nothing above core sees. */
typedef struct node_frame_slot {
    _Alignas(8) unsigned char opaque[64];
} node_frame_slot;

/* A received message, as handed to a handler: its header, its verified
 * sender and its payload frames, read through node_frame_data/size. Frames
 * belong to the I/O thread and are closed after the handler returns, unless
 * the handler moved them out (node_msg_keep) to keep the payload without a
 * copy. A node_msg is never copied by value: node_msg_keep moves it. */
typedef struct node_msg {
    msg_header h;
    uint32_t from; /* verified sender node id */
    size_t nframes;
    /* Core's: each frame's bytes and size (noted once, when the frames came
     * or moved), and the frames themselves. */
    const void *frame_data[MSG_MAX_FRAMES];
    size_t frame_size[MSG_MAX_FRAMES];
    node_frame_slot frames[MSG_MAX_FRAMES];
} node_msg;

/* Payload frame i of a received message: its bytes (at any alignment: ZeroMQ
 * receives large messages in place) and their number. */
static inline const void *node_frame_data(const node_msg *m, size_t i)
{
    return m->frame_data[i];
}
static inline size_t node_frame_size(const node_msg *m, size_t i)
{
    return m->frame_size[i];
}

/* Move a message's frames into `to` (zero copy), to keep it past its
 * handler; a message so kept is freed with node_msg_release(). */
void node_msg_keep(node_msg *to, node_msg *from);
void node_msg_release(node_msg *m);

typedef void (*node_handler)(loom_node *n, void *ctx, node_msg *m);

/* An outgoing payload frame. With free_fn set, the I/O thread / ZeroMQ takes
 * ownership and calls free_fn(data, hint) when done (zero copy). Without it,
 * `copy` decides: copy now, or send in place (the caller keeps data valid and
 * unchanged until the peer has answered). */
typedef struct node_frame {
    const void *data;
    size_t len;
    void (*free_fn)(void *data, void *hint);
    void *hint;
    int copy;
} node_frame;

/* ---- identity and roster ---- */
static inline uint32_t node_server_id(int num_servers, int rank)
{
    (void)num_servers;
    return 1u + (uint32_t)rank;
}
static inline uint32_t node_worker_id(int num_servers, int rank)
{
    return 1u + (uint32_t)num_servers + (uint32_t)rank;
}
/* Role and rank of a node id; returns -1 if id is not part of the job. */
int node_peer_role(const loom_node *n, uint32_t id, int *rank);
/* Scheduler: 1 if node `id` is a server leaving the running job (its own
 * DONE a = 1, or `loom leave`; docs/ELASTIC.md) while the failover
 * subscribers decide whether the job can go on without it, else 0: a
 * refusal is then the scheduler's to explain, not a death's. */
int node_peer_leaving(const loom_node *n, uint32_t id);
/* A worker: where the sequence numbers of its pushes start (0, or for a
 * worker that joined the running job, J << NODE_SEQ_BASE_SHIFT, J the
 * scheduler's count of joins when it came: docs/ELASTIC.md). A slot a worker
 * left or died in may be taken by another, and with replicas a server
 * applies a worker's push only above the last sequence it applied from that
 * slot: the newcomer's must start above any of its predecessors', which
 * pushed fewer than 2^40 times each. */
#define NODE_SEQ_BASE_SHIFT 40
uint64_t node_seq_base(const loom_node *n);
/* 1 if this process took the place of a dead node (a replacement server: its
 * roster said so), else 0. Known from the roster on, so before any message of
 * another server or a worker can reach this node (one from a routing id the
 * node cannot name yet is dropped). */
int node_is_replacement(const loom_node *n);
/* The scheduler: 1 once every server and worker has been sent the roster
 * (what the scheduler sends any of them after that reaches it after the
 * roster), else 0. */
int node_assembled(const loom_node *n);
/* The silence after which the scheduler declares a node dead (ms). */
uint64_t node_heartbeat_timeout_ms(const loom_node *n);

/* ---- messages ---- */
/* The largest payload frame this job sends (bytes, loom_config.max_frame_mib):
 * layers split what they send so that no frame exceeds it. */
uint64_t node_max_payload(const loom_node *n);
/* Register the handler for one message type (before the node starts serving
 * traffic: layers attach right after the roster is known). */
void node_set_handler(loom_node *n, unsigned type, node_handler fn, void *ctx);
/* Send to node dest, from any thread, on the socket itself (no queue).
 * h->sender and h->nframes are filled in. A worker may send to any other
 * worker (LOOM_EINVAL to itself), but only once that worker has the roster
 * too: the scheduler hands it to the workers one by one, and a worker drops
 * (and counts) a message from a routing id it cannot yet name. So a layer
 * meets the other workers at a barrier (node_barrier) before its first
 * message to one, as loom_reducer_open does. Returns 0 or LOOM_EINVAL / LOOM_ETRANSPORT /
 * LOOM_ESHUTDOWN / LOOM_EPEERFAIL; on error the frames' free_fn has been called. */
int node_send(loom_node *n, uint32_t dest, msg_header *h, const node_frame *frames, size_t nframes);
/* Count a received message as malformed and dropped (a handler found a bad payload). */
void node_drop(loom_node *n, const node_msg *m, const char *why);

/* ---- timestamps ---- */
/* A new timestamp waiting for `parts` completions (parts >= 1). 0 on ENOMEM. */
loom_ts node_ts_new(loom_node *n, uint32_t parts);
/* One part finished with status (0 or a loom error); the first error sticks. */
void node_ts_done(loom_node *n, loom_ts ts, int status);

/* ---- waiting ---- */
/* One mutex and condition variable per node guard state that layers wait on
 * (clocks, table registry). node_wait() returns LOOM_EPEERFAIL once the job has
 * failed, LOOM_ETIMEDOUT at the deadline (ms of node_now_ms(), 0 = none). */
void node_lock(loom_node *n);
void node_unlock(loom_node *n);
int node_wait(loom_node *n, uint64_t deadline_ms);
void node_broadcast(loom_node *n); /* call with the lock held */
uint64_t node_now_ms(void);

/* ---- layers ---- */
/* A layer above core describes itself in one static descriptor: its name and
 * the message types it handles, with who may send each and its frames. Its
 * attach function registers it first (node_layer_register), on every node
 * whatever the node's role, so that every node of the process knows its
 * types; the first registration in the process gives the layer its slot on
 * every node: its state (node_set_layer), its timer and its counters. Slots
 * go in registration order, which is also the order in which timers run and
 * states are destroyed. */
#define NODE_MAX_LAYERS 8
typedef struct node_layer_def {
    const char *name;
    const msg_type_info *types;
    size_t ntypes;
    _Atomic int slot; /* core's: 0, then 1 + the layer's slot */
} node_layer_def;
/* From any thread; registering again does nothing. 0, or (logged) LOOM_EINVAL
 * if msg_register_types refuses the layer's types (which type, and what has
 * its number), which then registers none of them, or LOOM_ELIMIT if
 * NODE_MAX_LAYERS layers are registered already. */
int node_layer_register(node_layer_def *l);
void node_set_layer(loom_node *n, node_layer_def *l, void *state, void (*destroy)(void *state));
/* The layer's state on n, NULL if none (or the layer never registered). */
void *node_layer(const loom_node *n, node_layer_def *l);
/* A layer's timer, run by the I/O thread like a handler (under the receive
 * lock, must not block): fn is called once node_now_ms() reaches the time it
 * last returned (UINT64_MAX: not until poked), and soon after
 * node_timer_poke() from any thread. Nodes without an I/O thread (the fuzz
 * seam) never run timers. Set before the node serves traffic. */
typedef uint64_t (*node_timer_fn)(loom_node *n, void *ctx, uint64_t now_ms);
void node_set_timer(loom_node *n, node_layer_def *l, node_timer_fn fn, void *ctx);
void node_timer_poke(loom_node *n, node_layer_def *l);
/* The layer's counters: fn writes them into the loom_stats that
 * loom_node_stats fills (core's own first; the rest are 0 until a layer's fn
 * writes them). Set before the node serves traffic. ctx must outlive the
 * layer's state: another thread may read a node's stats while the node ends
 * (an in-process job's nodes read each other's), so a layer keeps its
 * counters in node_stats_area, not in its state. */
typedef void (*node_stats_fn)(void *ctx, loom_stats *out);
void node_set_stats(loom_node *n, node_layer_def *l, node_stats_fn fn, void *ctx);
/* Zeroed memory of `size` bytes for a layer's counters, the node's and freed
 * with the node, after every layer's destroy; the same area on a second call.
 * NULL if memory runs out. */
void *node_stats_area(loom_node *n, node_layer_def *l, size_t size);

/* Failover and rejoin subscribers: each layer that reacts to deaths and
 * returns subscribes for itself, up to NODE_HOOKS_MAX of each; they run in
 * the order they subscribed (the layers' order: ps, then ft). Subscribe
 * before the node serves traffic; LOOM_ELIMIT when the list is full.
 *
 * A failover subscriber fn(n, ctx, dead) runs on the I/O thread when the
 * scheduler finds node `dead` silent (on the scheduler) or reports it dead
 * (NODE_FAILED, elsewhere), and says 1 if, as far as its layer is concerned,
 * the job goes on without it (the ps layer with replicas, for a server). The
 * node survives the death when at least one subscriber ran and every one said
 * 1; the first to say 0 ends the round (those after it never hear of the
 * death). The scheduler then counts the node as ended; nobody exits. With no
 * subscriber, or a 0, a death ends the job (node_fail). */
#define NODE_HOOKS_MAX 4
typedef int (*node_failover_fn)(loom_node *n, void *ctx, uint32_t dead);
int node_add_failover(loom_node *n, node_failover_fn fn, void *ctx);
/* A node whose death the job survived (failover) is back: a replacement
 * process registered for it with a new routing id. The core has rebound the
 * id (and, where it had one, reconnected its socket to the new address) when
 * each rejoin subscriber fn(n, ctx, id) runs, on the I/O thread: on the
 * scheduler once the newcomer has its roster, elsewhere on NODE_REJOINED (the
 * newcomer gets it too, for itself). Layers bring the newcomer up to date
 * from there. */
typedef void (*node_rejoin_fn)(loom_node *n, void *ctx, uint32_t id);
int node_add_rejoin(loom_node *n, node_rejoin_fn fn, void *ctx);
/* Scheduler: the job goes on without worker node `worker`
 * (--on-worker-failure continue, core/scheduler.c's lose_worker; or, in an
 * elastic job, a free worker slot at the start and a worker that left, whose
 * last CLOCK said it was done: docs/ELASTIC.md). A worker joining a slot is
 * a rejoin (node_add_rejoin) on every node. Each lost
 * subscriber fn(n, ctx, worker) runs on the I/O thread after the membership
 * counted the worker done and before the barriers and the end are judged
 * again, so a layer that gave the worker work (src/sched/parts_coord.c: its
 * data parts) takes it back first. A subscriber returns 1 when it hands the
 * worker's data to the others (then the scheduler's line does not call the
 * worker's share lost), else 0. */
typedef int (*node_lost_fn)(loom_node *n, void *ctx, uint32_t worker);
int node_add_lost(loom_node *n, node_lost_fn fn, void *ctx);
/* Scheduler: whether a worker may join the running job now (docs/ELASTIC.md):
 * each gate fn(n, ctx) a layer added returns NULL, or, while a newcomer could
 * not be placed consistently, why (src/sched/parts_coord.c: a worker is
 * between an epoch's end and its next request, in the barrier after it or
 * on its way there; src/ps/registry.c: a server is copying its ranges or
 * waiting to take them back), and the joining worker is asked to ask again.
 * LOOM_ELIMIT past NODE_HOOKS_MAX gates. */
typedef const char *(*node_join_gate_fn)(loom_node *n, void *ctx);
int node_add_join_gate(loom_node *n, node_join_gate_fn fn, void *ctx);
/* Scheduler: whether worker node `worker` may leave the running job when
 * `loom leave` asks for it (docs/ELASTIC.md): the gate fn(n, ctx, worker),
 * if a layer set one, returns 1 when the worker can leave the job and its
 * work go to the others (src/sched/parts_coord.c: a job handing out data
 * parts); without a gate, or with a 0, the request is refused. One gate per
 * node; LOOM_ESTATE if one is set already. */
typedef int (*node_leave_gate_fn)(loom_node *n, void *ctx, uint32_t worker);
int node_set_leave_gate(loom_node *n, node_leave_gate_fn fn, void *ctx);
/* Scheduler: server node `server` asks to leave the running job (DONE a = 1;
 * docs/ELASTIC.md). A layer that hands its ranges over first (src/ft:
 * fence, a last replication round, the workers' sync) sets this hook:
 * fn(n, ctx, server) returns 1 when it takes the leave over, and then calls
 * node_server_left() once the ranges are handed over (or, if that cannot
 * complete, with drained 0: the failover leave); 0 lets the scheduler's
 * failover leave go on at once. One per node; LOOM_ESTATE if one is set. */
typedef int (*node_drain_fn)(loom_node *n, void *ctx, uint32_t server);
int node_set_drain(loom_node *n, node_drain_fn fn, void *ctx);
/* Scheduler: server node `id` leaves now: the job goes on without it (the
 * failover subscribers; NODE_FAILED to the others, with b = 2 and req =
 * `drained` when its ranges were handed over first, handover `drained`),
 * then it is told to end (SHUTDOWN a = 1). Refused (DONE_ACK LOOM_ESTATE:
 * it goes on serving) when its ranges would have no live holder. */
void node_server_left(loom_node *n, uint32_t id, uint64_t drained);
/* Whether node `id` left after handing its ranges over (NODE_FAILED b = 2):
 * the handover's generation, else 0. */
uint64_t node_peer_drained(const loom_node *n, uint32_t id);

/* ---- the scheduler's status page ---- */
/* Scheduler: worker (a node id) has completed `clock` clocks (INT64_MAX: it
 * finished); the job's min clock is min_clock (INT64_MAX: every worker
 * finished). The ps registry tells; the status page shows it. */
void node_note_clock(loom_node *n, uint32_t worker, int64_t clock, int64_t min_clock);

/* ---- lifecycle used by the API glue (src/loom.c) ---- */
/* Start a node; attach(n), if not NULL, registers the layers' handlers
 * before any message can arrive. */
int node_start(const loom_config *cfg, int (*attach)(loom_node *n), loom_node **out);
/* Worker: tell the scheduler this worker is done, wait for its answer. */
int node_worker_done(loom_node *n);
/* Worker: enter the job-wide barrier of workers and wait for its release. */
int node_barrier(loom_node *n);
/* Scheduler/server: block until the job ends; 0 on an orderly end. */
int node_serve(loom_node *n);
/* Stop the I/O thread, close sockets and free the node (after serve/done). */
void node_destroy(loom_node *n);

#endif
