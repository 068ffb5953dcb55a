/* ring: the consistent-hash ring of virtual servers (src/ps/ring.c).
 *
 * With one point per server the ring is the even split the parameter server
 * always used (ps_slice_start), range for range. With several points: the
 * ranges tile the key range in order, every key maps to the range that
 * contains it (against a linear scan), a range's holders are distinct
 * servers, its replicas are the next distinct servers after its point, and
 * when servers die each range's master is its first live holder, so ranges
 * of live masters never move and a dead master's ranges go to a server that
 * already holds a replica of them; a replacement server (JOINING, BACK) is
 * master only as ring.h says. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "loom/error.h"
#include "ps/ps.h"
#include "ps/ring.h"

#define TEST_RNG_SEED 0x5eedf00dULL
#include "test_rng.h"

static loom_table_opts range_opts(uint64_t begin, uint64_t end)
{
    loom_table_opts o = {0};
    o.key_begin = begin;
    o.key_end = end;
    return o;
}

/* One point per server: exactly the old slices (empty slices left out). */
static void test_one_point_is_even_split(void **state)
{
    (void)state;
    const uint64_t ends[][2] = {{0, 1000}, {5, 8}, {0, 0}, {1ull << 40, 0}, {7, 7 + 1000003}};
    for (size_t e = 0; e < sizeof ends / sizeof *ends; e++)
        for (int S = 1; S <= 9; S++) {
            loom_table_opts o = range_opts(ends[e][0], ends[e][1]);
            ps_ring r;
            assert_int_equal(ps_ring_build(&r, &o, S, 1, 0), 0);
            size_t rg = 0;
            for (int s = 0; s < S; s++) {
                ps_u128 lo = ps_slice_start(&o, S, s), hi = ps_slice_start(&o, S, s + 1);
                if (lo == hi) continue;
                assert_true(rg < r.nranges);
                assert_true(r.start[rg] == lo);
                assert_true(r.start[rg + 1] == hi);
                assert_int_equal(ps_ring_holder(&r, rg, 0), s);
                rg++;
            }
            assert_int_equal(rg, r.nranges);
            ps_ring_free(&r);
        }
}

/* Everything a ring of several points per server must satisfy. */
static void check_ring(uint64_t begin, uint64_t end, int S, int V, int K)
{
    loom_table_opts o = range_opts(begin, end);
    ps_ring r, again;
    assert_int_equal(ps_ring_build(&r, &o, S, V, K), 0);
    assert_int_equal(ps_ring_build(&again, &o, S, V, K), 0); /* every process agrees */
    assert_int_equal(r.nranges, again.nranges);
    assert_memory_equal(r.start, again.start, (r.nranges + 1) * sizeof *r.start);
    assert_memory_equal(r.holder, again.holder, r.nranges * (size_t)(K + 1) * sizeof *r.holder);
    ps_ring_free(&again);

    /* The ranges tile [begin, end) in order; at most S*V + 1 of them. */
    assert_true(r.nranges >= 1 && r.nranges <= (size_t)S * (size_t)V + 1);
    assert_true(r.start[0] == begin);
    assert_true(r.start[r.nranges] == ps_key_end(&o));
    for (size_t i = 0; i < r.nranges; i++) assert_true(r.start[i] < r.start[i + 1]);

    /* Holders are distinct servers. */
    for (size_t i = 0; i < r.nranges; i++)
        for (int a = 0; a <= K; a++) {
            int sa = ps_ring_holder(&r, i, a);
            assert_true(sa >= 0 && sa < S);
            assert_true(ps_ring_holds(&r, i, sa));
            for (int b = 0; b < a; b++) assert_int_not_equal(sa, ps_ring_holder(&r, i, b));
        }
    /* The wrap-around piece and the last range belong to the same point (on
     * a span this large no point falls on its first key, so the piece exists). */
    if (V > 1 && ps_key_end(&o) - begin >= 1000000)
        assert_memory_equal(&r.holder[0], &r.holder[(r.nranges - 1) * (size_t)(K + 1)],
                            (size_t)(K + 1) * sizeof *r.holder);

    /* Keys map to the range containing them: both ends of every range and
     * random keys, against a linear scan. */
    for (size_t i = 0; i < r.nranges; i++) {
        assert_int_equal(ps_ring_range_of(&r, (uint64_t)r.start[i]), i);
        assert_int_equal(ps_ring_range_of(&r, (uint64_t)(r.start[i + 1] - 1)), i);
    }
    for (int t = 0; t < 2000; t++) {
        ps_u128 span = ps_key_end(&o) - begin;
        uint64_t key = (uint64_t)(begin + (ps_u128)rng() % span);
        size_t lin = 0;
        while (!(r.start[lin] <= key && key < r.start[lin + 1])) lin++;
        assert_int_equal(ps_ring_range_of(&r, key), lin);
    }

    /* Failover: for every set of up to K dead servers (random ones), each
     * range's master is its first live holder; a range whose master lives
     * keeps it; every range still has a master. */
    uint8_t *dead = calloc((size_t)S, 1);
    for (int t = 0; t < 50; t++) {
        memset(dead, 0, (size_t)S);
        int ndead = (int)(rng() % (uint64_t)(K + 1));
        for (int d = 0; d < ndead; d++) dead[rng() % (uint64_t)S] = 1;
        for (size_t i = 0; i < r.nranges; i++) {
            int m = ps_ring_master(&r, i, dead, NULL);
            assert_true(m >= 0 && !dead[m]);
            if (!dead[ps_ring_holder(&r, i, 0)])
                assert_int_equal(m, ps_ring_holder(&r, i, 0));
            else
                assert_true(ps_ring_holds(&r, i, m));
        }
    }
    memset(dead, 1, (size_t)S); /* all dead: nobody */
    assert_int_equal(ps_ring_master(&r, 0, dead, NULL), -1);
    free(dead);
    ps_ring_free(&r);
}

static void test_virtual_nodes(void **state)
{
    (void)state;
    check_ring(0, 1000000, 4, 4, 1);
    check_ring(0, 0, 3, 8, 2); /* the whole 64-bit key space */
    check_ring(100, 164, 5, 4, 4);
    check_ring(0, 3, 4, 4, 1); /* fewer keys than points: empty ranges dropped */
    check_ring(1ull << 63, 0, 7, 16, 3);
}

/* Replicas are the next distinct servers after the range's point on the ring:
 * recomputed here from the points (the range starts) in ring order. */
static void test_replicas_are_successors(void **state)
{
    (void)state;
    loom_table_opts o = range_opts(0, 1u << 30);
    ps_ring r;
    assert_int_equal(ps_ring_build(&r, &o, 5, 4, 2), 0);
    /* Range 0 is the wrap-around piece of the last point: the points are the
     * starts of ranges 1..n-1, whose owners in ring order are holder 0. */
    size_t np = r.nranges - 1;
    for (size_t i = 1; i < r.nranges; i++) {
        int want[2], got = 0;
        for (size_t step = 1; step <= np && got < 2; step++) {
            size_t j = 1 + (i - 1 + step) % np;
            int s = ps_ring_holder(&r, j, 0);
            int taken = s == ps_ring_holder(&r, i, 0);
            for (int k = 0; k < got; k++) taken |= want[k] == s;
            if (!taken) want[got++] = s;
        }
        assert_int_equal(got, 2);
        assert_int_equal(ps_ring_holder(&r, i, 1), want[0]);
        assert_int_equal(ps_ring_holder(&r, i, 2), want[1]);
    }
    ps_ring_free(&r);
}

/* Replacements (ring.h): a JOINING server is never master; a BACK one only
 * when none of the range's holders is UP, and then the one that came back
 * first; so a return moves no range that has a live master. */
static void test_rejoined_masters(void **state)
{
    (void)state;
    loom_table_opts o = range_opts(0, 1u << 20);
    ps_ring r;
    enum { S = 5, K = 2 };
    assert_int_equal(ps_ring_build(&r, &o, S, 4, K), 0);
    uint8_t st[S];
    uint32_t returned[S];
    for (int t = 0; t < 200; t++) {
        for (int s = 0; s < S; s++) {
            st[s] = (uint8_t)(rng() % 4);                      /* PS_UP .. PS_BACK */
            returned[s] = (uint32_t)(s + 1 + S * (rng() % 4)); /* distinct */
        }
        for (size_t i = 0; i < r.nranges; i++) {
            int want = -1;
            for (int h = 0; h <= K && want < 0; h++)
                if (st[ps_ring_holder(&r, i, h)] == PS_UP) want = ps_ring_holder(&r, i, h);
            int back = -1;
            for (int h = 0; h <= K; h++) {
                int s = ps_ring_holder(&r, i, h);
                if (st[s] == PS_BACK && (back < 0 || returned[s] < returned[back])) back = s;
            }
            if (want < 0) want = back;
            assert_int_equal(ps_ring_master(&r, i, st, returned), want);
        }
    }
    /* Holder 0 back, holder 1 UP: holder 1 stays master. */
    memset(st, PS_UP, sizeof st);
    memset(returned, 0, sizeof returned);
    int h0 = ps_ring_holder(&r, 0, 0), h1 = ps_ring_holder(&r, 0, 1), h2 = ps_ring_holder(&r, 0, 2);
    st[h0] = PS_BACK, returned[h0] = 1;
    assert_int_equal(ps_ring_master(&r, 0, st, returned), h1);
    st[h1] = PS_JOINING;
    st[h2] = PS_DOWN;
    assert_int_equal(ps_ring_master(&r, 0, st, returned), h0);
    st[h0] = PS_JOINING; /* only joining and dead holders: none */
    assert_int_equal(ps_ring_master(&r, 0, st, returned), -1);
    ps_ring_free(&r);
}

/* Random histories of deaths and returns, as every node sees them (the
 * scheduler numbers the returns): a return never changes the master of a
 * range that had one, so only deaths move ranges, which every node handles
 * as a failover. (The rule before returns were numbered, the first BACK
 * holder in ring order, failed this: a second replacement's return took a
 * range from the first.) */
static void test_returns_move_no_master(void **state)
{
    (void)state;
    loom_table_opts o = range_opts(0, 1u << 20);
    ps_ring r;
    enum { S = 4, K = 1 };
    assert_int_equal(ps_ring_build(&r, &o, S, 4, K), 0);
    for (int t = 0; t < 500; t++) {
        uint8_t st[S] = {0};
        uint32_t returned[S] = {0}, returns = 0;
        for (int step = 0; step < 20; step++) {
            int s = (int)(rng() % S);
            int before[64];
            assert_true(r.nranges <= 64);
            for (size_t i = 0; i < r.nranges; i++) before[i] = ps_ring_master(&r, i, st, returned);
            if (st[s] == PS_UP || st[s] == PS_BACK) {
                st[s] = PS_DOWN; /* a death */
            } else if (st[s] == PS_DOWN) {
                st[s] = PS_JOINING; /* a replacement joins: it moves nothing */
                for (size_t i = 0; i < r.nranges; i++)
                    assert_int_equal(ps_ring_master(&r, i, st, returned), before[i]);
            } else {
                st[s] = PS_BACK; /* it comes back */
                returned[s] = ++returns;
                for (size_t i = 0; i < r.nranges; i++)
                    if (before[i] >= 0)
                        assert_int_equal(ps_ring_master(&r, i, st, returned), before[i]);
            }
        }
    }
    ps_ring_free(&r);
}

static void test_refuses(void **state)
{
    (void)state;
    loom_table_opts o = range_opts(0, 100);
    ps_ring r;
    assert_int_equal(ps_ring_build(&r, &o, 2, 4, 2), LOOM_EINVAL); /* K >= S */
    assert_int_equal(ps_ring_build(&r, &o, 0, 4, 0), LOOM_EINVAL);
    assert_int_equal(ps_ring_build(&r, &o, 2, 0, 0), LOOM_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_point_is_even_split), cmocka_unit_test(test_virtual_nodes),
        cmocka_unit_test(test_replicas_are_successors), cmocka_unit_test(test_rejoined_masters),
        cmocka_unit_test(test_returns_move_no_master),  cmocka_unit_test(test_refuses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
