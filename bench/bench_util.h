/* bench_util.h: what the push/pull benchmark programs share.
 *
 * bench_pushpull (Loom) and raw_zmq (its baseline in plain ZeroMQ) must run
 * the same cases in the same way and print the same "case" and "rtt1" lines,
 * which bench/run_pushpull.sh pairs: so their common flags, buffers, keys,
 * timed phases, statistics and output lines are defined once, here.
 * bench/CMakeLists.txt builds every C file of bench/ into its own executable,
 * so this is a header of static inline functions (a program that does not use
 * one gets no warning) rather than a library. */
#ifndef LOOM_BENCH_UTIL_H
#define LOOM_BENCH_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_LIST    16
#define MAX_SAMPLES 200000 /* latency samples kept per phase (and the --max-iters bound) */

/* A worker's figures for one case: those of its push phase, then those of its
 * pull phase, each PH_FIELDS doubles in the order of the PH_* indices. */
enum { PH_KEYS, PH_TIME, PH_P50, PH_P99, PH_ITERS, PH_FIELDS };
enum { ST_PUSH = 0, ST_PULL = PH_FIELDS, STAT_FIELDS = 2 * PH_FIELDS };

/* The flags both programs take. */
struct bench_options {
    uint32_t widths[MAX_LIST];
    int nwidths;
    uint64_t batches[MAX_LIST];
    int nbatches;
    double seconds;
    long min_iters, max_iters, rtt;
    uint64_t key_range; /* keys in [0, key_range); 0: the largest batch */
};

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- flags ---- */

/* The lines of a usage message about the common flags. */
#define BENCH_USAGE_FLAGS                                                                          \
    "  --widths LIST     row widths, comma-separated (default 1,64)\n"                             \
    "  --batches LIST    keys per operation, comma-separated (default "                            \
    "1,100,10000,100000,1000000)\n"                                                                \
    "  --seconds X       time budget of each timed phase (default 0.5)\n"                          \
    "  --min-iters N     timed operations per phase at least (default 3)\n"                        \
    "  --max-iters N     timed operations per phase at most (default 100000)\n"                    \
    "  --rtt N           one-key round trips measured by worker 0 (default 2000; 0 = none)\n"      \
    "  --key-range N     the table's keys are [0, N), batches spread over them (default: the\n"    \
    "                    largest batch)\n"

static inline int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
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
static inline int parse_list(const char *s, uint64_t lo, uint64_t hi, uint64_t *out, int *n)
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

/* What a parser of flags made of a flag. */
enum bench_flag {
    BENCH_FLAG_OTHER,  /* not one of its flags */
    BENCH_FLAG_SWITCH, /* took the flag alone */
    BENCH_FLAG_VALUE,  /* took the flag and its value */
    BENCH_FLAG_BAD,    /* one of its flags, but the value is bad */
};

/* A program's own flags, beside the common ones: called with each flag f
 * (other than -h and --help) and the argument after it, v, which is NULL when
 * f is the last argument (a flag that needs a value returns BENCH_FLAG_OTHER
 * then). */
typedef enum bench_flag bench_flag_fn(void *arg, const char *f, const char *v);

/* The common flags. */
static inline enum bench_flag bench_common_flag(struct bench_options *o, const char *f,
                                                const char *v)
{
    uint64_t u;
    if (!strcmp(f, "--widths")) {
        uint64_t w[MAX_LIST];
        if (parse_list(v, 1, 4096, w, &o->nwidths)) return BENCH_FLAG_BAD;
        for (int k = 0; k < o->nwidths; k++) o->widths[k] = (uint32_t)w[k];
    } else if (!strcmp(f, "--batches")) {
        if (parse_list(v, 1, 10000000, o->batches, &o->nbatches)) return BENCH_FLAG_BAD;
    } else if (!strcmp(f, "--seconds")) {
        char *end;
        errno = 0;
        o->seconds = strtod(v, &end);
        if (errno || *end || end == v || !(o->seconds >= 0 && o->seconds <= 3600))
            return BENCH_FLAG_BAD;
    } else if (!strcmp(f, "--min-iters")) {
        if (parse_u64(v, 1, MAX_SAMPLES, &u)) return BENCH_FLAG_BAD;
        o->min_iters = (long)u;
    } else if (!strcmp(f, "--max-iters")) {
        if (parse_u64(v, 1, MAX_SAMPLES, &u)) return BENCH_FLAG_BAD;
        o->max_iters = (long)u;
    } else if (!strcmp(f, "--rtt")) {
        if (parse_u64(v, 0, MAX_SAMPLES, &u)) return BENCH_FLAG_BAD;
        o->rtt = (long)u;
    } else if (!strcmp(f, "--key-range")) {
        if (parse_u64(v, 1, (uint64_t)1 << 32, &o->key_range)) return BENCH_FLAG_BAD;
    } else {
        return BENCH_FLAG_OTHER;
    }
    return BENCH_FLAG_VALUE;
}

/* Sets the common options to their defaults and parses argv: -h or --help
 * prints usage and exits, own(own_arg, ...) (if not NULL) is asked first about
 * every other flag, then the common flags. Returns 0, or -1 having said why,
 * prefixed with "prog: ". */
static inline int bench_parse_flags(int argc, char **argv, const char *prog, const char *usage,
                                    struct bench_options *o, bench_flag_fn *own, void *own_arg)
{
    *o = (struct bench_options){.widths = {1, 64},
                                .nwidths = 2,
                                .batches = {1, 100, 10000, 100000, 1000000},
                                .nbatches = 5,
                                .seconds = 0.5,
                                .min_iters = 3,
                                .max_iters = 100000,
                                .rtt = 2000};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            fputs(usage, stdout);
            exit(0);
        }
        enum bench_flag r = own ? own(own_arg, f, v) : BENCH_FLAG_OTHER;
        if (r == BENCH_FLAG_SWITCH) continue;
        if (!v) {
            fprintf(stderr, "%s: unknown flag or missing value: %s\n%s", prog, f, usage);
            return -1;
        }
        i++;
        if (r == BENCH_FLAG_OTHER) r = bench_common_flag(o, f, v);
        if (r == BENCH_FLAG_OTHER) {
            fprintf(stderr, "%s: unknown flag %s\n%s", prog, f, usage);
            return -1;
        }
        if (r == BENCH_FLAG_BAD) {
            fprintf(stderr, "%s: bad value for %s: %s\n%s", prog, f, v, usage);
            return -1;
        }
    }
    if (o->min_iters > o->max_iters) {
        fprintf(stderr, "%s: --min-iters is larger than --max-iters\n", prog);
        return -1;
    }
    for (int i = 0; o->key_range && i < o->nbatches; i++)
        if (o->batches[i] > o->key_range) {
            fprintf(stderr, "%s: a batch of %llu keys does not fit in --key-range %llu\n", prog,
                    (unsigned long long)o->batches[i], (unsigned long long)o->key_range);
            return -1;
        }
    return 0;
}

/* ---- a worker's buffers and keys ---- */

static inline uint64_t bench_max_batch(const struct bench_options *o)
{
    uint64_t max_batch = 0;
    for (int i = 0; i < o->nbatches; i++)
        if (o->batches[i] > max_batch) max_batch = o->batches[i];
    return max_batch;
}

static inline uint32_t bench_max_width(const struct bench_options *o)
{
    uint32_t max_width = 0;
    for (int i = 0; i < o->nwidths; i++)
        if (o->widths[i] > max_width) max_width = o->widths[i];
    return max_width;
}

struct bench_data {
    uint64_t range;    /* keys are in [0, range): --key-range, or the largest batch */
    uint64_t *keys;    /* the keys of a batch */
    float *vals, *out; /* rows pushed, rows pulled: room for the largest batch of the widest */
    double *lat;       /* latency samples, MAX_SAMPLES */
};

/* Allocates the buffers, every page touched now, not inside a timed
 * operation. Returns 0, or -1 having said "prog: out of memory". */
static inline int bench_data_init(struct bench_data *d, const struct bench_options *o,
                                  const char *prog)
{
    uint64_t max_batch = bench_max_batch(o);
    uint32_t max_width = bench_max_width(o);
    d->range = o->key_range ? o->key_range : max_batch;
    d->keys = malloc(max_batch * sizeof *d->keys);
    d->vals = malloc(max_batch * max_width * sizeof *d->vals);
    d->out = malloc(max_batch * max_width * sizeof *d->out);
    d->lat = malloc(MAX_SAMPLES * sizeof *d->lat);
    if (!d->keys || !d->vals || !d->out || !d->lat) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return -1;
    }
    for (uint64_t i = 0; i < max_batch * max_width; i++) d->vals[i] = 1.0f / (float)(1 + i % 7);
    memset(d->out, 0, max_batch * max_width * sizeof *d->out);
    return 0;
}

static inline void bench_data_free(struct bench_data *d)
{
    free(d->keys);
    free(d->vals);
    free(d->out);
    free(d->lat);
}

/* The keys of a batch of n: i * range / n for i < n, sorted, unique and
 * spread evenly over the key range. */
static inline void bench_fill_keys(struct bench_data *d, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) d->keys[i] = (uint64_t)((unsigned __int128)i * d->range / n);
}

/* ---- timed operations and their statistics ---- */

/* One operation, or the meeting of the workers: returns 0, or nonzero having
 * said why (which ends the phase). */
typedef int bench_op_fn(void *arg);

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* q-quantile (nearest rank) of n samples; sorts them. */
static inline double quantile(double *v, long n, double q)
{
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    long i = (long)(q * (double)n + 0.999999) - 1;
    if (i < 0) i = 0;
    if (i >= n) i = n - 1;
    return v[i];
}

/* One timed phase of operations of n keys each: a few untimed warm-up op(arg),
 * sync(arg), then op(arg), each timed on its own, until o->seconds have passed
 * and at least o->min_iters were done, or o->max_iters were done. Fills
 * st[PH_KEYS] to st[PH_ITERS]. Returns 0, or the first nonzero result of op or
 * sync. */
static inline int bench_phase(const struct bench_options *o, double *lat, size_t n, bench_op_fn *op,
                              bench_op_fn *sync, void *arg, double *st)
{
    long warm = n >= 1000000 ? 1 : n >= 100000 ? 5 : 20;
    int rc;
    for (long i = 0; i < warm; i++)
        if ((rc = op(arg))) return rc;
    if ((rc = sync(arg))) return rc;
    long iters = 0;
    double start = now_s(), t1 = start;
    while (iters < o->max_iters && (iters < o->min_iters || t1 - start < o->seconds)) {
        double t0 = now_s();
        if ((rc = op(arg))) return rc;
        t1 = now_s();
        lat[iters++] = t1 - t0;
    }
    st[PH_KEYS] = (double)iters * (double)n;
    st[PH_TIME] = t1 - start;
    st[PH_P50] = quantile(lat, iters, 0.50);
    st[PH_P99] = quantile(lat, iters, 0.99);
    st[PH_ITERS] = (double)iters;
    return 0;
}

/* The figures of one phase over W workers, whose rows of STAT_FIELDS follow
 * each other at rows; the phase's are at base (ST_PUSH or ST_PULL). */
static inline void bench_print_phase(const double *rows, int W, int base, uint32_t width)
{
    double keys = 0, time = 0, p50 = 0, p99 = 0, iters = 0;
    for (int w = 0; w < W; w++) {
        const double *r = rows + (size_t)w * STAT_FIELDS + base;
        keys += r[PH_KEYS];
        if (r[PH_TIME] > time) time = r[PH_TIME];
        if (r[PH_P50] > p50) p50 = r[PH_P50];
        if (r[PH_P99] > p99) p99 = r[PH_P99];
        iters += r[PH_ITERS];
    }
    double kps = time > 0 ? keys / time : 0;
    double mbps = kps * (8.0 + 4.0 * width) / 1e6;
    printf(" %8.0f %12.0f %10.1f %10.1f %10.1f", iters, kps, mbps, p50 * 1e6, p99 * 1e6);
}

/* The "case" line of rows width and batches of n keys, from the figures of
 * W workers (see bench_print_phase). */
static inline void bench_print_case(const double *rows, int W, uint32_t width, uint64_t n)
{
    printf("case %5u %8llu", width, (unsigned long long)n);
    bench_print_phase(rows, W, ST_PUSH, width);
    bench_print_phase(rows, W, ST_PULL, width);
    printf("\n");
    fflush(stdout);
}

/* One-key round trips, pull then push: for each, 200 untimed op(arg), then
 * o->rtt timed ones, and an "rtt1" line with their median and 99th
 * percentile. arg is pull_arg, then push_arg. Returns 0, or the first nonzero
 * result of op. */
static inline int bench_rtt(const struct bench_options *o, double *lat, bench_op_fn *op,
                            void *pull_arg, void *push_arg)
{
    const char *names[2] = {"pull", "push"};
    void *args[2] = {pull_arg, push_arg};
    for (int k = 0; k < 2; k++) {
        int rc;
        for (int i = 0; i < 200; i++)
            if ((rc = op(args[k]))) return rc;
        for (long i = 0; i < o->rtt; i++) {
            double t0 = now_s();
            if ((rc = op(args[k]))) return rc;
            lat[i] = now_s() - t0;
        }
        double p50 = quantile(lat, o->rtt, 0.5), p99 = quantile(lat, o->rtt, 0.99);
        printf("rtt1 %s %ld %.1f %.1f\n", names[k], o->rtt, p50 * 1e6, p99 * 1e6);
    }
    fflush(stdout);
    return 0;
}

#endif
