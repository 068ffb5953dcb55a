/* handback_coord: the scheduler's side of a handback (docs/FAULTS.md,
 * "Taking the ranges back"; handback.c says what the servers do).
 *
 * Once a replacement is BACK (rejoin_coord.c, REJOIN_READY), its ranges
 * are handed back, one server at a time (the one that came back first) and
 * never while another is joining: every live server is asked to fence
 * (HANDBACK b = 0); when all answered (HANDBACK_ACK), every node is told
 * that the server is UP (b = 1, the commit). A death or a join before the
 * commit aborts it (b = 2), and it is tried again: after a join once the
 * joining server is back, after a death on this layer's timer, since every
 * node must hear NODE_FAILED, which the scheduler sends after the failover
 * subscribers, first. The server states are the registry's
 * (src/ps/registry.c), read and set through part.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/msg.h"
#include "ft/ft_impl.h"
#include "loom/error.h"
#include "ps/msg_types.h"
#include "ps/part.h"
#include "ps/ring.h"

/* The handback in progress: to which server (-1: none), its generation, the
 * servers yet to answer its fence; handbacks committed so far; a handback to
 * try on the timer (after a death). */
struct ft_coord {
    loom_node *node;
    int num_servers, num_workers;
    int rank;
    uint64_t gen;
    uint8_t *from;
    int left;
    uint32_t handbacks;
    int due;
};

/* Send HANDBACK phase b of the handback in progress to every live server
 * and, for the commit, to every worker still running. */
static void send_phase(ft_coord *c, uint64_t phase)
{
    loom_node *n = c->node;
    msg_header h = {.type = MSG_HANDBACK,
                    .a = node_server_id(c->num_servers, c->rank),
                    .b = phase,
                    .req = c->gen,
                    .clock = c->handbacks};
    for (int s = 0; s < c->num_servers; s++) {
        uint32_t returned;
        int state = ps_registry_state(n, s, &returned);
        if (state == PS_UP || state == PS_BACK) {
            node_send(n, node_server_id(c->num_servers, s), &h, NULL, 0);
            if (phase == 0) c->left += c->from[s] = 1;
        }
    }
    for (int w = 0; phase == 1 && w < c->num_workers; w++)
        if (!ps_registry_worker_done(n, w))
            node_send(n, node_worker_id(c->num_servers, w), &h, NULL, 0);
}

/* Start handing its ranges back to the server that came back first, if
 * none is being handed back, none is joining and the job is not ending
 * (rejoin_coord.c: a replacement is back). */
void ft_coord_start(ft_coord *c)
{
    int d = -1;
    uint32_t first = 0;
    for (int s = 0; s < c->num_servers; s++) {
        uint32_t returned;
        int state = ps_registry_state(c->node, s, &returned);
        if (state == PS_JOINING) return;
        if (state == PS_BACK && (d < 0 || returned < first)) {
            d = s;
            first = returned;
        }
    }
    if (d < 0 || c->rank >= 0 || ps_registry_ending(c->node)) return;
    c->rank = d;
    c->gen++;
    c->left = 0;
    memset(c->from, 0, (size_t)c->num_servers);
    log_info("server %d: handing its ranges back", d);
    send_phase(c, 0);
}

/* Abort the handback in progress, if any (rejoin_coord.c: a replacement
 * joins). */
void ft_coord_abort(ft_coord *c)
{
    if (c->rank < 0) return;
    log_info("server %d: handback aborted (a server died or joined); tried again later", c->rank);
    send_phase(c, 2);
    c->rank = -1;
}

uint32_t ft_coord_handbacks(const ft_coord *c)
{
    return c->handbacks;
}

/* The node's failover subscriber (node_add_failover, after the registry's,
 * which decides, and rejoin_coord.c's): the job went on without a server. */
static int on_death(loom_node *n, void *ctx, uint32_t id)
{
    (void)id;
    ft_coord *c = ctx;
    ft_coord_abort(c);
    c->due = 1; /* after NODE_FAILED, which every node must handle first */
    node_timer_poke(n, &ft_layer_def);
    return 1;
}

void ft_coord_tick(ft_coord *c)
{
    if (!c->due) return;
    c->due = 0;
    ft_coord_start(c);
}

/* A server fenced what it hands back, and its last round is acknowledged. */
static void on_handback_ack(loom_node *n, void *ctx, node_msg *m)
{
    ft_coord *c = ctx;
    int s;
    if (node_peer_role(n, m->from, &s) != LOOM_SERVER) {
        node_drop(n, m, "HANDBACK_ACK from a non-server");
        return;
    }
    if (c->rank < 0 || m->h.req != c->gen || !c->from[s]) return; /* an aborted one */
    c->from[s] = 0;
    if (--c->left) return;
    int d = c->rank;
    c->handbacks++;
    send_phase(c, 1);
    ps_registry_set_state(n, d, PS_UP, 0);
    c->rank = -1;
    log_warn("server %d took its ranges back", d);
    ft_coord_start(c);
}

void ft_coord_destroy(ft_coord *c)
{
    free(c->from);
    free(c);
}

int ft_coord_attach(ft *f)
{
    loom_node *n = f->node;
    ft_coord *c = calloc(1, sizeof *c);
    if (!c) return LOOM_ENOMEM;
    f->coord = c;
    c->node = n;
    c->num_servers = (int)f->servers;
    c->num_workers = (int)f->workers;
    c->rank = -1;
    c->from = calloc(f->servers ? f->servers : 1, 1);
    if (!c->from) return LOOM_ENOMEM;
    node_set_handler(n, MSG_HANDBACK_ACK, on_handback_ack, c);
    return node_add_failover(n, on_death, c);
}
