/* msg_types: the sched layer's message type numbers: the rotation's blocks,
 * the data parts handed out on demand and the dynamic engine's rounds.
 *
 * Core names none of a layer's types: src/sched/ring.c, parts.c and dynamic.c
 * register these with what each is (name, who may send it, frames) when they
 * attach, and core refuses a number it or another layer has already.
 * docs/PROTOCOL.md is the one table of every layer's numbers, where a new type
 * takes a free one; a number never changes without a new MSG_VERSION
 * (core/msg.h). */
#ifndef LOOM_SCHED_MSG_TYPES_H
#define LOOM_SCHED_MSG_TYPES_H

enum sched_msg_type {
    /* rotation (src/sched/ring.c) */
    MSG_SCHED_BLOCK = 80, /* worker -> worker: table = engine, a = block, b = version; frame rows */
    /* data parts on demand (src/sched/parts.c, parts_coord.c) */
    MSG_PARTS_REQ = 84, /* worker -> scheduler: req = epoch, clock = the worker's clock,
                           a = finished part + 1 (0: none), b = PARTS_REQ_* flags (hold
                           the answer, join, leave, resume); frame: u64 parts, u64 epochs,
                           u64 timeout (ms); with resume a second frame: the checkpoint
                           state (parts_wire_resume) */
    MSG_PARTS_GIVE,     /* scheduler -> worker: req = epoch, a = parts_answer, b = the part
                           (PARTS_PART) or a loom error (PARTS_ERROR), clock = the clock to
                           reach (PARTS_EPOCH_END) */
    /* dynamic scheduling engine (src/sched/dynamic.c, dynamic_coord.c) */
    MSG_DYN_START = 88, /* worker -> scheduler: a = dim, b = max rounds, req = depth,
                           table = parallel updates, clock = extra values */
    MSG_DYN_PLAN_REQ,   /* scheduler -> shard's worker: req = round */
    MSG_DYN_PLAN,       /* shard -> scheduler, scheduler -> workers: req = round,
                           frame keys (u64) */
    MSG_DYN_PSUM,       /* worker -> scheduler: req = round, a = stop; frame f64 values */
    MSG_DYN_SUM,        /* scheduler -> workers: req = round; frame f64 sums */
    MSG_DYN_END,        /* scheduler -> workers: req = rounds run, a = loom error or 0 */
};

#endif
