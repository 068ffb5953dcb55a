/* Stochastic reduce between the workers of a serverless job (threads, real TCP on loopback).
 *
 *  - test_exact_bsp, test_exact_notify_ack, test_exact_notify_ack_window: workers start from
 *    different models and only reduce, ROUNDS times, on the root expander (and, windowed, the
 *    ring) of 5 nodes, one worker made slow on purpose (extra arithmetic before each round).
 *    Under BSP and NOTIFY-ACK with any window every reduce of round t must use exactly every
 *    in-neighbour's round-t model, so each worker's final model equals, bit for bit,
 *    X_t = P X_{t-1} computed here in the same arithmetic (the own model, then the
 *    in-neighbours' in ascending order, summed in double, divided, rounded to float).
 *    Every edge's record must show ROUNDS models sent, received and used; under NOTIFY-ACK
 *    with window W no model ever landed on an unread one (recorded by the receiver, per
 *    edge), no receiver ever held more than W unread models of one sender and no sender ever
 *    had more than W unacknowledged (W = 1: exactly one).
 *  - test_window_fills: on the ring, worker 1 holds back its first reduce until it holds W
 *    unread models of worker 0 (its sender, which can run W rounds ahead and, on a ring of 5,
 *    would get 4 ahead without the window): the window is used to the full and no further
 *    (exactly W unread at most, exactly W unacknowledged at most), and the result is still
 *    exact.
 *  - test_async: the same under ASYNC, where what each reduce sees depends on timing: every
 *    final model is still a convex combination of the first ones (each coordinate between
 *    their minimum and maximum), and no edge used more models than it was sent.
 *  - test_open_checks: a graph of another size, or a second reducer, is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sched.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "loom/p2p.h"

#define WORKERS 5
#define DIM     3
#define ROUNDS  30
#define SLOW    1 /* the rank that does extra work before every round */

static loom_graph *graph;
static loom_sync sync_mode;
static int window;
static float final[WORKERS][DIM];
static loom_reducer_stats stats[WORKERS];

static void initial(int rank, float *w)
{
    w[0] = (float)rank;
    w[1] = (float)(rank * rank) / 3.0f;
    w[2] = 1.0f - 0.25f * (float)rank;
}

/* Load, not synchronisation: the slow worker computes this much more per round. */
static volatile double sink;
static void extra_work(void)
{
    double x = 0;
    for (int k = 0; k < 200000; k++) x += (double)k * 1e-9;
    sink = x;
}

/* arg non-NULL: test_window_fills's worker 1 holds back its first reduce. */
static int reduce_worker(loom_node *n, int rank, void *arg)
{
    loom_reducer *r;
    CHECK_OK(loom_reducer_open(n, graph, sync_mode, window, DIM, &r));
    float w[DIM];
    initial(rank, w);
    for (int t = 0; t < ROUNDS; t++) {
        if (rank == SLOW) extra_work();
        /* test_window_fills: worker 1 waits for worker 0 to fill its window. */
        while (arg && t == 0 && rank == 1) {
            loom_reducer_stats st;
            loom_reducer_stats_get(r, &st);
            if (st.in[0].models >= (uint64_t)window) break;
            sched_yield();
        }
        CHECK_OK(loom_reduce(r, w));
    }
    memcpy(final[rank], w, sizeof w);
    loom_reducer_stats_get(r, &stats[rank]);
    CHECK_OK(loom_reducer_close(r));
    return 0;
}

static void run(const char *spec, loom_sync mode, int w, void *arg)
{
    assert_int_equal(loom_graph_build(spec, WORKERS, &graph), 0);
    sync_mode = mode;
    window = w;
    memset(final, 0, sizeof final);
    harness_result res;
    assert_int_equal(harness_run(0, WORKERS, reduce_worker, arg, &res), 0);
}

static void check_exact(void)
{
    float x[WORKERS][DIM], next[WORKERS][DIM];
    for (int i = 0; i < WORKERS; i++) initial(i, x[i]);
    for (int t = 0; t < ROUNDS; t++) {
        for (int i = 0; i < WORKERS; i++) {
            int d = loom_graph_in_degree(graph, i);
            for (int c = 0; c < DIM; c++) {
                double s = x[i][c];
                for (int k = 0; k < d; k++) s += x[loom_graph_in(graph, i, k)][c];
                next[i][c] = (float)(s / (d + 1));
            }
        }
        memcpy(x, next, sizeof x);
    }
    for (int i = 0; i < WORKERS; i++)
        for (int c = 0; c < DIM; c++)
            if (x[i][c] != final[i][c])
                fail_msg("worker %d coordinate %d: %.9g, P^t X_0 says %.9g", i, c, final[i][c],
                         x[i][c]);
    for (int i = 0; i < WORKERS; i++) {
        const loom_reducer_stats *s = &stats[i];
        assert_int_equal(s->rounds, ROUNDS);
        assert_int_equal(s->inputs_used, (uint64_t)ROUNDS * loom_graph_in_degree(graph, i));
        assert_int_equal(s->bytes_sent,
                         (uint64_t)ROUNDS * loom_graph_out_degree(graph, i) * DIM * sizeof(float));
        for (int k = 0; k < s->in_degree; k++) {
            assert_int_equal(s->in[k].models, ROUNDS);
            assert_int_equal(s->in[k].used, ROUNDS);
        }
        for (int k = 0; k < s->out_degree; k++) assert_int_equal(s->out[k].models, ROUNDS);
    }
}

static void test_exact_bsp(void **state)
{
    (void)state;
    run("expander", LOOM_SYNC_BSP, 1, NULL);
    check_exact();
    for (int i = 0; i < WORKERS; i++)
        for (int k = 0; k < stats[i].in_degree; k++) {
            assert_int_equal(stats[i].in[k].overwrites, 0);
            assert_in_range(stats[i].in[k].max_unread, 1, 2);
        }
    loom_graph_free(graph);
}

/* The window's guarantee, from both ends' records: nothing landed on an unread model, at
 * most `window` unread per sender and unacknowledged per receiver; returns the most
 * unacknowledged seen on any edge. */
static uint64_t check_window(void)
{
    uint64_t most = 0;
    for (int i = 0; i < WORKERS; i++) {
        for (int k = 0; k < stats[i].in_degree; k++) {
            const loom_edge_stats *e = &stats[i].in[k];
            if (e->overwrites)
                fail_msg("worker %d: %llu models from worker %d landed on an unread one", i,
                         (unsigned long long)e->overwrites, e->peer);
            assert_in_range(e->max_unread, 1, (uint64_t)window);
        }
        for (int k = 0; k < stats[i].out_degree; k++) {
            assert_in_range(stats[i].out[k].max_unacked, 1, (uint64_t)window);
            if (stats[i].out[k].max_unacked > most) most = stats[i].out[k].max_unacked;
        }
    }
    return most;
}

static void test_exact_notify_ack(void **state)
{
    (void)state;
    run("expander", LOOM_SYNC_NOTIFY_ACK, 1, NULL);
    check_exact();
    check_window();
    loom_graph_free(graph);
}

static void test_exact_notify_ack_window(void **state)
{
    (void)state;
    const char *graphs[] = {"expander", "ring"};
    for (int g = 0; g < 2; g++) {
        run(graphs[g], LOOM_SYNC_NOTIFY_ACK, 3, NULL);
        check_exact();
        check_window();
        loom_graph_free(graph);
    }
}

static void test_window_fills(void **state)
{
    (void)state;
    int hold = 1;
    run("ring", LOOM_SYNC_NOTIFY_ACK, 3, &hold);
    check_exact();
    assert_int_equal(check_window(), 3);
    assert_int_equal(stats[1].in[0].peer, 0);
    assert_int_equal(stats[1].in[0].max_unread, 3);
    loom_graph_free(graph);
}

static void test_async(void **state)
{
    (void)state;
    run("expander", LOOM_SYNC_ASYNC, 1, NULL);
    for (int c = 0; c < DIM; c++) {
        float lo = 1e30f, hi = -1e30f, w[DIM];
        for (int i = 0; i < WORKERS; i++) {
            initial(i, w);
            lo = w[c] < lo ? w[c] : lo;
            hi = w[c] > hi ? w[c] : hi;
        }
        for (int i = 0; i < WORKERS; i++) assert_true(final[i][c] >= lo && final[i][c] <= hi);
    }
    for (int i = 0; i < WORKERS; i++) {
        assert_int_equal(stats[i].rounds, ROUNDS);
        for (int k = 0; k < stats[i].in_degree; k++)
            assert_true(stats[i].in[k].used <= stats[i].in[k].models &&
                        stats[i].in[k].models <= ROUNDS);
    }
    loom_graph_free(graph);
}

static int open_checks_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    loom_graph *other;
    loom_reducer *r, *again;
    CHECK_OK(loom_graph_build("ring", WORKERS + 1, &other));
    CHECK(loom_reducer_open(n, other, LOOM_SYNC_BSP, 1, DIM, &r) == LOOM_EINVAL);
    loom_graph_free(other);
    CHECK(loom_reducer_open(n, graph, LOOM_SYNC_NOTIFY_ACK, 0, DIM, &r) == LOOM_EINVAL);
    CHECK(loom_reducer_open(n, graph, LOOM_SYNC_NOTIFY_ACK, LOOM_REDUCE_WINDOW_MAX + 1, DIM, &r) ==
          LOOM_EINVAL);
    CHECK_OK(loom_reducer_open(n, graph, LOOM_SYNC_BSP, 1, DIM, &r));
    CHECK(loom_reducer_open(n, graph, LOOM_SYNC_BSP, 1, DIM, &again) == LOOM_ESTATE);
    CHECK(loom_reducer_open(n, graph, (loom_sync)7, 1, DIM, &again) == LOOM_EINVAL);
    CHECK_OK(loom_reducer_close(r));
    return 0;
}

static void test_open_checks(void **state)
{
    (void)state;
    assert_int_equal(loom_graph_build("ring", WORKERS, &graph), 0);
    harness_result res;
    assert_int_equal(harness_run(0, WORKERS, open_checks_worker, NULL, &res), 0);
    loom_graph_free(graph);
    loom_sync s;
    assert_int_equal(loom_sync_parse("notify-ack", &s), 0);
    assert_int_equal(s, LOOM_SYNC_NOTIFY_ACK);
    assert_int_equal(loom_sync_parse("barrier", &s), LOOM_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_bsp),
        cmocka_unit_test(test_exact_notify_ack),
        cmocka_unit_test(test_exact_notify_ack_window),
        cmocka_unit_test(test_window_fills),
        cmocka_unit_test(test_async),
        cmocka_unit_test(test_open_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
