/* rejoin: a replacement server, as the other servers and the replacement
 * itself see it (docs/FAULTS.md, "A replacement server").
 *
 * A process that takes a dead server's rank (NODE_REJOINED, to everyone and
 * to itself) is JOINING: it creates the tables (TABLE_CREATE from the
 * registry), then every live server, asked by REJOIN_COPY (the scheduler's
 * rejoin_coord.c), sends it in its next replication round (replica.c) all
 * rows of every range it is master of that the newcomer holds, and its
 * later rounds as to any replica; once that round is acknowledged it says so
 * (REJOIN_COPIED). When all have, the scheduler tells everyone
 * (REJOIN_READY): the newcomer is BACK, a full
 * replica, and the master of a range once the range's UP holders are dead.
 * No range moves when it comes back, so no push is redirected. Copies travel
 * in the rounds, so this is fault tolerance's too; src/ps only keeps the
 * server states it routes by (ps_server_set_state). */
#include <stdint.h>

#include "core/log.h"
#include "core/msg.h"
#include "ft/replica.h"
#include "ps/msg_types.h"
#include "ps/part.h"
#include "ps/ring.h"

/* The node's rejoin subscriber (node_add_rejoin): node `id` took a dead
 * server's rank. */
void ft_rejoin(loom_node *n, void *ctx, uint32_t id)
{
    ft_repl *r = ctx;
    int d;
    if (!ps_server_rank_of(n, id, &d)) return;
    ps_server_set_state(n, d, PS_JOINING, 0);
    r->fed[d] = r->copy[d] = 0;
}

/* Tell the scheduler of the replacements whose full copies went in a round
 * that is now complete (`done`): they hold this server's ranges whole. */
void ft_copies_done(ft_repl *r, uint64_t done)
{
    for (int h = 0; h < r->num_servers; h++) {
        if (r->copy[h] != 2 || r->copy_round[h] > done) continue;
        r->copy[h] = 0;
        msg_header m = {.type = MSG_REJOIN_COPIED,
                        .req = r->copy_gen[h],
                        .a = node_server_id(r->num_servers, h)};
        node_send(r->node, 0, &m, NULL, 0);
    }
}

void ft_on_rejoin_copy(loom_node *n, void *ctx, node_msg *m)
{
    ft_repl *r = ctx;
    int d;
    if (!ps_server_rank_of(n, m->h.a, &d) || d == ft_me(r) || ps_server_state(n, d) != PS_JOINING) {
        node_drop(n, m, "REJOIN_COPY naming no joining server");
        return;
    }
    r->fed[d] = 1;
    r->copy[d] = 1;
    r->copy_gen[d] = m->h.req;
    ft_repl_due(r);
}

/* REJOIN_READY: server d is BACK. A replacement also hears it, after its
 * roster, for each server that came back before it joined (UP to it so far). */
void ft_on_rejoin_ready(loom_node *n, void *ctx, node_msg *m)
{
    ft_repl *r = ctx;
    int d;
    if (!ps_server_rank_of(n, m->h.a, &d) ||
        (ps_server_state(n, d) != PS_JOINING && ps_server_state(n, d) != PS_UP)) {
        node_drop(n, m, "REJOIN_READY naming no joining server");
        return;
    }
    if (m->h.req == 0 || m->h.req > UINT32_MAX) {
        node_drop(n, m, "REJOIN_READY without the order of the return");
        return;
    }
    ps_server_set_state(n, d, PS_BACK, (uint32_t)m->h.req);
    if (d != ft_me(r)) return;
    /* A replacement learned only the deaths since it joined: REJOIN_READY
     * tells it the job's count (h.b), which its checkpoint parts report and
     * its cuts compare with the workers' CLOCKs once it is master of
     * anything, which it is not before now (ring.h). */
    ps_part_set_counts(n, m->h.b <= UINT32_MAX ? (uint32_t)m->h.b : UINT32_MAX,
                       m->h.clock > 0 && m->h.clock <= UINT32_MAX ? (uint32_t)m->h.clock : 0);
    log_info("this server holds full copies of its ranges again");
}
