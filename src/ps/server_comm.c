/* server_comm: managed communication on a server (comm.c, after Bösen).
 *
 * Pull replies are charged to the process's budget; tables with a priority
 * (SSP, ASP) remember which workers pulled each row and how much it changed
 * since, and the I/O thread's timer (srv_comm_tick) pushes the rows that
 * changed most to the workers caching them, queue_rows at a time, as the
 * budget and the ack window allow. Every applied push, plain, encoded or sent
 * early, goes through srv_apply_rows, which notes the changes
 * (srv_note_changes) and advances the row versions. Pushed rows travel plain,
 * not through the pull chain: a chain's filters (kkt, sigmod, keycache)
 * adapt to the rows a reader asked for, and ROWS_PUSH is an extra copy the
 * reader did not ask for; the budget is charged what is sent either way. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ps/msg_types.h"
#include "ps/server_impl.h"

/* Managed tables: rows a push is about to change, with the magnitudes of
 * their deltas against their current values (comm.h); the timer pushes them. */
void srv_note_changes(server *s, srv_table *t, srv_part *p, const uint64_t *keys, uint64_t begin,
                      const uint8_t *vals, size_t count)
{
    size_t before = t->rows->ndirty;
    uint8_t *value = malloc(t->row_bytes);
    for (size_t i = 0; value && i < count; i++) {
        uint64_t key = keys ? keys[i] : begin + i;
        double abs, rel;
        store_read(p->store, key, value);
        comm_row_magnitude(t->def.opts.type, t->def.opts.width, vals + i * t->row_bytes, value,
                           &abs, &rel);
        comm_rowset_changed(t->rows, key, abs, rel);
    }
    free(value);
    if (!before && t->rows->ndirty) node_timer_poke(s->node, &ps_layer_def);
}

/* ---- pushing changed rows (managed communication, comm.c) ---- */

static int key_order(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Push the queue_rows changed rows that table t's priority ranks first to
 * the workers that cache them; returns the rows sent. */
static size_t push_changed(server *s, uint32_t id, srv_table *t, uint64_t now)
{
    comm_rowset *rs = t->rows;
    size_t k = t->def.opts.queue_rows ? t->def.opts.queue_rows : COMM_DEFAULT_QUEUE_ROWS;
    uint64_t *keys = malloc(rs->ndirty * sizeof *keys);
    double *abs = malloc(rs->ndirty * sizeof *abs), *rel = malloc(rs->ndirty * sizeof *rel);
    uint32_t *slot = malloc(rs->ndirty * sizeof *slot), *pick = malloc(rs->ndirty * sizeof *pick);
    uint64_t *send_keys = malloc((k < rs->ndirty ? k : rs->ndirty) * sizeof *send_keys);
    size_t sent = 0, n = 0, got = 0;
    if (keys && abs && rel && slot && pick && send_keys) {
        for (size_t i = 0; i < rs->n; i++)
            if (rs->dirty[i]) {
                keys[n] = rs->keys[i], abs[n] = rs->abs[i], rel[n] = rs->rel[i];
                slot[n++] = (uint32_t)i;
            }
        got = comm_choose(t->def.opts.priority, &t->choice, keys, abs, rel, n, k, pick);
    }
    for (int w = 0; w < s->num_workers && got; w++) {
        size_t m = 0;
        for (size_t i = 0; i < got; i++)
            if (comm_rowset_has(rs, slot[pick[i]], w)) send_keys[m++] = keys[pick[i]];
        if (!m) continue;
        qsort(send_keys, m, sizeof *send_keys, key_order);
        reply_buf *b = srv_reply_buf_get(s, m * 8 + m * t->row_bytes);
        if (!b) break;
        memcpy(b->data, send_keys, m * 8);
        for (size_t i = 0; i < m; i++) /* the rows may lie in several parts */
            store_read(srv_part_of_key(t, send_keys[i])->store, send_keys[i],
                       b->data + m * 8 + i * t->row_bytes);
        msg_header h = {.type = MSG_ROWS_PUSH,
                        .table = id,
                        .req = ++s->push_id,
                        .clock = s->min_clock,
                        .a = t->applied[w],
                        .b = t->version};
        node_frame f[2] = {{b->data, m * 8, NULL, NULL, 1},
                           {b->data + m * 8, m * t->row_bytes, NULL, NULL, 1}};
        comm_mgr_sent(&s->cm, now, m * 8 + m * t->row_bytes, 1);
        node_send(s->node, node_worker_id(s->num_servers, w), &h, f, 2);
        free(b);
        sent += m;
    }
    for (size_t i = 0; i < got; i++) { /* pushed, or no longer cached by anyone we could reach */
        uint32_t sl = slot[pick[i]];
        rs->dirty[sl] = 0;
        rs->abs[sl] = rs->rel[sl] = 0;
        rs->ndirty--;
    }
    free(keys);
    free(abs);
    free(rel);
    free(slot);
    free(pick);
    free(send_keys);
    return sent;
}

/* The I/O thread's timer: one batch of one managed table (in turn) when the
 * budget and the ack window allow; returns when to run next. */
uint64_t srv_comm_tick(loom_node *n, void *ctx, uint64_t now)
{
    (void)n;
    server *s = ctx;
    uint64_t wait = comm_mgr_wait(&s->cm, now);
    if (wait) return wait;
    size_t sent = 0;
    int pending = 0;
    for (uint32_t i = 0; i < s->cap && !sent; i++) {
        uint32_t id = (s->next_table + i) % s->cap;
        srv_table *t = s->tables[id];
        if (!t || !t->rows || !t->rows->ndirty) continue;
        pending = 1;
        sent = push_changed(s, id, t, now);
        s->next_table = id + 1;
    }
    if (sent) atomic_fetch_add(&s->counters->managed_rows_sent, sent);
    if (!pending) return UINT64_MAX; /* a change pokes the timer */
    return comm_mgr_next(&s->cm, now);
}

void srv_on_rows_push_ack(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    if (srv_worker_rank(s, m->from) < 0 || m->h.req == 0 || m->h.req > s->push_id) {
        node_drop(n, m, "acknowledgement of no row push");
        return;
    }
    if (comm_mgr_acked(&s->cm)) node_timer_poke(n, &ps_layer_def);
}
