/* What a loop body writes outside its declared accesses (loom/loop.h,
 * src/sched/loop_write.c; in-process jobs, threads, loopback TCP):
 *
 *   - accumulators: a loop over 200 elements, given to 1 to 3 workers in
 *     uneven shares, adds into a sum (i64), a min and a max (f64) and a
 *     histogram reduced by a user function; after a run every worker reads
 *     results equal to the serial computation over all elements, exactly,
 *     and a second run starts again from the identity. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "loom/loop.h"

#define ROWS  17
#define COLS  9
#define ELEMS 200

static int64_t el_idx[ELEMS][2];
static double el_val[ELEMS];

/* Elements (i, j) with values 1-5, from a fixed generator (pairs may repeat:
 * the loop does not care). */
static void make_elements(void)
{
    uint64_t x = 88172645463325252ULL;
    for (int n = 0; n < ELEMS; n++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        el_idx[n][0] = (int64_t)(x % ROWS), el_idx[n][1] = (int64_t)((x >> 20) % COLS);
        el_val[n] = (double)(1 + (x >> 40) % 5);
    }
}

/* This worker's share: element k goes to k mod (W + 1), the last share to
 * the last worker (uneven). */
static size_t share(int W, int rank, int64_t (*idx)[2], double *val)
{
    size_t mine = 0;
    for (int k = 0; k < ELEMS; k++) {
        int to = k % (W + 1) < W ? k % (W + 1) : W - 1;
        if (to != rank) continue;
        memcpy(idx[mine], el_idx[k], sizeof idx[mine]);
        val[mine++] = el_val[k];
    }
    return mine;
}

/* ---- accumulators ---- */

enum { A_SUM, A_MIN, A_MAX, A_HIST };

typedef struct acc_user {
    int64_t *sum;  /* count, sum of value * (i + 1) */
    double *min;   /* min of value - j / 4 */
    double *max;   /* max of i, of j + value */
    int64_t *hist; /* count of each value 1-5 */
} acc_user;

static void hist_add(void *user, void *into, const void *from)
{
    (void)user;
    int64_t *d = into;
    const int64_t *s = from;
    for (int k = 0; k < 5; k++) d[k] += s[k];
}

static void acc_body(void *user, const int64_t *index, double value, void *const *rows)
{
    acc_user *u = user;
    (void)rows;
    u->sum[0] += 1;
    u->sum[1] += (int64_t)value * (index[0] + 1);
    double m = value - (double)index[1] / 4;
    if (m < u->min[0]) u->min[0] = m;
    if ((double)index[0] > u->max[0]) u->max[0] = (double)index[0];
    if ((double)index[1] + value > u->max[1]) u->max[1] = (double)index[1] + value;
    u->hist[(int)value - 1]++;
}

static int acc_check(loom_loop *l, int passes)
{
    int64_t sum[2] = {0, 0}, hist[5] = {0}, gs[2], gh[5];
    double min = 1e300, max[2] = {-1e300, -1e300}, gmin, gmax[2];
    for (int k = 0; k < ELEMS; k++) {
        sum[0] += passes;
        sum[1] += passes * (int64_t)el_val[k] * (el_idx[k][0] + 1);
        double m = el_val[k] - (double)el_idx[k][1] / 4;
        min = m < min ? m : min;
        max[0] = (double)el_idx[k][0] > max[0] ? (double)el_idx[k][0] : max[0];
        double c = (double)el_idx[k][1] + el_val[k];
        max[1] = c > max[1] ? c : max[1];
        hist[(int)el_val[k] - 1] += passes;
    }
    if (loom_loop_accum_result(l, A_SUM, gs) || loom_loop_accum_result(l, A_MIN, &gmin) ||
        loom_loop_accum_result(l, A_MAX, gmax) || loom_loop_accum_result(l, A_HIST, gh))
        return 1;
    if (memcmp(gs, sum, sizeof sum) || gmin != min || gmax[0] != max[0] || gmax[1] != max[1] ||
        memcmp(gh, hist, sizeof hist)) {
        fprintf(stderr,
                "accumulators: sum %lld/%lld (want %lld/%lld), min %g (%g), max %g %g (%g %g)\n",
                (long long)gs[0], (long long)gs[1], (long long)sum[0], (long long)sum[1], gmin, min,
                gmax[0], gmax[1], max[0], max[1]);
        return 1;
    }
    return 0;
}

static int acc_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    int W = loom_num_workers(n);
    int64_t idx[ELEMS][2];
    double val[ELEMS];
    size_t mine = share(W, rank, idx, val);
    static const loom_access acc[] = {{0, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}}};
    static const uint64_t ext[2] = {ROWS, COLS};
    static const loom_loop_accum_decl accums[] = {
        {A_SUM, LOOM_REDUCE_SUM, LOOM_I64, 2, NULL, NULL},
        {A_MIN, LOOM_REDUCE_MIN, LOOM_F64, 1, NULL, NULL},
        {A_MAX, LOOM_REDUCE_MAX, LOOM_F64, 2, NULL, NULL},
        {A_HIST, LOOM_REDUCE_FN, LOOM_I64, 5 * sizeof(int64_t), hist_add, NULL},
    };
    acc_user u;
    loom_loop_opts o = {.dims = 2,
                        .extents = ext,
                        .acc = acc,
                        .nacc = 1,
                        .indices = &idx[0][0],
                        .values = val,
                        .n = mine,
                        .body = acc_body,
                        .user = &u,
                        .accums = accums,
                        .naccums = 4};
    loom_loop *l;
    char err[256] = "";
    int rc = loom_loop_open(n, &o, &l, err, sizeof err);
    if (rc) {
        fprintf(stderr, "worker %d: %s\n", rank, err);
        return rc;
    }
    u = (acc_user){loom_loop_accum(l, A_SUM), loom_loop_accum(l, A_MIN), loom_loop_accum(l, A_MAX),
                   loom_loop_accum(l, A_HIST)};
    if (!u.sum || !u.min || !u.max || !u.hist || loom_loop_accum(l, 99)) return 1;
    /* before any run: the identities */
    int64_t s[2];
    double mn;
    if (loom_loop_accum_result(l, A_SUM, s) || s[0] || s[1] ||
        loom_loop_accum_result(l, A_MIN, &mn) || mn <= 1e300 ||
        loom_loop_accum_result(l, 99, s) != LOOM_EINVAL)
        return 1;
    if ((rc = loom_loop_run(l, 2)) || acc_check(l, 2)) return rc ? rc : 1;
    if ((rc = loom_loop_run(l, 1)) || acc_check(l, 1)) return rc ? rc : 1;
    loom_loop_close(l);
    return 0;
}

static void test_accumulators(void **state)
{
    (void)state;
    make_elements();
    for (int W = 1; W <= 3; W++) {
        harness_result r;
        assert_int_equal(harness_run(1, W, acc_worker, NULL, &r), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accumulators),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
