/* keys: keys_sort_unique against qsort + dedupe, on random and edge-case
 * inputs; keys_sorted_unique and sorted_lower_bound_u64 (core/sorted.h) against linear scans. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "core/sorted.h"
#include "loom/error.h"
#include "ps/keys.h"

#define TEST_RNG_SEED 0x9e3779b97f4a7c15ULL
#include "test_rng.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sort + dedupe `in` with qsort and compare keys_sort_unique's answer to it. */
static void check_sort_unique(const uint64_t *in, size_t n)
{
    uint64_t *ref = malloc((n ? n : 1) * sizeof *ref);
    assert_non_null(ref);
    if (n) memcpy(ref, in, n * sizeof *in);
    qsort(ref, n, sizeof *ref, cmp_u64);
    size_t nref = 0;
    for (size_t i = 0; i < n; i++)
        if (nref == 0 || ref[i] != ref[nref - 1]) ref[nref++] = ref[i];

    uint64_t *uniq = NULL;
    uint32_t *slot = NULL;
    size_t nuniq = 12345;
    assert_int_equal(keys_sort_unique(in, n, &uniq, &nuniq, &slot), 0);
    assert_non_null(uniq);
    assert_non_null(slot);
    assert_int_equal(nuniq, nref);
    if (nref) assert_memory_equal(uniq, ref, nref * sizeof *ref);
    for (size_t i = 0; i < n; i++) {
        assert_true(slot[i] < nuniq);
        assert_true(uniq[slot[i]] == in[i]);
    }
    assert_int_equal(keys_sorted_unique(uniq, nuniq), 1);
    free(uniq);
    free(slot);
    free(ref);
}

static void test_edge_cases(void **unused)
{
    (void)unused;
    uint64_t one = 42;
    check_sort_unique(NULL, 0);
    check_sort_unique(&one, 1);

    uint64_t k[1000];
    for (size_t i = 0; i < 1000; i++) k[i] = 7; /* all equal */
    check_sort_unique(k, 1000);
    for (size_t i = 0; i < 1000; i++) k[i] = i * 3; /* sorted, unique */
    check_sort_unique(k, 1000);
    for (size_t i = 0; i < 1000; i++) k[i] = i / 4; /* sorted, duplicates */
    check_sort_unique(k, 1000);
    for (size_t i = 0; i < 1000; i++) k[i] = 1000 - i; /* reversed */
    check_sort_unique(k, 1000);
    for (size_t i = 0; i < 1000; i++) k[i] = UINT64_MAX - rng() % 50; /* next to the top */
    check_sort_unique(k, 1000);
    for (size_t i = 0; i < 1000; i++) k[i] = rng() % 2 ? UINT64_MAX : 0; /* the extremes */
    check_sort_unique(k, 1000);
    for (size_t i = 0; i < 1000; i++) k[i] = (rng() % 256) << 56; /* only high bits vary */
    check_sort_unique(k, 1000);
    for (size_t i = 0; i < 1000; i++) k[i] = (uint64_t)1 << (rng() % 64); /* one bit each */
    check_sort_unique(k, 1000);
    /* Sorted except for the last key, which goes first. */
    for (size_t i = 0; i < 1000; i++) k[i] = i + 1;
    k[999] = 0;
    check_sort_unique(k, 1000);
}

/* Every small size, so each threshold between sorting strategies is crossed. */
static void test_small_sizes(void **unused)
{
    (void)unused;
    uint64_t k[300];
    for (size_t n = 2; n <= 300; n++) {
        for (size_t i = 0; i < n; i++) k[i] = rng() >> (n % 64);
        check_sort_unique(k, n);
        for (size_t i = 0; i < n; i++) k[i] = rng() % (n / 2 + 1); /* duplicates */
        check_sort_unique(k, n);
    }
}

static void test_random_large(void **unused)
{
    (void)unused;
    size_t n = 200000;
    uint64_t *k = malloc(n * sizeof *k);
    assert_non_null(k);

    for (size_t i = 0; i < n; i++) k[i] = rng(); /* full 64-bit */
    check_sort_unique(k, n);
    for (size_t i = 0; i < n; i++) k[i] = rng() % 1000; /* many duplicates */
    check_sort_unique(k, n);
    for (size_t i = 0; i < n; i++) k[i] = rng() % (1u << 20); /* row ids, some repeated */
    check_sort_unique(k, n);
    for (size_t i = 0; i < n; i++) k[i] = rng() % 3 ? rng() % 5000 : rng(); /* skewed */
    check_sort_unique(k, n);
    /* Clusters: few distinct high parts, each with dense low parts. */
    for (size_t i = 0; i < n; i++) k[i] = (rng() % 4) << 48 | rng() % 100000;
    check_sort_unique(k, n);
    for (size_t i = 0; i < n; i++) k[i] = UINT64_MAX - rng() % 300000;
    check_sort_unique(k, n);
    free(k);
}

/* One million random keys: correct, and timed for information (sanitizer
 * builds are slow, so the time is printed, not asserted). */
static void test_million(void **unused)
{
    (void)unused;
    size_t n = 1000000;
    uint64_t *k = malloc(n * sizeof *k);
    assert_non_null(k);
    for (size_t i = 0; i < n; i++) k[i] = rng();
    k[n - 1] = k[0]; /* and at least one duplicate */

    struct timespec t0, t1;
    uint64_t *uniq;
    uint32_t *slot;
    size_t nuniq;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(keys_sort_unique(k, n, &uniq, &nuniq, &slot), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    print_message("keys_sort_unique, 1M random keys: %.1f ms\n",
                  (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    free(uniq);
    free(slot);

    check_sort_unique(k, n);
    free(k);
}

static void test_sorted_unique(void **unused)
{
    (void)unused;
    uint64_t up[] = {0, 1, 5, UINT64_MAX};
    uint64_t dup[] = {0, 1, 1, 5};
    uint64_t down[] = {0, 5, 1};
    assert_int_equal(keys_sorted_unique(NULL, 0), 1);
    assert_int_equal(keys_sorted_unique(up, 1), 1);
    assert_int_equal(keys_sorted_unique(up, 4), 1);
    assert_int_equal(keys_sorted_unique(dup, 4), 0);
    assert_int_equal(keys_sorted_unique(dup, 2), 1);
    assert_int_equal(keys_sorted_unique(down, 3), 0);
}

static void test_lower_bound(void **unused)
{
    (void)unused;
    assert_int_equal(sorted_lower_bound_u64(NULL, 0, 5), 0);
    uint64_t k[200] = {0};
    for (int round = 0; round < 200; round++) {
        size_t n = (size_t)(rng() % 200);
        for (size_t i = 0; i < n; i++) k[i] = rng() % 1000 * 1000;
        if (n && round % 2) k[n - 1] = UINT64_MAX;
        qsort(k, n, sizeof *k, cmp_u64);
        uint64_t bounds[] = {0, 1, UINT64_MAX, rng() % 1000000, n ? k[rng() % n] : 3};
        for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
            size_t want = 0;
            while (want < n && k[want] < bounds[b]) want++;
            assert_int_equal(sorted_lower_bound_u64(k, n, bounds[b]), want);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edge_cases),    cmocka_unit_test(test_small_sizes),
        cmocka_unit_test(test_random_large),  cmocka_unit_test(test_million),
        cmocka_unit_test(test_sorted_unique), cmocka_unit_test(test_lower_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
