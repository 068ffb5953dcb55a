/* parts: `loom train fm --data-parts N`, DiFacto over data parts the
 * scheduler hands out on demand (loom/parts.h, li-thesis Algorithm 14, the
 * scheduler DiFacto's chapter sketches).
 *
 * As lr's (apps/lr/parts.c): part i of N is share i of N of the file; a
 * worker asks when idle, trains on the part's rows in an order seeded by the
 * part and the epoch, one minibatch per clock, and reports it finished; an
 * epoch is every part finished once; a lost worker's part goes back to the
 * pool; loom_parts_next() keeps idle workers' clocks in step. Each part keeps
 * its own lanes (one per --threads compute thread), each with its fm_share
 * (features, which are frequent, which V rows this lane pushed).
 *
 * The Count-Min sketch: in the first epoch every part is trained once, and
 * its minibatches add their counts as a fixed share's do, so after the first
 * epoch's barrier the sketch holds every feature's rows (a part handed out
 * again after its worker was lost adds some rows twice: counts only err
 * upwards). Then each part this worker holds is settled with one query, and
 * a part first handed to it later is settled when it is.
 *
 * Checkpoints (docs/FAULTS.md, loom/parts.h "Checkpoints"), as lr's: after
 * every clock, a minibatch's or an empty one, the worker saves when one is
 * due: the part it is in and its next minibatch, whether the sketch still
 * counts, the epoch's loss so far, and per part it has ready whether it is
 * settled and trained this epoch and per lane its loss and which features
 * it knows frequent and whose V rows it marked; and loom_parts_save()'s
 * place in the epoch. A resumed worker finishes the part it was in from that
 * minibatch on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fm/train_impl.h"

typedef struct fm_part {
    loom_dataset *d;
    fm_worker_state *lanes; /* one per compute thread; NULL until the part is ready */
    int settled;            /* its frequent features known from the whole first epoch */
    int trained;            /* in the current epoch */
} fm_part;

typedef struct fm_parts {
    const fm_cli *c;
    tables *t;
    uint32_t n;
    int threads;
    int counting; /* the first epoch: the sketch counts the rows */
    fm_part *p;   /* by part; d NULL until read */
    uint64_t dim;
} fm_parts;

/* What a checkpoint saved after an empty clock needs (loom_parts_opts.clocked). */
typedef struct fm_run {
    loom_node *n;
    fm_parts *ps;
    loom_parts *parts;
    double *loss; /* the epoch's so far, of the parts finished */
} fm_run;

static int read_part(fm_parts *ps, uint32_t i)
{
    return app_part_read(PROG, ps->c->job.train_path, &ps->c->data, FM_MAX_DIM, i, ps->n,
                         &ps->p[i].d);
}

/* The part, read and cut into lanes with their shares. */
static int map_part(fm_parts *ps, uint32_t i)
{
    fm_part *p = &ps->p[i];
    if (read_part(ps, i)) return 1;
    if (!p->lanes) {
        if (!(p->lanes = calloc((size_t)ps->threads, sizeof *p->lanes)))
            return app_fail(PROG, "prepare a part", LOOM_ENOMEM);
        for (int l = 0; l < ps->threads; l++) {
            p->lanes[l] = (fm_worker_state){.c = ps->c, .t = ps->t};
            if (fm_lane_init(&p->lanes[l], p->d, ps->dim, ps->threads, l))
                return app_fail(PROG, "prepare a part", LOOM_ENOMEM);
        }
    }
    for (int l = 0; l < ps->threads; l++) p->lanes[l].counting = ps->counting;
    return 0;
}

/* The part, mapped, and settled if the first epoch is over. */
static int ready_part(fm_parts *ps, uint32_t i)
{
    fm_part *p = &ps->p[i];
    if (map_part(ps, i)) return 1;
    if (!p->settled && !ps->counting && ps->t->sketch) {
        for (int l = 0; l < ps->threads; l++)
            if (fm_final_counts(ps->t->sketch, &p->lanes[l].share, ps->c->train.threshold))
                return 1;
        p->settled = 1;
    }
    return 0;
}

static void parts_free(fm_parts *ps)
{
    for (uint32_t i = 0; ps->p && i < ps->n; i++) {
        for (int l = 0; ps->p[i].lanes && l < ps->threads; l++) fm_lane_free(&ps->p[i].lanes[l]);
        free(ps->p[i].lanes);
        loom_dataset_free(ps->p[i].d);
    }
    free(ps->p);
}

/* The dimension: the largest feature id of the parts r, r + W, ... */
static int agree_dim(loom_node *n, fm_parts *ps)
{
    int64_t mine = 0, all;
    for (uint32_t i = (uint32_t)loom_rank(n); i < ps->n; i += (uint32_t)loom_workers_started(n)) {
        if (read_part(ps, i)) return 1;
        if ((int64_t)ps->p[i].d->max_feature > mine) mine = (int64_t)ps->p[i].d->max_feature;
    }
    TRY("agree on the dimension", app_agree_max(n, "fm.sizes", 1, &mine, &all));
    ps->dim = (uint64_t)all;
    return 0;
}

/* ---- checkpoints ----
 *
 * The state: 64-bit words magic, parts << 16 | threads, the held part + 1
 * (0: idle), its next minibatch, whether the sketch counts, the epoch's loss
 * so far (its bits), the number of ready parts; per ready part its number,
 * whether it is trained this epoch and settled, and per lane its keys, its
 * loss and its frequent and counted flags (keys + 1 bytes each, padded to a
 * word); then the length of loom_parts_save()'s bytes and those bytes. */
#define FMP_STATE_MAGIC 0x31504d46u /* "FMP1" */

static size_t flag_words(size_t nkeys)
{
    return (2 * (nkeys + 1) + 7) / 8;
}

static int save_state(fm_run *r, uint32_t held, size_t batch)
{
    fm_parts *ps = r->ps;
    size_t plen, words = 7, k = 0;
    loom_parts_save(r->parts, NULL, 0, &plen);
    for (uint32_t i = 0; i < ps->n; i++)
        for (int l = 0; ps->p[i].lanes && l < ps->threads; l++)
            words += (l ? 0 : 3) + 2 + flag_words(ps->p[i].lanes[l].share.nkeys);
    words += 1 + (plen + 7) / 8;
    uint64_t *b = calloc(words, 8);
    if (!b) return app_fail(PROG, "checkpoint", LOOM_ENOMEM);
    b[k++] = FMP_STATE_MAGIC;
    b[k++] = (uint64_t)ps->n << 16 | (uint64_t)ps->threads;
    b[k++] = held == UINT32_MAX ? 0 : (uint64_t)held + 1;
    b[k++] = batch;
    b[k++] = (uint64_t)ps->counting;
    memcpy(&b[k++], r->loss, 8);
    size_t nready = k++;
    for (uint32_t i = 0; i < ps->n; i++) {
        fm_part *p = &ps->p[i];
        if (!p->lanes) continue;
        b[nready]++;
        b[k++] = i;
        b[k++] = (uint64_t)p->trained;
        b[k++] = (uint64_t)p->settled;
        for (int l = 0; l < ps->threads; l++) {
            const fm_share *s = &p->lanes[l].share;
            b[k++] = s->nkeys;
            memcpy(&b[k++], &p->lanes[l].loss, 8);
            unsigned char *f = (unsigned char *)(b + k);
            memcpy(f, s->frequent, s->nkeys + 1);
            memcpy(f + s->nkeys + 1, s->counted, s->nkeys + 1);
            k += flag_words(s->nkeys);
        }
    }
    b[k++] = plen;
    int rc = loom_parts_save(r->parts, b + k, plen, &plen);
    if (!rc) rc = loom_checkpoint_save(r->n, b, words * 8);
    free(b);
    return rc ? app_fail(PROG, "checkpoint", rc) : 0;
}

/* After an empty clock of loom_parts_next(): idle, so no part and no minibatch. */
static int idle_clock(void *ctx)
{
    fm_run *r = ctx;
    return loom_checkpoint_due(r->n) && save_state(r, UINT32_MAX, 0) ? LOOM_EIO : 0;
}

/* In a resumed job: the ready parts and their lanes restored, the scheduler
 * told where this worker was; *held (UINT32_MAX: none), its epoch and next
 * minibatch. */
static int load_state(fm_run *r, const uint64_t *b, size_t len, uint32_t *held, int *epoch,
                      size_t *batch)
{
    fm_parts *ps = r->ps;
    size_t words = len / 8, k = 7;
    int ok = len % 8 == 0 && words > 8 && b[0] == FMP_STATE_MAGIC &&
             b[1] == ((uint64_t)ps->n << 16 | (uint64_t)ps->threads) && b[6] <= ps->n;
    if (ok) {
        ps->counting = ps->t->sketch && b[4];
        memcpy(r->loss, &b[5], 8);
    }
    for (uint64_t m = 0; ok && m < b[6]; m++) {
        if (!(ok = k + 3 <= words && b[k] < ps->n)) break;
        uint32_t i = (uint32_t)b[k];
        fm_part *p = &ps->p[i];
        if (map_part(ps, i)) return 1;
        p->trained = b[k + 1] != 0;
        p->settled = b[k + 2] != 0;
        k += 3;
        for (int l = 0; ok && l < ps->threads; l++) {
            fm_share *s = &p->lanes[l].share;
            if (!(ok = k + 2 + flag_words(s->nkeys) <= words && b[k] == s->nkeys)) break;
            memcpy(&p->lanes[l].loss, &b[k + 1], 8);
            const unsigned char *f = (const unsigned char *)(b + k + 2);
            memcpy(s->frequent, f, s->nkeys + 1);
            memcpy(s->counted, f + s->nkeys + 1, s->nkeys + 1);
            k += 2 + flag_words(s->nkeys);
        }
    }
    ok = ok && k < words && b[k] <= (words - k - 1) * 8;
    int rc = ok ? loom_parts_resume(r->parts, b + k + 1, (size_t)b[k], held, epoch) : LOOM_EINVAL;
    if (rc == LOOM_EINVAL || (!rc && b[2] != (*held == UINT32_MAX ? 0 : (uint64_t)*held + 1))) {
        fprintf(stderr,
                PROG ": worker %d: the checkpoint does not fit this job (other training "
                     "data, --data-parts, --minibatch or --threads?)\n",
                loom_rank(r->n));
        return 1;
    }
    if (rc) return app_fail(PROG, "resume the parts", rc);
    *batch = (size_t)b[3];
    return 0;
}

/* One part from minibatch `first` on: its minibatches, one clock each (with
 * T lanes, T minibatches a clock), a checkpoint after any clock it is due;
 * its loss into *r->loss. Lane t's order is seeded by the part and the epoch
 * (i T + t), not by the worker. */
static int train_part(fm_run *r, app_team *team, uint32_t i, int epoch, size_t first)
{
    fm_parts *ps = r->ps;
    const fm_train_opts *o = &ps->c->train;
    fm_part *p = &ps->p[i];
    fm_worker_state *lanes = p->lanes;
    if (p->d->rows) {
        size_t max_lane = (p->d->rows + (size_t)ps->threads - 1) / (size_t)ps->threads;
        size_t nbatches = (max_lane + o->minibatch - 1) / o->minibatch;
        for (int l = 0; l < ps->threads; l++) {
            lr_epoch_order(o->seed, (int)i * ps->threads + l, epoch, lanes[l].rows.rows,
                           lanes[l].order);
            if (!first) lanes[l].loss = 0; /* a resumed part's so far is in its state */
        }
        for (size_t k = first; k < nbatches; k++) {
            fm_lanes_batch(lanes, ps->threads, k, nbatches);
            if (fm_lanes_minibatch(team, lanes, ps->threads)) return 1;
            TRY("clock", loom_clock(r->n));
            if (loom_checkpoint_due(r->n) && save_state(r, i, k + 1)) return 1;
        }
        for (int l = 0; l < ps->threads; l++) *r->loss += lanes[l].loss;
    }
    p->trained = 1;
    return 0;
}

/* The epoch's end: statistics, barrier, the sketch settled after the first, report. */
static int end_epoch(loom_node *n, fm_parts *ps, fm_reporter *rep, int epoch, double loss,
                     double epoch_s)
{
    size_t rows = 0;
    for (uint32_t i = 0; i < ps->n; i++)
        if (ps->p[i].trained) rows += ps->p[i].d->rows, ps->p[i].trained = 0;
    if (fm_add_stats(n, ps->t, epoch, loss, rows)) return 1;
    TRY("barrier", loom_barrier(n));
    if (ps->counting) {
        ps->counting = 0;
        for (uint32_t i = 0; i < ps->n; i++)
            if (ps->p[i].lanes && ready_part(ps, i)) return 1;
    }
    return loom_rank(n) == 0 ? fm_report(rep, ps->t, epoch, epoch_s) : 0;
}

int fm_train_parts(loom_node *n, const fm_cli *c, const loom_dataset *test)
{
    const fm_train_opts *o = &c->train;
    tables t = {0};
    fm_parts ps = {.c = c,
                   .t = &t,
                   .threads = c->job.threads,
                   .n = app_parts_count(c->data_parts, loom_num_workers(n))};
    if (!(ps.p = calloc(ps.n, sizeof *ps.p))) return app_fail(PROG, "parts", LOOM_ENOMEM);
    const void *resumed = NULL;
    size_t resumed_len = 0;
    int resuming = !loom_checkpoint_resumed(n, &resumed, &resumed_len, NULL);
    fm_reporter rep = {.node = n, .cli = c, .test = test, .start = app_now_s()};
    loom_parts *parts = NULL;
    app_team *team = NULL;
    int rc = app_team_start(&team, ps.threads);
    if (rc) rc = app_fail(PROG, "start the compute threads", rc);
    if (!rc) rc = agree_dim(n, &ps);
    if (!rc) rc = fm_open_tables(n, c, ps.dim, &t);
    ps.counting = t.sketch != NULL;
    rep.dim = ps.dim;
    if (!rc && loom_rank(n) == 0) {
        rep.vrows = malloc((ps.dim ? ps.dim : 1) * sizeof *rep.vrows);
        rep.keys = malloc((ps.dim ? ps.dim : 1) * sizeof *rep.keys);
        if (!rep.vrows || !rep.keys) rc = app_fail(PROG, "report", LOOM_ENOMEM);
        if (!rc && c->job.metrics_path &&
            !(rep.metrics = fopen(c->job.metrics_path, resuming ? "a" : "w"))) {
            fprintf(stderr, PROG ": cannot write %s\n", c->job.metrics_path);
            rc = 1;
        }
    }
    loom_parts_opts po = LOOM_PARTS_OPTS_DEFAULT;
    po.parts = ps.n;
    po.epochs = o->epochs;
    po.timeout_s = c->part_timeout;
    double t0 = app_now_s(), loss = 0;
    fm_run run = {.n = n, .ps = &ps, .loss = &loss};
    po.clocked = idle_clock;
    po.ctx = &run;
    if (!rc && (rc = loom_parts_open(n, &po, &parts))) rc = app_fail(PROG, "open the parts", rc);
    run.parts = parts;
    if (!rc) app_leave_on_sigterm(n); /* leave the running job (docs/ELASTIC.md) */
    int left = 0;
    if (!rc && resuming) { /* the part it was in at the cut, from its next minibatch */
        uint32_t held;
        int epoch;
        size_t batch;
        rc = load_state(&run, resumed, resumed_len, &held, &epoch, &batch);
        if (!rc && held != UINT32_MAX) {
            rc = ready_part(&ps, held);
            if (!rc) rc = train_part(&run, team, held, epoch, batch);
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
            rc = ready_part(&ps, part);
            if (!rc) rc = train_part(&run, team, part, epoch, 0);
            if (!rc && (rc = loom_parts_done(parts, part))) rc = app_fail(PROG, "part done", rc);
        } else if (ev == LOOM_PARTS_EPOCH_END) {
            /* The job's last clock is the final checkpoint's (loom/checkpoint.h);
             * --checkpoint-every Ne counts the epochs' ends. */
            if (epoch == o->epochs - 1 && loom_checkpoint_final(n))
                rc = save_state(&run, UINT32_MAX, 0);
            if (!rc && (rc = loom_checkpoint_epoch_end(n))) rc = app_fail(PROG, "epoch end", rc);
            if (!rc) rc = end_epoch(n, &ps, &rep, epoch, loss, app_now_s() - t0);
            if (epoch == o->epochs - 1) break;
            t0 = app_now_s(), loss = 0;
        } else if (ev == LOOM_PARTS_LEFT) {
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
    free(rep.vrows), free(rep.keys);
    app_team_stop(team);
    parts_free(&ps);
    if (t.sketch) loom_sketch_close(t.sketch);
    return rc;
}
