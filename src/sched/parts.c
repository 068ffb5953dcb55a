/* parts: a worker's side of the data parts handed out on demand
 * (loom/parts.h), and the layer's attach on every role.
 *
 * A worker has at most one request out: loom_parts_next() sends PARTS_REQ
 * (carrying the part it finished, if any) and waits on the node's condition
 * variable until the handler, on the I/O thread, has put the scheduler's
 * PARTS_GIVE into the one reply slot. The waiting and the empty clocks
 * (loom/parts.h, "Clocks") happen on the application's thread, never on the
 * I/O thread. */
#include <math.h>
#include <stdlib.h>

#include "core/log.h"
#include "loom/error.h"
#include "loom/parts.h"
#include "ps/ps.h"
#include "sched/msg_types.h"
#include "sched/parts.h"
#include "sched/sched.h"

#define NO_PART UINT32_MAX

/* The reply slot, the layer's state on a worker (under the node's lock). */
typedef struct reply_slot {
    int full;
    int open; /* a loom_parts is open on this node */
    msg_header h;
} reply_slot;

struct loom_parts {
    loom_node *node;
    reply_slot *slot;
    parts_wire_opts wire;
    int epoch;
    uint32_t held;     /* the part handed out and not done, NO_PART if none */
    uint32_t finished; /* the part done and not yet reported, NO_PART if none */
    uint64_t done;
    int joining; /* joined the running job and not yet placed in an epoch */
};

static const msg_type_info parts_types[] = {
    {MSG_PARTS_REQ, "PARTS_REQ", 1, 1, MSG_BY_WORKER},
    {MSG_PARTS_GIVE, "PARTS_GIVE", 0, 0, MSG_BY_SCHED},
};

node_layer_def parts_layer_def = {"sched-parts", parts_types,
                                  sizeof parts_types / sizeof *parts_types, 0};

static void on_give(loom_node *n, void *ctx, node_msg *m)
{
    reply_slot *s = ctx;
    node_lock(n);
    if (s->full || !s->open) {
        node_unlock(n);
        return node_drop(n, m, "PARTS_GIVE with no request out");
    }
    s->h = m->h;
    s->full = 1;
    node_broadcast(n);
    node_unlock(n);
}

int sched_parts_attach(loom_node *n)
{
    int rc = node_layer_register(&parts_layer_def);
    if (rc) return rc;
    if (loom_node_role(n) == LOOM_SCHEDULER) return parts_coord_attach(n);
    if (loom_node_role(n) != LOOM_WORKER) return 0;
    reply_slot *s = calloc(1, sizeof *s);
    if (!s) return LOOM_ENOMEM;
    node_set_layer(n, &parts_layer_def, s, free);
    node_set_handler(n, MSG_PARTS_GIVE, on_give, s);
    return 0;
}

int loom_parts_open(loom_node *n, const loom_parts_opts *o, loom_parts **out)
{
    if (!n || !o || !out) return LOOM_EINVAL;
    *out = NULL;
    if (!loom_is_worker(n)) return LOOM_EROLE;
    if (o->parts < 1 || o->parts > LOOM_PARTS_MAX || o->epochs < 1 || !(o->timeout_s >= 0) ||
        o->timeout_s > 1e9)
        return LOOM_EINVAL;
    reply_slot *s = node_layer(n, &parts_layer_def);
    if (!s) return LOOM_ESTATE;
    loom_parts *p = calloc(1, sizeof *p);
    if (!p) return LOOM_ENOMEM;
    node_lock(n);
    int busy = s->open;
    s->open = !busy;
    node_unlock(n);
    if (busy) {
        free(p);
        return LOOM_ESTATE;
    }
    *p =
        (loom_parts){.node = n,
                     .slot = s,
                     .wire = {o->parts, (uint64_t)o->epochs, (uint64_t)llround(o->timeout_s * 1e3)},
                     .held = NO_PART,
                     .finished = NO_PART,
                     .joining = loom_joined(n)};
    *out = p;
    return 0;
}

/* One request and its answer; `flags` PARTS_REQ_*. */
static int ask(loom_parts *p, int flags, msg_header *answer)
{
    loom_node *n = p->node;
    if (p->joining) flags |= PARTS_REQ_JOIN;
    msg_header h = {.type = MSG_PARTS_REQ,
                    .req = (uint64_t)p->epoch,
                    .clock = ps_current_clock(n),
                    .a = p->finished == NO_PART ? 0 : (uint64_t)p->finished + 1,
                    .b = (uint64_t)flags};
    node_frame f = {.data = &p->wire, .len = sizeof p->wire, .copy = 1};
    int rc = node_send(n, 0, &h, &f, 1);
    if (rc) return rc;
    p->finished = NO_PART;
    node_lock(n);
    while (!p->slot->full && !(rc = node_wait(n, 0))) {
    }
    *answer = p->slot->h;
    p->slot->full = 0;
    node_unlock(n);
    if (!rc && p->joining && (answer->a == PARTS_PART || answer->a == PARTS_EPOCH_END)) {
        /* Placed: the epoch the job's workers are in (loom/parts.h). */
        if (answer->req > INT32_MAX) return LOOM_EPROTO;
        p->epoch = (int)answer->req;
        p->joining = 0;
    }
    return rc;
}

/* Asked to leave (loom_leave): report the part finished, if any, and say so. */
static int leave(loom_parts *p, loom_parts_event *ev, uint32_t *part, int *epoch)
{
    msg_header a;
    int rc = ask(p, PARTS_REQ_LEAVE, &a);
    if (rc) return rc;
    if (a.a == PARTS_ERROR) return a.b > 0 && a.b < LOOM_ERROR_COUNT_ ? (int)a.b : LOOM_EPROTO;
    if (a.a != PARTS_LEFT) return LOOM_EPROTO;
    *ev = LOOM_PARTS_LEFT;
    *part = NO_PART;
    *epoch = p->epoch;
    return 0;
}

int loom_parts_next(loom_parts *p, loom_parts_event *ev, uint32_t *part, int *epoch)
{
    if (!p || !ev || !part || !epoch) return LOOM_EINVAL;
    if (p->held != NO_PART) return LOOM_ESTATE;
    loom_node *n = p->node;
    /* Decided once per call: tables are opened before the loop that asks. */
    int gated = ps_clock_gated(n);
    for (;;) {
        if (loom_leaving(n)) return leave(p, ev, part, epoch);
        msg_header a;
        int rc = ask(p, gated ? 0 : PARTS_REQ_HOLD, &a);
        if (rc) return rc;
        switch (a.a) {
        case PARTS_PART:
            if (a.b >= p->wire.parts || a.req != (uint64_t)p->epoch) return LOOM_EPROTO;
            p->held = (uint32_t)a.b;
            *ev = LOOM_PARTS_PART;
            *part = p->held;
            *epoch = p->epoch;
            return 0;
        case PARTS_WAIT:
            /* Keep pace with the busy workers (loom/parts.h, "Clocks"). */
            if (gated && (rc = loom_clock(n))) return rc;
            continue;
        case PARTS_EPOCH_END:
            if (a.req != (uint64_t)p->epoch) return LOOM_EPROTO;
            while (gated && ps_current_clock(n) < a.clock)
                if ((rc = loom_clock(n))) return rc;
            *ev = LOOM_PARTS_EPOCH_END;
            *part = NO_PART;
            *epoch = p->epoch++;
            return 0;
        case PARTS_JOB_END:
            *ev = LOOM_PARTS_JOB_END;
            *part = NO_PART;
            *epoch = p->epoch;
            return 0;
        case PARTS_ERROR:
            return a.b > 0 && a.b < LOOM_ERROR_COUNT_ ? (int)a.b : LOOM_EPROTO;
        default:
            return LOOM_EPROTO;
        }
    }
}

int loom_parts_done(loom_parts *p, uint32_t part)
{
    if (!p || p->held == NO_PART || part != p->held) return LOOM_EINVAL;
    p->finished = part;
    p->held = NO_PART;
    p->done++;
    return 0;
}

uint64_t loom_parts_finished(const loom_parts *p)
{
    return p ? p->done : 0;
}

void loom_parts_close(loom_parts *p)
{
    if (!p) return;
    node_lock(p->node);
    p->slot->open = 0;
    node_unlock(p->node);
    free(p);
}
