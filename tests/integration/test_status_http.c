/* The scheduler's status page against hostile HTTP clients, in a running job (threads, real
 * TCP on loopback; src/core/status.c).
 *
 * One job: 1 server, 2 workers. Each worker runs CLOCKS clocks of a BSP table, reports two
 * metrics with exact binary values, and worker 1 also sends the scheduler METRICS messages
 * that break each rule of the payload (msg.h). After a barrier (which, on the same
 * connection as those messages, proves the scheduler has handled them), worker 0 attacks the
 * page while the others wait, then the job ends normally:
 *
 *  - the JSON shows exactly what the job did: roles, every worker's clock and the min clock,
 *    staleness 0, the metrics as reported, and every hostile METRICS dropped and counted;
 *  - malformed requests (bad request lines, versions, headers, bodies, NUL bytes, bare LFs,
 *    unknown methods and paths) get exactly the status code each deserves, oversized heads
 *    431, and every connection is closed after the answer;
 *  - a slow-loris client (a request that never ends) and clients that never read do not keep
 *    the page from answering others, and the slow-loris connection is closed by the server;
 *  - CONCURRENT clients at once, more than the page keeps connections, all get the page;
 *  - more idle connections than the page keeps (STATUS_MAX_CONNS) give way to newcomers
 *    once they are STATUS_EVICT_MS old: the page still answers, and the idle ones are
 *    closed;
 *  - the job still completes: every node's result is 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "core/msg.h"
#include "core/node_impl.h"
#include "core/sha256.h"
#include "core/status.h"
#include "harness.h"
#include "loom/error.h"
#include "loom/secret.h"

#define CLOCKS       5
#define WAIT_MS      20000 /* upper bound of anything that should happen promptly */
#define IDLE_CONNS   (4 * STATUS_MAX_CONNS)
#define RESPONSE_MAX (1 << 20)
#define CONCURRENT   50 /* clients at once, each of which must get its answer */

static _Atomic(loom_node *) scheduler;
static int failures_seen; /* checks that failed inside the job (worker 0's thread) */

static void on_scheduler(loom_node *n)
{
    atomic_store(&scheduler, n);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int page_port(void)
{
    const char *addr = loom_status_address(atomic_load(&scheduler));
    const char *colon = strrchr(addr, ':');
    return colon ? atoi(colon + 1) : -1;
}

/* A TCP connection to the page; every later read waits at most WAIT_MS. */
static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)page_port())};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    struct timeval tv = {WAIT_MS / 1000, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

/* Read until the server closes the connection: the bytes read, or -1 if it did not close
 * within WAIT_MS. A reset after the answer counts as closed. */
static long read_to_close(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    for (;;) {
        char sink[4096];
        char *into = buf && len < cap - 1 ? buf + len : sink;
        size_t room = buf && len < cap - 1 ? cap - 1 - len : sizeof sink;
        ssize_t r = recv(fd, into, room, 0);
        if (r == 0 || (r < 0 && errno == ECONNRESET)) break;
        if (r < 0) return -1;
        if (into != sink) len += (size_t)r;
    }
    if (buf) buf[len] = '\0';
    return (long)len;
}

/* Send a whole request, read the whole answer; its status code (0 if none). */
static int exchange(const char *req, size_t len, char *resp, size_t cap)
{
    int fd = dial();
    if (fd < 0) return -1;
    send(fd, req, len, MSG_NOSIGNAL);
    long got = read_to_close(fd, resp, cap);
    close(fd);
    int code = 0;
    if (got < 0 || sscanf(resp, "HTTP/1.1 %d", &code) != 1) return 0;
    return code;
}

static json_object *get_json(char *resp)
{
    static const char req[] = "GET /status.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    if (exchange(req, sizeof req - 1, resp, RESPONSE_MAX) != 200) return NULL;
    const char *body = strstr(resp, "\r\n\r\n");
    return body ? json_tokener_parse(body + 4) : NULL;
}

static json_object *at(json_object *o, const char *key)
{
    json_object *v = NULL;
    return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static int64_t num(json_object *o, const char *key)
{
    return json_object_get_int64(at(o, key));
}

/* ---- the hostile METRICS payloads (worker 1) ---- */

static size_t put_str(uint8_t *p, const char *s)
{
    size_t n = strlen(s);
    p[0] = (uint8_t)n;
    p[1] = (uint8_t)(n >> 8);
    memcpy(p + 2, s, n);
    return 2 + n;
}

static size_t put_f64(uint8_t *p, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    msg_store_u64(p, bits);
    return 8;
}

/* Payload number i (0 <= i < NUM_HOSTILE), each breaking one rule. */
#define NUM_HOSTILE 9
static size_t hostile_metrics(int i, uint8_t *p)
{
    size_t len = 0;
    switch (i) {
    case 0: /* more names than allowed */
        p[len++] = MSG_METRICS_MAX + 1;
        for (int k = 0; k < MSG_METRICS_MAX + 1; k++) {
            char name[8];
            snprintf(name, sizeof name, "m%d", k);
            len += put_str(p + len, name);
            len += put_f64(p + len, 1.0);
        }
        return len;
    case 1: /* a character outside [A-Za-z0-9_.-] (markup) */
        p[len++] = 1;
        len += put_str(p + len, "<b>x</b>");
        return len + put_f64(p + len, 1.0);
    case 2: /* not a finite value */
        p[len++] = 1;
        len += put_str(p + len, "objective");
        return len + put_f64(p + len, NAN);
    case 3: /* the same name twice */
        p[len++] = 2;
        len += put_str(p + len, "a");
        len += put_f64(p + len, 1.0);
        len += put_str(p + len, "a");
        return len + put_f64(p + len, 2.0);
    case 4: /* a trailing byte */
        p[len++] = 1;
        len += put_str(p + len, "a");
        len += put_f64(p + len, 1.0);
        p[len++] = 0;
        return len;
    case 5: /* an empty name */
        p[len++] = 1;
        len += put_str(p + len, "");
        return len + put_f64(p + len, 1.0);
    case 6: { /* a name one character too long */
        char name[MSG_METRIC_NAME_MAX + 2];
        memset(name, 'n', MSG_METRIC_NAME_MAX + 1);
        name[MSG_METRIC_NAME_MAX + 1] = '\0';
        p[len++] = 1;
        len += put_str(p + len, name);
        return len + put_f64(p + len, 1.0);
    }
    case 7: /* cut short inside the value */
        p[len++] = 1;
        len += put_str(p + len, "a");
        return len + 3;
    default: /* empty */
        return 0;
    }
}

static int send_hostile_metrics(loom_node *n)
{
    for (int i = 0; i < NUM_HOSTILE; i++) {
        uint8_t payload[1024] = {0};
        size_t len = hostile_metrics(i, payload);
        msg_header h = {.type = MSG_METRICS};
        node_frame f = {payload, len, NULL, NULL, 1};
        CHECK_OK(node_send(n, 0, &h, &f, 1));
    }
    return 0;
}

/* ---- worker 0's attacks on the page ---- */

typedef struct bad_request {
    const char *req;
    size_t len; /* 0: strlen(req) */
    int code;
} bad_request;

static const bad_request bad_requests[] = {
    {"GARBAGE\r\n\r\n", 0, 400},
    {"GET / HTTP/2.0\r\n\r\n", 0, 400},
    {"GET / FTP/1.1\r\n\r\n", 0, 400},
    {"GET nopath HTTP/1.1\r\n\r\n", 0, 400},
    {"GET / HTTP/1.1 extra\r\n\r\n", 0, 400},
    {"GET / HTTP/1.1\r\nno colon here\r\n\r\n", 0, 400},
    {"GET / HTTP/1.1\r\n: empty name\r\n\r\n", 0, 400},
    {"GET / HTTP/1.1\r\nX: a\x01z\r\n\r\n", 0, 400},
    {"GET / HTTP/1.1\r\nContent-Length: abc\r\n\r\n", 0, 400},
    {"GET / HTTP/1.1\n\n", 0, 400},
    {"GET /\0 HTTP/1.1\r\n\r\n", 19, 400},
    {"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 0, 413},
    {"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 413},
    {"PUT / HTTP/1.1\r\n\r\n", 0, 405},
    {"DELETE /status.json HTTP/1.1\r\n\r\n", 0, 405},
    {"GET /missing HTTP/1.1\r\nHost: localhost\r\n\r\n", 0, 404},
    {"GET /../etc/passwd HTTP/1.0\r\n\r\n", 0, 404},
    /* Host: required in HTTP/1.1, once; only this page's names (DNS rebinding). */
    {"GET / HTTP/1.1\r\n\r\n", 0, 400},
    {"GET / HTTP/1.1\r\nHost: localhost\r\nhost: localhost\r\n\r\n", 0, 400},
    {"GET /status.json HTTP/1.1\r\nHost: attacker.example\r\n\r\n", 0, 403},
    {"GET /status.json HTTP/1.0\r\nHost: attacker.example:80\r\n\r\n", 0, 403},
    {"GET / HTTP/1.1\r\nHost: localhost.attacker.example\r\n\r\n", 0, 403},
    {"GET / HTTP/1.1\r\nHost: localhost:1\r\n\r\n", 0, 403},
    {"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 0, 403},
    {"GET / HTTP/1.1\r\nHost: \r\n\r\n", 0, 403},
};
#define NUM_BAD (sizeof bad_requests / sizeof bad_requests[0])

static int check_json(json_object *root)
{
    json_object *job = at(root, "job"), *nodes = at(root, "nodes");
    CHECK(job && nodes);
    CHECK(!strcmp(json_object_get_string(at(job, "state")), "running"));
    CHECK(num(job, "servers") == 1 && num(job, "workers") == 2);
    CHECK(num(job, "min_clock") == CLOCKS);
    CHECK(json_object_array_length(nodes) == 4);
    static const char *const roles[] = {"scheduler", "server", "worker", "worker"};
    for (int id = 0; id < 4; id++) {
        json_object *nd = json_object_array_get_idx(nodes, (size_t)id);
        CHECK(num(nd, "id") == id);
        CHECK(!strcmp(json_object_get_string(at(nd, "role")), roles[id]));
        CHECK(!strcmp(json_object_get_string(at(nd, "state")), "running"));
        if (id < 2) continue;
        int rank = id - 2;
        CHECK(num(nd, "clock") == CLOCKS && num(nd, "staleness") == 0);
        CHECK(num(nd, "dead_in_ms") > 0);
        json_object *m = at(nd, "metrics");
        CHECK(json_object_object_length(m) == 2);
        CHECK(json_object_get_double(at(m, "objective")) == 0.25 * (rank + 1));
        CHECK(json_object_get_double(at(m, "accuracy")) == 0.5 + 0.125 * rank);
    }
    CHECK(num(at(root, "failures"), "malformed_dropped") == NUM_HOSTILE);
    return 0;
}

/* Wait (bounded) until both workers' metrics reached the scheduler (they travel with the
 * next heartbeat), then check everything the JSON says. */
static int check_page_data(char *resp)
{
    uint64_t deadline = now_ms() + WAIT_MS;
    for (;;) {
        json_object *root = get_json(resp);
        CHECK(root);
        json_object *nodes = at(root, "nodes");
        int have =
            json_object_object_length(at(json_object_array_get_idx(nodes, 2), "metrics")) == 2 &&
            json_object_object_length(at(json_object_array_get_idx(nodes, 3), "metrics")) == 2;
        if (have || now_ms() > deadline) {
            int rc = check_json(root);
            json_object_put(root);
            return rc;
        }
        json_object_put(root);
        struct timespec pause = {0, 20000000};
        nanosleep(&pause, NULL); /* polling a condition, bounded above */
    }
}

static int check_bad_requests(char *resp)
{
    json_object *root = get_json(resp);
    CHECK(root);
    int64_t bad_before = num(at(root, "http"), "bad_requests");
    json_object_put(root);
    for (size_t i = 0; i < NUM_BAD; i++) {
        const bad_request *b = &bad_requests[i];
        int code = exchange(b->req, b->len ? b->len : strlen(b->req), resp, RESPONSE_MAX);
        if (code != b->code) {
            fprintf(stderr, "request %zu: got %d, want %d\n", i, code, b->code);
            return 1;
        }
    }
    /* Too large a head: 431 as soon as the limit is reached, the rest never read. */
    size_t big = 3 * STATUS_MAX_CONNS * 1024;
    char *huge = malloc(big);
    CHECK(huge);
    memset(huge, 'a', big);
    memcpy(huge, "GET / HTTP/1.1\r\nX-Long: ", 24);
    int code = exchange(huge, big, resp, RESPONSE_MAX);
    free(huge);
    CHECK(code == 431);
    /* HEAD: the head of the page, no body. */
    static const char head[] = "HEAD / HTTP/1.1\r\nHost: [::1]\r\n\r\n";
    CHECK(exchange(head, sizeof head - 1, resp, RESPONSE_MAX) == 200);
    const char *end = strstr(resp, "\r\n\r\n");
    CHECK(end && end[4] == '\0' && strstr(resp, "Content-Type: text/html"));
    /* The HTML page, with its query string ignored. */
    static const char page[] = "GET /?refresh=1 HTTP/1.0\r\n\r\n";
    CHECK(exchange(page, sizeof page - 1, resp, RESPONSE_MAX) == 200);
    CHECK(strstr(resp, "<title>Loom job</title>") && strstr(resp, "worker 1"));
    /* The names a Host may give, with the page's port or none. */
    const char *const hosts[] = {"localhost",    "LocalHost",    "127.0.0.1", "[::1]",
                                 "localhost:%d", "127.0.0.1:%d", "[::1]:%d"};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        char host[64], req[128];
        snprintf(host, sizeof host, hosts[i], page_port());
        int len = snprintf(req, sizeof req, "GET /status.json HTTP/1.1\r\nHost: %s\r\n\r\n", host);
        code = exchange(req, (size_t)len, resp, RESPONSE_MAX);
        if (code != 200) {
            fprintf(stderr, "Host: %s: got %d, want 200\n", host, code);
            return 1;
        }
    }
    root = get_json(resp);
    CHECK(root);
    int64_t bad_after = num(at(root, "http"), "bad_requests");
    json_object_put(root);
    CHECK(bad_after - bad_before == (int64_t)NUM_BAD + 1);
    return 0;
}

/* A slow-loris client and clients that never read hold connections; the page answers
 * others meanwhile, and closes the slow-loris connection at its deadline. */
static int check_slow_clients(char *resp)
{
    int loris = dial();
    CHECK(loris >= 0);
    static const char start[] = "GET / HTTP/1.1\r\nHost: x\r\n";
    CHECK(send(loris, start, sizeof start - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof start - 1));
    int readers[4];
    static const char req[] = "GET /status.json HTTP/1.1\r\n\r\n";
    for (int i = 0; i < 4; i++) {
        readers[i] = dial();
        CHECK(readers[i] >= 0);
        int tiny = 1024;
        setsockopt(readers[i], SOL_SOCKET, SO_RCVBUF, &tiny, sizeof tiny);
        CHECK(send(readers[i], req, sizeof req - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof req - 1));
    }
    json_object *root = get_json(resp);
    CHECK(root);
    json_object_put(root);
    /* One byte more from the loris, then nothing: the server ends it. */
    CHECK(send(loris, "X", 1, MSG_NOSIGNAL) == 1);
    CHECK(read_to_close(loris, NULL, 0) == 0);
    close(loris);
    for (int i = 0; i < 4; i++) close(readers[i]);
    return 0;
}

/* Four times as many idle connections as the page keeps: they give way, the page
 * still answers, and at least all but STATUS_MAX_CONNS of the idle ones are closed. */
static int check_many_connections(char *resp)
{
    int idle[IDLE_CONNS];
    for (int i = 0; i < IDLE_CONNS; i++) {
        idle[i] = dial();
        CHECK(idle[i] >= 0);
    }
    json_object *root = get_json(resp);
    CHECK(root);
    CHECK(num(at(root, "http"), "connections_evicted") >= IDLE_CONNS + 1 - STATUS_MAX_CONNS);
    json_object_put(root);
    int closed = 0;
    for (int i = 0; i < IDLE_CONNS; i++) {
        struct pollfd p = {idle[i], POLLIN, 0};
        if (poll(&p, 1, 0) == 1) {
            char c;
            ssize_t r = recv(idle[i], &c, 1, MSG_DONTWAIT);
            closed += r == 0 || (r < 0 && errno == ECONNRESET);
        }
        close(idle[i]);
    }
    CHECK(closed >= IDLE_CONNS - STATUS_MAX_CONNS);
    return 0;
}

/* CONCURRENT clients at once (more than the page keeps connections): each connects, then
 * all send their requests, then all read: every one gets the whole page (200 and a body
 * that parses), within WAIT_MS. None is dropped to make room for another. */
static int check_concurrent_clients(void)
{
    int fds[CONCURRENT];
    for (int i = 0; i < CONCURRENT; i++) {
        fds[i] = dial();
        CHECK(fds[i] >= 0);
    }
    char req[128];
    int reqlen = snprintf(req, sizeof req,
                          "GET /status.json HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", page_port());
    for (int i = 0; i < CONCURRENT; i++)
        CHECK(send(fds[i], req, (size_t)reqlen, MSG_NOSIGNAL) == reqlen);
    uint64_t start = now_ms();
    int answered = 0;
    char *resp = malloc(RESPONSE_MAX);
    CHECK(resp);
    for (int i = 0; i < CONCURRENT; i++) {
        long got = read_to_close(fds[i], resp, RESPONSE_MAX);
        close(fds[i]);
        const char *body = got > 0 ? strstr(resp, "\r\n\r\n") : NULL;
        json_object *root =
            body && !strncmp(resp, "HTTP/1.1 200 ", 13) ? json_tokener_parse(body + 4) : NULL;
        answered += root != NULL;
        json_object_put(root);
    }
    free(resp);
    uint64_t took = now_ms() - start;
    if (answered != CONCURRENT || took > WAIT_MS) {
        fprintf(stderr, "%d concurrent clients: %d answered in %" PRIu64 " ms\n", CONCURRENT,
                answered, took);
        return 1;
    }
    return 0;
}

static int attack(void)
{
    char *resp = malloc(RESPONSE_MAX);
    CHECK(resp);
    int rc = check_page_data(resp);
    if (!rc) rc = check_concurrent_clients();
    if (!rc) rc = check_bad_requests(resp);
    if (!rc) rc = check_slow_clients(resp);
    if (!rc) rc = check_many_connections(resp);
    if (!rc) rc = check_page_data(resp); /* and it still shows the same */
    free(resp);
    return rc;
}

static int worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.consistency = LOOM_BSP;
    loom_table *t;
    CHECK_OK(loom_table_open(n, "status", &o, &t));
    uint64_t key = (uint64_t)rank;
    float one = 1;
    for (int c = 0; c < CLOCKS; c++) {
        CHECK_OK(loom_push(t, &key, 1, &one));
        CHECK_OK(loom_clock(n));
    }
    CHECK_OK(loom_report_metric(n, "objective", 0.25 * (rank + 1)));
    CHECK_OK(loom_report_metric(n, "accuracy", 0.5 + 0.125 * rank));
    /* The API's own checks. */
    CHECK(loom_report_metric(n, "bad name", 1) == LOOM_EINVAL);
    CHECK(loom_report_metric(n, "objective", INFINITY) == LOOM_EINVAL);
    if (rank == 1) CHECK(send_hostile_metrics(n) == 0);
    CHECK_OK(loom_barrier(n));
    if (rank == 0 && attack()) failures_seen++;
    CHECK_OK(loom_barrier(n));
    return 0;
}

static void test_status_page_under_attack(void **state)
{
    (void)state;
    harness_on_scheduler = on_scheduler;
    harness_result res;
    int rc = harness_run(1, 2, worker, NULL, &res);
    harness_on_scheduler = NULL;
    assert_int_equal(failures_seen, 0);
    assert_int_equal(rc, 0);
}

/* The metric name rule and the METRICS codec, without a job. */
static void test_metrics_codec(void **state)
{
    (void)state;
    assert_true(msg_metric_name_ok("test_accuracy") && msg_metric_name_ok("a.b-C9"));
    assert_false(msg_metric_name_ok("") || msg_metric_name_ok("a b") ||
                 msg_metric_name_ok("abcdefghijklmnopqrstuvwxyzABCDEF"));
    msg_metrics m = {.count = 2, .name = {"objective", "accuracy"}, .value = {0.5, -1e300}};
    blob_writer w = {0};
    msg_metrics_encode(&m, &w);
    assert_false(w.bad);
    msg_metrics back;
    assert_int_equal(msg_metrics_decode(w.buf, w.len, &back), 0);
    assert_int_equal(back.count, 2);
    assert_string_equal(back.name[1], "accuracy");
    assert_true(back.value[1] == -1e300);
    for (size_t cut = 0; cut < w.len; cut++)
        assert_int_equal(msg_metrics_decode(w.buf, cut, &back), -1);
    free(w.buf);
    for (int i = 0; i < NUM_HOSTILE; i++) {
        uint8_t payload[1024] = {0};
        size_t len = hostile_metrics(i, payload);
        assert_int_equal(msg_metrics_decode(payload, len, &back), -1);
    }
}

/* ---- a job with a secret: the page wants its token ---- */

static char job_secret[LOOM_SECRET_LEN + 1];

static void hex(const uint8_t *p, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", p[i]);
}

/* The URL carries HMAC-SHA-256(secret, "loom status page\n" job token), 16 bytes in hex;
 * the page answers only requests that carry it, exactly. */
static int check_token(void)
{
    loom_node *sched = atomic_load(&scheduler);
    static const char label[] = "loom status page\n"; /* the harness's job token is "" */
    uint8_t mac[SHA256_LEN];
    hmac_sha256(job_secret, strlen(job_secret), label, sizeof label - 1, mac);
    char token[33], url[300];
    hex(mac, 16, token);
    snprintf(url, sizeof url, "http://%s/?token=%s", loom_status_address(sched), token);
    if (strcmp(loom_status_url(sched), url)) {
        fprintf(stderr, "status url %s, want %s\n", loom_status_url(sched), url);
        return 1;
    }
    CHECK(!strncmp(loom_status_address(sched), "127.0.0.1:", 10));
    char wrong[33];
    memcpy(wrong, token, sizeof wrong);
    wrong[31] = wrong[31] == '0' ? '1' : '0';
    char *resp = malloc(RESPONSE_MAX);
    CHECK(resp);
    const struct {
        const char *fmt; /* the target, with %s the token or the wrong one */
        const char *with;
        int code;
    } cases[] = {
        {"/status.json", "", 403},
        {"/status.json?token=", "", 403},
        {"/status.json?token=%s", wrong, 403},
        {"/status.json?token=%sx", token, 403},
        {"/status.json?tok=%s", token, 403},
        {"/?token=%.31s", token, 403},
        {"/status.json?token=%s", token, 200},
        {"/?a=b&token=%s#top", token, 200},
        {"/index.html?token=%s&a", token, 200},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char target[128], req[256];
        snprintf(target, sizeof target, cases[i].fmt, cases[i].with);
        int len = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", target);
        int code = exchange(req, (size_t)len, resp, RESPONSE_MAX);
        if (code != cases[i].code) {
            fprintf(stderr, "GET %s: got %d, want %d\n", target, code, cases[i].code);
            free(resp);
            return 1;
        }
        /* The HTML page links to the JSON with the token. */
        char link[80];
        snprintf(link, sizeof link, "href=\"/status.json?token=%s\"", token);
        if (code == 200 && target[1] != 's' && !strstr(resp, link)) {
            fprintf(stderr, "GET %s: no link %s\n", target, link);
            free(resp);
            return 1;
        }
    }
    free(resp);
    return 0;
}

static int token_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    CHECK_OK(loom_barrier(n));
    if (rank == 0 && check_token()) failures_seen++;
    CHECK_OK(loom_barrier(n));
    return 0;
}

static void test_status_page_token(void **state)
{
    (void)state;
    char public_key[LOOM_SECRET_LEN + 1];
    assert_int_equal(zmq_curve_keypair(public_key, job_secret), 0);
    harness_secret = job_secret;
    harness_on_scheduler = on_scheduler;
    failures_seen = 0;
    harness_result res;
    int rc = harness_run(1, 1, token_worker, NULL, &res);
    harness_on_scheduler = NULL;
    harness_secret = NULL;
    assert_int_equal(failures_seen, 0);
    assert_int_equal(rc, 0);
}

/* SHA-256 and HMAC-SHA-256 against FIPS 180-2 and RFC 4231 vectors. */
static void test_sha256(void **state)
{
    (void)state;
    uint8_t out[SHA256_LEN], key[131];
    char text[2 * SHA256_LEN + 1];
    sha256("abc", 3, out);
    hex(out, SHA256_LEN, text);
    assert_string_equal(text, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256(two_blocks, strlen(two_blocks), out);
    hex(out, SHA256_LEN, text);
    assert_string_equal(text, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    memset(key, 0x0b, 20);
    hmac_sha256(key, 20, "Hi There", 8, out);
    hex(out, SHA256_LEN, text);
    assert_string_equal(text, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    memset(key, 0xaa, 131); /* a key longer than a block is hashed first */
    const char *msg = "Test Using Larger Than Block-Size Key - Hash Key First";
    hmac_sha256(key, 131, msg, strlen(msg), out);
    hex(out, SHA256_LEN, text);
    assert_string_equal(text, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metrics_codec),
        cmocka_unit_test(test_status_page_under_attack),
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_status_page_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
