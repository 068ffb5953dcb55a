/* Signals delivered to a running job's process: nothing fails on them.
 *
 * A process of a job gets signals with handlers (a worker's SIGTERM asks it to
 * leave: docs/ELASTIC.md), and ZeroMQ fails a send or a read with EINTR when
 * one arrives during the call, even one that does not wait: a worker once
 * failed its loom_clock with a transport failure that way, as it was asked to
 * leave. Here the worker threads of an in-process BSP job, which send their
 * pushes, pulls and clocks themselves, get SIGUSR1, whose handler does
 * nothing and is installed without SA_RESTART, every 20 us, while they
 * push, pull and clock: every call must succeed and every BSP
 * read be exact. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define WORKERS 2
#define CLOCKS  1500

static atomic_int stop;
static atomic_long signals_sent;
/* The threads signalled: each worker's, from its start to its last clock. A
 * signal sent to the process would go to the main thread, which only waits. */
static pthread_t targets[WORKERS];
static int signalled[WORKERS];
static pthread_mutex_t targets_mu = PTHREAD_MUTEX_INITIALIZER;

static void on_signal(int sig)
{
    (void)sig;
}

static void set_target(int rank, int on)
{
    pthread_mutex_lock(&targets_mu);
    targets[rank] = pthread_self();
    signalled[rank] = on;
    pthread_mutex_unlock(&targets_mu);
}

/* A signal to each worker every 20 us: more often, a call retried on EINTR
 * could be interrupted again before it completes, for as long as a loaded
 * machine lets the sender run and not the worker. */
static void *send_signals(void *arg)
{
    (void)arg;
    const struct timespec pace = {0, 20000};
    while (!atomic_load(&stop)) {
        pthread_mutex_lock(&targets_mu);
        for (int w = 0; w < WORKERS; w++)
            if (signalled[w] && !pthread_kill(targets[w], SIGUSR1))
                atomic_fetch_add(&signals_sent, 1);
        pthread_mutex_unlock(&targets_mu);
        nanosleep(&pace, NULL);
    }
    return NULL;
}

static int bsp_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_I64;
    o.consistency = LOOM_BSP;
    loom_table *t;
    set_target(rank, 1);
    CHECK_OK(loom_table_open(n, "signals", &o, &t));
    uint64_t keys[WORKERS];
    for (int w = 0; w < WORKERS; w++) keys[w] = (uint64_t)w;
    for (int c = 0; c < CLOCKS; c++) {
        int64_t got[WORKERS], one = 1;
        uint64_t me = (uint64_t)rank;
        CHECK_OK(loom_pull(t, keys, WORKERS, got));
        for (int w = 0; w < WORKERS; w++) CHECK(got[w] == c); /* every push of clocks < c */
        CHECK_OK(loom_push(t, &me, 1, &one));
        CHECK_OK(loom_clock(n));
    }
    set_target(rank, 0); /* before the thread can end */
    return 0;
}

static void test_signals_fail_nothing(void **state)
{
    (void)state;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: interrupted calls fail with EINTR */
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &sa, NULL), 0);
    pthread_t sender;
    assert_int_equal(pthread_create(&sender, NULL, send_signals, NULL), 0);
    harness_result r;
    int rc = harness_run(1, WORKERS, bsp_worker, NULL, &r);
    atomic_store(&stop, 1);
    pthread_join(sender, NULL);
    signal(SIGUSR1, SIG_DFL);
    print_message("%ld signals to the workers while they ran\n", atomic_load(&signals_sent));
    assert_int_equal(rc, 0);
    assert_true(atomic_load(&signals_sent) >= CLOCKS); /* they ran under a stream of them */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_signals_fail_nothing)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
