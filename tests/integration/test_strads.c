/* SyncFor and AsyncFor (loom/strads.h; in-process jobs, threads, loopback
 * TCP), on a Jacobi / Gauss-Seidel solve of a small generated linear system
 * A x = b whose matrix is strictly diagonally dominant (off-diagonal row sums
 * at most half the diagonal: both iterations converge to the one solution):
 *
 *   - SyncFor on 1 to 3 workers equals the serial Jacobi loop (reads the old
 *     vector, writes a new one) bit for bit after 1, 2 and 7 passes;
 *   - AsyncFor on 1 worker with delay 1 equals the serial Gauss-Seidel loop
 *     (writes in place, each write made as the sum table makes it) bit for
 *     bit;
 *   - AsyncFor on 2 and 3 workers with delay 3, 40 runs of 2 passes, reaches
 *     the solution the test computes by serial Gauss-Seidel to convergence,
 *     within 1e-9 of its largest entry: every iteration, whatever values
 *     of its run it reads, at least halves the largest error (off-diagonal
 *     sums below half the diagonal), so 40 runs leave 0.5^40 of the start's
 *     error, which the test checks is below the tolerance;
 *   - the same over a vector of rows (three right-hand sides solved at once,
 *     x[i] a row of 3): SyncFor on 1 to 3 workers equal to serial Jacobi,
 *     AsyncFor on 1 worker with delay 1 to serial Gauss-Seidel, bit for bit;
 *   - malformed loops are refused with a sentence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "loom/error.h"
#include "loom/strads.h"

#define N 23

static double A[N][N], B[N];

static void make_system(void)
{
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < N; i++) {
        double off = 0;
        for (int j = 0; j < N; j++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            A[i][j] = i == j ? 0 : (double)(s % 2001) / 1000.0 - 1.0;
            off += fabs(A[i][j]);
        }
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        A[i][i] = 2 * off + 0.5;
        B[i] = (double)(s % 1001) / 100.0 - 5.0;
    }
}

/* One row of the solve: the new x[i] from the others. */
static double solve_row(void *user, uint64_t i, const double *x)
{
    (void)user;
    double r = B[i];
    for (uint64_t j = 0; j < N; j++)
        if (j != i) r -= A[i][j] * x[j];
    return r / A[i][i];
}

static void start(double *x)
{
    for (int i = 0; i < N; i++) x[i] = (double)(i % 5) - 2.0;
}

static void serial_jacobi(double *x, int passes)
{
    for (int p = 0; p < passes; p++) {
        double next[N];
        for (uint64_t i = 0; i < N; i++) next[i] = solve_row(NULL, i, x);
        memcpy(x, next, sizeof next);
    }
}

/* Gauss-Seidel, each write x + (new - x): what a sum table holds after the
 * buffer's change is added. */
static void serial_gauss_seidel(double *x, int passes)
{
    for (int p = 0; p < passes; p++)
        for (uint64_t i = 0; i < N; i++) {
            double v = solve_row(NULL, i, x);
            x[i] = x[i] + (v - x[i]);
        }
}

static int sync_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    double x0[N], got[N], want[N];
    start(x0);
    loom_for_opts o = {.name = "jacobi", .n = N, .init = x0, .fn = solve_row};
    loom_for *f;
    char err[256] = "";
    int rc = loom_sync_for_open(n, &o, &f, err, sizeof err);
    if (rc) {
        fprintf(stderr, "worker %d: %s\n", rank, err);
        return rc;
    }
    static const int steps[] = {1, 1, 5}; /* after 1, 2 and 7 passes */
    memcpy(want, x0, sizeof want);
    for (int s = 0; s < 3; s++) {
        if ((rc = loom_for_run(f, steps[s])) || (rc = loom_for_values(f, got))) return rc;
        serial_jacobi(want, steps[s]);
        if (memcmp(got, want, sizeof want)) {
            for (int i = 0; i < N; i++)
                if (got[i] != want[i])
                    fprintf(stderr, "SyncFor: x[%d] %.17g, serial Jacobi %.17g\n", i, got[i],
                            want[i]);
            return 1;
        }
    }
    loom_for_close(f);
    return 0;
}

static void test_sync_for_equals_serial(void **state)
{
    (void)state;
    make_system();
    for (int W = 1; W <= 3; W++) {
        harness_result r;
        assert_int_equal(harness_run(1, W, sync_worker, NULL, &r), 0);
    }
}

/* ---- vectors of rows: C systems A x_c = b_c at once, x[i] a row of C ---- */

#define C 3

static double rhs(uint64_t i, int c)
{
    return B[i] * (c + 1) - c;
}

static void solve_rows(void *user, uint64_t i, const double *x, double *row)
{
    (void)user;
    for (int c = 0; c < C; c++) {
        double r = rhs(i, c);
        for (uint64_t j = 0; j < N; j++)
            if (j != i) r -= A[i][j] * x[j * C + c];
        row[c] = r / A[i][i];
    }
}

static void serial_jacobi_rows(double *x, int passes)
{
    for (int p = 0; p < passes; p++) {
        double next[N * C];
        for (uint64_t i = 0; i < N; i++) solve_rows(NULL, i, x, next + i * C);
        memcpy(x, next, sizeof next);
    }
}

static void serial_gauss_seidel_rows(double *x, int passes)
{
    for (int p = 0; p < passes; p++)
        for (uint64_t i = 0; i < N; i++) {
            double row[C];
            solve_rows(NULL, i, x, row);
            for (int c = 0; c < C; c++) x[i * C + c] = x[i * C + c] + (row[c] - x[i * C + c]);
        }
}

/* arg NULL: SyncFor against serial Jacobi; else AsyncFor, delay 1, one
 * worker, against serial Gauss-Seidel; both bit for bit after 1, 2 and 7
 * passes. */
static int rows_worker(loom_node *n, int rank, void *arg)
{
    const int *async = arg;
    double x0[N * C], got[N * C], want[N * C];
    for (int k = 0; k < N * C; k++) x0[k] = (double)(k % 7) - 3.0;
    loom_for_opts o = {
        .name = "rows", .n = N, .init = x0, .row_fn = solve_rows, .width = C, .delay = 1};
    loom_for *f;
    char err[256] = "";
    int rc = async ? loom_async_for_open(n, &o, &f, err, sizeof err)
                   : loom_sync_for_open(n, &o, &f, err, sizeof err);
    if (rc) {
        fprintf(stderr, "worker %d: %s\n", rank, err);
        return rc;
    }
    static const int steps[] = {1, 1, 5};
    memcpy(want, x0, sizeof want);
    for (int k = 0; k < 3; k++) {
        if ((rc = loom_for_run(f, steps[k])) || (rc = loom_for_values(f, got))) return rc;
        if (async)
            serial_gauss_seidel_rows(want, steps[k]);
        else
            serial_jacobi_rows(want, steps[k]);
        CHECK(!memcmp(got, want, sizeof want));
    }
    loom_for_close(f);
    return 0;
}

static void test_rows(void **state)
{
    (void)state;
    make_system();
    harness_result r;
    for (int W = 1; W <= 3; W++) assert_int_equal(harness_run(1, W, rows_worker, NULL, &r), 0);
    int async = 1;
    assert_int_equal(harness_run(1, 1, rows_worker, &async, &r), 0);
}

typedef struct async_arg {
    uint64_t delay;
    int runs, passes; /* runs of `passes` passes each */
    int exact;        /* compare with serial Gauss-Seidel bit for bit, else with the solution */
} async_arg;

static int async_worker(loom_node *n, int rank, void *arg)
{
    const async_arg *a = arg;
    double x0[N], got[N], want[N];
    start(x0);
    loom_for_opts o = {.name = "gs", .n = N, .init = x0, .fn = solve_row, .delay = a->delay};
    loom_for *f;
    char err[256] = "";
    int rc = loom_async_for_open(n, &o, &f, err, sizeof err);
    if (rc) {
        fprintf(stderr, "worker %d: %s\n", rank, err);
        return rc;
    }
    /* Each run ends at a barrier: without them one worker could run every
     * pass on the others' first values before they flush any. */
    for (int r = 0; r < a->runs && !rc; r++) rc = loom_for_run(f, a->passes);
    if (rc || (rc = loom_for_values(f, got))) return rc;
    loom_for_close(f);
    memcpy(want, x0, sizeof want);
    if (a->exact) {
        serial_gauss_seidel(want, a->runs * a->passes);
        return memcmp(got, want, sizeof want) != 0;
    }
    /* the solution: Gauss-Seidel until a pass changes nothing */
    double prev[N];
    int p = 0;
    do {
        memcpy(prev, want, sizeof prev);
        serial_gauss_seidel(want, 1);
    } while (memcmp(prev, want, sizeof prev) && ++p < 10000);
    double big = 0, worst = 0, start_err = 0;
    for (int i = 0; i < N; i++) {
        big = fmax(big, fabs(want[i]));
        worst = fmax(worst, fabs(got[i] - want[i]));
        start_err = fmax(start_err, fabs(x0[i] - want[i]));
    }
    /* every run at least halves the largest error: the bound must be below
     * the tolerance, and the loop within it */
    if (start_err * pow(0.5, a->runs) > 1e-9 * big || worst > 1e-9 * big) {
        fprintf(stderr, "AsyncFor: %d passes, max error %g (from %g), solution max %g\n",
                a->runs * a->passes, worst, start_err, big);
        return 1;
    }
    return 0;
}

static void test_async_for_one_worker_is_gauss_seidel(void **state)
{
    (void)state;
    make_system();
    async_arg a = {1, 3, 3, 1};
    harness_result r;
    assert_int_equal(harness_run(1, 1, async_worker, &a, &r), 0);
}

static void test_async_for_converges(void **state)
{
    (void)state;
    make_system();
    async_arg a = {3, 40, 2, 0};
    for (int W = 2; W <= 3; W++) {
        harness_result r;
        assert_int_equal(harness_run(1, W, async_worker, &a, &r), 0);
    }
}

static int refuse_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    loom_for *f = NULL;
    char err[256];
    static const struct {
        loom_for_opts o;
        int async;
        const char *says;
    } bad[] = {
        {{"v", 0, NULL, solve_row, NULL, 1, 0, NULL}, 0, "empty"},
        {{"v", N, NULL, NULL, NULL, 1, 0, NULL}, 1, "no function"},
        {{NULL, N, NULL, solve_row, NULL, 1, 0, NULL}, 0, "name"},
        {{"a-name-much-too-long-for-a-table-of-sixty-three-characters-at-most", N, NULL, solve_row,
          NULL, 1, 0, NULL},
         0,
         "name"},
        {{"v", N, NULL, solve_row, NULL, 0, 0, NULL}, 1, "delay"},
        {{"v", N, NULL, solve_row, NULL, 1, C, NULL}, 0, "row_fn"},
        {{"v", N, NULL, NULL, NULL, 1, 1, solve_rows}, 1, "fn, for a vector"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        err[0] = 0;
        int rc = bad[k].async ? loom_async_for_open(n, &bad[k].o, &f, err, sizeof err)
                              : loom_sync_for_open(n, &bad[k].o, &f, err, sizeof err);
        if (rc != LOOM_EINVAL || f || !strstr(err, bad[k].says)) {
            fprintf(stderr, "case %zu: rc %d, '%s'\n", k, rc, err);
            return 1;
        }
    }
    return 0;
}

static void test_refusals(void **state)
{
    (void)state;
    harness_result r;
    assert_int_equal(harness_run(1, 1, refuse_worker, NULL, &r), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sync_for_equals_serial),
        cmocka_unit_test(test_async_for_one_worker_is_gauss_seidel),
        cmocka_unit_test(test_async_for_converges),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
