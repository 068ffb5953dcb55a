/* Whole jobs in one process (threads, real TCP on loopback): consistency
 * models, updaters, read-my-writes, ranges, the cache, errors, barriers and
 * bounded delay, each checked against a reference computed here. Runs under
 * ThreadSanitizer in CI. What goes on the wire (frame limits, sparse rows,
 * digests, filter specs): test_ps_wire.c. */
#include "ps_inproc.h"

/* ---- BSP: every pull equals a sequential computation exactly ---- */

#define BSP_KEYS   40
#define BSP_CLOCKS 8
#define BSP_W      3

/* The delta worker w pushes at clock c for its j-th (unsorted, repeating) key. */
static uint64_t bsp_key(int w, int c, int j)
{
    return (uint64_t)((c * 7 + w * 13 + j * j) % BSP_KEYS);
}

static int64_t bsp_delta(int w, int c, int j, int col)
{
    return (int64_t)((w + 1) * 1000 + c * 10 + j) * (col + 1);
}

static int bsp_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    loom_table_opts o = opts_of(LOOM_I64, 2, LOOM_BSP, 0);
    loom_table *t;
    CHECK_OK(loom_table_open(n, "bsp", &o, &t));
    uint64_t all[BSP_KEYS];
    for (int k = 0; k < BSP_KEYS; k++) all[k] = (uint64_t)(BSP_KEYS - 1 - k); /* descending */
    for (int c = 0; c < BSP_CLOCKS; c++) {
        /* Pull first: must hold exactly the updates of clocks < c of every worker. */
        int64_t got[BSP_KEYS][2], want[BSP_KEYS][2];
        CHECK_OK(loom_pull(t, all, BSP_KEYS, got));
        memset(want, 0, sizeof want);
        for (int pc = 0; pc < c; pc++)
            for (int w = 0; w < BSP_W; w++)
                for (int j = 0; j < 12; j++)
                    for (int col = 0; col < 2; col++)
                        want[bsp_key(w, pc, j)][col] += bsp_delta(w, pc, j, col);
        for (int k = 0; k < BSP_KEYS; k++)
            for (int col = 0; col < 2; col++) CHECK(got[k][col] == want[all[k]][col]);
        uint64_t keys[12];
        int64_t vals[12][2];
        for (int j = 0; j < 12; j++) {
            keys[j] = bsp_key(rank, c, j);
            for (int col = 0; col < 2; col++) vals[j][col] = bsp_delta(rank, c, j, col);
        }
        CHECK_OK(loom_push(t, keys, 12, vals));
        CHECK_OK(loom_clock(n));
    }
    return 0;
}

static void test_bsp_exact(void **state)
{
    (void)state;
    harness_result r;
    assert_int_equal(harness_run(2, BSP_W, bsp_worker, NULL, &r), 0);
}

/* ---- SSP(s): reads within the bound, and clocks never further apart ---- */

#define SSP_S      2
#define SSP_W      3
#define SSP_CLOCKS 12

typedef struct clock_log {
    pthread_mutex_t mu;
    long seq;                             /* a total order of the events below */
    long called[SSP_W][SSP_CLOCKS + 1];   /* when worker w called clock() to enter clock c */
    long returned[SSP_W][SSP_CLOCKS + 1]; /* when that call returned */
} clock_log;

static long log_event(clock_log *l)
{
    pthread_mutex_lock(&l->mu);
    long s = ++l->seq;
    pthread_mutex_unlock(&l->mu);
    return s;
}

static void slow_down(void)
{
    /* The slow worker's extra work; what it proves does not depend on its length. */
    volatile double x = 0;
    for (int i = 0; i < 2000000; i++) x += sqrt((double)i);
    (void)x;
}

static int ssp_worker(loom_node *n, int rank, void *arg)
{
    clock_log *l = arg;
    loom_table_opts o = opts_of(LOOM_I64, 1, LOOM_SSP, SSP_S);
    loom_table *t;
    CHECK_OK(loom_table_open(n, "ssp", &o, &t));
    uint64_t keys[SSP_W];
    for (int w = 0; w < SSP_W; w++) keys[w] = (uint64_t)w;
    for (int c = 0; c < SSP_CLOCKS; c++) {
        if (rank == SSP_W - 1) slow_down();
        int64_t one = 1;
        uint64_t me = (uint64_t)rank;
        CHECK_OK(loom_push(t, &me, 1, &one));
        int64_t got[SSP_W];
        CHECK_OK(loom_pull(t, keys, SSP_W, got));
        for (int w = 0; w < SSP_W; w++) {
            if (w == rank) {
                CHECK(got[w] == c + 1); /* read-my-writes, this clock's push included */
            } else {
                CHECK(got[w] >= c - SSP_S);     /* all of clocks < c - s */
                CHECK(got[w] <= c + SSP_S + 1); /* nobody is more than s clocks ahead */
            }
        }
        l->called[rank][c + 1] = log_event(l);
        CHECK_OK(loom_clock(n));
        l->returned[rank][c + 1] = log_event(l);
    }
    return 0;
}

static void test_ssp_bound(void **state)
{
    (void)state;
    clock_log *l = calloc(1, sizeof *l);
    pthread_mutex_init(&l->mu, NULL);
    harness_result r;
    assert_int_equal(harness_run(2, SSP_W, ssp_worker, l, &r), 0);
    /* A worker that entered clock c (its clock() returned) did so only after
     * every other worker had at least called clock() to enter c - s. */
    int blocked = 0;
    for (int w = 0; w < SSP_W; w++)
        for (int c = 1; c <= SSP_CLOCKS; c++) {
            int need = c - SSP_S;
            for (int v = 0; v < SSP_W && need >= 1; v++) {
                if (v == w) continue;
                assert_true(l->called[v][need] != 0);
                assert_true(l->called[v][need] < l->returned[w][c]);
            }
            /* Evidence the gate works, not just that workers happened to be close. */
            if (w != SSP_W - 1 && need >= 1 && l->called[SSP_W - 1][need] > l->called[w][c])
                blocked++;
        }
    assert_true(blocked > 0);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

/* ---- ASP: a fast worker never waits for a stuck one ---- */

/* How long the stuck worker waits for the fast one's 50 clocks (milliseconds
 * of work) before it gives up and the test fails saying ASP blocked: a bound
 * far above any run time, so a failure shows as this message rather than as
 * CTest's timeout. */
enum { ASP_BOUND_S = 30 };

typedef struct asp_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int fast_done;
    int gave_up; /* the stuck worker stopped waiting after ASP_BOUND_S */
} asp_state;

static int asp_worker(loom_node *n, int rank, void *arg)
{
    asp_state *st = arg;
    loom_table_opts o = opts_of(LOOM_F32, 4, LOOM_ASP, 0);
    loom_table *t;
    CHECK_OK(loom_table_open(n, "asp", &o, &t));
    if (rank == 1) {
        /* Stuck at clock 0 until the other worker has run 50 clocks: under any
         * blocking model that never happens, and after ASP_BOUND_S this worker
         * leaves the job (which lets a blocked fast worker go on) and the test
         * fails. */
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += ASP_BOUND_S;
        pthread_mutex_lock(&st->mu);
        while (!st->fast_done && !st->gave_up)
            st->gave_up = pthread_cond_timedwait(&st->cv, &st->mu, &deadline) == ETIMEDOUT;
        pthread_mutex_unlock(&st->mu);
        return 0;
    }
    uint64_t k[2] = {5, 9};
    float v[2][4] = {{1, 1, 1, 1}, {2, 2, 2, 2}}, out[2][4];
    for (int c = 0; c < 50; c++) {
        CHECK_OK(loom_push(t, k, 2, v));
        CHECK_OK(loom_pull(t, k, 2, out));
        CHECK(out[0][0] == (float)(c + 1) && out[1][3] == (float)(2 * (c + 1)));
        CHECK_OK(loom_clock(n));
    }
    CHECK(loom_current_clock(n) == 50);
    pthread_mutex_lock(&st->mu);
    st->fast_done = 1;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
    return 0;
}

static void test_asp_never_blocks(void **state)
{
    (void)state;
    asp_state st = {.fast_done = 0};
    pthread_mutex_init(&st.mu, NULL);
    pthread_cond_init(&st.cv, NULL);
    harness_result r;
    int rc = harness_run(1, 2, asp_worker, &st, &r);
    if (st.gave_up)
        fail_msg("ASP blocked: worker 0 did not finish 50 clocks within %d s while worker 1 "
                 "stayed at clock 0",
                 ASP_BOUND_S);
    assert_int_equal(rc, 0);
    pthread_cond_destroy(&st.cv);
    pthread_mutex_destroy(&st.mu);
}

/* ---- updaters, end to end, against formulas computed here ---- */

static double ref_ftrl_w(double z, double nsum, const loom_table_opts *o)
{
    if (fabs(z) <= o->l1) return 0;
    double sign = z < 0 ? -1 : 1;
    return -(z - sign * o->l1) / ((o->beta + sqrt(nsum)) / o->lr + o->l2);
}

static void clip_user(const loom_update *u, void *user)
{
    (void)user;
    /* value = clamp(value + delta, -limit, limit) on an f64 table; counts calls in state */
    double *v = u->value, *st = u->state;
    const double *d = u->delta;
    for (uint32_t j = 0; j < u->width; j++) {
        double x = v[j] + d[j];
        double lim = u->opts->params[0];
        v[j] = x > lim ? lim : x < -lim ? -lim : x;
        st[j] += 1;
    }
}

static int updater_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    const char *names[] = {"sgd", "adagrad", "ftrl", "assign", "clip"};
    enum { NK = 6, STEPS = 25 };
    for (int u = 0; u < 5; u++) {
        loom_table_opts o = opts_of(LOOM_F64, 1, LOOM_ASP, 0);
        o.updater = names[u];
        o.lr = 0.3;
        o.l1 = u == 2 ? 0.05 : 0.0;
        o.l2 = 0.01;
        o.beta = 1.0;
        o.eps = 1e-8;
        o.params[0] = 2.5;
        o.storage = LOOM_DENSE;
        o.key_end = 1000;
        loom_table *t;
        CHECK_OK(loom_table_open(n, names[u], &o, &t));
        uint64_t keys[NK] = {0, 3, 499, 500, 501, 999}; /* both servers */
        double w[NK] = {0}, acc[NK] = {0}, z[NK] = {0};
        uint64_t seed = 99 + (uint64_t)u;
        for (int s = 0; s < STEPS; s++) {
            double g[NK];
            for (int k = 0; k < NK; k++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                g[k] = (double)(seed >> 11) / 9007199254740992.0 * 2 - 1;
                switch (u) {
                case 0:
                    w[k] -= o.lr * (g[k] + o.l2 * w[k]);
                    break;
                case 1:
                    acc[k] += g[k] * g[k];
                    w[k] -= o.lr * g[k] / (sqrt(acc[k]) + o.eps);
                    break;
                case 2: {
                    double sigma = (sqrt(acc[k] + g[k] * g[k]) - sqrt(acc[k])) / o.lr;
                    z[k] += g[k] - sigma * w[k];
                    acc[k] += g[k] * g[k];
                    w[k] = ref_ftrl_w(z[k], acc[k], &o);
                    break;
                }
                case 3:
                    w[k] = g[k];
                    break;
                default:
                    w[k] = fmin(2.5, fmax(-2.5, w[k] + g[k]));
                }
            }
            loom_ts ts;
            CHECK_OK(loom_push_async(t, keys, NK, g, &ts));
            CHECK_OK(loom_wait(n, ts));
        }
        CHECK_OK(loom_barrier(n)); /* drops the cache: the next pull asks the servers */
        double got[NK];
        CHECK_OK(loom_pull(t, keys, NK, got));
        for (int k = 0; k < NK; k++) {
            if (fabs(got[k] - w[k]) > 1e-9 * (1 + fabs(w[k]))) {
                fprintf(stderr, "updater %s key %llu: got %.12g want %.12g\n", names[u],
                        (unsigned long long)keys[k], got[k], w[k]);
                return 1;
            }
        }
    }
    return 0;
}

static void test_updaters_end_to_end(void **state)
{
    (void)state;
    harness_result r;
    assert_int_equal(harness_run(2, 1, updater_worker, NULL, &r), 0);
}

/* ---- read-my-writes through buffered, in-flight and cached rows ---- */

static int rmw_worker(loom_node *n, int rank, void *arg)
{
    (void)rank;
    loom_consistency model = *(const loom_consistency *)arg;
    loom_table_opts o = opts_of(LOOM_I64, 3, model, 3);
    o.flush_rows = 7; /* automatic flushes put pushes in flight at odd moments */
    loom_table *t;
    CHECK_OK(loom_table_open(n, "rmw", &o, &t));
    enum { NK = 64 };
    static _Thread_local int64_t want[NK][3];
    memset(want, 0, sizeof want);
    uint64_t seed = 7;
    loom_ts pending[64];
    int npending = 0;
    for (int step = 0; step < 600; step++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        int op = (int)(seed >> 60) % 5;
        uint64_t keys[5];
        int64_t vals[5][3];
        for (int i = 0; i < 5; i++) {
            keys[i] = ((seed >> (8 * i)) % NK) * (UINT64_MAX / NK); /* spread over servers */
            for (int c = 0; c < 3; c++) vals[i][c] = (int64_t)((seed >> (3 * i + c)) % 100) - 50;
        }
        if (op <= 1) {
            CHECK_OK(loom_push(t, keys, 5, vals));
        } else if (op == 2 && npending < 64) {
            static int64_t copies[64][5][3];
            static uint64_t kcopies[64][5];
            memcpy(copies[npending], vals, sizeof vals);
            memcpy(kcopies[npending], keys, sizeof keys);
            CHECK_OK(
                loom_push_async(t, kcopies[npending], 5, copies[npending], &pending[npending]));
            npending++;
        } else if (op == 3) {
            CHECK_OK(loom_clock(n));
            for (int i = 0; i < npending; i++) CHECK_OK(loom_wait(n, pending[i]));
            npending = 0;
            continue;
        } else {
            int64_t got[5][3];
            CHECK_OK(loom_pull(t, keys, 5, got));
            for (int i = 0; i < 5; i++)
                for (int c = 0; c < 3; c++)
                    CHECK(got[i][c] == want[keys[i] / (UINT64_MAX / NK)][c]);
            continue;
        }
        for (int i = 0; i < 5; i++)
            for (int c = 0; c < 3; c++) want[keys[i] / (UINT64_MAX / NK)][c] += vals[i][c];
    }
    for (int i = 0; i < npending; i++) CHECK_OK(loom_wait(n, pending[i]));
    return 0;
}

static void test_read_my_writes(void **state)
{
    (void)state;
    /* SSP applies pushes on arrival, BSP at the end of their clock: the
     * reader's bookkeeping of its own writes must be exact under both. */
    loom_consistency models[] = {LOOM_SSP, LOOM_BSP, LOOM_ASP};
    for (int i = 0; i < 3; i++) {
        harness_result r;
        assert_int_equal(harness_run(3, 1, rmw_worker, &models[i], &r), 0);
    }
}

/* ---- loom_push_async: the caller's buffers are its own again after loom_wait ---- */

#define REUSE_N 6

static int reuse_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    /* BSP: a push is acknowledged on arrival and applied when the clock ends, so
     * read-my-writes still needs its rows after loom_wait() returned. */
    loom_table_opts o = opts_of(LOOM_I64, 2, LOOM_BSP, 0);
    loom_table *t;
    CHECK_OK(loom_table_open(n, "reuse", &o, &t));
    uint64_t want_keys[REUSE_N];
    uint64_t *keys = malloc(sizeof want_keys);
    int64_t(*vals)[2] = malloc(REUSE_N * sizeof *vals),
    (*range)[2] = malloc(REUSE_N * sizeof *range);
    CHECK(keys && vals && range);
    for (int i = 0; i < REUSE_N; i++) {
        want_keys[i] = keys[i] = (uint64_t)i * (UINT64_MAX / REUSE_N); /* sorted: sent in place */
        vals[i][0] = 10 + i, vals[i][1] = -i;
        range[i][0] = 100 * (i + 1), range[i][1] = 7;
    }
    loom_ts ts, range_ts;
    CHECK_OK(loom_push_async(t, keys, REUSE_N, vals, &ts));
    CHECK_OK(loom_push_range_async(t, 1000, 1000 + REUSE_N, range, &range_ts));
    CHECK_OK(loom_wait(n, ts));
    CHECK_OK(loom_wait(n, range_ts));
    /* Reused, then freed (ASan tells a read of them). */
    for (int i = 0; i < REUSE_N; i++) {
        keys[i] = want_keys[REUSE_N - 1 - i];
        vals[i][0] = vals[i][1] = range[i][0] = range[i][1] = -999999;
    }
    free(keys);
    free(vals);
    free(range);
    /* Before the clock ends the rows are own writes; after it, applied. */
    for (int pass = 0; pass < 2; pass++) {
        int64_t got[REUSE_N][2], got_range[REUSE_N][2];
        CHECK_OK(loom_pull(t, want_keys, REUSE_N, got));
        CHECK_OK(loom_pull_range(t, 1000, 1000 + REUSE_N, got_range));
        for (int i = 0; i < REUSE_N; i++) {
            CHECK(got[i][0] == 10 + i && got[i][1] == -i);
            CHECK(got_range[i][0] == 100 * (i + 1) && got_range[i][1] == 7);
        }
        if (!pass) CHECK_OK(loom_clock(n));
    }
    return 0;
}

static void test_push_async_buffer_reuse(void **state)
{
    (void)state;
    harness_result r;
    assert_int_equal(harness_run(2, 1, reuse_worker, NULL, &r), 0);
}

/* ---- ranges, unsorted keys with duplicates, the cache ---- */

static int range_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    loom_table_opts o = opts_of(LOOM_F32, 2, LOOM_BSP, 0);
    o.storage = LOOM_DENSE;
    o.key_begin = 100;
    o.key_end = 1100;
    loom_table *t;
    CHECK_OK(loom_table_open(n, "dense", &o, &t));
    enum { N = 1000 };
    static float vals[2][N][2], out[2][N][2];
    for (int i = 0; i < N; i++) {
        vals[rank][i][0] = (float)i;
        vals[rank][i][1] = (float)(rank + 1);
    }
    loom_ts ts;
    CHECK_OK(loom_push_range_async(t, 100, 1100, vals[rank], &ts));
    CHECK_OK(loom_wait(n, ts));
    CHECK(loom_push_range_async(t, 99, 200, vals[rank], &ts) == LOOM_EKEYRANGE);
    CHECK_OK(loom_clock(n));
    CHECK_OK(loom_pull_range(t, 100, 1100, out[rank]));
    for (int i = 0; i < N; i++) CHECK(out[rank][i][0] == 2.0f * i && out[rank][i][1] == 3.0f);
    /* Unsorted keys with duplicates: each position gets its key's row. */
    uint64_t keys[6] = {1099, 100, 600, 100, 1099, 150};
    float rows[6][2];
    CHECK_OK(loom_pull(t, keys, 6, rows));
    for (int i = 0; i < 6; i++) CHECK(rows[i][0] == 2.0f * (float)(keys[i] - 100));
    /* The same rows again within the clock: served from the cache, no traffic. */
    loom_stats before, after;
    loom_node_stats(n, &before);
    CHECK_OK(loom_pull(t, keys, 6, rows));
    loom_node_stats(n, &after);
    CHECK(after.messages_sent == before.messages_sent);
    CHECK(after.pulls_from_cache == before.pulls_from_cache + 4); /* 4 distinct keys */
    for (int i = 0; i < 6; i++) CHECK(rows[i][1] == 3.0f);
    /* Duplicate keys in a push are combined. */
    uint64_t dk[3] = {700, 700, 701};
    float dv[3][2] = {{1, 0}, {2, 0}, {4, 0}};
    CHECK_OK(loom_push(t, dk, 3, dv));
    CHECK_OK(loom_clock(n));
    float got[2][2];
    CHECK_OK(loom_pull(t, dk + 1, 2, got));
    CHECK(got[0][0] == 2.0f * 600 + 2 * 3.0f && got[1][0] == 2.0f * 601 + 2 * 4.0f);
    CHECK(loom_pull(t, (uint64_t[]){1100}, 1, got) == LOOM_EKEYRANGE);
    /* A key outside among keys inside, sorted or not, first, last or between:
     * refused, nothing sent. */
    static const uint64_t outside[][3] = {{99, 100, 101},   {100, 101, 1100}, {100, 5000, 1099},
                                          {1099, 100, 1100}, {700, 99, 100},  {UINT64_MAX, 1, 2}};
    float three[3][2] = {{0}};
    loom_node_stats(n, &before);
    for (size_t i = 0; i < sizeof outside / sizeof *outside; i++) {
        CHECK(loom_pull(t, outside[i], 3, three) == LOOM_EKEYRANGE);
        CHECK(loom_push_async(t, outside[i], 3, three, &ts) == LOOM_EKEYRANGE);
        CHECK(loom_push(t, outside[i], 3, three) == LOOM_EKEYRANGE);
    }
    loom_node_stats(n, &after);
    CHECK(after.messages_sent == before.messages_sent);
    return 0;
}

static void test_ranges_and_cache(void **state)
{
    (void)state;
    harness_result r;
    assert_int_equal(harness_run(3, 2, range_worker, NULL, &r), 0);
}

/* ---- errors: option mismatch, unknown updater, bad arguments; barrier ---- */

static int errors_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    loom_table_opts o = opts_of(LOOM_F32, 2, LOOM_ASP, 0);
    loom_table *t;
    if (rank == 0) CHECK_OK(loom_table_open(n, "shared", &o, &t));
    CHECK_OK(loom_barrier(n));
    if (rank == 1) {
        loom_table_opts other = o;
        other.width = 3;
        CHECK(loom_table_open(n, "shared", &other, &t) == LOOM_EMISMATCH);
        CHECK_OK(loom_table_open(n, "shared", &o, &t));
    }
    loom_table_opts bad = o;
    bad.updater = "no-such-updater";
    CHECK(loom_table_open(n, "bad", &bad, &t) == LOOM_ENOTFOUND);
    bad = o;
    bad.storage = LOOM_DENSE; /* dense with the full key range */
    CHECK(loom_table_open(n, "bad2", &bad, &t) == LOOM_EINVAL);
    bad = opts_of(LOOM_I32, 1, LOOM_ASP, 0);
    bad.updater = "adagrad";
    CHECK(loom_table_open(n, "bad3", &bad, &t) != 0);
    CHECK_OK(loom_table_open(n, "shared", &o, &t));
    CHECK(loom_pull(t, NULL, 3, NULL) == LOOM_EINVAL);
    /* A barrier makes every earlier push visible to every worker. */
    uint64_t k = 42;
    float v[2] = {1.5f, -1.0f};
    if (rank == 0) CHECK_OK(loom_push(t, &k, 1, v));
    CHECK_OK(loom_barrier(n));
    float got[2];
    CHECK_OK(loom_pull(t, &k, 1, got));
    CHECK(got[0] == 1.5f && got[1] == -1.0f);
    return 0;
}

static void test_errors_and_barrier(void **state)
{
    (void)state;
    harness_result r;
    assert_int_equal(harness_run(2, 2, errors_worker, NULL, &r), 0);
}

/* ---- a flush covers the pushes before it; so does a barrier ---- */

#define BIG_ROWS (1u << 20) /* 8 MB in flight: its acknowledgement takes a while */

static int flush_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    loom_table_opts o = opts_of(LOOM_F64, 1, LOOM_ASP, 0);
    o.storage = LOOM_DENSE;
    o.key_end = BIG_ROWS;
    o.cache = 0;
    loom_table *t;
    CHECK_OK(loom_table_open(n, "flushed", &o, &t));
    double *rows = malloc(BIG_ROWS * sizeof *rows);
    CHECK(rows != NULL);
    for (uint32_t i = 0; i < BIG_ROWS; i++) rows[i] = (double)(i % 1000) + rank;
    /* An empty update buffer: the flush must still wait for the push before it. */
    loom_ts big, flushed;
    CHECK_OK(loom_push_range_async(t, 0, BIG_ROWS, rows, &big));
    CHECK_OK(loom_flush(t, &flushed));
    CHECK_OK(loom_wait(n, flushed));
    CHECK(loom_test(n, big) == 1);
    /* Buffered pushes sent by loom_clock() (which does not wait for them) are
     * on the servers for everyone to read once a barrier returns. */
    uint64_t key = 7;
    double one = 1;
    CHECK_OK(loom_push(t, &key, 1, &one));
    CHECK_OK(loom_push_range_async(t, 0, BIG_ROWS, rows, &big));
    CHECK_OK(loom_clock(n));
    CHECK_OK(loom_barrier(n));
    double got;
    CHECK_OK(loom_pull(t, &key, 1, &got));
    /* rows[7] is 7 on rank 0 and 8 on rank 1, each pushed twice; and 1 + 1. */
    CHECK(got == 2 * (7 + 8) + 2);
    free(rows);
    return 0;
}

static void test_flush_covers_earlier_pushes(void **state)
{
    (void)state;
    harness_result r;
    assert_int_equal(harness_run(2, 2, flush_worker, NULL, &r), 0);
}

/* ---- bounded delay ---- */

static void test_bounded_delay(void **state)
{
    (void)state;
    loom_delay *d;
    assert_int_equal(loom_delay_create(2, &d), 0);
    int64_t t0, t1, t2, t3;
    assert_int_equal(loom_delay_start(d, &t0), 0);
    assert_int_equal(loom_delay_start(d, &t1), 0);
    assert_int_equal(loom_delay_start(d, &t2), 0); /* needs tasks < 0: none */
    assert_int_equal(t2, 2);
    assert_false(loom_delay_ready(d));             /* task 3 needs task 0 finished */
    assert_int_equal(loom_delay_finish(d, t1), 0); /* out of order: not enough */
    assert_false(loom_delay_ready(d));
    assert_int_equal(loom_delay_finish(d, t0), 0);
    assert_true(loom_delay_ready(d));
    assert_int_equal(loom_delay_start(d, &t3), 0);
    assert_true(loom_delay_ready(d)); /* task 4 needs tasks < 2: done */
    assert_int_equal(loom_delay_set_tau(d, 0), 0);
    assert_false(loom_delay_ready(d));
    assert_int_equal(loom_delay_finish(d, t2), 0);
    assert_false(loom_delay_ready(d)); /* tau 0: task 4 needs task 3 too */
    assert_int_equal(loom_delay_finish(d, t3), 0);
    assert_true(loom_delay_ready(d));
    assert_int_equal(loom_delay_finish(d, t3), LOOM_EINVAL); /* twice */
    assert_int_equal(loom_delay_set_tau(d, LOOM_DELAY_UNBOUNDED), 0);
    for (int i = 0; i < 100; i++) assert_int_equal(loom_delay_start(d, &t0), 0);
    assert_true(loom_delay_ready(d));
    loom_delay_destroy(d);
}

/* A delayed task whose end is a push: the helper follows the timestamp. */
static int delay_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    loom_table_opts o = opts_of(LOOM_I64, 1, LOOM_ASP, 0);
    loom_table *t;
    CHECK_OK(loom_table_open(n, "tasks", &o, &t));
    loom_delay *d;
    CHECK_OK(loom_delay_create(1, &d));
    static int64_t ones[20];
    uint64_t k = 3;
    for (int i = 0; i < 20; i++) {
        int64_t task;
        CHECK_OK(loom_delay_start(d, &task));
        loom_ts ts;
        ones[i] = 1;
        CHECK_OK(loom_push_async(t, &k, 1, &ones[i], &ts));
        CHECK_OK(loom_delay_finish_on(d, n, task, ts));
    }
    CHECK_OK(loom_delay_drain(d));
    loom_delay_destroy(d);
    CHECK_OK(loom_barrier(n));
    int64_t got;
    CHECK_OK(loom_pull(t, &k, 1, &got));
    CHECK(got == 20);
    return 0;
}

static void test_delay_with_pushes(void **state)
{
    (void)state;
    harness_result r;
    assert_int_equal(harness_run(1, 1, delay_worker, NULL, &r), 0);
}

/* ---- the same guarantees under managed communication ---- */

/* Run test once per priority policy, every table with a budget of 2 Mbit/s:
 * pushes go early, servers push changed rows, flushes are paced, and every
 * guarantee above must still hold exactly. */
static void with_managed(void (*test)(void **))
{
    const loom_priority all[] = {LOOM_PRIORITY_RANDOM, LOOM_PRIORITY_ROUNDROBIN, LOOM_PRIORITY_ABS,
                                 LOOM_PRIORITY_REL};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        managed_priority = all[i];
        managed_mbits = 2;
        test(NULL);
    }
    managed_priority = LOOM_PRIORITY_NONE;
    managed_mbits = 0;
}

static void test_bsp_exact_managed(void **state)
{
    (void)state;
    with_managed(test_bsp_exact);
}

static void test_ssp_bound_managed(void **state)
{
    (void)state;
    with_managed(test_ssp_bound);
}

static void test_asp_never_blocks_managed(void **state)
{
    (void)state;
    with_managed(test_asp_never_blocks);
}

static void test_read_my_writes_managed(void **state)
{
    (void)state;
    with_managed(test_read_my_writes);
}

/* Servers push changed rows to the workers that cache them (SSPPush): worker
 * 0 caches rows, worker 1 changes them, and worker 0's next pull is served
 * from its cache with worker 1's change in it, its own early-sent write
 * counted exactly once. */
typedef struct push_state {
    pthread_barrier_t pulled, changed;
} push_state;

/* Poll a node's counters until `field` reaches `want` (a bound far above any
 * run time: a failure shows as a failed check, not as CTest's timeout). */
static int wait_counter(loom_node *n, size_t offset, uint64_t want)
{
    for (int i = 0; i < 30000; i++) {
        loom_stats st;
        loom_node_stats(n, &st);
        if (*(const uint64_t *)((const char *)&st + offset) >= want) return 1;
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    return 0;
}

static int push_worker(loom_node *n, int rank, void *arg)
{
    push_state *ps = arg;
    loom_table_opts o = opts_of(LOOM_F64, 4, LOOM_SSP, 2);
    o.priority = LOOM_PRIORITY_ABS;
    loom_table *t;
    CHECK_OK(loom_table_open(n, "pushed", &o, &t));
    uint64_t keys[3] = {1, 2, 3};
    double rows[3][4];
    int sent_early = 1, pulled = 0, flushed = 0;
    if (rank == 0) {
        pulled = loom_pull(t, keys, 3, rows); /* cached, and subscribed to */
        double mine[4] = {0.25, 0.25, 0.25, 0.25};
        if (!pulled) pulled = loom_push(t, keys, 1, mine); /* sent early by the manager */
        sent_early = wait_counter(n, offsetof(loom_stats, managed_rows_sent), 1);
    }
    pthread_barrier_wait(&ps->pulled); /* no check may return before a barrier */
    if (rank == 1) {
        double d[2][4] = {{1, 2, 3, 4}, {-1, -2, -3, -4}};
        loom_ts ts;
        flushed = loom_push(t, keys, 2, d);
        if (!flushed) flushed = loom_flush(t, &ts);
        if (!flushed) flushed = loom_wait(n, ts); /* applied: SSP applies on arrival */
    }
    pthread_barrier_wait(&ps->changed);
    CHECK_OK(pulled);
    CHECK_OK(flushed);
    CHECK(sent_early);
    if (rank == 0) {
        /* Rows 1 and 2 changed (row 1 twice, once by this worker). */
        CHECK(wait_counter(n, offsetof(loom_stats, pushed_rows_received), 2));
        loom_stats before, after;
        loom_node_stats(n, &before);
        CHECK_OK(loom_pull(t, keys, 3, rows));
        loom_node_stats(n, &after);
        CHECK(after.pulls_from_cache == before.pulls_from_cache + 3);
        /* Not messages_sent: heartbeats and ROWS_PUSH acks go out meanwhile. */
        CHECK(after.pulls_from_server == before.pulls_from_server);
        for (int j = 0; j < 4; j++) {
            CHECK(rows[0][j] == j + 1 + 0.25);
            CHECK(rows[1][j] == -(j + 1));
            CHECK(rows[2][j] == 0);
        }
    } else {
        loom_stats st;
        loom_node_stats(n, &st);
        CHECK(st.pushed_rows_received == 0); /* it caches nothing */
    }
    return 0;
}

static void test_servers_push_changed_rows(void **state)
{
    (void)state;
    push_state ps;
    pthread_barrier_init(&ps.pulled, NULL, 2);
    pthread_barrier_init(&ps.changed, NULL, 2);
    harness_result r;
    assert_int_equal(harness_run(1, 2, push_worker, &ps, &r), 0);
    pthread_barrier_destroy(&ps.pulled);
    pthread_barrier_destroy(&ps.changed);
}

int main(void)
{
    loom_updater_register("clip", 1, clip_user, NULL);
    test_filter = getenv("LOOM_TEST_FILTER");
    if (test_filter) {
        /* The consistency guarantees, and own writes, with these filters on. */
        const struct CMUnitTest filtered[] = {
            cmocka_unit_test(test_bsp_exact),
            cmocka_unit_test(test_ssp_bound),
            cmocka_unit_test(test_asp_never_blocks),
            cmocka_unit_test(test_read_my_writes),
            cmocka_unit_test(test_updaters_end_to_end),
            cmocka_unit_test(test_ranges_and_cache),
            /* managed communication: early pushes through the push filters,
             * servers' row pushes alongside filtered replies */
            cmocka_unit_test(test_bsp_exact_managed),
            cmocka_unit_test(test_ssp_bound_managed),
            cmocka_unit_test(test_asp_never_blocks_managed),
            cmocka_unit_test(test_read_my_writes_managed),
            cmocka_unit_test(test_servers_push_changed_rows),
        };
        return cmocka_run_group_tests(filtered, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bsp_exact),
        cmocka_unit_test(test_ssp_bound),
        cmocka_unit_test(test_asp_never_blocks),
        cmocka_unit_test(test_updaters_end_to_end),
        cmocka_unit_test(test_read_my_writes),
        cmocka_unit_test(test_push_async_buffer_reuse),
        cmocka_unit_test(test_ranges_and_cache),
        cmocka_unit_test(test_errors_and_barrier),
        cmocka_unit_test(test_bounded_delay),
        cmocka_unit_test(test_delay_with_pushes),
        cmocka_unit_test(test_flush_covers_earlier_pushes),
        cmocka_unit_test(test_bsp_exact_managed),
        cmocka_unit_test(test_ssp_bound_managed),
        cmocka_unit_test(test_asp_never_blocks_managed),
        cmocka_unit_test(test_read_my_writes_managed),
        cmocka_unit_test(test_servers_push_changed_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
