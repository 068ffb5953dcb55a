/* What a loop body writes outside its declared accesses (loom/loop.h,
 * src/sched/loop_write.c; in-process jobs, threads, loopback TCP):
 *
 *   - accumulators: a loop over 200 elements, given to 1 to 3 workers in
 *     uneven shares, adds into a sum (i64), a min and a max (f64) and a
 *     histogram reduced by a user function; after a run every worker reads
 *     results equal to the serial computation over all elements, exactly,
 *     and a second run starts again from the identity;
 *   - write buffers: with delay 1 on one worker, a loop whose buffered writes
 *     cross its rows and whose merge is not a sum equals the serial loop bit
 *     for bit; on 1 to 3 workers, merges into a server-hosted array add up to
 *     the exact sum of all buffered writes, with never more body calls
 *     between flushes than the delay (the body and the merge count them),
 *     also from a 2D loop, whose blocks flush inside the rotation; a write
 *     outside the target fails the run;
 *   - sparse logistic regression with its gradient in a buffer (Orion's SLR,
 *     bench/loop_slr.c's loop) learns: on one worker equal bit for bit to
 *     serial minibatch SGD, on three within 5% of its loss;
 *   - malformed buffers and accumulators are refused with a sentence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
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

/* ---- buffers ---- */

enum { E_SPACE, X_ARRAY, C_ARRAY };
enum { B_NEXT, B_COUNT };

typedef struct buf_user {
    loom_loop_buffer *b;
    uint64_t since, most, flushes; /* body calls since the last merge, the most seen */
} buf_user;

/* x(i) is written, and x(i + 1) through the buffer: a loop 1D over i whose
 * buffered writes cross its blocks. The merge is not a sum, so its order
 * shows. */
static void next_body(void *user, const int64_t *index, double value, void *const *rows)
{
    buf_user *u = user;
    double *x = rows[1];
    x[0] += value * 0.1;
    x[1] = x[1] * 0.75 + x[0];
    double *b = loom_loop_buffer_row(u->b, (uint64_t)(index[0] + 1) % ROWS);
    b[0] += x[0] * 0.3;
    b[1] += value;
}

static void next_merge(void *user, uint64_t row, void *value, const void *update)
{
    (void)user, (void)row;
    double *v = value;
    const double *d = update;
    v[0] = v[0] * 0.5 + d[0];
    v[1] += d[1];
}

static const loom_access next_acc[] = {
    {E_SPACE, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
    {X_ARRAY, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB_EVERY}},
};
static const uint64_t grid[2] = {ROWS, COLS};

static int cmp_el(const void *pa, const void *pb)
{
    const int *a = pa, *b = pb;
    for (int v = 0; v < 2; v++)
        if (el_idx[*a][v] != el_idx[*b][v]) return el_idx[*a][v] < el_idx[*b][v] ? -1 : 1;
    return el_val[*a] < el_val[*b] ? -1 : el_val[*a] > el_val[*b];
}

/* The serial loop: elements in lexicographic order, each buffered write
 * merged at once. */
static void serial_next(int passes, double *x)
{
    int order[ELEMS];
    for (int k = 0; k < ELEMS; k++) order[k] = k;
    qsort(order, ELEMS, sizeof *order, cmp_el);
    memset(x, 0, ROWS * 2 * sizeof *x);
    for (int p = 0; p < passes; p++)
        for (int k = 0; k < ELEMS; k++) {
            int e = order[k];
            double *r = x + 2 * el_idx[e][0], v = el_val[e];
            r[0] += v * 0.1;
            r[1] = r[1] * 0.75 + r[0];
            double u[2] = {r[0] * 0.3, v};
            next_merge(NULL, 0, x + 2 * ((el_idx[e][0] + 1) % ROWS), u);
        }
}

static int next_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    static const loom_loop_array arrays[] = {{X_ARRAY, "write.x", ROWS, 2, LOOM_F64, NULL}};
    static const loom_loop_buffer_decl buffers[] = {{B_NEXT, X_ARRAY, 1, next_merge}};
    buf_user u = {0};
    loom_loop_opts o = {.dims = 2,
                        .extents = grid,
                        .acc = next_acc,
                        .nacc = 2,
                        .arrays = arrays,
                        .narrays = 1,
                        .indices = &el_idx[0][0],
                        .values = el_val,
                        .n = ELEMS,
                        .body = next_body,
                        .user = &u,
                        .buffers = buffers,
                        .nbuffers = 1};
    loom_loop *l;
    char err[256] = "";
    int rc = loom_loop_open(n, &o, &l, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s\n", err);
        return rc;
    }
    if (loom_loop_plan_kind(loom_loop_get_plan(l)) != LOOM_LOOP_1D) return 1;
    u.b = loom_loop_buffer_of(l, B_NEXT);
    if (!u.b || loom_loop_buffer_of(l, 99) || (rc = loom_loop_run(l, 2))) return rc ? rc : 1;
    double got[ROWS * 2], want[ROWS * 2];
    if ((rc = loom_pull_range(loom_loop_table(l, X_ARRAY), 0, ROWS, got))) return rc;
    serial_next(2, want);
    if (memcmp(got, want, sizeof got)) {
        fprintf(stderr, "the buffered loop differs from the serial one\n");
        return 1;
    }
    loom_loop_close(l);
    return 0;
}

static void test_buffer_delay1_serial(void **state)
{
    (void)state;
    make_elements();
    harness_result r;
    assert_int_equal(harness_run(1, 1, next_worker, NULL, &r), 0);
}

/* c(j) += (value, 1) through a buffer on the whole array c, which the loop
 * also reads whole: data-parallel, merged on the servers. */
static void count_body(void *user, const int64_t *index, double value, void *const *rows)
{
    buf_user *u = user;
    (void)rows;
    double *b = loom_loop_buffer_row(u->b, (uint64_t)index[1]);
    b[0] += value;
    b[1] += 1;
    u->since++;
}

static void count_merge(void *user, uint64_t row, void *value, const void *update)
{
    buf_user *u = user;
    (void)row;
    if (u->since) u->flushes++;
    if (u->since > u->most) u->most = u->since;
    u->since = 0;
    double *v = value;
    const double *d = update;
    v[0] += d[0];
    v[1] += d[1];
}

#define COUNT_DELAY 7

static int count_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    int W = loom_num_workers(n);
    int64_t idx[ELEMS][2];
    double val[ELEMS];
    size_t mine = share(W, rank, idx, val);
    static const loom_access acc[] = {
        {E_SPACE, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
        {C_ARRAY, 0, 1, {LOOM_SUB_EVERY}},
    };
    static const loom_loop_array arrays[] = {{C_ARRAY, "write.c", COLS, 2, LOOM_F64, NULL}};
    static const loom_loop_buffer_decl buffers[] = {{B_COUNT, C_ARRAY, COUNT_DELAY, count_merge}};
    buf_user u = {0};
    loom_loop_opts o = {.dims = 2,
                        .extents = grid,
                        .acc = acc,
                        .nacc = 2,
                        .arrays = arrays,
                        .narrays = 1,
                        .indices = &idx[0][0],
                        .values = val,
                        .n = mine,
                        .body = count_body,
                        .user = &u,
                        .buffers = buffers,
                        .nbuffers = 1};
    loom_loop *l;
    char err[256] = "";
    int rc = loom_loop_open(n, &o, &l, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s\n", err);
        return rc;
    }
    /* data-parallel: every worker keeps its own elements */
    if (loom_loop_elements(l) != mine) return 1;
    u.b = loom_loop_buffer_of(l, B_COUNT);
    if ((rc = loom_loop_run(l, 3))) return rc;
    double got[COLS * 2], want[COLS * 2] = {0};
    for (int k = 0; k < ELEMS; k++) {
        want[2 * el_idx[k][1]] += 3 * el_val[k];
        want[2 * el_idx[k][1] + 1] += 3;
    }
    if ((rc = loom_pull_range(loom_loop_table(l, C_ARRAY), 0, COLS, got))) return rc;
    if (memcmp(got, want, sizeof got)) {
        fprintf(stderr, "worker %d: the merged counts differ from the sums of the writes\n", rank);
        return 1;
    }
    /* the delay bound held, and flushes came no later than needed: at least
     * one per delay body calls */
    if (u.most > COUNT_DELAY || u.flushes < 3 * mine / COUNT_DELAY) {
        fprintf(stderr, "worker %d: %llu body calls between flushes (delay %d), %llu flushes\n",
                rank, (unsigned long long)u.most, COUNT_DELAY, (unsigned long long)u.flushes);
        return 1;
    }
    loom_loop_close(l);
    return 0;
}

static void test_buffer_sums_across_workers(void **state)
{
    (void)state;
    make_elements();
    for (int W = 1; W <= 3; W++) {
        harness_result r;
        assert_int_equal(harness_run(1, W, count_worker, NULL, &r), 0);
    }
}

/* The same counts from a 2D loop (a(i) and b(j) written: the rotation),
 * flushed inside the rotation engine's blocks. */
static void count2d_body(void *user, const int64_t *index, double value, void *const *rows)
{
    *(double *)rows[1] += value;
    *(double *)rows[2] += 1;
    count_body(user, index, value, rows);
}

static int count2d_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    int W = loom_num_workers(n);
    int64_t idx[ELEMS][2];
    double val[ELEMS];
    size_t mine = share(W, rank, idx, val);
    enum { A_ROWS = 3, B_COLS = 4 };
    static const loom_access acc[] = {
        {E_SPACE, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
        {A_ROWS, 1, 1, {LOOM_SUB(0, 0)}},
        {B_COLS, 1, 1, {LOOM_SUB(1, 0)}},
    };
    static const loom_loop_array arrays[] = {{A_ROWS, "write2d.a", ROWS, 1, LOOM_F64, NULL},
                                             {B_COLS, "write2d.b", COLS, 1, LOOM_F64, NULL},
                                             {C_ARRAY, "write2d.c", COLS, 2, LOOM_F64, NULL}};
    static const loom_loop_buffer_decl buffers[] = {{B_COUNT, C_ARRAY, COUNT_DELAY, count_merge}};
    buf_user u = {0};
    loom_loop_opts o = {.dims = 2,
                        .extents = grid,
                        .acc = acc,
                        .nacc = 3,
                        .arrays = arrays,
                        .narrays = 3,
                        .indices = &idx[0][0],
                        .values = val,
                        .n = mine,
                        .body = count2d_body,
                        .user = &u,
                        .buffers = buffers,
                        .nbuffers = 1};
    loom_loop *l;
    char err[256] = "";
    int rc = loom_loop_open(n, &o, &l, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s\n", err);
        return rc;
    }
    if (loom_loop_plan_kind(loom_loop_get_plan(l)) != LOOM_LOOP_2D) return 1;
    u.b = loom_loop_buffer_of(l, B_COUNT);
    if ((rc = loom_loop_run(l, 2))) return rc;
    double a[ROWS], b[COLS], c[COLS * 2], wa[ROWS] = {0}, wb[COLS] = {0}, wc[COLS * 2] = {0};
    for (int k = 0; k < ELEMS; k++) {
        wa[el_idx[k][0]] += 2 * el_val[k];
        wb[el_idx[k][1]] += 2;
        wc[2 * el_idx[k][1]] += 2 * el_val[k];
        wc[2 * el_idx[k][1] + 1] += 2;
    }
    if ((rc = loom_pull_range(loom_loop_table(l, A_ROWS), 0, ROWS, a)) ||
        (rc = loom_pull_range(loom_loop_table(l, B_COLS), 0, COLS, b)) ||
        (rc = loom_pull_range(loom_loop_table(l, C_ARRAY), 0, COLS, c)))
        return rc;
    if (memcmp(a, wa, sizeof a) || memcmp(b, wb, sizeof b) || memcmp(c, wc, sizeof c) ||
        u.most > COUNT_DELAY) {
        fprintf(stderr, "worker %d: the 2D loop's sums or its buffer's differ\n", rank);
        return 1;
    }
    loom_loop_close(l);
    return 0;
}

static void test_buffer_in_2d(void **state)
{
    (void)state;
    make_elements();
    for (int W = 1; W <= 3; W++) {
        harness_result r;
        assert_int_equal(harness_run(1, W, count2d_worker, NULL, &r), 0);
    }
}

/* A buffered write outside the target fails the run. */
static void out_body(void *user, const int64_t *index, double value, void *const *rows)
{
    buf_user *u = user;
    (void)value, (void)rows;
    double *b = loom_loop_buffer_row(u->b, (uint64_t)index[0] + ROWS);
    b[0] = 1;
}

static int out_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    static const loom_loop_array arrays[] = {{X_ARRAY, "write.out", ROWS, 2, LOOM_F64, NULL}};
    static const loom_loop_buffer_decl buffers[] = {{B_NEXT, X_ARRAY, 4, next_merge}};
    buf_user u = {0};
    loom_loop_opts o = {.dims = 2,
                        .extents = grid,
                        .acc = next_acc,
                        .nacc = 2,
                        .arrays = arrays,
                        .narrays = 1,
                        .indices = &el_idx[0][0],
                        .values = el_val,
                        .n = ELEMS,
                        .body = out_body,
                        .user = &u,
                        .buffers = buffers,
                        .nbuffers = 1};
    loom_loop *l;
    int rc = loom_loop_open(n, &o, &l, NULL, 0);
    if (rc) return rc;
    u.b = loom_loop_buffer_of(l, B_NEXT);
    rc = loom_loop_run(l, 1) == LOOM_EKEYRANGE ? 0 : 1;
    loom_loop_close(l);
    return rc;
}

static void test_buffer_out_of_range(void **state)
{
    (void)state;
    make_elements();
    harness_result r;
    assert_int_equal(harness_run(1, 1, out_worker, NULL, &r), 0);
}

/* ---- sparse logistic regression with its gradient in a buffer ---- */

#define SLR_N    600
#define SLR_D    24
#define SLR_NNZ  5
#define SLR_B    20
#define SLR_LR   0.5
#define SLR_PASS 4

static uint64_t slr_f[SLR_N][SLR_NNZ];
static double slr_x[SLR_N][SLR_NNZ], slr_y[SLR_N];

/* Rows of SLR_NNZ features (repeats allowed) with values in [0.5, 1.5), and
 * labels drawn from a planted model's probabilities. */
static void make_slr(void)
{
    uint64_t s = 0x9E3779B97F4A7C15ULL;
#define NEXT() (s ^= s << 13, s ^= s >> 7, s ^= s << 17, s)
    double planted[SLR_D];
    for (int f = 0; f < SLR_D; f++) planted[f] = (double)(NEXT() % 2001) / 500.0 - 2;
    for (int i = 0; i < SLR_N; i++) {
        double m = 0.3;
        for (int k = 0; k < SLR_NNZ; k++) {
            slr_f[i][k] = NEXT() % SLR_D;
            slr_x[i][k] = 0.5 + (double)(NEXT() % 1000) / 1000;
            m += planted[slr_f[i][k]] * slr_x[i][k];
        }
        double u = (double)(NEXT() % 1000000) / 1e6;
        slr_y[i] = u < 1 / (1 + exp(-m)) ? 1 : -1;
    }
#undef NEXT
}

static double slr_margin(const double *w, int i)
{
    double m = w[SLR_D];
    for (int k = 0; k < SLR_NNZ; k++) m += w[slr_f[i][k]] * slr_x[i][k];
    return m;
}

static double slr_loss(const double *w)
{
    double loss = 0;
    for (int i = 0; i < SLR_N; i++) {
        double ym = slr_y[i] * slr_margin(w, i);
        loss += ym > 0 ? log1p(exp(-ym)) : -ym + log1p(exp(ym));
    }
    return loss / SLR_N;
}

static void slr_body(void *user, const int64_t *index, double label, void *const *rows)
{
    buf_user *u = user;
    int i = (int)index[0];
    double err = 1 / (1 + exp(-slr_margin(rows[1], i))) - (label > 0);
    for (int k = 0; k < SLR_NNZ; k++)
        *(double *)loom_loop_buffer_row(u->b, slr_f[i][k]) += err * slr_x[i][k];
    *(double *)loom_loop_buffer_row(u->b, SLR_D) += err;
}

static void slr_merge(void *user, uint64_t row, void *value, const void *update)
{
    (void)user, (void)row;
    *(double *)value -= SLR_LR * *(const double *)update / SLR_B;
}

/* Minibatch SGD, serially: each SLR_B rows' gradients at one w (a pass's
 * last batch may be short), the change added as the weights' table adds it. */
static void slr_serial(double *w)
{
    memset(w, 0, (SLR_D + 1) * sizeof *w);
    for (int p = 0; p < SLR_PASS; p++)
        for (int lo = 0; lo < SLR_N; lo += SLR_B) {
            double g[SLR_D + 1] = {0};
            int touched[SLR_D + 1] = {0};
            for (int i = lo; i < lo + SLR_B && i < SLR_N; i++) {
                double err = 1 / (1 + exp(-slr_margin(w, i))) - (slr_y[i] > 0);
                for (int k = 0; k < SLR_NNZ; k++) {
                    g[slr_f[i][k]] += err * slr_x[i][k];
                    touched[slr_f[i][k]] = 1;
                }
                g[SLR_D] += err, touched[SLR_D] = 1;
            }
            for (int f = 0; f <= SLR_D; f++) {
                if (!touched[f]) continue;
                double merged = w[f] - SLR_LR * g[f] / SLR_B;
                w[f] += merged - w[f];
            }
        }
}

static int slr_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    int W = loom_num_workers(n);
    int64_t idx[SLR_N];
    double y[SLR_N];
    size_t mine = 0;
    for (int i = rank; i < SLR_N; i += W) idx[mine] = i, y[mine++] = slr_y[i];
    static const loom_access acc[] = {{0, 0, 1, {LOOM_SUB(0, 0)}}, {1, 0, 1, {LOOM_SUB_EVERY}}};
    static const loom_loop_array arrays[] = {{1, "write.slr", SLR_D + 1, 1, LOOM_F64, NULL}};
    static const loom_loop_buffer_decl buffers[] = {{0, 1, SLR_B, slr_merge}};
    static const uint64_t ext[1] = {SLR_N};
    buf_user u = {0};
    loom_loop_opts o = {.dims = 1,
                        .extents = ext,
                        .acc = acc,
                        .nacc = 2,
                        .arrays = arrays,
                        .narrays = 1,
                        .indices = idx,
                        .values = y,
                        .n = mine,
                        .body = slr_body,
                        .user = &u,
                        .buffers = buffers,
                        .nbuffers = 1};
    loom_loop *l;
    int rc = loom_loop_open(n, &o, &l, NULL, 0);
    if (rc) return rc;
    u.b = loom_loop_buffer_of(l, 0);
    if ((rc = loom_loop_run(l, SLR_PASS))) return rc;
    double w[SLR_D + 1], ws[SLR_D + 1];
    if ((rc = loom_pull_range(loom_loop_table(l, 1), 0, SLR_D + 1, w))) return rc;
    slr_serial(ws);
    double got = slr_loss(w), want = slr_loss(ws), none = log(2);
    if (rank == 0) fprintf(stderr, "slr on %d workers: logloss %.6f, serial %.6f\n", W, got, want);
    /* one worker: the serial minibatch SGD bit for bit; several: as good
     * within 5%, and far below the loss of w = 0 */
    if (W == 1 ? memcmp(w, ws, sizeof w) != 0 : !(got < want * 1.05)) return 1;
    if (!(want < 0.8 * none)) return 1;
    loom_loop_close(l);
    return 0;
}

static void test_slr_learns(void **state)
{
    (void)state;
    make_slr();
    for (int W = 1; W <= 3; W += 2) {
        harness_result r;
        assert_int_equal(harness_run(1, W, slr_worker, NULL, &r), 0);
    }
}

/* ---- refusals, before any collective step, on every worker alike ---- */

static int refused(loom_node *n, const loom_loop_opts *o, const char *want)
{
    char err[256] = "";
    loom_loop *l = NULL;
    int rc = loom_loop_open(n, o, &l, err, sizeof err);
    if (rc == LOOM_EINVAL && strstr(err, want) && !l) return 0;
    fprintf(stderr, "wanted a refusal with \"%s\", got %d: %s\n", want, rc, err);
    return 1;
}

static int refuse_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    static const loom_loop_array x[] = {{X_ARRAY, "write.r", ROWS, 2, LOOM_F64, NULL}};
    loom_loop_buffer_decl b = {B_NEXT, X_ARRAY, 0, next_merge};
    loom_loop_opts o = {.dims = 2,
                        .extents = grid,
                        .acc = next_acc,
                        .nacc = 2,
                        .arrays = x,
                        .narrays = 1,
                        .body = next_body,
                        .buffers = &b,
                        .nbuffers = 1};
    int bad = refused(n, &o, "delay 0");
    b.delay = 1, b.target = C_ARRAY; /* an array this loop does not have */
    bad |= refused(n, &o, "not among this loop's arrays");
    b.target = X_ARRAY, b.merge = NULL;
    bad |= refused(n, &o, "no merge function");
    loom_loop_buffer_decl two[2] = {{B_NEXT, X_ARRAY, 1, next_merge},
                                    {B_NEXT, X_ARRAY, 2, next_merge}};
    o.buffers = two, o.nbuffers = 2;
    bad |= refused(n, &o, "two buffers have the number");
    /* a buffer on an array that rotates: MF's H */
    static const loom_access mf[] = {
        {E_SPACE, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
        {X_ARRAY, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB_EVERY}},
        {C_ARRAY, 1, 2, {LOOM_SUB(1, 0), LOOM_SUB_EVERY}},
    };
    static const loom_loop_array xc[] = {{X_ARRAY, "write.r", ROWS, 2, LOOM_F64, NULL},
                                         {C_ARRAY, "write.h", COLS, 2, LOOM_F64, NULL}};
    loom_loop_buffer_decl on_h = {B_NEXT, C_ARRAY, 1, next_merge};
    o.acc = mf, o.nacc = 3, o.arrays = xc, o.narrays = 2, o.buffers = &on_h, o.nbuffers = 1;
    bad |= refused(n, &o, "rotates among the workers");
    /* a whole array written other than through a buffer */
    static const loom_access whole_w[] = {{E_SPACE, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
                                          {X_ARRAY, 1, 1, {LOOM_SUB_EVERY}}};
    o = (loom_loop_opts){.dims = 2,
                         .extents = grid,
                         .acc = whole_w,
                         .nacc = 2,
                         .arrays = x,
                         .narrays = 1,
                         .body = next_body};
    bad |= refused(n, &o, "write it through a buffer");
    /* accumulators */
    loom_loop_accum_decl a[2] = {{A_SUM, LOOM_REDUCE_FN, LOOM_I64, 8, NULL, NULL},
                                 {A_MIN, LOOM_REDUCE_MIN, LOOM_F64, 1, NULL, NULL}};
    o.acc = next_acc, o.accums = a, o.naccums = 1;
    bad |= refused(n, &o, "none is given");
    a[0] = (loom_loop_accum_decl){A_SUM, LOOM_REDUCE_SUM, LOOM_F64, 0, NULL, NULL};
    bad |= refused(n, &o, "width 0");
    a[0].width = 1, a[1].id = A_SUM, o.naccums = 2;
    bad |= refused(n, &o, "two accumulators have the number");
    return bad;
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
        cmocka_unit_test(test_accumulators),
        cmocka_unit_test(test_buffer_delay1_serial),
        cmocka_unit_test(test_buffer_sums_across_workers),
        cmocka_unit_test(test_buffer_in_2d),
        cmocka_unit_test(test_buffer_out_of_range),
        cmocka_unit_test(test_slr_learns),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
