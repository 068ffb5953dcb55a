/* parts_coord: the scheduler's pool of data parts (loom/parts.h; the
 * Parameter Server thesis's task scheduler, Algorithm 14).
 *
 * It runs entirely in the scheduler's I/O thread: PARTS_REQ's handler, the
 * lost subscriber and the timer. Per epoch every part is in the pool, held by
 * one worker, or finished:
 *
 *   a request (the worker is idle)        the next part of the pool, held by it;
 *                                         none free: PARTS_WAIT (the worker does an
 *                                         empty clock and asks again), or, for a
 *                                         worker without clocks to keep, the
 *                                         request waits here
 *   the part a request reports finished   finished, unless it was already (the
 *                                         first finish counts, also from a worker
 *                                         whose part timed out)
 *   a worker lost, a part held too long   back to the pool (a waiting request
 *                                         gets it at once)
 *   every part finished                   PARTS_EPOCH_END to whoever asks for that
 *                                         epoch; the next epoch's pool is every part
 *
 * The pool is a stack: parts given back are handed out first (they are the
 * ones holding the epoch up), then the epoch's parts in ascending order.
 * PARTS_EPOCH_END carries the clock every worker must reach before it leaves
 * the epoch (loom/parts.h, "Clocks"): the highest clock a request of the
 * epoch reported, plus one after a PARTS_WAIT (the empty clock that follows).
 *
 * Elastic jobs (docs/ELASTIC.md): a worker joins the running job (core's
 * join, a rejoin of a worker slot) only while every worker has asked for a
 * part of the pool's epoch (the join gate: none is on its way to the barrier
 * after the last epoch's end), and its first request (PARTS_REQ_JOIN) places
 * it in the lowest epoch another worker's last request was in: if that epoch
 * ended meanwhile, it gets its end, and goes through the barrier after it,
 * which waits for it, with the others. A worker that leaves says so with its
 * last request (PARTS_REQ_LEAVE), which reports the part it finished; it is
 * gone from then on, its slot ready for the next to join. `loom leave` may ask
 * a worker to leave (core's leave gate) once the job hands out parts.
 *
 * Resuming from a checkpoint (loom/parts.h, "Checkpoints"): every worker's
 * first request is its state at the cut (PARTS_REQ_RESUME: its epoch, the
 * part it held, the parts it finished in the epoch). The pool answers none
 * of them until it has every worker's (a lost one's is not waited for), so
 * that no part is handed out that another worker's state says is finished;
 * then the epoch's parts are finished, held or in the pool as the states
 * say, the epoch ends if they are all finished, and every worker hears
 * PARTS_RESUMED. The states must be of one epoch: a cut falls in the epoch
 * whose clocks it cuts, the same on every worker, as long as idle workers do
 * empty clocks (not under ASP alone). The line `parts: resumed in epoch E`
 * says what the states held.
 *
 * The accounting is logged (LOOM_VERBOSE=1): each part handed out, each
 * finished, each back in the pool (a lost worker's and a timed-out one's
 * always, as warnings), and each epoch's end with how many parts went back;
 * tests/sched/test_parts.sh checks it. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "loom/error.h"
#include "loom/parts.h"
#include "sched/msg_types.h"
#include "sched/parts.h"

#define NO_PART UINT32_MAX

enum { PART_POOL, PART_HELD, PART_FINISHED };

typedef struct coord_part {
    uint8_t state;
    uint32_t holder; /* worker rank, PART_HELD */
    uint64_t since_ms;
} coord_part;

typedef struct coord_worker {
    uint32_t held; /* NO_PART if none */
    int gone;      /* the job went on without it */
    int waiting;   /* a request held here (no empty clocks), for epoch `wait_epoch` */
    int wait_epoch;
    int epoch_at; /* the epoch of its last request (where a joining worker is placed) */
    int resumed;  /* its checkpoint state is in (PARTS_REQ_RESUME) */
} coord_worker;

typedef struct parts_coord {
    int workers, num_servers;
    int configured;
    parts_wire_opts o;
    int epoch;         /* the epoch whose pool this is; o.epochs once every one is over */
    coord_part *parts; /* o.parts */
    uint32_t *pool, npool;
    uint32_t finished; /* parts of this epoch */
    uint32_t returned; /* parts of this epoch back in the pool */
    int64_t hi;        /* the clock every worker must reach before it leaves this epoch */
    /* hi when the last epoch ended: what a worker leaving any epoch over
     * clocks up to. hi only grows, so a worker an epoch or more behind (ASP
     * alone lets one fall that far) reaches at least its own epoch's. */
    int64_t target;
    coord_worker *worker; /* by rank */
    int resuming;         /* workers' checkpoint states coming in: nothing answered yet */
    int served;           /* an ordinary request was answered: too late for states */
    int unresumable;      /* the states disagree: every request is answered an error */
} parts_coord;

static void coord_destroy(void *state)
{
    parts_coord *c = state;
    free(c->parts);
    free(c->pool);
    free(c->worker);
    free(c);
}

static void answer(loom_node *n, parts_coord *c, int rank, uint64_t epoch, enum parts_answer kind,
                   uint64_t b, int64_t clock)
{
    msg_header h = {.type = MSG_PARTS_GIVE, .req = epoch, .a = kind, .b = b, .clock = clock};
    node_send(n, node_worker_id(c->num_servers, rank), &h, NULL, 0);
}

/* A new epoch's pool: every part, the lowest on top. */
static void fill_pool(parts_coord *c)
{
    for (uint32_t i = 0; i < c->o.parts; i++) {
        c->parts[i].state = PART_POOL;
        c->pool[i] = c->o.parts - 1 - i;
    }
    c->npool = c->o.parts;
    c->finished = c->returned = 0;
}

static void hand_out(loom_node *n, parts_coord *c, int rank)
{
    uint32_t part = c->pool[--c->npool];
    c->parts[part] = (coord_part){PART_HELD, (uint32_t)rank, node_now_ms()};
    c->worker[rank].held = part;
    log_info("parts: epoch %d: part %" PRIu32 " to worker %d", c->epoch, part, rank);
    answer(n, c, rank, (uint64_t)c->epoch, PARTS_PART, part, 0);
}

/* Requests held here (workers without clocks to keep) that can be answered now. */
static void serve_waiting(loom_node *n, parts_coord *c)
{
    for (int r = 0; r < c->workers; r++) {
        coord_worker *w = &c->worker[r];
        if (!w->waiting || w->gone) continue;
        if (w->wait_epoch < c->epoch) {
            w->waiting = 0;
            answer(n, c, r, (uint64_t)w->wait_epoch, PARTS_EPOCH_END, 0, c->target);
        } else if (c->npool) {
            w->waiting = 0;
            hand_out(n, c, r);
        }
    }
}

/* A lost worker's part going back is said even without LOOM_VERBOSE: it is
 * what --on-worker-failure continue no longer loses. */
static void back_to_pool(parts_coord *c, uint32_t part, int rank, const char *why, int loud)
{
    c->parts[part].state = PART_POOL;
    c->worker[rank].held = NO_PART;
    c->pool[c->npool++] = part;
    c->returned++;
    if (loud)
        log_warn("parts: epoch %d: part %" PRIu32 " back in the pool (worker %d %s)", c->epoch,
                 part, rank, why);
    else
        log_info("parts: epoch %d: part %" PRIu32 " back in the pool (worker %d %s)", c->epoch,
                 part, rank, why);
}

/* Every part of the pool's epoch is finished: on to the next. */
static void epoch_over(loom_node *n, parts_coord *c)
{
    log_info("parts: epoch %d over: %" PRIu32 " parts finished, %" PRIu32
             " back in the pool on the way",
             c->epoch, c->finished, c->returned);
    c->target = c->hi;
    if (++c->epoch < (int)c->o.epochs) fill_pool(c);
    serve_waiting(n, c);
}

static void finish(loom_node *n, parts_coord *c, int rank, uint32_t part)
{
    coord_part *p = &c->parts[part];
    if (c->worker[rank].held == part) c->worker[rank].held = NO_PART;
    if (p->state == PART_FINISHED) {
        /* Its part timed out and another worker finished it first. */
        log_info("parts: epoch %d: part %" PRIu32 " finished late by worker %d; not counted",
                 c->epoch, part, rank);
        return;
    }
    /* The first finish counts, even of a part that timed out at this worker:
     * so a part slower than the timeout everywhere still ends. Whoever holds
     * it now finishes late; in the pool, it leaves the pool. */
    if (p->state == PART_HELD && p->holder != (uint32_t)rank) c->worker[p->holder].held = NO_PART;
    if (p->state == PART_POOL)
        for (uint32_t i = 0; i < c->npool; i++)
            if (c->pool[i] == part) {
                memmove(c->pool + i, c->pool + i + 1, (c->npool - i - 1) * sizeof *c->pool);
                c->npool--;
                break;
            }
    p->state = PART_FINISHED;
    c->finished++;
    log_info("parts: epoch %d: part %" PRIu32 " finished by worker %d", c->epoch, part, rank);
    if (c->finished == c->o.parts) epoch_over(n, c);
}

/* The options of a request: the first configures the pool, the others must agree. */
static int configure(loom_node *n, parts_coord *c, const parts_wire_opts *o)
{
    if (c->configured) return memcmp(o, &c->o, sizeof *o) ? LOOM_EMISMATCH : 0;
    if (o->parts < 1 || o->parts > LOOM_PARTS_MAX || o->epochs < 1 || o->epochs > INT32_MAX ||
        o->timeout_ms > (uint64_t)1e12)
        return LOOM_EPROTO;
    c->parts = calloc(o->parts, sizeof *c->parts);
    c->pool = malloc(o->parts * sizeof *c->pool);
    if (!c->parts || !c->pool) {
        free(c->parts), free(c->pool);
        c->parts = NULL, c->pool = NULL;
        return LOOM_ENOMEM;
    }
    c->o = *o;
    c->configured = 1;
    fill_pool(c);
    if (o->timeout_ms) node_timer_poke(n, &parts_layer_def); /* its first run: now */
    log_info("parts: %" PRIu64 " parts, %" PRIu64 " epochs, timeout %" PRIu64 " ms", o->parts,
             o->epochs, o->timeout_ms);
    return 0;
}

/* The join gate (node_add_join_gate): a worker may join only while every
 * worker has asked for a part of the pool's epoch since it heard the last
 * epoch's end, so none is between that end and the barrier after it, or in
 * it: the newcomer, whose barriers start after the last one released, then
 * goes through the same barriers as everyone (placement below). */
static const char *join_gate(loom_node *n, void *ctx)
{
    (void)n;
    const parts_coord *c = ctx;
    if (c->resuming) return "the job resumes from its checkpoint";
    if (!c->configured) return NULL;
    for (int r = 0; r < c->workers; r++)
        if (!c->worker[r].gone && c->worker[r].epoch_at < c->epoch)
            return "the workers are in a barrier or on their way there";
    return NULL;
}

/* The leave gate (node_set_leave_gate; `loom leave`): a worker may be asked
 * to leave once the job hands out parts (its options came) and while it is
 * in the pool's accounting: it leaves after the part it trains on, with the
 * request that reports it (PARTS_REQ_LEAVE). */
static int leave_gate(loom_node *n, void *ctx, uint32_t id)
{
    const parts_coord *c = ctx;
    int rank;
    if (!c->configured || node_peer_role(n, id, &rank) != LOOM_WORKER || rank >= c->workers)
        return 0;
    return !c->worker[rank].gone;
}

/* Where a joining worker starts (the epoch it is placed in): the lowest
 * epoch another worker's last request was in. The gate let it join while
 * that was the pool's epoch; since, the epoch may have ended (its workers
 * then wait for the newcomer in the barrier after it). */
static int placement(const parts_coord *c, int rank)
{
    int e = c->epoch;
    for (int r = 0; r < c->workers; r++)
        if (r != rank && !c->worker[r].gone && c->worker[r].epoch_at < e) e = c->worker[r].epoch_at;
    return e;
}

/* Every awaited state is in (none once every worker sent its or is lost):
 * the pool as they say, and every worker that sent one answered. */
static void resume_if_complete(loom_node *n, parts_coord *c)
{
    if (!c->resuming || c->unresumable) return;
    uint32_t held = 0;
    for (int r = 0; r < c->workers; r++) {
        if (!c->worker[r].gone && !c->worker[r].resumed) return;
        held += c->worker[r].held != NO_PART;
    }
    c->resuming = 0;
    c->npool = 0; /* the parts left, lowest on top, as fill_pool has them */
    for (uint32_t i = c->o.parts; i-- > 0;)
        if (c->parts[i].state == PART_POOL) c->pool[c->npool++] = i;
    log_info("parts: resumed in epoch %d: %" PRIu32 " parts finished, %" PRIu32 " held, %" PRIu32
             " in the pool",
             c->epoch, c->finished, held, c->npool);
    if (c->finished == c->o.parts) epoch_over(n, c);
    for (int r = 0; r < c->workers; r++)
        if (!c->worker[r].gone)
            answer(n, c, r, (uint64_t)c->worker[r].epoch_at, PARTS_RESUMED, 0, 0);
}

/* A resumed worker's state (PARTS_REQ_RESUME, loom/parts.h "Checkpoints"). */
static void on_resume(loom_node *n, parts_coord *c, int rank, node_msg *m)
{
    coord_worker *w = &c->worker[rank];
    size_t len = m->nframes == 2 ? node_frame_size(m, 1) : 0;
    parts_wire_resume st;
    const unsigned char *b = len ? node_frame_data(m, 1) : NULL;
    if (len < sizeof st) {
        node_drop(n, m, "PARTS_REQ_RESUME without its state");
        return answer(n, c, rank, 0, PARTS_ERROR, LOOM_EPROTO, 0);
    }
    memcpy(&st, b, sizeof st);
    if (c->unresumable) return answer(n, c, rank, st.epoch, PARTS_ERROR, LOOM_EPROTO, 0);
    if (st.epoch >= c->o.epochs || st.held > c->o.parts || st.n > c->o.parts ||
        len != sizeof st + st.n * sizeof(uint32_t)) {
        node_drop(n, m, "PARTS_REQ_RESUME with a state that does not fit the options");
        return answer(n, c, rank, 0, PARTS_ERROR, LOOM_EPROTO, 0);
    }
    if (!c->resuming) { /* the first state: the epoch the cut is in */
        c->resuming = 1;
        c->epoch = (int)st.epoch;
        fill_pool(c);
    } else if (st.epoch != (uint64_t)c->epoch) {
        log_error("parts: the workers' checkpoint states are of epochs %d and %" PRIu64
                  " (a cut of an ASP job?): cannot resume the parts",
                  c->epoch, st.epoch);
        /* Nobody goes on: the workers waiting for the pool hear it too. */
        c->unresumable = 1;
        for (int r = 0; r < c->workers; r++)
            if (c->worker[r].resumed && !c->worker[r].gone)
                answer(n, c, r, (uint64_t)c->epoch, PARTS_ERROR, LOOM_EPROTO, 0);
        return answer(n, c, rank, st.epoch, PARTS_ERROR, LOOM_EPROTO, 0);
    }
    for (uint64_t i = 0; i < st.n; i++) {
        uint32_t part;
        memcpy(&part, b + sizeof st + i * sizeof part, sizeof part);
        if (part >= c->o.parts) {
            node_drop(n, m, "PARTS_REQ_RESUME finishing a part out of range");
            return answer(n, c, rank, st.epoch, PARTS_ERROR, LOOM_EPROTO, 0);
        }
        if (c->parts[part].state == PART_FINISHED) continue;
        if (c->parts[part].state == PART_HELD) c->worker[c->parts[part].holder].held = NO_PART;
        c->parts[part].state = PART_FINISHED;
        c->finished++;
        log_info("parts: epoch %d: part %" PRIu32 " finished by worker %d before the cut", c->epoch,
                 part, rank);
    }
    /* A part held by two (one timed out at the cut) is the first one's; the
     * other's finish then comes late, and the first finish counts. */
    if (st.held && c->parts[st.held - 1].state == PART_POOL) {
        c->parts[st.held - 1] = (coord_part){PART_HELD, (uint32_t)rank, node_now_ms()};
        w->held = (uint32_t)(st.held - 1);
        log_info("parts: epoch %d: part %" PRIu64 " held by worker %d at the cut", c->epoch,
                 st.held - 1, rank);
    }
    w->resumed = 1;
    w->epoch_at = c->epoch;
    if (m->h.clock > c->hi) c->hi = m->h.clock;
    resume_if_complete(n, c);
}

static void on_request(loom_node *n, void *ctx, node_msg *m)
{
    parts_coord *c = ctx;
    int rank;
    if (node_peer_role(n, m->from, &rank) != LOOM_WORKER || rank >= c->workers)
        return node_drop(n, m, "PARTS_REQ from a node that is no worker");
    coord_worker *w = &c->worker[rank];
    if (w->gone) return node_drop(n, m, "PARTS_REQ from a worker the job went on without");
    if (node_frame_size(m, 0) != sizeof(parts_wire_opts))
        return node_drop(n, m, "PARTS_REQ whose options are not 24 bytes");
    parts_wire_opts o;
    memcpy(&o, node_frame_data(m, 0), sizeof o);
    int rc = configure(n, c, &o);
    if (rc) return answer(n, c, rank, 0, PARTS_ERROR, (uint64_t)rc, 0);
    uint64_t e = m->h.req, flags = m->h.b;
    if (flags > PARTS_REQ_FLAGS || ((flags & PARTS_REQ_JOIN) && m->h.a)) {
        node_drop(n, m, "PARTS_REQ with unknown flags, or a join reporting a part");
        return answer(n, c, rank, e, PARTS_ERROR, LOOM_EPROTO, 0);
    }
    if (!(flags & PARTS_REQ_RESUME) && m->nframes != 1) {
        node_drop(n, m, "PARTS_REQ with a state but no PARTS_REQ_RESUME");
        return answer(n, c, rank, e, PARTS_ERROR, LOOM_EPROTO, 0);
    }
    if (flags & PARTS_REQ_RESUME) {
        if (flags != PARTS_REQ_RESUME || m->h.a || c->served || w->resumed) {
            node_drop(n, m, "PARTS_REQ_RESUME out of turn");
            return answer(n, c, rank, e, PARTS_ERROR, LOOM_EPROTO, 0);
        }
        return on_resume(n, c, rank, m);
    }
    if (c->resuming) {
        node_drop(n, m, "PARTS_REQ before every resumed worker's state is in");
        return answer(n, c, rank, e, PARTS_ERROR, LOOM_EPROTO, 0);
    }
    c->served = 1;
    if (flags & PARTS_REQ_JOIN) e = (uint64_t)placement(c, rank);
    w->epoch_at = e <= (uint64_t)c->epoch ? (int)e : c->epoch;
    /* A worker is in the pool's epoch or behind it, never ahead, and has one
     * request out at a time. */
    if (e > (uint64_t)c->epoch || w->waiting || m->h.a > c->o.parts) {
        node_drop(n, m, "PARTS_REQ out of turn");
        return answer(n, c, rank, e, PARTS_ERROR, LOOM_EPROTO, 0);
    }
    if (m->h.a && e == (uint64_t)c->epoch)
        finish(n, c, rank, (uint32_t)(m->h.a - 1));
    else if (m->h.a) /* its part timed out and the epoch ended without it */
        log_info("parts: epoch %" PRIu64 ": part %" PRIu64
                 " finished late by worker %d; not counted",
                 e, m->h.a - 1, rank);
    if (w->held != NO_PART) { /* it asks for another: the one it held is not finished */
        back_to_pool(c, w->held, rank,
                     flags & PARTS_REQ_LEAVE ? "left without finishing it"
                                             : "asked again without finishing it",
                     0);
    }
    if (flags & PARTS_REQ_LEAVE) {
        w->gone = 1;
        log_info("parts: epoch %d: worker %d leaves", c->epoch, rank);
        serve_waiting(n, c);
        return answer(n, c, rank, e, PARTS_LEFT, 0, 0);
    }
    if (e < (uint64_t)c->epoch) return answer(n, c, rank, e, PARTS_EPOCH_END, 0, c->target);
    if (c->epoch >= (int)c->o.epochs) return answer(n, c, rank, e, PARTS_JOB_END, 0, 0);
    if (m->h.clock > c->hi) c->hi = m->h.clock;
    if (c->npool) return hand_out(n, c, rank);
    if (flags & PARTS_REQ_HOLD) { /* no clocks to keep: wait here for a part or the end */
        w->waiting = 1;
        w->wait_epoch = (int)e;
        return;
    }
    if (m->h.clock + 1 > c->hi) c->hi = m->h.clock + 1;
    answer(n, c, rank, e, PARTS_WAIT, 0, 0);
}

/* The job goes on without worker node `id` (lost, or a free slot at the
 * start; one that left said so already): its part goes back to the pool,
 * so that nothing of its data is lost (1, for the scheduler's line). */
static int on_lost(loom_node *n, void *ctx, uint32_t id)
{
    parts_coord *c = ctx;
    int rank;
    if (node_peer_role(n, id, &rank) != LOOM_WORKER || rank >= c->workers) return 0;
    coord_worker *w = &c->worker[rank];
    if (w->gone) return 0;
    w->gone = 1;
    w->waiting = 0;
    if (!c->configured) return 0;
    resume_if_complete(n, c); /* its state is not waited for */
    if (w->held == NO_PART) {
        log_warn("parts: worker %d lost holding no part: no data lost", rank);
        return 1;
    }
    back_to_pool(c, w->held, rank, "lost", 1);
    serve_waiting(n, c);
    return 1;
}

/* A worker joined the running job in slot `id` (core's join: node_add_rejoin). */
static void on_join(loom_node *n, void *ctx, uint32_t id)
{
    parts_coord *c = ctx;
    int rank;
    if (node_peer_role(n, id, &rank) != LOOM_WORKER || rank >= c->workers) return;
    c->worker[rank] = (coord_worker){.held = NO_PART, .epoch_at = c->epoch};
    log_info("parts: epoch %d: worker %d joined", c->epoch, rank);
}

/* Parts held longer than the timeout go back to the pool; a quarter of the
 * timeout later it looks again (first poked when the options come). */
static uint64_t on_timer(loom_node *n, void *ctx, uint64_t now)
{
    parts_coord *c = ctx;
    uint64_t t = c->o.timeout_ms;
    if (!c->configured || !t) return UINT64_MAX;
    for (int r = 0; r < c->workers; r++) {
        coord_worker *w = &c->worker[r];
        if (w->held != NO_PART && now - c->parts[w->held].since_ms > t)
            back_to_pool(c, w->held, r, "timed out", 1);
    }
    serve_waiting(n, c);
    return now + (t / 4 ? t / 4 : 1);
}

int parts_coord_attach(loom_node *n)
{
    parts_coord *c = calloc(1, sizeof *c);
    if (!c) return LOOM_ENOMEM;
    c->workers = loom_num_workers(n);
    c->num_servers = loom_num_servers(n);
    c->worker = calloc(c->workers > 0 ? (size_t)c->workers : 1, sizeof *c->worker);
    if (!c->worker) {
        free(c);
        return LOOM_ENOMEM;
    }
    for (int r = 0; r < c->workers; r++) c->worker[r].held = NO_PART;
    node_set_layer(n, &parts_layer_def, c, coord_destroy);
    node_set_handler(n, MSG_PARTS_REQ, on_request, c);
    node_set_timer(n, &parts_layer_def, on_timer, c);
    int rc = node_add_lost(n, on_lost, c);
    rc = rc ? rc : node_add_join_gate(n, join_gate, c);
    rc = rc ? rc : node_set_leave_gate(n, leave_gate, c);
    return rc ? rc : node_add_rejoin(n, on_join, c);
}
