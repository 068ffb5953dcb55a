/* client_failover: a worker's part in failover and handback (ring.h;
 * docs/FAULTS.md).
 *
 * With replicas the master of a key range changes when its server dies (the
 * range's first live holder takes over) and again when a replacement that
 * came back takes its ranges back (handback). The worker then has ps
 * recompute the masters and move what waits on an old one (ps/client_ft.h):
 * in-flight pushes go again to the new master with their sequence numbers
 * (a range skips one it already holds), pull parts are asked again, cached
 * rows are dropped (their versions were another server's). During a
 * handback the moving ranges are fenced: their acting master parks the
 * pushes it gets for them (PARKED: the worker keeps them) and a server
 * refuses pulls of a range it no longer serves; the server says when they
 * must go again (PARKED req 0).
 *
 * A server that leaves hands its ranges over first (a drain, handback.c):
 * its sync (HANDBACK b = 4, from it, after all its acknowledgements) says
 * that the pushes it acknowledged are held by its replicas, so they are
 * dropped; at the commit (NODE_FAILED b = 2) what is left for it was never
 * applied and goes to the new masters (redirected, not resent), and the
 * worker acknowledges to every server, whose ranges taken over wait for it.
 *
 * This file is the policy: which event moves what, the server states it
 * learns (REJOIN_READY, HANDBACK) and the acknowledgements it owes
 * (HANDBACK_ACK); the routing and the requests stay ps's. It is attached on
 * a worker as the node's failover and rejoin subscribers and the handlers of
 * those messages (ft_client_attach). */
#include <stdint.h>

#include "core/log.h"
#include "core/msg.h"
#include "ft/ft_impl.h"
#include "loom/error.h"
#include "ps/client_ft.h"
#include "ps/msg_types.h"
#include "ps/ring.h"

/* The node's failover subscriber (node_add_failover): server `id` died. Its
 * ranges have new masters; every push it had not yet reported as held by
 * its replicas goes again, with its sequence number, to the new master of
 * its range (which applies it only if its replica had not got it). */
static int client_failover(loom_node *n, void *ctx, uint32_t id)
{
    (void)ctx;
    if (!ps_client_survives(n, id)) return 0;
    int d, pushes_ok, pulls_ok;
    node_peer_role(n, id, &d);
    uint64_t drained = node_peer_drained(n, id);
    /* The tables' masters first, then the pulls: a pull routed to the dead
     * server after the pulls were taken finds it redirected and asks the
     * new master. */
    size_t resent = ps_client_resend(n, PS_RESEND_ALL, d, &pushes_ok);
    size_t nmoved = ps_client_repull(n, PS_REPULL_DEAD, d, &pulls_ok);
    ps_client_count_resent(n, drained ? 0 : resent, drained ? resent : 0);
    if (!pushes_ok || !pulls_ok)
        log_error("out of memory redirecting requests after server %d %s: the job may stall", d,
                  drained ? "left" : "died");
    else if (drained)
        log_info("server %d left after handing its ranges over: %zu pushes it had not applied "
                 "and %zu pulls sent to their ranges' new masters",
                 d, resent, nmoved);
    else
        log_warn("server %d died: %zu pushes and %zu pulls sent again to its ranges' replicas", d,
                 resent, nmoved);
    ps_client_failover_done(n); /* after what went again: CLOCKs follow it */
    /* The new masters gate the ranges they took over until every worker
     * sent what it held for them: after the pushes, on the same links. */
    for (int s = 0; drained && s < loom_num_servers(n); s++)
        if (s != d && ps_client_server_state(n, s) != PS_DOWN) {
            msg_header h = {.type = MSG_HANDBACK_ACK, .req = drained};
            node_send(n, node_server_id(loom_num_servers(n), s), &h, NULL, 0);
        }
    return 1;
}

/* A replacement took server `id`'s place (node_add_rejoin): the node has
 * connected to it; it gets this worker's clock now and every later one (its
 * clock rule needs them once it is master), and its acknowledgements start
 * from nothing. It is master of nothing until it is BACK and a range's UP
 * holders die (ring.h), so no request is moved. */
static void client_rejoin(loom_node *n, void *ctx, uint32_t id)
{
    (void)ctx;
    int d;
    if (node_peer_role(n, id, &d) != LOOM_SERVER) return;
    ps_client_set_server_state(n, d, PS_JOINING, 0);
    ps_client_rejoined(n, d);
}

static void on_rejoin_ready(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    int d;
    if (m->h.a > UINT32_MAX || node_peer_role(n, (uint32_t)m->h.a, &d) != LOOM_SERVER ||
        ps_client_server_state(n, d) != PS_JOINING || m->h.req == 0 || m->h.req > UINT32_MAX) {
        node_drop(n, m,
                  "REJOIN_READY naming no joining server, or without the order of the return");
        return;
    }
    ps_client_set_server_state(n, d, PS_BACK, (uint32_t)m->h.req); /* no range moves (ring.h) */
}

/* ---- handback (src/ft/handback.c; docs/FAULTS.md) ---- */

/* PARKED from a server: req names a push of ours it did not apply (its
 * range is fenced, or an older push of ours to it is parked there), which
 * we keep; req 0: send again every push it parked, and ask again every pull
 * it refused, of the masters of their ranges now, then acknowledge
 * (HANDBACK_ACK). */
static void on_parked(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    int s;
    if (node_peer_role(n, m->from, &s) != LOOM_SERVER ||
        (m->h.req && ps_client_park(n, m->h.table, s, m->h.req))) {
        node_drop(n, m, "PARKED from a non-server or for an unknown table");
        return;
    }
    if (m->h.req) return;
    int pushes_ok, pulls_ok;
    size_t resent = ps_client_resend(n, PS_RESEND_PARKED, s, &pushes_ok);
    size_t nasked = ps_client_repull(n, PS_REPULL_REFUSED, s, &pulls_ok);
    if (!pushes_ok || !pulls_ok)
        log_error("out of memory sending parked pushes and refused pulls again: the job may stall");
    ps_client_count_resent(n, 0, resent);
    if (resent || nasked)
        log_info("sent %zu parked pushes and %zu refused pulls again", resent, nasked);
    msg_header h = {.type = MSG_HANDBACK_ACK, .req = m->h.a, .b = m->h.b};
    node_send(n, m->from, &h, NULL, 0);
}

/* A drain's sync from server d, which leaves (handback.c): every
 * acknowledgement and PARKED of it came before, and its replicas hold what
 * it applied. Those pushes are dropped; the scheduler hears that this
 * worker knows (HANDBACK_ACK), before it lets the job go on without d. */
static void on_drain_sync(loom_node *n, node_msg *m, int d)
{
    size_t dropped = ps_client_drained(n, d);
    log_info("server %d leaves: its replicas hold the %zu pushes of ours it applied", d, dropped);
    msg_header h = {.type = MSG_HANDBACK_ACK, .req = m->h.req};
    node_send(n, 0, &h, NULL, 0);
}

/* A handback's commit: server d is UP and master of the ranges it took
 * back. Every push held for them goes to it again, every pull waiting for
 * them is asked of it again, cached rows are dropped (their versions were
 * another server's); then this worker acknowledges to d, whose pulls of
 * those ranges wait for every worker's acknowledgement. (A drain's sync,
 * b = 4, comes from the leaving server itself.) */
static void on_handback(loom_node *n, void *ctx, node_msg *m)
{
    (void)ctx;
    int d;
    if (m->h.b == 4 && m->from == m->h.a && node_peer_role(n, m->from, &d) == LOOM_SERVER &&
        ps_client_server_state(n, d) == PS_UP) {
        on_drain_sync(n, m, d);
        return;
    }
    if (m->from != 0 || m->h.b != 1 || m->h.a > UINT32_MAX ||
        node_peer_role(n, (uint32_t)m->h.a, &d) != LOOM_SERVER ||
        ps_client_server_state(n, d) != PS_BACK) {
        node_drop(n, m, "HANDBACK naming no server back");
        return;
    }
    ps_client_set_server_state(n, d, PS_UP, 0);
    ps_client_handback_seen(n);
    int pushes_ok, pulls_ok;
    size_t resent = ps_client_resend(n, PS_RESEND_MOVED, d, &pushes_ok);
    size_t nmoved = ps_client_repull(n, PS_REPULL_MOVED, d, &pulls_ok);
    ps_client_count_resent(n, resent, 0);
    if (!pushes_ok || !pulls_ok)
        log_error("out of memory moving requests to server %d, which took its ranges back: "
                  "the job may stall",
                  d);
    else
        log_info("server %d took its ranges back: %zu pushes and %zu pulls sent to it again", d,
                 resent, nmoved);
    ps_client_failover_done(n); /* CLOCKs after this one say so (cut_settled) */
    msg_header h = {.type = MSG_HANDBACK_ACK, .req = m->h.req};
    node_send(n, (uint32_t)m->h.a, &h, NULL, 0);
}

int ft_client_attach(loom_node *n)
{
    node_set_handler(n, MSG_REJOIN_READY, on_rejoin_ready, NULL);
    node_set_handler(n, MSG_PARKED, on_parked, NULL);
    node_set_handler(n, MSG_HANDBACK, on_handback, NULL);
    int rc = node_add_failover(n, client_failover, NULL);
    return rc ? rc : node_add_rejoin(n, client_rejoin, NULL);
}
