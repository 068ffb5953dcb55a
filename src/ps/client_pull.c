/* client_pull: a worker's reads.
 *
 * Reads. A pull first looks in the process cache. A cached row is fresh
 * enough under SSP(s)/BSP if the server's min clock when it was fetched is at
 * least c - s (c = this worker's clock), under ASP if it was fetched during
 * clock c. Missing or stale rows are requested from their servers with "the
 * answer must reflect clock c - s"; servers hold the request until it can.
 *
 * Rows on the wire (docs/FILTERS.md). A pull asks, for the rows it holds in the
 * cache with a known version, only for what changed since (PULL_SINCE); the
 * server leaves out the rows that did not change, and the cached copy is used
 * for them. Only rows the worker has no own write pending for are offered this
 * way (for a "sum" table the cached copy holds those writes, which a fresh
 * answer would add in another order), so the result is bit for bit the same
 * as a full pull.
 * When the pull spec has keycache, lz4 or zstd, a pull's key list goes
 * through a per-server chain of key lists (MSG_F_KEYS_ENC: a digest for a list
 * sent before), encoded and sent under the table lock so the server decodes
 * the lists in that order; a server that does not hold a digest answers
 * LOOM_ENOTFOUND and the list goes again whole, once.
 *
 * A pull is one operation (pull_op) in parts, a part per range master and
 * frame; each part waits in a slot that its reply names (req = generation <<
 * 32 | slot). A reply fills its part's rows, adds the worker's own later
 * writes, caches them (deliver_rows); the last part scatters the rows to the
 * caller's layout and completes the timestamp. */
#include <string.h>

#include "ps/client_impl.h"
#include "ps/msg_types.h"

void client_pull_op_free(pull_op *op)
{
    if (op->miss_keys != op->uniq && op->miss_keys != op->uniq_owned) free(op->miss_keys);
    if (op->rows != op->out) free(op->rows);
    free(op->uniq_owned);
    free(op->slot_of);
    free(op->miss);
    free(op->held);
    free(op);
}

/* Last part of a pull done: copy rows to the caller's layout, complete. */
static void pull_finish(pull_op *op)
{
    if (op->slot_of)
        rows_scatter(op->t->def.opts.type, op->t->def.opts.width, op->rows, op->slot_of, op->n,
                     op->out);
    loom_node *n = op->t->node;
    loom_ts ts = op->ts;
    int status = atomic_load(&op->status);
    client_pull_op_free(op);
    node_ts_done(n, ts, status);
}

static void pull_part_done(pull_op *op, int status)
{
    if (status) {
        int expected = 0;
        atomic_compare_exchange_strong(&op->status, &expected, status);
    }
    if (atomic_fetch_sub(&op->parts_left, 1) == 1) pull_finish(op);
}

/* slot_alloc's answer for a server whose pulls were moved: route again. */
#define SLOT_REDIRECTED UINT64_MAX

static uint64_t slot_alloc(ps_client *c, pull_op *op, size_t first, size_t count, int server,
                           int resent, int refused)
{
    pthread_mutex_lock(&c->mu);
    if (c->redirected[server]) {
        pthread_mutex_unlock(&c->mu);
        return SLOT_REDIRECTED;
    }
    if (c->free_head == NO_SLOT) {
        uint32_t cap = c->nslots ? 2 * c->nslots : 256;
        pull_slot *ns = realloc(c->slots, cap * sizeof *ns);
        if (!ns) {
            pthread_mutex_unlock(&c->mu);
            return 0;
        }
        c->slots = ns;
        for (uint32_t i = cap; i-- > c->nslots;) {
            ns[i] = (pull_slot){.next_free = c->free_head};
            c->free_head = i;
        }
        c->nslots = cap;
    }
    uint32_t i = c->free_head;
    pull_slot *s = &c->slots[i];
    c->free_head = s->next_free;
    c->gen++;
    s->req = (uint64_t)(c->gen ? c->gen : ++c->gen) << 32 | i;
    s->op = op;
    s->first = first;
    s->count = count;
    s->server = server;
    s->resent = resent;
    s->refused = refused;
    s->since = node_now_ms();
    uint64_t req = s->req;
    pthread_mutex_unlock(&c->mu);
    return req;
}

/* Take the slot for req, if it is live and belongs to server `server`. */
int client_slot_take(ps_client *c, uint64_t req, int server, pull_slot *out)
{
    uint32_t i = (uint32_t)req;
    pthread_mutex_lock(&c->mu);
    int ok = i < c->nslots && c->slots[i].req == req && req && c->slots[i].server == server;
    if (ok) {
        *out = c->slots[i];
        c->slots[i] = (pull_slot){.next_free = c->free_head};
        c->free_head = i;
    }
    pthread_mutex_unlock(&c->mu);
    return ok;
}

/* Rows [s->first, s->first + s->count) of op are in op->rows as server
 * `rank` answered (its answer included our pushes up to `applied`, reflects
 * `clock`, and its rows' versions are at most `version`): add own writes the
 * answer lacks and cache them. Lock held. */
static void deliver_rows(loom_table *t, pull_op *op, const pull_slot *s, int rank, uint64_t applied,
                         int64_t clock, uint64_t version)
{
    size_t rb = t->row_bytes;
    int rmw = t->local_rmw && own_writes_pending(t, rank, applied);
    int cache = t->cache_on && op->uniq;
    for (size_t j = 0; (rmw || cache) && j < s->count; j++) {
        size_t u = op->miss ? op->miss[s->first + j] : s->first + j;
        uint64_t key = op->uniq ? op->uniq[u] : op->begin + u;
        uint8_t *row = op->rows + u * rb;
        if (rmw) client_add_own_writes(t, rank, applied, key, row);
        if (cache) client_cache_put(t, key, row, clock, op->fetch_clock, version);
    }
    client_prune_applied(t, rank, applied);
}

/* The server of a reply and the pull part it answers; 0 if it answers none. */
static int take_reply(ps_client *c, loom_node *n, node_msg *m, int *rank, pull_slot *s)
{
    if (node_peer_role(n, m->from, rank) != LOOM_SERVER) {
        node_drop(n, m, "reply from a non-server");
        return 0;
    }
    if (!client_slot_take(c, m->h.req, *rank, s)) {
        /* After a handback, a reply the old master sent before its fence may
         * come after the pull was asked again of the new one. */
        if (!c->handbacks_seen) node_drop(n, m, "reply to no pending pull");
        return 0;
    }
    return 1;
}

/* The server did not hold the digest of a pull's key list (it forgot it, or
 * the list never reached it): forget it here too and send the list whole,
 * once. Whether the reply was such a miss. */
static int resend_missed_keys(loom_table *t, pull_op *op, const pull_slot *s, int status)
{
    if (status != LOOM_ENOTFOUND || !t->keys_enc || !op->uniq || s->resent) return 0;
    const uint64_t *keys = op->miss_keys + s->first;
    pthread_mutex_lock(&t->mu);
    filter_chain_forget_keys(t->keys_enc[s->server], filter_keys_digest(keys, s->count));
    pthread_mutex_unlock(&t->mu);
    client_send_pull(op, s->server, s->first, s->count, required_clock(t, op->fetch_clock), 1);
    return 1;
}

/* The master now of the range of the pull part starting at `first`. */
int client_pull_master(pull_op *op, size_t first)
{
    loom_table *t = op->t;
    uint64_t key = op->uniq ? op->miss_keys[first] : op->begin + first;
    pthread_mutex_lock(&t->mu);
    int s = server_of(t, key);
    pthread_mutex_unlock(&t->mu);
    return s;
}

/* The server no longer serves the range (LOOM_ESTATE: a handback moved it
 * away): ask its master now, or, if this worker takes that server for the
 * master still, let the pull wait as if still asked of it. Either this
 * worker has not heard of the handback yet, which then asks the new master;
 * or it heard of a death that makes that server master again before the
 * server did, which then reopens the range and says so (PARKED req 0, as
 * it refused a pull of ours). Whether the reply was such a refusal. */
static int reroute_pull(ps_client *c, pull_op *op, const pull_slot *s, int status)
{
    if (status != LOOM_ESTATE) return 0;
    loom_table *t = op->t;
    int to = client_pull_master(op, s->first);
    if (to != s->server) {
        client_send_pull(op, to, s->first, s->count, required_clock(t, op->fetch_clock), s->resent);
        return 1;
    }
    uint64_t req = slot_alloc(c, op, s->first, s->count, to, s->resent, 1);
    if (!req || req == SLOT_REDIRECTED) pull_part_done(op, req ? LOOM_EPEERFAIL : LOOM_ENOMEM);
    return 1;
}

static void on_pull_reply(loom_node *n, void *ctx, node_msg *m)
{
    int rank;
    pull_slot s;
    if (!take_reply(ctx, n, m, &rank, &s)) return;
    pull_op *op = s.op;
    loom_table *t = op->t;
    int status = m->h.b < LOOM_ERROR_COUNT_ ? (int)m->h.b : LOOM_EPROTO;
    if (resend_missed_keys(t, op, &s, status) || reroute_pull(ctx, op, &s, status)) return;
    if (!status && (m->nframes != 1 || node_frame_size(m, 0) != s.count * t->row_bytes)) {
        node_drop(n, m, "reply size does not match the request");
        status = LOOM_EPROTO;
    }
    if (!status) {
        const uint8_t *src = node_frame_data(m, 0);
        size_t rb = t->row_bytes;
        pthread_mutex_lock(&t->mu);
        if (!op->miss) { /* the rows asked for are contiguous in the answer and in rows */
            memcpy(op->rows + s.first * rb, src, s.count * rb);
        } else {
            for (size_t j = 0; j < s.count; j++)
                memcpy(op->rows + op->miss[s.first + j] * rb, src + j * rb, rb);
        }
        count_wire(t, LOOM_DIR_PULL, s.count * rb, s.count * rb);
        deliver_rows(t, op, &s, rank, m->h.a, m->h.clock, 0);
        pthread_mutex_unlock(&t->mu);
        atomic_fetch_add(&((ps_client *)ctx)->counters->pulls_from_server, s.count);
    }
    pull_part_done(op, status);
}

static int held_bit(const uint8_t *held, size_t i)
{
    return held && (held[i / 8] >> (i % 8) & 1);
}

/* Place a decoded reply's rows (ascending keys, a subset of the part's) into
 * op->rows. Every row left out must be one the request offered as held: its
 * cached copy is in op->rows already. 0, or -1 if the reply does not fit the
 * request. Lock held. */
static int place_reply_rows(loom_table *t, pull_op *op, const pull_slot *s, const uint64_t *keys,
                            const uint8_t *vals, size_t nrows)
{
    size_t rb = t->row_bytes, j = 0;
    for (size_t r = 0; r < s->count; r++) {
        size_t u = op->miss ? op->miss[s->first + r] : s->first + r;
        uint64_t key = op->uniq ? op->uniq[u] : op->begin + u;
        if (j < nrows && keys[j] == key) {
            memcpy(op->rows + u * rb, vals + j * rb, rb);
            j++;
        } else if (held_bit(op->held, s->first + r)) {
            t->wire[LOOM_DIR_PULL].unchanged++;
        } else {
            return -1;
        }
    }
    return j == nrows ? 0 : -1;
}

/* A reply encoded by the server's pull chain, without the rows that did not
 * change since the version the request named. */
static void on_pull_reply_enc(loom_node *n, void *ctx, node_msg *m)
{
    int rank;
    pull_slot s;
    if (!take_reply(ctx, n, m, &rank, &s)) return;
    pull_op *op = s.op;
    loom_table *t = op->t;
    int status = m->h.b < LOOM_ERROR_COUNT_ ? (int)m->h.b : LOOM_EPROTO;
    if (!status && (m->nframes != 2 || node_frame_size(m, 0) != 8)) {
        node_drop(n, m, "reply frames do not match its type");
        status = LOOM_EPROTO;
    }
    if (!status) {
        uint64_t version = msg_load_u64(node_frame_data(m, 0)), *keys, digest;
        void *vals;
        size_t nrows;
        pthread_mutex_lock(&t->mu);
        int rc = filter_chain_decode(t->pull_dec[rank], node_frame_data(m, 1),
                                     node_frame_size(m, 1), s.count, &keys, &vals, &nrows, &digest);
        if (!rc && place_reply_rows(t, op, &s, keys, vals, nrows)) rc = LOOM_EPROTO;
        if (rc) {
            t->wire[LOOM_DIR_PULL].dropped++;
        } else {
            count_wire(t, LOOM_DIR_PULL, s.count * t->row_bytes, 8 + node_frame_size(m, 1));
            deliver_rows(t, op, &s, rank, m->h.a, m->h.clock, version);
        }
        pthread_mutex_unlock(&t->mu);
        free(keys);
        free(vals);
        if (rc) {
            node_drop(n, m, "pull reply refused: malformed, or not what was asked");
            status = rc == LOOM_ENOMEM ? rc : LOOM_EPROTO;
        } else {
            atomic_fetch_add(&((ps_client *)ctx)->counters->pulls_from_server, s.count);
        }
    }
    pull_part_done(op, status);
}

/* Request op->miss_keys[first, first+count) (or a range) from server s;
 * resent: the second time, after the server missed the list's digest. */
void client_send_pull(pull_op *op, int s, size_t first, size_t count, int64_t required, int resent)
{
    loom_table *t = op->t;
    uint64_t req = slot_alloc(t->client, op, first, count, s, resent, 0);
    /* Routed before a failover moved the dead server's pulls (ps_client_resend
     * switched the masters first): ask the range's master now. */
    for (int tries = 0; req == SLOT_REDIRECTED && tries < server_count(t); tries++)
        req = slot_alloc(t->client, op, first, count, client_pull_master(op, first), resent, 0);
    if (req == SLOT_REDIRECTED) {
        pull_part_done(op, LOOM_EPEERFAIL);
        return;
    }
    if (!req) {
        pull_part_done(op, LOOM_ENOMEM);
        return;
    }
    msg_header h = {.type = MSG_PULL, .table = t->id, .req = req, .clock = required};
    node_frame f[2] = {{0}};
    size_t nf = 0;
    uint8_t *held = NULL;
    for (size_t i = 0; op->held && !held && i < count; i++)
        if (held_bit(op->held, first + i)) held = calloc((count + 7) / 8, 1);
    if (held) { /* only what changed since the rows held */
        for (size_t i = 0; i < count; i++)
            if (held_bit(op->held, first + i)) held[i / 8] |= (uint8_t)(1u << (i % 8));
        h.type = MSG_PULL_SINCE;
        h.a = op->since;
    }
    size_t held_len = held ? (count + 7) / 8 : 0;
    uint32_t dest = node_server_id(server_count(t), s);
    int rc;
    if (op->uniq && t->keys_enc) {
        /* The key list through the chain (a digest when sent before): encoded
         * and sent under the table lock, so the server decodes the lists in
         * the order their chain encoded them and both key caches stay alike. */
        filter_msg fm = {.keys = op->miss_keys + first, .n = count};
        uint8_t *enc;
        size_t enc_len;
        pthread_mutex_lock(&t->mu);
        rc = filter_chain_encode(t->keys_enc[s], &fm, &enc, &enc_len);
        if (!rc) {
            h.flags = MSG_F_KEYS_ENC;
            f[nf++] = (node_frame){enc, enc_len, free_data, NULL, 0};
            if (held) f[nf++] = (node_frame){held, held_len, NULL, NULL, 1};
            count_wire(t, LOOM_DIR_PULL, count * 8, enc_len + held_len);
            rc = node_send(t->node, dest, &h, f, nf);
        }
        pthread_mutex_unlock(&t->mu);
    } else {
        if (op->uniq) {
            f[nf++] = (node_frame){op->miss_keys + first, count * 8, NULL, NULL, 0};
            if (held) f[nf++] = (node_frame){held, held_len, NULL, NULL, 1};
            pthread_mutex_lock(&t->mu);
            count_wire(t, LOOM_DIR_PULL, count * 8, count * 8 + held_len);
            pthread_mutex_unlock(&t->mu);
        } else {
            h.flags = MSG_F_RANGE;
            h.a = op->begin + first;
            h.b = op->begin + first + count;
        }
        rc = node_send(t->node, dest, &h, f, nf);
    }
    free(held);
    if (rc) {
        pull_slot dummy;
        if (client_slot_take(t->client, req, s, &dummy)) pull_part_done(op, rc);
    }
}

/* Split the misses by server and send; the op completes on the last reply. */
static void request_misses(pull_op *op, size_t total)
{
    loom_table *t = op->t;
    int64_t required = required_clock(t, op->fetch_clock);
    size_t R = t->ring.nranges;
    size_t *bound = malloc((R + 1) * sizeof *bound);
    int *master = malloc(R * sizeof *master);
    if (!bound || !master) {
        free(bound);
        free(master);
        atomic_store(&op->parts_left, 1);
        pull_part_done(op, LOOM_ENOMEM);
        return;
    }
    pthread_mutex_lock(&t->mu); /* a failover may move ranges meanwhile */
    memcpy(master, t->master, R * sizeof *master);
    pthread_mutex_unlock(&t->mu);
    range_bounds(t, op->uniq ? op->miss_keys : NULL, op->begin, total, bound);
    unsigned parts = 0;
    for (size_t rg = 0; rg < R; rg++) parts += chunks(t, bound[rg + 1] - bound[rg]);
    /* +1 so that a fast reply cannot finish the op while we still send. */
    atomic_store(&op->parts_left, parts + 1);
    size_t max_rows = chunk_rows(t);
    for (size_t rg = 0; rg < R; rg++) {
        int s = master[rg];
        for (size_t lo = bound[rg]; lo < bound[rg + 1]; lo += max_rows)
            client_send_pull(op, s, lo,
                             bound[rg + 1] - lo < max_rows ? bound[rg + 1] - lo : max_rows,
                             required, 0);
    }
    free(bound);
    free(master);
    pull_part_done(op, 0);
}

static int start_pull(loom_table *t, const uint64_t *keys, size_t n, void *out, loom_ts *ts)
{
    if (!t || !ts || (n && (!keys || !out))) return LOOM_EINVAL;
    int sorted, rc = check_keys(t, keys, n, &sorted);
    if (rc) return rc;
    pull_op *op = calloc(1, sizeof *op);
    if (!op) return LOOM_ENOMEM;
    op->t = t;
    op->out = out;
    op->n = n;
    op->fetch_clock = atomic_load(&t->client->clock);
    if (sorted) {
        op->uniq = keys;
        op->nuniq = n;
        op->rows = out;
    } else {
        if (keys_sort_unique(keys, n, &op->uniq_owned, &op->nuniq, &op->slot_of)) goto nomem;
        op->uniq = op->uniq_owned;
        op->rows = malloc(op->nuniq * t->row_bytes);
        if (!op->rows) goto nomem;
    }
    if (t->cache_on) { /* which rows the cache could not serve */
        op->miss = malloc((op->nuniq ? op->nuniq : 1) * sizeof *op->miss);
        if (!op->miss) goto nomem;
    }
    op->ts = node_ts_new(t->node, 1);
    if (!op->ts) goto nomem;
    *ts = op->ts;

    uint64_t hits = 0;
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; t->cache_on && i < op->nuniq; i++) {
        uint32_t slot;
        int cached = u64map_get(&t->cache_idx, op->uniq[i], &slot);
        const uint8_t *row = cached ? t->c_rows + (size_t)slot * t->row_bytes : NULL;
        if (cached && cache_fresh(t, slot, op->fetch_clock)) {
            memcpy(op->rows + i * t->row_bytes, row, t->row_bytes);
            hits++;
            continue;
        }
        /* A stale row of known version: offer it as held, its copy ready in
         * rows in case the server says it did not change. */
        if (cached && t->c_version[slot] && !t->pull_dense &&
            !own_write_to(t, server_of(t, op->uniq[i]), op->uniq[i]) &&
            (op->held || (op->held = calloc(op->nuniq / 8 + 1, 1)))) {
            op->held[op->nmiss / 8] |= (uint8_t)(1u << (op->nmiss % 8));
            if (!op->since || t->c_version[slot] < op->since) op->since = t->c_version[slot];
            memcpy(op->rows + i * t->row_bytes, row, t->row_bytes);
        }
        op->miss[op->nmiss++] = (uint32_t)i;
    }
    pthread_mutex_unlock(&t->mu);
    if (hits) atomic_fetch_add(&t->client->counters->pulls_from_cache, hits);

    if (!t->cache_on) op->nmiss = op->nuniq;
    if (op->nmiss == op->nuniq) {
        /* Every row is fetched: the keys are the request, rows map one to one. */
        op->miss_keys = (uint64_t *)op->uniq;
        free(op->miss);
        op->miss = NULL;
    } else if (op->nmiss) {
        op->miss_keys = malloc(op->nmiss * 8);
        if (!op->miss_keys) {
            node_ts_done(t->node, op->ts, LOOM_ENOMEM);
            client_pull_op_free(op);
            return 0;
        }
        for (size_t j = 0; j < op->nmiss; j++) op->miss_keys[j] = op->uniq[op->miss[j]];
    }
    if (!op->nmiss) {
        pull_finish(op);
        return 0;
    }
    request_misses(op, op->nmiss);
    return 0;
nomem:
    client_pull_op_free(op);
    return LOOM_ENOMEM;
}

int loom_pull_async(loom_table *t, const uint64_t *keys, size_t n, void *out, loom_ts *ts)
{
    return start_pull(t, keys, n, out, ts);
}

int loom_pull(loom_table *t, const uint64_t *keys, size_t n, void *out)
{
    loom_ts ts;
    int rc = start_pull(t, keys, n, out, &ts);
    return rc ? rc : loom_wait(t ? t->node : NULL, ts);
}

int loom_pull_range_async(loom_table *t, uint64_t begin, uint64_t end, void *out, loom_ts *ts)
{
    if (!t || !ts || end < begin || (end > begin && !out)) return LOOM_EINVAL;
    if (end > begin && (!key_in_table(t, begin) || !key_in_table(t, end - 1)))
        return LOOM_EKEYRANGE;
    pull_op *op = calloc(1, sizeof *op);
    if (!op) return LOOM_ENOMEM;
    op->t = t;
    op->out = out;
    op->rows = out;
    op->begin = begin;
    op->nuniq = (size_t)(end - begin);
    op->fetch_clock = atomic_load(&t->client->clock);
    op->ts = node_ts_new(t->node, 1);
    if (!op->ts) {
        free(op);
        return LOOM_ENOMEM;
    }
    *ts = op->ts;
    if (!op->nuniq) {
        pull_finish(op);
        return 0;
    }
    request_misses(op, op->nuniq);
    return 0;
}

int loom_pull_range(loom_table *t, uint64_t begin, uint64_t end, void *out)
{
    loom_ts ts;
    int rc = loom_pull_range_async(t, begin, end, out, &ts);
    return rc ? rc : loom_wait(t->node, ts);
}

/* The pull side's messages: the replies, plain or through the pull chain. */
void client_pull_attach(loom_node *n, ps_client *c)
{
    node_set_handler(n, MSG_PULL_REPLY, on_pull_reply, c);
    node_set_handler(n, MSG_PULL_REPLY_ENC, on_pull_reply_enc, c);
}
