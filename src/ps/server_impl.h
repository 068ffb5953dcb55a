/* server_impl.h: what the files of a server (src/ps/server*.c) share; the
 * idea of the whole is at the top of server.c.
 *
 * The state of a server: its tables and the parts of their ranges it holds,
 * the pushes and pulls it keeps for later, the bookkeeping of replication
 * hooks and of handbacks. Then the lookups that loops over keys call, inline as
 * they were when the server was one file, the row versions among them. Then,
 * file by file, the functions that one file of the server calls in another
 * (named srv_*; each is explained where it is defined). Nothing outside the
 * server's files includes this header. */
#ifndef LOOM_PS_SERVER_IMPL_H
#define LOOM_PS_SERVER_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/u64map.h"
#include "loom/error.h"
#include "ps/comm.h"
#include "ps/filter.h"
#include "ps/minclock.h"
#include "ps/part.h"
#include "ps/ps.h"
#include "ps/ring.h"
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
    uint64_t *dense_ver; /* dense storage, once tracked: each row's version ("row versions") */
    uint64_t *applied;   /* per worker rank: last push sequence applied to this range */
    uint8_t fence;       /* PS_PART_OPEN ... (part.h, server_park.c) */
} srv_part;

typedef struct srv_table {
    uint32_t id; /* its table id */
    ps_table_def def;
    ps_updater upd;
    ps_ring ring;
    srv_part *parts; /* the ranges this server holds, in key order */
    size_t nparts;
    size_t *part_of;  /* per ring range: its index in parts, or NO_PART */
    size_t held_rows; /* keys in all parts (saturating): the most a push may carry */
    size_t row_bytes;
    uint64_t *applied; /* per worker rank: last push sequence applied */
    uint64_t *durable; /* with replicas: ... whose rows the replicas hold */
    /* With replicas, per worker rank: the lowest sequence of a push taken
     * here after a later one of its worker was applied (sent again after a
     * handback or a PARKED req 0), 0 if none, and the replication round
     * that carries all such pushes (0: not cut yet); server_push.c's
     * durable_said. */
    uint64_t *hole, *hole_round;
    staged *staged_head, *staged_tail; /* BSP: pushes of unfinished clocks, in arrival order */
    staged *held_head, *held_tail;     /* other tables: pushes past the next checkpoint's cut */
    /* filter chains per worker rank: decoding its pushes, encoding its replies */
    filter_chain **push_dec, **pull_enc;
    filter_chain **keys_dec; /* pull requests' key lists (NULL: they come plain) */
    int pull_filtered;       /* the pull spec has a filter: every reply goes through it */
    int pull_dense;          /* the pull spec forces dense rows: sparseness alone does not count */
    /* row versions (see below) */
    uint64_t version;
    /* from the first PULL_SINCE on (ver_floor: the version then, which
     * every row not written since counts as); sparse storage's map */
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
    uint64_t since; /* node_now_ms() when it began to wait (srv_report_stall) */
    struct deferred *next;
} deferred;

/* A push of a worker parked here and not seen again (server_park.c):
 * its table, the part it is for, its sequence, and the number of
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
    ps_counters *counters; /* loom_node_stats', in node_stats_area */
    int num_servers, num_workers;
    int replicas; /* copies of each range on other servers (LOOM_REPLICAS) */
    srv_table **tables;
    uint32_t cap;
    ps_minclock clocks; /* per worker rank, and the slowest (minclock.h) */
    uint8_t *lost;      /* per worker rank: the job went on without it (WORKER_LOST) */
    uint8_t *joining;   /* per worker rank: joined the running job, its first CLOCK not yet here
                         * (NODE_REJOINED; docs/ELASTIC.md) */
    int64_t *joined_at; /* per worker rank: the clock it was entered at when it joined, which
                         * may be above its own (raised to the min clock): its CLOCKs up to it
                         * are no news; -1 if it did not join */
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
    uint32_t next_table;   /* srv_comm_tick: the managed table to serve next */
    /* replication: src/ft's hooks (part.h; set when there are replicas) */
    ps_repl_hooks repl;
    uint8_t *dead;       /* per server rank: PS_UP, PS_DOWN ... (ring.h) */
    uint32_t *returned;  /* per BACK server: the order it came back in (ring.h) */
    uint64_t duplicates; /* pushes sent again after a failover, not applied twice */
    int served;          /* a replacement: it answered a pull (said once: docs/ELASTIC.md) */
    uint64_t stall_ms;   /* srv_report_stall names a pull that waited this long */
    uint64_t stall_said; /* the `since` of the last waiting pull it named */
    /* checkpoints with replicas (ps.h): deaths, the server deaths of the
     * job so far (every node counts them the same way: ps_survives); per
     * worker, the most deaths a CLOCK of it said it had handled, and the clock
     * of its first CLOCK that said so; took_over: this server is master of a
     * dead server's ranges */
    uint32_t deaths;
    uint32_t *handled;
    int64_t *handled_since;
    int took_over;
    /* a replacement taking its ranges back (server_park.c; src/ft drives
     * it): pulls held for fenced, incoming or gated ranges; per worker rank,
     * whether a push of it was parked or a pull of it refused here, the
     * newest handback generation it acknowledged (HANDBACK_ACK), and the one
     * whose acknowledgement it owes (0: none; gated ranges wait for it: a
     * worker acknowledges in order, so a newer generation's acknowledgement
     * settles an older one); the generation of the last fence, which
     * PARKED req 0 carry; fencing: ranges this server is master of are
     * frozen; handbacks: the job's, as the registry counts them (a CLOCK's
     * h.b counts them with the deaths) */
    deferred *parked;
    size_t nparked;
    uint8_t *parked_from;
    worker_parked *wparked;
    uint64_t *hb_acked, *hb_owed;
    uint64_t hb_gen;
    int fencing;
    uint32_t handbacks;
} server;

#define NO_PART SIZE_MAX

/* ---- lookups ---- */

static inline server *srv_of(loom_node *n)
{
    return node_layer(n, &ps_layer_def);
}

static inline srv_table *srv_table_of(server *s, uint32_t id)
{
    return id < s->cap ? s->tables[id] : NULL;
}

/* The part holding key, or NULL if this server holds no copy of its range. */
static inline srv_part *srv_part_of_key(srv_table *t, uint64_t key)
{
    if (!ps_key_in_range(&t->def.opts, key)) return NULL;
    size_t i = t->part_of[ps_ring_range_of(&t->ring, key)];
    return i == NO_PART ? NULL : &t->parts[i];
}

/* The rank of worker node `from`; -1 for any other node and for a worker the
 * job went on without, whose messages are dropped from then on. */
static inline int srv_worker_rank(server *s, uint32_t from)
{
    int rank;
    return node_peer_role(s->node, from, &rank) == LOOM_WORKER && !s->lost[rank] ? rank : -1;
}

/* Why a request (PUSH, PUSH_ENC, PULL, PULL_SINCE) from node `from` for
 * table t, with nframes frames where it needs `frames`, cannot be served;
 * NULL when it can. Each cause is named on its own: the log line of a
 * dropped request is often all that a stalled job leaves. */
static inline const char *srv_request_refusal(server *s, const srv_table *t, uint32_t from,
                                              size_t nframes, size_t frames)
{
    int rank;
    if (node_peer_role(s->node, from, &rank) != LOOM_WORKER) return "not from a worker";
    if (s->lost[rank]) return "from a worker the job went on without";
    if (!t) return "unknown table (not created on this server)";
    return nframes != frames ? "wrong frame count" : NULL;
}

static inline int srv_is_master(server *s, srv_table *t, srv_part *p)
{
    return ps_ring_master(&t->ring, p->range, s->dead, s->returned) == loom_rank(s->node);
}

/* ---- row versions ----
 *
 * The partition counts the push messages it applied (`version`, from 1) and,
 * from the first PULL_SINCE on, keeps for each row written since the count
 * when it last changed (dense: an array over each part, 8 bytes a row;
 * sparse: a map of about 16 bytes a row written); a row not written since
 * counts as changed then (`ver_floor`). A reply says the count it reflects,
 * and a row whose version is not above the reader's is left out as unchanged
 * (server_pull.c). Inline: every row that a push, a replica or a restore
 * writes is marked. */

static inline uint64_t srv_row_version(srv_table *t, srv_part *p, uint64_t key)
{
    if (p->dense_ver) {
        uint64_t v = p->dense_ver[key - p->lo];
        return v > t->ver_floor ? v : t->ver_floor;
    }
    uint32_t slot;
    return u64map_get(&t->ver_idx, key, &slot) ? t->sparse_ver[slot] : t->ver_floor;
}

/* A table keeps versions only once a reader asks for changes: one that
 * nobody pulls that way (no cache asks, no pull filters) pays neither a map
 * insert per new row (sparse) nor a second scattered write per pushed row
 * (dense: a 10k-key push spread over a 1M-row table ran at 0.6-0.7x raw
 * ZeroMQ with a table, at 1.0x without). 0 or LOOM_ENOMEM. */
static inline int srv_track_versions(srv_table *t)
{
    if (t->ver_tracked) return 0;
    for (size_t i = 0; t->def.opts.storage == LOOM_DENSE && i < t->nparts; i++) {
        srv_part *p = &t->parts[i];
        p->dense_ver = calloc((size_t)(p->hi - p->lo), sizeof *p->dense_ver);
        if (!p->dense_ver) {
            for (size_t j = 0; j <= i; j++) {
                free(t->parts[j].dense_ver);
                t->parts[j].dense_ver = NULL;
            }
            return LOOM_ENOMEM;
        }
    }
    t->ver_tracked = 1;
    t->ver_floor = t->version;
    return 0;
}

/* Row key changed in the push numbered t->version. */
static inline int srv_mark_changed(srv_table *t, srv_part *p, uint64_t key)
{
    if (!t->ver_tracked) return 0;
    if (p->dense_ver) {
        p->dense_ver[key - p->lo] = t->version;
        return 0;
    }
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

/* Rows as checkpoints and replication send them: per row [u64 key][values]
 * [updater state] (srv_put_row, server_ckpt.c). */
typedef struct row_writer {
    blob_writer *w;
    size_t row_bytes, state_bytes;
    uint64_t rows;
} row_writer;

/* ---- server.c: tables, the part a request's keys lie in ---- */

void srv_free_entry(staged *st);
const void *srv_aligned_payload(server *s, node_msg *m, size_t frame, int slot);
const char *srv_check_part(srv_table *t, const uint64_t *keys, uint64_t begin, uint64_t count,
                           srv_part **part);
const char *srv_check_keys(server *s, srv_table *t, node_msg *m, size_t keys_frame,
                           const uint64_t **keys, uint64_t *count, srv_part **part);

/* ---- server_push.c: pushes ---- */

int srv_apply_rows(server *s, srv_table *t, srv_part *p, const uint64_t *keys, uint64_t begin,
                   const uint8_t *vals, uint64_t count, int w, uint64_t seq);
int srv_apply_push(server *s, srv_table *t, srv_part *p, node_msg *m, int w);
void srv_ack_now(server *s, srv_table *t, uint32_t to, uint32_t table, uint64_t req, int status,
                 uint64_t applied);
void srv_send_push_ack(server *s, srv_table *t, node_msg *m, int w, int status);
void srv_on_push(loom_node *n, void *ctx, node_msg *m);
void srv_on_push_enc(loom_node *n, void *ctx, node_msg *m);

/* ---- server_pull.c: pulls ---- */

reply_buf *srv_reply_buf_get(server *s, size_t bytes);
void srv_free_data(void *data, void *hint);
const char *srv_check_pull(server *s, srv_table *t, node_msg *m, const pull_keys *dk,
                           const uint64_t **keys, uint64_t *count, srv_part **part);
void srv_refuse_pull(server *s, srv_table *t, node_msg *m, int w, int status);
void srv_answer_pull(server *s, srv_table *t, node_msg *m, int w, const pull_keys *dk);
void srv_free_deferred(deferred *d);
void srv_release_deferred(server *s);
/* A pull that has waited stall_ms: say once what it waits for. */
void srv_report_stall(server *s, uint64_t now);
void srv_on_pull(loom_node *n, void *ctx, node_msg *m);

/* ---- server_clock.c: the min clock, staged and held pushes ---- */

int srv_must_stage(server *s, srv_table *t, int64_t clock);
int srv_must_hold(server *s, srv_table *t, int64_t clock);
void srv_note_applied(server *s, int64_t clock);
void srv_release_held(server *s, srv_table *t);
void srv_on_clock(loom_node *n, void *ctx, node_msg *m);
void srv_on_worker_lost(loom_node *n, void *ctx, node_msg *m);
/* The node's rejoin subscriber: a worker joined the running job in slot `id`;
 * its first CLOCK (a = 1) says the clock it joins at (docs/ELASTIC.md). */
void srv_on_join(loom_node *n, void *ctx, uint32_t id);

/* ---- server_comm.c: managed communication ---- */

void srv_note_changes(server *s, srv_table *t, srv_part *p, const uint64_t *keys, uint64_t begin,
                      const uint8_t *vals, size_t count);
uint64_t srv_comm_tick(loom_node *n, void *ctx, uint64_t now);
void srv_on_rows_push_ack(loom_node *n, void *ctx, node_msg *m);

/* ---- server_ckpt.c: checkpoints ---- */

void srv_cut_now(server *s);
int srv_put_row(void *ctx, uint64_t key, const void *row, const void *state);

/* ---- server_park.c: the push and pull path while ranges move ---- */

int srv_must_park(server *s, srv_part *p, int w, uint32_t table, size_t part, uint64_t seq);
void srv_park_push(server *s, uint32_t to, int w, uint32_t table, size_t part, uint64_t seq);
void srv_refuse_handed_back(server *s, srv_table *t, node_msg *m, int w);
void srv_gate_check(server *s);

#endif
