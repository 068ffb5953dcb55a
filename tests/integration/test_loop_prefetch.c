/* Server-hosted arrays prefetched in bulk (loom/loop.h:
 * loom_loop_prefetch_decl; src/sched/loop_prefetch.c; in-process jobs, threads, loopback TCP):
 *
 *   - a data-parallel loop over 60 elements, each reading 3 rows (repeats
 *     allowed) of a 1000-row array of width 2 and adding, through a write
 *     buffer, a value computed from what it read into the rows it read, run
 *     once with the array copied whole on every worker and once prefetched:
 *     on one worker with delay 3 and batches of 2 elements (batches cut by
 *     flushes, rows written outside the batch pulled at the flush), and on
 *     1 to 3 workers BSP-style (one pass a run, flushed at its end), the two
 *     tables are equal bit for bit after every run (the values are integers:
 *     the sums of several workers' merges are exact in any order); the
 *     prefetched loop pulls, per run, exactly the union of the rows its
 *     elements declared, far fewer than the array's;
 *   - in a 2D loop (MF's shape: W(i, *) local, H(j, *) rotating) on 1-3
 *     workers, a prefetched array read by every element and written through
 *     a buffer, flushed at each block's end inside the rotation: every
 *     element reads its own declared rows (checked in the body) and the
 *     buffered counts add up exactly;
 *   - a body reading a row its element did not declare gets NULL, the read
 *     is counted and the run returns LOOM_EKEYRANGE, on every worker; so
 *     does a rows_of listing a row outside the array;
 *   - a prefetch declaration of an array reached by a loop index, of an
 *     array the loop does not have, or without rows_of is refused with a
 *     sentence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "loom/loop.h"

#define N    60
#define D    1000
#define NNZ  3
#define RUNS 3

enum { SPACE, ARR };
enum { BUF };

static uint64_t feat[N][NNZ];

static void make(void)
{
    uint64_t x = 0x2545F4914F6CDD1DULL;
    for (int i = 0; i < N; i++)
        for (int k = 0; k < NNZ; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            /* a repeat now and then: row k - 1 again */
            feat[i][k] = k && x % 7 == 0 ? feat[i][k - 1] : (x >> 11) % D;
        }
}

typedef struct user {
    loom_loop_buffer *b;
    int undeclared; /* 1: read a row not declared; 2: declare a row past the array */
} user;

static void init(void *u, uint32_t array, uint64_t row, void *values)
{
    (void)u, (void)array;
    double *v = values;
    v[0] = (double)(row % 3), v[1] = (double)(row % 5);
}

static void rows_of(void *u_, uint32_t array, const int64_t *index, double value,
                    loom_loop_rows *out)
{
    const user *u = u_;
    (void)array, (void)value;
    for (int k = 0; k < NNZ; k++) loom_loop_rows_add(out, feat[index[0]][k]);
    if (u->undeclared == 2) loom_loop_rows_add(out, D);
}

/* the element's rows, from the whole copy or from what was prefetched */
static const double *row_at(void *const *rows, int whole, int64_t i, int k)
{
    if (whole) return (const double *)rows[1] + 2 * feat[i][k];
    const loom_loop_fetched *f = rows[1];
    return f->value[k];
}

static void body(void *u_, const int64_t *index, double value, void *const *rows)
{
    user *u = u_;
    int whole = u->undeclared < 0;
    (void)value;
    double s = 0;
    for (int k = 0; k < NNZ; k++) {
        const double *r = row_at(rows, whole, index[0], k);
        s += r[0] * (k + 1) + r[1];
    }
    if (!whole) { /* a lookup by number finds the same values */
        const loom_loop_fetched *f = rows[1];
        if (f->n != NNZ || loom_loop_fetched_row(f, feat[index[0]][1]) != f->value[1]) s = -1e9;
        if (u->undeclared == 1 && !loom_loop_fetched_row(f, D - 1 - feat[index[0]][0]) &&
            !loom_loop_fetched_row(f, D - 1 - feat[index[0]][0])) /* NULL, twice: counted twice */
            s = -2e9;
    }
    for (int k = 0; k < NNZ; k++) {
        double *g = loom_loop_buffer_row(u->b, feat[index[0]][k]);
        g[0] += (double)((int64_t)s % 5 + 1);
        g[1] += 1;
    }
}

static void merge(void *u, uint64_t row, void *value, const void *update)
{
    (void)u, (void)row;
    double *v = value;
    const double *d = update;
    v[0] += d[0], v[1] += d[1];
}

typedef struct cfg {
    uint64_t delay, batch;
    int64_t passes; /* per run */
} cfg;

static int open_loop(loom_node *n, int whole, const cfg *c, user *u, const char *table,
                     int64_t *idx, double *val, size_t mine, loom_loop **l)
{
    static const loom_access acc[] = {{SPACE, 0, 1, {LOOM_SUB(0, 0)}},
                                      {ARR, 0, 1, {LOOM_SUB_EVERY}}};
    static const uint64_t ext[1] = {N};
    loom_loop_array a = {ARR, table, D, 2, LOOM_F64, init};
    loom_loop_prefetch_decl p = {ARR, rows_of, c->batch};
    loom_loop_buffer_decl b = {BUF, ARR, c->delay, merge};
    loom_loop_opts o = {.dims = 1,
                        .extents = ext,
                        .acc = acc,
                        .nacc = 2,
                        .arrays = &a,
                        .narrays = 1,
                        .indices = idx,
                        .values = val,
                        .n = mine,
                        .body = body,
                        .user = u,
                        .buffers = &b,
                        .nbuffers = 1,
                        .prefetch = &p,
                        .nprefetch = !whole};
    char err[256];
    int rc = loom_loop_open(n, &o, l, err, sizeof err);
    if (rc) fprintf(stderr, "open: %s\n", err);
    if (!rc) u->b = loom_loop_buffer_of(*l, BUF);
    return rc;
}

static size_t share(int W, int rank, int64_t *idx, double *val)
{
    size_t mine = 0;
    for (int i = 0; i < N; i++)
        if (i % W == rank) idx[mine] = i, val[mine++] = i;
    return mine;
}

/* the rows the worker's elements declare, counted once */
static uint64_t union_rows(const int64_t *idx, size_t mine)
{
    unsigned char seen[D] = {0};
    uint64_t u = 0;
    for (size_t e = 0; e < mine; e++)
        for (int k = 0; k < NNZ; k++) u += !seen[feat[idx[e]][k]]++;
    return u;
}

static int equal_worker(loom_node *n, int rank, void *arg)
{
    const cfg *c = arg;
    int W = loom_num_workers(n);
    int64_t idx[N];
    double val[N];
    size_t mine = share(W, rank, idx, val);
    user uw = {.undeclared = -1}, up = {0};
    loom_loop *lw, *lp;
    CHECK_OK(open_loop(n, 1, c, &uw, "pf.whole", idx, val, mine, &lw));
    CHECK_OK(open_loop(n, 0, c, &up, "pf.pref", idx, val, mine, &lp));
    double *a = malloc(2 * D * sizeof *a), *b = malloc(2 * D * sizeof *b);
    CHECK(a && b);
    for (int r = 0; r < RUNS; r++) {
        CHECK_OK(loom_loop_run(lw, c->passes));
        CHECK_OK(loom_loop_run(lp, c->passes));
        CHECK_OK(loom_pull_range(loom_loop_table(lw, ARR), 0, D, a));
        CHECK_OK(loom_pull_range(loom_loop_table(lp, ARR), 0, D, b));
        CHECK(memcmp(a, b, 2 * D * sizeof *a) == 0);
    }
    /* the merges happened: the counts of writes in column 1 */
    double writes = 0, want = (double)N * NNZ * RUNS * (double)c->passes;
    for (int r = 0; r < D; r++) writes += b[2 * r + 1] - (double)(r % 5);
    CHECK(writes == want);
    free(a);
    free(b);
    loom_loop_prefetch_stats st;
    CHECK(loom_loop_prefetch_stats_of(lw, ARR, &st) == LOOM_EINVAL); /* a whole copy */
    CHECK_OK(loom_loop_prefetch_stats_of(lp, ARR, &st));
    CHECK(st.refused == 0);
    if (c->delay >= N && c->batch >= N) { /* one batch a run: its rows' union, pulled once */
        CHECK(st.batches == RUNS * (uint64_t)c->passes);
        CHECK(st.rows_pulled == st.batches * union_rows(idx, mine));
        CHECK(union_rows(idx, mine) < D / 4);
    } else {
        CHECK(st.batches >= (uint64_t)((mine + c->batch - 1) / c->batch) * RUNS);
    }
    if (rank == 0)
        fprintf(stderr,
                "%d workers, delay %llu, batch %llu: equal; %llu batches, %llu rows pulled\n", W,
                (unsigned long long)c->delay, (unsigned long long)c->batch,
                (unsigned long long)st.batches, (unsigned long long)st.rows_pulled);
    loom_loop_close(lw);
    loom_loop_close(lp);
    return 0;
}

static void test_equal_to_whole(void **state)
{
    (void)state;
    make();
    harness_result r;
    cfg one = {3, 2, 2}; /* flushes and batches inside a pass, two passes a run */
    assert_int_equal(harness_run(1, 1, equal_worker, &one, &r), 0);
    cfg bsp = {N, N, 1};
    for (int W = 1; W <= 3; W++) assert_int_equal(harness_run(1, W, equal_worker, &bsp, &r), 0);
}

/* ---- in a 2D loop ---- */

#define R2 11
#define C2 7
enum { W2 = 5, H2 = 6 };

static uint64_t row2(const int64_t *index, int k)
{
    return (uint64_t)(index[0] * 31 + index[1] * 17 + k * 101) % D;
}

static void rows_of2(void *u, uint32_t array, const int64_t *index, double value,
                     loom_loop_rows *out)
{
    (void)u, (void)array, (void)value;
    for (int k = 0; k < NNZ; k++) loom_loop_rows_add(out, row2(index, k));
}

typedef struct user2 {
    loom_loop_buffer *b;
    int wrong; /* elements whose rows were not what they declared */
} user2;

static void body2(void *u_, const int64_t *index, double value, void *const *rows)
{
    user2 *u = u_;
    const loom_loop_fetched *f = rows[3];
    for (int k = 0; k < NNZ; k++) {
        uint64_t r = row2(index, k);
        const double *v = f->value[k];
        /* column 0 only ever grows from its initial r % 3 */
        if (f->n != NNZ || f->row[k] != r || v[0] < (double)(r % 3)) u->wrong++;
        double *g = loom_loop_buffer_row(u->b, r);
        g[1] += 1;
    }
    ((double *)rows[1])[0] += value;
    ((double *)rows[2])[0] += 1;
}

static int twod_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    int W = loom_num_workers(n);
    static const loom_access acc[] = {{SPACE, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
                                      {W2, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB_EVERY}},
                                      {H2, 1, 2, {LOOM_SUB(1, 0), LOOM_SUB_EVERY}},
                                      {ARR, 0, 1, {LOOM_SUB_EVERY}}};
    static const uint64_t ext[2] = {R2, C2};
    loom_loop_array a[] = {{W2, "pf2.w", R2, 1, LOOM_F64, NULL},
                           {H2, "pf2.h", C2, 1, LOOM_F64, NULL},
                           {ARR, "pf2.p", D, 2, LOOM_F64, init}};
    loom_loop_prefetch_decl p = {ARR, rows_of2, 4};
    loom_loop_buffer_decl b = {BUF, ARR, 1000, merge};
    int64_t idx[R2 * C2][2];
    double val[R2 * C2];
    size_t mine = 0;
    for (int e = 0; e < R2 * C2; e++)
        if (e % W == rank) idx[mine][0] = e / C2, idx[mine][1] = e % C2, val[mine++] = 1;
    user2 u = {0};
    loom_loop_opts o = {.dims = 2,
                        .extents = ext,
                        .acc = acc,
                        .nacc = 4,
                        .arrays = a,
                        .narrays = 3,
                        .indices = &idx[0][0],
                        .values = val,
                        .n = mine,
                        .body = body2,
                        .user = &u,
                        .buffers = &b,
                        .nbuffers = 1,
                        .prefetch = &p,
                        .nprefetch = 1};
    loom_loop *l;
    char err[256];
    int rc = loom_loop_open(n, &o, &l, err, sizeof err);
    if (rc) fprintf(stderr, "open: %s\n", err);
    CHECK_OK(rc);
    CHECK(loom_loop_plan_kind(loom_loop_get_plan(l)) == LOOM_LOOP_2D);
    u.b = loom_loop_buffer_of(l, BUF);
    CHECK_OK(loom_loop_run(l, 2));
    CHECK(u.wrong == 0);
    double *pv = malloc(2 * D * sizeof *pv), hs[C2], count = 0, hsum = 0;
    CHECK(pv);
    CHECK_OK(loom_pull_range(loom_loop_table(l, ARR), 0, D, pv));
    for (int r = 0; r < D; r++) count += pv[2 * r + 1] - (double)(r % 5);
    free(pv);
    CHECK(count == 2.0 * R2 * C2 * NNZ);
    CHECK_OK(loom_pull_range(loom_loop_table(l, H2), 0, C2, hs));
    for (int j = 0; j < C2; j++) hsum += hs[j];
    CHECK(hsum == 2.0 * R2 * C2);
    loom_loop_prefetch_stats st;
    CHECK_OK(loom_loop_prefetch_stats_of(l, ARR, &st));
    CHECK(st.refused == 0 && st.batches > 0);
    loom_loop_close(l);
    return 0;
}

static void test_in_2d(void **state)
{
    (void)state;
    harness_result r;
    for (int W = 1; W <= 3; W++) assert_int_equal(harness_run(1, W, twod_worker, NULL, &r), 0);
}

static int undeclared_worker(loom_node *n, int rank, void *arg)
{
    int mode = *(const int *)arg;
    int W = loom_num_workers(n);
    int64_t idx[N];
    double val[N];
    size_t mine = share(W, rank, idx, val);
    user u = {.undeclared = mode};
    cfg c = {4, 4, 1};
    loom_loop *l;
    CHECK_OK(open_loop(n, 0, &c, &u, "pf.bad", idx, val, mine, &l));
    CHECK(loom_loop_run(l, 1) == LOOM_EKEYRANGE);
    loom_loop_prefetch_stats st;
    CHECK_OK(loom_loop_prefetch_stats_of(l, ARR, &st));
    /* mode 1: the first element's two reads refused, then the run stopped */
    CHECK(st.refused == (mode == 1 ? 2u : 0u));
    loom_loop_close(l);
    return 0;
}

static void test_undeclared_refused(void **state)
{
    (void)state;
    make();
    harness_result r;
    for (int mode = 1; mode <= 2; mode++)
        for (int W = 1; W <= 2; W++)
            assert_int_equal(harness_run(1, W, undeclared_worker, &mode, &r), 0);
}

static int refuse_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    static const loom_access acc[] = {{SPACE, 0, 1, {LOOM_SUB(0, 0)}},
                                      {ARR, 1, 1, {LOOM_SUB(0, 0)}}};
    static const uint64_t ext[1] = {N};
    loom_loop_array a = {ARR, "pf.keyed", N, 1, LOOM_F64, NULL};
    loom_loop_prefetch_decl p = {ARR, rows_of, 0};
    user u = {0};
    loom_loop_opts o = {.dims = 1,
                        .extents = ext,
                        .acc = acc,
                        .nacc = 2,
                        .arrays = &a,
                        .narrays = 1,
                        .body = body,
                        .user = &u,
                        .prefetch = &p,
                        .nprefetch = 1};
    char err[256] = "";
    loom_loop *l = NULL;
    int rc = loom_loop_open(n, &o, &l, err, sizeof err);
    CHECK(rc == LOOM_EINVAL && !l && strstr(err, "prefetched array is declared whole"));
    p.array = SPACE;
    CHECK(loom_loop_open(n, &o, &l, err, sizeof err) == LOOM_EINVAL);
    CHECK(strstr(err, "not among the loop's arrays"));
    p = (loom_loop_prefetch_decl){ARR, NULL, 0};
    CHECK(loom_loop_open(n, &o, &l, err, sizeof err) == LOOM_EINVAL);
    CHECK(strstr(err, "has no rows_of function"));
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
        cmocka_unit_test(test_equal_to_whole),
        cmocka_unit_test(test_in_2d),
        cmocka_unit_test(test_undeclared_refused),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
