/* ft_impl: the fault-tolerance layer's state on a node (struct ft), which
 * its files share: ft.c (every role: configuration, parts, resume, attach),
 * plan.c (the scheduler: which clock to checkpoint next, commits, cleanup),
 * rejoin_coord.c (the scheduler: a replacement's copies) and
 * handback_coord.c (the scheduler: handbacks); replica.c, failover.c,
 * rejoin.c and handback.c (a server's replication) keep theirs in
 * replica.h, and read this one for the layer's descriptor; a worker's
 * failover policy (client_failover.c) keeps none, its requests being ps's
 * (ps/client_ft.h). */
#ifndef LOOM_FT_IMPL_H
#define LOOM_FT_IMPL_H

#include <limits.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/node_impl.h"
#include "ft/ft.h"
#include "loom/node.h"

/* Why a node wrote no part of a planned checkpoint (CKPT_SKIP's b). */
enum {
    FT_SKIP_PASSED = 0,   /* it was past the clock when the plan came (or went past at once) */
    FT_SKIP_FAILED = 1,   /* writing the part failed (a full disk, say) */
    FT_SKIP_FINISHED = 2, /* it finished before the clock */
    FT_SKIP_UNSAFE = 3,   /* a server could not cut exactly then (handback, failover) */
};

/* --checkpoint-every: N clocks, N seconds, or N epochs (LOOM_CHECKPOINT_EVERY
 * "N", "Ns" (also "Nm", "Nh"), "Ne"). */
typedef struct ft_every {
    char unit; /* 'c', 's', 'e' */
    int64_t n; /* clocks, seconds or epochs */
} ft_every;

typedef struct ft_sched ft_sched;               /* plan.c */
typedef struct ft_coord ft_coord;               /* handback_coord.c */
typedef struct ft_rejoin_coord ft_rejoin_coord; /* rejoin_coord.c */
typedef struct ft_repl ft_repl;                 /* replica.h */

typedef struct ft {
    loom_node *node;
    int role, rank; /* rank: as the layer attached (resume); -1 for a node joining a job */
    uint32_t servers, workers;
    char dir[PATH_MAX]; /* "" = no checkpoints */
    int dirfd;          /* dir, opened and checked (-1: not yet) */
    ft_every every;
    int64_t full_every;
    char model[FT_MODEL_MAX];
    char resume[PATH_MAX]; /* "" = a fresh start */
    ft_manifest resumed;   /* when resuming */
    int64_t base;          /* the job's clock at this run's clock 0 */
    /* server */
    int base_heard; /* a replacement: the scheduler told it f->base (CKPT_BASE) */
    /* The next part must be full: a part failed (the next must not depend on
     * it), or this run resumed (its ranges may have been another server's in
     * the resumed checkpoint, whose chain a later manifest may not name). */
    int force_full;
    /* worker */
    uint8_t *resumed_part; /* the file; the state follows its header */
    size_t resumed_len;
    _Atomic int64_t plan; /* the planned checkpoint's job clock (-1: none), set by CKPT_PLAN */
    int64_t last_saved;   /* the job clock of this worker's last part (-1: none) */
    int64_t told_due;     /* the job clock loom_checkpoint_due last said was due (-1: none) */
    int64_t epoch_end;    /* the job clock the previous epoch ended at */
    _Atomic int64_t final_refused; /* the final clock the scheduler gave up (-1: none) */
    /* server: replication, failover, a replacement (replica.h) */
    ft_repl *repl;
    /* scheduler: checkpoint plans (NULL without checkpoints), a
     * replacement's copies, handbacks */
    ft_sched *sched;
    ft_rejoin_coord *rejoin_coord;
    ft_coord *coord;
} ft;

/* Open f->dir once (checked; dir.c) into f->dirfd. 0 or LOOM_ECONFIG. */
int ft_open_dir(ft *f);
/* The first checkpoint's job clock when the interval is N clocks (the
 * first multiple of N after the clock this run starts at), which every node
 * takes as planned from the start with no CKPT_PLAN; -1 for other intervals
 * or without checkpoints. Its server parts are full. */
int64_t ft_first_plan(const ft *f);
/* Tell the scheduler that this node writes no part of checkpoint `clock`. */
void ft_send_skip(ft *f, int64_t clock, int64_t now, int why);

/* ---- the scheduler (plan.c) ---- */

/* Lock and tidy the directory, register the scheduler's handlers and start
 * the committer. resumed: the manifest this job resumed from (or NULL). */
int ft_sched_attach(ft *f, const ft_manifest *resumed);
/* Finish the commits queued, remove an uncommitted checkpoint's files,
 * release the lock. */
void ft_sched_destroy(ft *f);
/* The layer's timer, its checkpoint part: a commit finished, or an interval
 * in seconds ran out; returns when to run again. */
uint64_t ft_sched_tick(ft *f, uint64_t now);

/* A replacement server registered for server rank `rank`: send it the
 * job's clock its parts are named by (CKPT_BASE), before anything else. */
void ft_sched_base(ft *f, int rank);

/* ---- the scheduler's copies to a replacement (rejoin_coord.c) ---- */

/* Register the registry's hooks, REJOIN_COPIED's handler and the failover
 * subscriber (before handback_coord.c's, as the registry's copies were
 * reset before a handback was aborted). */
int ft_rejoin_coord_attach(ft *f);
void ft_rejoin_coord_destroy(ft_rejoin_coord *c);
/* The layer's timer, its copies part: copies to ask again after a death. */
void ft_rejoin_coord_tick(ft_rejoin_coord *c);

/* ---- the scheduler's handbacks (handback_coord.c) ---- */

/* Register HANDBACK_ACK's handler, the scheduler's drain hook (a server
 * that leaves hands its ranges over) and the failover subscriber (before
 * plan.c's: an abort goes out before a new plan). */
int ft_coord_attach(ft *f);
void ft_coord_destroy(ft_coord *c);
/* The layer's timer, its handback part: one to try again after a death, a
 * server to leave by failover, a drain's sync to judge again (a worker
 * finished); returns when to run again (UINT64_MAX: when poked). */
uint64_t ft_coord_tick(ft_coord *c, uint64_t now);
/* Start handing back the ranges of the server that came back first, if
 * none is being handed back or joining; abort the handback in progress (a
 * replacement joins); the job's handbacks so far (REJOIN_READY tells them). */
void ft_coord_start(ft_coord *c);
void ft_coord_abort(ft_coord *c);
uint32_t ft_coord_handbacks(const ft_coord *c);

/* ---- a worker (client_failover.c) ---- */

/* The worker's failover and rejoin subscribers and the handlers of
 * REJOIN_READY, PARKED and HANDBACK: requests moved through ps/client_ft.h. */
int ft_client_attach(loom_node *n);

/* The layer (types.c): its message types, its slot on a node. */
extern node_layer_def ft_layer_def;

#endif
