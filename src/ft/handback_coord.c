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
 * (src/ps/registry.c), read and set through part.h.
 *
 * A server that asks to leave (the scheduler's drain hook, node_set_drain)
 * hands its ranges over the same way, in reverse, one leave at a time and
 * never during a handback or a join (handback.c says what the nodes do):
 * fence (HANDBACK b = 3, to every live server), then, every server having
 * answered, the sync (b = 4, to the leaving server, which tells every
 * worker); once every running worker answered (HANDBACK_ACK), the commit:
 * node_server_left() lets the job go on without it (NODE_FAILED b = 2) and
 * tells it to end. A join aborts it and it is tried again after; a death
 * aborts it and the server leaves by the failover path instead, as before
 * (its workers then send again what it had not had replicated), which the
 * log says. */
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

/* The handback or drain in progress: to or from which server (-1: none),
 * whether a drain and in which phase (0 fence, 1 sync), its generation, the
 * servers yet to answer its fence and the workers its sync; handbacks
 * committed so far; a handback to try on the timer (after a death); the
 * servers waiting to leave, and one to leave by failover on the timer. */
struct ft_coord {
    loom_node *node;
    int num_servers, num_workers;
    int rank;
    int drain, phase;
    uint64_t gen;
    uint8_t *from, *wait, *leaving;
    int left;
    uint32_t handbacks;
    int due, fallback;
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
            if (phase == 0 || phase == 3) c->left += c->from[s] = 1;
        }
    }
    for (int w = 0; phase == 1 && w < c->num_workers; w++)
        if (!ps_registry_worker_done(n, w))
            node_send(n, node_worker_id(c->num_servers, w), &h, NULL, 0);
}

/* Start handing over the ranges of server s, which leaves: fence them. If
 * the job could not go on without it now (more servers gone since it
 * asked), the scheduler's leave path refuses it. */
static void start_drain(ft_coord *c, int s)
{
    c->leaving[s] = 0;
    uint32_t id = node_server_id(c->num_servers, s), returned;
    if (ps_registry_state(c->node, s, &returned) != PS_UP || !ps_registry_may_leave(c->node, s)) {
        node_server_left(c->node, id, 0);
        return;
    }
    c->rank = s;
    c->drain = 1;
    c->phase = 0;
    c->gen++;
    c->left = 0;
    memset(c->from, 0, (size_t)c->num_servers);
    log_info("server %d leaves: handing its ranges over to their next holders", s);
    send_phase(c, 3);
}

/* Start handing its ranges back to the server that came back first, or,
 * if none, over from a server that leaves, if none is being handed back
 * or over, none is joining and the job is not ending (rejoin_coord.c: a
 * replacement is back; a leave; the timer). */
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
    if (c->rank >= 0 || ps_registry_ending(c->node)) return;
    for (int s = 0; d < 0 && s < c->num_servers; s++)
        if (c->leaving[s]) {
            start_drain(c, s);
            return;
        }
    if (d < 0) return;
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
    if (c->drain)
        log_info("server %d: the handover of its ranges aborted (a server died or joined)",
                 c->rank);
    else
        log_info("server %d: handback aborted (a server died or joined); tried again later",
                 c->rank);
    send_phase(c, 2);
    if (c->drain) c->leaving[c->rank] = 1; /* tried again, unless a death (on_death) */
    c->rank = -1;
    c->drain = 0;
}

uint32_t ft_coord_handbacks(const ft_coord *c)
{
    return c->handbacks;
}

/* The node's failover subscriber (node_add_failover, after the registry's,
 * which decides, and rejoin_coord.c's): the job went on without a server. */
static int on_death(loom_node *n, void *ctx, uint32_t id)
{
    ft_coord *c = ctx;
    int dead, leaving = c->rank >= 0 && c->drain ? c->rank : -1;
    if (node_peer_role(n, id, &dead) != LOOM_SERVER) dead = -1;
    ft_coord_abort(c);
    if (leaving >= 0) {
        c->leaving[leaving] = 0;
        if (leaving != dead) { /* it leaves as before: by failover, after NODE_FAILED */
            log_warn("server %d: its ranges cannot be handed over (server %d died): it leaves "
                     "by failover, its workers sending again what it had not replicated",
                     leaving, dead);
            c->fallback = leaving;
        }
    }
    /* A death is no leave. */
    if (dead >= 0) c->leaving[dead] = 0;
    /* After NODE_FAILED, which every node must handle first. */
    c->due = 1;
    node_timer_poke(n, &ft_layer_def);
    return 1;
}

/* A drain's sync: once every running worker answered, the commit. */
static void check_sync(ft_coord *c)
{
    if (c->rank < 0 || !c->drain || c->phase != 1) return;
    for (int w = 0; w < c->num_workers; w++)
        if (c->wait[w] && !ps_registry_worker_done(c->node, w)) return;
    int s = c->rank;
    c->rank = -1;
    c->drain = 0;
    log_warn("server %d handed its ranges over to their next holders", s);
    /* Its failover subscribers (on_death) start what waits, on the timer. */
    node_server_left(c->node, node_server_id(c->num_servers, s), c->gen);
}

uint64_t ft_coord_tick(ft_coord *c, uint64_t now)
{
    uint32_t returned;
    if (c->fallback >= 0) { /* unless it died meanwhile */
        int s = c->fallback;
        c->fallback = -1;
        if (ps_registry_state(c->node, s, &returned) == PS_UP)
            node_server_left(c->node, node_server_id(c->num_servers, s), 0);
    }
    check_sync(c); /* a worker that finished or left does not answer */
    if (c->due) {
        c->due = 0;
        ft_coord_start(c);
    }
    return c->rank >= 0 && c->drain && c->phase == 1 ? now + 100 : UINT64_MAX;
}

/* The scheduler's drain hook (node_set_drain): server `id` asks to leave.
 * Taken over when the job can go on without it; else the scheduler's leave
 * path refuses it. */
static int on_leave(loom_node *n, void *ctx, uint32_t id)
{
    ft_coord *c = ctx;
    int s;
    uint32_t returned;
    if (node_peer_role(n, id, &s) != LOOM_SERVER || ps_registry_state(n, s, &returned) != PS_UP ||
        !ps_registry_may_leave(n, s))
        return 0;
    if (c->leaving[s] || (c->rank == s && c->drain)) return 1; /* asked again */
    c->leaving[s] = 1;
    ft_coord_start(c);
    return 1;
}

/* A sync answered by a worker (it dropped what the leaving server applied). */
static void on_sync_ack(ft_coord *c, node_msg *m)
{
    int w;
    if (node_peer_role(c->node, m->from, &w) != LOOM_WORKER) {
        node_drop(c->node, m, "HANDBACK_ACK from a non-worker");
        return;
    }
    if (c->rank < 0 || !c->drain || c->phase != 1 || m->h.req != c->gen) return; /* an old one */
    c->wait[w] = 0;
    check_sync(c);
}

/* A server fenced what it hands back, and its last round is acknowledged. */
static void on_handback_ack(loom_node *n, void *ctx, node_msg *m)
{
    ft_coord *c = ctx;
    int s;
    if (node_peer_role(n, m->from, &s) != LOOM_SERVER) {
        on_sync_ack(c, m);
        return;
    }
    if (c->rank < 0 || m->h.req != c->gen || !c->from[s]) return; /* an aborted one */
    c->from[s] = 0;
    if (--c->left) return;
    int d = c->rank;
    if (c->drain) { /* fenced and replicated: the sync, through the leaving server */
        msg_header h = {
            .type = MSG_HANDBACK, .a = node_server_id(c->num_servers, d), .b = 4, .req = c->gen};
        node_send(n, node_server_id(c->num_servers, d), &h, NULL, 0);
        c->phase = 1;
        for (int w = 0; w < c->num_workers; w++) c->wait[w] = !ps_registry_worker_done(n, w);
        node_timer_poke(n, &ft_layer_def);
        return;
    }
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
    free(c->wait);
    free(c->leaving);
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
    c->rank = c->fallback = -1;
    c->from = calloc(f->servers ? f->servers : 1, 1);
    c->leaving = calloc(f->servers ? f->servers : 1, 1);
    c->wait = calloc(f->workers ? f->workers : 1, 1);
    if (!c->from || !c->leaving || !c->wait) return LOOM_ENOMEM;
    node_set_handler(n, MSG_HANDBACK_ACK, on_handback_ack, c);
    int rc = node_set_drain(n, on_leave, c);
    return rc ? rc : node_add_failover(n, on_death, c);
}
