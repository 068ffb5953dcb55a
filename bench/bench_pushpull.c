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
 * The output lines that start with "case" and "rtt1" have the same layout as
 * those of raw_zmq, so bench/run_pushpull.sh can pair them. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <loom/loom.h>

#define MAX_LIST     16
#define MAX_SAMPLES  200000 /* latency samples kept per phase (and the --max-iters bound) */
#define STAT_FIELDS  10
#define TABLE_PREFIX "bench_pushpull_w"

struct options {
    uint32_t widths[MAX_LIST];
    int nwidths;
    uint64_t batches[MAX_LIST];
    int nbatches;
    double seconds;
    long min_iters, max_iters, rtt;
};

/* Figures of one worker for one case, as stored in the stats table. */
enum {
    ST_PUSH_KEYS,
    ST_PUSH_TIME,
    ST_PUSH_P50,
    ST_PUSH_P99,
    ST_PUSH_ITERS,
    ST_PULL_KEYS,
    ST_PULL_TIME,
    ST_PULL_P50,
    ST_PULL_P99,
    ST_PULL_ITERS,
};

static const char usage[] =
    "usage: loom run --servers S --workers W -- bench_pushpull [flags]\n"
    "  --widths LIST     row widths, comma-separated (default 1,64)\n"
    "  --batches LIST    keys per operation, comma-separated (default "
    "1,100,10000,100000,1000000)\n"
    "  --seconds X       time budget of each timed phase (default 0.5)\n"
    "  --min-iters N     timed operations per phase at least (default 3)\n"
    "  --max-iters N     timed operations per phase at most (default 100000)\n"
    "  --rtt N           one-key round trips measured by worker 0 (default 2000; 0 = none)\n";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "bench_pushpull: %s: %s\n", what, loom_strerror(rc));
    return 1;
}

/* ---- flags ---- */

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    if (*s < '0' || *s > '9') return -1;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* A comma-separated list of numbers in [lo, hi]; empty items are errors. */
static int parse_list(const char *s, uint64_t lo, uint64_t hi, uint64_t *out, int *n)
{
    char buf[512];
    if (strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    *n = 0;
    for (char *tok = buf, *comma;; tok = comma + 1) {
        comma = strchr(tok, ',');
        if (comma) *comma = '\0';
        if (*n == MAX_LIST || parse_u64(tok, lo, hi, &out[*n])) return -1;
        (*n)++;
        if (!comma) return 0;
    }
}

static int parse_flags(int argc, char **argv, struct options *o)
{
    *o = (struct options){.widths = {1, 64},
                          .nwidths = 2,
                          .batches = {1, 100, 10000, 100000, 1000000},
                          .nbatches = 5,
                          .seconds = 0.5,
                          .min_iters = 3,
                          .max_iters = 100000,
                          .rtt = 2000};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t u;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            fputs(usage, stdout);
            exit(0);
        }
        if (!v) {
            fprintf(stderr, "bench_pushpull: unknown flag or missing value: %s\n%s", f, usage);
            return -1;
        }
        i++;
        if (!strcmp(f, "--widths")) {
            uint64_t w[MAX_LIST];
            if (parse_list(v, 1, 4096, w, &o->nwidths)) goto bad;
            for (int k = 0; k < o->nwidths; k++) o->widths[k] = (uint32_t)w[k];
        } else if (!strcmp(f, "--batches")) {
            if (parse_list(v, 1, 10000000, o->batches, &o->nbatches)) goto bad;
        } else if (!strcmp(f, "--seconds")) {
            char *end;
            errno = 0;
            o->seconds = strtod(v, &end);
            if (errno || *end || end == v || !(o->seconds >= 0 && o->seconds <= 3600)) goto bad;
        } else if (!strcmp(f, "--min-iters")) {
            if (parse_u64(v, 1, MAX_SAMPLES, &u)) goto bad;
            o->min_iters = (long)u;
        } else if (!strcmp(f, "--max-iters")) {
            if (parse_u64(v, 1, MAX_SAMPLES, &u)) goto bad;
            o->max_iters = (long)u;
        } else if (!strcmp(f, "--rtt")) {
            if (parse_u64(v, 0, MAX_SAMPLES, &u)) goto bad;
            o->rtt = (long)u;
        } else {
            fprintf(stderr, "bench_pushpull: unknown flag %s\n%s", f, usage);
            return -1;
        }
        continue;
    bad:
        fprintf(stderr, "bench_pushpull: bad value for %s: %s\n%s", f, v, usage);
        return -1;
    }
    if (o->min_iters > o->max_iters) {
        fprintf(stderr, "bench_pushpull: --min-iters is larger than --max-iters\n");
        return -1;
    }
    return 0;
}

/* ---- latency statistics ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* q-quantile (nearest rank) of n samples; sorts them. */
static double quantile(double *v, long n, double q)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    long i = (long)(q * (double)n + 0.999999) - 1;
    if (i < 0) i = 0;
    if (i >= n) i = n - 1;
    return v[i];
}

/* ---- the benchmark ---- */

struct bench {
    loom_node *node;
    const struct options *o;
    uint64_t range; /* keys are in [0, range) */
    uint64_t *keys;
    float *vals, *out;
    double *lat;
};

enum op { OP_PUSH, OP_PULL };

static int run_op(struct bench *b, loom_table *t, enum op op, size_t n)
{
    if (op == OP_PULL) return loom_pull(t, b->keys, n, b->out);
    loom_ts ts;
    int rc = loom_push_async(t, b->keys, n, b->vals, &ts);
    return rc ? rc : loom_wait(b->node, ts);
}

/* One timed phase: warm-up, then timed operations. Fills keys, time, p50, p99
 * and iters (in that order) at st. */
static int run_phase(struct bench *b, loom_table *t, enum op op, size_t n, double *st)
{
    const struct options *o = b->o;
    long warm = n >= 1000000 ? 1 : n >= 100000 ? 5 : 20;
    int rc;
    for (long i = 0; i < warm; i++)
        if ((rc = run_op(b, t, op, n))) return fail(op == OP_PUSH ? "push" : "pull", rc);
    if ((rc = loom_barrier(b->node))) return fail("barrier", rc);
    long iters = 0;
    double start = now_s(), t1 = start;
    while (iters < o->max_iters && (iters < o->min_iters || t1 - start < o->seconds)) {
        double t0 = now_s();
        if ((rc = run_op(b, t, op, n))) return fail(op == OP_PUSH ? "push" : "pull", rc);
        t1 = now_s();
        b->lat[iters++] = t1 - t0;
    }
    st[0] = (double)iters * (double)n;
    st[1] = t1 - start;
    st[2] = quantile(b->lat, iters, 0.50);
    st[3] = quantile(b->lat, iters, 0.99);
    st[4] = (double)iters;
    return 0;
}

static void print_phase(const double *rows, int W, int base, uint32_t width)
{
    double keys = 0, time = 0, p50 = 0, p99 = 0, iters = 0;
    for (int w = 0; w < W; w++) {
        const double *r = rows + (size_t)w * STAT_FIELDS + base;
        keys += r[0];
        if (r[1] > time) time = r[1];
        if (r[2] > p50) p50 = r[2];
        if (r[3] > p99) p99 = r[3];
        iters += r[4];
    }
    double kps = time > 0 ? keys / time : 0;
    double mbps = kps * (8.0 + 4.0 * width) / 1e6;
    printf(" %8.0f %12.0f %10.1f %10.1f %10.1f", iters, kps, mbps, p50 * 1e6, p99 * 1e6);
}

static int run_case(struct bench *b, loom_table *t, loom_table *stats, uint32_t width, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) b->keys[i] = (uint64_t)((unsigned __int128)i * b->range / n);
    double st[STAT_FIELDS];
    int rc;
    if (run_phase(b, t, OP_PUSH, (size_t)n, st + ST_PUSH_KEYS)) return 1;
    if (run_phase(b, t, OP_PULL, (size_t)n, st + ST_PULL_KEYS)) return 1;
    uint64_t me = (uint64_t)loom_rank(b->node);
    loom_ts ts;
    if ((rc = loom_push_async(stats, &me, 1, st, &ts)) || (rc = loom_wait(b->node, ts)))
        return fail("push stats", rc);
    if ((rc = loom_barrier(b->node))) return fail("barrier", rc);
    if (me != 0) return 0;
    int W = loom_num_workers(b->node);
    double rows[128 * STAT_FIELDS];
    if ((rc = loom_pull_range(stats, 0, (uint64_t)W, rows))) return fail("pull stats", rc);
    printf("case %5u %8llu", width, (unsigned long long)n);
    print_phase(rows, W, ST_PUSH_KEYS, width);
    print_phase(rows, W, ST_PULL_KEYS, width);
    printf("\n");
    fflush(stdout);
    return 0;
}

/* Worker 0 alone: one-key round trips, pull then push. */
static int run_rtt(struct bench *b, loom_table *t)
{
    b->keys[0] = 0;
    const char *names[2] = {"pull", "push"};
    enum op ops[2] = {OP_PULL, OP_PUSH};
    for (int k = 0; k < 2; k++) {
        int rc;
        for (int i = 0; i < 200; i++)
            if ((rc = run_op(b, t, ops[k], 1))) return fail("round trip", rc);
        for (long i = 0; i < b->o->rtt; i++) {
            double t0 = now_s();
            if ((rc = run_op(b, t, ops[k], 1))) return fail("round trip", rc);
            b->lat[i] = now_s() - t0;
        }
        double p50 = quantile(b->lat, b->o->rtt, 0.5), p99 = quantile(b->lat, b->o->rtt, 0.99);
        printf("rtt1 %s %ld %.1f %.1f\n", names[k], b->o->rtt, p50 * 1e6, p99 * 1e6);
    }
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    struct options o;
    if (parse_flags(argc, argv, &o)) return 2;
    loom_node *node;
    int rc = loom_init(&node, &argc, &argv);
    if (rc) return fail("cannot join the job", rc);
    if (!loom_is_worker(node)) return loom_serve(node) ? 1 : 0;

    int W = loom_num_workers(node), rank = loom_rank(node);
    if (W > 128) {
        fprintf(stderr, "bench_pushpull: at most 128 workers\n");
        return 2;
    }
    uint64_t max_batch = 0;
    uint32_t max_width = 0;
    for (int i = 0; i < o.nbatches; i++)
        if (o.batches[i] > max_batch) max_batch = o.batches[i];
    for (int i = 0; i < o.nwidths; i++)
        if (o.widths[i] > max_width) max_width = o.widths[i];

    struct bench b = {.node = node, .o = &o, .range = max_batch};
    b.keys = malloc(max_batch * sizeof *b.keys);
    b.vals = malloc(max_batch * max_width * sizeof *b.vals);
    b.out = malloc(max_batch * max_width * sizeof *b.out);
    b.lat = malloc(MAX_SAMPLES * sizeof *b.lat);
    if (!b.keys || !b.vals || !b.out || !b.lat) {
        fprintf(stderr, "bench_pushpull: out of memory\n");
        return 1;
    }
    /* Touch every page now, not inside a timed operation. */
    for (uint64_t i = 0; i < max_batch * max_width; i++) b.vals[i] = 1.0f / (float)(1 + i % 7);
    memset(b.out, 0, max_batch * max_width * sizeof *b.out);

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
               loom_num_servers(node), W, (unsigned long long)b.range, o.seconds);
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
        to.key_end = b.range;
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
    free(b.keys);
    free(b.vals);
    free(b.out);
    free(b.lat);
    if ((rc = loom_finalize(node))) return fail("finalize", rc);
    return 0;
}
