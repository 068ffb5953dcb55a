/* dynamic_local: the dynamic engine's rounds in one process.
 *
 * It replays what the only worker of a one-worker job sees (dynamic.c,
 * dynamic_coord.c): the plans of rounds 0..s-1, then for each round u its
 * totals (apply), the plan of round u+s and its partial sums. The stop asked
 * by apply() reaches the coordinator with the next partial sums and takes
 * effect after that round's totals, as in a job. Totals are 0 + the partial
 * sums, as the coordinator adds them, so results equal the job's bit for bit
 * (tests/lasso checks it). */
#include <stdlib.h>
#include <string.h>

#include "loom/error.h"
#include "sched/dynamic.h"

typedef struct local_round {
    size_t n;
    uint64_t *keys;
    double *values;
    int stop; /* apply() had asked to stop when its partial sums were taken */
} local_round;

int loom_dyn_run_local(const loom_dyn_opts *o, const loom_dyn_app *app, uint64_t *rounds, char *err,
                       size_t errlen)
{
    if (rounds) *rounds = 0;
    if (err && errlen) err[0] = '\0';
    if (!o || !app || !app->partial || !app->apply) return LOOM_EINVAL;
    int rc = dyn_check_opts(o, 1, err, errlen);
    if (rc) return rc;
    if (o->schedule == LOOM_DYN_USER
            ? !app->schedule
            : (o->schedule == LOOM_DYN_PRIORITY || o->schedule == LOOM_DYN_UNIFORM) &&
                  !app->coupling)
        return LOOM_EINVAL;
    dyn_shard shard;
    if ((rc = dyn_shard_init(&shard, o, app, 0, o->dim, 0))) return rc;
    size_t width = (size_t)o->parallel + o->extra;
    local_round *ring = calloc(o->depth, sizeof *ring);
    double *change = malloc(o->parallel * sizeof *change);
    if (!ring || !change) rc = LOOM_ENOMEM;
    for (uint32_t i = 0; !rc && i < o->depth; i++) {
        ring[i].keys = malloc(o->parallel * sizeof *ring[i].keys);
        ring[i].values = malloc(width * sizeof *ring[i].values);
        if (!ring[i].keys || !ring[i].values) rc = LOOM_ENOMEM;
    }
    uint64_t last = o->max_rounds, next_plan = 0, applied = 0;
    int stop = 0;
    /* Plans of rounds 0..s-1 are all made before any partial sums. */
    for (; !rc && next_plan < last && next_plan < o->depth; next_plan++)
        rc = dyn_shard_plan(&shard, next_plan, ring[next_plan].keys, &ring[next_plan].n, err,
                            errlen);
    for (uint64_t t = 0; !rc && t < next_plan; t++) {
        memset(ring[t].values, 0, width * sizeof(double));
        app->partial(app->arg, t, ring[t].keys, ring[t].n, ring[t].values);
        ring[t].stop = 0;
    }
    for (uint64_t u = 0; !rc && u < next_plan; u++) {
        local_round *r = &ring[u % o->depth];
        for (size_t i = 0; i < r->n + o->extra; i++) r->values[i] = 0.0 + r->values[i];
        memset(change, 0, r->n * sizeof *change);
        if (app->apply(app->arg, u, r->keys, r->n, r->values, change)) stop = 1;
        applied++;
        dyn_shard_done(&shard, r->keys, r->n, change);
        if (r->stop && last > next_plan) last = next_plan;
        if (next_plan < last) {
            local_round *p = &ring[next_plan % o->depth];
            rc = dyn_shard_plan(&shard, next_plan, p->keys, &p->n, err, errlen);
            if (rc) break;
            memset(p->values, 0, width * sizeof(double));
            app->partial(app->arg, next_plan, p->keys, p->n, p->values);
            p->stop = stop;
            next_plan++;
        }
    }
    if (rounds) *rounds = applied;
    if (ring)
        for (uint32_t i = 0; i < o->depth; i++) {
            free(ring[i].keys);
            free(ring[i].values);
        }
    free(ring);
    free(change);
    dyn_shard_free(&shard);
    return rc;
}
