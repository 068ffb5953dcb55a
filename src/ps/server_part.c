/* server_part: a server's parts as src/ft sees them (part.h).
 *
 * Fault tolerance (replication rounds, failover, a replacement, a handback)
 * lives in src/ft, above ps: it reaches a server's tables, parts and server
 * states only through these functions (and those of server_park.c), which
 * name a part by table id and index, so that the server's state
 * (server_impl.h) stays ps's own. */
#include <stdint.h>
#include <string.h>

#include "core/log.h"
#include "loom/error.h"
#include "ps/msg_types.h"
#include "ps/part.h"
#include "ps/server_impl.h"

static srv_part *part_at(loom_node *n, uint32_t table, size_t part, srv_table **t)
{
    *t = srv_table_of(srv_of(n), table);
    return *t && part < (*t)->nparts ? &(*t)->parts[part] : NULL;
}

void ps_server_set_repl(loom_node *n, const ps_repl_hooks *hooks)
{
    srv_of(n)->repl = *hooks;
}

int ps_part_replicas(loom_node *n)
{
    return srv_of(n)->replicas;
}

uint32_t ps_part_tables(loom_node *n)
{
    return srv_of(n)->cap;
}

size_t ps_part_count(loom_node *n, uint32_t table)
{
    srv_table *t = srv_table_of(srv_of(n), table);
    return t ? t->nparts : 0;
}

size_t ps_part_range(loom_node *n, uint32_t table, size_t part)
{
    srv_table *t;
    srv_part *p = part_at(n, table, part, &t);
    return p ? p->range : 0;
}

int ps_part_holder(loom_node *n, uint32_t table, size_t part, int i)
{
    srv_table *t;
    srv_part *p = part_at(n, table, part, &t);
    return p ? ps_ring_holder(&t->ring, p->range, i) : -1;
}

int ps_part_is_master(loom_node *n, uint32_t table, size_t part)
{
    srv_table *t;
    srv_part *p = part_at(n, table, part, &t);
    return p && srv_is_master(srv_of(n), t, p);
}

int ps_part_state(loom_node *n, uint32_t table, size_t part)
{
    srv_table *t;
    srv_part *p = part_at(n, table, part, &t);
    return p ? p->fence : PS_PART_OPEN;
}

void ps_part_set_state(loom_node *n, uint32_t table, size_t part, int state)
{
    srv_table *t;
    srv_part *p = part_at(n, table, part, &t);
    if (p) p->fence = (uint8_t)state;
}

int ps_part_master(loom_node *n, uint32_t table, size_t part, int up)
{
    server *s = srv_of(n);
    srv_table *t;
    srv_part *p = part_at(n, table, part, &t);
    if (!p) return -1;
    if (up < 0) return ps_ring_master(&t->ring, p->range, s->dead, s->returned);
    uint8_t was = s->dead[up];
    s->dead[up] = PS_UP;
    int m = ps_ring_master(&t->ring, p->range, s->dead, s->returned);
    s->dead[up] = was;
    return m;
}

int ps_part_master_without(loom_node *n, uint32_t table, size_t part, int down)
{
    server *s = srv_of(n);
    srv_table *t;
    srv_part *p = part_at(n, table, part, &t);
    if (!p) return -1;
    uint8_t was = s->dead[down];
    s->dead[down] = PS_DOWN;
    int m = ps_ring_master(&t->ring, p->range, s->dead, s->returned);
    s->dead[down] = was;
    return m;
}

const uint64_t *ps_part_applied(loom_node *n, uint32_t table, size_t part)
{
    srv_table *t;
    srv_part *p = part_at(n, table, part, &t);
    return p ? p->applied : NULL;
}

/* Whether a push of worker w older than one applied (a hole's) is staged or
 * held in table t, not applied yet. Its later pushes staged meanwhile do not
 * count: under BSP a worker's next clock is often staged at a cut. */
static int hole_pending(const srv_table *t, int w)
{
    for (const staged *st = t->staged_head; st; st = st->next)
        if (st->worker == w && st->m.h.req <= t->applied[w]) return 1;
    for (const staged *st = t->held_head; st; st = st->next)
        if (st->worker == w && st->m.h.req <= t->applied[w]) return 1;
    return 0;
}

const uint64_t *ps_table_applied(loom_node *n, uint32_t table, uint64_t round)
{
    server *s = srv_of(n);
    srv_table *t = srv_table_of(s, table);
    if (!t) return NULL;
    /* The pushes that made a hole (server_push.c, durable_said) are all applied: this
     * round carries them. */
    for (int w = 0; w < s->num_workers; w++)
        if (t->hole[w] && !t->hole_round[w] && !hole_pending(t, w)) t->hole_round[w] = round;
    return t->applied;
}

int ps_part_rows(loom_node *n, uint32_t table, size_t part, int changed, blob_writer *w,
                 uint64_t *rows)
{
    srv_table *t;
    srv_part *p = part_at(n, table, part, &t);
    *rows = 0;
    if (!p) return 0;
    row_writer rw = {w, t->row_bytes, store_state_bytes(p->store), 0};
    int rc = store_for_each(p->store, changed, srv_put_row, &rw);
    *rows = rw.rows;
    return rc;
}

int ps_part_replicated(loom_node *n, uint32_t table, uint64_t range, int from,
                       const uint8_t *applied, size_t alen, const uint8_t *rows, size_t len,
                       uint64_t nrows, const char **why)
{
    server *s = srv_of(n);
    srv_table *t = srv_table_of(s, table);
    if (!t || range >= t->ring.nranges || t->part_of[range] == NO_PART ||
        !ps_ring_holds(&t->ring, (size_t)range, from) || alen != (size_t)s->num_workers * 8) {
        *why = "replication of a range this server does not replicate";
        return LOOM_EPROTO;
    }
    srv_part *p = &t->parts[t->part_of[range]];
    size_t state_bytes = store_state_bytes(p->store), per = 8 + t->row_bytes + state_bytes;
    if (nrows == 0 || len / per != nrows || len % per) {
        *why = "replicated rows do not match the table's rows";
        return LOOM_EPROTO;
    }
    for (uint64_t i = 0; i < nrows; i++) {
        uint64_t key = msg_load_u64(rows + i * per);
        if (key < p->lo || (ps_u128)key >= p->hi) {
            *why = "replicated row outside its range";
            return LOOM_EPROTO;
        }
    }
    t->version++;
    for (uint64_t i = 0; i < nrows; i++) {
        const uint8_t *r = rows + i * per;
        uint64_t key = msg_load_u64(r);
        void *state;
        void *row = store_row(p->store, key, &state);
        if (!row || srv_mark_changed(t, p, key)) {
            log_error("out of memory holding a replica of table \"%s\"", t->def.name);
            return LOOM_ENOMEM;
        }
        memcpy(row, r + 8, t->row_bytes);
        if (state_bytes) memcpy(state, r + 8 + t->row_bytes, state_bytes);
    }
    for (int w = 0; w < s->num_workers; w++) {
        uint64_t a = msg_load_u64(applied + 8 * w);
        if (a > p->applied[w]) p->applied[w] = a;
    }
    store_forget_changes(p->store); /* a copy: nothing of it to replicate on */
    return 0;
}

void ps_table_durable(loom_node *n, uint32_t table, const uint64_t *applied, uint64_t round)
{
    server *s = srv_of(n);
    srv_table *t = srv_table_of(s, table);
    for (int w = 0; t && w < s->num_workers; w++) {
        if (applied[w] > t->durable[w]) t->durable[w] = applied[w];
        if (t->hole_round[w] && round >= t->hole_round[w]) t->hole[w] = t->hole_round[w] = 0;
    }
}

void ps_part_ack(loom_node *n, uint32_t to, uint32_t table, uint64_t req, int status,
                 uint64_t applied)
{
    server *s = srv_of(n);
    srv_table *t = srv_table_of(s, table);
    if (t) srv_ack_now(s, t, to, table, req, status, applied);
}

int ps_server_rank_of(loom_node *n, uint64_t id, int *rank)
{
    return id <= UINT32_MAX && node_peer_role(n, (uint32_t)id, rank) == LOOM_SERVER;
}

int ps_server_state(loom_node *n, int rank)
{
    return srv_of(n)->dead[rank];
}

void ps_server_set_state(loom_node *n, int rank, int state, uint32_t returned)
{
    server *s = srv_of(n);
    s->dead[rank] = (uint8_t)state;
    if (state == PS_BACK) s->returned[rank] = returned;
}

int ps_part_survives(loom_node *n, uint32_t id)
{
    server *s = srv_of(n);
    return ps_survives(n, s->replicas, s->dead, id);
}

void ps_part_death(loom_node *n, int took_over)
{
    server *s = srv_of(n);
    s->deaths++;
    if (took_over) s->took_over = 1;
}

void ps_part_set_counts(loom_node *n, uint32_t deaths, uint32_t handbacks)
{
    server *s = srv_of(n);
    s->deaths = deaths;
    s->handbacks = handbacks;
}
