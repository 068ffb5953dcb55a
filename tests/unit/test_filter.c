/* filter: each filter's encoding and decoding (src/ps/filter*.c).
 *
 * Exact encodings (none, keycache, lz4, zstd) must give back every key and value
 * bit for bit, for every value type. The lossy ones are held to the bound
 * docs/FILTERS.md states, checked statistically with a fixed seed where they are
 * random: quant is off by less than one step (the block's max / L) and right on
 * average, skip is right on average, sigmod never lets the receiver be more than
 * its threshold behind and loses nothing, kkt drops exactly the rows it should.
 * Chains of key lists (pull requests) hit, miss and refuse lies the same way.
 * Hostile encodings: test_filter_hostile.c. */
#include "filter_helpers.h"
#include "ps/rowops.h"

/* ---- the spec ---- */

static void expect_spec_error(const char *text, const char *needle)
{
    filter_spec spec;
    char err[200] = "";
    assert_int_equal(filter_spec_parse(text, &spec, err, sizeof err), LOOM_EINVAL);
    if (!strstr(err, needle)) fail_msg("'%s': error '%s' does not mention '%s'", text, err, needle);
}

static void test_spec(void **unused)
{
    (void)unused;
    filter_spec spec;
    char err[200] = "";
    assert_int_equal(
        filter_spec_parse("quant:8,sigmod:0.25,keycache,zstd:5", &spec, err, sizeof err), 0);
    assert_true(spec.on[FILTER_QUANT] && spec.on[FILTER_SIGMOD] && spec.on[FILTER_KEYCACHE] &&
                spec.on[FILTER_ZSTD]);
    assert_false(spec.on[FILTER_KKT] || spec.on[FILTER_SKIP] || spec.on[FILTER_LZ4]);
    assert_true(spec.arg[FILTER_QUANT] == 8 && spec.arg[FILTER_SIGMOD] == 0.25 &&
                spec.arg[FILTER_ZSTD] == 5);
    assert_int_equal(filter_spec_parse("zstd", &spec, err, sizeof err), 0);
    assert_true(spec.arg[FILTER_ZSTD] == 3);
    assert_int_equal(filter_spec_parse("", &spec, err, sizeof err), 0);
    for (int k = 0; k < FILTER_KIND_COUNT; k++) assert_false(spec.on[k]);

    expect_spec_error("gzip", "unknown filter 'gzip'");
    expect_spec_error("quant:12", "8 or 16");
    expect_spec_error("quant", "needs an argument");
    expect_spec_error("skip:0", "(0, 1]");
    expect_spec_error("skip:1.5", "(0, 1]");
    expect_spec_error("sigmod:-1", ">= 0");
    expect_spec_error("sigmod:abc", "'abc' is not a number");
    expect_spec_error("kkt:1e999", "not a number");
    expect_spec_error("keycache:3", "takes no argument");
    expect_spec_error("lz4,zstd", "exclude each other");
    expect_spec_error("sigmod:1,sigmod:2", "given twice");
    expect_spec_error("lz4,,keycache", "empty filter name");
    expect_spec_error("zstd:2.5", "1..19");

    /* Specs that do not fit the table. */
    filter_chain *c = NULL;
    assert_int_equal(filter_spec_parse("kkt:0.1", &spec, err, sizeof err), 0);
    assert_int_equal(filter_chain_create(&spec, FILTER_PULL, LOOM_F32, 1, 1, &c, err, sizeof err),
                     LOOM_EINVAL);
    assert_non_null(strstr(err, "pushed gradients"));
    assert_int_equal(filter_spec_parse("quant:8", &spec, err, sizeof err), 0);
    assert_int_equal(filter_chain_create(&spec, FILTER_PUSH, LOOM_I32, 1, 1, &c, err, sizeof err),
                     LOOM_EINVAL);
    assert_non_null(strstr(err, "f32 or f64"));
    assert_null(c);
}

/* ---- exact encodings ---- */

static void check_exact(const char *spec, loom_type t, size_t width, size_t n)
{
    filter_chain *s = chain(spec, FILTER_PUSH, t, width), *r = chain(spec, FILTER_PUSH, t, width);
    uint64_t *keys = random_keys(n);
    void *vals = random_values(t, n * width);
    size_t vs = loom_type_size(t);
    /* Twice: the second time a key cache sends the digest. */
    for (int round = 0; round < 2; round++) {
        filter_msg m = {.keys = keys, .vals = vals, .n = n};
        decoded d = {0};
        assert_int_equal(send_msg(s, r, &m, &d), 0);
        assert_int_equal(d.n, n);
        if (n) assert_memory_equal(d.keys, keys, n * 8);
        if (n) assert_memory_equal(d.vals, vals, n * width * vs);
        decoded_free(&d);
    }
    filter_stats ks = filter_chain_stats(s, FILTER_KEYCACHE);
    if (strstr(spec, "keycache") && n >= 4) {
        /* The list once, then its digest. */
        assert_int_equal(ks.msgs, 2);
        assert_int_equal(ks.bytes_in, 2 * n * 8);
        assert_int_equal(ks.bytes_out, n * 8 + 8);
    }
    uint64_t raw, wire, dropped;
    filter_chain_totals(s, &raw, &wire, &dropped);
    assert_int_equal(raw, 2 * n * (8 + width * vs));
    filter_chain_totals(r, &raw, &wire, &dropped);
    assert_int_equal(dropped, 0);
    free(keys);
    free(vals);
    filter_chain_destroy(s);
    filter_chain_destroy(r);
}

static void test_exact_round_trips(void **unused)
{
    (void)unused;
    const char *specs[] = {"",
                           "keycache",
                           "lz4",
                           "zstd",
                           "zstd:19,keycache",
                           "keycache,lz4",
                           "sparse",
                           "dense",
                           "sparse,keycache,zstd"};
    const size_t sizes[] = {0, 1, 5, 1000};
    for (size_t s = 0; s < sizeof specs / sizeof *specs; s++)
        for (int t = LOOM_F32; t <= LOOM_I64; t++)
            for (size_t w = 1; w <= 3; w += 2)
                for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++)
                    check_exact(specs[s], (loom_type)t, w, sizes[z]);
}

/* Compression pays on a message with many zeros, and counts what it saved
 * (dense rows forced: sparse rows alone would take the zeros out). */
static void test_compression_saves(void **unused)
{
    (void)unused;
    const char *specs[] = {"lz4,dense", "zstd,dense"};
    for (int i = 0; i < 2; i++) {
        filter_chain *s = chain(specs[i], FILTER_PUSH, LOOM_F32, 4);
        filter_chain *r = chain(specs[i], FILTER_PUSH, LOOM_F32, 4);
        size_t n = 2000;
        uint64_t *keys = malloc(n * 8);
        float *vals = calloc(n * 4, sizeof *vals);
        for (size_t k = 0; k < n; k++) keys[k] = 3 * k;
        for (size_t k = 0; k < n * 4; k += 9) vals[k] = 1.5f;
        filter_msg m = {.keys = keys, .vals = vals, .n = n};
        decoded d = {0};
        assert_int_equal(send_msg(s, r, &m, &d), 0);
        assert_int_equal(d.n, n);
        assert_memory_equal(d.vals, vals, n * 16);
        filter_stats st = filter_chain_stats(s, i ? FILTER_ZSTD : FILTER_LZ4);
        assert_int_equal(st.msgs, 1);
        assert_true(st.bytes_out * 4 < st.bytes_in);
        assert_int_equal(d.wire, 6 + st.bytes_out);
        decoded_free(&d);
        free(keys);
        free(vals);
        filter_chain_destroy(s);
        filter_chain_destroy(r);
    }
}

/* Zeros alone would shrink more than FILTER_MAX_RATIO times, past what a
 * receiver accepts: with zstd the frame is padded (a skippable frame) to
 * exactly that ratio; lz4 never gets past it (else it would go uncompressed). */
static void test_compression_ratio_cap(void **unused)
{
    (void)unused;
    const size_t width = 4000, n = 8, body = 16 + n * 8 + n * width * 4;
    filter_chain *s = chain("zstd,dense", FILTER_PUSH, LOOM_F32, width);
    filter_chain *r = chain("zstd,dense", FILTER_PUSH, LOOM_F32, width);
    uint64_t keys[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    float *vals = calloc(n * width, sizeof *vals);
    filter_msg m = {.keys = keys, .vals = vals, .n = n};
    decoded d = {0};
    assert_int_equal(send_msg(s, r, &m, &d), 0);
    assert_int_equal(d.wire, 6 + (body + FILTER_MAX_RATIO - 1) / FILTER_MAX_RATIO);
    assert_memory_equal(d.vals, vals, n * width * 4);
    decoded_free(&d);
    filter_chain *ls = chain("lz4,dense", FILTER_PUSH, LOOM_F32, width);
    filter_chain *lr = chain("lz4,dense", FILTER_PUSH, LOOM_F32, width);
    assert_int_equal(send_msg(ls, lr, &m, &d), 0); /* lz4 itself stops near 255x */
    assert_true((d.wire - 6) * FILTER_MAX_RATIO >= body && d.wire <= 6 + body);
    assert_memory_equal(d.vals, vals, n * width * 4);
    decoded_free(&d);
    filter_chain_destroy(ls);
    filter_chain_destroy(lr);
    /* With one value in ten set it compresses, within the cap. */
    for (size_t i = 0; i < n * width; i += 10) vals[i] = (float)i;
    assert_int_equal(send_msg(s, r, &m, &d), 0);
    assert_true(d.wire < (n * width * 4) / 2);
    assert_memory_equal(d.vals, vals, n * width * 4);
    decoded_free(&d);
    free(vals);
    filter_chain_destroy(s);
    filter_chain_destroy(r);
}

/* A receiver that lost its key cache (a new one) answers a digest with
 * LOOM_ENOTFOUND and the digest; the sender forgets it and sends the list. */
static void test_keycache_miss(void **unused)
{
    (void)unused;
    filter_chain *s = chain("keycache", FILTER_PUSH, LOOM_F64, 2);
    filter_chain *r = chain("keycache", FILTER_PUSH, LOOM_F64, 2);
    size_t n = 50;
    uint64_t *keys = random_keys(n);
    double *vals = random_values(LOOM_F64, n * 2);
    filter_msg m = {.keys = keys, .vals = vals, .n = n};
    decoded d = {0};
    assert_int_equal(send_msg(s, r, &m, &d), 0);
    decoded_free(&d);
    filter_chain_destroy(r);
    r = chain("keycache", FILTER_PUSH, LOOM_F64, 2);
    assert_int_equal(send_msg(s, r, &m, &d), LOOM_ENOTFOUND);
    assert_true(d.digest != 0);
    assert_null(d.keys);
    assert_int_equal(d.wire, 6 + 16 + 8 + n * 16);
    filter_chain_forget_keys(s, d.digest);
    assert_int_equal(send_msg(s, r, &m, &d), 0);
    assert_int_equal(d.wire, 6 + 16 + n * 8 + n * 16);
    assert_memory_equal(d.keys, keys, n * 8);
    decoded_free(&d);
    assert_int_equal(send_msg(s, r, &m, &d), 0); /* a digest again, now known */
    assert_int_equal(d.wire, 6 + 16 + 8 + n * 16);
    assert_memory_equal(d.keys, keys, n * 8);
    assert_memory_equal(d.vals, vals, n * 16);
    decoded_free(&d);
    /* A receiver without a key cache cannot resolve digests either. */
    filter_chain *plain = chain("", FILTER_PUSH, LOOM_F64, 2);
    assert_int_equal(send_msg(s, plain, &m, &d), LOOM_ENOTFOUND);
    uint64_t raw, wire, dropped;
    filter_chain_totals(plain, &raw, &wire, &dropped);
    assert_int_equal(dropped, 1);
    filter_chain_destroy(plain);
    free(keys);
    free(vals);
    filter_chain_destroy(s);
    filter_chain_destroy(r);
}

/* ---- quant ---- */

static void check_quant(loom_type t, int bits)
{
    char spec[32];
    snprintf(spec, sizeof spec, "quant:%d", bits);
    filter_chain *s = chain(spec, FILTER_PUSH, t, 3), *r = chain(spec, FILTER_PUSH, t, 3);
    size_t n = 200, count = n * 3; /* 600 values: three blocks, the last one short */
    uint64_t *keys = random_keys(n);
    void *vals = random_values(t, count);
    double levels = bits == 8 ? 127 : 32767;
    double scale[3] = {0, 0, 0}; /* max|x| / L of each block */
    for (size_t i = 0; i < count; i++) {
        double a = fabs(value_at(t, vals, i)) / levels;
        if (a > scale[i / FILTER_QUANT_BLOCK]) scale[i / FILTER_QUANT_BLOCK] = a;
    }
    double *sum = calloc(count, sizeof *sum);
    const int trials = 4000;
    for (int k = 0; k < trials; k++) {
        filter_msg m = {.keys = keys, .vals = vals, .n = n};
        decoded d = {0};
        assert_int_equal(send_msg(s, r, &m, &d), 0);
        assert_int_equal(d.n, n);
        assert_memory_equal(d.keys, keys, n * 8);
        if (k == 0) assert_int_equal(d.wire, 6 + 16 + n * 8 + 3 * 8 + count * (size_t)bits / 8);
        for (size_t i = 0; i < count; i++) {
            double x = value_at(t, vals, i), y = value_at(t, d.vals, i);
            /* Less than one step off, plus the rounding of z * s to the type. */
            double step = scale[i / FILTER_QUANT_BLOCK];
            double slack = t == LOOM_F32 ? 1e-6 * (fabs(x) + step) : 1e-12 * (fabs(x) + step);
            if (!(fabs(y - x) <= step + slack))
                fail_msg("quant:%d value %zu: %.9g came back as %.9g (step %.3g)", bits, i, x, y,
                         step);
            sum[i] += y;
        }
        decoded_free(&d);
    }
    /* Unbiased: one draw has variance at most step^2 / 4, so the mean of `trials`
     * draws is within 6 standard deviations, step / 2 * 6 / sqrt(trials), of x
     * (a 2e-9 chance per value for an unbiased rounding; the seed is fixed). */
    for (size_t i = 0; i < count; i++) {
        double x = value_at(t, vals, i), step = scale[i / FILTER_QUANT_BLOCK];
        double bound = 3 * step / sqrt((double)trials) + (t == LOOM_F32 ? 1e-6 * fabs(x) : 0);
        if (fabs(sum[i] / trials - x) > bound)
            fail_msg("quant:%d value %zu: mean %.9g of %.9g, beyond %.3g", bits, i, sum[i] / trials,
                     x, bound);
    }
    filter_stats st = filter_chain_stats(s, FILTER_QUANT);
    assert_int_equal(st.msgs, trials);
    assert_int_equal(st.bytes_in, (uint64_t)trials * count * loom_type_size(t));
    assert_int_equal(st.bytes_out, (uint64_t)trials * (3 * 8 + count * (size_t)bits / 8));
    free(sum);
    free(keys);
    free(vals);
    filter_chain_destroy(s);
    filter_chain_destroy(r);
}

static void test_quant(void **unused)
{
    (void)unused;
    check_quant(LOOM_F32, 8);
    check_quant(LOOM_F32, 16);
    check_quant(LOOM_F64, 8);
    check_quant(LOOM_F64, 16);
    /* A value that is not finite cannot be quantised: the encoder says so. */
    filter_chain *s = chain("quant:8", FILTER_PUSH, LOOM_F64, 1);
    uint64_t key = 1;
    double inf = INFINITY;
    filter_msg m = {.keys = &key, .vals = &inf, .n = 1};
    uint8_t *buf;
    size_t len;
    assert_int_equal(filter_chain_encode(s, &m, &buf, &len), LOOM_EINVAL);
    filter_chain_destroy(s);
}

/* ---- skip ---- */

static void test_skip_unbiased(void **unused)
{
    (void)unused;
    const double q = 0.3;
    filter_chain *s = chain("skip:0.3", FILTER_PUSH, LOOM_F64, 2);
    filter_chain *r = chain("", FILTER_PUSH, LOOM_F64, 2);
    size_t n = 100;
    uint64_t *keys = random_keys(n);
    double *vals = random_values(LOOM_F64, n * 2);
    double *sum = calloc(n * 2, sizeof *sum);
    const int trials = 4000;
    size_t sent = 0;
    for (int k = 0; k < trials; k++) {
        filter_msg m = {.keys = keys, .vals = vals, .n = n};
        decoded d = {0};
        assert_int_equal(send_msg(s, r, &m, &d), 0);
        sent += d.n;
        size_t j = 0;
        for (size_t i = 0; i < d.n; i++) {
            while (j < n && keys[j] < d.keys[i]) j++;
            assert_true(j < n && keys[j] == d.keys[i]);
            for (size_t c = 0; c < 2; c++) {
                double y = ((double *)d.vals)[2 * i + c];
                assert_true(y == vals[2 * j + c] / q); /* a kept row is scaled by 1/q */
                sum[2 * j + c] += y;
            }
        }
        decoded_free(&d);
    }
    /* A row is kept with probability q: binomial, 6 sigma. */
    double mean_sent = (double)trials * n * q, sd = sqrt((double)trials * n * q * (1 - q));
    assert_true(fabs((double)sent - mean_sent) <= 6 * sd);
    /* Unbiased: one draw of a value x is x/q with probability q, else 0:
     * variance x^2 (1 - q) / q; 6 standard deviations of the mean. */
    for (size_t i = 0; i < n * 2; i++) {
        double x = vals[i], bound = 6 * fabs(x) * sqrt((1 - q) / q / trials);
        if (fabs(sum[i] / trials - x) > bound + 1e-12)
            fail_msg("skip: value %zu: mean %.9g of %.9g, beyond %.3g", i, sum[i] / trials, x,
                     bound);
    }
    filter_stats st = filter_chain_stats(s, FILTER_SKIP);
    assert_int_equal(st.bytes_in, (uint64_t)trials * n * 24);
    assert_int_equal(st.bytes_out, sent * 24);
    free(sum);
    free(keys);
    free(vals);
    filter_chain_destroy(s);
    filter_chain_destroy(r);
}

/* ---- kkt ---- */

static void test_kkt(void **unused)
{
    (void)unused;
    const double bound = 0.5;
    filter_chain *s = chain("kkt:0.5", FILTER_PUSH, LOOM_F32, 2);
    filter_chain *r = chain("", FILTER_PUSH, LOOM_F32, 2);
    size_t n = 400;
    uint64_t *keys = random_keys(n);
    float *g = malloc(n * 2 * sizeof *g), *w = malloc(n * 2 * sizeof *w);
    for (size_t i = 0; i < n * 2; i++) {
        g[i] = (float)((double)(rng() % 2001) / 1000.0 - 1.0); /* [-1, 1], 0.5 included */
        w[i] = rng() % 2 ? 0.0f : 0.25f;
    }
    g[0] = 0.5f; /* on the bound: dropped when both weights are 0 */
    g[1] = -0.5f;
    w[0] = w[1] = 0;
    filter_msg m = {.keys = keys, .vals = g, .n = n, .weights = w};
    decoded d = {0};
    assert_int_equal(send_msg(s, r, &m, &d), 0);
    size_t o = 0, expect_kept = 0;
    for (size_t i = 0; i < n; i++) {
        int inactive = 1;
        for (size_t c = 0; c < 2; c++)
            inactive = inactive && w[2 * i + c] == 0 && fabs(g[2 * i + c]) <= bound;
        if (inactive) {
            assert_true(o == d.n || d.keys[o] != keys[i]);
            continue;
        }
        expect_kept++;
        assert_true(o < d.n && d.keys[o] == keys[i]);
        assert_memory_equal((float *)d.vals + 2 * o, g + 2 * i, 8); /* bit for bit */
        o++;
    }
    assert_int_equal(d.n, expect_kept);
    assert_true(expect_kept > 0 && expect_kept < n);
    assert_true(d.n == 0 || d.keys[0] != keys[0]);
    filter_stats st = filter_chain_stats(s, FILTER_KKT);
    assert_int_equal(st.bytes_in, n * 16);
    assert_int_equal(st.bytes_out, expect_kept * 16);
    decoded_free(&d);
    /* Without weights kkt lets everything through. */
    m.weights = NULL;
    assert_int_equal(send_msg(s, r, &m, &d), 0);
    assert_int_equal(d.n, n);
    decoded_free(&d);
    free(keys);
    free(g);
    free(w);
    filter_chain_destroy(s);
    filter_chain_destroy(r);
}

/* ---- sigmod ---- */

/* Pushes of deltas that are multiples of 1/64 (exact in doubles, so sums are
 * exact): after every round each coordinate the receiver has summed is within
 * the threshold of the true sum, and after a flush exactly equal. */
static void test_sigmod_push(void **unused)
{
    (void)unused;
    const double threshold = 1.0;
    const size_t width = 2, universe = 64;
    filter_chain *s = chain("sigmod:1", FILTER_PUSH, LOOM_F64, width);
    filter_chain *r = chain("", FILTER_PUSH, LOOM_F64, width);
    double truth[64 * 2] = {0}, got[64 * 2] = {0};
    uint64_t keys[64];
    double vals[64 * 2];
    size_t held_back_rounds = 0;
    for (int round = 0; round < 60; round++) {
        size_t n = 0;
        for (uint64_t k = 0; k < universe; k++) {
            if (rng() % 3 == 0) continue;
            keys[n] = k;
            for (size_t c = 0; c < width; c++) {
                double x = (double)((int)(rng() % 65) - 32) / 64.0; /* [-0.5, 0.5] */
                vals[n * width + c] = x;
                truth[k * width + c] += x;
            }
            n++;
        }
        filter_msg m = {.keys = keys, .vals = vals, .n = n, .flush = round == 59};
        decoded d = {0};
        assert_int_equal(send_msg(s, r, &m, &d), 0);
        for (size_t i = 0; i < d.n; i++)
            for (size_t c = 0; c < width; c++)
                got[d.keys[i] * width + c] += ((double *)d.vals)[i * width + c];
        if (d.n < n) held_back_rounds++;
        decoded_free(&d);
        for (size_t i = 0; i < universe * width; i++) {
            if (round == 59)
                assert_true(got[i] == truth[i]);
            else if (!(fabs(got[i] - truth[i]) <= threshold))
                fail_msg("round %d coordinate %zu: received %g of %g", round, i, got[i], truth[i]);
        }
    }
    assert_true(held_back_rounds > 30); /* the filter did hold things back */
    filter_stats st = filter_chain_stats(s, FILTER_SIGMOD);
    assert_true(st.bytes_out < st.bytes_in);
    filter_chain_destroy(s);
    filter_chain_destroy(r);
}

/* A flush also sends keys held back that the flushing message does not carry,
 * in key order; f32 rounding stays held, not lost. */
static void test_sigmod_flush_merges(void **unused)
{
    (void)unused;
    filter_chain *s = chain("sigmod:10", FILTER_PUSH, LOOM_F32, 1);
    filter_chain *r = chain("", FILTER_PUSH, LOOM_F32, 1);
    uint64_t k1[3] = {2, 5, 9};
    float v1[3] = {1, 2, 3};
    filter_msg m = {.keys = k1, .vals = v1, .n = 3};
    decoded d = {0};
    assert_int_equal(send_msg(s, r, &m, &d), 0);
    assert_int_equal(d.n, 0); /* all below 10: held */
    decoded_free(&d);
    uint64_t k2[2] = {1, 5};
    float v2[2] = {4, 20};
    m = (filter_msg){.keys = k2, .vals = v2, .n = 2, .flush = 1};
    assert_int_equal(send_msg(s, r, &m, &d), 0);
    uint64_t want_keys[4] = {1, 2, 5, 9};
    float want_vals[4] = {4, 1, 22, 3};
    assert_int_equal(d.n, 4);
    assert_memory_equal(d.keys, want_keys, sizeof want_keys);
    assert_memory_equal(d.vals, want_vals, sizeof want_vals);
    decoded_free(&d);
    /* Nothing is held any more: an empty flush sends nothing. */
    m = (filter_msg){.keys = NULL, .vals = NULL, .n = 0, .flush = 1};
    assert_int_equal(send_msg(s, r, &m, &d), 0);
    assert_int_equal(d.n, 0);
    decoded_free(&d);
    filter_chain_destroy(s);
    filter_chain_destroy(r);
}

/* On pull replies: the receiver's copy of each value is never more than the
 * threshold off, new keys always go out, and a flush brings it up to date. */
static void test_sigmod_pull(void **unused)
{
    (void)unused;
    const double threshold = 0.25;
    filter_chain *s = chain("sigmod:0.25", FILTER_PULL, LOOM_F64, 1);
    filter_chain *r = chain("", FILTER_PULL, LOOM_F64, 1);
    double value[32] = {0}, copy[32];
    int has[32] = {0};
    uint64_t keys[32];
    size_t skipped = 0;
    for (int round = 0; round < 50; round++) {
        for (size_t k = 0; k < 32; k++) {
            value[k] += (double)((int)(rng() % 33) - 16) / 128.0;
            keys[k] = k;
        }
        size_t n = round < 5 ? 16 : 32; /* keys 16..31 are new in round 5 */
        filter_msg m = {.keys = keys, .vals = value, .n = n, .flush = round == 49};
        decoded d = {0};
        assert_int_equal(send_msg(s, r, &m, &d), 0);
        for (size_t i = 0; i < d.n; i++) {
            copy[d.keys[i]] = ((double *)d.vals)[i];
            has[d.keys[i]] = 1;
        }
        skipped += n - d.n;
        decoded_free(&d);
        for (size_t k = 0; k < n; k++) {
            assert_true(has[k]);
            if (round == 49)
                assert_true(copy[k] == value[k]);
            else
                assert_true(fabs(copy[k] - value[k]) <= threshold);
        }
    }
    assert_true(skipped > 100);
    filter_chain_destroy(s);
    filter_chain_destroy(r);
}

/* ---- sparse rows ---- */

/* Rows of `width` values of which only every `every`-th is set, one of them
 * -0.0 (float types): zero only when every bit is, so it must travel. */
static void *sparse_values(loom_type t, size_t count, size_t every)
{
    size_t vs = loom_type_size(t);
    uint8_t *v = calloc(count ? count : 1, vs);
    for (size_t i = 0; i < count; i += every) {
        double d = i == 0 && (t == LOOM_F32 || t == LOOM_F64) ? -0.0 : (double)(i % 97) + 0.25;
        switch (t) {
        case LOOM_F32:
            ((float *)v)[i] = (float)d;
            break;
        case LOOM_F64:
            ((double *)v)[i] = d;
            break;
        case LOOM_I32:
            ((int32_t *)v)[i] = (int32_t)i + 1;
            break;
        case LOOM_I64:
            ((int64_t *)v)[i] = -(int64_t)i - 1;
            break;
        }
    }
    return v;
}

/* Sparse rows round-trip bit for bit (every type; u16 and u32 columns), are
 * chosen by themselves exactly when smaller, and cost what the format says. */
static void test_sparse_rows(void **unused)
{
    (void)unused;
    const size_t widths[] = {1, 7, 1000, 70000};
    for (int t = LOOM_F32; t <= LOOM_I64; t++) {
        size_t vs = loom_type_size((loom_type)t);
        for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++) {
            size_t width = widths[wi], n = width > 1000 ? 3 : 50, every = width > 1 ? 10 : 1;
            uint64_t *keys = random_keys(n);
            void *vals = sparse_values((loom_type)t, n * width, every);
            size_t nnz = 0;
            for (size_t i = 0; i < n * width; i++) {
                uint8_t zero[8] = {0};
                nnz += memcmp((uint8_t *)vals + i * vs, zero, vs) != 0;
            }
            size_t cb = width <= 65536 ? 2 : 4;
            size_t sparse_len = 6 + 16 + n * 8 + n * 4 + nnz * (cb + vs);
            size_t dense_len = 6 + 16 + n * 8 + n * width * vs;
            const char *specs[] = {"", "sparse", "dense"};
            for (int sp = 0; sp < 3; sp++) {
                filter_chain *s = chain(specs[sp], FILTER_PUSH, (loom_type)t, width);
                filter_chain *r = chain("", FILTER_PUSH, (loom_type)t, width);
                filter_msg m = {.keys = keys, .vals = vals, .n = n};
                decoded d = {0};
                assert_int_equal(send_msg(s, r, &m, &d), 0);
                assert_int_equal(d.n, n);
                assert_memory_equal(d.keys, keys, n * 8);
                assert_memory_equal(d.vals, vals, n * width * vs);
                size_t want = sp == 1   ? sparse_len
                              : sp == 2 ? dense_len
                                        : (sparse_len < dense_len ? sparse_len : dense_len);
                assert_int_equal(d.wire, want);
                /* filter_sparse_pays agrees with the choice (it adds the keys). */
                assert_int_equal(filter_sparse_pays((loom_type)t, width, vals, n, n * width * vs),
                                 sparse_len < n * width * vs);
                decoded_free(&d);
                filter_chain_destroy(s);
                filter_chain_destroy(r);
            }
            free(keys);
            free(vals);
        }
    }
}

/* filter_sparse_pays answers what counting every value answers, on rows
 * with a fifth to all of their values 0 at random and on rows with none 0
 * (which it decides from a probe of 64 values, without the count). */
static void test_sparse_pays_probe(void **unused)
{
    (void)unused;
    const size_t widths[] = {16, 64, 1000};
    const double zeros[] = {0.0, 0.2, 0.3, 0.4, 0.5, 0.9};
    uint64_t x = 88172645463325252ull;
    for (int t = LOOM_F32; t <= LOOM_I64; t++) {
        size_t vs = loom_type_size((loom_type)t);
        for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++) {
            for (size_t zi = 0; zi < sizeof zeros / sizeof *zeros; zi++) {
                size_t width = widths[wi], n = 100, nnz = 0;
                uint8_t *vals = calloc(n * width, vs);
                assert_non_null(vals);
                for (size_t i = 0; i < n * width; i++) {
                    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                    if ((double)(x % 1000000) < zeros[zi] * 1e6) continue;
                    memset(vals + i * vs, 0x3f, vs); /* 0.74 (f32), 0.49 (f64), or large */
                    nnz++;
                }
                size_t sparse_len = 6 + 16 + n * 8 + n * 4 + nnz * (2 + vs);
                assert_int_equal(filter_sparse_pays((loom_type)t, width, vals, n, n * width * vs),
                                 sparse_len < n * width * vs);
                free(vals);
            }
        }
    }
}

/* filter_chain_decode_sparse leaves sparse rows sparse, exactly the rows
 * filter_chain_decode makes dense (and what a server adds them to gets the
 * same sums), decodes dense rows as filter_chain_decode does, and refuses
 * what it refuses: columns out of order or past the width. */
static void test_sparse_kept(void **unused)
{
    (void)unused;
    for (int t = LOOM_F32; t <= LOOM_I64; t++) {
        size_t vs = loom_type_size((loom_type)t), width = 1000, n = 20;
        uint64_t *keys = random_keys(n);
        void *vals = sparse_values((loom_type)t, n * width, 10);
        filter_msg m = {.keys = keys, .vals = vals, .n = n};
        for (int dense = 0; dense < 2; dense++) {
            filter_chain *s = chain(dense ? "dense" : "sparse", FILTER_PUSH, (loom_type)t, width);
            filter_chain *r = chain("", FILTER_PUSH, (loom_type)t, width);
            uint8_t *buf;
            size_t len, got_n;
            assert_int_equal(filter_chain_encode(s, &m, &buf, &len), 0);
            uint64_t *got_keys, digest;
            void *got_vals, *owned;
            filter_sparse rows;
            assert_int_equal(filter_chain_decode_sparse(r, buf, len, SIZE_MAX, &got_keys, &got_vals,
                                                        &rows, &owned, &got_n, &digest),
                             0);
            assert_int_equal(got_n, n);
            assert_memory_equal(got_keys, keys, n * 8);
            if (dense) {
                assert_null(owned);
                assert_memory_equal(got_vals, vals, n * width * vs);
            } else {
                assert_null(got_vals);
                assert_non_null(owned);
                void *d = filter_sparse_dense(r, &rows, n);
                assert_memory_equal(d, vals, n * width * vs);
                /* Added to rows keyed from 0: the sums of the dense rows'. */
                uint64_t base_keys[20];
                for (size_t i = 0; i < n; i++) base_keys[i] = i;
                void *by_sparse = calloc(n * width, vs), *by_dense = calloc(n * width, vs);
                for (int twice = 0; twice < 2; twice++) {
                    rows_add_sparse((loom_type)t, width, by_sparse, 0, base_keys, n, rows.off,
                                    rows.cols, rows.vals);
                    rows_add_indexed((loom_type)t, width, by_dense, 0, base_keys, n, d);
                }
                assert_memory_equal(by_sparse, by_dense, n * width * vs);
                free(by_sparse);
                free(by_dense);
                free(d);
                /* The first row's first two columns (u16 after the keys and
                 * the row counts) swapped, then the first past the width. */
                uint8_t *col = buf + 6 + 16 + n * 8 + n * 4, saved[4];
                memcpy(saved, col, 4);
                memcpy(col, saved + 2, 2);
                memcpy(col + 2, saved, 2);
                uint64_t *k2;
                void *v2, *o2;
                filter_sparse r2;
                assert_int_equal(filter_chain_decode_sparse(r, buf, len, SIZE_MAX, &k2, &v2, &r2,
                                                            &o2, &got_n, &digest),
                                 LOOM_EPROTO);
                assert_true(!k2 && !v2 && !o2);
                assert_int_equal(decode_code(r, buf, len), LOOM_EPROTO);
                memcpy(col, saved, 4);
                col[0] = (uint8_t)(width & 0xff);
                col[1] = (uint8_t)(width >> 8);
                assert_int_equal(filter_chain_decode_sparse(r, buf, len, SIZE_MAX, &k2, &v2, &r2,
                                                            &o2, &got_n, &digest),
                                 LOOM_EPROTO);
                assert_true(!k2 && !v2 && !o2);
            }
            free(got_keys);
            free(got_vals);
            free(owned);
            free(buf);
            filter_chain_destroy(s);
            filter_chain_destroy(r);
        }
        free(keys);
        free(vals);
    }
}

/* Rows given sparse (filter_chain_encode_sparse) make the very message the
 * same rows make dense, whatever the spec asks (values given as zero are left
 * out, as from dense rows); a chain with a filter on values refuses them. */
static void test_sparse_given(void **unused)
{
    (void)unused;
    const size_t widths[] = {7, 1000, 70000};
    const char *specs[] = {"", "sparse", "dense", "keycache,zstd"};
    for (int t = LOOM_F32; t <= LOOM_I64; t++) {
        size_t vs = loom_type_size((loom_type)t);
        for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++) {
            size_t width = widths[wi], n = width > 1000 ? 3 : 40;
            uint64_t *keys = random_keys(n);
            uint8_t *vals = sparse_values((loom_type)t, n * width, 9);
            /* CSR, with an explicit zero in every row that has room for one. */
            uint64_t *off = malloc((n + 1) * sizeof *off);
            uint32_t *cols = malloc(n * width * sizeof *cols);
            uint8_t *nz = calloc(n * width, vs), zero[8] = {0};
            off[0] = 0;
            for (size_t i = 0; i < n; i++) {
                uint64_t e = off[i];
                for (size_t j = 0; j < width; j++) {
                    const uint8_t *v = vals + (i * width + j) * vs;
                    if (memcmp(v, zero, vs) || j == i % width) {
                        cols[e] = (uint32_t)j;
                        memcpy(nz + e * vs, v, vs);
                        e++;
                    }
                }
                off[i + 1] = e;
            }
            filter_sparse rows = {off, cols, nz};
            for (size_t sp = 0; sp < sizeof specs / sizeof *specs; sp++) {
                filter_chain *a = chain(specs[sp], FILTER_PUSH, (loom_type)t, width);
                filter_chain *b = chain(specs[sp], FILTER_PUSH, (loom_type)t, width);
                assert_true(filter_chain_takes_sparse(b));
                for (int round = 0; round < 2; round++) { /* keycache: then the digest */
                    filter_msg m = {.keys = keys, .vals = vals, .n = n};
                    uint8_t *ea, *eb;
                    size_t la, lb;
                    assert_int_equal(filter_chain_encode(a, &m, &ea, &la), 0);
                    assert_int_equal(filter_chain_encode_sparse(b, keys, n, &rows, &eb, &lb), 0);
                    assert_int_equal(la, lb);
                    assert_memory_equal(ea, eb, la);
                    free(ea);
                    free(eb);
                }
                uint64_t raw_a, raw_b, wire_a, wire_b, dropped;
                filter_chain_totals(a, &raw_a, &wire_a, &dropped);
                filter_chain_totals(b, &raw_b, &wire_b, &dropped);
                assert_int_equal(raw_a, raw_b);
                assert_int_equal(wire_a, wire_b);
                filter_chain_destroy(a);
                filter_chain_destroy(b);
            }
            free(keys), free(vals), free(off), free(cols), free(nz);
        }
    }
    filter_chain *q = chain("quant:8", FILTER_PUSH, LOOM_F32, 4);
    uint64_t key = 1, off[2] = {0, 1};
    uint32_t col = 2;
    float one = 1;
    filter_sparse rows = {off, &col, &one};
    uint8_t *e;
    size_t len;
    assert_false(filter_chain_takes_sparse(q));
    assert_int_equal(filter_chain_encode_sparse(q, &key, 1, &rows, &e, &len), LOOM_EINVAL);
    filter_chain_destroy(q);
}

/* Chains of key lists (width 0: pull requests' keys, filter_spec_keys). A list
 * sent before goes as its digest (hits), an unknown digest is refused with the
 * digest and counted (a miss: the sender forgets it and the list goes whole
 * again), and hand-built lists that lie are refused and counted. */
static void test_key_lists(void **unused)
{
    (void)unused;
    filter_spec pull, keys_spec;
    char err[200] = "";
    assert_int_equal(filter_spec_parse("sparse,quant:8,keycache,zstd:5", &pull, err, sizeof err),
                     0);
    assert_int_equal(filter_spec_keys(&pull, &keys_spec), 1);
    for (int k = 0; k < FILTER_KIND_COUNT; k++)
        assert_int_equal(keys_spec.on[k], k == FILTER_KEYCACHE || k == FILTER_ZSTD);
    assert_true(keys_spec.arg[FILTER_ZSTD] == 5 && keys_spec.rows == FILTER_ROWS_AUTO);
    assert_int_equal(filter_spec_parse("sparse,quant:8", &pull, err, sizeof err), 0);
    assert_int_equal(filter_spec_keys(&pull, &keys_spec), 0); /* requests stay plain */
    filter_chain *bad = NULL;
    assert_int_equal(filter_chain_create(&pull, FILTER_PULL, LOOM_F32, 0, 1, &bad, err, sizeof err),
                     LOOM_EINVAL);
    assert_null(bad);
    assert_non_null(strstr(err, "key lists"));

    filter_chain *s = chain("keycache", FILTER_PULL, LOOM_F64, 0);
    filter_chain *r = chain("keycache", FILTER_PULL, LOOM_F64, 0);
    size_t n = 300;
    uint64_t *keys = random_keys(n);
    filter_msg m = {.keys = keys, .n = n};
    decoded d = {0};
    for (int round = 0; round < 3; round++) { /* the list, then its digest twice */
        assert_int_equal(send_msg(s, r, &m, &d), 0);
        assert_int_equal(d.wire, round ? 6 + 16 + 8 : 6 + 16 + n * 8);
        assert_int_equal(d.n, n);
        assert_memory_equal(d.keys, keys, n * 8);
        decoded_free(&d);
    }
    filter_stats kc = filter_chain_stats(s, FILTER_KEYCACHE);
    assert_int_equal(kc.msgs, 3);
    assert_int_equal(kc.bytes_in, 3 * n * 8);
    assert_int_equal(kc.bytes_out, n * 8 + 2 * 8);

    /* A receiver that does not hold the list (it restarted): a miss, counted;
     * the sender forgets the digest and the list goes whole, then as a digest. */
    filter_chain *fresh = chain("keycache", FILTER_PULL, LOOM_F64, 0);
    assert_int_equal(send_msg(s, fresh, &m, &d), LOOM_ENOTFOUND);
    assert_true(d.digest == filter_keys_digest(keys, n));
    assert_null(d.keys);
    uint64_t raw, wire, dropped;
    filter_chain_totals(fresh, &raw, &wire, &dropped);
    assert_int_equal(dropped, 1);
    filter_chain_forget_keys(s, d.digest);
    assert_int_equal(send_msg(s, fresh, &m, &d), 0);
    assert_int_equal(d.wire, 6 + 16 + n * 8);
    decoded_free(&d);
    assert_int_equal(send_msg(s, fresh, &m, &d), 0);
    assert_int_equal(d.wire, 6 + 16 + 8);
    assert_memory_equal(d.keys, keys, n * 8);
    decoded_free(&d);
    filter_chain_totals(fresh, &raw, &wire, &dropped);
    assert_int_equal(dropped, 1);

    /* Hostile lists, built by hand, each refused and counted by r. */
    uint8_t b[256];
    size_t p;
    /* a digest r never saw */
    p = put_frame(b, 0, 16 + 8);
    p += put_body_header(b + p, LOOM_F64, 2, 0, 0, n);
    put_u64(b + p, 0x0123456789abcdefULL);
    assert_int_equal(decode_code(r, b, p + 8), LOOM_ENOTFOUND);
    /* the digest r holds, with another count: a huge one (more than the
     * receiver takes) and one off by one */
    put_u64(b + 6 + 8, (uint64_t)1 << 40);
    put_u64(b + p, filter_keys_digest(keys, n));
    assert_int_equal(decode_code(r, b, p + 8), LOOM_EPROTO);
    put_u64(b + 6 + 8, n - 1);
    assert_int_equal(decode_code(r, b, p + 8), LOOM_EPROTO);
    put_u64(b + 6 + 8, n);
    assert_int_equal(decode_code(r, b, p + 8), 0); /* the right count: a hit */
    /* more keys claimed than the frame carries; keys out of order; sparse
     * rows without values; trailing bytes (values a key list does not have) */
    p = put_frame(b, 0, 16 + 3 * 8);
    p += put_body_header(b + p, LOOM_F64, 0, 0, 0, 4);
    for (int i = 0; i < 3; i++) put_u64(b + p + 8 * i, 10 + (uint64_t)i);
    assert_int_equal(decode_code(r, b, p + 24), LOOM_EPROTO);
    put_u64(b + 6 + 8, 3);
    assert_int_equal(decode_code(r, b, p + 24), 0);
    put_u64(b + p + 8, 9);
    assert_int_equal(decode_code(r, b, p + 24), LOOM_EPROTO);
    put_u64(b + p + 8, 11);
    b[6 + 3] = 1;
    assert_int_equal(decode_code(r, b, p + 24), LOOM_EPROTO);
    b[6 + 3] = 0;
    put_frame(b, 0, 16 + 3 * 8 + 8);
    memset(b + p + 24, 0, 8);
    assert_int_equal(decode_code(r, b, p + 32), LOOM_EPROTO);
    /* a table's rows sent to a chain of key lists, and the other way round */
    p = put_frame(b, 0, 16 + 8 + 8);
    p += put_body_header(b + p, LOOM_F64, 0, 0, 1, 1);
    put_u64(b + p, 5);
    memset(b + p + 8, 0, 8);
    assert_int_equal(decode_code(r, b, p + 16), LOOM_EPROTO);
    filter_chain *rows = chain("keycache", FILTER_PULL, LOOM_F64, 1);
    assert_int_equal(decode_code(rows, b, p + 16), 0);
    p = put_frame(b, 0, 16 + 8);
    p += put_body_header(b + p, LOOM_F64, 0, 0, 0, 1);
    put_u64(b + p, 5);
    assert_int_equal(decode_code(rows, b, p + 8), LOOM_EPROTO);
    filter_chain_totals(r, &raw, &wire, &dropped);
    assert_int_equal(dropped, 8);

    /* With zstd, a first list of keys close together is smaller than 8 bytes a key. */
    filter_chain *zs = chain("keycache,zstd", FILTER_PULL, LOOM_F64, 0);
    filter_chain *zr = chain("keycache,zstd", FILTER_PULL, LOOM_F64, 0);
    assert_int_equal(send_msg(zs, zr, &m, &d), 0);
    assert_true(d.wire < n * 8 / 2);
    assert_memory_equal(d.keys, keys, n * 8);
    decoded_free(&d);
    filter_chain_destroy(zs);
    filter_chain_destroy(zr);
    filter_chain_destroy(rows);
    filter_chain_destroy(fresh);
    filter_chain_destroy(r);
    filter_chain_destroy(s);
    free(keys);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec),
        cmocka_unit_test(test_exact_round_trips),
        cmocka_unit_test(test_compression_saves),
        cmocka_unit_test(test_compression_ratio_cap),
        cmocka_unit_test(test_keycache_miss),
        cmocka_unit_test(test_quant),
        cmocka_unit_test(test_skip_unbiased),
        cmocka_unit_test(test_kkt),
        cmocka_unit_test(test_sigmod_push),
        cmocka_unit_test(test_sigmod_flush_merges),
        cmocka_unit_test(test_sigmod_pull),
        cmocka_unit_test(test_sparse_rows),
        cmocka_unit_test(test_sparse_pays_probe),
        cmocka_unit_test(test_sparse_kept),
        cmocka_unit_test(test_sparse_given),
        cmocka_unit_test(test_key_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
