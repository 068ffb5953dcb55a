/* sched: the scheduling layer's internal interface (public API: loom/sched.h).
 *
 * ring.c     a static engine's blocks from worker to worker: sent by their
 *            holder, taken by the next one, from that sender and version only
 * static.c   the static (rotation) engine on top of the ring and the
 *            parameter-server table that stores the blocks between rotations
 * dynamic*.c the dynamic engine (its own internals: dynamic.h)
 * parts*.c   data parts handed out on demand (loom/parts.h; internals: parts.h)
 *
 * The layer attaches to a node like src/ps does (handlers for its message
 * types, MSG_SCHED_*, MSG_PARTS_* and MSG_DYN_*); it uses core, the public table API and
 * ps.h's ps_barrier (static.c), never ZeroMQ. */
#ifndef LOOM_SCHED_SCHED_H
#define LOOM_SCHED_SCHED_H

#include <stdint.h>

#include "core/node_impl.h"

/* Called by the API glue (src/loom.c) before the node's I/O thread starts:
 * workers get the handler of arriving blocks. */
int sched_attach(loom_node *n);
/* The dynamic engine's part: the scheduler gets the coordinator, workers the
 * queue of its messages (dynamic.c). */
int sched_dynamic_attach(loom_node *n);
/* The data parts' part: the scheduler gets the pool, workers the slot of its
 * answers (parts.c). */
int sched_parts_attach(loom_node *n);

/* Workers: the id of the next engine this worker opens. Engines are numbered
 * in the order each worker opens them, which the API asks to be the same on
 * every worker, so an id names the same engine everywhere. */
uint32_t sched_next_engine(loom_node *n);

/* Workers: send the rows of block `block` of engine `engine` (bytes of them,
 * values of value_size bytes) to worker rank `to`, which holds it next, at
 * `version`: sparse when that is smaller (value_size 4 or 8; ring.c says
 * how). Copies the rows. */
int sched_send_block(loom_node *n, uint32_t engine, int to, uint32_t block, uint64_t version,
                     const void *rows, size_t bytes, size_t value_size);
/* Workers: wait for that block from worker rank `from` at `version` and copy
 * its rows (bytes of them, values of value_size bytes) out. LOOM_EPROTO if it
 * came with another size or a malformed sparse form, LOOM_EPEERFAIL if the
 * job failed meanwhile. */
int sched_take_block(loom_node *n, uint32_t engine, int from, uint32_t block, uint64_t version,
                     void *rows, size_t bytes, size_t value_size);

#endif
