/* A thread waiting in loom_wait() reads the sockets itself (node_recv.c,
 * wait_reading), and while it does the I/O thread leaves them alone. When a
 * server joins a running job in a slot the worker had no DEALER to (a free
 * slot of an elastic job), the worker connects one (node_rebind) and the
 * server's replies come on it. A thread already asleep in poll() on the old
 * set of sockets must be woken to poll the new one, or such a reply sits
 * unread. (Replacing a DEALER wakes it anyway: closing the old socket
 * signals the old descriptor, which it polls.)
 *
 *  - test_rebind_wakes_reader: worker 0 closes its DEALER to server 0 (the
 *    free slot), then its main thread waits in loom_wait() for a timestamp
 *    that only a PUSH_ACK from server 0's node id completes. Once it sleeps
 *    in poll(), a helper thread stands in for the joining server: a raw
 *    ROUTER on loopback, bound to that node id with node_rebind() (as the
 *    NODE_REJOINED handler does), sends the worker that PUSH_ACK. The wait
 *    must end with the timestamp completed. Without the wake-up it slept
 *    until the helper gave up and failed the timestamp (the test fails, it
 *    does not hang). */

#define _GNU_SOURCE /* syscall() */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "core/msg.h"
#include "core/node_impl.h"
#include "core/node_priv.h"
#include "harness.h"
#include "loom/error.h"
#include "ps/msg_types.h"

/* Upper bound for anything that should happen promptly: a failure, never a synchronisation. */
#define DEADLINE_MS 20000

typedef struct waiter {
    loom_node *node;
    loom_ts ts;
    pid_t tid;        /* the thread in loom_wait() */
    int acks;         /* PUSH_ACKs handled */
    const char *fail; /* what went wrong in the helper, if anything */
} waiter;

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void pause_briefly(void)
{
    struct timespec ts = {0, 2000000}; /* a poll's period, not a synchronisation */
    nanosleep(&ts, NULL);
}

static void on_ack(loom_node *n, void *ctx, node_msg *m)
{
    waiter *w = ctx;
    (void)m;
    w->acks++;
    node_ts_done(n, w->ts, 0);
}

/* Whether thread tid of this process sleeps in poll() now (its current
 * system call, from /proc). */
static int in_poll(pid_t tid)
{
    char path[64], buf[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    long nr = -1;
    int got = fgets(buf, sizeof buf, f) && sscanf(buf, "%ld", &nr) == 1;
    fclose(f);
#ifdef SYS_poll
    if (got && nr == SYS_poll) return 1;
#endif
    return got && nr == SYS_ppoll;
}

/* The stand-in for server 0's replacement. */
static void *replacement(void *arg)
{
    waiter *w = arg;
    loom_node *n = w->node;
    uint64_t deadline = now_ms() + DEADLINE_MS;
    /* Until the waiting thread sleeps in poll(): the socket set it polls is
     * then the one before the rebind. */
    while (!(atomic_load(&n->readers) > 0 && in_poll(w->tid)) && now_ms() < deadline)
        pause_briefly();
    void *ctx = zmq_ctx_new();
    void *router = zmq_socket(ctx, ZMQ_ROUTER);
    int one = 1, zero = 0;
    zmq_setsockopt(router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof zero);
    char ep[256];
    size_t len = sizeof ep;
    if (zmq_bind(router, "tcp://127.0.0.1:*") ||
        zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, ep, &len)) {
        w->fail = "cannot bind the stand-in's ROUTER";
    } else {
        uint8_t rid[MSG_RID_SIZE] = {MSG_RID_TAG, 0x7e, 0x57, 1, 2, 3, 4, 5, 6};
        uint32_t server = node_server_id(loom_num_servers(n), 0);
        pthread_mutex_lock(&n->recv_mu); /* as the handler of NODE_REJOINED holds it */
        int rc = node_rebind(n, server, rid, ep + strlen("tcp://"));
        pthread_mutex_unlock(&n->recv_mu);
        if (rc) w->fail = "node_rebind failed";
    }
    /* The ack, once the worker's new DEALER has connected (until then the
     * ROUTER refuses its routing id: ZMQ_ROUTER_MANDATORY). */
    msg_header h = {.type = MSG_PUSH_ACK, .sender = node_server_id(loom_num_servers(n), 0)};
    uint8_t hdr[MSG_HEADER_SIZE];
    msg_encode_header(&h, hdr);
    int sent = 0;
    while (!w->fail && !sent && now_ms() < deadline) {
        if (zmq_send(router, n->my_rid, n->my_rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
            sent = zmq_send(router, hdr, sizeof hdr, ZMQ_DONTWAIT) >= 0;
        else
            pause_briefly();
    }
    if (!w->fail && !sent) w->fail = "the worker's DEALER never connected to the stand-in";
    /* The waiting thread has until the deadline to read it; then it is
     * released with an error, so that a failure fails rather than hangs. */
    while (!loom_test(n, w->ts) && now_ms() < deadline) pause_briefly();
    if (!loom_test(n, w->ts)) node_ts_done(n, w->ts, LOOM_ETIMEDOUT);
    zmq_close(router);
    zmq_ctx_term(ctx);
    return NULL;
}

static int rebind_worker(loom_node *n, int rank, void *arg)
{
    (void)rank;
    waiter *w = arg;
    w->node = n;
    w->tid = (pid_t)syscall(SYS_gettid);
    w->ts = node_ts_new(n, 1);
    node_set_handler(n, MSG_PUSH_ACK, on_ack, w);
    /* Server 0's slot, as if free: no DEALER to it. */
    peer *p = &n->peers[node_server_id(loom_num_servers(n), 0)];
    pthread_mutex_lock(&n->sock_mu);
    zmq_close(p->dealer);
    p->dealer = NULL;
    pthread_mutex_unlock(&n->sock_mu);
    pthread_t helper;
    CHECK(pthread_create(&helper, NULL, replacement, w) == 0);
    int rc = loom_wait(n, w->ts);
    pthread_join(helper, NULL);
    if (w->fail) fprintf(stderr, "stand-in: %s\n", w->fail);
    CHECK(!w->fail);
    CHECK_OK(rc);
    CHECK(w->acks == 1);
    return 0;
}

static void test_rebind_wakes_reader(void **state)
{
    (void)state;
    waiter w = {0};
    harness_result res;
    harness_run(1, 1, rebind_worker, &w, &res);
    /* The worker's verdict; the end of the job is not this test's (the
     * worker's DEALER to server 0 now leads to the stand-in, gone). */
    assert_int_equal(res.workers[0], 0);
    assert_int_equal(w.acks, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rebind_wakes_reader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
