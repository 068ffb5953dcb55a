/* Whole jobs in one process (threads, real TCP on loopback), split from
 * test_ps_inproc.c: what goes on the wire. Pushes and pulls larger than the
 * frame limit arrive whole, split by the client; rows go sparse and only what
 * changed; a repeated pull sends its keys as a digest; bad filter specs are
 * refused. Each checked against a reference computed here. Runs under
 * ThreadSanitizer in CI. */
#include "ps_inproc.h"

/* ---- pushes and pulls larger than the job's frame limit ---- */

/* With a 1 MiB frame limit, every node's sockets drop a peer that sends a
 * larger frame; these pushes and pulls need several frames per server (a
 * sparse table of 8-byte rows: 3 frames of keys and of values per server; a
 * dense table of 16-byte rows pushed and pulled as ranges: 2 per server), so
 * they only arrive whole if the client splits them. BSP makes every sum exact. */
#define SPLIT_KEYS  600000
#define SPLIT_RANGE 200000

static int split_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    int W = loom_num_workers(n);
    loom_table_opts so = opts_of(LOOM_F64, 1, LOOM_BSP, 0),
                    dopt = opts_of(LOOM_F32, 4, LOOM_BSP, 0);
    dopt.storage = LOOM_DENSE;
    dopt.key_end = SPLIT_RANGE;
    loom_table *sparse, *dense;
    CHECK_OK(loom_table_open(n, "split_sparse", &so, &sparse));
    CHECK_OK(loom_table_open(n, "split_dense", &dopt, &dense));
    uint64_t *keys = malloc(SPLIT_KEYS * sizeof *keys);
    double *vals = malloc(SPLIT_KEYS * sizeof *vals), *got = malloc(SPLIT_KEYS * sizeof *got);
    float(*rows)[4] = malloc(SPLIT_RANGE * sizeof *rows),
    (*back)[4] = malloc(SPLIT_RANGE * sizeof *back);
    CHECK(keys && vals && got && rows && back);
    /* Keys spread over the whole uint64 range, so both servers get a share. */
    for (size_t k = 0; k < SPLIT_KEYS; k++) {
        keys[k] = k * (UINT64_MAX / SPLIT_KEYS);
        vals[k] = (double)(rank + 1) * (double)(k % 7);
    }
    for (size_t k = 0; k < SPLIT_RANGE; k++)
        for (int j = 0; j < 4; j++) rows[k][j] = (float)((rank + 1) * (int)((k + (size_t)j) % 5));
    CHECK_OK(loom_push(sparse, keys, SPLIT_KEYS, vals)); /* buffered, sent at the clock */
    loom_ts ts;
    CHECK_OK(loom_push_range_async(dense, 0, SPLIT_RANGE, rows, &ts));
    CHECK_OK(loom_wait(n, ts));
    CHECK_OK(loom_clock(n));
    CHECK_OK(loom_pull(sparse, keys, SPLIT_KEYS, got));
    CHECK_OK(loom_pull_range(dense, 0, SPLIT_RANGE, back));
    double wsum = (double)W * (W + 1) / 2; /* sum over workers of rank + 1 */
    for (size_t k = 0; k < SPLIT_KEYS; k++) CHECK(got[k] == wsum * (double)(k % 7));
    for (size_t k = 0; k < SPLIT_RANGE; k++)
        for (int j = 0; j < 4; j++)
            CHECK(back[k][j] == (float)(wsum * (double)((k + (size_t)j) % 5)));
    free(keys), free(vals), free(got), free(rows), free(back);
    return 0;
}

static void test_split_to_frame_limit(void **state)
{
    (void)state;
    harness_result r;
    harness_max_frame_mib = 1;
    /* An oversized frame costs the worker its connection and leaves its
     * request unanswered: without splitting, the job would hang. */
    alarm(120);
    int rc = harness_run(2, 2, split_worker, NULL, &r);
    alarm(0);
    harness_max_frame_mib = 0;
    assert_int_equal(rc, 0);
}

/* ---- rows on the wire: sparse, and only what changed ---- */

#define WIRE_KEYS   16
#define WIRE_WIDTH  256
#define WIRE_CLOCKS 10
#define WIRE_W      2

/* Worker w's one delta of clock c: a column of one key. */
static void wire_delta(int w, int c, uint64_t *key, int *col, float *val)
{
    *key = (uint64_t)((c * 3 + w) % (WIRE_KEYS / 2)); /* half the rows never change */
    *col = (w * 37 + c * 11) % WIRE_WIDTH;
    *val = (float)(c + 1) * (w ? -1.0f : 1.0f);
}

static int wire_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    loom_table_opts o = opts_of(LOOM_F32, WIRE_WIDTH, LOOM_BSP, 0);
    loom_table *t;
    CHECK_OK(loom_table_open(n, "wire", &o, &t));
    uint64_t all[WIRE_KEYS];
    for (int k = 0; k < WIRE_KEYS; k++) all[k] = (uint64_t)k;
    static _Thread_local float got[WIRE_KEYS][WIRE_WIDTH], want[WIRE_KEYS][WIRE_WIDTH],
        row[WIRE_WIDTH];
    memset(want, 0, sizeof want);
    for (int c = 0; c < WIRE_CLOCKS; c++) {
        CHECK_OK(loom_pull(t, all, WIRE_KEYS, got));
        CHECK(memcmp(got, want, sizeof got) == 0); /* bit for bit */
        uint64_t key;
        int col;
        float val;
        wire_delta(rank, c, &key, &col, &val);
        memset(row, 0, sizeof row);
        row[col] = val;
        CHECK_OK(loom_push(t, &key, 1, row));
        CHECK_OK(loom_clock(n));
        for (int w = 0; w < WIRE_W; w++) {
            wire_delta(w, c, &key, &col, &val);
            want[key][col] += val;
        }
    }
    loom_filter_stats push, pull;
    CHECK_OK(loom_table_filter_stats(t, LOOM_DIR_PUSH, &push));
    CHECK_OK(loom_table_filter_stats(t, LOOM_DIR_PULL, &pull));
    /* One push a clock, of one row with one value: sparse, so far fewer bytes. */
    CHECK(push.messages == WIRE_CLOCKS);
    CHECK(push.bytes_raw == WIRE_CLOCKS * (8 + WIRE_WIDTH * 4));
    CHECK(push.bytes_wire * 8 < push.bytes_raw);
    /* The rows that did not change since the last pull stay out of the replies. */
    CHECK(pull.unchanged >= (uint64_t)(WIRE_CLOCKS - 1) * WIRE_KEYS / 2);
    CHECK(pull.bytes_wire * 8 < pull.bytes_raw);
    CHECK(pull.dropped == 0);
    return 0;
}

static void test_sparse_rows_and_changes_only(void **state)
{
    (void)state;
    harness_result r;
    assert_int_equal(harness_run(2, WIRE_W, wire_worker, NULL, &r), 0);
}

/* A pull request's key list through the key cache: a repeated pull of the
 * same keys sends their digest (8 bytes) instead of the list, and so does its
 * reply, so each repeat is exactly 2 * (8 * KEYS - 8) bytes smaller than the
 * first; the rows are right every time. */
#define DIGEST_KEYS 100

static int digest_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    loom_table_opts o = opts_of(LOOM_F64, 4, LOOM_ASP, 0);
    o.cache = 0; /* every pull asks the server */
    o.filter_push = NULL;
    o.filter_pull = "keycache";
    loom_table *t;
    CHECK_OK(loom_table_open(n, "digests", &o, &t));
    uint64_t keys[DIGEST_KEYS];
    static _Thread_local double rows[DIGEST_KEYS][4], got[DIGEST_KEYS][4];
    for (int k = 0; k < DIGEST_KEYS; k++) {
        keys[k] = (uint64_t)(3 * k + 1);
        for (int j = 0; j < 4; j++) rows[k][j] = j == k % 4 ? k + 0.5 : 0;
    }
    loom_ts ts;
    CHECK_OK(loom_push_async(t, keys, DIGEST_KEYS, rows, &ts));
    CHECK_OK(loom_wait(n, ts));
    uint64_t wire[4], messages[4];
    for (int i = 0; i < 4; i++) {
        loom_filter_stats st;
        CHECK_OK(loom_table_filter_stats(t, LOOM_DIR_PULL, &st));
        wire[i] = st.bytes_wire;
        messages[i] = st.messages;
        if (i == 3) break;
        CHECK_OK(loom_pull(t, keys, DIGEST_KEYS, got));
        CHECK(memcmp(got, rows, sizeof got) == 0);
    }
    for (int i = 0; i < 3; i++) CHECK(messages[i + 1] - messages[i] == 2); /* request, reply */
    uint64_t first = wire[1] - wire[0], second = wire[2] - wire[1], third = wire[3] - wire[2];
    if (first - second != 2 * (8 * DIGEST_KEYS - 8) || second != third)
        fprintf(stderr, "pull bytes: %llu, then %llu, %llu\n", (unsigned long long)first,
                (unsigned long long)second, (unsigned long long)third);
    CHECK(first - second == 2 * (8 * DIGEST_KEYS - 8) && second == third);
    return 0;
}

static void test_repeated_pull_sends_digest(void **state)
{
    (void)state;
    harness_result r;
    assert_int_equal(harness_run(1, 1, digest_worker, NULL, &r), 0);
}

/* Filter specs are checked when the table is opened, with a sentence. */
static int bad_filter_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    loom_table_opts o = opts_of(LOOM_I32, 2, LOOM_ASP, 0);
    loom_table *t;
    o.filter_push = "quant:8"; /* lossy on an integer table */
    CHECK(loom_table_open(n, "bad", &o, &t) == LOOM_EINVAL);
    o = opts_of(LOOM_F32, 2, LOOM_ASP, 0);
    o.filter_pull = "kkt:0.5"; /* kkt filters pushed gradients only */
    CHECK(loom_table_open(n, "bad", &o, &t) == LOOM_EINVAL);
    o.filter_pull = "sigmod:0.1"; /* a reply must carry every changed row */
    CHECK(loom_table_open(n, "bad", &o, &t) == LOOM_EINVAL);
    o.filter_pull = "nosuch";
    CHECK(loom_table_open(n, "bad", &o, &t) == LOOM_EINVAL);
    o.filter_pull = "keycache,zstd,sparse";
    CHECK_OK(loom_table_open(n, "good", &o, &t));
    return 0;
}

static void test_filter_specs_checked(void **state)
{
    (void)state;
    harness_result r;
    assert_int_equal(harness_run(1, 1, bad_filter_worker, NULL, &r), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_to_frame_limit),
        cmocka_unit_test(test_sparse_rows_and_changes_only),
        cmocka_unit_test(test_repeated_pull_sends_digest),
        cmocka_unit_test(test_filter_specs_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
