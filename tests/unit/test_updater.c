/* updater: the built-in rules against straightforward double-precision
 * reimplementations (FTRL-proximal written as in McMahan et al. 2013,
 * "Ad Click Prediction: a View from the Trenches", Algorithm 1, where the
 * weight is recomputed from z and n before each gradient), integer wrapping,
 * user updaters (arguments, persistent state, replacement), name resolution
 * and the registry's limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <pthread.h>

#include <cmocka.h>

#include "loom/error.h"
#include "loom/updater.h"
#include "ps/storage.h"
#include "ps/updater_impl.h"

enum { W = 5, STEPS = 400 };

#define TEST_RNG_SEED 0x243f6a8885a308d3ULL
#include "test_rng.h"

/* A gradient: mostly moderate, sometimes zero, sometimes large, either sign. */
static double random_gradient(void)
{
    uint64_t r = rng();
    double u = (double)(r >> 11) * 0x1p-53 - 0.5;
    switch (r % 8) {
    case 0:
        return 0.0;
    case 1:
        return 20 * u;
    default:
        return u;
    }
}

static loom_table_opts test_opts(void)
{
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.lr = 0.05;
    o.beta = 1.0;
    o.l1 = 0.02;
    o.l2 = 0.1;
    o.eps = 1e-6;
    return o;
}

static void assert_close(double got, double want, double rtol, double atol)
{
    if (!(fabs(got - want) <= atol + rtol * fabs(want)))
        fail_msg("got %.17g, want %.17g", got, want);
}

/* The reference, one coordinate at a time, all in double. With to_float the
 * stored quantities are rounded to float after each step, as an f32 table
 * stores them. */
typedef struct {
    double w, z, n;
} coord;

static double ftrl_weight(const loom_table_opts *o, double z, double n)
{
    if (fabs(z) <= o->l1) return 0.0;
    double sgn = z > 0 ? 1.0 : -1.0;
    return -1.0 / ((o->beta + sqrt(n)) / o->lr + o->l2) * (z - sgn * o->l1);
}

static void ref_step(upd_kind kind, const loom_table_opts *o, coord *c, double g, int to_float)
{
    switch (kind) {
    case UPD_SGD:
        c->w = c->w - o->lr * g - o->lr * o->l2 * c->w;
        break;
    case UPD_ADAGRAD:
        c->n = c->n + g * g;
        c->w = c->w - o->lr / (sqrt(c->n) + o->eps) * g;
        break;
    case UPD_FTRL: {
        double w = ftrl_weight(o, c->z, c->n); /* the paper's lazily computed weight */
        double sigma = (sqrt(c->n + g * g) - sqrt(c->n)) / o->lr;
        c->z = c->z + g - sigma * w;
        c->n = c->n + g * g;
        c->w = ftrl_weight(o, c->z, c->n);
        break;
    }
    default:
        fail();
    }
    if (to_float) c->w = (float)c->w, c->z = (float)c->z, c->n = (float)c->n;
}

/* Run a built-in gradient rule on a float table and on the reference. */
static void check_gradient_rule(const char *name, upd_kind kind, loom_type t)
{
    ps_updater u;
    assert_int_equal(updater_resolve(name, t, &u), 0);
    assert_int_equal(u.kind, kind);
    assert_int_equal(u.state_per_value, kind == UPD_FTRL ? 2 : kind == UPD_ADAGRAD ? 1 : 0);
    loom_table_opts o = test_opts();
    int is_f32 = t == LOOM_F32;

    coord ref[W];
    double value[W], state[2 * W], delta[W];
    float value_f[W], state_f[2 * W], delta_f[W];
    for (size_t j = 0; j < W; j++) {
        /* FTRL's weight starts as the paper's: 0 with z = n = 0. */
        double w0 = kind == UPD_FTRL ? 0.0 : (double)j - 2.0;
        ref[j] = (coord){w0, 0, 0};
        value[j] = w0, value_f[j] = (float)w0;
    }
    memset(state, 0, sizeof state);
    memset(state_f, 0, sizeof state_f);

    for (int step = 0; step < STEPS; step++) {
        for (size_t j = 0; j < W; j++) {
            double g = random_gradient();
            if (is_f32) g = (float)g;
            delta[j] = g, delta_f[j] = (float)g;
            ref_step(kind, &o, &ref[j], g, is_f32);
        }
        if (is_f32)
            updater_apply(&u, &o, t, W, 42, value_f, state_f, delta_f);
        else
            updater_apply(&u, &o, t, W, 42, value, state, delta);
        for (size_t j = 0; j < W; j++) {
            double rtol = is_f32 ? 1e-4 : 1e-12, atol = is_f32 ? 1e-6 : 1e-12;
            assert_close(is_f32 ? value_f[j] : value[j], ref[j].w, rtol, atol);
            if (kind == UPD_ADAGRAD)
                assert_close(is_f32 ? state_f[j] : state[j], ref[j].n, rtol, atol);
            if (kind == UPD_FTRL) {
                assert_close(is_f32 ? state_f[j] : state[j], ref[j].z, rtol, atol);
                assert_close(is_f32 ? state_f[W + j] : state[W + j], ref[j].n, rtol, atol);
            }
        }
    }
    /* The runs did something: weights moved, and FTRL's L1 kept some at 0
     * while others are not. */
    int zeros = 0;
    for (size_t j = 0; j < W; j++) zeros += ref[j].w == 0.0;
    if (kind == UPD_FTRL) assert_true(zeros < W);
    if (kind != UPD_FTRL) assert_int_equal(zeros, 0);
}

static void test_sgd(void **unused)
{
    (void)unused;
    check_gradient_rule("sgd", UPD_SGD, LOOM_F64);
    check_gradient_rule("sgd", UPD_SGD, LOOM_F32);
}

static void test_adagrad(void **unused)
{
    (void)unused;
    check_gradient_rule("adagrad", UPD_ADAGRAD, LOOM_F64);
    check_gradient_rule("adagrad", UPD_ADAGRAD, LOOM_F32);
}

static void test_ftrl(void **unused)
{
    (void)unused;
    check_gradient_rule("ftrl", UPD_FTRL, LOOM_F64);
    check_gradient_rule("ftrl", UPD_FTRL, LOOM_F32);
}

/* FTRL's L1 at work: small gradients keep |z| <= l1 and the weight at 0. */
static void test_ftrl_sparsity(void **unused)
{
    (void)unused;
    ps_updater u;
    assert_int_equal(updater_resolve("ftrl", LOOM_F64, &u), 0);
    loom_table_opts o = test_opts();
    o.l1 = 1.0;
    double w[2] = {0, 0}, st[4] = {0, 0, 0, 0}, g[2] = {0.3, -0.3};
    updater_apply(&u, &o, LOOM_F64, 2, 1, w, st, g);
    updater_apply(&u, &o, LOOM_F64, 2, 1, w, st, g);
    assert_true(w[0] == 0.0 && w[1] == 0.0);
    assert_close(st[0], 0.6, 1e-12, 0); /* z accumulates while w stays 0 */
    assert_close(st[1], -0.6, 1e-12, 0);
    assert_close(st[2], 0.18, 1e-12, 0); /* n */
    updater_apply(&u, &o, LOOM_F64, 2, 1, w, st, g);
    updater_apply(&u, &o, LOOM_F64, 2, 1, w, st, g);
    /* z = 1.2 > l1: w = -(1.2 - 1) / ((1 + sqrt(0.36)) / 0.05 + 0.1) */
    assert_close(w[0], -0.2 / (1.6 / 0.05 + 0.1), 1e-12, 0);
    assert_close(w[1], 0.2 / (1.6 / 0.05 + 0.1), 1e-12, 0);
}

static void test_sum_and_assign(void **unused)
{
    (void)unused;
    ps_updater sum, assign;
    assert_int_equal(updater_resolve("sum", LOOM_I32, &sum), 0);
    assert_int_equal(updater_resolve("assign", LOOM_I32, &assign), 0);
    assert_int_equal(sum.kind, UPD_SUM);
    assert_int_equal(assign.kind, UPD_ASSIGN);
    assert_int_equal(sum.state_per_value, 0);
    loom_table_opts o = test_opts();

    int32_t v32[3] = {INT32_MAX, INT32_MIN, 10}, d32[3] = {1, -1, -20};
    updater_apply(&sum, &o, LOOM_I32, 3, 0, v32, NULL, d32);
    assert_int_equal(v32[0], INT32_MIN);
    assert_int_equal(v32[1], INT32_MAX);
    assert_int_equal(v32[2], -10);
    updater_apply(&assign, &o, LOOM_I32, 3, 0, v32, NULL, d32);
    assert_memory_equal(v32, d32, sizeof v32);

    int64_t v64[2] = {INT64_MAX, 5}, d64[2] = {INT64_MAX, -6};
    assert_int_equal(updater_resolve("sum", LOOM_I64, &sum), 0);
    updater_apply(&sum, &o, LOOM_I64, 2, 0, v64, NULL, d64);
    assert_true(v64[0] == -2 && v64[1] == -1);

    float vf[2] = {1.5f, 2.0f}, df[2] = {0.25f, -4.0f};
    assert_int_equal(updater_resolve("sum", LOOM_F32, &sum), 0);
    updater_apply(&sum, &o, LOOM_F32, 2, 0, vf, NULL, df);
    assert_true(vf[0] == 1.75f && vf[1] == -2.0f);
    assert_int_equal(updater_resolve("assign", LOOM_F64, &assign), 0);
    double vd[2] = {1, 2}, dd[2] = {-3, 4};
    updater_apply(&assign, &o, LOOM_F64, 1, 0, vd, NULL, dd); /* width 1: one value */
    assert_true(vd[0] == -3 && vd[1] == 2);
}

/* A user updater: momentum SGD with the coefficient in params[0]. It checks
 * what it is handed against what the test expects to hand it. */
static struct {
    int calls;
    loom_type type;
    uint32_t width;
    uint64_t key;
    void *value, *state;
    const void *delta;
    const loom_table_opts *opts;
} expect;

static void momentum(const loom_update *u, void *user)
{
    assert_ptr_equal(user, &expect);
    assert_int_equal(u->type, expect.type);
    assert_int_equal(u->width, expect.width);
    assert_true(u->key == expect.key);
    assert_ptr_equal(u->value, expect.value);
    assert_ptr_equal(u->state, expect.state);
    assert_ptr_equal(u->delta, expect.delta);
    assert_ptr_equal(u->opts, expect.opts);
    double *w = u->value, *m = u->state;
    const double *g = u->delta;
    for (uint32_t j = 0; j < u->width; j++) {
        m[j] = u->opts->params[0] * m[j] + g[j];
        w[j] -= u->opts->lr * m[j];
    }
    expect.calls++;
}

static void other_updater(const loom_update *u, void *user)
{
    (void)u;
    ++*(int *)user;
}

static void test_user_updater(void **unused)
{
    (void)unused;
    assert_int_equal(loom_updater_register("momentum", 1, momentum, &expect), 0);
    ps_updater u;
    assert_int_equal(updater_resolve("momentum", LOOM_F64, &u), 0);
    assert_int_equal(u.kind, UPD_USER);
    assert_int_equal(u.state_per_value, 1);
    assert_int_equal(updater_coalesces_by_sum(&u), 1);

    /* Rows and their state come from a real store, as on a server. */
    ps_store_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.type = LOOM_F64, spec.width = W, spec.storage = LOOM_SPARSE;
    spec.state_per_value = u.state_per_value;
    ps_store *store;
    assert_int_equal(store_create(&spec, &store), 0);

    loom_table_opts o = test_opts();
    o.params[0] = 0.9;
    double ref_w[2][W] = {{0}}, ref_m[2][W] = {{0}}, delta[W];
    const uint64_t keys[2] = {7, UINT64_MAX};
    for (int step = 0; step < 50; step++) {
        size_t r = (size_t)step % 2;
        void *state;
        double *value = store_row(store, keys[r], &state);
        assert_non_null(value);
        for (size_t j = 0; j < W; j++) {
            delta[j] = random_gradient();
            ref_m[r][j] = 0.9 * ref_m[r][j] + delta[j];
            ref_w[r][j] -= o.lr * ref_m[r][j];
        }
        expect.type = LOOM_F64, expect.width = W, expect.key = keys[r];
        expect.value = value, expect.state = state, expect.delta = delta, expect.opts = &o;
        updater_apply(&u, &o, LOOM_F64, W, keys[r], value, state, delta);
    }
    assert_int_equal(expect.calls, 50);
    for (size_t r = 0; r < 2; r++) {
        void *state;
        double *value = store_row(store, keys[r], &state);
        for (size_t j = 0; j < W; j++) {
            assert_close(value[j], ref_w[r][j], 1e-12, 1e-15);
            assert_close(((double *)state)[j], ref_m[r][j], 1e-12, 1e-15); /* state persisted */
        }
    }
    store_destroy(store);

    /* Registering the name again replaces it for later resolutions; an
     * updater resolved before keeps what it had. */
    int other_calls = 0;
    assert_int_equal(loom_updater_register("momentum", 0, other_updater, &other_calls), 0);
    ps_updater v;
    assert_int_equal(updater_resolve("momentum", LOOM_I32, &v), 0); /* user code: any type */
    assert_int_equal(v.state_per_value, 0);
    int32_t iv = 0, id = 0;
    updater_apply(&v, &o, LOOM_I32, 1, 1, &iv, NULL, &id);
    assert_int_equal(other_calls, 1);
    assert_ptr_equal(u.fn, momentum);
    assert_ptr_equal(v.fn, other_updater);
}

static void dummy(const loom_update *u, void *user)
{
    (void)u;
    (void)user;
}

static void test_resolve_errors(void **unused)
{
    (void)unused;
    ps_updater u;
    assert_int_equal(updater_resolve("no-such-updater", LOOM_F32, &u), LOOM_ENOTFOUND);
    assert_int_equal(updater_resolve("", LOOM_F32, &u), LOOM_ENOTFOUND);
    assert_int_equal(updater_resolve("SUM", LOOM_F32, &u), LOOM_ENOTFOUND); /* exact names */
    assert_int_equal(updater_resolve("adagrad", LOOM_I32, &u), LOOM_EINVAL);
    assert_int_equal(updater_resolve("sgd", LOOM_I64, &u), LOOM_EINVAL);
    assert_int_equal(updater_resolve("ftrl", LOOM_I32, &u), LOOM_EINVAL);
    assert_int_equal(updater_resolve(NULL, LOOM_F32, &u), LOOM_EINVAL);
    assert_int_equal(updater_resolve("sum", (loom_type)9, &u), LOOM_EINVAL);

    const char *names[] = {"sum", "assign", "sgd", "adagrad", "ftrl"};
    const upd_kind kinds[] = {UPD_SUM, UPD_ASSIGN, UPD_SGD, UPD_ADAGRAD, UPD_FTRL};
    for (size_t i = 0; i < 5; i++) {
        for (loom_type t = LOOM_F32; t <= LOOM_F64; t++) {
            assert_int_equal(updater_resolve(names[i], t, &u), 0);
            assert_int_equal(u.kind, kinds[i]);
            assert_int_equal(updater_coalesces_by_sum(&u), kinds[i] != UPD_ASSIGN);
        }
        /* Built-in names cannot be taken by user code. */
        assert_int_equal(loom_updater_register(names[i], 0, dummy, NULL), LOOM_EINVAL);
    }
}

static void test_register_errors(void **unused)
{
    (void)unused;
    char longest[LOOM_MAX_NAME + 2];
    memset(longest, 'x', sizeof longest);
    longest[LOOM_MAX_NAME + 1] = '\0'; /* one byte too long */
    assert_int_equal(loom_updater_register(longest, 0, dummy, NULL), LOOM_EINVAL);
    longest[LOOM_MAX_NAME] = '\0'; /* exactly the limit */
    assert_int_equal(loom_updater_register(longest, 0, dummy, NULL), 0);
    ps_updater u;
    assert_int_equal(updater_resolve(longest, LOOM_F32, &u), 0);
    assert_int_equal(loom_updater_register(NULL, 0, dummy, NULL), LOOM_EINVAL);
    assert_int_equal(loom_updater_register("", 0, dummy, NULL), LOOM_EINVAL);
    assert_int_equal(loom_updater_register("nofn", 0, NULL, NULL), LOOM_EINVAL);
    assert_int_equal(loom_updater_register("toomuchstate", 5, dummy, NULL), LOOM_EINVAL);
    assert_int_equal(updater_resolve("nofn", LOOM_F32, &u), LOOM_ENOTFOUND);
    assert_int_equal(loom_updater_register("fourstate", 4, dummy, NULL), 0);
}

/* Registrations racing from several threads all land. */
static void *register_some(void *arg)
{
    int t = *(int *)arg;
    for (int i = 0; i < 8; i++) {
        char name[32];
        snprintf(name, sizeof name, "thread%d-%d", t, i);
        if (loom_updater_register(name, (uint32_t)(i % 5), dummy, arg) != 0) return arg;
        ps_updater u;
        if (updater_resolve(name, LOOM_F32, &u) != 0) return arg;
    }
    return NULL;
}

static void test_concurrent_registration(void **unused)
{
    (void)unused;
    pthread_t th[4];
    int ids[4] = {0, 1, 2, 3};
    for (int t = 0; t < 4; t++)
        assert_int_equal(pthread_create(&th[t], NULL, register_some, &ids[t]), 0);
    for (int t = 0; t < 4; t++) {
        void *failed;
        assert_int_equal(pthread_join(th[t], &failed), 0);
        assert_null(failed);
    }
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < 8; i++) {
            char name[32];
            ps_updater u;
            snprintf(name, sizeof name, "thread%d-%d", t, i);
            assert_int_equal(updater_resolve(name, LOOM_F64, &u), 0);
            assert_int_equal(u.state_per_value, (uint32_t)(i % 5));
            assert_ptr_equal(u.user, &ids[t]);
        }
}

/* Runs last: fills the 64-entry registry. */
static void test_registry_limit(void **unused)
{
    (void)unused;
    int added = 0, rc = 0;
    char name[32];
    while (added < 100) {
        snprintf(name, sizeof name, "fill%d", added);
        rc = loom_updater_register(name, 0, dummy, NULL);
        if (rc != 0) break;
        added++;
    }
    assert_int_equal(rc, LOOM_ELIMIT);
    /* Earlier tests registered momentum, the longest name, fourstate and 32
     * thread names: 35 entries. */
    assert_int_equal(added, 64 - 35);
    snprintf(name, sizeof name, "fill%d", added);
    ps_updater u;
    assert_int_equal(updater_resolve(name, LOOM_F32, &u), LOOM_ENOTFOUND);
    /* A full registry still lets an existing name be replaced. */
    assert_int_equal(loom_updater_register("fill0", 3, dummy, NULL), 0);
    assert_int_equal(updater_resolve("fill0", LOOM_F32, &u), 0);
    assert_int_equal(u.state_per_value, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd),
        cmocka_unit_test(test_adagrad),
        cmocka_unit_test(test_ftrl),
        cmocka_unit_test(test_ftrl_sparsity),
        cmocka_unit_test(test_sum_and_assign),
        cmocka_unit_test(test_user_updater),
        cmocka_unit_test(test_resolve_errors),
        cmocka_unit_test(test_register_errors),
        cmocka_unit_test(test_concurrent_registration),
        cmocka_unit_test(test_registry_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
