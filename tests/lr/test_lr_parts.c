/* The parts of the LR application that need no parameter server: metrics,
 * the model file, and the synthetic data generator.
 *
 * Metrics are checked against slow, obviously right versions (AUC by
 * comparing every positive with every negative); the model file by a
 * bit-exact round trip of awkward doubles and by one broken file per error
 * the loader promises to catch; the generator by reading its output back
 * (row format, label balance, power-law frequencies) and by checking that
 * the planted model predicts its own data clearly better than guessing the
 * majority class. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "lr/lr.h"

#define TEST_RNG_SEED 0x5eed1e55c0ffee01ULL
#include "test_rng.h"

/* cmocka 1.1.5 compares only floats. */
#define assert_close(a, b, tol)                                                                    \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        if (!(fabs(a_ - b_) <= (tol)))                                                             \
            fail_msg("%s = %.17g, expected %.17g (tolerance %g)", #a, a_, b_, (double)(tol));      \
    } while (0)

/* ---- metrics ---- */

/* AUC the slow way: every (positive, negative) pair, ties half. */
static double auc_pairwise(const double *m, const double *y, size_t n)
{
    double won = 0, pairs = 0;
    for (size_t i = 0; i < n; i++) {
        if (y[i] < 0) continue;
        for (size_t j = 0; j < n; j++) {
            if (y[j] > 0) continue;
            pairs++;
            won += m[i] > m[j] ? 1 : m[i] == m[j] ? 0.5 : 0;
        }
    }
    return pairs ? won / pairs : 0.5;
}

static void test_metrics_against_reference(void **state)
{
    (void)state;
    enum { MAX_N = 400 };
    double m[MAX_N], y[MAX_N];
    for (int trial = 0; trial < 200; trial++) {
        size_t n = 1 + rng() % MAX_N;
        /* Few distinct margins, so ties are everywhere; sometimes one class only. */
        unsigned levels = 1 + (unsigned)(rng() % 12);
        unsigned pos_per_mille = trial % 10 == 0 ? 0 : trial % 10 == 1 ? 1000 : rng() % 1001;
        for (size_t i = 0; i < n; i++) {
            m[i] = ((double)(rng() % levels) - levels / 2.0) * 0.75;
            if (rng() % 7 == 0) m[i] = -m[i]; /* -0.0 and +0.0 are one tie */
            y[i] = rng() % 1000 < pos_per_mille ? 1 : -1;
        }
        lr_metrics mt;
        assert_int_equal(lr_evaluate(m, y, n, &mt), 0);
        assert_int_equal(mt.n, n);
        assert_close(mt.auc, auc_pairwise(m, y, n), 1e-12);

        double loss = 0, correct = 0;
        for (size_t i = 0; i < n; i++) {
            loss += log1p(exp(-y[i] * m[i])); /* fine for these small margins */
            correct += (m[i] > 0 ? 1 : -1) == y[i];
        }
        assert_close(mt.logloss, loss / (double)n, 1e-12);
        assert_close(mt.accuracy, correct / (double)n, 1e-15);
    }
}

static void test_metrics_small_cases(void **state)
{
    (void)state;
    lr_metrics mt;
    /* A margin of exactly 0 predicts -1. */
    double m[] = {1, -1, 0, 0, -0.0};
    double y[] = {1, -1, -1, 1, -1};
    assert_int_equal(lr_evaluate(m, y, 5, &mt), 0);
    assert_close(mt.accuracy, 4.0 / 5, 1e-15);
    /* Positives {1, 0} against negatives {-1, 0, -0}: 1 beats all 3, 0 beats
     * one and ties two: (3 + 1 + 2 * 0.5) / 6. */
    assert_close(mt.auc, 5.0 / 6, 1e-15);

    double perfect[] = {3, 2, -2, -3}, yp[] = {1, 1, -1, -1};
    assert_int_equal(lr_evaluate(perfect, yp, 4, &mt), 0);
    assert_close(mt.auc, 1, 0);
    double yr[] = {-1, -1, 1, 1};
    assert_int_equal(lr_evaluate(perfect, yr, 4, &mt), 0);
    assert_close(mt.auc, 0, 0);
    assert_close(mt.accuracy, 0, 0);

    /* Refused: no rows, a label that is not +-1, a NaN margin. */
    assert_int_equal(lr_evaluate(m, y, 0, &mt), -1);
    double bad_label[] = {1, 0};
    assert_int_equal(lr_evaluate(m, bad_label, 2, &mt), -1);
    double nan_margin[] = {1, NAN};
    assert_int_equal(lr_evaluate(nan_margin, y, 2, &mt), -1);
}

static void test_logistic_stability(void **state)
{
    (void)state;
    /* The naive log(1 + exp(800)) is inf. */
    assert_close(lr_logistic_loss(-800, 1), 800, 0);
    assert_close(lr_logistic_loss(800, -1), 800, 0);
    assert_close(lr_logistic_loss(800, 1), 0, 0);
    assert_close(lr_logistic_loss(-800, -1), 0, 0);
    assert_close(lr_logistic_loss(0, 1), log(2), 1e-16);
    /* Tiny losses keep their relative precision: log(1 + e^-40) = e^-40 (1 - ...). */
    assert_close(lr_logistic_loss(40, 1) / exp(-40), 1, 1e-15);
    lr_metrics mt;
    double m[] = {800, -800}, y[] = {-1, -1};
    assert_int_equal(lr_evaluate(m, y, 2, &mt), 0);
    assert_close(mt.logloss, 400, 0);

    assert_close(lr_sigmoid(800), 1, 0);
    assert_close(lr_sigmoid(-800), 0, 0);
    assert_close(lr_sigmoid(0), 0.5, 0);
    /* Far out on the negative side the result is a tiny number, not 0 or NaN. */
    assert_close(lr_sigmoid(-700) / exp(-700), 1, 1e-12);
    for (double z = -50; z <= 50; z += 0.37) {
        assert_close(lr_sigmoid(z) + lr_sigmoid(-z), 1, 1e-15);
        assert_close(lr_logistic_loss(z, 1), -log(lr_sigmoid(z)), 1e-12);
    }
}

/* ---- the model file ---- */

static char tmp_dir[64];

static int make_tmp_dir(void **state)
{
    (void)state;
    strcpy(tmp_dir, "/tmp/test_lr_parts.XXXXXX");
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int remove_tmp_dir(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *tmp_path(const char *name)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    return path;
}

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* A double from random bits, redrawn until finite. */
static double random_double(void)
{
    for (;;) {
        uint64_t bits = rng();
        double d;
        memcpy(&d, &bits, sizeof d);
        if (isfinite(d)) return d;
    }
}

static double subnormal(void)
{
    uint64_t bits = (rng() & 0x800fffffffffffffULL) | 1; /* exponent 0, mantissa != 0 */
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static void test_model_round_trip(void **state)
{
    (void)state;
    const double special[] = {DBL_TRUE_MIN, -DBL_TRUE_MIN, DBL_MIN, DBL_MAX,  -DBL_MAX,       -0.0,
                              1e-300,       1e300,         0.1,     -1.0 / 3, 1 + DBL_EPSILON};
    const size_t nspecial = sizeof special / sizeof special[0];
    for (int trial = 0; trial < 20; trial++) {
        lr_model m = {.dim = trial == 0 ? 0 : 1 + rng() % 3000};
        m.w = calloc(m.dim ? m.dim : 1, sizeof *m.w);
        assert_non_null(m.w);
        for (uint64_t j = 0; j < m.dim; j++) {
            switch (rng() % 6) {
            case 0:
                m.w[j] = special[rng() % nspecial];
                break;
            case 1:
                m.w[j] = subnormal();
                break;
            case 2:
                m.w[j] = random_double();
                break;
            case 3:
                m.w[j] = ((double)(rng() % 2001) - 1000) / 64;
                break;
            default:
                break; /* +0.0: not stored */
            }
        }
        m.bias = trial % 3 == 0 ? -0.0 : random_double();
        char err[256] = "";
        const char *path = tmp_path("model.txt");
        assert_int_equal(lr_model_save(&m, path, err, sizeof err), 0);

        lr_model back;
        if (lr_model_load(path, &back, err, sizeof err)) fail_msg("load: %s", err);
        assert_int_equal(back.dim, m.dim);
        assert_memory_equal(&back.bias, &m.bias, sizeof m.bias);
        if (m.dim) assert_memory_equal(back.w, m.w, m.dim * sizeof *m.w);
        lr_model_free(&back);
        assert_null(back.w);
        free(m.w);
    }

    /* What the loader would refuse is not saved. */
    double w[2] = {1, INFINITY};
    lr_model bad = {2, w, 0};
    char err[256];
    assert_int_not_equal(lr_model_save(&bad, tmp_path("bad.txt"), err, sizeof err), 0);
    assert_non_null(strstr(err, "weight 1 is not finite"));
    bad.w[1] = 0;
    bad.bias = NAN;
    assert_int_not_equal(lr_model_save(&bad, tmp_path("bad.txt"), err, sizeof err), 0);
    assert_non_null(strstr(err, "bias is not finite"));
    bad.bias = 0;
    assert_int_not_equal(lr_model_save(&bad, "/nonexistent/dir/m.txt", err, sizeof err), 0);
    assert_non_null(strstr(err, "/nonexistent/dir/m.txt: cannot create"));
    /* A full disk: /dev/full through a link of our own, so that a save that
     * wrongly removes its output after the failure removes only the link. */
    struct stat st;
    if (stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode)) {
        const char *link = tmp_path("full");
        assert_int_equal(symlink("/dev/full", link), 0);
        assert_int_not_equal(lr_model_save(&bad, link, err, sizeof err), 0);
        assert_non_null(strstr(err, "full: write failed: No space left on device"));
        assert_int_equal(lstat(link, &st), 0); /* only regular files are removed */
        assert_int_equal(unlink(link), 0);
    }
}

#define WITH_NUL "loom-lr 1 dim=10 nnz=1 bias=0\n1 0.5\0\n"

static void test_model_load_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text; /* file contents, up to the first NUL unless len is given */
        size_t len;
        const char *error; /* expected after "PATH:" */
    } cases[] = {
        {"", 0, " empty file"},
        {"hello\n", 0, "1: not a Loom LR model"},
        {"loom-lr 2 dim=3 nnz=0 bias=0\n", 0, "1: unsupported model version 2"},
        {"loom-lr x dim=3 nnz=0 bias=0\n", 0, "1: bad header: no version"},
        {"loom-lr 1 dim=x nnz=0 bias=0\n", 0, "1: bad header: expected dim="},
        {"loom-lr 1 dim=-3 nnz=0 bias=0\n", 0, "1: bad header: expected dim="},
        {"loom-lr 1 dim=3 nnz=0\n", 0, "1: bad header: expected bias="},
        {"loom-lr 1x dim=3 nnz=0 bias=0\n", 0, "1: bad header: expected dim="},
        {"loom-lr 1 dim=3 bias=0\n", 0, "1: bad header: expected nnz="},
        {"loom-lr 1 dim=3 nnz=0 bias=0 extra\n", 0,
         "1: bad header: unexpected text after the "
         "bias"},
        {"loom-lr 1 dim=3 nnz=0 bias=nan\n", 0, "1: bad header: expected bias="},
        {"loom-lr 1 dim=3 nnz=0 bias=-inf\n", 0, "1: bad header: the bias is not finite"},
        {"loom-lr 1 dim=3 nnz=4 bias=0\n", 0, "1: bad header: nnz is larger than dim"},
        {"loom-lr 1 dim=18446744073709551615 nnz=0 bias=0\n", 0,
         "1: dim=18446744073709551615 is beyond the 4294967296 features"},
        {"loom-lr 1 dim=4294967297 nnz=0 bias=0\n", 0, "1: dim=4294967297 is beyond"},
        {"loom-lr 1 dim=99999999999999999999 nnz=0 bias=0\n", 0, "1: bad header: expected dim="},
        {"loom-lr 1 dim=10 nnz=2 bias=0\n5 1\n5 2\n", 0,
         "3: feature id 5 after 5: ids must be "
         "ascending"},
        {"loom-lr 1 dim=10 nnz=2 bias=0\n5 1\n2 2\n", 0, "3: feature id 2 after 5"},
        {"loom-lr 1 dim=10 nnz=1 bias=0\n10 1\n", 0, "2: feature id 10 is not below dim=10"},
        {"loom-lr 1 dim=10 nnz=1 bias=0\n3 -inf\n", 0, "2: the weight of feature 3 is not finite"},
        {"loom-lr 1 dim=10 nnz=1 bias=0\n3 1e999\n", 0,
         "2: the weight of feature 3 is not "
         "finite"},
        {"loom-lr 1 dim=10 nnz=1 bias=0\n3 nan\n", 0,
         "2: expected \"<feature id> <weight>\": bad "
         "weight"},
        {"loom-lr 1 dim=10 nnz=1 bias=0\n3 0.5x\n", 0,
         "2: expected \"<feature id> <weight>\": bad "
         "weight"},
        {"loom-lr 1 dim=10 nnz=1 bias=0\n3  0.5\n", 0,
         "2: expected \"<feature id> <weight>\": bad "
         "weight"},
        {"loom-lr 1 dim=10 nnz=1 bias=0\n-3 0.5\n", 0, "2: expected \"<feature id> <weight>\"\n"},
        {"loom-lr 1 dim=10 nnz=1 bias=0\n3\n", 0, "2: expected \"<feature id> <weight>\"\n"},
        {"loom-lr 1 dim=10 nnz=3 bias=0\n1 1\n2 2\n", 0,
         "3: the file ends after 2 weights, but "
         "the header says nnz=3"},
        {"loom-lr 1 dim=10 nnz=1 bias=0\n1 1\n2 2\n", 0,
         "3: trailing garbage after the last of "
         "the nnz=1 weights"},
        {"loom-lr 1 dim=10 nnz=1 bias=0\n1 1\n\n", 0, "3: trailing garbage"},
        {"loom-lr 1 dim=10 nnz=1 bias=0\n1 0.1234", 0, "2: line not ended by a newline"},
        {WITH_NUL, sizeof WITH_NUL - 1, "2: NUL byte in the line"},
    };
    const char *path = tmp_path("broken.txt");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = cases[i].len ? cases[i].len : strlen(cases[i].text);
        write_file(path, cases[i].text, len);
        char err[512] = "";
        lr_model m = {.dim = 7}; /* load must reset it on failure */
        int rc = lr_model_load(path, &m, err, sizeof err);
        char want[512];
        snprintf(want, sizeof want, "%s:%s", path, cases[i].error);
        /* The '\n' in some expectations marks "the message ends here". */
        char got[520];
        snprintf(got, sizeof got, "%s\n", err);
        if (rc == 0 || strncmp(got, want, strlen(want)) != 0)
            fail_msg("case %zu: rc %d, error '%s', expected '%s'", i, rc, err, want);
        assert_int_equal(m.dim, 0);
        assert_null(m.w);
    }
    char err[256];
    lr_model m;
    assert_int_not_equal(lr_model_load(tmp_path("missing.txt"), &m, err, sizeof err), 0);
    assert_non_null(strstr(err, "missing.txt: cannot open"));

    /* The smallest valid file, for contrast: the cases fail for their own reason. */
    static const char valid[] = "loom-lr 1 dim=10 nnz=1 bias=-0.5\n3 0.25\n";
    write_file(path, valid, sizeof valid - 1);
    assert_int_equal(lr_model_load(path, &m, err, sizeof err), 0);
    assert_true(m.dim == 10 && m.bias == -0.5 && m.w[3] == 0.25 && m.w[2] == 0);
    lr_model_free(&m);
}

/* w.x + bias over a hand-made dataset, with features past the model's dim. */
static void test_margin(void **state)
{
    (void)state;
    double w[3] = {0.5, -2, 0.25};
    lr_model m = {3, w, -1};
    double label[2] = {1, -1};
    size_t row[3] = {0, 3, 5};
    uint64_t idx[5] = {0, 2, 7, 1, UINT64_MAX};
    float val[5] = {2, 4, 100, 0.5f, 1};
    loom_dataset d = {.rows = 2, .nnz = 5, .label = label, .row = row, .idx = idx, .val = val};
    assert_close(lr_margin(&m, &d, 0), 0.5 * 2 + 0.25 * 4 - 1, 0); /* feature 7: weight 0 */
    assert_close(lr_margin(&m, &d, 1), -2 * 0.5 - 1, 0);
}

/* ---- the generator ---- */

/* A generated file read back (by a parser independent of src/io). */
typedef struct gen_data {
    char *text;
    size_t len;
    loom_dataset d;
    size_t positives;
} gen_data;

static void gen_free(gen_data *g)
{
    free(g->text);
    free(g->d.label);
    free(g->d.row);
    free(g->d.idx);
    free(g->d.val);
}

/* Generate into memory and check the format of every row on the way:
 * a +1/-1 label, then exactly nnz "id:1" with ids ascending in [1, features]. */
static void generate(const lr_gen_opts *o, gen_data *g, lr_model *planted)
{
    memset(g, 0, sizeof *g);
    FILE *f = open_memstream(&g->text, &g->len);
    assert_non_null(f);
    char err[256] = "";
    if (lr_generate(o, f, planted, 0, err, sizeof err)) fail_msg("lr_generate: %s", err);
    assert_int_equal(fclose(f), 0);

    loom_dataset *d = &g->d;
    d->rows = o->rows;
    d->nnz = o->rows * o->nnz;
    d->label = malloc(d->rows * sizeof *d->label);
    d->row = malloc((d->rows + 1) * sizeof *d->row);
    d->idx = malloc(d->nnz * sizeof *d->idx);
    d->val = malloc(d->nnz * sizeof *d->val);
    assert_true(d->label && d->row && d->idx && d->val);
    const char *p = g->text;
    size_t k = 0;
    for (size_t i = 0; i < d->rows; i++) {
        if (p[0] != '+' && p[0] != '-') fail_msg("row %zu: bad label '%.10s'", i, p);
        if (p[1] != '1') fail_msg("row %zu: bad label '%.10s'", i, p);
        d->label[i] = p[0] == '+' ? 1 : -1;
        g->positives += p[0] == '+';
        p += 2;
        d->row[i] = k;
        for (uint32_t j = 0; j < o->nnz; j++) {
            if (*p != ' ') fail_msg("row %zu: feature %u: expected a blank", i, j);
            char *end;
            unsigned long long id = strtoull(p + 1, &end, 10);
            if (end == p + 1 || end[0] != ':' || end[1] != '1')
                fail_msg("row %zu: feature %u: expected id:1", i, j);
            if (id < 1 || id > o->features) fail_msg("row %zu: id %llu out of range", i, id);
            if (j > 0 && id <= d->idx[k - 1] + 1)
                fail_msg("row %zu: id %llu not above the previous one", i, id);
            d->idx[k] = id - 1;
            d->val[k] = 1;
            k++;
            p = end + 2;
        }
        if (*p++ != '\n') fail_msg("row %zu: more than %u features", i, o->nnz);
    }
    d->row[d->rows] = k;
    assert_true(p == g->text + g->len);
}

static void test_gen_deterministic(void **state)
{
    (void)state;
    lr_gen_opts o = {3000, 5000, 20, 42, 1.1, 0.1};
    gen_data a, b;
    lr_model ma, mb;
    generate(&o, &a, &ma);
    generate(&o, &b, &mb);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.text, b.text, a.len);
    assert_int_equal(ma.dim, 5000);
    assert_memory_equal(ma.w, mb.w, ma.dim * sizeof *ma.w);
    assert_memory_equal(&ma.bias, &mb.bias, sizeof ma.bias);
    gen_free(&b);
    lr_model_free(&mb);

    /* Fewer rows: the same first rows. */
    o.rows = 1000;
    generate(&o, &b, NULL);
    assert_true(b.len < a.len);
    assert_memory_equal(a.text, b.text, b.len);
    gen_free(&b);

    /* Another seed: other rows and another model. */
    o.rows = 3000;
    o.seed = 43;
    generate(&o, &b, &mb);
    assert_true(a.len != b.len || memcmp(a.text, b.text, a.len) != 0);
    assert_true(memcmp(ma.w, mb.w, ma.dim * sizeof *ma.w) != 0);
    gen_free(&b);
    lr_model_free(&mb);

    /* Pinned output, so that a change of the data a seed gives (another
     * compiler, C library or machine; an edit of gen.c) is noticed. After an
     * intended change of the generator, update the hash. */
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (size_t i = 0; i < a.len; i++) h = (h ^ (unsigned char)a.text[i]) * 0x100000001b3ULL;
    for (uint64_t j = 0; j < ma.dim; j++) {
        uint64_t bits;
        memcpy(&bits, &ma.w[j], sizeof bits);
        h = (h ^ bits) * 0x100000001b3ULL;
    }
    if (h != 0x65e9ff617ddc0eccULL)
        fail_msg("generator output changed: hash %016llx", (unsigned long long)h);
    gen_free(&a);
    lr_model_free(&ma);
}

static int cmp_count_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x < y) - (x > y);
}

/* Share of all feature occurrences held by the 1% most frequent features. */
static double top_percent_share(const gen_data *g, uint64_t features)
{
    uint64_t *count = calloc(features, sizeof *count);
    assert_non_null(count);
    for (size_t k = 0; k < g->d.nnz; k++) count[g->d.idx[k]]++;
    qsort(count, features, sizeof *count, cmp_count_desc);
    uint64_t top = 0;
    for (uint64_t j = 0; j < features / 100; j++) top += count[j];
    free(count);
    return (double)top / (double)g->d.nnz;
}

static void test_gen_learnable_click_log(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 3; seed++) {
        lr_gen_opts o = {20000, 10000, 30, seed, 1.1, 0.1};
        gen_data g;
        lr_model planted;
        generate(&o, &g, &planted);

        /* Like a9a: about a quarter to a third positive. */
        double pos = (double)g.positives / (double)o.rows;
        if (pos < 0.25 || pos > 0.35)
            fail_msg("seed %llu: %.3f positive", (unsigned long long)seed, pos);

        /* Exactly round(density * features) planted weights. */
        uint64_t planted_nnz = 0;
        for (uint64_t j = 0; j < planted.dim; j++) planted_nnz += planted.w[j] != 0;
        assert_int_equal(planted_nnz, 1000);

        /* The planted model beats the majority class by a margin. */
        double *margin = malloc(o.rows * sizeof *margin);
        assert_non_null(margin);
        for (size_t i = 0; i < o.rows; i++) margin[i] = lr_margin(&planted, &g.d, i);
        lr_metrics mt;
        assert_int_equal(lr_evaluate(margin, g.d.label, o.rows, &mt), 0);
        double majority = pos > 0.5 ? pos : 1 - pos;
        printf("seed %llu: positive %.3f, planted model accuracy %.3f (majority %.3f), "
               "auc %.3f\n",
               (unsigned long long)seed, pos, mt.accuracy, majority, mt.auc);
        if (mt.accuracy < majority + 0.05 || mt.auc < 0.75)
            fail_msg("seed %llu: accuracy %.3f vs majority %.3f, auc %.3f",
                     (unsigned long long)seed, mt.accuracy, majority, mt.auc);
        free(margin);

        /* Click-log-like: the top 1% of the features are in a large share of
         * the rows; uniform popularity would give them 1%. */
        double share = top_percent_share(&g, o.features);
        if (share < 0.2)
            fail_msg("seed %llu: top 1%% of features hold only %.3f", (unsigned long long)seed,
                     share);
        gen_free(&g);
        lr_model_free(&planted);
    }

    /* zipf = 0: every feature equally popular. */
    lr_gen_opts o = {20000, 10000, 30, 1, 0, 0.1};
    gen_data g;
    generate(&o, &g, NULL);
    double share = top_percent_share(&g, o.features);
    if (share > 0.015) fail_msg("zipf 0: top 1%% of features hold %.3f", share);
    gen_free(&g);
}

/* Rows as long as the feature set allows, long rows, and steep popularity:
 * the cases where drawing distinct features is hardest. */
static void test_gen_extreme_shapes(void **state)
{
    (void)state;
    const lr_gen_opts shapes[] = {
        {500, 40, 40, 7, 1.1, 0.5},    /* every row holds every feature */
        {500, 40, 35, 7, 1.1, 0.5},    /* almost */
        {300, 5000, 200, 7, 1.1, 0.1}, /* long rows */
        {500, 1000, 30, 7, 4.0, 0.1},  /* steep: the top features hold nearly all weight */
        {500, 1, 1, 7, 1.1, 1},        /* one feature */
        {500, 100, 10, 7, 50, 0.01},   /* weights below the integer resolution */
        {500, 4, 2, 7, 1.1, 0.1},      /* density * features rounds to 0: still 1 planted */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        gen_data g;
        lr_model planted;
        generate(&shapes[i], &g, &planted); /* checks distinct ascending ids */
        assert_true(g.positives > 0 && g.positives < shapes[i].rows);
        assert_true(isfinite(planted.bias));
        uint64_t planted_nnz = 0;
        for (uint64_t j = 0; j < planted.dim; j++) planted_nnz += planted.w[j] != 0;
        double want = floor(shapes[i].planted_density * (double)shapes[i].features + 0.5);
        assert_int_equal(planted_nnz, want < 1 ? 1 : want);
        gen_free(&g);
        lr_model_free(&planted);
    }
}

static void test_gen_errors(void **state)
{
    (void)state;
    static const struct {
        lr_gen_opts o;
        const char *error;
    } cases[] = {
        {{0, 10, 3, 1, 1.1, 0.1}, "rows must be at least 1"},
        {{10, 0, 3, 1, 1.1, 0.1}, "features must be at least 1"},
        {{10, 10, 0, 1, 1.1, 0.1}, "nnz must be from 1 to features (10), got 0"},
        {{10, 10, 11, 1, 1.1, 0.1}, "nnz must be from 1 to features (10), got 11"},
        {{10, 10, 3, 1, -0.5, 0.1}, "zipf must be a finite number >= 0"},
        {{10, 10, 3, 1, NAN, 0.1}, "zipf must be a finite number >= 0"},
        {{10, 10, 3, 1, INFINITY, 0.1}, "zipf must be a finite number >= 0"},
        {{10, 10, 3, 1, 1.1, 0}, "planted density must be above 0 and at most 1"},
        {{10, 10, 3, 1, 1.1, 1.5}, "planted density must be above 0 and at most 1"},
        {{10, 10, 3, 1, 1.1, NAN}, "planted density must be above 0 and at most 1"},
        {{10, UINT64_MAX, 3, 1, 1.1, 0.1}, "out of memory for 18446744073709551615 features"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[256] = "";
        lr_model planted = {0};
        if (lr_generate(&cases[i].o, stdout, &planted, 0, err, sizeof err) == 0)
            fail_msg("case %zu accepted", i);
        if (!strstr(err, cases[i].error))
            fail_msg("case %zu: error '%s', expected '%s'", i, err, cases[i].error);
        assert_null(planted.w);
    }

    /* A full disk (only if /dev/full is the device: "w" would create a file). */
    struct stat st;
    FILE *full =
        stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode) ? fopen("/dev/full", "w") : NULL;
    if (full) {
        lr_gen_opts o = {100000, 1000, 30, 1, 1.1, 0.1};
        char err[256] = "";
        lr_model planted = {0};
        assert_int_not_equal(lr_generate(&o, full, &planted, 0, err, sizeof err), 0);
        assert_non_null(strstr(err, "write failed: No space left on device"));
        assert_null(planted.w);
        fclose(full);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_against_reference),
        cmocka_unit_test(test_metrics_small_cases),
        cmocka_unit_test(test_logistic_stability),
        cmocka_unit_test(test_model_round_trip),
        cmocka_unit_test(test_model_load_errors),
        cmocka_unit_test(test_margin),
        cmocka_unit_test(test_gen_deterministic),
        cmocka_unit_test(test_gen_learnable_click_log),
        cmocka_unit_test(test_gen_extreme_shapes),
        cmocka_unit_test(test_gen_errors),
    };
    return cmocka_run_group_tests(tests, make_tmp_dir, remove_tmp_dir);
}
