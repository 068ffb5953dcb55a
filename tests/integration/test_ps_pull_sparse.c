/* loom_pull_sparse against loom_pull of the same keys, in whole jobs in one
 * process (threads, loopback TCP): after every clock each worker pulls the
 * table both ways and the CSR must be exactly the dense rows' values whose
 * bits are not all 0, by ascending column, rows of zeros without pairs.
 * The workers write rows sparsely and later take back their own writes to
 * some rows, so rows become all zero again; pulls go through the cache and
 * the changed-only replies (the second pull of a clock, rows held), with
 * keys in any order and repeated, under BSP (and SSP with one worker,
 * where the two pulls of a clock see the same clocks), integer and float
 * tables, with and without sparse rows on the wire. Then room for the
 * pairs only (no room to pull in place: the same pairs), too small a
 * capacity (LOOM_ELIMIT with the count) and bad arguments. */
#include "ps_inproc.h"

#define PS_KEYS   24
#define PS_WIDTH  40
#define PS_CLOCKS 6

typedef struct ps_case {
    loom_type type;
    loom_consistency consistency;
    const char *filter;
} ps_case;

/* A value of the table's type from a small integer (exact in floats too). */
static void ps_value(loom_type t, int64_t v, uint8_t *out)
{
    if (t == LOOM_F32) {
        float f = (float)v * 0.5f;
        memcpy(out, &f, 4);
    } else if (t == LOOM_F64) {
        double f = (double)v * 0.5;
        memcpy(out, &f, 8);
    } else if (t == LOOM_I32) {
        int32_t n = (int32_t)v;
        memcpy(out, &n, 4);
    } else {
        memcpy(out, &v, 8);
    }
}

/* The delta of (rank, clock) to (key, column): few columns of a row. */
static int64_t ps_delta(int rank, int clock, uint64_t key, uint32_t col)
{
    static const int64_t by[11] = {-1, 2, 1};
    return by[((uint64_t)rank * 131 + (uint64_t)clock * 31 + key * 7 + col * 13) % 11];
}

/* Pull keys both ways and compare: the sparse form must be the dense one's
 * values whose bits are not all 0. Returns the number of empty rows, or -1. */
static int ps_compare(loom_table *t, const ps_case *c, const uint64_t *keys, size_t n)
{
    size_t vs = loom_type_size(c->type), rb = PS_WIDTH * vs;
    static _Thread_local uint8_t dense[2 * PS_KEYS * PS_WIDTH * 8],
        vals[2 * PS_KEYS * PS_WIDTH * 8];
    static _Thread_local uint32_t cols[2 * PS_KEYS * PS_WIDTH], nnz[2 * PS_KEYS];
    size_t total;
    CHECK_OK(loom_pull(t, keys, n, dense));
    CHECK_OK(loom_pull_sparse(t, keys, n, nnz, cols, vals, n * PS_WIDTH, &total));
    size_t e = 0;
    int empty = 0;
    for (size_t i = 0; i < n; i++) {
        size_t start = e;
        for (uint32_t j = 0; j < PS_WIDTH; j++) {
            const uint8_t *v = dense + i * rb + j * vs;
            int zero = 1;
            for (size_t b = 0; b < vs; b++) zero &= v[b] == 0;
            if (zero) continue;
            CHECK(e < total && cols[e] == j && memcmp(vals + e * vs, v, vs) == 0);
            e++;
        }
        CHECK(nnz[i] == e - start);
        empty += nnz[i] == 0;
    }
    CHECK(e == total);
    return empty;
}

static int ps_worker(loom_node *n, int rank, void *arg)
{
    const ps_case *c = arg;
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = c->type;
    o.width = PS_WIDTH;
    o.key_end = PS_KEYS;
    o.consistency = c->consistency;
    o.staleness = 1;
    o.filter_push = o.filter_pull = c->filter;
    loom_table *t;
    CHECK_OK(loom_table_open(n, "ps.pull", &o, &t));
    size_t vs = loom_type_size(c->type);
    uint64_t all[PS_KEYS], mixed[2 * PS_KEYS];
    for (int k = 0; k < PS_KEYS; k++) all[k] = (uint64_t)k;
    for (int k = 0; k < 2 * PS_KEYS; k++) mixed[k] = (uint64_t)((k * 7 + 3) % PS_KEYS);
    static _Thread_local int64_t own[PS_KEYS][PS_WIDTH];
    memset(own, 0, sizeof own);
    static _Thread_local uint8_t row[PS_WIDTH * 8];
    static _Thread_local uint32_t cols[PS_WIDTH];
    int emptied = 0;
    for (int clock = 0; clock < PS_CLOCKS; clock++) {
        for (uint64_t k = 0; k < PS_KEYS; k++) {
            uint32_t m = 0;
            for (uint32_t j = 0; j < PS_WIDTH; j++) {
                /* From clock 4 every worker takes back what it wrote to
                 * the even keys: they are rows of zeros again. */
                int64_t d = clock >= 4 ? (k % 2 == 0 && clock == 4 ? -own[k][j] : 0)
                                       : ps_delta(rank, clock, k, j);
                if (!d) continue;
                own[k][j] += d;
                cols[m] = j;
                ps_value(c->type, d, row + m * vs);
                m++;
            }
            if (m) CHECK_OK(loom_push_sparse(t, &k, 1, &m, cols, row));
        }
        CHECK_OK(loom_clock(n));
        CHECK(ps_compare(t, c, all, PS_KEYS) >= 0);
        int empty = ps_compare(t, c, mixed, 2 * PS_KEYS);
        CHECK(empty >= 0);
        if (clock == 0) CHECK(empty < 2 * PS_KEYS); /* something to compare */
        if (clock == PS_CLOCKS - 1) emptied = empty;
    }
    CHECK_OK(loom_barrier(n));
    int empty = ps_compare(t, c, all, PS_KEYS);
    /* Every even key is all zero again, every odd one is not. */
    CHECK(empty == PS_KEYS / 2);
    /* Under BSP the pulls after clock 4 saw it already (twice each key). */
    CHECK(c->consistency != LOOM_BSP || emptied == PS_KEYS);
    /* Too small a capacity: refused with the count; zero keys are fine. */
    static _Thread_local uint8_t vals[PS_KEYS * PS_WIDTH * 8];
    static _Thread_local uint32_t acols[PS_KEYS * PS_WIDTH], nnz[PS_KEYS];
    size_t total, small;
    CHECK_OK(loom_pull_sparse(t, all, PS_KEYS, nnz, acols, vals, PS_KEYS * PS_WIDTH, &total));
    CHECK(total > 0);
    /* Room for the pairs only (not for the rows dense): the same pairs. */
    static _Thread_local uint8_t vals2[PS_KEYS * PS_WIDTH * 8];
    static _Thread_local uint32_t cols2[PS_KEYS * PS_WIDTH], nnz2[PS_KEYS];
    CHECK_OK(loom_pull_sparse(t, all, PS_KEYS, nnz2, cols2, vals2, total, &small));
    CHECK(small == total && !memcmp(nnz, nnz2, sizeof nnz));
    CHECK(!memcmp(acols, cols2, total * 4) && !memcmp(vals, vals2, total * vs));
    CHECK(loom_pull_sparse(t, all, PS_KEYS, nnz, acols, vals, total - 1, &small) == LOOM_ELIMIT);
    CHECK(small == total);
    CHECK_OK(loom_pull_sparse(t, all, 0, NULL, NULL, NULL, 0, &small));
    CHECK(small == 0);
    CHECK(loom_pull_sparse(t, all, 1, NULL, acols, vals, 1, &small) == LOOM_EINVAL);
    CHECK(loom_pull_sparse(t, all, 1, nnz, NULL, vals, 1, &small) == LOOM_EINVAL);
    CHECK(loom_pull_sparse(t, all, 1, nnz, acols, vals, 1, NULL) == LOOM_EINVAL);
    uint64_t outside = PS_KEYS;
    CHECK(loom_pull_sparse(t, &outside, 1, nnz, acols, vals, PS_WIDTH, &small) == LOOM_EKEYRANGE);
    return 0;
}

static void run_case(const ps_case *c, int servers, int workers)
{
    harness_result r;
    assert_int_equal(harness_run(servers, workers, ps_worker, (void *)c, &r), 0);
}

static void test_pull_sparse_equals_dense(void **state)
{
    (void)state;
    static const loom_type types[] = {LOOM_I32, LOOM_F32, LOOM_F64, LOOM_I64};
    static const char *const filters[] = {NULL, "sparse", "dense", "keycache,zstd"};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t f = 0; f < sizeof filters / sizeof filters[0]; f++) {
            ps_case c = {types[t], LOOM_BSP, filters[f]};
            run_case(&c, 2, 2);
        }
}

static void test_pull_sparse_ssp(void **state)
{
    (void)state;
    ps_case c = {LOOM_I32, LOOM_SSP, NULL};
    run_case(&c, 2, 1);
    c.consistency = LOOM_BSP;
    run_case(&c, 1, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pull_sparse_equals_dense),
        cmocka_unit_test(test_pull_sparse_ssp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
