/* server_push: a worker's updates reaching the model.
 *
 * A push names keys (or a range) of one part of a table. It is checked
 * against the part, then applied at once, in arrival order, through the
 * table's updater (srv_apply_rows: the row versions advance, a managed table
 * notes what changed), unless its clock says to wait (a BSP push until its
 * clock ends everywhere, any other past a checkpoint's cut until the cut is
 * written: server_clock.c) or its range is being handed back (parked:
 * server_park.c). The acknowledgement echoes the push's sequence number
 * and says the last one applied from that worker; with replicas it waits for
 * the replication round that carries the push's rows (src/ft/replica.c).
 *
 * Rows on the wire (docs/FILTERS.md). A keyed push may come encoded by the
 * table's push filter chain (PUSH_ENC: filters, sparse rows); the server
 * decodes it with its chain for that worker and applies it like any push. */
#include <stdint.h>
#include <stdlib.h>

#include "loom/error.h"
#include "ps/msg_types.h"
#include "ps/rowops.h"
#include "ps/server_impl.h"

/* What push number `seq` of worker w to part p does before its rows are
 * added (keys, or the range from `begin` when keys is NULL; vals, dense, only
 * for a managed table's notes). Sets *add when they are to be added. */
static int apply_begin(server *s, srv_table *t, srv_part *p, const uint64_t *keys, uint64_t begin,
                       const uint8_t *vals, uint64_t count, int w, uint64_t seq, int *add)
{
    *add = 0;
    /* A push sent again after a failover whose rows this range already holds
     * (its replica got them from the dead master): applied once, not twice.
     * Otherwise a worker's pushes reach a range in sequence order (without
     * replicas nothing is sent again, and nothing is checked). */
    if (s->replicas && count && seq <= p->applied[w]) {
        s->duplicates++;
        return 0;
    }
    if (!s->replicas || seq > t->applied[w]) t->applied[w] = seq; /* a resent one may be older */
    t->version++;
    if (!count) return 0; /* an empty push (a flush releasing what a filter held) */
    p->applied[w] = seq;
    if (s->replicas) /* a round is due (src/ft) */
        s->repl.pushed(s->repl.ctx, t->id, (size_t)(p - t->parts), count * (8 + t->row_bytes));
    if (t->rows) srv_note_changes(s, t, p, keys, begin, vals, (size_t)count);
    int status = 0;
    for (uint64_t i = 0; i < count && !status && t->ver_tracked; i++)
        status = srv_mark_changed(t, p, keys ? keys[i] : begin + i);
    *add = !status;
    return status;
}

/* Apply validated delta rows of part p (keys, or the range from `begin` when
 * keys is NULL) through the table's updater, as push number `seq` of worker w. */
int srv_apply_rows(server *s, srv_table *t, srv_part *p, const uint64_t *keys, uint64_t begin,
                   const uint8_t *vals, uint64_t count, int w, uint64_t seq)
{
    int add, status = apply_begin(s, t, p, keys, begin, vals, count, w, seq, &add);
    if (!add) return status;
    const loom_table_opts *o = &t->def.opts;
    uint8_t *dense = store_dense_rows(p->store);
    if (dense && t->upd.kind == UPD_SUM) {
        /* The common case as one tight loop over the message. */
        if (keys) {
            rows_add_indexed(o->type, o->width, dense, p->lo, keys, (size_t)count, vals);
            store_mark_changed(p->store, keys, (size_t)count);
        } else {
            rows_add(o->type, dense + (size_t)(begin - p->lo) * t->row_bytes, vals,
                     (size_t)count * o->width);
            store_mark_changed_range(p->store, begin, begin + count);
        }
        return 0;
    }
    for (uint64_t i = 0; i < count; i++) {
        uint64_t key = keys ? keys[i] : begin + i;
        void *state;
        void *row = store_row(p->store, key, &state);
        if (!row) {
            status = LOOM_ENOMEM;
            break;
        }
        updater_apply(&t->upd, o, o->type, o->width, key, row, state, vals + i * t->row_bytes);
    }
    return status;
}

/* Apply validated rows that the push's decode left sparse
 * (filter_chain_decode_sparse). A dense table that sums adds their values
 * alone: LDA's changes of a clock are a few counts in each row of 16-64
 * topics, and their dense rows, as large as the rows they touch, cost a
 * second pass over memory as large as the table's part. Other tables take the
 * dense rows through srv_apply_rows. */
static int apply_sparse(server *s, srv_table *t, srv_part *p, const uint64_t *keys,
                        const filter_sparse *rows, uint64_t count, int w, uint64_t seq)
{
    uint8_t *dense = store_dense_rows(p->store);
    if (!dense || t->upd.kind != UPD_SUM || t->rows) {
        uint8_t *vals = filter_sparse_dense(t->push_dec[w], rows, (size_t)count);
        if (!vals) return LOOM_ENOMEM;
        int status = srv_apply_rows(s, t, p, keys, 0, vals, count, w, seq);
        free(vals);
        return status;
    }
    int add, status = apply_begin(s, t, p, keys, 0, NULL, count, w, seq, &add);
    if (!add) return status;
    rows_add_sparse(t->def.opts.type, t->def.opts.width, dense, p->lo, keys, (size_t)count,
                    rows->off, rows->cols, rows->vals);
    store_mark_changed(p->store, keys, (size_t)count);
    return 0;
}

/* Apply a validated plain push to part p. */
int srv_apply_push(server *s, srv_table *t, srv_part *p, node_msg *m, int w)
{
    int range = (m->h.flags & MSG_F_RANGE) != 0;
    const uint64_t *keys = range ? NULL : srv_aligned_payload(s, m, 0, 0);
    const uint8_t *vals = srv_aligned_payload(s, m, range ? 0 : 1, 1);
    if ((!range && !keys) || !vals) return LOOM_ENOMEM;
    uint64_t count = node_frame_size(m, range ? 0 : 1) / t->row_bytes;
    return srv_apply_rows(s, t, p, keys, m->h.a, vals, count, w, m->h.req);
}

/* A new entry at the tail of a staged or held list. */
static staged *enqueue(staged **head, staged **tail, int w, size_t part)
{
    staged *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->worker = w;
    st->part = part;
    if (*tail)
        (*tail)->next = st;
    else
        *head = st;
    *tail = st;
    return st;
}

/* What an acknowledgement of push `req` says was applied from worker w: a
 * push sent again after a failover may be older than others applied here. */
/* What an acknowledgement tells worker w its replicas hold: `durable`, per
 * worker the highest sequence of a completed round, reads "every push up to
 * it" only while a worker's pushes reach this server in sequence order. A
 * push sent again after a later one was applied (a parked one after PARKED
 * req 0 or a commit) breaks that; until a round cut after it completes, what
 * is said stays below it, and the worker keeps it to send again. Without
 * this a worker forgot such a push under BSP (acknowledged on arrival, with
 * the last round's durable) before any round carried it, and lost it with
 * this server (unit.test_handback_steps bsp_resent_out_of_order). */
static uint64_t durable_said(const srv_table *t, int w)
{
    uint64_t d = t->durable[w];
    return t->hole[w] && t->hole[w] - 1 < d ? t->hole[w] - 1 : d;
}

static uint64_t applied_upto(server *s, srv_table *t, int w, uint64_t req)
{
    return s->replicas && t->applied[w] > req ? req : t->applied[w];
}

/* A push of worker w, sequence seq, taken (applied, staged or held): one
 * older than a push of the worker applied here is a hole in what `durable`
 * says (durable_said) until a round carries it. */
static void note_out_of_order(server *s, srv_table *t, int w, uint64_t seq)
{
    if (!s->replicas || w < 0 || seq > t->applied[w]) return;
    if (!t->hole[w] || seq < t->hole[w]) t->hole[w] = seq;
    t->hole_round[w] = 0;
}

void srv_ack_now(server *s, srv_table *t, uint32_t to, uint32_t table, uint64_t req, int status,
                 uint64_t applied)
{
    int w = srv_worker_rank(s, to);
    msg_header h = {.type = MSG_PUSH_ACK,
                    .table = table,
                    .req = req,
                    .clock = s->replicas && w >= 0 ? (int64_t)durable_said(t, w) : 0,
                    .a = (uint64_t)status,
                    .b = applied};
    node_send(s->node, to, &h, NULL, 0);
}

/* Acknowledge a push. With replicas, a push applied at once (every table but
 * BSP ones) is acknowledged only after the replication round that carries its
 * rows (so an acknowledged push survives this server); acknowledgements keep
 * their order, so every one of such a table waits its turn. A BSP push is
 * acknowledged on arrival, as staged: its worker keeps it until an
 * acknowledgement says the replicas hold it (h.clock). */
void srv_send_push_ack(server *s, srv_table *t, node_msg *m, int w, int status)
{
    if (s->replicas && t->def.opts.consistency != LOOM_BSP) {
        if (s->repl.hold_ack(s->repl.ctx, m->from, m->h.table, m->h.req,
                             applied_upto(s, t, w, m->h.req), status))
            return;
        status = status ? status : LOOM_ENOMEM; /* said at once rather than never */
    }
    srv_ack_now(s, t, m->from, m->h.table, m->h.req, status, applied_upto(s, t, w, m->h.req));
}

void srv_on_push(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    srv_table *t = srv_table_of(s, m->h.table);
    int w = srv_worker_rank(s, m->from);
    int range = (m->h.flags & MSG_F_RANGE) != 0;
    const char *refused = srv_request_refusal(s, t, m->from, m->nframes, range ? 1u : 2u);
    if (refused) {
        node_drop(n, m, refused);
        return;
    }
    const uint64_t *keys;
    uint64_t count;
    srv_part *p;
    const char *bad = srv_check_keys(s, t, m, 0, &keys, &count, &p);
    if (!bad && (count > SIZE_MAX / t->row_bytes ||
                 node_frame_size(m, range ? 0 : 1) != count * t->row_bytes))
        bad = "value frame size does not match the keys";
    if (bad) {
        node_drop(n, m, bad);
        return;
    }
    size_t part = (size_t)(p - t->parts);
    if (srv_must_park(s, p, w, m->h.table, part, m->h.req)) {
        srv_park_push(s, m->from, w, m->h.table, part, m->h.req);
        return;
    }
    note_out_of_order(s, t, w, m->h.req);
    int status = 0;
    int hold = srv_must_hold(s, t, m->h.clock);
    if (hold || srv_must_stage(s, t, m->h.clock)) {
        staged *st = hold ? enqueue(&t->held_head, &t->held_tail, w, part)
                          : enqueue(&t->staged_head, &t->staged_tail, w, part);
        if (!st) {
            status = LOOM_ENOMEM;
        } else {
            node_msg_keep(&st->m, m);
            if (hold) return; /* acknowledged once applied, after the cut */
        }
    } else {
        status = srv_apply_push(s, t, p, m, w);
        srv_note_applied(s, m->h.clock);
    }
    srv_send_push_ack(s, t, m, w, status);
}

/* A push encoded by the worker's push chain: decoded by this server's chain
 * for that worker (every one, in order, so that the key caches stay alike),
 * checked like a plain push, then applied or staged. A message the chain
 * refuses is dropped and counted, and its acknowledgement carries the error,
 * so that the worker's push fails instead of waiting. */
void srv_on_push_enc(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    srv_table *t = srv_table_of(s, m->h.table);
    int w = srv_worker_rank(s, m->from);
    const char *refused = srv_request_refusal(s, t, m->from, m->nframes, 1);
    if (!refused && (m->h.flags & MSG_F_RANGE)) refused = "an encoded push of a key range";
    if (refused) {
        node_drop(n, m, refused);
        return;
    }
    int hold = 0;
    uint64_t *keys, digest;
    void *vals, *sparse_buf;
    filter_sparse sparse;
    size_t count;
    int status = filter_chain_decode_sparse(t->push_dec[w], node_frame_data(m, 0),
                                            node_frame_size(m, 0), t->held_rows, &keys, &vals,
                                            &sparse, &sparse_buf, &count, &digest);
    const char *bad = status ? "filtered push refused by its filter chain" : NULL;
    srv_part *p = NULL;
    if (!bad && count) bad = srv_check_part(t, keys, 0, count, &p);
    if (bad) {
        node_drop(n, m, bad);
        if (!status) status = LOOM_EPROTO;
    } else if (p && srv_must_park(s, p, w, m->h.table, (size_t)(p - t->parts), m->h.req)) {
        srv_park_push(s, m->from, w, m->h.table, (size_t)(p - t->parts), m->h.req);
        free(keys);
        free(vals);
        free(sparse_buf);
        return;
    } else if ((hold = srv_must_hold(s, t, m->h.clock)) || srv_must_stage(s, t, m->h.clock)) {
        note_out_of_order(s, t, w, m->h.req);
        size_t part = p ? (size_t)(p - t->parts) : 0; /* an empty push touches no part */
        if (sparse_buf) /* kept as dense rows, as every staged push is */
            vals = filter_sparse_dense(t->push_dec[w], &sparse, count);
        staged *st = sparse_buf && !vals ? NULL
                     : hold              ? enqueue(&t->held_head, &t->held_tail, w, part)
                                         : enqueue(&t->staged_head, &t->staged_tail, w, part);
        if (st) {
            st->keys = keys;
            st->vals = vals;
            st->n = count;
            st->m.h = m->h;       /* its clock and sequence number */
            st->m.from = m->from; /* whom a held push is acknowledged to */
            free(sparse_buf);
            if (hold) return; /* acknowledged once applied, after the cut */
            keys = NULL;
            vals = NULL;
            sparse_buf = NULL;
        } else {
            status = LOOM_ENOMEM;
        }
    } else {
        note_out_of_order(s, t, w, m->h.req);
        status = sparse_buf ? apply_sparse(s, t, p, keys, &sparse, count, w, m->h.req)
                            : srv_apply_rows(s, t, p, keys, 0, vals, count, w, m->h.req);
        srv_note_applied(s, m->h.clock);
    }
    free(keys);
    free(vals);
    free(sparse_buf);
    srv_send_push_ack(s, t, m, w, status);
}
