/* fuzz_filters: the filter decoder (src/ps/filter*.c) fed arbitrary frames.
 *
 * Built like the other targets (tests/fuzz/CMakeLists.txt): a libFuzzer target with
 * LOOM_FUZZ=ON and clang, and always a plain replay driver (LOOM_FUZZ_DRIVER) that
 * replays corpus_filters/, every truncation of every seed, and deterministic random and
 * mutated inputs; `--write-seeds DIR` writes the seeds.
 *
 * Input layout: byte 0 picks the receiving table: bits 0-1 the value type (f32, f64,
 * i32, i64), bits 2-3 the width - 1 (1 to 4), bit 4 a receiver whose key cache already
 * holds the list 1..8 (so that digests can resolve). The rest is one frame.
 *
 * Checks, for every input:
 *   - filter_chain_decode() returns 0, LOOM_EPROTO, LOOM_ELIMIT or LOOM_ENOTFOUND; on a
 *     refusal nothing is returned and the dropped counter grows by exactly one;
 *   - what it accepts is well formed (keys strictly ascending), and encoding it again
 *     without filters and decoding that gives the same keys and values bit for bit;
 *   - a digest it could not resolve is reported (a digest is never 0 here: the seeds'
 *     are not, and an unresolved one must be answered with the value the frame held). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_driver.h"
#include "loom/error.h"
#include "ps/filter.h"

static struct {
    unsigned long ok, miss, refused;
} stats;

static const uint64_t cached_keys[8] = {1, 2, 3, 4, 5, 6, 7, 8};

static filter_chain *receiver(loom_type t, size_t width, int primed)
{
    filter_spec spec;
    FUZZ_CHECK(filter_spec_parse("keycache", &spec, NULL, 0) == 0);
    filter_chain *r = NULL;
    FUZZ_CHECK(filter_chain_create(&spec, FILTER_PUSH, t, width, 1, &r, NULL, 0) == 0);
    if (!primed) return r;
    /* The list 1..8, sent once by a sender with a key cache: r keeps it. */
    filter_chain *s = NULL;
    FUZZ_CHECK(filter_chain_create(&spec, FILTER_PUSH, t, width, 1, &s, NULL, 0) == 0);
    uint8_t zeros[8 * 4 * 8] = {0};
    filter_msg m = {.keys = cached_keys, .vals = zeros, .n = 8};
    uint8_t *buf;
    size_t len;
    FUZZ_CHECK(filter_chain_encode(s, &m, &buf, &len) == 0);
    uint64_t *k;
    void *v;
    size_t n;
    uint64_t digest;
    FUZZ_CHECK(filter_chain_decode(r, buf, len, SIZE_MAX, &k, &v, &n, &digest) == 0);
    free(buf);
    free(k);
    free(v);
    filter_chain_destroy(s);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    loom_type t = (loom_type)(data[0] & 3);
    size_t width = 1 + ((data[0] >> 2) & 3);
    filter_chain *r = receiver(t, width, (data[0] >> 4) & 1);
    /* The frame in a buffer of exactly its size, so a read past it is caught. */
    size_t len = size - 1;
    uint8_t *frame = malloc(len ? len : 1);
    FUZZ_CHECK(frame != NULL);
    memcpy(frame, data + 1, len);
    uint64_t *keys = NULL, raw, wire, dropped_before, dropped_after, digest = 0;
    void *vals = NULL;
    size_t n = 0;
    filter_chain_totals(r, &raw, &wire, &dropped_before);
    int rc = filter_chain_decode(r, frame, len, SIZE_MAX, &keys, &vals, &n, &digest);
    filter_chain_totals(r, &raw, &wire, &dropped_after);
    if (rc) {
        FUZZ_CHECK(rc == LOOM_EPROTO || rc == LOOM_ELIMIT || rc == LOOM_ENOTFOUND);
        FUZZ_CHECK(keys == NULL && vals == NULL && n == 0);
        FUZZ_CHECK(dropped_after == dropped_before + 1);
        if (rc == LOOM_ENOTFOUND) {
            stats.miss++;
            /* The digest the frame carried: after the 6-byte frame header and the
             * 16-byte body header (only uncompressed frames are checked here). */
            if (len >= 30 && frame[1] == 0) {
                uint64_t want = 0;
                for (int i = 7; i >= 0; i--) want = want << 8 | frame[22 + i];
                FUZZ_CHECK(digest == want);
            }
        } else {
            stats.refused++;
        }
    } else {
        stats.ok++;
        FUZZ_CHECK(dropped_after == dropped_before);
        for (size_t i = 1; i < n; i++) FUZZ_CHECK(keys[i] > keys[i - 1]);
        /* Again, plainly: the same rows bit for bit. */
        filter_spec none;
        FUZZ_CHECK(filter_spec_parse("", &none, NULL, 0) == 0);
        filter_chain *s = NULL, *r2 = NULL;
        FUZZ_CHECK(filter_chain_create(&none, FILTER_PUSH, t, width, 1, &s, NULL, 0) == 0);
        FUZZ_CHECK(filter_chain_create(&none, FILTER_PUSH, t, width, 1, &r2, NULL, 0) == 0);
        filter_msg m = {.keys = keys, .vals = vals, .n = n};
        uint8_t *buf;
        size_t blen;
        FUZZ_CHECK(filter_chain_encode(s, &m, &buf, &blen) == 0);
        uint64_t *k2;
        void *v2;
        size_t n2;
        FUZZ_CHECK(filter_chain_decode(r2, buf, blen, SIZE_MAX, &k2, &v2, &n2, &digest) == 0);
        size_t vs = t == LOOM_F32 || t == LOOM_I32 ? 4 : 8;
        FUZZ_CHECK(n2 == n);
        FUZZ_CHECK(n == 0 || memcmp(k2, keys, n * 8) == 0);
        FUZZ_CHECK(n == 0 || memcmp(v2, vals, n * width * vs) == 0);
        free(buf);
        free(k2);
        free(v2);
        filter_chain_destroy(s);
        filter_chain_destroy(r2);
    }
    free(keys);
    free(vals);
    free(frame);
    filter_chain_destroy(r);
    return 0;
}

#ifdef LOOM_FUZZ_DRIVER
/* ---- the plain driver ---- */

typedef fuzz_input input;

/* A seed: the selector byte and a frame a sender of `spec` encodes for the message
 * with keys `keys` (n of them) and values 0.5, -1.25, 3, ... (sent `times` times,
 * the last encoding kept, so that a key cache's second message is a digest). */
static const struct {
    const char *name;
    unsigned sel;
    const char *spec;
    size_t n;
    int times;
} seeds[] = {
    {"raw_f32", 0x00, "", 5, 1},
    {"raw_f64_w3", 0x09, "", 4, 1},
    {"raw_i32_w2", 0x06, "", 6, 1},
    {"raw_i64", 0x03, "", 3, 1},
    {"empty", 0x00, "", 0, 1},
    {"quant8", 0x04, "quant:8", 20, 1},
    {"quant16_f64", 0x01, "quant:16", 300, 1},
    {"keep_list", 0x00, "keycache", 8, 1},
    {"digest_known", 0x10, "keycache", 8, 2},
    {"digest_unknown", 0x00, "keycache", 8, 2},
    {"lz4", 0x04, "lz4", 200, 1},
    {"zstd", 0x04, "zstd", 200, 1},
    {"zstd_quant_keycache", 0x14, "zstd,quant:8,keycache", 8, 2},
};
enum { NSEEDS = sizeof seeds / sizeof *seeds };

static const char *seed_input(int i, input *in)
{
    loom_type t = (loom_type)(seeds[i].sel & 3);
    size_t width = 1 + ((seeds[i].sel >> 2) & 3), n = seeds[i].n;
    filter_spec spec;
    FUZZ_CHECK(filter_spec_parse(seeds[i].spec, &spec, NULL, 0) == 0);
    filter_chain *s = NULL;
    FUZZ_CHECK(filter_chain_create(&spec, FILTER_PUSH, t, width, 7, &s, NULL, 0) == 0);
    uint64_t keys[300];
    double vals[300 * 4];
    for (size_t k = 0; k < n; k++) keys[k] = n == 8 ? cached_keys[k] : 3 * k + 1;
    for (size_t v = 0; v < n * width; v++) {
        /* Zeros now and then, so that compression has something to do. */
        double x = v % 3 ? 0.5 * (double)(v % 7) - 1.25 : 0;
        if (t == LOOM_F32)
            ((float *)vals)[v] = (float)x;
        else if (t == LOOM_F64)
            vals[v] = x;
        else if (t == LOOM_I32)
            ((int32_t *)vals)[v] = (int32_t)(4 * x);
        else
            ((int64_t *)vals)[v] = (int64_t)(4 * x);
    }
    filter_msg m = {.keys = keys, .vals = vals, .n = n};
    uint8_t *buf = NULL;
    size_t len = 0;
    for (int k = 0; k < seeds[i].times; k++) {
        free(buf);
        FUZZ_CHECK(filter_chain_encode(s, &m, &buf, &len) == 0);
    }
    FUZZ_CHECK(1 + len <= FUZZ_MAX_INPUT);
    in->buf[0] = (uint8_t)seeds[i].sel;
    memcpy(in->buf + 1, buf, len);
    in->len = 1 + len;
    free(buf);
    filter_chain_destroy(s);
    return seeds[i].name;
}

/* One random edit of the frame (the selector byte stays). */
static void mutate(input *in)
{
    static const uint8_t interesting[] = {0, 1, 2, 3, 4, 8, 16, 0x7f, 0x80, 0xff};
    fuzz_edit(in, 1, interesting, sizeof interesting);
}

static void check_seeds(void)
{
    /* Every seed but digest_unknown decodes; digest_unknown misses. */
    FUZZ_CHECK(stats.ok >= NSEEDS - 1 && stats.miss >= 1);
}

static void report(void)
{
    printf("decoded %lu, digest misses %lu, refused %lu\n", stats.ok, stats.miss, stats.refused);
}

int main(int argc, char **argv)
{
    return fuzz_driver_main(argc, argv,
                            &(fuzz_target){.name = "fuzz_filters",
                                           .rng_seed = 0xF117E125u,
                                           .nseeds = NSEEDS,
                                           .variant_kind = "unchanged",
                                           .seed = seed_input,
                                           .check_seeds = check_seeds,
                                           .random = 2000,
                                           .random_len = 200,
                                           .mutated = 8000,
                                           .mutate = mutate,
                                           .report = report});
}
#endif
