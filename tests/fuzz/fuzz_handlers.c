/* fuzz_handlers: the message handlers of every role, fed hostile but well-framed messages.
 *
 * Each input is a script run against a whole job in one thread (src/core/node_fuzz.h):
 * a scheduler, 2 servers and 2 workers without sockets, with every layer attached as a
 * real node has them (layers_attach, src/layers.h), so the scheduler's handlers
 * (src/core/scheduler.c, src/ps/registry.c, the checkpoint parts of src/ft/plan.c, the
 * dynamic engine's coordinator src/sched/dynamic_coord.c), the servers' table handlers
 * (src/ps/server_*.c), the workers' reply checks (src/ps/client_*.c), their blocks of a
 * rotation (src/sched/ring.c), dynamic engine queue (src/sched/dynamic.c), models of a
 * reduce (src/p2p/reduce.c) and sufficient vectors (src/p2p/svb.c), and the core
 * handlers of src/core/node_control.c all run on what the script makes of their traffic.
 *
 * Built two ways like fuzz_decode.c: a libFuzzer target (LOOM_FUZZ=ON, clang) and, in
 * every build, a plain replay driver (LOOM_FUZZ_DRIVER; corpus_handlers/).
 *
 * Input: byte 0 chooses the job's start: bit 2 set = one replica of every key range
 * (LOOM_REPLICAS=1: the servers' replication and failover handlers; replication rounds are
 * cut on the I/O thread's timer, which this job has not, so only forged REPLs arrive);
 * bit 1 set = checkpoints (set_checkpoints); bit 0
 * set = assembling (the scheduler waits for REGISTERs, the others for the roster); clear =
 * running, with three tables that both workers opened (0 "w": sparse f32, SSP(1), sum;
 * 1 "e": dense f64 x4 over [0, 64), BSP, adagrad, pushes as sparse rows; 2 "c": sparse
 * i64 x2, ASP, pushes through keycache and lz4, replies through keycache and zstd) and a
 * sufficient-vector broadcast both opened (width 2, 8 rows, BSP, averaging every 3
 * clocks, rotation every 2). Then operations, each one byte (op % 8) and its arguments
 * (a missing byte reads as 0):
 *   0 inject   from, dest, type, flags, table, req, clock, a, b, frames: a message
 *              encoded by msg_encode_header, the sender field set to `from` unless the
 *              flags byte's bit 7 says otherwise; from >= 5 is an identity that is no
 *              node. Type bytes below 0xE0 are the core's and ps's types, 0xE0..0xFD
 *              the other layers' and later ones (other_types), from 0xFE the byte itself
 *   1 raw      dest, from, header length (0..48) and that many bytes, frames
 *   2 api      worker, call, table, keys, arguments: call bytes below 0xF0 are the
 *              tables' (% 6: pull, push, clock, flush, range pull, wait), from 0xF0 the
 *              other layers' (% 5: SVB add and clock, SVB sync, take a rotation's
 *              block, run the dynamic engine, save a checkpoint part)
 *   3 pump     deliver up to N queued messages
 *   4 tamper   the next queued message with one header byte or frame byte changed
 *   5 drop     the next queued message is lost
 *   6 repeat   the next queued message delivered twice
 *   7 misroute the next queued message delivered to another node
 * A frame is a length byte and that many bytes. At the end the queue is drained.
 *
 * Checks, for every input (besides the sanitizers'):
 *   - every delivered message is counted as dropped at most once, and exactly once when
 *     its framing is bad (header does not decode, sender unknown or not the one the
 *     transport identified): loom_node_stats' malformed_dropped of the destination;
 *   - the job's traffic ends: at most MAX_DELIVERIES messages however hostile the script
 *     (a handler that answers every message with another would loop forever). */
#define _XOPEN_SOURCE 700 /* nftw */

#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/node_fuzz.h"
#include "ft/ft.h"
#include "ft/msg_types.h"
#include "fuzz_driver.h"
#include "layers.h"
#include "loom/error.h"
#include "loom/loom.h"
#include "loom/sched.h"
#include "loom/svb.h"
#include "loom/table.h"
#include "p2p/msg_types.h"
#include "ps/filter.h"
#include "ps/msg_types.h"
#include "ps/ps.h"
#include "sched/msg_types.h"
#include "sched/sched.h"

#define SERVERS         2
#define WORKERS         2
#define NODES           (1 + SERVERS + WORKERS)
#define TABLES          3
#define MAX_OPS         256
#define MAX_DELIVERIES  20000
#define MAX_KEYS        8
#define FIRST_WORKER_ID (1 + SERVERS)
#define SVB_WIDTH       2
#define SVB_ROWS        8

/* The message types beyond inject's numbering of the core's and ps's first ones (the
 * other layers', replication's, rejoining's), for its type bytes 0xE0..0xFD. New types go
 * at the end, so that the corpus's inputs keep their meaning. */
static const uint8_t other_types[] = {
    MSG_ROWS_PUSH,    MSG_ROWS_PUSH_ACK, MSG_CKPT_PART,     MSG_SCHED_BLOCK, MSG_DYN_START,
    MSG_DYN_PLAN_REQ, MSG_DYN_PLAN,      MSG_DYN_PSUM,      MSG_DYN_SUM,     MSG_DYN_END,
    MSG_P2P_MODEL,    MSG_P2P_ACK,       MSG_SVB_SVS,       MSG_SVB_REPLICA, MSG_WORKER_LOST,
    MSG_REPL,         MSG_REPL_ACK,      MSG_NODE_REJOINED, MSG_REJOIN_COPY, MSG_REJOIN_COPIED,
    MSG_REJOIN_READY, MSG_HANDBACK,      MSG_HANDBACK_ACK,  MSG_PARKED,      MSG_CKPT_BASE,
    MSG_CKPT_PLAN,    MSG_CKPT_SKIP,     MSG_CKPT_FINAL,    MSG_PARTS_REQ,   MSG_PARTS_GIVE};
#define OTHER_TYPES     (sizeof other_types / sizeof *other_types)
#define OTHER_TYPES_END 0xFE /* type bytes from here on are the type itself */
_Static_assert(OTHER_TYPES <= OTHER_TYPES_END - 0xE0, "inject's type bytes 0xE0..0xFD name at "
                                                      "most 30 types");

/* What the inputs reached, so the driver can tell that its seeds reach the handlers. */
static struct {
    unsigned long jobs, delivered, framing_drops, handler_drops, pulls_done,
        rosters;                                                  /* delivered */
    unsigned long svb_clocks, blocks_taken, dyn_runs, ckpt_parts; /* completed */
} stats;

/* ---- the script's bytes ---- */

typedef struct script {
    const uint8_t *p;
    size_t left;
} script;

static uint8_t next_u8(script *s)
{
    if (!s->left) return 0;
    s->left--;
    return *s->p++;
}

/* A number from one byte: small values often, a few edge values, else 8 more bytes. */
static uint64_t next_num(script *s)
{
    uint8_t b = next_u8(s);
    switch (b) {
    case 0xFF:
        return UINT64_MAX;
    case 0xFE:
        return (uint64_t)INT64_MAX + 1;
    case 0xFD: {
        uint64_t v = 0;
        for (int i = 0; i < 8; i++) v |= (uint64_t)next_u8(s) << (8 * i);
        return v;
    }
    default:
        return b;
    }
}

static void next_frames(script *s, node_fuzz_msg *m)
{
    size_t count = next_u8(s) % (MSG_MAX_FRAMES + 1);
    for (size_t i = 0; i < count; i++) {
        size_t len = next_u8(s);
        if (len > s->left) len = s->left;
        node_fuzz_msg_add_frame(m, s->p, len);
        s->p += len;
        s->left -= len;
    }
}

/* ---- the job ---- */

typedef struct run {
    node_fuzz_job *job;
    loom_table *tables[WORKERS][TABLES];
    loom_svb *svb[WORKERS];
    loom_ts last_ts[WORKERS];
    /* Keys and output buffers of asynchronous pulls: valid until the job is gone. */
    void *keep[2 * MAX_OPS];
    int nkeep;
} run;

static void *keep(run *r, size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    FUZZ_CHECK(p != NULL && r->nkeep < (int)(sizeof r->keep / sizeof *r->keep));
    r->keep[r->nkeep++] = p;
    return p;
}

static uint64_t dropped(loom_node *n)
{
    loom_stats st;
    loom_node_stats(n, &st);
    return st.malformed_dropped;
}

/* Whether the transport-level checks (node_recv.c's receive_one) must drop m. */
static int bad_framing(const node_fuzz_job *j, const node_fuzz_msg *m, size_t hdr_len)
{
    msg_header h;
    if (msg_decode_header(m->hdr, hdr_len, m->nframes, &h) != MSG_OK) return 1;
    loom_node *n = node_fuzz_job_node(j, m->dest);
    int scheduler = loom_node_role(n) == LOOM_SCHEDULER;
    if (m->from >= NODES || m->from == m->dest) /* not a registered node */
        return !(scheduler && msg_stranger_type(h.type));
    return h.sender != m->from && h.type != MSG_REGISTER;
}

/* Deliver m (taking its frames) and check how it was counted. */
static void deliver(run *r, node_fuzz_msg *m, const uint8_t *rid, size_t rid_len, size_t hdr_len)
{
    loom_node *n = node_fuzz_job_node(r->job, m->dest);
    if (!n) {
        node_fuzz_msg_close(m);
        return;
    }
    uint8_t own_rid[MSG_RID_SIZE];
    if (!rid) {
        node_fuzz_rid(m->from, own_rid, &rid_len);
        rid = own_rid;
    }
    int bad = bad_framing(r->job, m, hdr_len);
    msg_header h;
    if (!bad && msg_decode_header(m->hdr, hdr_len, m->nframes, &h) == MSG_OK &&
        h.type == MSG_ROSTER && m->from == 0)
        stats.rosters++;
    uint64_t before = dropped(n);
    node_fuzz_deliver(r->job, m, rid, rid_len, hdr_len);
    /* The destination may have been freed only by node_fuzz_job_free. */
    uint64_t delta = dropped(n) - before;
    stats.delivered++;
    FUZZ_CHECK(delta <= 1);
    if (bad) {
        FUZZ_CHECK(delta == 1);
        stats.framing_drops++;
    } else {
        stats.handler_drops += delta;
    }
}

static int take(run *r, node_fuzz_msg *m)
{
    return node_fuzz_job_take(r->job, m);
}

static void step(run *r)
{
    node_fuzz_msg m;
    if (!node_fuzz_job_overrun(r->job) && take(r, &m)) deliver(r, &m, NULL, 0, MSG_HEADER_SIZE);
}

static int open_tables(run *r)
{
    loom_table_opts o[TABLES] = {LOOM_TABLE_OPTS_DEFAULT, LOOM_TABLE_OPTS_DEFAULT,
                                 LOOM_TABLE_OPTS_DEFAULT};
    o[0].staleness = 1;
    o[1].type = LOOM_F64, o[1].width = 4, o[1].storage = LOOM_DENSE, o[1].key_end = 64;
    o[1].consistency = LOOM_BSP, o[1].updater = "adagrad";
    o[1].filter_push = "sparse";
    o[2].type = LOOM_I64, o[2].width = 2, o[2].consistency = LOOM_ASP;
    o[2].filter_push = "keycache,lz4", o[2].filter_pull = "keycache,zstd";
    static const char *names[TABLES] = {"w", "e", "c"};
    for (int w = 0; w < WORKERS; w++) {
        loom_node *n = node_fuzz_job_node(r->job, FIRST_WORKER_ID + (uint32_t)w);
        for (int t = 0; t < TABLES; t++)
            if (loom_table_open(n, names[t], &o[t], &r->tables[w][t])) return 1;
        loom_svb_opts so = LOOM_SVB_OPTS_DEFAULT;
        so.width = SVB_WIDTH, so.rows = SVB_ROWS, so.average_every = 3, so.rotate_every = 2;
        if (loom_svb_open(n, &so, &r->svb[w])) return 1;
    }
    return 0;
}

/* The dynamic engine's application: deterministic sums, a stop after round 3. */
static double dyn_coupling(void *arg, uint64_t i, uint64_t j)
{
    (void)arg;
    return i == j ? 1 : 0;
}

static void dyn_partial(void *arg, uint64_t round, const uint64_t *keys, size_t n, double *out)
{
    (void)arg;
    for (size_t k = 0; k < n; k++) out[k] = (double)(keys[k] + round);
}

static int dyn_apply(void *arg, uint64_t round, const uint64_t *keys, size_t n, const double *sums,
                     double *change)
{
    (void)arg, (void)keys;
    for (size_t k = 0; k < n; k++) change[k] = sums[k];
    return round >= 3;
}

static size_t dyn_schedule(void *arg, uint64_t round, uint64_t lo, uint64_t hi, uint64_t *keys,
                           size_t max)
{
    (void)arg;
    size_t n = 0;
    for (uint64_t k = lo + round % 2; k < hi && n < max; k += 2) keys[n++] = k;
    return n;
}

/* op 2, calls from 0xF0: the layers beyond the tables. */
static void layer_api(run *r, script *s, int w, int call, const uint64_t *keys, size_t nkeys)
{
    loom_node *n = node_fuzz_job_node(r->job, FIRST_WORKER_ID + (uint32_t)w);
    loom_svb *svb = r->svb[w];
    uint64_t key0 = nkeys ? keys[0] : 0;
    switch (call) {
    case 0: { /* an SV of the script's values (ids from keys: out of range is refused) */
        float u[SVB_WIDTH], val[MAX_KEYS];
        for (size_t k = 0; k < SVB_WIDTH; k++) u[k] = (float)(int8_t)next_u8(s);
        for (size_t k = 0; k < nkeys; k++) val[k] = (float)(int8_t)next_u8(s);
        if (svb && !loom_svb_add(svb, u, keys, val, (uint32_t)nkeys) && !loom_svb_clock(svb))
            stats.svb_clocks++;
        break;
    }
    case 1:
        if (svb) loom_svb_sync(svb);
        break;
    case 2: { /* the block key0 of engine key1 from the other worker at version key2, of
               * values of 4 or 8 bytes (from bytes: no script byte of its own, so the
               * corpus's scripts still reach the blocks they took) */
        uint8_t rows[64];
        size_t bytes = next_u8(s) % (sizeof rows + 1);
        if (!sched_take_block(n, nkeys > 1 ? (uint32_t)keys[1] : 0, 1 - w, (uint32_t)key0,
                              nkeys > 2 ? keys[2] : 0, rows, bytes, bytes & 4 ? 4 : 8))
            stats.blocks_taken++;
        break;
    }
    case 3: {
        loom_dyn_opts o = {.dim = 2 + next_u8(s) % 15,
                           .parallel = 1 + next_u8(s) % 2,
                           .rho = 0.5,
                           .floor = 1,
                           .depth = 1 + next_u8(s) % 2,
                           .max_rounds = next_u8(s) % 8,
                           .extra = next_u8(s) % 2,
                           .schedule = next_u8(s) % 5,
                           .seed = key0};
        o.candidates = o.parallel;
        loom_dyn_app app = {.coupling = dyn_coupling,
                            .partial = dyn_partial,
                            .apply = dyn_apply,
                            .schedule = dyn_schedule};
        char err[256];
        if (!loom_dyn_run(n, &o, &app, NULL, err, sizeof err)) stats.dyn_runs++;
        break;
    }
    default: {
        uint8_t state[16];
        for (size_t k = 0; k < sizeof state; k++) state[k] = next_u8(s);
        if (loom_checkpoint_due(n) && !loom_checkpoint_save(n, state, next_u8(s) % sizeof state))
            stats.ckpt_parts++;
        break;
    }
    }
}

/* op 2: a worker calls the API. Blocking calls deliver messages while they wait. */
static void api(run *r, script *s)
{
    int w = next_u8(s) % WORKERS, call = next_u8(s);
    loom_table *t = r->tables[w][next_u8(s) % TABLES];
    loom_node *n = node_fuzz_job_node(r->job, FIRST_WORKER_ID + (uint32_t)w);
    if (!t || !n) return;
    const loom_table_opts *o = loom_table_options(t);
    size_t row = loom_type_size(o->type) * o->width;
    size_t nkeys = next_u8(s) % (MAX_KEYS + 1);
    uint64_t *keys = keep(r, nkeys * sizeof *keys);
    for (size_t i = 0; i < nkeys; i++) keys[i] = next_num(s);
    if (call >= 0xF0) {
        layer_api(r, s, w, (call - 0xF0) % 5, keys, nkeys);
        return;
    }
    loom_ts ts = 0;
    switch (call % 6) {
    case 0:
        if (!loom_pull_async(t, keys, nkeys, keep(r, nkeys * row), &ts)) r->last_ts[w] = ts;
        break;
    case 1: {
        uint8_t *vals = keep(r, nkeys * row);
        for (size_t i = 0; i < nkeys * row; i++) vals[i] = next_u8(s);
        loom_push(t, keys, nkeys, vals);
        break;
    }
    case 2:
        loom_clock(n);
        break;
    case 3:
        if (!loom_flush(t, &ts)) r->last_ts[w] = ts;
        break;
    case 4: {
        uint64_t begin = nkeys ? keys[0] : 0, end = begin + next_u8(s) % 16;
        if (end >= begin &&
            !loom_pull_range_async(t, begin, end, keep(r, (end - begin) * row), &ts))
            r->last_ts[w] = ts;
        break;
    }
    default:
        if (r->last_ts[w] && !loom_wait(n, r->last_ts[w])) stats.pulls_done++;
        break;
    }
}

static void inject(run *r, script *s, int raw)
{
    node_fuzz_msg m = {0};
    uint8_t rid[MSG_RID_SIZE];
    size_t rid_len = 4, hdr_len = MSG_HEADER_SIZE;
    if (raw) {
        m.dest = next_u8(s) % NODES;
        m.from = next_u8(s) % (NODES + 1);
        hdr_len = next_u8(s) % (MSG_HEADER_SIZE + 1);
        for (size_t i = 0; i < hdr_len; i++) m.hdr[i] = next_u8(s);
    } else {
        m.from = next_u8(s) % (NODES + 1);
        m.dest = next_u8(s) % NODES;
        uint8_t type = next_u8(s), flags = next_u8(s);
        msg_header h = {/* Mostly types that exist: 1..13, 32..44, 48..50, other_types. */
                        .type = type < 0xE0              ? (uint8_t)(type % 29 < 13   ? 1 + type % 29
                                                                     : type % 29 < 26 ? 32 + type % 29 - 13
                                                                                      : 48 + type % 29 - 26)
                                : type < OTHER_TYPES_END ? other_types[(type - 0xE0) % OTHER_TYPES]
                                                         : type,
                        .flags =
                            (uint16_t)(flags & 0x40 ? 1u << (flags % 16) : flags & MSG_F_RANGE),
                        .sender = flags & 0x80 ? (uint32_t)next_num(s) : m.from,
                        .table = next_u8(s) % (TABLES + 1),
                        .req = next_num(s),
                        .clock = (int64_t)next_num(s),
                        .a = next_num(s),
                        .b = next_num(s)};
        next_frames(s, &m);
        h.nframes = (uint16_t)m.nframes;
        msg_encode_header(&h, m.hdr);
        if (m.from < NODES) {
            deliver(r, &m, NULL, 0, hdr_len);
            return;
        }
    }
    if (raw) next_frames(s, &m);
    /* An identity that is no node: a routing id of Loom's form (MSG_RID_TAG, 8 bytes
     * from the script, the last never that of a node of the job), or 4 bytes. */
    rid_len = next_u8(s) & 1 ? MSG_RID_SIZE : 4;
    for (size_t i = 0; i < sizeof rid; i++) rid[i] = i < rid_len ? next_u8(s) : 0;
    if (rid_len == MSG_RID_SIZE) rid[0] = MSG_RID_TAG, rid[MSG_RID_SIZE - 1] = 0xFF;
    if (m.from >= NODES) m.from = NODES; /* node_fuzz: not a node of the job */
    deliver(r, &m, m.from < NODES ? NULL : rid, rid_len, hdr_len);
}

/* A copy of m (its frames copied). */
static void copy_msg(const node_fuzz_msg *m, node_fuzz_msg *out)
{
    *out = *m;
    out->nframes = 0;
    for (size_t i = 0; i < m->nframes; i++)
        node_fuzz_msg_add_frame(out, m->frames[i].data, m->frames[i].len);
}

static void in_flight(run *r, script *s, int op)
{
    node_fuzz_msg m;
    if (!take(r, &m)) return;
    switch (op) {
    case 4: {
        size_t pos = next_u8(s), bytes = MSG_HEADER_SIZE;
        for (size_t i = 0; i < m.nframes; i++) bytes += m.frames[i].len;
        pos %= bytes;
        uint8_t x = next_u8(s);
        if (pos < MSG_HEADER_SIZE) {
            m.hdr[pos] ^= x;
        } else {
            pos -= MSG_HEADER_SIZE;
            for (size_t i = 0; i < m.nframes; i++) {
                size_t len = m.frames[i].len;
                if (pos < len) {
                    m.frames[i].data[pos] ^= x; /* the message's own copy */
                    break;
                }
                pos -= len;
            }
        }
        deliver(r, &m, NULL, 0, MSG_HEADER_SIZE);
        break;
    }
    case 5:
        node_fuzz_msg_close(&m);
        break;
    case 6: {
        node_fuzz_msg again;
        copy_msg(&m, &again);
        deliver(r, &m, NULL, 0, MSG_HEADER_SIZE);
        deliver(r, &again, NULL, 0, MSG_HEADER_SIZE);
        break;
    }
    default:
        m.dest = next_u8(s) % NODES;
        deliver(r, &m, NULL, 0, MSG_HEADER_SIZE);
        break;
    }
}

/* The checkpoint layer's settings, once: parts and manifests in a scratch directory
 * (under TMPDIR, which the fuzz.* tests make a scratch directory of their own). */
static char ckpt_dir[512];

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void remove_checkpoints(void)
{
    nftw(ckpt_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The checkpoint layer's settings for the next job: with checkpoints, parts and
 * manifests go to a scratch directory (made once, under TMPDIR, which the fuzz.* tests
 * make a scratch directory of their own), every 2 clocks. Only the inputs that ask for
 * them pay for the files (and the scheduler's fsyncs). */
static void set_checkpoints(int on)
{
    unsetenv("LOOM_RESUME");
    if (!on) {
        unsetenv("LOOM_CHECKPOINT_DIR");
        return;
    }
    if (!ckpt_dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(ckpt_dir, sizeof ckpt_dir, "%s/loom-fuzz-handlers-XXXXXX",
                 tmp && *tmp ? tmp : "/tmp");
        FUZZ_CHECK(mkdtemp(ckpt_dir) != NULL);
        atexit(remove_checkpoints);
    }
    FUZZ_CHECK(setenv("LOOM_CHECKPOINT_DIR", ckpt_dir, 1) == 0);
    FUZZ_CHECK(setenv("LOOM_CHECKPOINT_EVERY", "2", 1) == 0);
}

/* Replicas for the next job (read when the ps layer attaches). */
static void set_replicas(int on)
{
    if (on)
        FUZZ_CHECK(setenv("LOOM_REPLICAS", "1", 1) == 0);
    else
        unsetenv("LOOM_REPLICAS");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    script s = {data, size};
    int start = next_u8(&s), assembling = start & 1;
    run r = {0};
    set_checkpoints(start & 2);
    set_replicas(start & 4);
    FUZZ_CHECK(node_fuzz_job_new(SERVERS, WORKERS, !assembling, 1, layers_attach, MAX_DELIVERIES,
                                 &r.job) == 0);
    stats.jobs++;
    if (!assembling) FUZZ_CHECK(open_tables(&r) == 0);
    for (int ops = 0; s.left && ops < MAX_OPS; ops++) {
        int op = next_u8(&s) % 8;
        switch (op) {
        case 0:
        case 1:
            inject(&r, &s, op == 1);
            break;
        case 2:
            api(&r, &s);
            break;
        case 3:
            for (int k = next_u8(&s) % 16; k >= 0; k--) step(&r);
            break;
        default:
            in_flight(&r, &s, op);
            break;
        }
    }
    while (node_fuzz_job_queued(r.job) && !node_fuzz_job_overrun(r.job)) step(&r);
    FUZZ_CHECK(!node_fuzz_job_overrun(r.job));
    for (int w = 0; w < WORKERS; w++) loom_svb_close(r.svb[w]);
    node_fuzz_job_free(r.job);
    for (int i = 0; i < r.nkeep; i++) free(r.keep[i]);
    return 0;
}

#ifdef LOOM_FUZZ_DRIVER
/* ---- the plain driver: scripted seeds, truncations, random and mutated scripts ---- */

typedef fuzz_input input;

static void in_u8(input *in, unsigned b)
{
    FUZZ_CHECK(in->len < sizeof in->buf);
    in->buf[in->len++] = (uint8_t)b;
}

static void in_num(input *in, uint64_t v)
{
    if (v < 0xFD) {
        in_u8(in, (unsigned)v);
        return;
    }
    in_u8(in, 0xFD);
    for (int i = 0; i < 8; i++) in_u8(in, (unsigned)(v >> (8 * i)));
}

static void in_frame(input *in, const void *p, size_t len)
{
    FUZZ_CHECK(len <= 0xFF);
    in_u8(in, (unsigned)len);
    for (size_t i = 0; i < len; i++) in_u8(in, ((const uint8_t *)p)[i]);
}

static void in_blob_frame(input *in, blob_writer *w)
{
    FUZZ_CHECK(!w->bad);
    in_frame(in, w->buf, w->len);
    free(w->buf);
    *w = (blob_writer){0};
}

/* The type byte of inject() for a real type. */
static unsigned type_byte(unsigned type)
{
    for (unsigned i = 0; i < OTHER_TYPES; i++)
        if (other_types[i] == type) return 0xE0 + i;
    return type < 32 ? type - 1 : type < 48 ? 13 + type - 32 : 26 + type - 48;
}

/* op 0 with sender = from; nframes frames follow (the caller adds them). */
static void in_inject(input *in, unsigned from, unsigned dest, unsigned type, unsigned flags,
                      unsigned table, uint64_t req, int64_t clock, uint64_t a, uint64_t b,
                      unsigned nframes)
{
    in_u8(in, 0);
    in_u8(in, from);
    in_u8(in, dest);
    in_u8(in, type_byte(type));
    in_u8(in, flags);
    in_u8(in, table);
    in_num(in, req);
    in_num(in, (uint64_t)clock);
    in_num(in, a);
    in_num(in, b);
    in_u8(in, nframes);
}

static void in_no_rid(input *in, unsigned from)
{
    if (from >= NODES) { /* a stranger's routing id of Loom's form */
        in_u8(in, 1);
        for (int i = 0; i < MSG_RID_SIZE; i++) in_u8(in, 0xA0u + (unsigned)i);
    }
}

/* op 2: worker w calls `call` on table t with keys (pushes: one value byte each). */
static void in_api(input *in, unsigned w, unsigned call, unsigned t, const uint64_t *keys,
                   size_t nkeys, size_t value_bytes)
{
    in_u8(in, 2);
    in_u8(in, w);
    in_u8(in, call);
    in_u8(in, t);
    in_u8(in, (unsigned)nkeys);
    for (size_t i = 0; i < nkeys; i++) in_num(in, keys[i]);
    if (call == 1)
        for (size_t i = 0; i < value_bytes; i++) in_u8(in, i % 4 == 3 ? 0x3F : 0);
    if (call == 4) in_u8(in, 5);
}

/* op 2 with a call of the other layers (layer_api): its arguments follow (the caller's). */
static void in_layer_api(input *in, unsigned w, unsigned call, const uint64_t *keys, size_t nkeys)
{
    in_u8(in, 2);
    in_u8(in, w);
    in_u8(in, 0xF0 + call);
    in_u8(in, 0);
    in_u8(in, (unsigned)nkeys);
    for (size_t i = 0; i < nkeys; i++) in_num(in, keys[i]);
}

/* A frame of little-endian u32, f32 or f64 values. */
static void in_frame_u32(input *in, const uint32_t *v, size_t n)
{
    uint8_t b[4 * 64];
    FUZZ_CHECK(n <= 64);
    for (size_t i = 0; i < 4 * n; i++) b[i] = (uint8_t)(v[i / 4] >> (8 * (i % 4)));
    in_frame(in, b, 4 * n);
}

static uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static void in_frame_f64(input *in, const double *v, size_t n)
{
    uint8_t b[8 * 31];
    FUZZ_CHECK(n <= 31);
    for (size_t i = 0; i < n; i++) {
        uint64_t bits;
        memcpy(&bits, &v[i], 8);
        msg_store_u64(b + 8 * i, bits);
    }
    in_frame(in, b, 8 * n);
}

/* A CKPT_PART of node `from` (a server's or a worker's part of checkpoint `clock`). */
static void in_ckpt_part(input *in, unsigned from, int64_t clock, const char *path, unsigned rank)
{
    blob_writer bw = {0};
    int server = from >= 1 && from <= SERVERS;
    blob_put_u32(&bw, server ? FT_SERVER : FT_WORKER);
    blob_put_u32(&bw, rank);
    blob_put_u32(&bw, 1);
    blob_put_str(&bw, path);
    blob_put_u64(&bw, FT_HEADER_SIZE);
    blob_put_u32(&bw, 0x12345678);
    in_inject(in, from, 0, MSG_CKPT_PART, 0, 0, 0, clock, 1, 0, 1);
    in_blob_frame(in, &bw);
}

static void in_pump(input *in, unsigned n)
{
    in_u8(in, 3);
    in_u8(in, n - 1);
}

#define MAX_SEEDS 16

static struct {
    input in[MAX_SEEDS];
    const char *name[MAX_SEEDS];
    int n;
} seeds;

/* start: byte 0 of the script (1 assembling, 2 checkpoints). */
static input *seed_new(const char *name, unsigned start)
{
    FUZZ_CHECK(seeds.n < MAX_SEEDS);
    seeds.name[seeds.n] = name;
    input *in = &seeds.in[seeds.n++];
    in->len = 0;
    in_u8(in, start);
    return in;
}

static void make_seeds(void)
{
    static const uint64_t keys[] = {1, 2, 40, 63, 1000, (uint64_t)1 << 40};
    const unsigned w0 = FIRST_WORKER_ID, w1 = FIRST_WORKER_ID + 1;
    blob_writer bw = {0};

    /* Ordinary traffic of both workers on the three tables, then the waits. */
    input *in = seed_new("traffic", 0);
    for (unsigned w = 0; w < WORKERS; w++) {
        in_api(in, w, 1, 0, keys, 6, 6 * 4);
        in_api(in, w, 1, 1, keys, 4, 4 * 32);
        in_api(in, w, 1, 2, keys, 6, 6 * 16);
        in_api(in, w, 3, 0, NULL, 0, 0);
        in_api(in, w, 0, 2, keys, 6, 0);
        in_api(in, w, 5, 0, NULL, 0, 0);
        in_api(in, w, 2, 0, NULL, 0, 0);
        in_api(in, w, 4, 1, keys + 1, 1, 0);
    }
    in_api(in, 0, 5, 0, NULL, 0, 0);
    in_api(in, 1, 5, 0, NULL, 0, 0);

    /* Replies and acknowledgements changed in flight: header fields, then payload. */
    static const unsigned offsets[] = {3, 6, 8, 12, 16, 24, 32, 40, 48, 52};
    in = seed_new("tampered_replies", 0);
    for (size_t k = 0; k < sizeof offsets / sizeof *offsets; k++) {
        in_api(in, k % 2, k % 3 == 2 ? 1 : 0, (unsigned)k % TABLES, keys, 5, 5 * 32);
        if (k % 3 == 2) in_api(in, k % 2, 3, (unsigned)k % TABLES, NULL, 0, 0);
        in_pump(in, 2);
        in_u8(in, 4);
        in_u8(in, offsets[k]);
        in_u8(in, 0x81);
    }

    /* Messages lost, repeated and sent to the wrong node. */
    in = seed_new("lost_repeated_misrouted", 0);
    for (unsigned k = 0; k < 6; k++) {
        in_api(in, k % 2, 1, k % TABLES, keys, 3, 3 * 32);
        in_api(in, k % 2, 3, k % TABLES, NULL, 0, 0);
        in_api(in, k % 2, 0, k % TABLES, keys, 3, 0);
        in_u8(in, 5 + k % 3);
        if (k % 3 == 2) in_u8(in, k);
        in_pump(in, 1);
        in_u8(in, 6);
    }

    /* The job assembling: every node registers, a stranger and a second rank 0 too. */
    in = seed_new("assembly", 1);
    for (unsigned id = 1; id <= NODES; id++) {
        int role = id <= SERVERS ? LOOM_SERVER : LOOM_WORKER;
        int rank = id == NODES ? 0 : role == LOOM_SERVER ? (int)id - 1 : (int)(id - w0);
        msg_register reg = {.role = role,
                            .rank = id == w1 ? -1 : rank,
                            .num_servers = SERVERS,
                            .num_workers = WORKERS,
                            .address = "127.0.0.1:5000",
                            .max_frame_mib = NODE_FUZZ_FRAME_MIB};
        msg_register_encode(&reg, &bw);
        in_inject(in, id, 0, MSG_REGISTER, 0, 0, 0, 0, 0, 0, 1);
        in_blob_frame(in, &bw);
        in_no_rid(in, id);
    }
    in_pump(in, 16);
    in_pump(in, 16);

    /* Control messages no honest node would send, from every role. */
    in = seed_new("control_forgeries", 0);
    in_inject(in, 0, w0, MSG_NODE_FAILED, 0, 0, 0, 0, 2, 0, 0);
    in_inject(in, 0, 1, MSG_SHUTDOWN, 0, 0, 0, 0, 0, 0, 0);
    in_inject(in, w1, 0, MSG_DONE, 0, 0, 0, 0, 0, 0, 0);
    in_inject(in, w1, 0, MSG_DONE, 0, 0, 0, 0, 0, 0, 0);
    in_inject(in, 2, 0, MSG_SHUTDOWN_ACK, 0, 0, 0, 0, 0, 0, 0);
    in_inject(in, 2, 0, MSG_ROSTER_ACK, 0, 0, 0, 0, 0, 0, 0);
    in_inject(in, w0, 0, MSG_BARRIER, 0, 0, 9, 0, 0, 0, 0);
    in_inject(in, 0, w1, MSG_BARRIER_RELEASE, 0, 0, 9, 0, 0, 0, 0);
    in_inject(in, 0, w1, MSG_DONE_ACK, 0, 0, 0, 0, 0, 0, 0);
    in_inject(in, w0, 0, MSG_CLOCK, 0, 0, 0, 5, 0, 0, 0);
    in_inject(in, w0, 0, MSG_CLOCK, 0, 0, 0, 2, 0, 0, 0);
    in_inject(in, w0, 1, MSG_CLOCK, 0, 0, 0, INT64_MIN, 0, 0, 0);
    in_inject(in, 0, w0, MSG_MIN_CLOCK, 0, 0, 0, INT64_MAX, 0, 0, 0);
    in_inject(in, 0, w0, MSG_TABLE_OPENED, 0, 1, 77, 0, 0, 0, 0);
    in_inject(in, 1, 0, MSG_TABLE_CREATED, 0, 2, 0, 0, 9999, 0, 0);
    in_inject(in, 0, w0, MSG_REJECT, 0, 0, 0, 0, LOOM_ECONFIG, 0, 1);
    blob_put_str(&bw, "go away");
    in_blob_frame(in, &bw);
    /* The status page's inputs: byte totals in heartbeats, a worker's metrics (valid, and
     * a count too large), metrics from a server (not a sender of them). */
    in_inject(in, w0, 0, MSG_HEARTBEAT, 0, 0, 0, 0, 1000, UINT64_MAX, 0);
    msg_metrics_encode(&(msg_metrics){1, {"objective"}, {0.5}}, &bw);
    in_inject(in, w1, 0, MSG_METRICS, 0, 0, 0, 0, 0, 0, 1);
    in_blob_frame(in, &bw);
    in_inject(in, w1, 0, MSG_METRICS, 0, 0, 0, 0, 0, 0, 1);
    in_frame(in, "\x09", 1);
    in_inject(in, 1, 0, MSG_METRICS, 0, 0, 0, 0, 0, 0, 1);
    in_frame(in, "\x00", 1);
    ps_table_def d;
    FUZZ_CHECK(ps_def_from_user(&d, "forged", NULL, NULL, 0) == 0);
    FUZZ_CHECK(ps_def_encode(&d, &bw) == 0);
    in_inject(in, 0, 2, MSG_TABLE_CREATE, 0, 3, 0, 0, 0, 0, 1);
    in_frame(in, bw.buf, bw.len);
    in_inject(in, w1, 0, MSG_TABLE_OPEN, 0, 0, 5, 0, 0, 0, 1);
    in_blob_frame(in, &bw);
    in_inject(in, NODES, 0, MSG_HEARTBEAT, 0, 0, 0, 0, 0, 0, 0);
    in_no_rid(in, NODES);
    in_inject(in, w0, w1, MSG_PULL, 0, 0, 0, 0, 0, 0, 1);
    in_frame(in, keys, 8);
    in_pump(in, 16);

    /* Data messages with sizes and keys that do not fit the table. */
    in = seed_new("data_forgeries", 0);
    uint8_t vals[64] = {0};
    for (unsigned t = 0; t < TABLES; t++) {
        in_inject(in, w0, 1, MSG_PUSH, 0, t, 1, 0, 0, 0, 2);
        in_frame(in, keys, 16);
        in_frame(in, vals, t == 0 ? 8 : t == 1 ? 64 : 32);
        in_inject(in, w1, 2, MSG_PUSH, 0, t, 1, 0, 0, 0, 2);
        in_frame(in, keys + 3, 24);
        in_frame(in, vals, 12);
        in_inject(in, w0, 1, MSG_PUSH, MSG_F_RANGE, t, 2, 0, 60, 70, 1);
        in_frame(in, vals, 40);
        in_inject(in, w1, 1, MSG_PULL, 0, t, 3, 0, 0, 0, 1);
        in_frame(in, keys, 48);
        in_inject(in, w1, 2, MSG_PULL, MSG_F_RANGE, t, 4, -1, 0, UINT64_MAX, 0);
        in_inject(in, 1, w0, MSG_PULL_REPLY, 0, t, 1, 0, 0, 0, 1);
        in_frame(in, vals, 16);
        in_inject(in, 2, w0, MSG_PUSH_ACK, 0, t, 1, 0, 0, 5, 0);
    }
    in_pump(in, 16);

    /* Filtered and sparse rows (src/ps/filter.c's encoding): frames a chain of the
     * table's spec makes, then the same spoilt, and garbage; pulls of what changed
     * with bitmaps of the wrong size; encoded replies nobody asked for. */
    in = seed_new("filtered_forgeries", 0);
    {
        static const char *const specs[TABLES] = {"", "sparse", "keycache,lz4"};
        static const loom_type types[TABLES] = {LOOM_F32, LOOM_F64, LOOM_I64};
        static const uint32_t widths[TABLES] = {1, 4, 2};
        for (unsigned t = 0; t < TABLES; t++) {
            filter_spec spec;
            filter_chain *c;
            FUZZ_CHECK(filter_spec_parse(specs[t], &spec, NULL, 0) == 0);
            FUZZ_CHECK(
                filter_chain_create(&spec, FILTER_PUSH, types[t], widths[t], 1, &c, NULL, 0) == 0);
            uint8_t *enc;
            size_t len;
            uint8_t rows[4 * 8 * 4] = {0};
            rows[3] = 0x3F;
            uint64_t two[4] = {2, 3, 4, 5};
            FUZZ_CHECK(filter_chain_encode(c, &(filter_msg){.keys = two, .vals = rows, .n = 4},
                                           &enc, &len) == 0);
            FUZZ_CHECK(len <= 0xFF);
            in_inject(in, w0, 1, MSG_PUSH_ENC, 0, t, 1, 0, 0, 0, 1);
            in_frame(in, enc, len);
            enc[len / 2] ^= 0x10;
            in_inject(in, w1, 1, MSG_PUSH_ENC, 0, t, 1, 0, 0, 0, 1);
            in_frame(in, enc, len);
            in_inject(in, w1, 2, MSG_PUSH_ENC, 0, t, 2, 0, 0, 0, 1);
            in_frame(in, enc, len / 2);
            free(enc);
            filter_chain_destroy(c);
            in_inject(in, w0, 1, MSG_PULL_SINCE, 0, t, 3, 0, 1, 0, 2);
            in_frame(in, keys, 16);
            in_frame(in, "\x03", 1);
            in_inject(in, w0, 1, MSG_PULL_SINCE, 0, t, 4, 0, 1, 0, 2);
            in_frame(in, keys, 16);
            in_frame(in, "\x03\x00", 2);
            in_inject(in, 1, w0, MSG_PULL_REPLY_ENC, 0, t, 1, 0, 0, 0, 2);
            in_frame(in, vals, 8);
            in_frame(in, vals, 30);
        }
        /* A worker's own traffic through the chains, then its replies tampered with. */
        for (unsigned w = 0; w < WORKERS; w++) {
            in_api(in, w, 1, 1, keys, 4, 4 * 32);
            in_api(in, w, 1, 2, keys, 6, 6 * 16);
            in_api(in, w, 3, 2, NULL, 0, 0);
            in_api(in, w, 0, 2, keys, 6, 0);
            in_pump(in, 2);
            in_u8(in, 4);
            in_u8(in, 60);
            in_u8(in, 0x81);
            in_api(in, w, 0, 1, keys, 4, 0);
        }
    }
    in_pump(in, 16);

    /* Every other layer's messages, well-formed and not, and the calls that take them. */
    in = seed_new("layers", 2);
    {
        /* A rotation's blocks to worker 1: one it takes (engine 0, block 1, version 1),
         * one of another size than the taker's, a block number beyond 32 bits, one from a
         * server (dropped for its sender). */
        uint8_t rows[16] = {1, 2, 3};
        in_inject(in, w0, w1, MSG_SCHED_BLOCK, 0, 0, 0, 0, 1, 1, 1);
        in_frame(in, rows, 16);
        in_inject(in, w0, w1, MSG_SCHED_BLOCK, 0, 0, 0, 0, 2, 1, 1);
        in_frame(in, rows, 8);
        in_inject(in, w0, w1, MSG_SCHED_BLOCK, 0, 0, 0, 0, (uint64_t)1 << 33, 1, 1);
        in_frame(in, rows, 16);
        in_inject(in, 1, w1, MSG_SCHED_BLOCK, 0, 0, 0, 0, 1, 1, 1);
        in_frame(in, rows, 16);
        static const uint64_t block1[] = {1, 0, 1}, block2[] = {2, 0, 1};
        in_layer_api(in, 1, 2, block1, 3);
        in_u8(in, 16);
        in_layer_api(in, 1, 2, block2, 3);
        in_u8(in, 16);

        /* Models of a reduce to worker 1: rounds 1 and 3, a size its frame does not
         * have, round 0; an acknowledgement of a model never sent. */
        float model[2] = {1, 2};
        in_inject(in, w0, w1, MSG_P2P_MODEL, 0, 0, 1, 0, 2, 0, 1);
        in_frame(in, model, 8);
        in_inject(in, w0, w1, MSG_P2P_MODEL, 0, 0, 3, 0, 2, 0, 1);
        in_frame(in, model, 8);
        in_inject(in, w0, w1, MSG_P2P_MODEL, 0, 0, 2, 0, 3, 0, 1);
        in_frame(in, model, 8);
        in_inject(in, w0, w1, MSG_P2P_MODEL, 0, 0, 0, 0, 2, 0, 1);
        in_frame(in, model, 8);
        in_inject(in, w1, w0, MSG_P2P_ACK, 0, 0, 1, 0, 0, 0, 0);

        /* Sufficient vectors from worker 0 to worker 1: clock 0 with one SV, clock 1's
         * mark, then a clock out of order, another width, an id beyond the replica, a
         * non-finite u, a replica (rotation), a second one, one of neither kind. */
        const uint32_t sv[] = {1, f32_bits(1), f32_bits(2), 3, f32_bits(0.5f)};
        const uint32_t sv_far[] = {1, f32_bits(1), f32_bits(2), SVB_ROWS, f32_bits(0.5f)};
        const uint32_t sv_nan[] = {0, f32_bits(NAN), f32_bits(2)};
        in_inject(in, w0, w1, MSG_SVB_SVS, 0, 0, 0, 0, 1, SVB_WIDTH, 1);
        in_frame_u32(in, sv, 5);
        in_inject(in, w0, w1, MSG_SVB_SVS, 0, 0, 0, 1, 0, SVB_WIDTH, 0);
        in_inject(in, w0, w1, MSG_SVB_SVS, 0, 0, 0, 5, 0, SVB_WIDTH, 0);
        in_inject(in, w0, w1, MSG_SVB_SVS, 0, 0, 0, 2, 1, SVB_WIDTH + 1, 1);
        in_frame_u32(in, sv, 5);
        in_inject(in, w0, w1, MSG_SVB_SVS, 0, 0, 0, 2, 1, SVB_WIDTH, 1);
        in_frame_u32(in, sv_far, 5);
        in_inject(in, w0, w1, MSG_SVB_SVS, 0, 0, 0, 2, 1, SVB_WIDTH, 1);
        in_frame_u32(in, sv_nan, 3);
        double replica[SVB_ROWS * SVB_WIDTH] = {0.25, -1};
        in_inject(in, w0, w1, MSG_SVB_REPLICA, 0, 0, 0, 1, 1, 0, 1);
        in_frame_f64(in, replica, SVB_ROWS * SVB_WIDTH);
        in_inject(in, w0, w1, MSG_SVB_REPLICA, 0, 0, 0, 1, 1, 0, 1);
        in_frame_f64(in, replica, SVB_ROWS * SVB_WIDTH);
        in_inject(in, w1, w0, MSG_SVB_REPLICA, 0, 0, 0, 1, 2, 0, 1);
        in_frame_f64(in, replica, SVB_ROWS * SVB_WIDTH);
        /* Worker 1's clocks 0 (the SVs applied) and 1 (the replica rotated in). */
        static const uint64_t sv_ids[] = {1, 7};
        for (int c = 0; c < 2; c++) {
            in_layer_api(in, 1, 0, sv_ids, 2);
            for (int k = 0; k < SVB_WIDTH + 2; k++) in_u8(in, (unsigned)(k + c + 1));
        }
        in_layer_api(in, 1, 1, NULL, 0);

        /* The dynamic engine: worker 1's run on a coordinator the script plays (8
         * parameters, 2 a round, depth 1, 2 rounds, round robin): a plan, its sums, a
         * plan request of worker 1's round, the end; then a plan with a key out of range. */
        static const uint64_t dyn_seed[] = {1};
        in_inject(in, 0, w1, MSG_DYN_PLAN, 0, 0, 0, 0, 0, 0, 1);
        in_frame(in, (uint8_t[16]){1, 0, 0, 0, 0, 0, 0, 0, 2}, 16);
        in_inject(in, 0, w1, MSG_DYN_SUM, 0, 0, 0, 0, 0, 0, 1);
        in_frame_f64(in, (const double[]){3, 4}, 2);
        in_inject(in, 0, w1, MSG_DYN_PLAN_REQ, 0, 0, 1, 0, 0, 0, 0);
        in_inject(in, 0, w1, MSG_DYN_END, 0, 0, 1, 0, 0, 0, 0);
        const uint8_t dyn_args[] = {6, 1, 0, 2, 0, 3};
        in_layer_api(in, 1, 3, dyn_seed, 1);
        for (size_t k = 0; k < sizeof dyn_args; k++) in_u8(in, dyn_args[k]);
        in_inject(in, 0, w1, MSG_DYN_PLAN, 0, 0, 0, 0, 0, 0, 1);
        in_frame(in, (uint8_t[16]){1, 0, 0, 0, 0, 0, 0, 0, 99}, 16);
        in_layer_api(in, 1, 3, dyn_seed, 1);
        for (size_t k = 0; k < sizeof dyn_args; k++) in_u8(in, dyn_args[k]);
        /* The coordinator: a plan and partial sums outside a run; worker 1's start (from
         * its runs above) and worker 0's (forged), so a run starts; worker 0's plan of
         * round 0, both workers' partial sums, a plan of a round not asked for, then a
         * start with other options (the run ends for everyone). */
        in_inject(in, w1, 0, MSG_DYN_PLAN, 0, 0, 5, 0, 0, 0, 1);
        in_frame(in, (uint8_t[8]){1}, 8);
        in_inject(in, w0, 0, MSG_DYN_PSUM, 0, 0, 0, 0, 0, 0, 1);
        in_frame_f64(in, (const double[]){1, 2}, 2);
        in_pump(in, 16);
        in_inject(in, w0, 0, MSG_DYN_START, 0, 2, 1, 0, 8, 2, 0);
        in_inject(in, w0, 0, MSG_DYN_PLAN, 0, 0, 0, 0, 0, 0, 1);
        in_frame(in, (uint8_t[16]){0, 0, 0, 0, 0, 0, 0, 0, 3}, 16);
        in_inject(in, w0, 0, MSG_DYN_PSUM, 0, 0, 0, 0, 1, 0, 1);
        in_frame_f64(in, (const double[]){1, 2}, 2);
        in_inject(in, w1, 0, MSG_DYN_PSUM, 0, 0, 0, 0, 0, 0, 1);
        in_frame_f64(in, (const double[]){1, 2}, 2);
        in_inject(in, w0, 0, MSG_DYN_PLAN, 0, 0, 7, 0, 0, 0, 1);
        in_frame(in, (uint8_t[8]){1}, 8);
        in_inject(in, w0, 0, MSG_DYN_START, 0, 3, 1, 0, 2, 2, 0);
        in_pump(in, 16);

        /* Checkpoint parts of clock 2 from every node (the manifest's files are not on
         * disk: not committed), one sent twice, one with another node's path, clock 0. */
        in_ckpt_part(in, 1, 2, "ckpt-000000000002/server-0.part", 0);
        in_ckpt_part(in, 2, 2, "ckpt-000000000002/server-1.part", 1);
        in_ckpt_part(in, 2, 2, "ckpt-000000000002/server-1.part", 1);
        in_ckpt_part(in, w0, 2, "ckpt-000000000002/server-0.part", 0);
        in_ckpt_part(in, w0, 2, "ckpt-000000000002/worker-0.part", 0);
        in_ckpt_part(in, w1, 2, "ckpt-000000000002/worker-1.part", 1);
        in_ckpt_part(in, w1, 0, "ckpt-000000000000/worker-1.part", 1);
        /* The scheduler's plan of clock 2 to every server and worker (a = 1: full
         * parts), forged skips and a final of nodes that are no worker. */
        for (unsigned to = 1; to < NODES; to++)
            in_inject(in, 0, to, MSG_CKPT_PLAN, 0, 0, 0, 2, 1, 0, 0);
        in_inject(in, w0, 0, MSG_CKPT_SKIP, 0, 0, 0, 1, 3, 9, 0);
        in_inject(in, 1, 0, MSG_CKPT_FINAL, 0, 0, 0, 5, 0, 0, 0);
        in_inject(in, 0, w1, MSG_CKPT_PLAN, 0, 0, 0, -4, 7, 2, 0);
        /* Both workers' clocks 1 and 2 on table 0, so that worker 0's part is due. */
        for (int c = 0; c < 2; c++)
            for (unsigned w = 0; w < WORKERS; w++) in_api(in, w, 2, 0, NULL, 0, 0);
        in_layer_api(in, 0, 4, NULL, 0);
        for (int k = 0; k < 17; k++) in_u8(in, 7);

        /* The managed communication's rows and acknowledgements, forged. */
        in_inject(in, 1, w0, MSG_ROWS_PUSH, 0, 0, 1, 0, 0, 1, 2);
        in_frame(in, keys, 16);
        in_frame(in, vals, 8);
        in_inject(in, w0, 1, MSG_ROWS_PUSH_ACK, 0, 0, 1, 0, 0, 0, 0);
    }
    in_pump(in, 16);
    in_pump(in, 16);

    /* With a replica of every range: traffic, then replication and rejoining messages,
     * well-formed and not, and a server's failover and return announced. */
    in = seed_new("replicas", 4);
    for (unsigned t = 0; t < TABLES; t++)
        for (unsigned w = 0; w < WORKERS; w++) {
            in_api(in, w, 1, t, keys, 4, 4 * 32);
            in_api(in, w, 2, t, NULL, 0, 0);
        }
    in_pump(in, 32);
    {
        uint8_t seqs[WORKERS * 8] = {1, 0, 0, 0, 0, 0, 0, 0, 1};
        uint8_t row[8 + 4] = {2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x3F}; /* key 2: 1.0f */
        for (unsigned from = 1; from <= SERVERS; from++) {
            unsigned to = from % SERVERS + 1;
            in_inject(in, from, to, MSG_REPL, 0, 0, 1, 0, 0, 1, 2);
            in_frame(in, seqs, sizeof seqs);
            in_frame(in, row, sizeof row);
            in_inject(in, from, to, MSG_REPL, 0, 0, 1, 0, 9, 3, 2); /* again; bad range, rows */
            in_frame(in, seqs, sizeof seqs - 1);
            in_frame(in, row, sizeof row);
            in_inject(in, to, from, MSG_REPL_ACK, 0, 0, 1, 0, 0, 0, 0);
            in_inject(in, to, from, MSG_REPL_ACK, 0, 0, 7, 0, 0, 0, 0);
        }
    }
    in_pump(in, 16);
    /* Server 1 (node 2) dies: the scheduler tells everyone; the job goes on. */
    for (unsigned dest = 1; dest < NODES; dest++)
        if (dest != 2) in_inject(in, 0, dest, MSG_NODE_FAILED, 0, 0, 0, 0, 2, 0, 0);
    for (unsigned w = 0; w < WORKERS; w++) {
        in_api(in, w, 1, 0, keys, 4, 4 * 32);
        in_api(in, w, 0, 0, keys, 4, 0);
    }
    in_pump(in, 32);
    /* Its replacement: the roster's news, the copies, ready; each also forged. */
    {
        uint8_t rid[MSG_RID_SIZE] = {MSG_RID_TAG, 7, 7, 7, 7, 7, 7, 7, 7};
        for (unsigned dest = 1; dest < NODES; dest++) {
            blob_put_bytes(&bw, rid, sizeof rid);
            blob_put_str(&bw, "127.0.0.1:5999");
            in_inject(in, 0, dest, MSG_NODE_REJOINED, 0, 0, 0, 0, 2, 0, 1);
            in_blob_frame(in, &bw);
        }
        in_inject(in, 0, 1, MSG_REJOIN_COPY, 0, 0, 1, 0, 2, 0, 0);
        in_inject(in, 0, 1, MSG_REJOIN_COPY, 0, 0, 1, 0, 1, 0, 0); /* itself */
        in_pump(in, 16);
        in_inject(in, 1, 0, MSG_REJOIN_COPIED, 0, 0, 1, 0, 2, 0, 0);
        in_inject(in, 1, 0, MSG_REJOIN_COPIED, 0, 0, 9, 0, 2, 0, 0);
        in_inject(in, w0, 0, MSG_REJOIN_COPIED, 0, 0, 1, 0, 2, 0, 0);
        for (unsigned dest = 1; dest < NODES; dest++)
            in_inject(in, 0, dest, MSG_REJOIN_READY, 0, 0, 1, 0, 2, 0, 0);
        in_inject(in, 0, w0, MSG_REJOIN_READY, 0, 0, 1, 0, 0, 0, 0);
        in_inject(in, 0, 2, MSG_CKPT_BASE, 0, 0, 0, 10, 0, 0, 0);
        in_inject(in, 0, 1, MSG_CKPT_BASE, 0, 0, 0, -1, 0, 0, 0);
    }
    for (unsigned w = 0; w < WORKERS; w++) {
        in_api(in, w, 1, 0, keys, 4, 4 * 32);
        in_api(in, w, 2, 0, NULL, 0, 0);
    }
    in_pump(in, 32);
    /* It takes its ranges back: the fence with pushes in flight, parked
     * pushes, the servers' answers, the commit and the workers' answers;
     * forged ones, an abort after the commit and another generation too. */
    for (unsigned dest = 1; dest <= SERVERS; dest++)
        in_inject(in, 0, dest, MSG_HANDBACK, 0, 0, 1, 0, 2, 0, 0);
    for (unsigned w = 0; w < WORKERS; w++) {
        in_api(in, w, 1, 0, keys, 4, 4 * 32);
        in_api(in, w, 0, 0, keys, 4, 0);
    }
    in_pump(in, 16);
    for (unsigned from = 1; from <= SERVERS; from++)
        in_inject(in, from, 0, MSG_HANDBACK_ACK, 0, 0, 1, 0, 0, 0, 0);
    in_inject(in, w0, 0, MSG_HANDBACK_ACK, 0, 0, 1, 0, 0, 0, 0);
    in_inject(in, 1, w0, MSG_PARKED, 0, 0, 1, 0, 0, 0, 0);
    in_inject(in, 1, w1, MSG_PARKED, 0, 9, 5, 0, 0, 0, 0);
    in_inject(in, 1, w0, MSG_PARKED, 0, 0, 0, 0, 1, 0, 0);
    in_inject(in, w0, 1, MSG_PARKED, 0, 0, 0, 0, 1, 0, 0);
    in_pump(in, 16);
    for (unsigned dest = 1; dest < NODES; dest++)
        in_inject(in, 0, dest, MSG_HANDBACK, 0, 0, 1, 1, 2, 1, 0);
    for (unsigned w = 0; w < WORKERS; w++) {
        in_inject(in, FIRST_WORKER_ID + w, 2, MSG_HANDBACK_ACK, 0, 0, 1, 0, 0, 0, 0);
        in_api(in, w, 1, 0, keys, 4, 4 * 32);
        in_api(in, w, 0, 0, keys, 4, 0);
    }
    in_inject(in, 0, 1, MSG_HANDBACK, 0, 0, 1, 0, 2, 2, 0);
    in_inject(in, 0, 3, MSG_HANDBACK, 0, 0, 7, 0, 9, 5, 0);
    in_inject(in, 0, w0, MSG_HANDBACK, 0, 0, 2, 0, 2, 0, 0);
    in_pump(in, 32);
    /* Server 0 hears it was declared dead (a cut-off server's heartbeat answered). */
    in_inject(in, 0, 1, MSG_NODE_FAILED, 0, 0, 0, 0, 1, 0, 0);
    in_pump(in, 32);

    /* Header frames of every length, and bytes that are almost a header. */
    in = seed_new("raw_headers", 0);
    for (unsigned len = 0; len <= MSG_HEADER_SIZE; len += 8) {
        in_u8(in, 1);
        in_u8(in, len % NODES);
        in_u8(in, (len / 8) % NODES);
        in_u8(in, len);
        uint8_t hdr[MSG_HEADER_SIZE];
        msg_encode_header(&(msg_header){.type = MSG_HEARTBEAT, .sender = (len / 8) % NODES}, hdr);
        for (unsigned i = 0; i < len; i++) in_u8(in, hdr[i] ^ (i == len / 2 ? 1 : 0));
        in_u8(in, 0);
    }
}

static const char *seed(int i, input *in)
{
    *in = seeds.in[i];
    return seeds.name[i];
}

/* One random edit: flip a bit, set a byte to an edge value, insert, delete or truncate. */
static void mutate(input *in)
{
    static const uint8_t edges[] = {0x00, 0x01, 0x7F, 0x80, 0xFD, 0xFE, 0xFF};
    fuzz_edit(in, 0, edges, sizeof edges);
}

/* The seeds must reach what they were written for. */
static void check_seeds(void)
{
    FUZZ_CHECK(stats.pulls_done >= 4);
    FUZZ_CHECK(stats.rosters >= NODES - 1); /* the assembly seed's job assembled */
    FUZZ_CHECK(stats.framing_drops >= 10 && stats.handler_drops >= 10);
    /* The layers seed's calls took what its messages brought. */
    FUZZ_CHECK(stats.svb_clocks >= 2 && stats.blocks_taken >= 1 && stats.dyn_runs >= 1);
    FUZZ_CHECK(stats.ckpt_parts >= 1);
}

static void report(void)
{
    printf("%lu jobs, %lu messages delivered, %lu dropped for their framing, %lu by handlers, "
           "%lu waits completed, %lu rosters, %lu SVB clocks, %lu blocks taken, %lu dynamic "
           "runs, %lu checkpoint parts\n",
           stats.jobs, stats.delivered, stats.framing_drops, stats.handler_drops, stats.pulls_done,
           stats.rosters, stats.svb_clocks, stats.blocks_taken, stats.dyn_runs, stats.ckpt_parts);
}

int main(int argc, char **argv)
{
    make_seeds();
    return fuzz_driver_main(argc, argv,
                            &(fuzz_target){.name = "fuzz_handlers",
                                           .rng_seed = 0x4A4E444C45525321u,
                                           .nseeds = seeds.n,
                                           .variant_kind = "unchanged",
                                           .seed = seed,
                                           .check_seeds = check_seeds,
                                           .random = 300,
                                           .random_len = 512,
                                           .mutated = 1500,
                                           .mutate = mutate,
                                           .report = report});
}
#endif
