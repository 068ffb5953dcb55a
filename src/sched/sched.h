/* sched: the scheduling layer's internal interface (public API: loom/sched.h).
 *
 * handoff.c  who holds each block of a static engine: servers keep a version
 *            per block and grant it to one worker at a time; workers ask for
 *            a block at a version and give it back one version later
 * static.c   the static (rotation) engine on top of the hand-off and the
 *            parameter-server tables that store the blocks
 *
 * dynamic*.c the dynamic engine (its own internals: dynamic.h)
 *
 * The layer attaches to a node like src/ps does (handlers for its message
 * types, MSG_SCHED_*); it uses core and the public table API, never ZeroMQ. */
#ifndef LOOM_SCHED_SCHED_H
#define LOOM_SCHED_SCHED_H

#include <stdint.h>

#include "core/node_impl.h"

/* Called by the API glue (src/loom.c) before the node's I/O thread starts:
 * servers get the block versions, workers the handler of grants. */
int sched_attach(loom_node *n);
/* The dynamic engine's part: the scheduler gets the coordinator, workers the
 * queue of its messages (dynamic.c). */
int sched_dynamic_attach(loom_node *n);

/* Workers: the id of the next engine this worker opens. Engines are numbered
 * in the order each worker opens them, which the API asks to be the same on
 * every worker, so an id names the same engine everywhere. */
uint32_t sched_next_engine(loom_node *n);

/* Workers: ask for block `block` of engine `engine` once it has reached
 * `version`; ts completes when the block's server grants it (0), or with an
 * error (LOOM_ESTATE: someone else holds that version, or it is past). */
int sched_acquire_async(loom_node *n, uint32_t engine, uint32_t block, uint64_t version,
                        loom_ts *ts);
/* Workers: give back a block this worker holds, now at `version` (the one it
 * was granted + 1): its new values are on the servers already. */
int sched_release(loom_node *n, uint32_t engine, uint32_t block, uint64_t version);

#endif
