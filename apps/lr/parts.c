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
 * joins later weighs its parts the same way. */
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

/* One part: its minibatches, one clock each (with T lanes, T minibatches a
 * clock, pushed in lane order). Lane t's order is seeded by the part and the
 * epoch (i T + t: the part with one lane), not by the worker. */
static int train_part(loom_node *n, loom_table *w, app_team *team, part_cache *pc, uint32_t i,
                      int epoch)
{
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
    for (sc.batch = 0; sc.batch < sc.nbatches; sc.batch++) {
        int rc = app_team_run(team, lr_lane_step, &sc);
        if (!rc) rc = lr_lanes_push(w, p->lanes, pc->threads);
        if (rc) return app_fail(PROG, "train a part", rc);
        TRY("clock", loom_clock(n));
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
        !(rep.metrics = fopen(c->job.metrics_path, "w"))) {
        fprintf(stderr, PROG ": cannot write %s\n", c->job.metrics_path);
        rc = 1;
    }
    loom_parts_opts po = LOOM_PARTS_OPTS_DEFAULT;
    po.parts = pc.nparts;
    po.epochs = o->epochs;
    po.timeout_s = c->part_timeout;
    if (!rc && (rc = loom_parts_open(n, &po, &parts))) rc = app_fail(PROG, "open the parts", rc);
    if (!rc) app_leave_on_sigterm(n);
    double t0 = app_now_s();
    int left = 0;
    while (!rc) {
        loom_parts_event ev;
        uint32_t part;
        int epoch;
        if ((rc = loom_parts_next(parts, &ev, &part, &epoch))) {
            rc = app_fail(PROG, "ask for a part", rc);
        } else if (ev == LOOM_PARTS_PART) {
            rc = ready_part(&pc, part);
            if (!rc) rc = train_part(n, w, team, &pc, part, epoch);
            if (!rc && (rc = loom_parts_done(parts, part))) rc = app_fail(PROG, "part done", rc);
        } else if (ev == LOOM_PARTS_EPOCH_END) {
            double epoch_s = app_now_s() - t0;
            rc = epoch_stats(n, w, stats, team, &pc, epoch);
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
