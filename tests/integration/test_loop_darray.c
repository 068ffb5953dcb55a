/* Loops over a distributed array (loom_loop_opts.space; in-process jobs,
 * threads, loopback TCP), on 1 to 3 workers:
 *
 *   - a 2D loop over a sparse darray of tokens (document, word) -> topic
 *     (int32: the body sees each as a double and its double written back
 *     becomes an int32 again), LDA's shape: the body moves each token to a new topic that depends
 * only on its old one and its indices, and counts it in D(d, *) (i64, local) and V(w, *) (i32,
 * rotated). The darray's part_dim (documents) becomes the space index although the planner alone
 * takes the longer words; the loop's space blocks are the darray's ranges, every worker holds
 * exactly its darray's elements (none moved), the topics written come back into the darray
 * (gathered: the test's own tokens after three passes, exactly) and the counts equal the test's
 * own, exactly;
 *   - loops over dense darrays writing their elements, x = 2 x + 1, run
 *     twice: 1D (no dependences: data parallel), and 2D with counts by row
 *     (local) and sums by column (rotated), where the darray's even cut of
 *     its rows is not the cut the loop's histogram would make; the darray
 *     holds the result, every worker its own elements, the sums are exact;
 *   - refusals: a darray of rows, a darray and elements at once, extents that
 *     are not the darray's, and a loop writing the elements of a darray whose
 *     part_dim cannot be its space index. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "loom/darray.h"
#include "loom/error.h"
#include "loom/loop.h"

#define ND     13
#define NW     29
#define K      5
#define NTOK   240
#define PASSES 3

enum { Z = 0, DOCS = 1, WORDS = 2 };

static int64_t tok_d[NTOK], tok_w[NTOK];
static int32_t tok_z[NTOK];

static void make_tokens(void)
{
    uint64_t s = 0x243F6A8885A308D3ULL;
    for (int t = 0; t < NTOK; t++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        /* skewed documents: the first few hold most tokens */
        uint64_t r = s % 100;
        tok_d[t] = r < 60 ? (int64_t)(r % 3) : (int64_t)(r % ND);
        tok_w[t] = (int64_t)((s >> 20) % NW);
        tok_z[t] = (int32_t)((s >> 40) % K);
    }
}

static int next_topic(int64_t d, int64_t w, double z)
{
    return (int)(((int64_t)z + d + w) % K);
}

static void lda_body(void *user, const int64_t *index, double value, void *const *rows)
{
    (void)user;
    int k = next_topic(index[0], index[1], value);
    ((int64_t *)rows[1])[k]++;
    ((int32_t *)rows[2])[k]++;
    *(double *)rows[0] = k;
}

static int lda_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    int W = loom_num_workers(n);
    /* worker r was given tokens r, r + W, ... */
    int64_t idx[2 * NTOK];
    int32_t val[NTOK];
    size_t c = 0;
    for (int t = rank; t < NTOK; t += W, c++)
        idx[2 * c] = tok_d[t], idx[2 * c + 1] = tok_w[t], val[c] = tok_z[t];
    loom_darray_opts dopt = {
        .dims = 2, .extents = {ND, NW}, .part_dim = 0, .type = LOOM_DARRAY_I32};
    loom_darray *tokens;
    char err[256] = "";
    CHECK_OK(loom_darray_from_elements(n, &dopt, idx, val, c, &tokens, err, sizeof err));
    size_t mine = loom_darray_local(tokens, NULL, NULL);

    loom_access acc[] = {{Z, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
                         {DOCS, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB_EVERY}},
                         {WORDS, 1, 2, {LOOM_SUB(1, 0), LOOM_SUB_EVERY}}};
    /* alone, the planner takes the words (longer) as the space index */
    loom_loop_plan *plan;
    uint32_t space, time;
    int64_t skew;
    CHECK_OK(loom_loop_plan_make(2, acc, 3, 0, (const uint64_t[]){ND, NW}, &plan, NULL, 0));
    loom_loop_plan_axes(plan, &space, &time, &skew);
    loom_loop_plan_free(plan);
    CHECK(space == 1);

    loom_loop_array arrays[] = {{DOCS, "ld.docs", ND, K, LOOM_I64, NULL},
                                {WORDS, "ld.words", NW, K, LOOM_I32, NULL}};
    loom_loop_opts o = {
        .acc = acc, .nacc = 3, .arrays = arrays, .narrays = 2, .body = lda_body, .space = tokens};
    loom_loop *l;
    int rc = loom_loop_open(n, &o, &l, err, sizeof err);
    if (rc) {
        fprintf(stderr, "worker %d: %s\n", rank, err);
        return rc;
    }
    loom_loop_plan_axes(loom_loop_get_plan(l), &space, &time, &skew);
    CHECK(space == 0 && loom_loop_plan_kind(loom_loop_get_plan(l)) == LOOM_LOOP_2D);
    CHECK(loom_loop_elements(l) == mine); /* no element left its worker */
    size_t sb[4], tb[4];
    loom_loop_bounds(l, sb, tb);
    for (int w = 0; w <= W; w++) {
        uint64_t lo, hi;
        loom_darray_range(tokens, (uint32_t)(w < W ? w : W - 1), &lo, &hi);
        CHECK(sb[w] == (w < W ? lo : hi));
    }
    CHECK_OK(loom_loop_run(l, PASSES));

    /* the test's own: topics after PASSES passes, and the counts */
    int64_t want_d[ND][K] = {{0}}, got_d[ND][K];
    int32_t want_w[NW][K] = {{0}}, got_w[NW][K];
    double z[NTOK];
    for (int t = 0; t < NTOK; t++) {
        z[t] = tok_z[t];
        for (int p = 0; p < PASSES; p++) {
            int k = next_topic(tok_d[t], tok_w[t], z[t]);
            want_d[tok_d[t]][k]++, want_w[tok_w[t]][k]++;
            z[t] = k;
        }
    }
    CHECK_OK(loom_pull_range(loom_loop_table(l, DOCS), 0, ND, got_d));
    CHECK_OK(loom_pull_range(loom_loop_table(l, WORDS), 0, NW, got_w));
    CHECK(!memcmp(got_d, want_d, sizeof want_d) && !memcmp(got_w, want_w, sizeof want_w));
    /* the darray holds the new topics: gathered, sorted by (d, w, topic) */
    CHECK(loom_darray_local(tokens, NULL, NULL) == mine);
    int64_t *gi;
    void *got;
    size_t gn;
    CHECK_OK(loom_darray_gather(tokens, 0, &gi, &got, &gn));
    int32_t *gv = got;
    if (rank == 0) {
        CHECK(gn == NTOK);
        /* count (d, w, topic) triples both ways */
        static int seen[ND][NW][K];
        memset(seen, 0, sizeof seen);
        for (int t = 0; t < NTOK; t++) seen[tok_d[t]][tok_w[t]][(int)z[t]]++;
        for (size_t i = 0; i < gn; i++) {
            CHECK(gi[2 * i] >= 0 && gi[2 * i] < ND && gi[2 * i + 1] >= 0 && gi[2 * i + 1] < NW);
            CHECK(gv[i] >= 0 && gv[i] < K);
            CHECK(seen[gi[2 * i]][gi[2 * i + 1]][gv[i]]-- > 0);
            CHECK(!i || memcmp(&gi[2 * i - 2], &gi[2 * i], 2 * sizeof *gi) || gv[i - 1] <= gv[i]);
        }
    }
    free(gi);
    free(gv);
    loom_loop_close(l);
    loom_darray_free(tokens);
    return 0;
}

static void test_lda_over_darray(void **state)
{
    (void)state;
    make_tokens();
    for (int W = 1; W <= 3; W++) {
        harness_result r;
        assert_int_equal(harness_run(1, W, lda_worker, NULL, &r), 0);
    }
}

/* ---- dense darrays: data parallel, and 2D ---- */

#define NX 50
#define NR 7
#define NC 3

static void gen_x(void *user, const int64_t *index, void *out)
{
    const uint32_t *dims = user;
    double *values = out;
    values[0] = *dims == 1 ? (double)index[0] * 0.5 - 3 : (double)(index[0] * NC + index[1]);
}

/* x = 2 x + 1; in 2D also counted in R(i, *) and summed in C(j, *) */
static void twice_body(void *user, const int64_t *index, double value, void *const *rows)
{
    const uint32_t *dims = user;
    (void)index;
    *(double *)rows[0] = 2 * value + 1;
    if (*dims == 1) return;
    ((int64_t *)rows[1])[0]++;
    ((int64_t *)rows[2])[0] += (int64_t)value;
}

static int dense_worker(loom_node *n, int rank, void *arg)
{
    uint32_t dims = *(const uint32_t *)arg;
    loom_darray_opts dopt = {.dims = dims, .extents = {dims == 1 ? NX : NR, NC}};
    loom_darray *x;
    char err[256] = "";
    CHECK_OK(loom_darray_generate(n, &dopt, gen_x, &dims, &x, err, sizeof err));
    size_t mine = loom_darray_local(x, NULL, NULL);
    loom_access acc[] = {{0, 1, dims, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
                         {1, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB_EVERY}},
                         {2, 1, 2, {LOOM_SUB(1, 0), LOOM_SUB_EVERY}}};
    loom_loop_array arrays[] = {{1, "ld.r", NR, 1, LOOM_I64, NULL},
                                {2, "ld.c", NC, 1, LOOM_I64, NULL}};
    loom_loop_opts o = {.acc = acc,
                        .nacc = dims == 1 ? 1 : 3,
                        .arrays = arrays,
                        .narrays = dims == 1 ? 0 : 2,
                        .body = twice_body,
                        .user = &dims,
                        .space = x};
    loom_loop *l;
    CHECK_OK(loom_loop_open(n, &o, &l, err, sizeof err));
    CHECK(loom_loop_elements(l) == mine);
    CHECK_OK(loom_loop_run(l, 1));
    CHECK_OK(loom_loop_run(l, 1));
    int64_t *gi;
    void *got;
    size_t gn;
    CHECK_OK(loom_darray_gather(x, 0, &gi, &got, &gn));
    double *gv = got;
    if (rank == 0) {
        CHECK(gn == (dims == 1 ? NX : NR * NC));
        for (size_t i = 0; i < gn; i++) {
            double v = dims == 1 ? (double)i * 0.5 - 3 : (double)i;
            CHECK(gi[i * dims] == (int64_t)(dims == 1 ? i : i / NC) &&
                  gv[i] == 2 * (2 * v + 1) + 1);
        }
    }
    if (dims == 2) { /* each element counted twice; its values v and 2 v + 1 summed */
        int64_t r[NR], c[NC];
        CHECK_OK(loom_pull_range(loom_loop_table(l, 1), 0, NR, r));
        CHECK_OK(loom_pull_range(loom_loop_table(l, 2), 0, NC, c));
        for (int i = 0; i < NR; i++) CHECK(r[i] == 2 * NC);
        for (int j = 0; j < NC; j++) {
            int64_t want = 0;
            for (int i = 0; i < NR; i++) want += 3 * (i * NC + j) + 1;
            CHECK(c[j] == want);
        }
    }
    free(gi);
    free(gv);
    loom_loop_close(l);
    loom_darray_free(x);
    return 0;
}

static void test_dense(void **state)
{
    (void)state;
    for (uint32_t dims = 1; dims <= 2; dims++)
        for (int W = 1; W <= 3; W++) {
            harness_result r;
            assert_int_equal(harness_run(1, W, dense_worker, &dims, &r), 0);
        }
}

/* ---- refusals ---- */

static void nop_body(void *user, const int64_t *index, double value, void *const *rows)
{
    (void)user, (void)index, (void)value, (void)rows;
}

static int refuse_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    char err[256] = "";
    loom_darray *rows2, *by_col;
    loom_darray_opts ro = {.dims = 2, .extents = {6, 4}, .width = 2};
    CHECK_OK(loom_darray_generate(n, &ro, NULL, NULL, &rows2, err, sizeof err));
    loom_darray_opts co = {.dims = 2, .extents = {6, 4}, .part_dim = 1};
    int64_t one[2] = {1, 1};
    double v = 1;
    CHECK_OK(loom_darray_from_elements(n, &co, one, &v, rank == 0, &by_col, err, sizeof err));
    loom_access own[] = {{0, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},
                         {1, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB_EVERY}}};
    loom_loop_array x = {1, "lr.x", 6, 1, LOOM_F64, NULL};
    static const uint64_t other[2] = {6, 5};
    static const struct {
        int which; /* 0: rows2, 1: by_col */
        int elements, extents;
        const char *says;
    } bad[] = {
        {0, 0, 0, "values an element"},
        {1, 1, 0, "both as a darray and as elements"},
        {1, 0, 1, "is not the darray's"},
        {1, 0, 0, "part_dim 1 cannot be its space index"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        loom_loop_opts o = {.acc = own,
                            .nacc = 2,
                            .arrays = &x,
                            .narrays = 1,
                            .body = nop_body,
                            .space = bad[k].which ? by_col : rows2};
        if (bad[k].elements) o.indices = one, o.values = &v, o.n = 1;
        if (bad[k].extents) o.extents = other;
        loom_loop *l = NULL;
        err[0] = 0;
        int rc = loom_loop_open(n, &o, &l, err, sizeof err);
        if (rc != LOOM_EINVAL || l || !strstr(err, bad[k].says)) {
            fprintf(stderr, "case %zu: rc %d, '%s'\n", k, rc, err);
            return 1;
        }
    }
    loom_darray_free(rows2);
    loom_darray_free(by_col);
    return 0;
}

static void test_refusals(void **state)
{
    (void)state;
    harness_result r;
    assert_int_equal(harness_run(1, 2, refuse_worker, NULL, &r), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lda_over_darray),
        cmocka_unit_test(test_dense),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
