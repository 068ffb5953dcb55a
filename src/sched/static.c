/* static: the static (rotation) engine of scheduled model parallelism
 * (STRADS-Static, kim-thesis-strads.txt chapter 4; Orion's ring rotation).
 *
 * A table's key range is cut into M blocks, one per worker. An iteration is M
 * sub-iterations; in each, every worker holds one block (the plan: by default
 * worker m holds block (i + m) mod M in sub-iteration i) and runs the
 * application's update() on its copy of it. Between iterations the blocks
 * rest in the parameter-server table. In the first sub-iteration each worker
 * pulls its block from the table; after update() it sends the rows straight
 * to the worker that holds the block next (ring.c: sparse when that is
 * smaller), which takes them from
 * that sender at that version only; the last holder of the iteration pushes
 * the block's change to the table (its rows minus the table's, which nobody
 * wrote since the first pull) and waits for the acknowledgement. Every block
 * is thus written by one worker at a time, moves once per sub-iteration, and
 * each holder continues from its predecessor's complete block.
 *
 * Kept blocks (keep_blocks): within one loom_sched_run call the last holder
 * of an iteration hands its block straight to the block's first holder of the
 * next iteration, as between sub-iterations, and only the call's last
 * iteration pushes to the table; so only the call's first iteration pulls.
 * A block then costs one hand-over per sub-iteration instead of a pull, a
 * push and a second pull of the whole table per iteration, and the barrier
 * is the call's, not every iteration's: the hand-overs' versions order the
 * iterations. The table is as exact as before when the call returns.
 *
 * Prefetch: a worker's next block is sent by its neighbour as soon as the
 * neighbour is done with it, and received into memory by the node's I/O
 * thread (ring.c keeps it) while update() still runs on the current block;
 * taking it is then a copy. After the last sub-iteration: aggregate() and one barrier,
 * the only job-wide synchronisation of an iteration; it also makes every
 * block's push visible to the next iteration's pulls.
 *
 * The plan is checked at the start of every iteration on every worker (they
 * compute the same one): every sub-iteration must give each worker a block of
 * its own, and every worker must see every block once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "loom/loom.h"
#include "ps/ps.h"
#include "sched/sched.h"

struct loom_sched {
    loom_node *node;
    loom_table *t;
    loom_sched_static_opts o;
    uint32_t engine, blocks, rank, workers;
    uint64_t *bounds; /* blocks + 1 keys */
    loom_type type;
    size_t row_bytes;
    uint8_t *buf;       /* the block being updated */
    uint8_t *old;       /* the last holder: the table's rows, then the pushed change */
    int64_t *plan;      /* two plans, by the iteration's parity (plan_of) */
    uint32_t *holder;   /* two, the same (holder_of) */
    int64_t iterations; /* completed */
    FILE *log;
};

static size_t block_rows(const loom_sched *s, uint32_t b)
{
    return (size_t)(s->bounds[b + 1] - s->bounds[b]);
}

/* The plan of an iteration: plan[sub * workers + worker] is the block; and
 * holder[sub * workers + block] the worker. Two are kept (this iteration's
 * and, with keep_blocks, the next one's or the last one's). */
static int64_t *plan_of(const loom_sched *s, int64_t iteration)
{
    return s->plan + (size_t)(iteration & 1) * s->workers * s->workers;
}

static uint32_t *holder_of(const loom_sched *s, int64_t iteration)
{
    return s->holder + (size_t)(iteration & 1) * s->workers * s->workers;
}

/* This worker's block of sub-iteration `sub` into s->buf: pulled from the
 * table in the first of a call's first iteration (of every iteration without
 * keep_blocks), else taken from its previous holder, which may be this
 * worker at the end of the last iteration (then s->buf holds it already). */
static int fetch_block(loom_sched *s, int64_t iteration, uint32_t sub, int first)
{
    uint32_t M = s->workers, b = (uint32_t)plan_of(s, iteration)[sub * M + s->rank];
    if (sub == 0 && (first || !s->o.keep_blocks))
        return loom_pull_range(s->t, s->bounds[b], s->bounds[b + 1], s->buf);
    uint32_t from = sub ? holder_of(s, iteration)[(sub - 1) * M + b]
                        : holder_of(s, iteration - 1)[(M - 1) * M + b];
    if (from == s->rank) return 0;
    return sched_take_block(s->node, s->engine, (int)from, b, (uint64_t)iteration * M + sub, s->buf,
                            block_rows(s, b) * s->row_bytes, loom_type_size(s->type));
}

/* new - old of n values of the table's type, into old. */
static void delta(loom_type type, const void *now, void *old, size_t n)
{
    switch (type) {
    case LOOM_F32:
        for (size_t i = 0; i < n; i++)
            ((float *)old)[i] = ((const float *)now)[i] - ((float *)old)[i];
        break;
    case LOOM_F64:
        for (size_t i = 0; i < n; i++)
            ((double *)old)[i] = ((const double *)now)[i] - ((double *)old)[i];
        break;
    case LOOM_I32:
        for (size_t i = 0; i < n; i++)
            ((int32_t *)old)[i] =
                (int32_t)((uint32_t)((const int32_t *)now)[i] - (uint32_t)((int32_t *)old)[i]);
        break;
    case LOOM_I64:
        for (size_t i = 0; i < n; i++)
            ((int64_t *)old)[i] =
                (int64_t)((uint64_t)((const int64_t *)now)[i] - (uint64_t)((int64_t *)old)[i]);
        break;
    }
}

/* The iteration's plan from schedule(), checked. */
static int make_plan(loom_sched *s, int64_t iteration)
{
    uint32_t M = s->workers;
    int64_t *plan = plan_of(s, iteration);
    uint32_t *holder = holder_of(s, iteration);
    for (uint32_t i = 0; i < M; i++)
        for (uint32_t m = 0; m < M; m++) {
            int64_t b = s->o.schedule ? s->o.schedule(s->o.user, iteration, i, m, M)
                                      : (int64_t)((i + m) % M);
            if (b < 0 || b >= (int64_t)s->blocks) {
                log_error("schedule: iteration %lld, sub-iteration %u gives worker %u block %lld, "
                          "but there are blocks 0 to %u",
                          (long long)iteration, i, m, (long long)b, s->blocks - 1);
                return LOOM_EINVAL;
            }
            plan[i * M + m] = b;
            holder[i * M + (uint32_t)b] = m; /* checked below: one holder per block */
        }
    for (uint32_t i = 0; i < M; i++)
        for (uint32_t m = 0; m < M; m++)
            for (uint32_t k = 0; k < m; k++) {
                if (plan[i * M + m] == plan[i * M + k]) {
                    log_error("schedule: iteration %lld, sub-iteration %u gives block %lld to "
                              "workers %u and %u: a block has one writer at a time",
                              (long long)iteration, i, (long long)plan[i * M + m], k, m);
                    return LOOM_EINVAL;
                }
                if (plan[m * M + i] == plan[k * M + i]) {
                    log_error("schedule: iteration %lld gives worker %u block %lld in "
                              "sub-iterations %u and %u: every worker must see every block once",
                              (long long)iteration, i, (long long)plan[m * M + i], k, m);
                    return LOOM_EINVAL;
                }
            }
    return 0;
}

/* Sub-iteration `sub` on the block in s->buf: update(), then hand it on (or,
 * after the last sub-iteration of the call's `last` iteration, or of every
 * iteration without keep_blocks, push its change to the table). */
static int run_task(loom_sched *s, int64_t iteration, uint32_t sub, int last)
{
    void *rows = s->buf;
    uint32_t M = s->workers, b = (uint32_t)plan_of(s, iteration)[sub * M + s->rank];
    size_t n = block_rows(s, b), bytes = n * s->row_bytes;
    loom_sched_task task = {.iteration = iteration,
                            .sub = sub,
                            .worker = s->rank,
                            .version = (uint64_t)iteration * M + sub,
                            .block = {b, s->bounds[b], s->bounds[b + 1], rows}};
    int rc = s->o.update(s->o.user, &task);
    if (rc) return rc;
    if (sub + 1 < M || (s->o.keep_blocks && !last)) {
        uint32_t to = sub + 1 < M ? holder_of(s, iteration)[(sub + 1) * M + b]
                                  : holder_of(s, iteration + 1)[b];
        if (to != s->rank) /* else it stays in s->buf for the next iteration */
            rc = sched_send_block(s->node, s->engine, (int)to, b, task.version + 1, rows, bytes,
                                  loom_type_size(s->type));
    } else {
        loom_ts ts;
        if (!(rc = loom_pull_range(s->t, task.block.begin, task.block.end, s->old))) {
            delta(s->type, rows, s->old, bytes / loom_type_size(s->type));
            rc = loom_push_range_async(s->t, task.block.begin, task.block.end, s->old, &ts);
            if (!rc) rc = loom_wait(s->node, ts);
        }
    }
    if (rc) return rc;
    if (s->log && fprintf(s->log, "%lld %u %u %u %llu\n", (long long)iteration, sub, b, s->rank,
                          (unsigned long long)task.version) < 0)
        return LOOM_EINVAL;
    return 0;
}

/* An iteration, the `first` and/or `last` of a loom_sched_run call. With
 * keep_blocks the next iteration's plan is made (and checked) now: the last
 * holders hand their blocks to its first ones. */
static int run_iteration(loom_sched *s, int64_t iteration, int first, int last)
{
    int keep = s->o.keep_blocks, rc = first || !keep ? make_plan(s, iteration) : 0;
    if (!rc && keep && !last) rc = make_plan(s, iteration + 1);
    if (rc) return rc;
    for (uint32_t sub = 0; sub < s->workers && !rc; sub++)
        if (!(rc = fetch_block(s, iteration, sub, first))) rc = run_task(s, iteration, sub, last);
    if (!rc && s->o.aggregate) rc = s->o.aggregate(s->o.user, iteration);
    return rc || (keep && !last) ? rc : ps_barrier(s->node);
}

int loom_sched_run(loom_sched *s, int64_t iterations)
{
    if (!s || iterations < 0) return LOOM_EINVAL;
    for (int64_t k = 0; k < iterations; k++) {
        int rc = run_iteration(s, s->iterations, k == 0, k == iterations - 1);
        if (rc) return rc;
        s->iterations++;
    }
    if (s->log && fflush(s->log)) return LOOM_EINVAL;
    return 0;
}

/* The options that a table must have for blocks to be handed over. */
static int check_table(const loom_table *t)
{
    const loom_table_opts *to = loom_table_options(t);
    const char *why = NULL;
    if (to->storage != LOOM_DENSE)
        why = "dense";
    else if (to->updater && strcmp(to->updater, "sum"))
        why = "\"sum\"";
    else if (to->consistency != LOOM_ASP)
        why = "LOOM_ASP";
    else if (to->cache)
        why = "without cache (cache = 0)";
    if (!why) return 0;
    log_error("static engine over table \"%s\": the table must be %s (its blocks are handed over "
              "explicitly, docs/SCHED.md)",
              loom_table_name(t), why);
    return LOOM_EINVAL;
}

/* Block boundaries: the caller's, checked, or an equal split. */
static int set_bounds(loom_sched *s, const loom_table_opts *to)
{
    uint64_t begin = to->key_begin, end = to->key_end;
    const char *name = loom_table_name(s->t);
    if ((unsigned __int128)end - begin < s->blocks || !end) {
        log_error("static engine over table \"%s\": %u blocks, but the table has %llu rows: "
                  "every block needs one",
                  name, s->blocks, (unsigned long long)(end - begin));
        return LOOM_EINVAL;
    }
    for (uint32_t b = 0; b <= s->blocks; b++) {
        if (!s->o.bounds) {
            s->bounds[b] = begin + (uint64_t)((unsigned __int128)(end - begin) * b / s->blocks);
            continue;
        }
        uint64_t k = s->o.bounds[b];
        if (k < begin || k > end) {
            log_error("static engine over table \"%s\": block bound %u is key %llu, outside the "
                      "table's keys [%llu, %llu)",
                      name, b, (unsigned long long)k, (unsigned long long)begin,
                      (unsigned long long)end);
            return LOOM_EINVAL;
        }
        if (b && k <= s->bounds[b - 1]) {
            log_error("static engine over table \"%s\": block %u would be [%llu, %llu): bounds "
                      "must ascend and every block hold a key",
                      name, b - 1, (unsigned long long)s->bounds[b - 1], (unsigned long long)k);
            return LOOM_EINVAL;
        }
        s->bounds[b] = k;
    }
    return 0;
}

/* The log file's name: "%d" replaced by the worker's rank. */
static int open_log(loom_sched *s)
{
    const char *p = s->o.log_path, *d = strstr(p, "%d");
    size_t len = strlen(p) + 16;
    char *name = malloc(len);
    if (!name) return LOOM_ENOMEM;
    if (d)
        snprintf(name, len, "%.*s%u%s", (int)(d - p), p, s->rank, d + 2);
    else
        snprintf(name, len, "%s", p);
    s->log = fopen(name, "w");
    if (!s->log) log_error("static engine: cannot write its log %s", name);
    free(name);
    return s->log ? 0 : LOOM_EINVAL;
}

int loom_sched_static_open(loom_table *t, const loom_sched_static_opts *o, loom_sched **out)
{
    if (!t || !o || !out) return LOOM_EINVAL;
    *out = NULL;
    loom_node *n = loom_table_node(t);
    if (!loom_is_worker(n)) return LOOM_EROLE;
    if (!o->update) {
        log_error("static engine: no update()");
        return LOOM_EINVAL;
    }
    int rc = check_table(t);
    if (rc) return rc;
    uint32_t M = (uint32_t)loom_num_workers(n);
    if (o->blocks && o->blocks != M) {
        log_error("static engine: %u blocks for %u workers: the rotation has one block per "
                  "worker",
                  o->blocks, M);
        return LOOM_EINVAL;
    }
    loom_sched *s = calloc(1, sizeof *s);
    if (!s) return LOOM_ENOMEM;
    const loom_table_opts *to = loom_table_options(t);
    *s = (loom_sched){.node = n,
                      .t = t,
                      .o = *o,
                      .blocks = M,
                      .rank = (uint32_t)loom_rank(n),
                      .workers = M,
                      .type = to->type,
                      .row_bytes = to->width * loom_type_size(to->type)};
    s->bounds = malloc((M + 1) * sizeof *s->bounds);
    s->plan = malloc(2 * (size_t)M * M * sizeof *s->plan);
    s->holder = malloc(2 * (size_t)M * M * sizeof *s->holder);
    rc = s->bounds && s->plan && s->holder ? set_bounds(s, to) : LOOM_ENOMEM;
    size_t most = 0;
    for (uint32_t b = 0; !rc && b < M; b++)
        if (block_rows(s, b) > most) most = block_rows(s, b);
    if (!rc && most * s->row_bytes > node_max_payload(n)) {
        log_error("static engine over table \"%s\": a block of %zu bytes exceeds the job's "
                  "frame limit of %llu bytes (LOOM_MAX_FRAME_MIB): blocks travel whole",
                  loom_table_name(t), most * s->row_bytes, (unsigned long long)node_max_payload(n));
        rc = LOOM_ELIMIT;
    }
    if (!rc && !(s->buf = malloc(most * s->row_bytes))) rc = LOOM_ENOMEM;
    if (!rc && !(s->old = malloc(most * s->row_bytes))) rc = LOOM_ENOMEM;
    if (!rc && o->log_path) rc = open_log(s);
    if (rc) {
        loom_sched_close(s);
        return rc;
    }
    s->engine = sched_next_engine(n);
    s->o.bounds = NULL; /* the caller's array need not outlive the call */
    s->o.log_path = NULL;
    *out = s;
    return 0;
}

void loom_sched_close(loom_sched *s)
{
    if (!s) return;
    if (s->log) fclose(s->log);
    free(s->bounds), free(s->plan), free(s->holder);
    free(s->buf), free(s->old);
    free(s);
}
