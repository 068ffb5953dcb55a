/* parts: a worker's side of the data parts handed out on demand
 * (loom/parts.h), and the layer's attach on every role.
 *
 * A worker has at most one request out: loom_parts_next() sends PARTS_REQ
 * (carrying the part it finished, if any) and waits on the node's condition
 * variable until the handler, on the I/O thread, has put the scheduler's
 * PARTS_GIVE into the one reply slot. The waiting and the empty clocks
 * (loom/parts.h, "Clocks") happen on the application's thread, never on the
 * I/O thread.
 *
 * Checkpoints: besides the part it holds, a worker keeps the parts it
 * finished in its epoch, so that its state at any clock says what of the
 * epoch it did (loom/parts.h). That list is cleared when the worker asks for
 * the next epoch's first part, not when it hears the end: between the two it
 * does no clock, and the final checkpoint, cut after the last epoch's end,
 * then still says which epoch it ends. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    int joining;         /* joined the running job and not yet placed in an epoch */
    int asked;           /* a request was sent (loom_parts_resume comes before any) */
    int ended;           /* heard the end of epoch - 1; fin still lists its parts */
    uint32_t *fin, nfin; /* parts finished in the epoch (checkpoints) */
    int (*clocked)(void *ctx);
    void *ctx;
};

#define STATE_MAGIC 0x31545250u /* "PRT1" */
/* loom_parts_save()'s bytes: magic, parts, done, then the wire's resume state. */
#define STATE_HEAD (3 * 8 + sizeof(parts_wire_resume))

static const msg_type_info parts_types[] = {
    {MSG_PARTS_REQ, "PARTS_REQ", 1, 2, MSG_BY_WORKER},
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
    uint32_t *fin = malloc(o->parts * sizeof *fin);
    if (!p || !fin) {
        free(p), free(fin);
        return LOOM_ENOMEM;
    }
    node_lock(n);
    int busy = s->open;
    s->open = !busy;
    node_unlock(n);
    if (busy) {
        free(p), free(fin);
        return LOOM_ESTATE;
    }
    *p =
        (loom_parts){.node = n,
                     .slot = s,
                     .wire = {o->parts, (uint64_t)o->epochs, (uint64_t)llround(o->timeout_s * 1e3)},
                     .held = NO_PART,
                     .finished = NO_PART,
                     .joining = loom_joined(n),
                     .fin = fin,
                     .clocked = o->clocked,
                     .ctx = o->ctx};
    *out = p;
    return 0;
}

/* One request and its answer; `flags` PARTS_REQ_*, `extra` a second frame
 * (PARTS_REQ_RESUME's) or NULL. */
static int ask(loom_parts *p, int flags, const node_frame *extra, msg_header *answer)
{
    loom_node *n = p->node;
    if (p->joining) flags |= PARTS_REQ_JOIN;
    msg_header h = {.type = MSG_PARTS_REQ,
                    .req = (uint64_t)p->epoch,
                    .clock = ps_current_clock(n),
                    .a = p->finished == NO_PART ? 0 : (uint64_t)p->finished + 1,
                    .b = (uint64_t)flags};
    node_frame f[2] = {{.data = &p->wire, .len = sizeof p->wire, .copy = 1}};
    if (extra) f[1] = *extra;
    p->asked = 1;
    int rc = node_send(n, 0, &h, f, extra ? 2 : 1);
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
    int rc = ask(p, PARTS_REQ_LEAVE, NULL, &a);
    if (rc) return rc;
    if (a.a == PARTS_ERROR) return a.b > 0 && a.b < LOOM_ERROR_COUNT_ ? (int)a.b : LOOM_EPROTO;
    if (a.a != PARTS_LEFT) return LOOM_EPROTO;
    *ev = LOOM_PARTS_LEFT;
    *part = NO_PART;
    *epoch = p->epoch;
    return 0;
}

/* An empty clock, and the application's look at it (checkpoints). */
static int empty_clock(loom_parts *p)
{
    int rc = loom_clock(p->node);
    return rc ? rc : p->clocked ? p->clocked(p->ctx) : 0;
}

int loom_parts_next(loom_parts *p, loom_parts_event *ev, uint32_t *part, int *epoch)
{
    if (!p || !ev || !part || !epoch) return LOOM_EINVAL;
    if (p->held != NO_PART) return LOOM_ESTATE;
    loom_node *n = p->node;
    /* Decided once per call: tables are opened before the loop that asks. */
    int gated = ps_clock_gated(n);
    if (p->ended) { /* asking for the next epoch: the last one's parts are history */
        p->ended = 0;
        p->nfin = 0;
    }
    for (;;) {
        if (loom_leaving(n)) return leave(p, ev, part, epoch);
        msg_header a;
        int rc = ask(p, gated ? 0 : PARTS_REQ_HOLD, NULL, &a);
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
            if (gated && (rc = empty_clock(p))) return rc;
            continue;
        case PARTS_EPOCH_END:
            if (a.req != (uint64_t)p->epoch) return LOOM_EPROTO;
            while (gated && ps_current_clock(n) < a.clock)
                if ((rc = empty_clock(p))) return rc;
            *ev = LOOM_PARTS_EPOCH_END;
            *part = NO_PART;
            *epoch = p->epoch++;
            p->ended = 1;
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
    if (p->nfin < p->wire.parts) p->fin[p->nfin++] = part; /* each part finishes once an epoch */
    return 0;
}

int loom_parts_save(const loom_parts *p, void *buf, size_t cap, size_t *len)
{
    if (!p || !len) return LOOM_EINVAL;
    *len = STATE_HEAD + (size_t)p->nfin * sizeof *p->fin;
    if (!buf || cap < *len) return LOOM_ELIMIT;
    uint64_t head[3] = {STATE_MAGIC, p->wire.parts, p->done};
    parts_wire_resume r = {(uint64_t)(p->epoch - p->ended),
                           p->held == NO_PART ? 0 : (uint64_t)p->held + 1, p->nfin};
    unsigned char *b = buf;
    memcpy(b, head, sizeof head);
    memcpy(b + sizeof head, &r, sizeof r);
    memcpy(b + STATE_HEAD, p->fin, (size_t)p->nfin * sizeof *p->fin);
    return 0;
}

int loom_parts_resume(loom_parts *p, const void *state, size_t len, uint32_t *held, int *epoch)
{
    if (!p || !state || !held || !epoch || len < STATE_HEAD) return LOOM_EINVAL;
    if (p->asked || p->joining) return LOOM_ESTATE;
    uint64_t head[3];
    parts_wire_resume r;
    const unsigned char *b = state;
    memcpy(head, b, sizeof head);
    memcpy(&r, b + sizeof head, sizeof r);
    if (head[0] != STATE_MAGIC || head[1] != p->wire.parts || r.epoch >= p->wire.epochs ||
        r.held > p->wire.parts || r.n > p->wire.parts || len != STATE_HEAD + r.n * sizeof *p->fin)
        return LOOM_EINVAL;
    memcpy(p->fin, b + STATE_HEAD, r.n * sizeof *p->fin);
    for (uint64_t i = 0; i < r.n; i++)
        if (p->fin[i] >= p->wire.parts) return LOOM_EINVAL;
    p->nfin = (uint32_t)r.n;
    p->epoch = (int)r.epoch;
    p->done = head[2];
    /* The scheduler's copy: the wire's part of the state, as saved. */
    node_frame f = {.data = b + sizeof head, .len = len - sizeof head, .copy = 1};
    msg_header a;
    int rc = ask(p, PARTS_REQ_RESUME, &f, &a);
    if (rc) return rc;
    if (a.a == PARTS_ERROR) return a.b > 0 && a.b < LOOM_ERROR_COUNT_ ? (int)a.b : LOOM_EPROTO;
    if (a.a != PARTS_RESUMED) return LOOM_EPROTO;
    p->held = r.held ? (uint32_t)(r.held - 1) : NO_PART;
    *held = p->held;
    *epoch = p->epoch;
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
    free(p->fin);
    free(p);
}
