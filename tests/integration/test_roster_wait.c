/* A node waiting for its roster sleeps.
 *
 * Until the roster is in, a worker leaves its ROUTER unread (node_recv.c,
 * drain_sockets): what others send it then would name nobody. ZeroMQ keeps
 * a socket's descriptor readable until the socket is read, so a ROUTER that
 * had heard from anyone, and was still polled, woke the I/O thread at once,
 * every round: each waiting worker spun a core. In a job of 256 workers on 2
 * cores those spinning threads took the CPU the launcher and the scheduler
 * needed, and the last workers did not register within the connect timeout
 * (mp.many in CI).
 *
 *  - test_waiting_worker_sleeps: a stand-in scheduler (a raw ROUTER) takes a
 *    worker's REGISTER and never answers. A stranger connects to the
 *    worker's ROUTER and sends it a message. Over the next half second the
 *    process, whose only other threads are ZeroMQ's idle ones, must use a
 *    small part of it: a spinning I/O thread uses all of it, or under heavy
 *    load still half. The worker then gives up at its connect timeout. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <zmq.h>

#include "core/msg.h"
#include "loom/error.h"
#include "loom/node.h"

/* Upper bound for anything that should happen promptly: a failure, never a synchronisation. */
#define DEADLINE_MS 20000
/* The window over which the waiting worker's CPU time is measured. */
#define WINDOW_MS 500
/* At most this much CPU in the window: its heartbeat timer wakes an idle
 * I/O thread a few times; a spinning one takes 250 ms or more of it even
 * when it gets half a core. */
#define MAX_CPU_MS 50

typedef struct starter {
    loom_config cfg;
    int rc;
} starter;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000u;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The worker: loom_node_start() blocks until the roster comes, which it
 * never does here. */
static void *start_worker(void *arg)
{
    starter *s = arg;
    loom_node *node = NULL;
    s->rc = loom_node_start(&s->cfg, &node);
    if (node) loom_finalize(node); /* not reached: there is no roster */
    return NULL;
}

/* The stand-in scheduler's first message, the worker's REGISTER: the
 * worker's own address from it into addr. Returns 0 on success. */
static int take_register(void *router, char *addr, size_t cap)
{
    zmq_pollitem_t item = {router, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&item, 1, DEADLINE_MS) != 1) return -1;
    int found = 0, more = 1;
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, router, 0) < 0) return -1;
        msg_register reg;
        if (!found && msg_register_decode(zmq_msg_data(&part), zmq_msg_size(&part), &reg) == 0) {
            snprintf(addr, cap, "tcp://%s", reg.address);
            found = 1;
        }
        more = zmq_msg_more(&part);
        zmq_msg_close(&part);
    }
    return found ? 0 : -1;
}

static void test_waiting_worker_sleeps(void **state)
{
    (void)state;
    void *ctx = zmq_ctx_new();
    void *sched = zmq_socket(ctx, ZMQ_ROUTER);
    int zero = 0, one = 1;
    zmq_setsockopt(sched, ZMQ_LINGER, &zero, sizeof zero);
    char ep[256];
    size_t len = sizeof ep;
    assert_int_equal(zmq_bind(sched, "tcp://127.0.0.1:*"), 0);
    assert_int_equal(zmq_getsockopt(sched, ZMQ_LAST_ENDPOINT, ep, &len), 0);

    starter s = {0};
    loom_config_default(&s.cfg);
    s.cfg.role = LOOM_WORKER;
    s.cfg.rank = 0;
    s.cfg.num_servers = 1;
    s.cfg.num_workers = 1;
    s.cfg.heartbeat_interval_ms = 100;
    s.cfg.connect_timeout_ms = 4000; /* the whole test waits it out */
    snprintf(s.cfg.scheduler, sizeof s.cfg.scheduler, "%s", ep + strlen("tcp://"));
    pthread_t worker;
    assert_int_equal(pthread_create(&worker, NULL, start_worker, &s), 0);

    char addr[MSG_ADDR_MAX + 8];
    assert_int_equal(take_register(sched, addr, sizeof addr), 0);

    /* The stranger: ZMQ_IMMEDIATE refuses a send until it is connected, so
     * once one is taken the worker's ROUTER has a peer and a message. */
    void *stranger = zmq_socket(ctx, ZMQ_DEALER);
    zmq_setsockopt(stranger, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(stranger, ZMQ_IMMEDIATE, &one, sizeof one);
    assert_int_equal(zmq_connect(stranger, addr), 0);
    uint64_t deadline = now_ms() + DEADLINE_MS;
    int sent = 0;
    while (!sent && now_ms() < deadline) {
        sent = zmq_send(stranger, "hello", 5, ZMQ_DONTWAIT) == 5;
        if (!sent) pause_ms(2);
    }
    assert_true(sent);

    /* The window: if the ROUTER still woke the I/O thread, it spins now. Its
     * descriptor is signalled from the moment the connection is attached,
     * with the message or before it, so the spin would fill the window. */
    uint64_t cpu0 = cpu_ms(), wall0 = now_ms();
    pause_ms(WINDOW_MS);
    uint64_t cpu = cpu_ms() - cpu0, wall = now_ms() - wall0;
    fprintf(stderr, "a worker waiting for its roster used %llu ms of CPU in %llu ms\n",
            (unsigned long long)cpu, (unsigned long long)wall);
    assert_true(cpu <= MAX_CPU_MS);

    pthread_join(worker, NULL);
    assert_int_not_equal(s.rc, 0); /* no roster: it gave up */
    zmq_close(stranger);
    zmq_close(sched);
    zmq_ctx_term(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_waiting_worker_sleeps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
