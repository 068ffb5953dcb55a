/* rowops: adds (wrapping for integers), magnitudes, gather with duplicates
 * (sum and last-wins assign) and scatter, for every value type, against
 * loops written out per type here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ps/rowops.h"

#define TEST_RNG_SEED 0xdeadbeefcafef00dULL
#include "test_rng.h"

static const loom_type all_types[] = {LOOM_F32, LOOM_F64, LOOM_I32, LOOM_I64};

static size_t vsize(loom_type t)
{
    return t == LOOM_F32 || t == LOOM_I32 ? 4 : 8;
}

/* A random value of type t stored at p[i]; floats are small integers so sums are exact. */
static void set_random(loom_type t, void *p, size_t i)
{
    uint64_t r = rng();
    switch (t) {
    case LOOM_F32:
        ((float *)p)[i] = (float)((int)(r % 2001) - 1000);
        break;
    case LOOM_F64:
        ((double *)p)[i] = (double)((int)(r % 2001) - 1000) / 4;
        break;
    case LOOM_I32:
        memcpy((int32_t *)p + i, &r, 4);
        break; /* any bits, overflow likely */
    case LOOM_I64:
        memcpy((int64_t *)p + i, &r, 8);
        break;
    }
}

/* acc[i] += v[i] done the obvious way per type (integers through unsigned). */
static void ref_add(loom_type t, void *acc, const void *v, size_t i)
{
    switch (t) {
    case LOOM_F32:
        ((float *)acc)[i] += ((const float *)v)[i];
        break;
    case LOOM_F64:
        ((double *)acc)[i] += ((const double *)v)[i];
        break;
    case LOOM_I32: {
        uint32_t a, b;
        memcpy(&a, (char *)acc + 4 * i, 4);
        memcpy(&b, (const char *)v + 4 * i, 4);
        a += b;
        memcpy((char *)acc + 4 * i, &a, 4);
        break;
    }
    case LOOM_I64: {
        uint64_t a, b;
        memcpy(&a, (char *)acc + 8 * i, 8);
        memcpy(&b, (const char *)v + 8 * i, 8);
        a += b;
        memcpy((char *)acc + 8 * i, &a, 8);
        break;
    }
    }
}

static void test_add_wraps_integers(void **unused)
{
    (void)unused;
    int32_t a32[4] = {INT32_MAX, INT32_MIN, -1, 5};
    int32_t d32[4] = {1, -1, 1, -7};
    rows_add(LOOM_I32, a32, d32, 4);
    assert_int_equal(a32[0], INT32_MIN);
    assert_int_equal(a32[1], INT32_MAX);
    assert_int_equal(a32[2], 0);
    assert_int_equal(a32[3], -2);

    int64_t a64[3] = {INT64_MAX, INT64_MIN, 40};
    int64_t d64[3] = {2, -2, 2};
    rows_add(LOOM_I64, a64, d64, 3);
    assert_true(a64[0] == INT64_MIN + 1);
    assert_true(a64[1] == INT64_MAX - 1);
    assert_true(a64[2] == 42);

    float f[2] = {1.5f, -2.0f}, df[2] = {0.25f, 2.0f};
    rows_add(LOOM_F32, f, df, 2);
    assert_true(f[0] == 1.75f && f[1] == 0.0f);
    double g[2] = {1e300, 3.0}, dg[2] = {1e300, -0.5};
    rows_add(LOOM_F64, g, dg, 1); /* count 1: the second value is left alone */
    assert_true(g[0] == 2e300 && g[1] == 3.0);
}

static void test_add_random(void **unused)
{
    (void)unused;
    for (size_t ti = 0; ti < 4; ti++) {
        loom_type t = all_types[ti];
        size_t n = 257, sz = vsize(t);
        char *a = malloc(n * sz), *b = malloc(n * sz), *want = malloc(n * sz);
        for (size_t i = 0; i < n; i++) {
            set_random(t, a, i);
            set_random(t, b, i);
        }
        memcpy(want, a, n * sz);
        for (size_t i = 0; i < n; i++) ref_add(t, want, b, i);
        rows_add(t, a, b, n);
        assert_memory_equal(a, want, n * sz);
        free(a);
        free(b);
        free(want);
    }
}

/* gather/scatter with many duplicates, both combine modes, every type. */
static void test_gather_scatter(void **unused)
{
    (void)unused;
    const size_t width = 3, n = 500, nuniq = 37;
    uint32_t slot[500];
    for (size_t ti = 0; ti < 4; ti++) {
        loom_type t = all_types[ti];
        size_t row = width * vsize(t);
        char *in = malloc(n * row), *out = malloc(nuniq * row), *want = malloc(nuniq * row);
        for (size_t i = 0; i < n; i++) {
            slot[i] = (uint32_t)(rng() % nuniq);
            for (size_t j = 0; j < width; j++) set_random(t, in, i * width + j);
        }

        /* Sum: start from zero, add every occurrence. */
        memset(want, 0, nuniq * row);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < width; j++) ref_add(t, want + slot[i] * row, in + i * row, j);
        memset(out, 0x5a, nuniq * row); /* garbage: gather must zero it */
        rows_gather(t, width, in, slot, n, out, nuniq, 0);
        assert_memory_equal(out, want, nuniq * row);

        /* Assign: the last occurrence of each slot wins. */
        memset(want, 0, nuniq * row);
        for (size_t u = 0; u < nuniq; u++)
            for (size_t i = n; i-- > 0;)
                if (slot[i] == u) {
                    memcpy(want + u * row, in + i * row, row);
                    break;
                }
        memset(out, 0x5a, nuniq * row);
        rows_gather(t, width, in, slot, n, out, nuniq, 1);
        assert_memory_equal(out, want, nuniq * row);

        /* Scatter the unique rows back out to every position. */
        char *back = malloc(n * row);
        rows_scatter(t, width, out, slot, n, back);
        for (size_t i = 0; i < n; i++)
            assert_memory_equal(back + i * row, out + slot[i] * row, row);
        /* With assign, each position that was the last of its slot gets its own row back. */
        for (size_t i = 0; i < n; i++) {
            int last = 1;
            for (size_t k = i + 1; k < n; k++) last &= slot[k] != slot[i];
            if (last) assert_memory_equal(back + i * row, in + i * row, row);
        }
        free(back);
        free(in);
        free(out);
        free(want);
    }
}

static void test_gather_empty(void **unused)
{
    (void)unused;
    float out[2] = {9, 9};
    rows_gather(LOOM_F32, 2, NULL, NULL, 0, out, 1, 0);
    assert_true(out[0] == 0 && out[1] == 0); /* zeroed even with nothing to gather */
    rows_gather(LOOM_F32, 2, NULL, NULL, 0, NULL, 0, 1);
    rows_scatter(LOOM_F32, 2, NULL, NULL, 0, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add_wraps_integers),
        cmocka_unit_test(test_add_random),
        cmocka_unit_test(test_gather_scatter),
        cmocka_unit_test(test_gather_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
