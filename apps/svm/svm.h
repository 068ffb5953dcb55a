/* svm: linear support vector machine by SGD on stochastic reduce (ASAP's SVM, after Bottou's
 * SVM-SGD), the first application of the serverless p2p layer (include/loom/p2p.h).
 *
 * Pieces, one file each:
 *   sgd.c    what a number depends on, shared by the trainer and the reference: the hinge
 *            step with L2 decay (a scaled vector, so a step costs the row's non-zeros), the
 *            row order, the margin and the accuracy
 *   train.c  the distributed trainer: every worker trains a replica on its share and, after
 *            every --batch rows, averages it with its in-neighbours' (--graph, --sync)
 *   seq.c    the sequential reference: the same steps over the whole file in one process
 *   flags.c  the command line of `loom train svm`
 *   cli.c    the model file and `loom predict svm`
 * docs/SVM.md says how to use it. */
#ifndef LOOM_APPS_SVM_H
#define LOOM_APPS_SVM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <loom/data.h>
#include <loom/p2p.h>

#include "common/app.h"

/* The most features a model has: a replica is dense on every worker, and one message. */
#define SVM_MAX_DIM ((uint64_t)1 << 24)

typedef struct svm_opts {
    double lr;      /* eta_0 of eta_t = eta_0 / (1 + eta_0 l2 t) */
    double l2;      /* lambda */
    uint32_t batch; /* rows between two reduces */
    int epochs;
    uint64_t seed;
    const char *graph; /* loom_graph_build spec */
    loom_sync sync;
    int window; /* NOTIFY-ACK's rounds in flight per edge */
    /* Benchmarks: a slowed round takes twice its time (train.c). */
    int slow;        /* the rank slowed in every round; -1: none */
    double straggle; /* each worker's probability of being slowed in a round (seeded) */
} svm_opts;

#define SVM_OPTS_DEFAULT                                                                           \
    {                                                                                              \
        0.01, 1e-4, 64, 10, 1, "expander", LOOM_SYNC_NOTIFY_ACK, LOOM_REDUCE_WINDOW_DEFAULT, -1, 0 \
    }

/* A replica: w (dim weights, then the bias at w[dim]) = scale * v. */
typedef struct svm_replica {
    uint64_t dim;
    float *v;
    double scale;
    uint64_t t;      /* the learning rate's clock: rows seen by the whole job, as far as known */
    uint64_t t_step; /* what a step adds to t: 1 alone; W when W workers step side by side */
} svm_replica;

int svm_replica_init(svm_replica *r, uint64_t dim);
void svm_replica_free(svm_replica *r);
/* One SGD step on row i of d: decay by (1 - eta l2), then, if y (w.x + b) < 1, add eta y x
 * (and eta y to the bias). Returns the row's hinge loss before the step. */
double svm_step(svm_replica *r, const svm_opts *o, const loom_dataset *d, size_t i);
/* Fold the scale into v, so that v is the model (before it is sent or saved). */
void svm_materialise(svm_replica *r);
/* w.x + b of row i (features >= dim weigh 0); w is the model (scale folded or not). */
double svm_margin(const svm_replica *r, const loom_dataset *d, size_t i);
/* Where d has values of features >= r->dim (a test file with features the training data
 * never had), says once on stderr, as "PROG: warning: PATH: ...", how many values in how
 * many rows, and that they weigh 0, rather than ignoring them unsaid. Returns how many. */
size_t svm_warn_unknown_features(const char *prog, const char *path, const svm_replica *r,
                                 const loom_dataset *d);
/* Percentage of rows whose margin has the label's sign (margin 0 counts as -1). */
double svm_accuracy(const svm_replica *r, const loom_dataset *d);
/* The order a worker visits its rows in an epoch (a seeded permutation). */
void svm_epoch_order(uint64_t seed, int rank, int epoch, size_t rows, size_t *order);

/* The sequential reference: o->epochs passes over all of train in this process, a step per
 * row (no reduce); the model has dim weights and the bias. */
int svm_train_sequential(const svm_opts *o, const loom_dataset *train, uint64_t dim,
                         svm_replica *out);

/* The model file: "loom-svm 1 dim=D nnz=K bias=B", then "id weight" lines (docs/SVM.md). */
int svm_model_save(const svm_replica *r, const char *path, char *err, size_t errlen);
int svm_model_load(const char *path, svm_replica *r, char *err, size_t errlen);

/* Everything `loom train svm` takes on its command line. */
typedef struct svm_cli {
    app_job job;
    svm_opts train;
    loom_libsvm_opts data;
} svm_cli;

void svm_train_help(FILE *out);
/* Flags into *cli, an svm_cli (app_parse_fn). */
int svm_parse_flags(int argc, char **argv, void *cli, char *err, size_t errlen);
/* A node of the job (tools/train.c; cli: an svm_cli); returns the exit status. */
int svm_train_node(const void *cli);

void svm_predict_help(FILE *out);
int svm_predict_main(int argc, char **argv);

#endif
