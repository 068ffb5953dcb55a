/* heartbeat: liveness on a path of its own (heartbeat.c). Only core/ includes
 * this file. */
#ifndef LOOM_CORE_HEARTBEAT_H
#define LOOM_CORE_HEARTBEAT_H

#include <stdint.h>

typedef struct loom_node loom_node;

/* The liveness arithmetic (hb_mu held). node_heard: a heartbeat from node id, now.
 * node_note_tick: the heartbeat thread's tick runs at `now`; if it comes
 * more than two intervals after the previous one (a stall, not jitter), the
 * time beyond one interval counts as deaf time.
 * node_silence: how long node id has been silent while this node listened on
 * schedule: the time since it was last heard, less the deaf time since then.
 * A node is declared dead when that exceeds heartbeat_timeout_ms: a loop that
 * itself ran late (say 400 ms on an overloaded machine) has not yet read the
 * heartbeats that came meanwhile, and must not blame their senders for it. */
void node_heard(loom_node *n, uint32_t id);
void node_note_tick(loom_node *n, uint64_t now);
uint64_t node_silence(const loom_node *n, uint32_t id, uint64_t now);

/* Start the node's heartbeat thread and its socket. The scheduler binds a
 * ROUTER of its own (port 0: any free port, which heartbeat_port() then
 * gives for the roster); any other node connects a DEALER to the scheduler's
 * at `port` and watches the scheduler from now on. 0, or LOOM_ETRANSPORT. */
int heartbeat_start(loom_node *n, int port);
/* The port of the scheduler's heartbeat ROUTER. */
int heartbeat_port(const loom_node *n);
/* Stop the thread (node_destroy, before the context is terminated). */
void heartbeat_stop(loom_node *n);

/* Scheduler: accept heartbeats of node id from the routing id the roster
 * gives it (n->peers[id].rid, read by the caller's thread, which holds
 * recv_mu) and count its silence from now. Called again for the same id, as
 * for a replacement, it takes the new routing id. */
void heartbeat_watch(loom_node *n, uint32_t id);
/* Scheduler: count node id's silence from now (its roster went out). */
void heartbeat_restart(loom_node *n, uint32_t id);
/* Scheduler: the job goes on without node id: its heartbeats go unanswered,
 * so that a node that only seemed dead finds itself cut off and stops. */
void heartbeat_forget(loom_node *n, uint32_t id);
/* How long node id has been silent, as the heartbeat thread judged it at its
 * latest tick (node_silence at that tick); and in *age, the time from its last
 * heartbeat to `now`, for the status page. */
uint64_t heartbeat_silence(loom_node *n, uint32_t id, uint64_t now, uint64_t *age);
/* The silence after which node id counts as dead: the heartbeat timeout, or
 * the connect timeout if longer while no heartbeat of it came since it was
 * watched or restarted (on a node: since its heartbeat connection started). */
uint64_t heartbeat_limit(loom_node *n, uint32_t id);

#endif
