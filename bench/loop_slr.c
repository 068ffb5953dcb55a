/* loop_slr: sparse logistic regression written as a serial loop over rows
 * (loom/loop.h) whose gradient goes through a write buffer, against the
 * hand-written minibatch SGD of `loom train lr` (apps/lr/train.c). Run under
 * `loom run`:
 *
 *   loom run --servers 1 --workers W -- loop_slr --train FILE [--test FILE] [flags]
 *
 * The loop (Orion's SLR, wei-thesis-bosen-orion.txt appendix A.2):
 *
 *   for each row i:                                  declared: X(i) read, w(*) read
 *       m = w[bias] + sum over features f of w[f] x_if
 *       g[f] += (sigmoid(m) - y_i) x_if, g[bias] += sigmoid(m) - y_i
 *                                                    through the buffer on w
 *   merge(f): w[f] -= lr g[f] / minibatch            at most every minibatch rows
 *
 * Nothing is written but through the buffer, so the loop has no dependences:
 * every worker runs the rows it read, and w lives on the servers. By default
 * (--read prefetch) w is prefetched: rows_of lists row i's feature ids and
 * the bias, and before each minibatch the worker pulls the union of its rows'
 * weights in one request (loom_loop_prefetch_decl), so a pass moves the
 * weights the rows touch, whatever the dimension. --read whole gives every
 * worker a copy of all of w instead, read again after each flush: as fast
 * for a9a's 124 weights, hopeless for millions. A flush every --minibatch rows makes
 * this the minibatch SGD of `loom train lr --updater sgd --minibatch B`: the
 * B rows' gradients at one w, their mean applied with lr. An accumulator sums
 * the rows' log loss as the pass goes (at the weights each row saw). Worker 0
 * prints one line per pass: test logloss and accuracy (apps/lr's metrics),
 * the pass's train logloss, examples per second of the pass, and the bytes
 * worker 0 sent and received in the pass and, with prefetch, the weight
 * rows it pulled and in how many bulk pulls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/data.h>
#include <loom/loom.h>

#include "lr/lr.h"

enum { ROWS, WEIGHTS };
enum { GRADIENT };
enum { LOSS };

typedef struct slr {
    const loom_dataset *d;
    uint64_t first, dim; /* the index of this worker's first row; the bias's row */
    double lr, minibatch;
    int prefetch; /* w prefetched per minibatch, not copied whole */
    loom_loop_buffer *g;
    double *loss; /* the accumulator: log loss, rows */
} slr;

static void body(void *user, const int64_t *index, double label, void *const *rows)
{
    slr *s = user;
    size_t i = (size_t)((uint64_t)index[0] - s->first);
    const loom_dataset *d = s->d;
    double m;
    if (s->prefetch) { /* the row's weights in rows_of's order, the bias last */
        const void *const *w = ((const loom_loop_fetched *)rows[1])->value;
        size_t nnz = d->row[i + 1] - d->row[i];
        m = *(const double *)w[nnz];
        for (size_t k = 0; k < nnz; k++) m += *(const double *)w[k] * d->val[d->row[i] + k];
    } else {
        const double *w = rows[1];
        m = w[s->dim];
        for (size_t k = d->row[i]; k < d->row[i + 1]; k++) m += w[d->idx[k]] * d->val[k];
    }
    double err = lr_sigmoid(m) - (label > 0 ? 1.0 : 0.0);
    for (size_t k = d->row[i]; k < d->row[i + 1]; k++)
        *(double *)loom_loop_buffer_row(s->g, d->idx[k]) += err * d->val[k];
    *(double *)loom_loop_buffer_row(s->g, s->dim) += err;
    s->loss[0] += lr_logistic_loss(m, label);
    s->loss[1] += 1;
}

/* The weights row i reads: its features', then the bias. */
static void rows_of(void *user, uint32_t array, const int64_t *index, double label,
                    loom_loop_rows *out)
{
    const slr *s = user;
    (void)array, (void)label;
    size_t i = (size_t)((uint64_t)index[0] - s->first);
    for (size_t k = s->d->row[i]; k < s->d->row[i + 1]; k++) loom_loop_rows_add(out, s->d->idx[k]);
    loom_loop_rows_add(out, s->dim);
}

static void merge(void *user, uint64_t row, void *value, const void *update)
{
    const slr *s = user;
    (void)row;
    *(double *)value -= s->lr * *(const double *)update / s->minibatch;
}

static int usage(void)
{
    fprintf(stderr, "usage: loom run ... -- loop_slr --train FILE [--test FILE] [--passes N] "
                    "[--lr X] [--minibatch B] [--read prefetch|whole]\n");
    return 2;
}

int main(int argc, char **argv)
{
    loom_node *n;
    int rc = loom_init(&n, &argc, &argv);
    if (rc) {
        fprintf(stderr, "loop_slr: cannot join the job: %s\n", loom_strerror(rc));
        return 1;
    }
    if (!loom_is_worker(n)) return loom_serve(n) ? 1 : 0;
    const char *train = NULL, *test = NULL;
    int passes = 10;
    slr s = {.lr = 0.1, .minibatch = 100, .prefetch = 1};
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        if (!strcmp(a, "--train"))
            train = v;
        else if (!strcmp(a, "--test"))
            test = v;
        else if (!strcmp(a, "--passes"))
            passes = atoi(v);
        else if (!strcmp(a, "--lr"))
            s.lr = atof(v);
        else if (!strcmp(a, "--minibatch"))
            s.minibatch = atof(v);
        else if (!strcmp(a, "--read") && (!strcmp(v, "prefetch") || !strcmp(v, "whole")))
            s.prefetch = !strcmp(v, "prefetch");
        else
            return usage();
    }
    if (!train || passes < 1 || !(s.lr > 0) || s.minibatch < 1) return usage();
    int W = loom_num_workers(n), me = loom_rank(n);
    loom_libsvm_opts lo = LOOM_LIBSVM_OPTS_DEFAULT;
    loom_dataset *d, *t = NULL;
    char err[512];
    if ((rc = loom_libsvm_read(train, me, W, &lo, &d, err, sizeof err)) ||
        (me == 0 && test && (rc = loom_libsvm_read(test, 0, 1, &lo, &t, err, sizeof err)))) {
        fprintf(stderr, "loop_slr: %s\n", err);
        return 1;
    }
    /* the dimension and the number of rows: the largest of the workers' */
    app_stats agree;
    double *mine = calloc(2 * (size_t)W, sizeof *mine), *all = calloc(2 * (size_t)W, sizeof *all);
    if (!mine || !all) return 1;
    s.d = d;
    s.first = d->first_line - 1;
    mine[me] = (double)d->max_feature;
    mine[W + me] = (double)(s.first + d->rows);
    if ((rc = app_stats_open(n, "loop_slr.agree", 2 * (uint32_t)W, &agree)) ||
        (rc = app_stats_add(&agree, 0, mine)) || (rc = loom_barrier(n)) ||
        (rc = app_stats_read(&agree, 0, all)))
        return 1;
    uint64_t rows = 1;
    for (int w = 0; w < W; w++) {
        s.dim = (uint64_t)all[w] > s.dim ? (uint64_t)all[w] : s.dim;
        rows = (uint64_t)all[W + w] > rows ? (uint64_t)all[W + w] : rows;
    }
    int64_t *idx = malloc((d->rows + 1) * sizeof *idx);
    if (!idx) return 1;
    for (size_t i = 0; i < d->rows; i++) idx[i] = (int64_t)(s.first + i);

    /* ---- the loop ---- */
    const loom_access acc[] = {
        {ROWS, 0, 1, {LOOM_SUB(0, 0)}},    /* X(i) */
        {WEIGHTS, 0, 1, {LOOM_SUB_EVERY}}, /* w(*), read */
    };
    const loom_loop_array arrays[] = {{WEIGHTS, "loop_slr.w", s.dim + 1, 1, LOOM_F64, NULL}};
    const loom_loop_buffer_decl buffers[] = {{GRADIENT, WEIGHTS, (uint64_t)s.minibatch, merge}};
    const loom_loop_accum_decl accums[] = {{LOSS, LOOM_REDUCE_SUM, LOOM_F64, 2, NULL, NULL}};
    const loom_loop_prefetch_decl prefetch[] = {{WEIGHTS, rows_of, (uint64_t)s.minibatch}};
    loom_loop_opts o = {.dims = 1,
                        .extents = &rows,
                        .acc = acc,
                        .nacc = 2,
                        .arrays = arrays,
                        .narrays = 1,
                        .indices = idx,
                        .values = d->label,
                        .n = d->rows,
                        .body = body,
                        .user = &s,
                        .accums = accums,
                        .naccums = 1,
                        .buffers = buffers,
                        .nbuffers = 1,
                        .prefetch = prefetch,
                        .nprefetch = (size_t)s.prefetch};
    loom_loop *l;
    double t0 = app_now_s();
    if ((rc = loom_loop_open(n, &o, &l, err, sizeof err))) {
        fprintf(stderr, "loop_slr: %s\n", err);
        return 1;
    }
    s.g = loom_loop_buffer_of(l, GRADIENT);
    s.loss = loom_loop_accum(l, LOSS);
    if (me == 0)
        fprintf(stderr, "loop_slr: %s; %zu rows here, dim %llu, w %s, %.2f s to open\n",
                loom_loop_plan_explain(loom_loop_get_plan(l)), loom_loop_elements(l),
                (unsigned long long)s.dim, s.prefetch ? "prefetched" : "read whole",
                app_now_s() - t0);
    /* ---- the loop ends here: the rest evaluates ---- */

    double *w = malloc((s.dim + 1) * sizeof *w),
           *margin = malloc((t ? t->rows + 1 : 1) * sizeof *margin);
    if (!w || !margin) return 1;
    for (int p = 0; p < passes && !rc; p++) {
        double ts = app_now_s();
        loom_stats b0, b1;
        loom_loop_prefetch_stats f0 = {0}, f1 = {0};
        loom_node_stats(n, &b0);
        loom_loop_prefetch_stats_of(l, WEIGHTS, &f0); /* stays 0 for a whole copy */
        if ((rc = loom_loop_run(l, 1))) break;
        loom_node_stats(n, &b1);
        loom_loop_prefetch_stats_of(l, WEIGHTS, &f1);
        double pass_s = app_now_s() - ts, loss[2];
        double mb =
            (double)(b1.bytes_sent - b0.bytes_sent + b1.bytes_received - b0.bytes_received) / 1e6;
        loom_loop_accum_result(l, LOSS, loss);
        if (me != 0) continue;
        char testpart[96] = "";
        if (t) {
            if ((rc = loom_pull_range(loom_loop_table(l, WEIGHTS), 0, s.dim + 1, w))) break;
            lr_model m = {.dim = s.dim, .w = w, .bias = w[s.dim]};
            lr_metrics tm;
            for (size_t i = 0; i < t->rows; i++) margin[i] = lr_margin(&m, t, i);
            lr_evaluate(margin, t->label, t->rows, &tm);
            snprintf(testpart, sizeof testpart, "  test logloss %.5f  acc %.4f  auc %.4f",
                     tm.logloss, tm.accuracy, tm.auc);
        }
        printf("pass %3d  train logloss %.5f%s  %.0f ex/s  %.2f s  total %.2f s  %.2f MB  "
               "%llu rows in %llu pulls\n",
               p + 1, loss[0] / loss[1], testpart, loss[1] / pass_s, pass_s, app_now_s() - t0, mb,
               (unsigned long long)(f1.rows_pulled - f0.rows_pulled),
               (unsigned long long)(f1.batches - f0.batches));
        fflush(stdout);
    }
    if (rc) fprintf(stderr, "loop_slr: %s\n", loom_strerror(rc));
    loom_loop_close(l);
    loom_dataset_free(d);
    if (t) loom_dataset_free(t);
    free(mine), free(all), free(idx), free(w), free(margin);
    return rc ? 1 : loom_finalize(n) ? 1 : 0;
}
