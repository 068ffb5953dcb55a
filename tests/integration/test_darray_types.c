/* Distributed arrays of values other than doubles (loom/darray.h,
 * loom_darray_opts.type; in-process jobs, threads, loopback TCP):
 *
 *   - int64 values near 2^54 (where a double keeps only multiples of 4),
 *     int32 rows of 2 and floats, several elements at one index, made on 1
 *     to 3 workers: gathered, every element's values bytewise those given,
 *     sorted by index, then by value in the type's order (signed: -5 before
 *     3); hosted, the servers' table of the same type holds each index's sum
 *     (exact for the integers, where a sum in doubles would not be);
 *   - saved on 3 workers and loaded on 2: the type from the manifest, the
 *     same elements; map on int64 values exact past 2^53; a manifest of an
 *     unknown type refused, and one without a type (doubles) over parts of
 *     floats refused by the parts' sizes;
 *   - fill_random on int32: integers in [lo, hi), every one of them drawn,
 *     the same on 1 and 3 workers;
 *   - a dense int32 array from a generator;
 *   - an unknown type refused on every worker with a sentence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "loom/darray.h"
#include "loom/error.h"

#define NE   600 /* elements */
#define ROWS 40
#define COLS 8
#define BIG  ((int64_t)1 << 54)
#define MAXV 16 /* bytes of one element's values, at most */

typedef struct kind {
    loom_darray_type type;
    uint32_t width, size;
    const char *name; /* as the manifest says it */
} kind;

static const kind kinds[] = {
    {LOOM_DARRAY_I64, 1, 8, "i64"}, {LOOM_DARRAY_I32, 2, 4, "i32"}, {LOOM_DARRAY_F32, 1, 4, "f32"}};

typedef struct rec {
    int64_t idx[2];
    unsigned char v[MAXV];
} rec;

static rec given[NE];
static const kind *cur; /* the kind cmp_rec sorts by */
static char dir[] = "/tmp/loom-darray-types-XXXXXX";

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* Values of kind k: int64 near +-2^54 and odd, int32 of both signs, floats
 * with a fraction; about 15 elements an index. */
static void make_elements(const kind *k)
{
    uint64_t s = 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < NE; i++) {
        given[i].idx[0] = (int64_t)(next(&s) % ROWS);
        given[i].idx[1] = (int64_t)(next(&s) % COLS);
        memset(given[i].v, 0, MAXV);
        for (uint32_t c = 0; c < k->width; c++) {
            int64_t r = (int64_t)(next(&s) % 2001) - 1000;
            if (k->type == LOOM_DARRAY_I64) {
                int64_t v = (r < 0 ? -BIG : BIG) + 2 * r + 1;
                memcpy(given[i].v + 8 * c, &v, 8);
            } else if (k->type == LOOM_DARRAY_I32) {
                int32_t v = (int32_t)r;
                memcpy(given[i].v + 4 * c, &v, 4);
            } else {
                float v = (float)r / 8.0f;
                memcpy(given[i].v + 4 * c, &v, 4);
            }
        }
    }
}

static int cmp_value(const unsigned char *a, const unsigned char *b)
{
    if (cur->type == LOOM_DARRAY_I64) {
        int64_t x, y;
        memcpy(&x, a, 8), memcpy(&y, b, 8);
        return x < y ? -1 : x > y;
    }
    if (cur->type == LOOM_DARRAY_I32) {
        int32_t x, y;
        memcpy(&x, a, 4), memcpy(&y, b, 4);
        return x < y ? -1 : x > y;
    }
    float x, y; /* no NaN among them */
    memcpy(&x, a, 4), memcpy(&y, b, 4);
    return x < y ? -1 : x > y;
}

static int cmp_rec(const void *pa, const void *pb)
{
    const rec *a = pa, *b = pb;
    for (int k = 0; k < 2; k++)
        if (a->idx[k] != b->idx[k]) return a->idx[k] < b->idx[k] ? -1 : 1;
    for (uint32_t c = 0; c < cur->width; c++) {
        int r = cmp_value(a->v + c * cur->size, b->v + c * cur->size);
        if (r) return r;
    }
    return 0;
}

/* The gathered array is the given elements, sorted (on worker 0). */
static int check_gathered(loom_darray *d, int rank, const kind *k, int64_t plus)
{
    CHECK(loom_darray_value_type(d) == k->type && loom_darray_width(d) == k->width);
    int64_t *idx;
    void *val;
    size_t n;
    CHECK_OK(loom_darray_gather(d, 0, &idx, &val, &n));
    if (rank) {
        CHECK(n == 0 && !idx && !val);
        return 0;
    }
    rec *want = malloc(sizeof given);
    CHECK(want && n == NE);
    memcpy(want, given, sizeof given);
    for (int i = 0; plus && i < NE; i++) { /* int64 only */
        int64_t v;
        memcpy(&v, want[i].v, 8);
        v += plus;
        memcpy(want[i].v, &v, 8);
    }
    cur = k;
    qsort(want, NE, sizeof *want, cmp_rec);
    size_t row = (size_t)k->width * k->size;
    for (size_t i = 0; i < n; i++) {
        CHECK(!memcmp(idx + 2 * i, want[i].idx, sizeof want[i].idx));
        CHECK(!memcmp((unsigned char *)val + i * row, want[i].v, row));
    }
    free(want), free(idx), free(val);
    return 0;
}

/* Every position's sum in the hosted table: integers exact, floats close. */
static int check_hosted(loom_darray *d, const kind *k)
{
    loom_table *t;
    char err[256] = "";
    CHECK_OK(loom_darray_host(d, "types.hosted", &t, err, sizeof err));
    uint64_t keys[ROWS * COLS];
    int64_t want_i[ROWS * COLS][2] = {{0}};
    double want_f[ROWS * COLS] = {0};
    for (uint64_t p = 0; p < ROWS * COLS; p++) keys[p] = p;
    for (int i = 0; i < NE; i++) {
        uint64_t p = loom_darray_key(d, given[i].idx);
        CHECK(p == (uint64_t)given[i].idx[0] * COLS + (uint64_t)given[i].idx[1]);
        for (uint32_t c = 0; c < k->width; c++) {
            if (k->type == LOOM_DARRAY_I64) {
                int64_t v;
                memcpy(&v, given[i].v, 8);
                want_i[p][0] += v;
            } else if (k->type == LOOM_DARRAY_I32) {
                int32_t v;
                memcpy(&v, given[i].v + 4 * c, 4);
                want_i[p][c] += v;
            } else {
                float v;
                memcpy(&v, given[i].v, 4);
                want_f[p] += v;
            }
        }
    }
    unsigned char got[ROWS * COLS * MAXV];
    CHECK_OK(loom_pull(t, keys, ROWS * COLS, got));
    for (uint64_t p = 0; p < ROWS * COLS; p++)
        for (uint32_t c = 0; c < k->width; c++) {
            const unsigned char *g = got + (p * k->width + c) * k->size;
            if (k->type == LOOM_DARRAY_I64) {
                int64_t v;
                memcpy(&v, g, 8);
                CHECK(v == want_i[p][0]);
            } else if (k->type == LOOM_DARRAY_I32) {
                int32_t v;
                memcpy(&v, g, 4);
                CHECK(v == want_i[p][c]);
            } else {
                float v;
                memcpy(&v, g, 4);
                CHECK(fabs(v - want_f[p]) <= 1e-3); /* sums of eighths below 2^11 */
            }
        }
    return 0;
}

typedef struct job {
    const kind *k;
    char path[256]; /* saved here by 3 workers */
} job;

static void add_one(void *user, const int64_t *index, void *values)
{
    (void)index;
    *(int64_t *)values += *(const int64_t *)user;
}

static int make(loom_node *node, int rank, const kind *k, loom_darray **d)
{
    int W = loom_num_workers(node);
    int64_t idx[NE][2];
    unsigned char val[NE * MAXV];
    size_t mine = 0, row = (size_t)k->width * k->size;
    for (int i = rank; i < NE; i += W, mine++) {
        memcpy(idx[mine], given[i].idx, sizeof idx[mine]);
        memcpy(val + mine * row, given[i].v, row);
    }
    loom_darray_opts o = {.dims = 2, .width = k->width, .type = k->type};
    char err[256] = "";
    int rc = loom_darray_from_elements(node, &o, &idx[0][0], val, mine, d, err, sizeof err);
    if (rc) fprintf(stderr, "worker %d: %s\n", rank, err);
    return rc;
}

static int typed_worker(loom_node *node, int rank, void *arg)
{
    job *j = arg;
    loom_darray *d;
    CHECK_OK(make(node, rank, j->k, &d));
    if (check_gathered(d, rank, j->k, 0) || check_hosted(d, j->k)) return 1;
    if (loom_num_workers(node) == 3) {
        char err[256] = "";
        CHECK_OK(loom_darray_save(d, j->path, err, sizeof err));
    }
    if (j->k->type == LOOM_DARRAY_I64) {
        int64_t plus = 3; /* 2^54 + odd + 3: a double would round it */
        loom_darray_map(d, add_one, &plus);
        if (check_gathered(d, rank, j->k, plus)) return 1;
    }
    loom_darray_free(d);
    return 0;
}

typedef struct job_load {
    job *j;
    const char *says; /* NULL: loads; else the refusal's words */
} job_load;

static int load_worker(loom_node *node, int rank, void *arg)
{
    const job_load *c = arg;
    loom_darray *d = NULL;
    char err[256] = "";
    int rc = loom_darray_load(node, c->j->path, &d, err, sizeof err);
    if (c->says) {
        CHECK(rc == LOOM_EINVAL && !d);
        CHECK(strstr(err, c->says) || strstr(err, "could not make its part"));
        return 0;
    }
    CHECK_OK(rc);
    if (check_gathered(d, rank, c->j->k, 0)) return 1;
    loom_darray_free(d);
    return 0;
}

/* The manifest at path with its type line replaced by `line` ("" drops it). */
static void retype_manifest(const char *path, const char *line)
{
    char mpath[300], text[512], out[600];
    snprintf(mpath, sizeof mpath, "%s/manifest", path);
    FILE *f = fopen(mpath, "r");
    assert_non_null(f);
    size_t got = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[got] = '\0';
    char *at = strstr(text, "\ntype "), *end = at ? strchr(at + 1, '\n') : NULL;
    assert_non_null(end);
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at - text + 1), text, line, end + 1);
    f = fopen(mpath, "w");
    assert_non_null(f);
    assert_int_equal(fputs(out, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

static void test_typed_sparse(void **state)
{
    (void)state;
    for (size_t c = 0; c < sizeof kinds / sizeof *kinds; c++) {
        job j = {.k = &kinds[c]};
        snprintf(j.path, sizeof j.path, "%s/%s", dir, kinds[c].name);
        make_elements(&kinds[c]);
        harness_result r;
        for (int W = 1; W <= 3; W++) assert_int_equal(harness_run(1, W, typed_worker, &j, &r), 0);
        /* the manifest names the type */
        char mpath[300], text[512];
        snprintf(mpath, sizeof mpath, "%s/manifest", j.path);
        FILE *f = fopen(mpath, "r");
        assert_non_null(f);
        size_t got = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[got] = '\0';
        char line[32];
        snprintf(line, sizeof line, "\ntype %s\n", kinds[c].name);
        assert_non_null(strstr(text, line));
        job_load ok = {&j, NULL};
        assert_int_equal(harness_run(1, 2, load_worker, &ok, &r), 0);
    }
    /* an unknown type refused; a manifest without a type is one of doubles,
     * whose records of floats are then too short */
    job j = {.k = &kinds[1]};
    snprintf(j.path, sizeof j.path, "%s/%s", dir, kinds[1].name);
    retype_manifest(j.path, "type f16\n");
    job_load bad = {&j, "not a darray manifest"};
    harness_result r;
    assert_int_equal(harness_run(1, 2, load_worker, &bad, &r), 0);
    j.k = &kinds[2];
    snprintf(j.path, sizeof j.path, "%s/%s", dir, kinds[2].name);
    retype_manifest(j.path, "");
    bad.says = "does not match the manifest";
    assert_int_equal(harness_run(1, 2, load_worker, &bad, &r), 0);
}

/* ---- fill_random on int32, a dense int32 array ---- */

typedef struct random_job {
    int32_t *first; /* the values gathered on the first run */
} random_job;

static int random_worker(loom_node *node, int rank, void *arg)
{
    random_job *j = arg;
    loom_darray *d;
    CHECK_OK(make(node, rank, &kinds[1], &d)); /* int32 rows of 2 */
    loom_darray_fill_random(d, 7, -3, 4);
    int64_t *idx;
    void *val;
    size_t n;
    CHECK_OK(loom_darray_gather(d, 0, &idx, &val, &n));
    if (rank == 0) {
        int32_t *v = val;
        int seen[7] = {0};
        CHECK(n == NE);
        for (size_t i = 0; i < 2 * n; i++) {
            CHECK(v[i] >= -3 && v[i] < 4);
            seen[v[i] + 3] = 1;
        }
        for (int s = 0; s < 7; s++) CHECK(seen[s]);
        if (!j->first) {
            j->first = v;
            val = NULL;
        } else {
            CHECK(!memcmp(j->first, v, 2 * NE * sizeof *v));
        }
    }
    free(idx), free(val);
    loom_darray_free(d);
    return 0;
}

static void test_fill_random_integers(void **state)
{
    (void)state;
    make_elements(&kinds[1]);
    random_job j = {0};
    harness_result r;
    assert_int_equal(harness_run(1, 1, random_worker, &j, &r), 0);
    assert_int_equal(harness_run(1, 3, random_worker, &j, &r), 0);
    free(j.first);
}

static void gen_i32(void *user, const int64_t *index, void *values)
{
    (void)user;
    *(int32_t *)values = (int32_t)(index[0] * 10 + index[1]) - 20;
}

static int dense_worker(loom_node *node, int rank, void *arg)
{
    (void)arg;
    loom_darray_opts o = {.dims = 2, .extents = {5, 3}, .type = LOOM_DARRAY_I32};
    loom_darray *d;
    char err[256] = "";
    CHECK_OK(loom_darray_generate(node, &o, gen_i32, NULL, &d, err, sizeof err));
    const int64_t *idx;
    const void *val;
    size_t n = loom_darray_local(d, &idx, &val);
    for (size_t i = 0; i < n; i++)
        CHECK(((const int32_t *)val)[i] == (int32_t)(idx[2 * i] * 10 + idx[2 * i + 1]) - 20);
    int64_t *gi;
    void *gv;
    size_t gn;
    CHECK_OK(loom_darray_gather(d, 0, &gi, &gv, &gn));
    CHECK(gn == (rank ? 0 : 15));
    for (size_t i = 0; i < gn; i++)
        CHECK(((int32_t *)gv)[i] == (int32_t)((int64_t)(i / 3) * 10 + (int64_t)(i % 3)) - 20);
    free(gi), free(gv);
    loom_darray_free(d);
    return 0;
}

static void test_dense_i32(void **state)
{
    (void)state;
    harness_result r;
    assert_int_equal(harness_run(1, 2, dense_worker, NULL, &r), 0);
}

static int unknown_worker(loom_node *node, int rank, void *arg)
{
    (void)rank, (void)arg;
    loom_darray_opts o = {.dims = 1, .type = (loom_darray_type)9};
    loom_darray *d = NULL;
    char err[256] = "";
    int64_t i = 0;
    double v = 1;
    CHECK(loom_darray_from_elements(node, &o, &i, &v, 1, &d, err, sizeof err) == LOOM_EINVAL);
    CHECK(!d && strstr(err, "value type 9"));
    return 0;
}

static void test_unknown_type(void **state)
{
    (void)state;
    harness_result r;
    assert_int_equal(harness_run(1, 2, unknown_worker, NULL, &r), 0);
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    harness_remove_tree(dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_typed_sparse),
        cmocka_unit_test(test_fill_random_integers),
        cmocka_unit_test(test_dense_i32),
        cmocka_unit_test(test_unknown_type),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
