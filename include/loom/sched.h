/* Scheduled model parallelism (STRADS, kim-thesis-strads.txt chapters 3-5).
 *
 * Data parallelism lets every worker update every parameter at once, and the
 * updates conflict. Here the application says which parameters each worker
 * may update when, and the engine runs that plan, in STRADS's three parts:
 *
 *   schedule()   which parameters (a block of a table's keys) each worker
 *                updates in a step;
 *   update()     one worker's updates of its scheduled parameters over its
 *                own data (run on that worker, on a local copy);
 *   aggregate()  combine what the workers computed into the model, once per
 *                iteration.
 *
 * Static engine (this section): a table's key range is cut into M blocks, one
 * per worker. An iteration is M sub-iterations; in sub-iteration i worker m
 * owns block (i + m) mod M (or what the application's schedule() says, if
 * every sub-iteration is a permutation of the blocks and every worker sees
 * every block once per iteration). A block thus passes from worker m to
 * worker m - 1 on a ring and has exactly one writer at a time: the holder
 * sends it straight to the next one, which continues from its complete
 * rows; the engine prefetches a worker's next block while the current one is
 * updated, keeps the blocks in the table between iterations, and ends every
 * iteration with aggregate() and one barrier. docs/SCHED.md says how and at
 * what cost. */
#ifndef LOOM_SCHED_H
#define LOOM_SCHED_H

#include <stdint.h>

#include "node.h"
#include "table.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_sched loom_sched;

/* A block of a rotated table, as update() gets it. */
typedef struct loom_sched_block {
    uint32_t index;      /* 0 .. blocks - 1 */
    uint64_t begin, end; /* its keys, [begin, end) */
    void *rows;          /* (end - begin) rows of the table's type and width: this
                            worker's copy, which update() reads and writes; the
                            engine hands it on when update() returns */
} loom_sched_block;

/* One worker's task in one sub-iteration. */
typedef struct loom_sched_task {
    int64_t iteration; /* iterations (full rotations) completed before this one */
    uint32_t sub;      /* sub-iteration, 0 .. blocks - 1 */
    uint32_t worker;   /* this worker's rank */
    uint64_t version;  /* hand-overs the block had before this task: iteration * blocks + sub */
    loom_sched_block block;
} loom_sched_task;

/* schedule(): the block worker `worker` of `workers` owns in sub-iteration
 * `sub` of `iteration`. Called on every worker for every (sub, worker) at the
 * start of each iteration, so it must be a pure function of its arguments and
 * the application's state that every worker shares. A result out of range, or
 * a plan in which two workers own one block at once or a worker misses a
 * block, stops the run with LOOM_EINVAL and a sentence (loom_last_error()). */
typedef int64_t (*loom_sched_schedule_fn)(void *user, int64_t iteration, uint32_t sub,
                                          uint32_t worker, uint32_t workers);
/* update(): train on the task's block; returns 0 or a loom error code (or any
 * non-zero value), which stops the run and is returned by loom_sched_run(). */
typedef int (*loom_sched_update_fn)(void *user, const loom_sched_task *task);
/* aggregate(): after the iteration's last update on this worker and before its
 * barrier (push what is not part of the rotated table, e.g. the rows the
 * worker owns or summary rows); 0 or an error code. */
typedef int (*loom_sched_aggregate_fn)(void *user, int64_t iteration);

typedef struct loom_sched_static_opts {
    /* Blocks of the table: 0 = one per worker. For now the count must equal
     * the number of workers (STRADS's k = 1 rotation). */
    uint32_t blocks;
    /* NULL: the table's key range cut into equal blocks. Else blocks + 1
     * ascending keys inside the table's key range: block b is
     * [bounds[b], bounds[b + 1]); every block must hold at least one key. */
    const uint64_t *bounds;
    loom_sched_schedule_fn schedule;   /* NULL: rotation, (sub + worker) mod blocks */
    loom_sched_update_fn update;       /* required */
    loom_sched_aggregate_fn aggregate; /* optional */
    void *user;                        /* passed to the three */
    /* If set, the engine appends a line "iteration sub block worker version"
     * per task to this file (one file per worker: "%d" in it, if any, is
     * replaced by the worker's rank), so a test can check the writers. */
    const char *log_path;
} loom_sched_static_opts;

#define LOOM_SCHED_STATIC_OPTS_DEFAULT                                                             \
    {                                                                                              \
        0, NULL, NULL, NULL, NULL, NULL, NULL                                                      \
    }

/* A static engine over table t (workers only; every worker calls it with the
 * same options, in the same order as its other loom_sched_static_open calls).
 * The table must be dense, "sum", LOOM_ASP and without cache (cache = 0): its
 * blocks are read fresh at every iteration's start, and the servers add each
 * iteration's change, so a block's value is its last holder's. A block must
 * fit in one message (LOOM_ELIMIT otherwise). Errors: LOOM_EINVAL (with a
 * sentence) for bad options, LOOM_EROLE off a worker, LOOM_ELIMIT, LOOM_ENOMEM. */
int loom_sched_static_open(loom_table *t, const loom_sched_static_opts *o, loom_sched **out);

/* Run `iterations` iterations (full rotations): for each, check the
 * schedule, then every sub-iteration: wait for this worker's block, call
 * update() and hand the block on (the last holder pushes its change to the
 * table); then aggregate() and one barrier. Returns 0 or the first error
 * (update's, aggregate's or Loom's). */
int loom_sched_run(loom_sched *s, int64_t iterations);

/* Free the engine (after its last run; no collective call). */
void loom_sched_close(loom_sched *s);

/* ---- dynamic engine (src/sched/dynamic*.c) ---- */

#ifdef __cplusplus
}
#endif
#endif
