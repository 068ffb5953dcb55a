/* train: `loom train fm` on every node of a job (DiFacto, thesis Algorithm 14).
 *
 * Tables (all opened by every worker with the same options):
 *   fm.w      w and, at key dim, the bias: dense f64, FTRL on the servers
 *             (--lr, --beta, --l1, --l2). FTRL's L2 only acts when a key is
 *             updated, i.e. when its feature is in a minibatch: the
 *             frequency-adaptive penalty of thesis 10.13.
 *   fm.v      V: sparse f64 rows of k values, AdaGrad (--lr-v). A row is
 *             allocated on its server by the first push to it; until then it
 *             reads as its initial value, uniform in [-init, init) from
 *             (seed, key, column), so V does not depend on how many workers
 *             or servers there are.
 *   fm.count  the Count-Min sketch (include/loom/sketch.h) of how many rows
 *             of the training data hold each feature. In the first epoch
 *             workers add each minibatch's counts and query them (so V_i
 *             starts as soon as feature i passes --threshold); counts only
 *             grow, so a feature a worker saw past the threshold is neither
 *             added nor asked for again. After the first epoch every row was
 *             counted once: one query settles the rest and the sketch is
 *             not used again (counting again would count rows twice). Not
 *             opened with --threshold 0.
 *   fm.vrows  1 per feature whose V_i some worker pushed: the allocated rows,
 *             which the report counts (the servers' V non-zeros are these x k)
 *             and pulls.
 * With --data-parts the workers train on parts the scheduler hands out
 * instead of fixed shares (parts.c). Every worker runs the same number of
 * minibatches an epoch (set by the largest share, as lr) and clocks after each, so --consistency
 * bounds the staleness in minibatches; under BSP with one worker the run is the sequential
 * algorithm, which tests/fm checks against NumPy.
 *
 * After every epoch the workers add their progressive loss (each minibatch's
 * loss at the model it pulled) and traffic into fm.stats; worker 0 pulls the
 * model, evaluates --test, prints a progress line and (--metrics) a JSON line,
 * and after the last epoch saves the model. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>
#include <loom/sketch.h>

#include "common/files.h"
#include "fm/fm.h"
#include "fm/train_impl.h"

int fm_open_tables(loom_node *n, const fm_cli *c, uint64_t dim, tables *t)
{
    const fm_train_opts *o = &c->train;
    loom_table_opts wo = LOOM_TABLE_OPTS_DEFAULT;
    wo.type = LOOM_F64;
    wo.storage = LOOM_DENSE;
    wo.key_end = dim + 1;
    wo.consistency = (loom_consistency)o->consistency;
    wo.staleness = o->staleness;
    wo.updater = "ftrl";
    wo.lr = o->lr_w;
    wo.beta = o->beta;
    wo.l1 = o->l1;
    wo.l2 = o->l2;
    wo.filter_push = c->job.filter_push;
    wo.filter_pull = c->job.filter_pull;
    app_job_comm(&c->job, &wo);
    TRY("open the table of w", loom_table_open(n, "fm.w", &wo, &t->w));

    loom_table_opts vo = wo;
    vo.storage = LOOM_SPARSE;
    vo.key_end = dim ? dim : 1;
    vo.width = o->k;
    vo.updater = "adagrad";
    vo.lr = o->lr_v;
    vo.l1 = vo.l2 = 0; /* l2_v is in the workers' gradient (batch.c) */
    vo.init = LOOM_INIT_UNIFORM;
    vo.init_a = -o->init;
    vo.init_b = o->init;
    vo.init_seed = o->seed;
    TRY("open the table of V", loom_table_open(n, "fm.v", &vo, &t->v));

    loom_table_opts ro = LOOM_TABLE_OPTS_DEFAULT;
    ro.type = LOOM_F64;
    ro.storage = LOOM_DENSE;
    ro.key_end = dim ? dim : 1;
    ro.consistency = LOOM_ASP;
    ro.cache = 0;
    TRY("open the table of V's rows", loom_table_open(n, "fm.vrows", &ro, &t->vrows));

    if (o->threshold > 0) {
        loom_sketch_opts so = LOOM_SKETCH_OPTS_DEFAULT;
        so.depth = o->sketch_depth;
        so.width = o->sketch_width;
        so.seed = o->seed;
        TRY("open the sketch", loom_sketch_open(n, "fm.count", &so, &t->sketch));
    }
    TRY("open the statistics table", app_stats_open(n, "fm.stats", ST_FIELDS, &t->stats));
    return 0;
}

/* ---- a minibatch ---- */

/* The sketch's part: add the counts of J's features not yet known frequent,
 * ask for their estimates, and remember those past the threshold. */
static int count_features(loom_sketch *sk, fm_share *s, fm_batch *b, uint64_t threshold,
                          int64_t *est)
{
    size_t q = 0;
    for (size_t j = 0; j + 1 < b->nj; j++)
        if (!s->frequent[b->cols[j]]) {
            b->vkeys[q] = b->keys[j]; /* vkeys and v are free until fm_batch_active */
            b->vslot[q] = (uint32_t)j;
            est[q++] = b->counts[j];
        }
    if (!q) return 0;
    TRY("count features", loom_sketch_add(sk, b->vkeys, est, q));
    TRY("query the sketch", loom_sketch_query(sk, b->vkeys, q, est));
    for (size_t i = 0; i < q; i++)
        if ((uint64_t)est[i] > threshold) s->frequent[b->cols[b->vslot[i]]] = 1;
    return 0;
}

/* After the first epoch (and its barrier) the sketch holds every feature's
 * count of rows: one query settles which of the share's features are frequent,
 * and the sketch is not used again. */
int fm_final_counts(loom_sketch *sk, fm_share *s, uint64_t threshold)
{
    uint64_t *keys = malloc((s->nkeys ? s->nkeys : 1) * sizeof *keys);
    int64_t *est = malloc((s->nkeys ? s->nkeys : 1) * sizeof *est);
    size_t q = 0;
    for (size_t c = 0; keys && c < s->nkeys; c++)
        if (!s->frequent[c]) keys[q++] = s->keys[c];
    int rc = keys && est ? (q ? loom_sketch_query(sk, keys, q, est) : 0) : LOOM_ENOMEM;
    for (size_t i = 0, c = 0; !rc && i < q; i++) {
        while (s->keys[c] != keys[i]) c++;
        if ((uint64_t)est[i] > threshold) s->frequent[c] = 1;
    }
    free(keys), free(est);
    return rc ? app_fail(PROG, "query the sketch", rc) : 0;
}

/* Mark V rows this worker pushes for the first time in fm.vrows. */
static int count_rows(loom_table *vrows, fm_share *s, fm_batch *b, uint64_t *keys, double *ones)
{
    size_t m = 0;
    for (size_t j = 0; j + 1 < b->nj; j++)
        if (b->vslot[j] != UINT32_MAX && !s->counted[b->cols[j]]) {
            s->counted[b->cols[j]] = 1;
            keys[m] = b->keys[j];
            ones[m++] = 1;
        }
    if (m) TRY("push V's rows", loom_push(vrows, keys, m, ones));
    return 0;
}

/* A minibatch in three steps, so that lanes (--threads) can run the middle
 * one in parallel and the others in lane order: the batch's keys and the
 * sketch's counting (wk->lo, wk->hi of wk->order); the pulls and the
 * gradient; the pushes. With one lane they run in that order, as the
 * sequential algorithm does. */
static int minibatch_keys(fm_worker_state *wk)
{
    const fm_train_opts *o = &wk->c->train;
    fm_share *s = wk->s;
    fm_batch *b = &wk->b;
    if (fm_batch_keys(s, wk->order + wk->lo, wk->hi - wk->lo, b))
        return app_fail(PROG, "minibatch", LOOM_ENOMEM);
    if (b->cap > wk->scratch) {
        free(wk->est), free(wk->newk), free(wk->ones);
        wk->scratch = b->cap;
        wk->est = malloc(wk->scratch * sizeof *wk->est);
        wk->newk = malloc(wk->scratch * sizeof *wk->newk);
        wk->ones = malloc(wk->scratch * sizeof *wk->ones);
        if (!wk->est || !wk->newk || !wk->ones) return app_fail(PROG, "minibatch", LOOM_ENOMEM);
    }
    if (wk->counting && count_features(wk->t->sketch, s, b, o->threshold, wk->est)) return 1;
    return 0;
}

static int minibatch_gradient(void *arg, int t)
{
    fm_worker_state *wk = (fm_worker_state *)arg + t;
    if (wk->hi == wk->lo) return 0;
    const fm_train_opts *o = &wk->c->train;
    fm_batch *b = &wk->b;
    TRY("pull w", loom_pull(wk->t->w, b->keys, b->nj, b->w));
    fm_batch_active(wk->s, b, o->threshold);
    if (b->na) TRY("pull V", loom_pull(wk->t->v, b->vkeys, b->na, b->v));
    wk->loss += fm_batch_gradient(wk->s, wk->order + wk->lo, wk->hi - wk->lo, o->l2_v, b);
    return 0;
}

static int minibatch_push(fm_worker_state *wk)
{
    fm_batch *b = &wk->b;
    TRY("push w", loom_push(wk->t->w, b->keys, b->nj, b->gw));
    if (b->na) {
        TRY("push V", loom_push(wk->t->v, b->vkeys, b->na, b->gv));
        if (count_rows(wk->t->vrows, wk->s, b, wk->newk, wk->ones)) return 1;
    }
    return 0;
}

int fm_lanes_minibatch(app_team *team, fm_worker_state *lanes, int threads)
{
    for (int t = 0; t < threads; t++)
        if (lanes[t].hi > lanes[t].lo && minibatch_keys(&lanes[t])) return 1;
    if (app_team_run(team, minibatch_gradient, lanes)) return 1;
    for (int t = 0; t < threads; t++)
        if (lanes[t].hi > lanes[t].lo && minibatch_push(&lanes[t])) return 1;
    return 0;
}

int fm_lane_init(fm_worker_state *l, const loom_dataset *d, uint64_t dim, int threads, int t)
{
    size_t lo, hi;
    app_team_split(d->rows, threads, t, &lo, &hi);
    l->order = malloc((hi > lo ? hi - lo : 1) * sizeof *l->order);
    if (app_rows_view(d, lo, hi, &l->rows) || !l->order) return LOOM_ENOMEM;
    l->s = &l->share;
    return fm_share_init(&l->share, &l->rows, dim, l->c->train.k);
}

void fm_lane_free(fm_worker_state *l)
{
    free(l->est), free(l->newk), free(l->ones);
    fm_batch_free(&l->b);
    fm_share_free(&l->share);
    free(l->order);
    free(l->rows.row);
}

void fm_lanes_batch(fm_worker_state *lanes, int threads, size_t batch, size_t nbatches)
{
    for (int t = 0; t < threads; t++) {
        size_t rows = lanes[t].rows.rows, per = (rows + nbatches - 1) / nbatches;
        lanes[t].lo = batch * per < rows ? batch * per : rows;
        lanes[t].hi = lanes[t].lo + per < rows ? lanes[t].lo + per : rows;
    }
}

/* ---- the report ---- */

/* The model as the servers hold it: w, the bias and the allocated V rows. */
static int pull_model(fm_reporter *r, tables *t, fm_model *m)
{
    TRY("pull w", loom_pull_range(t->w, 0, r->dim, m->w));
    TRY("pull the bias", loom_pull(t->w, &r->dim, 1, &m->bias));
    if (!r->dim) return 0;
    TRY("pull V's rows", loom_pull_range(t->vrows, 0, r->dim, r->vrows));
    size_t nv = 0;
    for (uint64_t f = 0; f < r->dim; f++)
        if (r->vrows[f] != 0) r->keys[nv++] = f;
    double *v = malloc((nv ? nv : 1) * m->k * sizeof *v);
    if (!v) return app_fail(PROG, "report", LOOM_ENOMEM);
    int rc = nv ? loom_pull(t->v, r->keys, nv, v) : 0;
    for (size_t i = 0; !rc && i < nv; i++) {
        memcpy(m->v + r->keys[i] * m->k, v + i * m->k, m->k * sizeof *v);
        m->has_v[r->keys[i]] = 1;
    }
    m->v_rows = nv;
    free(v);
    return rc ? app_fail(PROG, "pull V", rc) : 0;
}

int fm_report(fm_reporter *r, tables *t, int epoch, double epoch_s)
{
    const fm_cli *c = r->cli;
    double st[ST_FIELDS];
    TRY("pull statistics", app_stats_read(&t->stats, epoch, st));
    fm_model m;
    if (fm_model_init(&m, r->dim, c->train.k)) return app_fail(PROG, "report", LOOM_ENOMEM);
    int rc = pull_model(r, t, &m);
    lr_metrics test = {0};
    double *margin = NULL;
    if (!rc && r->test) {
        if (!(margin = malloc(r->test->rows * sizeof *margin))) {
            rc = app_fail(PROG, "report", LOOM_ENOMEM);
        } else {
            for (size_t i = 0; i < r->test->rows; i++) margin[i] = fm_margin(&m, r->test, i);
            lr_evaluate(margin, r->test->label, r->test->rows, &test);
        }
    }
    free(margin);
    uint64_t w_nnz = 0;
    for (uint64_t f = 0; f < m.dim; f++) w_nnz += m.w[f] != 0;
    double train_loss = st[ST_ROWS] > 0 ? st[ST_LOSS] / st[ST_ROWS] : 0;
    double time_s = app_now_s() - r->start, ex_per_s = epoch_s > 0 ? st[ST_ROWS] / epoch_s : 0;
    loom_report_metric(r->node, "epoch", epoch + 1);
    loom_report_metric(r->node, "train_logloss", train_loss);
    if (r->test) loom_report_metric(r->node, "test_logloss", test.logloss);
    if (!rc && !c->job.quiet) {
        char testpart[128] = "";
        if (r->test)
            snprintf(testpart, sizeof testpart, "  test logloss %.5f  acc %.4f  auc %.4f",
                     test.logloss, test.accuracy, test.auc);
        fprintf(stderr,
                "epoch %3d  train logloss %.5f%s  w nnz %" PRIu64 "  V rows %" PRIu64
                "  %.0f ex/s  sent %.1f MB  recv %.1f MB  %.1f s\n",
                epoch + 1, train_loss, testpart, w_nnz, m.v_rows, ex_per_s, st[ST_BYTES_SENT] / 1e6,
                st[ST_BYTES_RECEIVED] / 1e6, time_s);
    }
    if (!rc && r->metrics) {
        fprintf(r->metrics, "{\"epoch\": %d, \"time_s\": %.3f, \"train_logloss\": %.9g, ",
                epoch + 1, time_s, train_loss);
        if (r->test)
            fprintf(r->metrics,
                    "\"test_logloss\": %.9g, \"test_accuracy\": %.9g, \"test_auc\": %.9g, ",
                    test.logloss, test.accuracy, test.auc);
        else
            fprintf(r->metrics,
                    "\"test_logloss\": null, \"test_accuracy\": null, \"test_auc\": null, ");
        fprintf(r->metrics,
                "\"nnz_weights\": %" PRIu64 ", \"v_rows\": %" PRIu64 ", \"v_nnz\": %" PRIu64
                ", \"examples_per_s\": %.1f, \"bytes_sent\": %.0f, \"bytes_received\": %.0f, "
                "\"bytes_raw\": %.0f, \"bytes_wire\": %.0f}\n",
                w_nnz, m.v_rows, m.v_rows * m.k, ex_per_s, st[ST_BYTES_SENT], st[ST_BYTES_RECEIVED],
                st[ST_BYTES_RAW], st[ST_BYTES_WIRE]);
        if (app_metrics_flush(PROG, r->metrics, c->job.metrics_path)) rc = 1;
    }
    if (!rc && !isfinite(train_loss)) {
        fprintf(stderr,
                PROG ": the training logloss is %g after epoch %d: training diverged (try a "
                     "smaller --lr or --lr-v)\n",
                train_loss, epoch + 1);
        rc = 1;
    }
    if (!rc && epoch + 1 == c->train.epochs && c->job.model_path) {
        char err[512];
        if (fm_model_save(&m, c->job.model_path, err, sizeof err)) {
            fprintf(stderr, PROG ": %s\n", err);
            rc = 1;
        }
    }
    fm_model_free(&m);
    return rc;
}

int fm_add_stats(loom_node *n, tables *t, int epoch, double loss, size_t rows)
{
    loom_stats ns;
    loom_node_stats(n, &ns);
    double v[ST_FIELDS] = {0};
    v[ST_LOSS] = loss;
    v[ST_ROWS] = (double)rows;
    v[ST_BYTES_SENT] = (double)ns.bytes_sent;
    v[ST_BYTES_RECEIVED] = (double)ns.bytes_received;
    v[ST_BYTES_RAW] = (double)ns.table_bytes_raw;
    v[ST_BYTES_WIRE] = (double)ns.table_bytes_wire;
    TRY("push statistics", app_stats_add(&t->stats, epoch, v));
    return 0;
}

/* ---- checkpoints (docs/FAULTS.md) ----
 *
 * What a worker needs to go on from a clock: where it is (epoch, next
 * minibatch), whether the sketch still counts, and per lane the epoch's loss
 * so far and which of its features it knows frequent and whose V rows it
 * marked in fm.vrows. The epoch orders are recomputed from the seed; the
 * model, the sketch and the statistics are the servers' tables. The sizes go
 * along so that a resume with other data, --minibatch or --threads is
 * refused. */
#define FM_STATE_MAGIC 0x31434d46u /* "FMC1" */

static size_t state_len(const fm_worker_state *lanes, int threads)
{
    size_t len = 5 * 8;
    for (int l = 0; l < threads; l++) len += 2 * 8 + 2 * (lanes[l].share.nkeys + 1);
    return len;
}

static int save_state(loom_node *n, int epoch, size_t batch, size_t nbatches,
                      const fm_worker_state *lanes, int threads)
{
    size_t len = state_len(lanes, threads);
    unsigned char *b = malloc(len), *p = b;
    if (!b) return app_fail(PROG, "checkpoint", LOOM_ENOMEM);
    uint64_t head[5] = {FM_STATE_MAGIC, (uint64_t)epoch, batch,
                        (uint64_t)nbatches << 16 | (uint64_t)threads, (uint64_t)lanes[0].counting};
    memcpy(p, head, sizeof head);
    p += sizeof head;
    for (int l = 0; l < threads; l++) {
        const fm_share *s = &lanes[l].share;
        uint64_t nkeys = s->nkeys;
        memcpy(p, &nkeys, 8);
        memcpy(p + 8, &lanes[l].loss, 8);
        memcpy(p + 16, s->frequent, s->nkeys + 1);
        memcpy(p + 16 + s->nkeys + 1, s->counted, s->nkeys + 1);
        p += 16 + 2 * (s->nkeys + 1);
    }
    int rc = loom_checkpoint_save(n, b, len);
    free(b);
    return rc ? app_fail(PROG, "checkpoint", rc) : 0;
}

/* In a resumed job: the position saved, and the lanes' state restored.
 * *epoch = -1 when the job did not resume. */
static int load_state(loom_node *n, int *epoch, size_t *batch, size_t nbatches,
                      fm_worker_state *lanes, int threads)
{
    const void *data;
    size_t len;
    *epoch = -1;
    if (loom_checkpoint_resumed(n, &data, &len, NULL)) return 0;
    const unsigned char *p = data;
    uint64_t head[5];
    int ok = len == state_len(lanes, threads);
    if (ok) {
        memcpy(head, p, sizeof head);
        p += sizeof head;
        ok = head[0] == FM_STATE_MAGIC && head[3] == ((uint64_t)nbatches << 16 | (uint64_t)threads);
    }
    for (int l = 0; ok && l < threads; l++) {
        fm_share *s = &lanes[l].share;
        uint64_t nkeys;
        memcpy(&nkeys, p, 8);
        if (!(ok = nkeys == s->nkeys)) break;
        memcpy(&lanes[l].loss, p + 8, 8);
        memcpy(s->frequent, p + 16, s->nkeys + 1);
        memcpy(s->counted, p + 16 + s->nkeys + 1, s->nkeys + 1);
        lanes[l].counting = head[4] != 0;
        p += 16 + 2 * (s->nkeys + 1);
    }
    if (!ok) {
        fprintf(stderr,
                PROG ": worker %d: the checkpoint does not fit this job (other training "
                     "data, --minibatch or --threads?)\n",
                loom_rank(n));
        return 1;
    }
    *epoch = (int)head[1];
    *batch = (size_t)head[2];
    return 0;
}

/* ---- the worker ---- */

static int train_share(loom_node *n, const fm_cli *c, const loom_dataset *d,
                       const loom_dataset *test)
{
    const fm_train_opts *o = &c->train;
    int rank = loom_rank(n), threads = c->job.threads;
    int64_t mine[2] = {(int64_t)d->max_feature, (int64_t)d->rows}, all[2];
    loom_report_metric(n, "share", (double)d->rows);
    TRY("agree on the sizes", app_agree_max(n, "fm.sizes", 2, mine, all));
    uint64_t dim = (uint64_t)all[0], max_rows = (uint64_t)all[1];
    if (max_rows == 0) {
        app_fail_together(n, PROG ": %s: no training examples", c->job.train_path);
        return 1;
    }
    tables t = {0};
    if (fm_open_tables(n, c, dim, &t)) return 1;
    fm_reporter rep = {.node = n, .cli = c, .test = test, .start = app_now_s(), .dim = dim};
    app_team *team = NULL;
    fm_worker_state *lanes = calloc((size_t)threads, sizeof *lanes);
    int rc = lanes ? app_team_start(&team, threads) : LOOM_ENOMEM;
    for (int l = 0; l < threads && !rc; l++) {
        lanes[l] = (fm_worker_state){.c = c, .t = &t, .counting = t.sketch != NULL};
        rc = fm_lane_init(&lanes[l], d, dim, threads, l);
    }
    if (!rc && rank == 0) {
        rep.vrows = malloc((dim ? dim : 1) * sizeof *rep.vrows);
        rep.keys = malloc((dim ? dim : 1) * sizeof *rep.keys);
        if (!rep.vrows || !rep.keys) rc = LOOM_ENOMEM;
    }
    if (rc) {
        rc = app_fail(PROG, "prepare data", rc);
        goto out;
    }
    /* The same number of minibatches in every lane of every worker, however
     * the data split: the largest lane holds ceil(max_rows / T) rows. */
    size_t max_lane = (size_t)((max_rows + (uint64_t)threads - 1) / (uint64_t)threads);
    size_t nbatches = (max_lane + o->minibatch - 1) / o->minibatch;
    int first_epoch;
    size_t first_batch = 0;
    if ((rc = load_state(n, &first_epoch, &first_batch, nbatches, lanes, threads))) goto out;
    /* A resumed job adds its epochs to the metrics of the run it continues. */
    if (rank == 0 && c->job.metrics_path &&
        !(rep.metrics = fopen(c->job.metrics_path, first_epoch >= 0 ? "a" : "w"))) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", c->job.metrics_path, strerror(errno));
        rc = 1;
        goto out;
    }
    for (int epoch = first_epoch < 0 ? 0 : first_epoch; epoch < o->epochs && !rc; epoch++) {
        double t0 = app_now_s(), loss = 0;
        for (int l = 0; l < threads; l++)
            lr_epoch_order(o->seed, rank * threads + l, epoch, lanes[l].rows.rows, lanes[l].order);
        for (size_t k = first_batch; k < nbatches && !rc; k++) {
            fm_lanes_batch(lanes, threads, k, nbatches);
            rc = fm_lanes_minibatch(team, lanes, threads);
            if (!rc && (rc = loom_clock(n))) rc = app_fail(PROG, "clock", rc);
            /* The last clock is the final checkpoint's (loom/checkpoint.h). */
            int last = epoch == o->epochs - 1 && k == nbatches - 1;
            if (!rc && (last ? loom_checkpoint_final(n) : loom_checkpoint_due(n)))
                rc = save_state(n, epoch, k + 1, nbatches, lanes, threads);
        }
        first_batch = 0;
        /* --checkpoint-every Ne counts these */
        if (!rc && (rc = loom_checkpoint_epoch_end(n))) rc = app_fail(PROG, "epoch end", rc);
        double epoch_s = app_now_s() - t0;
        for (int l = 0; l < threads; l++) loss += lanes[l].loss, lanes[l].loss = 0;
        if (!rc) rc = fm_add_stats(n, &t, epoch, loss, d->rows);
        if (!rc && (rc = loom_barrier(n))) rc = app_fail(PROG, "barrier", rc);
        for (int l = 0; l < threads && !rc; l++) {
            if (lanes[l].counting) rc = fm_final_counts(t.sketch, &lanes[l].share, o->threshold);
            lanes[l].counting = 0;
        }
        if (!rc && rank == 0) rc = fm_report(&rep, &t, epoch, epoch_s);
    }
out:
    if (rep.metrics && fclose(rep.metrics) && !rc) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", c->job.metrics_path, strerror(errno));
        rc = 1;
    }
    free(rep.vrows), free(rep.keys);
    app_team_stop(team);
    for (int l = 0; lanes && l < threads; l++) fm_lane_free(&lanes[l]);
    free(lanes);
    if (t.sketch) loom_sketch_close(t.sketch);
    return rc;
}

static int fm_worker(loom_node *n, const void *arg)
{
    const fm_cli *c = arg;
    char err[1024];
    if (app_elastic_check(PROG, n, c->data_parts)) return 1;
    if (loom_rank(n) == 0 && app_check_job_files(&c->job, err, sizeof err)) {
        fprintf(stderr, PROG ": %s\n", err);
        return 1;
    }
    loom_libsvm_opts train_opts = c->data;
    if (!train_opts.max_features || train_opts.max_features > FM_MAX_DIM)
        train_opts.max_features = FM_MAX_DIM;
    loom_dataset *d = NULL, *test = NULL;
    if (!c->data_parts && /* with --data-parts, parts.c reads the parts it is handed */
        loom_libsvm_read(c->job.train_path, loom_rank(n), loom_num_workers(n), &train_opts, &d, err,
                         sizeof err)) {
        fprintf(stderr, PROG ": %s\n", err);
        return 1;
    }
    if (d && d->skipped)
        fprintf(stderr, PROG ": skipped %zu malformed line(s) in %s\n", d->skipped,
                c->job.train_path);
    int rc = 0;
    if (loom_rank(n) == 0 && c->job.test_path) {
        if (loom_libsvm_read(c->job.test_path, 0, 1, &c->data, &test, err, sizeof err)) {
            fprintf(stderr, PROG ": %s\n", err);
            rc = 1;
        } else if (test->rows == 0) {
            fprintf(stderr, PROG ": %s: no test examples\n", c->job.test_path);
            rc = 1;
        }
    }
    if (!rc) rc = d ? train_share(n, c, d, test) : fm_train_parts(n, c, test);
    loom_dataset_free(d);
    loom_dataset_free(test);
    return rc;
}

int fm_train_node(const void *cli)
{
    return app_node_main(PROG, fm_worker, cli);
}
