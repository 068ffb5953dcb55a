/* server_handback: a replacement server taking its ranges back
 * (docs/FAULTS.md).
 *
 * A replacement that holds full copies again (src/ft/rejoin.c) gets back
 * the ranges it was master of: their masters fence them, a replication round
 * carries their last changes, and then every node takes the replacement for
 * their master again; meanwhile pushes to them are parked (sent again by
 * their workers later) and pulls held. The section below says how. The push
 * and pull path calls it only to park a push (srv_must_park, srv_park_push),
 * to refuse a pull of a range handed back (srv_refuse_handed_back) and, at a
 * worker's last clock, to open gated ranges (srv_gate_check). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/log.h"
#include "ps/msg_types.h"
#include "ps/server_impl.h"

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
void srv_park_push(server *s, uint32_t to, int w, uint32_t table, size_t part, uint64_t seq)
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
     * next PARKED req 0, now unless one is unanswered (srv_on_handback_ack). */
    uint8_t fence = srv_table_of(s, table)->parts[part].fence;
    if (fence != PART_FENCED && fence != PART_INCOMING && wp->told == wp->acked) tell_parked(s, w);
}

/* Whether push seq of worker w to an open or gated part must be parked too:
 * a range applies a worker's push only if its sequence is newer than the
 * last it applied from that worker (srv_apply_rows), so a push parked here and
 * still to come back would look applied once a later one was. So a later
 * push of the worker to the part is parked while an older one is out
 * (srv_park_push has the worker send it again). The oldest parked one coming
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
int srv_must_park(server *s, srv_part *p, int w, uint32_t table, size_t part, uint64_t seq)
{
    return p->fence == PART_FENCED || p->fence == PART_INCOMING ||
           behind_parked(s, w, table, part, seq);
}

/* Refuse a pull of a range this server handed back (LOOM_ESTATE: ask its
 * master). A worker that takes this server for the range's master anyway
 * (it heard of a death that makes this server master again before this
 * server did) keeps the pull until told to ask again: so the worker is
 * told, as one whose push was parked here, when this server reopens the
 * range (srv_reopen(), PARKED with req 0). Without that, the pull would wait
 * for a handback that may never come. */
void srv_refuse_handed_back(server *s, srv_table *t, node_msg *m, int w)
{
    s->parked_from[w] = 1;
    srv_refuse_pull(s, t, m, w, LOOM_ESTATE);
}

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
        srv_park_push(s, st->m.from, st->worker, id, st->part, st->m.h.req);
        srv_free_entry(st);
    }
    *tail = last;
}

/* The part a kept pull reads, or NULL if it reads none this server holds. */
static srv_part *pull_part(server *s, deferred *d, srv_table **table)
{
    srv_table *t = *table = srv_table_of(s, d->m.h.table);
    const uint64_t *keys;
    uint64_t count;
    srv_part *p = NULL;
    return t && !srv_check_pull(s, t, &d->m, &d->dk, &keys, &count, &p) ? p : NULL;
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
    s->hb_round = s->repl.next_round(s->repl.ctx); /* cut now, or on src/ft's timer */
    s->repl.cut(s->repl.ctx, 1);
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
        int w = srv_worker_rank(s, d->m.from);
        if (p && w >= 0 && p->fence && (p->fence != PART_FENCED || srv_is_master(s, t, p))) {
            pp = &d->next;
            continue;
        }
        *pp = d->next;
        s->nparked--;
        if (p && w >= 0 && p->fence) {
            srv_refuse_handed_back(s, t, &d->m, w);
        } else if (p && w >= 0 && d->m.h.clock <= s->min_clock) {
            srv_answer_pull(s, t, &d->m, w, &d->dk);
        } else if (p && w >= 0) {
            d->next = s->waiting;
            s->waiting = d;
            s->nwaiting++;
            continue;
        }
        srv_free_deferred(d);
    }
}

/* The masters changed (a handback's commit or abort, a failover): the
 * fenced or incoming ranges this server is master of now open, gated while
 * workers owe an acknowledgement; the workers whose pushes were parked or
 * pulls refused here send them again, and owe one; the held pulls are gone
 * through. */
void srv_reopen(server *s)
{
    for (int w = 0; w < s->num_workers; w++)
        if (s->parked_from[w] && !s->lost[w]) tell_parked(s, w);
    for (uint32_t id = 0; id < s->cap; id++) {
        srv_table *t = s->tables[id];
        for (size_t i = 0; t && i < t->nparts; i++) {
            srv_part *p = &t->parts[i];
            if ((p->fence == PART_FENCED || p->fence == PART_INCOMING) && srv_is_master(s, t, p))
                p->fence = PART_GATED;
        }
    }
    srv_gate_check(s);
    release_parked(s);
}

/* Gated ranges open once no worker still running owes an acknowledgement. */
void srv_gate_check(server *s)
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

void srv_on_handback(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    int d;
    if (m->from != 0 || !ps_server_rank_of(n, m->h.a, &d) || m->h.b > 2 ||
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
                !srv_is_master(s, s->tables[id], &s->tables[id]->parts[i]))
                s->tables[id]->parts[i].fence = PART_OPEN;
    srv_reopen(s);
}

/* A worker sent again what it held for this server's ranges (after a
 * handback's commit, or PARKED with req 0) and asked again its pulls. */
void srv_on_handback_ack(loom_node *n, void *ctx, node_msg *m)
{
    server *s = ctx;
    int w = srv_worker_rank(s, m->from);
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
         * again (behind_parked parked it), else at the next srv_reopen(). */
        wp->acked = (uint32_t)m->h.b;
        size_t kept = 0, behind = 0;
        for (size_t i = 0; i < wp->n; i++) {
            if (wp->v[i].round <= wp->acked) continue;
            const srv_table *t = srv_table_of(s, wp->v[i].table);
            uint8_t fence = t ? t->parts[wp->v[i].part].fence : PART_FENCED;
            behind += fence != PART_FENCED && fence != PART_INCOMING;
            wp->v[kept++] = wp->v[i];
        }
        wp->n = kept;
        if (behind && wp->told == wp->acked && !s->lost[w]) tell_parked(s, w);
    }
    srv_gate_check(s);
}
