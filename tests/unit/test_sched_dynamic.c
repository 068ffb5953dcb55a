/* test_sched_dynamic: the dynamic engine's rounds (loom_dyn_run_local, the
 * rounds of a one-worker job) on a synthetic problem: a random symmetric
 * coupling matrix and an application that records every plan and every call.
 *
 *   - the dependency check: no two parameters of one round, nor one of a
 *     round and one of an earlier round still in flight (depth > 1), are
 *     coupled above rho; no parameter is planned twice while in flight;
 *   - pipelining: round t's partial sums are taken after exactly the
 *     applies of rounds <= t - s, and apply runs in round order;
 *   - prioritisation: a parameter that keeps moving is planned far more often
 *     than the floor gives the others;
 *   - round robin: consecutive blocks; random: no check (pairs above rho do
 *     appear, so the check above is what keeps them apart);
 *   - bad options and bad user schedules: clear errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <loom/loom.h>

#define DIM        300
#define MAX_ROUNDS 2000
#define MAX_P      16

typedef struct recorder {
    double coupling[DIM][DIM];
    uint64_t rounds;      /* rounds planned (seen by partial) */
    size_t n[MAX_ROUNDS]; /* plan sizes */
    uint64_t keys[MAX_ROUNDS][MAX_P];
    uint64_t applied; /* applies so far */
    uint64_t applied_at_partial[MAX_ROUNDS];
    int out_of_order; /* apply not in round order */
    uint64_t hot;     /* this parameter always moves by 1 */
    uint64_t bad_key; /* user schedule: names this key */
} recorder;

static void fill_couplings(recorder *r, uint64_t seed)
{
    for (int i = 0; i < DIM; i++) {
        r->coupling[i][i] = 1;
        for (int j = 0; j < i; j++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            r->coupling[i][j] = r->coupling[j][i] = (double)(seed >> 11) * 0x1.0p-53;
        }
    }
}

static double coupling(void *arg, uint64_t i, uint64_t j)
{
    recorder *r = arg;
    return r->coupling[i][j];
}

static void partial(void *arg, uint64_t round, const uint64_t *keys, size_t n, double *out)
{
    recorder *r = arg;
    assert_int_equal(round, r->rounds);
    assert_true(n <= MAX_P);
    r->n[round] = n;
    memcpy(r->keys[round], keys, n * sizeof *keys);
    r->applied_at_partial[round] = r->applied;
    for (size_t k = 0; k < n; k++) out[k] = (double)keys[k];
    r->rounds++;
}

static int apply(void *arg, uint64_t round, const uint64_t *keys, size_t n, const double *sums,
                 double *change)
{
    recorder *r = arg;
    if (round != r->applied) r->out_of_order = 1;
    for (size_t k = 0; k < n; k++) {
        /* The totals are what partial() sent (one worker). */
        assert_true(sums[k] == (double)keys[k]);
        change[k] = keys[k] == r->hot ? 1.0 : 0.0;
    }
    r->applied++;
    return 0;
}

static loom_dyn_opts opts(int schedule, uint32_t p, uint32_t depth, double rho)
{
    return (loom_dyn_opts){.dim = DIM,
                           .parallel = p,
                           .candidates = 4 * p,
                           .rho = rho,
                           .floor = 1e-3,
                           .depth = depth,
                           .max_rounds = MAX_ROUNDS,
                           .schedule = schedule,
                           .seed = 3};
}

static size_t user_schedule(void *arg, uint64_t round, uint64_t lo, uint64_t hi, uint64_t *keys,
                            size_t max)
{
    recorder *r = arg;
    assert_int_equal(lo, 0);
    assert_int_equal(hi, DIM);
    assert_true(max >= 2);
    keys[0] = round % DIM;
    keys[1] = round == 5 ? r->bad_key : (round + 100) % DIM;
    return 2;
}

static void run_checked(recorder *r, const loom_dyn_opts *o)
{
    loom_dyn_app app = {.arg = r,
                        .coupling = coupling,
                        .partial = partial,
                        .apply = apply,
                        .schedule = user_schedule};
    char err[256];
    uint64_t rounds = 0;
    assert_int_equal(loom_dyn_run_local(o, &app, &rounds, err, sizeof err), 0);
    assert_int_equal(rounds, o->max_rounds);
    assert_int_equal(r->rounds, o->max_rounds);
    assert_int_equal(r->applied, o->max_rounds);
    assert_false(r->out_of_order);
}

/* Pairs of a round, and pairs with the rounds still in flight when it was
 * planned (rounds t-s+1 .. t-1), are at most rho apart; the pair count above
 * rho goes to *violations instead of failing when `expect` is 0. */
static size_t count_violations(const recorder *r, uint32_t depth, double rho)
{
    size_t bad = 0;
    for (uint64_t t = 0; t < r->rounds; t++) {
        uint64_t first = t + 1 >= depth ? t + 1 - depth : 0;
        for (uint64_t u = first; u <= t; u++)
            for (size_t a = 0; a < r->n[t]; a++)
                for (size_t b = 0; b < r->n[u]; b++) {
                    if (u == t && b >= a) break;
                    uint64_t i = r->keys[t][a], j = r->keys[u][b];
                    assert_true(i != j); /* never twice in flight */
                    bad += r->coupling[i][j] > rho;
                }
    }
    return bad;
}

static void test_dependency_check(void **state)
{
    (void)state;
    static recorder r;
    for (uint32_t depth = 1; depth <= 3; depth++) {
        for (int schedule = LOOM_DYN_PRIORITY; schedule <= LOOM_DYN_UNIFORM; schedule++) {
            memset(&r, 0, sizeof r);
            fill_couplings(&r, depth);
            r.hot = 7;
            loom_dyn_opts o = opts(schedule, 8, depth, 0.2);
            run_checked(&r, &o);
            assert_int_equal(count_violations(&r, depth, o.rho), 0);
            /* Without rounds in flight the first candidate is always kept.
             * (With them, a candidate must be below rho with each of up to
             * 16 keys in flight too: on these couplings most rounds are
             * empty, the price of a safe pipeline on a dense problem.) */
            if (depth == 1)
                for (uint64_t t = 0; t < r.rounds; t++) assert_true(r.n[t] >= 1);
        }
    }
    /* Without the check (random) pairs above rho do occur on these couplings. */
    memset(&r, 0, sizeof r);
    fill_couplings(&r, 1);
    loom_dyn_opts o = opts(LOOM_DYN_RANDOM, 8, 1, 0.2);
    run_checked(&r, &o);
    assert_true(count_violations(&r, 1, o.rho) > 0);
}

static void test_pipelining_staleness(void **state)
{
    (void)state;
    static recorder r;
    for (uint32_t depth = 1; depth <= 5; depth++) {
        memset(&r, 0, sizeof r);
        fill_couplings(&r, 9);
        loom_dyn_opts o = opts(LOOM_DYN_PRIORITY, 4, depth, 1.0);
        run_checked(&r, &o);
        for (uint64_t t = 0; t < r.rounds; t++)
            assert_int_equal(r.applied_at_partial[t], t + 1 >= depth ? t + 1 - depth : 0);
    }
}

static void test_priority(void **state)
{
    (void)state;
    static recorder r;
    memset(&r, 0, sizeof r);
    fill_couplings(&r, 5);
    r.hot = 123;
    loom_dyn_opts o = opts(LOOM_DYN_PRIORITY, 4, 1, 1.0);
    run_checked(&r, &o);
    /* After the first visit of all DIM parameters (75 rounds), the hot one
     * has weight 1 + eta against eta = 1e-3 (its own first change's mean) for
     * each other: it is in nearly every round. */
    size_t hot = 0, rounds = 0;
    for (uint64_t t = 100; t < r.rounds; t++, rounds++)
        for (size_t k = 0; k < r.n[t]; k++) hot += r.keys[t][k] == r.hot;
    assert_true(hot * 10 >= rounds * 9);
}

static void test_round_robin(void **state)
{
    (void)state;
    static recorder r;
    memset(&r, 0, sizeof r);
    loom_dyn_opts o = opts(LOOM_DYN_ROUND_ROBIN, 8, 2, 0);
    o.max_rounds = 100;
    run_checked(&r, &o);
    for (uint64_t t = 0; t < r.rounds; t++) {
        assert_int_equal(r.n[t], 8);
        for (size_t k = 0; k < 8; k++) assert_int_equal(r.keys[t][k], (t * 8 + k) % DIM);
    }
}

static void test_bad_options(void **state)
{
    (void)state;
    static recorder r;
    memset(&r, 0, sizeof r);
    loom_dyn_app app = {.arg = &r, .coupling = coupling, .partial = partial, .apply = apply};
    char err[256];
    loom_dyn_opts o = opts(LOOM_DYN_PRIORITY, 8, 1, 0.5);
    o.parallel = DIM + 1; /* more parallel updates than parameters: a block larger than the table */
    assert_int_equal(loom_dyn_run_local(&o, &app, NULL, err, sizeof err), LOOM_EINVAL);
    assert_non_null(strstr(err, "301 parallel updates exceed the 300 parameters"));
    o = opts(LOOM_DYN_PRIORITY, 8, 40, 0.5); /* 40 rounds of 8 in flight > 300 */
    assert_int_equal(loom_dyn_run_local(&o, &app, NULL, err, sizeof err), LOOM_EINVAL);
    assert_non_null(strstr(err, "40 rounds in flight of 8 updates exceed"));
    o = opts(LOOM_DYN_PRIORITY, 8, 0, 0.5);
    assert_int_equal(loom_dyn_run_local(&o, &app, NULL, err, sizeof err), LOOM_EINVAL);
    assert_non_null(strstr(err, "pipeline depth 0"));
    o = opts(LOOM_DYN_PRIORITY, 0, 1, 0.5);
    assert_int_equal(loom_dyn_run_local(&o, &app, NULL, err, sizeof err), LOOM_EINVAL);
    o = opts(LOOM_DYN_PRIORITY, 8, 1, 0.5);
    o.dim = 0;
    assert_int_equal(loom_dyn_run_local(&o, &app, NULL, err, sizeof err), LOOM_EINVAL);
    o = opts(LOOM_DYN_PRIORITY, 8, 1, 0.5);
    o.floor = 0;
    assert_int_equal(loom_dyn_run_local(&o, &app, NULL, err, sizeof err), LOOM_EINVAL);
    o = opts(LOOM_DYN_USER, 8, 1, 0.5); /* a user schedule needs schedule() */
    assert_int_equal(loom_dyn_run_local(&o, &app, NULL, err, sizeof err), LOOM_EINVAL);
    assert_int_equal(r.rounds, 0); /* nothing ran */
}

static void test_bad_user_schedule(void **state)
{
    (void)state;
    static recorder r;
    loom_dyn_app app = {.arg = &r,
                        .coupling = coupling,
                        .partial = partial,
                        .apply = apply,
                        .schedule = user_schedule};
    char err[256];
    uint64_t rounds;
    loom_dyn_opts o = opts(LOOM_DYN_USER, 4, 1, 0.5);
    memset(&r, 0, sizeof r);
    r.bad_key = DIM + 7; /* out of range */
    assert_int_equal(loom_dyn_run_local(&o, &app, &rounds, err, sizeof err), LOOM_EKEYRANGE);
    assert_non_null(strstr(err, "round 5: the schedule named key 307, outside the shard [0, 300)"));
    assert_int_equal(rounds, 5); /* rounds 0..4 ran */
    memset(&r, 0, sizeof r);
    r.bad_key = 5; /* the same key twice in round 5 */
    assert_int_equal(loom_dyn_run_local(&o, &app, &rounds, err, sizeof err), LOOM_EKEYRANGE);
    assert_non_null(strstr(err, "named key 5, still in flight or named twice"));
    memset(&r, 0, sizeof r);
    r.bad_key = 105; /* a good schedule runs to the end */
    o.max_rounds = 50;
    run_checked(&r, &o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dependency_check), cmocka_unit_test(test_pipelining_staleness),
        cmocka_unit_test(test_priority),         cmocka_unit_test(test_round_robin),
        cmocka_unit_test(test_bad_options),      cmocka_unit_test(test_bad_user_schedule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
