/* Hostile traffic against a running job (threads, real TCP on loopback): every malformed
 * message is dropped and counted exactly once in loom_node_stats().malformed_dropped, and
 * the job goes on computing exactly the right values.
 *
 *  - test_scheduler_hostile: raw ZeroMQ DEALER sockets (not Loom nodes) send the scheduler
 *    garbage frames, bad headers (size, magic, version, type, flags, frame counts),
 *    REGISTERs with truncated or inconsistent blobs, and well-formed messages that claim to
 *    come from job members but arrive from identities that never registered. Most bad
 *    headers are a REGISTER for the wrong job size with one defect: a REGISTER is the one
 *    message an unknown identity gets past the sender check with, so a missing check shows
 *    up as a REJECT. A clean REGISTER for another wrong size is answered with MSG_REJECT;
 *    as messages on one connection are handled in order, that answer proves every earlier
 *    message was handled.
 *  - test_server_hostile: a worker sends a server, over its real connection, well-formed
 *    headers with hostile payloads (key and value frame sizes, keys and ranges outside the
 *    partition, unknown tables, frame counts, oversized pulls, clocks going backwards). Each
 *    is the mutation of a message the server accepts (sent as a control first), so it is
 *    dropped for its own defect. A normal pull on the same connection then proves they were
 *    all handled and that none changed a value. Encoded pull key lists (MSG_F_KEYS_ENC): an
 *    unknown digest, a digest with a wrong count, junk, and encoded keys to a table without
 *    a key-list chain are each dropped, counted and answered with their error.
 *  - test_server_deferred_pull: a malformed pull for a future clock is dropped on arrival,
 *    not held until that clock.
 *  - test_dyn_start_twice: a worker sends the dynamic engine's coordinator (in the scheduler)
 *    a well-formed DYN_START twice before the other worker sent one. The repeat is dropped
 *    and counted once, and ends the run with LOOM_EPROTO for every worker's loom_dyn_run;
 *    no plan is asked for, as not every worker has joined.
 *
 * Not covered here: a header whose sender disagrees with the registered connection it
 * came on (node_send always fills in the sender, and a raw socket would need a member's
 * random routing id); tests/security attacks a running job from other processes.
 *
 * A truncated multipart message cannot reach a node: ZeroMQ delivers a multipart message
 * whole or not at all, so "truncated mid-stream" is not tested; truncated frames are (a
 * short header, a blob cut short, a string running past its frame), and tests/fuzz covers
 * the decoders on arbitrary bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "core/msg.h"
#include "core/node_impl.h"
#include "ft/msg_types.h"
#include "harness.h"
#include "loom/error.h"
#include "ps/filter.h"
#include "ps/msg_types.h"
#include "ps/ps.h"
#include "sched/msg_types.h"

/* Upper bound for anything that should happen promptly: a failure, never a synchronisation. */
#define DEADLINE_MS 20000

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t malformed(loom_node *n)
{
    loom_stats st;
    loom_node_stats(n, &st);
    return st.malformed_dropped;
}

/* ======================================================================================
 * (a) the scheduler, from raw sockets
 * ====================================================================================== */

#define A_SERVERS 1
#define A_WORKERS 2
/* Job sizes in REGISTERs that the scheduler must refuse (REJECT, not counted): one for the
 * hostile messages' base, so that any of them getting past its check shows up as a REJECT;
 * another for the REGISTER whose REJECT marks the end of a connection's traffic. */
#define BASE_SERVERS 7
#define SYNC_SERVERS 99

typedef struct part {
    const void *data;
    size_t len;
} part;

/* What the scheduler hook saw, checked by the test after the job. */
static struct {
    loom_node *sched;
    char error[256];        /* first failure, empty if none */
    uint64_t expected;      /* malformed messages sent */
    uint64_t sent;          /* every message sent */
    uint64_t got_malformed; /* the scheduler's counter once all were handled */
    uint64_t got_received;
} hook;

static void hook_fail(const char *what, int line)
{
    if (!hook.error[0]) snprintf(hook.error, sizeof hook.error, "line %d: %s", line, what);
}
#define HOOK_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) hook_fail(#cond, __LINE__);                                                   \
    } while (0)

static void raw_send(void *sock, const part *parts, int n)
{
    for (int i = 0; i < n; i++)
        HOOK_CHECK(zmq_send(sock, parts[i].data, parts[i].len, i + 1 < n ? ZMQ_SNDMORE : 0) >= 0);
    hook.sent++;
}

/* A message the scheduler must drop and count. */
static void hostile(void *sock, const part *parts, int n)
{
    raw_send(sock, parts, n);
    hook.expected++;
}

static void header(uint8_t out[MSG_HEADER_SIZE], uint8_t type, uint16_t nframes, uint32_t sender)
{
    msg_header h = {.type = type, .nframes = nframes, .sender = sender, .req = 1};
    msg_encode_header(&h, out);
}

static void register_blob(blob_writer *w, int role, int rank, int servers, int workers,
                          const char *addr)
{
    *w = (blob_writer){0};
    blob_put_u8(w, (uint8_t)role);
    blob_put_u32(w, (uint32_t)rank);
    blob_put_u32(w, (uint32_t)servers);
    blob_put_u32(w, (uint32_t)workers);
    blob_put_u32(w, MSG_MAX_PAYLOAD_MIB); /* the frame limit: the default */
    blob_put_str(w, "");                  /* the job token: the harness's jobs have none */
    blob_put_str(w, addr);
}

/* A routing id of the form nodes use (msg.h), different for each call. */
static const uint8_t *loom_rid(void)
{
    static uint8_t rid[MSG_RID_SIZE] = {MSG_RID_TAG};
    rid[MSG_RID_SIZE - 1]++;
    return rid;
}

/* Send a well-formed REGISTER for a job of SYNC_SERVERS servers, then read the scheduler's
 * answers up to its REJECT: messages on one connection are handled in order, so every
 * message sent before it has been handled. Any other REJECT before it means a hostile
 * message got past a check. */
static void sync_with_scheduler(void *sock)
{
    uint8_t h[MSG_HEADER_SIZE];
    header(h, MSG_REGISTER, 1, 0);
    blob_writer w;
    register_blob(&w, LOOM_WORKER, 0, SYNC_SERVERS, A_WORKERS, "127.0.0.1:1");
    raw_send(sock, (part[]){{h, sizeof h}, {w.buf, w.len}}, 2);
    free(w.buf);
    char marker[64];
    snprintf(marker, sizeof marker, "started for %d servers", SYNC_SERVERS);
    for (;;) {
        zmq_msg_t f[2];
        int n = 0, more = 1;
        while (more && n < 2) {
            zmq_msg_init(&f[n]);
            if (zmq_msg_recv(&f[n], sock, 0) < 0) {
                zmq_msg_close(&f[n]);
                hook_fail("no REJECT from the scheduler within the deadline", __LINE__);
                for (int i = 0; i < n; i++) zmq_msg_close(&f[i]);
                return;
            }
            more = zmq_msg_more(&f[n]);
            n++;
        }
        HOOK_CHECK(!more && n == 2);
        msg_header rh;
        HOOK_CHECK(msg_decode_header(zmq_msg_data(&f[0]), zmq_msg_size(&f[0]), (size_t)n - 1,
                                     &rh) == MSG_OK);
        HOOK_CHECK(rh.type == MSG_REJECT && rh.a == LOOM_ECONFIG);
        char why[256] = "";
        if (n == 2) {
            blob_reader r = {zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), 0};
            blob_get_str(&r, why, sizeof why);
        }
        for (int i = 0; i < n; i++) zmq_msg_close(&f[i]);
        if (strstr(why, marker)) return;
        fprintf(stderr, "a hostile REGISTER was answered: %s\n", why);
        hook_fail("a hostile message got past its check (answered with a REJECT)", __LINE__);
    }
}

static void *raw_dealer(void *ctx, const char *addr, const void *rid, size_t rid_len)
{
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int timeout = DEADLINE_MS, zero = 0;
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &timeout, sizeof timeout);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (rid) HOOK_CHECK(zmq_setsockopt(s, ZMQ_ROUTING_ID, rid, rid_len) == 0);
    char ep[300];
    snprintf(ep, sizeof ep, "tcp://%s", addr);
    HOOK_CHECK(zmq_connect(s, ep) == 0);
    return s;
}

/* Messages that claim to come from job members: well-formed, but from an identity that
 * never registered. */
static void claim_to_be_members(void *sock)
{
    uint32_t w0 = node_worker_id(A_SERVERS, 0), s0 = node_server_id(A_SERVERS, 0);
    static const uint8_t types[] = {MSG_HEARTBEAT, MSG_DONE, MSG_BARRIER, MSG_CLOCK};
    uint8_t h[MSG_HEADER_SIZE];
    for (size_t i = 0; i < sizeof types; i++) {
        header(h, types[i], 0, w0);
        hostile(sock, (part[]){{h, sizeof h}}, 1);
    }
    header(h, MSG_ROSTER_ACK, 0, s0);
    hostile(sock, (part[]){{h, sizeof h}}, 1);
}

/* Bad frames and headers. Most are a REGISTER (header + blob for a job of BASE_SERVERS
 * servers) with one defect: a REGISTER from an unknown identity is the one message that
 * goes past the sender check, so without the check under test it would be answered with
 * a REJECT. */
static void bad_headers(void *a)
{
    blob_writer w;
    register_blob(&w, LOOM_WORKER, 1, BASE_SERVERS, A_WORKERS, "127.0.0.1:3");
    part blob = {w.buf, w.len};
    uint8_t good[MSG_HEADER_SIZE], big[MSG_HEADER_SIZE + 1] = {0}, bad[MSG_HEADER_SIZE];
    header(good, MSG_REGISTER, 1, 0);
    memcpy(big, good, sizeof good);
    hostile(a, (part[]){{"", 0}}, 1);                           /* an empty frame */
    hostile(a, (part[]){{good, 1}}, 1);                         /* a 1-byte frame */
    hostile(a, (part[]){{good, MSG_HEADER_SIZE - 1}, blob}, 2); /* a header one byte short */
    hostile(a, (part[]){{big, sizeof big}, blob}, 2);           /* one byte long */
    memcpy(bad, good, sizeof bad), bad[0] ^= 0xFF;              /* bad magic */
    hostile(a, (part[]){{bad, sizeof bad}, blob}, 2);
    memcpy(bad, good, sizeof bad), bad[1] = 0; /* bad magic, high byte */
    hostile(a, (part[]){{bad, sizeof bad}, blob}, 2);
    static const uint8_t versions[] = {0, MSG_VERSION + 1, 255};
    for (size_t i = 0; i < sizeof versions; i++) {
        memcpy(bad, good, sizeof bad), bad[2] = versions[i];
        hostile(a, (part[]){{bad, sizeof bad}, blob}, 2);
    }
    /* Unknown types: none, the gap after core's, the one before ps's, the number after the
     * highest any layer registers, the largest byte. */
    static const uint8_t types[] = {0, MSG_LEAVE_ACK + 1, MSG_TABLE_OPEN - 1, MSG_CKPT_FINAL + 1,
                                    255};
    for (size_t i = 0; i < sizeof types; i++) {
        memcpy(bad, good, sizeof bad), bad[3] = types[i];
        hostile(a, (part[]){{bad, sizeof bad}, blob}, 2);
    }
    static const uint16_t flags[] = {0x0004, 0x0100, 0x8000, 0xFFFF};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
        memcpy(bad, good, sizeof bad);
        bad[4] = (uint8_t)flags[i], bad[5] = (uint8_t)(flags[i] >> 8);
        hostile(a, (part[]){{bad, sizeof bad}, blob}, 2);
    }
    /* Frame counts: the header disagrees with what arrived, or the type allows fewer. */
    uint8_t h[MSG_HEADER_SIZE];
    header(h, MSG_REGISTER, 1, 0); /* REGISTER without its blob */
    hostile(a, (part[]){{h, sizeof h}}, 1);
    header(h, MSG_REGISTER, 0, 0); /* with it, the header saying none */
    hostile(a, (part[]){{h, sizeof h}, blob}, 2);
    header(h, MSG_REGISTER, 2, 0); /* two payload frames, the header agreeing */
    hostile(a, (part[]){{h, sizeof h}, blob, blob}, 3);
    header(h, MSG_REGISTER, 1, 0); /* the header says 1, six arrive: more than a node keeps */
    hostile(a, (part[]){{h, sizeof h}, blob, blob, blob, blob, blob, blob}, 7);
    header(h, MSG_REGISTER, 0xFFFF, 0);
    hostile(a, (part[]){{h, sizeof h}, blob}, 2);
    header(h, MSG_PUSH, 3, node_worker_id(A_SERVERS, 0)); /* more than any type has */
    hostile(a, (part[]){{h, sizeof h}, blob, blob, blob}, 4);
    header(h, MSG_HEARTBEAT, 1, 0); /* HEARTBEAT carries no payload */
    hostile(a, (part[]){{h, sizeof h}, blob}, 2);
    /* A leave request (`loom leave`) is read as a REGISTER is: without its blob, or cut. */
    header(h, MSG_LEAVE, 0, 0);
    hostile(a, (part[]){{h, sizeof h}}, 1);
    header(h, MSG_LEAVE, 1, 0);
    hostile(a, (part[]){{h, sizeof h}, {w.buf, 13}}, 2);
    free(w.buf);
}

/* REGISTER blobs, each a mutation of a valid blob for a job of BASE_SERVERS servers. */
static void bad_register_blobs(void *a)
{
    uint8_t h[MSG_HEADER_SIZE];
    header(h, MSG_REGISTER, 1, 0);
    part reg = {h, sizeof h};
    blob_writer w;
    register_blob(&w, LOOM_WORKER, 1, BASE_SERVERS, A_WORKERS, "127.0.0.1:3");
    hostile(a, (part[]){reg, {w.buf, 0}}, 2);         /* empty */
    hostile(a, (part[]){reg, {w.buf, 1}}, 2);         /* the role only */
    hostile(a, (part[]){reg, {w.buf, 13}}, 2);        /* no frame limit */
    hostile(a, (part[]){reg, {w.buf, 17}}, 2);        /* no token length */
    hostile(a, (part[]){reg, {w.buf, 18}}, 2);        /* half the token length */
    hostile(a, (part[]){reg, {w.buf, 19}}, 2);        /* no address length */
    hostile(a, (part[]){reg, {w.buf, 20}}, 2);        /* half the address length */
    hostile(a, (part[]){reg, {w.buf, w.len - 1}}, 2); /* the address cut short */
    uint8_t mut[512];
    memcpy(mut, w.buf, w.len);
    mut[19] = 0xE8, mut[20] = 0x03; /* address length 1000: runs past the end */
    hostile(a, (part[]){reg, {mut, w.len}}, 2);
    memcpy(mut, w.buf, w.len);
    mut[17] = 0xE8, mut[18] = 0x03; /* token length 1000: runs past the end */
    hostile(a, (part[]){reg, {mut, w.len}}, 2);
    memcpy(mut, w.buf, w.len), mut[w.len] = 'x'; /* a byte after the address */
    hostile(a, (part[]){reg, {mut, w.len + 1}}, 2);
    memcpy(mut, w.buf, w.len), mut[23] = '\0'; /* a NUL inside the address */
    hostile(a, (part[]){reg, {mut, w.len}}, 2);
    static const uint8_t roles[] = {LOOM_SCHEDULER, 3, 255};
    for (size_t i = 0; i < sizeof roles; i++) {
        memcpy(mut, w.buf, w.len), mut[0] = roles[i];
        hostile(a, (part[]){reg, {mut, w.len}}, 2);
    }
    free(w.buf);
    register_blob(&w, LOOM_WORKER, 1, BASE_SERVERS, A_WORKERS, ""); /* an empty address */
    hostile(a, (part[]){reg, {w.buf, w.len}}, 2);
    free(w.buf);
    char long_addr[300];
    memset(long_addr, 'a', sizeof long_addr - 1);
    long_addr[sizeof long_addr - 1] = '\0';
    register_blob(&w, LOOM_WORKER, 1, BASE_SERVERS, A_WORKERS, long_addr); /* too long */
    hostile(a, (part[]){reg, {w.buf, w.len}}, 2);
    free(w.buf);
    for (size_t i = 0; i < sizeof mut; i++) mut[i] = (uint8_t)(i * 151u + 7u);
    hostile(a, (part[]){reg, {mut, 64}}, 2); /* garbage */
}

static void scheduler_hook(loom_node *sched)
{
    hook.sched = sched;
    const char *addr = loom_node_address(sched);
    void *ctx = zmq_ctx_new();
    uint32_t w0 = node_worker_id(A_SERVERS, 0);
    uint8_t h[MSG_HEADER_SIZE];
    blob_writer w;

    /* 1. Routing ids not of the form nodes use (msg.h): one longer than any, worker 0's
     * node id (4 bytes, what routing ids were before they were random), one ZeroMQ makes
     * up. Their REGISTER is dropped before the blob is read (the blob's job size is wrong,
     * so getting past that check would not register it); so is a claim to be a member.
     * Nothing they send is answered, so for these connections the test polls the counter. */
    static const char long_rid[17] = "hostile-identity";
    uint8_t w0_rid[4] = {(uint8_t)w0, (uint8_t)(w0 >> 8), (uint8_t)(w0 >> 16), (uint8_t)(w0 >> 24)};
    const part foreign[] = {{long_rid, sizeof long_rid}, {w0_rid, sizeof w0_rid}, {NULL, 0}};
    void *c[3];
    for (int i = 0; i < 3; i++) {
        c[i] = raw_dealer(ctx, addr, foreign[i].data, foreign[i].len);
        header(h, MSG_REGISTER, 1, 0);
        register_blob(&w, LOOM_WORKER, 1, BASE_SERVERS, A_WORKERS, "127.0.0.1:2");
        hostile(c[i], (part[]){{h, sizeof h}, {w.buf, w.len}}, 2);
        free(w.buf);
        header(h, MSG_HEARTBEAT, 0, w0);
        hostile(c[i], (part[]){{h, sizeof h}}, 1);
    }
    uint64_t deadline = now_ms() + DEADLINE_MS;
    while (malformed(sched) < hook.expected && now_ms() < deadline) {
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    HOOK_CHECK(malformed(sched) == hook.expected);

    /* 2. A routing id of the right form that no node registered. */
    void *b = raw_dealer(ctx, addr, loom_rid(), MSG_RID_SIZE);
    claim_to_be_members(b);
    sync_with_scheduler(b);

    /* 3. Another, for every kind of bad header and REGISTER. */
    void *a = raw_dealer(ctx, addr, loom_rid(), MSG_RID_SIZE);
    bad_headers(a);
    bad_register_blobs(a);
    claim_to_be_members(a);
    header(h, MSG_HEARTBEAT, 0, 0); /* claims to be the scheduler itself */
    hostile(a, (part[]){{h, sizeof h}}, 1);
    ps_table_def def;
    HOOK_CHECK(ps_def_from_user(&def, "stolen", NULL, NULL, 0) == 0);
    blob_writer t = {0};
    HOOK_CHECK(ps_def_encode(&def, &t) == 0);
    header(h, MSG_TABLE_OPEN, 1, w0); /* would create a table */
    hostile(a, (part[]){{h, sizeof h}, {t.buf, t.len}}, 2);
    free(t.buf);
    sync_with_scheduler(a);

    loom_stats st;
    loom_node_stats(sched, &st);
    hook.got_malformed = st.malformed_dropped;
    hook.got_received = st.messages_received;
    zmq_close(a);
    zmq_close(b);
    for (int i = 0; i < 3; i++) zmq_close(c[i]);
    zmq_ctx_term(ctx);
}

/* The job after the attack: a sum every worker must see exactly. */
static int sum_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_I64;
    o.consistency = LOOM_BSP;
    loom_table *t;
    CHECK_OK(loom_table_open(n, "sum", &o, &t));
    uint64_t keys[4] = {0, 1, 2, 1000};
    int64_t one[4] = {1, 2, 3, 4};
    for (int c = 0; c < 3; c++) {
        CHECK_OK(loom_push(t, keys, 4, one));
        CHECK_OK(loom_clock(n));
    }
    CHECK_OK(loom_barrier(n));
    int64_t got[4];
    CHECK_OK(loom_pull(t, keys, 4, got));
    for (int k = 0; k < 4; k++) CHECK(got[k] == 3 * A_WORKERS * one[k]);
    /* The members' traffic was not counted as malformed. */
    if (rank == 0) CHECK(malformed(hook.sched) == hook.expected);
    return 0;
}

static void test_scheduler_hostile(void **state)
{
    (void)state;
    memset(&hook, 0, sizeof hook);
    harness_on_scheduler = scheduler_hook;
    harness_result r;
    int rc = harness_run(A_SERVERS, A_WORKERS, sum_worker, NULL, &r);
    harness_on_scheduler = NULL;
    if (hook.error[0]) fail_msg("scheduler hook: %s", hook.error);
    assert_int_equal(hook.got_received, hook.sent);
    assert_int_equal(hook.got_malformed, hook.expected);
    assert_true(hook.expected >= 50);
    assert_int_equal(rc, 0);
}

/* ======================================================================================
 * (b) a server, from a worker's own connection
 * ====================================================================================== */

#define B_SERVERS  2
#define DENSE_KEYS 100 /* table 0: I64 x 2, keys [0, 100): server 0 holds [0, 50) */
#define DENSE_ID   0
#define SPARSE_ID  1 /* table 1: F32 x 1, every uint64 key: server 0 holds [0, 2^63) */
#define NO_TABLE   7

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    loom_node *node[B_SERVERS];
} servers = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {NULL}};

static void server_hook(loom_node *n, int rank)
{
    pthread_mutex_lock(&servers.mu);
    servers.node[rank] = n;
    pthread_cond_broadcast(&servers.cv);
    pthread_mutex_unlock(&servers.mu);
}

/* The server node of rank r, once harness_on_server has published it. */
static loom_node *server_node(int r)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += DEADLINE_MS / 1000;
    pthread_mutex_lock(&servers.mu);
    while (!servers.node[r])
        if (pthread_cond_timedwait(&servers.cv, &servers.mu, &until)) break;
    loom_node *n = servers.node[r];
    pthread_mutex_unlock(&servers.mu);
    return n;
}

static void reset_servers(void)
{
    pthread_mutex_lock(&servers.mu);
    memset(servers.node, 0, sizeof servers.node);
    pthread_mutex_unlock(&servers.mu);
}

/* A message as a worker would send it, with every field under the test's control. */
typedef struct crafted {
    uint8_t type;
    uint16_t flags;
    uint32_t table;
    int64_t clock;
    uint64_t a, b;
    size_t nframes;
    const void *data[MSG_MAX_FRAMES];
    size_t len[MSG_MAX_FRAMES];
} crafted;

static int send_crafted(loom_node *n, crafted c)
{
    msg_header h = {.type = c.type,
                    .flags = c.flags,
                    .table = c.table,
                    .req = 0, /* no pull slot or push sequence of the worker is ever 0 */
                    .clock = c.clock,
                    .a = c.a,
                    .b = c.b};
    node_frame f[MSG_MAX_FRAMES];
    for (size_t i = 0; i < c.nframes; i++) f[i] = (node_frame){c.data[i], c.len[i], NULL, NULL, 1};
    return node_send(n, node_server_id(B_SERVERS, 0), &h, f, c.nframes);
}

static crafted push_keys(uint32_t table, const uint64_t *keys, size_t key_bytes, const void *vals,
                         size_t val_bytes)
{
    return (crafted){.type = MSG_PUSH,
                     .table = table,
                     .nframes = 2,
                     .data = {keys, vals},
                     .len = {key_bytes, val_bytes}};
}

static crafted push_range(uint32_t table, uint64_t begin, uint64_t end, const void *vals,
                          size_t val_bytes)
{
    return (crafted){.type = MSG_PUSH,
                     .flags = MSG_F_RANGE,
                     .table = table,
                     .a = begin,
                     .b = end,
                     .nframes = 1,
                     .data = {vals},
                     .len = {val_bytes}};
}

static crafted pull_keys(uint32_t table, const uint64_t *keys, size_t key_bytes)
{
    return (crafted){.type = MSG_PULL,
                     .table = table,
                     .clock = INT64_MIN,
                     .nframes = 1,
                     .data = {keys},
                     .len = {key_bytes}};
}

/* A pull whose keys frame is a chain of key lists' encoding (MSG_F_KEYS_ENC). */
static crafted pull_encoded(uint32_t table, const uint8_t *frame, size_t len)
{
    crafted c = pull_keys(table, (const uint64_t *)(const void *)frame, len);
    c.flags = MSG_F_KEYS_ENC;
    return c;
}

/* An unencoded key-list frame (src/ps/filter.c) for a f32 table: key form
 * 1 (the list, kept by the receiver) with the n keys, or 2 (a digest) with
 * `digest` and the count n. Returns its length. */
static size_t key_list_frame(uint8_t *out, int form, const uint64_t *keys, uint64_t n,
                             uint64_t digest)
{
    size_t body = 16 + (form == 2 ? 8 : 8 * (size_t)n);
    memset(out, 0, 6 + 16);
    out[0] = 1; /* version; codec 0 */
    for (int i = 0; i < 4; i++) out[2 + i] = (uint8_t)(body >> (8 * i));
    out[6] = LOOM_F32;
    out[7] = (uint8_t)form; /* width 0: a key list */
    for (int i = 0; i < 8; i++) out[14 + i] = (uint8_t)(n >> (8 * i));
    for (uint64_t k = 0; k < (form == 2 ? 1 : n); k++)
        for (int i = 0; i < 8; i++)
            out[22 + 8 * k + i] = (uint8_t)((form == 2 ? digest : keys[k]) >> (8 * i));
    return 6 + body;
}

static crafted pull_range(uint32_t table, uint64_t begin, uint64_t end)
{
    return (crafted){.type = MSG_PULL,
                     .flags = MSG_F_RANGE,
                     .table = table,
                     .clock = INT64_MIN,
                     .a = begin,
                     .b = end};
}

static crafted clock_msg(int64_t clock)
{
    return (crafted){.type = MSG_CLOCK, .clock = clock};
}

static int open_tables(loom_node *n, loom_table **dense, loom_table **sparse)
{
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_I64;
    o.width = 2;
    o.storage = LOOM_DENSE;
    o.key_end = DENSE_KEYS;
    o.consistency = LOOM_ASP;
    o.cache = 0; /* every pull asks the servers */
    CHECK_OK(loom_table_open(n, "dense", &o, dense));
    o = (loom_table_opts)LOOM_TABLE_OPTS_DEFAULT;
    o.consistency = LOOM_ASP;
    o.cache = 0;
    o.filter_pull = "keycache"; /* pull requests' key lists may come as digests */
    CHECK_OK(loom_table_open(n, "sparse", &o, sparse));
    return 0;
}

static int server_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    /* The only worker opens two tables: the scheduler numbers them 0 and 1 in that order
     * (the accepted controls below confirm it). */
    loom_table *dense, *sparse;
    if (open_tables(n, &dense, &sparse)) return 1;
    CHECK(ps_slice_start(loom_table_options(dense), B_SERVERS, 1) == DENSE_KEYS / 2);

    /* Real traffic first: row k = {k, 2k}; sparse keys 5 and 2^62. */
    int64_t want[DENSE_KEYS][2];
    uint64_t all[DENSE_KEYS];
    for (int k = 0; k < DENSE_KEYS; k++) {
        all[k] = (uint64_t)k;
        want[k][0] = k;
        want[k][1] = 2 * k;
    }
    CHECK_OK(loom_push(dense, all, DENSE_KEYS, want));
    uint64_t skeys[3] = {5, 1ull << 62, 0};
    float svals[2] = {1.0f, 2.0f};
    CHECK_OK(loom_push(sparse, skeys, 2, svals));
    loom_ts ts;
    CHECK_OK(loom_flush(dense, &ts));
    CHECK_OK(loom_wait(n, ts));
    CHECK_OK(loom_flush(sparse, &ts));
    CHECK_OK(loom_wait(n, ts)); /* applied: nothing of ours in flight */
    CHECK_OK(loom_clock(n));    /* the servers' clock for this worker is now 1 */

    loom_node *s0 = server_node(0), *s1 = server_node(1);
    CHECK(s0 && s1);
    CHECK(malformed(s0) == 0 && malformed(s1) == 0 && malformed(n) == 0);

    /* Controls: valid messages built like the hostile ones, which server 0 accepts. Their
     * acknowledgements and replies carry req 0, which the worker drops as answering nothing:
     * 4 drops on the worker. */
    uint64_t k37[2] = {3, 7}, k3[1] = {3}, k49[1] = {49};
    int64_t v2[2][2] = {{1, 2}, {3, 4}}, r2[2][2] = {{5, 6}, {7, 8}};
    CHECK_OK(send_crafted(n, push_keys(DENSE_ID, k37, sizeof k37, v2, sizeof v2)));
    CHECK_OK(send_crafted(n, push_range(DENSE_ID, 10, 12, r2, sizeof r2)));
    CHECK_OK(send_crafted(n, pull_keys(DENSE_ID, k49, sizeof k49)));
    CHECK_OK(send_crafted(n, pull_range(SPARSE_ID, 0, 4)));
    CHECK_OK(send_crafted(n, clock_msg(1))); /* the same clock again: fine */
    uint64_t k0123[4] = {0, 1, 2, 3};
    uint8_t list[64], digest_unknown[32], digest_miscounted[32], junk[5] = {1, 0, 9, 9, 9};
    size_t list_len = key_list_frame(list, 1, k0123, 4, 0);
    CHECK_OK(send_crafted(n, pull_encoded(SPARSE_ID, list, list_len))); /* now kept */
    want[3][0] += 1, want[3][1] += 2, want[7][0] += 3, want[7][1] += 4;
    want[10][0] += 5, want[10][1] += 6, want[11][0] += 7, want[11][1] += 8;
    /* The hostile encoded pulls below are answered with their error (req 0
     * too): one more drop each on the worker. */
    const int worker_drops = 5 + 4;
    size_t du_len = key_list_frame(digest_unknown, 2, NULL, 4, 0x0123456789abcdefULL);
    size_t dm_len = key_list_frame(digest_miscounted, 2, NULL, 5, filter_keys_digest(k0123, 4));

    /* The hostile ones: each differs from a control in one defect. */
    uint64_t k3_50[2] = {3, DENSE_KEYS / 2}, k100[1] = {DENSE_KEYS}, kmax[1] = {UINT64_MAX};
    uint64_t k_hi[1] = {(1ull << 63) + 1};
    int64_t v1[1][2] = {{100, 100}}, vbig[4][2] = {{100, 100}, {100, 100}, {100, 100}, {100, 100}};
    float f1 = 100.0f;
    ps_table_def def;
    CHECK_OK(ps_def_from_user(&def, "created-by-a-worker", NULL, NULL, 0));
    blob_writer dw = {0};
    CHECK_OK(ps_def_encode(&def, &dw));
    const crafted bad[] = {
        /* key frame sizes */
        push_keys(DENSE_ID, k37, 12, v1, sizeof v1), /* 1.5 keys, 1 row */
        push_keys(DENSE_ID, k37, 0, v2, 0),          /* no keys */
        /* keys outside server 0's partition, in the table or not */
        push_keys(DENSE_ID, k3_50, sizeof k3_50, vbig, 2 * sizeof *vbig),
        push_keys(DENSE_ID, k100, sizeof k100, v1, sizeof v1),
        push_keys(DENSE_ID, kmax, sizeof kmax, v1, sizeof v1),
        push_keys(SPARSE_ID, k_hi, sizeof k_hi, &f1, sizeof f1),
        /* value frame sizes */
        push_keys(DENSE_ID, k3, sizeof k3, v1, sizeof v1 - 1),      /* a byte short */
        push_keys(DENSE_ID, k3, sizeof k3, vbig, 2 * sizeof *vbig), /* a row too many */
        push_keys(DENSE_ID, k37, sizeof k37, v1, sizeof v1),        /* a row too few */
        push_range(DENSE_ID, 10, 12, vbig, 3 * sizeof *vbig),
        push_range(DENSE_ID, 0, DENSE_KEYS / 2, vbig, sizeof vbig),
        /* unknown tables */
        push_keys(NO_TABLE, k3, sizeof k3, v1, sizeof v1),
        push_keys(UINT32_MAX, k3, sizeof k3, v1, sizeof v1),
        pull_keys(NO_TABLE, k3, sizeof k3),
        pull_range(NO_TABLE, 0, 1),
        /* ranges: empty, reversed, leaving the partition, wrapping */
        push_range(DENSE_ID, 5, 5, vbig, 0),
        push_range(DENSE_ID, 6, 5, vbig, sizeof *vbig),
        push_range(DENSE_ID, 48, 52, vbig, sizeof vbig),
        push_range(DENSE_ID, UINT64_MAX, 1, vbig, sizeof *vbig),
        pull_range(DENSE_ID, 10, 10),
        pull_range(DENSE_ID, 20, 10),
        pull_range(DENSE_ID, 40, 60),
        pull_range(DENSE_ID, 0, 1ull << 40),  /* 2^40 rows, out of range */
        pull_range(SPARSE_ID, 0, 1ull << 40), /* 2^40 rows, in range */
        pull_range(SPARSE_ID, (1ull << 63) - 2, (1ull << 63) + 2),
        /* pulled keys */
        pull_keys(DENSE_ID, k37, 7),
        pull_keys(DENSE_ID, k37, 0),
        pull_keys(DENSE_ID, k3_50, sizeof k3_50),
        pull_keys(DENSE_ID, kmax, sizeof kmax),
        /* encoded key lists: a digest the server never saw, one with another count
         * than its list, bytes that are no encoding, and encoded keys to a table
         * whose pull spec has no key-list filter */
        pull_encoded(SPARSE_ID, digest_unknown, du_len),
        pull_encoded(SPARSE_ID, digest_miscounted, dm_len),
        pull_encoded(SPARSE_ID, junk, sizeof junk),
        pull_encoded(DENSE_ID, list, list_len),
        /* frame counts the type allows but the flags do not, and ones the type does not */
        {.type = MSG_PUSH, .table = DENSE_ID, .nframes = 1, .data = {k3}, .len = {sizeof k3}},
        {.type = MSG_PUSH,
         .flags = MSG_F_RANGE,
         .table = DENSE_ID,
         .a = 3,
         .b = 4,
         .nframes = 2,
         .data = {k3, v1},
         .len = {sizeof k3, sizeof v1}},
        {.type = MSG_PULL, .table = DENSE_ID, .clock = INT64_MIN},
        {.type = MSG_PULL,
         .flags = MSG_F_RANGE,
         .table = DENSE_ID,
         .clock = INT64_MIN,
         .a = 3,
         .b = 4,
         .nframes = 1,
         .data = {k3},
         .len = {sizeof k3}},
        {.type = MSG_PUSH, .table = DENSE_ID},
        {.type = MSG_CLOCK, .clock = 2, .nframes = 1, .data = {k3}, .len = {sizeof k3}},
        /* clocks going backwards (this worker's is 1) */
        clock_msg(0),
        clock_msg(INT64_MIN),
        /* types a server does not take from a worker */
        {.type = MSG_TABLE_CREATE, .table = 5, .nframes = 1, .data = {dw.buf}, .len = {dw.len}},
        {.type = MSG_BARRIER},
        {.type = MSG_PUSH_ACK, .table = DENSE_ID},
        /* control messages that only the scheduler sends: a server has handlers for them,
         * so only the sender check keeps a worker from stopping it or failing the job */
        {.type = MSG_SHUTDOWN},
        {.type = MSG_NODE_FAILED, .a = 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK_OK(send_crafted(n, bad[i]));
    free(dw.buf);

    /* A real pull on the same connection: it is answered after everything above. */
    int64_t got[DENSE_KEYS][2];
    CHECK_OK(loom_pull(dense, all, DENSE_KEYS, got));
    for (int k = 0; k < DENSE_KEYS; k++) {
        if (got[k][0] != want[k][0] || got[k][1] != want[k][1])
            fprintf(stderr, "key %d: got {%lld, %lld}, want {%lld, %lld}\n", k,
                    (long long)got[k][0], (long long)got[k][1], (long long)want[k][0],
                    (long long)want[k][1]);
        CHECK(got[k][0] == want[k][0] && got[k][1] == want[k][1]);
    }
    float sgot[3];
    CHECK_OK(loom_pull(sparse, skeys, 3, sgot));
    CHECK(sgot[0] == 1.0f && sgot[1] == 2.0f && sgot[2] == 0.0f);

    uint64_t dropped = malformed(s0);
    if (dropped != sizeof bad / sizeof *bad)
        fprintf(stderr, "server 0 dropped %llu malformed messages, %zu were sent\n",
                (unsigned long long)dropped, sizeof bad / sizeof *bad);
    CHECK(dropped == sizeof bad / sizeof *bad);
    CHECK(malformed(s1) == 0);
    CHECK(malformed(n) == (uint64_t)worker_drops);
    return 0;
}

static void test_server_hostile(void **state)
{
    (void)state;
    reset_servers();
    harness_on_server = server_hook;
    harness_result r;
    int rc = harness_run(B_SERVERS, 1, server_worker, NULL, &r);
    harness_on_server = NULL;
    assert_int_equal(rc, 0);
}

/* A pull asking for a clock the server has not reached waits there; a malformed one must
 * not: it is dropped (and counted) when it arrives, not when its clock comes. */
static int deferred_worker(loom_node *n, int rank, void *arg)
{
    (void)rank, (void)arg;
    loom_table *dense, *sparse;
    if (open_tables(n, &dense, &sparse)) return 1;
    loom_node *s0 = server_node(0);
    CHECK(s0);
    uint64_t k37[2] = {3, 7};
    crafted c = pull_keys(DENSE_ID, k37, 7); /* key frame not a multiple of 8 */
    c.clock = 3;                             /* the servers are at clock 0 */
    CHECK_OK(send_crafted(n, c));
    int64_t got[2][2];
    CHECK_OK(loom_pull(dense, k37, 2, got)); /* answered at once (ASP), after the above */
    uint64_t on_arrival = malformed(s0);
    /* Let the clock reach 3: a held pull is released and checked now at the latest. */
    for (int i = 0; i < 3; i++) CHECK_OK(loom_clock(n));
    CHECK_OK(loom_pull(dense, k37, 2, got));
    uint64_t at_its_clock = malformed(s0);
    if (on_arrival != 1)
        fprintf(stderr,
                "server 0 counted the malformed pull %s (dropped on arrival: %llu, by its "
                "clock: %llu)\n",
                at_its_clock == 1 ? "only when its clock came" : "never",
                (unsigned long long)on_arrival, (unsigned long long)at_its_clock);
    CHECK(on_arrival == 1 && at_its_clock == 1);
    return 0;
}

static void test_server_deferred_pull(void **state)
{
    (void)state;
    reset_servers();
    harness_on_server = server_hook;
    harness_result r;
    int rc = harness_run(B_SERVERS, 1, deferred_worker, NULL, &r);
    harness_on_server = NULL;
    assert_int_equal(rc, 0);
}

/* ======================================================================================
 * (c) the dynamic engine's coordinator, from a worker's own connection
 * ====================================================================================== */

#define C_WORKERS 2

/* What each worker's loom_dyn_run called back (on that worker's own thread). */
typedef struct dyn_calls {
    int plans_asked; /* schedule(): DYN_PLAN_REQs taken */
    int partials;    /* partial(): DYN_PLANs taken */
} dyn_calls;

static struct {
    dyn_calls calls[C_WORKERS];
    atomic_int worker0_rc;        /* worker 0's loom_dyn_run, read by worker 1 after a barrier */
    atomic_uint_least64_t before; /* the scheduler's malformed count before worker 0 sent */
} dyn;

static void remember_scheduler(loom_node *sched)
{
    hook.sched = sched;
}

/* A plan request can only come from a run started before every worker joined: record it and
 * name a key outside the shard, so that loom_dyn_run returns (LOOM_EKEYRANGE) instead of
 * waiting for the other worker's partial sums. */
static size_t user_schedule(void *arg, uint64_t round, uint64_t lo, uint64_t hi, uint64_t *keys,
                            size_t max)
{
    (void)round, (void)lo, (void)max;
    ((dyn_calls *)arg)->plans_asked++;
    keys[0] = hi;
    return 1;
}

static void dyn_partial(void *arg, uint64_t round, const uint64_t *keys, size_t n, double *out)
{
    (void)round, (void)keys;
    ((dyn_calls *)arg)->partials++;
    memset(out, 0, n * sizeof *out);
}

static int dyn_apply(void *arg, uint64_t round, const uint64_t *keys, size_t n, const double *sums,
                     double *change)
{
    (void)arg, (void)round, (void)keys, (void)sums;
    memset(change, 0, n * sizeof *change);
    return 0;
}

static int dyn_start_twice_worker(loom_node *n, int rank, void *arg)
{
    (void)arg;
    loom_dyn_opts o = {.dim = 8,
                       .parallel = 1,
                       .candidates = 1,
                       .rho = 1,
                       .floor = 1,
                       .depth = 1,
                       .max_rounds = 4,
                       .schedule = LOOM_DYN_USER};
    dyn_calls *calls = &dyn.calls[rank];
    loom_dyn_app app = {
        .arg = calls, .partial = dyn_partial, .apply = dyn_apply, .schedule = user_schedule};
    char err[200];
    if (rank == 0) {
        atomic_store(&dyn.before, malformed(hook.sched));
        /* The DYN_START loom_dyn_run sends (dynamic.c), then loom_dyn_run's own: a repeat
         * before worker 1 sent any. The coordinator handles them in order, so its answer to
         * the repeat is what loom_dyn_run returns. */
        msg_header h = {.type = MSG_DYN_START,
                        .a = o.dim,
                        .b = o.max_rounds,
                        .req = o.depth,
                        .table = o.parallel,
                        .clock = o.extra};
        CHECK_OK(node_send(n, 0, &h, NULL, 0));
        int rc = loom_dyn_run(n, &o, &app, NULL, err, sizeof err);
        if (rc != LOOM_EPROTO)
            fprintf(stderr, "worker 0's loom_dyn_run: %s (%s), %d plans asked of it\n",
                    loom_strerror(rc), err, calls->plans_asked);
        atomic_store(&dyn.worker0_rc, rc);
    }
    /* Worker 1 waits here until worker 0's run has ended; both fail alike if it did not end
     * with LOOM_EPROTO, as worker 1's loom_dyn_run would then wait on a stalled run. */
    CHECK_OK(loom_barrier(n));
    uint64_t before = atomic_load(&dyn.before);
    CHECK(atomic_load(&dyn.worker0_rc) == LOOM_EPROTO);
    CHECK(malformed(hook.sched) == before + 1);
    int rc1 = LOOM_EPROTO;
    if (rank == 1) {
        /* The coordinator sent its DYN_END to worker 1 too, before the barrier's release:
         * worker 1's loom_dyn_run returns it. (Its DYN_START opens a new run that waits for
         * worker 0: not an error.) */
        rc1 = loom_dyn_run(n, &o, &app, NULL, err, sizeof err);
    }
    CHECK_OK(loom_barrier(n)); /* worker 1's DYN_START has been handled */
    CHECK(rc1 == LOOM_EPROTO);
    CHECK(calls->plans_asked == 0 && calls->partials == 0);
    CHECK(malformed(hook.sched) == before + 1);
    return 0;
}

static void test_dyn_start_twice(void **state)
{
    (void)state;
    memset(&hook, 0, sizeof hook);
    memset(dyn.calls, 0, sizeof dyn.calls);
    atomic_store(&dyn.worker0_rc, 0);
    atomic_store(&dyn.before, 0);
    harness_on_scheduler = remember_scheduler;
    harness_result r;
    int rc = harness_run(1, C_WORKERS, dyn_start_twice_worker, NULL, &r);
    harness_on_scheduler = NULL;
    assert_int_equal(r.workers[0], 0);
    assert_int_equal(r.workers[1], 0);
    assert_int_equal(rc, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scheduler_hostile),
        cmocka_unit_test(test_server_hostile),
        cmocka_unit_test(test_server_deferred_pull),
        cmocka_unit_test(test_dyn_start_twice),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
