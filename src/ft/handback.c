/* handback: a replacement server taking its ranges back (docs/FAULTS.md,
 * "Taking the ranges back"), as the servers see it; the scheduler's side,
 * which drives it, is handback_coord.c.
 *
 * A replacement that holds full copies again (rejoin.c) gets back the ranges
 * it was master of: their masters fence them, a replication round (replica.c)
 * carries their last changes, and then every node takes the replacement for
 * their master again; meanwhile pushes to them are parked (sent again by
 * their workers later) and pulls held. Which ranges move, when and to whom is
 * decided here; parking, holding and gating are the push and pull path's, in
 * src/ps (server_park.c), which this drives through src/ps/part.h.
 *
 * Once a replacement is BACK, the scheduler hands it back the ranges it
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
 * handback (HANDBACK b = 2; a failover does it too: failover.c): a fenced
 * range opens where this server is its master, gated until the workers
 * whose pushes were parked here have sent them again (PARKED with req 0,
 * answered by HANDBACK_ACK); the scheduler tries again later. A range taken
 * back comes back the same way if the replacement dies.
 *
 * Nothing acknowledged is lost: a parked push was not acknowledged, or, if
 * staged under BSP, its worker learns that it was parked before any later
 * acknowledgement could let it forget it (server_park.c); and a range's rows
 * move only through an acknowledged replication round. */
#include <stddef.h>
#include <stdint.h>

#include "core/log.h"
#include "core/msg.h"
#include "ft/replica.h"
#include "ps/msg_types.h"
#include "ps/part.h"
#include "ps/ring.h"

/* Fence the ranges that move to server d when it is UP. */
static void fence(ft_repl *r, int d, uint64_t gen)
{
    loom_node *n = r->node;
    size_t froze = 0;
    r->hb_gen = gen;
    uint32_t cap = ps_part_tables(n);
    for (uint32_t id = 0; id < cap; id++) {
        size_t nparts = ps_part_count(n, id);
        for (size_t i = 0; i < nparts; i++) {
            int now = ps_part_master(n, id, i, -1);
            if (now == d || ps_part_master(n, id, i, d) != d) continue;
            if (now == ft_me(r)) {
                ps_part_set_state(n, id, i, PS_PART_FENCED);
                froze++;
            } else if (d == ft_me(r)) {
                ps_part_set_state(n, id, i, PS_PART_INCOMING);
            }
        }
    }
    ps_part_fenced(n, gen, froze != 0);
    if (!froze) {
        msg_header h = {.type = MSG_HANDBACK_ACK, .req = gen};
        node_send(n, 0, &h, NULL, 0);
        return;
    }
    log_info("fenced %zu ranges to hand back to server %d", froze, d);
    /* Answered once this round is acknowledged (ft_fence_done), which may
     * be before the cut returns. */
    r->hb_round = r->rounds_cut + 1;
    ft_repl_cut(r);
}

void ft_fence_done(ft_repl *r, uint64_t done)
{
    if (!r->hb_round || done < r->hb_round) return;
    r->hb_round = 0;
    msg_header h = {.type = MSG_HANDBACK_ACK, .req = r->hb_gen};
    node_send(r->node, 0, &h, NULL, 0);
}

/* The workers whose pushes were parked or pulls refused here send them
 * again, and owe an acknowledgement, which gated ranges wait for; then the
 * held pulls are gone through. */
void ft_handback_reopen(ft_repl *r)
{
    loom_node *n = r->node;
    r->hb_round = 0;
    ps_part_unpark(n);
    uint32_t cap = ps_part_tables(n);
    for (uint32_t id = 0; id < cap; id++) {
        size_t nparts = ps_part_count(n, id);
        for (size_t i = 0; i < nparts; i++) {
            int state = ps_part_state(n, id, i);
            if ((state == PS_PART_FENCED || state == PS_PART_INCOMING) &&
                ps_part_is_master(n, id, i))
                ps_part_set_state(n, id, i, PS_PART_GATED);
        }
    }
    ps_part_release(n);
}

void ft_on_handback(loom_node *n, void *ctx, node_msg *m)
{
    ft_repl *r = ctx;
    int d;
    if (m->from != 0 || !ps_server_rank_of(n, m->h.a, &d) || m->h.b > 2 ||
        (m->h.b < 2 && ps_server_state(n, d) != PS_BACK) || (m->h.b > 0 && m->h.req != r->hb_gen) ||
        (m->h.b == 1 && (m->h.clock <= 0 || m->h.clock > UINT32_MAX))) {
        node_drop(n, m, "HANDBACK naming no server back, or of another generation");
        return;
    }
    if (m->h.b == 0) {
        fence(r, d, m->h.req);
        return;
    }
    if (m->h.b == 1) {
        ps_server_set_state(n, d, PS_UP, 0);
        ps_part_committed(n, m->h.req, (uint32_t)m->h.clock, d == ft_me(r));
    }
    /* An abort: the ranges incoming here stay another server's. */
    uint32_t cap = m->h.b == 2 ? ps_part_tables(n) : 0;
    for (uint32_t id = 0; id < cap; id++) {
        size_t nparts = ps_part_count(n, id);
        for (size_t i = 0; i < nparts; i++)
            if (ps_part_state(n, id, i) == PS_PART_INCOMING && !ps_part_is_master(n, id, i))
                ps_part_set_state(n, id, i, PS_PART_OPEN);
    }
    ft_handback_reopen(r);
}

/* A worker sent again what it held for this server's ranges (after a
 * handback's commit, or PARKED with req 0) and asked again its pulls: what
 * it owed is settled (src/ps keeps the count). */
void ft_on_handback_ack(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    if (ps_part_acked(n, m->from, m->h.req, m->h.b))
        node_drop(n, m, "HANDBACK_ACK from a non-worker");
}
