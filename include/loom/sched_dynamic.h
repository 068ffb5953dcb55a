/* sched_dynamic: the dynamic scheduling engine (STRADS's dynamic SchMP,
 * kim-thesis-strads.txt chapter 5; issue 13; docs/SCHED.md "Dynamic engine").
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
 *     parameter of round t (a shard never plans a parameter still in flight).
 *
 * Every worker calls loom_dyn_run() with the same options; it returns when
 * the rounds are done or apply() asked to stop. */
#ifndef LOOM_SCHED_DYNAMIC_H
#define LOOM_SCHED_DYNAMIC_H

#include <stddef.h>
#include <stdint.h>

#include "node.h"

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

#endif
