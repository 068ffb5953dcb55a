/* server_pull: reads of a partition, gated by the clock.
 *
 * A pull names the oldest clock its answer may reflect. If min_clock has not
 * reached it, the pull waits in `deferred` and is answered as soon as the
 * last straggler's CLOCK arrives; that is how BSP and SSP reads block. The
 * answer carries min_clock (the reader caches it as the rows' freshness) and
 * the last push sequence applied from that worker (the reader re-adds its own
 * later, still in-flight pushes, to see its own writes).
 *
 * Rows on the wire (docs/FILTERS.md). A reply goes through the pull chain for
 * that worker when the table has pull filters, when its rows are sparse
 * enough to be smaller, or when the reader asked only for what changed since
 * a version (PULL_SINCE; row versions: server_impl.h). When the pull spec has
 * keycache, lz4 or zstd, a pull's key list may come through the worker's
 * chain of key lists (MSG_F_KEYS_ENC: a digest for a list sent before); it is
 * decoded on arrival, in order, and an unknown digest is dropped, counted and
 * answered with LOOM_ENOTFOUND, on which the worker sends the list whole.
 *
 * A plain reply's rows are read into a buffer that ZeroMQ sends without a
 * copy and hands back when it is done (free_reply, on ZeroMQ's I/O thread);
 * the last one is kept for the next reply. Replies are charged to the
 * process's budget of managed communication (server_comm.c). A pull of a
 * range being handed back is held, or refused once another server is its
 * master (server_park.c). */
#include <inttypes.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "loom/error.h"
#include "ps/msg_types.h"
#include "ps/server_impl.h"

/* A buffer for a reply of `bytes`: the spare one if it fits without
 * wasting much, else a new one. */
reply_buf *srv_reply_buf_get(server *s, size_t bytes)
{
    reply_buf *b = atomic_exchange(&s->spare, NULL);
    if (b && b->cap >= bytes && b->cap / 2 <= bytes + 65536) return b;
    free(b);
    b = malloc(sizeof *b + (bytes ? bytes : 1));
    if (b) b->cap = bytes;
    return b;
}

/* ZeroMQ is done with a reply (called on its I/O thread): keep the buffer as
 * the spare unless there is one already. */
static void free_reply(void *data, void *hint)
{
    server *s = hint;
    reply_buf *b = (reply_buf *)((uint8_t *)data - offsetof(reply_buf, data));
    reply_buf *none = NULL;
    if (!atomic_compare_exchange_strong(&s->spare, &none, b)) free(b);
}

/* Why a pull cannot be answered, or NULL; sets its keys (NULL: a range),
 * count (dk's when its keys came encoded) and part. */
const char *srv_check_pull(server *s, srv_table *t, node_msg *m, const pull_keys *dk,
                           const uint64_t **keys, uint64_t *count, srv_part **part)
{
    const char *bad;
    if (dk->keys) {
        *keys = dk->keys;
        *count = dk->n;
        bad = dk->n ? srv_check_part(t, dk->keys, 0, dk->n, part) : "empty key list";
    } else {
        bad = srv_check_keys(s, t, m, 0, keys, count, part);
    }
    /* The reply is one frame: within the job's limit (clients split larger pulls). */
    if (!bad && *count > node_max_payload(s->node) / t->row_bytes) bad = "pull too large";
    if (!bad && m->h.type == MSG_PULL_SINCE && node_frame_size(m, 1) != (*count + 7) / 8)
        bad = "held-rows bitmap does not match the keys";
    return bad;
}

void srv_free_data(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* Whether the reader of a PULL_SINCE holds row i of its request. */
static int reader_holds(node_msg *m, size_t i)
{
    const uint8_t *held = node_frame_data(m, 1);
    return held[i / 8] >> (i % 8) & 1;
}

/* Answer a pull through the pull chain for worker w, with the `count` rows
 * read into rows (one buffer per reply: this function owns it): leave out the
 * rows the reader holds and that have not changed since the version it names,
 * encode the others. 0, or the status to reply with. */
static int answer_encoded(server *s, srv_table *t, srv_part *p, node_msg *m, int w,
                          const uint64_t *keys, uint64_t count, uint8_t *rows)
{
    uint64_t *sent = malloc(count ? count * 8 : 1);
    if (!sent) return LOOM_ENOMEM;
    int since = m->h.type == MSG_PULL_SINCE;
    if (since && srv_track_versions(t)) {
        free(sent);
        return LOOM_ENOMEM;
    }
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t key = keys ? keys[i] : m->h.a + i;
        if (since && reader_holds(m, i) && srv_row_version(t, p, key) <= m->h.a) continue;
        if (n != i) memmove(rows + n * t->row_bytes, rows + i * t->row_bytes, t->row_bytes);
        sent[n++] = key;
    }
    filter_msg fm = {.keys = sent, .vals = rows, .n = n};
    uint8_t *enc;
    size_t len;
    int rc = filter_chain_encode(t->pull_enc[w], &fm, &enc, &len);
    free(sent);
    if (rc) return rc;
    if (len > node_max_payload(s->node)) {
        free(enc);
        return LOOM_ELIMIT;
    }
    uint8_t version[8];
    msg_store_u64(version, t->version);
    msg_header h = {.type = MSG_PULL_REPLY_ENC,
                    .table = m->h.table,
                    .req = m->h.req,
                    .clock = s->min_clock,
                    .a = t->applied[w]};
    node_frame f[2] = {{version, 8, NULL, NULL, 1}, {enc, len, srv_free_data, NULL, 0}};
    comm_mgr_sent(&s->cm, node_now_ms(), 8 + len, 0); /* the budget pays for what is sent */
    node_send(s->node, m->from, &h, f, 2);
    return 0;
}

/* The header of a PULL_REPLY to m: status 0 with rows, or an error and none. */
static msg_header pull_reply_header(const server *s, const srv_table *t, const node_msg *m, int w,
                                    int status)
{
    return (msg_header){.type = MSG_PULL_REPLY,
                        .table = m->h.table,
                        .req = m->h.req,
                        .clock = s->min_clock,
                        .a = t->applied[w],
                        .b = (uint64_t)status};
}

/* Answer a pull with an error status and no rows. */
void srv_refuse_pull(server *s, srv_table *t, node_msg *m, int w, int status)
{
    msg_header h = pull_reply_header(s, t, m, w, status);
    node_send(s->node, m->from, &h, NULL, 0);
}

/* Answer a pull that is allowed to proceed (dk: its decoded keys, if encoded). */
void srv_answer_pull(server *s, srv_table *t, node_msg *m, int w, const pull_keys *dk)
{
    const uint64_t *keys;
    uint64_t count;
    srv_part *p;
    const char *bad = srv_check_pull(s, t, m, dk, &keys, &count, &p);
    if (bad) {
        node_drop(s->node, m, bad);
        return;
    }
    if (!s->served && node_is_replacement(s->node)) {
        /* A replacement or a server that joined the running job serves its
         * first pull, as a master (what it measures: docs/BENCHMARKS.md). */
        loom_stats st;
        loom_node_stats(s->node, &st);
        s->served = 1;
        log_info("served its first pull: %" PRIu64 " bytes received since it started",
                 st.bytes_received);
    }
    for (uint64_t i = 0; t->rows && i < count; i++) /* without memory: only not pushed to */
        comm_rowset_subscribe(t->rows, keys ? keys[i] : m->h.a + i, w);
    size_t bytes = (size_t)count * t->row_bytes;
    reply_buf *b = srv_reply_buf_get(s, bytes);
    uint8_t *out = b ? b->data : NULL;
    int status = out ? 0 : LOOM_ENOMEM;
    if (out && keys)
        store_read_many(p->store, keys, (size_t)count, out);
    else if (out)
        store_read_range(p->store, m->h.a, m->h.b, out);
    if (out && (m->h.type == MSG_PULL_SINCE || t->pull_filtered ||
                (!t->pull_dense && filter_sparse_pays(t->def.opts.type, t->def.opts.width, out,
                                                      (size_t)count, bytes)))) {
        status = answer_encoded(s, t, p, m, w, keys, count, out);
        free_reply(out, s);
        if (!status) return;
        out = NULL;
    }
    msg_header h = pull_reply_header(s, t, m, w, status);
    node_frame f = {out, out ? bytes : 0, out ? free_reply : NULL, s, 0};
    comm_mgr_sent(&s->cm, node_now_ms(), bytes, 0);
    node_send(s->node, m->from, &h, &f, out ? 1 : 0);
}

/* Decode the key list of a pull that came through worker w's chain of key
 * lists into dk. 0, or the status to answer with: LOOM_ENOTFOUND for a digest
 * this server does not hold (the worker sends the list again), LOOM_EPROTO
 * for a malformed list; both dropped and counted. */
static int decode_pull_keys(server *s, srv_table *t, node_msg *m, int w, pull_keys *dk)
{
    if (!t->keys_dec || (m->h.flags & MSG_F_RANGE)) {
        node_drop(s->node, m, "encoded keys without a key-list chain");
        return LOOM_EPROTO;
    }
    void *vals;
    uint64_t digest;
    int rc = filter_chain_decode(t->keys_dec[w], node_frame_data(m, 0), node_frame_size(m, 0),
                                 node_max_payload(s->node) / t->row_bytes, &dk->keys, &vals, &dk->n,
                                 &digest);
    free(vals);
    if (rc == LOOM_ENOTFOUND) {
        node_drop(s->node, m, "a key digest this server does not hold (the worker resends)");
    } else if (rc) {
        node_drop(s->node, m, "malformed encoded keys");
        rc = rc == LOOM_ENOMEM ? rc : LOOM_EPROTO;
    }
    return rc;
}

void srv_on_pull(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    srv_table *t = srv_table_of(s, m->h.table);
    int w = srv_worker_rank(s, m->from);
    int range = (m->h.flags & MSG_F_RANGE) != 0;
    unsigned frames = range ? 0u : m->h.type == MSG_PULL_SINCE ? 2u : 1u;
    const char *refused = srv_request_refusal(s, t, m->from, m->nframes, frames);
    if (!refused && range && m->h.type == MSG_PULL_SINCE) refused = "a PULL_SINCE of a key range";
    if (refused) {
        node_drop(n, m, refused);
        return;
    }
    /* Encoded keys are decoded now, in arrival order: the key cache follows
     * the order the worker's chain encoded them in. */
    pull_keys dk = {NULL, 0};
    if (m->h.flags & MSG_F_KEYS_ENC) {
        int rc = decode_pull_keys(s, t, m, w, &dk);
        if (rc) {
            srv_refuse_pull(s, t, m, w, rc);
            return;
        }
    }
    const uint64_t *keys;
    uint64_t count;
    srv_part *p;
    const char *bad = srv_check_pull(s, t, m, &dk, &keys, &count, &p);
    if (!bad && p->fence == PS_PART_FENCED && !srv_is_master(s, t, p)) { /* handed back */
        srv_refuse_handed_back(s, t, m, w);
        free(dk.keys);
        return;
    }
    if (!bad && !p->fence && m->h.clock <= s->min_clock) {
        srv_answer_pull(s, t, m, w, &dk);
        free(dk.keys);
        return;
    }
    /* Too fresh for now, or for a fenced range: keep it (frames and all)
     * until the clocks catch up or the range opens, but only a valid one,
     * and not without limit. */
    if (!bad && s->nwaiting + s->nparked >= PS_MAX_DEFERRED_PULLS)
        bad = "too many pulls waiting for clocks";
    deferred *d = bad ? NULL : calloc(1, sizeof *d);
    if (!d) {
        node_drop(n, m, bad ? bad : "out of memory");
        free(dk.keys);
        return;
    }
    d->dk = dk;
    d->since = node_now_ms();
    node_msg_keep(&d->m, m);
    if (p->fence) {
        s->nparked++;
        d->next = s->parked;
        s->parked = d;
    } else {
        s->nwaiting++;
        d->next = s->waiting;
        s->waiting = d;
    }
}

void srv_free_deferred(deferred *d)
{
    free(d->dk.keys);
    node_msg_release(&d->m);
    free(d);
}

void srv_release_deferred(server *s)
{
    deferred **pp = &s->waiting;
    while (*pp) {
        deferred *d = *pp;
        if (d->m.h.clock > s->min_clock) {
            pp = &d->next;
            continue;
        }
        *pp = d->next;
        s->nwaiting--;
        srv_table *t = srv_table_of(s, d->m.h.table);
        srv_answer_pull(s, t, &d->m, srv_worker_rank(s, d->m.from), &d->dk);
        srv_free_deferred(d);
    }
}

/* Called by the server's timer: the pull that has waited longest, if it has
 * waited stall_ms (ps.h: PS_STALL_REPORT_MS) and was not named yet, is named with what it
 * waits for. Under BSP a pull waits for the slowest worker, so a job that
 * stopped moving says which worker holds it up, or that a fenced range does;
 * a worker that is merely slow is named the same way, once per pull. */
void srv_report_stall(server *s, uint64_t now)
{
    const deferred *oldest = NULL;
    int fenced = 0;
    for (const deferred *d = s->waiting; d; d = d->next)
        if (!oldest || d->since < oldest->since) oldest = d;
    for (const deferred *d = s->parked; d; d = d->next)
        if (!oldest || d->since < oldest->since) oldest = d, fenced = 1;
    if (!oldest || now - oldest->since < s->stall_ms || oldest->since == s->stall_said) return;
    s->stall_said = oldest->since;
    uint64_t secs = (now - oldest->since) / 1000;
    int reader = srv_worker_rank(s, oldest->m.from);
    if (fenced) {
        log_warn("%zu pulls have waited %" PRIu64 " s for ranges fenced here (a handback or a "
                 "server's leave in progress), the oldest worker %d's",
                 s->nparked, secs, reader);
        return;
    }
    int slowest = 0;
    while (slowest < s->num_workers - 1 && s->clocks.of[slowest] != s->clocks.min) slowest++;
    log_warn("%zu pulls have waited %" PRIu64 " s, the oldest worker %d's for %" PRId64
             " clocks finished by every worker: worker %d has finished %" PRId64 " here",
             s->nwaiting, secs, reader, oldest->m.h.clock, slowest, s->clocks.min);
}
