/* The parts of the MF application that need no parameter server: the SGD
 * step (against a computation written out by hand), one clock's batch
 * (against plain SGD on whole arrays), the seeded split and epoch order, the
 * model file (bit-exact round trip; one broken file per error the loader
 * promises to catch), prediction of cold starts, the generator and the flags. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "mf/mf.h"

#define TEST_RNG_SEED 0x5eed1e55c0ffee02ULL
#include "test_rng.h"

static int bits_equal(double a, double b)
{
    return !memcmp(&a, &b, sizeof a);
}

/* ---- the SGD step ---- */

static void test_sgd_step_by_hand(void **state)
{
    (void)state;
    /* rank 2; mean 3, b_u 0.5, p_u (1, 2); b_i -0.25, q_i (0.5, -1). */
    double u[3] = {0.5, 1, 2}, i[3] = {-0.25, 0.5, -1};
    double lr = 0.1, reg = 0.2, r = 4;
    /* prediction 3 + 0.5 - 0.25 + (0.5 - 2) = 1.75; e = 2.25 */
    double e = mf_sgd_step(u, i, 2, 3, r, lr, reg);
    assert_true(e == 2.25);
    /* b_u = 0.5 + 0.1 (2.25 - 0.2 * 0.5) = 0.715 */
    assert_true(fabs(u[0] - 0.715) < 1e-15);
    /* b_i = -0.25 + 0.1 (2.25 + 0.05) = -0.02 */
    assert_true(fabs(i[0] - -0.02) < 1e-15);
    /* p_1 = 1 + 0.1 (2.25 * 0.5 - 0.2) = 1.0925; q_1 = 0.5 + 0.1 (2.25 - 0.1) = 0.715 */
    assert_true(fabs(u[1] - 1.0925) < 1e-15);
    assert_true(fabs(i[1] - 0.715) < 1e-15);
    /* p_2 = 2 + 0.1 (-2.25 - 0.4) = 1.735; q_2 = -1 + 0.1 (4.5 + 0.2) = -0.53 */
    assert_true(fabs(u[2] - 1.735) < 1e-15);
    assert_true(fabs(i[2] - -0.53) < 1e-15);
}

/* A batch with repeated users and items trains like plain SGD on whole
 * arrays, and leaves new - old per row. */
static void test_batch_matches_plain_sgd(void **state)
{
    (void)state;
    enum { U = 5, I = 7, K = 3, N = 40 };
    size_t w = K + 1;
    mf_data d = {.n = N};
    uint32_t us[N], is[N];
    double rs[N];
    for (int k = 0; k < N; k++) {
        us[k] = (uint32_t)(rng() % U);
        is[k] = (uint32_t)(rng() % I);
        rs[k] = 1 + 4 * ((double)(rng() >> 11) * 0x1.0p-53);
    }
    d.user = us, d.item = is, d.rating = rs;
    double pu[U * (K + 1)], qi[I * (K + 1)];
    for (size_t j = 0; j < U * w; j++) pu[j] = ((double)(rng() >> 11) * 0x1.0p-53) - 0.5;
    for (size_t j = 0; j < I * w; j++) qi[j] = ((double)(rng() >> 11) * 0x1.0p-53) - 0.5;
    double pu0[U * (K + 1)], qi0[I * (K + 1)];
    memcpy(pu0, pu, sizeof pu);
    memcpy(qi0, qi, sizeof qi);
    size_t idx[N];
    for (int k = 0; k < N; k++) idx[k] = (size_t)(N - 1 - k); /* backwards */
    for (int k = 0; k < N; k++)
        mf_sgd_step(pu + us[idx[k]] * w, qi + is[idx[k]] * w, K, 3.5, rs[idx[k]], 0.05, 0.1);

    mf_batch b;
    assert_int_equal(mf_batch_init(&b, K, U, I), 0);
    for (int round = 0; round < 2; round++) { /* the second reuses the stamps */
        assert_int_equal(mf_batch_collect(&b, &d, idx, N), 0);
        assert_true(b.nu <= U && b.ni <= I);
        for (size_t s = 0; s < b.nu; s++) memcpy(b.urows + s * w, pu0 + b.ukeys[s] * w, w * 8);
        for (size_t s = 0; s < b.ni; s++) memcpy(b.irows + s * w, qi0 + b.ikeys[s] * w, w * 8);
        mf_batch_train(&b, &d, idx, N, 3.5, 0.05, 0.1);
        for (size_t s = 0; s < b.nu; s++)
            for (size_t j = 0; j < w; j++) {
                assert_true(bits_equal(b.urows[s * w + j], pu[b.ukeys[s] * w + j]));
                assert_true(bits_equal(b.uold[s * w + j],
                                       pu[b.ukeys[s] * w + j] - pu0[b.ukeys[s] * w + j]));
            }
        for (size_t s = 0; s < b.ni; s++)
            for (size_t j = 0; j < w; j++)
                assert_true(bits_equal(b.irows[s * w + j], qi[b.ikeys[s] * w + j]));
    }
    /* Evaluation: a cold start (UINT32_MAX) predicts mean + the known bias. */
    uint32_t cu[1] = {0}, ci[1] = {UINT32_MAX};
    double cr[1] = {5};
    mf_data cold = {.n = 1, .user = cu, .item = ci, .rating = cr};
    assert_int_equal(mf_batch_collect(&b, &cold, NULL, 1), 0);
    assert_int_equal(b.nu, 1);
    assert_int_equal(b.ni, 0);
    b.urows[0] = 0.25;
    double e = 5 - (3.5 + 0.25);
    assert_true(fabs(mf_batch_sse(&b, 0, &cold, NULL, 1, 3.5, 0.5, 5) - e * e) < 1e-15);
    /* ... clipped to the range */
    assert_true(fabs(mf_batch_sse(&b, 0, &cold, NULL, 1, 3.5, 0.5, 3.6) - 1.4 * 1.4) < 1e-12);

    /* Two runs in one batch (the evaluation's training and test ratings):
     * the union of their rows, ascending, once each, and every run's errors
     * the same bits as from a batch of its own. */
    assert_int_equal(mf_batch_collect(&b, &d, NULL, N), 0);
    for (size_t s = 0; s < b.nu; s++) memcpy(b.urows + s * w, pu0 + b.ukeys[s] * w, w * 8);
    for (size_t s = 0; s < b.ni; s++) memcpy(b.irows + s * w, qi0 + b.ikeys[s] * w, w * 8);
    double alone = mf_batch_sse(&b, 0, &d, NULL, N, 3.5, 0.5, 5);
    size_t nu = b.nu, ni = b.ni;
    cu[0] = U - 1; /* a user d may not have */
    int fresh = 1;
    for (int k = 0; k < N; k++) fresh &= us[k] != U - 1;
    assert_int_equal(mf_batch_collect_two(&b, &d, &cold), 0);
    assert_int_equal(b.nu, nu + (size_t)fresh);
    assert_int_equal(b.ni, ni);
    for (size_t s = 1; s < b.nu; s++) assert_true(b.ukeys[s - 1] < b.ukeys[s]);
    for (size_t s = 0; s < b.nu; s++) memcpy(b.urows + s * w, pu0 + b.ukeys[s] * w, w * 8);
    for (size_t s = 0; s < b.ni; s++) memcpy(b.irows + s * w, qi0 + b.ikeys[s] * w, w * 8);
    assert_true(bits_equal(mf_batch_sse(&b, 0, &d, NULL, N, 3.5, 0.5, 5), alone));
    e = 5 - (3.5 + pu0[(U - 1) * w]);
    assert_true(fabs(mf_batch_sse(&b, N, &cold, NULL, 1, 3.5, 0.5, 5) - e * e) < 1e-15);
    mf_batch_free(&b);
}

/* The damping of summed deltas: 1 for one worker, 1/W when saturated, ~1 for small steps. */
static void test_merge_scale(void **state)
{
    (void)state;
    double one[4] = {0, 37, 0, 0};
    assert_true(mf_merge_scale(one, 4, 3, 0.03, 0.1) == 1);
    assert_true(mf_merge_scale(one, 1, 1, 0.5, 0.1) == 1);
    double none[2] = {0, 0};
    assert_true(mf_merge_scale(none, 2, 1, 0.03, 0.1) == 1);
    double big[3] = {1000, 1000, 1000};
    assert_true(fabs(mf_merge_scale(big, 3, 1, 0.05, 0.1) - 1.0 / 3) < 1e-12);
    double small[3] = {3, 5, 0};
    assert_true(fabs(mf_merge_scale(small, 3, 1, 1e-7, 0.1) - 1) < 1e-5);
    /* By hand: a = 0.1 (1 + 0) = 0.1, counts 2 and 1 in one clock:
     * (1 - 0.9^3) / ((1 - 0.9^2) + (1 - 0.9)) = 0.271 / 0.29 */
    double two[2] = {2, 1};
    assert_true(fabs(mf_merge_scale(two, 2, 1, 0.1, 0) - 0.271 / 0.29) < 1e-12);
    /* Two clocks an epoch halve the counts: (1 - 0.9^1.5) / ((1 - 0.9) + (1 - 0.9^0.5)) */
    double expect = (1 - pow(0.9, 1.5)) / ((1 - 0.9) + (1 - sqrt(0.9)));
    assert_true(fabs(mf_merge_scale(two, 2, 2, 0.1, 0) - expect) < 1e-12);
    /* Steps of a >= 1: every local pass lands on the optimum. */
    assert_true(fabs(mf_merge_scale(big, 3, 1, 2, 0.1) - 1.0 / 3) < 1e-12);
}

/* ---- split, order, clocks, initial rows ---- */

static void test_split_deterministic(void **state)
{
    (void)state;
    enum { N = 200000 };
    size_t hits = 0;
    for (uint64_t line = 1; line <= N; line++) {
        int t = mf_is_test(7, line, 0.1);
        assert_int_equal(t, mf_is_test(7, line, 0.1));
        assert_true(!t || mf_is_test(7, line, 0.3)); /* nested in p */
        hits += (size_t)t;
    }
    /* 0.1 of 200000: standard deviation ~134 */
    assert_true(hits > 19300 && hits < 20700);
    size_t differ = 0;
    for (uint64_t line = 1; line <= 1000; line++)
        differ += mf_is_test(7, line, 0.5) != mf_is_test(8, line, 0.5);
    assert_true(differ > 400);
}

/* A split of a share depends on the lines only, not on the sharding. */
static void test_split_independent_of_shards(void **state)
{
    (void)state;
    enum { N = 1000 };
    uint32_t u[N], it[N];
    float rt[N];
    uint64_t line[N];
    for (int k = 0; k < N; k++) {
        u[k] = (uint32_t)(k % 13), it[k] = (uint32_t)(k % 17), rt[k] = (float)(k % 5);
        line[k] = (uint64_t)k + 2; /* after a header */
    }
    loom_ratings all = {.n = N, .user = u, .item = it, .rating = rt, .line = line};
    loom_ratings half[2] = {all, all};
    half[0].n = 400;
    half[1].n = N - 400, half[1].user += 400, half[1].item += 400, half[1].rating += 400,
    half[1].line += 400;
    mf_data tr, te, tr2[2], te2[2];
    assert_int_equal(mf_data_split(&all, 3, 0.2, &tr, &te), 0);
    for (int s = 0; s < 2; s++)
        assert_int_equal(mf_data_split(&half[s], 3, 0.2, &tr2[s], &te2[s]), 0);
    assert_int_equal(tr.n, tr2[0].n + tr2[1].n);
    assert_int_equal(te.n, te2[0].n + te2[1].n);
    assert_int_equal(tr.n + te.n, N);
    for (size_t k = 0; k < te.n; k++) {
        const mf_data *p = k < te2[0].n ? &te2[0] : &te2[1];
        size_t j = k < te2[0].n ? k : k - te2[0].n;
        assert_int_equal(te.user[k], p->user[j]);
        assert_int_equal(te.item[k], p->item[j]);
        assert_true(te.rating[k] == p->rating[j]);
    }
    double sum, lo, hi;
    mf_data_summary(&tr, &sum, &lo, &hi);
    assert_true(lo >= 0 && hi <= 4 && sum > 0);
    mf_data_free(&tr), mf_data_free(&te);
    for (int s = 0; s < 2; s++) mf_data_free(&tr2[s]), mf_data_free(&te2[s]);
}

static void test_order_clocks_and_init(void **state)
{
    (void)state;
    enum { N = 1001 };
    size_t a[N], b[N];
    char seen[N] = {0};
    mf_epoch_order(5, 1, 2, N, a);
    mf_epoch_order(5, 1, 2, N, b);
    assert_memory_equal(a, b, sizeof a);
    for (int k = 0; k < N; k++) {
        assert_true(a[k] < N && !seen[a[k]]);
        seen[a[k]] = 1;
    }
    mf_epoch_order(5, 1, 3, N, b);
    assert_true(memcmp(a, b, sizeof a) != 0);
    /* Clocks cover 0..n once, in order, for any number of syncs. */
    for (int syncs = 1; syncs <= 7; syncs++) {
        size_t prev = 0;
        for (int c = 0; c < syncs; c++) {
            size_t lo, hi;
            mf_clock_range(10, syncs, c, &lo, &hi);
            assert_int_equal(lo, prev);
            assert_true(hi >= lo);
            prev = hi;
        }
        assert_int_equal(prev, 10);
    }
    assert_true(mf_epoch_lr(0.1, 0.5, 0) == 0.1);
    assert_true(mf_epoch_lr(0.1, 0.5, 2) == 0.025);
    /* Initial rows: bias 0, factors of the right spread, per (table, row). */
    double r1[9], r2[9], r3[9];
    mf_init_row(r1, 8, 1, 0, 42, 0.1);
    mf_init_row(r2, 8, 1, 0, 42, 0.1);
    mf_init_row(r3, 8, 1, 1, 42, 0.1);
    assert_memory_equal(r1, r2, sizeof r1);
    assert_true(r1[0] == 0 && r3[0] == 0);
    assert_true(memcmp(r1 + 1, r3 + 1, 8 * sizeof(double)) != 0);
    double ss = 0;
    for (uint64_t row = 0; row < 1000; row++) {
        mf_init_row(r1, 8, 1, 0, row, 0.1);
        for (int k = 1; k <= 8; k++) ss += r1[k] * r1[k];
    }
    assert_true(fabs(sqrt(ss / 8000) - 0.1) < 0.005);
}

/* ---- the model file ---- */

static char dir[] = "/tmp/test_mf_parts.XXXXXX";

static const char *path_in_dir(const char *name)
{
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_model_round_trip(void **state)
{
    (void)state;
    mf_model m, back;
    assert_int_equal(mf_model_alloc(&m, 3, 3, 2), 0);
    static const double awkward[] = {
        0.1, -0.0, 1e-310, -1.7976931348623157e308, 1.0 / 3, 2.5e-17, 123456789.123456789, 5e-324};
    for (size_t j = 0; j < 3 * 4; j++) m.user[j] = awkward[j % 8];
    for (size_t j = 0; j < 2 * 4; j++) m.item[j] = awkward[(j + 3) % 8];
    m.user_id[0] = -5, m.user_id[1] = 0, m.user_id[2] = 9000000000;
    m.item_id[0] = 1, m.item_id[1] = 2;
    m.mean = 3.3333333333333335, m.min = 0.5, m.max = 5;
    char err[512];
    const char *p = path_in_dir("model");
    assert_int_equal(mf_model_save(&m, p, err, sizeof err), 0);
    assert_int_equal(mf_model_load(p, &back, err, sizeof err), 0);
    assert_int_equal(back.rank, 3);
    assert_int_equal(back.users, 3);
    assert_int_equal(back.items, 2);
    assert_true(bits_equal(back.mean, m.mean) && back.min == 0.5 && back.max == 5);
    assert_memory_equal(back.user_id, m.user_id, 3 * sizeof(int64_t));
    assert_memory_equal(back.item_id, m.item_id, 2 * sizeof(int64_t));
    assert_memory_equal(back.user, m.user, 12 * sizeof(double));
    assert_memory_equal(back.item, m.item, 8 * sizeof(double));
    assert_int_equal(mf_model_user(&back, 9000000000), 2);
    assert_int_equal(mf_model_user(&back, 1), -1);
    assert_int_equal(mf_model_item(&back, 2), 1);
    mf_model_free(&back);
    mf_model_free(&m);

    /* Prediction: known pair, cold starts, clipping. */
    assert_int_equal(mf_model_alloc(&m, 1, 1, 1), 0);
    m.mean = 3, m.min = 1, m.max = 5;
    m.user[0] = 0.5, m.user[1] = 2, m.item[0] = -1, m.item[1] = 0.25;
    assert_true(mf_model_predict(&m, 0, 0) == 3 + 0.5 - 1 + 0.5);
    assert_true(mf_model_predict(&m, 0, -1) == 3.5);
    assert_true(mf_model_predict(&m, -1, 0) == 2);
    assert_true(mf_model_predict(&m, -1, -1) == 3);
    m.item[1] = 10;
    assert_true(mf_model_predict(&m, 0, 0) == 5);
    m.item[1] = -10;
    assert_true(mf_model_predict(&m, 0, 0) == 1);
    /* Non-finite values are refused at save time, so every saved file loads. */
    m.item[1] = NAN;
    assert_int_not_equal(mf_model_save(&m, p, err, sizeof err), 0);
    assert_non_null(strstr(err, "not finite"));
    mf_model_free(&m);
}

static void test_model_load_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text, *expect;
    } cases[] = {
        {"", "model:1: empty file"},
        {"loom-lr 1 dim=3 nnz=0 bias=0\n", "model:1: not a loom-mf"},
        {"loom-mf 1 rank=2 users=1 items=1 mean=3\n", "model:1: bad header"},
        {"loom-mf 1 rank=0 users=0 items=0 mean=3 min=1 max=5\n", "model:1: rank must be"},
        {"loom-mf 1 rank=1 users=0 items=0 mean=3 min=5 max=1\n", "model:1: rank must be"},
        {"loom-mf 1 rank=1 users=1 items=1 mean=3 min=1 max=5\nu 1 0 0\n",
         "model:3: the file ends after 0 of 1 items"},
        {"loom-mf 1 rank=1 users=1 items=0 mean=3 min=1 max=5\nu 1 0\n",
         "model:2: expected 2 numbers after the user id, found 1"},
        {"loom-mf 1 rank=1 users=1 items=0 mean=3 min=1 max=5\nu 1 0 0 0\n",
         "model:2: more than 2 numbers"},
        {"loom-mf 1 rank=1 users=1 items=0 mean=3 min=1 max=5\nu x 0 0\n", "model:2: bad user id"},
        {"loom-mf 1 rank=1 users=1 items=0 mean=3 min=1 max=5\ni 1 0 0\n",
         "model:2: expected a user line"},
        {"loom-mf 1 rank=1 users=2 items=0 mean=3 min=1 max=5\nu 2 0 0\nu 2 0 0\n",
         "model:3: user ids must be ascending"},
        {"loom-mf 1 rank=1 users=1 items=0 mean=3 min=1 max=5\nu 1 0 abc\n", "model:2: bad number"},
        {"loom-mf 1 rank=1 users=1 items=0 mean=3 min=1 max=5\nu 1 0 inf\n",
         "model:2: a value is not finite"},
        {"loom-mf 1 rank=1 users=0 items=1 mean=3 min=1 max=5\ni 4 0 1\ni 5 0 1\n",
         "model:3: more lines than"},
    };
    char err[512];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const char *p = path_in_dir("model");
        write_file(p, cases[c].text);
        mf_model m;
        err[0] = '\0';
        assert_int_not_equal(mf_model_load(p, &m, err, sizeof err), 0);
        if (!strstr(err, cases[c].expect))
            fail_msg("case %zu: got '%s', expected '%s'", c, err, cases[c].expect);
    }
    mf_model m;
    assert_int_not_equal(mf_model_load(path_in_dir("absent"), &m, err, sizeof err), 0);
    assert_non_null(strstr(err, "absent"));
}

/* ---- the generator ---- */

static char *generate(const mf_gen_opts *o, size_t *len, mf_model *planted)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    assert_non_null(f);
    char err[256];
    assert_int_equal(mf_generate(o, f, planted, 0, err, sizeof err), 0);
    fclose(f);
    return buf;
}

static void test_generator(void **state)
{
    (void)state;
    mf_gen_opts o = MF_GEN_OPTS_DEFAULT;
    o.users = 200, o.items = 300, o.ratings = 10000, o.rank = 4, o.seed = 9;
    size_t n1, n2;
    mf_model planted;
    char *a = generate(&o, &n1, &planted), *b = generate(&o, &n2, NULL);
    assert_int_equal(n1, n2);
    assert_memory_equal(a, b, n1);
    /* Lines: distinct pairs sorted by (user, item), half stars in [0.5, 5]. */
    size_t lines = 0, per_user[201] = {0}, per_item[301] = {0};
    long pu = 0, pi = 0;
    double sse = 0;
    for (char *s = a; *s;) {
        long u, i;
        double r;
        unsigned long long ts;
        int used;
        assert_int_equal(sscanf(s, "%ld\t%ld\t%lf\t%llu\n%n", &u, &i, &r, &ts, &used), 4);
        assert_true(u >= 1 && u <= 200 && i >= 1 && i <= 300);
        assert_true(u > pu || (u == pu && i > pi));
        assert_true(r >= 0.5 && r <= 5 && r * 2 == floor(r * 2));
        double e = r - mf_model_predict(&planted, u - 1, i - 1);
        sse += e * e;
        per_user[u]++, per_item[i]++;
        pu = u, pi = i;
        lines++;
        s += used;
    }
    assert_int_equal(lines, 10000);
    /* The planted model explains the data to about the noise (0.5, plus rounding). */
    double rmse = sqrt(sse / (double)lines);
    assert_true(rmse > 0.45 && rmse < 0.6);
    /* Popularity is skewed: the busiest item has many times the median's ratings. */
    size_t most = 0;
    for (int i = 1; i <= 300; i++) most = per_item[i] > most ? per_item[i] : most;
    assert_true(most > 5 * (10000 / 300));
    free(a), free(b);
    mf_model_free(&planted);
    /* Too many ratings for the users and items is refused. */
    o.ratings = 200 * 100 + 1;
    char err[256];
    FILE *f = fopen("/dev/null", "w");
    assert_int_equal(mf_generate(&o, f, NULL, 0, err, sizeof err), 2);
    fclose(f);
}

/* ---- flags ---- */

static int parse(char *err, size_t errlen, mf_cli *c, ...)
{
    char *argv[32] = {"mf"};
    int argc = 1;
    va_list ap;
    va_start(ap, c);
    for (char *a; (a = va_arg(ap, char *));) argv[argc++] = a;
    va_end(ap);
    return mf_parse_flags(argc, argv, c, err, errlen);
}

/* --schedule rotation's cuts: every block at least one row, about equal
 * numbers of ratings, and the rows' ratings all in their block. */
static void test_balanced_bounds(void **state)
{
    (void)state;
    /* Row 0 has 6 ratings, rows 1-6 one each: 12 ratings. */
    uint32_t rows[12] = {0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6};
    uint64_t b[4];
    assert_int_equal(mf_balanced_bounds(rows, 12, 7, 3, b), 0);
    /* 12 / 3 = 4 ratings a block: row 0 alone (6), then rows 1-2... */
    assert_int_equal(b[0], 0);
    assert_int_equal(b[1], 1);
    assert_int_equal(b[2], 3); /* 6 + 2 = 8 = 2/3 of 12 */
    assert_int_equal(b[3], 7);
    /* As many rows as parts: one row each, whatever the counts. */
    uint32_t skew[5] = {0, 0, 0, 0, 1};
    assert_int_equal(mf_balanced_bounds(skew, 5, 3, 3, b), 0);
    assert_int_equal(b[1], 1);
    assert_int_equal(b[2], 2);
    assert_int_equal(b[3], 3);
    /* A row without ratings at the end still lands in the last block. */
    uint32_t even[4] = {0, 1, 2, 3};
    assert_int_equal(mf_balanced_bounds(even, 4, 6, 2, b), 0);
    assert_int_equal(b[1], 2);
    assert_int_equal(b[2], 6);
}

static void test_flags(void **state)
{
    (void)state;
    mf_cli c;
    char err[512];
    assert_int_equal(parse(err, sizeof err, &c, "--train", "x", (char *)NULL), 0);
    assert_int_equal(c.train.rank, 16);
    assert_int_equal(c.train.epochs, 40);
    assert_int_equal(c.job.consistency, LOOM_SSP);
    assert_int_equal(c.job.staleness, 2);
    assert_int_equal(parse(err, sizeof err, &c, "--train", "x", "--rank", "8", "--format", "csv",
                           "--test-fraction", "0.2", "--seed", "4", "--skip-bad", (char *)NULL),
                     0);
    assert_int_equal(c.train.rank, 8);
    assert_int_equal(c.data.separator, ',');
    assert_int_equal(c.data.skip_bad, 1);
    assert_true(c.train.test_fraction == 0.2 && c.train.seed == 4);
    static const struct {
        const char *args[6], *expect;
    } bad[] = {
        {{"--rank", "8"}, "--train FILE is required"},
        {{"--train", "x", "--test", "y", "--test-fraction", "0.1"},
         "--test and --test-fraction exclude each other"},
        {{"--train", "x", "--format", "json"}, "--format takes tsv, csv or space"},
        {{"--train", "x", "--rank", "0"}, "--rank takes a whole number"},
        {{"--train", "x", "--test-fraction", "1"}, "above 0 and below 1"},
        {{"--train", "x", "--lr", "-1"}, "--lr takes a number"},
        {{"--train", "x", "--frobnicate"}, "unknown flag '--frobnicate'"},
        {{"--train", "x", "--epochs"}, "--epochs needs a value"},
        {{"--train", "x", "--consistency", "ssp"}, "--consistency takes bsp, asp or ssp:S"},
        {{"--train", "x", "--merge", "mean"}, "--merge takes damped or sum, not 'mean'"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const char *const *a = bad[k].args;
        int rc = parse(err, sizeof err, &c, a[0], a[1], a[2], a[3], a[4], a[5], (char *)NULL);
        assert_int_equal(rc, 2);
        if (!strstr(err, bad[k].expect))
            fail_msg("case %zu: got '%s', expected '%s'", k, err, bad[k].expect);
    }
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path_in_dir("model"));
    return rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd_step_by_hand),
        cmocka_unit_test(test_batch_matches_plain_sgd),
        cmocka_unit_test(test_merge_scale),
        cmocka_unit_test(test_split_deterministic),
        cmocka_unit_test(test_split_independent_of_shards),
        cmocka_unit_test(test_order_clocks_and_init),
        cmocka_unit_test(test_model_round_trip),
        cmocka_unit_test(test_model_load_errors),
        cmocka_unit_test(test_generator),
        cmocka_unit_test(test_balanced_bounds),
        cmocka_unit_test(test_flags),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
