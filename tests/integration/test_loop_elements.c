/* Loops that write their elements and count in integers (loom/loop.h,
 * src/sched/loop_run.c; in-process jobs, threads, loopback TCP; also under
 * ThreadSanitizer): what LDA on the loop API needs (bench/loop_lda.c).
 *
 * A 2D loop over 150 elements (i, j), indices repeating, each given with its
 * number k as its value, to 1 to 3 workers in uneven shares, three passes:
 *   - the body writes its own element, S(i, j), value + 150 each pass: after
 *     the run every element is held by exactly one worker
 *     (loom_loop_element) with value k + 3 * 150, exactly;
 *   - i32 counts: C(i, *) += 1 at column j, and R(j, *) += the value the
 *     body was given (rows of a rotated and of a local array); i64 totals
 *     T(*) += 1 at column j through a write buffer of delay 7: all equal the
 *     counts computed here, exactly;
 *   - prefer_space = 1 + j makes j the space index (the planner alone takes
 *     i, the longer one), so R stays local and C rotates; the plan functions
 *     swap a 2D plan's axes, and refuse a wavefront's;
 *   - a written access of the iteration space that is not the iteration's
 *     own element is refused with a sentence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "loom/loop.h"

#define NI     17
#define NJ     9
#define ELEMS  150
#define PASSES 3

enum { S_ARRAY, C_ARRAY, R_ARRAY, T_ARRAY };
enum { T_BUF };

static int64_t el_idx[ELEMS][2];

static void make_elements(void)
{
    uint64_t x = 0x9E3779B97F4A7C15ULL;
    for (int k = 0; k < ELEMS; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        el_idx[k][0] = (int64_t)(x % NI), el_idx[k][1] = (int64_t)((x >> 24) % NJ);
    }
}

typedef struct ctx {
    loom_loop_buffer *t;
    uint64_t calls;
} ctx;

static void body(void *user, const int64_t *index, double value, void *const *rows)
{
    ctx *c = user;
    double *z = rows[0];
    int32_t *crow = rows[1], *rrow = rows[2];
    int64_t *t = loom_loop_buffer_row(c->t, 0);
    *z = value + ELEMS;
    crow[index[1]] += 1;
    rrow[0] += (int32_t)value;
    t[index[1]] += 1;
    c->calls++;
}

static void merge(void *user, uint64_t row, void *value, const void *update)
{
    (void)user, (void)row;
    int64_t *v = value;
    const int64_t *u = update;
    for (int j = 0; j < NJ; j++) v[j] += u[j];
}

static const loom_access acc[] = {
    {S_ARRAY, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}}, /* S(i, j): its own element */
    {C_ARRAY, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB_EVERY}}, /* C(i, *) */
    {R_ARRAY, 1, 2, {LOOM_SUB(1, 0), LOOM_SUB_EVERY}}, /* R(j, *) */
    {T_ARRAY, 0, 1, {LOOM_SUB_EVERY}},                 /* T(*), read */
};
static const uint64_t ext[2] = {NI, NJ};
static const loom_loop_array arrays[] = {
    {C_ARRAY, "elem.C", NI, NJ, LOOM_I32, NULL},
    {R_ARRAY, "elem.R", NJ, 1, LOOM_I32, NULL},
    {T_ARRAY, "elem.T", 1, NJ, LOOM_I64, NULL},
};
static const loom_loop_buffer_decl buffers[] = {{T_BUF, T_ARRAY, 7, merge}};

static int elements_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    int W = loom_num_workers(n);
    int64_t idx[ELEMS][2];
    double val[ELEMS];
    size_t mine = 0;
    for (int k = 0; k < ELEMS; k++) { /* uneven: the last worker gets two shares */
        int to = k % (W + 1) < W ? k % (W + 1) : W - 1;
        if (to != rank) continue;
        memcpy(idx[mine], el_idx[k], sizeof idx[mine]);
        val[mine++] = k;
    }
    ctx c = {0};
    loom_loop_opts o = {.dims = 2,
                        .extents = ext,
                        .acc = acc,
                        .nacc = 4,
                        .arrays = arrays,
                        .narrays = 3,
                        .indices = &idx[0][0],
                        .values = val,
                        .n = mine,
                        .body = body,
                        .user = &c,
                        .buffers = buffers,
                        .nbuffers = 1,
                        .prefer_space = 2};
    loom_loop *l;
    char err[256] = "";
    int rc = loom_loop_open(n, &o, &l, err, sizeof err);
    if (rc) {
        fprintf(stderr, "worker %d: %s\n", rank, err);
        return rc;
    }
    uint32_t space, time;
    loom_loop_plan_axes(loom_loop_get_plan(l), &space, &time, NULL);
    CHECK(loom_loop_plan_kind(loom_loop_get_plan(l)) == LOOM_LOOP_2D && space == 1 && time == 0);
    c.t = loom_loop_buffer_of(l, T_BUF);
    CHECK_OK(loom_loop_run(l, PASSES));

    /* every element once, with its value written PASSES times */
    loom_table_opts to = LOOM_TABLE_OPTS_DEFAULT;
    to.type = LOOM_F64;
    to.storage = LOOM_DENSE;
    to.key_end = ELEMS;
    loom_table *seen;
    CHECK_OK(loom_table_open(n, "elem.seen", &to, &seen));
    for (size_t e = 0; e < loom_loop_elements(l); e++) {
        int64_t at[2];
        double v, one = 1;
        CHECK_OK(loom_loop_element(l, e, at, &v));
        uint64_t k = (uint64_t)v % ELEMS;
        CHECK(v == (double)(k + PASSES * ELEMS));
        CHECK(at[0] == el_idx[k][0] && at[1] == el_idx[k][1]);
        CHECK_OK(loom_push(seen, &k, 1, &one));
    }
    CHECK(loom_loop_element(l, loom_loop_elements(l), NULL, NULL) == LOOM_EINVAL);
    CHECK_OK(loom_barrier(n));
    if (rank == 0) {
        double got[ELEMS];
        CHECK_OK(loom_pull_range(seen, 0, ELEMS, got));
        for (int k = 0; k < ELEMS; k++) CHECK(got[k] == 1);
        int32_t cw[NI][NJ] = {{0}}, cg[NI][NJ], rw[NJ] = {0}, rg[NJ];
        int64_t tw[NJ] = {0}, tg[NJ];
        for (int k = 0; k < ELEMS; k++) {
            int64_t i = el_idx[k][0], j = el_idx[k][1];
            cw[i][j] += PASSES;
            tw[j] += PASSES;
            for (int p = 0; p < PASSES; p++) rw[j] += k + p * ELEMS;
        }
        CHECK_OK(loom_pull_range(loom_loop_table(l, C_ARRAY), 0, NI, cg));
        CHECK_OK(loom_pull_range(loom_loop_table(l, R_ARRAY), 0, NJ, rg));
        CHECK_OK(loom_pull_range(loom_loop_table(l, T_ARRAY), 0, 1, tg));
        CHECK(!memcmp(cg, cw, sizeof cw));
        CHECK(!memcmp(rg, rw, sizeof rw));
        CHECK(!memcmp(tg, tw, sizeof tw));
    }
    loom_loop_close(l);
    return 0;
}

static void test_elements_and_counts(void **state)
{
    (void)state;
    make_elements();
    for (int W = 1; W <= 3; W++) {
        harness_result r;
        assert_int_equal(harness_run(1, W, elements_worker, NULL, &r), 0);
    }
}

/* The plan alone: a 2D plan's axes trade places; a wavefront keeps its own. */
static void test_prefer_space(void **state)
{
    (void)state;
    loom_loop_plan *p;
    assert_int_equal(loom_loop_plan_make(2, acc, 3, 0, ext, &p, NULL, 0), 0);
    uint32_t space, time;
    loom_loop_plan_axes(p, &space, &time, NULL);
    assert_true(loom_loop_plan_kind(p) == LOOM_LOOP_2D && space == 0 && time == 1);
    assert_int_equal(loom_loop_plan_prefer_space(p, 1), 1);
    loom_loop_plan_axes(p, &space, &time, NULL);
    assert_true(space == 1 && time == 0);
    assert_int_equal(loom_loop_plan_prefer_space(p, 2), 0);
    loom_loop_plan_free(p);
    assert_int_equal(loom_loop_plan_make(2, acc, 3, 1 /* ordered */, ext, &p, NULL, 0), 0);
    assert_int_equal(loom_loop_plan_kind(p), LOOM_LOOP_WAVEFRONT);
    loom_loop_plan_axes(p, &space, NULL, NULL);
    assert_int_equal(loom_loop_plan_prefer_space(p, !space), 0);
    loom_loop_plan_free(p);
}

static int refuse_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    static const loom_access other[] = {
        {S_ARRAY, 1, 2, {LOOM_SUB(1, 0), LOOM_SUB(0, 0)}}, /* S(j, i) */
        {C_ARRAY, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB_EVERY}},
    };
    loom_loop_opts o = {.dims = 2,
                        .extents = ext,
                        .acc = other,
                        .nacc = 2,
                        .arrays = arrays,
                        .narrays = 1,
                        .body = body};
    loom_loop *l = NULL;
    char err[256] = "";
    CHECK(loom_loop_open(n, &o, &l, err, sizeof err) == LOOM_EINVAL);
    CHECK(strstr(err, "only its own element"));
    return l != NULL;
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
        cmocka_unit_test(test_prefer_space),
        cmocka_unit_test(test_elements_and_counts),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
