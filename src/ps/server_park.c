/* server_park: the push and pull path while ranges move (part.h;
 * docs/FAULTS.md, "Taking the ranges back").
 *
 * A replacement that holds full copies again takes back the ranges it was
 * master of: a handback, whose protocol is fault tolerance's
 * (src/ft/handback.c says how it goes). While a range moves, its pushes are
 * parked (sent again by their workers later) and its pulls held; once it
 * has moved, it is gated where it is master until the workers sent again
 * what they held for it. This file is how: ft sets the parts' states and
 * calls the part.h functions here; the push and pull path calls the srv_*
 * ones to park a push (srv_must_park, srv_park_push), to refuse a pull of a
 * range handed back (srv_refuse_handed_back) and, at a worker's last clock,
 * to open gated ranges (srv_gate_check).
 *
 * Nothing acknowledged is lost: a parked push was not acknowledged, or, if
 * staged under BSP, its worker learns that it was parked before any later
 * acknowledgement could let it forget it; and a parked push is never taken
 * for a duplicate when it comes back, since no later push of its worker to
 * its range is applied here before (behind_parked). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/log.h"
#include "ps/msg_types.h"
#include "ps/part.h"
#include "ps/server_impl.h"

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
     * next PARKED req 0, now unless one is unanswered (ps_part_acked). */
    uint8_t fence = srv_table_of(s, table)->parts[part].fence;
    if (fence != PS_PART_FENCED && fence != PS_PART_INCOMING && wp->told == wp->acked)
        tell_parked(s, w);
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
    return p->fence == PS_PART_FENCED || p->fence == PS_PART_INCOMING ||
           behind_parked(s, w, table, part, seq);
}

/* Refuse a pull of a range this server handed back (LOOM_ESTATE: ask its
 * master). A worker that takes this server for the range's master anyway
 * (it heard of a death that makes this server master again before this
 * server did) keeps the pull until told to ask again: so the worker is
 * told, as one whose push was parked here, when this server reopens the
 * range (ps_part_unpark, PARKED with req 0). Without that, the pull would wait
 * for a handback that may never come. */
void srv_refuse_handed_back(server *s, srv_table *t, node_msg *m, int w)
{
    s->parked_from[w] = 1;
    srv_refuse_pull(s, t, m, w, LOOM_ESTATE);
}

/* Park the staged or held pushes of fenced parts (table id). */
static void park_entries(server *s, uint32_t id, srv_table *t, staged **head, staged **tail)
{
    staged **pp = head, *last = NULL;
    while (*pp) {
        staged *st = *pp;
        if (t->parts[st->part].fence != PS_PART_FENCED) {
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

void ps_part_fenced(loom_node *n, uint64_t gen, int froze)
{
    server *s = srv_of(n);
    s->hb_gen = gen;
    if (froze) s->fencing = 1;
    for (uint32_t id = 0; id < s->cap; id++) {
        srv_table *t = s->tables[id];
        if (!t) continue;
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
        if (p && w >= 0 && p->fence && (p->fence != PS_PART_FENCED || srv_is_master(s, t, p))) {
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

void ps_part_unpark(loom_node *n)
{
    server *s = srv_of(n);
    s->fencing = 0;
    for (int w = 0; w < s->num_workers; w++)
        if (s->parked_from[w] && !s->lost[w]) tell_parked(s, w);
}

void ps_part_release(loom_node *n)
{
    server *s = srv_of(n);
    srv_gate_check(s);
    release_parked(s);
}

/* Gated ranges open once no worker still running owes an acknowledgement:
 * of the commit or drain (hb_owed), and of every PARKED req 0 it was told.
 * The two come apart when a worker hears the commit before this server: what
 * it sends here then finds the ranges incoming and is parked, and its
 * acknowledgement of the commit may arrive after this server's commit told
 * it to send those pushes again; opening on that acknowledgement answered a
 * BSP read one push short (sched.elastic_servers_bsp, unit.test_handback_steps
 * acks_late). */
void srv_gate_check(server *s)
{
    for (int w = 0; w < s->num_workers; w++)
        if ((s->hb_owed[w] || s->wparked[w].acked != s->wparked[w].told) && !s->lost[w] &&
            s->clocks.of[w] != PS_CLOCK_DONE)
            return;
    size_t opened = 0;
    for (uint32_t id = 0; id < s->cap; id++)
        for (size_t i = 0; s->tables[id] && i < s->tables[id]->nparts; i++)
            if (s->tables[id]->parts[i].fence == PS_PART_GATED) {
                s->tables[id]->parts[i].fence = PS_PART_OPEN;
                opened++;
            }
    if (!opened) return;
    release_parked(s);
    log_info("%zu ranges open: every worker sent again what they held for them", opened);
}

void ps_part_committed(loom_node *n, uint64_t gen, uint32_t handbacks, int took_back)
{
    server *s = srv_of(n);
    s->handbacks = handbacks;
    if (!took_back) return;
    /* Its cuts wait for the workers' CLOCKs after the handback, its pulls
     * for every worker's acknowledgement. */
    s->took_over = 1;
    for (int w = 0; w < s->num_workers; w++)
        if (s->hb_acked[w] < gen && s->hb_owed[w] < gen) s->hb_owed[w] = gen;
}

void ps_part_owe(loom_node *n, uint64_t gen)
{
    server *s = srv_of(n);
    for (int w = 0; w < s->num_workers; w++)
        if (s->hb_acked[w] < gen && s->hb_owed[w] < gen) s->hb_owed[w] = gen;
}

/* A worker sent again what it held for this server's ranges (after a
 * handback's commit, or PARKED with req 0) and asked again its pulls. */
int ps_part_acked(loom_node *n, uint32_t from, uint64_t gen, uint64_t unparked)
{
    server *s = srv_of(n);
    int w = srv_worker_rank(s, from);
    if (w < 0) return LOOM_EPROTO;
    if (gen > s->hb_acked[w]) s->hb_acked[w] = gen;
    if (s->hb_owed[w] && gen >= s->hb_owed[w]) s->hb_owed[w] = 0;
    worker_parked *wp = &s->wparked[w];
    if (unparked > wp->acked && unparked <= wp->told) {
        /* What it parked before that PARKED req 0 came back before this, or
         * went to another master: forgotten. What it parked since waits for
         * the next one, now if it is a part this server applies pushes to
         * again (behind_parked parked it), else at the next ps_part_unpark. */
        wp->acked = (uint32_t)unparked;
        size_t kept = 0, behind = 0;
        for (size_t i = 0; i < wp->n; i++) {
            if (wp->v[i].round <= wp->acked) continue;
            const srv_table *t = srv_table_of(s, wp->v[i].table);
            uint8_t fence = t ? t->parts[wp->v[i].part].fence : PS_PART_FENCED;
            behind += fence != PS_PART_FENCED && fence != PS_PART_INCOMING;
            wp->v[kept++] = wp->v[i];
        }
        wp->n = kept;
        if (behind && wp->told == wp->acked && !s->lost[w]) tell_parked(s, w);
    }
    srv_gate_check(s);
    return 0;
}
