/* reduce: stochastic reduce between workers (ASAP), the p2p layer of a worker node.
 *
 * Messages: P2P_MODEL (req = round, a = model length, b = the sender's window, one frame of
 * floats) from a worker to each of its out-neighbours, and under NOTIFY-ACK P2P_ACK (req =
 * round) back once the receiver has averaged that model in. A ZeroMQ message arrives whole,
 * so the model and its notification are one message: a receiver never sees a torn model,
 * and the "notify" of the paper is the model's own arrival.
 *
 * Receive slots: for each sender the open reducer keeps a ring of slots, round t in slot
 * t mod slots. Under NOTIFY-ACK with window W a sender sends round t only once its receiver
 * acknowledged round t - W, so the unread models of one sender are of W consecutive rounds
 * at most and W slots never collide. Under BSP a sender can be one round ahead of a receiver
 * that still waits for a slower in-neighbour (the barrier of round t + 1 cannot pass before
 * the receiver reduced round t): two slots. ASYNC keeps two and uses the newer. A model that
 * lands on an unread one in its slot is counted per edge (`overwrites`, never under BSP and
 * NOTIFY-ACK, which the tests check), and so is the most models held unread at once.
 *
 * Every worker opens its reducer before the barrier of loom_reducer_open, so no model of a
 * reducer arrives before its receiver opened one; a model that arrives with none open is
 * left over from an ASYNC reducer (which reads none after its last round) and not kept.
 * A model that disagrees with the open reducer (size, window, sender) ends the receiver's
 * reduce with LOOM_EPROTO rather than leave it waiting for a round that will not come.
 *
 * The handlers run on the I/O thread (or a thread in loom_wait) under the node's lock and
 * only store; loom_reduce() waits on the node's condition variable, so a dead peer (the
 * scheduler's NODE_FAILED) ends every wait with LOOM_EPEERFAIL. */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/node_impl.h"
#include "loom/error.h"
#include "loom/p2p.h"
#include "p2p/msg_types.h"
#include "p2p/p2p.h"

#define MAX_EDGE_STATS 64

typedef struct slot {
    node_msg msg;
    int full;
    uint64_t round;
} slot;

/* What this worker holds from one sender, and knows of one receiver. */
typedef struct peer_state {
    slot *in;            /* the open reducer's receive slots, round t in in[t % slots] */
    int unread;          /* full slots */
    int max_unread;      /* the most at once */
    uint64_t received;   /* models from it */
    uint64_t used;       /* of them, averaged in */
    uint64_t overwrites; /* landed on an unread model in their slot */
    uint64_t acked;      /* the last round it acknowledged (as our receiver) */
    uint64_t sent;       /* models sent to it */
    uint64_t max_unacked;
} peer_state;

typedef struct p2p_layer {
    loom_node *node;
    int servers, workers;
    peer_state *peers; /* by worker rank; under the node's lock */
    loom_reducer *open;
} p2p_layer;

struct loom_reducer {
    p2p_layer *layer;
    const loom_graph *g;
    loom_sync sync;
    int window; /* NOTIFY-ACK: rounds a sender may have unacknowledged per receiver */
    int slots;  /* receive slots per sender */
    int error;  /* LOOM_EPROTO once an in-neighbour's model disagreed (node lock) */
    size_t dim;
    int me;
    uint64_t round;
    uint64_t bytes_sent, inputs_used;
    double *sum;     /* the average being formed */
    float *incoming; /* an aligned copy of a received model */
};

static void slot_clear(peer_state *p, slot *s)
{
    if (!s->full) return;
    node_msg_release(&s->msg);
    s->full = 0;
    p->unread--;
}

/* Free the slots of every in-neighbour of the reducer (node lock held). */
static void slots_free(loom_reducer *r)
{
    for (int k = 0; k < loom_graph_in_degree(r->g, r->me); k++) {
        peer_state *p = &r->layer->peers[loom_graph_in(r->g, r->me, k)];
        for (int s = 0; p->in && s < r->slots; s++) slot_clear(p, &p->in[s]);
        free(p->in);
        p->in = NULL;
    }
}

static void on_model(loom_node *n, void *ctx, node_msg *m)
{
    p2p_layer *l = ctx;
    int rank;
    node_peer_role(n, m->from, &rank); /* a worker: only workers may send P2P_MODEL */
    if (m->h.a > node_max_payload(n) / sizeof(float) ||
        node_frame_size(m, 0) != m->h.a * sizeof(float) || m->h.req == 0) {
        node_drop(n, m, "model size disagrees with its frame, or round 0");
        return;
    }
    node_lock(n);
    loom_reducer *r = l->open;
    if (!r) { /* sent under ASYNC, which reads no model after its last round: not kept */
        node_unlock(n);
        return;
    }
    peer_state *p = &l->peers[rank];
    if (m->h.a != r->dim || m->h.b != (uint64_t)r->window || !p->in) {
        log_error("worker %d sent a model of %llu floats under window %llu; this reducer has "
                  "%zu floats, window %d%s",
                  rank, (unsigned long long)m->h.a, (unsigned long long)m->h.b, r->dim, r->window,
                  p->in ? "" : ", and that worker is no in-neighbour");
        r->error = LOOM_EPROTO;
        node_broadcast(n);
        node_unlock(n);
        node_drop(n, m, "a model of another size or window, or from no in-neighbour");
        return;
    }
    p->received++;
    slot *s = &p->in[m->h.req % (uint64_t)r->slots];
    if (s->full) p->overwrites++;
    slot_clear(p, s);
    node_msg_keep(&s->msg, m);
    s->full = 1;
    s->round = m->h.req;
    if (++p->unread > p->max_unread) p->max_unread = p->unread;
    node_broadcast(n);
    node_unlock(n);
}

static void on_ack(loom_node *n, void *ctx, node_msg *m)
{
    p2p_layer *l = ctx;
    int rank;
    node_peer_role(n, m->from, &rank);
    node_lock(n);
    peer_state *p = &l->peers[rank];
    if (m->h.req > p->sent || m->h.req <= p->acked) {
        node_unlock(n);
        node_drop(n, m, "acknowledges a model that was not sent or was acknowledged already");
        return;
    }
    p->acked = m->h.req;
    node_broadcast(n);
    node_unlock(n);
}

static void layer_destroy(void *state)
{
    p2p_layer *l = state;
    free(l->peers); /* a reducer frees its slots when it closes */
    free(l);
}

static const msg_type_info p2p_types[] = {
    {MSG_P2P_MODEL, "P2P_MODEL", 1, 1, MSG_BY_WORKER},
    {MSG_P2P_ACK, "P2P_ACK", 0, 0, MSG_BY_WORKER},
};

static node_layer_def p2p_layer_def = {"p2p", p2p_types, 2, 0};

int p2p_attach(loom_node *n)
{
    int rc = node_layer_register(&p2p_layer_def);
    if (rc || !loom_is_worker(n)) return rc;
    p2p_layer *l = calloc(1, sizeof *l);
    if (!l) return LOOM_ENOMEM;
    l->node = n;
    l->servers = loom_num_servers(n);
    l->workers = loom_num_workers(n);
    l->peers = calloc((size_t)l->workers, sizeof *l->peers);
    if (!l->peers) {
        free(l);
        return LOOM_ENOMEM;
    }
    node_set_layer(n, &p2p_layer_def, l, layer_destroy);
    node_set_handler(n, MSG_P2P_MODEL, on_model, l);
    node_set_handler(n, MSG_P2P_ACK, on_ack, l);
    return 0;
}

int loom_sync_parse(const char *name, loom_sync *out)
{
    static const char *const names[] = {"bsp", "async", "notify-ack"};
    for (int k = 0; k < 3; k++)
        if (name && !strcmp(name, names[k])) {
            *out = (loom_sync)k;
            return 0;
        }
    return LOOM_EINVAL;
}

const char *loom_sync_name(loom_sync s)
{
    return s == LOOM_SYNC_BSP ? "bsp" : s == LOOM_SYNC_ASYNC ? "async" : "notify-ack";
}

int loom_reducer_open(loom_node *n, const loom_graph *g, loom_sync sync, int window, size_t dim,
                      loom_reducer **out)
{
    if (!n || !g || !out || dim == 0 || (unsigned)sync > LOOM_SYNC_NOTIFY_ACK || window < 1 ||
        window > LOOM_REDUCE_WINDOW_MAX)
        return LOOM_EINVAL;
    *out = NULL;
    if (!loom_is_worker(n)) return LOOM_EROLE;
    p2p_layer *l = node_layer(n, &p2p_layer_def);
    if (loom_graph_nodes(g) != l->workers) {
        log_error("the graph has %d nodes but the job %d workers", loom_graph_nodes(g), l->workers);
        return LOOM_EINVAL;
    }
    if (dim > node_max_payload(n) / sizeof(float)) {
        log_error("a model of %zu floats does not fit in one message (LOOM_MAX_FRAME_MIB)", dim);
        return LOOM_ELIMIT;
    }
    loom_reducer *r = calloc(1, sizeof *r);
    if (!r) return LOOM_ENOMEM;
    *r = (loom_reducer){.layer = l,
                        .g = g,
                        .sync = sync,
                        .window = window,
                        .slots = sync == LOOM_SYNC_NOTIFY_ACK ? window : 2,
                        .dim = dim,
                        .me = loom_rank(n)};
    r->sum = malloc(dim * sizeof *r->sum);
    r->incoming = malloc(dim * sizeof *r->incoming);
    node_lock(n);
    int rc = l->open ? LOOM_ESTATE : !r->sum || !r->incoming ? LOOM_ENOMEM : 0;
    if (!rc) {
        /* Each reducer's edges start afresh: rounds count from 1 again. */
        for (int w = 0; w < l->workers; w++) l->peers[w] = (peer_state){0};
        for (int k = 0; !rc && k < loom_graph_in_degree(g, r->me); k++) {
            peer_state *p = &l->peers[loom_graph_in(g, r->me, k)];
            if (!(p->in = calloc((size_t)r->slots, sizeof *p->in))) rc = LOOM_ENOMEM;
        }
        if (rc) slots_free(r);
    }
    if (!rc) l->open = r;
    node_unlock(n);
    /* Every worker has the roster once all have come this far, so none drops a model
     * from a worker it cannot name yet (node_send). */
    if (!rc) rc = node_barrier(n);
    if (rc) {
        if (rc != LOOM_ESTATE) {
            node_lock(n);
            if (l->open == r) {
                slots_free(r);
                l->open = NULL;
            }
            node_unlock(n);
        }
        free(r->sum);
        free(r->incoming);
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

static uint32_t worker_id(const loom_reducer *r, int rank)
{
    return node_worker_id(r->layer->servers, rank);
}

/* Wait (node lock held) until every out-neighbour acknowledged round `upto`. */
static int wait_acks(loom_reducer *r, uint64_t upto)
{
    loom_node *n = r->layer->node;
    for (int k = 0; k < loom_graph_out_degree(r->g, r->me); k++) {
        peer_state *p = &r->layer->peers[loom_graph_out(r->g, r->me, k)];
        while (p->acked < upto) {
            int rc = r->error ? r->error : node_wait(n, 0);
            if (rc) return rc;
        }
    }
    return r->error;
}

/* The slot of sender p that holds (or will hold) this round's model. */
static slot *slot_of_round(loom_reducer *r, peer_state *p)
{
    return &p->in[r->round % (uint64_t)r->slots];
}

/* Wait (node lock held) until every in-neighbour's model of this round is there. */
static int wait_inputs(loom_reducer *r)
{
    loom_node *n = r->layer->node;
    for (int k = 0; k < loom_graph_in_degree(r->g, r->me); k++) {
        slot *s = slot_of_round(r, &r->layer->peers[loom_graph_in(r->g, r->me, k)]);
        while (!(s->full && s->round == r->round)) {
            int rc = r->error ? r->error : node_wait(n, 0);
            if (rc) return rc;
        }
    }
    return r->error;
}

static int send_model(loom_reducer *r, const float *model)
{
    loom_node *n = r->layer->node;
    for (int k = 0; k < loom_graph_out_degree(r->g, r->me); k++) {
        int to = loom_graph_out(r->g, r->me, k);
        /* Noted before sending: the acknowledgement may be handled before node_send returns. */
        node_lock(n);
        peer_state *p = &r->layer->peers[to];
        p->sent = r->round;
        if (p->sent - p->acked > p->max_unacked) p->max_unacked = p->sent - p->acked;
        node_unlock(n);
        msg_header h = {
            .type = MSG_P2P_MODEL, .req = r->round, .a = r->dim, .b = (uint64_t)r->window};
        node_frame f = {model, r->dim * sizeof(float), NULL, NULL, 1};
        int rc = node_send(n, worker_id(r, to), &h, &f, 1);
        if (rc) return rc;
        r->bytes_sent += r->dim * sizeof(float);
    }
    return 0;
}

/* The model to average in from sender p this round (node lock held): under BSP and
 * NOTIFY-ACK the one of this round, under ASYNC the newest unread one; NULL if none. */
static slot *input_of(loom_reducer *r, peer_state *p)
{
    if (r->sync != LOOM_SYNC_ASYNC) return slot_of_round(r, p);
    slot *newest = NULL;
    for (int s = 0; s < r->slots; s++)
        if (p->in[s].full && (!newest || p->in[s].round > newest->round)) newest = &p->in[s];
    return newest;
}

int loom_reduce(loom_reducer *r, float *model)
{
    if (!r || !model) return LOOM_EINVAL;
    loom_node *n = r->layer->node;
    r->round++;
    int rc = 0;
    if (r->sync == LOOM_SYNC_NOTIFY_ACK && r->round > (uint64_t)r->window) {
        node_lock(n);
        rc = wait_acks(r, r->round - (uint64_t)r->window);
        node_unlock(n);
    }
    if (!rc) rc = send_model(r, model);
    if (!rc && r->sync == LOOM_SYNC_BSP) rc = node_barrier(n);
    if (rc) return rc;
    for (size_t d = 0; d < r->dim; d++) r->sum[d] = model[d];
    int count = 1;
    node_lock(n);
    rc = r->sync != LOOM_SYNC_ASYNC ? wait_inputs(r) : r->error;
    for (int k = 0; !rc && k < loom_graph_in_degree(r->g, r->me); k++) {
        peer_state *p = &r->layer->peers[loom_graph_in(r->g, r->me, k)];
        slot *s = input_of(r, p);
        if (!s) continue;
        memcpy(r->incoming, node_frame_data(&s->msg, 0), r->dim * sizeof(float));
        for (size_t d = 0; d < r->dim; d++) r->sum[d] += r->incoming[d];
        count++;
        p->used++;
        slot_clear(p, s);
        for (int o = 0; r->sync == LOOM_SYNC_ASYNC && o < r->slots; o++) slot_clear(p, &p->in[o]);
    }
    node_unlock(n);
    if (rc) return rc;
    /* All in-neighbours present: exactly row me of P (equal weights). ASYNC with some
     * missing: the average of what is there, so the weights still sum to one. */
    for (size_t d = 0; d < r->dim; d++) model[d] = (float)(r->sum[d] / count);
    r->inputs_used += (uint64_t)(count - 1);
    if (r->sync == LOOM_SYNC_NOTIFY_ACK) {
        for (int k = 0; !rc && k < loom_graph_in_degree(r->g, r->me); k++) {
            msg_header h = {.type = MSG_P2P_ACK, .req = r->round};
            rc = node_send(n, worker_id(r, loom_graph_in(r->g, r->me, k)), &h, NULL, 0);
        }
    }
    return rc;
}

int loom_reducer_close(loom_reducer *r)
{
    if (!r) return LOOM_EINVAL;
    loom_node *n = r->layer->node;
    node_lock(n);
    int rc = r->sync == LOOM_SYNC_NOTIFY_ACK ? wait_acks(r, r->round) : 0;
    slots_free(r);
    r->layer->open = NULL;
    node_unlock(n);
    free(r->sum);
    free(r->incoming);
    free(r);
    return rc;
}

void loom_reducer_stats_get(loom_reducer *r, loom_reducer_stats *out)
{
    memset(out, 0, sizeof *out);
    out->rounds = r->round;
    out->bytes_sent = r->bytes_sent;
    out->inputs_used = r->inputs_used;
    out->in_degree = loom_graph_in_degree(r->g, r->me);
    out->out_degree = loom_graph_out_degree(r->g, r->me);
    loom_node *n = r->layer->node;
    node_lock(n);
    for (int k = 0; k < out->in_degree && k < MAX_EDGE_STATS; k++) {
        int j = loom_graph_in(r->g, r->me, k);
        peer_state *p = &r->layer->peers[j];
        out->in[k] = (loom_edge_stats){.peer = j,
                                       .models = p->received,
                                       .used = p->used,
                                       .overwrites = p->overwrites,
                                       .max_unread = (uint64_t)p->max_unread};
    }
    for (int k = 0; k < out->out_degree && k < MAX_EDGE_STATS; k++) {
        int j = loom_graph_out(r->g, r->me, k);
        peer_state *p = &r->layer->peers[j];
        out->out[k] =
            (loom_edge_stats){.peer = j, .models = p->sent, .max_unacked = p->max_unacked};
    }
    node_unlock(n);
}
