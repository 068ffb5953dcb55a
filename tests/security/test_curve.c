/* CURVE on every socket (threads, real TCP on loopback; docs/SECURITY.md).
 *
 *  - test_same_result: a job with a secret computes exactly what the same job without one
 *    does, and both equal the sums computed here.
 *  - test_attackers_refused: while a job with a secret runs, attackers speaking ZMTP from
 *    raw libzmq sockets connect to the scheduler's, a server's and a worker's ROUTER: plain ZMTP
 * (no CURVE), CURVE encrypted for a wrong server key, and CURVE for the right server key but with a
 * key pair of their own (the ZAP handler's case). Each sends a forged NODE_FAILED "from the
 * scheduler". Every attempt is refused in the handshake and counted exactly once
 * (loom_stats.connections_refused), nothing reaches the Loom layer (no malformed message, no
 * failure), the job ends with the right values, and each attacked node logs one refusal line and
 * one total at its end.
 *  - test_wire_encrypted: a TCP proxy in front of the scheduler records every byte that
 *    servers and workers exchange with it. Without a secret the greeting names the NULL
 *    mechanism and the server's address (sent in its REGISTER and in the ROSTER) is on the
 *    wire in plain text; with the secret the greeting names CURVE and the address is not
 *    there. (Traffic between workers and servers goes to addresses chosen at bind time,
 *    so the proxy can only sit in front of the scheduler; every socket is set up by the
 *    same code, node_send.c's make_socket/node_connect_dealer/node_bind_router with curve.c.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "core/msg.h"
#include "harness.h"

#define DEADLINE_MS 20000 /* upper bound for what should happen promptly: a failure, not a wait */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A fresh job secret, through the public API (written, then read back). */
static void make_secret(char secret[LOOM_SECRET_LEN + 1])
{
    char dir[] = "/tmp/loom-test-curve.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64], err[256];
    snprintf(path, sizeof path, "%s/secret", dir);
    assert_int_equal(loom_secret_generate(path, 0, err, sizeof err), 0);
    assert_int_equal(loom_secret_load(path, secret, err, sizeof err), 0);
    unlink(path);
    rmdir(dir);
}

static void reset_harness(void)
{
    harness_secret = NULL;
    harness_on_scheduler = NULL;
    harness_on_server = NULL;
}

/* ---- the workload: BSP sums, checked against the sums computed here ---- */

#define KEYS    64
#define CLOCKS  4
#define WORKERS 2

static int64_t delta(int w, int c, int k)
{
    return (int64_t)(w + 1) * 1000003 * (c + 1) + k * 7;
}

static int64_t sum_result[KEYS];

static int sum_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_I64;
    o.storage = LOOM_DENSE;
    o.key_end = KEYS;
    o.consistency = LOOM_BSP;
    loom_table *t;
    CHECK_OK(loom_table_open(n, "sums", &o, &t));
    uint64_t keys[KEYS];
    int64_t vals[KEYS];
    for (int k = 0; k < KEYS; k++) keys[k] = (uint64_t)k;
    for (int c = 0; c < CLOCKS; c++) {
        for (int k = 0; k < KEYS; k++) vals[k] = delta(rank, c, k);
        CHECK_OK(loom_push(t, keys, KEYS, vals));
        CHECK_OK(loom_clock(n));
    }
    CHECK_OK(loom_barrier(n));
    CHECK_OK(loom_pull(t, keys, KEYS, vals));
    for (int k = 0; k < KEYS; k++) {
        int64_t want = 0;
        for (int w = 0; w < WORKERS; w++)
            for (int c = 0; c < CLOCKS; c++) want += delta(w, c, k);
        CHECK(vals[k] == want);
    }
    if (rank == 0) memcpy(sum_result, vals, sizeof vals);
    return 0;
}

static void test_same_result(void **state)
{
    (void)state;
    reset_harness();
    harness_result res;
    int64_t plain[KEYS];
    memset(sum_result, 0, sizeof sum_result);
    assert_int_equal(harness_run(2, WORKERS, sum_worker, NULL, &res), 0);
    memcpy(plain, sum_result, sizeof plain);

    char secret[LOOM_SECRET_LEN + 1];
    make_secret(secret);
    harness_secret = secret;
    memset(sum_result, 0, sizeof sum_result);
    assert_int_equal(harness_run(2, WORKERS, sum_worker, NULL, &res), 0);
    assert_memory_equal(plain, sum_result, sizeof plain);
    assert_true(plain[KEYS - 1] != 0);
    reset_harness();
}

/* ---- attackers ----
 *
 * The attacking worker reads the counters of its own node and of the server. ThreadSanitizer
 * cannot see that a node outlives the job's messages (they pass through libzmq), so the
 * server's thread waits in harness_on_server (its node serves from its I/O thread
 * meanwhile) until the worker has read them: that orders the reads before the server's
 * release. The scheduler's thread cannot wait so; its counts are checked in its log. */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    loom_node *server;    /* set by on_server; valid until released */
    int released;         /* the worker is done with the server */
    char sched_addr[256]; /* the scheduler's address, from on_scheduler */
    const char *secret;
    uint64_t refused_server, refused_self, malformed_server, malformed_self;
} attack = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void on_scheduler(loom_node *n)
{
    snprintf(attack.sched_addr, sizeof attack.sched_addr, "%s", loom_node_address(n));
}

static void on_server(loom_node *n, int rank)
{
    (void)rank;
    pthread_mutex_lock(&attack.mu);
    attack.server = n;
    pthread_cond_broadcast(&attack.cv);
    while (!attack.released) pthread_cond_wait(&attack.cv, &attack.mu);
    pthread_mutex_unlock(&attack.mu);
}

enum attacker { PLAIN, WRONG_SERVER_KEY, OWN_CLIENT_KEY, ATTACKERS };

/* Connect an attacker of the given kind to `address` (host:port) and queue a forged
 * NODE_FAILED "from the scheduler" blaming node 1. No reconnection: one attempt each. */
static void *attacker_connect(void *ctx, enum attacker kind, const char *address,
                              const char *secret)
{
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int no_reconnect = -1, linger = 0;
    zmq_setsockopt(s, ZMQ_RECONNECT_IVL, &no_reconnect, sizeof no_reconnect);
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    uint8_t rid[4] = {0, 0, 0, 0}; /* the scheduler's routing id */
    zmq_setsockopt(s, ZMQ_ROUTING_ID, rid, sizeof rid);
    if (kind != PLAIN) {
        char pub[41], sec[41], other_pub[41], other_sec[41], job_pub[41];
        zmq_curve_keypair(pub, sec);
        zmq_curve_keypair(other_pub, other_sec);
        zmq_curve_public(job_pub, secret);
        zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 40);
        zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 40);
        zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, kind == OWN_CLIENT_KEY ? job_pub : other_pub, 40);
    }
    char ep[300];
    snprintf(ep, sizeof ep, "tcp://%s", address);
    zmq_connect(s, ep);
    uint8_t hdr[MSG_HEADER_SIZE];
    msg_header h = {.type = MSG_NODE_FAILED, .sender = 0, .a = 1};
    msg_encode_header(&h, hdr);
    zmq_send(s, hdr, sizeof hdr, ZMQ_DONTWAIT); /* queued for a connection that never opens */
    return s;
}

static loom_stats stats_of(loom_node *n)
{
    loom_stats st;
    loom_node_stats(n, &st);
    return st;
}

/* Wait until node n counted `want` refusals (each is counted by n's own CURVE thread). */
static int wait_refused(loom_node *n, uint64_t want)
{
    uint64_t deadline = now_ms() + DEADLINE_MS;
    while (stats_of(n).connections_refused < want && now_ms() < deadline) {
        struct timespec pause = {0, 5 * 1000000L};
        nanosleep(&pause, NULL);
    }
    return stats_of(n).connections_refused == want;
}

/* Worker 0 attacks the scheduler, the server and itself, then every worker runs the sums. */
static int attack_then_sum(loom_node *n, int rank)
{
    if (rank == 0) {
        pthread_mutex_lock(&attack.mu);
        while (!attack.server) pthread_cond_wait(&attack.cv, &attack.mu);
        pthread_mutex_unlock(&attack.mu);
        void *ctx = zmq_ctx_new();
        void *socks[3 * ATTACKERS];
        const char *targets[3] = {attack.sched_addr, loom_node_address(attack.server),
                                  loom_node_address(n)};
        for (int t = 0; t < 3; t++)
            for (int k = 0; k < ATTACKERS; k++)
                socks[t * ATTACKERS + k] =
                    attacker_connect(ctx, (enum attacker)k, targets[t], attack.secret);
        int ok = wait_refused(attack.server, ATTACKERS) && wait_refused(n, ATTACKERS);
        for (int i = 0; i < 3 * ATTACKERS; i++) zmq_close(socks[i]);
        zmq_ctx_term(ctx);
        CHECK(ok);
    }
    /* The job goes on as if nothing happened. */
    CHECK(sum_worker(n, rank, NULL) == 0);
    if (rank == 0) {
        CHECK_OK(loom_barrier(n));
        attack.refused_server = stats_of(attack.server).connections_refused;
        attack.malformed_server = stats_of(attack.server).malformed_dropped;
        attack.refused_self = stats_of(n).connections_refused;
        attack.malformed_self = stats_of(n).malformed_dropped;
    }
    return 0;
}

static int attack_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    int rc = attack_then_sum(n, rank);
    if (rank == 0) { /* whatever happened: the server may go on */
        pthread_mutex_lock(&attack.mu);
        attack.released = 1;
        pthread_cond_broadcast(&attack.cv);
        pthread_mutex_unlock(&attack.mu);
    }
    return rc;
}

/* Lines of file `path` that contain both a and b. */
static int count_lines(const char *path, const char *a, const char *b)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[2048];
    int count = 0;
    while (fgets(line, sizeof line, f)) count += strstr(line, a) && strstr(line, b);
    fclose(f);
    return count;
}

static void test_attackers_refused(void **state)
{
    (void)state;
    reset_harness();
    char secret[LOOM_SECRET_LEN + 1];
    make_secret(secret);
    harness_secret = secret;
    attack.secret = secret;
    attack.server = NULL;
    attack.released = 0;
    harness_on_scheduler = on_scheduler;
    harness_on_server = on_server;

    /* The nodes' log lines go to a file for the duration of the job. */
    char log_path[] = "/tmp/loom-test-curve-log.XXXXXX";
    int log_fd = mkstemp(log_path);
    assert_true(log_fd >= 0);
    fflush(stderr);
    int saved_stderr = dup(STDERR_FILENO);
    dup2(log_fd, STDERR_FILENO);
    harness_result res;
    int rc = harness_run(1, WORKERS, attack_worker, NULL, &res);
    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    close(log_fd);
    FILE *log = fopen(log_path, "r");
    char line[2048];
    while (log && fgets(line, sizeof line, log)) fputs(line, stderr); /* for the record */
    if (log) fclose(log);

    assert_int_equal(rc, 0);
    assert_int_equal(attack.refused_server, ATTACKERS);
    assert_int_equal(attack.refused_self, ATTACKERS);
    assert_int_equal(attack.malformed_server, 0);
    assert_int_equal(attack.malformed_self, 0);
    /* One line at the first refusal and one total at the end, per attacked node; no
     * message dropped anywhere (none got through to be checked). */
    const char *attacked[] = {"[scheduler 0]", "[server 0]", "[worker 0]"};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(count_lines(log_path, attacked[i], "refused a connection"), 1);
        assert_int_equal(count_lines(log_path, attacked[i], "refused 3 connection(s)"), 1);
    }
    assert_int_equal(count_lines(log_path, "[worker 1]", "refused"), 0);
    assert_int_equal(count_lines(log_path, "loom", "dropped"), 0);
    unlink(log_path);
    reset_harness();
}

/* ---- bytes on the wire ---- */

#define CAPTURE_MAX (8u << 20)

static struct {
    int listen_fd, stop[2];
    struct sockaddr_in upstream;
    char *bytes;
    size_t len;
    pthread_t thread;
} proxy;

static void capture(const char *buf, size_t n)
{
    if (proxy.len + n > CAPTURE_MAX) n = CAPTURE_MAX - proxy.len;
    memcpy(proxy.bytes + proxy.len, buf, n);
    proxy.len += n;
}

/* Relay every accepted connection to the scheduler and back, recording both directions. */
static void *proxy_main(void *arg)
{
    (void)arg;
    enum { MAXC = 32 };
    int peer[2 * MAXC]; /* fds in pairs: [2i] accepted, [2i+1] upstream; -1 closed */
    int npairs = 0;
    for (;;) {
        struct pollfd p[2 + 2 * MAXC];
        p[0] = (struct pollfd){proxy.stop[0], POLLIN, 0};
        p[1] = (struct pollfd){proxy.listen_fd, POLLIN, 0};
        for (int i = 0; i < 2 * npairs; i++) p[2 + i] = (struct pollfd){peer[i], POLLIN, 0};
        if (poll(p, (nfds_t)(2 + 2 * npairs), -1) < 0) continue;
        if (p[0].revents) break;
        if ((p[1].revents & POLLIN) && npairs < MAXC) {
            int in = accept(proxy.listen_fd, NULL, NULL);
            int out = socket(AF_INET, SOCK_STREAM, 0);
            if (in >= 0 && out >= 0 &&
                connect(out, (struct sockaddr *)&proxy.upstream, sizeof proxy.upstream) == 0) {
                peer[2 * npairs] = in;
                peer[2 * npairs + 1] = out;
                npairs++;
            } else {
                if (in >= 0) close(in);
                if (out >= 0) close(out);
            }
        }
        for (int i = 0; i < 2 * npairs; i++) {
            if (peer[i] < 0 || !(p[2 + i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[65536];
            ssize_t n = read(peer[i], buf, sizeof buf);
            int other = i ^ 1;
            if (n <= 0) {
                close(peer[i]);
                if (peer[other] >= 0) close(peer[other]);
                peer[i] = peer[other] = -1;
                continue;
            }
            capture(buf, (size_t)n);
            for (ssize_t off = 0; off < n && peer[other] >= 0;) {
                ssize_t w = write(peer[other], buf + off, (size_t)(n - off));
                if (w <= 0) break;
                off += w;
            }
        }
    }
    for (int i = 0; i < 2 * npairs; i++)
        if (peer[i] >= 0) close(peer[i]);
    return NULL;
}

static char server_address[256];

static void proxy_on_scheduler(loom_node *sched)
{
    const char *addr = loom_node_address(sched);
    const char *colon = strrchr(addr, ':');
    proxy.upstream =
        (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    inet_pton(AF_INET, "127.0.0.1", &proxy.upstream.sin_addr);
    proxy.listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in any = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &any.sin_addr);
    socklen_t len = sizeof any;
    if (bind(proxy.listen_fd, (struct sockaddr *)&any, sizeof any) || listen(proxy.listen_fd, 16) ||
        getsockname(proxy.listen_fd, (struct sockaddr *)&any, &len) || pipe(proxy.stop) ||
        pthread_create(&proxy.thread, NULL, proxy_main, NULL)) {
        fprintf(stderr, "test: cannot start the proxy: %s\n", strerror(errno));
        abort();
    }
    snprintf(harness_connect_to, sizeof harness_connect_to, "127.0.0.1:%d", ntohs(any.sin_port));
}

static void record_server(loom_node *n, int rank)
{
    (void)rank;
    snprintf(server_address, sizeof server_address, "%s", loom_node_address(n));
}

static int contains(const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= proxy.len; i++)
        if (!memcmp(proxy.bytes + i, needle, n)) return 1;
    return 0;
}

/* Run a job through the proxy; leaves its capture in proxy.bytes/len. */
static void run_through_proxy(const char *secret)
{
    reset_harness();
    harness_secret = secret;
    harness_on_scheduler = proxy_on_scheduler;
    harness_on_server = record_server;
    proxy.len = 0;
    server_address[0] = '\0';
    harness_result res;
    assert_int_equal(harness_run(1, WORKERS, sum_worker, NULL, &res), 0);
    assert_int_equal(write(proxy.stop[1], "x", 1), 1);
    pthread_join(proxy.thread, NULL);
    close(proxy.stop[0]);
    close(proxy.stop[1]);
    close(proxy.listen_fd);
    reset_harness();
    assert_true(proxy.len > 0);
    assert_true(server_address[0] != '\0');
}

static void test_wire_encrypted(void **state)
{
    (void)state;
    proxy.bytes = malloc(CAPTURE_MAX);
    assert_non_null(proxy.bytes);

    run_through_proxy(NULL);
    /* The test's own check: in plain text the pattern is there to be found. */
    assert_true(contains(server_address));
    assert_true(contains("NULL"));
    assert_false(contains("CURVE"));

    char secret[LOOM_SECRET_LEN + 1];
    make_secret(secret);
    run_through_proxy(secret);
    assert_false(contains(server_address));
    assert_true(contains("CURVE"));
    free(proxy.bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_result),
        cmocka_unit_test(test_attackers_refused),
        cmocka_unit_test(test_wire_encrypted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
