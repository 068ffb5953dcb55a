/* bench_pushpull: push and pull throughput and latency of Loom tables.
 *
 *   loom run --servers S --workers W -- bench_pushpull [flags]
 *
 * For every row width (--widths, default 1,64) and batch size (--batches,
 * default 1,100,10000,100000,1000000 keys) each worker runs two timed phases
 * on a float32 table with dense storage over the keys [0, R), R = the largest
 * batch, "sum" updater, consistency LOOM_ASP and no process cache, so that
 * every pull is a real round trip to the servers:
 *
 *   push phase: loom_push_async() of the batch, then loom_wait() until every
 *               server involved acknowledged it (the server applied the sum);
 *   pull phase: loom_pull() of the same keys (request to every server
 *               involved, reply with the rows copied out of the store).
 *
 * The keys of a batch of b keys are i * R / b for i < b: sorted and unique (so
 * Loom sends the caller's arrays without copying them) and spread evenly over
 * the whole key range, hence over every server. Each phase begins with a few
 * untimed warm-up operations, then repeats the operation until --seconds have
 * passed and at least --min-iters were done, or --max-iters were done. Every
 * operation is timed on its own (CLOCK_MONOTONIC).
 *
 * Phases start together: loom_barrier() before each. Each worker then writes
 * its figures into a row of a small "assign" table; after another barrier
 * worker 0 reads every row and prints one line per case:
 *
 *   keys/s   all workers' keys / the longest worker's phase time
 *   MB/s     the same for payload bytes, keys * 8 + keys * width * 4 (keys plus
 *            values: what a push sends and what a pull request and its reply
 *            carry together), in 10^6 bytes
 *   p50/p99  latency of one operation in microseconds, the largest of the
 *            workers' medians and 99th percentiles (p99 of fewer than 100
 *            samples is close to the maximum)
 *
 * Last, worker 0 alone (the others wait in a barrier) measures one-key round
 * trips in the table of the first width: --rtt pulls of key 0, then as many
 * one-key pushes, after 200 untimed ones of each; median and p99.
 *
 * The flags, buffers, keys, phases, statistics and the output lines that
 * start with "case" and "rtt1" are those of raw_zmq, from bench_util.h, so
 * bench/run_pushpull.sh can pair them. */
#include <stdint.h>
#include <stdio.h>

#include <loom/loom.h>

#include "bench_util.h"

#define TABLE_PREFIX "bench_pushpull_w"

static const char usage[] =
    "usage: loom run --servers S --workers W -- bench_pushpull [flags]\n" BENCH_USAGE_FLAGS;

static int fail(const char *what, int rc)
{
    fprintf(stderr, "bench_pushpull: %s: %s\n", what, loom_strerror(rc));
    return 1;
}

/* ---- the benchmark ---- */

struct bench {
    loom_node *node;
    const struct bench_options *o;
    struct bench_data d;
};

enum op { OP_PUSH, OP_PULL };

/* An operation of bench_phase() or bench_rtt(): op of the first n keys of
 * b->d on table t; what names it in an error message. */
struct op_arg {
    struct bench *b;
    loom_table *t;
    enum op op;
    size_t n;
    const char *what;
};

static int run_op(void *arg)
{
    struct op_arg *a = arg;
    struct bench *b = a->b;
    int rc;
    if (a->op == OP_PULL) {
        rc = loom_pull(a->t, b->d.keys, a->n, b->d.out);
    } else {
        loom_ts ts;
        rc = loom_push_async(a->t, b->d.keys, a->n, b->d.vals, &ts);
        if (!rc) rc = loom_wait(b->node, ts);
    }
    return rc ? fail(a->what, rc) : 0;
}

static int sync_workers(void *arg)
{
    struct op_arg *a = arg;
    int rc = loom_barrier(a->b->node);
    return rc ? fail("barrier", rc) : 0;
}

/* One timed phase: warm-up, then timed operations. Fills the PH_* figures at
 * st. */
static int run_phase(struct bench *b, loom_table *t, enum op op, size_t n, double *st)
{
    struct op_arg a = {b, t, op, n, op == OP_PUSH ? "push" : "pull"};
    return bench_phase(b->o, b->d.lat, n, run_op, sync_workers, &a, st) ? 1 : 0;
}

static int run_case(struct bench *b, loom_table *t, loom_table *stats, uint32_t width, uint64_t n)
{
    bench_fill_keys(&b->d, n);
    double st[STAT_FIELDS];
    int rc;
    if (run_phase(b, t, OP_PUSH, (size_t)n, st + ST_PUSH)) return 1;
    if (run_phase(b, t, OP_PULL, (size_t)n, st + ST_PULL)) return 1;
    uint64_t me = (uint64_t)loom_rank(b->node);
    loom_ts ts;
    if ((rc = loom_push_async(stats, &me, 1, st, &ts)) || (rc = loom_wait(b->node, ts)))
        return fail("push stats", rc);
    if ((rc = loom_barrier(b->node))) return fail("barrier", rc);
    if (me != 0) return 0;
    int W = loom_num_workers(b->node);
    double rows[128 * STAT_FIELDS];
    if ((rc = loom_pull_range(stats, 0, (uint64_t)W, rows))) return fail("pull stats", rc);
    bench_print_case(rows, W, width, n);
    return 0;
}

/* Worker 0 alone: one-key round trips, pull then push. */
static int run_rtt(struct bench *b, loom_table *t)
{
    b->d.keys[0] = 0;
    struct op_arg pull = {b, t, OP_PULL, 1, "round trip"}, push = {b, t, OP_PUSH, 1, "round trip"};
    return bench_rtt(b->o, b->d.lat, run_op, &pull, &push) ? 1 : 0;
}

int main(int argc, char **argv)
{
    struct bench_options o;
    if (bench_parse_flags(argc, argv, "bench_pushpull", usage, &o, NULL, NULL)) return 2;
    loom_node *node;
    int rc = loom_init(&node, &argc, &argv);
    if (rc) return fail("cannot join the job", rc);
    if (!loom_is_worker(node)) return loom_serve(node) ? 1 : 0;

    int W = loom_num_workers(node), rank = loom_rank(node);
    if (W > 128) {
        fprintf(stderr, "bench_pushpull: at most 128 workers\n");
        return 2;
    }
    struct bench b = {.node = node, .o = &o};
    if (bench_data_init(&b.d, &o, "bench_pushpull")) return 1;

    loom_table_opts so = LOOM_TABLE_OPTS_DEFAULT;
    so.type = LOOM_F64;
    so.width = STAT_FIELDS;
    so.storage = LOOM_DENSE;
    so.key_end = (uint64_t)W;
    so.consistency = LOOM_ASP;
    so.updater = "assign";
    so.cache = 0;
    loom_table *stats;
    if ((rc = loom_table_open(node, "bench_pushpull_stats", &so, &stats)))
        return fail("open the stats table", rc);

    if (rank == 0) {
        printf("loom: %d servers, %d workers, key range %llu, %.2f s per phase\n",
               loom_num_servers(node), W, (unsigned long long)b.d.range, o.seconds);
        printf("%-4s %5s %8s | push: %8s %12s %10s %10s %10s | pull: %8s %12s %10s %10s %10s\n", "",
               "width", "batch", "iters", "keys/s", "MB/s", "p50_us", "p99_us", "iters", "keys/s",
               "MB/s", "p50_us", "p99_us");
        fflush(stdout);
    }
    loom_table *first = NULL;
    for (int wi = 0; wi < o.nwidths; wi++) {
        loom_table_opts to = LOOM_TABLE_OPTS_DEFAULT;
        to.type = LOOM_F32;
        to.width = o.widths[wi];
        to.storage = LOOM_DENSE;
        to.key_end = b.d.range;
        to.consistency = LOOM_ASP;
        to.updater = "sum";
        to.cache = 0;
        char name[64];
        snprintf(name, sizeof name, TABLE_PREFIX "%u", o.widths[wi]);
        loom_table *t;
        if ((rc = loom_table_open(node, name, &to, &t))) return fail("open the table", rc);
        if (!first) first = t;
        for (int bi = 0; bi < o.nbatches; bi++)
            if (run_case(&b, t, stats, o.widths[wi], o.batches[bi])) return 1;
    }
    if (o.rtt > 0) {
        if ((rc = loom_barrier(node))) return fail("barrier", rc);
        if (rank == 0 && run_rtt(&b, first)) return 1;
    }
    if ((rc = loom_barrier(node))) return fail("barrier", rc);
    bench_data_free(&b.d);
    if ((rc = loom_finalize(node))) return fail("finalize", rc);
    return 0;
}
