/* Distributed arrays (loom/darray.h; in-process jobs, threads, loopback TCP):
 *
 *   - a sparse array made from elements scattered over 1 to 3 workers, with
 *     coordinates skewed towards 0: each worker holds exactly the elements of
 *     its range, sorted; the ranges cover the box and agree on every worker;
 *     the largest part is within one coordinate's elements of an equal share
 *     (histogram balancing); the box is one past the largest index; gathered,
 *     it is the list the test made, sorted;
 *   - hosted on the servers, every worker reads each index's elements summed
 *     (and 0 elsewhere), a dense array every position's value;
 *   - fill_random gives the same values bit for bit on 1 and 3 workers, map
 *     changes each value as asked;
 *   - elements of two values (rows): gathered sorted by index, then by the
 *     values in order;
 *   - dense arrays from a generator, among them one with fewer rows than
 *     workers and one of rows of 2: every index once, the generator's
 *     values;
 *   - from a text file: every line parsed once whoever reads it, with its
 *     number in the file; a line the
 *     parser refuses fails every worker, the reader naming file and line;
 *   - saved on 3 workers, loaded on 1 and 2 (a dense one of rows of 3): the
 *     same array; a file of the
 *     directory that is not Loom's left alone; a truncated part, a missing
 *     manifest and a malformed one refused on every worker, with a sentence;
 *   - an index outside the given box refused on every worker. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "loom/darray.h"
#include "loom/error.h"

#define N    2000 /* elements of the sparse array */
#define ROWS 500  /* its first extent's largest value is below this */
#define COLS 300
#define MAXW 3

static int64_t gidx[N][2];
static double gval[N];
static char dir[] = "/tmp/loom-darray-XXXXXX";

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* Rows skewed towards 0 (a cube of a uniform draw), as a ratings file's
 * users are: an even cut of the rows would give worker 0 most elements. */
static void make_elements(void)
{
    uint64_t s = 88172645463325252ULL;
    for (int i = 0; i < N; i++) {
        double u = (double)(next(&s) % 1000000) / 1e6;
        gidx[i][0] = (int64_t)(ROWS * u * u * u);
        gidx[i][1] = (int64_t)(next(&s) % COLS);
        gval[i] = (double)(next(&s) % 10000) / 100.0 - 50.0;
    }
}

static int cmp_rec(const void *pa, const void *pb)
{
    const double *a = pa, *b = pb; /* i, j, value as doubles: all exact */
    for (int k = 0; k < 3; k++)
        if (a[k] != b[k]) return a[k] < b[k] ? -1 : 1;
    return 0;
}

/* The test's own sorted list of the elements. */
static double *sorted_elements(void)
{
    double *r = malloc(N * 3 * sizeof *r);
    for (int i = 0; i < N; i++) {
        r[3 * i] = (double)gidx[i][0];
        r[3 * i + 1] = (double)gidx[i][1];
        r[3 * i + 2] = gval[i];
    }
    qsort(r, N, 3 * sizeof *r, cmp_rec);
    return r;
}

static uint64_t COLS_OF(const loom_darray *d)
{
    uint64_t ext[2];
    loom_darray_extents(d, ext);
    return ext[1];
}

static void doubled(void *user, const int64_t *index, void *v)
{
    (void)user, (void)index;
    *(double *)v *= 2;
}

/* loom_darray_local and _gather for the arrays of doubles of this test. */
static size_t local_f64(loom_darray *d, const int64_t **idx, const double **val)
{
    const void *v;
    size_t n = loom_darray_local(d, idx, &v);
    *val = v;
    return n;
}

static int gather_f64(loom_darray *d, int64_t **idx, double **val, size_t *n)
{
    void *v;
    int rc = loom_darray_gather(d, 0, idx, &v, n);
    *val = v;
    return rc;
}

typedef struct job {
    int W;
    double *random; /* fill_random's values gathered on worker 0 */
} job;

/* This worker's elements lie in its range, sorted; ranges agree and cover
 * the box. */
static int check_ranges(loom_darray *d, int rank, int W)
{
    const int64_t *idx;
    const double *val;
    size_t n = local_f64(d, &idx, &val);
    uint64_t lo, hi, ext[2], prev_hi = 0;
    loom_darray_extents(d, ext);
    for (int w = 0; w < W; w++) {
        loom_darray_range(d, (uint32_t)w, &lo, &hi);
        CHECK(lo == prev_hi && lo <= hi);
        prev_hi = hi;
    }
    CHECK(prev_hi == ext[0]);
    loom_darray_range(d, (uint32_t)rank, &lo, &hi);
    for (size_t i = 0; i < n; i++) {
        CHECK((uint64_t)idx[2 * i] >= lo && (uint64_t)idx[2 * i] < hi);
        CHECK(i == 0 || idx[2 * i - 2] < idx[2 * i] ||
              (idx[2 * i - 2] == idx[2 * i] && idx[2 * i - 1] <= idx[2 * i + 1]));
    }
    return 0;
}

static int check_gathered(loom_darray *d, int rank, double scale)
{
    int64_t *idx;
    double *val;
    size_t n;
    CHECK_OK(gather_f64(d, &idx, &val, &n));
    if (rank) {
        CHECK(n == 0 && !idx && !val);
        return 0;
    }
    double *want = sorted_elements();
    int ok = n == N;
    for (size_t i = 0; ok && i < n; i++)
        ok = idx[2 * i] == (int64_t)want[3 * i] && idx[2 * i + 1] == (int64_t)want[3 * i + 1] &&
             val[i] == scale * want[3 * i + 2];
    free(want);
    free(idx);
    free(val);
    CHECK(ok);
    return 0;
}

/* Hosted on the servers, every worker reads each index's elements summed
 * (the test adds them in another order: 1e-12 of the largest sum apart at
 * most), and 0 where there is none. */
static int check_hosted(loom_darray *d)
{
    loom_table *t;
    char err[256] = "";
    CHECK_OK(loom_darray_host(d, "darray.hosted", &t, err, sizeof err));
    uint64_t *keys = malloc((N + 1) * sizeof *keys);
    double *want = calloc(N + 1, sizeof *want), *got = malloc((N + 1) * sizeof *got);
    CHECK(keys && want && got);
    for (int i = 0; i < N; i++) {
        keys[i] = loom_darray_key(d, gidx[i]);
        CHECK(keys[i] == (uint64_t)gidx[i][0] * COLS_OF(d) + (uint64_t)gidx[i][1]);
        for (int k = 0; k <= i; k++)
            if (gidx[k][0] == gidx[i][0] && gidx[k][1] == gidx[i][1]) want[i] += gval[k];
    }
    for (int i = 0; i < N; i++)
        for (int k = i + 1; k < N; k++)
            if (keys[k] == keys[i]) want[i] = want[k]; /* the whole sum at every copy */
    /* the first position without an element, read as 0 */
    uint64_t empty = 0;
    for (int found = 1; found;) {
        found = 0;
        for (int i = 0; i < N && !found; i++) found = keys[i] == empty;
        if (found) empty++;
    }
    keys[N] = empty;
    size_t n = N + 1;
    CHECK_OK(loom_pull(t, keys, n, got));
    for (size_t i = 0; i < n; i++) CHECK(fabs(got[i] - want[i]) <= 1e-12 * 1e4);
    int64_t outside[2] = {0, (int64_t)COLS_OF(d)};
    CHECK(loom_darray_key(d, outside) == UINT64_MAX);
    free(keys), free(want), free(got);
    return 0;
}

static int sparse_worker(loom_node *node, int rank, void *arg)
{
    job *j = arg;
    int W = j->W;
    /* this worker's given elements: every W-th of the list */
    size_t mine = 0;
    int64_t idx[N][2];
    double val[N];
    for (int i = rank; i < N; i += W) {
        memcpy(idx[mine], gidx[i], sizeof idx[mine]);
        val[mine++] = gval[i];
    }
    loom_darray_opts o = {.dims = 2}; /* the box from the elements */
    loom_darray *d;
    char err[256] = "";
    CHECK_OK(loom_darray_from_elements(node, &o, &idx[0][0], val, mine, &d, err, sizeof err));
    CHECK(loom_darray_size(d) == N && loom_darray_dims(d) == 2);
    uint64_t ext[2], most = 0, at[ROWS] = {0}, largest = 0;
    loom_darray_extents(d, ext);
    for (int i = 0; i < N; i++) {
        if ((uint64_t)gidx[i][0] + 1 > most) most = (uint64_t)gidx[i][0] + 1;
        if (++at[gidx[i][0]] > largest) largest = at[gidx[i][0]];
    }
    CHECK(ext[0] == most && ext[1] <= COLS);
    if (check_ranges(d, rank, W)) return 1;
    /* balanced: no part above an equal share by more than one coordinate's */
    for (int w = 0; w < W; w++) {
        uint64_t lo, hi, count = 0;
        loom_darray_range(d, (uint32_t)w, &lo, &hi);
        for (int i = 0; i < N; i++)
            count += (uint64_t)gidx[i][0] >= lo && (uint64_t)gidx[i][0] < hi;
        CHECK(count <= (N + W - 1) / W + largest);
    }
    if (check_gathered(d, rank, 1)) return 1;
    if (check_hosted(d)) return 1;
    loom_darray_map(d, doubled, NULL);
    if (check_gathered(d, rank, 2)) return 1;
    /* random values that depend on the index only */
    loom_darray_fill_random(d, 42, -1, 1);
    int64_t *gi;
    double *gv;
    size_t n;
    CHECK_OK(gather_f64(d, &gi, &gv, &n));
    if (rank == 0) {
        CHECK(n == N);
        for (size_t i = 0; i < n; i++) CHECK(gv[i] >= -1 && gv[i] < 1);
        if (!j->random) {
            j->random = gv;
            gv = NULL;
        } else {
            CHECK(!memcmp(j->random, gv, N * sizeof *gv));
        }
    }
    free(gi);
    free(gv);
    loom_darray_free(d);
    return 0;
}

static void test_sparse_from_elements(void **state)
{
    (void)state;
    make_elements();
    job j = {0};
    for (int W = 1; W <= MAXW; W += 2) { /* 1 then 3: fill_random compared */
        harness_result r;
        j.W = W;
        assert_int_equal(harness_run(1, W, sparse_worker, &j, &r), 0);
    }
    j.W = 2;
    harness_result r;
    assert_int_equal(harness_run(1, 2, sparse_worker, &j, &r), 0);
    free(j.random);
}

/* ---- sparse rows: two values an element ---- */

static int cmp_rec4(const void *pa, const void *pb)
{
    const double *a = pa, *b = pb; /* i, j, value, list position */
    for (int k = 0; k < 4; k++)
        if (a[k] != b[k]) return a[k] < b[k] ? -1 : 1;
    return 0;
}

/* Elements (i, j) -> (value, its position in the list): gathered sorted by
 * index, then first value, then second. */
static int rows_worker(loom_node *node, int rank, void *arg)
{
    (void)arg;
    int W = loom_num_workers(node);
    size_t mine = 0;
    int64_t idx[N][2];
    double val[N][2];
    for (int i = rank; i < N; i += W) {
        memcpy(idx[mine], gidx[i], sizeof idx[mine]);
        val[mine][0] = gval[i];
        val[mine++][1] = i;
    }
    loom_darray_opts o = {.dims = 2, .width = 2};
    loom_darray *d;
    char err[256] = "";
    CHECK_OK(
        loom_darray_from_elements(node, &o, &idx[0][0], &val[0][0], mine, &d, err, sizeof err));
    CHECK(loom_darray_width(d) == 2 && loom_darray_size(d) == N);
    int64_t *gi;
    double *gv;
    size_t n;
    CHECK_OK(gather_f64(d, &gi, &gv, &n));
    if (rank == 0) {
        double *want = malloc(N * 4 * sizeof *want);
        CHECK(want && n == N);
        for (int i = 0; i < N; i++) {
            want[4 * i] = (double)gidx[i][0];
            want[4 * i + 1] = (double)gidx[i][1];
            want[4 * i + 2] = gval[i];
            want[4 * i + 3] = i;
        }
        qsort(want, N, 4 * sizeof *want, cmp_rec4);
        for (size_t i = 0; i < n; i++)
            CHECK(gi[2 * i] == (int64_t)want[4 * i] && gi[2 * i + 1] == (int64_t)want[4 * i + 1] &&
                  gv[2 * i] == want[4 * i + 2] && gv[2 * i + 1] == want[4 * i + 3]);
        free(want);
    }
    free(gi);
    free(gv);
    loom_darray_free(d);
    return 0;
}

static void test_sparse_rows(void **state)
{
    (void)state;
    make_elements();
    for (int W = 1; W <= MAXW; W++) {
        harness_result r;
        assert_int_equal(harness_run(1, W, rows_worker, NULL, &r), 0);
    }
}

/* ---- dense ---- */

/* Value c of the dense arrays' element at index. */
static double value_at(const int64_t *index, uint32_t c)
{
    return (double)(index[0] * 10000 + index[1] * 100 + index[2]) + 0.25 * c;
}

static void gen(void *user, const int64_t *index, void *out)
{
    const uint32_t *width = user;
    double *values = out;
    for (uint32_t c = 0; c < *width; c++) values[c] = value_at(index, c);
}

typedef struct dense_case {
    uint64_t ext[3];
    uint32_t width;
} dense_case;

static int dense_worker(loom_node *node, int rank, void *arg)
{
    const dense_case *c = arg;
    uint32_t width = c->width;
    loom_darray_opts o = {.dims = 3, .extents = {c->ext[0], c->ext[1], c->ext[2]}, .width = width};
    loom_darray *d;
    char err[256] = "";
    CHECK_OK(loom_darray_generate(node, &o, gen, &width, &d, err, sizeof err));
    CHECK(loom_darray_width(d) == width);
    uint64_t lo, hi, inner = c->ext[1] * c->ext[2];
    loom_darray_range(d, (uint32_t)rank, &lo, &hi);
    const int64_t *idx;
    const double *val;
    size_t n = local_f64(d, &idx, &val);
    CHECK(n == (hi - lo) * inner);
    for (size_t i = 0; i < n; i++) {
        CHECK(idx[3 * i] == (int64_t)(lo + i / inner));
        for (uint32_t v = 0; v < width; v++) CHECK(val[i * width + v] == value_at(idx + 3 * i, v));
    }
    int64_t *gi;
    double *gv;
    size_t gn;
    CHECK_OK(gather_f64(d, &gi, &gv, &gn));
    if (rank == 0) {
        CHECK(gn == c->ext[0] * inner);
        for (size_t i = 0; i < gn; i++) {
            int64_t want[3] = {(int64_t)(i / inner), (int64_t)(i / c->ext[2] % c->ext[1]),
                               (int64_t)(i % c->ext[2])};
            CHECK(!memcmp(gi + 3 * i, want, sizeof want));
            for (uint32_t v = 0; v < width; v++) CHECK(gv[i * width + v] == value_at(want, v));
        }
    }
    free(gi);
    free(gv);
    /* hosted: every position of the box, the generator's value */
    loom_table *t;
    CHECK_OK(loom_darray_host(d, "darray.dense", &t, err, sizeof err));
    uint64_t total = c->ext[0] * inner;
    double *all = malloc(total * width * sizeof *all);
    CHECK(all);
    CHECK_OK(loom_pull_range(t, 0, total, all));
    for (uint64_t p = 0; p < total; p++) {
        int64_t at[3] = {(int64_t)(p / inner), (int64_t)(p / c->ext[2] % c->ext[1]),
                         (int64_t)(p % c->ext[2])};
        CHECK(loom_darray_key(d, at) == p);
        for (uint32_t v = 0; v < width; v++) CHECK(all[p * width + v] == value_at(at, v));
    }
    free(all);
    loom_darray_free(d);
    /* refused alike on every worker: a dense array needs its box */
    o.extents[1] = 0;
    CHECK(loom_darray_generate(node, &o, gen, &width, &d, err, sizeof err) == LOOM_EINVAL);
    CHECK(strstr(err, "every extent") != NULL);
    return 0;
}

static void test_dense_generate(void **state)
{
    (void)state;
    static const dense_case cases[] = {{{5, 4, 3}, 2}, {{2, 3, 7}, 1}};
    for (size_t k = 0; k < 2; k++)
        for (int W = 1; W <= MAXW; W++) {
            harness_result r;
            assert_int_equal(harness_run(1, W, dense_worker, (void *)&cases[k], &r), 0);
        }
}

/* ---- text ---- */

/* "i j value" lines; '#' comments and blank lines give nothing; "bad"
 * lines are refused. */
static int parse_line(void *user, uint64_t line, const char *text, size_t len, loom_darray_sink *s)
{
    char buf[128];
    _Atomic uint64_t *lines = user; /* the sum of the numbers of the lines giving elements */
    if (!len || text[0] == '#') return 0;
    if (len >= sizeof buf) return loom_darray_refuse(s, "line too long");
    memcpy(buf, text, len);
    buf[len] = '\0';
    long long i, j;
    double v;
    int used;
    if (sscanf(buf, "%lld %lld %lf%n", &i, &j, &v, &used) != 3 || buf[used])
        return loom_darray_refuse(s, "not \"i j value\": %s", buf);
    int64_t index[2] = {i, j};
    atomic_fetch_add(lines, line);
    return loom_darray_emit(s, index, &v);
}

typedef struct text_case {
    const char *path;
    int bad_line; /* 0: none */
    _Atomic uint64_t line_sum;
} text_case;

static int text_worker(loom_node *node, int rank, void *arg)
{
    text_case *c = arg;
    loom_darray_opts o = {.dims = 2, .extents = {ROWS, COLS}};
    loom_darray *d = NULL;
    char err[256] = "";
    int rc =
        loom_darray_from_file(node, c->path, &o, parse_line, &c->line_sum, &d, err, sizeof err);
    if (!c->bad_line) {
        if (rc) fprintf(stderr, "worker %d: %s\n", rank, err);
        CHECK_OK(rc);
        if (check_ranges(d, rank, loom_num_workers(node)) || check_gathered(d, rank, 1)) return 1;
        loom_darray_free(d);
        return 0;
    }
    char where[64];
    snprintf(where, sizeof where, ":%d: not \"i j value\"", c->bad_line);
    CHECK(rc == LOOM_EINVAL && !d);
    CHECK(strstr(err, where) || strstr(err, "could not make its part"));
    return 0;
}

static char *write_text(int bad_line)
{
    char *path = malloc(strlen(dir) + 32);
    snprintf(path, strlen(dir) + 32, "%s/%s.txt", dir, bad_line ? "bad" : "good");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "# i j value\n\n");
    for (int i = 0; i < N; i++) {
        if (bad_line && i == bad_line - 3) fprintf(f, "12 x 3\n");
        fprintf(f, "%lld %lld %.17g\n", (long long)gidx[i][0], (long long)gidx[i][1], gval[i]);
    }
    fclose(f);
    return path;
}

static void test_from_text(void **state)
{
    (void)state;
    make_elements();
    text_case good = {.path = write_text(0)}, bad = {.path = write_text(1234), .bad_line = 1234};
    /* element i is on line 2 + i (from 0: a comment, a blank line, then them) */
    uint64_t lines = 2 * (uint64_t)N + (uint64_t)N * (N - 1) / 2;
    for (int W = 1; W <= MAXW; W++) {
        harness_result r;
        atomic_store(&good.line_sum, 0);
        assert_int_equal(harness_run(1, W, text_worker, &good, &r), 0);
        assert_int_equal(atomic_load(&good.line_sum), lines);
        assert_int_equal(harness_run(1, W, text_worker, &bad, &r), 0);
    }
    unlink(good.path);
    unlink(bad.path);
    free((void *)good.path);
    free((void *)bad.path);
}

/* ---- save and load ---- */

typedef struct file_case {
    char path[256];
    int dense;
    int expect; /* load's result: 0 or an error code */
    const char *says;
} file_case;

static int save_worker(loom_node *node, int rank, void *arg)
{
    const file_case *c = arg;
    loom_darray *d;
    char err[256] = "";
    if (c->dense) {
        uint32_t width = 3;
        loom_darray_opts o = {.dims = 3, .extents = {5, 4, 3}, .width = width};
        CHECK_OK(loom_darray_generate(node, &o, gen, &width, &d, err, sizeof err));
    } else {
        size_t mine = 0;
        int W = loom_num_workers(node);
        int64_t idx[N][2];
        double val[N];
        for (int i = rank; i < N; i += W) {
            memcpy(idx[mine], gidx[i], sizeof idx[mine]);
            val[mine++] = gval[i];
        }
        loom_darray_opts o = {.dims = 2, .extents = {ROWS, COLS}};
        CHECK_OK(loom_darray_from_elements(node, &o, &idx[0][0], val, mine, &d, err, sizeof err));
    }
    int rc = loom_darray_save(d, c->path, err, sizeof err);
    if (rc) fprintf(stderr, "worker %d: %s\n", rank, err);
    loom_darray_free(d);
    return rc;
}

static int load_worker(loom_node *node, int rank, void *arg)
{
    const file_case *c = arg;
    loom_darray *d = NULL;
    char err[512] = "";
    int rc = loom_darray_load(node, c->path, &d, err, sizeof err);
    if (c->expect) {
        if (rc != c->expect || d || (!strstr(err, c->says) && !strstr(err, "could not make")))
            fprintf(stderr, "worker %d: rc %d, '%s'\n", rank, rc, err);
        CHECK(rc == c->expect && !d);
        CHECK(strstr(err, c->says) || strstr(err, "could not make its part"));
        return 0;
    }
    if (rc) fprintf(stderr, "worker %d: %s\n", rank, err);
    CHECK_OK(rc);
    if (!c->dense) {
        uint64_t ext[2];
        loom_darray_extents(d, ext);
        CHECK(ext[0] == ROWS && ext[1] == COLS);
        if (check_ranges(d, rank, loom_num_workers(node)) || check_gathered(d, rank, 1)) return 1;
    } else {
        const int64_t *idx;
        const double *val;
        size_t n = local_f64(d, &idx, &val);
        CHECK(loom_darray_width(d) == 3);
        for (size_t i = 0; i < n; i++)
            for (uint32_t v = 0; v < 3; v++) CHECK(val[i * 3 + v] == value_at(idx + 3 * i, v));
        CHECK(loom_darray_size(d) == 60);
    }
    loom_darray_free(d);
    return 0;
}

static void truncate_file(const char *path, long by)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size - by), 0);
}

static void test_save_load(void **state)
{
    (void)state;
    make_elements();
    harness_result r;
    for (int dense = 0; dense <= 1; dense++) {
        file_case c = {.dense = dense};
        snprintf(c.path, sizeof c.path, "%s/saved-%d", dir, dense);
        assert_int_equal(mkdir(c.path, 0700), 0);
        char keep[300];
        snprintf(keep, sizeof keep, "%s/keep.txt", c.path);
        FILE *f = fopen(keep, "w");
        assert_non_null(f);
        fputs("not Loom's\n", f);
        fclose(f);
        assert_int_equal(harness_run(1, 3, save_worker, &c, &r), 0);
        assert_int_equal(harness_run(1, 3, save_worker, &c, &r), 0); /* over the last save */
        for (int W = 1; W <= 2; W++) assert_int_equal(harness_run(1, W, load_worker, &c, &r), 0);
        f = fopen(keep, "r");
        char line[32] = "";
        assert_non_null(f);
        assert_non_null(fgets(line, sizeof line, f));
        fclose(f);
        assert_string_equal(line, "not Loom's\n");
        unlink(keep);
    }
    /* a part cut short */
    file_case c = {.expect = LOOM_EINVAL, .says = "does not match the manifest"};
    snprintf(c.path, sizeof c.path, "%s/saved-0", dir);
    char part[300];
    snprintf(part, sizeof part, "%s/part-00001-of-00003.bin", c.path);
    truncate_file(part, 8);
    assert_int_equal(harness_run(1, 2, load_worker, &c, &r), 0);
    /* a malformed manifest */
    char man[300];
    snprintf(man, sizeof man, "%s/saved-1/manifest", dir);
    FILE *f = fopen(man, "w");
    assert_non_null(f);
    fputs("loom-darray 1\nkind dense\ndims 3\nwidth 3\npart_dim 0\nextents 5 4\nparts 3\n"
          "elements 60\n",
          f);
    fclose(f);
    c = (file_case){.expect = LOOM_EINVAL, .says = "not a darray manifest"};
    snprintf(c.path, sizeof c.path, "%s/saved-1", dir);
    assert_int_equal(harness_run(1, 2, load_worker, &c, &r), 0);
    /* no manifest */
    c = (file_case){.expect = LOOM_ENOTFOUND, .says = "manifest"};
    snprintf(c.path, sizeof c.path, "%s/nothing", dir);
    assert_int_equal(harness_run(1, 2, load_worker, &c, &r), 0);
}

/* ---- refusals ---- */

static int outside_worker(loom_node *node, int rank, void *arg)
{
    (void)arg;
    int64_t idx[2] = {rank == 1 ? 7 : 1, 2};
    double v = 1;
    loom_darray_opts o = {.dims = 2, .extents = {5, 5}};
    loom_darray *d = NULL;
    char err[256] = "";
    int rc = loom_darray_from_elements(node, &o, idx, &v, 1, &d, err, sizeof err);
    CHECK(rc == LOOM_EKEYRANGE && !d);
    CHECK(strstr(err, rank == 1 ? "outside [0, 5)" : "worker 1 could not make"));
    o.part_dim = 2;
    CHECK(loom_darray_from_elements(node, &o, idx, &v, 1, &d, err, sizeof err) == LOOM_EINVAL);
    return 0;
}

static void test_refusals(void **state)
{
    (void)state;
    harness_result r;
    assert_int_equal(harness_run(1, 2, outside_worker, NULL, &r), 0);
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
        cmocka_unit_test(test_sparse_from_elements),
        cmocka_unit_test(test_sparse_rows),
        cmocka_unit_test(test_dense_generate),
        cmocka_unit_test(test_from_text),
        cmocka_unit_test(test_save_load),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
