/* failover: a server survives the death of another (docs/FAULTS.md).
 *
 * The node runs this subscriber (node_add_failover) when server `id` is
 * declared dead. If the job goes on without it (no more servers dead than
 * there are replicas: ps_part_survives, which every node decides the same
 * way), the ranges it was master of now have their first live replica as
 * master (src/ps/ring.h); this server already holds a copy of every range it
 * may become master of, and src/ps routes by the server states, so nothing
 * moves here: the replication rounds stop waiting for the dead server, a
 * handback in progress is off (handback.c reopens what it fenced), and the
 * death is counted for checkpoints. It is fault tolerance's decision, not the
 * parameter server's, so it lives here and calls down into ps.
 *
 * A server that left after handing its ranges over (a drain, handback.c)
 * goes the same way, with its ranges fenced and fully replicated: those
 * taken over here are gated until every worker has sent the pushes it held
 * for them (never applied) and acknowledged, as after a handback. */
#include <stddef.h>
#include <stdint.h>

#include "core/log.h"
#include "ft/replica.h"
#include "ps/part.h"

int ft_failover(loom_node *n, void *ctx, uint32_t id)
{
    ft_repl *r = ctx;
    if (!ps_part_survives(n, id)) return 0;
    int d;
    node_peer_role(n, id, &d);
    for (repl_round *rd = r->rounds; rd; rd = rd->next) {
        rd->nwaiting -= rd->waiting[d];
        rd->waiting[d] = 0;
    }
    size_t took = 0;
    uint32_t cap = ps_part_tables(n);
    for (uint32_t i = 0; i < cap; i++) {
        size_t nparts = ps_part_count(n, i);
        for (size_t j = 0; j < nparts; j++)
            took += ps_part_holder(n, i, j, 0) == d && ps_part_is_master(n, i, j);
    }
    r->fed[d] = r->copy[d] = 0;
    uint64_t drained = node_peer_drained(n, id);
    if (drained)
        log_info("server %d left: this server is now master of %zu of its ranges, handed over", d,
                 took);
    else
        log_warn("server %d died: this server is now master of %zu of its ranges", d, took);
    if (drained) ps_part_owe(n, drained); /* ranges it was master of, not only first holder of */
    ps_part_death(n, took != 0);
    /* A fence in progress is off (the scheduler aborts it:
     * handback_coord.c); a range handed back to the dead server comes back
     * here if this is its master again. */
    ft_handback_reopen(r);
    ft_repl_rounds_done(r);
    return 1;
}
