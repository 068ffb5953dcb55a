/* train: distributed logistic regression on Loom, run on every node of a job.
 *
 * Data: worker r of W reads share r of the training file (byte ranges), or,
 * with --data-parts, the parts the scheduler hands it (parts.c), and
 * only ever pulls the weights of the features its rows contain. The model is
 * one dense f64 table over [0, dim]: features 0..dim-1 and, at key dim, the
 * bias. dim is agreed at start: every worker pushes its share's largest
 * feature id into a "max" table.
 *
 * SGD (--algo sgd): each worker walks its rows in a seeded random order, in
 * minibatches; per minibatch it pulls the weights of the batch's features,
 * pushes the batch's mean gradient, and calls loom_clock(), so the table's
 * consistency model (BSP, SSP(s), ASP) bounds staleness in minibatches. The
 * servers apply the gradient with the chosen updater (sgd, adagrad, ftrl),
 * whose lr and l1 are the table's; --l2 is pushed by the workers as part of
 * the gradient, lazily (lr_l2_push in seq.c). Every worker runs the same
 * number of minibatches per epoch (set by the largest share), so clocks stay
 * aligned.
 *
 * DBPG (--algo dbpg, li-thesis chapter 6; its steps in dbpg.c): the key space is cut into blocks;
 * step t works on block t mod B. Every worker computes the block's gradient
 * and a diagonal curvature bound over all its rows and pushes them for the
 * whole block; a server-side updater ("lr.dbpg") adds the W contributions
 * and, with the last one, applies the proximal step, scaled by eta (--lr):
 *     w <- soft((u/eta) w - g, l1) / (u/eta + l2)   (no l1, l2 on the bias)
 * The bound counts, per row, the non-zeros of every block whose step is in
 * flight (lr_dbpg_window), so that steps on correlated features do not
 * overshoot together.
 * Steps are clocks of an SSP table with staleness tau, so step t sees every
 * step before t - tau completed: the bounded delay of the thesis. Workers keep
 * their rows' margins and update them with the change of each pulled block.
 *
 * Compute threads (--threads T, apps/common/team.h) share the worker's
 * client. Under SGD each is a lane of its own: a part of the share, its own
 * order and minibatches, one minibatch per clock, the lanes' gradients pushed
 * in lane order before the one clock (seq.c computes the same). Under DBPG
 * they split each step's work, the margins by rows and the block's gradients
 * by features, so the numbers are those of one thread.
 *
 * After every epoch the workers add their loss and traffic into a small
 * statistics table; worker 0 reads it, evaluates the test set, prints a
 * progress line and (with --metrics) a JSON line. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <loom/loom.h>

#include "common/files.h"

#include "lr/lr.h"
#include "lr/train_impl.h"

/* ---- a worker's view of its data (the shard, train_impl.h) ---- */

/* Index of each value's feature in the share's sorted key list. With a
 * dimension not much larger than the data, one pass marks the features that
 * occur, in order; only a very sparse, huge feature space needs a sort. */
static int map_features(shard *s, const loom_dataset *d, uint64_t dim)
{
    uint64_t *keys;
    if (dim <= 4 * (uint64_t)d->nnz + (1u << 20)) {
        uint32_t *index = calloc(dim + 1, sizeof *index);
        if (!index) return LOOM_ENOMEM;
        for (size_t k = 0; k < d->nnz; k++) index[d->idx[k]] = 1;
        index[dim] = 1; /* the bias */
        size_t n = 0;
        for (uint64_t f = 0; f <= dim; f++) n += index[f];
        if (!(keys = malloc(n * sizeof *keys))) {
            free(index);
            return LOOM_ENOMEM;
        }
        n = 0;
        for (uint64_t f = 0; f <= dim; f++)
            if (index[f]) keys[n] = f, index[f] = (uint32_t)n++;
        for (size_t k = 0; k < d->nnz; k++) s->col[k] = index[d->idx[k]];
        free(index);
        s->nkeys = n;
    } else {
        if (!(keys = malloc((d->nnz + 1) * sizeof *keys))) return LOOM_ENOMEM;
        memcpy(keys, d->idx, d->nnz * sizeof *keys);
        keys[d->nnz] = dim;
        s->nkeys = app_sort_unique(keys, d->nnz + 1);
        for (size_t k = 0; k < d->nnz; k++)
            s->col[k] = (uint32_t)app_lower_bound(keys, s->nkeys, d->idx[k]);
    }
    s->keys = keys;
    return 0;
}

int lr_shard_init(shard *s, const loom_dataset *d, uint64_t dim)
{
    *s = (shard){.d = d};
    s->col = malloc((d->nnz ? d->nnz : 1) * sizeof *s->col);
    s->y01 = malloc((d->rows ? d->rows : 1) * sizeof *s->y01);
    if (!s->col || !s->y01 || map_features(s, d, dim)) return LOOM_ENOMEM;
    s->w = calloc(s->nkeys, sizeof *s->w);
    s->stamp = calloc(s->nkeys, sizeof *s->stamp);
    s->slot = malloc(s->nkeys * sizeof *s->slot);
    s->last_push = calloc(s->nkeys, sizeof *s->last_push);
    s->share_weight = malloc(s->nkeys * sizeof *s->share_weight);
    if (!s->w || !s->stamp || !s->slot || !s->last_push || !s->share_weight) return LOOM_ENOMEM;
    for (size_t k = 0; k < s->nkeys; k++) s->share_weight[k] = 1;
    for (size_t i = 0; i < d->rows; i++) s->y01[i] = d->label[i] > 0 ? 1.0 : 0.0;
    return 0;
}

void lr_shard_free(shard *s)
{
    free(s->keys);
    free(s->w);
    free(s->col);
    free(s->y01);
    free(s->stamp);
    free(s->slot);
    free(s->last_push);
    free(s->share_weight);
}

/* Margin of row i with the local weights (bias last in keys). */
static double local_margin(const shard *s, size_t i)
{
    const loom_dataset *d = s->d;
    double m = s->w[s->nkeys - 1];
    for (size_t k = d->row[i]; k < d->row[i + 1]; k++) m += s->w[s->col[k]] * d->val[k];
    return m;
}

/* Loss of the share with the current model: pull every weight it needs once. */
int lr_share_loss(loom_table *w, shard *s, double *loss)
{
    TRY("pull weights", loom_pull(w, s->keys, s->nkeys, s->w));
    double sum = 0;
    for (size_t i = 0; i < s->d->rows; i++)
        sum += lr_logistic_loss(local_margin(s, i), s->d->label[i]);
    *loss = sum;
    return 0;
}

/* ---- SGD ---- */

/* One minibatch: rows order[0..n) of the share, into the gradient b->g of
 * the *nk keys b->keys, which the caller pushes. The batch's keys are listed
 * in order of first use (the library takes unsorted keys); slot[] finds a
 * value's place in the batch without a search. */
int lr_sgd_step(loom_table *wt, shard *s, const size_t *order, size_t n, uint64_t dim,
                const lr_train_opts *o, batch_buf *b, size_t *nk_out)
{
    const loom_dataset *d = s->d;
    size_t nnz = 0;
    for (size_t r = 0; r < n; r++) nnz += d->row[order[r] + 1] - d->row[order[r]];
    if (nnz + 1 > b->cap) {
        free(b->keys), free(b->cols), free(b->w), free(b->g);
        b->cap = 2 * (nnz + 1);
        b->keys = malloc(b->cap * sizeof *b->keys);
        b->cols = malloc(b->cap * sizeof *b->cols);
        b->w = malloc(b->cap * sizeof *b->w);
        b->g = malloc(b->cap * sizeof *b->g);
        if (!b->keys || !b->cols || !b->w || !b->g) return app_fail(PROG, "minibatch", LOOM_ENOMEM);
    }
    if (++s->batch == 0) { /* the stamps wrapped: forget them all */
        memset(s->stamp, 0, s->nkeys * sizeof *s->stamp);
        s->batch = 1;
    }
    size_t nk = 0;
    for (size_t r = 0; r < n; r++)
        for (size_t k = d->row[order[r]]; k < d->row[order[r] + 1]; k++) {
            uint32_t c = s->col[k];
            if (s->stamp[c] != s->batch) {
                s->stamp[c] = s->batch;
                s->slot[c] = (uint32_t)nk;
                b->cols[nk] = c;
                b->keys[nk++] = s->keys[c];
            }
        }
    b->cols[nk] = (uint32_t)(s->nkeys - 1);
    b->keys[nk++] = dim; /* the bias, last */
    TRY("pull", loom_pull(wt, b->keys, nk, b->w));
    memset(b->g, 0, nk * sizeof *b->g);
    for (size_t r = 0; r < n; r++) {
        size_t i = order[r];
        double m = b->w[nk - 1];
        for (size_t k = d->row[i]; k < d->row[i + 1]; k++)
            m += b->w[s->slot[s->col[k]]] * d->val[k];
        double err = lr_sigmoid(m) - s->y01[i];
        for (size_t k = d->row[i]; k < d->row[i + 1]; k++)
            b->g[s->slot[s->col[k]]] += err * d->val[k];
        b->g[nk - 1] += err;
    }
    s->step++;
    for (size_t k = 0; k < nk; k++) {
        b->g[k] /= (double)n;
        uint32_t c = b->cols[k];
        /* Every weight but the bias decays every step: the steps since this
         * one was last pushed are paid now (lr_l2_push, seq.c). */
        if (k != nk - 1 && o->l2 != 0)
            b->g[k] += lr_l2_push(o->updater, o->lr, o->l2, s->share_weight[c], b->w[k],
                                  s->step - s->last_push[c]);
        s->last_push[c] = s->step;
    }
    *nk_out = nk;
    return 0;
}

/* ---- compute threads under SGD (--threads T) ---- */

/* Thread t of worker r works like a worker of its own, the (r T + t)-th of
 * W T lanes: rows [lo, hi) of the share (app_team_split), its own epoch
 * order, minibatches and --l2 bookkeeping. Per clock every lane computes one
 * minibatch's gradient, pulling through the process's cache; the deltas are
 * then pushed in lane order (lr_lanes_push), so the update buffer adds them
 * the same way in every run, and the process clocks once. With
 * --data-parts the lanes cut a part instead of the share (parts.c). */
int lr_lane_init(lr_lane *l, const loom_dataset *d, uint64_t dim, int threads, int t)
{
    size_t lo, hi;
    app_team_split(d->rows, threads, t, &lo, &hi);
    l->order = malloc((hi > lo ? hi - lo : 1) * sizeof *l->order);
    if (app_rows_view(d, lo, hi, &l->part) || !l->order) return LOOM_ENOMEM;
    return lr_shard_init(&l->s, &l->part, dim);
}

void lr_lane_free(lr_lane *l)
{
    free(l->b.keys), free(l->b.cols), free(l->b.w), free(l->b.g);
    free(l->order);
    lr_shard_free(&l->s);
    free(l->part.row);
}

size_t lr_lane_batches(size_t rows, int threads, size_t minibatch)
{
    /* The largest lane holds ceil(rows / T) rows. */
    size_t max_lane = (rows + (size_t)threads - 1) / (size_t)threads;
    size_t batches = (max_lane + minibatch - 1) / minibatch;
    return batches ? batches : 1;
}

int lr_lane_step(void *arg, int t)
{
    lr_clock *c = arg;
    lr_lane *l = &c->lanes[t];
    size_t rows = l->part.rows, per = (rows + c->nbatches - 1) / c->nbatches;
    size_t lo = c->batch * per < rows ? c->batch * per : rows;
    size_t hi = lo + per < rows ? lo + per : rows;
    l->nk = 0;
    return hi > lo ? lr_sgd_step(c->w, &l->s, l->order + lo, hi - lo, c->dim, c->o, &l->b, &l->nk)
                   : 0;
}

int lr_lane_loss(void *arg, int t)
{
    lr_clock *c = arg;
    return lr_share_loss(c->w, &c->lanes[t].s, &c->lanes[t].loss);
}

int lr_lanes_push(loom_table *w, lr_lane *lanes, int threads)
{
    for (int t = 0; t < threads; t++)
        if (lanes[t].nk) TRY("push", loom_push(w, lanes[t].b.keys, lanes[t].nk, lanes[t].b.g));
    return 0;
}

/* ---- the epoch order ---- */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void lr_epoch_order(uint64_t seed, int rank, int epoch, size_t rows, size_t *order)
{
    uint64_t state =
        mix64(seed * 0x9E3779B97F4A7C15ull + (uint64_t)rank * 1000003u + (uint64_t)epoch);
    for (size_t i = 0; i < rows; i++) order[i] = i;
    for (size_t i = rows; i > 1; i--) { /* Fisher-Yates */
        state += 0x9E3779B97F4A7C15ull;
        size_t j = (size_t)(mix64(state) % i);
        size_t t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
}

/* ---- one epoch's report ---- */

/* Worker 0, after the epoch's barrier: aggregate, evaluate, print. */
int lr_report(lr_reporter *r, loom_table *w, loom_table *stats, int epoch, double epoch_s)
{
    const lr_cli *c = r->cli;
    double st[STAT_FIELDS];
    uint64_t base = (uint64_t)epoch * STAT_FIELDS;
    TRY("pull statistics", loom_pull_range(stats, base, base + STAT_FIELDS, st));
    TRY("pull model", loom_pull_range(w, 0, r->dim + 1, r->model));
    lr_model m = {.dim = r->dim, .w = malloc((r->dim ? r->dim : 1) * sizeof(double))};
    if (!m.w) return app_fail(PROG, "report", LOOM_ENOMEM);
    double l1 = 0, l2 = 0;
    uint64_t nnz = 0;
    const lr_train_opts *o = &c->train;
    for (uint64_t j = 0; j < r->dim; j++) {
        m.w[j] = r->model[j * r->width];
        l1 += fabs(m.w[j]);
        l2 += m.w[j] * m.w[j];
        nnz += m.w[j] != 0;
    }
    m.bias = r->model[r->dim * r->width];
    double train_loss = st[ST_ROWS] > 0 ? st[ST_LOSS] / st[ST_ROWS] : 0;
    /* DBPG's penalties apply to the summed loss, SGD's l2 to the mean. FTRL's
     * l1 is McMahan's: on the sum of the T minibatch losses pushed so far (of
     * all workers), the bias included (the server's updater treats every key
     * alike), so on the mean's scale it weighs l1 / T. */
    double l1_weight = o->l1, l2_weight = o->l2;
    if (o->algo == LR_ALGO_DBPG && st[ST_ROWS] > 0) {
        l1_weight /= st[ST_ROWS];
        l2_weight /= st[ST_ROWS];
    } else if (o->algo == LR_ALGO_SGD && o->updater == LR_UPD_FTRL && o->l1 != 0) {
        l1_weight = st[ST_STEPS] > 0 ? o->l1 / st[ST_STEPS] : 0;
        l1 += fabs(m.bias);
    }
    double objective = train_loss + l1_weight * l1 + l2_weight / 2 * l2;
    lr_metrics test = {0};
    if (r->test) {
        double *margin = malloc((r->test->rows ? r->test->rows : 1) * sizeof *margin);
        if (!margin) {
            free(m.w);
            return app_fail(PROG, "report", LOOM_ENOMEM);
        }
        for (size_t i = 0; i < r->test->rows; i++) margin[i] = lr_margin(&m, r->test, i);
        lr_evaluate(margin, r->test->label, r->test->rows, &test);
        free(margin);
    }
    double time_s = app_now_s() - r->start;
    double ex_per_s = epoch_s > 0 ? st[ST_EXAMPLES] / epoch_s : 0;
    /* For the scheduler's status page: a bad value is the app's bug, not the job's end. */
    loom_report_metric(r->node, "epoch", epoch + 1);
    loom_report_metric(r->node, "objective", objective);
    if (r->test) {
        loom_report_metric(r->node, "test_accuracy", test.accuracy);
        loom_report_metric(r->node, "test_auc", test.auc);
    }
    char lost_json[96], lost_text[128];
    app_lost_note(r->node, "rows", lost_json, sizeof lost_json, lost_text, sizeof lost_text);
    if (!c->job.quiet) {
        char testpart[128] = "";
        if (r->test)
            snprintf(testpart, sizeof testpart, "  test logloss %.5f  acc %.4f  auc %.4f",
                     test.logloss, test.accuracy, test.auc);
        fprintf(stderr,
                "epoch %3d  objective %.6f  train logloss %.5f%s  nnz %" PRIu64
                "  %.0f ex/s  sent %.1f MB  recv %.1f MB  %.1f s%s\n",
                epoch + 1, objective, train_loss, testpart, nnz, ex_per_s, st[ST_BYTES_SENT] / 1e6,
                st[ST_BYTES_RECEIVED] / 1e6, time_s, lost_text);
    }
    if (r->metrics) {
        fprintf(r->metrics,
                "{\"epoch\": %d, \"time_s\": %.3f, \"objective\": %.9g, \"train_logloss\": %.9g, ",
                epoch + 1, time_s, objective, train_loss);
        if (r->test)
            fprintf(r->metrics,
                    "\"test_logloss\": %.9g, \"test_accuracy\": %.9g, \"test_auc\": %.9g, ",
                    test.logloss, test.accuracy, test.auc);
        else
            fprintf(r->metrics,
                    "\"test_logloss\": null, \"test_accuracy\": null, \"test_auc\": null, ");
        fprintf(r->metrics,
                "\"nnz_weights\": %" PRIu64 ", \"examples_per_s\": %.1f, \"bytes_sent\": %.0f, "
                "\"bytes_received\": %.0f, \"messages\": %.0f, \"bytes_raw\": %.0f, "
                "\"bytes_wire\": %.0f%s}\n",
                nnz, ex_per_s, st[ST_BYTES_SENT], st[ST_BYTES_RECEIVED], st[ST_MESSAGES],
                st[ST_BYTES_RAW], st[ST_BYTES_WIRE], lost_json);
    }
    int rc = 0;
    /* Each line now, so that a full disk stops the run rather than its end. */
    if (r->metrics && app_metrics_flush(PROG, r->metrics, c->job.metrics_path)) {
        rc = 1;
    } else if (!isfinite(objective)) {
        fprintf(stderr,
                PROG ": the objective is %g after epoch %d: training diverged (try a smaller --lr "
                     "or --l2)\n",
                objective, epoch + 1);
        rc = 1;
    } else if (epoch + 1 == c->train.epochs && c->job.model_path) {
        char err[512];
        if (lr_model_save(&m, c->job.model_path, err, sizeof err)) {
            fprintf(stderr, "loom train lr: %s\n", err);
            rc = 1;
        }
    }
    free(m.w);
    return rc;
}

/* ---- the node ---- */

int lr_open_tables(loom_node *n, const lr_cli *c, uint64_t dim, loom_table **w, loom_table **stats)
{
    const lr_train_opts *o = &c->train;
    loom_table_opts wo = LOOM_TABLE_OPTS_DEFAULT;
    wo.type = LOOM_F64;
    wo.storage = LOOM_DENSE;
    wo.key_end = dim + 1;
    wo.lr = o->lr;
    wo.l1 = o->l1;
    wo.l2 = o->l2;
    wo.filter_push = c->job.filter_push;
    wo.filter_pull = c->job.filter_pull;
    if (o->algo == LR_ALGO_SGD) {
        static const char *const names[] = {"sgd", "adagrad", "ftrl"};
        wo.updater = names[o->updater];
        wo.consistency = (loom_consistency)o->consistency;
        wo.staleness = o->staleness;
        wo.l2 = 0; /* the workers push l2's part of the gradient, see sgd_step */
    } else {
        wo.width = 3;
        wo.updater = "lr.dbpg";
        wo.consistency = LOOM_SSP;
        wo.staleness = o->delay;
        wo.params[0] = loom_num_workers(n);
        wo.params[1] = (double)dim;
        wo.cache = 0; /* every step reads its block afresh */
        /* A block's pushes carry a row for every key of the block, zeros
         * where the share lacks the feature, and the same key list each time
         * the block comes round: sparse rows, the key cache and zstd take
         * both out exactly (docs/LR.md, Filters). */
        if (o->l1 > 0 && !c->job.filter_push) wo.filter_push = LR_DBPG_FILTERS; /* "none": none */
        if (o->l1 > 0 && !c->job.filter_pull) wo.filter_pull = LR_DBPG_FILTERS;
    }
    app_job_comm(&c->job, &wo);
    TRY("open the model table", loom_table_open(n, "lr.w", &wo, w));
    loom_table_opts so = LOOM_TABLE_OPTS_DEFAULT;
    so.type = LOOM_F64;
    /* Sparse over every key, as app_stats: a run resumed with more --epochs
     * opens the same table. */
    so.storage = LOOM_SPARSE;
    so.consistency = LOOM_ASP;
    so.cache = 0;
    TRY("open the statistics table", loom_table_open(n, "lr.stats", &so, stats));
    return 0;
}

/* Agree on the model's dimension and the largest share (for aligned clocks). */
static int agree_sizes(loom_node *n, const loom_dataset *d, uint64_t *dim, uint64_t *max_rows)
{
    /* Exact as int64: the reader refused ids beyond LR_MAX_DIM (run_worker). */
    int64_t mine[2] = {(int64_t)d->max_feature, (int64_t)d->rows}, all[2];
    /* What the job would lose with this worker (--on-worker-failure continue). */
    loom_report_metric(n, "share", (double)d->rows);
    TRY("agree on the sizes", app_agree_max(n, "lr.sizes", 2, mine, all));
    *dim = (uint64_t)all[0];
    *max_rows = (uint64_t)all[1];
    return 0;
}

int lr_push_stats(loom_node *n, loom_table *stats, int epoch, double loss, size_t rows,
                  uint64_t steps)
{
    loom_stats ns;
    loom_node_stats(n, &ns);
    double v[STAT_FIELDS] = {0};
    v[ST_LOSS] = loss;
    v[ST_ROWS] = (double)rows;
    v[ST_EXAMPLES] = (double)rows;
    v[ST_BYTES_SENT] = (double)ns.bytes_sent;
    v[ST_BYTES_RECEIVED] = (double)ns.bytes_received;
    v[ST_STEPS] = (double)steps;
    v[ST_MESSAGES] = (double)ns.table_messages;
    v[ST_BYTES_RAW] = (double)ns.table_bytes_raw;
    v[ST_BYTES_WIRE] = (double)ns.table_bytes_wire;
    uint64_t base = (uint64_t)epoch * STAT_FIELDS;
    loom_ts ts;
    TRY("push statistics", loom_push_range_async(stats, base, base + STAT_FIELDS, v, &ts));
    TRY("push statistics", loom_wait(n, ts));
    return 0;
}

/* --l2 with several workers: each pushes the decay of its own minibatches for
 * its own features (lr_l2_push), so a feature held by h of the W shares would
 * decay h/W as fast as one held by all. Counting the shares per feature once
 * (every worker adds 1 per key it has) lets each scale its decay by W/h.
 * With --threads T the shares are the W T lanes'; with --data-parts, the
 * parts (parts.c). */
int lr_shares_open(loom_node *n, uint64_t dim, loom_table **t)
{
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_F64;
    o.storage = LOOM_DENSE;
    o.key_end = dim + 1;
    o.consistency = LOOM_ASP;
    o.cache = 0;
    TRY("open the share table", loom_table_open(n, "lr.shares", &o, t));
    return 0;
}

int lr_shares_count(loom_node *n, loom_table *t, shard *s)
{
    for (size_t k = 0; k < s->nkeys; k++) s->share_weight[k] = 1;
    loom_ts ts;
    TRY("push shares", loom_push_async(t, s->keys, s->nkeys, s->share_weight, &ts));
    TRY("push shares", loom_wait(n, ts));
    return 0;
}

int lr_shares_weigh(loom_table *t, shard *s, double shares)
{
    TRY("pull shares", loom_pull(t, s->keys, s->nkeys, s->share_weight));
    for (size_t k = 0; k < s->nkeys; k++)
        s->share_weight[k] = s->share_weight[k] > 0 ? shares / s->share_weight[k] : 1;
    return 0;
}

static int count_shares(loom_node *n, lr_lane *lanes, int threads, uint64_t dim, int resuming)
{
    loom_table *t;
    if (lr_shares_open(n, dim, &t)) return 1;
    /* A resumed job finds the counts in the checkpoint. */
    for (int l = 0; l < threads && !resuming; l++)
        if (lr_shares_count(n, t, &lanes[l].s)) return 1;
    TRY("barrier", loom_barrier(n));
    for (int l = 0; l < threads; l++)
        if (lr_shares_weigh(t, &lanes[l].s, (double)(loom_num_workers(n) * threads))) return 1;
    return 0;
}

/* ---- checkpoints (docs/FAULTS.md) ----
 *
 * What a worker needs to go on from a clock under SGD: where it is (epoch,
 * next minibatch) and each lane's --l2 bookkeeping (its step count and the
 * step each key was last pushed at). The epoch orders are recomputed from the
 * seed, the weights and optimiser state are the servers'. The sizes go along
 * so that a resume with other data or --threads is refused. */
#define LR_STATE_MAGIC 0x31435246u /* "FRC1" */

static int save_state(loom_node *n, int epoch, size_t batch, size_t nbatches, const lr_lane *lanes,
                      int threads)
{
    size_t len = 4 * 8;
    for (int t = 0; t < threads; t++) len += (2 + lanes[t].s.nkeys) * 8;
    uint64_t *b = malloc(len);
    if (!b) return app_fail(PROG, "checkpoint", LOOM_ENOMEM);
    size_t k = 0;
    b[k++] = LR_STATE_MAGIC;
    b[k++] = (uint64_t)epoch;
    b[k++] = batch;
    b[k++] = (uint64_t)nbatches << 16 | (uint64_t)threads;
    for (int t = 0; t < threads; t++) {
        b[k++] = lanes[t].s.nkeys;
        b[k++] = lanes[t].s.step;
        memcpy(b + k, lanes[t].s.last_push, lanes[t].s.nkeys * 8);
        k += lanes[t].s.nkeys;
    }
    int rc = loom_checkpoint_save(n, b, len);
    free(b);
    return rc ? app_fail(PROG, "checkpoint", rc) : 0;
}

/* In a resumed job: the position saved, and the lanes' bookkeeping restored.
 * *epoch = -1 when the job did not resume. */
static int load_state(loom_node *n, int *epoch, size_t *batch, size_t nbatches, lr_lane *lanes,
                      int threads)
{
    const void *data;
    size_t len;
    *epoch = -1;
    if (loom_checkpoint_resumed(n, &data, &len, NULL)) return 0;
    const uint64_t *b = data;
    size_t k = 4, need = 4 * 8;
    for (int t = 0; t < threads; t++) need += (2 + lanes[t].s.nkeys) * 8;
    int ok = len == need && b[0] == LR_STATE_MAGIC &&
             b[3] == ((uint64_t)nbatches << 16 | (uint64_t)threads);
    for (int t = 0; ok && t < threads; t++) {
        ok = b[k] == lanes[t].s.nkeys;
        lanes[t].s.step = b[k + 1];
        if (ok) memcpy(lanes[t].s.last_push, b + k + 2, lanes[t].s.nkeys * 8);
        k += 2 + lanes[t].s.nkeys;
    }
    if (!ok) {
        fprintf(stderr,
                PROG ": worker %d: the checkpoint does not fit this job (other training "
                     "data, --minibatch or --threads?)\n",
                loom_rank(n));
        return 1;
    }
    *epoch = (int)b[1];
    *batch = (size_t)b[2];
    return 0;
}

/* Train on this worker's share d (and, on worker 0, report with test). Every
 * allocation is released on every path through `out`. */
static int train_share(loom_node *n, const lr_cli *c, const loom_dataset *d,
                       const loom_dataset *test)
{
    int rank = loom_rank(n);
    const lr_train_opts *o = &c->train;
    uint64_t dim, max_rows;
    loom_table *w, *stats;
    if (agree_sizes(n, d, &dim, &max_rows)) return 1;
    /* Every worker sees the same total, so all of them stop here. */
    if (max_rows == 0) {
        app_fail_together(n, "loom train lr: %s: no training examples", c->job.train_path);
        return 1;
    }
    if (lr_open_tables(n, c, dim, &w, &stats)) return 1;
    const int threads = c->job.threads > 1 ? c->job.threads : 1;
    app_team *team = NULL;
    shard s = {0};         /* DBPG: the whole share */
    lr_lane *lanes = NULL; /* SGD: one per compute thread */
    dbpg_index dx = {0};
    dbpg_step st = {.s = &s,
                    .x = &dx,
                    .threads = threads,
                    .kkt = lr_dbpg_kkt_threshold(c->job.filter_push, o, loom_num_workers(n))};
    lr_reporter rep = {.node = n,
                       .cli = c,
                       .test = test,
                       .start = app_now_s(),
                       .dim = dim,
                       .width = o->algo == LR_ALGO_DBPG ? 3 : 1};
    int rc = app_team_start(&team, threads);
    if (rc) {
        rc = app_fail(PROG, "start the compute threads", rc);
        goto out;
    }
    if (o->algo == LR_ALGO_SGD) {
        lanes = calloc((size_t)threads, sizeof *lanes);
        rc = lanes ? 0 : LOOM_ENOMEM;
        for (int t = 0; t < threads && !rc; t++) rc = lr_lane_init(&lanes[t], d, dim, threads, t);
    } else {
        rc = lr_shard_init(&s, d, dim);
        /* Rows [w, g, u] for up to every key: a block, or all of them at epoch end. */
        st.rows3 = malloc(3 * (dim + 1) * sizeof *st.rows3);
        if (!rc && st.rows3) rc = lr_dbpg_index_init(&s, o, &dx);
    }
    if (rank == 0) rep.model = malloc((dim + 1) * rep.width * sizeof *rep.model);
    if (rc || (o->algo == LR_ALGO_DBPG && !st.rows3) || (rank == 0 && !rep.model)) {
        rc = app_fail(PROG, "prepare data", LOOM_ENOMEM);
        goto out;
    }
    const void *resumed_state;
    size_t resumed_len;
    int resuming = !loom_checkpoint_resumed(n, &resumed_state, &resumed_len, NULL);
    if (o->algo == LR_ALGO_SGD && o->l2 != 0 && loom_num_workers(n) * threads > 1 &&
        (rc = count_shares(n, lanes, threads, dim, resuming)))
        goto out;
    /* A resumed job adds its epochs to the metrics of the run it continues. */
    if (rank == 0 && c->job.metrics_path &&
        !(rep.metrics = fopen(c->job.metrics_path, resuming ? "a" : "w"))) {
        fprintf(stderr, "loom train lr: cannot write %s: %s\n", c->job.metrics_path,
                strerror(errno));
        rc = 1;
        goto out;
    }
    /* The same number of minibatches in every lane, however the data split. */
    lr_clock sc = {.w = w, .lanes = lanes, .dim = dim, .o = o};
    sc.nbatches = lr_lane_batches((size_t)max_rows, threads, o->minibatch);
    int first_epoch = 0;
    size_t first_batch = 0;
    if (o->algo == LR_ALGO_SGD &&
        (rc = load_state(n, &first_epoch, &first_batch, sc.nbatches, lanes, threads)))
        goto out;
    if (first_epoch < 0) first_epoch = 0;
    for (int epoch = first_epoch; epoch < o->epochs && !rc; epoch++) {
        double t0 = app_now_s();
        if (o->algo == LR_ALGO_SGD) {
            for (int t = 0; t < threads; t++)
                lr_epoch_order(o->seed, rank * threads + t, epoch, lanes[t].part.rows,
                               lanes[t].order);
            for (sc.batch = first_batch; sc.batch < sc.nbatches && !rc; sc.batch++) {
                rc = app_team_run(team, lr_lane_step, &sc);
                if (!rc) rc = lr_lanes_push(w, lanes, threads);
                if (!rc && (rc = loom_clock(n))) rc = app_fail(PROG, "clock", rc);
                /* The last clock is the final checkpoint's (ft.h). */
                int last = epoch == o->epochs - 1 && sc.batch == sc.nbatches - 1;
                if (!rc && (last ? loom_checkpoint_final(n) : loom_checkpoint_due(n)))
                    rc = save_state(n, epoch, sc.batch + 1, sc.nbatches, lanes, threads);
            }
            /* --checkpoint-every Ne counts these */
            if (!rc && (rc = loom_checkpoint_epoch_end(n))) rc = app_fail(PROG, "epoch end", rc);
            first_batch = 0;
        } else {
            for (int b = 0; b < o->blocks && !rc; b++) {
                /* Step t: first the block of step t - tau - 1, the newest one the
                 * delay guarantees complete, then this step's block. */
                int64_t t = (int64_t)epoch * o->blocks + b, r = t - o->delay - 1;
                uint64_t lo, hi;
                if (r >= 0) {
                    lr_dbpg_block(dim, o->blocks, (int)(r % o->blocks), &lo, &hi);
                    rc = lr_dbpg_refresh(w, team, &st, lo, hi);
                }
                lr_dbpg_slide(&s, &dx, dim, o, t);
                lr_dbpg_block(dim, o->blocks, b, &lo, &hi);
                if (!rc && lo < hi) rc = lr_dbpg_push(w, team, &st, lo, hi);
                if (!rc && (rc = loom_clock(n))) rc = app_fail(PROG, "clock", rc);
            }
        }
        if (rc) break;
        double epoch_s = app_now_s() - t0;
        double loss = 0;
        uint64_t steps = s.step; /* FTRL's l1 scale: every lane's minibatches */
        if (o->algo == LR_ALGO_SGD) {
            rc = app_team_run(team, lr_lane_loss, &sc);
            for (int t = 0; t < threads; t++) loss += lanes[t].loss, steps += lanes[t].s.step;
        } else { /* catch every block up; the margins then give the loss */
            rc = lr_dbpg_refresh(w, team, &st, 0, dim + 1);
            for (size_t i = 0; i < d->rows; i++)
                loss += lr_logistic_loss(dx.rows[i].margin, d->label[i]);
        }
        if (!rc) rc = lr_push_stats(n, stats, epoch, loss, d->rows, steps);
        if (!rc && (rc = loom_barrier(n))) rc = app_fail(PROG, "barrier", rc);
        if (!rc && rank == 0) rc = lr_report(&rep, w, stats, epoch, epoch_s);
    }
out:
    if (rep.metrics && fclose(rep.metrics) && !rc) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", c->job.metrics_path, strerror(errno));
        rc = 1;
    }
    app_team_stop(team);
    for (int t = 0; lanes && t < threads; t++) lr_lane_free(&lanes[t]);
    free(lanes);
    free(st.rows3);
    free(dx.ptr), free(dx.row), free(dx.val), free(dx.rows), free(dx.in_window);
    free(rep.model);
    lr_shard_free(&s);
    return rc;
}

static int run_worker(loom_node *n, const lr_cli *c)
{
    char err[1024];
    loom_dataset *d, *test = NULL;
    if (app_elastic_check(PROG, n, c->data_parts)) return 1;
    /* Under any launcher, before the data is read: outputs that cannot be
     * written must not be found after the last epoch. */
    if (loom_rank(n) == 0 && app_check_job_files(&c->job, err, sizeof err)) {
        fprintf(stderr, PROG ": %s\n", err);
        return 1;
    }
    /* The model is dense over the features: larger ids are refused with their
     * line rather than sizing tables no machine holds. */
    loom_libsvm_opts train_opts = c->data;
    if (!train_opts.max_features || train_opts.max_features > LR_MAX_DIM)
        train_opts.max_features = LR_MAX_DIM;
    if (c->data_parts) /* parts.c reads the parts it is handed */
        d = NULL;
    else if (loom_libsvm_read(c->job.train_path, loom_rank(n), loom_num_workers(n), &train_opts, &d,
                              err, sizeof err)) {
        fprintf(stderr, "loom train lr: %s\n", err);
        return 1;
    }
    if (d && d->skipped)
        fprintf(stderr, "loom train lr: skipped %zu malformed line(s) in %s\n", d->skipped,
                c->job.train_path);
    int rc = 0;
    if (loom_rank(n) == 0 && c->job.test_path) {
        if (loom_libsvm_read(c->job.test_path, 0, 1, &c->data, &test, err, sizeof err)) {
            fprintf(stderr, "loom train lr: %s\n", err);
            rc = 1;
        } else if (test->rows == 0) { /* accuracy and AUC of nothing are not 0 */
            fprintf(stderr, "loom train lr: %s: no test examples\n", c->job.test_path);
            rc = 1;
        }
    }
    if (!rc) rc = d ? train_share(n, c, d, test) : lr_train_parts(n, c, test);
    loom_dataset_free(d);
    loom_dataset_free(test);
    return rc;
}

static int worker_main(loom_node *n, const void *c)
{
    return run_worker(n, c);
}

int lr_train_node(const void *cli)
{
    loom_updater_register("lr.dbpg", 1, lr_dbpg_updater, NULL);
    return app_node_main(PROG, worker_main, cli);
}
