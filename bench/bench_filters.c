/* bench_filters: what each filter chain (src/ps/filter.h) saves in bytes and
 * costs in CPU, on three synthetic messages shaped like the applications'
 * traffic (docs/BENCHMARKS.md, "Filters"):
 *
 *   lr    a sparse logistic-regression gradient push: 100000 f32 rows of width 1,
 *         keys 1 to 20 apart, 60% of the values 0 and 80% of the weights 0;
 *   lda   word-topic count deltas: 200 i32 rows of width 1000, 1% non-zero
 *         (small counts), as one LDA clock pushes them;
 *   mf    factor rows: 5000 f32 rows of width 16, every value non-zero.
 *
 * For every chain: the raw bytes (8 per key plus the values) over the bytes on
 * the wire for the same message sent again and again (so a key cache sends
 * digests after the first), and encode and decode speed in raw MB/s, each
 * timed for at least --seconds (default 0.3). One process, one thread: the
 * ratios are what the filters do, not what a network gains end to end.
 *
 *   bench_filters [--seconds S] */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loom/error.h"
#include "ps/filter.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double uniform(void)
{
    return (double)(rng() >> 11) * 0x1.0p-53;
}

typedef struct message {
    const char *name;
    loom_type type;
    size_t width, n;
    uint64_t *keys;
    void *vals, *weights;
} message;

static void make_messages(message *m)
{
    m[0] = (message){"lr", LOOM_F32, 1, 100000, NULL, NULL, NULL};
    m[1] = (message){"lda", LOOM_I32, 1000, 200, NULL, NULL, NULL};
    m[2] = (message){"mf", LOOM_F32, 16, 5000, NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        m[i].keys = malloc(m[i].n * sizeof *m[i].keys);
        m[i].vals = calloc(m[i].n * m[i].width, 4);
        /* Weights for kkt: the L1 problem's only. */
        m[i].weights = i == 0 ? calloc(m[i].n * m[i].width, 4) : NULL;
        uint64_t key = 0;
        for (size_t k = 0; k < m[i].n; k++) m[i].keys[k] = key += 1 + rng() % (i == 1 ? 3 : 20);
    }
    float *g = m[0].vals, *w = m[0].weights;
    for (size_t k = 0; k < m[0].n; k++) {
        g[k] = uniform() < 0.6 ? 0.0f : (float)((uniform() - 0.5) * 2.0);
        w[k] = uniform() < 0.8 ? 0.0f : (float)(uniform() - 0.5);
    }
    int32_t *c = m[1].vals;
    for (size_t k = 0; k < m[1].n * m[1].width; k++)
        c[k] = uniform() < 0.01 ? (int32_t)(rng() % 5) - 2 : 0;
    float *f = m[2].vals;
    for (size_t k = 0; k < m[2].n * m[2].width; k++) f[k] = (float)((uniform() - 0.5) * 0.2);
}

/* One chain on one message: prints a line, or nothing if the chain does not
 * fit the message's type. */
static void run(const message *m, const char *spec_text, double seconds)
{
    filter_spec spec;
    char err[200];
    if (filter_spec_parse(spec_text, &spec, err, sizeof err)) {
        fprintf(stderr, "bench_filters: %s\n", err);
        exit(1);
    }
    if (spec.on[FILTER_KKT] && !m->weights) return; /* kkt needs an L1 problem's weights */
    filter_chain *s = NULL, *r = NULL;
    if (filter_chain_create(&spec, FILTER_PUSH, m->type, m->width, 1, &s, err, sizeof err)) return;
    if (filter_chain_create(&spec, FILTER_PUSH, m->type, m->width, 2, &r, err, sizeof err)) exit(1);
    filter_msg msg = {.keys = m->keys, .vals = m->vals, .n = m->n, .weights = m->weights};
    double raw = (double)m->n * (8 + 4 * (double)m->width);
    long sends = 0;
    double wire = 0, t_enc = 0, t_dec = 0;
    while (t_enc + t_dec < seconds || sends < 3) {
        uint8_t *buf;
        size_t len;
        double t0 = now();
        if (filter_chain_encode(s, &msg, &buf, &len)) exit(1);
        double t1 = now();
        uint64_t *keys, digest;
        void *vals;
        size_t n;
        if (filter_chain_decode(r, buf, len, SIZE_MAX, &keys, &vals, &n, &digest)) exit(1);
        double t2 = now();
        t_enc += t1 - t0;
        t_dec += t2 - t1;
        if (sends > 0) wire += (double)len; /* the repeats: a key cache's digests */
        sends++;
        free(buf);
        free(keys);
        free(vals);
    }
    wire /= (double)(sends - 1);
    printf("%-5s %-26s %10.0f %10.0f %8.2fx %9.0f %9.0f\n", m->name,
           *spec_text ? spec_text : "(none)", raw, wire, raw / wire,
           raw * (double)sends / t_enc / 1e6, raw * (double)sends / t_dec / 1e6);
    filter_chain_destroy(s);
    filter_chain_destroy(r);
}

int main(int argc, char **argv)
{
    double seconds = 0.3;
    if (argc == 3 && !strcmp(argv[1], "--seconds"))
        seconds = atof(argv[2]);
    else if (argc != 1) {
        fprintf(stderr, "usage: bench_filters [--seconds S]\n");
        return 2;
    }
    static const char *const specs[] = {
        "",
        "keycache",
        "lz4",
        "zstd",
        "keycache,zstd",
        "quant:16",
        "quant:8",
        "quant:8,keycache,lz4",
        "kkt:0.9",
        "kkt:0.9,keycache,zstd",
        "skip:0.5",
        "sigmod:0.5,keycache,zstd",
    };
    message m[3];
    make_messages(m);
    printf("%-5s %-26s %10s %10s %9s %9s %9s\n", "msg", "chain", "raw B", "wire B", "ratio",
           "enc MB/s", "dec MB/s");
    for (int i = 0; i < 3; i++)
        for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) run(&m[i], specs[k], seconds);
    for (int i = 0; i < 3; i++) {
        free(m[i].keys);
        free(m[i].vals);
        free(m[i].weights);
    }
    return 0;
}
