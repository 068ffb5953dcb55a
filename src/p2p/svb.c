/* svb: sufficient-vector broadcasting between workers (include/loom/svb.h).
 *
 * A clock, on every worker:
 *   1. the SVs added during the clock are already one frame (svb_frame.c);
 *      it goes to the clock's multicast peers, and a clock mark (the same
 *      message with no SVs) to every other worker, so that every worker
 *      learns every peer's clock from one message per peer and clock;
 *   2. the worker applies its own frame, then waits: under BSP until every
 *      peer's message of this clock is in, under SSP(s) until every peer is
 *      at most s clocks behind;
 *   3. it applies the received SVs of clocks up to its own, ordered by
 *      (clock, sender rank): under BSP with broadcast every replica applies
 *      the same SVs in the same order, so all replicas are bitwise equal;
 *   4. every R clocks (exact averaging) all replicas go to all workers and
 *      each worker sums them in rank order and divides: bitwise the same
 *      average everywhere; every S clocks (rotation) each replica goes to the
 *      next worker of the ring. Both wait for every peer's SVs of the clock
 *      first, so no SV is lost or applied twice across a replacement.
 *
 * Messages are handled on the node's I/O thread: an SV frame is checked
 * whole and kept (zero copy) in its sender's queue, a replica likewise; the
 * application thread takes them under the node's lock and applies them
 * outside it. A message out of its sender's clock order, with a bad frame or
 * for a node without an open SVB is dropped and counted.
 *
 * The incremental checkpoint (log_path) records what the replica went
 * through, in order: each frame applied ('S'), each replica installed whole
 * ('R') and each clock's end ('E'), each record a kind byte and the clock
 * (u64), 'S' then the SV count, the frame's length and the frame, 'R' the
 * replica; with AdaGrad (opts.adagrad), a first record 'A' holds its learning
 * rate (f64 bits) where the clock goes, and 'G' marks each step taken with
 * the frames applied since the previous one, so replaying rebuilds the
 * accumulators along with the replica (installed replicas leave them be). The replica after clock T
 * is rebuilt by replaying the records up to T's end from zero ('R' replaces the matrix) with the
 * same arithmetic in the same order: exactly the replica the worker had. The log is written with
 * stdio and flushed every clock, on the application thread (Orpheus writes it from an I/O thread).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/msg.h"
#include "core/rand.h"
#include "loom/error.h"
#include "loom/svb.h"
#include "p2p/msg_types.h"
#include "p2p/svb.h"

typedef struct svb_peer {
    int64_t received; /* clocks of this peer whose message arrived */
    node_msg *queue;  /* kept SV messages (clock order), [head, count) */
    size_t head, count, cap;
    node_msg replica; /* a whole replica sent to us (averaging, rotation) */
    int has_replica;
} svb_peer;

/* The node's layer: the open SVB, if any. */
typedef struct svb_layer {
    loom_svb *open;
} svb_layer;

struct loom_svb {
    loom_node *node;
    loom_svb_opts o;
    int rank, workers, servers;
    double *w;
    svb_adagrad ag; /* opts.adagrad: this worker's AdaGrad state */
    uint8_t *frame; /* this clock's SVs */
    size_t len, cap;
    uint64_t count;
    int64_t clock;
    svb_peer *peers;
    svb_scratch scratch;
    uint32_t *order; /* scratch: the multicast draw */
    FILE *log;
    char *log_path;
    loom_svb_stats stats;
    int restored; /* the replica is an earlier clock's: no more clocks */
};

/* ---- little-endian stores ---- */

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static int grow(loom_svb *s, size_t more)
{
    if (s->len + more <= s->cap) return 0;
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < s->len + more) cap *= 2;
    uint8_t *p = realloc(s->frame, cap);
    if (!p) return LOOM_ENOMEM;
    s->frame = p, s->cap = cap;
    return 0;
}

/* ---- the log ---- */

/* A failed write of the log (a full disk, most often): the file and the reason,
 * from the errno of the failed call, since the caller's code alone would not
 * say which file. */
static int log_write_failed(const loom_svb *s)
{
    log_error("sufficient-vector log %s: cannot write: %s", s->log_path, strerror(errno));
    return LOOM_EIO;
}

static int log_u64(loom_svb *s, uint64_t v)
{
    uint8_t b[8];
    msg_store_u64(b, v);
    return fwrite(b, 1, 8, s->log) == 8 ? 0 : log_write_failed(s);
}

static int log_frame(loom_svb *s, int64_t clock, const uint8_t *p, size_t len, uint64_t count)
{
    if (!s->log) return 0;
    if (fputc('S', s->log) == EOF) return log_write_failed(s);
    int rc = log_u64(s, (uint64_t)clock);
    if (!rc) rc = log_u64(s, count);
    if (!rc) rc = log_u64(s, len);
    if (!rc && len && fwrite(p, 1, len, s->log) != len) rc = log_write_failed(s);
    return rc;
}

static void encode_replica(const double *w, size_t n, uint8_t *out)
{
    for (size_t e = 0; e < n; e++) {
        uint64_t b;
        memcpy(&b, &w[e], 8);
        msg_store_u64(out + 8 * e, b);
    }
}

static void decode_replica(const uint8_t *in, size_t n, double *w)
{
    for (size_t e = 0; e < n; e++) {
        uint64_t b = msg_load_u64(in + 8 * e);
        memcpy(&w[e], &b, 8);
    }
}

static size_t replica_values(const loom_svb *s)
{
    return (size_t)s->o.rows * s->o.width;
}

static int log_replica(loom_svb *s)
{
    if (!s->log) return 0;
    size_t n = replica_values(s);
    uint8_t *buf = malloc(8 * n);
    if (!buf) return LOOM_ENOMEM;
    encode_replica(s->w, n, buf);
    int rc = fputc('R', s->log) == EOF ? log_write_failed(s) : log_u64(s, (uint64_t)s->clock);
    if (!rc && fwrite(buf, 1, 8 * n, s->log) != 8 * n) rc = log_write_failed(s);
    free(buf);
    return rc;
}

static int log_adagrad(loom_svb *s)
{
    uint64_t bits;
    memcpy(&bits, &s->o.adagrad, sizeof bits);
    return fputc('A', s->log) == EOF ? log_write_failed(s) : log_u64(s, bits);
}

/* AdaGrad: the step with the clock's summed SVs, and its 'G' record. */
static int adagrad_step(loom_svb *s)
{
    if (!s->ag.acc || !svb_adagrad_step(s->w, &s->ag, s->o.width) || !s->log) return 0;
    return fputc('G', s->log) == EOF ? log_write_failed(s) : log_u64(s, (uint64_t)s->clock);
}

static int log_end(loom_svb *s)
{
    if (!s->log) return 0;
    int rc = fputc('E', s->log) == EOF ? log_write_failed(s) : log_u64(s, (uint64_t)s->clock);
    if (!rc && fflush(s->log)) rc = log_write_failed(s);
    return rc;
}

/* ---- handlers (I/O thread) ---- */

static void on_svs(loom_node *n, void *ctx, node_msg *m)
{
    svb_layer *l = ctx;
    int rank;
    node_peer_role(n, m->from, &rank);
    node_lock(n);
    loom_svb *s = l->open;
    const char *why = NULL;
    svb_peer *p = s && rank >= 0 && rank < s->workers ? &s->peers[rank] : NULL;
    if (!p || rank == s->rank)
        why = "no sufficient-vector broadcast is open here";
    else if (m->h.clock != p->received)
        why = "a clock out of its sender's order";
    else if (m->h.b != s->o.width)
        why = "u of another width";
    else if ((m->h.a == 0) != (m->nframes == 0))
        why = "the SV count and the frame disagree";
    else if (m->h.a)
        svb_frame_check(node_frame_data(m, 0), node_frame_size(m, 0), m->h.a, s->o.width, s->o.rows,
                        &why);
    if (!why && m->h.a && p->count == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 8;
        /* The queue is a ring only in name: compact it before it grows. */
        node_msg *q = malloc(cap * sizeof *q);
        if (!q) {
            why = "out of memory";
        } else {
            for (size_t i = 0; i < p->count; i++) q[i] = p->queue[(p->head + i) % p->cap];
            free(p->queue);
            p->queue = q, p->head = 0, p->cap = cap;
        }
    }
    if (why) {
        if (s) s->stats.dropped++;
        node_unlock(n);
        node_drop(n, m, why);
        return;
    }
    if (m->h.a) {
        node_msg_keep(&p->queue[(p->head + p->count) % p->cap], m);
        p->count++;
        s->stats.svs_received += m->h.a;
    }
    p->received++;
    node_broadcast(n);
    node_unlock(n);
}

static void on_replica(loom_node *n, void *ctx, node_msg *m)
{
    svb_layer *l = ctx;
    int rank;
    node_peer_role(n, m->from, &rank);
    node_lock(n);
    loom_svb *s = l->open;
    const char *why = NULL;
    svb_peer *p = s && rank >= 0 && rank < s->workers ? &s->peers[rank] : NULL;
    if (!p || rank == s->rank)
        why = "no sufficient-vector broadcast is open here";
    else if (p->has_replica)
        why = "a second replica before the first was used";
    else if (m->h.a > 1)
        why = "neither averaging nor rotation";
    else if (node_frame_size(m, 0) != 8 * replica_values(s))
        why = "a replica of another size";
    if (!why) {
        const uint8_t *d = node_frame_data(m, 0);
        for (size_t e = 0; e < replica_values(s) && !why; e++) {
            uint64_t b = msg_load_u64(d + 8 * e);
            double v;
            memcpy(&v, &b, 8);
            if (!isfinite(v)) why = "a replica value is not finite";
        }
    }
    if (why) {
        if (s) s->stats.dropped++;
        node_unlock(n);
        node_drop(n, m, why);
        return;
    }
    node_msg_keep(&p->replica, m);
    p->has_replica = 1;
    node_broadcast(n);
    node_unlock(n);
}

static void layer_free(void *state)
{
    free(state);
}

static const msg_type_info svb_types[] = {
    {MSG_SVB_SVS, "SVB_SVS", 0, 1, MSG_BY_WORKER},
    {MSG_SVB_REPLICA, "SVB_REPLICA", 1, 1, MSG_BY_WORKER},
};

static node_layer_def svb_layer_def = {"svb", svb_types, 2, 0};

int svb_attach(loom_node *n)
{
    int rc = node_layer_register(&svb_layer_def);
    if (rc || !loom_is_worker(n)) return rc;
    svb_layer *l = calloc(1, sizeof *l);
    if (!l) return LOOM_ENOMEM;
    node_set_layer(n, &svb_layer_def, l, layer_free);
    node_set_handler(n, MSG_SVB_SVS, on_svs, l);
    node_set_handler(n, MSG_SVB_REPLICA, on_replica, l);
    return 0;
}

/* ---- the application's side ---- */

int loom_svb_open(loom_node *n, const loom_svb_opts *o, loom_svb **out)
{
    if (!n || !o || !out || !loom_is_worker(n)) return LOOM_EINVAL;
    *out = NULL;
    if (o->width == 0 || o->rows == 0 || o->rows > UINT32_MAX ||
        (o->consistency != LOOM_BSP && o->consistency != LOOM_SSP) || o->staleness < 0 ||
        o->rows * o->width > node_max_payload(n) / 8 || !(o->adagrad >= 0) || isinf(o->adagrad))
        return LOOM_EINVAL;
    svb_layer *l = node_layer(n, &svb_layer_def);
    if (!l || l->open) return LOOM_ESTATE;
    loom_svb *s = calloc(1, sizeof *s);
    if (!s) return LOOM_ENOMEM;
    s->node = n;
    s->o = *o;
    s->o.log_path = NULL;
    s->rank = loom_rank(n);
    s->workers = loom_num_workers(n);
    s->servers = loom_num_servers(n);
    s->w = calloc((size_t)o->rows * o->width, sizeof *s->w);
    s->peers = calloc((size_t)s->workers, sizeof *s->peers);
    s->order = malloc((size_t)s->workers * sizeof *s->order);
    int rc = s->w && s->peers && s->order ? 0 : LOOM_ENOMEM;
    if (!rc && o->adagrad > 0) rc = svb_adagrad_init(&s->ag, o->rows, o->width, o->adagrad);
    if (!rc && o->log_path) {
        s->log_path = strdup(o->log_path);
        if (!s->log_path)
            rc = LOOM_ENOMEM;
        else if (!(s->log = fopen(o->log_path, "w+b")))
            rc = LOOM_ECONFIG;
        else if (o->adagrad > 0)
            rc = log_adagrad(s);
    }
    if (rc) {
        loom_svb_close(s);
        return rc;
    }
    node_lock(n);
    l->open = s;
    node_unlock(n);
    *out = s;
    return 0;
}

double *loom_svb_replica(loom_svb *s)
{
    return s->w;
}

int64_t loom_svb_clocks(const loom_svb *s)
{
    return s->clock;
}

int loom_svb_add(loom_svb *s, const float *u, const uint64_t *idx, const float *val, uint32_t nnz)
{
    for (uint32_t k = 0; k < s->o.width; k++)
        if (!isfinite(u[k])) return LOOM_EINVAL;
    for (uint32_t e = 0; e < nnz; e++)
        if (idx[e] >= s->o.rows || !isfinite(val[e])) return LOOM_EINVAL;
    if (grow(s, 4 + 4 * (size_t)s->o.width + 8 * (size_t)nnz)) return LOOM_ENOMEM;
    uint8_t *p = s->frame + s->len;
    put32(p, nnz), p += 4;
    for (uint32_t k = 0; k < s->o.width; k++, p += 4) {
        uint32_t b;
        memcpy(&b, &u[k], 4);
        put32(p, b);
    }
    for (uint32_t e = 0; e < nnz; e++, p += 4) put32(p, (uint32_t)idx[e]);
    for (uint32_t e = 0; e < nnz; e++, p += 4) {
        uint32_t b;
        memcpy(&b, &val[e], 4);
        put32(p, b);
    }
    s->len = (size_t)(p - s->frame);
    s->count++;
    return 0;
}

static uint32_t worker_id(const loom_svb *s, int rank)
{
    return node_worker_id(s->servers, rank);
}

/* The clock's multicast: which of the other workers get the SVs. */
static size_t draw_peers(loom_svb *s, unsigned char *gets)
{
    size_t others = 0;
    for (int r = 0; r < s->workers; r++)
        if (r != s->rank) s->order[others++] = (uint32_t)r;
    size_t q = s->o.peers && s->o.peers < others ? s->o.peers : others;
    uint64_t state = s->o.seed ^ ((uint64_t)(uint32_t)s->rank << 40) ^ (uint64_t)s->clock;
    for (size_t i = 0; i < q; i++) { /* a partial Fisher-Yates shuffle */
        uint64_t z = rand_splitmix64(&state);
        size_t j = i + (size_t)(z % (others - i));
        uint32_t t = s->order[i];
        s->order[i] = s->order[j];
        s->order[j] = t;
    }
    memset(gets, 0, (size_t)s->workers);
    for (size_t i = 0; i < q; i++) gets[s->order[i]] = 1;
    return q;
}

static int send_svs(loom_svb *s)
{
    unsigned char *gets = calloc((size_t)s->workers, 1);
    if (!gets) return LOOM_ENOMEM;
    draw_peers(s, gets);
    int rc = 0;
    for (int r = 0; r < s->workers && !rc; r++) {
        if (r == s->rank) continue;
        int with = gets[r] && s->count > 0;
        msg_header h = {
            .type = MSG_SVB_SVS, .clock = s->clock, .a = with ? s->count : 0, .b = s->o.width};
        node_frame f = {.data = s->frame, .len = s->len, .copy = 1};
        rc = node_send(s->node, worker_id(s, r), &h, &f, with ? 1 : 0);
        s->stats.sv_bytes_sent += MSG_HEADER_SIZE + (with ? s->len : 0);
        if (with) s->stats.svs_sent += s->count;
    }
    free(gets);
    return rc;
}

/* Wait until every peer has sent its messages of clocks < upto. */
static int wait_clocks(loom_svb *s, int64_t upto)
{
    int rc = 0;
    node_lock(s->node);
    for (int r = 0; r < s->workers && !rc; r++)
        while (r != s->rank && s->peers[r].received < upto && !rc) rc = node_wait(s->node, 0);
    node_unlock(s->node);
    return rc;
}

/* Apply the received SVs of clocks <= upto, by (clock, rank). */
static int apply_received(loom_svb *s, int64_t upto)
{
    for (;;) {
        node_lock(s->node);
        int best = -1;
        int64_t best_clock = 0;
        for (int r = 0; r < s->workers; r++) {
            svb_peer *p = &s->peers[r];
            if (!p->count) continue;
            int64_t c = p->queue[p->head].h.clock;
            if (c <= upto && (best < 0 || c < best_clock)) best = r, best_clock = c;
        }
        node_msg m;
        if (best >= 0) {
            svb_peer *p = &s->peers[best];
            node_msg_keep(&m, &p->queue[p->head]);
            p->head = (p->head + 1) % p->cap;
            p->count--;
        }
        node_unlock(s->node);
        if (best < 0) return 0;
        const uint8_t *d = node_frame_data(&m, 0);
        size_t len = node_frame_size(&m, 0);
        int rc =
            svb_frame_apply(s->w, s->ag.acc ? &s->ag : NULL, s->o.width, d, m.h.a, &s->scratch);
        if (!rc) rc = log_frame(s, m.h.clock, d, len, m.h.a);
        s->stats.svs_applied += m.h.a;
        node_msg_release(&m);
        if (rc) return rc;
    }
}

/* Send the replica to the workers marked in `to`, tagged with `kind`. */
static int send_replica(loom_svb *s, const unsigned char *to, uint64_t kind)
{
    size_t n = replica_values(s);
    uint8_t *buf = malloc(8 * n);
    if (!buf) return LOOM_ENOMEM;
    encode_replica(s->w, n, buf);
    int rc = 0;
    for (int r = 0; r < s->workers && !rc; r++) {
        if (!to[r]) continue;
        msg_header h = {.type = MSG_SVB_REPLICA, .clock = s->clock, .a = kind};
        node_frame f = {.data = buf, .len = 8 * n, .copy = 1};
        rc = node_send(s->node, worker_id(s, r), &h, &f, 1);
        s->stats.replica_bytes_sent += MSG_HEADER_SIZE + 8 * n;
    }
    free(buf);
    return rc;
}

static int wait_replica(loom_svb *s, int r)
{
    int rc = 0;
    node_lock(s->node);
    while (!s->peers[r].has_replica && !rc) rc = node_wait(s->node, 0);
    node_unlock(s->node);
    return rc;
}

static void release_replica(loom_svb *s, int r)
{
    node_lock(s->node);
    node_msg_release(&s->peers[r].replica);
    s->peers[r].has_replica = 0;
    node_unlock(s->node);
}

/* Every worker sends every other its replica; each sums them in rank order. */
static int average(loom_svb *s)
{
    size_t n = replica_values(s);
    unsigned char *to = malloc((size_t)s->workers);
    double *sum = calloc(n, sizeof *sum), *other = malloc(n * sizeof *other);
    int rc = to && sum && other ? 0 : LOOM_ENOMEM;
    if (!rc) {
        for (int r = 0; r < s->workers; r++) to[r] = r != s->rank;
        rc = send_replica(s, to, 0);
    }
    for (int r = 0; r < s->workers && !rc; r++) {
        const double *add = s->w;
        if (r != s->rank) {
            if ((rc = wait_replica(s, r))) break;
            decode_replica(node_frame_data(&s->peers[r].replica, 0), n, other);
            release_replica(s, r);
            add = other;
        }
        for (size_t e = 0; e < n; e++) sum[e] += add[e];
    }
    if (!rc) {
        for (size_t e = 0; e < n; e++) s->w[e] = sum[e] / s->workers;
        rc = log_replica(s);
    }
    free(to), free(sum), free(other);
    return rc;
}

/* Rank r's replica goes to r + 1; the data stays where it is. */
static int rotate(loom_svb *s)
{
    unsigned char *to = calloc((size_t)s->workers, 1);
    if (!to) return LOOM_ENOMEM;
    int next = (s->rank + 1) % s->workers, prev = (s->rank + s->workers - 1) % s->workers;
    to[next] = 1;
    int rc = send_replica(s, to, 1);
    free(to);
    if (!rc) rc = wait_replica(s, prev);
    if (!rc) {
        decode_replica(node_frame_data(&s->peers[prev].replica, 0), replica_values(s), s->w);
        release_replica(s, prev);
        rc = log_replica(s);
    }
    return rc;
}

int loom_svb_clock(loom_svb *s)
{
    if (s->restored) return LOOM_ESTATE;
    int64_t c = s->clock;
    int avg = s->o.average_every && (c + 1) % s->o.average_every == 0 && s->workers > 1;
    int rot = !avg && s->o.rotate_every && (c + 1) % s->o.rotate_every == 0 && s->workers > 1;
    int rc = send_svs(s);
    if (!rc)
        rc = svb_frame_apply(s->w, s->ag.acc ? &s->ag : NULL, s->o.width, s->frame, s->count,
                             &s->scratch);
    if (!rc) rc = log_frame(s, c, s->frame, s->len, s->count);
    s->stats.svs_applied += s->count;
    s->len = 0, s->count = 0;
    /* Averaging and rotation need every SV of the clock in first. */
    int bound = s->o.consistency == LOOM_BSP || avg || rot ? 0 : s->o.staleness;
    if (!rc) rc = wait_clocks(s, c + 1 - bound);
    if (!rc) rc = apply_received(s, c);
    if (!rc) rc = adagrad_step(s);
    if (!rc && avg) rc = average(s);
    if (!rc && rot) rc = rotate(s);
    if (!rc) rc = log_end(s);
    s->clock = c + 1;
    return rc;
}

int loom_svb_sync(loom_svb *s)
{
    int rc = wait_clocks(s, s->clock);
    if (!rc) rc = apply_received(s, s->clock - 1);
    return rc ? rc : adagrad_step(s);
}

int loom_svb_replay(const char *log_path, uint32_t width, uint64_t rows, int64_t clock, double *w,
                    uint64_t *svs)
{
    FILE *f = fopen(log_path, "rb");
    if (!f) return LOOM_ENOTFOUND;
    size_t n = (size_t)rows * width;
    uint8_t *buf = NULL, head[24];
    svb_adagrad ag = {0}; /* from an 'A' record */
    uint64_t applied = 0;
    svb_scratch scratch = {0};
    int rc = 0, kind;
    int64_t ended = 0;
    /* The file is trusted no more than a peer's frame. */
    memset(w, 0, n * sizeof *w);
    while (!rc && (clock < 0 || ended < clock) && (kind = fgetc(f)) != EOF) {
        if (fread(head, 1, 8, f) != 8) {
            rc = LOOM_EPROTO;
        } else if (kind == 'E') {
            ended++;
        } else if (kind == 'G' && ag.acc) {
            svb_adagrad_step(w, &ag, width);
        } else if (kind == 'A' && !ag.acc && !applied) {
            uint64_t bits = msg_load_u64(head);
            double lr;
            memcpy(&lr, &bits, sizeof lr);
            rc = lr > 0 && !isinf(lr) ? svb_adagrad_init(&ag, rows, width, lr) : LOOM_EPROTO;
        } else if (kind == 'R') {
            uint8_t *r = realloc(buf, 8 * n);
            if (!(buf = r ? r : buf) || !r)
                rc = LOOM_ENOMEM;
            else if (fread(buf, 1, 8 * n, f) != 8 * n)
                rc = LOOM_EPROTO;
            else
                decode_replica(buf, n, w);
        } else if (kind == 'S' && fread(head + 8, 1, 16, f) == 16) {
            uint64_t count = msg_load_u64(head + 8), len = msg_load_u64(head + 16);
            const char *why;
            uint8_t *r = len ? realloc(buf, len) : buf;
            if (len && !r)
                rc = LOOM_ENOMEM;
            else if ((buf = r), len && fread(buf, 1, len, f) != len)
                rc = LOOM_EPROTO;
            else if (svb_frame_check(buf, len, count, width, rows, &why))
                rc = LOOM_EPROTO;
            else if (!(rc = svb_frame_apply(w, ag.acc ? &ag : NULL, width, buf, count, &scratch)))
                applied += count;
        } else {
            rc = LOOM_EPROTO;
        }
    }
    if (!rc && clock >= 0 && ended < clock) rc = LOOM_EINVAL;
    free(buf);
    svb_adagrad_free(&ag);
    svb_scratch_free(&scratch);
    fclose(f);
    if (svs) *svs = applied;
    return rc;
}

int loom_svb_restore(loom_svb *s, int64_t clock)
{
    if (!s->log || clock < 0 || clock > s->clock) return LOOM_EINVAL;
    s->restored = 1;
    if (fflush(s->log)) return log_write_failed(s);
    return loom_svb_replay(s->log_path, s->o.width, s->o.rows, clock, s->w, NULL);
}

void loom_svb_get_stats(const loom_svb *s, loom_svb_stats *out)
{
    node_lock(s->node);
    *out = s->stats;
    node_unlock(s->node);
}

void loom_svb_close(loom_svb *s)
{
    if (!s) return;
    svb_layer *l = node_layer(s->node, &svb_layer_def);
    node_lock(s->node);
    if (l && l->open == s) l->open = NULL;
    for (int r = 0; s->peers && r < s->workers; r++) {
        svb_peer *p = &s->peers[r];
        for (size_t i = 0; i < p->count; i++) node_msg_release(&p->queue[(p->head + i) % p->cap]);
        free(p->queue);
        if (p->has_replica) node_msg_release(&p->replica);
    }
    node_unlock(s->node);
    if (s->log) fclose(s->log);
    svb_scratch_free(&s->scratch);
    svb_adagrad_free(&s->ag);
    free(s->peers), free(s->order), free(s->w), free(s->frame), free(s->log_path);
    free(s);
}
