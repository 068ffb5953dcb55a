/* storage: spec validation, dense and sparse partitions against a model of
 * the table, initial values (range, distribution, independence from the
 * partitioning), reads that must not materialise rows, and row pointers that
 * must survive growth. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "loom/error.h"
#include "ps/storage.h"

#define TEST_RNG_SEED 0x0123456789abcdefULL
#include "test_rng.h"

static ps_store_spec spec_of(loom_type t, uint32_t width, loom_storage st, uint64_t begin,
                             uint64_t end)
{
    ps_store_spec s;
    memset(&s, 0, sizeof s);
    s.type = t;
    s.width = width;
    s.storage = st;
    s.begin = begin;
    s.end = end;
    s.init = LOOM_INIT_ZERO;
    return s;
}

static void test_spec_validation(void **unused)
{
    (void)unused;
    ps_store *s = NULL;
    ps_store_spec ok = spec_of(LOOM_F32, 2, LOOM_DENSE, 10, 20), bad;

    assert_int_equal(store_create(&ok, &s), 0);
    store_destroy(s);
    store_destroy(NULL);
    assert_int_equal(store_create(NULL, &s), LOOM_EINVAL);
    assert_int_equal(store_create(&ok, NULL), LOOM_EINVAL);

    bad = ok, bad.width = 0;
    assert_int_equal(store_create(&bad, &s), LOOM_EINVAL);
    bad = ok, bad.type = (loom_type)7;
    assert_int_equal(store_create(&bad, &s), LOOM_EINVAL);
    bad = ok, bad.state_per_value = 5;
    assert_int_equal(store_create(&bad, &s), LOOM_EINVAL);
    bad = ok, bad.storage = (loom_storage)3;
    assert_int_equal(store_create(&bad, &s), LOOM_EINVAL);
    bad = ok, bad.init = (loom_init_kind)9;
    assert_int_equal(store_create(&bad, &s), LOOM_EINVAL);

    /* Ranges: dense needs end > begin; sparse also takes end 0 as 2^64. */
    bad = ok, bad.end = bad.begin;
    assert_int_equal(store_create(&bad, &s), LOOM_EINVAL);
    bad = ok, bad.end = 5;
    assert_int_equal(store_create(&bad, &s), LOOM_EINVAL);
    bad = ok, bad.end = 0;
    assert_int_equal(store_create(&bad, &s), LOOM_EINVAL);
    bad.storage = LOOM_SPARSE;
    assert_int_equal(store_create(&bad, &s), 0);
    store_destroy(s);
    bad = ok, bad.storage = LOOM_SPARSE, bad.end = 5;
    assert_int_equal(store_create(&bad, &s), LOOM_EINVAL);

    /* Absurd dense sizes are refused, not attempted. */
    bad = ok, bad.begin = 0, bad.end = UINT64_MAX;
    assert_int_equal(store_create(&bad, &s), LOOM_ENOMEM);
    bad = ok, bad.begin = 0, bad.end = (uint64_t)1 << 45;
    assert_int_equal(store_create(&bad, &s), LOOM_ENOMEM);
    bad = ok, bad.begin = 1, bad.end = 0x100000001ULL, bad.width = UINT32_MAX;
    assert_int_equal(store_create(&bad, &s), LOOM_ENOMEM);

    /* Random initial values: floats only, and sensible parameters. */
    bad = ok, bad.init = LOOM_INIT_UNIFORM, bad.init_a = -1, bad.init_b = 1;
    assert_int_equal(store_create(&bad, &s), 0);
    store_destroy(s);
    bad.type = LOOM_I32;
    assert_int_equal(store_create(&bad, &s), LOOM_EINVAL);
    bad.type = LOOM_I64, bad.init = LOOM_INIT_NORMAL;
    assert_int_equal(store_create(&bad, &s), LOOM_EINVAL);
    bad = ok, bad.init = LOOM_INIT_UNIFORM, bad.init_a = 2, bad.init_b = 1;
    assert_int_equal(store_create(&bad, &s), LOOM_EINVAL);
    bad.init_a = NAN;
    assert_int_equal(store_create(&bad, &s), LOOM_EINVAL);
    bad.init_a = -INFINITY;
    assert_int_equal(store_create(&bad, &s), LOOM_EINVAL);
    bad = ok, bad.init = LOOM_INIT_NORMAL, bad.init_a = 0, bad.init_b = -1;
    assert_int_equal(store_create(&bad, &s), LOOM_EINVAL);
    bad.init_b = INFINITY;
    assert_int_equal(store_create(&bad, &s), LOOM_EINVAL);
}

/* Dense and sparse stores over the same range, driven by the same random
 * writes and reads, both checked against a model: initial row + deltas. */
static void test_dense_sparse_model(void **unused)
{
    (void)unused;
    enum { BEGIN = 100, END = 600, N = END - BEGIN, W = 4, SPV = 2 };
    ps_store_spec spec = spec_of(LOOM_F64, W, LOOM_DENSE, BEGIN, END);
    spec.state_per_value = SPV;
    spec.init = LOOM_INIT_NORMAL;
    spec.init_a = 1.0;
    spec.init_b = 0.5;
    spec.init_seed = 99;
    ps_store *dense, *sparse;
    assert_int_equal(store_create(&spec, &dense), 0);
    spec.storage = LOOM_SPARSE;
    assert_int_equal(store_create(&spec, &sparse), 0);

    static double model[N][W], model_state[N][W * SPV];
    static int written[N];
    for (size_t k = 0; k < N; k++) store_initial_row(&spec, BEGIN + k, model[k]);
    memset(model_state, 0, sizeof model_state);
    assert_int_equal(store_num_rows(dense), N);
    assert_int_equal(store_num_rows(sparse), 0);

    size_t nwritten = 0;
    double row[W], out_d[64 * W], out_s[64 * W];
    uint64_t keys[64];
    for (int op = 0; op < 20000; op++) {
        uint64_t key = BEGIN + rng() % N;
        size_t k = key - BEGIN;
        switch (op % 4) {
        case 0:
        case 1: { /* write through store_row: value and state */
            void *sd, *ss;
            double *vd = store_row(dense, key, &sd), *vs = store_row(sparse, key, &ss);
            assert_non_null(vd);
            assert_non_null(vs);
            assert_memory_equal(vd, model[k], sizeof row);
            assert_memory_equal(vs, model[k], sizeof row);
            assert_memory_equal(sd, model_state[k], sizeof model_state[k]);
            assert_memory_equal(ss, model_state[k], sizeof model_state[k]);
            for (size_t j = 0; j < W; j++) {
                double d = (double)(rng() % 1000) / 8;
                vd[j] += d, vs[j] += d, model[k][j] += d;
            }
            for (size_t j = 0; j < W * SPV; j++) {
                double d = (double)(rng() % 1000);
                ((double *)sd)[j] += d, ((double *)ss)[j] += d, model_state[k][j] += d;
            }
            nwritten += !written[k];
            written[k] = 1;
            break;
        }
        case 2: /* single reads */
            store_read(dense, key, out_d);
            store_read(sparse, key, out_s);
            assert_memory_equal(out_d, model[k], sizeof row);
            assert_memory_equal(out_s, model[k], sizeof row);
            break;
        case 3: { /* a sorted batch, or a range */
            size_t n = 1 + rng() % 64;
            if (op % 8 == 3) {
                uint64_t first = BEGIN + rng() % (N - n + 1);
                store_read_range(dense, first, first + n, out_d);
                store_read_range(sparse, first, first + n, out_s);
                for (size_t i = 0; i < n; i++) keys[i] = first + i;
            } else {
                for (size_t i = 0; i < n; i++) keys[i] = BEGIN + (rng() % N);
                for (size_t i = 1; i < n; i++) /* sort (insertion; n is small) */
                    for (size_t j = i; j > 0 && keys[j - 1] > keys[j]; j--) {
                        uint64_t t = keys[j];
                        keys[j] = keys[j - 1], keys[j - 1] = t;
                    }
                store_read_many(dense, keys, n, out_d);
                store_read_many(sparse, keys, n, out_s);
            }
            for (size_t i = 0; i < n; i++) {
                assert_memory_equal(out_d + i * W, model[keys[i] - BEGIN], sizeof row);
                assert_memory_equal(out_s + i * W, model[keys[i] - BEGIN], sizeof row);
            }
            break;
        }
        }
        assert_int_equal(store_num_rows(sparse), nwritten); /* reads add nothing */
        assert_int_equal(store_num_rows(dense), N);
    }
    store_destroy(dense);
    store_destroy(sparse);
}

/* The initial row of a key does not depend on the store it lives in. */
static void test_initial_values_independent_of_partition(void **unused)
{
    (void)unused;
    enum { W = 3 };
    ps_store_spec a = spec_of(LOOM_F32, W, LOOM_DENSE, 0, 1000);
    a.init = LOOM_INIT_UNIFORM;
    a.init_a = -0.5;
    a.init_b = 0.5;
    a.init_seed = 7;
    ps_store_spec b = a, c = a, d = a;
    b.begin = 500, b.end = 2000;
    c.storage = LOOM_SPARSE, c.begin = 900, c.end = 0;
    d.storage = LOOM_SPARSE, d.begin = 0, d.end = 950;
    ps_store *sa, *sb, *sc, *sd;
    assert_int_equal(store_create(&a, &sa), 0);
    assert_int_equal(store_create(&b, &sb), 0);
    assert_int_equal(store_create(&c, &sc), 0);
    assert_int_equal(store_create(&d, &sd), 0);

    float ra[W], rb[W], rc[W], rd[W];
    int nonzero = 0;
    for (uint64_t key = 900; key < 950; key++) {
        store_read(sa, key, ra);
        store_read(sb, key, rb);
        store_read(sc, key, rc);
        float *materialised = store_row(sd, key, NULL);
        assert_non_null(materialised);
        memcpy(rd, materialised, sizeof rd);
        assert_memory_equal(ra, rb, sizeof ra);
        assert_memory_equal(ra, rc, sizeof ra);
        assert_memory_equal(ra, rd, sizeof ra);
        for (size_t j = 0; j < W; j++) nonzero += ra[j] != 0;
    }
    assert_true(nonzero > 140); /* really random values, not zeros */

    /* Another seed gives other values; the same seed always the same ones. */
    ps_store_spec e = a;
    float re[W];
    store_initial_row(&a, 123, ra);
    store_initial_row(&a, 123, rb);
    assert_memory_equal(ra, rb, sizeof ra);
    e.init_seed = 8;
    store_initial_row(&e, 123, re);
    assert_memory_not_equal(ra, re, sizeof ra);
    /* Columns and neighbouring keys differ. */
    assert_true(ra[0] != ra[1] && ra[1] != ra[2]);
    store_initial_row(&a, 124, rb);
    assert_memory_not_equal(ra, rb, sizeof ra);

    store_destroy(sa);
    store_destroy(sb);
    store_destroy(sc);
    store_destroy(sd);
}

/* Statistics of many initial values (deterministic: the values are a fixed
 * function of seed, key and column). */
static void test_initial_value_distributions(void **unused)
{
    (void)unused;
    enum { KEYS = 50000, W = 4 };
    ps_store_spec u = spec_of(LOOM_F64, W, LOOM_SPARSE, 0, 0);
    u.init = LOOM_INIT_UNIFORM;
    u.init_a = -3.0;
    u.init_b = 5.0;
    u.init_seed = 1;
    double row[W], sum = 0, sum2 = 0, lo = INFINITY, hi = -INFINITY, prod = 0;
    int below_half = 0;
    for (uint64_t key = 0; key < KEYS; key++) {
        store_initial_row(&u, key * 7 + (key << 40), row);
        for (size_t j = 0; j < W; j++) {
            assert_true(row[j] >= -3.0 && row[j] < 5.0);
            sum += row[j];
            sum2 += row[j] * row[j];
            lo = fmin(lo, row[j]);
            hi = fmax(hi, row[j]);
            below_half += row[j] < 1.0;
        }
        prod += (row[0] - 1.0) * (row[1] - 1.0);
    }
    double n = KEYS * W, mean = sum / n, var = sum2 / n - mean * mean;
    assert_true(fabs(mean - 1.0) < 0.03);
    assert_true(fabs(var - 64.0 / 12) < 0.1);
    assert_true(lo < -2.99 && hi > 4.99);
    assert_true(fabs(below_half / n - 0.5) < 0.01);
    assert_true(fabs(prod / KEYS) / (64.0 / 12) < 0.02); /* columns uncorrelated */

    ps_store_spec g = u;
    g.init = LOOM_INIT_NORMAL;
    g.init_a = 2.0;
    g.init_b = 0.5;
    sum = sum2 = 0;
    int within_1sd = 0;
    for (uint64_t key = 0; key < KEYS; key++) {
        store_initial_row(&g, key, row);
        for (size_t j = 0; j < W; j++) {
            assert_true(isfinite(row[j]));
            sum += row[j];
            sum2 += row[j] * row[j];
            within_1sd += fabs(row[j] - 2.0) < 0.5;
        }
    }
    mean = sum / n, var = sum2 / n - mean * mean;
    assert_true(fabs(mean - 2.0) < 0.01);
    assert_true(fabs(sqrt(var) - 0.5) < 0.01);
    assert_true(fabs(within_1sd / n - 0.6827) < 0.01);

    /* Float rounding must not reach the excluded bound: the only float in
     * [1, 1 + 2^-23) is 1. */
    ps_store_spec f = spec_of(LOOM_F32, 8, LOOM_SPARSE, 0, 0);
    f.init = LOOM_INIT_UNIFORM;
    f.init_a = 1.0;
    f.init_b = 1.0 + 0x1p-23;
    float fr[8];
    for (uint64_t key = 0; key < 5000; key++) {
        store_initial_row(&f, key, fr);
        for (size_t j = 0; j < 8; j++) assert_true(fr[j] == 1.0f);
    }

    /* Zero init, and integer tables, read as zeros. */
    ps_store_spec z = spec_of(LOOM_I64, 3, LOOM_SPARSE, 0, 0);
    int64_t zi[3] = {1, 2, 3}, zeros[3] = {0, 0, 0};
    store_initial_row(&z, 5, zi);
    assert_memory_equal(zi, zeros, sizeof zi);
}

static void test_dense_initialised_at_creation(void **unused)
{
    (void)unused;
    ps_store_spec spec = spec_of(LOOM_F32, 2, LOOM_DENSE, 10, 210);
    spec.init = LOOM_INIT_NORMAL;
    spec.init_a = 0;
    spec.init_b = 1;
    spec.init_seed = 3;
    ps_store *s;
    assert_int_equal(store_create(&spec, &s), 0);
    float want[2], got[2];
    int nonzero = 0;
    for (uint64_t key = 10; key < 210; key++) {
        store_initial_row(&spec, key, want);
        float *row = store_row(s, key, NULL); /* the stored row itself, not a fallback */
        memcpy(got, row, sizeof got);
        assert_memory_equal(got, want, sizeof got);
        nonzero += got[0] != 0 && got[1] != 0;
    }
    assert_true(nonzero > 190);
    store_destroy(s);
}

static void test_sparse_reads_do_not_materialise(void **unused)
{
    (void)unused;
    ps_store_spec spec = spec_of(LOOM_F64, 2, LOOM_SPARSE, 1000, 0);
    spec.init = LOOM_INIT_UNIFORM;
    spec.init_a = 10;
    spec.init_b = 20;
    ps_store *s;
    assert_int_equal(store_create(&spec, &s), 0);
    double out[10 * 2], want[2];
    uint64_t keys[3] = {1000, 5000, UINT64_MAX};
    store_read(s, 1234, out);
    store_read_many(s, keys, 3, out);
    for (size_t i = 0; i < 3; i++) {
        store_initial_row(&spec, keys[i], want);
        assert_memory_equal(out + 2 * i, want, sizeof want);
    }
    store_read_range(s, UINT64_MAX - 9, 0, out); /* the last ten keys: end 0 is 2^64 */
    store_initial_row(&spec, UINT64_MAX, want);
    assert_memory_equal(out + 2 * 9, want, sizeof want);
    assert_int_equal(store_num_rows(s), 0);

    /* store_row creates exactly one row, with the initial value, and the
     * read sees what was written. */
    void *state = &state;
    double *row = store_row(s, UINT64_MAX, &state);
    assert_non_null(row);
    assert_null(state); /* no state_per_value, no state area */
    assert_memory_equal(row, want, sizeof want);
    row[1] = -1;
    assert_int_equal(store_num_rows(s), 1);
    store_read(s, UINT64_MAX, out);
    assert_true(out[0] == want[0] && out[1] == -1);
    assert_true(store_row(s, UINT64_MAX, NULL) == row);
    assert_int_equal(store_num_rows(s), 1);
    store_destroy(s);
}

/* Row pointers and contents survive many later insertions, and state areas
 * of different rows do not overlap. */
static void test_sparse_growth_and_state(void **unused)
{
    (void)unused;
    enum { W = 2, SPV = 3, KEYS = 100000 };
    ps_store_spec spec = spec_of(LOOM_I32, W, LOOM_SPARSE, 0, 0);
    spec.state_per_value = SPV;
    ps_store *s;
    assert_int_equal(store_create(&spec, &s), 0);

    void *first_state;
    int32_t *first = store_row(s, 77, &first_state);
    assert_non_null(first);
    first[0] = 11, first[1] = 12;
    for (uint64_t i = 0; i < KEYS; i++) {
        uint64_t key = i * 0x9e3779b97f4a7c15ULL; /* scattered; 0 first, never 77 */
        void *st;
        int32_t *row = store_row(s, key, &st);
        assert_non_null(row);
        assert_non_null(st);
        for (size_t j = 0; j < W; j++) {
            assert_int_equal(row[j], 0);
            row[j] = (int32_t)(i * W + j);
        }
        for (size_t j = 0; j < W * SPV; j++) {
            assert_int_equal(((int32_t *)st)[j], 0);
            ((int32_t *)st)[j] = -(int32_t)(i * W * SPV + j);
        }
    }
    assert_int_equal(store_num_rows(s), KEYS + 1);
    void *st77;
    assert_true(store_row(s, 77, &st77) == first);
    assert_true(st77 == first_state);
    assert_int_equal(first[0], 11);
    assert_int_equal(first[1], 12);
    for (uint64_t i = 0; i < KEYS; i++) {
        void *st;
        int32_t *row = store_row(s, i * 0x9e3779b97f4a7c15ULL, &st);
        for (size_t j = 0; j < W; j++) assert_int_equal(row[j], (int32_t)(i * W + j));
        for (size_t j = 0; j < W * SPV; j++)
            assert_int_equal(((int32_t *)st)[j], -(int32_t)(i * W * SPV + j));
    }
    assert_int_equal(store_num_rows(s), KEYS + 1);
    store_destroy(s);
}

static void test_dense_state_layout(void **unused)
{
    (void)unused;
    enum { W = 3, SPV = 2, N = 50 };
    ps_store_spec spec = spec_of(LOOM_I64, W, LOOM_DENSE, UINT64_MAX - N, UINT64_MAX);
    spec.state_per_value = SPV;
    ps_store *s;
    assert_int_equal(store_create(&spec, &s), 0);
    for (uint64_t k = 0; k < N; k++) {
        void *st;
        int64_t *row = store_row(s, UINT64_MAX - N + k, &st);
        for (size_t j = 0; j < W; j++) row[j] = (int64_t)(k * 100 + j);
        for (size_t j = 0; j < W * SPV; j++) ((int64_t *)st)[j] = -(int64_t)(k * 100 + j);
    }
    int64_t all[N * W];
    store_read_range(s, UINT64_MAX - N, UINT64_MAX, all);
    for (uint64_t k = 0; k < N; k++) {
        void *st;
        store_row(s, UINT64_MAX - N + k, &st);
        for (size_t j = 0; j < W; j++) assert_true(all[k * W + j] == (int64_t)(k * 100 + j));
        for (size_t j = 0; j < W * SPV; j++)
            assert_true(((int64_t *)st)[j] == -(int64_t)(k * 100 + j));
    }
    store_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_validation),
        cmocka_unit_test(test_dense_sparse_model),
        cmocka_unit_test(test_initial_values_independent_of_partition),
        cmocka_unit_test(test_initial_value_distributions),
        cmocka_unit_test(test_dense_initialised_at_creation),
        cmocka_unit_test(test_sparse_reads_do_not_materialise),
        cmocka_unit_test(test_sparse_growth_and_state),
        cmocka_unit_test(test_dense_state_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
