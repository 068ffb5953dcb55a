/* client: a worker's view of the tables (Bösen's process cache and update
 * buffer, on Parameter-Server-style range partitioned messages).
 *
 * A worker reads a table's rows through its process cache and writes deltas
 * through its update buffer; the servers that hold a key are found on the
 * table's ring (ring.h), each range at its master. Opening a table asks the
 * scheduler, which numbers it (the first open of a name creates it on every
 * server); the handle keeps the table's filter chains per server and its
 * ring. A clock flushes every table, sends CLOCK to every server (on the
 * same connection as the pushes, so after them) and to the scheduler, and
 * under SSP(s)/BSP waits until the job's min clock is within s of it.
 *
 * The worker's side is a file per concept, sharing their state through
 * client_impl.h:
 *
 *   client.c           this one, the spine: the state on a node, opening
 *                      tables, clocks
 *   client_cache.c     the process cache, and own writes not yet in a
 *                      server's answer (read-my-writes)
 *   client_push.c      writes: the update buffer, sequence numbers, in-flight
 *                      pushes and their acknowledgements
 *   client_pull.c      reads: cache hits, requests to the masters, replies
 *   client_comm.c      managed communication: early pushes, rows servers push
 *   client_ft.c        failover and handback: requests moved to new masters, for
 *                      src/ft/client_failover.c (client_ft.h)
 *
 * Threads: application threads call the API and send their requests
 * themselves; replies and acks are handled by whichever thread reads the
 * node's sockets (the I/O thread, or an application thread in loom_wait).
 * Each table's cache, buffer and in-flight lists are guarded by the table's
 * mutex. */
#include <inttypes.h>
#include <string.h>

#include "core/log.h"
#include "ps/client_impl.h"
#include "ps/msg_types.h"

/* ---- opening tables ---- */

static void on_table_opened(loom_node *n, void *ctx, node_msg *m)
{
    ps_client *c = ctx;
    if (m->from != 0) {
        node_drop(n, m, "table answer from a non-scheduler");
        return;
    }
    pthread_mutex_lock(&c->mu);
    open_wait *w = c->opens;
    while (w && w->ts != m->h.req) w = w->next;
    if (w) w->id = m->h.table;
    pthread_mutex_unlock(&c->mu);
    if (!w || m->h.table >= PS_MAX_TABLES) {
        node_drop(n, m, "answer to no table request");
        return;
    }
    node_ts_done(n, w->ts, m->h.a < LOOM_ERROR_COUNT_ ? (int)m->h.a : LOOM_EPROTO);
}

static void table_free(loom_table *t)
{
    if (!t) return;
    for (int s = 0; t->ifl_head && s < server_count(t); s++) {
        while (t->ifl_head[s]) {
            inflight *f = t->ifl_head[s];
            t->ifl_head[s] = f->next;
            sbuf_unref(f->hold);
            free(f);
        }
    }
    u64map_free(&t->cache_idx);
    u64map_free(&t->buf_idx);
    free(t->c_rows);
    free(t->c_server_clock);
    free(t->c_fetch_clock);
    free(t->c_version);
    for (int s = 0; s < server_count(t); s++) {
        if (t->push_enc) filter_chain_destroy(t->push_enc[s]);
        if (t->pull_dec) filter_chain_destroy(t->pull_dec[s]);
        if (t->keys_enc) filter_chain_destroy(t->keys_enc[s]);
    }
    free(t->push_enc);
    free(t->pull_dec);
    free(t->keys_enc);
    free(t->b_keys);
    free(t->b_rows);
    free(t->b_abs);
    free(t->b_rel);
    free(t->ifl_head);
    free(t->ifl_tail);
    free(t->durable);
    free(t->master);
    ps_ring_free(&t->ring);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* Destroy a chain of direction dir, its counts kept in the table's. */
static void retire_chain(loom_table *t, loom_direction dir, filter_chain *c)
{
    for (int k = 0; c && k < LOOM_FILTER_COUNT; k++) {
        filter_stats fs = filter_chain_stats(c, (filter_kind)k);
        t->wire[dir].filter[k].messages += fs.msgs;
        t->wire[dir].filter[k].bytes_in += fs.bytes_in;
        t->wire[dir].filter[k].bytes_out += fs.bytes_out;
    }
    filter_chain_destroy(c);
}

/* New filter chains for the link to server s: a new table's, or a
 * replacement's, whose chains start empty (a key cache must hold what the
 * other end holds). Rows a significance filter held back for the old
 * process are dropped with its chain. */
int client_link_chains(loom_table *t, int s)
{
    filter_spec pull, keys;
    if (filter_spec_parse(t->def.filter_pull, &pull, NULL, 0)) return LOOM_EINVAL;
    retire_chain(t, LOOM_DIR_PUSH, t->push_enc[s]);
    retire_chain(t, LOOM_DIR_PULL, t->pull_dec[s]);
    t->push_enc[s] = t->pull_dec[s] = NULL;
    if (t->keys_enc) {
        retire_chain(t, LOOM_DIR_PULL, t->keys_enc[s]);
        t->keys_enc[s] = NULL;
    }
    const loom_table_opts *o = &t->def.opts;
    uint64_t seed = (uint64_t)loom_rank(t->node) << 32 ^ (uint64_t)s << 16 ^ 0xc11e;
    if (filter_chain_create(&t->push_spec, FILTER_PUSH, o->type, o->width, seed, &t->push_enc[s],
                            NULL, 0) ||
        filter_chain_create(&pull, FILTER_PULL, o->type, o->width, seed, &t->pull_dec[s], NULL,
                            0) ||
        (t->keys_enc &&
         (!filter_spec_keys(&pull, &keys) ||
          filter_chain_create(&keys, FILTER_PULL, o->type, 0, seed, &t->keys_enc[s], NULL, 0))))
        return LOOM_ENOMEM;
    return 0;
}

/* The filter chains of a table, one per server and direction (the specs were
 * checked with the definition). */
static int table_chains(loom_table *t)
{
    filter_spec pull, keys;
    if (filter_spec_parse(t->def.filter_push, &t->push_spec, NULL, 0) ||
        filter_spec_parse(t->def.filter_pull, &pull, NULL, 0))
        return LOOM_EINVAL;
    t->push_filtered = filter_spec_any(&t->push_spec) || t->push_spec.rows == FILTER_ROWS_SPARSE;
    t->pull_dense = pull.rows == FILTER_ROWS_DENSE;
    int S = server_count(t);
    t->push_enc = calloc((size_t)S, sizeof *t->push_enc);
    t->pull_dec = calloc((size_t)S, sizeof *t->pull_dec);
    if (!t->push_enc || !t->pull_dec) return LOOM_ENOMEM;
    if (filter_spec_keys(&pull, &keys) && !(t->keys_enc = calloc((size_t)S, sizeof *t->keys_enc)))
        return LOOM_ENOMEM;
    for (int s = 0; s < S; s++) {
        int rc = client_link_chains(t, s);
        if (rc) return rc;
    }
    return 0;
}

static loom_table *table_new(ps_client *c, const ps_table_def *def, const loom_table_opts *user)
{
    loom_table *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    pthread_mutex_init(&t->mu, NULL);
    t->client = c;
    t->node = c->node;
    t->def = *def;
    ps_def_fix_pointers(&t->def);
    t->row_bytes = (size_t)def->opts.width * loom_type_size(def->opts.type);
    t->cache_on = user ? user->cache : 1;
    t->flush_rows = user ? user->flush_rows : 0;
    t->next_seq = node_seq_base(c->node); /* above a slot's earlier workers' */
    t->managed = def->opts.priority != LOOM_PRIORITY_NONE && def->opts.consistency != LOOM_BSP;
    t->ifl_head = calloc((size_t)c->num_servers, sizeof *t->ifl_head);
    t->ifl_tail = calloc((size_t)c->num_servers, sizeof *t->ifl_tail);
    t->durable = calloc((size_t)c->num_servers, sizeof *t->durable);
    if (!t->ifl_head || !t->ifl_tail || !t->durable || u64map_init(&t->cache_idx, 1024) ||
        u64map_init(&t->buf_idx, 1024) || table_chains(t) ||
        ps_ring_build(&t->ring, &def->opts, c->num_servers, c->replicas ? PS_RING_VNODES : 1,
                      c->replicas) ||
        !(t->master = malloc(t->ring.nranges * sizeof *t->master))) {
        table_free(t);
        return NULL;
    }
    compute_masters(t);
    return t;
}

int loom_table_open(loom_node *n, const char *name, const loom_table_opts *opts, loom_table **out)
{
    if (!n || !out) return LOOM_EINVAL;
    *out = NULL;
    if (!loom_is_worker(n)) return LOOM_EROLE;
    if (loom_num_servers(n) == 0) {
        log_error("table \"%s\": this job has no servers (--servers 0) to hold it",
                  name ? name : "(null)");
        return LOOM_ECONFIG;
    }
    ps_client *c = client_of(n);
    ps_table_def def;
    char why[160];
    int rc = ps_def_from_user(&def, name, opts, why, sizeof why);
    if (rc) {
        log_error("table \"%s\": %s", name ? name : "(null)", why);
        return rc;
    }
    blob_writer w = {0};
    if (ps_def_encode(&def, &w)) {
        free(w.buf);
        return LOOM_ENOMEM;
    }
    /* The same name opened twice in one process: one handle, if the options agree. */
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->nopened; i++) {
        loom_table *t = c->opened[i];
        if (strcmp(t->def.name, def.name)) continue;
        blob_writer tw = {0};
        rc = ps_def_encode(&t->def, &tw)                       ? LOOM_ENOMEM
             : tw.len != w.len || memcmp(tw.buf, w.buf, w.len) ? LOOM_EMISMATCH
                                                               : 0;
        free(tw.buf);
        pthread_mutex_unlock(&c->mu);
        free(w.buf);
        if (!rc) *out = t;
        return rc;
    }
    pthread_mutex_unlock(&c->mu);

    loom_table *t = table_new(c, &def, opts);
    open_wait *ow = calloc(1, sizeof *ow);
    loom_ts ts = t && ow ? node_ts_new(n, 1) : 0;
    rc = ts ? updater_resolve(def.updater, def.opts.type, &t->upd) : LOOM_ENOMEM;
    if (rc) {
        if (rc == LOOM_ENOTFOUND)
            log_error("table \"%s\": no updater named \"%s\" (register it before loom_init)",
                      def.name, def.updater);
        if (ts) node_ts_done(n, ts, rc);
        free(w.buf);
        free(ow);
        table_free(t);
        return rc;
    }
    t->local_rmw = t->upd.kind == UPD_SUM;
    ow->ts = ts;
    pthread_mutex_lock(&c->mu);
    ow->next = c->opens;
    c->opens = ow;
    pthread_mutex_unlock(&c->mu);
    msg_header h = {.type = MSG_TABLE_OPEN, .req = ts};
    node_frame f = {w.buf, w.len, NULL, NULL, 1};
    rc = node_send(n, 0, &h, &f, 1);
    free(w.buf);
    if (!rc) rc = loom_wait(n, ts);
    pthread_mutex_lock(&c->mu);
    for (open_wait **pp = &c->opens; *pp; pp = &(*pp)->next)
        if (*pp == ow) {
            *pp = ow->next;
            break;
        }
    loom_table **grown = rc ? NULL : realloc(c->opened, (c->nopened + 1) * sizeof *grown);
    if (!rc && !grown) rc = LOOM_ENOMEM;
    if (!rc) {
        t->id = ow->id;
        c->opened = grown;
        c->opened[c->nopened++] = t;
        atomic_store(&c->by_id[t->id], t);
    }
    pthread_mutex_unlock(&c->mu);
    free(ow);
    if (rc) {
        if (rc == LOOM_EMISMATCH)
            log_error("table \"%s\" was already opened with different options", def.name);
        table_free(t);
        return rc;
    }
    /* A server's death heard while the open was on its way (an elastic
     * job's free server slots, heard right after the roster) moved no
     * request of this table, but its masters as table_new computed them may
     * name the dead server: a failover from now on finds the table opened. */
    pthread_mutex_lock(&t->mu);
    compute_masters(t);
    pthread_mutex_unlock(&t->mu);
    comm_mgr_budget(&c->cm, def.opts.bandwidth_mbits, node_now_ms());
    comm_choice_seed(&t->choice, (uint64_t)t->id << 32 | (uint64_t)loom_rank(n));
    if (def.opts.consistency != LOOM_ASP) {
        node_lock(n);
        if (c->gate < 0 || def.opts.staleness < c->gate) c->gate = def.opts.staleness;
        node_unlock(n);
    }
    *out = t;
    return 0;
}

const char *loom_table_name(const loom_table *t)
{
    return t ? t->def.name : NULL;
}

loom_node *loom_table_node(const loom_table *t)
{
    return t ? t->node : NULL;
}

const loom_table_opts *loom_table_options(const loom_table *t)
{
    return t ? &t->def.opts : NULL;
}

int loom_table_filter_stats(loom_table *t, loom_direction dir, loom_filter_stats *out)
{
    if (!t || !out || (dir != LOOM_DIR_PUSH && dir != LOOM_DIR_PULL)) return LOOM_EINVAL;
    pthread_mutex_lock(&t->mu);
    *out = t->wire[dir];
    for (int s = 0; s < server_count(t); s++) {
        /* pulls: the replies' chain and the requests' key lists' */
        const filter_chain *chains[2] = {dir == LOOM_DIR_PUSH ? t->push_enc[s] : t->pull_dec[s],
                                         dir == LOOM_DIR_PULL && t->keys_enc ? t->keys_enc[s]
                                                                             : NULL};
        for (int i = 0; i < 2 && chains[i]; i++) {
            for (int k = 0; k < LOOM_FILTER_COUNT; k++) {
                filter_stats fs = filter_chain_stats(chains[i], (filter_kind)k);
                out->filter[k].messages += fs.msgs;
                out->filter[k].bytes_in += fs.bytes_in;
                out->filter[k].bytes_out += fs.bytes_out;
            }
        }
    }
    pthread_mutex_unlock(&t->mu);
    return 0;
}

const char *loom_filter_name(loom_filter_kind k)
{
    return filter_name((filter_kind)k);
}

/* ---- clocks ---- */

/* This worker joined the running job (docs/ELASTIC.md): the registry says
 * the clock it starts at (req), before answering any table it opens. The
 * servers hear it from here, as this worker's first message to each (a = 1):
 * nothing it pushes can reach one before. */
static void joined_at(ps_client *c, int64_t clock, int64_t min)
{
    node_lock(c->node);
    atomic_store(&c->clock, clock);
    if (min > c->global_min) c->global_min = min;
    node_unlock(c->node);
    pthread_mutex_lock(&c->mu);
    for (int s = 0; s < c->num_servers; s++) {
        msg_header h = {.type = MSG_CLOCK, .clock = clock, .a = 1};
        node_send(c->node, node_server_id(c->num_servers, s), &h, NULL, 0);
    }
    c->clock_sent = clock;
    pthread_mutex_unlock(&c->mu);
}

static void on_min_clock(loom_node *n, void *ctx, node_msg *m)
{
    ps_client *c = ctx;
    if (m->from != 0) {
        node_drop(n, m, "min clock from a non-scheduler");
        return;
    }
    if (m->h.a == 1) {
        if (!loom_joined(n) || m->h.req > INT64_MAX || atomic_load(&c->clock) != 0) {
            node_drop(n, m, "a join's clock to a worker that did not just join");
            return;
        }
        joined_at(c, (int64_t)m->h.req, m->h.clock);
        return;
    }
    node_lock(n);
    if (m->h.clock > c->global_min) {
        c->global_min = m->h.clock;
        node_broadcast(n);
    }
    node_unlock(n);
}

/* Tell every server and the scheduler how many clocks this worker completed. */
static int send_clock(ps_client *c, int64_t clock)
{
    int rc = 0;
    /* Under mu, so that a replacement server gets this worker's clocks in
     * order (ps_client_rejoined sends it the last one). */
    pthread_mutex_lock(&c->mu);
    uint32_t failovers = atomic_load(&c->failovers_done);
    for (int s = 0; s < c->num_servers && !rc; s++) {
        msg_header h = {.type = MSG_CLOCK, .clock = clock, .b = failovers};
        rc = node_send(c->node, node_server_id(c->num_servers, s), &h, NULL, 0);
        if (rc) /* which one, for a failure that should not happen (ft.fault_mix once) */
            log_error("CLOCK %" PRId64 " to server %d not sent: %s", clock, s, loom_strerror(rc));
    }
    c->clock_sent = clock;
    pthread_mutex_unlock(&c->mu);
    msg_header h = {.type = MSG_CLOCK, .clock = clock, .b = failovers};
    return rc ? rc : node_send(c->node, 0, &h, NULL, 0);
}

loom_table **client_snapshot_tables(ps_client *c, size_t *count)
{
    pthread_mutex_lock(&c->mu);
    loom_table **list = malloc((c->nopened ? c->nopened : 1) * sizeof *list);
    *count = list ? c->nopened : 0;
    if (list && c->nopened) memcpy(list, c->opened, c->nopened * sizeof *list);
    pthread_mutex_unlock(&c->mu);
    return list;
}

int ps_clock(loom_node *n)
{
    if (!loom_is_worker(n)) return LOOM_EROLE;
    ps_client *c = client_of(n);
    size_t count;
    loom_table **list = client_snapshot_tables(c, &count);
    if (!list) return LOOM_ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < count && !rc; i++) rc = loom_flush(list[i], NULL);
    free(list);
    int64_t clock = atomic_load(&c->clock) + 1;
    if (!rc) rc = send_clock(c, clock);
    if (rc) return rc;
    atomic_store(&c->clock, clock);
    /* Keep within the staleness bound: wait for the slowest worker. A job's
     * only worker is the slowest itself, and need not wait for the
     * scheduler's word (a round trip per clock). */
    node_lock(n);
    if (loom_num_workers(n) == 1 && c->global_min < clock) c->global_min = clock;
    if (c->gate >= 0 && c->global_min < clock - c->gate) c->gate_since = node_now_ms();
    while (!rc && c->gate >= 0 && c->global_min < clock - c->gate) rc = node_wait(n, 0);
    c->gate_since = 0;
    node_unlock(n);
    return rc;
}

int64_t ps_current_clock(loom_node *n)
{
    return loom_is_worker(n) ? atomic_load(&client_of(n)->clock) : 0;
}

int ps_clock_gated(loom_node *n)
{
    if (!loom_is_worker(n)) return 0;
    ps_client *c = client_of(n);
    node_lock(n);
    int gated = c->gate >= 0;
    node_unlock(n);
    return gated;
}

int ps_flush_all(loom_node *n)
{
    ps_client *c = client_of(n);
    size_t count;
    loom_table **list = client_snapshot_tables(c, &count);
    if (!list) return LOOM_ENOMEM;
    int rc = 0;
    loom_ts *ts = malloc((count ? count : 1) * sizeof *ts);
    if (!ts) rc = LOOM_ENOMEM;
    for (size_t i = 0; i < count && !rc; i++) rc = loom_flush(list[i], &ts[i]);
    for (size_t i = 0; i < count && !rc; i++) rc = loom_wait(n, ts[i]);
    free(ts);
    free(list);
    return rc;
}

int ps_worker_finish(loom_node *n)
{
    int rc = ps_flush_all(n);
    return rc ? rc : send_clock(client_of(n), PS_CLOCK_DONE);
}

/* ---- the worker's state on a node ---- */

static void client_destroy(void *state)
{
    ps_client *c = state;
    /* Pulls still waiting for a server: each live slot holds one part of its
     * pull. Their callers gave up on them (the node is going away), so the
     * rows are not copied out. */
    for (uint32_t i = 0; i < c->nslots; i++) {
        pull_op *op = c->slots[i].req ? c->slots[i].op : NULL;
        if (op && atomic_fetch_sub(&op->parts_left, 1) == 1) client_pull_op_free(op);
    }
    for (size_t i = 0; i < c->nopened; i++) table_free(c->opened[i]);
    free(c->opened);
    free(c->slots);
    while (c->opens) {
        open_wait *w = c->opens;
        c->opens = w->next;
        free(w);
    }
    comm_mgr_destroy(&c->cm);
    pthread_mutex_destroy(&c->mu);
    free(c->dead);
    free(c->returned);
    free(c->redirected);
    free(c);
}

int ps_client_attach(loom_node *n)
{
    ps_client *c = calloc(1, sizeof *c);
    if (!c) return LOOM_ENOMEM;
    c->node = n;
    c->num_servers = loom_num_servers(n);
    int rc = c->num_servers ? ps_replicas_from_env(c->num_servers, &c->replicas) : 0;
    if (rc) {
        free(c);
        return rc;
    }
    c->dead = calloc((size_t)(c->num_servers ? c->num_servers : 1), 1);
    c->redirected = calloc((size_t)(c->num_servers ? c->num_servers : 1), 1);
    c->returned = calloc((size_t)(c->num_servers ? c->num_servers : 1), sizeof *c->returned);
    c->counters = node_stats_area(n, &ps_layer_def, sizeof *c->counters);
    if (!c->dead || !c->redirected || !c->returned || !c->counters) {
        free(c->dead);
        free(c->redirected);
        free(c->returned);
        free(c);
        return LOOM_ENOMEM;
    }
    c->free_head = NO_SLOT;
    c->gate = -1;
    pthread_mutex_init(&c->mu, NULL);
    comm_mgr_init(&c->cm);
    node_set_layer(n, &ps_layer_def, c, client_destroy);
    node_set_stats(n, &ps_layer_def, ps_counters_stats, c->counters);
    client_comm_attach(n, c);
    node_set_handler(n, MSG_TABLE_OPENED, on_table_opened, c);
    client_push_attach(n, c);
    client_pull_attach(n, c);
    node_set_handler(n, MSG_MIN_CLOCK, on_min_clock, c);
    return 0;
}
