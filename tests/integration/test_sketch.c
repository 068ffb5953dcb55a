/* Count-Min sketches on the servers (loom/sketch.h) in a real job of 2 servers
 * and 3 workers. Every worker adds counts of keys drawn from a skewed,
 * seeded distribution (repeats within a call and across workers), then after
 * a barrier queries every key and checks against exact counts it computes
 * itself for all workers:
 *   - every estimate is at or above the true count (Count-Min's guarantee);
 *   - each row's counters add up to exactly the sum of all counts (no
 *     addition lost or doubled by the combining of equal counters);
 *   - narrow rows (w = 64, d = 4, so eps = e / 64): the estimates above the
 *     true count by more than eps * N are at most a delta = e^-4 share of the
 *     keys, as the bound says;
 *   - wide rows (w = 2^16) for a thousand keys: nearly every estimate exact;
 * and bad options and negative counts are refused with LOOM_EINVAL. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>
#include <loom/loom.h>

#include "core/rand.h"
#include "harness.h"

#define WORKERS 3
#define KEYS    1000 /* distinct keys, 0..KEYS-1, scattered over uint64 */
#define ADDS    4000 /* additions per worker */

static uint64_t key_of(uint64_t i)
{
    return i * 0x9e3779b97f4a7c15ULL + 12345;
}

/* Worker w's additions: skewed key indices (a few keys take most counts). */
static void additions(int w, uint64_t *idx, int64_t *count)
{
    uint64_t r[4];
    rand_seed(r, 1000 + (uint64_t)w);
    for (size_t j = 0; j < ADDS; j++) {
        double u = rand_unit(rand_next(r));
        idx[j] = (uint64_t)(KEYS * u * u * u) % KEYS;
        count[j] = 1 + (int64_t)(rand_next(r) % 5);
    }
}

typedef struct sketch_case {
    uint32_t depth;
    uint64_t width;
} sketch_case;

static int sketch_worker(loom_node *n, int rank, void *arg)
{
    const sketch_case *sc = arg;
    loom_sketch_opts o = LOOM_SKETCH_OPTS_DEFAULT;
    o.depth = sc->depth;
    o.width = sc->width;
    o.seed = 7;
    loom_sketch *s;
    CHECK_OK(loom_sketch_open(n, "counts", &o, &s));
    uint64_t(*idx)[ADDS] = malloc(sizeof(uint64_t[WORKERS][ADDS]));
    int64_t(*count)[ADDS] = malloc(sizeof(int64_t[WORKERS][ADDS]));
    uint64_t keys[KEYS];
    int64_t exact[KEYS] = {0}, n_total = 0;
    CHECK(idx && count);
    for (int w = 0; w < WORKERS; w++) {
        additions(w, idx[w], count[w]);
        for (size_t j = 0; j < ADDS; j++) exact[idx[w][j]] += count[w][j], n_total += count[w][j];
    }
    /* This worker's additions, in two calls. */
    uint64_t *mine = malloc(ADDS * sizeof *mine);
    CHECK(mine);
    for (size_t j = 0; j < ADDS; j++) mine[j] = key_of(idx[rank][j]);
    CHECK_OK(loom_sketch_add(s, mine, count[rank], ADDS / 2));
    CHECK_OK(loom_sketch_add(s, mine + ADDS / 2, count[rank] + ADDS / 2, ADDS - ADDS / 2));
    free(mine);
    int64_t minus = -1;
    CHECK(loom_sketch_add(s, keys, &minus, 1) == LOOM_EINVAL);
    CHECK_OK(loom_barrier(n));
    for (size_t i = 0; i < KEYS; i++) keys[i] = key_of(i);
    int64_t est[KEYS];
    CHECK_OK(loom_sketch_query(s, keys, KEYS, est));
    size_t above = 0, exact_ones = 0;
    double eps = exp(1.0) / (double)sc->width;
    for (size_t i = 0; i < KEYS; i++) {
        CHECK(est[i] >= exact[i]);
        if ((double)(est[i] - exact[i]) > eps * (double)n_total) above++;
        if (est[i] == exact[i]) exact_ones++;
    }
    /* Each row's counters hold every count once. */
    int64_t *row = malloc(sc->width * sizeof *row);
    CHECK(row);
    for (uint32_t r = 0; r < sc->depth; r++) {
        CHECK_OK(loom_pull_range(loom_sketch_table(s), r * sc->width, (r + 1) * sc->width, row));
        int64_t sum = 0;
        for (uint64_t k = 0; k < sc->width; k++) sum += row[k];
        CHECK(sum == n_total);
    }
    free(row);
    if (rank == 0)
        print_message("d=%u w=%llu: %zu of %d estimates exact, %zu above eps*N\n", sc->depth,
                      (unsigned long long)sc->width, exact_ones, KEYS, above);
    CHECK((double)above <= exp(-(double)sc->depth) * KEYS);
    if (sc->width >= 65536) CHECK(exact_ones >= KEYS * 95 / 100);
    loom_sketch_close(s);
    free(idx), free(count);
    return 0;
}

static void test_narrow(void **state)
{
    (void)state;
    sketch_case sc = {4, 64};
    harness_result res;
    assert_int_equal(harness_run(2, WORKERS, sketch_worker, &sc, &res), 0);
}

static void test_wide(void **state)
{
    (void)state;
    sketch_case sc = {4, 1u << 16};
    harness_result res;
    assert_int_equal(harness_run(2, WORKERS, sketch_worker, &sc, &res), 0);
}

static int bad_options_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    loom_sketch *s = NULL;
    loom_sketch_opts o = LOOM_SKETCH_OPTS_DEFAULT;
    o.depth = 0;
    CHECK(loom_sketch_open(n, "bad", &o, &s) == LOOM_EINVAL && !s);
    o.depth = 33;
    CHECK(loom_sketch_open(n, "bad", &o, &s) == LOOM_EINVAL);
    o.depth = 4, o.width = 0;
    CHECK(loom_sketch_open(n, "bad", &o, &s) == LOOM_EINVAL);
    o.width = 1ull << 40;
    CHECK(loom_sketch_open(n, "bad", &o, &s) == LOOM_EINVAL);
    return 0;
}

static void test_bad_options(void **state)
{
    (void)state;
    harness_result res;
    assert_int_equal(harness_run(1, 1, bad_options_worker, NULL, &res), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_narrow),
        cmocka_unit_test(test_wide),
        cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
