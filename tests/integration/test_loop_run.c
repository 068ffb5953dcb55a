/* Planned loops on the workers of in-process jobs (loom/loop.h,
 * src/sched/loop_run.c; threads, loopback TCP; also under ThreadSanitizer):
 *
 *   - MF by SGD written as a serial loop over ratings with W(i, *) and
 *     H(j, *) declared: planned 2D, run on 1, 2 and 3 workers that were each
 *     given an arbitrary share of the ratings, it ends with W and H equal bit
 *     for bit to a serial run of the same updates in the schedule's block
 *     order (computed here, from the loop's block bounds), in two runs (1
 *     and 2 passes) whose table traffic is the same (H's blocks go from pass
 *     to pass), the body seeing each pass's number (loom_loop_pass) once
 *     for each of its worker's elements;
 *   - a 1D loop adding every element into its row's sum: exact totals;
 *   - loops that cannot run yet (a wavefront with an array keyed by its time
 *     index, a second written array keyed by a 2D loop's time index, a
 *     shifted subscript in 1D) and writes to the
 * iteration space other than to the iteration's own element (which
 * inproc.loop_elements runs) are refused with a sentence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "loom/loop.h"

#define USERS   13
#define ITEMS   11
#define RANK    3
#define RATINGS 90
#define PASSES  3
#define LR      0.05f

enum { R_ARRAY, W_ARRAY, H_ARRAY };

static int64_t rating_idx[RATINGS][2];
static double rating_val[RATINGS];

/* Distinct (user, item) pairs with ratings 1-5, from a fixed generator. */
static void make_ratings(void)
{
    uint64_t x = 88172645463325252ULL;
    int n = 0;
    while (n < RATINGS) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int64_t i = (int64_t)(x % USERS), j = (int64_t)((x >> 20) % ITEMS);
        int dup = 0;
        for (int k = 0; k < n; k++) dup |= rating_idx[k][0] == i && rating_idx[k][1] == j;
        if (dup) continue;
        rating_idx[n][0] = i, rating_idx[n][1] = j;
        rating_val[n++] = (double)(1 + (x >> 40) % 5);
    }
}

static void init_row(void *user, uint32_t array, uint64_t row, void *values)
{
    (void)user;
    float *v = values;
    for (int k = 0; k < RANK; k++)
        v[k] = 0.1f * (float)((row * 7 + (uint64_t)k * 3 + array) % 5 + 1);
}

/* One SGD step on a rating: the body, and the serial reference's step. */
static void sgd(float *w, float *h, double r)
{
    float err = (float)r;
    for (int k = 0; k < RANK; k++) err -= w[k] * h[k];
    for (int k = 0; k < RANK; k++) {
        float wk = w[k];
        w[k] += LR * (err * h[k] - 0.01f * wk);
        h[k] += LR * (err * wk - 0.01f * h[k]);
    }
}

/* What the body saw of loom_loop_pass: elements run in each pass. */
typedef struct pass_count {
    loom_loop *l;
    size_t in_pass[PASSES + 1];
    int outside; /* a pass outside [0, PASSES) */
} pass_count;

static void mf_body(void *user, const int64_t *index, double value, void *const *rows)
{
    pass_count *c = user;
    (void)index;
    int64_t p = loom_loop_pass(c->l);
    if (p >= 0 && p < PASSES)
        c->in_pass[p]++;
    else
        c->outside = 1;
    sgd(rows[1], rows[2], value);
}

static const loom_access mf_acc[] = {
    {R_ARRAY, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
    {W_ARRAY, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB_EVERY}},
    {H_ARRAY, 1, 2, {LOOM_SUB(1, 0), LOOM_SUB_EVERY}},
};
static const uint64_t mf_ext[2] = {USERS, ITEMS};
static const loom_loop_array mf_arrays[] = {
    {W_ARRAY, "loop.W", USERS, RANK, LOOM_F32, init_row},
    {H_ARRAY, "loop.H", ITEMS + 2, RANK, LOOM_F32, init_row}, /* rows past the loop's items */
};

static int block_of(const size_t *b, int parts, int64_t c)
{
    int k = 0;
    while (k + 1 < parts && (int64_t)b[k + 1] <= c) k++;
    return k;
}

/* The serial run of the test's two runs (a pass, then PASSES - 1): pass
 * after pass, step after step, every block of the step (the order between
 * them does not matter: they share no row), each block's ratings in (i, j)
 * order. The blocks of H go from pass to pass within a run, and H rests in a
 * sum table between runs: at a run's end the last holder of a block adds the
 * block's change to it, which in floating point is the table's value plus
 * (new - table's), not always new. */
static void serial_mf(int W, const size_t *sb, const size_t *tb, float *w, float *h)
{
    for (uint64_t r = 0; r < USERS; r++) init_row(NULL, W_ARRAY, r, w + r * RANK);
    for (uint64_t r = 0; r < ITEMS + 2; r++) init_row(NULL, H_ARRAY, r, h + r * RANK);
    float ht[(ITEMS + 2) * RANK]; /* H as its table holds it */
    memcpy(ht, h, sizeof ht);
    for (int p = 0; p < PASSES; p++) {
        for (int s = 0; s < W; s++) {
            for (int m = 0; m < W; m++)
                for (int64_t i = 0; i < USERS; i++)
                    for (int64_t j = 0; j < ITEMS; j++) {
                        if (block_of(sb, W, i) != m || block_of(tb, W, j) != (m + s) % W) continue;
                        for (int k = 0; k < RATINGS; k++)
                            if (rating_idx[k][0] == i && rating_idx[k][1] == j)
                                sgd(w + i * RANK, h + j * RANK, rating_val[k]);
                    }
        }
        if (p == 0 || p == PASSES - 1) { /* a run's end */
            for (int k = 0; k < (ITEMS + 2) * RANK; k++) ht[k] += h[k] - ht[k];
            memcpy(h, ht, sizeof ht);
        }
    }
}

static int mf_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    int W = loom_num_workers(n);
    /* an uneven share: every rating whose number mod (W + 1) is this rank,
     * the rest to the last worker */
    int64_t idx[RATINGS][2];
    double val[RATINGS];
    size_t mine = 0;
    for (int k = 0; k < RATINGS; k++) {
        int to = k % (W + 1) < W ? k % (W + 1) : W - 1;
        if (to != rank) continue;
        memcpy(idx[mine], rating_idx[k], sizeof idx[mine]);
        val[mine++] = rating_val[k];
    }
    loom_loop_opts o = {.dims = 2,
                        .extents = mf_ext,
                        .acc = mf_acc,
                        .nacc = 3,
                        .arrays = mf_arrays,
                        .narrays = 2,
                        .indices = &idx[0][0],
                        .values = val,
                        .n = mine,
                        .body = mf_body,
                        .user = &(pass_count){0}};
    pass_count *pc = o.user;
    loom_loop *l;
    char err[256] = "";
    int rc = loom_loop_open(n, &o, &l, err, sizeof err);
    if (rc) {
        fprintf(stderr, "worker %d: %s\n", rank, err);
        return rc;
    }
    if (loom_loop_plan_kind(loom_loop_get_plan(l)) != LOOM_LOOP_2D) return 1;
    size_t sb[4], tb[4];
    loom_loop_bounds(l, sb, tb);
    pc->l = l;
    /* The blocks of H go from pass to pass: a run's table traffic (H read
     * at its start, its change written at its end, W's) does not grow with
     * its passes. */
    loom_stats s0, s1, s2;
    loom_node_stats(n, &s0);
    if ((rc = loom_loop_run(l, 1))) return rc;
    loom_node_stats(n, &s1);
    if ((rc = loom_loop_run(l, PASSES - 1))) return rc;
    loom_node_stats(n, &s2);
    CHECK(PASSES - 1 > 1 &&
          s2.table_messages - s1.table_messages == s1.table_messages - s0.table_messages);
    /* every element once in each pass, passes counted on over runs */
    CHECK(loom_loop_pass(l) == PASSES && !pc->outside);
    for (int p = 0; p < PASSES; p++) CHECK(pc->in_pass[p] == loom_loop_elements(l));
    if (rank == 0) {
        float w[USERS * RANK], h[(ITEMS + 2) * RANK], ws[USERS * RANK], hs[(ITEMS + 2) * RANK];
        if ((rc = loom_pull_range(loom_loop_table(l, W_ARRAY), 0, USERS, w)) ||
            (rc = loom_pull_range(loom_loop_table(l, H_ARRAY), 0, ITEMS + 2, h)))
            return rc;
        serial_mf(W, sb, tb, ws, hs);
        if (memcmp(w, ws, sizeof w) || memcmp(h, hs, sizeof h)) {
            fprintf(stderr, "W and H differ from the serial run on %d workers\n", W);
            return 1;
        }
    }
    loom_loop_close(l);
    return 0;
}

static void test_mf_2d_equals_serial(void **state)
{
    (void)state;
    make_ratings();
    for (int W = 1; W <= 3; W++) {
        harness_result r;
        assert_int_equal(harness_run(1, W, mf_worker, NULL, &r), 0);
    }
}

/* sum(i) += v over elements (i, j): 1D over i. */
static void sum_body(void *user, const int64_t *index, double value, void *const *rows)
{
    (void)user, (void)index;
    *(double *)rows[1] += value;
}

static int sum_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    static const loom_access acc[] = {
        {R_ARRAY, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
        {W_ARRAY, 1, 1, {LOOM_SUB(0, 0)}},
    };
    static const loom_loop_array arrays[] = {{W_ARRAY, "loop.sum", USERS, 1, LOOM_F64, NULL}};
    int W = loom_num_workers(n);
    int64_t idx[RATINGS][2];
    double val[RATINGS];
    size_t mine = 0;
    for (int k = rank; k < RATINGS; k += W) {
        memcpy(idx[mine], rating_idx[k], sizeof idx[mine]);
        val[mine++] = rating_val[k];
    }
    loom_loop_opts o = {.dims = 2,
                        .extents = mf_ext,
                        .acc = acc,
                        .nacc = 2,
                        .arrays = arrays,
                        .narrays = 1,
                        .indices = &idx[0][0],
                        .values = val,
                        .n = mine,
                        .body = sum_body};
    loom_loop *l;
    char err[256];
    int rc = loom_loop_open(n, &o, &l, err, sizeof err);
    if (rc) return rc;
    if (loom_loop_plan_kind(loom_loop_get_plan(l)) != LOOM_LOOP_1D) return 1;
    if ((rc = loom_loop_run(l, 2))) return rc;
    if (rank == 0) {
        double got[USERS], want[USERS] = {0};
        for (int k = 0; k < RATINGS; k++) want[rating_idx[k][0]] += 2 * rating_val[k];
        if ((rc = loom_pull_range(loom_loop_table(l, W_ARRAY), 0, USERS, got))) return rc;
        for (int u = 0; u < USERS; u++)
            if (got[u] != want[u]) return 1;
    }
    loom_loop_close(l);
    return 0;
}

static void test_1d_sums(void **state)
{
    (void)state;
    make_ratings();
    harness_result r;
    assert_int_equal(harness_run(2, 3, sum_worker, NULL, &r), 0);
}

/* Refusals happen before any collective step, on every worker alike. */
static int said(const char *err)
{
    fprintf(stderr, "unexpected: %s\n", err);
    return 1;
}

static int refuse_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    char err[256];
    loom_loop *l = NULL;
    static const uint64_t ext[2] = {4, 4};
    /* MF with its order kept: a wavefront, whose arrays must all follow the
     * space index; H follows the time index */
    loom_loop_opts o = {.dims = 2,
                        .extents = mf_ext,
                        .acc = mf_acc,
                        .nacc = 3,
                        .ordered = 1,
                        .arrays = mf_arrays,
                        .narrays = 2,
                        .body = mf_body};
    if (loom_loop_open(n, &o, &l, err, sizeof err) != LOOM_EINVAL ||
        !strstr(err, "neither the space index"))
        return said(err);
    /* an x(i - 1) */
    static const loom_access stencil[] = {
        {1, 1, 1, {LOOM_SUB(0, 0)}},
        {1, 0, 1, {LOOM_SUB(0, -1)}},
    };
    static const loom_loop_array x[] = {{1, "loop.x", 4, 1, LOOM_F64, NULL}};
    o = (loom_loop_opts){.dims = 1,
                         .extents = ext,
                         .acc = stencil,
                         .nacc = 2,
                         .arrays = x,
                         .narrays = 1,
                         .body = sum_body};
    if (loom_loop_open(n, &o, &l, err, sizeof err) != LOOM_EINVAL || !strstr(err, "offset 0"))
        return said(err);
    /* 2D over (i, j) with two arrays written by j: one rotates, the other
     * cannot (an array only read by j would be hosted) */
    static const uint64_t ext84[2] = {8, 4};
    static const loom_access by_j[] = {
        {0, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
        {1, 1, 1, {LOOM_SUB(0, 0)}},
        {2, 1, 1, {LOOM_SUB(0, 0)}},
        {3, 1, 1, {LOOM_SUB(1, 0)}},
        {4, 1, 1, {LOOM_SUB(1, 0)}},
    };
    static const loom_loop_array four[] = {{1, "loop.a", 8, 1, LOOM_F64, NULL},
                                           {2, "loop.b", 8, 1, LOOM_F64, NULL},
                                           {3, "loop.c", 4, 1, LOOM_F64, NULL},
                                           {4, "loop.d", 4, 1, LOOM_F64, NULL}};
    o = (loom_loop_opts){.dims = 2,
                         .extents = ext84,
                         .acc = by_j,
                         .nacc = 5,
                         .arrays = four,
                         .narrays = 4,
                         .body = sum_body};
    if (loom_loop_open(n, &o, &l, err, sizeof err) != LOOM_EINVAL ||
        !strstr(err, "only an array read so is hosted"))
        return said(err);
    o.extents = ext;
    /* writing the iteration space other than the iteration's own element */
    static const loom_access writes_space[] = {{0, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 1)}},
                                               {1, 1, 1, {LOOM_SUB(0, 0)}}};
    o.acc = writes_space;
    o.nacc = 2;
    o.narrays = 1;
    if (loom_loop_open(n, &o, &l, err, sizeof err) != LOOM_EINVAL ||
        !strstr(err, "not among the loop's arrays"))
        return said(err);
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
        cmocka_unit_test(test_mf_2d_equals_serial),
        cmocka_unit_test(test_1d_sums),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
