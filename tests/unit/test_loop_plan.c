/* The loop planner (loom/loop.h, src/sched/loop_plan.c): the plans of known
 * loops (MF, a stencil, a dynamic program that needs a skew, a loop with a
 * shared write), malformed declarations refused with a sentence, histogram
 * balancing, and a checker: thousands of random small loops, each planned
 * and its block schedule run on 1 to 4 simulated workers, with every pair of
 * iterations that really touch one element (found by brute force from the
 * declarations, not from the planner's vectors) checked never to run in two
 * blocks of one step, and, for ordered loops, never out of serial order. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/error.h"
#include "loom/loop.h"
#define TEST_RNG_SEED 26029
#include "test_rng.h"

static uint64_t below(uint64_t n)
{
    return rng() % n;
}

static loom_loop_plan *plan(uint32_t dims, const loom_access *acc, size_t n, int ordered)
{
    loom_loop_plan *p = NULL;
    char err[256] = "";
    int rc = loom_loop_plan_make(dims, acc, n, ordered, NULL, &p, err, sizeof err);
    if (rc) fail_msg("plan: %s", err);
    return p;
}

static void test_mf_is_2d(void **state)
{
    (void)state;
    enum { RATINGS, W, H };
    loom_access acc[] = {
        {RATINGS, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
        {W, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB_EVERY}},
        {H, 1, 2, {LOOM_SUB(1, 0), LOOM_SUB_EVERY}},
    };
    loom_loop_plan *p = plan(2, acc, 3, 0);
    uint32_t space, time;
    int64_t skew;
    loom_loop_plan_axes(p, &space, &time, &skew);
    assert_int_equal(loom_loop_plan_kind(p), LOOM_LOOP_2D);
    assert_int_equal(space, 0);
    assert_int_equal(time, 1);
    assert_int_equal(loom_loop_steps(p, 4), 4);
    /* worker 2 in step 3 holds time block (2 + 3) mod 4 */
    uint32_t sb, tb;
    assert_int_equal(loom_loop_task(p, 4, 3, 2, &sb, &tb), 1);
    assert_int_equal(sb, 2);
    assert_int_equal(tb, 1);
    loom_loop_plan_free(p);
    /* ordered, the same loop needs the wavefront: (0, POS) and (POS, 0) */
    p = plan(2, acc, 3, 1);
    assert_int_equal(loom_loop_plan_kind(p), LOOM_LOOP_WAVEFRONT);
    assert_int_equal(loom_loop_steps(p, 4), 7);
    assert_int_equal(loom_loop_plan_deps(p), 2);
    int64_t d[2];
    assert_int_equal(loom_loop_plan_dep(p, 0, d), 0);
    assert_true(d[0] == 0 && d[1] == LOOM_DEP_POS);
    assert_int_equal(loom_loop_plan_dep(p, 2, d), LOOM_EINVAL);
    loom_loop_plan_free(p);
}

static void test_stencil_and_skew(void **state)
{
    (void)state;
    /* x(i, j) = f(x(i - 1, j), x(i, j - 1)): distances (1, 0), (0, 1) */
    loom_access stencil[] = {
        {0, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
        {0, 0, 2, {LOOM_SUB(0, -1), LOOM_SUB(1, 0)}},
        {0, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, -1)}},
    };
    loom_loop_plan *p = plan(2, stencil, 3, 1);
    int64_t skew;
    loom_loop_plan_axes(p, NULL, NULL, &skew);
    assert_int_equal(loom_loop_plan_kind(p), LOOM_LOOP_WAVEFRONT);
    assert_int_equal(skew, 0);
    loom_loop_plan_free(p);
    /* a dynamic program reading x(i - 1, j + 1): (1, -1) needs a skew of 1 */
    loom_access dp[] = {
        {0, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
        {0, 0, 2, {LOOM_SUB(0, -1), LOOM_SUB(1, 1)}},
        {0, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, -1)}},
    };
    p = plan(2, dp, 3, 1);
    uint32_t space, time;
    loom_loop_plan_axes(p, &space, &time, &skew);
    assert_int_equal(loom_loop_plan_kind(p), LOOM_LOOP_WAVEFRONT);
    assert_int_equal(space, 0);
    assert_int_equal(time, 1);
    assert_int_equal(skew, 1);
    int64_t idx[2] = {3, 5}, s, t;
    loom_loop_coords(p, idx, &s, &t);
    assert_true(s == 3 && t == 8);
    loom_loop_plan_free(p);
}

static void test_1d_and_serial(void **state)
{
    (void)state;
    /* g(i) = h(X(i, *), w(*)): nothing written is shared */
    loom_access lr[] = {
        {0, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB_EVERY}},
        {1, 0, 1, {LOOM_SUB_EVERY}},
        {2, 1, 1, {LOOM_SUB(0, 0)}},
    };
    loom_loop_plan *p = plan(1, lr, 3, 0);
    assert_int_equal(loom_loop_plan_kind(p), LOOM_LOOP_1D);
    assert_int_equal(loom_loop_plan_deps(p), 0);
    loom_loop_plan_free(p);
    /* SGD writing w(*) from every i: no parallel schedule */
    lr[1].write = 1;
    p = plan(1, lr, 3, 0);
    assert_int_equal(loom_loop_plan_kind(p), LOOM_LOOP_SERIAL);
    assert_non_null(strstr(loom_loop_plan_explain(p), "buffer"));
    uint32_t sb, tb;
    assert_int_equal(loom_loop_steps(p, 3), 1);
    assert_int_equal(loom_loop_task(p, 3, 0, 0, &sb, &tb), 1);
    assert_int_equal(loom_loop_task(p, 3, 0, 1, &sb, &tb), 0);
    loom_loop_plan_free(p);
    /* constants that differ never meet: x(0, i) written, x(1, i - 1) read */
    loom_access consts[] = {
        {0, 1, 2, {LOOM_SUB_AT(0), LOOM_SUB(0, 0)}},
        {0, 0, 2, {LOOM_SUB_AT(1), LOOM_SUB(0, -1)}},
    };
    p = plan(1, consts, 2, 1);
    assert_int_equal(loom_loop_plan_kind(p), LOOM_LOOP_1D);
    loom_loop_plan_free(p);
}

static void test_bad_declarations(void **state)
{
    (void)state;
    loom_loop_plan *p = NULL;
    char err[256];
    loom_access bad_index[] = {{0, 1, 1, {LOOM_SUB(2, 0)}}};
    assert_int_equal(loom_loop_plan_make(2, bad_index, 1, 0, NULL, &p, err, sizeof err),
                     LOOM_EINVAL);
    assert_non_null(strstr(err, "loop index 2, but the loop has 2"));
    assert_null(p);
    loom_access shapes[] = {{4, 1, 1, {LOOM_SUB(0, 0)}},
                            {4, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}}};
    assert_int_equal(loom_loop_plan_make(2, shapes, 2, 0, NULL, &p, err, sizeof err), LOOM_EINVAL);
    assert_non_null(strstr(err, "array 4 with 1 and 2 dimensions"));
    assert_int_equal(loom_loop_plan_make(5, shapes, 1, 0, NULL, &p, err, sizeof err), LOOM_EINVAL);
    assert_non_null(strstr(err, "1 to 4 indices, not 5"));
    loom_access no_dims[] = {{0, 1, 0, {LOOM_SUB(0, 0)}}};
    assert_int_equal(loom_loop_plan_make(1, no_dims, 1, 0, NULL, &p, err, sizeof err), LOOM_EINVAL);
    assert_non_null(strstr(err, "1 to 4 dimensions, not 0"));
    loom_access huge[] = {{0, 1, 1, {LOOM_SUB(0, (int64_t)1 << 40)}}};
    assert_int_equal(loom_loop_plan_make(1, huge, 1, 0, NULL, &p, err, sizeof err), LOOM_EINVAL);
    assert_int_equal(loom_loop_plan_make(1, NULL, 0, 0, NULL, NULL, err, sizeof err), LOOM_EINVAL);
}

static void test_balance(void **state)
{
    (void)state;
    size_t b[5];
    const uint64_t skewed[8] = {100, 1, 1, 1, 1, 1, 1, 94};
    assert_int_equal(loom_loop_balance(skewed, 8, 2, b), 0);
    assert_true(b[0] == 0 && b[1] == 1 && b[2] == 8); /* 100 | 100 */
    const uint64_t flat[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    assert_int_equal(loom_loop_balance(flat, 8, 4, b), 0);
    for (int i = 0; i <= 4; i++) assert_int_equal(b[i], 2 * i);
    assert_int_equal(loom_loop_balance(flat, 8, 0, b), LOOM_EINVAL);
    assert_int_equal(loom_loop_balance(flat, 0, 3, b), 0); /* empty ranges */
    assert_true(b[0] == 0 && b[3] == 0);
}

/* ---- the checker ---- */

#define MAXE 5 /* extents 1..MAXE */

typedef struct loop {
    uint32_t dims;
    uint64_t ext[LOOM_LOOP_MAX_DIMS];
    size_t nacc;
    loom_access acc[6];
    int ordered;
} loop;

static void random_loop(loop *l)
{
    l->dims = 1 + (uint32_t)below(3);
    for (uint32_t v = 0; v < l->dims; v++) l->ext[v] = 1 + below(MAXE);
    uint32_t narrays = 1 + (uint32_t)below(2), nd[3];
    for (uint32_t a = 0; a < 3; a++) nd[a] = 1 + (uint32_t)below(3);
    l->nacc = 1 + below(4);
    l->ordered = (int)below(2);
    int rows = below(4) == 0; /* each array a's rows by index a */
    if (rows && l->dims == 1) l->dims = 2, l->ext[1] = 1 + below(MAXE);
    if (rows) narrays = 2;
    for (size_t i = 0; i < l->nacc; i++) {
        loom_access *a = &l->acc[i];
        a->array = (uint32_t)below(narrays);
        a->ndims = nd[a->array];
        a->write = below(2) == 0;
        for (uint32_t k = 0; k < a->ndims; k++) {
            if (rows) { /* MF-like: a row by one index, the rest whole */
                a->sub[k] = k ? LOOM_SUB_EVERY : LOOM_SUB(a->array % l->dims, 0);
                continue;
            }
            uint64_t kind = below(20);
            if (kind < 13)
                a->sub[k] = LOOM_SUB((uint32_t)below(l->dims), (int64_t)below(5) - 2);
            else if (kind < 17)
                a->sub[k] = LOOM_SUB_EVERY;
            else
                a->sub[k] = LOOM_SUB_AT((int64_t)below(2));
        }
    }
}

/* Do iteration p's access x and iteration q's access y touch one element? */
static int touch(const loom_access *x, const int64_t *p, const loom_access *y, const int64_t *q)
{
    if (x->array != y->array || !(x->write || y->write)) return 0;
    for (uint32_t k = 0; k < x->ndims; k++) {
        const loom_subscript *a = &x->sub[k], *b = &y->sub[k];
        if (a->kind == LOOM_SUB_ALL || b->kind == LOOM_SUB_ALL) continue;
        int64_t va = a->kind == LOOM_SUB_CONST ? a->offset : p[a->index] + a->offset;
        int64_t vb = b->kind == LOOM_SUB_CONST ? b->offset : q[b->index] + b->offset;
        if (va != vb) return 0;
    }
    return 1;
}

static int conflict(const loop *l, const int64_t *p, const int64_t *q)
{
    for (size_t i = 0; i < l->nacc; i++)
        for (size_t j = 0; j < l->nacc; j++)
            if (touch(&l->acc[i], p, &l->acc[j], q)) return 1;
    return 0;
}

/* Iteration number n of the box, its indices in lexicographic order. */
static void unrank(const loop *l, size_t n, int64_t *idx)
{
    for (uint32_t v = l->dims; v-- > 0;) {
        idx[v] = (int64_t)(n % l->ext[v]);
        n /= l->ext[v];
    }
}

static uint32_t block_of(const size_t *bounds, uint32_t parts, int64_t c)
{
    uint32_t b = 0;
    while (b + 1 < parts && (int64_t)bounds[b + 1] <= c) b++;
    return b;
}

/* Plan l, run its schedule on W workers, check it; returns 1 if the loop ran
 * in parallel (more than one block in some step). */
static int check_loop(const loop *l, uint32_t W)
{
    loom_loop_plan *p = NULL;
    char err[256];
    assert_int_equal(
        loom_loop_plan_make(l->dims, l->acc, l->nacc, l->ordered, l->ext, &p, err, sizeof err), 0);
    size_t n = 1;
    for (uint32_t v = 0; v < l->dims; v++) n *= l->ext[v];
    /* blocks from histograms of the iterations' coordinates */
    uint32_t sdim, tdim;
    int64_t skew;
    loom_loop_plan_axes(p, &sdim, &tdim, &skew);
    size_t srange = l->ext[sdim], trange = l->ext[tdim] + (size_t)skew * (l->ext[sdim] - 1);
    uint64_t *sh = calloc(srange, sizeof *sh), *th = calloc(trange, sizeof *th);
    int64_t(*idx)[LOOM_LOOP_MAX_DIMS] = malloc(n * sizeof *idx);
    int64_t *step = malloc(n * sizeof *step), *block = malloc(n * sizeof *block);
    assert_true(sh && th && idx && step && block);
    for (size_t i = 0; i < n; i++) {
        int64_t s, t;
        unrank(l, i, idx[i]);
        loom_loop_coords(p, idx[i], &s, &t);
        assert_true(s >= 0 && (size_t)s < srange && t >= 0 && (size_t)t < trange);
        sh[s]++;
        th[t]++;
    }
    loom_loop_kind kind = loom_loop_plan_kind(p);
    uint32_t parts = kind == LOOM_LOOP_SERIAL ? 1 : W;
    size_t sb[5], tb[5];
    assert_int_equal(loom_loop_balance(sh, srange, parts, sb), 0);
    assert_int_equal(loom_loop_balance(th, trange, parts, tb), 0);
    /* each iteration: the one step and worker whose task is its block */
    uint32_t steps = loom_loop_steps(p, W);
    int parallel = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t s, t;
        loom_loop_coords(p, idx[i], &s, &t);
        uint32_t want_s = block_of(sb, parts, s);
        uint32_t want_t = kind == LOOM_LOOP_1D       ? 0
                          : kind == LOOM_LOOP_SERIAL ? 0
                                                     : block_of(tb, parts, t);
        int found = 0;
        for (uint32_t st = 0; st < steps; st++)
            for (uint32_t w = 0; w < W; w++) {
                uint32_t bs, bt;
                if (!loom_loop_task(p, W, st, w, &bs, &bt) || bs != want_s || bt != want_t)
                    continue;
                found++;
                step[i] = st;
                block[i] = (int64_t)w;
            }
        if (found != 1)
            fail_msg("iteration %zu runs %d times (%s)", i, found, loom_loop_plan_explain(p));
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            if (step[i] == step[j] && block[i] != block[j]) parallel = 1;
            if (!conflict(l, idx[i], idx[j])) continue;
            /* i comes before j in serial order (lexicographic = rank order) */
            if (step[i] == step[j] && block[i] != block[j])
                fail_msg("iterations %zu and %zu touch one element in two blocks of step %lld (%s)",
                         i, j, (long long)step[i], loom_loop_plan_explain(p));
            if (l->ordered && step[i] > step[j])
                fail_msg("ordered loop: iteration %zu runs in step %lld after %zu in %lld (%s)", i,
                         (long long)step[i], j, (long long)step[j], loom_loop_plan_explain(p));
        }
    free(sh);
    free(th);
    free(idx);
    free(step);
    free(block);
    loom_loop_plan_free(p);
    return parallel;
}

static void test_random_loops_keep_dependences(void **state)
{
    (void)state;
    int kinds[5] = {0}, parallel = 0;
    for (int k = 0; k < 20000; k++) {
        loop l;
        random_loop(&l);
        loom_loop_plan *p = NULL;
        assert_int_equal(loom_loop_plan_make(l.dims, l.acc, l.nacc, l.ordered, l.ext, &p, NULL, 0),
                         0);
        kinds[loom_loop_plan_kind(p)]++;
        loom_loop_plan_free(p);
        parallel += check_loop(&l, 1 + (uint32_t)below(4));
    }
    /* the checker saw every kind of plan, and plenty of them run in parallel */
    print_message("plans: 1D %d, 2D %d, wavefront %d, serial %d; %d ran in parallel\n", kinds[1],
                  kinds[2], kinds[3], kinds[4], parallel);
    for (int k = LOOM_LOOP_1D; k <= LOOM_LOOP_SERIAL; k++) assert_true(kinds[k] > 100);
    assert_true(parallel > 5000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mf_is_2d),      cmocka_unit_test(test_stencil_and_skew),
        cmocka_unit_test(test_1d_and_serial), cmocka_unit_test(test_bad_declarations),
        cmocka_unit_test(test_balance),       cmocka_unit_test(test_random_loops_keep_dependences),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
