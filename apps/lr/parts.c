/* parts: `loom train lr --data-parts N`, minibatch SGD over data parts the
 * scheduler hands out on demand (loom/parts.h, li-thesis Algorithm 14).
 *
 * The training file is cut into N parts, byte ranges split at line
 * boundaries (part i of N is what loom_libsvm_read reads as share i of N).
 * A worker asks for a part when it is idle, trains on it (its rows in an
 * order seeded by the part and the epoch, so the order does not depend on
 * which worker got it), reports it finished and asks again; an epoch is every
 * part finished once, by whichever workers. The parts a lost worker held
 * (--on-worker-failure continue) go back to the pool and another worker trains
 * on them: the job loses no data.
 *
 * --threads T cuts each part into T lanes, as train.c cuts a share: a clock
 * is T minibatches, one per lane, computed in parallel and pushed in lane
 * order.
 *
 * Clocks: one loom_clock() per minibatch, as with fixed shares; workers now
 * run different numbers of minibatches per epoch, and loom_parts_next() keeps
 * an idle worker's clock in step with the busy ones (empty clocks) so that
 * SSP and BSP never wait on a worker with nothing left to do (loom/parts.h,
 * "Clocks"). After each epoch every worker adds the loss of the parts it
 * trained on to the statistics, and worker 0 reports as with fixed shares.
 *
 * The model's dimension is agreed before training: worker r reads parts r,
 * r + W, r + 2W, ... (what it would most likely be handed first; W the
 * workers the job started with) and the workers take the largest feature id.
 *
 * Elastic jobs (docs/ELASTIC.md): a worker that joined the running job reads
 * the agreed dimension and starts at the job's epoch (loom/parts.h); SIGTERM
 * (loom_leave) makes a worker leave after the part it trains on: it adds
 * that epoch's loss so far to the statistics and ends like one that
 * finished. A worker keeps every part it read,
 * with its feature map, for the epochs after: a part is parsed at most once
 * per worker.
 *
 * --l2: a part's minibatches push the decay of its own features (lr_l2_push,
 * lazily, counted by the worker's steps on that part), so a feature in h of
 * the N parts would decay h/N as fast as one in all of them; each part
 * scales it by N/h. The parts per feature are counted once before training
 * (worker r counts the parts r, r + W, ... it read for the dimension) and a
 * part pulls its weights when a worker first trains on it, so a worker that
 * joins later weighs its parts the same way.
 *
 * Checkpoints (docs/FAULTS.md, loom/parts.h "Checkpoints"): after every clock,
 * a minibatch's or an empty one loom_parts_next() does, the worker saves when
 * one is due: the part it is in and its next minibatch (none when idle), the
 * --l2 bookkeeping of every part it has mapped with whether it trained it this
 * epoch, and loom_parts_save()'s place in the epoch. A resumed worker hands
 * that back to loom_parts_resume() and finishes the part it was in from that
 * minibatch on, so a one-worker BSP job resumes bit for bit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "lr/lr.h"
#include "lr/train_impl.h"

/* A part this worker has read: its rows and, once mapped, a lane of them
 * per compute thread (--threads T; one lane is the whole part). */
typedef struct part_slot {
    loom_dataset *d;
    lr_lane *lanes; /* NULL until mapped */
    int trained;    /* in the current epoch */
    int weighted;   /* its lanes' --l2 share weights pulled */
} part_slot;

typedef struct part_cache {
    const lr_cli *c;
    uint32_t nparts;
    int threads;
    part_slot *slot;    /* by part; d NULL until read */
    uint64_t dim;       /* 0 until agreed: the lanes are made once it is */
    loom_table *shares; /* --l2: the lanes holding each feature; else NULL */
} part_cache;

/* What a checkpoint saved after an empty clock needs (loom_parts_opts.clocked). */
typedef struct part_run {
    loom_node *n;
    part_cache *pc;
    loom_parts *parts;
} part_run;

static int read_part(part_cache *pc, uint32_t i)
{
    return app_part_read(PROG, pc->c->job.train_path, &pc->c->data, LR_MAX_DIM, i, pc->nparts,
                         &pc->slot[i].d);
}

/* The part, read and cut into lanes with their feature maps. */
static int map_part(part_cache *pc, uint32_t i)
{
    part_slot *p = &pc->slot[i];
    if (read_part(pc, i)) return 1;
    if (p->lanes) return 0;
    if (!(p->lanes = calloc((size_t)pc->threads, sizeof *p->lanes)))
        return app_fail(PROG, "prepare a part", LOOM_ENOMEM);
    for (int t = 0; t < pc->threads; t++)
        if (lr_lane_init(&p->lanes[t], p->d, pc->dim, pc->threads, t))
            return app_fail(PROG, "prepare a part", LOOM_ENOMEM);
    return 0;
}

/* The part, mapped and with its --l2 weights, ready to train on. */
static int ready_part(part_cache *pc, uint32_t i)
{
    part_slot *p = &pc->slot[i];
    if (map_part(pc, i)) return 1;
    if (!pc->shares || p->weighted) return 0;
    p->weighted = 1;
    for (int t = 0; t < pc->threads; t++)
        if (lr_shares_weigh(pc->shares, &p->lanes[t].s, (double)pc->nparts * pc->threads)) return 1;
    return 0;
}

/* --l2: every part's lanes' features counted once, by the worker that read
 * the part for the dimension (one that joined later counted none: it only
 * weighs). */
static int count_part_shares(loom_node *n, part_cache *pc)
{
    if (lr_shares_open(n, pc->dim, &pc->shares)) return 1;
    if (loom_joined(n)) return 0;
    /* A resumed job finds the counts in the checkpoint. */
    const void *st;
    size_t len;
    if (!loom_checkpoint_resumed(n, &st, &len, NULL)) {
        TRY("barrier", loom_barrier(n));
        return 0;
    }
    for (uint32_t i = 0; i < pc->nparts; i++) {
        if (!pc->slot[i].d) continue;
        if (map_part(pc, i)) return 1;
        for (int t = 0; t < pc->threads; t++)
            if (lr_shares_count(n, pc->shares, &pc->slot[i].lanes[t].s)) return 1;
    }
    TRY("barrier", loom_barrier(n));
    return 0;
}

static void cache_free(part_cache *pc)
{
    for (uint32_t i = 0; pc->slot && i < pc->nparts; i++) {
        part_slot *p = &pc->slot[i];
        for (int t = 0; p->lanes && t < pc->threads; t++) lr_lane_free(&p->lanes[t]);
        free(p->lanes);
        loom_dataset_free(p->d);
    }
    free(pc->slot);
}

/* The model's dimension: the largest feature id of the parts r, r + W, ... */
static int agree_dim(loom_node *n, part_cache *pc, uint64_t *dim)
{
    int64_t mine = 0, all;
    int w = loom_workers_started(n);
    for (uint32_t i = (uint32_t)loom_rank(n); i < pc->nparts; i += (uint32_t)w) {
        if (read_part(pc, i)) return 1;
        if ((int64_t)pc->slot[i].d->max_feature > mine) mine = (int64_t)pc->slot[i].d->max_feature;
    }
    TRY("agree on the dimension", app_agree_max(n, "lr.sizes", 1, &mine, &all));
    *dim = (uint64_t)all;
    return 0;
}

/* ---- checkpoints ----
 *
 * The state, in 64-bit words: magic, parts << 16 | threads, the held part + 1
 * (0: idle), its next minibatch, the number of mapped parts; per mapped part
 * its number and whether it was trained this epoch, and per lane the keys,
 * the steps and the step each key was last pushed at; then the length of
 * loom_parts_save()'s bytes and those bytes (padded to a word). */
#define LRP_STATE_MAGIC 0x3150524cu /* "LRP1" */

static int save_state(loom_node *n, part_cache *pc, loom_parts *parts, uint32_t held, size_t batch)
{
    size_t plen, words = 6, k = 0;
    loom_parts_save(parts, NULL, 0, &plen);
    for (uint32_t i = 0; i < pc->nparts; i++)
        for (int t = 0; pc->slot[i].lanes && t < pc->threads; t++)
            words += (t ? 0 : 2) + 2 + pc->slot[i].lanes[t].s.nkeys;
    words += 1 + (plen + 7) / 8;
    uint64_t *b = calloc(words, 8);
    if (!b) return app_fail(PROG, "checkpoint", LOOM_ENOMEM);
    b[k++] = LRP_STATE_MAGIC;
    b[k++] = (uint64_t)pc->nparts << 16 | (uint64_t)pc->threads;
    b[k++] = held == UINT32_MAX ? 0 : (uint64_t)held + 1;
    b[k++] = batch;
    size_t nmapped = k++;
    for (uint32_t i = 0; i < pc->nparts; i++) {
        part_slot *p = &pc->slot[i];
        if (!p->lanes) continue;
        b[nmapped]++;
        b[k++] = i;
        b[k++] = (uint64_t)p->trained;
        for (int t = 0; t < pc->threads; t++) {
            b[k++] = p->lanes[t].s.nkeys;
            b[k++] = p->lanes[t].s.step;
            memcpy(b + k, p->lanes[t].s.last_push, p->lanes[t].s.nkeys * 8);
            k += p->lanes[t].s.nkeys;
        }
    }
    b[k++] = plen;
    int rc = loom_parts_save(parts, b + k, plen, &plen);
    if (!rc) rc = loom_checkpoint_save(n, b, words * 8);
    free(b);
    return rc ? app_fail(PROG, "checkpoint", rc) : 0;
}

/* After an empty clock of loom_parts_next(): idle, so no part and no minibatch. */
static int idle_clock(void *ctx)
{
    part_run *r = ctx;
    return loom_checkpoint_due(r->n) && save_state(r->n, r->pc, r->parts, UINT32_MAX, 0) ? LOOM_EIO
                                                                                         : 0;
}

/* In a resumed job: the parts mapped and their bookkeeping restored, the
 * scheduler told where this worker was; *held (UINT32_MAX: none), its epoch
 * and next minibatch. */
static int load_state(loom_node *n, part_cache *pc, loom_parts *parts, const uint64_t *b,
                      size_t len, uint32_t *held, int *epoch, size_t *batch)
{
    size_t words = len / 8, k = 5;
    int ok = len % 8 == 0 && words > 6 && b[0] == LRP_STATE_MAGIC &&
             b[1] == ((uint64_t)pc->nparts << 16 | (uint64_t)pc->threads) && b[4] <= pc->nparts;
    for (uint64_t m = 0; ok && m < b[4]; m++) {
        if (!(ok = k + 2 <= words && b[k] < pc->nparts)) break;
        uint32_t i = (uint32_t)b[k];
        if (map_part(pc, i)) return 1;
        pc->slot[i].trained = b[k + 1] != 0;
        k += 2;
        for (int t = 0; ok && t < pc->threads; t++) {
            shard *s = &pc->slot[i].lanes[t].s;
            if (!(ok = k + 2 + s->nkeys <= words && b[k] == s->nkeys)) break;
            s->step = b[k + 1];
            memcpy(s->last_push, b + k + 2, s->nkeys * 8);
            k += 2 + s->nkeys;
        }
    }
    ok = ok && k < words && b[k] <= (words - k - 1) * 8;
    int rc = ok ? loom_parts_resume(parts, b + k + 1, (size_t)b[k], held, epoch) : LOOM_EINVAL;
    if (rc == LOOM_EINVAL || (!rc && b[2] != (*held == UINT32_MAX ? 0 : (uint64_t)*held + 1))) {
        fprintf(stderr,
                PROG ": worker %d: the checkpoint does not fit this job (other training "
                     "data, --data-parts or --threads?)\n",
                loom_rank(n));
        return 1;
    }
    if (rc) return app_fail(PROG, "resume the parts", rc);
    *batch = (size_t)b[3];
    return 0;
}

/* One part from minibatch `first` on: its minibatches, one clock each (with
 * T lanes, T minibatches a clock, pushed in lane order), and a checkpoint
 * after any clock it is due. Lane t's order is seeded by the part and the
 * epoch (i T + t: the part with one lane), not by the worker. */
static int train_part(part_run *r, loom_table *w, app_team *team, uint32_t i, int epoch,
                      size_t first)
{
    part_cache *pc = r->pc;
    const lr_train_opts *o = &pc->c->train;
    part_slot *p = &pc->slot[i];
    if (p->d->rows == 0) {
        p->trained = 1;
        return 0;
    }
    for (int t = 0; t < pc->threads; t++)
        lr_epoch_order(o->seed, (int)i * pc->threads + t, epoch, p->lanes[t].part.rows,
                       p->lanes[t].order);
    lr_clock sc = {.w = w, .lanes = p->lanes, .dim = pc->dim, .o = o};
    sc.nbatches = lr_lane_batches(p->d->rows, pc->threads, o->minibatch);
    for (sc.batch = first; sc.batch < sc.nbatches; sc.batch++) {
        int rc = app_team_run(team, lr_lane_step, &sc);
        if (!rc) rc = lr_lanes_push(w, p->lanes, pc->threads);
        if (rc) return app_fail(PROG, "train a part", rc);
        TRY("clock", loom_clock(r->n));
        if (loom_checkpoint_due(r->n) && save_state(r->n, pc, r->parts, i, sc.batch + 1)) return 1;
    }
    p->trained = 1;
    return 0;
}

/* After an epoch: this worker's parts' loss, rows and minibatches into the
 * statistics (and the parts marked untrained for the next epoch). */
static int epoch_stats(loom_node *n, loom_table *w, loom_table *stats, app_team *team,
                       part_cache *pc, int epoch)
{
    double loss = 0;
    size_t rows = 0;
    uint64_t steps = 0;
    for (uint32_t i = 0; i < pc->nparts; i++) {
        part_slot *p = &pc->slot[i];
        for (int t = 0; p->lanes && t < pc->threads; t++) steps += p->lanes[t].s.step;
        if (!p->trained) continue;
        lr_clock sc = {.w = w, .lanes = p->lanes, .dim = pc->dim, .o = &pc->c->train};
        TRY("loss", app_team_run(team, lr_lane_loss, &sc));
        for (int t = 0; t < pc->threads; t++) loss += p->lanes[t].loss;
        rows += p->d->rows;
        p->trained = 0;
    }
    return lr_push_stats(n, stats, epoch, loss, rows, steps);
}

int lr_train_parts(loom_node *n, const lr_cli *c, const loom_dataset *test)
{
    const lr_train_opts *o = &c->train;
    part_cache pc = {.c = c, .threads = c->job.threads};
    pc.nparts = app_parts_count(c->data_parts, loom_num_workers(n));
    if (!(pc.slot = calloc(pc.nparts, sizeof *pc.slot)))
        return app_fail(PROG, "parts", LOOM_ENOMEM);
    const void *resumed = NULL;
    size_t resumed_len = 0;
    int resuming = !loom_checkpoint_resumed(n, &resumed, &resumed_len, NULL);
    loom_table *w, *stats;
    loom_parts *parts = NULL;
    app_team *team = NULL;
    lr_reporter rep = {.node = n, .cli = c, .test = test, .start = app_now_s(), .width = 1};
    int rc = app_team_start(&team, pc.threads);
    if (rc) rc = app_fail(PROG, "start the compute threads", rc);
    if (!rc) rc = agree_dim(n, &pc, &pc.dim);
    if (!rc) rc = lr_open_tables(n, c, pc.dim, &w, &stats);
    if (!rc && o->l2 != 0) rc = count_part_shares(n, &pc);
    rep.dim = pc.dim;
    if (!rc && loom_rank(n) == 0 && !(rep.model = malloc((pc.dim + 1) * sizeof *rep.model)))
        rc = app_fail(PROG, "report", LOOM_ENOMEM);
    if (!rc && loom_rank(n) == 0 && c->job.metrics_path &&
        !(rep.metrics = fopen(c->job.metrics_path, resuming ? "a" : "w"))) {
        fprintf(stderr, PROG ": cannot write %s\n", c->job.metrics_path);
        rc = 1;
    }
    loom_parts_opts po = LOOM_PARTS_OPTS_DEFAULT;
    po.parts = pc.nparts;
    po.epochs = o->epochs;
    po.timeout_s = c->part_timeout;
    part_run run = {.n = n, .pc = &pc};
    po.clocked = idle_clock;
    po.ctx = &run;
    if (!rc && (rc = loom_parts_open(n, &po, &parts))) rc = app_fail(PROG, "open the parts", rc);
    run.parts = parts;
    if (!rc) app_leave_on_sigterm(n);
    double t0 = app_now_s();
    int left = 0;
    if (!rc && resuming) { /* the part it was in at the cut, from its next minibatch */
        uint32_t held;
        int epoch;
        size_t batch;
        rc = load_state(n, &pc, parts, resumed, resumed_len, &held, &epoch, &batch);
        if (!rc && held != UINT32_MAX) {
            rc = ready_part(&pc, held);
            if (!rc) rc = train_part(&run, w, team, held, epoch, batch);
            if (!rc && (rc = loom_parts_done(parts, held))) rc = app_fail(PROG, "part done", rc);
        }
    }
    while (!rc) {
        loom_parts_event ev;
        uint32_t part;
        int epoch;
        if ((rc = loom_parts_next(parts, &ev, &part, &epoch))) {
            rc = app_fail(PROG, "ask for a part", rc);
        } else if (ev == LOOM_PARTS_PART) {
            rc = ready_part(&pc, part);
            if (!rc) rc = train_part(&run, w, team, part, epoch, 0);
            if (!rc && (rc = loom_parts_done(parts, part))) rc = app_fail(PROG, "part done", rc);
        } else if (ev == LOOM_PARTS_EPOCH_END) {
            double epoch_s = app_now_s() - t0;
            /* The job's last clock is the final checkpoint's (loom/checkpoint.h);
             * --checkpoint-every Ne counts the epochs' ends. */
            if (epoch == o->epochs - 1 && loom_checkpoint_final(n))
                rc = save_state(n, &pc, parts, UINT32_MAX, 0);
            if (!rc && (rc = loom_checkpoint_epoch_end(n))) rc = app_fail(PROG, "epoch end", rc);
            if (!rc) rc = epoch_stats(n, w, stats, team, &pc, epoch);
            if (!rc && (rc = loom_barrier(n))) rc = app_fail(PROG, "barrier", rc);
            if (!rc && loom_rank(n) == 0) rc = lr_report(&rep, w, stats, epoch, epoch_s);
            if (epoch == o->epochs - 1) break;
            t0 = app_now_s();
        } else if (ev == LOOM_PARTS_LEFT) {
            rc = epoch_stats(n, w, stats, team, &pc, epoch); /* its parts of this epoch count */
            left = 1;
            break;
        } else {
            break;
        }
    }
    /* This worker's side of the accounting (the scheduler logs its own). */
    if (!rc && left && !c->job.quiet)
        fprintf(stderr, "left the job after training %llu parts of %u\n",
                (unsigned long long)loom_parts_finished(parts), po.parts);
    else if (!rc && !c->job.quiet)
        fprintf(stderr, "trained %llu parts of %u in %d epochs\n",
                (unsigned long long)loom_parts_finished(parts), po.parts, o->epochs);
    if (rep.metrics && fclose(rep.metrics) && !rc) {
        fprintf(stderr, PROG ": cannot write %s\n", c->job.metrics_path);
        rc = 1;
    }
    loom_parts_close(parts);
    app_team_stop(team);
    free(rep.model);
    cache_free(&pc);
    return rc;
}
