/* client_impl: what the files of a worker's side of the parameter server
 * share (client.c and the client_*.c beside it; ps.h is what the rest of
 * Loom sees of them).
 *
 * The state: a worker's ps_client (its tables, the slots of its pulls, what
 * it knows of the servers) and each table's loom_table (process cache, update
 * buffer, in-flight pushes, filter chains, ring). The helpers below are those
 * more than one file calls. The ones on the per-key loops of pushes and pulls
 * (a key's range check and master, the cache's and own writes' tests) and
 * other small ones are static inline, so that no call is added to those loops
 * by the split into files; the larger ones are declared at the end, by the
 * file that defines them. */
#ifndef LOOM_PS_CLIENT_IMPL_H
#define LOOM_PS_CLIENT_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/sorted.h"
#include "core/u64map.h"
#include "loom/error.h"
#include "loom/filter.h"
#include "ps/filter.h"
#include "ps/comm.h"
#include "ps/keys.h"
#include "ps/ps.h"
#include "ps/ring.h"
#include "ps/rowops.h"
#include "ps/updater_impl.h"

/* ---- the state ---- */

/* A reference-counted buffer, so one allocation can back several zero-copy
 * frames and the in-flight records that still need to read it. */
typedef struct sbuf {
    atomic_int refs;
    size_t len;
    _Alignas(8) uint8_t data[];
} sbuf;

static inline sbuf *sbuf_new(size_t len)
{
    sbuf *b = malloc(sizeof *b + (len ? len : 1));
    if (!b) return NULL;
    atomic_init(&b->refs, 1);
    b->len = len;
    return b;
}

static inline sbuf *sbuf_ref(sbuf *b)
{
    if (b) atomic_fetch_add(&b->refs, 1);
    return b;
}

static inline void sbuf_unref(sbuf *b)
{
    if (b && atomic_fetch_sub(&b->refs, 1) == 1) free(b);
}

static inline void sbuf_free_frame(void *data, void *hint)
{
    (void)data;
    sbuf_unref(hint);
}

/* One push message a server has not acknowledged yet. */
typedef struct inflight {
    uint64_t seq;
    loom_ts ts;
    const uint64_t *keys; /* sorted keys of the message; NULL for a range push */
    const uint8_t *vals;  /* their delta rows (kept only for read-my-writes) */
    size_t n;
    uint64_t begin; /* range push: first key */
    sbuf *hold;     /* owner of keys/vals if Loom allocated them */
    int acked;      /* the server has it (its timestamp part is done) */
    int ts_done;    /* its timestamp part is done (an acknowledged push sent again) */
    int managed;    /* sent early: counts in the ack window (comm.h) */
    int parked;     /* its server parked it (PARKED): kept, and sent again when told */
    int64_t clock;  /* the clock it was pushed in (sent again after a failover) */
    uint64_t since; /* node_now_ms() when it was first sent (client_report_stall) */
    /* A sparse push kept for read-my-writes only (loom_push_sparse_async
     * without replicas; vals is NULL): row i's values are entries
     * [sp_off[i], sp_off[i + 1]) of sp_cols and sp_vals, all in hold. With
     * replicas a push is kept as dense rows, which a failover sends again. */
    const uint64_t *sp_off;
    const uint32_t *sp_cols;
    const uint8_t *sp_vals;
    struct inflight *next;
} inflight;

struct loom_table {
    struct ps_client *client;
    loom_node *node;
    uint32_t id;
    ps_table_def def;
    ps_updater upd;
    size_t row_bytes;
    int local_rmw; /* sum table: own writes are added locally */
    int cache_on;
    uint32_t flush_rows;
    int managed;        /* a priority on an SSP or ASP table: rows go early */
    comm_choice choice; /* the priority's state; I/O thread only */

    pthread_mutex_t mu;
    /* process cache: key -> slot; rows and their freshness by slot */
    u64map cache_idx;
    uint8_t *c_rows;
    int64_t *c_server_clock, *c_fetch_clock;
    size_t c_n, c_cap;
    /* update buffer: key -> slot; coalesced deltas by slot */
    u64map buf_idx;
    uint64_t *b_keys;
    uint8_t *b_rows;
    double *b_abs, *b_rel; /* managed: each buffered row's magnitudes (comm.h) */
    size_t b_n, b_cap;
    /* per server: pushes sent and not yet acknowledged, oldest first */
    inflight **ifl_head, **ifl_tail;
    uint64_t *durable; /* with replicas, per server: the last sequence its replicas hold */
    uint64_t next_seq;
    /* rows on the wire: per server, the chains encoding pushes and decoding
     * pull replies; the version of each cached row (0: not known) */
    filter_spec push_spec;
    int push_filtered; /* every push goes through the chain */
    int pull_dense;    /* the pull spec says dense: whole rows, never only what changed */
    filter_chain **push_enc, **pull_dec;
    /* per server, the chain of pull requests' key lists (NULL: the pull
     * spec has no keycache, lz4 or zstd, and keys go plain) */
    filter_chain **keys_enc;
    uint64_t *c_version;
    loom_filter_stats wire[2]; /* by loom_direction */
    ps_ring ring;              /* which server is master of which keys (ring.h) */
    int *master;               /* per ring range: its master now (after failovers); under mu */
};

typedef struct pull_op {
    loom_table *t;
    loom_ts ts;
    void *out;
    uint8_t *rows;        /* a row per unique key; == out unless keys needed sorting */
    const uint64_t *uniq; /* unique sorted keys (NULL for a range) */
    uint64_t *uniq_owned;
    size_t nuniq;
    uint32_t *slot_of; /* scatter map from user positions to unique rows */
    uint8_t *held;     /* PULL_SINCE: bitmap over miss_keys of the rows offered as held */
    uint64_t since;    /* the oldest version among them */
    size_t n;
    uint32_t *miss;      /* indices (into uniq) of rows requested from servers */
    uint64_t *miss_keys; /* their keys, ascending; may alias uniq */
    size_t nmiss;
    uint64_t begin; /* range pull: first key */
    int64_t fetch_clock;
    atomic_uint parts_left;
    atomic_int status;
} pull_op;

/* A pull message waiting for its reply; found by req = generation << 32 | slot. */
typedef struct pull_slot {
    uint64_t req;
    pull_op *op;
    size_t first, count;
    int server;
    int resent;     /* the key list was sent again after the server missed its digest */
    int refused;    /* refused (LOOM_ESTATE) by a server this worker takes for the
                     * master: asked again on its PARKED req 0 or a handback */
    uint64_t since; /* node_now_ms() when it was asked (client_report_stall) */
    uint32_t next_free;
} pull_slot;

typedef struct open_wait {
    loom_ts ts;
    uint32_t id;
    struct open_wait *next;
} open_wait;

typedef struct ps_client {
    loom_node *node;
    ps_counters *counters; /* loom_node_stats', in node_stats_area */
    int num_servers;
    int replicas;       /* LOOM_REPLICAS: the ring's points per server follow from it */
    uint8_t *dead;      /* per server: PS_UP, PS_DOWN ... (ring.h); I/O thread */
    uint32_t *returned; /* per BACK server: the order it came back in (ring.h); I/O thread */
    /* per server: its pulls were moved to the new masters (ps_client_repull),
     * so a pull routed to it before the move goes there too; under mu */
    uint8_t *redirected;
    /* Server deaths whose pushes and pulls went again to the new masters: a
     * CLOCK says it (h.b), so that a server knows which of them the worker's
     * clock comes after (a checkpoint's cut, ps.h). */
    _Atomic uint32_t failovers_done;
    int handbacks_seen; /* a handback moved pushes between live servers; I/O thread */
    pthread_mutex_t mu; /* slots, open waiters, table list, clock_sent */
    int64_t clock_sent; /* the last CLOCK sent to the servers */
    _Atomic(loom_table *) by_id[PS_MAX_TABLES];
    loom_table **opened;
    size_t nopened;
    pull_slot *slots;
    uint32_t nslots, free_head, gen;
    open_wait *opens;
    atomic_llong clock;
    comm_mgr cm;            /* the budget and the ack window */
    size_t next_table;      /* comm_tick: the managed table to serve next */
    uint64_t stall_ms;      /* client_report_stall names a request that waited this long */
    uint64_t stall_said[3]; /* the `since` of the last pull, push and clock wait it named */
    /* under the node lock: */
    int64_t global_min;
    int gate;            /* smallest staleness of an SSP/BSP table; -1 if none */
    uint64_t gate_since; /* node_now_ms() when loom_clock began to wait for it (0: not waiting) */
} ps_client;

#define NO_SLOT UINT32_MAX

/* ---- keys, ranges and their masters ---- */

static inline ps_client *client_of(loom_node *n)
{
    return node_layer(n, &ps_layer_def);
}

static inline int key_in_table(const loom_table *t, uint64_t k)
{
    return k >= t->def.opts.key_begin && (ps_u128)k < ps_key_end(&t->def.opts);
}

/* Every key in the table: 0 or LOOM_EKEYRANGE. *sorted (if not NULL):
 * whether the keys ascend strictly (sorted and unique: sent as they are),
 * found in the same pass, since a large operation's keys come from memory
 * and each pass over them cost as much as the check. No branch inside: key
 * - begin > last for a key outside, which the compiler vectorises. */
static inline int check_keys(const loom_table *t, const uint64_t *keys, size_t n, int *sorted)
{
    uint64_t begin = t->def.opts.key_begin;
    uint64_t last = (uint64_t)(ps_key_end(&t->def.opts) - 1 - begin);
    uint64_t outside = n && keys[0] - begin > last;
    unsigned down = 0;
    for (size_t i = 1; i < n; i++) {
        outside |= keys[i] - begin > last;
        down |= keys[i - 1] >= keys[i];
    }
    if (sorted) *sorted = !down;
    return outside ? LOOM_EKEYRANGE : 0;
}

static inline int server_count(const loom_table *t)
{
    return t->client->num_servers;
}

/* The server that is master of key's range. */
static inline int server_of(const loom_table *t, uint64_t key)
{
    return t->master[ps_ring_range_of(&t->ring, key)];
}

/* The masters of table t's ranges, from what this process knows of the servers. */
static inline void compute_masters(loom_table *t)
{
    for (size_t rg = 0; rg < t->ring.nranges; rg++)
        t->master[rg] = ps_ring_master(&t->ring, rg, t->client->dead, t->client->returned);
}

/* Split n sorted keys (keys == NULL: the keys [begin, begin + n)) at the
 * ring's ranges: bound[r] is the index of the first key of range r or later
 * (bound[nranges] = n). bound has nranges + 1 entries. */
static inline void range_bounds(const loom_table *t, const uint64_t *keys, uint64_t begin, size_t n,
                                size_t *bound)
{
    const ps_ring *r = &t->ring;
    for (size_t rg = 0; rg <= r->nranges; rg++) {
        ps_u128 start = r->start[rg];
        if (rg == r->nranges)
            bound[rg] = n;
        else if (keys)
            bound[rg] = start >> 64 ? n : sorted_lower_bound_u64(keys, n, (uint64_t)start);
        else
            bound[rg] = (size_t)(start <= begin               ? 0
                                 : start - begin > (ps_u128)n ? n
                                                              : start - begin);
    }
}

static inline int grow(void **p, size_t elem, size_t cap)
{
    void *np = realloc(*p, elem * cap);
    if (!np) return LOOM_ENOMEM;
    *p = np;
    return 0;
}

/* ---- the cache and own writes (the rest in client_cache.c) ---- */

static inline int cache_fresh(const loom_table *t, uint32_t slot, int64_t clock)
{
    if (t->def.opts.consistency == LOOM_ASP) return t->c_fetch_clock[slot] == clock;
    return t->c_server_clock[slot] >= clock - t->def.opts.staleness;
}

/* A pushed delta also lands in the cached copy of a sum table (lock held). */
static inline void cache_add(loom_table *t, uint64_t key, const void *delta)
{
    uint32_t slot;
    if (t->cache_on && u64map_get(&t->cache_idx, key, &slot))
        rows_add(t->def.opts.type, t->c_rows + (size_t)slot * t->row_bytes, delta,
                 t->def.opts.width);
}

/* Add a row given sparse (count values at columns cols) to row. */
static inline void row_add_sparse(const loom_table *t, uint8_t *row, const uint32_t *cols,
                                  const uint8_t *vals, size_t count)
{
    size_t vs = t->row_bytes / t->def.opts.width;
    for (size_t e = 0; e < count; e++)
        rows_add(t->def.opts.type, row + cols[e] * vs, vals + e * vs, 1);
}

/* cache_add of a delta row given sparse (lock held). */
static inline void cache_add_sparse(loom_table *t, uint64_t key, const uint32_t *cols,
                                    const uint8_t *vals, size_t count)
{
    uint32_t slot;
    if (t->cache_on && u64map_get(&t->cache_idx, key, &slot))
        row_add_sparse(t, t->c_rows + (size_t)slot * t->row_bytes, cols, vals, count);
}

/* Managed tables: the magnitudes of the buffered row in slot, against the
 * value this worker sees (its cached row, if any). Lock held. */
static inline void buffer_magnitude(loom_table *t, uint64_t key, uint32_t slot)
{
    uint32_t cslot;
    const uint8_t *value = t->cache_on && u64map_get(&t->cache_idx, key, &cslot)
                               ? t->c_rows + (size_t)cslot * t->row_bytes
                               : NULL;
    comm_row_magnitude(t->def.opts.type, t->def.opts.width, t->b_rows + (size_t)slot * t->row_bytes,
                       value, &t->b_abs[slot], &t->b_rel[slot]);
}

static inline void cache_clear(loom_table *t)
{
    u64map_clear(&t->cache_idx);
    t->c_n = 0;
}

/* Whether an own write to key may be pending (buffered, or in a push to
 * server s not yet known to be applied). Lock held. */
static inline int own_write_to(const loom_table *t, int s, uint64_t key)
{
    uint32_t slot;
    if (u64map_get(&t->buf_idx, key, &slot)) return 1;
    for (const inflight *f = t->ifl_head[s]; f; f = f->next) {
        if (!f->keys) {
            if (key >= f->begin && key - f->begin < f->n) return 1;
        } else {
            size_t i = sorted_lower_bound_u64(f->keys, f->n, key);
            if (i < f->n && f->keys[i] == key) return 1;
        }
    }
    return 0;
}

/* Whether any own write could be missing from an answer of server s that
 * included our pushes up to `applied` (lock held): most answers need no
 * per-row bookkeeping at all. */
static inline int own_writes_pending(const loom_table *t, int s, uint64_t applied)
{
    if (t->b_n) return 1;
    for (const inflight *f = t->ifl_head[s]; f; f = f->next)
        if (f->seq > applied) return 1;
    return 0;
}

/* ---- messages ---- */

/* Plain rows a push or pull message carries at most, below the frame limit:
 * a push or pull of a whole large table goes as messages of about 1 MiB,
 * whose buffers (frames, decoded rows, replies) the allocator reuses
 * (core/malloc_policy.c), not as one of tens or hundreds of MiB that the
 * sender and the receiver map, zero and unmap again each time (LDA on AP at
 * K = 1000, one worker, 10 iterations with a whole-table pull per
 * evaluation: 11.2 CPU s in 40 MB messages, 4.7 in 4 MiB ones). Parts of
 * 1 MiB rather than 4 let a server apply or gather one while the next is on
 * the wire: a 10k-key pull of 64-wide rows (2.6 MB) ran 1.2-1.6x as fast,
 * 1M keys of one f32 as fast or faster (docs/BENCHMARKS.md, "Push/pull:
 * freed messages kept mapped"). */
#define PS_MESSAGE_BYTES ((size_t)1 << 20)

/* Rows per message: no frame of keys, values or a pull's reply may exceed the
 * job's frame limit (node_max_payload, which every socket enforces), whatever
 * the form they travel in: as they are, or encoded by a filter chain with
 * their keys, forced sparse (a row count and a column per value) and headers;
 * and a message carries at most PS_MESSAGE_BYTES of row values if a row fits.
 * Values, not the worst case above: narrow rows cut by the worst case (24
 * bytes a row of one f32) made a 1M-key push or pull six messages and ran at
 * a third of the speed of one (bench_pushpull, 1 server, 1 worker). */
static inline size_t chunk_rows(const loom_table *t)
{
    size_t per_row = t->row_bytes + 16 + 4 * (size_t)t->def.opts.width;
    size_t limit = (size_t)((node_max_payload(t->node) - 1024) / per_row);
    size_t soft = PS_MESSAGE_BYTES / t->row_bytes;
    return soft && soft < limit ? soft : limit;
}

static inline unsigned chunks(const loom_table *t, size_t rows)
{
    return (unsigned)((rows + chunk_rows(t) - 1) / chunk_rows(t));
}

static inline void free_data(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* A push sent or a pull reply received: its payload as plain keys and dense
 * rows, and as it travelled. Lock held. */
static inline void count_wire(loom_table *t, loom_direction dir, uint64_t raw, uint64_t wire)
{
    loom_filter_stats *ws = &t->wire[dir];
    ws->messages++;
    ws->bytes_raw += raw;
    ws->bytes_wire += wire;
    ps_counters *k = t->client->counters;
    atomic_fetch_add(&k->table_messages, 1);
    atomic_fetch_add(&k->table_bytes_raw, raw);
    atomic_fetch_add(&k->table_bytes_wire, wire);
}

/* The clock a pull's answer must reflect (ASP: any). */
static inline int64_t required_clock(const loom_table *t, int64_t clock)
{
    return t->def.opts.consistency == LOOM_ASP ? INT64_MIN : clock - t->def.opts.staleness;
}

/* ---- functions of one file that others call ---- */

/* client.c: the tables opened so far (a copy; NULL on ENOMEM); new filter
 * chains for the link to server s (lock held). */
loom_table **client_snapshot_tables(ps_client *c, size_t *count);
int client_link_chains(loom_table *t, int s);

/* client_cache.c: a fetched row into the cache, own writes into a server's
 * answer, in-flight pushes forgotten once applied (table lock held). */
void client_cache_put(loom_table *t, uint64_t key, const void *row, int64_t server_clock,
                      int64_t fetch_clock, uint64_t version);
void client_add_own_writes(loom_table *t, int s, uint64_t applied, uint64_t key, uint8_t *row);
void client_prune_applied(loom_table *t, int s, uint64_t applied);

/* client_push.c: send rows to their masters (table lock held); its handler. */
int client_send_push(loom_table *t, const uint64_t *keys, uint64_t begin, const uint8_t *vals,
                     size_t n, sbuf *hold, loom_ts *ts_out, int flush, int managed);
void client_push_attach(loom_node *n, ps_client *c);

/* client_pull.c: pull parts asked again elsewhere, their slots, a pull's end;
 * its handlers. */
void client_send_pull(pull_op *op, int s, size_t first, size_t count, int64_t required, int resent);
int client_pull_master(pull_op *op, size_t first);
int client_slot_take(ps_client *c, uint64_t req, int server, pull_slot *out);
void client_pull_op_free(pull_op *op);
void client_pull_attach(loom_node *n, ps_client *c);

/* client_comm.c: the I/O thread's timer and the rows servers push. */
void client_comm_attach(loom_node *n, ps_client *c);

#endif
