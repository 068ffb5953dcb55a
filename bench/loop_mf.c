/* loop_mf: matrix factorisation written as a serial loop over ratings with
 * its accesses declared (loom/loop.h), against the hand-written rotation of
 * `loom train mf` (apps/mf/rotation.c). Run under `loom run`:
 *
 *   loom run --servers 1 --workers W -- loop_mf --train ratings.csv [flags]
 *
 * The SGD step, the initial rows, the test split and the learning-rate decay
 * are the MF app's (apps/mf/sgd.c), so test RMSE per pass compares with
 * `loom train mf --test-fraction 0.1` pass for pass; the loop, its blocks,
 * the rotation of item rows and the exchange of ratings are the loop API's.
 * Users and items are numbered through a seeded permutation first (Orion's
 * `randomize`): ratings files number users as they joined, and blocks of
 * consecutive ids would hold similar users (docs/MF.md). Worker 0 prints one
 * line per pass: test RMSE, seconds of the pass, and the job's time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/data.h>
#include <loom/loom.h>

#include "mf/mf.h"

enum { RATINGS, USERS, ITEMS };

typedef struct run {
    uint32_t rank;
    uint64_t seed;
    double lr, reg, std, mean;
} run;

static void init_row(void *user, uint32_t array, uint64_t row, void *values)
{
    const run *r = user;
    mf_init_row(values, r->rank, r->seed, array == USERS ? 0 : 1, row, r->std);
}

static void body(void *user, const int64_t *index, double rating, void *const *rows)
{
    const run *r = user;
    (void)index;
    mf_sgd_step(rows[1], rows[2], r->rank, r->mean, rating, r->lr, r->reg);
}

static int usage(void)
{
    fprintf(stderr, "usage: loom run ... -- loop_mf --train FILE [--passes N] [--rank R] [--lr X] "
                    "[--decay X] [--reg X] [--test-fraction P] [--seed S] [--no-shuffle]\n");
    return 2;
}

int main(int argc, char **argv)
{
    loom_node *n;
    int rc = loom_init(&n, &argc, &argv);
    if (rc) {
        fprintf(stderr, "loop_mf: cannot join the job: %s\n", loom_strerror(rc));
        return 1;
    }
    if (!loom_is_worker(n)) return loom_serve(n) ? 1 : 0;
    const char *path = NULL;
    int passes = 10, shuffle = 1;
    double decay = 0.95, test_fraction = 0.1;
    run r = {16, 1, 0.03, 0.1, 0.1, 0};
    double lr0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-shuffle"))
            shuffle = 0;
        else if (!v)
            return usage();
        else if (!strcmp(a, "--train"))
            path = v, i++;
        else if (!strcmp(a, "--passes"))
            passes = atoi(v), i++;
        else if (!strcmp(a, "--rank"))
            r.rank = (uint32_t)atoi(v), i++;
        else if (!strcmp(a, "--lr"))
            r.lr = atof(v), i++;
        else if (!strcmp(a, "--decay"))
            decay = atof(v), i++;
        else if (!strcmp(a, "--reg"))
            r.reg = atof(v), i++;
        else if (!strcmp(a, "--test-fraction"))
            test_fraction = atof(v), i++;
        else if (!strcmp(a, "--seed"))
            r.seed = strtoull(v, NULL, 10), i++;
        else
            return usage();
    }
    if (!path || passes < 1 || r.rank < 1) return usage();
    lr0 = r.lr;
    int W = loom_num_workers(n), me = loom_rank(n);
    loom_ratings_opts ro = LOOM_RATINGS_OPTS_DEFAULT;
    loom_ratings *data;
    char err[512];
    if ((rc = loom_ratings_read(path, me, W, &ro, &data, err, sizeof err))) {
        fprintf(stderr, "loop_mf: %s\n", err);
        return 1;
    }
    /* the permuted numbering, the split, the training mean */
    size_t *uperm = malloc(data->users * sizeof *uperm),
           *iperm = malloc(data->items * sizeof *iperm);
    int64_t *idx = malloc(2 * (data->n + 1) * sizeof *idx),
            *tidx = malloc(2 * (data->n + 1) * sizeof *tidx);
    double *val = malloc((data->n + 1) * sizeof *val), *tval = malloc((data->n + 1) * sizeof *tval);
    if (!uperm || !iperm || !idx || !tidx || !val || !tval) return 1;
    mf_permutation(r.seed, (uint64_t)1 << 41, data->users, uperm);
    mf_permutation(r.seed, (uint64_t)1 << 42, data->items, iperm);
    size_t ntrain = 0, ntest = 0;
    double mine[2] = {0, 0}, all[2];
    for (size_t k = 0; k < data->n; k++) {
        int64_t u = shuffle ? (int64_t)uperm[data->user[k]] : data->user[k];
        int64_t i = shuffle ? (int64_t)iperm[data->item[k]] : data->item[k];
        if (mf_is_test(r.seed, data->line[k], test_fraction)) {
            tidx[2 * ntest] = u, tidx[2 * ntest + 1] = i, tval[ntest++] = data->rating[k];
        } else {
            idx[2 * ntrain] = u, idx[2 * ntrain + 1] = i, val[ntrain++] = data->rating[k];
            mine[0] += data->rating[k], mine[1] += 1;
        }
    }
    app_stats mean_t, eval_t;
    if ((rc = app_stats_open(n, "loop_mf.mean", 2, &mean_t)) ||
        (rc = app_stats_open(n, "loop_mf.eval", 2, &eval_t)) ||
        (rc = app_stats_add(&mean_t, 0, mine)) || (rc = loom_barrier(n)) ||
        (rc = app_stats_read(&mean_t, 0, all)))
        return 1;
    r.mean = all[0] / all[1];

    const loom_access acc[] = {
        {RATINGS, 0, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}}, /* ratings(u, i) */
        {USERS, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB_EVERY}},   /* U(u, *) */
        {ITEMS, 1, 2, {LOOM_SUB(1, 0), LOOM_SUB_EVERY}},   /* I(i, *) */
    };
    const uint64_t ext[2] = {data->users, data->items};
    const loom_loop_array arrays[] = {
        {USERS, "loop_mf.users", data->users, r.rank + 1, LOOM_F64, init_row},
        {ITEMS, "loop_mf.items", data->items, r.rank + 1, LOOM_F64, init_row},
    };
    loom_loop_opts o = {.dims = 2,
                        .extents = ext,
                        .acc = acc,
                        .nacc = 3,
                        .arrays = arrays,
                        .narrays = 2,
                        .indices = idx,
                        .values = val,
                        .n = ntrain,
                        .body = body,
                        .user = &r};
    loom_loop *l;
    double t0 = app_now_s();
    if ((rc = loom_loop_open(n, &o, &l, err, sizeof err))) {
        fprintf(stderr, "loop_mf: %s\n", err);
        return 1;
    }
    if (me == 0)
        fprintf(stderr, "loop_mf: %s; %zu training ratings here, %.2f s to open\n",
                loom_loop_plan_explain(loom_loop_get_plan(l)), loom_loop_elements(l),
                app_now_s() - t0);
    size_t width = r.rank + 1;
    double *urows = malloc((ntest + 1) * width * sizeof *urows);
    double *irows = malloc((ntest + 1) * width * sizeof *irows);
    uint64_t *keys = malloc((ntest + 1) * sizeof *keys);
    if (!urows || !irows || !keys) return 1;
    for (int p = 0; p < passes; p++) {
        double ts = app_now_s();
        r.lr = mf_epoch_lr(lr0, decay, p);
        if ((rc = loom_loop_run(l, 1))) break;
        double pass_s = app_now_s() - ts;
        /* test RMSE: this worker's test ratings against the rows as the tables hold them */
        for (size_t k = 0; k < ntest; k++) keys[k] = (uint64_t)tidx[2 * k];
        if (ntest && (rc = loom_pull(loom_loop_table(l, USERS), keys, ntest, urows))) break;
        for (size_t k = 0; k < ntest; k++) keys[k] = (uint64_t)tidx[2 * k + 1];
        if (ntest && (rc = loom_pull(loom_loop_table(l, ITEMS), keys, ntest, irows))) break;
        double e[2] = {0, (double)ntest}, tot[2];
        for (size_t k = 0; k < ntest; k++) {
            double pred = mf_dot_predict(r.mean, urows + k * width, irows + k * width, r.rank);
            pred = pred < 0.5 ? 0.5 : pred > 5 ? 5 : pred; /* MovieLens's range, as mf clips */
            e[0] += (tval[k] - pred) * (tval[k] - pred);
        }
        if ((rc = app_stats_add(&eval_t, p, e)) || (rc = loom_barrier(n)) ||
            (rc = app_stats_read(&eval_t, p, tot)))
            break;
        if (me == 0)
            printf("pass %3d  test RMSE %.4f  %.2f s  total %.2f s\n", p + 1, sqrt(tot[0] / tot[1]),
                   pass_s, app_now_s() - t0);
        fflush(stdout);
    }
    if (rc) fprintf(stderr, "loop_mf: %s\n", loom_strerror(rc));
    loom_loop_close(l);
    loom_ratings_free(data);
    free(uperm), free(iperm), free(idx), free(tidx), free(val), free(tval);
    free(urows), free(irows), free(keys);
    return rc ? 1 : loom_finalize(n) ? 1 : 0;
}
