/* Arrays a loop reads by an index that neither keeps their rows on a worker
 * nor rotates them: hosted on the servers, the rows each batch's subscripts
 * name pulled at once (loom/loop.h; src/sched/loop_prefetch.c; in-process
 * jobs, threads, loopback TCP), on 1 to 3 workers:
 *
 *   - 1D over ratings (i, j): S(i, *) written (kept by i), H(j, *) read:
 *     every S row is exactly the test's own sum of the ratings' values
 *     times H(j, 0) and of H(j, 1), and each worker pulled exactly the
 *     distinct rows j of its elements (one batch: fewer than 256 elements),
 *     not the array;
 *   - 2D (MF's shape, i kept, j rotating) with a second array read by j, a
 *     bias B(j): hosted beside the rotated H, the sums of B in W(i, *) and
 *     the counts in H(j, *) exact;
 *   - a write buffer on a hosted array is refused with a sentence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "loom/loop.h"

#define NI 12
#define NJ 500
#define NR 200 /* ratings */

static int64_t ridx[NR][2];
static double rval[NR];

static void make(void)
{
    uint64_t s = 0x2545F4914F6CDD1DULL;
    for (int k = 0; k < NR; k++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        ridx[k][0] = (int64_t)(s % NI);
        ridx[k][1] = (int64_t)((s >> 16) % NJ);
        rval[k] = (double)((s >> 40) % 9) - 4;
    }
}

/* H(j) = (j + 1, 3 j); B(j) = j % 7 */
static void init(void *u, uint32_t array, uint64_t row, void *values)
{
    (void)u;
    int64_t *v = values;
    if (array == 2) {
        v[0] = (int64_t)row + 1;
        v[1] = 3 * (int64_t)row;
    } else if (array == 3) {
        v[0] = (int64_t)(row % 7);
    }
}

/* Worker rank's share: every W-th rating. */
static size_t share(int W, int rank, int64_t (*idx)[2], double *val)
{
    size_t m = 0;
    for (int k = rank; k < NR; k += W, m++) {
        memcpy(idx[m], ridx[k], sizeof idx[m]);
        val[m] = rval[k];
    }
    return m;
}

/* ---- 1D ---- */

static void body_1d(void *u, const int64_t *index, double value, void *const *rows)
{
    (void)u, (void)index;
    int64_t *s = rows[1];
    const int64_t *h = rows[2];
    s[0] += (int64_t)value * h[0];
    s[1] += h[1];
}

static int worker_1d(loom_node *n, int rank, void *arg)
{
    (void)arg;
    int W = loom_num_workers(n);
    int64_t idx[NR][2];
    double val[NR];
    size_t mine = share(W, rank, idx, val);
    static const loom_access acc[] = {
        {0, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}}, /* R(i, j) */
        {1, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB_EVERY}}, /* S(i, *), written */
        {2, 0, 2, {LOOM_SUB(1, 0), LOOM_SUB_EVERY}}, /* H(j, *), read */
    };
    static const loom_loop_array arrays[] = {{1, "hosted.S", NI, 2, LOOM_I64, NULL},
                                             {2, "hosted.H", NJ, 2, LOOM_I64, init}};
    static const uint64_t ext[2] = {NI, NJ};
    loom_loop_opts o = {.dims = 2,
                        .extents = ext,
                        .acc = acc,
                        .nacc = 3,
                        .arrays = arrays,
                        .narrays = 2,
                        .indices = &idx[0][0],
                        .values = val,
                        .n = mine,
                        .body = body_1d,
                        .prefer_space = 1 + 0};
    loom_loop *l;
    char err[256] = "";
    int rc = loom_loop_open(n, &o, &l, err, sizeof err);
    if (rc) fprintf(stderr, "worker %d: %s\n", rank, err);
    CHECK_OK(rc);
    CHECK(loom_loop_plan_kind(loom_loop_get_plan(l)) == LOOM_LOOP_1D);
    CHECK_OK(loom_loop_run(l, 1));
    /* the rows pulled: the distinct j of the elements this worker ran */
    char seen[NJ] = {0}; /* per worker: the workers are threads */
    uint64_t distinct = 0;
    for (size_t i = 0; i < loom_loop_elements(l); i++) {
        int64_t x[2];
        CHECK_OK(loom_loop_element(l, i, x, NULL));
        distinct += !seen[x[1]]++;
    }
    loom_loop_prefetch_stats st;
    CHECK_OK(loom_loop_prefetch_stats_of(l, 2, &st));
    CHECK(st.rows_pulled == distinct && st.batches == (distinct ? 1 : 0) && st.refused == 0);
    int64_t got[NI][2], want[NI][2] = {{0}};
    for (int k = 0; k < NR; k++) {
        want[ridx[k][0]][0] += (int64_t)rval[k] * (ridx[k][1] + 1);
        want[ridx[k][0]][1] += 3 * ridx[k][1];
    }
    CHECK_OK(loom_pull_range(loom_loop_table(l, 1), 0, NI, got));
    CHECK(!memcmp(got, want, sizeof got));
    loom_loop_close(l);
    return 0;
}

static void test_1d(void **state)
{
    (void)state;
    make();
    for (int W = 1; W <= 3; W++) {
        harness_result r;
        assert_int_equal(harness_run(1, W, worker_1d, NULL, &r), 0);
    }
}

/* ---- 2D: a bias read by the rotating index ---- */

static void body_2d(void *u, const int64_t *index, double value, void *const *rows)
{
    (void)u, (void)index, (void)value;
    ((int64_t *)rows[1])[0] += ((const int64_t *)rows[3])[0];
    ((int64_t *)rows[2])[0]++;
}

static int worker_2d(loom_node *n, int rank, void *arg)
{
    (void)arg;
    int W = loom_num_workers(n);
    int64_t idx[NR][2];
    double val[NR];
    size_t mine = share(W, rank, idx, val);
    static const loom_access acc[] = {
        {0, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}}, /* R(i, j) */
        {1, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB_EVERY}}, /* W(i, *), written */
        {2, 1, 2, {LOOM_SUB(1, 0), LOOM_SUB_EVERY}}, /* H(j, *), written */
        {3, 0, 2, {LOOM_SUB(1, 0), LOOM_SUB_EVERY}}, /* B(j, *), read */
    };
    static const loom_loop_array arrays[] = {{1, "hosted.W", NI, 1, LOOM_I64, NULL},
                                             {2, "hosted.H2", NJ, 1, LOOM_I64, NULL},
                                             {3, "hosted.B", NJ, 1, LOOM_I64, init}};
    static const uint64_t ext[2] = {NI, NJ};
    loom_loop_opts o = {.dims = 2,
                        .extents = ext,
                        .acc = acc,
                        .nacc = 4,
                        .arrays = arrays,
                        .narrays = 3,
                        .indices = &idx[0][0],
                        .values = val,
                        .n = mine,
                        .body = body_2d,
                        .prefer_space = 1 + 0};
    loom_loop *l;
    char err[256] = "";
    int rc = loom_loop_open(n, &o, &l, err, sizeof err);
    if (rc) fprintf(stderr, "worker %d: %s\n", rank, err);
    CHECK_OK(rc);
    CHECK(loom_loop_plan_kind(loom_loop_get_plan(l)) == LOOM_LOOP_2D);
    loom_loop_prefetch_stats st;
    CHECK_OK(loom_loop_prefetch_stats_of(l, 3, &st));             /* B is hosted */
    CHECK(loom_loop_prefetch_stats_of(l, 2, &st) == LOOM_EINVAL); /* H rotates */
    CHECK_OK(loom_loop_run(l, 2));
    int64_t gw[NI], gh[NJ], ww[NI] = {0}, wh[NJ] = {0};
    for (int k = 0; k < NR; k++) {
        ww[ridx[k][0]] += 2 * (ridx[k][1] % 7);
        wh[ridx[k][1]] += 2;
    }
    CHECK_OK(loom_pull_range(loom_loop_table(l, 1), 0, NI, gw));
    CHECK_OK(loom_pull_range(loom_loop_table(l, 2), 0, NJ, gh));
    CHECK(!memcmp(gw, ww, sizeof gw) && !memcmp(gh, wh, sizeof gh));
    loom_loop_close(l);
    return 0;
}

static void test_2d(void **state)
{
    (void)state;
    make();
    for (int W = 1; W <= 3; W++) {
        harness_result r;
        assert_int_equal(harness_run(1, W, worker_2d, NULL, &r), 0);
    }
}

/* ---- refusals ---- */

static void merge(void *u, uint64_t row, void *value, const void *update)
{
    (void)u, (void)row;
    *(int64_t *)value += *(const int64_t *)update;
}

static int refuse_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    static const loom_access acc[] = {
        {0, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
        {1, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB_EVERY}},
        {2, 0, 2, {LOOM_SUB(1, 0), LOOM_SUB_EVERY}},
    };
    static const loom_loop_array arrays[] = {{1, "hosted.rS", NI, 1, LOOM_I64, NULL},
                                             {2, "hosted.rH", NJ, 1, LOOM_I64, NULL}};
    static const loom_loop_buffer_decl buf[] = {{0, 2, 10, merge}};
    static const uint64_t ext[2] = {NI, NJ};
    loom_loop_opts o = {.dims = 2,
                        .extents = ext,
                        .acc = acc,
                        .nacc = 3,
                        .arrays = arrays,
                        .narrays = 2,
                        .body = body_1d,
                        .buffers = buf,
                        .nbuffers = 1,
                        .prefer_space = 1 + 0};
    loom_loop *l = NULL;
    char err[256] = "";
    CHECK(loom_loop_open(n, &o, &l, err, sizeof err) == LOOM_EINVAL && !l);
    if (!strstr(err, "hosted on the servers by rows")) fprintf(stderr, "said: %s\n", err);
    CHECK(strstr(err, "hosted on the servers by rows"));
    return 0;
}

static void test_refused(void **state)
{
    (void)state;
    harness_result r;
    assert_int_equal(harness_run(1, 2, refuse_worker, NULL, &r), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_1d),
        cmocka_unit_test(test_2d),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
