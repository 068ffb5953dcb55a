/* rejoin_coord: the scheduler's side of a replacement server's return
 * (docs/FAULTS.md, "A replacement server"; rejoin.c says what the servers
 * do).
 *
 * The registry (src/ps/registry.c) has a replacement create every table and
 * tells this file through its hooks (ps_registry_set_hooks, part.h): before
 * it sends the replacement anything (`joining`: the job's clock, CKPT_BASE,
 * and a handback in progress aborted), once it sent the tables (`joined`:
 * the servers back before it, which core cannot tell it) and once the
 * replacement created them all (`created`). Then every live server is asked
 * to copy it the ranges it is master of (REJOIN_COPY); once all say their
 * copies are acknowledged (REJOIN_COPIED), every node is told that the
 * newcomer holds its ranges again (REJOIN_READY), and its ranges are handed
 * back (handback_coord.c). A server that dies meanwhile may leave ranges with
 * new masters, so the copies are asked again, of the live servers, in a new
 * generation, on this layer's timer, once every node heard NODE_FAILED. The
 * server states are the registry's, read and set through part.h. */
#include <stdint.h>
#include <stdlib.h>

#include "core/log.h"
#include "core/msg.h"
#include "ft/ft_impl.h"
#include "loom/error.h"
#include "ps/msg_types.h"
#include "ps/part.h"
#include "ps/ring.h"

/* Per rejoining server rank: the generation of copies asked; copies still to
 * be acknowledged, and from which servers; the copies to ask again (on the
 * timer, after a death); server deaths the job went on after (REJOIN_READY
 * tells a replacement); replacements that came back so far. */
struct ft_rejoin_coord {
    ft *f;
    int num_servers, num_workers;
    uint64_t *copy_gen;
    int *copies_left;
    uint8_t *copy_from; /* rank * num_servers + server */
    int recopy;
    uint32_t deaths;
    uint32_t returns;
};

static void rejoin_ready(ft_rejoin_coord *c, int d);

static uint32_t server_node(const ft_rejoin_coord *c, int s)
{
    return node_server_id(c->num_servers, s);
}

/* Ask every live server to copy rejoining server d the ranges it is master
 * of (the registry's hook `created`: d has every table). */
static void start_copy(void *ctx, int d)
{
    ft_rejoin_coord *c = ctx;
    loom_node *n = c->f->node;
    uint64_t gen = ++c->copy_gen[d];
    c->copies_left[d] = 0;
    for (int s = 0; s < c->num_servers; s++) {
        uint8_t *from = &c->copy_from[(size_t)d * (size_t)c->num_servers + (size_t)s];
        uint32_t returned;
        int state = ps_registry_state(n, s, &returned);
        *from = s != d && (state == PS_UP || state == PS_BACK);
        if (!*from) continue;
        c->copies_left[d]++;
        msg_header h = {.type = MSG_REJOIN_COPY, .req = gen, .a = server_node(c, d)};
        node_send(n, server_node(c, s), &h, NULL, 0);
    }
    if (!c->copies_left[d]) rejoin_ready(c, d); /* nobody to copy from */
}

/* Rejoining server d holds every range whole again: tell everyone. */
static void rejoin_ready(ft_rejoin_coord *c, int d)
{
    loom_node *n = c->f->node;
    uint32_t returned = ++c->returns;
    ps_registry_set_state(n, d, PS_BACK, returned);
    log_warn("server %d rejoined: it holds full copies of its ranges again", d);
    msg_header h = {.type = MSG_REJOIN_READY,
                    .a = server_node(c, d),
                    .b = c->deaths,
                    .req = returned,
                    .clock = ft_coord_handbacks(c->f->coord)};
    for (int s = 0; s < c->num_servers; s++) { /* another replacement joining too */
        uint32_t r;
        if (ps_registry_state(n, s, &r) != PS_DOWN) node_send(n, server_node(c, s), &h, NULL, 0);
    }
    for (int w = 0; w < c->num_workers; w++)
        if (!ps_registry_worker_done(n, w))
            node_send(n, node_worker_id(c->num_servers, w), &h, NULL, 0);
    ft_coord_start(c->f->coord);
}

/* The registry's hook `joining`: a replacement registered for server rank
 * d, before the registry sends it its tables. It learns the job's clock
 * first (with checkpoints: CKPT_BASE), and its copies will come from the
 * masters of now, so a handback in progress is aborted. */
static void joining(void *ctx, int d)
{
    ft_rejoin_coord *c = ctx;
    ft_coord_abort(c->f->coord);
    if (c->f->sched) ft_sched_base(c->f, d);
    c->copies_left[d] = 0;
}

/* The registry's hook `joined`: replacement d has been sent its tables; it
 * learns the servers back before it, which it could not learn from core. */
static void joined(void *ctx, int d)
{
    ft_rejoin_coord *c = ctx;
    loom_node *n = c->f->node;
    for (int s = 0; s < c->num_servers; s++) {
        uint32_t returned;
        if (ps_registry_state(n, s, &returned) != PS_BACK) continue;
        msg_header h = {
            .type = MSG_REJOIN_READY, .a = server_node(c, s), .b = c->deaths, .req = returned};
        node_send(n, server_node(c, d), &h, NULL, 0);
    }
}

static void on_rejoin_copied(loom_node *n, void *ctx, node_msg *m)
{
    ft_rejoin_coord *c = ctx;
    int s, d;
    if (node_peer_role(n, m->from, &s) != LOOM_SERVER || m->h.a > UINT32_MAX ||
        node_peer_role(n, (uint32_t)m->h.a, &d) != LOOM_SERVER) {
        node_drop(n, m, "REJOIN_COPIED naming no server");
        return;
    }
    uint8_t *from = &c->copy_from[(size_t)d * (size_t)c->num_servers + (size_t)s];
    if (m->h.req != c->copy_gen[d] || !*from) return; /* of an older generation */
    *from = 0;
    if (--c->copies_left[d] == 0) rejoin_ready(c, d);
}

/* The node's failover subscriber (after the registry's, which decides, and
 * before handback_coord.c's): the job went on without server `id`. A
 * replacement that died while joining stops here; if any replacement was
 * receiving copies, they are asked again on the timer: every server must
 * hear NODE_FAILED, which the scheduler sends after this returns, before
 * its new ranges are asked of it. */
static int on_death(loom_node *n, void *ctx, uint32_t id)
{
    ft_rejoin_coord *c = ctx;
    int was_copying = 0;
    for (int d = 0; d < c->num_servers; d++) was_copying |= c->copies_left[d] > 0;
    int rank;
    node_peer_role(n, id, &rank);
    c->deaths++;
    c->copies_left[rank] = 0;
    c->copy_gen[rank]++; /* its copies' late REJOIN_COPIED are of an older generation */
    if (was_copying) {
        c->recopy = 1;
        node_timer_poke(n, &ft_layer_def);
    }
    return 1;
}

void ft_rejoin_coord_tick(ft_rejoin_coord *c)
{
    if (!c->recopy) return;
    c->recopy = 0;
    for (int d = 0; d < c->num_servers; d++)
        if (c->copies_left[d] > 0) start_copy(c, d);
}

void ft_rejoin_coord_destroy(ft_rejoin_coord *c)
{
    free(c->copy_gen);
    free(c->copies_left);
    free(c->copy_from);
    free(c);
}

int ft_rejoin_coord_attach(ft *f)
{
    loom_node *n = f->node;
    ft_rejoin_coord *c = calloc(1, sizeof *c);
    if (!c) return LOOM_ENOMEM;
    f->rejoin_coord = c;
    c->f = f;
    c->num_servers = (int)f->servers;
    c->num_workers = (int)f->workers;
    size_t S = f->servers ? f->servers : 1;
    c->copy_gen = calloc(S, sizeof *c->copy_gen);
    c->copies_left = calloc(S, sizeof *c->copies_left);
    c->copy_from = calloc(S * S, 1);
    if (!c->copy_gen || !c->copies_left || !c->copy_from) return LOOM_ENOMEM;
    ps_registry_hooks h = {.ctx = c, .joining = joining, .joined = joined, .created = start_copy};
    ps_registry_set_hooks(n, &h);
    node_set_handler(n, MSG_REJOIN_COPIED, on_rejoin_copied, c);
    return node_add_failover(n, on_death, c);
}
