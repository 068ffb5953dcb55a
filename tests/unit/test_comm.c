/* comm (managed communication): the token bucket's arithmetic with explicit
 * times, the ack window, each priority policy's choice order (checked
 * against an order computed here, and deterministic given the seed), row
 * magnitudes, and a server's set of changed rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ps/comm.h"

/* ---- token bucket ---- */

static void test_bucket_paces_to_the_budget(void **state)
{
    (void)state;
    comm_bucket b;
    comm_bucket_init(&b, 8.0, 1000); /* 8 Mbit/s = 1000 bytes per ms */
    assert_true(comm_bucket_ready(&b, 1000));
    /* A full bucket holds a 50 ms burst; a send larger than that still goes out
     * (never split) and leaves a debt the budget pays back. */
    comm_bucket_charge(&b, 1000, 50000 + 30000);
    assert_false(comm_bucket_ready(&b, 1000));
    assert_int_equal(comm_bucket_due(&b, 1000), 1030);
    assert_false(comm_bucket_ready(&b, 1029));
    assert_true(comm_bucket_ready(&b, 1030));
    /* Idle time refills only up to the burst. */
    assert_true(comm_bucket_ready(&b, 1000000));
    comm_bucket_charge(&b, 1000000, 50001);
    assert_int_equal(comm_bucket_due(&b, 1000000), 1000001);
    /* Over a long run the bytes sent never exceed burst + rate * time. */
    comm_bucket_init(&b, 1.0, 0); /* 125 bytes per ms */
    uint64_t sent = 0, now = 0;
    while (now < 10000) {
        now = comm_bucket_due(&b, now);
        comm_bucket_charge(&b, now, 700);
        sent += 700;
    }
    assert_true(sent <= 125 * 50 + 125 * now + 700);
    assert_true(sent >= 125 * (now - 10));
}

static void test_unlimited_bucket(void **state)
{
    (void)state;
    comm_bucket b;
    comm_bucket_init(&b, 0, 5);
    comm_bucket_charge(&b, 5, 1u << 30);
    assert_true(comm_bucket_ready(&b, 5));
    assert_int_equal(comm_bucket_due(&b, 5), 5);
}

static void test_ack_window(void **state)
{
    (void)state;
    comm_mgr m;
    comm_mgr_init(&m);
    comm_mgr_budget(&m, 8.0, 0);
    comm_mgr_budget(&m, 4.0, 0); /* the largest budget wins */
    assert_int_equal(comm_mgr_wait(&m, 0), 0);
    for (int i = 0; i < COMM_ACK_WINDOW; i++) comm_mgr_sent(&m, 0, 10, 1);
    assert_int_equal(comm_mgr_wait(&m, 0), UINT64_MAX); /* paused until an ack */
    comm_mgr_sent(&m, 0, 10, 0);                        /* mandatory: not in the window */
    assert_int_equal(comm_mgr_acked(&m), 1);            /* reopened */
    assert_int_equal(comm_mgr_wait(&m, 0), 0);
    assert_int_equal(comm_mgr_acked(&m), 0);
    /* Mandatory traffic spends the same budget: a debt delays managed sends. */
    comm_mgr_sent(&m, 0, 60000, 0);
    assert_int_equal(comm_mgr_wait(&m, 0), 11); /* tokens 49910 - 60000: 10.09 ms of budget */
    comm_mgr_destroy(&m);
}

/* ---- policies ---- */

#define N 9
static const uint64_t keys[N] = {40, 7, 93, 12, 55, 3, 70, 21, 88};
static const double absm[N] = {0.5, 3.0, 0.1, 3.0, 2.0, 0.0, 9.0, 1.0, 0.7};
static const double relm[N] = {5.0, 0.3, 8.0, 0.2, 0.1, 7.0, 0.05, 6.0, 0.4};

static void test_magnitude_orders(void **state)
{
    (void)state;
    comm_choice c;
    comm_choice_seed(&c, 1);
    uint32_t out[N];
    /* abs: largest first, ties to the smaller key (7 before 12). */
    assert_int_equal(comm_choose(LOOM_PRIORITY_ABS, &c, keys, absm, relm, N, 4, out), 4);
    assert_int_equal(out[0], 6);
    assert_int_equal(out[1], 1);
    assert_int_equal(out[2], 3);
    assert_int_equal(out[3], 4);
    /* rel: a full ranking. */
    const uint32_t want[N] = {2, 5, 7, 0, 8, 1, 3, 4, 6};
    assert_int_equal(comm_choose(LOOM_PRIORITY_REL, &c, keys, absm, relm, N, 20, out), N);
    for (int i = 0; i < N; i++) assert_int_equal(out[i], want[i]);
}

static void test_round_robin_walks_key_order(void **state)
{
    (void)state;
    comm_choice c;
    comm_choice_seed(&c, 1);
    uint32_t out[N];
    /* Sorted keys: 3 7 12 21 40 55 70 88 93, then wrapping round. */
    const uint64_t walk[] = {3, 7, 12, 21, 40, 55, 70, 88, 93, 3, 7, 12, 21, 40};
    size_t at = 0;
    for (int round = 0; round < 3; round++) {
        size_t got = comm_choose(LOOM_PRIORITY_ROUNDROBIN, &c, keys, absm, relm, N, 4, out);
        assert_int_equal(got, 4);
        for (size_t i = 0; i < got; i++) assert_int_equal(keys[out[i]], walk[at++]);
    }
    /* Rows that left the buffer are skipped: the walk goes on after the last key (12). */
    comm_choose(LOOM_PRIORITY_ROUNDROBIN, &c, keys + 4, absm, relm, 5, 2, out); /* 55 3 70 21 88 */
    assert_int_equal(keys[4 + out[0]], 21);
    assert_int_equal(keys[4 + out[1]], 55);
}

static void test_random_is_a_seeded_sample(void **state)
{
    (void)state;
    comm_choice a, b, other;
    comm_choice_seed(&a, 42);
    comm_choice_seed(&b, 42);
    comm_choice_seed(&other, 43);
    uint32_t x[5], y[5], z[5];
    int differs = 0;
    unsigned hits[N] = {0};
    for (int round = 0; round < 200; round++) {
        assert_int_equal(comm_choose(LOOM_PRIORITY_RANDOM, &a, keys, absm, relm, N, 5, x), 5);
        assert_int_equal(comm_choose(LOOM_PRIORITY_RANDOM, &b, keys, absm, relm, N, 5, y), 5);
        comm_choose(LOOM_PRIORITY_RANDOM, &other, keys, absm, relm, N, 5, z);
        assert_memory_equal(x, y, sizeof x); /* the same seed, the same choices */
        differs |= memcmp(x, z, sizeof x) != 0;
        for (int i = 0; i < 5; i++) {
            assert_true(x[i] < N);
            for (int j = 0; j < i; j++) assert_int_not_equal(x[i], x[j]);
            hits[x[i]]++;
        }
    }
    assert_true(differs);
    /* Uniform: each row is in a sample of 5 of 9 with probability 5/9, so
     * about 111 of 200 times; 70..150 is more than 5 standard deviations. */
    for (int i = 0; i < N; i++) assert_true(hits[i] > 70 && hits[i] < 150);
}

static void test_row_magnitude(void **state)
{
    (void)state;
    const float d[3] = {-2, 0.5f, 0};
    const float w[3] = {4, 0, -1};
    double abs, rel;
    comm_row_magnitude(LOOM_F32, 3, d, w, &abs, &rel);
    assert_true(abs == 2.5);
    assert_true(rel == 0.5 + 0.5 / COMM_REL_FLOOR);
    const int64_t di[2] = {-3, 1}, wi[2] = {6, 2};
    comm_row_magnitude(LOOM_I64, 2, di, wi, &abs, &rel);
    assert_true(abs == 4 && rel == 1.0);
    comm_row_magnitude(LOOM_I64, 2, di, NULL, &abs, &rel);
    assert_true(fabs(rel - 4 / COMM_REL_FLOOR) < 1e-6 * rel);
}

static void test_rowset(void **state)
{
    (void)state;
    comm_rowset s;
    assert_int_equal(comm_rowset_init(&s, 70), 0); /* two words of subscriber bits */
    comm_rowset_changed(&s, 5, 1, 1);              /* nobody caches 5: ignored */
    assert_int_equal(s.ndirty, 0);
    for (uint64_t k = 0; k < 3000; k++) assert_int_equal(comm_rowset_subscribe(&s, k * 3, 69), 0);
    assert_int_equal(comm_rowset_subscribe(&s, 9, 2), 0);
    comm_rowset_changed(&s, 9, 1.5, 2);
    comm_rowset_changed(&s, 9, 0.5, 1);
    comm_rowset_changed(&s, 10, 1, 1); /* not cached */
    assert_int_equal(s.ndirty, 1);
    assert_int_equal(s.n, 3000);
    uint32_t slot;
    assert_true(u64map_get(&s.idx, 9, &slot));
    assert_true(s.dirty[slot] && s.abs[slot] == 2.0 && s.rel[slot] == 3.0);
    assert_true(comm_rowset_has(&s, slot, 2) && comm_rowset_has(&s, slot, 69));
    assert_false(comm_rowset_has(&s, slot, 3) || comm_rowset_has(&s, slot, 68));
    comm_rowset_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_paces_to_the_budget),
        cmocka_unit_test(test_unlimited_bucket),
        cmocka_unit_test(test_ack_window),
        cmocka_unit_test(test_magnitude_orders),
        cmocka_unit_test(test_round_robin_walks_key_order),
        cmocka_unit_test(test_random_is_a_seeded_sample),
        cmocka_unit_test(test_row_magnitude),
        cmocka_unit_test(test_rowset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
