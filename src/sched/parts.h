/* parts: what the two sides of the data parts service share (public API:
 * loom/parts.h): the layer, the kinds of the scheduler's answer and the
 * scheduler's attach.
 *
 * parts.c        a worker's side (loom_parts_*: requests, empty clocks) and
 *                the layer's attach on every role
 * parts_coord.c  the scheduler's pool: assign on idle, remove on finished,
 *                back to the pool on a lost worker or a timeout */
#ifndef LOOM_SCHED_PARTS_H
#define LOOM_SCHED_PARTS_H

#include "core/node_impl.h"

/* PARTS_GIVE's a. */
enum parts_answer {
    PARTS_PART = 0,  /* b = the part */
    PARTS_WAIT,      /* none free, the epoch is not over: do an empty clock and ask again */
    PARTS_EPOCH_END, /* req = the epoch that ended, clock = the clock to reach first */
    PARTS_JOB_END,   /* every epoch is over */
    PARTS_ERROR,     /* b = a loom error code (LOOM_EMISMATCH, LOOM_EPROTO) */
    PARTS_LEFT,      /* the answer to a leaving worker's request: nothing more */
    PARTS_RESUMED    /* every worker's checkpoint state is in: the pool is rebuilt */
};

/* PARTS_REQ's b: flags. */
enum {
    PARTS_REQ_HOLD = 1,   /* no clocks to keep: hold the request until a part is free */
    PARTS_REQ_JOIN = 2,   /* the first request of a worker that joined the running job */
    PARTS_REQ_LEAVE = 4,  /* the last request of a worker that leaves (loom_leave) */
    PARTS_REQ_RESUME = 8, /* a resumed worker's first: its checkpoint state (frame 1) */
    PARTS_REQ_FLAGS = 15
};

/* PARTS_REQ_RESUME's frame: the epoch, the part held + 1 (0: none), the
 * parts finished in the epoch (n of them, each below the options' parts);
 * loom_parts_save() writes it after a magic word and the number of parts. */
typedef struct parts_wire_resume {
    uint64_t epoch, held, n;
    /* then n uint32_t */
} parts_wire_resume;

/* PARTS_REQ's frame: the options every worker must agree on. */
typedef struct parts_wire_opts {
    uint64_t parts, epochs, timeout_ms;
} parts_wire_opts;

extern node_layer_def parts_layer_def;

/* The scheduler's part: the pool, PARTS_REQ's handler, its lost subscriber
 * and its timer (parts_coord.c). */
int parts_coord_attach(loom_node *n);

#endif
