/* Distributed maps and SyncFor / AsyncFor over them (loom/dmap.h; in-process
 * jobs, threads, loopback TCP), on 1 to 3 workers, int64 and string keys:
 *
 *   - insert, erase and lookup: every worker inserts and erases its own keys,
 *     some the others' too; lookups of every key from every worker equal the
 *     test's own map (inserts applied in rank order, the last winning), and
 *     the size agrees;
 *   - SyncFor equals the serial loop (reads of the map as the pass started,
 *     sets applied at its end, the last in key order winning, then the adds)
 *     bit for bit after 1, 2 and 5 passes: a body that reads absent and
 *     present neighbours, sets its own entry, sets another key (an earlier
 *     iteration's set overridden, a new key created) and adds counts;
 *   - AsyncFor on one worker with delay 1 (and 4: a round's add to a key
 *     before the key's own set) equals the serial loop that writes
 *     in place (each iteration's writes before the next reads), bit for bit;
 *   - AsyncFor's delay on 1 to 3 workers: every iteration reads a counter that
 *     every iteration adds 1 to as exactly the adds of the rounds before (all
 *     workers') and its own worker's in this round;
 *   - AsyncFor on 1 to 3 workers with delay 2, a body that adds integer counts
 *     to keys of other owners: every add lands exactly once (the serial sums);
 *   - AsyncFor on 2 and 3 workers (delay 3) solving a diagonally dominant
 *     system keyed by int64 ends within 1e-9 of the solution (each round at
 *     least halves the largest error, as in inproc.strads);
 *   - refusals on every worker: an AsyncFor set of a key another worker owns,
 *     delay 0, empty string keys, a bad width. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "loom/dmap.h"
#include "loom/error.h"

#define WID 2
#define LO  (-100)
#define HI  2100 /* keys of the test lie in [LO, HI) */

/* ---- the test's own map: dense over [LO, HI) ---- */

typedef struct refmap {
    int have[HI - LO];
    double val[HI - LO][WID];
} refmap;

static int strs; /* string keys: "k<number>", ordered as strings */

static void name_of(int64_t k, char *out)
{
    snprintf(out, 32, "k%lld", (long long)k);
}

static int cmp_keys(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    if (!strs) return (a > b) - (a < b);
    char x[32], y[32];
    name_of(a, x), name_of(b, y);
    return strcmp(x, y);
}

/* The keys of r in the loops' order. */
static size_t ref_keys(const refmap *r, int64_t *keys)
{
    size_t n = 0;
    for (int64_t k = LO; k < HI; k++)
        if (r->have[k - LO]) keys[n++] = k;
    qsort(keys, n, sizeof *keys, cmp_keys);
    return n;
}

/* ---- a body written once, run on the map and on the test's own ---- */

typedef struct ops {
    const double *(*get)(void *c, int64_t k);
    double *(*set)(void *c, int64_t k);
    double *(*add)(void *c, int64_t k);
    void *c;
} ops;

/* Reads k - 3 and k + 6 (present or not), sets its own entry, sets k - 3 when
 * k is a multiple of 4 (overriding k - 3's own set: later in key order) and
 * k + 3 when k is even (a new key at the top; elsewhere overridden by k + 3's
 * own iteration), adds counts to three shared keys and 2 to k + 6. */
static void mixed_body(const ops *o, int64_t k, const double *v)
{
    const double *a = o->get(o->c, k - 3), *b = o->get(o->c, k + 6);
    double *row = o->set(o->c, k);
    row[0] = 0.5 * v[0] + (a ? 0.25 * a[1] : 0.1) - (b ? b[0] * 0.125 : 0);
    row[1] = v[1] * 0.75 + (a ? a[0] : 0) * 0.0625;
    if (k % 4 == 0 && k - 3 >= LO) o->set(o->c, k - 3)[0] = v[0] + 1;
    if (k % 2 == 0 && k + 3 < 1000) {
        double *r2 = o->set(o->c, k + 3);
        r2[1] = -r2[1] + v[1];
    }
    double *c = o->add(o->c, 1000 + ((k % 3) + 3) % 3);
    c[0] += 1, c[1] += (double)(((k % 7) + 7) % 7);
    if (k + 6 < 1000) o->add(o->c, k + 6)[0] += 2;
}

/* Only adds: counts that land exactly whatever the order. */
static void count_body(const ops *o, int64_t k, const double *v)
{
    (void)v;
    for (int64_t d = 1; d <= 3; d++) {
        double *c = o->add(o->c, ((k * 7 + d * 13) % 50 + 50) % 50 + 1500);
        c[0] += (double)d, c[1] += 1;
    }
}

/* the serial loops */

typedef struct refiter {
    refmap *read; /* what get reads */
    int nset, nadd;
    int64_t setk[8], addk[8];
    double setr[8][WID], addr[8][WID];
} refiter;

static const double *ref_get(void *c, int64_t k)
{
    refiter *it = c;
    return k >= LO && k < HI && it->read->have[k - LO] ? it->read->val[k - LO] : NULL;
}

static double *ref_set(void *c, int64_t k)
{
    refiter *it = c;
    for (int i = 0; i < it->nset; i++)
        if (it->setk[i] == k) return it->setr[i];
    const double *now = ref_get(c, k);
    it->setk[it->nset] = k;
    memcpy(it->setr[it->nset], now ? now : (const double[WID]){0}, sizeof it->setr[0]);
    return it->setr[it->nset++];
}

static double *ref_add(void *c, int64_t k)
{
    refiter *it = c;
    for (int i = 0; i < it->nadd; i++)
        if (it->addk[i] == k) return it->addr[i];
    it->addk[it->nadd] = k;
    memset(it->addr[it->nadd], 0, sizeof it->addr[0]);
    return it->addr[it->nadd++];
}

typedef void (*body_logic)(const ops *o, int64_t k, const double *v);

static void serial_pass(refmap *cur, body_logic f, int in_place)
{
    static __thread refmap snap, pset, padd;
    static __thread int64_t keys[HI - LO];
    memcpy(&snap, cur, sizeof snap);
    memset(&pset, 0, sizeof pset);
    memset(&padd, 0, sizeof padd);
    size_t n = ref_keys(cur, keys);
    for (size_t i = 0; i < n; i++) {
        refiter it = {in_place ? cur : &snap, 0, 0, {0}, {0}, {{0}}, {{0}}};
        ops o = {ref_get, ref_set, ref_add, &it};
        f(&o, keys[i], (in_place ? cur : &snap)->val[keys[i] - LO]);
        refmap *sets = in_place ? cur : &pset, *adds = in_place ? cur : &padd;
        for (int s = 0; s < it.nset; s++) {
            int64_t k = it.setk[s] - LO;
            sets->have[k] = 1;
            memcpy(sets->val[k], it.setr[s], sizeof it.setr[s]);
        }
        for (int s = 0; s < it.nadd; s++) {
            int64_t k = it.addk[s] - LO;
            adds->have[k] = 1;
            for (int c = 0; c < WID; c++) adds->val[k][c] += it.addr[s][c];
        }
    }
    if (in_place) return;
    for (int k = 0; k < HI - LO; k++) {
        if (pset.have[k]) cur->have[k] = 1, memcpy(cur->val[k], pset.val[k], sizeof pset.val[k]);
        if (!padd.have[k]) continue;
        if (!cur->have[k]) cur->have[k] = 1, memset(cur->val[k], 0, sizeof cur->val[k]);
        for (int c = 0; c < WID; c++) cur->val[k][c] += padd.val[k][c];
    }
}

/* ---- the same body on the map ---- */

typedef struct job {
    body_logic f;
    int async;
    uint64_t delay;
    int kind; /* keys: LOOM_DMAP_I64 or LOOM_DMAP_STR */
} job;

static const void *key_arg(int64_t k, char *buf)
{
    if (!strs) {
        memcpy(buf, &k, sizeof k);
        return buf;
    }
    name_of(k, buf);
    return buf;
}

static const double *map_get(void *c, int64_t k)
{
    char b[32];
    return loom_map_get(c, key_arg(k, b));
}

static double *map_set(void *c, int64_t k)
{
    char b[32];
    return loom_map_set(c, key_arg(k, b));
}

static double *map_add(void *c, int64_t k)
{
    char b[32];
    return loom_map_add(c, key_arg(k, b));
}

static void map_body(void *user, loom_map_iter *it, const void *key, const double *value)
{
    const job *j = user;
    int64_t k;
    if (strs)
        k = strtoll((const char *)key + 1, NULL, 10);
    else
        memcpy(&k, key, sizeof k);
    ops o = {map_get, map_set, map_add, it};
    j->f(&o, k, value);
}

/* The start: keys 3 i - 20, i < 40, with values that are not round. */
static void start_map(refmap *r)
{
    memset(r, 0, sizeof *r);
    for (int i = 0; i < 40; i++) {
        int64_t k = 3 * i - 20;
        r->have[k - LO] = 1;
        r->val[k - LO][0] = sin(0.7 * i) * 3.1;
        r->val[k - LO][1] = cos(1.3 * i) / 7.0;
    }
}

/* Inserts this worker's share of r (every W-th key, from rank on). */
static int insert_share(loom_dmap *m, const refmap *r, int rank, int W)
{
    int64_t keys[HI - LO], mine[HI - LO];
    double vals[(HI - LO) * WID];
    size_t n = ref_keys(r, keys), c = 0;
    for (size_t i = (size_t)rank; i < n; i += (size_t)W) {
        mine[c] = keys[i];
        memcpy(vals + c * WID, r->val[keys[i] - LO], sizeof r->val[0]);
        c++;
    }
    char err[256] = "";
    int rc;
    if (strs) {
        char(*nm)[32] = calloc(c + 1, 32);
        const char **p = calloc(c + 1, sizeof *p);
        for (size_t i = 0; i < c; i++) name_of(mine[i], nm[i]), p[i] = nm[i];
        rc = loom_dmap_insert(m, p, vals, c, err, sizeof err);
        free(nm), free(p);
    } else
        rc = loom_dmap_insert(m, mine, vals, c, err, sizeof err);
    if (rc) fprintf(stderr, "insert: %s\n", err);
    return rc;
}

/* Every key in [LO, HI) looked up; equal to r bit for bit. */
static int check_map(loom_dmap *m, const refmap *r)
{
    static __thread double got[(HI - LO) * WID];
    static __thread uint8_t found[HI - LO];
    static __thread char nm[HI - LO][32];
    int64_t keys[HI - LO];
    const char *p[HI - LO];
    uint64_t want = 0;
    for (int64_t k = LO; k < HI; k++) {
        keys[k - LO] = k;
        name_of(k, nm[k - LO]);
        p[k - LO] = nm[k - LO];
        want += (uint64_t)r->have[k - LO];
    }
    int rc = loom_dmap_lookup(m, strs ? (const void *)p : (const void *)keys, HI - LO, got, found);
    if (rc) return rc;
    CHECK(loom_dmap_size(m) == want);
    for (int k = 0; k < HI - LO; k++) {
        if (found[k] != r->have[k] ||
            (found[k] && memcmp(got + k * WID, r->val[k], sizeof r->val[k]))) {
            fprintf(stderr, "key %lld: found %d (want %d), %.17g %.17g (want %.17g %.17g)\n",
                    (long long)(k + LO), found[k], r->have[k], got[k * WID], got[k * WID + 1],
                    r->val[k][0], r->val[k][1]);
            return 1;
        }
    }
    return 0;
}

static int loop_worker(loom_node *n, int rank, void *arg)
{
    const job *j = arg;
    int W = loom_num_workers(n);
    static __thread refmap want;
    loom_dmap_opts o = {.keys = (loom_dmap_key_kind)j->kind, .width = WID};
    loom_dmap *m;
    char err[256] = "";
    CHECK_OK(loom_dmap_open(n, &o, &m, err, sizeof err));
    start_map(&want);
    CHECK_OK(insert_share(m, &want, rank, W));
    CHECK(!check_map(m, &want));
    static const int steps[] = {1, 1, 3}; /* after 1, 2 and 5 passes */
    for (int s = 0; s < 3; s++) {
        int rc = j->async ? loom_map_async_for(m, map_body, (void *)j, j->delay, steps[s], err,
                                               sizeof err)
                          : loom_map_sync_for(m, map_body, (void *)j, steps[s], err, sizeof err);
        if (rc) {
            fprintf(stderr, "worker %d: %s\n", rank, err);
            return rc;
        }
        for (int p = 0; p < steps[s]; p++) serial_pass(&want, j->f, j->async);
        if (check_map(m, &want)) {
            fprintf(stderr, "worker %d of %d: differs after step %d\n", rank, W, s);
            return 1;
        }
    }
    loom_dmap_free(m);
    return 0;
}

static void test_sync_for_equals_serial(void **state)
{
    (void)state;
    for (int kind = 0; kind < 2; kind++) {
        strs = kind;
        job j = {mixed_body, 0, 0, kind};
        for (int W = 1; W <= 3; W++) {
            harness_result r;
            assert_int_equal(harness_run(1, W, loop_worker, &j, &r), 0);
        }
    }
    strs = 0;
}

static void test_async_for_one_worker_in_place(void **state)
{
    (void)state;
    for (int kind = 0; kind < 2; kind++) {
        strs = kind;
        /* delay 4: a round's adds to a key and its later set (k + 6) */
        for (uint64_t delay = 1; delay <= 4; delay += 3) {
            job j = {mixed_body, 1, delay, kind};
            harness_result r;
            assert_int_equal(harness_run(1, 1, loop_worker, &j, &r), 0);
        }
    }
    strs = 0;
}

/* ---- AsyncFor's delay: what a worker reads of a key every worker adds to ---- */

#define NK      30
#define COUNTER 1000
#define DELAY   2

typedef struct seen {
    uint64_t before[8]; /* per worker: its iterations in the rounds before */
    int W;
    uint64_t j, bad;
} seen;

/* Iteration j of a worker (round j / DELAY) reads the counter as every
 * worker's adds of the rounds before and its own of this round left it. */
static void stale_body(void *user, loom_map_iter *it, const void *key, const double *value)
{
    (void)key, (void)value;
    seen *s = user;
    int64_t c = COUNTER;
    uint64_t r = s->j / DELAY, want = s->j - r * DELAY;
    for (int w = 0; w < s->W; w++) want += s->before[w] < r * DELAY ? s->before[w] : r * DELAY;
    if (loom_map_get(it, &c)[0] != (double)want) s->bad++;
    loom_map_add(it, &c)[0] += 1;
    s->j++;
}

static int stale_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    loom_dmap_opts o = {.keys = LOOM_DMAP_I64, .width = 1};
    loom_dmap *m;
    char err[256] = "";
    CHECK_OK(loom_dmap_open(n, &o, &m, err, sizeof err));
    int64_t keys[NK + 1];
    double zero[NK + 1] = {0};
    seen s = {{0}, loom_num_workers(n), 0, 0};
    for (int i = 0; i < NK; i++) keys[i] = 3 * i;
    keys[NK] = COUNTER;
    CHECK_OK(loom_dmap_insert(m, keys, zero, rank == 0 ? NK + 1 : 0, err, sizeof err));
    for (int i = 0; i <= NK; i++) s.before[loom_dmap_owner(m, &keys[i])]++;
    CHECK_OK(loom_map_async_for(m, stale_body, &s, DELAY, 1, err, sizeof err));
    CHECK(s.bad == 0 && s.j == s.before[rank]);
    double total;
    CHECK_OK(loom_dmap_lookup(m, &keys[NK], 1, &total, NULL));
    CHECK(total == NK + 1);
    loom_dmap_free(m);
    return 0;
}

static void test_async_for_delay(void **state)
{
    (void)state;
    for (int W = 1; W <= 3; W++) {
        harness_result r;
        assert_int_equal(harness_run(1, W, stale_worker, NULL, &r), 0);
    }
}

static void test_async_for_adds_exact(void **state)
{
    (void)state;
    job j = {count_body, 1, 2, LOOM_DMAP_I64};
    for (int W = 1; W <= 3; W++) {
        harness_result r;
        assert_int_equal(harness_run(1, W, loop_worker, &j, &r), 0);
    }
}

/* ---- insert, erase, lookup ---- */

static int container_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    int W = loom_num_workers(n);
    loom_dmap_opts o = {.keys = strs ? LOOM_DMAP_STR : LOOM_DMAP_I64, .width = WID};
    loom_dmap *m;
    char err[256] = "";
    CHECK_OK(loom_dmap_open(n, &o, &m, err, sizeof err));
    CHECK(loom_dmap_width(m) == WID);
    static __thread refmap want;
    memset(&want, 0, sizeof want);
    CHECK(!check_map(m, &want));
    /* every worker inserts keys 0, 5, 10, ... below 600 with its rank in the
     * value, and keys of its own above 600: the highest rank wins the shared */
    static __thread int64_t keys[512];
    static __thread double vals[512 * WID];
    static __thread char nm[512][32];
    const char *p[512];
    size_t c = 0;
    for (int64_t k = 0; k < 600; k += 5, c++) {
        keys[c] = k, vals[c * WID] = (double)rank + 0.5, vals[c * WID + 1] = -(double)k / 3;
    }
    for (int64_t k = 600 + rank; k < 900; k += W, c++)
        keys[c] = k, vals[c * WID] = (double)k * 1.25, vals[c * WID + 1] = 1.0 / (double)(k + 1);
    for (size_t i = 0; i < c; i++) name_of(keys[i], nm[i]), p[i] = nm[i];
    CHECK_OK(
        loom_dmap_insert(m, strs ? (const void *)p : (const void *)keys, vals, c, err, sizeof err));
    for (int w = 0; w < W; w++) {
        for (int64_t k = 0; k < 600; k += 5)
            want.have[k - LO] = 1, want.val[k - LO][0] = (double)(W - 1) + 0.5,
                          want.val[k - LO][1] = -(double)k / 3;
        for (int64_t k = 600 + w; k < 900; k += W)
            want.have[k - LO] = 1, want.val[k - LO][0] = (double)k * 1.25,
                          want.val[k - LO][1] = 1.0 / (double)(k + 1);
    }
    CHECK(!check_map(m, &want));
    size_t local = loom_dmap_local(m), owned = 0;
    for (int64_t k = LO; k < HI; k++) {
        char b[32];
        if (want.have[k - LO] && loom_dmap_owner(m, key_arg(k, b)) == (uint32_t)rank) owned++;
    }
    CHECK(local == owned);
    /* worker 0 erases every tenth key, the last worker keys 600 .. 629 and
     * some that were never there */
    c = 0;
    if (rank == 0)
        for (int64_t k = 0; k < 600; k += 10) keys[c++] = k;
    if (rank == W - 1)
        for (int64_t k = 600; k < 630; k++) keys[c++] = k;
    keys[c++] = 2000 + rank;
    for (size_t i = 0; i < c; i++) name_of(keys[i], nm[i]), p[i] = nm[i];
    CHECK_OK(loom_dmap_erase(m, strs ? (const void *)p : (const void *)keys, c, err, sizeof err));
    for (int64_t k = 0; k < 600; k += 10) want.have[k - LO] = 0;
    for (int64_t k = 600; k < 630; k++) want.have[k - LO] = 0;
    CHECK(!check_map(m, &want));
    /* erased keys come back with their new values */
    c = 0;
    if (rank == 1 % W) keys[c] = 20, vals[0] = 7, vals[1] = 8, c++;
    for (size_t i = 0; i < c; i++) name_of(keys[i], nm[i]), p[i] = nm[i];
    CHECK_OK(
        loom_dmap_insert(m, strs ? (const void *)p : (const void *)keys, vals, c, err, sizeof err));
    want.have[20 - LO] = 1, want.val[20 - LO][0] = 7, want.val[20 - LO][1] = 8;
    CHECK(!check_map(m, &want));
    loom_dmap_free(m);
    return 0;
}

static void test_container(void **state)
{
    (void)state;
    for (int kind = 0; kind < 2; kind++) {
        strs = kind;
        for (int W = 1; W <= 3; W++) {
            harness_result r;
            assert_int_equal(harness_run(1, W, container_worker, NULL, &r), 0);
        }
    }
    strs = 0;
}

/* ---- AsyncFor solving A x = b, x keyed by int64 (keys 10 i) ---- */

#define N 23

static double A[N][N], B[N];

static void make_system(void)
{
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < N; i++) {
        double off = 0;
        for (int j = 0; j < N; j++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            A[i][j] = i == j ? 0 : (double)(s % 2001) / 1000.0 - 1.0;
            off += fabs(A[i][j]);
        }
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        A[i][i] = 2 * off + 0.5;
        B[i] = (double)(s % 1001) / 100.0 - 5.0;
    }
}

static void solve_body(void *user, loom_map_iter *it, const void *key, const double *value)
{
    (void)user, (void)value;
    int64_t i;
    memcpy(&i, key, sizeof i);
    i /= 10;
    double r = B[i];
    for (int64_t j = 0; j < N; j++) {
        int64_t kj = 10 * j;
        if (j != i) r -= A[i][j] * loom_map_get(it, &kj)[0];
    }
    loom_map_set(it, key)[0] = r / A[i][i];
}

static int solve_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    loom_dmap_opts o = {.keys = LOOM_DMAP_I64, .width = 1};
    loom_dmap *m;
    char err[256] = "";
    CHECK_OK(loom_dmap_open(n, &o, &m, err, sizeof err));
    int64_t keys[N];
    double x0[N], got[N], want[N];
    for (int i = 0; i < N; i++) keys[i] = 10 * i, x0[i] = (double)(i % 5) - 2.0;
    CHECK_OK(loom_dmap_insert(m, keys, x0, rank == 0 ? N : 0, err, sizeof err));
    const int runs = 40;
    for (int r = 0; r < runs; r++) {
        int rc = loom_map_async_for(m, solve_body, NULL, 3, 1, err, sizeof err);
        if (rc) {
            fprintf(stderr, "worker %d: %s\n", rank, err);
            return rc;
        }
    }
    CHECK_OK(loom_dmap_lookup(m, keys, N, got, NULL));
    /* the solution: Gauss-Seidel until a pass changes nothing */
    memcpy(want, x0, sizeof want);
    double prev[N];
    int p = 0;
    do {
        memcpy(prev, want, sizeof prev);
        for (int i = 0; i < N; i++) {
            double v = B[i];
            for (int j = 0; j < N; j++)
                if (j != i) v -= A[i][j] * want[j];
            want[i] = v / A[i][i];
        }
    } while (memcmp(prev, want, sizeof prev) && ++p < 10000);
    double big = 0, worst = 0, start_err = 0;
    for (int i = 0; i < N; i++) {
        big = fmax(big, fabs(want[i]));
        worst = fmax(worst, fabs(got[i] - want[i]));
        start_err = fmax(start_err, fabs(x0[i] - want[i]));
    }
    if (start_err * pow(0.5, runs) > 1e-9 * big || worst > 1e-9 * big) {
        fprintf(stderr, "AsyncFor: max error %g (from %g), solution max %g\n", worst, start_err,
                big);
        return 1;
    }
    loom_dmap_free(m);
    return 0;
}

static void test_async_for_converges(void **state)
{
    (void)state;
    make_system();
    for (int W = 2; W <= 3; W++) {
        harness_result r;
        assert_int_equal(harness_run(1, W, solve_worker, NULL, &r), 0);
    }
}

/* ---- refusals ---- */

static void bad_set_body(void *user, loom_map_iter *it, const void *key, const double *value)
{
    (void)user, (void)value, (void)key;
    int64_t other = 0;
    loom_map_set(it, &other)[0] = 1; /* key 0: one worker's, not the others' */
}

static int refuse_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    int W = loom_num_workers(n);
    loom_dmap *m = NULL;
    char err[256] = "";
    loom_dmap_opts bad = {.keys = LOOM_DMAP_I64, .width = LOOM_DMAP_MAX_WIDTH + 1};
    CHECK(loom_dmap_open(n, &bad, &m, err, sizeof err) == LOOM_EINVAL && !m &&
          strstr(err, "width"));
    loom_dmap_opts so = {.keys = LOOM_DMAP_STR, .width = 1};
    CHECK_OK(loom_dmap_open(n, &so, &m, err, sizeof err));
    /* worker 0 gives an empty key: every worker's insert fails */
    const char *keys[] = {rank == 0 ? "" : "fine"};
    double v = 1;
    err[0] = 0;
    CHECK(loom_dmap_insert(m, keys, &v, 1, err, sizeof err) == LOOM_EINVAL);
    CHECK(strstr(err, rank == 0 ? "empty string" : "worker 0"));
    CHECK(loom_dmap_size(m) == 0);
    loom_dmap_free(m);
    loom_dmap_opts io = {.keys = LOOM_DMAP_I64, .width = 1};
    CHECK_OK(loom_dmap_open(n, &io, &m, err, sizeof err));
    int64_t ks[64];
    double vs[64] = {0};
    for (int i = 0; i < 64; i++) ks[i] = i;
    CHECK_OK(loom_dmap_insert(m, ks, vs, rank == 0 ? 64 : 0, err, sizeof err));
    err[0] = 0;
    CHECK(loom_map_async_for(m, bad_set_body, NULL, 0, 1, err, sizeof err) == LOOM_EINVAL &&
          strstr(err, "delay"));
    if (W > 1) { /* someone sets key 0, which only one worker owns */
        err[0] = 0;
        CHECK(loom_map_async_for(m, bad_set_body, NULL, 4, 1, err, sizeof err) == LOOM_EINVAL);
        CHECK(strstr(err, "owns") || strstr(err, "failed"));
    }
    loom_dmap_free(m);
    return 0;
}

static void test_refusals(void **state)
{
    (void)state;
    for (int W = 1; W <= 2; W++) {
        harness_result r;
        assert_int_equal(harness_run(1, W, refuse_worker, NULL, &r), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_container),
        cmocka_unit_test(test_sync_for_equals_serial),
        cmocka_unit_test(test_async_for_one_worker_in_place),
        cmocka_unit_test(test_async_for_adds_exact),
        cmocka_unit_test(test_async_for_delay),
        cmocka_unit_test(test_async_for_converges),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
