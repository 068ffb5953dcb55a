/* filter_hostile: hostile filter encodings (src/ps/filter*.c), split from
 * test_filter.c. Truncated, oversized and malformed frames, and sparse rows built
 * by hand, are refused with an error code and counted as dropped, and a refused
 * message leaves the key cache alone. */
#include "filter_helpers.h"

/* ---- hostile encodings ---- */

/* One valid encoding of spec (two messages, so that a key cache sends a digest). */
static uint8_t *valid_frame(filter_chain *s, size_t *len, size_t n)
{
    uint64_t *keys = random_keys(n);
    void *vals = random_values(LOOM_F32, n * 2);
    filter_msg m = {.keys = keys, .vals = vals, .n = n};
    uint8_t *buf;
    assert_int_equal(filter_chain_encode(s, &m, &buf, len), 0);
    free(keys);
    free(vals);
    return buf;
}

static void test_hostile_truncated(void **unused)
{
    (void)unused;
    const char *specs[] = {"", "quant:8", "quant:16", "lz4", "zstd", "keycache", "sparse"};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        filter_chain *s = chain(specs[i], FILTER_PUSH, LOOM_F32, 2);
        filter_chain *r = chain(specs[i], FILTER_PUSH, LOOM_F32, 2);
        size_t len;
        uint8_t *buf = valid_frame(s, &len, 300);
        uint64_t refused = 0;
        for (size_t cut = 0; cut < len; cut++) {
            if (decode_code(r, buf, cut) == 0)
                fail_msg("%s: cut to %zu bytes decoded", specs[i], cut);
            refused++;
        }
        /* One byte too many. */
        uint8_t *longer = malloc(len + 1);
        memcpy(longer, buf, len);
        longer[len] = 0;
        assert_int_equal(decode_code(r, longer, len + 1), LOOM_EPROTO);
        refused++;
        uint64_t raw, wire, dropped;
        filter_chain_totals(r, &raw, &wire, &dropped);
        assert_int_equal(dropped, refused);
        assert_int_equal(decode_code(r, buf, len), 0); /* the whole is fine */
        free(longer);
        free(buf);
        filter_chain_destroy(s);
        filter_chain_destroy(r);
    }
}

static void test_hostile_malformed(void **unused)
{
    (void)unused;
    filter_chain *r = chain("keycache,quant:8", FILTER_PUSH, LOOM_F32, 1);
    uint8_t b[256];
    size_t p;
    float one = 1.0f;

    /* The well-formed frame the cases below spoil: two keys, raw f32. */
    p = put_frame(b, 0, 16 + 16 + 8);
    p += put_body_header(b + p, LOOM_F32, 0, 0, 1, 2);
    put_u64(b + p, 3);
    put_u64(b + p + 8, 7);
    memcpy(b + p + 16, &one, 4);
    memcpy(b + p + 20, &one, 4);
    assert_int_equal(decode_code(r, b, 46), 0);

    uint8_t x[256];
#define SPOIL(offset, byte, code)                                                                  \
    do {                                                                                           \
        memcpy(x, b, sizeof x);                                                                    \
        x[offset] = (byte);                                                                        \
        assert_int_equal(decode_code(r, x, 46), code);                                             \
    } while (0)
    SPOIL(0, 2, LOOM_EPROTO);        /* version */
    SPOIL(1, 3, LOOM_EPROTO);        /* codec */
    SPOIL(5, 0x10, LOOM_ELIMIT);     /* body length 256 MiB + 40: oversized */
    SPOIL(6, LOOM_F64, LOOM_EPROTO); /* another type */
    SPOIL(7, 3, LOOM_EPROTO);        /* key form */
    SPOIL(8, 4, LOOM_EPROTO);        /* value form */
    SPOIL(9, 1, LOOM_EPROTO);        /* reserved byte */
    SPOIL(10, 2, LOOM_EPROTO);       /* another width */
    SPOIL(14, 3, LOOM_EPROTO);       /* n = 3: the sizes do not add up */
    SPOIL(21, 0xff, LOOM_EPROTO);    /* n near 2^64 */
    SPOIL(30, 3, LOOM_EPROTO);       /* keys 3, 3: not ascending */
    SPOIL(30, 2, LOOM_EPROTO);       /* keys 3, 2 */
    SPOIL(30, 8, 0);                 /* keys 3, 8: fine */
#undef SPOIL

    /* Quantised blocks: a scale that is NaN or negative, an integer of -128. */
    double scales[] = {NAN, -1.0, INFINITY};
    for (size_t i = 0; i < 3; i++) {
        p = put_frame(b, 0, 16 + 16 + 8 + 2);
        p += put_body_header(b + p, LOOM_F32, 0, 8, 1, 2);
        put_u64(b + p, 3);
        put_u64(b + p + 8, 7);
        uint64_t bits;
        memcpy(&bits, &scales[i], 8);
        put_u64(b + p + 16, bits);
        b[p + 24] = 1;
        b[p + 25] = 2;
        assert_int_equal(decode_code(r, b, p + 26), LOOM_EPROTO);
    }
    double scale = 0.5;
    uint64_t bits;
    memcpy(&bits, &scale, 8);
    put_u64(b + p + 16, bits);
    assert_int_equal(decode_code(r, b, p + 26), 0);
    b[p + 25] = 0x80; /* -128 */
    assert_int_equal(decode_code(r, b, p + 26), LOOM_EPROTO);
    b[p + 25] = 0x81; /* -127 */
    assert_int_equal(decode_code(r, b, p + 26), 0);

    /* A digest: unknown, then known but for another count. */
    uint64_t keys[5] = {1, 2, 3, 4, 5};
    p = put_frame(b, 0, 16 + 40 + 20);
    p += put_body_header(b + p, LOOM_F32, 1, 0, 1, 5);
    for (int i = 0; i < 5; i++) put_u64(b + p + 8 * i, keys[i]);
    memset(b + p + 40, 0, 20);
    /* A keep-list whose values are refused must not enter the cache: quantised
     * with a -128, the same keys. */
    uint8_t q[256];
    size_t qp = put_frame(q, 0, 16 + 40 + 8 + 5);
    qp += put_body_header(q + qp, LOOM_F32, 1, 8, 1, 5);
    for (int i = 0; i < 5; i++) put_u64(q + qp + 8 * i, keys[i]);
    put_u64(q + qp + 40, bits);
    memset(q + qp + 48, 0x80, 5);
    assert_int_equal(decode_code(r, q, qp + 53), LOOM_EPROTO);
    /* A sender of the same keys: its second message is the digest, which r does
     * not hold until the keep-list above arrives whole. */
    filter_chain *s = chain("keycache", FILTER_PUSH, LOOM_F32, 1);
    float five[5] = {1, 2, 3, 4, 5};
    filter_msg m = {.keys = keys, .vals = five, .n = 5};
    uint8_t *buf;
    size_t len;
    assert_int_equal(filter_chain_encode(s, &m, &buf, &len), 0);
    free(buf);
    assert_int_equal(filter_chain_encode(s, &m, &buf, &len), 0); /* the digest form */
    assert_int_equal(len, 6 + 16 + 8 + 20);
    uint64_t *k;
    void *v;
    size_t n;
    uint64_t digest = 0;
    assert_int_equal(filter_chain_decode(r, buf, len, SIZE_MAX, &k, &v, &n, &digest),
                     LOOM_ENOTFOUND);
    assert_true(digest != 0);
    assert_int_equal(decode_code(r, b, p + 60), 0); /* the keep-list: now cached */
    assert_int_equal(filter_chain_decode(r, buf, len, SIZE_MAX, &k, &v, &n, &digest), 0);
    assert_memory_equal(k, keys, sizeof keys);
    free(k);
    free(v);
    buf[6 + 8] = 4; /* the digest with a count of 4 (and four values) */
    buf[2] -= 4;
    assert_int_equal(decode_code(r, buf, len - 4), LOOM_EPROTO);
    free(buf);
    filter_chain_destroy(s);

    /* Compressed frames: garbage, and a valid one that claims another size. */
    filter_chain *zr = chain("zstd", FILTER_PUSH, LOOM_F32, 2);
    filter_chain *lr = chain("lz4", FILTER_PUSH, LOOM_F32, 2);
    memset(b, 0x5a, sizeof b);
    put_frame(b, 2, 100);
    assert_int_equal(decode_code(zr, b, 80), LOOM_EPROTO);
    put_frame(b, 1, 100);
    assert_int_equal(decode_code(lr, b, 80), LOOM_EPROTO);
    /* A decompression bomb: 80 bytes that claim more than 255 times as much. */
    put_frame(b, 2, 80 * FILTER_MAX_RATIO - 6 + 1);
    assert_int_equal(decode_code(zr, b, 80), LOOM_ELIMIT);
    put_frame(b, 1, 80 * FILTER_MAX_RATIO - 6 + 1);
    assert_int_equal(decode_code(lr, b, 80), LOOM_ELIMIT);
    filter_chain *zs = chain("zstd", FILTER_PUSH, LOOM_F32, 2);
    filter_chain *ls = chain("lz4", FILTER_PUSH, LOOM_F32, 2);
    for (int c = 0; c < 2; c++) {
        size_t flen;
        uint8_t *f = valid_frame(c ? zs : ls, &flen, 500);
        assert_int_equal(f[1], c ? 2 : 1); /* it did compress */
        filter_chain *rr = c ? zr : lr;
        assert_int_equal(decode_code(rr, f, flen), 0);
        f[2]++; /* one byte more claimed */
        assert_int_equal(decode_code(rr, f, flen), LOOM_EPROTO);
        f[2] -= 2; /* one byte fewer */
        assert_int_equal(decode_code(rr, f, flen), LOOM_EPROTO);
        f[2]++;
        /* A flipped bit inside may still decompress (to other values): either way
         * decode_code checks the code and that nothing is returned on refusal. */
        f[flen / 2] ^= 0x40;
        decode_code(rr, f, flen);
        free(f);
    }
    filter_chain_destroy(zs);
    filter_chain_destroy(ls);
    filter_chain_destroy(zr);
    filter_chain_destroy(lr);
    filter_chain_destroy(r);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* A sparse body of width 4 (f32) with two rows, keys 1 and 2, each given by
 * its count and columns; one value per column. Returns the frame's length. */
static size_t sparse_frame(uint8_t *b, uint64_t n, const uint32_t *counts, const uint16_t *cols,
                           size_t ncols, int extra_bytes)
{
    size_t body = 16 + 2 * 8 + 2 * 4 + ncols * (2 + 4) + (size_t)extra_bytes;
    size_t p = put_frame(b, 0, (uint32_t)body);
    p += put_body_header(b + p, LOOM_F32, 0, 0, 4, n);
    b[6 + 3] = 1; /* sparse rows */
    put_u64(b + p, 1);
    put_u64(b + p + 8, 2);
    p += 16;
    put_u32(b + p, counts[0]);
    put_u32(b + p + 4, counts[1]);
    p += 8;
    for (size_t i = 0; i < ncols; i++, p += 2) {
        b[p] = (uint8_t)cols[i];
        b[p + 1] = (uint8_t)(cols[i] >> 8);
    }
    float one = 1.0f;
    for (size_t i = 0; i < ncols; i++, p += 4) memcpy(b + p, &one, 4);
    memset(b + p, 0, (size_t)extra_bytes);
    return p + (size_t)extra_bytes;
}

/* Sparse rows built by hand: the well-formed one decodes to what it says;
 * every lie about counts, columns or length is refused and nothing is returned. */
static void test_hostile_sparse(void **unused)
{
    (void)unused;
    filter_chain *r = chain("", FILTER_PUSH, LOOM_F32, 4);
    uint8_t b[512];
    const uint32_t ok_counts[2] = {2, 1};
    const uint16_t ok_cols[3] = {0, 3, 2};
    size_t len = sparse_frame(b, 2, ok_counts, ok_cols, 3, 0);
    uint64_t *k;
    void *v;
    size_t n;
    uint64_t digest;
    assert_int_equal(filter_chain_decode(r, b, len, SIZE_MAX, &k, &v, &n, &digest), 0);
    const float want[8] = {1, 0, 0, 1, 0, 0, 1, 0};
    assert_int_equal(n, 2);
    assert_memory_equal(v, want, sizeof want);
    free(k);
    free(v);
    /* More rows than the receiver takes (a pull reply answering one row). */
    assert_int_equal(filter_chain_decode(r, b, len, 1, &k, &v, &n, &digest), LOOM_EPROTO);
    assert_null(k);
    assert_null(v);
    assert_int_equal(filter_chain_decode(r, b, len, 2, &k, &v, &n, &digest), 0);
    free(k);
    free(v);
    /* A row claiming more values than the width. */
    const uint32_t too_many[2] = {5, 0};
    const uint16_t five[5] = {0, 1, 2, 3, 3};
    assert_int_equal(decode_code(r, b, sparse_frame(b, 2, too_many, five, 5, 0)), LOOM_EPROTO);
    /* A column outside the row, a repeated column, columns descending. */
    const uint16_t outside[3] = {0, 4, 2}, repeated[3] = {1, 1, 2}, descending[3] = {3, 0, 2};
    assert_int_equal(decode_code(r, b, sparse_frame(b, 2, ok_counts, outside, 3, 0)), LOOM_EPROTO);
    assert_int_equal(decode_code(r, b, sparse_frame(b, 2, ok_counts, repeated, 3, 0)), LOOM_EPROTO);
    assert_int_equal(decode_code(r, b, sparse_frame(b, 2, ok_counts, descending, 3, 0)),
                     LOOM_EPROTO);
    /* Counts that do not add up to the values present: one more, one fewer. */
    const uint32_t more[2] = {2, 2}, fewer[2] = {1, 1};
    assert_int_equal(decode_code(r, b, sparse_frame(b, 2, more, ok_cols, 3, 0)), LOOM_EPROTO);
    assert_int_equal(decode_code(r, b, sparse_frame(b, 2, fewer, ok_cols, 3, 0)), LOOM_EPROTO);
    /* Bytes after the last value. */
    assert_int_equal(decode_code(r, b, sparse_frame(b, 2, ok_counts, ok_cols, 3, 3)), LOOM_EPROTO);
    /* Sparse with quantised values, and an unknown row layout. */
    len = sparse_frame(b, 2, ok_counts, ok_cols, 3, 0);
    b[6 + 2] = 8;
    assert_int_equal(decode_code(r, b, len), LOOM_EPROTO);
    b[6 + 2] = 0;
    b[6 + 3] = 2;
    assert_int_equal(decode_code(r, b, len), LOOM_EPROTO);
    /* Many empty rows in few bytes: what they decode to is bounded like any
     * message (FILTER_MAX_BYTES), and a count the frame cannot hold is a lie. */
    filter_chain *wide = chain("", FILTER_PUSH, LOOM_F32, 100000);
    size_t rows = 2000, body = 16 + rows * 8 + rows * 4;
    uint8_t *big = calloc(6 + body, 1);
    size_t p = put_frame(big, 0, (uint32_t)body);
    p += put_body_header(big + p, LOOM_F32, 0, 0, 100000, rows);
    big[6 + 3] = 1;
    for (size_t i = 0; i < rows; i++) put_u64(big + p + 8 * i, i);
    assert_int_equal(decode_code(wide, big, 6 + body), LOOM_ELIMIT);
    put_body_header(big + 6, LOOM_F32, 0, 0, 100000, (uint64_t)1 << 40);
    big[6 + 3] = 1;
    assert_int_equal(decode_code(wide, big, 6 + body), LOOM_EPROTO);
    free(big);
    filter_chain_destroy(wide);
    uint64_t raw, wire, dropped;
    filter_chain_totals(r, &raw, &wire, &dropped);
    assert_int_equal(dropped, 10); /* nine malformed frames and one with more rows than asked */
    filter_chain_destroy(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_truncated),
        cmocka_unit_test(test_hostile_malformed),
        cmocka_unit_test(test_hostile_sparse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
