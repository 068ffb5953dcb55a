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

#include <stddef.h>
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
    /* 0: every iteration pulls its blocks from the table, pushes their
     * change and ends with a barrier. 1: within one loom_sched_run call the
     * blocks pass from an iteration's last holders straight to the next
     * one's first, only the call's first iteration pulls and its last
     * pushes, and the barrier is the call's: far less traffic and work per
     * iteration, but update() and aggregate() of the call's iterations
     * other than its first and last must not read the table's rows (the
     * table holds them as they were at the call's start). */
    int keep_blocks;
} loom_sched_static_opts;

#define LOOM_SCHED_STATIC_OPTS_DEFAULT                                                             \
    {                                                                                              \
        0, NULL, NULL, NULL, NULL, NULL, NULL, 0                                                   \
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
 * table); then aggregate() and one barrier (keep_blocks: the call's last
 * iteration pushes and ends with the barrier; the others hand on). When it
 * returns the table holds every block. Returns 0 or the first error
 * (update's, aggregate's or Loom's). */
int loom_sched_run(loom_sched *s, int64_t iterations);

/* Free the engine (after its last run; no collective call). */
void loom_sched_close(loom_sched *s);

/* ---- dynamic engine (src/sched/dynamic*.c) ---- */

/* The dynamic engine (STRADS's dynamic SchMP, kim-thesis-strads.txt chapter
 * 5; docs/SCHED.md "Dynamic engine").
 *
 * Parameters 0..dim-1 are updated in rounds. Each round a scheduler shard
 * picks a plan of at most `parallel` parameters, every worker computes partial
 * sums for them over its own part of the data, the coordinator adds the
 * workers' sums, and every worker applies the totals (so every worker holds
 * the same parameters). This is the STRADS split of schedule / update /
 * aggregate:
 *
 *   - scheduler shards: worker k owns the parameter range
 *     loom_dyn_shard_range(k); its shard samples `candidates` parameters of
 *     its range with probability proportional to (last change)^2 plus a
 *     floor, drops one of every pair whose coupling exceeds rho, and keeps at
 *     most `parallel` of the rest. Shards live on the workers because the
 *     coupling needs the data (for Lasso, columns of X), which workers have
 *     and servers do not;
 *   - the coordinator (in the scheduler process): takes the shards' plans in
 *     turn (round t comes from shard t mod W), sends each to every worker,
 *     adds the workers' partial sums in worker order and sends the totals;
 *   - pipelining of depth s: rounds t+1..t+s-1 are computed before round t's
 *     totals are applied. Round t's partial sums (and plan) see exactly the
 *     totals of rounds <= t - s, the same on every worker: a staleness of
 *     s - 1 rounds, at most (s - 1) * parallel updates, none of them to a
 *     parameter of round t (a shard never plans a parameter still in flight)
 *     nor, from the same shard, to one coupled with it above rho (the check
 *     covers the shard's parameters in flight; rounds of other shards in
 *     flight are not checked against).
 *
 * Every worker calls loom_dyn_run() with the same options; it returns when
 * the rounds are done or apply() asked to stop. */

typedef enum {
    LOOM_DYN_PRIORITY = 0, /* sample by (change)^2 + floor, then the dependency check */
    LOOM_DYN_UNIFORM,      /* sample uniformly, then the dependency check (no priorities) */
    LOOM_DYN_RANDOM,       /* `parallel` uniform parameters, no check (Shotgun) */
    LOOM_DYN_ROUND_ROBIN,  /* the shard's range in consecutive blocks of `parallel`, cyclic */
    LOOM_DYN_USER          /* the application's schedule() */
} loom_dyn_schedule;

#define LOOM_DYN_MAX_DEPTH    64
#define LOOM_DYN_MAX_PARALLEL 65536

typedef struct loom_dyn_opts {
    uint64_t dim;        /* parameters 0..dim-1, at least one per worker */
    uint32_t parallel;   /* P: updates per round, 1..min(dim, LOOM_DYN_MAX_PARALLEL) */
    uint32_t candidates; /* L >= P: parameters sampled per round before the check */
    double rho;          /* pairs whose coupling exceeds rho are not planned together */
    double floor;        /* priority floor, relative to the mean (change)^2 of the
                            first visit of every parameter (> 0) */
    uint32_t depth;      /* s: rounds in flight, 1..LOOM_DYN_MAX_DEPTH */
    uint64_t max_rounds; /* at most this many rounds */
    uint32_t extra;      /* values partial() adds after the plan's (e.g. a loss) */
    int schedule;        /* a loom_dyn_schedule */
    uint64_t seed;       /* of the shards' sampling */
} loom_dyn_opts;

typedef struct loom_dyn_app {
    void *arg;
    /* Shards: the coupling of parameters i and j of this worker's range,
     * compared with rho (for Lasso |x_i.x_j| / (|x_i| |x_j|)). */
    double (*coupling)(void *arg, uint64_t i, uint64_t j);
    /* Every worker: out[0..n) = its partial sums for keys of `round`,
     * out[n..n+extra) its extra values. */
    void (*partial)(void *arg, uint64_t round, const uint64_t *keys, size_t n, double *out);
    /* Every worker: the totals of all workers (sums[0..n+extra)); set
     * change[k] to how much keys[k] moved. Returns 1 to stop the run (every
     * worker must decide alike: they see the same totals). */
    int (*apply)(void *arg, uint64_t round, const uint64_t *keys, size_t n, const double *sums,
                 double *change);
    /* LOOM_DYN_USER: the plan of `round` from the range [lo, hi): write at
     * most max keys, return how many (checked: in range, distinct, not in
     * flight). */
    size_t (*schedule)(void *arg, uint64_t round, uint64_t lo, uint64_t hi, uint64_t *keys,
                       size_t max);
} loom_dyn_app;

/* The range [lo, hi) of parameters worker `rank` of `workers` schedules. */
void loom_dyn_shard_range(uint64_t dim, int workers, int rank, uint64_t *lo, uint64_t *hi);

/* Workers: run the engine. Returns 0, LOOM_EINVAL for options that do not
 * fit (err says which: "8 parallel updates exceed the 5 parameters"),
 * LOOM_EKEYRANGE for a user schedule naming a key outside its shard, or the
 * job's failure (LOOM_EPEERFAIL, LOOM_EPROTO). *rounds (if not NULL) gets
 * the number of rounds run. */
int loom_dyn_run(loom_node *node, const loom_dyn_opts *opts, const loom_dyn_app *app,
                 uint64_t *rounds, char *err, size_t errlen);

/* The same rounds in this process, without a job: what loom_dyn_run does
 * on the only worker of a one-worker job (the same plans, the same calls of
 * partial and apply in the same order, the same arithmetic: results equal
 * bit for bit), with no messages. For measuring progress per update quickly
 * (bench/sched_lasso.sh) and for tests. */
int loom_dyn_run_local(const loom_dyn_opts *opts, const loom_dyn_app *app, uint64_t *rounds,
                       char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
