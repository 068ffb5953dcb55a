/* client_comm: managed communication on a worker (Bösen; the budget, the
 * ack window and the priority policies are comm.c's).
 *
 * Managed communication (comm.c): with a priority, the I/O thread's timer
 * (comm_tick) sends buffered rows of SSP and ASP tables early, as the budget
 * allows, chosen by their magnitudes (kept per buffered row, b_abs/b_rel), and
 * rows servers push (ROWS_PUSH) replace cached rows the way a pull reply would.
 *
 * An early push is an ordinary push (client_send_push): sequence number,
 * in-flight record, filters, acknowledgement; it differs only in counting in
 * the window of unacknowledged managed messages. A row a server pushes is
 * taken only if this worker caches it. */
#include <inttypes.h>
#include <string.h>

#include "core/log.h"
#include "ps/client_impl.h"
#include "ps/msg_types.h"

typedef struct picked {
    uint64_t key;
    uint32_t slot;
} picked;

static int by_key(const void *a, const void *b)
{
    uint64_t x = ((const picked *)a)->key, y = ((const picked *)b)->key;
    return x < y ? -1 : x > y;
}

/* Send the queue_rows buffered rows the table's priority ranks first, and
 * take them out of the buffer (they are in flight now, so read-my-writes
 * still counts them). Returns the rows sent. Lock held; I/O thread. */
static size_t send_early(loom_table *t)
{
    size_t k = t->def.opts.queue_rows ? t->def.opts.queue_rows : COMM_DEFAULT_QUEUE_ROWS;
    if (k > t->b_n) k = t->b_n;
    uint32_t *pick = malloc(k * sizeof *pick);
    picked *order = malloc(k * sizeof *order);
    size_t got = pick && order ? comm_choose(t->def.opts.priority, &t->choice, t->b_keys, t->b_abs,
                                             t->b_rel, t->b_n, k, pick)
                               : 0;
    sbuf *b = got ? sbuf_new(got * 8 + got * t->row_bytes) : NULL;
    if (!b) { /* nothing goes early now; the clock's flush sends it all */
        free(pick);
        free(order);
        return 0;
    }
    for (size_t i = 0; i < got; i++) order[i] = (picked){t->b_keys[pick[i]], pick[i]};
    qsort(order, got, sizeof *order, by_key);
    uint64_t *keys = (uint64_t *)b->data;
    uint8_t *vals = b->data + got * 8;
    for (size_t i = 0; i < got; i++) {
        keys[i] = order[i].key;
        memcpy(vals + i * t->row_bytes, t->b_rows + (size_t)order[i].slot * t->row_bytes,
               t->row_bytes);
        t->b_abs[order[i].slot] = -1; /* taken */
    }
    /* Close the gaps and re-index what stays. */
    size_t kept = 0;
    u64map_clear(&t->buf_idx);
    for (size_t i = 0; i < t->b_n; i++) {
        if (t->b_abs[i] < 0) continue;
        if (kept != i) {
            t->b_keys[kept] = t->b_keys[i];
            memcpy(t->b_rows + kept * t->row_bytes, t->b_rows + i * t->row_bytes, t->row_bytes);
            t->b_abs[kept] = t->b_abs[i];
            t->b_rel[kept] = t->b_rel[i];
        }
        int inserted;
        u64map_put(&t->buf_idx, t->b_keys[kept], (uint32_t)kept, &inserted); /* never grows */
        kept++;
    }
    t->b_n = kept;
    if (client_send_push(t, keys, 0, vals, got, b, NULL, 0, 1)) got = 0;
    sbuf_unref(b);
    free(pick);
    free(order);
    return got;
}

/* The timer of the I/O thread: one batch of one managed table (in turn) when
 * the budget and the ack window allow; returns when to run next. */
static uint64_t comm_tick(loom_node *n, void *ctx, uint64_t now)
{
    (void)n;
    ps_client *c = ctx;
    uint64_t wait = comm_mgr_wait(&c->cm, now);
    if (wait) return wait;
    size_t count;
    loom_table **list = client_snapshot_tables(c, &count);
    if (!list) return now + COMM_UNLIMITED_PERIOD_MS;
    size_t sent = 0;
    for (size_t i = 0; i < count && !sent; i++) {
        loom_table *t = list[(c->next_table + i) % count];
        if (!t->managed) continue;
        pthread_mutex_lock(&t->mu);
        if (t->b_n) sent = send_early(t);
        pthread_mutex_unlock(&t->mu);
        if (sent) c->next_table = (c->next_table + i + 1) % count;
    }
    free(list);
    if (!sent) return UINT64_MAX; /* a push into an empty buffer pokes the timer */
    atomic_fetch_add(&c->counters->managed_rows_sent, sent);
    return comm_mgr_next(&c->cm, now);
}

/* A server pushed rows that changed (SSPPush): rows this worker caches are
 * replaced, as a pull reply would fill them (with its own later writes
 * re-added), with the row version the push reflects (b) for later
 * PULL_SINCE; others are ignored. The rows come plain, not through the pull
 * chain (see server_comm.c). */
static void on_rows_push(loom_node *n, void *ctx, node_msg *m)
{
    ps_client *c = ctx;
    loom_table *t = m->h.table < PS_MAX_TABLES ? atomic_load(&c->by_id[m->h.table]) : NULL;
    int rank;
    if (!t || node_peer_role(n, m->from, &rank) != LOOM_SERVER) {
        node_drop(n, m, "row push for an unknown table or from a non-server");
        return;
    }
    size_t klen = node_frame_size(m, 0), count = klen / 8;
    if (!count || klen % 8 || count > SIZE_MAX / t->row_bytes ||
        node_frame_size(m, 1) != count * t->row_bytes) {
        node_drop(n, m, "row push frames do not match the table's rows");
        return;
    }
    const uint8_t *kp = node_frame_data(m, 0), *vp = node_frame_data(m, 1);
    for (size_t i = 0; i < count; i++) {
        uint64_t key;
        memcpy(&key, kp + i * 8, 8);
        if (!key_in_table(t, key) || server_of(t, key) != rank) {
            node_drop(n, m, "row push of a key the server does not hold");
            return;
        }
    }
    /* A push not taken (no memory for the row) costs only freshness, but is
     * acknowledged all the same: the server holds a slot of its window of
     * unacknowledged managed messages until then. */
    uint8_t *row = malloc(t->row_bytes); /* aligned, for client_add_own_writes */
    int64_t clock = atomic_load(&c->clock);
    uint64_t refreshed = 0;
    pthread_mutex_lock(&t->mu);
    int rmw = t->local_rmw && own_writes_pending(t, rank, m->h.a);
    for (size_t i = 0; row && t->cache_on && i < count; i++) {
        uint64_t key;
        uint32_t slot;
        memcpy(&key, kp + i * 8, 8);
        if (!u64map_get(&t->cache_idx, key, &slot)) continue;
        memcpy(row, vp + i * t->row_bytes, t->row_bytes);
        if (rmw) client_add_own_writes(t, rank, m->h.a, key, row);
        client_cache_put(t, key, row, m->h.clock, clock, m->h.b);
        refreshed++;
    }
    client_prune_applied(t, rank, m->h.a);
    pthread_mutex_unlock(&t->mu);
    free(row);
    atomic_fetch_add(&c->counters->pushed_rows_received, refreshed);
    msg_header h = {.type = MSG_ROWS_PUSH_ACK, .table = m->h.table, .req = m->h.req};
    node_send(n, m->from, &h, NULL, 0);
}

/* The oldest pull part still unanswered, the oldest push still
 * unacknowledged and loom_clock's wait for the slowest worker, each named
 * once when it has waited stall_ms (ps.h), with what it waits on: with the
 * servers' and the scheduler's own reports, a job that stopped moving says
 * where. */
/* How long something started at `since` has waited by `now`: 0 when it
 * started after `now` was read (an application thread stamps its requests
 * while the I/O thread's timer runs on the time of its round), rather than
 * an unsigned wrap read as 584 million years. */
static uint64_t waited_ms(uint64_t now, uint64_t since)
{
    return now > since ? now - since : 0;
}

static void client_report_stall(ps_client *c, uint64_t now)
{
    pthread_mutex_lock(&c->mu);
    const pull_slot *pull = NULL;
    uint32_t npulls = 0;
    for (uint32_t i = 0; i < c->nslots; i++) {
        const pull_slot *p = &c->slots[i];
        if (!p->req) continue;
        npulls++;
        if (!pull || p->since < pull->since) pull = p;
    }
    if (pull && waited_ms(now, pull->since) >= c->stall_ms && pull->since != c->stall_said[0]) {
        c->stall_said[0] = pull->since;
        log_warn("a pull of table %u has waited %" PRIu64 " s for server %d (%s), %u pull "
                 "part(s) unanswered in all",
                 pull->op->t->id, waited_ms(now, pull->since) / 1000, pull->server,
                 c->dead[pull->server] == PS_UP ? "up" : "not up", npulls);
    }
    pthread_mutex_unlock(&c->mu);
    size_t count;
    loom_table **list = client_snapshot_tables(c, &count);
    const loom_table *push_table = NULL;
    uint64_t push_since = UINT64_MAX;
    int push_server = -1;
    for (size_t i = 0; list && i < count; i++) {
        loom_table *t = list[i];
        pthread_mutex_lock(&t->mu);
        for (int s = 0; s < c->num_servers; s++)
            for (const inflight *f = t->ifl_head[s]; f; f = f->next)
                if (!f->acked && !f->parked) {
                    if (f->since < push_since)
                        push_since = f->since, push_table = t, push_server = s;
                    break; /* a server's FIFO: the first unacknowledged is its oldest */
                }
        pthread_mutex_unlock(&t->mu);
    }
    node_lock(c->node);
    uint64_t gate_since = c->gate_since;
    int64_t min = c->global_min, mine = atomic_load(&c->clock);
    int waiting = gate_since && min < mine - c->gate; /* not just woken */
    node_unlock(c->node);
    if (waiting && waited_ms(now, gate_since) >= c->stall_ms && gate_since != c->stall_said[2]) {
        c->stall_said[2] = gate_since;
        log_warn("loom_clock has waited %" PRIu64 " s for the slowest worker: this worker has "
                 "finished %" PRId64 " clocks, the slowest %" PRId64 " (the scheduler's word)",
                 waited_ms(now, gate_since) / 1000, mine, min);
    }
    if (push_table && waited_ms(now, push_since) >= c->stall_ms && push_since != c->stall_said[1]) {
        c->stall_said[1] = push_since;
        log_warn("a push to table %u has waited %" PRIu64 " s for server %d's acknowledgement (%s)",
                 push_table->id, waited_ms(now, push_since) / 1000, push_server,
                 c->dead[push_server] == PS_UP ? "up" : "not up");
    }
    free(list);
}

/* The I/O thread's timer: managed communication (comm_tick) and, every
 * second, a look for requests that have waited too long. */
static uint64_t client_tick(loom_node *n, void *ctx, uint64_t now)
{
    uint64_t next = comm_tick(n, ctx, now), look = now + 1000;
    client_report_stall(ctx, now);
    return next < look ? next : look;
}

/* The I/O thread's timer, and the rows servers push. */
void client_comm_attach(loom_node *n, ps_client *c)
{
    c->stall_ms = ps_stall_report_ms();
    node_set_timer(n, &ps_layer_def, client_tick, c);
    node_timer_poke(n, &ps_layer_def); /* the first look at the I/O thread's first turn */
    node_set_handler(n, MSG_ROWS_PUSH, on_rows_push, c);
}
