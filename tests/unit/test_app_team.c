/* app_team: the compute threads of a worker process (apps/common/team.c).
 * The split covers every item once, in order, with parts differing by at
 * most one; every thread runs every job exactly once, on a thread of its own
 * (the caller is thread 0); a job's result is the first non-zero one in
 * thread order; jobs see what the caller wrote before the run and the caller
 * sees what they wrote (TSan checks the hand-over: label threads). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/team.h"

static void split_covers(void **state)
{
    (void)state;
    const size_t sizes[] = {0, 1, 2, 7, 100, 101, 1000003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int parts = 1; parts <= 9; parts++) {
            size_t n = sizes[s], next = 0, small = n / (size_t)parts;
            for (int p = 0; p < parts; p++) {
                size_t lo, hi;
                app_team_split(n, parts, p, &lo, &hi);
                assert_int_equal(lo, next);
                assert_true(hi - lo == small || hi - lo == small + 1);
                next = hi;
            }
            assert_int_equal(next, n);
        }
}

#define THREADS 4
#define ROUNDS  200

typedef struct run {
    int round;
    int seen[THREADS];      /* per thread: the round it last ran */
    pthread_t who[THREADS]; /* the thread that ran it */
    int fail_from;          /* threads >= this return their index + 1 */
} run;

static int job(void *arg, int t)
{
    run *r = arg;
    r->seen[t] = r->round;
    r->who[t] = pthread_self();
    return t >= r->fail_from ? t + 1 : 0;
}

static void every_thread_runs_once(void **state)
{
    (void)state;
    app_team *team;
    assert_int_equal(app_team_start(&team, THREADS), 0);
    assert_int_equal(app_team_size(team), THREADS);
    run r = {.fail_from = THREADS};
    for (r.round = 1; r.round <= ROUNDS; r.round++) {
        assert_int_equal(app_team_run(team, job, &r), 0);
        for (int t = 0; t < THREADS; t++) assert_int_equal(r.seen[t], r.round);
    }
    assert_true(pthread_equal(r.who[0], pthread_self()));
    for (int t = 1; t < THREADS; t++) {
        assert_false(pthread_equal(r.who[t], pthread_self()));
        for (int u = 1; u < t; u++) assert_false(pthread_equal(r.who[t], r.who[u]));
    }
    /* The first failure in thread order, whichever finished first. */
    r.fail_from = 2;
    assert_int_equal(app_team_run(team, job, &r), 3);
    r.fail_from = 0;
    assert_int_equal(app_team_run(team, job, &r), 1);
    app_team_stop(team);
}

static void one_thread_is_the_caller(void **state)
{
    (void)state;
    app_team *team;
    assert_int_equal(app_team_start(&team, 1), 0);
    run r = {.round = 1, .fail_from = 0};
    assert_int_equal(app_team_run(team, job, &r), 1);
    assert_true(pthread_equal(r.who[0], pthread_self()));
    app_team_stop(team);
    app_team_stop(NULL);
}

static void sizes_refused(void **state)
{
    (void)state;
    app_team *team = (app_team *)&team;
    assert_int_not_equal(app_team_start(&team, 0), 0);
    assert_null(team);
    assert_int_not_equal(app_team_start(&team, APP_MAX_THREADS + 1), 0);
    assert_null(team);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(split_covers),
        cmocka_unit_test(every_thread_runs_once),
        cmocka_unit_test(one_thread_is_the_caller),
        cmocka_unit_test(sizes_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
