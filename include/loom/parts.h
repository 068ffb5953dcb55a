/* Data parts handed out on demand (the Parameter Server thesis's task
 * scheduler, Algorithm 14 and sections 3.3.5-3.3.6).
 *
 * Instead of each worker owning a fixed share of the training data, the data
 * is cut into P parts and the scheduler keeps a pool of the parts of the
 * current epoch. A worker that is idle asks for a part and is given one that
 * nobody holds (assign on idle); when it has trained on it, it says so with
 * its next request (remove on finished). The parts of a worker the job goes on
 * without (--on-worker-failure continue) or that held a part longer than the
 * timeout go back to the pool and are handed to the next worker that asks, so
 * a lost worker loses no data. An epoch is every part finished once; the
 * next epoch's pool is every part again.
 *
 *     loom_parts_opts o = LOOM_PARTS_OPTS_DEFAULT;
 *     o.parts = 16; o.epochs = 10;
 *     loom_parts *p;
 *     if ((rc = loom_parts_open(node, &o, &p))) ...
 *     for (;;) {
 *         loom_parts_event ev; uint32_t part; int epoch;
 *         if ((rc = loom_parts_next(p, &ev, &part, &epoch))) ...   error
 *         if (ev == LOOM_PARTS_PART) {
 *             train on part `part` of P (e.g. loom_libsvm_read(path, part, P, ...)),
 *             pull / push / loom_clock() per minibatch as usual;
 *             loom_parts_done(p, part);
 *         } else if (ev == LOOM_PARTS_EPOCH_END) {
 *             epoch `epoch` is over: report, barrier, ...
 *             if (epoch == o.epochs - 1) break;
 *         }
 *     }
 *     loom_parts_close(p);
 *
 * Clocks. Workers handed different parts run different numbers of minibatches,
 * so with an SSP or BSP table (loom_clock() waits while this worker is more
 * than the staleness ahead of the slowest) a busy worker would wait forever
 * for one that has nothing left to do. So a worker with no part to take in an
 * epoch that is not over yet does empty clocks: loom_parts_next() calls
 * loom_clock() once per answer "nothing for you yet" and asks again; that
 * clock waits for the slowest worker like any other, so an idle worker keeps
 * pace with the busy ones without running ahead, and never holds them back.
 * When the epoch ends the scheduler names the highest clock any worker
 * reported in it plus one (an idle worker's last empty clock), and every
 * worker clocks up to that before loom_parts_next() says the epoch is over:
 * an idle worker can be waiting in that last clock for a worker that already
 * heard the end, and it must not wait on one that went on to a barrier. A
 * worker whose tables are all ASP (nothing waits on clocks) does no empty
 * clocks: the scheduler holds its request until a part comes back to the pool
 * or the epoch ends.
 *
 * Elastic jobs (docs/ELASTIC.md). A worker that joined the running job
 * (loom_joined) is placed by its first request in the epoch the job's
 * workers are in: if they have not all left the last epoch that ended (they
 * may still be in its barrier), it gets that epoch's end first, so it goes
 * through the same barriers as they do. A worker asked to leave (loom_leave)
 * asks for nothing more: loom_parts_next() reports the part it finished and
 * answers LOOM_PARTS_LEFT; the parts it trained on count once, like anyone's.
 *
 * Checkpoints (docs/FAULTS.md). A worker's place in the parts is part of
 * its state at a checkpoint's clock C: the epoch it is in, the part it holds
 * (the application saves how far into it it is) and the parts it finished in
 * that epoch. loom_parts_save() gives those bytes, to go into the worker's
 * loom_checkpoint_save(); every worker of a resumed job hands them back to
 * loom_parts_resume() before anything else, and the scheduler rebuilds the
 * epoch's pool from all of them: finished = what some worker had finished
 * (every minibatch of it is in the servers' cut, clocks < C), held = what a
 * worker was in the middle of (its minibatches of clocks < C are in the cut,
 * and the worker goes on from its next one: nothing is trained twice or
 * skipped), in the pool = the rest, handed out again as if never handed out.
 * The empty clocks loom_parts_next() does are clocks like any other: with
 * checkpoints, give it the `clocked` callback, where the application asks
 * loom_checkpoint_due() and saves its state as when idle. The state does not
 * say whether the worker heard the epoch's end (a cut at an empty clock
 * before it, under SSP, can be before the last part finished): the resumed
 * worker asks again and hears it then.
 *
 * Every worker must open the parts with the same options; the scheduler
 * answers a request with other options LOOM_EMISMATCH. One loom_parts per
 * worker node. */
#ifndef LOOM_PARTS_H
#define LOOM_PARTS_H

#include <stddef.h>
#include <stdint.h>

#include "loom/node.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most parts one job's data may be cut into. */
#define LOOM_PARTS_MAX (1u << 20)

typedef struct loom_parts loom_parts;

typedef struct loom_parts_opts {
    uint32_t parts;   /* P, 1 to LOOM_PARTS_MAX */
    int epochs;       /* epochs of the job, at least 1 */
    double timeout_s; /* a part held longer goes back to the pool; 0: never */
    /* Called (if not NULL) on the application's thread after each empty clock
     * of loom_parts_next(), with ctx: the place to ask loom_checkpoint_due().
     * Non-zero ends loom_parts_next() with that code. */
    int (*clocked)(void *ctx);
    void *ctx;
} loom_parts_opts;

#define LOOM_PARTS_OPTS_DEFAULT                                                                    \
    {                                                                                              \
        .parts = 0, .epochs = 1, .timeout_s = 0, .clocked = NULL, .ctx = NULL                      \
    }

/* What loom_parts_next() says. */
typedef enum loom_parts_event {
    LOOM_PARTS_PART = 0,  /* train on *part of epoch *epoch, then loom_parts_done() */
    LOOM_PARTS_EPOCH_END, /* every part of epoch *epoch is finished; the next call asks for
                             the next epoch's */
    LOOM_PARTS_JOB_END,   /* asked after the last epoch's end: nothing more */
    LOOM_PARTS_LEFT       /* this worker was asked to leave (loom_leave): the part it
                             finished is reported and it has no more; end it with
                             loom_finalize() (docs/ELASTIC.md) */
} loom_parts_event;

/* Workers: the parts of this job (the scheduler learns the options from the
 * first request). LOOM_EROLE on another role, LOOM_EINVAL for options out of
 * range, LOOM_ESTATE if this node has them open already. */
int loom_parts_open(loom_node *node, const loom_parts_opts *opts, loom_parts **out);

/* Asks the scheduler for work (reporting the part loom_parts_done() finished)
 * and waits for the answer, doing empty clocks while the epoch is not over
 * but no part is free (see above). 0 with *ev (and *part, *epoch); or an
 * error: LOOM_ESTATE while a part handed out is not done, LOOM_EMISMATCH if
 * the scheduler has other options, LOOM_EPEERFAIL if the job failed. */
int loom_parts_next(loom_parts *p, loom_parts_event *ev, uint32_t *part, int *epoch);

/* The part the last loom_parts_next() handed out is trained on; the
 * scheduler hears it with the next request. LOOM_EINVAL if it is not that
 * part. A part that timed out meanwhile may have gone to another worker:
 * the first of the two finishes counts, the other is ignored. */
int loom_parts_done(loom_parts *p, uint32_t part);

/* Parts this worker was handed and finished so far (all epochs). */
uint64_t loom_parts_finished(const loom_parts *p);

/* Checkpoints (above): this worker's place in the parts as bytes, for its
 * checkpoint state; *len receives their length. With buf NULL or cap too
 * small nothing is written and LOOM_ELIMIT returned (ask with NULL first). */
int loom_parts_save(const loom_parts *p, void *buf, size_t cap, size_t *len);

/* In a resumed job, on every worker, after loom_parts_open() and before
 * loom_parts_next(): the bytes loom_parts_save() gave at the checkpoint.
 * Waits until the scheduler has every worker's (a few ms), then *held is
 * the part this worker was training at the cut (go on with it from where
 * the application's state says, then loom_parts_done()), or UINT32_MAX,
 * and *epoch the epoch it is in.
 * LOOM_EINVAL if the bytes are not a state of these options, LOOM_ESTATE
 * after a request, LOOM_EPROTO if the workers' states disagree (other
 * epochs: a checkpoint of an ASP job, whose idle workers do no clocks). */
int loom_parts_resume(loom_parts *p, const void *state, size_t len, uint32_t *held, int *epoch);

void loom_parts_close(loom_parts *p);

#ifdef __cplusplus
}
#endif

#endif
