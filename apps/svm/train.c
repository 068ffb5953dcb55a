/* train: `loom train svm` on every worker of a (usually serverless) job.
 *
 * Each worker reads its share of the training file and trains a whole replica by SGD
 * (sgd.c). Every epoch it makes the same number R of reduces as every other worker (R =
 * ceil(largest share / --batch), spread evenly over its own rows): stochastic reduce over
 * --graph under --sync (include/loom/p2p.h), so BSP and NOTIFY-ACK never wait for a round
 * a peer will not make. What the workers must agree on before that (the model's dimension,
 * the largest share) they agree on with one all-reduce round of their own, so the job needs
 * no server at all.
 *
 * Worker 0 reports: at start the graph and its spectral gap; after each epoch its own
 * replica's test accuracy, its mean hinge loss over the epoch's rows and the model bytes it
 * sent; at the end it saves its replica (--model-out). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "svm/svm.h"

#define PROG "loom train svm"

/* Every worker's share size and largest feature id, averaged by one all-reduce BSP round
 * (a vector with one slot per worker: worker r fills slot r, the average times W is every
 * slot's value); *dim and *rounds get the job-wide maxima. */
static int agree(loom_node *n, const loom_dataset *d, uint64_t *dim, size_t *max_rows)
{
    int w = loom_num_workers(n), rank = loom_rank(n);
    loom_graph *all;
    loom_reducer *r;
    float *v = calloc(2 * (size_t)w, sizeof *v);
    int rc = v ? loom_graph_build("allreduce", w, &all) : LOOM_ENOMEM;
    if (rc) {
        free(v);
        return rc;
    }
    v[rank] = (float)d->max_feature;
    v[w + rank] = (float)d->rows;
    rc = loom_reducer_open(n, all, LOOM_SYNC_BSP, 1, 2 * (size_t)w, &r);
    if (!rc) rc = loom_reduce(r, v);
    if (!rc) rc = loom_reducer_close(r);
    *dim = 0, *max_rows = 0;
    for (int k = 0; !rc && k < w; k++) { /* exact: integers below 2^24, rounded */
        uint64_t f = (uint64_t)llround((double)v[k] * w),
                 rows = (uint64_t)llround((double)v[w + k] * w);
        if (f > *dim) *dim = f;
        if (rows > *max_rows) *max_rows = (size_t)rows;
    }
    loom_graph_free(all);
    free(v);
    return rc;
}

typedef struct report {
    FILE *metrics;
    const loom_dataset *test;
    double start;
} report;

static int epoch_report(const svm_cli *c, report *rep, int epoch, svm_replica *m, double hinge,
                        uint64_t bytes)
{
    double acc = rep->test ? svm_accuracy(m, rep->test) : NAN;
    double time_s = app_now_s() - rep->start;
    if (!c->job.quiet) {
        char testpart[64] = "";
        if (rep->test) snprintf(testpart, sizeof testpart, "  test accuracy %.3f%%", acc);
        fprintf(stderr, "epoch %3d  train hinge %.5f%s  sent %.3f MB  %.2f s\n", epoch + 1, hinge,
                testpart, (double)bytes / 1e6, time_s);
    }
    if (rep->metrics) {
        fprintf(rep->metrics, "{\"epoch\": %d, \"time_s\": %.3f, \"train_hinge\": %.9g, ",
                epoch + 1, time_s, hinge);
        if (rep->test)
            fprintf(rep->metrics, "\"test_accuracy\": %.9g, ", acc);
        else
            fprintf(rep->metrics, "\"test_accuracy\": null, ");
        fprintf(rep->metrics, "\"bytes_sent\": %" PRIu64 "}\n", bytes);
        if (app_metrics_flush(PROG, rep->metrics, c->job.metrics_path)) return 1;
    }
    if (!isfinite(hinge)) {
        fprintf(stderr,
                PROG ": the hinge loss is %g after epoch %d: training diverged (try a "
                     "smaller --lr)\n",
                hinge, epoch + 1);
        return 1;
    }
    return 0;
}

/* Benchmarks (--slow, --straggle): a slowed round's steps take twice their time. The worker
 * sleeps as long as they took rather than computing them twice: on a machine whose cores all
 * the workers share, extra arithmetic would take CPU from the others and slow them too,
 * while a slow machine of a cluster slows only itself. */
static void slow_round(double steps_s)
{
    struct timespec ts = {(time_t)steps_s, (long)((steps_s - (double)(time_t)steps_s) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

/* The epochs, once the replica, the graph and the reducer are ready. */
static int train_epochs(const svm_cli *c, loom_node *n, const loom_dataset *d, size_t max_rows,
                        svm_replica *m, loom_reducer *red, report *rep)
{
    const svm_opts *o = &c->train;
    int rank = loom_rank(n);
    size_t rounds = (max_rows + o->batch - 1) / o->batch;
    if (rounds == 0) rounds = 1;
    size_t *order = malloc((d->rows ? d->rows : 1) * sizeof *order);
    if (!order) return app_fail(PROG, "rows", LOOM_ENOMEM);
    /* --straggle: one draw per round, from the worker's own stream of the seed (a stream
     * number no epoch's row order uses), so a run's slowed rounds are the same in every mode. */
    app_rng straggler;
    app_rng_seed(&straggler, o->seed, ((uint64_t)rank << 32) | UINT32_MAX);
    int rc = 0;
    for (int e = 0; e < o->epochs && !rc; e++) {
        svm_epoch_order(o->seed, rank, e, d->rows, order);
        double hinge = 0;
        for (size_t k = 0; k < rounds && !rc; k++) {
            /* Round k covers this share's rows [k rows / R, (k + 1) rows / R). */
            size_t lo = k * d->rows / rounds, hi = (k + 1) * d->rows / rounds;
            int slowed = rank == o->slow || app_rng_uniform(&straggler) < o->straggle;
            double start = app_now_s();
            for (size_t i = lo; i < hi; i++) hinge += svm_step(m, o, d, order[i]);
            svm_materialise(m);
            if (slowed) slow_round(app_now_s() - start);
            int err = loom_reduce(red, m->v);
            if (err) rc = app_fail(PROG, "stochastic reduce", err);
        }
        if (!rc && rank == 0) {
            loom_reducer_stats st;
            loom_reducer_stats_get(red, &st);
            rc = epoch_report(c, rep, e, m, d->rows ? hinge / (double)d->rows : 0, st.bytes_sent);
        }
    }
    free(order);
    return rc;
}

static int svm_worker(loom_node *n, const void *arg)
{
    const svm_cli *c = arg;
    int rank = loom_rank(n), workers = loom_num_workers(n);
    char err[512];
    loom_dataset *d = NULL, *test = NULL;
    int rc = loom_libsvm_read(c->job.train_path, rank, workers, &c->data, &d, err, sizeof err);
    if (rc) {
        fprintf(stderr, PROG ": %s\n", err);
        return 1;
    }
    if (rank == 0 && c->job.test_path &&
        loom_libsvm_read(c->job.test_path, 0, 1, &c->data, &test, err, sizeof err)) {
        fprintf(stderr, PROG ": %s\n", err);
        loom_dataset_free(d);
        return 1;
    }
    uint64_t dim = 0;
    size_t max_rows = 0;
    loom_graph *g = NULL;
    loom_reducer *red = NULL;
    svm_replica m = {0};
    report rep = {.test = test, .start = app_now_s()};
    rc = agree(n, d, &dim, &max_rows);
    if (rc) {
        rc = app_fail(PROG, "agreeing on the model's size", rc);
    } else if (max_rows == 0) {
        app_fail_together(n, PROG ": %s has no examples", c->job.train_path);
        rc = 1;
    } else if (dim > SVM_MAX_DIM) {
        app_fail_together(n,
                          PROG ": feature ids up to %" PRIu64 ", beyond the %" PRIu64
                               " features of an SVM replica",
                          dim, SVM_MAX_DIM);
        rc = 1;
    } else if ((rc = loom_graph_build(c->train.graph, workers, &g))) {
        rc = app_fail(PROG, "--graph", rc);
    } else if (svm_replica_init(&m, dim)) {
        rc = app_fail(PROG, "the replica", LOOM_ENOMEM);
    } else if ((rc = loom_reducer_open(n, g, c->train.sync, c->train.window, (size_t)dim + 1,
                                       &red))) {
        rc = app_fail(PROG, "stochastic reduce", rc);
    }
    if (!rc && rank == 0) {
        int in = loom_graph_in_degree(g, 0), out = loom_graph_out_degree(g, 0);
        fprintf(stderr,
                PROG ": graph %s on %d workers: in-degree %d, out-degree %d, spectral gap %.6f; "
                     "sync %s\n",
                c->train.graph, workers, in, out, loom_graph_spectral_gap(g),
                loom_sync_name(c->train.sync));
        if (!loom_graph_regular(g))
            fprintf(stderr,
                    PROG ": warning: graph %s is not regular, so its averaging is not "
                         "doubly stochastic: the replicas agree on a weighted average, "
                         "not the plain one\n",
                    c->train.graph);
        if (test) svm_warn_unknown_features(PROG, c->job.test_path, &m, test);
        if (c->job.metrics_path && !(rep.metrics = fopen(c->job.metrics_path, "w"))) {
            fprintf(stderr, PROG ": cannot write %s: %s\n", c->job.metrics_path, strerror(errno));
            rc = 1;
        }
    }
    /* W workers step side by side: the learning rate follows the rows the whole job has
     * seen, as the sequential reference's does. */
    m.t_step = (uint64_t)workers;
    if (!rc) rc = train_epochs(c, n, d, max_rows, &m, red, &rep);
    if (red) {
        int crc = loom_reducer_close(red);
        if (crc && !rc) rc = app_fail(PROG, "closing stochastic reduce", crc);
    }
    if (!rc && rank == 0 && c->job.model_path &&
        svm_model_save(&m, c->job.model_path, err, sizeof err)) {
        fprintf(stderr, PROG ": %s\n", err);
        rc = 1;
    }
    if (rep.metrics) fclose(rep.metrics);
    svm_replica_free(&m);
    loom_graph_free(g);
    loom_dataset_free(test);
    loom_dataset_free(d);
    return rc;
}

int svm_train_node(const void *cli)
{
    return app_node_main(PROG, svm_worker, cli);
}
