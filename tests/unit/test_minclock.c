/* minclock against a scan of every clock: random monotone clock moves of
 * many workers (lockstep, stragglers, jumps, workers ending with
 * PS_CLOCK_DONE), the minimum compared after each; and the edge cases of no
 * worker and one worker. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "ps/minclock.h"
#include "ps/ps.h"

#define TEST_RNG_SEED 0x5eedc10cULL
#include "test_rng.h"

static int64_t scan_min(const ps_minclock *m)
{
    int64_t min = INT64_MAX;
    for (int w = 0; w < m->n; w++)
        if (m->of[w] < min) min = m->of[w];
    return min;
}

static void test_random_against_scan(void **state)
{
    (void)state;
    for (int round = 0; round < 50; round++) {
        int n = 1 + (int)(rng() % 300);
        ps_minclock m;
        assert_int_equal(ps_minclock_init(&m, n), 0);
        assert_int_equal(m.min, 0);
        for (int step = 0; step < 20000; step++) {
            int w = (int)(rng() % (uint64_t)n);
            if (m.of[w] == PS_CLOCK_DONE) continue;
            uint64_t r = rng() % 100;
            int64_t to = r < 1    ? PS_CLOCK_DONE                      /* the worker ends */
                         : r < 10 ? m.of[w]                            /* the same clock again */
                         : r < 15 ? m.of[w] + 1 + (int64_t)(rng() % 5) /* a jump */
                                  : m.of[w] + 1;
            int64_t min = ps_minclock_set(&m, w, to);
            assert_int_equal(min, scan_min(&m));
            assert_int_equal(m.min, scan_min(&m));
        }
        for (int w = 0; w < n; w++) ps_minclock_set(&m, w, PS_CLOCK_DONE);
        assert_true(m.min == PS_CLOCK_DONE);
        ps_minclock_free(&m);
    }
}

static void test_edges(void **state)
{
    (void)state;
    ps_minclock m;
    assert_int_equal(ps_minclock_init(&m, 0), 0); /* no worker: nothing to wait for */
    assert_true(m.min == PS_CLOCK_DONE);
    ps_minclock_free(&m);
    assert_int_equal(ps_minclock_init(&m, 1), 0);
    assert_int_equal(ps_minclock_set(&m, 0, 3), 3);
    assert_int_equal(ps_minclock_set(&m, 0, 3), 3);
    assert_true(ps_minclock_set(&m, 0, PS_CLOCK_DONE) == PS_CLOCK_DONE);
    ps_minclock_free(&m);
    /* Lockstep: the minimum moves once every worker has moved. */
    assert_int_equal(ps_minclock_init(&m, 4), 0);
    for (int c = 1; c <= 3; c++)
        for (int w = 0; w < 4; w++) assert_int_equal(ps_minclock_set(&m, w, c), w == 3 ? c : c - 1);
    ps_minclock_free(&m);
}

/* A worker joining a running job (docs/ELASTIC.md): its slot was done; it
 * enters at its clock, raised to the minimum if below, so the minimum never
 * goes back; then it moves like any other. */
static void test_join(void **state)
{
    (void)state;
    ps_minclock m;
    assert_int_equal(ps_minclock_init(&m, 3), 0);
    assert_true(ps_minclock_set(&m, 2, PS_CLOCK_DONE) == 0); /* a free slot */
    ps_minclock_set(&m, 0, 5);
    assert_int_equal(ps_minclock_set(&m, 1, 7), 5);
    assert_int_equal(ps_minclock_join(&m, 2, 7), 7); /* at the fastest: min stays 5 */
    assert_int_equal(m.min, 5);
    assert_int_equal(m.at_min, 1);
    assert_int_equal(ps_minclock_set(&m, 0, 8), 7); /* now workers 1 and 2 are the slowest */
    assert_int_equal(m.at_min, 2);
    assert_true(ps_minclock_set(&m, 2, PS_CLOCK_DONE) == 7); /* it leaves */
    assert_int_equal(ps_minclock_set(&m, 1, 9), 8);
    assert_int_equal(ps_minclock_join(&m, 2, 3), 8); /* below the min: raised to it */
    assert_int_equal(m.of[2], 8);
    assert_int_equal(m.min, 8);
    /* Every other worker done: it joins where it says. */
    ps_minclock_set(&m, 0, PS_CLOCK_DONE);
    ps_minclock_set(&m, 1, PS_CLOCK_DONE);
    ps_minclock_set(&m, 2, PS_CLOCK_DONE);
    assert_int_equal(ps_minclock_join(&m, 1, 4), 4);
    assert_int_equal(m.min, 4);
    ps_minclock_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_against_scan),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_join),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
