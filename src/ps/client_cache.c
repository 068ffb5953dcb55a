/* client_cache: a worker's process cache (Bösen), and its own writes not yet
 * in a server's answer (read-my-writes).
 *
 * The cache keeps each row a pull brought (and a server's push refreshed),
 * with the server's min clock it reflects, the worker's clock then and its
 * version on the server. A cached row is fresh enough under SSP(s)/BSP if the
 * server's min clock when it was fetched is at least c - s (c = this worker's
 * clock), under ASP if it was fetched during clock c: a pull takes it instead
 * of asking a server. The cache is dropped at a barrier and when the masters
 * change (its versions were another server's).
 *
 * Read-my-writes for "sum" tables. A pull reply says which of this worker's
 * pushes the server had applied (the last sequence number). The reader adds
 * the deltas of later in-flight pushes and of the update buffer, so the value
 * it sees always includes every one of its own pushes, exactly once. Pushes
 * also add into cached rows directly, so cached rows stay current too.
 *
 * Own writes are found in the update buffer and in the in-flight FIFO of each
 * server, which the pushes keep for it (and, with replicas, until the replicas
 * hold a push); an answer that includes a push lets it go. The tests on the
 * per-key loops of pushes and pulls (cache_fresh, cache_add, own_write_to,
 * own_writes_pending) are static inline in client_impl.h. */
#include <string.h>

#include "ps/client_impl.h"

/* ---- the cache ---- */

/* Store a row fetched from a server (table lock held). */
void client_cache_put(loom_table *t, uint64_t key, const void *row, int64_t server_clock,
                      int64_t fetch_clock, uint64_t version)
{
    if (t->c_n == t->c_cap) {
        size_t cap = t->c_cap ? 2 * t->c_cap : 1024;
        if (grow((void **)&t->c_rows, t->row_bytes, cap) ||
            grow((void **)&t->c_server_clock, sizeof(int64_t), cap) ||
            grow((void **)&t->c_fetch_clock, sizeof(int64_t), cap) ||
            grow((void **)&t->c_version, sizeof(uint64_t), cap))
            return; /* a row not cached is only a later round trip */
        t->c_cap = cap;
    }
    int inserted;
    uint32_t slot = u64map_put(&t->cache_idx, key, (uint32_t)t->c_n, &inserted);
    if (slot == UINT32_MAX) return;
    if (inserted) t->c_n++;
    if (row != t->c_rows + (size_t)slot * t->row_bytes)
        memcpy(t->c_rows + (size_t)slot * t->row_bytes, row, t->row_bytes);
    t->c_server_clock[slot] = server_clock;
    t->c_fetch_clock[slot] = fetch_clock;
    t->c_version[slot] = version;
}

void ps_invalidate_caches(loom_node *n)
{
    ps_client *c = client_of(n);
    size_t count;
    loom_table **list = client_snapshot_tables(c, &count);
    for (size_t i = 0; list && i < count; i++) {
        pthread_mutex_lock(&list[i]->mu);
        cache_clear(list[i]);
        pthread_mutex_unlock(&list[i]->mu);
    }
    free(list);
}

/* ---- own writes not yet in a server's answer ---- */

/* Add to row (for key, from server s, whose answer included our pushes up to
 * `applied`) every later in-flight delta and the buffered delta. Lock held. */
void client_add_own_writes(loom_table *t, int s, uint64_t applied, uint64_t key, uint8_t *row)
{
    loom_type type = t->def.opts.type;
    uint32_t width = t->def.opts.width;
    for (inflight *f = t->ifl_head[s]; f; f = f->next) {
        if (f->seq <= applied) continue;
        size_t i;
        if (f->keys) {
            i = sorted_lower_bound_u64(f->keys, f->n, key);
            if (i == f->n || f->keys[i] != key) continue;
        } else {
            if (key < f->begin || key - f->begin >= f->n) continue;
            i = (size_t)(key - f->begin);
        }
        if (f->vals)
            rows_add(type, row, f->vals + i * t->row_bytes, width);
        else if (f->sp_off)
            row_add_sparse(t, row, f->sp_cols + f->sp_off[i],
                           f->sp_vals + f->sp_off[i] * (t->row_bytes / width),
                           (size_t)(f->sp_off[i + 1] - f->sp_off[i]));
    }
    uint32_t slot;
    if (u64map_get(&t->buf_idx, key, &slot))
        rows_add(type, row, t->b_rows + (size_t)slot * t->row_bytes, width);
}

/* Forget in-flight pushes the server has acknowledged and applied (lock held). */
void client_prune_applied(loom_table *t, int s, uint64_t applied)
{
    /* With replicas a push is kept until the replicas hold it too: it is sent
     * again if its server dies before (docs/FAULTS.md). */
    if (t->client->replicas && t->durable[s] < applied) applied = t->durable[s];
    while (t->ifl_head[s] && t->ifl_head[s]->acked && !t->ifl_head[s]->parked &&
           t->ifl_head[s]->seq <= applied) {
        inflight *f = t->ifl_head[s];
        t->ifl_head[s] = f->next;
        if (!f->next) t->ifl_tail[s] = NULL;
        sbuf_unref(f->hold);
        free(f);
    }
}
