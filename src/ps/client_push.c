/* client_push: a worker's writes, on their way to the servers.
 *
 * Writes. loom_push() coalesces deltas per row in the update buffer.
 * loom_clock()/loom_flush() send it; loom_push_async() sends at once. Every
 * push message to a server gets a sequence number, allocated and queued under
 * the table lock so a server sees them in order, and stays in that server's
 * in-flight FIFO until the server reports it applied. The acknowledgement
 * (which completes the push's timestamp) comes on arrival; under BSP the
 * server applies the push only when its clock has ended everywhere.
 *
 * Rows on the wire (docs/FILTERS.md). A push message goes through the
 * table's push filter chain for its server (PUSH_ENC) when the table has push
 * filters or when its rows are sparse enough to be smaller; else keys and rows
 * go as they are.
 *
 * The path from loom_push() to the wire, bottom-up below: the update
 * buffer's rows, coalesced per key as they came, are sorted (send_buffer),
 * cut at the table's ring into the ranges' masters and at the frame limit
 * into messages (client_send_push); each message takes its sequence number,
 * enters its server's in-flight FIFO and goes as PUSH or PUSH_ENC
 * (push_chunk). A flush's timestamp waits for every earlier push of the
 * table too (cover_earlier_pushes). */
#include <math.h>
#include <string.h>

#include "core/log.h"
#include "ps/client_impl.h"
#include "ps/msg_types.h"

/* kkt's view of the weights of n keys: their cached rows, and NaN (never 0,
 * so kkt keeps the row) for a row not in the cache. NULL on ENOMEM: kkt then
 * keeps every row. Lock held. */
static void *kkt_weights(loom_table *t, const uint64_t *keys, size_t n)
{
    uint8_t *w = malloc(n ? n * t->row_bytes : 1);
    for (size_t i = 0; w && i < n; i++) {
        uint8_t *row = w + i * t->row_bytes;
        uint32_t slot;
        if (t->cache_on && u64map_get(&t->cache_idx, keys[i], &slot)) {
            memcpy(row, t->c_rows + (size_t)slot * t->row_bytes, t->row_bytes);
        } else {
            const float nan32 = NAN;
            const double nan64 = NAN;
            for (uint32_t j = 0; j < t->def.opts.width; j++) {
                if (t->def.opts.type == LOOM_F32)
                    memcpy(row + (size_t)j * sizeof nan32, &nan32, sizeof nan32);
                else
                    memcpy(row + (size_t)j * sizeof nan64, &nan64, sizeof nan64);
            }
        }
    }
    return w;
}

/* The push chain's encoding of cnt rows for server s (keys, or the range from
 * begin when keys is NULL) into *enc, or *enc = NULL to send them as they are:
 * they go through the chain when the table has push filters, or when sparse
 * rows are smaller. flush: sigmod sends what it holds. Lock held. */
static int encode_push(loom_table *t, int s, const uint64_t *keys, uint64_t begin,
                       const uint8_t *vals, size_t cnt, int flush, uint8_t **enc, size_t *len)
{
    *enc = NULL;
    size_t plain = (keys ? cnt * 8 : 0) + cnt * t->row_bytes;
    if (!t->push_filtered &&
        (t->push_spec.rows == FILTER_ROWS_DENSE ||
         !filter_sparse_pays(t->def.opts.type, t->def.opts.width, vals, cnt, plain)))
        return 0;
    uint64_t *range_keys = NULL;
    if (!keys) {
        range_keys = malloc(cnt ? cnt * 8 : 1);
        if (!range_keys) return LOOM_ENOMEM;
        for (size_t i = 0; i < cnt; i++) range_keys[i] = begin + i;
        keys = range_keys;
    }
    void *weights = t->push_spec.on[FILTER_KKT] ? kkt_weights(t, keys, cnt) : NULL;
    filter_msg fm = {.keys = keys, .vals = vals, .n = cnt, .weights = weights, .flush = flush};
    int rc = filter_chain_encode(t->push_enc[s], &fm, enc, len);
    free(range_keys);
    free(weights);
    /* Without filters the chain keeps no state: a message it would make
     * larger than a frame may go as it is instead. */
    if (!rc && !t->push_filtered && *len > node_max_payload(t->node)) {
        free(*enc);
        *enc = NULL;
    }
    return rc;
}

/* An in-flight push that outlives its timestamp holds the caller's keys and
 * rows, which the caller may free or reuse once loom_wait() returned: give it
 * its own copy while the caller must still keep them. It outlives the
 * timestamp when the server applies it after acknowledging it (BSP: at the end
 * of the clock; kept for read-my-writes) and, with replicas, until the
 * replicas hold it (sent again if its server dies). 0 or LOOM_ENOMEM (the
 * record then holds no rows). Lock held. */
static int keep_own_rows(loom_table *t, inflight *f)
{
    if (f->hold || !f->vals) return 0; /* Loom's own buffer, or no read-my-writes */
    size_t key_bytes = f->keys ? f->n * 8 : 0, row_bytes = f->n * t->row_bytes;
    sbuf *b = sbuf_new(key_bytes + row_bytes);
    if (!b) {
        f->n = 0;
        return LOOM_ENOMEM;
    }
    if (key_bytes) memcpy(b->data, f->keys, key_bytes);
    memcpy(b->data + key_bytes, f->vals, row_bytes);
    if (f->keys) f->keys = (const uint64_t *)b->data;
    f->vals = b->data + key_bytes;
    f->hold = b;
    return 0;
}

/* The in-flight record of a push of `plain` bytes as rows, `wire` bytes as
 * sent, to server s: counted, its sequence number taken, at the tail of the
 * server's FIFO; NULL on ENOMEM. Lock held. */
static inflight *track_push(loom_table *t, int s, loom_ts ts, int managed, size_t plain,
                            size_t wire)
{
    inflight *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    count_wire(t, LOOM_DIR_PUSH, plain, wire);
    /* The budget pays for the bytes on the wire, after the filters. */
    comm_mgr_sent(&t->client->cm, node_now_ms(), wire, managed);
    f->seq = ++t->next_seq;
    f->ts = ts;
    f->managed = managed;
    f->clock = atomic_load(&t->client->clock);
    f->since = node_now_ms();
    if (t->ifl_tail[s])
        t->ifl_tail[s]->next = f;
    else
        t->ifl_head[s] = f;
    t->ifl_tail[s] = f;
    return f;
}

/* A push the chain encoded (PUSH_ENC) to server s; takes enc. Lock held. */
static void send_encoded(loom_table *t, int s, uint64_t seq, uint8_t *enc, size_t len)
{
    msg_header h = {
        .type = MSG_PUSH_ENC, .table = t->id, .req = seq, .clock = atomic_load(&t->client->clock)};
    node_frame frame = {enc, len, free_data, NULL, 0};
    node_send(t->node, node_server_id(server_count(t), s), &h, &frame, 1);
}

/* One PUSH of rows [lo, lo + cnt) of a client_send_push() to server s (table lock held). */
static void push_chunk(loom_table *t, int s, const uint64_t *keys, uint64_t begin,
                       const uint8_t *vals, size_t lo, size_t cnt, sbuf *hold, loom_ts ts,
                       int flush, int managed)
{
    int S = server_count(t);
    uint8_t *enc;
    size_t enc_len = 0;
    int rc = encode_push(t, s, keys ? keys + lo : NULL, begin + lo, vals + lo * t->row_bytes, cnt,
                         flush, &enc, &enc_len);
    size_t plain = (keys ? cnt * 8 : 0) + cnt * t->row_bytes;
    inflight *f = rc ? NULL : track_push(t, s, ts, managed, plain, enc ? enc_len : plain);
    if (!f) {
        free(enc);
        node_ts_done(t->node, ts, rc ? rc : LOOM_ENOMEM);
        return;
    }
    if (t->local_rmw || t->client->replicas) {
        f->keys = keys ? keys + lo : NULL;
        f->vals = vals + lo * t->row_bytes;
        f->n = cnt;
        f->begin = begin + lo;
        f->hold = sbuf_ref(hold);
        /* With replicas the push may have to be sent again after its
         * timestamp completed, when the caller's arrays are gone: a copy. */
        if (!hold && t->client->replicas && cnt && keep_own_rows(t, f))
            log_error("out of memory: a push of table %u will not be sent again if its server dies",
                      t->id);
    }
    if (enc) {
        send_encoded(t, s, f->seq, enc, enc_len);
        return;
    }
    msg_header h = {
        .type = MSG_PUSH, .table = t->id, .req = f->seq, .clock = atomic_load(&t->client->clock)};
    node_frame frames[2];
    size_t nf = 0;
    if (keys)
        frames[nf++] =
            (node_frame){keys + lo, cnt * 8, hold ? sbuf_free_frame : NULL, sbuf_ref(hold), 0};
    else {
        h.flags = MSG_F_RANGE;
        h.a = begin + lo;
        h.b = begin + lo + cnt;
    }
    frames[nf++] = (node_frame){vals + lo * t->row_bytes, cnt * t->row_bytes,
                                hold ? sbuf_free_frame : NULL, sbuf_ref(hold), 0};
    /* On failure the job is failing: the ack never comes, and the
     * tracker already failed every timestamp, this one included. */
    node_send(t->node, node_server_id(S, s), &h, frames, nf);
}

/* Send sorted unique keys with their delta rows (or, keys == NULL, the rows
 * of [begin, begin + n)) to their servers. hold, if not NULL, owns keys and
 * vals; otherwise they are the caller's and stay valid until *ts completes.
 * Table lock held: sequence numbers must reach each server in order. */
int client_send_push(loom_table *t, const uint64_t *keys, uint64_t begin, const uint8_t *vals,
                     size_t n, sbuf *hold, loom_ts *ts_out, int flush, int managed)
{
    /* sigmod holds rows back until a flush: then every server gets a
     * message, if only to release them. */
    int release = flush && t->push_spec.on[FILTER_SIGMOD];
    int S = server_count(t);
    size_t R = t->ring.nranges;
    size_t *bound = malloc((R + 1) * sizeof *bound);
    uint8_t *sent_to = calloc((size_t)S, 1); /* servers given a message */
    if (!bound || !sent_to) {
        free(bound);
        free(sent_to);
        return LOOM_ENOMEM;
    }
    range_bounds(t, keys, begin, n, bound);
    unsigned nslices = 0;
    for (size_t rg = 0; rg < R; rg++) {
        nslices += chunks(t, bound[rg + 1] - bound[rg]);
        if (bound[rg + 1] > bound[rg]) sent_to[t->master[rg]] = 1;
    }
    for (int s = 0; release && s < S; s++) nslices += !sent_to[s];
    loom_ts ts = node_ts_new(t->node, nslices ? nslices : 1);
    if (!ts) {
        free(bound);
        free(sent_to);
        return LOOM_ENOMEM;
    }
    if (!nslices) node_ts_done(t->node, ts, 0);
    size_t max_rows = chunk_rows(t);
    static const uint64_t no_keys[1];
    for (int s = 0; release && s < S; s++)
        if (!sent_to[s]) push_chunk(t, s, no_keys, 0, vals, 0, 0, NULL, ts, flush, managed);
    for (size_t rg = 0; rg < R; rg++) {
        int s = t->master[rg];
        for (size_t lo = bound[rg]; lo < bound[rg + 1]; lo += max_rows) {
            size_t cnt = bound[rg + 1] - lo < max_rows ? bound[rg + 1] - lo : max_rows;
            push_chunk(t, s, keys, begin, vals, lo, cnt, hold, ts, flush, managed);
        }
    }
    free(bound);
    free(sent_to);
    if (ts_out) *ts_out = ts;
    return 0;
}

/* A part of a flush's timestamp: done when an earlier push completes. */
typedef struct flush_part {
    loom_node *node;
    loom_ts flush;
} flush_part;

static void flush_part_done(void *arg, int status)
{
    flush_part *p = arg;
    node_ts_done(p->node, p->flush, status);
    free(p);
}

/* A timestamp that completes when the push `sent` (0: none) and every push
 * sent before it are acknowledged. Servers acknowledge in sending order, so
 * the last unacknowledged push to each server stands for all before it.
 * Without this a barrier could release while the pushes of the clock before
 * it were still on their way. Table lock held. */
static int cover_earlier_pushes(loom_table *t, loom_ts sent, loom_ts *out)
{
    int S = server_count(t);
    /* One per server, `sent`, and every parked push (acknowledged out of
     * order, when sent again). */
    size_t cap = (size_t)S + 1;
    for (int s = 0; s < S; s++)
        for (const inflight *f = t->ifl_head[s]; f; f = f->next) cap += f->parked && !f->acked;
    loom_ts *last = malloc(cap * sizeof *last);
    if (!last) return LOOM_ENOMEM;
    uint32_t parts = 0;
    for (int s = 0; s < S; s++) {
        loom_ts l = 0;
        for (const inflight *f = t->ifl_head[s]; f; f = f->next)
            if (f->parked && !f->acked)
                last[parts++] = f->ts;
            else if (!f->acked)
                l = f->ts;
        if (l && l != sent) last[parts++] = l;
    }
    if (sent) last[parts++] = sent;
    loom_ts ts = node_ts_new(t->node, parts ? parts : 1);
    if (!ts) {
        free(last);
        return LOOM_ENOMEM;
    }
    if (!parts) node_ts_done(t->node, ts, 0);
    for (uint32_t i = 0; i < parts; i++) {
        flush_part *p = malloc(sizeof *p);
        if (!p) {
            node_ts_done(t->node, ts, LOOM_ENOMEM);
            continue;
        }
        *p = (flush_part){t->node, ts};
        if (loom_on_complete(t->node, last[i], flush_part_done, p)) flush_part_done(p, LOOM_ENOMEM);
    }
    free(last);
    *out = ts;
    return 0;
}

/* Send the update buffer's rows, sorted and coalesced, as one push. */
static int send_buffer(loom_table *t, loom_ts *ts, int flush)
{
    uint64_t *uniq;
    size_t nuniq;
    uint32_t *slot_of;
    if (keys_sort_unique(t->b_keys, t->b_n, &uniq, &nuniq, &slot_of)) return LOOM_ENOMEM;
    sbuf *b = sbuf_new(nuniq * 8 + nuniq * t->row_bytes);
    if (!b) {
        free(uniq);
        free(slot_of);
        return LOOM_ENOMEM;
    }
    uint64_t *keys = (uint64_t *)b->data;
    uint8_t *vals = b->data + nuniq * 8;
    memcpy(keys, uniq, nuniq * 8);
    for (size_t i = 0; i < t->b_n; i++)
        memcpy(vals + (size_t)slot_of[i] * t->row_bytes, t->b_rows + i * t->row_bytes,
               t->row_bytes);
    free(uniq);
    free(slot_of);
    u64map_clear(&t->buf_idx);
    t->b_n = 0;
    int rc = client_send_push(t, keys, 0, vals, nuniq, b, ts, flush, 0);
    sbuf_unref(b);
    return rc;
}

/* Send the update buffer (table lock held); *ts, if asked for, completes
 * once it and every earlier push of the table are acknowledged. flush: the
 * end of a clock or an explicit flush, where sigmod releases what it holds
 * (the automatic flush at flush_rows is not one). */
static int flush_locked(loom_table *t, loom_ts *ts, int flush)
{
    loom_ts sent = 0;
    int release = flush && t->push_spec.on[FILTER_SIGMOD];
    int rc = t->b_n || release ? send_buffer(t, ts ? &sent : NULL, flush) : 0;
    return rc || !ts ? rc : cover_earlier_pushes(t, sent, ts);
}

/* Under a budget a send (a flush, an asynchronous push) first waits until
 * the budget has paid for the traffic before it: the mandatory sends are
 * paced too (comm.c). Application threads only, no lock held. */
static int pace_to_budget(ps_client *c)
{
    uint64_t due = comm_mgr_due(&c->cm, node_now_ms());
    int rc = 0;
    node_lock(c->node);
    while (!rc && node_now_ms() < due) rc = node_wait(c->node, due);
    node_unlock(c->node);
    return rc == LOOM_ETIMEDOUT ? 0 : rc;
}

/* The update buffer's slot of key (*inserted: a new one, its row to be
 * set); 0 or LOOM_ENOMEM. Lock held. */
static int buffer_slot(loom_table *t, uint64_t key, uint32_t *slot, int *inserted)
{
    if (t->b_n == t->b_cap) {
        size_t cap = t->b_cap ? 2 * t->b_cap : 1024;
        if (grow((void **)&t->b_keys, 8, cap) || grow((void **)&t->b_rows, t->row_bytes, cap) ||
            (t->managed && (grow((void **)&t->b_abs, sizeof(double), cap) ||
                            grow((void **)&t->b_rel, sizeof(double), cap))))
            return LOOM_ENOMEM;
        t->b_cap = cap;
    }
    *slot = u64map_put(&t->buf_idx, key, (uint32_t)t->b_n, inserted);
    if (*slot == UINT32_MAX) return LOOM_ENOMEM;
    if (*inserted) {
        t->b_keys[*slot] = key;
        t->b_n++;
    }
    return 0;
}

/* After rows went into the update buffer (rc: how that went; was_empty: it
 * was empty before): wake managed communication, flush at flush_rows, and
 * release the lock. */
static int buffered(loom_table *t, int rc, int was_empty)
{
    if (t->managed && t->b_n && was_empty) node_timer_poke(t->node, &ps_layer_def);
    if (!rc && t->flush_rows && t->b_n >= t->flush_rows) rc = flush_locked(t, NULL, 0);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int loom_push(loom_table *t, const uint64_t *keys, size_t n, const void *vals)
{
    if (!t || (n && (!keys || !vals))) return LOOM_EINVAL;
    int rc = check_keys(t, keys, n, NULL);
    if (rc) return rc;
    const uint8_t *v = vals;
    loom_type type = t->def.opts.type;
    uint32_t width = t->def.opts.width;
    pthread_mutex_lock(&t->mu);
    int was_empty = t->b_n == 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const uint8_t *delta = v + i * t->row_bytes;
        int inserted;
        uint32_t slot;
        if ((rc = buffer_slot(t, keys[i], &slot, &inserted))) break;
        uint8_t *row = t->b_rows + (size_t)slot * t->row_bytes;
        if (!inserted && updater_coalesces_by_sum(&t->upd))
            rows_add(type, row, delta, width);
        else
            memcpy(row, delta, t->row_bytes);
        if (t->local_rmw) cache_add(t, keys[i], delta);
        if (t->managed) buffer_magnitude(t, keys[i], slot);
    }
    return buffered(t, rc, was_empty);
}

static int push_rows_async(loom_table *t, const uint64_t *keys, size_t n, int sorted,
                           const void *vals, loom_ts *ts);

int loom_push_async(loom_table *t, const uint64_t *keys, size_t n, const void *vals, loom_ts *ts)
{
    if (!t || !ts || (n && (!keys || !vals))) return LOOM_EINVAL;
    int sorted, rc = check_keys(t, keys, n, &sorted);
    if (!rc) rc = pace_to_budget(t->client);
    return rc ? rc : push_rows_async(t, keys, n, sorted, vals, ts);
}

/* loom_push_async once its arguments were checked and the budget paid;
 * sorted: the keys ascend strictly (check_keys). */
static int push_rows_async(loom_table *t, const uint64_t *keys, size_t n, int sorted,
                           const void *vals, loom_ts *ts)
{
    int rc;
    sbuf *hold = NULL;
    const uint64_t *send_keys = keys;
    const uint8_t *send_vals = vals;
    size_t nsend = n;
    if (!sorted) {
        uint64_t *uniq;
        uint32_t *slot_of;
        if (keys_sort_unique(keys, n, &uniq, &nsend, &slot_of)) return LOOM_ENOMEM;
        hold = sbuf_new(nsend * 8 + nsend * t->row_bytes);
        if (!hold) {
            free(uniq);
            free(slot_of);
            return LOOM_ENOMEM;
        }
        memcpy(hold->data, uniq, nsend * 8);
        rows_gather(t->def.opts.type, t->def.opts.width, vals, slot_of, n, hold->data + nsend * 8,
                    nsend, !updater_coalesces_by_sum(&t->upd));
        free(uniq);
        free(slot_of);
        send_keys = (const uint64_t *)hold->data;
        send_vals = hold->data + nsend * 8;
    }
    pthread_mutex_lock(&t->mu);
    if (t->local_rmw && t->cache_on)
        for (size_t i = 0; i < nsend; i++) cache_add(t, send_keys[i], send_vals + i * t->row_bytes);
    rc = client_send_push(t, send_keys, 0, send_vals, nsend, hold, ts, 0, 0);
    pthread_mutex_unlock(&t->mu);
    sbuf_unref(hold);
    return rc;
}

int loom_push_range_async(loom_table *t, uint64_t begin, uint64_t end, const void *vals,
                          loom_ts *ts)
{
    if (!t || !ts || end < begin || (end > begin && !vals)) return LOOM_EINVAL;
    if (end > begin && (!key_in_table(t, begin) || !key_in_table(t, end - 1)))
        return LOOM_EKEYRANGE;
    if ((uint64_t)(end - begin) > SIZE_MAX / t->row_bytes) return LOOM_EINVAL;
    int rc = pace_to_budget(t->client);
    if (rc) return rc;
    size_t n = (size_t)(end - begin);
    pthread_mutex_lock(&t->mu);
    if (t->local_rmw && t->cache_on)
        for (size_t i = 0; i < n; i++)
            cache_add(t, begin + i, (const uint8_t *)vals + i * t->row_bytes);
    rc = client_send_push(t, NULL, begin, vals, n, NULL, ts, 0, 0);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* ---- rows given sparse (loom_push_sparse, loom_push_sparse_async) ---- */

/* Check a sparse push's arguments; *nnz: its values. */
static int check_sparse(const loom_table *t, const uint64_t *keys, size_t n,
                        const uint32_t *row_nnz, const uint32_t *cols, const void *vals,
                        size_t *nnz)
{
    if (n && (!keys || !row_nnz)) return LOOM_EINVAL;
    int rc = check_keys(t, keys, n, NULL);
    if (rc) return rc;
    uint32_t width = t->def.opts.width;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (row_nnz[i] > width) return LOOM_EINVAL;
        if (total > SIZE_MAX / t->row_bytes - row_nnz[i]) return LOOM_EINVAL;
        total += row_nnz[i];
    }
    if (total && (!cols || !vals)) return LOOM_EINVAL;
    const uint32_t *c = cols;
    for (size_t i = 0; i < n; c += row_nnz[i], i++)
        for (uint32_t e = 0; e < row_nnz[i]; e++)
            if (c[e] >= width || (e && c[e] <= c[e - 1])) return LOOM_EINVAL;
    *nnz = total;
    return 0;
}

/* Rows given sparse with ascending keys, in one buffer (loom_push_sparse_async):
 * row i's values are entries [off[i], off[i + 1]) of cols and vals. */
typedef struct sparse_rows {
    const uint64_t *keys, *off;
    const uint32_t *cols;
    const uint8_t *vals;
} sparse_rows;

/* Rows [lo, lo + cnt) of sp made dense, after their keys, in a new buffer. */
static sbuf *densify(const loom_table *t, const sparse_rows *sp, size_t lo, size_t cnt)
{
    size_t vs = loom_type_size(t->def.opts.type);
    sbuf *b = sbuf_new(cnt * 8 + cnt * t->row_bytes);
    if (!b) return NULL;
    memcpy(b->data, sp->keys + lo, cnt * 8);
    uint8_t *rows = b->data + cnt * 8;
    memset(rows, 0, cnt * t->row_bytes);
    for (size_t i = 0; i < cnt; i++)
        for (uint64_t e = sp->off[lo + i]; e < sp->off[lo + i + 1]; e++)
            memcpy(rows + i * t->row_bytes + sp->cols[e] * vs, sp->vals + e * vs, vs);
    return b;
}

/* One push of rows [lo, lo + cnt) of sp to server s: encoded from the sparse
 * rows as they are when the push chain takes them (no filter on values) and
 * it pays (as encode_push decides for dense rows), else made dense and sent as
 * push_chunk sends dense rows. hold owns sp. Lock held. */
static void push_chunk_sparse(loom_table *t, int s, const sparse_rows *sp, size_t lo, size_t cnt,
                              sbuf *hold, loom_ts ts)
{
    loom_type type = t->def.opts.type;
    size_t vs = loom_type_size(type), plain = cnt * 8 + cnt * t->row_bytes;
    int direct = filter_chain_takes_sparse(t->push_enc[s]);
    if (direct && !t->push_filtered) {
        size_t nnz = filter_sparse_nonzero(type, sp->vals + sp->off[lo] * vs,
                                           (size_t)(sp->off[lo + cnt] - sp->off[lo]));
        direct = t->push_spec.rows != FILTER_ROWS_DENSE &&
                 filter_sparse_pays_nnz(type, t->def.opts.width, cnt, nnz, plain);
    }
    if (!direct) {
        sbuf *b = densify(t, sp, lo, cnt);
        if (!b) {
            node_ts_done(t->node, ts, LOOM_ENOMEM);
            return;
        }
        push_chunk(t, s, (const uint64_t *)b->data, 0, b->data + cnt * 8, 0, cnt, b, ts, 0, 0);
        sbuf_unref(b);
        return;
    }
    filter_sparse rows = {sp->off + lo, sp->cols, sp->vals};
    uint8_t *enc;
    size_t enc_len = 0;
    int rc = filter_chain_encode_sparse(t->push_enc[s], sp->keys + lo, cnt, &rows, &enc, &enc_len);
    inflight *f = rc ? NULL : track_push(t, s, ts, 0, plain, enc_len);
    if (!f) {
        free(enc);
        node_ts_done(t->node, ts, rc ? rc : LOOM_ENOMEM);
        return;
    }
    if (t->client->replicas) {
        /* Sent again if its server dies (client_failover.c): as dense rows. */
        sbuf *b = densify(t, sp, lo, cnt);
        if (b) {
            f->keys = (const uint64_t *)b->data;
            f->vals = b->data + cnt * 8;
            f->n = cnt;
            f->hold = b;
        } else {
            log_error("out of memory: a push of table %u will not be sent again if its server dies",
                      t->id);
        }
    } else if (t->local_rmw) {
        f->keys = sp->keys + lo;
        f->n = cnt;
        f->sp_off = sp->off + lo;
        f->sp_cols = sp->cols;
        f->sp_vals = sp->vals;
        f->hold = sbuf_ref(hold);
    }
    send_encoded(t, s, f->seq, enc, enc_len);
}

/* client_send_push of n rows given sparse, keys ascending. Lock held. */
static int send_push_sparse(loom_table *t, const sparse_rows *sp, size_t n, sbuf *hold,
                            loom_ts *ts_out)
{
    size_t R = t->ring.nranges;
    size_t *bound = malloc((R + 1) * sizeof *bound);
    if (!bound) return LOOM_ENOMEM;
    range_bounds(t, sp->keys, 0, n, bound);
    unsigned nslices = 0;
    for (size_t rg = 0; rg < R; rg++) nslices += chunks(t, bound[rg + 1] - bound[rg]);
    loom_ts ts = node_ts_new(t->node, nslices ? nslices : 1);
    if (!ts) {
        free(bound);
        return LOOM_ENOMEM;
    }
    if (!nslices) node_ts_done(t->node, ts, 0);
    size_t max_rows = chunk_rows(t);
    for (size_t rg = 0; rg < R; rg++)
        for (size_t lo = bound[rg]; lo < bound[rg + 1]; lo += max_rows) {
            size_t cnt = bound[rg + 1] - lo < max_rows ? bound[rg + 1] - lo : max_rows;
            push_chunk_sparse(t, t->master[rg], sp, lo, cnt, hold, ts);
        }
    free(bound);
    *ts_out = ts;
    return 0;
}

int loom_push_sparse(loom_table *t, const uint64_t *keys, size_t n, const uint32_t *row_nnz,
                     const uint32_t *cols, const void *vals)
{
    if (!t) return LOOM_EINVAL;
    size_t nnz;
    int rc = check_sparse(t, keys, n, row_nnz, cols, vals, &nnz);
    if (rc) return rc;
    size_t vs = loom_type_size(t->def.opts.type);
    const uint8_t *v = vals;
    int sum = updater_coalesces_by_sum(&t->upd);
    pthread_mutex_lock(&t->mu);
    int was_empty = t->b_n == 0;
    for (size_t i = 0; i < n && !rc; i++) {
        int inserted;
        uint32_t slot;
        if ((rc = buffer_slot(t, keys[i], &slot, &inserted))) break;
        uint8_t *row = t->b_rows + (size_t)slot * t->row_bytes;
        if (inserted || !sum) {
            memset(row, 0, t->row_bytes);
            for (uint32_t e = 0; e < row_nnz[i]; e++) memcpy(row + cols[e] * vs, v + e * vs, vs);
        } else {
            row_add_sparse(t, row, cols, v, row_nnz[i]);
        }
        if (t->local_rmw) cache_add_sparse(t, keys[i], cols, v, row_nnz[i]);
        if (t->managed) buffer_magnitude(t, keys[i], slot);
        cols += row_nnz[i];
        v += row_nnz[i] * vs;
    }
    return buffered(t, rc, was_empty);
}

int loom_push_sparse_async(loom_table *t, const uint64_t *keys, size_t n, const uint32_t *row_nnz,
                           const uint32_t *cols, const void *vals, loom_ts *ts)
{
    if (!t || !ts) return LOOM_EINVAL;
    size_t nnz;
    int rc = check_sparse(t, keys, n, row_nnz, cols, vals, &nnz);
    if (!rc) rc = pace_to_budget(t->client);
    if (rc) return rc;
    size_t vs = loom_type_size(t->def.opts.type);
    if (!keys_sorted_unique(keys, n)) {
        /* Combined as loom_push_async combines rows, through dense ones. */
        uint8_t *dense = calloc(n, t->row_bytes);
        if (!dense) return LOOM_ENOMEM;
        const uint8_t *v = vals;
        for (size_t i = 0; i < n; cols += row_nnz[i], v += row_nnz[i] * vs, i++)
            for (uint32_t e = 0; e < row_nnz[i]; e++)
                memcpy(dense + i * t->row_bytes + cols[e] * vs, v + e * vs, vs);
        rc = push_rows_async(t, keys, n, 0, dense, ts); /* copies: keys are not sorted */
        free(dense);
        return rc;
    }
    /* One buffer: keys, offsets, values, columns (8-byte aligned first). */
    sbuf *hold = sbuf_new(n * 8 + (n + 1) * 8 + nnz * vs + nnz * 4);
    if (!hold) return LOOM_ENOMEM;
    uint64_t *k = (uint64_t *)hold->data, *off = k + n;
    uint8_t *v = (uint8_t *)(off + n + 1);
    uint32_t *c = (uint32_t *)(v + nnz * vs);
    if (n) memcpy(k, keys, n * 8);
    off[0] = 0;
    for (size_t i = 0; i < n; i++) off[i + 1] = off[i] + row_nnz[i];
    if (nnz) {
        memcpy(v, vals, nnz * vs);
        memcpy(c, cols, nnz * 4);
    }
    sparse_rows sp = {k, off, c, v};
    pthread_mutex_lock(&t->mu);
    if (t->local_rmw && t->cache_on)
        for (size_t i = 0; i < n; i++)
            cache_add_sparse(t, k[i], c + off[i], v + off[i] * vs, row_nnz[i]);
    rc = send_push_sparse(t, &sp, n, hold, ts);
    pthread_mutex_unlock(&t->mu);
    sbuf_unref(hold);
    return rc;
}

int loom_flush(loom_table *t, loom_ts *ts)
{
    if (!t) return LOOM_EINVAL;
    int rc = pace_to_budget(t->client);
    if (rc) return rc;
    pthread_mutex_lock(&t->mu);
    rc = flush_locked(t, ts, 1);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

static void on_push_ack(loom_node *n, void *ctx, node_msg *m)
{
    ps_client *c = ctx;
    loom_table *t = m->h.table < PS_MAX_TABLES ? atomic_load(&c->by_id[m->h.table]) : NULL;
    int rank;
    if (!t || node_peer_role(n, m->from, &rank) != LOOM_SERVER) {
        node_drop(n, m, "acknowledgement for an unknown table or from a non-server");
        return;
    }
    pthread_mutex_lock(&t->mu);
    inflight *f = t->ifl_head[rank];
    while (f && (f->acked || f->parked)) f = f->next; /* acks come in sending order */
    if (c->handbacks_seen && (!f || m->h.req < f->seq)) {
        /* Of a push a handback sent again to another server: that one's counts. */
        pthread_mutex_unlock(&t->mu);
        return;
    }
    if (!f || f->seq != m->h.req || m->h.b > m->h.req) {
        pthread_mutex_unlock(&t->mu);
        node_drop(n, m, "acknowledgement out of sequence");
        return;
    }
    f->acked = 1;
    int ts_done = f->ts_done;
    f->ts_done = 1;
    loom_ts ts = f->ts;
    int managed = f->managed;
    int status = m->h.a < LOOM_ERROR_COUNT_ ? (int)m->h.a : LOOM_EPROTO;
    /* The latest word, not the highest: a server says less while a push sent
     * again out of order is not on its replicas yet (server_push.c). */
    if (c->replicas) t->durable[rank] = (uint64_t)m->h.clock;
    uint64_t forget_upto = m->h.b; /* what client_prune_applied() frees now */
    if (c->replicas && t->durable[rank] < forget_upto) forget_upto = t->durable[rank];
    if (f->seq > forget_upto && keep_own_rows(t, f) && !status) status = LOOM_ENOMEM;
    client_prune_applied(t, rank, m->h.b);
    pthread_mutex_unlock(&t->mu);
    if (managed && !ts_done && comm_mgr_acked(&c->cm)) node_timer_poke(n, &ps_layer_def);
    if (!ts_done) node_ts_done(n, ts, status);
}

/* The push side's message: the acknowledgements. */
void client_push_attach(loom_node *n, ps_client *c)
{
    node_set_handler(n, MSG_PUSH_ACK, on_push_ack, c);
}
