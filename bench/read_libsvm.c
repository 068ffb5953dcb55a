/* read_libsvm: how fast loom_libsvm_read() reads a LIBSVM file, against a
 * naive fgets + strtod parser measured in the same run.
 *
 *   read_libsvm FILE [--shards N] [--repeat R] [--ids auto|one|zero]
 *   read_libsvm --synth OUT ROWS       write a synthetic file to measure with
 *
 * Three measurements, each the best of R runs (the file is read once before,
 * so every run reads from the page cache and the figures are parsing speed):
 *
 *   naive       one thread, fgets() + strtol() + strtod() into the same
 *               compressed rows: the baseline a first version usually is;
 *   sequential  the N shares read one after another in this thread, each
 *               timed: per-share MB/s, and the file's bytes over the sum of
 *               the shares' times (N = 1 is the single-reader speed);
 *   threads     the N shares read at once by N threads: the file's bytes over
 *               the wall time (what N workers on one machine would see).
 *
 * MB/s are 10^6 bytes of file per second. With --ids auto (the default) every
 * share also scans the whole file for an id 0; --ids one skips that scan.
 *
 * The synthetic file has ROWS rows of 10 to 70 features with ids below 10^6,
 * ascending, 1-based, and values with 1 to 7 significant digits such as
 * 0.25, 1.5e-3 and 0.123457: unlike a9a (all values "1") it exercises the
 * float parsing. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loom/data.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *msg)
{
    fprintf(stderr, "read_libsvm: %s\n", msg);
    exit(1);
}

static void *grow(void *p, size_t bytes)
{
    void *q = realloc(p, bytes);
    if (!q) die("out of memory");
    return q;
}

/* The naive parser: what one writes first. Returns rows; *nnz_out the nnz. */
static size_t naive_read(const char *path, size_t *nnz_out)
{
    FILE *f = fopen(path, "r");
    if (!f) die("cannot open the file");
    size_t cap = 1 << 20, nnz = 0, rows = 0, rcap = 1 << 16;
    uint64_t *idx = malloc(cap * sizeof *idx);
    float *val = malloc(cap * sizeof *val);
    double *label = malloc(rcap * sizeof *label);
    size_t *row = malloc((rcap + 1) * sizeof *row);
    static char line[1 << 20];
    if (!idx || !val || !label || !row) die("out of memory");
    row[0] = 0;
    while (fgets(line, sizeof line, f)) {
        char *p = line, *q;
        double y = strtod(p, &q);
        if (q == p) continue; /* blank line */
        for (p = q;;) {
            unsigned long long id = strtoull(p, &q, 10);
            if (q == p || *q != ':') break;
            p = q + 1;
            double v = strtod(p, &q);
            p = q;
            if (nnz == cap) {
                cap *= 2;
                idx = grow(idx, cap * sizeof *idx);
                val = grow(val, cap * sizeof *val);
            }
            idx[nnz] = id - 1;
            val[nnz++] = (float)v;
        }
        if (rows == rcap) {
            rcap *= 2;
            label = grow(label, rcap * sizeof *label);
            row = grow(row, (rcap + 1) * sizeof *row);
        }
        label[rows] = y;
        row[++rows] = nnz;
    }
    fclose(f);
    free(idx);
    free(val);
    free(label);
    free(row);
    *nnz_out = nnz;
    return rows;
}

typedef struct job {
    const char *path;
    int shard, nshards;
    loom_libsvm_opts opts;
    loom_dataset *d;
    double seconds;
} job;

static void *read_one(void *arg)
{
    job *j = arg;
    char err[512];
    double t0 = now();
    if (loom_libsvm_read(j->path, j->shard, j->nshards, &j->opts, &j->d, err, sizeof err)) die(err);
    j->seconds = now() - t0;
    return NULL;
}

static void synth(const char *out, long rows)
{
    FILE *f = fopen(out, "w");
    if (!f) die("cannot create the output file");
    uint64_t s = 0x9e3779b97f4a7c15ULL;
#define NEXT() (s ^= s << 13, s ^= s >> 7, s ^= s << 17, s)
    for (long r = 0; r < rows; r++) {
        fputs(NEXT() % 4 ? "-1" : "+1", f);
        int k = 10 + (int)(NEXT() % 61);
        uint64_t id = 0;
        for (int i = 0; i < k; i++) {
            id += 1 + NEXT() % (1000000 / 70);
            int digits = 1 + (int)(NEXT() % 7);
            double v = (double)(NEXT() % 1000000) / 1e6;
            if (NEXT() % 8 == 0) v *= 1e-3;
            fprintf(f, " %" PRIu64 ":%.*g", id, digits, v);
        }
        fputc('\n', f);
    }
#undef NEXT
    if (fclose(f)) die("cannot write the output file");
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    int nshards = 1, repeat = 5;
    loom_libsvm_opts opts = LOOM_LIBSVM_OPTS_DEFAULT;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--synth") && i + 2 < argc) {
            synth(argv[i + 1], atol(argv[i + 2]));
            return 0;
        } else if (!strcmp(argv[i], "--shards") && i + 1 < argc) {
            nshards = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
            repeat = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--ids") && i + 1 < argc) {
            i++;
            opts.ids = !strcmp(argv[i], "one")    ? LOOM_IDS_ONE_BASED
                       : !strcmp(argv[i], "zero") ? LOOM_IDS_ZERO_BASED
                                                  : LOOM_IDS_AUTO;
        } else if (argv[i][0] != '-' && !path) {
            path = argv[i];
        } else {
            die("usage: read_libsvm FILE [--shards N] [--repeat R] [--ids auto|one|zero]\n"
                "       read_libsvm --synth OUT ROWS");
        }
    }
    if (!path || nshards < 1 || repeat < 1) die("need a FILE, N >= 1 and R >= 1");

    job *jobs = calloc((size_t)nshards, sizeof *jobs);
    pthread_t *threads = calloc((size_t)nshards, sizeof *threads);
    double *best_share = calloc((size_t)nshards, sizeof *best_share);
    uint64_t *share_bytes = calloc((size_t)nshards, sizeof *share_bytes);
    if (!jobs || !threads || !best_share || !share_bytes) die("out of memory");
    for (int i = 0; i < nshards; i++) jobs[i] = (job){path, i, nshards, opts, NULL, 0};

    /* Warm the page cache and learn the totals. */
    read_one(&jobs[0]);
    loom_dataset_free(jobs[0].d);
    size_t bytes = 0, rows = 0, nnz = 0;
    double best_naive = 1e30, best_seq = 1e30, best_thr = 1e30;
    size_t naive_rows = 0, naive_nnz = 0;
    for (int r = 0; r < repeat; r++) {
        double t0 = now();
        naive_rows = naive_read(path, &naive_nnz);
        double t = now() - t0;
        if (t < best_naive) best_naive = t;

        double sum = 0;
        bytes = rows = nnz = 0;
        for (int i = 0; i < nshards; i++) {
            read_one(&jobs[i]);
            sum += jobs[i].seconds;
            if (r == 0 || jobs[i].seconds < best_share[i]) best_share[i] = jobs[i].seconds;
            share_bytes[i] = jobs[i].d->bytes;
            bytes += jobs[i].d->bytes;
            rows += jobs[i].d->rows;
            nnz += jobs[i].d->nnz;
            loom_dataset_free(jobs[i].d);
        }
        if (sum < best_seq) best_seq = sum;

        t0 = now();
        for (int i = 0; i < nshards; i++)
            if (pthread_create(&threads[i], NULL, read_one, &jobs[i])) die("pthread_create");
        for (int i = 0; i < nshards; i++) pthread_join(threads[i], NULL);
        t = now() - t0;
        if (t < best_thr) best_thr = t;
        for (int i = 0; i < nshards; i++) loom_dataset_free(jobs[i].d);
    }

    printf("file %s: %zu bytes, %zu rows, %zu nnz; best of %d runs, ids %s\n", path, bytes, rows,
           nnz, repeat,
           opts.ids == LOOM_IDS_AUTO        ? "auto"
           : opts.ids == LOOM_IDS_ONE_BASED ? "one"
                                            : "zero");
    if (naive_rows != rows || naive_nnz != nnz)
        printf("  (naive parser disagrees: %zu rows, %zu nnz)\n", naive_rows, naive_nnz);
    printf("naive fgets+strtod   %8.1f MB/s\n", (double)bytes / best_naive / 1e6);
    for (int i = 0; i < nshards; i++)
        printf("share %d/%d           %8.1f MB/s  (%" PRIu64 " bytes, %.2f ms)\n", i, nshards,
               (double)share_bytes[i] / best_share[i] / 1e6, share_bytes[i], best_share[i] * 1e3);
    printf("loom sequential      %8.1f MB/s  (%.1fx naive)\n", (double)bytes / best_seq / 1e6,
           best_naive / best_seq);
    printf("loom %2d threads      %8.1f MB/s  (%.1fx naive)\n", nshards,
           (double)bytes / best_thr / 1e6, best_naive / best_thr);
    free(jobs);
    free(threads);
    free(best_share);
    free(share_bytes);
    return 0;
}
