/* msg_types: the ft layer's message type numbers: checkpoints.
 *
 * Core names none of a layer's types: src/ft/ft.c registers these with what
 * each is (name, who may send it, frames) when the layer attaches, and core
 * refuses a number it or another layer has already. docs/PROTOCOL.md is the
 * one table of every layer's numbers, where a new type takes a free one; a
 * number never changes without a new MSG_VERSION (core/msg.h). The types of
 * replication, of a replacement's return and of handbacks (REPL to PARKED)
 * are ft's too, and src/ft/types.c registers them, but their numbers are
 * declared in ps/msg_types.h: ps's parking sends PARKED, and ps/part.h's
 * mechanisms make and take what the others carry. */
#ifndef LOOM_FT_MSG_TYPES_H
#define LOOM_FT_MSG_TYPES_H

enum ft_msg_type {
    /* checkpoint parts (src/ft/ft.c) */
    MSG_CKPT_PART = 64, /* server/worker -> scheduler: its part of checkpoint `clock` is on
                           disk; a = 1 if it holds every row (full), b = the server deaths
                           and req = the handbacks it knew of; blob (the part's kind, rank,
                           full, path, size, CRC: src/ft/ft.c send_part) */
    /* a replacement in a resumed job, the scheduler's plans (src/ft/plan.c; docs/FAULTS.md) */
    MSG_CKPT_BASE = 160, /* scheduler -> a replacement server: clock = the job's clock at
                            this run's clock 0 (the resumed checkpoint's; 0 if not resumed) */
    MSG_CKPT_PLAN,       /* scheduler -> servers, workers: clock = the job clock of the next
                            checkpoint, a = 1 if servers write every row; b = 1 (to
                            workers): the final checkpoint at `clock` was given up */
    MSG_CKPT_SKIP,       /* server/worker -> scheduler: no part of checkpoint `clock`;
                            a = the sender's job clock now + 1 (0: finished), b = why (FT_SKIP_*) */
    MSG_CKPT_EPOCH,      /* worker 0 -> scheduler: an epoch ended at job clock `clock`,
                            a = its length in clocks */
    MSG_CKPT_FINAL,      /* worker -> scheduler: `clock` is its last: checkpoint it */
};

#endif
