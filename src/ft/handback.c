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
 * move only through an acknowledged replication round.
 *
 * A server that leaves (docs/ELASTIC.md) hands its ranges over the same
 * way, in reverse (a drain; handback_coord.c drives it):
 *
 * 1. Fence (HANDBACK b = 3, a = the leaving server L, to every live
 *    server). L fences every range it is master of and cuts a replication
 *    round, answering once it is acknowledged; each range's next holder
 *    (its master once L is DOWN) marks it incoming.
 * 2. Sync (HANDBACK b = 4, scheduler -> L -> every worker). L sends it to
 *    the workers after every acknowledgement and PARKED of its own, so a
 *    worker that gets it knows which of its pushes to L were applied (and
 *    are now held by L's replicas: dropped, never sent again) and which L
 *    parked or will park (kept); it answers the scheduler (HANDBACK_ACK).
 * 3. Commit: the scheduler lets the job go on without L (NODE_FAILED b = 2,
 *    req = the drain), and tells L to end. Every node moves L's ranges to
 *    their next holders as after a death (failover.c), but a worker's
 *    pushes for them were never applied (pushes_redirected, not resent),
 *    and the next holders gate the ranges they took over until every
 *    worker sent them those pushes and acknowledged (HANDBACK_ACK), so a
 *    BSP or SSP read is exact from the first pull. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/log.h"
#include "core/msg.h"
#include "ft/replica.h"
#include "ps/msg_types.h"
#include "ps/part.h"
#include "ps/ring.h"

/* The master a part moves from (*from) and to (*to) in handback or drain
 * `phase` of server d; 0 if it does not move. */
static int moves(loom_node *n, uint32_t id, size_t i, int d, uint64_t phase, int *from, int *to)
{
    *from = ps_part_master(n, id, i, -1);
    if (phase == 3) { /* d leaves: its ranges go to their next holders */
        *to = ps_part_master_without(n, id, i, d);
        return *from == d && *to >= 0 && *to != d;
    }
    *to = d; /* d takes its ranges back */
    return *from != d && ps_part_master(n, id, i, d) == d;
}

/* Fence the ranges that move to server d when it is UP (phase 0), or away
 * from server d when it leaves (phase 3, a drain). */
static void fence(ft_repl *r, int d, uint64_t gen, uint64_t phase)
{
    loom_node *n = r->node;
    size_t froze = 0;
    r->hb_gen = gen;
    uint32_t cap = ps_part_tables(n);
    for (uint32_t id = 0; id < cap; id++) {
        size_t nparts = ps_part_count(n, id);
        for (size_t i = 0; i < nparts; i++) {
            int from, to;
            if (!moves(n, id, i, d, phase, &from, &to)) continue;
            if (from == ft_me(r)) {
                ps_part_set_state(n, id, i, PS_PART_FENCED);
                froze++;
            } else if (to == ft_me(r)) {
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
    if (phase == 3)
        log_info("leaving: fenced the %zu ranges this server is master of, to hand them over",
                 froze);
    else
        log_info("fenced %zu ranges to hand back to server %d", froze, d);
    /* Answered once this round is acknowledged (ft_fence_done), which may
     * be before the cut returns. */
    r->hb_leaving = phase == 3;
    r->hb_bytes = atomic_load(r->bytes);
    r->hb_round = r->rounds_cut + 1;
    ft_repl_cut(r);
}

void ft_fence_done(ft_repl *r, uint64_t done)
{
    if (!r->hb_round || done < r->hb_round) return;
    r->hb_round = 0;
    if (r->hb_leaving)
        log_info("leaving: the last replication round is acknowledged (%" PRIu64
                 " bytes sent since the fence)",
                 atomic_load(r->bytes) - r->hb_bytes);
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

/* A drain's sync (phase 4) at the leaving server: every acknowledgement and
 * PARKED of its pushes went to the workers before this, which tells them
 * so (client_failover.c drops what this server applied). */
static void sync_workers(ft_repl *r, uint64_t gen)
{
    loom_node *n = r->node;
    int servers = loom_num_servers(n), workers = loom_num_workers(n);
    msg_header h = {
        .type = MSG_HANDBACK, .a = node_server_id(servers, ft_me(r)), .b = 4, .req = gen};
    for (int w = 0; w < workers; w++) node_send(n, node_worker_id(servers, w), &h, NULL, 0);
    log_info("leaving: the replicas hold every push this server applied; the workers are told");
}

void ft_on_handback(loom_node *n, void *ctx, node_msg *m)
{
    ft_repl *r = ctx;
    int d;
    int drain = m->h.b == 3 || m->h.b == 4;
    if (m->from != 0 || !ps_server_rank_of(n, m->h.a, &d) || m->h.b > 4 ||
        (m->h.b < 2 && ps_server_state(n, d) != PS_BACK) ||
        (drain && ps_server_state(n, d) != PS_UP) || (m->h.b == 4 && d != ft_me(r)) ||
        (m->h.b != 0 && m->h.b != 3 && m->h.req != r->hb_gen) ||
        (m->h.b == 1 && (m->h.clock <= 0 || m->h.clock > UINT32_MAX))) {
        node_drop(n, m, "HANDBACK naming no server back or leaving, or of another generation");
        return;
    }
    if (m->h.b == 0 || m->h.b == 3) {
        fence(r, d, m->h.req, m->h.b);
        return;
    }
    if (m->h.b == 4) {
        sync_workers(r, m->h.req);
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
