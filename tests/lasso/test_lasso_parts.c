/* The Lasso application's parts (apps/lasso), in one process:
 *   - soft-thresholding, and the coordinate minimiser really minimising F
 *     along its coordinate, with and without an intercept;
 *   - the sequential reference: F never increases from pass to pass, lambda
 *     >= lambda_max gives beta = 0, and at convergence on a generated
 *     problem with correlated groups the KKT conditions hold (with an
 *     intercept, also its own: the residuals add up to 0);
 *   - the generator: same seed same bytes, the stated within-group
 *     correlation, the planted beta explaining y up to the noise;
 *   - the model file: bit-exact round trip, malformed files refused with
 *     FILE:LINE. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lasso/lasso.h"

/* ---- helpers ---- */

/* A generated problem, written to a temporary file and read back as
 * `loom train lasso` reads it, centred if intercept. planted (if not NULL)
 * receives the planted model. */
static void generate(const lasso_gen_opts *o, int intercept, lasso_problem *p, lasso_model *planted)
{
    char path[] = "/tmp/loom-lasso-parts-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    char err[512];
    assert_int_equal(lasso_generate(o, f, planted, err, sizeof err), 0);
    assert_int_equal(fclose(f), 0);
    loom_libsvm_opts lo = LOOM_LIBSVM_OPTS_DEFAULT;
    lo.labels = LOOM_LABELS_REAL;
    loom_dataset *d;
    int rc = loom_libsvm_read(path, 0, 1, &lo, &d, err, sizeof err);
    unlink(path);
    if (rc) fail_msg("%s", err);
    assert_int_equal(lasso_problem_from(d, intercept, p, err, sizeof err), 0);
    loom_dataset_free(d);
}

/* r = y - b - X beta with b = mean(y - X beta) when the problem has an
 * intercept (its best value), else 0: from scratch, not with the trainer's
 * running residual. *b (if not NULL) receives b. */
static double *residual(const lasso_problem *p, const double *beta, double *b)
{
    double *r = malloc(p->n * sizeof *r);
    assert_non_null(r);
    for (size_t i = 0; i < p->n; i++) r[i] = p->y[i] + p->y_mean; /* y as read */
    for (uint64_t j = 0; j < p->dim; j++)
        for (size_t k = p->col[j]; k < p->col[j + 1]; k++) r[p->row[k]] -= beta[j] * p->val[k];
    double mean = 0;
    if (p->intercept) {
        for (size_t i = 0; i < p->n; i++) mean += r[i];
        mean /= (double)p->n;
        for (size_t i = 0; i < p->n; i++) r[i] -= mean;
    }
    if (b) *b = mean;
    return r;
}

static double sum_sq(const double *r, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += r[i] * r[i];
    return s;
}

static double column_dot(const lasso_problem *p, uint64_t j, const double *v)
{
    double s = 0;
    for (size_t k = p->col[j]; k < p->col[j + 1]; k++) s += p->val[k] * v[p->row[k]];
    return s;
}

/* ---- soft-thresholding and one coordinate ---- */

static void test_soft_threshold(void **state)
{
    (void)state;
    assert_true(lasso_soft_threshold(3, 1) == 2);
    assert_true(lasso_soft_threshold(-3, 1) == -2);
    assert_true(lasso_soft_threshold(0.5, 1) == 0);
    assert_true(lasso_soft_threshold(-1, 1) == 0);
    assert_true(lasso_soft_threshold(1, 0) == 1);
}

/* F along coordinate j at beta_j = b, the others as in beta. */
static double objective_at(const lasso_problem *p, double *beta, uint64_t j, double b,
                           double lambda)
{
    double keep = beta[j];
    beta[j] = b;
    double *r = residual(p, beta, NULL);
    double f = lasso_objective(p, sum_sq(r, p->n), beta, lambda);
    free(r);
    beta[j] = keep;
    return f;
}

static void check_coordinate_minimiser(int intercept)
{
    lasso_gen_opts o = LASSO_GEN_OPTS_DEFAULT;
    o.rows = 200, o.features = 30, o.group = 5, o.nonzeros = 6, o.intercept = 4;
    lasso_problem p;
    generate(&o, intercept, &p, NULL);
    double lambda = 0.2 * lasso_lambda_max(&p);
    double *beta = calloc(p.dim, sizeof *beta);
    assert_non_null(beta);
    for (uint64_t j = 0; j < p.dim; j++) beta[j] = 0.1 * (double)(j % 7) - 0.3;
    for (uint64_t j = 0; j < p.dim; j++) {
        lasso_residual r;
        assert_int_equal(lasso_residual_init(&p, beta, &r), 0);
        double b = lasso_coordinate_minimiser(&p, j, &r, beta[j], lambda);
        lasso_residual_free(&r);
        double f = objective_at(&p, beta, j, b, lambda);
        /* A parabola plus |.|: any step away costs, both ways, at several scales. */
        for (double h = 1e-4; h < 10; h *= 10) {
            assert_true(objective_at(&p, beta, j, b + h, lambda) >= f - 1e-12);
            assert_true(objective_at(&p, beta, j, b - h, lambda) >= f - 1e-12);
        }
    }
    free(beta);
    lasso_problem_free(&p);
}

static void test_coordinate_minimiser(void **state)
{
    (void)state;
    check_coordinate_minimiser(1);
    check_coordinate_minimiser(0);
}

/* ---- the sequential reference ---- */

struct trace {
    int passes;
    double last;
    int increased;
};

static void watch(void *arg, const lasso_pass *s, const double *beta)
{
    (void)beta;
    struct trace *t = arg;
    /* Each update is the exact minimiser along its coordinate, so F cannot
     * grow; 1e-12 relative is room for the running residual's rounding. */
    if (t->passes > 0 && s->objective > t->last * (1 + 1e-12)) t->increased = 1;
    t->last = s->objective;
    t->passes++;
}

static void test_objective_never_increases(void **state)
{
    (void)state;
    lasso_gen_opts o = LASSO_GEN_OPTS_DEFAULT;
    o.rows = 300, o.features = 400, o.corr = 0.95;
    lasso_problem p;
    generate(&o, 1, &p, NULL);
    double *beta = malloc(p.dim * sizeof *beta), b;
    assert_non_null(beta);
    lasso_train_opts t = {.lambda = 0.01 * lasso_lambda_max(&p), .iterations = 50, .tol = 0};
    struct trace tr = {0};
    assert_int_equal(lasso_train_sequential(&t, &p, beta, &b, watch, &tr), 50);
    assert_int_equal(tr.passes, 50);
    assert_false(tr.increased);
    free(beta);
    lasso_problem_free(&p);
}

static void test_lambda_max_gives_zero(void **state)
{
    (void)state;
    lasso_gen_opts o = LASSO_GEN_OPTS_DEFAULT;
    o.intercept = -2;
    lasso_problem p;
    generate(&o, 1, &p, NULL);
    double *beta = malloc(p.dim * sizeof *beta), b;
    assert_non_null(beta);
    lasso_train_opts t = {.lambda = lasso_lambda_max(&p), .iterations = 10, .tol = 0};
    /* One pass, in which nothing moved: converged, to the mean of y alone. */
    assert_int_equal(lasso_train_sequential(&t, &p, beta, &b, NULL, NULL), 1);
    for (uint64_t j = 0; j < p.dim; j++) assert_true(beta[j] == 0);
    assert_true(fabs(b - p.y_mean) <= 1e-12 * fmax(1, fabs(p.y_mean)));
    /* Just below, something enters. */
    t.lambda *= 0.99;
    assert_true(lasso_train_sequential(&t, &p, beta, &b, NULL, NULL) > 1);
    uint64_t nnz = 0;
    for (uint64_t j = 0; j < p.dim; j++) nnz += beta[j] != 0;
    assert_true(nnz > 0);
    free(beta);
    lasso_problem_free(&p);
}

/* KKT of the Lasso: with g_j = x_j^T r / n and r = y - b - X beta,
 *     |g_j| <= lambda               for every j,
 *     g_j = lambda sign(beta_j)     where beta_j != 0,
 *     sum_i r_i = 0                 with an intercept (b is not penalised).
 * Checked within 1e-6 lambda, on the residual recomputed from scratch with the
 * trained b, after training to --tol 1e-12: the last pass moved no coefficient
 * by more than 1e-12 max(1, |beta|), so g_j is off by at most about a_j times
 * that. */
static void check_kkt(double corr, double density, double ratio, int intercept)
{
    lasso_gen_opts o = LASSO_GEN_OPTS_DEFAULT;
    o.rows = 400, o.features = 600, o.group = 20, o.corr = corr, o.density = density;
    o.nonzeros = 30, o.noise = 0.5, o.seed = 11, o.intercept = 5;
    lasso_problem p;
    generate(&o, intercept, &p, NULL);
    double lambda = ratio * lasso_lambda_max(&p);
    double *beta = malloc(p.dim * sizeof *beta), b;
    assert_non_null(beta);
    lasso_train_opts t = {.lambda = lambda, .iterations = 100000, .tol = 1e-12};
    int passes = lasso_train_sequential(&t, &p, beta, &b, NULL, NULL);
    assert_true(passes > 0 && passes < t.iterations); /* converged, not stopped by the limit */
    double best_b;
    double *r = residual(&p, beta, &best_b);
    /* The trained intercept is the best one for its beta (the residual from
     * scratch then adds up to 0); without one it is 0. */
    if (fabs(b - best_b) > 1e-9 * fmax(1, fabs(best_b)))
        fail_msg("intercept %.17g, the best for beta %.17g", b, best_b);
    if (intercept) assert_true(fabs(b - o.intercept) < 1); /* near the planted one */
    uint64_t nnz = 0;
    for (uint64_t j = 0; j < p.dim; j++) {
        double g = column_dot(&p, j, r) / (double)p.n;
        if (fabs(g) > lambda * (1 + 1e-6))
            fail_msg("j=%llu: |g_j| = %.17g > lambda = %.17g", (unsigned long long)j, fabs(g),
                     lambda);
        if (beta[j] != 0) {
            nnz++;
            double want = beta[j] > 0 ? lambda : -lambda;
            if (fabs(g - want) > 1e-6 * lambda)
                fail_msg("j=%llu: beta_j = %g but g_j = %.17g, not %.17g", (unsigned long long)j,
                         beta[j], g, want);
        }
    }
    /* Neither trivial case: some coefficients are in, most are out. */
    assert_true(nnz > 0 && nnz < p.dim);
    free(r);
    free(beta);
    lasso_problem_free(&p);
}

static void test_kkt_correlated(void **state)
{
    (void)state;
    check_kkt(0.9, 1.0, 0.05, 1);
    check_kkt(0.9, 1.0, 0.05, 0);
}

static void test_kkt_sparse_rows(void **state)
{
    (void)state;
    check_kkt(0.7, 0.2, 0.02, 1);
    check_kkt(0.7, 0.2, 0.02, 0);
}

/* ---- the generator ---- */

static char *generate_text(const lasso_gen_opts *o, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    assert_non_null(f);
    char err[512];
    assert_int_equal(lasso_generate(o, f, NULL, err, sizeof err), 0);
    assert_int_equal(fclose(f), 0);
    return buf;
}

static void test_gen_deterministic(void **state)
{
    (void)state;
    lasso_gen_opts o = LASSO_GEN_OPTS_DEFAULT;
    o.rows = 200, o.features = 100, o.density = 0.5;
    size_t la, lb, lc;
    char *a = generate_text(&o, &la), *b = generate_text(&o, &lb);
    o.seed = 2;
    char *c = generate_text(&o, &lc);
    assert_true(la == lb && memcmp(a, b, la) == 0);
    assert_false(la == lc && memcmp(a, c, la) == 0);
    free(a);
    free(b);
    free(c);
}

static void test_gen_bad_options(void **state)
{
    (void)state;
    lasso_gen_opts bad[6];
    for (int k = 0; k < 6; k++) bad[k] = (lasso_gen_opts)LASSO_GEN_OPTS_DEFAULT;
    bad[0].group = 0;
    bad[1].group = 1001;
    bad[2].nonzeros = 1001;
    bad[3].corr = 1;
    bad[4].density = 0;
    bad[5].features = 0;
    for (int k = 0; k < 6; k++) {
        char *buf = NULL;
        size_t len;
        FILE *f = open_memstream(&buf, &len);
        assert_non_null(f);
        char err[512] = "";
        assert_int_equal(lasso_generate(&bad[k], f, NULL, err, sizeof err), -1);
        assert_non_null(strstr(err, "bad options"));
        assert_int_equal(fclose(f), 0);
        assert_int_equal(len, 0); /* nothing written */
        free(buf);
    }
}

/* Sample correlation of two columns over all rows (absent entries are 0). */
static double correlation(const lasso_problem *p, uint64_t i, uint64_t j)
{
    double *xi = calloc(p->n, sizeof *xi), *xj = calloc(p->n, sizeof *xj);
    assert_true(xi && xj);
    for (size_t k = p->col[i]; k < p->col[i + 1]; k++) xi[p->row[k]] = p->val[k];
    for (size_t k = p->col[j]; k < p->col[j + 1]; k++) xj[p->row[k]] = p->val[k];
    double si = 0, sj = 0, sij = 0, sii = 0, sjj = 0, n = (double)p->n;
    for (size_t r = 0; r < p->n; r++) {
        si += xi[r], sj += xj[r], sij += xi[r] * xj[r], sii += xi[r] * xi[r], sjj += xj[r] * xj[r];
    }
    free(xi);
    free(xj);
    double cov = sij / n - si / n * sj / n;
    return cov / sqrt((sii / n - si / n * si / n) * (sjj / n - sj / n * sj / n));
}

static void test_gen_correlation_and_planted(void **state)
{
    (void)state;
    lasso_gen_opts o = LASSO_GEN_OPTS_DEFAULT;
    o.rows = 20000, o.features = 20, o.group = 4, o.corr = 0.6, o.density = 0.5, o.noise = 0.3;
    o.nonzeros = 5, o.intercept = 1.5;
    lasso_problem p;
    lasso_model planted;
    generate(&o, 0, &p, &planted);
    assert_true(planted.intercept == 1.5);
    /* With 20000 rows the sample correlation's standard error is below 0.01. */
    assert_true(fabs(correlation(&p, 0, 1) - 0.6) < 0.04);
    assert_true(fabs(correlation(&p, 8, 11) - 0.6) < 0.04);
    assert_true(fabs(correlation(&p, 3, 4)) < 0.04); /* different groups */
    /* Half the rows hold a group. */
    assert_true(fabs((double)(p.col[1] - p.col[0]) / (double)p.n - 0.5) < 0.02);
    /* y - X beta_planted is the noise. */
    uint64_t nnz = 0;
    for (uint64_t j = 0; j < planted.dim; j++) {
        if (planted.beta[j] == 0) continue;
        nnz++;
        assert_true(fabs(planted.beta[j]) >= 1 && fabs(planted.beta[j]) <= 2);
    }
    assert_int_equal(nnz, 5);
    /* y - b - X beta_planted is the noise. */
    double *r = residual(&p, planted.beta, NULL);
    for (size_t i = 0; i < p.n; i++) r[i] -= planted.intercept;
    assert_true(fabs(sqrt(sum_sq(r, p.n) / (double)p.n) - 0.3) < 0.01);
    free(r);
    lasso_model_free(&planted);
    lasso_problem_free(&p);
}

/* ---- the model file ---- */

static void test_model_round_trip(void **state)
{
    (void)state;
    double beta[5] = {0, 1.0 / 3, -0.0, -2e-300, 0};
    lasso_model m = {.dim = 5, .lambda = 0.125, .intercept = -7.0 / 3, .beta = beta}, back;
    char path[] = "/tmp/loom-lasso-model-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char err[512];
    assert_int_equal(lasso_model_save(&m, path, err, sizeof err), 0);
    assert_int_equal(lasso_model_load(path, &back, err, sizeof err), 0);
    assert_int_equal(back.dim, 5);
    assert_true(back.lambda == 0.125);
    assert_true(back.intercept == -7.0 / 3);
    assert_memory_equal(back.beta, beta, sizeof beta); /* bits, the sign of -0.0 too */
    lasso_model_free(&back);
    unlink(path);
}

/* A model of version 1 (no intercept) still loads, with b = 0. */
static void test_model_version_1(void **state)
{
    (void)state;
    char path[] = "/tmp/loom-lasso-v1-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char text[] = "loom-lasso 1 dim=3 nnz=1 lambda=0.5\n2 -1.5\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    lasso_model m;
    char err[512];
    assert_int_equal(lasso_model_load(path, &m, err, sizeof err), 0);
    unlink(path);
    assert_int_equal(m.dim, 3);
    assert_true(m.lambda == 0.5 && m.intercept == 0 && m.beta[2] == -1.5 && m.beta[0] == 0);
    lasso_model_free(&m);
}

static void check_bad_model(const char *text, const char *message)
{
    char path[] = "/tmp/loom-lasso-bad-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    lasso_model m;
    char err[512];
    assert_int_equal(lasso_model_load(path, &m, err, sizeof err), -1);
    unlink(path);
    if (!strstr(err, message)) fail_msg("for %s: '%s' does not say '%s'", text, err, message);
}

static void test_model_bad_files(void **state)
{
    (void)state;
    check_bad_model("", "empty file");
    check_bad_model("loom-lr 1 dim=3 nnz=0 bias=0\n", ":1: not a Loom Lasso model");
    check_bad_model("loom-lasso 3 dim=3 nnz=0 lambda=1 intercept=0\n",
                    ":1: unsupported model version 3 (this Loom reads 1 to 2)");
    check_bad_model("loom-lasso 2 dim=3 nnz=0 lambda=1\n",
                    ":1: bad header: expected intercept=<number> after lambda");
    check_bad_model("loom-lasso 2 dim=3 nnz=0 lambda=1 intercept=1e999\n",
                    ":1: bad header: the intercept is not finite");
    check_bad_model("loom-lasso 2 dim=3 nnz=0 lambda=1 intercept=1 x\n",
                    ":1: bad header: unexpected text after the intercept");
    check_bad_model("loom-lasso 1 dim=3 nnz=4 lambda=1\n", ":1: bad header: nnz is larger");
    check_bad_model("loom-lasso 1 dim=3 nnz=1 lambda=1\n", "ends after 0 coefficients");
    check_bad_model("loom-lasso 1 dim=3 nnz=1 lambda=1\n3 1.5\n", ":2: feature id 3 is not below");
    check_bad_model("loom-lasso 1 dim=3 nnz=2 lambda=1\n1 1\n0 1\n", ":3: feature id 0 after 1");
    check_bad_model("loom-lasso 1 dim=3 nnz=1 lambda=1\n1 nan\n", ":2: expected");
    check_bad_model("loom-lasso 1 dim=3 nnz=1 lambda=1\n1 1e999\n", ":2: the coefficient");
    check_bad_model("loom-lasso 1 dim=3 nnz=1 lambda=1\n1 1", ":2: line not ended");
    check_bad_model("loom-lasso 1 dim=3 nnz=0 lambda=1\n0 1\n", ":2: trailing garbage");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_soft_threshold),
        cmocka_unit_test(test_coordinate_minimiser),
        cmocka_unit_test(test_objective_never_increases),
        cmocka_unit_test(test_lambda_max_gives_zero),
        cmocka_unit_test(test_kkt_correlated),
        cmocka_unit_test(test_kkt_sparse_rows),
        cmocka_unit_test(test_gen_deterministic),
        cmocka_unit_test(test_gen_bad_options),
        cmocka_unit_test(test_gen_correlation_and_planted),
        cmocka_unit_test(test_model_round_trip),
        cmocka_unit_test(test_model_version_1),
        cmocka_unit_test(test_model_bad_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
