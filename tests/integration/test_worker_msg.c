/* Worker-to-worker messages (threads, real TCP on loopback): node_send() from one worker to
 * another, which the p2p layer and the layers above it build on.
 *
 *  - test_all_pairs: every worker sends every other worker ROUNDS messages, each carrying
 *    its rank and round in the payload. Every message arrives exactly once, at the worker it
 *    was sent to, named by the node as coming from the worker that sent it (the header's
 *    sender and the verified sender agree with the payload), in the order each sender sent
 *    them; a worker sending to itself gets LOOM_EINVAL.
 *  - test_serverless: the same in a job with no servers (--servers 0), where opening a table
 *    fails with LOOM_ECONFIG instead of waiting for servers that do not exist.
 *  - test_stranger_dropped: a raw DEALER that is no node of the job (a routing id the roster
 *    never bound) sends a worker a well-formed P2P_MODEL claiming to be another worker: the
 *    worker drops and counts it, its handler never sees it, and the real worker's message
 *    that follows is delivered. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "core/msg.h"
#include "core/node_impl.h"
#include "harness.h"
#include "loom/error.h"
#include "p2p/msg_types.h"

#define SERVERS 1
#define WORKERS 4
#define ROUNDS  5
/* Upper bound for anything that should happen promptly: a failure, never a synchronisation. */
#define DEADLINE_MS 20000

/* What one worker received, filled by its handler (on whichever thread reads its sockets). */
typedef struct inbox {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int count[WORKERS];      /* messages from each sender rank */
    int next_round[WORKERS]; /* the round expected next from each sender */
    int bad;                 /* a message that broke a rule: wrong sender, order or payload */
} inbox;

static inbox inboxes[WORKERS];

static void on_model(loom_node *n, void *ctx, node_msg *m)
{
    inbox *in = ctx;
    int rank = -1, ok = node_frame_size(m, 0) == 2 * sizeof(float) && m->h.a == 2;
    float v[2] = {-1, -1};
    if (ok) memcpy(v, node_frame_data(m, 0), sizeof v);
    ok = ok && node_peer_role(n, m->from, &rank) == LOOM_WORKER && m->h.sender == m->from &&
         v[0] == (float)rank && rank != loom_rank(n);
    pthread_mutex_lock(&in->mu);
    if (!ok || v[1] != (float)in->next_round[rank] || (uint64_t)in->next_round[rank] != m->h.req) {
        in->bad++;
    } else {
        in->count[rank]++;
        in->next_round[rank]++;
    }
    pthread_cond_broadcast(&in->cv);
    pthread_mutex_unlock(&in->mu);
}

static int send_model(loom_node *n, uint32_t dest, int round)
{
    float v[2] = {(float)loom_rank(n), (float)round};
    msg_header h = {.type = MSG_P2P_MODEL, .req = (uint64_t)round, .a = 2};
    node_frame f = {v, sizeof v, NULL, NULL, 1};
    return node_send(n, dest, &h, &f, 1);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Wait until `in` holds `want` messages from each rank in senders (a bit set), or the deadline. */
static int wait_for(inbox *in, unsigned senders, int want)
{
    uint64_t deadline = now_ms() + DEADLINE_MS;
    pthread_mutex_lock(&in->mu);
    for (;;) {
        int missing = 0;
        for (int r = 0; r < WORKERS; r++)
            if (senders >> r & 1u) missing |= in->count[r] < want;
        if (!missing || now_ms() > deadline) break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&in->cv, &in->mu, &ts);
    }
    int ok = 1;
    for (int r = 0; r < WORKERS; r++)
        if (senders >> r & 1u) ok &= in->count[r] == want;
    ok &= in->bad == 0;
    pthread_mutex_unlock(&in->mu);
    return ok;
}

static void inboxes_reset(void)
{
    for (int r = 0; r < WORKERS; r++) {
        memset(&inboxes[r], 0, sizeof inboxes[r]);
        pthread_mutex_init(&inboxes[r].mu, NULL);
        pthread_cond_init(&inboxes[r].cv, NULL);
        for (int s = 0; s < WORKERS; s++) inboxes[r].next_round[s] = 1;
    }
}

static int all_pairs_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    node_set_handler(n, MSG_P2P_MODEL, on_model, &inboxes[rank]);
    CHECK_OK(loom_barrier(n)); /* every handler is in place before anyone sends */
    int servers = loom_num_servers(n);
    uint32_t me = node_worker_id(servers, rank);
    float v = 0;
    msg_header h = {.type = MSG_P2P_MODEL, .req = 1, .a = 1};
    node_frame f = {&v, sizeof v, NULL, NULL, 1};
    CHECK(node_send(n, me, &h, &f, 1) == LOOM_EINVAL);
    for (int round = 1; round <= ROUNDS; round++)
        for (int r = 0; r < WORKERS; r++)
            if (r != rank) CHECK_OK(send_model(n, node_worker_id(servers, r), round));
    unsigned others = ((1u << WORKERS) - 1) & ~(1u << rank);
    CHECK(wait_for(&inboxes[rank], others, ROUNDS));
    loom_stats st;
    loom_node_stats(n, &st);
    CHECK(st.malformed_dropped == 0);
    if (servers == 0) { /* a serverless job has no tables, and says so */
        loom_table *t;
        loom_table_opts o = {.width = 1};
        CHECK(loom_table_open(n, "w", &o, &t) == LOOM_ECONFIG);
    }
    return 0;
}

static void test_all_pairs(void **state)
{
    (void)state;
    inboxes_reset();
    harness_result res;
    assert_int_equal(harness_run(SERVERS, WORKERS, all_pairs_worker, NULL, &res), 0);
    for (int r = 0; r < WORKERS; r++) assert_int_equal(inboxes[r].count[r], 0);
}

/* A job with --servers 0: a scheduler and workers only, which reach each other, meet at
 * barriers and end. */
static void test_serverless(void **state)
{
    (void)state;
    inboxes_reset();
    harness_result res;
    assert_int_equal(harness_run(0, WORKERS, all_pairs_worker, NULL, &res), 0);
}

/* ---- a stranger claiming to be a worker ---- */

static int stranger_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    node_set_handler(n, MSG_P2P_MODEL, on_model, &inboxes[rank]);
    CHECK_OK(loom_barrier(n));
    if (rank == 0) {
        void *ctx = zmq_ctx_new();
        void *sock = zmq_socket(ctx, ZMQ_DEALER);
        uint8_t rid[MSG_RID_SIZE] = {MSG_RID_TAG, 1, 2, 3, 4, 5, 6, 7, 8};
        char ep[300];
        snprintf(ep, sizeof ep, "tcp://%s", loom_node_address(n));
        CHECK(zmq_setsockopt(sock, ZMQ_ROUTING_ID, rid, sizeof rid) == 0);
        CHECK(zmq_connect(sock, ep) == 0);
        /* Exactly what worker 1 would send, round 1, from a connection the roster never named. */
        uint8_t hdr[MSG_HEADER_SIZE];
        msg_header h = {.type = MSG_P2P_MODEL,
                        .nframes = 1,
                        .sender = node_worker_id(SERVERS, 1),
                        .req = 1,
                        .a = 2};
        msg_encode_header(&h, hdr);
        float v[2] = {1, 1};
        CHECK(zmq_send(sock, hdr, sizeof hdr, ZMQ_SNDMORE) == sizeof hdr);
        CHECK(zmq_send(sock, v, sizeof v, 0) == sizeof v);
        uint64_t deadline = now_ms() + DEADLINE_MS;
        loom_stats st;
        for (loom_node_stats(n, &st); st.malformed_dropped == 0 && now_ms() < deadline;
             loom_node_stats(n, &st))
            nanosleep(&(struct timespec){0, 1000000}, NULL); /* polls a counter, bounded */
        CHECK(st.malformed_dropped == 1);
        int linger = 0;
        zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
        zmq_close(sock);
        zmq_ctx_term(ctx);
    }
    CHECK_OK(loom_barrier(n)); /* the stranger's message was handled */
    if (rank == 1) CHECK_OK(send_model(n, node_worker_id(SERVERS, 0), 1));
    if (rank == 0) CHECK(wait_for(&inboxes[0], 1u << 1, 1));
    return 0;
}

static void test_stranger_dropped(void **state)
{
    (void)state;
    inboxes_reset();
    harness_result res;
    assert_int_equal(harness_run(SERVERS, 2, stranger_worker, NULL, &res), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_pairs),
        cmocka_unit_test(test_serverless),
        cmocka_unit_test(test_stranger_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
