/* loom_push_sparse and loom_push_sparse_async against loom_push and
 * loom_push_async of the same rows made dense, in whole jobs in one process
 * (threads, loopback TCP): every worker pushes the same deltas into two tables
 * of the same options, dense into one and sparse into the other, and the two
 * must pull back bit for bit alike, under BSP, SSP and ASP, with exact
 * filters, a filter on values (which the sparse rows meet made dense), sparse
 * or dense rows forced, a non-sum updater and replicas; they must also have
 * cost the same bytes on the wire. Then hostile arguments: a column out of
 * range, columns not ascending, more values than the width, NULL arrays, keys
 * outside the table, each refused with nothing pushed; n = 0 and rows without
 * values are fine. */
#include "ps_inproc.h"

#define SP_KEYS   40
#define SP_WIDTH  48
#define SP_CLOCKS 6
#define SP_ROWS   12 /* rows per push */

/* One test's tables: the value type, the consistency, the push and pull
 * filters, the updater. */
typedef struct sp_case {
    loom_type type;
    loom_consistency consistency;
    int staleness;
    const char *filter;
    const char *updater;
} sp_case;

/* A deterministic stream per (worker, clock, push). */
static uint64_t sp_next(uint64_t *x)
{
    *x += 0x9e3779b97f4a7c15ull;
    uint64_t z = *x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The rows of one push: keys (ascending, or, when `shuffled`, in any order
 * with repeats), per row its number of values and their ascending columns,
 * and the values (of the table's type), sparse and as dense rows. Some rows
 * have no values, some are full. Returns the number of values. */
static size_t sp_rows(const sp_case *c, uint64_t seed, int shuffled, uint64_t *keys, uint32_t *nnz,
                      uint32_t *cols, void *vals, void *dense)
{
    uint64_t x = seed;
    size_t vs = loom_type_size(c->type), total = 0;
    memset(dense, 0, SP_ROWS * SP_WIDTH * vs);
    uint64_t k = sp_next(&x) % 3;
    for (int i = 0; i < SP_ROWS; i++) {
        keys[i] = shuffled ? sp_next(&x) % (SP_KEYS / 2) : k;
        k += 1 + sp_next(&x) % 2;
        uint32_t r = (uint32_t)(sp_next(&x) % 8);
        nnz[i] = 0;
        for (uint32_t j = 0; j < SP_WIDTH; j++) {
            int take = r == 0 ? 0 : r == 1 ? 1 : sp_next(&x) % r == 0;
            if (!take) continue;
            int64_t v = (int64_t)(sp_next(&x) % 19) - 9; /* zeros given too */
            uint8_t *d = (uint8_t *)dense + ((size_t)i * SP_WIDTH + j) * vs;
            uint8_t *s = (uint8_t *)vals + total * vs;
            switch (c->type) {
            case LOOM_F32: {
                float f = (float)v * 0.375f;
                memcpy(s, &f, 4);
                break;
            }
            case LOOM_F64: {
                double f = (double)v * 0.375;
                memcpy(s, &f, 8);
                break;
            }
            case LOOM_I32: {
                int32_t n = (int32_t)v;
                memcpy(s, &n, 4);
                break;
            }
            default: {
                memcpy(s, &v, 8);
                break;
            }
            }
            memcpy(d, s, vs);
            cols[total++] = j;
            nnz[i]++;
        }
    }
    return total;
}

/* Both tables' push statistics agree: the same messages and bytes. */
static int sp_same_wire(loom_table *d, loom_table *s)
{
    loom_filter_stats a, b;
    CHECK_OK(loom_table_filter_stats(d, LOOM_DIR_PUSH, &a));
    CHECK_OK(loom_table_filter_stats(s, LOOM_DIR_PUSH, &b));
    if (a.messages != b.messages || a.bytes_raw != b.bytes_raw || a.bytes_wire != b.bytes_wire)
        fprintf(stderr, "push wire: dense %llu msgs %llu raw %llu wire, sparse %llu %llu %llu\n",
                (unsigned long long)a.messages, (unsigned long long)a.bytes_raw,
                (unsigned long long)a.bytes_wire, (unsigned long long)b.messages,
                (unsigned long long)b.bytes_raw, (unsigned long long)b.bytes_wire);
    CHECK(a.messages == b.messages && a.bytes_raw == b.bytes_raw && a.bytes_wire == b.bytes_wire);
    return 0;
}

static int sp_worker(loom_node *n, int rank, void *arg)
{
    const sp_case *c = arg;
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = c->type;
    o.width = SP_WIDTH;
    o.storage = LOOM_DENSE;
    o.key_end = SP_KEYS;
    o.consistency = c->consistency;
    o.staleness = c->staleness;
    o.filter_push = c->filter;
    /* Filters that leave rows out are for pushes only. */
    int selects = c->filter && (strstr(c->filter, "skip") || strstr(c->filter, "sigmod"));
    o.filter_pull = selects ? NULL : c->filter;
    if (c->updater) o.updater = c->updater;
    loom_table *d, *s;
    CHECK_OK(loom_table_open(n, "sp.dense", &o, &d));
    CHECK_OK(loom_table_open(n, "sp.sparse", &o, &s));
    int W = loom_num_workers(n);
    size_t vs = loom_type_size(c->type), bytes = SP_KEYS * SP_WIDTH * vs;
    uint64_t keys[SP_ROWS], all[SP_KEYS];
    uint32_t nnz[SP_ROWS], cols[SP_ROWS * SP_WIDTH];
    static _Thread_local uint8_t vals[SP_ROWS * SP_WIDTH * 8], dense[SP_ROWS * SP_WIDTH * 8],
        got_d[SP_KEYS * SP_WIDTH * 8], got_s[SP_KEYS * SP_WIDTH * 8];
    for (int k = 0; k < SP_KEYS; k++) all[k] = (uint64_t)k;
    for (int clock = 0; clock < SP_CLOCKS; clock++) {
        /* Sent at once (first: the clock's first pull then finds it in
         * flight), then buffered, ascending keys and not. */
        for (int form = 0; form < 4; form++) {
            uint64_t seed = (uint64_t)rank << 40 | (uint64_t)clock << 8 | (uint64_t)form;
            int shuffled = form >= 2;
            size_t total = sp_rows(c, seed, shuffled, keys, nnz, cols, vals, dense);
            (void)total;
            if (form % 2 == 1) {
                CHECK_OK(loom_push(d, keys, SP_ROWS, dense));
                CHECK_OK(loom_push_sparse(s, keys, SP_ROWS, nnz, cols, vals));
            } else {
                loom_ts a, b;
                CHECK_OK(loom_push_async(d, keys, SP_ROWS, dense, &a));
                CHECK_OK(loom_push_sparse_async(s, keys, SP_ROWS, nnz, cols, vals, &b));
                /* The sparse push copied its arrays: scribble over them now. */
                memset(vals, 0x5a, sizeof vals);
                memset(cols, 0xff, sizeof cols);
                CHECK_OK(loom_wait(n, a));
                CHECK_OK(loom_wait(n, b));
            }
            /* One worker sees nothing but its own writes: they must agree at
             * once (read-my-writes, buffered and in flight); several agree
             * when the model says what a pull sees (BSP, below). */
            if (W == 1) {
                CHECK_OK(loom_pull(d, all, SP_KEYS, got_d));
                CHECK_OK(loom_pull(s, all, SP_KEYS, got_s));
                CHECK(memcmp(got_d, got_s, bytes) == 0);
            }
        }
        CHECK_OK(loom_clock(n));
        if (c->consistency == LOOM_BSP) {
            CHECK_OK(loom_pull(d, all, SP_KEYS, got_d));
            CHECK_OK(loom_pull(s, all, SP_KEYS, got_s));
            CHECK(memcmp(got_d, got_s, bytes) == 0);
        }
    }
    CHECK_OK(loom_barrier(n));
    CHECK_OK(loom_pull(d, all, SP_KEYS, got_d));
    CHECK_OK(loom_pull(s, all, SP_KEYS, got_s));
    CHECK(memcmp(got_d, got_s, bytes) == 0);
    /* Something was pushed at all. */
    int nonzero = 0;
    for (size_t b = 0; b < bytes; b++) nonzero |= got_s[b];
    CHECK(nonzero);
    return sp_same_wire(d, s);
}

static void run_case(const sp_case *c, int servers, int workers)
{
    harness_result r;
    assert_int_equal(harness_run(servers, workers, sp_worker, (void *)c, &r), 0);
}

static void test_sparse_equals_dense(void **state)
{
    (void)state;
    static const loom_type types[] = {LOOM_I32, LOOM_F32, LOOM_F64, LOOM_I64};
    static const char *const filters[] = {NULL, "keycache,zstd", "sparse", "dense", "lz4"};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t f = 0; f < sizeof filters / sizeof filters[0]; f++) {
            sp_case c = {types[t], LOOM_BSP, 0, filters[f], NULL};
            run_case(&c, 2, 2);
            /* One worker: its pulls must see its pushes at once, those still
             * in flight too (BSP applies them at the clock's end). */
            if (f < 2) run_case(&c, 2, 1);
        }
}

static void test_sparse_equals_dense_ssp_asp(void **state)
{
    (void)state;
    sp_case ssp = {LOOM_I32, LOOM_SSP, 1, NULL, NULL};
    run_case(&ssp, 2, 2);
    run_case(&ssp, 1, 1);
    sp_case asp = {LOOM_F32, LOOM_ASP, 0, "keycache", NULL};
    run_case(&asp, 2, 2);
    run_case(&asp, 2, 1);
}

/* A filter on values takes dense rows: the sparse ones are made dense for it. */
static void test_sparse_through_value_filters(void **state)
{
    (void)state;
    sp_case skip = {LOOM_F32, LOOM_BSP, 0, "skip:1,zstd", NULL};
    run_case(&skip, 2, 2);
    sp_case sigmod = {LOOM_F64, LOOM_SSP, 0, "sigmod:0", NULL};
    run_case(&sigmod, 1, 1);
}

/* Another updater: a sparse row stands for the dense row, zeros included. */
static void test_sparse_assign(void **state)
{
    (void)state;
    sp_case assign = {LOOM_F32, LOOM_BSP, 0, NULL, "assign"};
    run_case(&assign, 2, 1);
}

/* With replicas an in-flight push is kept dense, to be sent again. */
static void test_sparse_with_replicas(void **state)
{
    (void)state;
    assert_int_equal(setenv("LOOM_REPLICAS", "1", 1), 0);
    sp_case c = {LOOM_I32, LOOM_SSP, 1, NULL, NULL};
    run_case(&c, 2, 1);
    sp_case b = {LOOM_F64, LOOM_BSP, 0, NULL, NULL};
    run_case(&b, 3, 2);
    assert_int_equal(unsetenv("LOOM_REPLICAS"), 0);
}

/* ---- hostile arguments ---- */

static int hostile_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_I32;
    o.width = 8;
    o.storage = LOOM_DENSE;
    o.key_end = 16;
    o.consistency = LOOM_BSP;
    loom_table *t;
    CHECK_OK(loom_table_open(n, "sp.hostile", &o, &t));
    uint64_t keys[3] = {1, 4, 9}, far[1] = {16};
    int32_t vals[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    uint32_t nnz[3] = {2, 0, 3};
    uint32_t ok_cols[5] = {0, 7, 1, 2, 3};
    uint32_t out_of_range[5] = {0, 8, 1, 2, 3};
    uint32_t descending[5] = {7, 0, 1, 2, 3};
    uint32_t repeated[5] = {0, 7, 2, 2, 3};
    uint32_t too_many[1] = {9};
    loom_ts ts;
    /* Each refused, by both forms, with nothing pushed. */
    const uint32_t *bad[] = {out_of_range, descending, repeated};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(loom_push_sparse(t, keys, 3, nnz, bad[i], vals) == LOOM_EINVAL);
        CHECK(loom_push_sparse_async(t, keys, 3, nnz, bad[i], vals, &ts) == LOOM_EINVAL);
    }
    CHECK(loom_push_sparse(t, keys, 1, too_many, ok_cols, vals) == LOOM_EINVAL);
    CHECK(loom_push_sparse(t, keys, 3, nnz, NULL, vals) == LOOM_EINVAL);
    CHECK(loom_push_sparse(t, keys, 3, nnz, ok_cols, NULL) == LOOM_EINVAL);
    CHECK(loom_push_sparse(t, keys, 3, NULL, ok_cols, vals) == LOOM_EINVAL);
    CHECK(loom_push_sparse(t, NULL, 3, nnz, ok_cols, vals) == LOOM_EINVAL);
    CHECK(loom_push_sparse(NULL, keys, 3, nnz, ok_cols, vals) == LOOM_EINVAL);
    CHECK(loom_push_sparse_async(t, keys, 3, nnz, ok_cols, vals, NULL) == LOOM_EINVAL);
    CHECK(loom_push_sparse(t, far, 1, nnz, ok_cols, vals) == LOOM_EKEYRANGE);
    CHECK(loom_push_sparse_async(t, far, 1, nnz, ok_cols, vals, &ts) == LOOM_EKEYRANGE);
    /* Nothing at all, and rows without values: fine, and nothing changes. */
    uint32_t none[3] = {0, 0, 0};
    CHECK_OK(loom_push_sparse(t, NULL, 0, NULL, NULL, NULL));
    CHECK_OK(loom_push_sparse_async(t, NULL, 0, NULL, NULL, NULL, &ts));
    CHECK_OK(loom_wait(n, ts));
    CHECK_OK(loom_push_sparse(t, keys, 3, none, NULL, NULL));
    CHECK_OK(loom_push_sparse_async(t, keys, 3, none, NULL, NULL, &ts));
    CHECK_OK(loom_wait(n, ts));
    CHECK_OK(loom_clock(n));
    uint64_t all[16];
    int32_t got[16 * 8];
    for (int k = 0; k < 16; k++) all[k] = (uint64_t)k;
    CHECK_OK(loom_pull(t, all, 16, got));
    for (int i = 0; i < 16 * 8; i++) CHECK(got[i] == 0);
    /* The good one lands where it says. */
    CHECK_OK(loom_push_sparse_async(t, keys, 3, nnz, ok_cols, vals, &ts));
    CHECK_OK(loom_wait(n, ts));
    CHECK_OK(loom_clock(n));
    CHECK_OK(loom_pull(t, all, 16, got));
    int32_t want[16 * 8] = {0};
    want[1 * 8 + 0] = 1, want[1 * 8 + 7] = 2;
    want[9 * 8 + 1] = 3, want[9 * 8 + 2] = 4, want[9 * 8 + 3] = 5;
    CHECK(memcmp(got, want, sizeof got) == 0);
    return 0;
}

static void test_sparse_hostile(void **state)
{
    (void)state;
    harness_result r;
    assert_int_equal(harness_run(1, 1, hostile_worker, NULL, &r), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sparse_equals_dense),
        cmocka_unit_test(test_sparse_equals_dense_ssp_asp),
        cmocka_unit_test(test_sparse_through_value_filters),
        cmocka_unit_test(test_sparse_assign),
        cmocka_unit_test(test_sparse_with_replicas),
        cmocka_unit_test(test_sparse_hostile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
