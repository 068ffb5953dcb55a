/* Stochastic reduce between the workers of a serverless job (threads, real TCP on loopback).
 *
 *  - test_exact_bsp, test_exact_notify_ack: workers start from different models and only
 *    reduce, ROUNDS times, on the root expander of 5 nodes, one worker made slow on purpose
 *    (extra arithmetic before each round). Under BSP and NOTIFY-ACK every reduce of round t
 *    must use exactly every in-neighbour's round-t model, so each worker's final model equals,
 *    bit for bit, X_t = P X_{t-1} computed here in the same arithmetic (the own model, then
 *    the in-neighbours' in ascending order, summed in double, divided, rounded to float).
 *    Every edge's record must show ROUNDS models sent, received and used; under NOTIFY-ACK no
 *    model ever arrived while the previous one from the same sender was unread (recorded by
 *    the receiver, per edge) and no sender ever had more than one model unacknowledged.
 *  - test_async: the same under ASYNC, where what each reduce sees depends on timing: every
 *    final model is still a convex combination of the first ones (each coordinate between
 *    their minimum and maximum), and no edge used more models than it was sent.
 *  - test_open_checks: a graph of another size, or a second reducer, is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

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

static int reduce_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    loom_reducer *r;
    CHECK_OK(loom_reducer_open(n, graph, sync_mode, DIM, &r));
    float w[DIM];
    initial(rank, w);
    for (int t = 0; t < ROUNDS; t++) {
        if (rank == SLOW) extra_work();
        CHECK_OK(loom_reduce(r, w));
    }
    memcpy(final[rank], w, sizeof w);
    loom_reducer_stats_get(r, &stats[rank]);
    CHECK_OK(loom_reducer_close(r));
    return 0;
}

static void run(const char *spec, loom_sync mode)
{
    assert_int_equal(loom_graph_build(spec, WORKERS, &graph), 0);
    sync_mode = mode;
    memset(final, 0, sizeof final);
    harness_result res;
    assert_int_equal(harness_run(0, WORKERS, reduce_worker, NULL, &res), 0);
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
    run("expander", LOOM_SYNC_BSP);
    check_exact();
    loom_graph_free(graph);
}

static void test_exact_notify_ack(void **state)
{
    (void)state;
    run("expander", LOOM_SYNC_NOTIFY_ACK);
    check_exact();
    for (int i = 0; i < WORKERS; i++) {
        for (int k = 0; k < stats[i].in_degree; k++)
            if (stats[i].in[k].overwrites)
                fail_msg("worker %d: %llu models from worker %d arrived over an unread one", i,
                         (unsigned long long)stats[i].in[k].overwrites, stats[i].in[k].peer);
        for (int k = 0; k < stats[i].out_degree; k++)
            assert_int_equal(stats[i].out[k].max_unacked, 1);
    }
    loom_graph_free(graph);
}

static void test_async(void **state)
{
    (void)state;
    run("expander", LOOM_SYNC_ASYNC);
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
    CHECK(loom_reducer_open(n, other, LOOM_SYNC_BSP, DIM, &r) == LOOM_EINVAL);
    loom_graph_free(other);
    CHECK_OK(loom_reducer_open(n, graph, LOOM_SYNC_BSP, DIM, &r));
    CHECK(loom_reducer_open(n, graph, LOOM_SYNC_BSP, DIM, &again) == LOOM_ESTATE);
    CHECK(loom_reducer_open(n, graph, (loom_sync)7, DIM, &again) == LOOM_EINVAL);
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
        cmocka_unit_test(test_async),
        cmocka_unit_test(test_open_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
