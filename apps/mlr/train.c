/* train: distributed softmax regression on Loom, run on every node of a job.
 *
 * Worker r of W reads share r of the training file. The workers agree on
 * the number of classes K (1 + the largest label) and features D, and run
 * the same number of minibatches per epoch (set by the largest share), one
 * per clock, in a seeded order of their rows.
 *
 * --mode ps: W is a dense table of D + 1 rows of K f64 (row D: the bias)
 * with the "adagrad" updater ("sum" with --updater sgd). Per clock a worker
 * pulls the rows of its minibatch's features into its local copy, computes
 * p - t for each row, sums the minibatch's gradient (1/n) sum_i (p_i - t_i)
 * x_i^T (seq.c, mlr_ps_accumulate) with L2 on the rows it touched, and
 * pushes it for those rows (SGD: the step, -lr times it); the table's
 * consistency (BSP, SSP(s), ASP) bounds staleness in minibatches.
 *
 * --mode svb: no table holds W. Every worker keeps a whole replica
 * (include/loom/svb.h) and, per clock, hands its minibatch's sufficient
 * vectors (u = (p - t)/c, v = x with the bias; SGD: u = -(lr/c)(p - t)), or
 * the c of them SV selection keeps, to loom_svb_add; loom_svb_clock sends
 * them to its peers and applies its own and theirs (AdaGrad: one step with
 * their sum).
 *
 * --mode reduce: every worker keeps a replica and takes its own minibatch's
 * step on it, scaled by W (AdaGrad with accumulators of its own, or the svb
 * arithmetic of SGD, all SVs), then averages the whole replica
 * (as floats) with its in-neighbours in the --graph by loom_reduce
 * (stochastic reduce, include/loom/p2p.h), synchronised by --sync.
 *
 * After every epoch each worker adds its share's loss, correct predictions
 * and traffic into a small statistics table (the servers hold only that in
 * --mode svb); worker 0 evaluates the test set with its model, prints a
 * line and (--metrics) a JSON line, and at the end saves its model. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>
#include <loom/p2p.h>
#include <loom/svb.h>

#include "common/files.h"

#include "mlr/mlr.h"

#define PROG            "loom train mlr"
#define TRY(what, expr) APP_TRY(PROG, what, expr)

enum {
    ST_LOSS,
    ST_CORRECT,
    ST_ROWS,
    ST_BYTES_SENT,
    ST_BYTES_RECEIVED,
    ST_SV_BYTES,
    ST_REPLICA_BYTES,
    ST_DROPPED,
    STAT_FIELDS
};

/* A worker's state: its share, the local copy or replica of W, scratch. */
typedef struct worker {
    loom_node *node;
    const mlr_cli *cli;
    const loom_dataset *d, *test;
    uint32_t K;
    uint64_t dim;
    double l2; /* the L2 weight in force (opts' l2, or 1 / rows) */
    int rank;
    double *w;        /* ps: local copy of the pulled rows; svb: the replica */
    double *g;        /* ps, reduce with adagrad: the minibatch's update, dense (left zero) */
    double *acc;      /* reduce with adagrad: the replica's accumulators (local to the worker) */
    double *r, *rows; /* residuals (B x K); ps: pulled or pushed rows */
    uint64_t *keys;   /* ps: the minibatch's rows */
    uint8_t *seen;
    size_t *order, *chosen;
    float *u;
    mlr_svs v;
    loom_table *table; /* ps */
    loom_svb *svb;     /* svb */
    loom_graph *graph; /* reduce */
    loom_reducer *reducer;
    float *fw; /* reduce: the replica as floats, as it travels */
    app_stats stats;
    FILE *metrics;
    double start;
} worker;

/* ---- one clock ---- */

static int step_ps(worker *k, const size_t *rows, size_t n)
{
    const mlr_train_opts *o = &k->cli->train;
    uint32_t K = k->K;
    size_t nk = mlr_svs_keys(&k->v, n, k->seen, k->keys);
    TRY("pull", loom_pull(k->table, k->keys, nk, k->rows));
    for (size_t t = 0; t < nk; t++)
        memcpy(k->w + k->keys[t] * K, k->rows + t * K, K * sizeof(double));
    double loss;
    mlr_batch_residuals(k->w, K, k->dim, k->d, rows, n, k->r, &loss);
    /* The gradient, which the servers' "adagrad" applies, or the SGD step. */
    int adagrad = o->updater == MLR_ADAGRAD;
    mlr_ps_accumulate(k->g, K, &k->v, n, k->r, adagrad ? 1.0 / (double)n : -o->lr / (double)n);
    mlr_l2_rows(k->g, k->w, K, k->keys, nk, k->dim, adagrad ? k->l2 : -o->lr * k->l2);
    for (size_t t = 0; t < nk; t++) {
        double *g = k->g + k->keys[t] * K;
        memcpy(k->rows + t * K, g, K * sizeof(double));
        memset(g, 0, K * sizeof(double));
    }
    TRY("push", loom_push(k->table, k->keys, nk, k->rows));
    TRY("clock", loom_clock(k->node));
    return 0;
}

static int step_reduce(worker *k, const size_t *rows, size_t n)
{
    /* Averaging W replicas that each took one minibatch's step moves the model
     * 1/W as far as the sum of those steps, which ps and svb apply per clock:
     * each worker steps W times as far, so a clock means the same in all modes. */
    mlr_train_opts scaled = k->cli->train;
    scaled.lr *= loom_num_workers(k->node);
    const mlr_train_opts *o = &scaled;
    uint32_t K = k->K;
    double loss;
    mlr_batch_residuals(k->w, K, k->dim, k->d, rows, n, k->r, &loss);
    size_t nk = mlr_svs_keys(&k->v, n, k->seen, k->keys);
    if (o->updater == MLR_ADAGRAD) {
        mlr_ps_accumulate(k->g, K, &k->v, n, k->r, 1.0 / (double)n);
        mlr_l2_rows(k->g, k->w, K, k->keys, nk, k->dim, k->l2);
        loom_svb_adagrad_step(k->w, k->acc, k->g, K, k->keys, nk, o->lr);
    } else {
        /* The L2 step on the rows as they were, then the SVs (the svb arithmetic). */
        mlr_l2_rows(k->w, k->w, K, k->keys, nk, k->dim, -o->lr * k->l2);
        for (size_t q = 0; q < n; q++) {
            mlr_sv_u(o, n, k->r + q * K, K, k->u);
            loom_svb_apply(k->w, K, k->u, k->v.idx + k->v.off[q], k->v.val + k->v.off[q],
                           (uint32_t)(k->v.off[q + 1] - k->v.off[q]));
        }
    }
    size_t nw = (size_t)(k->dim + 1) * K;
    for (size_t e = 0; e < nw; e++) k->fw[e] = (float)k->w[e];
    TRY("reduce", loom_reduce(k->reducer, k->fw));
    for (size_t e = 0; e < nw; e++) k->w[e] = k->fw[e];
    return 0;
}

static int step_svb(worker *k, const size_t *rows, size_t n, uint64_t clock)
{
    const mlr_train_opts *o = &k->cli->train;
    uint32_t K = k->K;
    double loss;
    mlr_batch_residuals(k->w, K, k->dim, k->d, rows, n, k->r, &loss);
    size_t c = mlr_svs_choose(o, k->rank, clock, k->r, K, &k->v, n, k->chosen);
    if (!c && n) return app_fail(PROG, "select SVs", LOOM_ENOMEM);
    for (size_t i = 0; i < c; i++) {
        size_t q = k->chosen[i];
        mlr_sv_u(o, c, k->r + q * K, K, k->u);
        TRY("add an SV", loom_svb_add(k->svb, k->u, k->v.idx + k->v.off[q], k->v.val + k->v.off[q],
                                      (uint32_t)(k->v.off[q + 1] - k->v.off[q])));
    }
    TRY("clock", loom_svb_clock(k->svb));
    return 0;
}

/* ---- the model at an epoch's end ---- */

/* ps: every row the share uses, fresh (after the barrier), into k->w. */
static int pull_share_rows(worker *k)
{
    const loom_dataset *d = k->d;
    uint8_t *mark = k->seen;
    size_t nk = 0;
    for (size_t e = 0; e < d->nnz; e++)
        if (!mark[d->idx[e]]) mark[d->idx[e]] = 1, nk++;
    uint64_t *keys = malloc((nk + 1) * sizeof *keys);
    double *rows = malloc((nk + 1) * k->K * sizeof *rows);
    if (!keys || !rows) {
        free(keys), free(rows);
        return app_fail(PROG, "pull the model", LOOM_ENOMEM);
    }
    nk = 0;
    for (uint64_t j = 0; j < k->dim; j++)
        if (mark[j]) keys[nk++] = j, mark[j] = 0;
    keys[nk++] = k->dim;
    int rc = loom_pull(k->table, keys, nk, rows);
    for (size_t t = 0; !rc && t < nk; t++)
        memcpy(k->w + keys[t] * k->K, rows + t * k->K, k->K * sizeof(double));
    free(keys), free(rows);
    return rc ? app_fail(PROG, "pull the model", rc) : 0;
}

static int push_stats(worker *k, int epoch)
{
    mlr_model m = {.classes = k->K, .dim = k->dim, .w = k->w};
    mlr_metrics mt;
    if (mlr_evaluate(&m, k->d, &mt)) return app_fail(PROG, "evaluate", LOOM_ENOMEM);
    loom_stats ns;
    loom_node_stats(k->node, &ns);
    double v[STAT_FIELDS] = {0};
    v[ST_LOSS] = mt.logloss * (double)mt.n;
    v[ST_CORRECT] = mt.accuracy * (double)mt.n;
    v[ST_ROWS] = (double)mt.n;
    v[ST_BYTES_SENT] = (double)ns.bytes_sent;
    v[ST_BYTES_RECEIVED] = (double)ns.bytes_received;
    if (k->svb) {
        loom_svb_stats ss;
        loom_svb_get_stats(k->svb, &ss);
        v[ST_SV_BYTES] = (double)ss.sv_bytes_sent;
        v[ST_REPLICA_BYTES] = (double)ss.replica_bytes_sent;
        v[ST_DROPPED] = (double)ss.dropped;
    }
    TRY("push statistics", app_stats_add(&k->stats, epoch, v));
    return 0;
}

/* Worker 0, after the barrier that follows every worker's statistics. */
static int report(worker *k, int epoch, uint64_t clocks)
{
    const mlr_cli *c = k->cli;
    double st[STAT_FIELDS];
    TRY("read statistics", app_stats_read(&k->stats, epoch, st));
    mlr_model m = {.classes = k->K, .dim = k->dim, .w = k->w};
    if (k->table) TRY("pull the model", loom_pull_range(k->table, 0, k->dim + 1, k->w));
    mlr_metrics test = {0};
    if (k->test && mlr_evaluate(&m, k->test, &test)) return app_fail(PROG, "evaluate", LOOM_ENOMEM);
    double objective = st[ST_LOSS] / st[ST_ROWS], train_acc = st[ST_CORRECT] / st[ST_ROWS];
    double time_s = app_now_s() - k->start;
    loom_report_metric(k->node, "epoch", epoch + 1);
    loom_report_metric(k->node, "objective", objective);
    if (k->test) loom_report_metric(k->node, "test_accuracy", test.accuracy);
    if (!c->job.quiet) {
        char testpart[96] = "";
        if (k->test)
            snprintf(testpart, sizeof testpart, "  test logloss %.5f  acc %.4f", test.logloss,
                     test.accuracy);
        fprintf(stderr, "epoch %3d  objective %.6f  train acc %.4f%s  sent %.1f MB  %.1f s\n",
                epoch + 1, objective, train_acc, testpart, st[ST_BYTES_SENT] / 1e6, time_s);
    }
    if (k->metrics) {
        fprintf(k->metrics,
                "{\"epoch\": %d, \"time_s\": %.3f, \"clocks\": %" PRIu64
                ", \"objective\": %.9g, \"train_accuracy\": %.9g, ",
                epoch + 1, time_s, clocks, objective, train_acc);
        if (k->test)
            fprintf(k->metrics, "\"test_logloss\": %.9g, \"test_accuracy\": %.9g, ", test.logloss,
                    test.accuracy);
        else
            fprintf(k->metrics, "\"test_logloss\": null, \"test_accuracy\": null, ");
        fprintf(k->metrics,
                "\"bytes_sent\": %.0f, \"bytes_received\": %.0f, \"sv_bytes_sent\": %.0f, "
                "\"replica_bytes_sent\": %.0f, \"svb_dropped\": %.0f}\n",
                st[ST_BYTES_SENT], st[ST_BYTES_RECEIVED], st[ST_SV_BYTES], st[ST_REPLICA_BYTES],
                st[ST_DROPPED]);
        if (app_metrics_flush(PROG, k->metrics, c->job.metrics_path)) return 1;
    }
    if (!isfinite(objective)) {
        fprintf(stderr,
                PROG ": the objective is %g after epoch %d: training diverged (try a "
                     "smaller --lr)\n",
                objective, epoch + 1);
        return 1;
    }
    return 0;
}

static int save_model(worker *k)
{
    char err[512];
    mlr_model m = {.classes = k->K, .dim = k->dim, .w = k->w};
    if (mlr_model_save(&m, k->cli->job.model_path, err, sizeof err)) {
        fprintf(stderr, PROG ": %s\n", err);
        return 1;
    }
    return 0;
}

/* ---- the worker ---- */

static int agree_sizes(loom_node *n, const loom_dataset *d, uint32_t classes, uint64_t *dim,
                       uint32_t *K, uint64_t *max_rows)
{
    int64_t mine[3] = {(int64_t)d->max_feature, (int64_t)d->rows, (int64_t)classes}, all[3];
    TRY("agree on the sizes", app_agree_max(n, "mlr.sizes", 3, mine, all));
    *dim = (uint64_t)all[0];
    *max_rows = (uint64_t)all[1];
    *K = (uint32_t)all[2];
    return 0;
}

static int open_model(worker *k)
{
    const mlr_train_opts *o = &k->cli->train;
    if (o->mode == MLR_MODE_PS) {
        loom_table_opts wo = LOOM_TABLE_OPTS_DEFAULT;
        wo.type = LOOM_F64;
        wo.width = k->K;
        wo.storage = LOOM_DENSE;
        wo.key_end = k->dim + 1;
        wo.updater = o->updater == MLR_ADAGRAD ? "adagrad" : "sum";
        wo.lr = o->lr;
        wo.eps = MLR_ADAGRAD_EPS;
        wo.consistency = (loom_consistency)o->consistency;
        wo.staleness = o->staleness;
        TRY("open the model table", loom_table_open(k->node, "mlr.w", &wo, &k->table));
        k->w = calloc((size_t)(k->dim + 1) * k->K, sizeof *k->w);
        return k->w ? 0 : app_fail(PROG, "prepare the model", LOOM_ENOMEM);
    }
    if (o->mode == MLR_MODE_REDUCE) {
        size_t nw = (size_t)(k->dim + 1) * k->K;
        k->w = calloc(nw, sizeof *k->w);
        k->fw = calloc(nw, sizeof *k->fw);
        if (!k->w || !k->fw) return app_fail(PROG, "prepare the model", LOOM_ENOMEM);
        int rc = loom_graph_build(o->graph, loom_num_workers(k->node), &k->graph);
        if (rc) {
            fprintf(stderr, PROG ": --graph %s: %s\n", o->graph, loom_last_error());
            return 1;
        }
        TRY("open stochastic reduce",
            loom_reducer_open(k->node, k->graph, (loom_sync)o->sync, LOOM_REDUCE_WINDOW_DEFAULT, nw,
                              &k->reducer));
        return 0; /* loom_reducer_open meets the other workers itself */
    }
    loom_svb_opts so = LOOM_SVB_OPTS_DEFAULT;
    so.width = k->K;
    so.rows = k->dim + 1;
    so.consistency = (loom_consistency)o->consistency;
    so.staleness = o->staleness;
    so.peers = o->peers;
    so.average_every = o->average;
    so.rotate_every = o->rotate;
    so.seed = o->seed;
    so.adagrad = o->updater == MLR_ADAGRAD ? o->lr : 0;
    char path[4096];
    if (o->svlog) {
        snprintf(path, sizeof path, "%s.%d", o->svlog, k->rank);
        so.log_path = path;
    }
    TRY("open the sufficient-vector broadcast", loom_svb_open(k->node, &so, &k->svb));
    k->w = loom_svb_replica(k->svb);
    /* Every worker's SVB is open before the first SVs travel. */
    TRY("barrier", loom_barrier(k->node));
    return 0;
}

static int train(worker *k)
{
    const mlr_cli *c = k->cli;
    const mlr_train_opts *o = &c->train;
    uint64_t max_rows;
    uint32_t mine = 0;
    mlr_check_labels(k->d, &mine);
    if (agree_sizes(k->node, k->d, mine, &k->dim, &k->K, &max_rows)) return 1;
    if (max_rows == 0) {
        app_fail_together(k->node, PROG ": %s: no training examples", c->job.train_path);
        return 1;
    }
    if (k->K < 2) {
        app_fail_together(k->node, PROG ": %s: the labels name only one class", c->job.train_path);
        return 1;
    }
    if (k->dim > MLR_MAX_DIM) {
        app_fail_together(k->node, PROG ": %s: more than %" PRIu64 " features", c->job.train_path,
                          MLR_MAX_DIM);
        return 1;
    }
    /* 1 / rows: liblinear's C = 1 (its objective over C n), the shares
     * taken as equal (they are, to a row, for one worker). */
    k->l2 = o->l2 >= 0 ? o->l2 : 1.0 / ((double)max_rows * loom_num_workers(k->node));
    if (app_stats_open(k->node, "mlr.stats", STAT_FIELDS, &k->stats)) return 1;
    if (open_model(k)) return 1;
    size_t B = o->minibatch, K = k->K, nw = (size_t)(k->dim + 1) * K;
    int ps = o->mode == MLR_MODE_PS,
        reduce_adagrad = o->mode == MLR_MODE_REDUCE && o->updater == MLR_ADAGRAD;
    int reduce = o->mode == MLR_MODE_REDUCE;
    k->g = ps || reduce_adagrad ? calloc(nw, sizeof *k->g) : NULL;
    k->acc = reduce_adagrad ? calloc(nw, sizeof *k->acc) : NULL;
    k->r = malloc(B * K * sizeof *k->r);
    /* ps: a minibatch's rows, at most all of them. */
    if (ps) k->rows = malloc(nw * sizeof *k->rows);
    if (ps || reduce) k->keys = malloc((size_t)(k->dim + 1) * sizeof *k->keys);
    k->seen = calloc(k->dim + 1, 1);
    k->order = malloc((k->d->rows ? k->d->rows : 1) * sizeof *k->order);
    k->chosen = malloc(B * sizeof *k->chosen);
    k->u = malloc(K * sizeof *k->u);
    if ((ps && (!k->g || !k->rows || !k->keys)) || (reduce_adagrad && (!k->g || !k->acc)) ||
        (reduce && !k->keys) || !k->r || !k->seen || !k->order || !k->chosen || !k->u)
        return app_fail(PROG, "prepare data", LOOM_ENOMEM);
    if (k->rank == 0 && c->job.metrics_path && !(k->metrics = fopen(c->job.metrics_path, "w"))) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", c->job.metrics_path, strerror(errno));
        return 1;
    }
    size_t nbatches = (size_t)((max_rows + B - 1) / B);
    uint64_t clock = 0;
    for (int epoch = 0; epoch < o->epochs; epoch++) {
        mlr_epoch_order(o->seed, k->rank, epoch, k->d->rows, k->order);
        for (size_t b = 0; b < nbatches; b++, clock++) {
            size_t lo, hi;
            mlr_batch_range(k->d->rows, nbatches, b, &lo, &hi);
            size_t n = hi - lo;
            if (mlr_svs_build(&k->v, k->d, k->order + lo, n, k->dim))
                return app_fail(PROG, "minibatch", LOOM_ENOMEM);
            int rc = o->mode == MLR_MODE_PS    ? step_ps(k, k->order + lo, n)
                     : o->mode == MLR_MODE_SVB ? step_svb(k, k->order + lo, n, clock)
                                               : step_reduce(k, k->order + lo, n);
            if (rc) return rc;
        }
        if (k->svb) TRY("sync", loom_svb_sync(k->svb));
        TRY("barrier", loom_barrier(k->node));
        if (k->table && pull_share_rows(k)) return 1;
        if (push_stats(k, epoch)) return 1;
        TRY("barrier", loom_barrier(k->node));
        if (k->rank == 0 && report(k, epoch, clock)) return 1;
    }
    if (k->svb && o->rollback >= 0) {
        int rc = loom_svb_restore(k->svb, o->rollback);
        if (rc == LOOM_EINVAL) {
            fprintf(stderr, PROG ": --rollback %" PRId64 ": the log ends at clock %" PRId64 "\n",
                    o->rollback, loom_svb_clocks(k->svb));
            return 1;
        }
        TRY("restore", rc);
    }
    if (k->rank == 0 && c->job.model_path) return save_model(k);
    return 0;
}

static int run_worker(loom_node *n, const void *arg)
{
    const mlr_cli *c = arg;
    char err[1024];
    if (loom_rank(n) == 0 && app_check_job_files(&c->job, err, sizeof err)) {
        fprintf(stderr, PROG ": %s\n", err);
        return 1;
    }
    loom_libsvm_opts opts = c->data;
    opts.max_features = MLR_MAX_DIM;
    worker k = {.node = n, .cli = c, .rank = loom_rank(n), .start = app_now_s()};
    loom_dataset *d = NULL, *test = NULL;
    if (loom_libsvm_read(c->job.train_path, k.rank, loom_num_workers(n), &opts, &d, err,
                         sizeof err)) {
        fprintf(stderr, PROG ": %s\n", err);
        return 1;
    }
    if (d->skipped)
        fprintf(stderr, PROG ": skipped %zu malformed line(s) in %s\n", d->skipped,
                c->job.train_path);
    uint32_t classes;
    size_t bad = mlr_check_labels(d, &classes);
    int rc = 0;
    if (bad) {
        fprintf(stderr,
                PROG ": %s: example %zu of this worker's share (from line %zu): the label %g is "
                     "not a class id from 0 to %u\n",
                c->job.train_path, bad, d->first_line, d->label[bad - 1], MLR_MAX_CLASSES - 1);
        rc = 1;
    }
    if (!rc && k.rank == 0 && c->job.test_path) {
        loom_libsvm_opts t = c->data;
        if (loom_libsvm_read(c->job.test_path, 0, 1, &t, &test, err, sizeof err)) {
            fprintf(stderr, PROG ": %s\n", err);
            rc = 1;
        } else if (test->rows == 0) {
            fprintf(stderr, PROG ": %s: no test examples\n", c->job.test_path);
            rc = 1;
        } else if ((bad = mlr_check_labels(test, &classes))) {
            fprintf(stderr, PROG ": %s: example %zu: the label %g is not a class id\n",
                    c->job.test_path, bad, test->label[bad - 1]);
            rc = 1;
        }
    }
    k.d = d;
    k.test = test;
    if (!rc) rc = train(&k);
    if (k.metrics && fclose(k.metrics) && !rc) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", c->job.metrics_path, strerror(errno));
        rc = 1;
    }
    if (k.reducer) {
        int crc = loom_reducer_close(k.reducer);
        if (crc && !rc) rc = app_fail(PROG, "close stochastic reduce", crc);
    }
    loom_graph_free(k.graph);
    if (k.svb)
        loom_svb_close(k.svb);
    else
        free(k.w);
    free(k.fw);
    free(k.g), free(k.acc), free(k.r), free(k.rows), free(k.keys), free(k.seen), free(k.order),
        free(k.chosen), free(k.u);
    mlr_svs_free(&k.v);
    loom_dataset_free(d);
    loom_dataset_free(test);
    return rc;
}

int mlr_train_node(const void *cli)
{
    return app_node_main(PROG, run_worker, cli);
}
