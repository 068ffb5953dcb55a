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
 * A server is one layer state (server_impl.h) and these files:
 *
 *   server.c           the state, attach and destroy; table creation (a part
 *                      per range held, its filter chains and row versions);
 *                      the part a request's keys lie in
 *   server_push.c      pushes: checked, applied through the updater, acknowledged
 *   server_pull.c      pulls: answered, plain or through the pull chain, or
 *                      deferred until the clocks allow
 *   server_clock.c     the min clock: BSP staging, pushes held past a
 *                      checkpoint's cut, a lost worker
 *   server_comm.c      managed communication: changed rows pushed to readers
 *   server_ckpt.c      checkpoints: the cut, sections written and restored
 *   server_part.c      the parts as src/ft sees them (part.h)
 *   server_park.c      the push and pull path while ranges move: parked
 *                      pushes, held pulls, gated parts
 *
 * Replication rounds, failover, a replacement and its handback are fault
 * tolerance, in src/ft (replica.c, failover.c, rejoin.c, handback.c): the
 * push path tells it of an applied push and hands it acknowledgements to
 * hold through the hooks ft registers (ps_repl_hooks, part.h), and ft reads
 * and writes the parts through server_part.c and moves them through
 * server_park.c, which the push and pull path calls to park a push or
 * refuse a pull (srv_must_park, srv_park_push, srv_refuse_handed_back) and
 * to open gated parts (srv_gate_check).
 *
 * Everything runs on the I/O thread (a server's main thread only waits in
 * loom_serve, so no other thread reads its sockets); there is no locking. The
 * one exception is the spare reply buffer, which ZeroMQ's own I/O thread hands
 * back when it has sent a reply (an atomic pointer). */
#include <inttypes.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "loom/error.h"
#include "ps/msg_types.h"
#include "ps/server_impl.h"

/* ---- table creation ---- */

/* Free a staged or held push. */
void srv_free_entry(staged *st)
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
        srv_free_entry(st);
    }
    for (staged *st = t->held_head, *next; st; st = next) {
        next = st->next;
        srv_free_entry(st);
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
    free(t->hole);
    free(t->hole_round);
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
        /* Counted before its allocations, so that table_destroy frees a part
         * that is only partly made when one of them fails. */
        t->part_of[rg] = t->nparts;
        srv_part *p = &t->parts[t->nparts++];
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
    if (m->from != 0 || id >= 1u << 20 || srv_table_of(s, id)) {
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
    t->id = id;
    int rank = loom_rank(n);
    t->row_bytes = (size_t)o->width * loom_type_size(o->type);
    t->applied = calloc((size_t)s->num_workers, sizeof *t->applied);
    t->durable = calloc((size_t)s->num_workers, sizeof *t->durable);
    t->hole = calloc((size_t)s->num_workers, sizeof *t->hole);
    t->hole_round = calloc((size_t)s->num_workers, sizeof *t->hole_round);
    status = t->applied && t->durable && t->hole && t->hole_round
                 ? updater_resolve(t->def.updater, o->type, &t->upd)
                 : LOOM_ENOMEM;
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

/* ---- requests: the part their keys lie in ---- */

/* Payload frames may start at any address (ZeroMQ receives large messages
 * in place); rows must be aligned for typed access, so copy when they are not.
 * slot 0 is for keys, 1 for values: one message may need both. */
const void *srv_aligned_payload(server *s, node_msg *m, size_t frame, int slot)
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

/* Check that keys (or the range [begin, begin + count) when keys is NULL)
 * lie in one range this server holds; sets *part. */
const char *srv_check_part(srv_table *t, const uint64_t *keys, uint64_t begin, uint64_t count,
                           srv_part **part)
{
    srv_part *p = srv_part_of_key(t, keys ? keys[0] : begin);
    if (!p) return "key outside this server's partition";
    if (!keys && (ps_u128)begin + count > p->hi) return "range outside this server's partition";
    /* key - lo > last (the part's last key less lo, which fits in 64 bits)
     * for a key below lo or at hi or above: one comparison a key, without
     * a branch, which the compiler vectorises (a large pull's keys were
     * checked at 1-2 ns a key, 10% of a 1M-key pull's server CPU). */
    uint64_t lo = p->lo, last = (uint64_t)(p->hi - 1 - lo), bad = 0;
    for (uint64_t i = 0; keys && i < count; i++) bad |= keys[i] - lo > last;
    if (bad) return "key outside this server's partition";
    *part = p;
    return NULL;
}

/* Check a request's keys (or range) against the partition. Sets *keys (NULL
 * for a range), *count and *part. Returns 0 or a reason to drop. */
const char *srv_check_keys(server *s, srv_table *t, node_msg *m, size_t keys_frame,
                           const uint64_t **keys, uint64_t *count, srv_part **part)
{
    if (m->h.flags & MSG_F_RANGE) {
        if (m->h.a >= m->h.b) return "range outside this server's partition";
        *keys = NULL;
        *count = m->h.b - m->h.a;
        return srv_check_part(t, NULL, m->h.a, *count, part);
    }
    size_t len = node_frame_size(m, keys_frame);
    if (len == 0 || len % 8) return "key frame size is not a positive multiple of 8";
    const uint64_t *k = srv_aligned_payload(s, m, keys_frame, 0);
    if (!k) return "out of memory";
    *count = len / 8;
    *keys = k;
    return srv_check_part(t, k, 0, *count, part);
}

/* ---- a server: attach and destroy ---- */

static void server_destroy(void *state)
{
    server *s = state;
    for (uint32_t i = 0; i < s->cap; i++) table_destroy(s->tables[i], s->num_workers);
    while (s->waiting) {
        deferred *d = s->waiting;
        s->waiting = d->next;
        srv_free_deferred(d);
    }
    while (s->parked) {
        deferred *d = s->parked;
        s->parked = d->next;
        srv_free_deferred(d);
    }
    if (s->duplicates)
        log_info("failover: %" PRIu64 " pushes sent again were already held, not applied twice",
                 s->duplicates);
    free(s->dead);
    free(s->returned);
    free(s->handled);
    free(s->handled_since);
    free(s->parked_from);
    free(s->hb_acked);
    free(s->hb_owed);
    for (int w = 0; s->wparked && w < s->num_workers; w++) free(s->wparked[w].v);
    free(s->wparked);
    free(s->tables);
    ps_minclock_free(&s->clocks);
    free(s->lost);
    free(s->joining);
    free(s->joined_at);
    free(s->scratch[0]);
    free(s->scratch[1]);
    free(atomic_load(&s->spare));
    comm_mgr_destroy(&s->cm);
    free(s);
}

/* The server's timer: managed communication's sends (server_comm.c), and a
 * look every second for a pull that has waited too long (srv_report_stall). */
static uint64_t srv_tick(loom_node *n, void *ctx, uint64_t now)
{
    uint64_t next = srv_comm_tick(n, ctx, now), look = now + 1000;
    srv_report_stall(ctx, now);
    return next < look ? next : look;
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
    int no_clocks = ps_minclock_init(&s->clocks, s->num_workers);
    comm_mgr_init(&s->cm);
    size_t S = (size_t)s->num_servers;
    s->dead = calloc(S, 1);
    s->returned = calloc(S, sizeof *s->returned);
    s->lost = calloc((size_t)s->num_workers, sizeof *s->lost);
    s->joining = calloc((size_t)s->num_workers, 1);
    s->joined_at = malloc((size_t)(s->num_workers ? s->num_workers : 1) * sizeof *s->joined_at);
    for (int w = 0; s->joined_at && w < s->num_workers; w++) s->joined_at[w] = -1;
    s->handled = calloc((size_t)s->num_workers, sizeof *s->handled);
    s->handled_since = calloc((size_t)s->num_workers, sizeof *s->handled_since);
    s->parked_from = calloc((size_t)s->num_workers, 1);
    s->hb_acked = calloc((size_t)s->num_workers, sizeof *s->hb_acked);
    s->hb_owed = calloc((size_t)s->num_workers, sizeof *s->hb_owed);
    s->wparked = calloc((size_t)s->num_workers, sizeof *s->wparked);
    if (no_clocks || !s->dead || !s->returned || !s->lost || !s->joining || !s->joined_at ||
        !s->handled || !s->handled_since || !s->parked_from || !s->hb_acked || !s->hb_owed ||
        !s->wparked || !(s->counters = node_stats_area(n, &ps_layer_def, sizeof *s->counters))) {
        server_destroy(s);
        return LOOM_ENOMEM;
    }
    node_set_layer(n, &ps_layer_def, s, server_destroy);
    node_set_stats(n, &ps_layer_def, ps_counters_stats, s->counters);
    s->stall_ms = ps_stall_report_ms();
    node_set_timer(n, &ps_layer_def, srv_tick, s);
    node_timer_poke(n, &ps_layer_def); /* the first look at the I/O thread's first turn */
    node_set_handler(n, MSG_ROWS_PUSH_ACK, srv_on_rows_push_ack, s);
    node_set_handler(n, MSG_TABLE_CREATE, on_create, s);
    node_set_handler(n, MSG_PUSH, srv_on_push, s);
    node_set_handler(n, MSG_PULL, srv_on_pull, s);
    node_set_handler(n, MSG_PUSH_ENC, srv_on_push_enc, s);
    node_set_handler(n, MSG_PULL_SINCE, srv_on_pull, s);
    node_set_handler(n, MSG_CLOCK, srv_on_clock, s);
    node_set_handler(n, MSG_WORKER_LOST, srv_on_worker_lost, s);
    return node_add_rejoin(n, srv_on_join, s);
}
