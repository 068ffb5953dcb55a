/* parts: `loom train fm --data-parts N`, DiFacto over data parts the
 * scheduler hands out on demand (loom/parts.h, li-thesis Algorithm 14, the
 * scheduler DiFacto's chapter sketches).
 *
 * As lr's (apps/lr/parts.c): part i of N is share i of N of the file; a
 * worker asks when idle, trains on the part's rows in an order seeded by the
 * part and the epoch, one minibatch per clock, and reports it finished; an
 * epoch is every part finished once; a lost worker's part goes back to the
 * pool; loom_parts_next() keeps idle workers' clocks in step. Each part keeps
 * its own fm_share (features, which are frequent, which V rows this worker
 * pushed).
 *
 * The Count-Min sketch: in the first epoch every part is trained once, and
 * its minibatches add their counts as a fixed share's do, so after the first
 * epoch's barrier the sketch holds every feature's rows (a part handed out
 * again after its worker was lost adds some rows twice: counts only err
 * upwards). Then each part this worker holds is settled with one query, and
 * a part first handed to it later is settled when it is. */
#include <stdio.h>
#include <stdlib.h>

#include "fm/train_impl.h"

typedef struct fm_part {
    loom_dataset *d;
    fm_share s;
    size_t *order; /* NULL until the part is ready */
    int settled;   /* its frequent features known from the whole first epoch */
    int trained;   /* in the current epoch */
} fm_part;

typedef struct fm_parts {
    const fm_cli *c;
    uint32_t n;
    fm_part *p; /* by part; d NULL until read */
    uint64_t dim;
} fm_parts;

static int read_part(fm_parts *ps, uint32_t i)
{
    return app_part_read(PROG, ps->c->job.train_path, &ps->c->data, FM_MAX_DIM, i, ps->n,
                         &ps->p[i].d);
}

/* The part, read, with its share, and settled if the first epoch is over. */
static int ready_part(fm_parts *ps, fm_worker_state *wk, uint32_t i)
{
    fm_part *p = &ps->p[i];
    if (read_part(ps, i)) return 1;
    if (!p->order) {
        p->order = malloc((p->d->rows ? p->d->rows : 1) * sizeof *p->order);
        if (!p->order || fm_share_init(&p->s, p->d, ps->dim, ps->c->train.k))
            return app_fail(PROG, "prepare a part", LOOM_ENOMEM);
    }
    if (!p->settled && !wk->counting && wk->t->sketch) {
        if (fm_final_counts(wk->t->sketch, &p->s, ps->c->train.threshold)) return 1;
        p->settled = 1;
    }
    return 0;
}

static void parts_free(fm_parts *ps)
{
    for (uint32_t i = 0; ps->p && i < ps->n; i++) {
        if (ps->p[i].order) fm_share_free(&ps->p[i].s);
        free(ps->p[i].order);
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

/* One part: its minibatches, one clock each; its loss into *loss. */
static int train_part(loom_node *n, fm_worker_state *wk, fm_part *p, uint32_t i, int epoch,
                      double *loss)
{
    const fm_train_opts *o = &wk->c->train;
    size_t rows = p->d->rows;
    lr_epoch_order(o->seed, (int)i, epoch, rows, p->order);
    wk->s = &p->s;
    for (size_t lo = 0; lo < rows; lo += o->minibatch) {
        size_t hi = lo + o->minibatch < rows ? lo + o->minibatch : rows;
        if (fm_minibatch(wk, p->order + lo, hi - lo, loss)) return 1;
        TRY("clock", loom_clock(n));
    }
    p->trained = 1;
    return 0;
}

/* The epoch's end: statistics, barrier, the sketch settled after the first, report. */
static int end_epoch(loom_node *n, fm_parts *ps, fm_worker_state *wk, fm_reporter *rep, int epoch,
                     double loss, double epoch_s)
{
    size_t rows = 0;
    for (uint32_t i = 0; i < ps->n; i++)
        if (ps->p[i].trained) rows += ps->p[i].d->rows, ps->p[i].trained = 0;
    if (fm_add_stats(n, wk->t, epoch, loss, rows)) return 1;
    TRY("barrier", loom_barrier(n));
    if (wk->counting) {
        wk->counting = 0;
        for (uint32_t i = 0; i < ps->n; i++)
            if (ps->p[i].order && ready_part(ps, wk, i)) return 1;
    }
    return loom_rank(n) == 0 ? fm_report(rep, wk->t, epoch, epoch_s) : 0;
}

int fm_train_parts(loom_node *n, const fm_cli *c, const loom_dataset *test)
{
    const fm_train_opts *o = &c->train;
    fm_parts ps = {.c = c, .n = app_parts_count(c->data_parts, loom_num_workers(n))};
    if (!(ps.p = calloc(ps.n, sizeof *ps.p))) return app_fail(PROG, "parts", LOOM_ENOMEM);
    tables t = {0};
    fm_worker_state wk = {.c = c, .t = &t};
    fm_reporter rep = {.node = n, .cli = c, .test = test, .start = app_now_s()};
    loom_parts *parts = NULL;
    int rc = agree_dim(n, &ps);
    if (!rc) rc = fm_open_tables(n, c, ps.dim, &t);
    wk.counting = t.sketch != NULL;
    rep.dim = ps.dim;
    if (!rc && loom_rank(n) == 0) {
        rep.vrows = malloc((ps.dim ? ps.dim : 1) * sizeof *rep.vrows);
        rep.keys = malloc((ps.dim ? ps.dim : 1) * sizeof *rep.keys);
        if (!rep.vrows || !rep.keys) rc = app_fail(PROG, "report", LOOM_ENOMEM);
        if (!rc && c->job.metrics_path && !(rep.metrics = fopen(c->job.metrics_path, "w"))) {
            fprintf(stderr, PROG ": cannot write %s\n", c->job.metrics_path);
            rc = 1;
        }
    }
    loom_parts_opts po = LOOM_PARTS_OPTS_DEFAULT;
    po.parts = ps.n;
    po.epochs = o->epochs;
    po.timeout_s = c->part_timeout;
    if (!rc && (rc = loom_parts_open(n, &po, &parts))) rc = app_fail(PROG, "open the parts", rc);
    if (!rc) app_leave_on_sigterm(n); /* leave the running job (docs/ELASTIC.md) */
    double t0 = app_now_s(), loss = 0;
    int left = 0;
    while (!rc) {
        loom_parts_event ev;
        uint32_t part;
        int epoch;
        if ((rc = loom_parts_next(parts, &ev, &part, &epoch))) {
            rc = app_fail(PROG, "ask for a part", rc);
        } else if (ev == LOOM_PARTS_PART) {
            rc = ready_part(&ps, &wk, part);
            if (!rc) rc = train_part(n, &wk, &ps.p[part], part, epoch, &loss);
            if (!rc && (rc = loom_parts_done(parts, part))) rc = app_fail(PROG, "part done", rc);
        } else if (ev == LOOM_PARTS_EPOCH_END) {
            rc = end_epoch(n, &ps, &wk, &rep, epoch, loss, app_now_s() - t0);
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
    free(wk.est), free(wk.newk), free(wk.ones);
    fm_batch_free(&wk.b);
    parts_free(&ps);
    if (t.sketch) loom_sketch_close(t.sketch);
    return rc;
}
