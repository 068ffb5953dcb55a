/* mlr: multiclass (softmax) logistic regression on Loom, trained on the
 * parameter server (--mode ps) or by sufficient-vector broadcasting between
 * the workers (--mode svb, Orpheus: xie-orpheus.txt; include/loom/svb.h).
 *
 * --mode reduce averages whole replicas with neighbours in a communication
 * graph after every local step instead (stochastic reduce, include/loom/p2p.h).
 *
 * The model is a (D + 1) x K matrix W, feature-major: row j holds the K
 * class weights of feature j, row D those of the bias (a feature of value 1
 * in every example). p = softmax(W^T x). Its per-example SGD update is the
 * outer product of two vectors, u = -(lr / n) (p - t) (K values, t the
 * one-hot label) and v = x (the example's sparse features and the bias):
 * what SV broadcasting sends instead of the update.
 *
 * Pieces, one file each:
 *   model.c  the model file (save, load), the softmax residual, prediction, metrics
 *   gen.c    synthetic data: K classes, sparse features, planted weights
 *   seq.c    the sequential reference (tests compare one-worker jobs to it)
 *   flags.c  the command line of `loom train mlr`
 *   train.c  the distributed trainer: --mode ps and --mode svb
 *   cli.c    `loom gen mlr` and `loom predict mlr` */
#ifndef LOOM_APPS_MLR_H
#define LOOM_APPS_MLR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <loom/data.h>

#include "common/app.h"

/* The most classes and features: labels are class ids 0..K-1 (K - 1 at most
 * MLR_MAX_CLASSES - 1), and the replica of --mode svb is dense. */
#define MLR_MAX_CLASSES 65536u
#define MLR_MAX_DIM     ((uint64_t)1 << 28)

/* ---- model ---- */

typedef struct mlr_model {
    uint32_t classes; /* K */
    uint64_t dim;     /* D: features 0..D-1; row D is the bias */
    double *w;        /* (D + 1) * K, feature-major */
} mlr_model;

/* Text file (docs/MLR.md), through apps/common/modelfile:
 *   "loom-mlr 1 dim=<(D+1)K> nnz=<N> classes=<K>", then "<j K + k> <weight>"
 *   for every weight that is not +0.0, %.17g (a round trip is exact).
 * The loader checks everything and reports "FILE:LINE: what is wrong". */
int mlr_model_save(const mlr_model *m, const char *path, char *err, size_t errlen);
int mlr_model_load(const char *path, mlr_model *m, char *err, size_t errlen);
void mlr_model_free(mlr_model *m);

/* Class ids of a dataset read with LOOM_LABELS_REAL: every label must be a
 * whole number from 0 to MLR_MAX_CLASSES - 1. Returns the number of the
 * first bad row + 1 (0: all good); *classes gets 1 + the largest label. */
size_t mlr_check_labels(const loom_dataset *d, uint32_t *classes);

/* Scores s = W^T x of example i (features >= dim count as 0): K values.
 * Returns the highest-scoring class (the lowest id among ties). */
uint32_t mlr_scores(const double *w, uint32_t classes, uint64_t dim, const loom_dataset *d,
                    size_t i, double *s);

/* Turns scores s into p - t (softmax minus the one-hot label), in place, and
 * returns -log p(label): what the gradient and the objective need. */
double mlr_residual(double *s, uint32_t classes, uint32_t label);

typedef struct mlr_metrics {
    size_t n;
    double logloss;  /* mean -log p(label) */
    double accuracy; /* fraction whose highest-scoring class is the label */
} mlr_metrics;

/* Metrics of W on d (labels as checked by mlr_check_labels; a label >= K
 * scores as a miss with p = 0, logloss counted as 745, exp's underflow). */
int mlr_evaluate(const mlr_model *m, const loom_dataset *d, mlr_metrics *out);

/* ---- synthetic data ---- */

typedef struct mlr_gen_opts {
    uint64_t rows, features;
    uint32_t classes, nnz; /* nnz: distinct features per row */
    uint64_t seed;
    double signal; /* planted weight scale: larger is easier */
} mlr_gen_opts;

#define MLR_GEN_OPTS_DEFAULT                                                                       \
    {                                                                                              \
        10000, 1000, 10, 20, 1, 3.0                                                                \
    }

/* LIBSVM rows "c j:1 ..." (1-based ids ascending, class ids 0..K-1) into out;
 * see gen.c for the model. planted (if not NULL) receives the planted W. */
int mlr_generate(const mlr_gen_opts *o, FILE *out, mlr_model *planted, char *err, size_t errlen);

/* ---- training ---- */

typedef enum { MLR_MODE_PS = 0, MLR_MODE_SVB = 1, MLR_MODE_REDUCE = 2 } mlr_mode;

/* How a minibatch's gradient G moves W. sgd: W -= lr G. adagrad: per weight,
 * n += g^2, w -= lr g / (sqrt(n) + MLR_ADAGRAD_EPS): in --mode ps the
 * servers' "adagrad" updater, in --mode reduce each worker on its replica, in
 * --mode svb every replica per worker's clock (loom_svb_adagrad_step). Plain SGD needs a
 * learning rate tuned to the data set (sector wants some 50, letter 2);
 * AdaGrad's steps follow each weight's own gradients, so one default serves
 * both (docs/MLR.md). */
typedef enum { MLR_SGD = 0, MLR_ADAGRAD = 1 } mlr_updater;
/* The table's default eps (include/loom/table.h), which loom_svb_adagrad_step
 * (include/loom/svb.h) also adds: the step every mode and the reference take. */
#define MLR_ADAGRAD_EPS 1e-8
/* The default learning rates, chosen on sector and letter (docs/MLR.md). */
#define MLR_LR_ADAGRAD      0.5
#define MLR_LR_ADAGRAD_TEXT "0.5"
#define MLR_LR_SGD          0.5
#define MLR_LR_SGD_TEXT     "0.5"

typedef struct mlr_train_opts {
    mlr_mode mode;
    int consistency, staleness; /* loom_consistency; SSP's bound, in clocks (minibatches) */
    mlr_updater updater;
    double lr;
    double l2;          /* ps, reduce: L2 weight of the mean loss's objective; < 0: 1 / rows */
    uint32_t minibatch; /* rows per minibatch per worker; one minibatch per clock */
    int epochs;
    uint64_t seed;
    /* svb only (include/loom/svb.h) */
    uint32_t select;   /* SVs sent per clock (SV selection); 0: all */
    uint32_t peers;    /* random multicast: peers per clock; 0: all */
    uint32_t average;  /* exact averaging every R clocks; 0: never */
    uint32_t rotate;   /* replica rotation every S clocks; 0: never */
    const char *svlog; /* the SV checkpoint log (NULL: none) */
    int64_t rollback;  /* with svlog: restore this clock at the end and save that model (-1: no) */
    /* reduce only (include/loom/p2p.h) */
    const char *graph; /* loom_graph_build's spec */
    int sync;          /* a loom_sync */
} mlr_train_opts;

#define MLR_TRAIN_OPTS_DEFAULT                                                                     \
    {                                                                                              \
        MLR_MODE_PS, 2 /* LOOM_BSP */, 0, MLR_ADAGRAD, 0.5, -1, 100, 10, 1, 0, 0, 0, 0, NULL, -1,  \
            "allreduce", 0                                                                         \
    }

/* The order a worker visits its rows in an epoch (a seeded permutation). */
void mlr_epoch_order(uint64_t seed, int rank, int epoch, size_t rows, size_t *order);

/* Minibatch b of nbatches over rows (every worker runs nbatches per epoch):
 * positions [lo, hi) of its epoch order. */
void mlr_batch_range(size_t rows, size_t nbatches, size_t b, size_t *lo, size_t *hi);

/* ---- what the trainer and the reference compute alike (seq.c) ---- */

/* p - t of rows[0..n) of d under w, into r (n x K); *loss gets the sum of
 * their -log p(label). */
void mlr_batch_residuals(const double *w, uint32_t classes, uint64_t dim, const loom_dataset *d,
                         const size_t *rows, size_t n, double *r, double *loss);

/* The v's of a minibatch: row q's at idx/val [off[q], off[q + 1]): its
 * features below dim, then the bias (id dim, value 1). */
typedef struct mlr_svs {
    uint64_t *idx;
    float *val;
    size_t *off;
    size_t cap, rows_cap;
} mlr_svs;
int mlr_svs_build(mlr_svs *s, const loom_dataset *d, const size_t *rows, size_t n, uint64_t dim);
void mlr_svs_free(mlr_svs *s);

/* The distinct ids of the v's of rows [0, n), in order of first use, into
 * keys; seen: a (dim + 1) scratch of zeros, left zero. Returns how many. */
size_t mlr_svs_keys(const mlr_svs *v, size_t n, uint8_t *seen, uint64_t *keys);
/* --mode ps: g += sum_q (scale r_q) v_q^T over a dense (dim + 1) x K g. */
void mlr_ps_accumulate(double *g, uint32_t classes, const mlr_svs *v, size_t n, const double *r,
                       double scale);
/* L2 regularisation of a minibatch's rows keys[0..nk) (not the bias, row
 * dim): g_j += coef w_j, with coef = l2 for a gradient, -lr l2 for an SGD
 * step. Lazy, as in sparse SGD: a minibatch decays only the rows it touches. */
void mlr_l2_rows(double *g, const double *w, uint32_t classes, const uint64_t *keys, size_t nk,
                 uint64_t dim, double coef);

/* Which of the n SVs (residuals r, n x K) a worker applies and sends at a
 * clock: all, or with --select C the C that loom_svb_select picks (seeded
 * by seed, rank and clock). Indices ascending into chosen; returns how
 * many, or 0 when memory runs out. */
size_t mlr_svs_choose(const mlr_train_opts *o, int rank, uint64_t clock, const double *r,
                      uint32_t classes, const mlr_svs *s, size_t n, size_t *chosen);

/* u of SV q: -(lr / c) (p - t) rounded to float, c the SVs chosen; with
 * AdaGrad the gradient (p - t) / c, which the replicas apply at rate lr. */
void mlr_sv_u(const mlr_train_opts *o, size_t c, const double *r, uint32_t classes, float *u);

/* The sequential reference: one worker's run of the same mode, in this
 * process, with the same arithmetic in the same order, so a one-worker BSP
 * job ends with exactly this W (tests/mlr). out->w is allocated. */
int mlr_train_sequential(const mlr_train_opts *o, const loom_dataset *train, uint32_t classes,
                         uint64_t dim, mlr_model *out);

typedef struct mlr_cli {
    app_job job;
    mlr_train_opts train;
    loom_libsvm_opts data;
} mlr_cli;

/* Parse `loom train mlr` flags into *cli, an mlr_cli (app_parse_fn): 0, or 2
 * with a sentence in err. */
int mlr_parse_flags(int argc, char **argv, void *cli, char *err, size_t errlen);
void mlr_train_help(FILE *out);
/* The distributed trainer, run by every node of the job (cli: an mlr_cli). */
int mlr_train_node(const void *cli);

/* ---- `loom gen mlr` and `loom predict mlr` (cli.c) ---- */

int mlr_gen_main(int argc, char **argv);
int mlr_predict_main(int argc, char **argv);
void mlr_gen_help(FILE *out);
void mlr_predict_help(FILE *out);

#endif
