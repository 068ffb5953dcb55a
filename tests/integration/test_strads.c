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
 *   - AsyncFor on 3 workers with a lead of 1 and of 2 passes, 40 runs of 4
 *     passes: no worker starts pass p before every worker finished pass
 *     p - lead (worker 0 waits at its first iteration for a second, for
 *     another worker to run ahead, which without the bound they do), and
 *     the loop still reaches the solution;
 *   - the same over a vector of rows (three right-hand sides solved at once,
 *     x[i] a row of 3): SyncFor on 1 to 3 workers equal to serial Jacobi,
 *     AsyncFor on 1 worker with delay 1 to serial Gauss-Seidel, bit for bit;
 *   - malformed loops are refused with a sentence (a lead for SyncFor, or
 *     above 2^31, among them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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

/* Open AsyncFor (async) or SyncFor on o, saying on stderr why not. */
static int open_loop(loom_node *n, int rank, int async, const loom_for_opts *o, loom_for **f)
{
    char err[256] = "";
    int rc = async ? loom_async_for_open(n, o, f, err, sizeof err)
                   : loom_sync_for_open(n, o, f, err, sizeof err);
    if (rc) fprintf(stderr, "worker %d: %s\n", rank, err);
    return rc;
}

static int sync_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    double x0[N], got[N], want[N];
    start(x0);
    loom_for_opts o = {.name = "jacobi", .n = N, .init = x0, .fn = solve_row};
    loom_for *f;
    int rc = open_loop(n, rank, 0, &o, &f);
    if (rc) return rc;
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
    int rc = open_loop(n, rank, async != NULL, &o, &f);
    if (rc) return rc;
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

static int near_solution(const double *x0, const double *got, int runs, int passes);

static int async_worker(loom_node *n, int rank, void *arg)
{
    const async_arg *a = arg;
    double x0[N], got[N], want[N];
    start(x0);
    loom_for_opts o = {.name = "gs", .n = N, .init = x0, .fn = solve_row, .delay = a->delay};
    loom_for *f;
    int rc = open_loop(n, rank, 1, &o, &f);
    if (rc) return rc;
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
    return !near_solution(x0, got, a->runs, a->passes);
}

/* Whether got, after `runs` runs of `passes` passes from x0, is within 1e-9
 * of the solution (serial Gauss-Seidel until a pass changes nothing). */
static int near_solution(const double *x0, const double *got, int runs, int passes)
{
    double want[N], prev[N];
    memcpy(want, x0, sizeof want);
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
    if (start_err * pow(0.5, runs) > 1e-9 * big || worst > 1e-9 * big) {
        fprintf(stderr, "AsyncFor: %d passes, max error %g (from %g), solution max %g\n",
                runs * passes, worst, start_err, big);
        return 0;
    }
    return 1;
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

/* AsyncFor with a lead: each worker counts the passes it started and
 * finished (its iterations, in its range's order); at the start of each
 * pass p, every worker must have finished pass p - lead. Worker 0 waits at
 * its first iteration (up to a second, for nothing if the bound holds) for
 * another worker to start pass `lead`, which only a broken bound allows. */
#define LEAD_W 3
typedef struct lead_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t lead;
    int started[LEAD_W], done[LEAD_W]; /* passes, per worker */
    int bad;
} lead_state;

typedef struct lead_ctx {
    lead_state *st;
    int rank;
    uint64_t range, calls;
} lead_ctx;

static int lead_min_done(const lead_state *st)
{
    int m = st->done[0];
    for (int w = 1; w < LEAD_W; w++)
        if (st->done[w] < m) m = st->done[w];
    return m;
}

static int lead_ran_ahead(const lead_state *st)
{
    for (int w = 1; w < LEAD_W; w++)
        if (st->started[w] >= (int)st->lead) return 1;
    return 0;
}

static double lead_row(void *user, uint64_t i, const double *x)
{
    lead_ctx *c = user;
    lead_state *st = c->st;
    int pass = (int)(c->calls / c->range);
    pthread_mutex_lock(&st->mu);
    if (c->calls % c->range == 0) { /* the first iteration of a pass */
        st->started[c->rank] = pass;
        pthread_cond_broadcast(&st->cv);
        int ahead = 0;
        if (c->rank == 0 && pass == 0) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += 1;
            while (!(ahead = lead_ran_ahead(st)) &&
                   pthread_cond_timedwait(&st->cv, &st->mu, &until) != ETIMEDOUT) {
            }
        }
        if (ahead || pass - lead_min_done(st) > (int)st->lead - 1) {
            if (!st->bad)
                fprintf(stderr, "worker %d started pass %d, the slowest had finished %d\n", c->rank,
                        pass, lead_min_done(st));
            st->bad = 1;
        }
    }
    if (++c->calls % c->range == 0) {
        st->done[c->rank] = pass + 1;
        pthread_cond_broadcast(&st->cv);
    }
    pthread_mutex_unlock(&st->mu);
    return solve_row(NULL, i, x);
}

static int lead_worker(loom_node *n, int rank, void *arg)
{
    lead_state *st = arg;
    double x0[N], got[N];
    start(x0);
    lead_ctx c = {st, rank, (uint64_t)(N * (rank + 1) / LEAD_W - N * rank / LEAD_W), 0};
    loom_for_opts o = {.name = "lead",
                       .n = N,
                       .init = x0,
                       .fn = lead_row,
                       .user = &c,
                       .delay = 3,
                       .lead = st->lead};
    loom_for *f;
    int rc = open_loop(n, rank, 1, &o, &f);
    if (rc) return rc;
    for (int r = 0; r < 40 && !rc; r++) rc = loom_for_run(f, 4);
    if (rc || (rc = loom_for_values(f, got))) return rc;
    loom_for_close(f);
    return !near_solution(x0, got, 40, 4);
}

static void test_async_for_lead(void **state)
{
    (void)state;
    make_system();
    for (uint64_t lead = 1; lead <= 2; lead++) {
        lead_state st = {.lead = lead};
        pthread_mutex_init(&st.mu, NULL);
        pthread_cond_init(&st.cv, NULL);
        harness_result r;
        assert_int_equal(harness_run(1, LEAD_W, lead_worker, &st, &r), 0);
        assert_int_equal(st.bad, 0);
        for (int w = 0; w < LEAD_W; w++) assert_int_equal(st.done[w], 160);
        pthread_cond_destroy(&st.cv);
        pthread_mutex_destroy(&st.mu);
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
        {{"v", 0, NULL, solve_row, NULL, 1, 0, NULL, 0}, 0, "empty"},
        {{"v", N, NULL, NULL, NULL, 1, 0, NULL, 0}, 1, "no function"},
        {{NULL, N, NULL, solve_row, NULL, 1, 0, NULL, 0}, 0, "name"},
        {{"a-name-much-too-long-for-a-table-of-sixty-three-characters-at-most", N, NULL, solve_row,
          NULL, 1, 0, NULL, 0},
         0,
         "name"},
        {{"v", N, NULL, solve_row, NULL, 0, 0, NULL, 0}, 1, "delay"},
        {{"v", N, NULL, solve_row, NULL, 1, C, NULL, 0}, 0, "row_fn"},
        {{"v", N, NULL, NULL, NULL, 1, 1, solve_rows, 0}, 1, "fn, for a vector"},
        {{"v", N, NULL, solve_row, NULL, 1, 0, NULL, 1}, 0, "SyncFor's passes are in step"},
        {{"v", N, NULL, solve_row, NULL, 1, 0, NULL, (uint64_t)1 << 32}, 1, "2^31"},
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
        cmocka_unit_test(test_async_for_lead),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
