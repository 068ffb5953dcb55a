/* server_clock: the min clock, and what waits for it.
 *
 * Each worker reports the clocks it completed (CLOCK, sent after that clock's
 * pushes on the same connection); the slowest worker's, `min_clock`, says
 * which updates the partition is guaranteed to contain. When it moves
 * (advance), the server applies the pushes that waited for it, cuts a
 * planned checkpoint (server_ckpt.c) and answers the pulls that waited
 * (server_pull.c).
 *
 * BSP tables make updates visible a whole clock at a time: a push of clock c
 * is acknowledged on arrival but kept in `staged` and applied only once
 * every worker has finished clock c. A pull at clock c waits until every
 * worker finished clock c - 1, so it sees exactly the updates of clocks < c
 * (plus, through the reader's own bookkeeping, the reader's own writes):
 * the result a sequential run of the same supersteps would give.
 *
 * Under SSP and ASP, a push of a clock at or past the next checkpoint's cut
 * is held, unapplied and unacknowledged, until that cut is written, so that
 * a cut holds exactly the clocks before it. A worker the job goes on without
 * (WORKER_LOST) no longer counts: what it pushed for the clock it did not
 * finish is dropped where it still can be. */
#include <inttypes.h>
#include <stdint.h>

#include "core/log.h"
#include "ps/msg_types.h"
#include "ps/server_impl.h"

/* The planned checkpoint's clock in this run's clocks (INT64_MAX: none). */
static int64_t next_cut(const server *s)
{
    return s->ckpt.cut && s->cut_at >= 0 ? s->cut_at - s->ckpt.base : INT64_MAX;
}

/* A push of clock `clock` into a BSP table waits for the clock to end everywhere. */
int srv_must_stage(server *s, srv_table *t, int64_t clock)
{
    return t->def.opts.consistency == LOOM_BSP && clock >= s->min_clock;
}

/* Under SSP and ASP, a push of a clock at or past the next checkpoint's cut
 * is held, unapplied and unacknowledged, until that cut is written. */
int srv_must_hold(server *s, srv_table *t, int64_t clock)
{
    return t->def.opts.consistency != LOOM_BSP && clock >= next_cut(s);
}

/* A push of `clock` was applied as it came (SSP, ASP): a cut planned at or
 * before that clock could no longer be exact. */
void srv_note_applied(server *s, int64_t clock)
{
    if (clock > s->applied_clock) s->applied_clock = clock;
}

/* Apply a staged or held push, decoded or kept as it arrived. */
static int apply_entry(server *s, srv_table *t, staged *st)
{
    srv_part *p = &t->parts[st->part];
    return st->keys ? srv_apply_rows(s, t, p, st->keys, 0, st->vals, st->n, st->worker, st->m.h.req)
                    : srv_apply_push(s, t, p, &st->m, st->worker);
}

/* After a cut: apply, in arrival order, and acknowledge the held pushes that
 * the next cut does not hold back. */
void srv_release_held(server *s, srv_table *t)
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
        srv_note_applied(s, st->m.h.clock);
        srv_send_push_ack(s, t, &st->m, st->worker, apply_entry(s, t, st));
        srv_free_entry(st);
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
        srv_note_applied(s, st->m.h.clock);
        if (apply_entry(s, t, st))
            log_error("out of memory applying a push to table \"%s\"", t->def.name);
        srv_free_entry(st);
    }
    t->staged_tail = last;
}

static void advance(server *s);

void srv_on_clock(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    int w = srv_worker_rank(s, m->from), rank;
    if (m->from == 0 && m->h.a <= UINT32_MAX &&
        node_peer_role(n, (uint32_t)m->h.a, &rank) == LOOM_WORKER && m->h.clock == PS_CLOCK_DONE) {
        /* The scheduler relays the end of a worker that finished before this
         * server (a replacement) joined, and will never tell it itself. */
        if (s->lost[rank]) return;
        w = rank;
    }
    if (w >= 0 && m->from != 0 && m->h.a == 1) {
        /* A worker joined the running job in a slot that was done (a free
         * one, or one a worker left): it counts from the clock it joins at,
         * its first message here (docs/ELASTIC.md). */
        if (!s->joining[w] || m->h.clock < 0) {
            node_drop(n, m, "a join's CLOCK from a worker that did not just join");
            return;
        }
        s->joining[w] = 0;
        /* Its slot is held at the clock srv_on_join said, which the
         * registry's J is not below; a slot not held (the server's
         * JOIN_CLOCK was refused) enters at the min clock at least. */
        int64_t at = s->clocks.of[w] == PS_CLOCK_DONE ? ps_minclock_join(&s->clocks, w, m->h.clock)
                     : m->h.clock > s->clocks.of[w]   ? m->h.clock
                                                      : s->clocks.of[w];
        ps_minclock_set(&s->clocks, w, at);
        s->joined_at[w] = at;
        log_info("worker %d joined at clock %" PRId64, w, at);
        advance(s);
        return;
    }
    if (w >= 0 && s->joined_at[w] >= 0 && m->h.clock >= 0 && m->h.clock < s->clocks.of[w] &&
        m->h.clock <= s->joined_at[w])
        return; /* a joined worker's clocks below where this server entered it */
    if (w < 0 || m->h.clock < s->clocks.of[w]) {
        node_drop(n, m, "clock from a non-worker or going backwards");
        return;
    }
    ps_minclock_set(&s->clocks, w, m->h.clock);
    if (m->h.b > s->handled[w] && m->h.b <= UINT32_MAX) {
        s->handled[w] = (uint32_t)m->h.b;
        s->handled_since[w] = m->h.clock;
    }
    advance(s);
    if (s->clocks.of[w] == PS_CLOCK_DONE) srv_gate_check(s);
}

/* A worker joins the running job in slot w (NODE_REJOINED, before its
 * roster; docs/ELASTIC.md). Its slot is held at the min clock from now until
 * its first CLOCK here, and the registry told so (JOIN_CLOCK, before this
 * server's ROSTER_ACK): the registry starts it at that clock or later. Were
 * the slot left out of the min clock until the worker's first CLOCK, the
 * others' CLOCKs could end the clock the registry starts it at, before its
 * pushes of that clock came: BSP reads of the next clock would miss them. */
void srv_on_join(loom_node *n, void *ctx, uint32_t id)
{
    server *s = ctx;
    int w;
    if (node_peer_role(n, id, &w) != LOOM_WORKER || w >= s->num_workers) return;
    s->joining[w] = 1;
    s->lost[w] = 0; /* a dead worker's slot (--on-worker-failure continue): a new worker */
    /* It holds nothing this server parked or that moved here, so it owes no
     * acknowledgement that gated ranges could wait for (server_park.c); what
     * the slot's last worker owed went with it. */
    s->hb_owed[w] = 0;
    s->parked_from[w] = 0;
    s->wparked[w].n = 0;
    s->wparked[w].acked = s->wparked[w].told;
    if (s->clocks.of[w] != PS_CLOCK_DONE) return; /* a slot is free before a join */
    int64_t held = ps_minclock_join(&s->clocks, w, 0);
    msg_header h = {.type = MSG_JOIN_CLOCK, .a = id, .clock = held};
    node_send(n, 0, &h, NULL, 0);
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
        srv_free_entry(st);
    }
    *tail = last;
}

/* The job goes on without a worker (--on-worker-failure continue): every
 * clock it finished stays (its CLOCK came after that clock's pushes on the
 * same connection, so they are all here); what it pushed for the clock it
 * did not finish is dropped where it still can be (BSP's staged pushes, and
 * pushes held past a checkpoint's cut); its pulls are forgotten; the min
 * clock stops waiting for it. */
void srv_on_worker_lost(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    int w = m->h.a <= UINT32_MAX ? srv_worker_rank(s, (uint32_t)m->h.a) : -1;
    if (w < 0) {
        node_drop(n, m, "WORKER_LOST naming no live worker");
        return;
    }
    s->lost[w] = 1;
    for (uint32_t i = 0; i < s->cap; i++) {
        srv_table *t = s->tables[i];
        if (!t) continue;
        drop_unfinished(&t->staged_head, &t->staged_tail, w, s->clocks.of[w]);
        drop_unfinished(&t->held_head, &t->held_tail, w, s->clocks.of[w]);
    }
    for (deferred **pp = &s->waiting; *pp;) {
        deferred *d = *pp;
        if (d->m.from != (uint32_t)m->h.a) {
            pp = &d->next;
            continue;
        }
        *pp = d->next;
        s->nwaiting--;
        srv_free_deferred(d);
    }
    log_warn("worker %d is lost: the job goes on without it after its clock %" PRId64, w,
             s->clocks.of[w]);
    ps_minclock_set(&s->clocks, w, PS_CLOCK_DONE);
    advance(s);
    srv_gate_check(s);
}

/* A worker's clock moved: apply, cut and answer what the new min clock allows. */
static void advance(server *s)
{
    int64_t min = s->clocks.min; /* not a scan of every worker's: minclock.h */
    if (min > s->min_clock) {
        int64_t cut = next_cut(s);
        if (s->min_clock != PS_CLOCK_DONE) s->last_min = s->min_clock;
        s->min_clock = min;
        if (min != PS_CLOCK_DONE) s->last_min = min;
        for (uint32_t i = 0; i < s->cap; i++)
            if (s->tables[i] && s->tables[i]->staged_head) apply_staged(s, s->tables[i]);
        if (cut != INT64_MAX && min == cut) {
            srv_cut_now(s);
        } else if (cut != INT64_MAX && min > cut) {
            s->cut_at = -1;
            s->ckpt.skip(s->ckpt.ctx, s->ckpt.base + cut,
                         min == PS_CLOCK_DONE ? -1 : s->ckpt.base + min,
                         min == PS_CLOCK_DONE ? "every worker finished before it"
                                              : "the min clock went past it at once");
        }
        for (uint32_t i = 0; i < s->cap; i++)
            if (s->tables[i] && s->tables[i]->held_head) srv_release_held(s, s->tables[i]);
        srv_release_deferred(s);
    }
}
