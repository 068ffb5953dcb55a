/* server: a server's partitions of every table, and the clock rule for reads.
 *
 * A table's key range lies on a ring of virtual servers (ring.h): a server
 * holds the ranges it is master of and, with replicas, copies of the ranges
 * of the servers before it, each range a part with its own rows; every push
 * or pull names keys of one range. Without replicas a server holds one range,
 * slice r of the key range (ps_slice_start). Pushes
 * are applied at once, in arrival order, through the table's updater; the
 * acknowledgement echoes the push's sequence number. Each worker reports the
 * clocks it completed (CLOCK, sent after that clock's pushes on the same
 * connection), so the slowest worker's clock `min_clock` says which updates
 * the partition is guaranteed to contain: all of every clock < min_clock.
 *
 * A pull names the oldest clock its answer may reflect. If min_clock has not
 * reached it, the pull waits in `deferred` and is answered as soon as the
 * last straggler's CLOCK arrives; that is how BSP and SSP reads block. The
 * answer carries min_clock (the reader caches it as the rows' freshness) and
 * the last push sequence applied from that worker (the reader re-adds its own
 * later, still in-flight pushes, to see its own writes).
 *
 * BSP tables make updates visible a whole clock at a time: a push of clock c
 * is acknowledged on arrival but kept in `staged` and applied only once
 * every worker has finished clock c. A pull at clock c waits until every
 * worker finished clock c - 1, so it sees exactly the updates of clocks < c
 * (plus, through the reader's own bookkeeping, the reader's own writes):
 * the result a sequential run of the same supersteps would give.
 *
 * Rows on the wire (docs/FILTERS.md). A keyed push may come encoded by the
 * table's push filter chain (PUSH_ENC: filters, sparse rows); the server
 * decodes it with its chain for that worker and applies it like any push. A
 * reply goes through the pull chain for that worker when the table has pull
 * filters, when its rows are sparse enough to be smaller, or when the reader
 * asked only for what changed since a version (PULL_SINCE). Row versions: the
 * partition counts the push messages it applied (`version`, from 1) and keeps
 * for each row the count when it last changed, 8 bytes per row (dense: an
 * array over the partition, allocated with it; sparse: per row written since
 * the first PULL_SINCE, in a map of about 16 more bytes a row, the others
 * counting as changed then); a reply says the count it reflects, and a row
 * whose version is not above the reader's is left out as unchanged. When
 * the pull spec has keycache, lz4 or zstd, a pull's key list may come through
 * the worker's chain of key lists (MSG_F_KEYS_ENC: a digest for a list sent
 * before); it is decoded on arrival, in order, and an unknown digest is
 * dropped, counted and answered with LOOM_ENOTFOUND, on which the worker
 * sends the list whole.
 *
 * Managed communication (comm.c): pull replies are charged to the process's
 * budget; tables with a priority (SSP, ASP) remember which workers pulled
 * each row and how much it changed since, and the I/O thread's timer
 * (comm_tick) pushes the rows that changed most to the workers caching them,
 * queue_rows at a time, as the budget and the ack window allow. Every
 * applied push, plain, encoded or sent early, goes through apply_rows, which
 * notes the changes and advances the row versions. Pushed rows travel plain,
 * not through the pull chain: a chain's filters (kkt, sigmod, keycache)
 * adapt to the rows a reader asked for, and ROWS_PUSH is an extra copy the
 * reader did not ask for; the budget is charged what is sent either way.
 *
 * Everything runs on the I/O thread (a server's main thread only waits in
 * loom_serve, so no other thread reads its sockets); there is no locking. The
 * one exception is the spare reply buffer, which ZeroMQ's own I/O thread hands
 * back when it has sent a reply (an atomic pointer). */
#include <inttypes.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "loom/error.h"
#include "core/u64map.h"
#include "ps/comm.h"
#include "ps/filter.h"
#include "ps/ps.h"
#include "ps/ring.h"
#include "ps/rowops.h"
#include "ps/storage.h"
#include "ps/updater_impl.h"

/* Pulls a server holds for clocks to catch up; more means a hostile peer. */
#define PS_MAX_DEFERRED_PULLS ((size_t)1 << 20)

/* A validated push, as it arrived (frames kept) or decoded by a filter chain. */
typedef struct staged {
    node_msg m;     /* plain push; unused when keys is set */
    uint64_t *keys; /* decoded push: its keys and rows (owned) */
    uint8_t *vals;
    size_t n;
    int worker;
    size_t part; /* the part its keys lie in */
    struct staged *next;
} staged;

/* One range of the ring this server holds: its rows. */
typedef struct srv_part {
    size_t range; /* index in the table's ring */
    uint64_t lo;  /* first key */
    ps_u128 hi;   /* one past the last */
    ps_store *store;
    uint64_t *dense_ver; /* dense storage: each row's version (see the top of the file) */
    uint64_t *applied;   /* per worker rank: last push sequence applied to this range */
    uint8_t fence;       /* PART_OPEN ... (see "handback" below) */
} srv_part;

/* A range and handbacks (see "handback" below): open; fenced (being handed
 * back by this server, or handed back: pushes parked, pulls held or sent to
 * the new master); incoming (to be taken back by this server: pushes
 * parked, pulls held); or gated (pushes applied, pulls held until the
 * workers sent again what they held for it). */
enum { PART_OPEN, PART_FENCED, PART_INCOMING, PART_GATED };

typedef struct srv_table {
    ps_table_def def;
    ps_updater upd;
    ps_ring ring;
    srv_part *parts; /* the ranges this server holds, in key order */
    size_t nparts;
    size_t *part_of;  /* per ring range: its index in parts, or NO_PART */
    size_t held_rows; /* keys in all parts (saturating): the most a push may carry */
    size_t row_bytes;
    uint64_t *applied;                 /* per worker rank: last push sequence applied */
    uint64_t *durable;                 /* with replicas: ... whose rows the replicas hold */
    staged *staged_head, *staged_tail; /* BSP: pushes of unfinished clocks, in arrival order */
    staged *held_head, *held_tail;     /* other tables: pushes past the next checkpoint's cut */
    /* filter chains per worker rank: decoding its pushes, encoding its replies */
    filter_chain **push_dec, **pull_enc;
    filter_chain **keys_dec; /* pull requests' key lists (NULL: they come plain) */
    int pull_filtered;       /* the pull spec has a filter: every reply goes through it */
    int pull_dense;          /* the pull spec forces dense rows: sparseness alone does not count */
    /* row versions (see the top of the file) */
    uint64_t version;
    /* sparse storage: from the first PULL_SINCE on (ver_floor: the version
     * then, which every row not written since counts as) */
    int ver_tracked;
    uint64_t ver_floor;
    u64map ver_idx;
    uint64_t *sparse_ver;
    size_t nver, ver_cap;
    comm_rowset *rows; /* managed: rows workers cache, and their changes */
    comm_choice choice;
} srv_table;

/* A pull's reply buffer. */
typedef struct reply_buf {
    size_t cap;
    _Alignas(8) uint8_t data[];
} reply_buf;

/* The key list of a pull that came encoded (MSG_F_KEYS_ENC), decoded on
 * arrival (owned); keys NULL for a pull whose keys frame is plain. */
typedef struct pull_keys {
    uint64_t *keys;
    size_t n;
} pull_keys;

typedef struct deferred {
    node_msg m; /* the pull, frames kept */
    pull_keys dk;
    struct deferred *next;
} deferred;

/* A replication round (see "replication" below): REPL messages still to be
 * acknowledged per server, and what t->applied was when the round was cut. */
typedef struct repl_round {
    uint64_t round;
    uint32_t *waiting; /* per server rank */
    size_t nwaiting;
    uint64_t *applied; /* per table id < cap, per worker */
    uint32_t cap;
    struct repl_round *next;
} repl_round;

/* A push acknowledgement held until the replicas hold the push. */
typedef struct held_ack {
    uint32_t to, table;
    uint64_t req, applied, round;
    int status;
    struct held_ack *next;
} held_ack;

/* A push of a worker parked here and not seen again (see "handback"
 * below): its table, the part it is for, its sequence, and the number of
 * the PARKED req 0 that has the worker send it again. */
typedef struct parked_seq {
    uint32_t table;
    size_t part;
    uint64_t seq;
    uint32_t round;
} parked_seq;

/* Per worker: its pushes parked here and not seen again; the PARKED req 0
 * sent to it so far and the last it acknowledged (HANDBACK_ACK h.b). */
typedef struct worker_parked {
    parked_seq *v;
    size_t n, cap;
    uint32_t told, acked;
} worker_parked;

typedef struct server {
    loom_node *node;
    int num_servers, num_workers;
    int replicas; /* copies of each range on other servers (LOOM_REPLICAS) */
    srv_table **tables;
    uint32_t cap;
    int64_t *clock; /* per worker rank */
    uint8_t *lost;  /* per worker rank: the job went on without it (WORKER_LOST) */
    int64_t min_clock;
    deferred *waiting;
    size_t nwaiting;
    uint8_t *scratch[2]; /* aligned copies of payloads that arrived misaligned */
    size_t scratch_len[2];
    /* The last reply buffer ZeroMQ was done with, kept for the next reply:
     * a fresh large buffer comes from mmap and faults on every page. */
    _Atomic(reply_buf *) spare;
    ps_ckpt_hooks ckpt;    /* cut == NULL: no checkpoints */
    int64_t cut_at;        /* the planned checkpoint's job clock (-1: none) */
    int cut_full;          /* ... and whether its part must hold every row */
    int64_t applied_clock; /* the newest clock of a push applied as it came (-1: none) */
    int64_t last_min;      /* the newest min clock short of PS_CLOCK_DONE */
    comm_mgr cm;           /* the budget and the ack window */
    uint64_t push_id;      /* ROWS_PUSH messages sent */
    uint32_t next_table;   /* comm_tick: the managed table to serve next */
    /* replication */
    int repl_due;        /* rows changed since the last round */
    uint64_t rounds_cut; /* the last round's number */
    repl_round *rounds, *rounds_tail;
    held_ack *acks, *acks_tail; /* in the order the pushes arrived */
    uint8_t *dead;              /* per server rank: PS_UP, PS_DOWN ... (ring.h) */
    uint32_t *returned;         /* per BACK server: the order it came back in (ring.h) */
    /* per server rank, a replacement's copies (see "a replacement" below):
     * fed: it gets this server's rounds; copy: 1 its full copies are due in
     * the next round, 2 they went in round copy_round; gen: the registry's */
    uint8_t *fed, *copy;
    uint64_t *copy_round, *copy_gen;
    uint64_t repl_bytes;  /* REPL bytes sent (also in loom_stats) */
    uint64_t repl_rows;   /* rows among them (logged at the end) */
    uint64_t repl_msgs;   /* REPL messages sent (logged at the end) */
    uint64_t naive_bytes; /* what forwarding every push would have sent */
    uint64_t duplicates;  /* pushes sent again after a failover, not applied twice */
    /* checkpoints with replicas (ps.h): deaths, the server deaths of the
     * job so far (every node counts them the same way: ps_survives); per
     * worker, the most deaths a CLOCK of it said it had handled, and the clock
     * of its first CLOCK that said so; took_over: this server is master of a
     * dead server's ranges */
    uint32_t deaths;
    uint32_t *handled;
    int64_t *handled_since;
    int took_over;
    /* a replacement taking its ranges back (see "handback" below): pulls
     * held for fenced, incoming or gated ranges; per worker rank, whether a
     * push of it was parked or a pull of it refused here, the newest handback generation it
     * acknowledged (HANDBACK_ACK), and the one whose acknowledgement it owes
     * (0: none; gated ranges wait for it: a worker acknowledges in order, so
     * a newer generation's acknowledgement settles an older one); the
     * generation of the last fence; the replication round whose
     * acknowledgement answers it (0: none due); fencing: ranges this server
     * is master of are frozen; handbacks: the job's, as the registry counts
     * them (a CLOCK's h.b counts them with the deaths) */
    deferred *parked;
    size_t nparked;
    uint8_t *parked_from;
    worker_parked *wparked;
    uint64_t *hb_acked, *hb_owed;
    uint64_t hb_gen, hb_round;
    int fencing;
    uint32_t handbacks;
} server;

#define NO_PART SIZE_MAX

static srv_table *table_of(server *s, uint32_t id)
{
    return id < s->cap ? s->tables[id] : NULL;
}

/* The part holding key, or NULL if this server holds no copy of its range. */
static srv_part *part_of_key(srv_table *t, uint64_t key)
{
    if (!ps_key_in_range(&t->def.opts, key)) return NULL;
    size_t i = t->part_of[ps_ring_range_of(&t->ring, key)];
    return i == NO_PART ? NULL : &t->parts[i];
}

/* Whether server h gets this server's replication rounds of the ranges it
 * holds: a live one, or a replacement once it has its tables (REJOIN_COPY). */
static int repl_target(const server *s, int h)
{
    return h != loom_rank(s->node) && s->dead[h] != PS_DOWN &&
           (s->dead[h] != PS_JOINING || s->fed[h]);
}

static int is_master(server *s, srv_table *t, srv_part *p)
{
    return ps_ring_master(&t->ring, p->range, s->dead, s->returned) == loom_rank(s->node);
}

/* How many live replicas part p has if this server is its master (else 0). */
static int live_replicas(server *s, srv_table *t, srv_part *p)
{
    int n = 0;
    for (int i = 0; i <= s->replicas; i++)
        n += repl_target(s, ps_ring_holder(&t->ring, p->range, i));
    return is_master(s, t, p) ? n : 0;
}

/* A push put `count` rows into part p (apply_rows): a round is due. */
static void repl_note_push(server *s, srv_table *t, srv_part *p, uint64_t count)
{
    s->repl_due = 1;
    /* Forwarding: this push's rows of the range, keys and deltas, in a
     * message of its own to each live replica. */
    s->naive_bytes +=
        (uint64_t)live_replicas(s, t, p) * (MSG_HEADER_SIZE + count * (8 + t->row_bytes));
}

/* Payload frames may start at any address (ZeroMQ receives large messages
 * in place); rows must be aligned for typed access, so copy when they are not.
 * slot 0 is for keys, 1 for values: one message may need both. */
static const void *aligned_payload(server *s, node_msg *m, size_t frame, int slot)
{
    const void *p = node_frame_data(m, frame);
    if (((uintptr_t)p & 7) == 0) return p;
    size_t len = node_frame_size(m, frame);
    if (len > s->scratch_len[slot]) {
        uint8_t *nb = realloc(s->scratch[slot], len);
        if (!nb) return NULL;
        s->scratch[slot] = nb;
        s->scratch_len[slot] = len;
    }
    memcpy(s->scratch[slot], p, len);
    return s->scratch[slot];
}

/* The rank of worker node `from`; -1 for any other node and for a worker the
 * job went on without, whose messages are dropped from then on. */
static int worker_rank(server *s, uint32_t from)
{
    int rank;
    return node_peer_role(s->node, from, &rank) == LOOM_WORKER && !s->lost[rank] ? rank : -1;
}

/* ---- row versions ---- */

static uint64_t row_version(srv_table *t, srv_part *p, uint64_t key)
{
    if (p->dense_ver) return p->dense_ver[key - p->lo];
    uint32_t slot;
    return u64map_get(&t->ver_idx, key, &slot) ? t->sparse_ver[slot] : t->ver_floor;
}

/* A sparse table keeps versions only once a reader asks for changes: a
 * table nobody pulls that way (its rows never pay to send sparse, nor does
 * it have pull filters) does not pay a map insert per new row. */
static void track_versions(srv_table *t)
{
    if (t->def.opts.storage == LOOM_DENSE || t->ver_tracked) return;
    t->ver_tracked = 1;
    t->ver_floor = t->version;
}

/* Row key changed in the push numbered t->version. */
static int mark_changed(srv_table *t, srv_part *p, uint64_t key)
{
    if (p->dense_ver) {
        p->dense_ver[key - p->lo] = t->version;
        return 0;
    }
    if (!t->ver_tracked) return 0;
    if (t->nver == t->ver_cap) {
        size_t cap = t->ver_cap ? 2 * t->ver_cap : 1024;
        uint64_t *nv = realloc(t->sparse_ver, cap * sizeof *nv);
        if (!nv) return LOOM_ENOMEM;
        t->sparse_ver = nv;
        t->ver_cap = cap;
    }
    int inserted;
    uint32_t slot = u64map_put(&t->ver_idx, key, (uint32_t)t->nver, &inserted);
    if (slot == UINT32_MAX) return LOOM_ENOMEM;
    if (inserted) t->nver++;
    t->sparse_ver[slot] = t->version;
    return 0;
}

/* ---- table creation ---- */

/* Free a staged or held push. */
static void free_entry(staged *st)
{
    if (st->keys) {
        free(st->keys);
        free(st->vals);
    } else {
        node_msg_release(&st->m);
    }
    free(st);
}

static void table_destroy(srv_table *t, int num_workers)
{
    if (!t) return;
    for (staged *st = t->staged_head, *next; st; st = next) {
        next = st->next;
        free_entry(st);
    }
    for (staged *st = t->held_head, *next; st; st = next) {
        next = st->next;
        free_entry(st);
    }
    for (int w = 0; w < num_workers; w++) {
        if (t->push_dec) filter_chain_destroy(t->push_dec[w]);
        if (t->pull_enc) filter_chain_destroy(t->pull_enc[w]);
        if (t->keys_dec) filter_chain_destroy(t->keys_dec[w]);
    }
    free(t->push_dec);
    free(t->pull_enc);
    for (size_t i = 0; i < t->nparts; i++) {
        free(t->parts[i].dense_ver);
        free(t->parts[i].applied);
        store_destroy(t->parts[i].store);
    }
    free(t->parts);
    free(t->part_of);
    ps_ring_free(&t->ring);
    free(t->keys_dec);
    u64map_free(&t->ver_idx);
    free(t->sparse_ver);
    if (t->rows) comm_rowset_free(t->rows);
    free(t->rows);
    free(t->applied);
    free(t->durable);
    free(t);
}

/* The filter chains and row versions of a new table. */
static int table_prepare_wire(server *s, srv_table *t)
{
    const loom_table_opts *o = &t->def.opts;
    filter_spec push, pull, keys;
    /* Both specs were checked when the definition was decoded. */
    if (filter_spec_parse(t->def.filter_push, &push, NULL, 0) ||
        filter_spec_parse(t->def.filter_pull, &pull, NULL, 0))
        return LOOM_EINVAL;
    t->pull_filtered = filter_spec_any(&pull) || pull.rows == FILTER_ROWS_SPARSE;
    t->pull_dense = pull.rows == FILTER_ROWS_DENSE;
    t->version = 1;
    if (u64map_init(&t->ver_idx, 64)) return LOOM_ENOMEM;
    for (size_t i = 0; o->storage == LOOM_DENSE && i < t->nparts; i++) {
        srv_part *p = &t->parts[i];
        p->dense_ver = calloc((size_t)(p->hi - p->lo), sizeof *p->dense_ver);
        if (!p->dense_ver) return LOOM_ENOMEM;
    }
    t->push_dec = calloc((size_t)s->num_workers, sizeof *t->push_dec);
    t->pull_enc = calloc((size_t)s->num_workers, sizeof *t->pull_enc);
    if (!t->push_dec || !t->pull_enc) return LOOM_ENOMEM;
    if (filter_spec_keys(&pull, &keys) &&
        !(t->keys_dec = calloc((size_t)s->num_workers, sizeof *t->keys_dec)))
        return LOOM_ENOMEM;
    for (int w = 0; w < s->num_workers; w++) {
        uint64_t seed = (uint64_t)loom_rank(s->node) << 32 ^ (uint64_t)w << 16 ^ 0x5eed;
        int rc = filter_chain_create(&push, FILTER_PUSH, o->type, o->width, seed, &t->push_dec[w],
                                     NULL, 0);
        if (!rc)
            rc = filter_chain_create(&pull, FILTER_PULL, o->type, o->width, seed, &t->pull_enc[w],
                                     NULL, 0);
        if (!rc && t->keys_dec)
            rc =
                filter_chain_create(&keys, FILTER_PULL, o->type, 0, seed, &t->keys_dec[w], NULL, 0);
        if (rc) return rc;
    }
    return 0;
}

/* The table's ring, and a part with rows for every range server `rank` holds. */
static int create_parts(server *s, srv_table *t, int rank)
{
    const loom_table_opts *o = &t->def.opts;
    int rc =
        ps_ring_build(&t->ring, o, s->num_servers, s->replicas ? PS_RING_VNODES : 1, s->replicas);
    if (rc) return rc;
    t->part_of = malloc(t->ring.nranges * sizeof *t->part_of);
    t->parts = calloc(t->ring.nranges, sizeof *t->parts);
    if (!t->part_of || !t->parts) return LOOM_ENOMEM;
    for (size_t rg = 0; rg < t->ring.nranges; rg++) {
        t->part_of[rg] = NO_PART;
        if (!ps_ring_holds(&t->ring, rg, rank)) continue;
        srv_part *p = &t->parts[t->nparts];
        p->range = rg;
        p->lo = (uint64_t)t->ring.start[rg];
        p->hi = t->ring.start[rg + 1];
        ps_store_spec spec = {
            .type = o->type,
            .width = o->width,
            .state_per_value = t->upd.state_per_value,
            .storage = o->storage,
            .begin = p->lo,
            .end = p->hi >> 64 ? 0 : (uint64_t)p->hi,
            .init = o->init,
            .init_a = o->init_a,
            .init_b = o->init_b,
            .init_seed = o->init_seed,
        };
        p->applied = calloc((size_t)s->num_workers, sizeof *p->applied);
        rc = p->applied ? store_create(&spec, &p->store) : LOOM_ENOMEM;
        /* Changed rows are what a checkpoint or a replication round sends. */
        if (!rc && (s->ckpt.cut || s->replicas)) rc = store_track_changes(p->store);
        if (rc) return rc;
        t->part_of[rg] = t->nparts++;
        ps_u128 rows = p->hi - p->lo;
        t->held_rows = rows > SIZE_MAX - t->held_rows ? SIZE_MAX : t->held_rows + (size_t)rows;
    }
    return 0;
}

static void on_create(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    int status = 0;
    uint32_t id = m->h.table;
    if (m->from != 0 || id >= 1u << 20 || table_of(s, id)) {
        node_drop(n, m, "unexpected TABLE_CREATE");
        return;
    }
    srv_table *t = calloc(1, sizeof *t);
    if (!t) {
        status = LOOM_ENOMEM;
        goto reply;
    }
    if (ps_def_decode(node_frame_data(m, 0), node_frame_size(m, 0), &t->def)) {
        free(t);
        node_drop(n, m, "invalid table definition");
        return;
    }
    loom_table_opts *o = &t->def.opts;
    ps_def_fix_pointers(&t->def);
    int rank = loom_rank(n);
    t->row_bytes = (size_t)o->width * loom_type_size(o->type);
    t->applied = calloc((size_t)s->num_workers, sizeof *t->applied);
    t->durable = calloc((size_t)s->num_workers, sizeof *t->durable);
    status =
        t->applied && t->durable ? updater_resolve(t->def.updater, o->type, &t->upd) : LOOM_ENOMEM;
    if (!status) status = create_parts(s, t, rank);
    /* The wire state first: restored rows get the row version of the restore. */
    if (!status) status = table_prepare_wire(s, t);
    if (!status && s->ckpt.restore) {
        status = s->ckpt.restore(s->ckpt.ctx, &t->def, t);
        for (size_t i = 0; !status && i < t->nparts; i++) store_forget_changes(t->parts[i].store);
    }
    if (status) {
        log_error("cannot create table \"%s\": %s", t->def.name, loom_strerror(status));
        table_destroy(t, s->num_workers);
        goto reply;
    }
    if (id >= s->cap) {
        uint32_t cap = s->cap ? s->cap : 16;
        while (cap <= id) cap *= 2;
        srv_table **nt = realloc(s->tables, cap * sizeof *nt);
        if (!nt) {
            table_destroy(t, s->num_workers);
            status = LOOM_ENOMEM;
            goto reply;
        }
        memset(nt + s->cap, 0, (cap - s->cap) * sizeof *nt);
        s->tables = nt;
        s->cap = cap;
    }
    s->tables[id] = t;
    comm_mgr_budget(&s->cm, o->bandwidth_mbits, node_now_ms());
    if (o->priority != LOOM_PRIORITY_NONE && o->consistency != LOOM_BSP) {
        t->rows = malloc(sizeof *t->rows);
        if (!t->rows || comm_rowset_init(t->rows, s->num_workers)) {
            free(t->rows); /* rows are then never pushed: pulls still work */
            t->rows = NULL;
        }
        comm_choice_seed(&t->choice, (uint64_t)id << 32 | (uint64_t)rank);
    }
reply:;
    msg_header h = {.type = MSG_TABLE_CREATED, .table = id, .a = (uint64_t)status};
    node_send(n, 0, &h, NULL, 0);
}

/* ---- requests ---- */

/* Check that keys (or the range [begin, begin + count) when keys is NULL)
 * lie in one range this server holds; sets *part. */
static const char *check_part(srv_table *t, const uint64_t *keys, uint64_t begin, uint64_t count,
                              srv_part **part)
{
    srv_part *p = part_of_key(t, keys ? keys[0] : begin);
    if (!p) return "key outside this server's partition";
    if (!keys && (ps_u128)begin + count > p->hi) return "range outside this server's partition";
    for (uint64_t i = 0; keys && i < count; i++)
        if (keys[i] < p->lo || (ps_u128)keys[i] >= p->hi)
            return "key outside this server's partition";
    *part = p;
    return NULL;
}

/* Check a request's keys (or range) against the partition. Sets *keys (NULL
 * for a range), *count and *part. Returns 0 or a reason to drop. */
static const char *check_keys(server *s, srv_table *t, node_msg *m, size_t keys_frame,
                              const uint64_t **keys, uint64_t *count, srv_part **part)
{
    if (m->h.flags & MSG_F_RANGE) {
        if (m->h.a >= m->h.b) return "range outside this server's partition";
        *keys = NULL;
        *count = m->h.b - m->h.a;
        return check_part(t, NULL, m->h.a, *count, part);
    }
    size_t len = node_frame_size(m, keys_frame);
    if (len == 0 || len % 8) return "key frame size is not a positive multiple of 8";
    const uint64_t *k = aligned_payload(s, m, keys_frame, 0);
    if (!k) return "out of memory";
    *count = len / 8;
    *keys = k;
    return check_part(t, k, 0, *count, part);
}

/* The planned checkpoint's clock in this run's clocks (INT64_MAX: none). */
static int64_t next_cut(const server *s)
{
    return s->ckpt.cut && s->cut_at >= 0 ? s->cut_at - s->ckpt.base : INT64_MAX;
}

/* Managed tables: rows a push is about to change, with the magnitudes of
 * their deltas against their current values (comm.h); the timer pushes them. */
static void note_changes(server *s, srv_table *t, srv_part *p, const uint64_t *keys, uint64_t begin,
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
    if (!before && t->rows->ndirty) node_timer_poke(s->node, NODE_LAYER_PS);
}

/* Apply validated delta rows of part p (keys, or the range from `begin` when
 * keys is NULL) through the table's updater, as push number `seq` of worker w. */
static int apply_rows(server *s, srv_table *t, srv_part *p, const uint64_t *keys, uint64_t begin,
                      const uint8_t *vals, uint64_t count, int w, uint64_t seq)
{
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
    if (s->replicas) repl_note_push(s, t, p, count);
    if (t->rows) note_changes(s, t, p, keys, begin, vals, (size_t)count);
    int status = 0;
    for (uint64_t i = 0; i < count && !status && (p->dense_ver || t->ver_tracked); i++)
        status = mark_changed(t, p, keys ? keys[i] : begin + i);
    if (status) return status;
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

/* Apply a validated plain push to part p. */
static int apply_push(server *s, srv_table *t, srv_part *p, node_msg *m, int w)
{
    int range = (m->h.flags & MSG_F_RANGE) != 0;
    const uint64_t *keys = range ? NULL : aligned_payload(s, m, 0, 0);
    const uint8_t *vals = aligned_payload(s, m, range ? 0 : 1, 1);
    if ((!range && !keys) || !vals) return LOOM_ENOMEM;
    uint64_t count = node_frame_size(m, range ? 0 : 1) / t->row_bytes;
    return apply_rows(s, t, p, keys, m->h.a, vals, count, w, m->h.req);
}

/* A push of clock `clock` into a BSP table waits for the clock to end everywhere. */
static int must_stage(server *s, srv_table *t, int64_t clock)
{
    return t->def.opts.consistency == LOOM_BSP && clock >= s->min_clock;
}

/* Under SSP and ASP, a push of a clock at or past the next checkpoint's cut
 * is held, unapplied and unacknowledged, until that cut is written. */
static int must_hold(server *s, srv_table *t, int64_t clock)
{
    return t->def.opts.consistency != LOOM_BSP && clock >= next_cut(s);
}

/* A push of `clock` was applied as it came (SSP, ASP): a cut planned at or
 * before that clock could no longer be exact. */
static void note_applied(server *s, int64_t clock)
{
    if (clock > s->applied_clock) s->applied_clock = clock;
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

/* Apply a staged or held push, decoded or kept as it arrived. */
static int apply_entry(server *s, srv_table *t, staged *st)
{
    srv_part *p = &t->parts[st->part];
    return st->keys ? apply_rows(s, t, p, st->keys, 0, st->vals, st->n, st->worker, st->m.h.req)
                    : apply_push(s, t, p, &st->m, st->worker);
}

/* What an acknowledgement of push `req` says was applied from worker w: a
 * push sent again after a failover may be older than others applied here. */
static uint64_t applied_upto(server *s, srv_table *t, int w, uint64_t req)
{
    return s->replicas && t->applied[w] > req ? req : t->applied[w];
}

static void ack_now(server *s, srv_table *t, uint32_t to, uint32_t table, uint64_t req, int status,
                    uint64_t applied)
{
    int w = worker_rank(s, to);
    msg_header h = {.type = MSG_PUSH_ACK,
                    .table = table,
                    .req = req,
                    .clock = s->replicas && w >= 0 ? (int64_t)t->durable[w] : 0,
                    .a = (uint64_t)status,
                    .b = applied};
    node_send(s->node, to, &h, NULL, 0);
}

/* Hold the acknowledgement of push m (applied: what it says was applied
 * from its worker) until the next round is acknowledged (rounds_done).
 * Returns 0 when there is no memory to hold it. */
static int repl_hold_ack(server *s, const node_msg *m, uint64_t applied, int status)
{
    held_ack *a = calloc(1, sizeof *a);
    if (!a) return 0;
    *a = (held_ack){m->from, m->h.table, m->h.req, applied, s->rounds_cut + 1, status, NULL};
    if (s->acks_tail)
        s->acks_tail->next = a;
    else
        s->acks = a;
    s->acks_tail = a;
    s->repl_due = 1;
    node_timer_poke(s->node, NODE_LAYER_PS);
    return 1;
}

/* Acknowledge a push. With replicas, a push applied at once (every table but
 * BSP ones) is acknowledged only after the replication round that carries its
 * rows (so an acknowledged push survives this server); acknowledgements keep
 * their order, so every one of such a table waits its turn. A BSP push is
 * acknowledged on arrival, as staged: its worker keeps it until an
 * acknowledgement says the replicas hold it (h.clock). */
static void send_push_ack(server *s, srv_table *t, node_msg *m, int w, int status)
{
    if (s->replicas && t->def.opts.consistency != LOOM_BSP) {
        if (repl_hold_ack(s, m, applied_upto(s, t, w, m->h.req), status)) return;
        status = status ? status : LOOM_ENOMEM; /* said at once rather than never */
    }
    ack_now(s, t, m->from, m->h.table, m->h.req, status, applied_upto(s, t, w, m->h.req));
}

/* Tell worker w to send again every push parked here (PARKED req 0); it
 * owes an acknowledgement (gated ranges wait for it). */
static void tell_parked(server *s, int w)
{
    s->parked_from[w] = 0;
    s->hb_owed[w] = s->hb_gen;
    msg_header h = {.type = MSG_PARKED, .a = s->hb_gen, .b = ++s->wparked[w].told};
    node_send(s->node, node_worker_id(s->num_servers, w), &h, NULL, 0);
}

/* A push for a fenced range, or behind a parked one (behind_parked):
 * neither applied nor acknowledged. Its worker keeps it until this server
 * says to send it again (PARKED with req 0) or a handback moves the range
 * to another master (docs/FAULTS.md). It is remembered until it comes
 * back, or until the worker acknowledges the PARKED req 0 that sends it
 * again (to this server or another master): until then no later push of
 * the worker to the part is applied here (behind_parked). */
static void park_push(server *s, uint32_t to, int w, uint32_t table, size_t part, uint64_t seq)
{
    s->parked_from[w] = 1;
    worker_parked *wp = &s->wparked[w];
    size_t i = 0;
    while (i < wp->n && !(wp->v[i].table == table && wp->v[i].part == part && wp->v[i].seq == seq))
        i++;
    if (i == wp->n && wp->n == wp->cap) {
        size_t cap = wp->cap ? 2 * wp->cap : 16;
        parked_seq *v = realloc(wp->v, cap * sizeof *v);
        if (v) {
            wp->v = v;
            wp->cap = cap;
        } else {
            log_error("out of memory noting a parked push of worker %d: a later push may be "
                      "applied before it, and it then taken for a duplicate",
                      w);
        }
    }
    if (i < wp->cap) {
        wp->v[i] = (parked_seq){table, part, seq, wp->told + 1};
        if (i == wp->n) wp->n++;
    }
    msg_header h = {.type = MSG_PARKED, .table = table, .req = seq};
    node_send(s->node, to, &h, NULL, 0);
    /* Parked behind an older one in a part open here: sent again at the
     * next PARKED req 0, now unless one is unanswered (on_handback_ack). */
    uint8_t fence = table_of(s, table)->parts[part].fence;
    if (fence != PART_FENCED && fence != PART_INCOMING && wp->told == wp->acked) tell_parked(s, w);
}

/* Whether push seq of worker w to an open or gated part must be parked too:
 * a range applies a worker's push only if its sequence is newer than the
 * last it applied from that worker (apply_rows), so a push parked here and
 * still to come back would look applied once a later one was. So a later
 * push of the worker to the part is parked while an older one is out
 * (park_push has the worker send it again). The oldest parked one coming
 * back is forgotten, and applied. */
static int behind_parked(server *s, int w, uint32_t table, size_t part, uint64_t seq)
{
    worker_parked *wp = &s->wparked[w];
    size_t back = SIZE_MAX;
    for (size_t i = 0; i < wp->n; i++) {
        if (wp->v[i].table != table || wp->v[i].part != part) continue;
        if (wp->v[i].seq < seq) return 1;
        if (wp->v[i].seq == seq) back = i;
    }
    if (back != SIZE_MAX) wp->v[back] = wp->v[--wp->n];
    return 0;
}

/* Whether push seq of worker w to part p (index `part` of table `table`)
 * must be parked: its range is fenced or incoming, or a push of the worker
 * to the part is parked before it. */
static int must_park(server *s, srv_part *p, int w, uint32_t table, size_t part, uint64_t seq)
{
    return p->fence == PART_FENCED || p->fence == PART_INCOMING ||
           behind_parked(s, w, table, part, seq);
}

static void on_push(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    srv_table *t = table_of(s, m->h.table);
    int w = worker_rank(s, m->from);
    int range = (m->h.flags & MSG_F_RANGE) != 0;
    if (!t || w < 0 || m->nframes != (range ? 1u : 2u)) {
        node_drop(n, m, "unknown table, sender or frame count");
        return;
    }
    const uint64_t *keys;
    uint64_t count;
    srv_part *p;
    const char *bad = check_keys(s, t, m, 0, &keys, &count, &p);
    if (!bad && (count > SIZE_MAX / t->row_bytes ||
                 node_frame_size(m, range ? 0 : 1) != count * t->row_bytes))
        bad = "value frame size does not match the keys";
    if (bad) {
        node_drop(n, m, bad);
        return;
    }
    size_t part = (size_t)(p - t->parts);
    if (must_park(s, p, w, m->h.table, part, m->h.req)) {
        park_push(s, m->from, w, m->h.table, part, m->h.req);
        return;
    }
    int status = 0;
    int hold = must_hold(s, t, m->h.clock);
    if (hold || must_stage(s, t, m->h.clock)) {
        staged *st = hold ? enqueue(&t->held_head, &t->held_tail, w, part)
                          : enqueue(&t->staged_head, &t->staged_tail, w, part);
        if (!st) {
            status = LOOM_ENOMEM;
        } else {
            node_msg_keep(&st->m, m);
            if (hold) return; /* acknowledged once applied, after the cut */
        }
    } else {
        status = apply_push(s, t, p, m, w);
        note_applied(s, m->h.clock);
    }
    send_push_ack(s, t, m, w, status);
}

/* A push encoded by the worker's push chain: decoded by this server's chain
 * for that worker (every one, in order, so that the key caches stay alike),
 * checked like a plain push, then applied or staged. A message the chain
 * refuses is dropped and counted, and its acknowledgement carries the error,
 * so that the worker's push fails instead of waiting. */
static void on_push_enc(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    srv_table *t = table_of(s, m->h.table);
    int w = worker_rank(s, m->from);
    if (!t || w < 0 || m->nframes != 1 || (m->h.flags & MSG_F_RANGE)) {
        node_drop(n, m, "unknown table, sender or frame count");
        return;
    }
    int hold = 0;
    uint64_t *keys, digest;
    void *vals;
    size_t count;
    int status = filter_chain_decode(t->push_dec[w], node_frame_data(m, 0), node_frame_size(m, 0),
                                     t->held_rows, &keys, &vals, &count, &digest);
    const char *bad = status ? "filtered push refused by its filter chain" : NULL;
    srv_part *p = NULL;
    if (!bad && count) bad = check_part(t, keys, 0, count, &p);
    if (bad) {
        node_drop(n, m, bad);
        if (!status) status = LOOM_EPROTO;
    } else if (p && must_park(s, p, w, m->h.table, (size_t)(p - t->parts), m->h.req)) {
        park_push(s, m->from, w, m->h.table, (size_t)(p - t->parts), m->h.req);
        free(keys);
        free(vals);
        return;
    } else if ((hold = must_hold(s, t, m->h.clock)) || must_stage(s, t, m->h.clock)) {
        size_t part = p ? (size_t)(p - t->parts) : 0; /* an empty push touches no part */
        staged *st = hold ? enqueue(&t->held_head, &t->held_tail, w, part)
                          : enqueue(&t->staged_head, &t->staged_tail, w, part);
        if (st) {
            st->keys = keys;
            st->vals = vals;
            st->n = count;
            st->m.h = m->h;       /* its clock and sequence number */
            st->m.from = m->from; /* whom a held push is acknowledged to */
            if (hold) return;     /* acknowledged once applied, after the cut */
            keys = NULL;
            vals = NULL;
        } else {
            status = LOOM_ENOMEM;
        }
    } else {
        status = apply_rows(s, t, p, keys, 0, vals, count, w, m->h.req);
        note_applied(s, m->h.clock);
    }
    free(keys);
    free(vals);
    send_push_ack(s, t, m, w, status);
}

/* After a cut: apply, in arrival order, and acknowledge the held pushes that
 * the next cut does not hold back. */
static void release_held(server *s, srv_table *t)
{
    int64_t cut = next_cut(s);
    staged **pp = &t->held_head, *last = NULL;
    while (*pp) {
        staged *st = *pp;
        if (st->m.h.clock >= cut) {
            last = st;
            pp = &st->next;
            continue;
        }
        *pp = st->next;
        note_applied(s, st->m.h.clock);
        send_push_ack(s, t, &st->m, st->worker, apply_entry(s, t, st));
        free_entry(st);
    }
    t->held_tail = last;
}

/* A clock ended everywhere: apply the BSP pushes of the clocks now complete. */
static void apply_staged(server *s, srv_table *t)
{
    staged **pp = &t->staged_head, *last = NULL;
    while (*pp) {
        staged *st = *pp;
        if (st->m.h.clock >= s->min_clock) {
            last = st;
            pp = &st->next;
            continue;
        }
        *pp = st->next;
        note_applied(s, st->m.h.clock);
        if (apply_entry(s, t, st))
            log_error("out of memory applying a push to table \"%s\"", t->def.name);
        free_entry(st);
    }
    t->staged_tail = last;
}

/* A buffer for a reply of `bytes`: the spare one if it fits without
 * wasting much, else a new one. */
static reply_buf *reply_buf_get(server *s, size_t bytes)
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
static const char *check_pull(server *s, srv_table *t, node_msg *m, const pull_keys *dk,
                              const uint64_t **keys, uint64_t *count, srv_part **part)
{
    const char *bad;
    if (dk->keys) {
        *keys = dk->keys;
        *count = dk->n;
        bad = dk->n ? check_part(t, dk->keys, 0, dk->n, part) : "empty key list";
    } else {
        bad = check_keys(s, t, m, 0, keys, count, part);
    }
    /* The reply is one frame: within the job's limit (clients split larger pulls). */
    if (!bad && *count > node_max_payload(s->node) / t->row_bytes) bad = "pull too large";
    if (!bad && m->h.type == MSG_PULL_SINCE && node_frame_size(m, 1) != (*count + 7) / 8)
        bad = "held-rows bitmap does not match the keys";
    return bad;
}

static void free_data(void *data, void *hint)
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
    if (since) track_versions(t);
    size_t n = 0;
    for (size_t i = 0; i < count; i++) {
        uint64_t key = keys ? keys[i] : m->h.a + i;
        if (since && reader_holds(m, i) && row_version(t, p, key) <= m->h.a) continue;
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
    node_frame f[2] = {{version, 8, NULL, NULL, 1}, {enc, len, free_data, NULL, 0}};
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
static void refuse_pull(server *s, srv_table *t, node_msg *m, int w, int status)
{
    msg_header h = pull_reply_header(s, t, m, w, status);
    node_send(s->node, m->from, &h, NULL, 0);
}

/* Refuse a pull of a range this server handed back (LOOM_ESTATE: ask its
 * master). A worker that takes this server for the range's master anyway
 * (it heard of a death that makes this server master again before this
 * server did) keeps the pull until told to ask again: so the worker is
 * told, as one whose push was parked here, when this server reopens the
 * range (reopen(), PARKED with req 0). Without that, the pull would wait
 * for a handback that may never come. */
static void refuse_handed_back(server *s, srv_table *t, node_msg *m, int w)
{
    s->parked_from[w] = 1;
    refuse_pull(s, t, m, w, LOOM_ESTATE);
}

/* Answer a pull that is allowed to proceed (dk: its decoded keys, if encoded). */
static void answer_pull(server *s, srv_table *t, node_msg *m, int w, const pull_keys *dk)
{
    const uint64_t *keys;
    uint64_t count;
    srv_part *p;
    const char *bad = check_pull(s, t, m, dk, &keys, &count, &p);
    if (bad) {
        node_drop(s->node, m, bad);
        return;
    }
    for (uint64_t i = 0; t->rows && i < count; i++) /* without memory: only not pushed to */
        comm_rowset_subscribe(t->rows, keys ? keys[i] : m->h.a + i, w);
    size_t bytes = (size_t)count * t->row_bytes;
    reply_buf *b = reply_buf_get(s, bytes);
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

static void on_pull(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    srv_table *t = table_of(s, m->h.table);
    int w = worker_rank(s, m->from);
    int range = (m->h.flags & MSG_F_RANGE) != 0;
    unsigned frames = range ? 0u : m->h.type == MSG_PULL_SINCE ? 2u : 1u;
    if (!t || w < 0 || m->nframes != frames || (range && m->h.type == MSG_PULL_SINCE)) {
        node_drop(n, m, "unknown table, sender or frame count");
        return;
    }
    /* Encoded keys are decoded now, in arrival order: the key cache follows
     * the order the worker's chain encoded them in. */
    pull_keys dk = {NULL, 0};
    if (m->h.flags & MSG_F_KEYS_ENC) {
        int rc = decode_pull_keys(s, t, m, w, &dk);
        if (rc) {
            refuse_pull(s, t, m, w, rc);
            return;
        }
    }
    const uint64_t *keys;
    uint64_t count;
    srv_part *p;
    const char *bad = check_pull(s, t, m, &dk, &keys, &count, &p);
    if (!bad && p->fence == PART_FENCED && !is_master(s, t, p)) { /* handed back */
        refuse_handed_back(s, t, m, w);
        free(dk.keys);
        return;
    }
    if (!bad && !p->fence && m->h.clock <= s->min_clock) {
        answer_pull(s, t, m, w, &dk);
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

static void free_deferred(deferred *d)
{
    free(d->dk.keys);
    node_msg_release(&d->m);
    free(d);
}

static void release_deferred(server *s)
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
        srv_table *t = table_of(s, d->m.h.table);
        answer_pull(s, t, &d->m, worker_rank(s, d->m.from), &d->dk);
        free_deferred(d);
    }
}

static void advance(server *s);
static void replicate(server *s);
static void gate_check(server *s);
static void reopen(server *s);

static void on_clock(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    int w = worker_rank(s, m->from), rank;
    if (m->from == 0 && m->h.a <= UINT32_MAX &&
        node_peer_role(n, (uint32_t)m->h.a, &rank) == LOOM_WORKER && m->h.clock == PS_CLOCK_DONE) {
        /* The scheduler relays the end of a worker that finished before this
         * server (a replacement) joined, and will never tell it itself. */
        if (s->lost[rank]) return;
        w = rank;
    }
    if (w < 0 || m->h.clock < s->clock[w]) {
        node_drop(n, m, "clock from a non-worker or going backwards");
        return;
    }
    s->clock[w] = m->h.clock;
    if (m->h.b > s->handled[w] && m->h.b <= UINT32_MAX) {
        s->handled[w] = (uint32_t)m->h.b;
        s->handled_since[w] = m->h.clock;
    }
    advance(s);
    if (s->clock[w] == PS_CLOCK_DONE) gate_check(s);
}

/* Drop worker w's entries of a staged or held list whose clock is `from` or
 * later: the clock it did not finish. */
static void drop_unfinished(staged **head, staged **tail, int w, int64_t from)
{
    staged **pp = head, *last = NULL;
    while (*pp) {
        staged *st = *pp;
        if (st->worker != w || st->m.h.clock < from) {
            last = st;
            pp = &st->next;
            continue;
        }
        *pp = st->next;
        free_entry(st);
    }
    *tail = last;
}

/* The job goes on without a worker (--on-worker-failure continue): every
 * clock it finished stays (its CLOCK came after that clock's pushes on the
 * same connection, so they are all here); what it pushed for the clock it
 * did not finish is dropped where it still can be (BSP's staged pushes, and
 * pushes held past a checkpoint's cut); its pulls are forgotten; the min
 * clock stops waiting for it. */
static void on_worker_lost(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    int w = m->h.a <= UINT32_MAX ? worker_rank(s, (uint32_t)m->h.a) : -1;
    if (w < 0) {
        node_drop(n, m, "WORKER_LOST naming no live worker");
        return;
    }
    s->lost[w] = 1;
    for (uint32_t i = 0; i < s->cap; i++) {
        srv_table *t = s->tables[i];
        if (!t) continue;
        drop_unfinished(&t->staged_head, &t->staged_tail, w, s->clock[w]);
        drop_unfinished(&t->held_head, &t->held_tail, w, s->clock[w]);
    }
    for (deferred **pp = &s->waiting; *pp;) {
        deferred *d = *pp;
        if (d->m.from != (uint32_t)m->h.a) {
            pp = &d->next;
            continue;
        }
        *pp = d->next;
        s->nwaiting--;
        free_deferred(d);
    }
    log_warn("worker %d is lost: the job goes on without it after its clock %" PRId64, w,
             s->clock[w]);
    s->clock[w] = PS_CLOCK_DONE;
    advance(s);
    gate_check(s);
}

/* Whether a cut at `clock` holds every push of the clocks before it in the
 * ranges this server took over: every worker (not lost) handled the latest
 * death, so sent again what the dead server lacked, before the CLOCK that
 * ended its clock clock-1 (the same connection keeps them in order). The
 * deaths are counted over the whole job, replaced servers' too, as the
 * workers count them: a replacement coming back does not make an earlier
 * death the latest again. A worker whose first CLOCK saying so is the one
 * of a newer death may have handled this one earlier: skipped all the same,
 * which is safe. */
static int cut_settled(const server *s, int64_t clock)
{
    uint32_t moves = s->deaths + s->handbacks; /* a handback moves ranges too */
    if (!s->took_over || !moves) return 1;
    for (int w = 0; w < s->num_workers; w++)
        if (!s->lost[w] && (s->handled[w] < moves || s->handled_since[w] > clock)) return 0;
    return 1;
}

/* Cut the planned checkpoint now: the min clock is its clock, every push of
 * an earlier clock is applied and none of a later one. */
static void cut_now(server *s)
{
    int64_t job = s->cut_at;
    s->cut_at = -1;
    /* Rows' change marks are the replication rounds' too, and a cut reads
     * (and clears) them: the changes go to the replicas first, then the
     * part is written whole. */
    if (s->replicas && s->repl_due) replicate(s);
    if (s->fencing)
        s->ckpt.skip(s->ckpt.ctx, job, job, "ranges of this server are being handed back");
    else if (cut_settled(s, job - s->ckpt.base))
        s->ckpt.cut(s->ckpt.ctx, job, s->replicas != 0 || s->cut_full, s->deaths, s->handbacks);
    else
        s->ckpt.skip(s->ckpt.ctx, job, job,
                     "a worker ended the clock before it before sending again what a dead "
                     "server's replicas lacked");
}

/* A worker's clock moved: apply, cut and answer what the new min clock allows. */
static void advance(server *s)
{
    int64_t min = PS_CLOCK_DONE;
    for (int i = 0; i < s->num_workers; i++)
        if (s->clock[i] < min) min = s->clock[i];
    if (min > s->min_clock) {
        int64_t cut = next_cut(s);
        if (s->min_clock != PS_CLOCK_DONE) s->last_min = s->min_clock;
        s->min_clock = min;
        if (min != PS_CLOCK_DONE) s->last_min = min;
        for (uint32_t i = 0; i < s->cap; i++)
            if (s->tables[i] && s->tables[i]->staged_head) apply_staged(s, s->tables[i]);
        if (s->repl_due) node_timer_poke(s->node, NODE_LAYER_PS); /* a clock's rows to replicate */
        if (cut != INT64_MAX && min == cut) {
            cut_now(s);
        } else if (cut != INT64_MAX && min > cut) {
            s->cut_at = -1;
            s->ckpt.skip(s->ckpt.ctx, s->ckpt.base + cut,
                         min == PS_CLOCK_DONE ? -1 : s->ckpt.base + min,
                         min == PS_CLOCK_DONE ? "every worker finished before it"
                                              : "the min clock went past it at once");
        }
        for (uint32_t i = 0; i < s->cap; i++)
            if (s->tables[i] && s->tables[i]->held_head) release_held(s, s->tables[i]);
        release_deferred(s);
    }
}

/* Rows as checkpoints and replication send them: per row [u64 key][values]
 * [updater state]. */
typedef struct row_writer {
    blob_writer *w;
    size_t row_bytes, state_bytes;
    uint64_t rows;
} row_writer;

static int put_row(void *ctx, uint64_t key, const void *row, const void *state)
{
    row_writer *r = ctx;
    blob_put_u64(r->w, key);
    blob_put_bytes(r->w, row, r->row_bytes);
    if (r->state_bytes) blob_put_bytes(r->w, state, r->state_bytes);
    r->rows++;
    return r->w->bad ? LOOM_ENOMEM : 0;
}

/* ---- replication (ring.h; docs/FAULTS.md) ----
 *
 * With replicas, the master of a range sends, in rounds, the rows of the
 * range that changed since the previous round (values and updater state,
 * REPL) to the live servers after it on the ring; they overwrite their copy
 * and acknowledge (REPL_ACK). That is replication after aggregation: a round
 * carries each changed row once, however many pushes changed it since the
 * last round (BSP: all of a clock's pushes, applied at once when the clock
 * ends everywhere; other tables: what arrived since the last round). A round
 * is cut on the I/O thread's timer, which runs once the sockets are drained,
 * so everything that arrived meanwhile goes in one round. Copying states,
 * not deltas, makes a replica's rows equal to the master's for any updater,
 * and a repeated round harmless.
 *
 * A round also carries, per range, the last push sequence of each worker
 * applied to it: after a failover the new master applies a push a worker
 * sends again only if its sequence is newer (ps_server_fail). When every
 * REPL of a round (and of every earlier one) is acknowledged, the pushes
 * applied before its cut are held by the replicas: their held
 * acknowledgements go out, and `durable` (what acknowledgements report in
 * h.clock) moves to what t->applied was at the cut. */

static void free_round(repl_round *r)
{
    free(r->waiting);
    free(r->applied);
    free(r);
}

/* Tell the scheduler of the replacements whose full copies went in a round
 * that is now complete (`done`): they hold this server's ranges whole. */
static void copies_done(server *s, uint64_t done)
{
    for (int h = 0; h < s->num_servers; h++) {
        if (s->copy[h] != 2 || s->copy_round[h] > done) continue;
        s->copy[h] = 0;
        msg_header m = {.type = MSG_REJOIN_COPIED,
                        .req = s->copy_gen[h],
                        .a = node_server_id(s->num_servers, h)};
        node_send(s->node, 0, &m, NULL, 0);
    }
}

/* Complete the rounds at the head whose REPLs are all acknowledged, then send
 * the acknowledgements they held. */
static void rounds_done(server *s)
{
    uint64_t done = s->rounds ? s->rounds->round - 1 : s->rounds_cut;
    while (s->rounds && !s->rounds->nwaiting) {
        repl_round *r = s->rounds;
        for (uint32_t id = 0; id < r->cap && id < s->cap; id++)
            for (int w = 0; s->tables[id] && w < s->num_workers; w++) {
                uint64_t a = r->applied[(size_t)id * (size_t)s->num_workers + (size_t)w];
                if (a > s->tables[id]->durable[w]) s->tables[id]->durable[w] = a;
            }
        done = r->round;
        s->rounds = r->next;
        if (!s->rounds) s->rounds_tail = NULL;
        free_round(r);
    }
    while (s->acks && s->acks->round <= done) {
        held_ack *a = s->acks;
        s->acks = a->next;
        if (!s->acks) s->acks_tail = NULL;
        srv_table *t = table_of(s, a->table);
        if (t) ack_now(s, t, a->to, a->table, a->req, a->status, a->applied);
        free(a);
    }
    copies_done(s, done);
    if (s->hb_round && done >= s->hb_round) { /* the fenced ranges' last round is held */
        s->hb_round = 0;
        msg_header h = {.type = MSG_HANDBACK_ACK, .req = s->hb_gen};
        node_send(s->node, 0, &h, NULL, 0);
    }
}

/* Send part p's changed rows to its live replicas as part of round r; all its
 * rows when a replacement among them is due its full copy. */
static int replicate_part(server *s, uint32_t id, srv_table *t, srv_part *p, repl_round *r)
{
    int full = 0;
    for (int i = 0; i <= s->replicas; i++)
        full |= s->copy[ps_ring_holder(&t->ring, p->range, i)] == 1;
    blob_writer w = {0};
    row_writer rw = {&w, t->row_bytes, store_state_bytes(p->store), 0};
    int rc = store_for_each(p->store, !full, put_row, &rw);
    if (rc || !rw.rows) {
        free(w.buf);
        return rc;
    }
    size_t alen = (size_t)s->num_workers * 8;
    for (int i = 0; i <= s->replicas && !rc; i++) {
        int h = ps_ring_holder(&t->ring, p->range, i);
        if (!repl_target(s, h)) continue;
        uint8_t *applied = malloc(alen), *rows = malloc(w.len);
        if (!applied || !rows) {
            free(applied);
            free(rows);
            rc = LOOM_ENOMEM;
            break;
        }
        for (int k = 0; k < s->num_workers; k++) msg_store_u64(applied + 8 * k, p->applied[k]);
        memcpy(rows, w.buf, w.len);
        msg_header hd = {
            .type = MSG_REPL, .table = id, .req = r->round, .a = p->range, .b = rw.rows};
        node_frame f[2] = {{applied, alen, free_data, NULL, 0}, {rows, w.len, free_data, NULL, 0}};
        r->waiting[h]++;
        r->nwaiting++;
        node_count(s->node, NODE_REPLICATED_BYTES, MSG_HEADER_SIZE + alen + w.len);
        s->repl_bytes += MSG_HEADER_SIZE + alen + w.len;
        s->repl_rows += rw.rows;
        s->repl_msgs++;
        node_send(s->node, node_server_id(s->num_servers, h), &hd, f, 2);
    }
    free(w.buf);
    return rc;
}

/* Cut a replication round: every changed row of every range this server is
 * master of goes to the range's live replicas. */
static void replicate(server *s)
{
    s->repl_due = 0;
    repl_round *r = calloc(1, sizeof *r);
    size_t W = (size_t)s->num_workers;
    if (r) {
        r->waiting = calloc((size_t)s->num_servers, sizeof *r->waiting);
        r->applied = calloc(s->cap ? (size_t)s->cap * W : 1, sizeof *r->applied);
    }
    if (!r || !r->waiting || !r->applied) {
        if (r) free_round(r);
        s->repl_due = 1; /* try again on the next tick */
        return;
    }
    r->round = ++s->rounds_cut;
    r->cap = s->cap;
    int rc = 0;
    for (uint32_t id = 0; id < s->cap; id++) {
        srv_table *t = s->tables[id];
        if (!t) continue;
        memcpy(r->applied + (size_t)id * W, t->applied, W * sizeof *t->applied);
        for (size_t i = 0; i < t->nparts && !rc; i++)
            if (live_replicas(s, t, &t->parts[i])) rc = replicate_part(s, id, t, &t->parts[i], r);
    }
    if (rc) log_error("replication round %" PRIu64 ": %s", r->round, loom_strerror(rc));
    for (int h = 0; h < s->num_servers && !rc; h++)
        if (s->copy[h] == 1) {
            s->copy[h] = 2;
            s->copy_round[h] = r->round;
        }
    if (s->rounds_tail)
        s->rounds_tail->next = r;
    else
        s->rounds = r;
    s->rounds_tail = r;
    rounds_done(s);
}

/* A replica: the master's changed rows of a range it holds a copy of. */
static void on_repl(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    srv_table *t = table_of(s, m->h.table);
    int from;
    if (!t || node_peer_role(n, m->from, &from) != LOOM_SERVER || m->h.a >= t->ring.nranges ||
        t->part_of[m->h.a] == NO_PART || !ps_ring_holds(&t->ring, (size_t)m->h.a, from) ||
        node_frame_size(m, 0) != (size_t)s->num_workers * 8) {
        node_drop(n, m, "replication of a range this server does not replicate");
        return;
    }
    srv_part *p = &t->parts[t->part_of[m->h.a]];
    size_t state_bytes = store_state_bytes(p->store), per = 8 + t->row_bytes + state_bytes;
    const uint8_t *rows = node_frame_data(m, 1);
    if (m->h.b == 0 || node_frame_size(m, 1) / per != m->h.b || node_frame_size(m, 1) % per) {
        node_drop(n, m, "replicated rows do not match the table's rows");
        return;
    }
    for (uint64_t i = 0; i < m->h.b; i++) {
        uint64_t key = msg_load_u64(rows + i * per);
        if (key < p->lo || (ps_u128)key >= p->hi) {
            node_drop(n, m, "replicated row outside its range");
            return;
        }
    }
    t->version++;
    for (uint64_t i = 0; i < m->h.b; i++) {
        const uint8_t *r = rows + i * per;
        uint64_t key = msg_load_u64(r);
        void *state;
        void *row = store_row(p->store, key, &state);
        if (!row || mark_changed(t, p, key)) {
            log_error("out of memory holding a replica of table \"%s\"", t->def.name);
            return; /* unacknowledged: the master's round never completes */
        }
        memcpy(row, r + 8, t->row_bytes);
        if (state_bytes) memcpy(state, r + 8 + t->row_bytes, state_bytes);
    }
    const uint8_t *applied = node_frame_data(m, 0);
    for (int w = 0; w < s->num_workers; w++) {
        uint64_t a = msg_load_u64(applied + 8 * w);
        if (a > p->applied[w]) p->applied[w] = a;
    }
    store_forget_changes(p->store); /* a copy: nothing of it to replicate on */
    msg_header h = {.type = MSG_REPL_ACK, .table = m->h.table, .req = m->h.req};
    node_send(n, m->from, &h, NULL, 0);
}

static void on_repl_ack(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    int from;
    repl_round *r = s->rounds;
    while (r && r->round != m->h.req) r = r->next;
    if (node_peer_role(n, m->from, &from) != LOOM_SERVER || !r || !r->waiting[from]) {
        node_drop(n, m, "acknowledgement of no replication");
        return;
    }
    r->waiting[from]--;
    r->nwaiting--;
    rounds_done(s);
}

/* The node's failover hook (node_set_failover): server `id` died. The ranges
 * it was master of now have the first live replica as master (ring.h); this
 * server takes pushes and pulls for every range it holds, so nothing changes
 * here but the rounds, which no longer wait for the dead server. */
static int server_failover(loom_node *n, void *ctx, uint32_t id)
{
    server *s = ctx;
    if (!ps_survives(n, s->replicas, s->dead, id)) return 0;
    s->deaths++;
    int d;
    node_peer_role(n, id, &d);
    for (repl_round *r = s->rounds; r; r = r->next) {
        r->nwaiting -= r->waiting[d];
        r->waiting[d] = 0;
    }
    size_t took = 0;
    for (uint32_t i = 0; i < s->cap; i++)
        for (size_t j = 0; s->tables[i] && j < s->tables[i]->nparts; j++) {
            srv_table *t = s->tables[i];
            took +=
                ps_ring_holder(&t->ring, t->parts[j].range, 0) == d &&
                ps_ring_master(&t->ring, t->parts[j].range, s->dead, s->returned) == loom_rank(n);
        }
    s->fed[d] = s->copy[d] = 0;
    log_warn("server %d died: this server is now master of %zu of its ranges", d, took);
    if (took) s->took_over = 1;
    /* A fence in progress is off (the registry aborts it); a range handed
     * back to the dead server comes back here if this is its master again. */
    s->fencing = 0;
    s->hb_round = 0;
    reopen(s);
    rounds_done(s);
    return 1;
}

/* ---- a replacement (docs/FAULTS.md, "A replacement server") ----
 *
 * A process that takes a dead server's rank (NODE_REJOINED, to everyone and
 * to itself) is JOINING: it creates the tables (TABLE_CREATE from the
 * registry), then every live server, asked by REJOIN_COPY, sends it in its
 * next round all rows of every range it is master of that the newcomer
 * holds, and its later rounds as to any replica; once that round is
 * acknowledged it says so (REJOIN_COPIED). When all have, the registry
 * tells everyone (REJOIN_READY): the newcomer is BACK, a full replica, and
 * the master of a range once the range's UP holders are dead. No range moves
 * when it comes back, so no push is redirected. */

static int server_rank_of(loom_node *n, uint64_t id, int *rank)
{
    return id <= UINT32_MAX && node_peer_role(n, (uint32_t)id, rank) == LOOM_SERVER;
}

static void server_rejoin(loom_node *n, void *ctx, uint32_t id)
{
    server *s = ctx;
    int d;
    if (!server_rank_of(n, id, &d)) return;
    s->dead[d] = PS_JOINING;
    s->fed[d] = s->copy[d] = 0;
}

static void on_rejoin_copy(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    int d;
    if (!server_rank_of(n, m->h.a, &d) || d == loom_rank(n) || s->dead[d] != PS_JOINING) {
        node_drop(n, m, "REJOIN_COPY naming no joining server");
        return;
    }
    s->fed[d] = 1;
    s->copy[d] = 1;
    s->copy_gen[d] = m->h.req;
    s->repl_due = 1;
    node_timer_poke(n, NODE_LAYER_PS);
}

/* REJOIN_READY: server d is BACK. A replacement also hears it, after its
 * roster, for each server that came back before it joined (UP to it so far). */
static void on_rejoin_ready(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    int d;
    if (!server_rank_of(n, m->h.a, &d) || (s->dead[d] != PS_JOINING && s->dead[d] != PS_UP)) {
        node_drop(n, m, "REJOIN_READY naming no joining server");
        return;
    }
    if (m->h.req == 0 || m->h.req > UINT32_MAX) {
        node_drop(n, m, "REJOIN_READY without the order of the return");
        return;
    }
    s->returned[d] = (uint32_t)m->h.req;
    s->dead[d] = PS_BACK;
    if (d != loom_rank(n)) return;
    /* A replacement learned only the deaths since it joined: REJOIN_READY
     * tells it the job's count (h.b), which its checkpoint parts report and
     * its cuts compare with the workers' CLOCKs once it is master of
     * anything, which it is not before now (ring.h). */
    s->deaths = m->h.b <= UINT32_MAX ? (uint32_t)m->h.b : UINT32_MAX;
    s->handbacks = m->h.clock > 0 && m->h.clock <= UINT32_MAX ? (uint32_t)m->h.clock : 0;
    log_info("this server holds full copies of its ranges again");
}

/* ---- handback (docs/FAULTS.md, "Taking the ranges back") ----
 *
 * Once a replacement is BACK, the registry hands it back the ranges it
 * would be master of if it were UP (ring.h: the ranges whose holders before
 * it on the ring are all dead). In two steps:
 *
 * 1. Fence (HANDBACK b = 0, to every live server). Each such range's master
 *    freezes it: it applies nothing more to it, parks the pushes it staged
 *    or held for it and every later one (PARKED to their workers, which keep
 *    them), and holds its pulls; then it cuts a replication round, which
 *    carries the range's last changes to the replacement, and answers
 *    (HANDBACK_ACK) once that round is acknowledged. The replacement marks
 *    the ranges incoming: it parks their pushes and holds their pulls.
 * 2. Commit (HANDBACK b = 1, to every node, once every live server
 *    answered). The replacement is UP, and every node computes the new
 *    masters the same way. Each worker sends the replacement every push it
 *    holds for a range that moved, parked or not, with its sequence number
 *    (the replacement holds the rows and each worker's last applied
 *    sequence, so a push it already holds is not applied twice), asks it
 *    again every pull waiting at the old master, and acknowledges
 *    (HANDBACK_ACK). The ranges are gated at the replacement: pushes are
 *    applied, but pulls are held until every worker has acknowledged, when
 *    it holds every push of theirs, so a BSP or SSP read is exact. The old
 *    master parks what still comes for the ranges, and answers their pulls
 *    with LOOM_ESTATE, on which the worker asks the new master.
 *
 * A server death, or a replacement joining, before the commit aborts the
 * handback (HANDBACK b = 2; a failover does it too): a fenced range opens
 * where this server is its master, gated until the workers whose pushes
 * were parked here have sent them again (PARKED with req 0, answered by
 * HANDBACK_ACK); the registry tries again later. A range taken back comes
 * back the same way if the replacement dies.
 *
 * Nothing acknowledged is lost: a parked push was not acknowledged, or, if
 * staged under BSP, its worker learns that it was parked before any later
 * acknowledgement could let it forget it; a range's rows move only
 * through an acknowledged replication round; and a parked push is never
 * taken for a duplicate when it comes back, since no later push of its
 * worker to its range is applied here before (behind_parked). */

/* Which server would be master of part p if server d were UP. */
static int master_if_up(server *s, srv_table *t, srv_part *p, int d)
{
    uint8_t was = s->dead[d];
    s->dead[d] = PS_UP;
    int m = ps_ring_master(&t->ring, p->range, s->dead, s->returned);
    s->dead[d] = was;
    return m;
}

/* Park the staged or held pushes of fenced parts (table id). */
static void park_entries(server *s, uint32_t id, srv_table *t, staged **head, staged **tail)
{
    staged **pp = head, *last = NULL;
    while (*pp) {
        staged *st = *pp;
        if (t->parts[st->part].fence != PART_FENCED) {
            last = st;
            pp = &st->next;
            continue;
        }
        *pp = st->next;
        park_push(s, st->m.from, st->worker, id, st->part, st->m.h.req);
        free_entry(st);
    }
    *tail = last;
}

/* The part a kept pull reads, or NULL if it reads none this server holds. */
static srv_part *pull_part(server *s, deferred *d, srv_table **table)
{
    srv_table *t = *table = table_of(s, d->m.h.table);
    const uint64_t *keys;
    uint64_t count;
    srv_part *p = NULL;
    return t && !check_pull(s, t, &d->m, &d->dk, &keys, &count, &p) ? p : NULL;
}

/* Fence the ranges that move to server d when it is UP. */
static void hb_fence(server *s, int d, uint64_t gen)
{
    int me = loom_rank(s->node);
    size_t froze = 0;
    s->hb_gen = gen;
    for (uint32_t id = 0; id < s->cap; id++) {
        srv_table *t = s->tables[id];
        if (!t) continue;
        for (size_t i = 0; i < t->nparts; i++) {
            srv_part *p = &t->parts[i];
            int now = ps_ring_master(&t->ring, p->range, s->dead, s->returned);
            if (now == d || master_if_up(s, t, p, d) != d) continue;
            if (now == me) {
                p->fence = PART_FENCED;
                froze++;
            } else if (d == me) {
                p->fence = PART_INCOMING;
            }
        }
        park_entries(s, id, t, &t->staged_head, &t->staged_tail);
        park_entries(s, id, t, &t->held_head, &t->held_tail);
    }
    for (deferred **pp = &s->waiting; *pp;) {
        deferred *dp = *pp;
        srv_table *t;
        srv_part *p = pull_part(s, dp, &t);
        if (!p || !p->fence) {
            pp = &dp->next;
            continue;
        }
        *pp = dp->next;
        s->nwaiting--;
        dp->next = s->parked;
        s->parked = dp;
        s->nparked++;
    }
    if (!froze) {
        msg_header h = {.type = MSG_HANDBACK_ACK, .req = gen};
        node_send(s->node, 0, &h, NULL, 0);
        return;
    }
    log_info("fenced %zu ranges to hand back to server %d", froze, d);
    s->fencing = 1;
    s->hb_round = s->rounds_cut + 1; /* the next round: replicate() cuts it now or on the timer */
    s->repl_due = 1;
    replicate(s);
}

/* Go through the held pulls: answer or defer those of open ranges; send
 * those of ranges another server is master of now back to their workers
 * (LOOM_ESTATE: ask the master); keep the others. */
static void release_parked(server *s)
{
    for (deferred **pp = &s->parked; *pp;) {
        deferred *d = *pp;
        srv_table *t;
        srv_part *p = pull_part(s, d, &t);
        int w = worker_rank(s, d->m.from);
        if (p && w >= 0 && p->fence && (p->fence != PART_FENCED || is_master(s, t, p))) {
            pp = &d->next;
            continue;
        }
        *pp = d->next;
        s->nparked--;
        if (p && w >= 0 && p->fence) {
            refuse_handed_back(s, t, &d->m, w);
        } else if (p && w >= 0 && d->m.h.clock <= s->min_clock) {
            answer_pull(s, t, &d->m, w, &d->dk);
        } else if (p && w >= 0) {
            d->next = s->waiting;
            s->waiting = d;
            s->nwaiting++;
            continue;
        }
        free_deferred(d);
    }
}

/* The masters changed (a handback's commit or abort, a failover): the
 * fenced or incoming ranges this server is master of now open, gated while
 * workers owe an acknowledgement; the workers whose pushes were parked or
 * pulls refused here send them again, and owe one; the held pulls are gone
 * through. */
static void reopen(server *s)
{
    for (int w = 0; w < s->num_workers; w++)
        if (s->parked_from[w] && !s->lost[w]) tell_parked(s, w);
    for (uint32_t id = 0; id < s->cap; id++) {
        srv_table *t = s->tables[id];
        for (size_t i = 0; t && i < t->nparts; i++) {
            srv_part *p = &t->parts[i];
            if ((p->fence == PART_FENCED || p->fence == PART_INCOMING) && is_master(s, t, p))
                p->fence = PART_GATED;
        }
    }
    gate_check(s);
    release_parked(s);
}

/* Gated ranges open once no worker still running owes an acknowledgement. */
static void gate_check(server *s)
{
    for (int w = 0; w < s->num_workers; w++)
        if (s->hb_owed[w] && !s->lost[w] && s->clock[w] != PS_CLOCK_DONE) return;
    size_t opened = 0;
    for (uint32_t id = 0; id < s->cap; id++)
        for (size_t i = 0; s->tables[id] && i < s->tables[id]->nparts; i++)
            if (s->tables[id]->parts[i].fence == PART_GATED) {
                s->tables[id]->parts[i].fence = PART_OPEN;
                opened++;
            }
    if (!opened) return;
    release_parked(s);
    log_info("%zu ranges open: every worker sent again what they held for them", opened);
}

static void on_handback(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    int d;
    if (m->from != 0 || !server_rank_of(n, m->h.a, &d) || m->h.b > 2 ||
        (m->h.b < 2 && s->dead[d] != PS_BACK) || (m->h.b > 0 && m->h.req != s->hb_gen) ||
        (m->h.b == 1 && (m->h.clock <= 0 || m->h.clock > UINT32_MAX))) {
        node_drop(n, m, "HANDBACK naming no server back, or of another generation");
        return;
    }
    if (m->h.b == 0) {
        hb_fence(s, d, m->h.req);
        return;
    }
    s->fencing = 0;
    s->hb_round = 0;
    if (m->h.b == 1) {
        s->dead[d] = PS_UP;
        s->returned[d] = 0;
        s->handbacks = (uint32_t)m->h.clock;
        if (d == loom_rank(n)) {
            /* Its cuts wait for the workers' CLOCKs after the handback, its
             * pulls for every worker's acknowledgement. */
            s->took_over = 1;
            for (int w = 0; w < s->num_workers; w++)
                if (s->hb_acked[w] < m->h.req && s->hb_owed[w] < m->h.req) s->hb_owed[w] = m->h.req;
        }
    }
    /* An abort: the ranges incoming here stay another server's. */
    for (uint32_t id = 0; m->h.b == 2 && id < s->cap; id++)
        for (size_t i = 0; s->tables[id] && i < s->tables[id]->nparts; i++)
            if (s->tables[id]->parts[i].fence == PART_INCOMING &&
                !is_master(s, s->tables[id], &s->tables[id]->parts[i]))
                s->tables[id]->parts[i].fence = PART_OPEN;
    reopen(s);
}

/* A worker sent again what it held for this server's ranges (after a
 * handback's commit, or PARKED with req 0) and asked again its pulls. */
static void on_handback_ack(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    int w = worker_rank(s, m->from);
    if (w < 0) {
        node_drop(n, m, "HANDBACK_ACK from a non-worker");
        return;
    }
    if (m->h.req > s->hb_acked[w]) s->hb_acked[w] = m->h.req;
    if (s->hb_owed[w] && m->h.req >= s->hb_owed[w]) s->hb_owed[w] = 0;
    worker_parked *wp = &s->wparked[w];
    if (m->h.b > wp->acked && m->h.b <= wp->told) {
        /* What it parked before that PARKED req 0 came back before this, or
         * went to another master: forgotten. What it parked since waits for
         * the next one, now if it is a part this server applies pushes to
         * again (behind_parked parked it), else at the next reopen(). */
        wp->acked = (uint32_t)m->h.b;
        size_t kept = 0, behind = 0;
        for (size_t i = 0; i < wp->n; i++) {
            if (wp->v[i].round <= wp->acked) continue;
            const srv_table *t = table_of(s, wp->v[i].table);
            uint8_t fence = t ? t->parts[wp->v[i].part].fence : PART_FENCED;
            behind += fence != PART_FENCED && fence != PART_INCOMING;
            wp->v[kept++] = wp->v[i];
        }
        wp->n = kept;
        if (behind && wp->told == wp->acked && !s->lost[w]) tell_parked(s, w);
    }
    gate_check(s);
}

/* ---- pushing changed rows (managed communication, comm.c) ---- */

/* Push the queue_rows changed rows that table t's priority ranks first to
 * the workers that cache them; returns the rows sent. */
static int key_order(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

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
        reply_buf *b = reply_buf_get(s, m * 8 + m * t->row_bytes);
        if (!b) break;
        memcpy(b->data, send_keys, m * 8);
        for (size_t i = 0; i < m; i++) /* the rows may lie in several parts */
            store_read(part_of_key(t, send_keys[i])->store, send_keys[i],
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
static uint64_t comm_tick(loom_node *n, void *ctx, uint64_t now)
{
    server *s = ctx;
    if (s->repl_due) replicate(s);
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
    if (sent) node_count(n, NODE_MANAGED_ROWS_SENT, sent);
    if (!pending) return UINT64_MAX; /* a change pokes the timer */
    return comm_mgr_next(&s->cm, now);
}

static void on_rows_push_ack(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    if (worker_rank(s, m->from) < 0 || m->h.req == 0 || m->h.req > s->push_id) {
        node_drop(n, m, "acknowledgement of no row push");
        return;
    }
    if (comm_mgr_acked(&s->cm)) node_timer_poke(n, NODE_LAYER_PS);
}

/* The end of a server: what replication sent, and its rounds and held
 * acknowledgements freed. */
static void repl_destroy(server *s)
{
    if (s->replicas)
        log_info("replicas: sent %" PRIu64 " bytes of changed rows (forwarding every push would "
                 "have sent %" PRIu64 "): %" PRIu64 " rows in %" PRIu64 " messages",
                 s->repl_bytes, s->naive_bytes, s->repl_rows, s->repl_msgs);
    if (s->duplicates)
        log_info("failover: %" PRIu64 " pushes sent again were already held, not applied twice",
                 s->duplicates);
    while (s->rounds) {
        repl_round *r = s->rounds;
        s->rounds = r->next;
        free_round(r);
    }
    while (s->acks) {
        held_ack *a = s->acks;
        s->acks = a->next;
        free(a);
    }
}

static void server_destroy(void *state)
{
    server *s = state;
    for (uint32_t i = 0; i < s->cap; i++) table_destroy(s->tables[i], s->num_workers);
    while (s->waiting) {
        deferred *d = s->waiting;
        s->waiting = d->next;
        free_deferred(d);
    }
    while (s->parked) {
        deferred *d = s->parked;
        s->parked = d->next;
        free_deferred(d);
    }
    repl_destroy(s);
    free(s->dead);
    free(s->returned);
    free(s->fed);
    free(s->copy);
    free(s->copy_round);
    free(s->copy_gen);
    free(s->handled);
    free(s->handled_since);
    free(s->parked_from);
    free(s->hb_acked);
    free(s->hb_owed);
    for (int w = 0; s->wparked && w < s->num_workers; w++) free(s->wparked[w].v);
    free(s->wparked);
    free(s->tables);
    free(s->clock);
    free(s->lost);
    free(s->scratch[0]);
    free(s->scratch[1]);
    free(atomic_load(&s->spare));
    comm_mgr_destroy(&s->cm);
    free(s);
}

int ps_server_attach(loom_node *n)
{
    server *s = calloc(1, sizeof *s);
    if (!s) return LOOM_ENOMEM;
    s->node = n;
    s->cut_at = -1;
    s->applied_clock = -1;
    s->num_servers = loom_num_servers(n);
    int rc = ps_replicas_from_env(s->num_servers, &s->replicas);
    if (rc) {
        free(s);
        return rc;
    }
    s->num_workers = loom_num_workers(n);
    s->clock = calloc((size_t)s->num_workers, sizeof *s->clock);
    comm_mgr_init(&s->cm);
    size_t S = (size_t)s->num_servers;
    s->dead = calloc(S, 1);
    s->returned = calloc(S, sizeof *s->returned);
    s->fed = calloc(S, 1);
    s->copy = calloc(S, 1);
    s->copy_round = calloc(S, sizeof *s->copy_round);
    s->copy_gen = calloc(S, sizeof *s->copy_gen);
    s->lost = calloc((size_t)s->num_workers, sizeof *s->lost);
    s->handled = calloc((size_t)s->num_workers, sizeof *s->handled);
    s->handled_since = calloc((size_t)s->num_workers, sizeof *s->handled_since);
    s->parked_from = calloc((size_t)s->num_workers, 1);
    s->hb_acked = calloc((size_t)s->num_workers, sizeof *s->hb_acked);
    s->hb_owed = calloc((size_t)s->num_workers, sizeof *s->hb_owed);
    s->wparked = calloc((size_t)s->num_workers, sizeof *s->wparked);
    if (!s->clock || !s->dead || !s->returned || !s->lost || !s->fed || !s->copy ||
        !s->copy_round || !s->copy_gen || !s->handled || !s->handled_since || !s->parked_from ||
        !s->hb_acked || !s->hb_owed || !s->wparked) {
        s->replicas = 0; /* nothing to report */
        server_destroy(s);
        return LOOM_ENOMEM;
    }
    node_set_layer(n, NODE_LAYER_PS, s, server_destroy);
    node_set_timer(n, NODE_LAYER_PS, comm_tick, s);
    node_set_handler(n, MSG_ROWS_PUSH_ACK, on_rows_push_ack, s);
    node_set_handler(n, MSG_TABLE_CREATE, on_create, s);
    node_set_handler(n, MSG_PUSH, on_push, s);
    node_set_handler(n, MSG_PULL, on_pull, s);
    node_set_handler(n, MSG_PUSH_ENC, on_push_enc, s);
    node_set_handler(n, MSG_PULL_SINCE, on_pull, s);
    node_set_handler(n, MSG_CLOCK, on_clock, s);
    node_set_handler(n, MSG_REPL, on_repl, s);
    node_set_handler(n, MSG_REPL_ACK, on_repl_ack, s);
    node_set_failover(n, server_failover, s);
    node_set_rejoin(n, server_rejoin, s);
    node_set_handler(n, MSG_REJOIN_COPY, on_rejoin_copy, s);
    node_set_handler(n, MSG_REJOIN_READY, on_rejoin_ready, s);
    node_set_handler(n, MSG_HANDBACK, on_handback, s);
    node_set_handler(n, MSG_HANDBACK_ACK, on_handback_ack, s);
    node_set_handler(n, MSG_WORKER_LOST, on_worker_lost, s);
    return 0;
}

/* ---- checkpoints ---- */

void ps_server_set_ckpt(loom_node *n, const ps_ckpt_hooks *hooks)
{
    server *s = node_layer(n, NODE_LAYER_PS);
    s->ckpt = *hooks;
    s->cut_at = -1;
}

int64_t ps_server_plan_cut(loom_node *n, int64_t clock, int full)
{
    server *s = node_layer(n, NODE_LAYER_PS);
    if (!s->ckpt.cut) return INT64_MAX;
    /* Where the job is for this server: its min clock, or the last one it
     * had if every worker finished (nothing is pushed after that), or past
     * the newest clock of a push applied as it came. */
    int64_t min = s->min_clock == PS_CLOCK_DONE ? s->last_min : s->min_clock;
    int64_t at = s->ckpt.base + min;
    int64_t now = s->applied_clock >= min ? s->ckpt.base + s->applied_clock + 1 : at;
    if (clock < now) return s->min_clock == PS_CLOCK_DONE ? INT64_MAX : now;
    s->cut_at = clock;
    s->cut_full = full;
    if (clock == at) cut_now(s); /* the partitions are as they were when the min clock got here */
    /* A plan replacing one not cut yet (the scheduler gave it up): pushes
     * the old one held and the new one does not go in now, ahead of any
     * that comes after them. */
    for (uint32_t i = 0; i < s->cap; i++)
        if (s->tables[i] && s->tables[i]->held_head) release_held(s, s->tables[i]);
    return -1;
}

/* A section: [u32 definition length][definition (canonical)][u32 row bytes]
 * [u32 state bytes][u64 rows], then the rows as put_row writes them. */

int ps_server_encode(loom_node *n, int full, ps_section_fn emit, void *ctx)
{
    server *s = node_layer(n, NODE_LAYER_PS);
    int rc = 0;
    for (uint32_t i = 0; i < s->cap && !rc; i++) {
        srv_table *t = s->tables[i];
        if (!t) continue;
        blob_writer w = {0};
        blob_writer def = {0};
        ps_def_encode(&t->def, &def);
        blob_put_u32(&w, (uint32_t)def.len);
        blob_put_bytes(&w, def.buf, def.len);
        free(def.buf);
        row_writer r = {&w, t->row_bytes, t->row_bytes * t->upd.state_per_value, 0};
        blob_put_u32(&w, (uint32_t)r.row_bytes);
        blob_put_u32(&w, (uint32_t)r.state_bytes);
        size_t count_at = w.len;
        blob_put_u64(&w, 0);
        if (def.bad || w.bad) rc = LOOM_ENOMEM;
        for (size_t j = 0; !rc && j < t->nparts; j++)
            if (ps_ring_master(&t->ring, t->parts[j].range, s->dead, s->returned) == loom_rank(n))
                rc = store_for_each(t->parts[j].store, !full, put_row, &r);
        if (!rc) {
            msg_store_u64(w.buf + count_at, r.rows);
            rc = emit(ctx, t->def.name, w.buf, w.len);
        }
        free(w.buf);
    }
    return rc;
}

int ps_snapshot_apply(void *table, const void *data, size_t len, char *why, size_t whylen)
{
    srv_table *t = table;
    blob_reader r = {data, len, 0};
    uint32_t deflen = blob_get_u32(&r);
    if (r.bad || deflen > r.left) {
        snprintf(why, whylen, "table \"%s\": section truncated", t->def.name);
        return LOOM_EPROTO;
    }
    blob_writer mine = {0};
    if (ps_def_encode(&t->def, &mine)) return LOOM_ENOMEM;
    int same = mine.len == deflen && !memcmp(mine.buf, r.p, deflen);
    free(mine.buf);
    if (!same) {
        ps_table_def theirs;
        int ok = !ps_def_decode(r.p, deflen, &theirs);
        snprintf(why, whylen,
                 "table \"%s\" differs: the checkpoint has width %u, keys [%llu, %llu), "
                 "updater %s; this job width %u, keys [%llu, %llu), updater %s (or other "
                 "options)",
                 t->def.name, ok ? theirs.opts.width : 0,
                 (unsigned long long)(ok ? theirs.opts.key_begin : 0),
                 (unsigned long long)(ok ? theirs.opts.key_end : 0), ok ? theirs.updater : "?",
                 t->def.opts.width, (unsigned long long)t->def.opts.key_begin,
                 (unsigned long long)t->def.opts.key_end, t->def.updater);
        return LOOM_EMISMATCH;
    }
    r.p += deflen, r.left -= deflen;
    size_t row_bytes = blob_get_u32(&r), state_bytes = blob_get_u32(&r);
    uint64_t rows = blob_get_u64(&r);
    size_t mine_state = t->row_bytes * t->upd.state_per_value; /* parts or none */
    if (r.bad || row_bytes != t->row_bytes || state_bytes != mine_state) {
        snprintf(why, whylen, "table \"%s\": row or updater state size differs", t->def.name);
        return r.bad ? LOOM_EPROTO : LOOM_EMISMATCH;
    }
    size_t per = 8 + row_bytes + state_bytes;
    if (rows > r.left / per || rows * per != r.left) {
        snprintf(why, whylen, "table \"%s\": %llu rows do not fill the section", t->def.name,
                 (unsigned long long)rows);
        return LOOM_EPROTO;
    }
    for (uint64_t i = 0; i < rows; i++) {
        const uint8_t *p = r.p + i * per;
        uint64_t key = msg_load_u64(p);
        if (!ps_key_in_range(&t->def.opts, key)) {
            snprintf(why, whylen, "table \"%s\": key %llu is outside the table's keys %llu to %llu",
                     t->def.name, (unsigned long long)key,
                     (unsigned long long)t->def.opts.key_begin,
                     (unsigned long long)(ps_key_end(&t->def.opts) - 1));
            return LOOM_EPROTO;
        }
        srv_part *part = part_of_key(t, key);
        if (!part) continue; /* another server's range */
        void *state;
        void *row = store_row(part->store, key, &state);
        if (!row) return LOOM_ENOMEM;
        memcpy(row, p + 8, row_bytes);
        if (state_bytes) memcpy(state, p + 8 + row_bytes, state_bytes);
        if (mark_changed(t, part, key)) return LOOM_ENOMEM; /* changed-only pulls stay exact */
    }
    return 0;
}

int ps_snapshot_read(const void *data, size_t len, ps_table_def *def,
                     int (*fn)(void *ctx, uint64_t key, const void *row), void *ctx, char *why,
                     size_t whylen)
{
    blob_reader r = {data, len, 0};
    uint32_t deflen = blob_get_u32(&r);
    if (r.bad || deflen > r.left || ps_def_decode(r.p, deflen, def)) {
        snprintf(why, whylen, "its table definition is malformed");
        return LOOM_EPROTO;
    }
    def->opts.updater = def->updater;
    r.p += deflen, r.left -= deflen;
    size_t row_bytes = blob_get_u32(&r), state_bytes = blob_get_u32(&r);
    uint64_t rows = blob_get_u64(&r);
    size_t per = 8 + row_bytes + state_bytes;
    if (r.bad || row_bytes != (size_t)def->opts.width * loom_type_size(def->opts.type) ||
        state_bytes > 4 * row_bytes || rows > r.left / per || rows * per != r.left) {
        snprintf(why, whylen, "its row sizes or row count do not fit its length");
        return LOOM_EPROTO;
    }
    for (uint64_t i = 0; i < rows; i++) {
        uint64_t key = msg_load_u64(r.p + i * per);
        if (!ps_key_in_range(&def->opts, key)) {
            snprintf(why, whylen, "key %llu is outside the table's keys %llu to %llu",
                     (unsigned long long)key, (unsigned long long)def->opts.key_begin,
                     (unsigned long long)(ps_key_end(&def->opts) - 1));
            return LOOM_EPROTO;
        }
        int rc = fn(ctx, key, r.p + i * per + 8);
        if (rc) return rc;
    }
    return 0;
}
