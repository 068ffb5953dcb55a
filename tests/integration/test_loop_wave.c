/* Wavefront loops on the workers of in-process jobs (loom/loop.h,
 * src/sched/loop_wave.c; threads, loopback TCP): loops whose dependences
 * need a skewed schedule, each written serially over a grid with its
 * accesses declared, run on 1 to 4 workers given uneven shares of the grid,
 * and compared bit for bit with the serial loop:
 *
 *   - a Gauss-Seidel-like stencil: x(i, j) from x(i - 1, j), x(i, j - 1)
 *     and itself, dependences (1, 0) and (0, 1): a wavefront with skew 0;
 *   - a dynamic program reading x(i - 1, j + 1), x(i, j - 1) and two rows
 *     back, x(i - 2, j): the (1, -1) dependence needs skew 1, and the worker
 *     before passes on two rows;
 *   - malformed declarations (a write to a row before, a read too far back)
 *     refused with a sentence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "loom/loop.h"

#define NI     14
#define NJ     11
#define PASSES 2

enum { GRID, X };

static int64_t cell_idx[NI * NJ][2];
static double cell_val[NI * NJ];

static void make_grid(void)
{
    uint64_t s = 0x2545F4914F6CDD1DULL;
    for (int i = 0; i < NI; i++)
        for (int j = 0; j < NJ; j++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            cell_idx[i * NJ + j][0] = i, cell_idx[i * NJ + j][1] = j;
            cell_val[i * NJ + j] = (double)(s % 1000) / 997;
        }
}

static void init_row(void *user, uint32_t array, uint64_t row, void *values)
{
    (void)user, (void)array;
    double *v = values;
    for (int j = 0; j < NJ; j++) v[j] = (double)((row * 5 + (uint64_t)j * 3) % 7) / 3;
}

static double at(void *p)
{
    return p ? *(double *)p : 0.125; /* outside the grid */
}

/* rows: [0] the grid, [1] x(i, j), then the reads */
static void stencil_body(void *user, const int64_t *index, double v, void *const *rows)
{
    (void)user, (void)index;
    double *x = rows[1];
    *x = 0.5 * *x + 0.3 * at(rows[2]) + 0.2 * at(rows[3]) + v;
}

static void dp_body(void *user, const int64_t *index, double v, void *const *rows)
{
    (void)user, (void)index;
    double *x = rows[1], a = at(rows[2]), b = at(rows[3]), c = at(rows[4]);
    double best = a > b ? a : b;
    *x = 0.9 * (best > c ? best : c) - 0.05 * *x + v;
}

static const loom_access stencil[] = {
    {GRID, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
    {X, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
    {X, 0, 2, {LOOM_SUB(0, -1), LOOM_SUB(1, 0)}},
    {X, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, -1)}},
};
static const loom_access dp[] = {
    {GRID, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}}, {X, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
    {X, 0, 2, {LOOM_SUB(0, -1), LOOM_SUB(1, 1)}},   {X, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, -1)}},
    {X, 0, 2, {LOOM_SUB(0, -2), LOOM_SUB(1, 0)}},
};

typedef struct wave_case {
    const loom_access *acc;
    size_t nacc;
    loom_loop_body_fn body;
    int64_t skew;
} wave_case;

/* The serial loop: pass after pass, row after row, column after column. */
static void serial(const wave_case *c, double *x)
{
    for (int i = 0; i < NI; i++) init_row(NULL, X, (uint64_t)i, x + i * NJ);
    for (int p = 0; p < PASSES; p++)
        for (int i = 0; i < NI; i++)
            for (int j = 0; j < NJ; j++) {
                void *rows[8] = {NULL};
                int64_t idx[2] = {i, j};
                for (size_t k = 1; k < c->nacc; k++) {
                    int64_t r = i + c->acc[k].sub[0].offset, col = j + c->acc[k].sub[1].offset;
                    rows[k] = r < 0 || col < 0 || col >= NJ ? NULL : x + r * NJ + col;
                }
                c->body(NULL, idx, cell_val[i * NJ + j], rows);
            }
}

static int wave_worker(loom_node *n, int rank, void *arg)
{
    const wave_case *c = arg;
    int W = loom_num_workers(n);
    int64_t idx[NI * NJ][2];
    double val[NI * NJ];
    size_t mine = 0;
    for (int k = 0; k < NI * NJ; k++) { /* uneven: k mod (W + 1), the rest to the last */
        int to = k % (W + 1) < W ? k % (W + 1) : W - 1;
        if (to != rank) continue;
        memcpy(idx[mine], cell_idx[k], sizeof idx[mine]);
        val[mine++] = cell_val[k];
    }
    static const uint64_t ext[2] = {NI, NJ};
    static const loom_loop_array arrays[] = {{X, "wave.x", NI, NJ, LOOM_F64, init_row}};
    loom_loop_opts o = {.dims = 2,
                        .extents = ext,
                        .acc = c->acc,
                        .nacc = c->nacc,
                        .ordered = 1,
                        .arrays = arrays,
                        .narrays = 1,
                        .indices = &idx[0][0],
                        .values = val,
                        .n = mine,
                        .body = c->body};
    loom_loop *l;
    char err[512] = "";
    int rc = loom_loop_open(n, &o, &l, err, sizeof err);
    if (rc) {
        fprintf(stderr, "worker %d: %s\n", rank, err);
        return rc;
    }
    uint32_t space, time;
    int64_t skew;
    loom_loop_plan_axes(loom_loop_get_plan(l), &space, &time, &skew);
    if (loom_loop_plan_kind(loom_loop_get_plan(l)) != LOOM_LOOP_WAVEFRONT || space != 0 ||
        skew != c->skew) {
        fprintf(stderr, "unexpected plan: %s\n", loom_loop_plan_explain(loom_loop_get_plan(l)));
        return 1;
    }
    /* in parallel: every worker holds a block of rows */
    if (!loom_loop_elements(l)) return 1;
    if ((rc = loom_loop_run(l, PASSES))) return rc;
    double got[NI * NJ], want[NI * NJ];
    if ((rc = loom_pull_range(loom_loop_table(l, X), 0, NI, got))) return rc;
    serial(c, want);
    if (memcmp(got, want, sizeof got)) {
        fprintf(stderr, "worker %d of %d: the wavefront differs from the serial loop\n", rank, W);
        return 1;
    }
    loom_loop_close(l);
    return 0;
}

static void run_case(const wave_case *c)
{
    make_grid();
    for (int W = 1; W <= 4; W++) {
        harness_result r;
        assert_int_equal(harness_run(1, W, wave_worker, (void *)c, &r), 0);
    }
}

static void test_stencil(void **state)
{
    (void)state;
    static const wave_case c = {stencil, 4, stencil_body, 0};
    run_case(&c);
}

static void test_dynamic_program(void **state)
{
    (void)state;
    static const wave_case c = {dp, 5, dp_body, 1};
    run_case(&c);
}

static int refuse_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    static const uint64_t ext[2] = {NI, NJ};
    static const loom_loop_array arrays[] = {{X, "wave.r", NI, NJ, LOOM_F64, NULL}};
    loom_access acc[4];
    memcpy(acc, stencil, sizeof acc);
    acc[2].write = 1; /* x(i - 1, j) written: another worker's row */
    loom_loop_opts o = {.dims = 2,
                        .extents = ext,
                        .acc = acc,
                        .nacc = 4,
                        .ordered = 1,
                        .arrays = arrays,
                        .narrays = 1,
                        .body = stencil_body};
    loom_loop *l = NULL;
    char err[512] = "";
    if (loom_loop_open(n, &o, &l, err, sizeof err) != LOOM_EINVAL || !strstr(err, "offset 0")) {
        fprintf(stderr, "unexpected: %s\n", err);
        return 1;
    }
    memcpy(acc, stencil, sizeof acc);
    acc[2].sub[0].offset = -9; /* more rows back than a worker passes on */
    if (loom_loop_open(n, &o, &l, err, sizeof err) != LOOM_EINVAL ||
        !strstr(err, "rows up to 8 before")) {
        fprintf(stderr, "unexpected: %s\n", err);
        return 1;
    }
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
        cmocka_unit_test(test_stencil),
        cmocka_unit_test(test_dynamic_program),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
