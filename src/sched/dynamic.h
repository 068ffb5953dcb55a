/* dynamic: internals of the dynamic scheduling engine (public side:
 * include/loom/sched.h "dynamic engine"; the protocol: docs/SCHED.md).
 *
 *   dynamic_shard.c  a scheduler shard: priorities of its parameter range,
 *                    sampling, the dependency check (pure computation, tested
 *                    through loom_dyn_run_local in
 *                    tests/unit/test_sched_dynamic.c)
 *   dynamic_coord.c  the coordinator, in the scheduler process: interleaves
 *                    the shards' plans, adds the workers' partial sums,
 *                    keeps s rounds in flight
 *   dynamic_local.c  the same rounds in one process (loom_dyn_run_local)
 *   dynamic.c        a worker's loop (loom_dyn_run) and the layer's attach */
#ifndef LOOM_SCHED_DYNAMIC_INTERNAL_H
#define LOOM_SCHED_DYNAMIC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/node_impl.h"
#include "sched/sched.h"
#include "loom/sched.h"

/* ---- a scheduler shard (dynamic_shard.c) ---- */

typedef struct dyn_shard {
    loom_dyn_opts o;
    const loom_dyn_app *app;
    uint64_t lo, hi; /* the range it schedules */
    size_t size;     /* hi - lo */
    uint64_t rng;    /* splitmix64 state */
    /* Priorities: weight[k] of parameter lo + k is (its last change)^2 + eta,
     * 0 while it is in flight or not yet visited; tree is a Fenwick tree of
     * the weights, for sampling in O(log size). */
    double *weight, *tree;
    double eta;
    /* The first visit of every parameter is uniform without replacement: a
     * parameter never updated has no change to be prioritised by. */
    uint64_t *unvisited;
    size_t unvisited_left;
    double first_sum; /* sum of (change)^2 of first visits: eta's scale */
    size_t first_count;
    uint8_t *in_flight, *visited;
    uint64_t *flying; /* the keys in flight (up to depth * parallel), for the check */
    size_t nflying;
    uint64_t cursor; /* LOOM_DYN_ROUND_ROBIN: the next parameter (offset) */
    uint64_t *cand;  /* candidates of a round */
    double *cand_weight;
} dyn_shard;

/* A shard over [lo, hi) (non-empty). 0 or LOOM_ENOMEM. */
int dyn_shard_init(dyn_shard *s, const loom_dyn_opts *o, const loom_dyn_app *app, uint64_t lo,
                   uint64_t hi, uint64_t stream);
void dyn_shard_free(dyn_shard *s);
/* The plan of `round`: at most o->parallel keys into keys, their number into
 * *n, marked in flight. 0, or LOOM_EKEYRANGE with err for a user schedule
 * naming a key outside the range, twice, or still in flight. */
int dyn_shard_plan(dyn_shard *s, uint64_t round, uint64_t *keys, size_t *n, char *err,
                   size_t errlen);
/* The plan's parameters moved by change[]: their new priorities. */
void dyn_shard_done(dyn_shard *s, const uint64_t *keys, size_t n, const double *change);

/* ---- the coordinator (dynamic_coord.c) ---- */

int dyn_coord_attach(loom_node *n);
/* The layer (dynamic.c): its message types, its slot on a node. */
extern node_layer_def dyn_layer_def;

/* ---- options ---- */

/* Options every worker must give alike and that fit the job; 0 or
 * LOOM_EINVAL with err. */
int dyn_check_opts(const loom_dyn_opts *o, int workers, char *err, size_t errlen);

#endif
