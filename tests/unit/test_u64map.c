/* u64map against a brute-force reference.
 *
 * The keys are drawn from a fixed universe of distinct values (random 64-bit
 * keys, keys with all-zero low bits, consecutive small ids, keys next to
 * UINT64_MAX, and 0), so the expected slot of every key can be kept in a
 * plain array indexed by its position in the universe. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/u64map.h"

#define UNIVERSE 60000
#define NO_SLOT  UINT32_MAX

#define TEST_RNG_SEED 0x123456789abcdefULL
#include "test_rng.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* A universe of UNIVERSE distinct keys of several shapes. */
static uint64_t *make_universe(void)
{
    uint64_t *u = malloc(UNIVERSE * sizeof *u);
    assert_non_null(u);
    for (size_t i = 0; i < UNIVERSE; i++) {
        switch (i % 5) {
        case 0:
            u[i] = i / 5;
            break; /* 0, 1, 2, ... */
        case 1:
            u[i] = UINT64_MAX - i / 5;
            break; /* ..., MAX-1, MAX */
        case 2:
            u[i] = (uint64_t)(i / 5 + 1) << 32;
            break; /* low 32 bits all zero */
        default:
            u[i] = rng() | (uint64_t)1 << 40;
            break; /* random, clear of the above */
        }
    }
    /* The reference needs the keys distinct: check rather than assume. */
    uint64_t *sorted = malloc(UNIVERSE * sizeof *sorted);
    assert_non_null(sorted);
    memcpy(sorted, u, UNIVERSE * sizeof *u);
    qsort(sorted, UNIVERSE, sizeof *sorted, cmp_u64);
    for (size_t i = 1; i < UNIVERSE; i++) assert_true(sorted[i - 1] != sorted[i]);
    free(sorted);
    return u;
}

static void check_all(const u64map *m, const uint64_t *keys, const uint32_t *ref)
{
    size_t present = 0;
    for (size_t i = 0; i < UNIVERSE; i++) {
        uint32_t slot = 12345;
        int found = u64map_get(m, keys[i], &slot);
        if (ref[i] == NO_SLOT) {
            assert_int_equal(found, 0);
        } else {
            assert_int_equal(found, 1);
            assert_int_equal(slot, ref[i]);
            present++;
        }
    }
    assert_int_equal(u64map_size(m), present);
}

static void test_random_against_reference(void **unused)
{
    (void)unused;
    uint64_t *keys = make_universe();
    uint32_t *ref = malloc(UNIVERSE * sizeof *ref);
    assert_non_null(ref);
    for (size_t i = 0; i < UNIVERSE; i++) ref[i] = NO_SLOT;

    u64map m;
    assert_int_equal(u64map_init(&m, 0), 0); /* no hint: must grow many times */
    size_t initial_capacity = m.mask + 1;
    uint32_t next_slot = 0;
    for (int op = 0; op < 100000; op++) {
        size_t i = rng() % UNIVERSE;
        if (op % 4 == 3) { /* interleave lookups */
            uint32_t slot;
            assert_int_equal(u64map_get(&m, keys[i], &slot), ref[i] != NO_SLOT);
            if (ref[i] != NO_SLOT) assert_int_equal(slot, ref[i]);
            continue;
        }
        int inserted = -1;
        uint32_t got = u64map_put(&m, keys[i], next_slot, &inserted);
        if (ref[i] == NO_SLOT) {
            assert_int_equal(inserted, 1);
            assert_int_equal(got, next_slot);
            ref[i] = next_slot++;
        } else {
            assert_int_equal(inserted, 0);
            assert_int_equal(got, ref[i]);
        }
        /* Capacity is a power of two and the load stays at most 50%. */
        assert_int_equal((m.mask + 1) & m.mask, 0);
        assert_true(2 * u64map_size(&m) <= m.mask + 1);
    }
    assert_true(m.mask + 1 > initial_capacity);
    check_all(&m, keys, ref);

    /* Clear keeps the capacity and forgets every key. */
    size_t capacity = m.mask + 1;
    u64map_clear(&m);
    assert_int_equal(m.mask + 1, capacity);
    for (size_t i = 0; i < UNIVERSE; i++) ref[i] = NO_SLOT;
    check_all(&m, keys, ref);

    /* And the map is fully usable again, with new slots for old keys. */
    for (int op = 0; op < 20000; op++) {
        size_t i = rng() % UNIVERSE;
        int inserted;
        uint32_t want = ref[i] == NO_SLOT ? (uint32_t)op + 1000000 : ref[i];
        assert_int_equal(u64map_put(&m, keys[i], (uint32_t)op + 1000000, &inserted), want);
        assert_int_equal(inserted, ref[i] == NO_SLOT);
        ref[i] = want;
    }
    check_all(&m, keys, ref);

    u64map_free(&m);
    free(ref);
    free(keys);
}

static void test_hint_avoids_growth(void **unused)
{
    (void)unused;
    u64map m;
    assert_int_equal(u64map_init(&m, 1000), 0);
    size_t capacity = m.mask + 1;
    assert_true(capacity >= 2000);
    for (uint32_t i = 0; i < 1000; i++) {
        int inserted;
        assert_int_equal(u64map_put(&m, (uint64_t)i * 7919, i, &inserted), i);
        assert_int_equal(inserted, 1);
    }
    assert_int_equal(m.mask + 1, capacity);
    assert_int_equal(u64map_size(&m), 1000);
    u64map_free(&m);
}

static void test_empty_and_zeroed_maps(void **unused)
{
    (void)unused;
    u64map m;
    uint32_t slot = 7;
    assert_int_equal(u64map_init(&m, 0), 0);
    assert_int_equal(u64map_size(&m), 0);
    assert_int_equal(u64map_get(&m, 0, &slot), 0);
    assert_int_equal(u64map_get(&m, UINT64_MAX, &slot), 0);
    assert_int_equal(slot, 7); /* untouched on a miss */
    u64map_clear(&m);
    u64map_free(&m);

    /* A zero-filled map (and a freed one) behaves as an empty map. */
    u64map z;
    memset(&z, 0, sizeof z);
    assert_int_equal(u64map_get(&z, 42, &slot), 0);
    u64map_clear(&z);
    int inserted;
    assert_int_equal(u64map_put(&z, 42, UINT32_MAX - 1, &inserted), UINT32_MAX - 1);
    assert_int_equal(inserted, 1);
    assert_int_equal(u64map_get(&z, 42, &slot), 1);
    assert_int_equal(slot, UINT32_MAX - 1); /* the largest allowed slot survives the +1 */
    u64map_free(&z);
    assert_int_equal(u64map_size(&z), 0);
    assert_int_equal(u64map_get(&z, 42, &slot), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_against_reference),
        cmocka_unit_test(test_hint_avoids_growth),
        cmocka_unit_test(test_empty_and_zeroed_maps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
