/* lr: sparse binary logistic regression on Loom (the application of Mu Li's
 * Parameter Server, li-thesis-parameter-server.txt 3.4.1 and chapter 6).
 *
 * Pieces, one file each:
 *   model.c  the model file (save, load) and prediction
 *   eval.c   metrics: logloss, accuracy, AUC
 *   gen.c    synthetic click-log-like data from a planted sparse model
 *   train.c  distributed training: the node, minibatch SGD with a server-side updater
 *   dbpg.c   distributed DBPG's worker and server steps (train_impl.h: what the two share)
 *   seq.c    the sequential reference of the same algorithms (tests compare to it)
 * The `loom` command's train/predict/gen subcommands (tools/) call these. */
#ifndef LOOM_APPS_LR_H
#define LOOM_APPS_LR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <loom/data.h>

#include "common/app.h"

/* ---- model ---- */

/* The most features a model has. The trainer keeps the model as a dense table
 * (on the servers, and on worker 0 for the report), so it refuses a training
 * file with a larger feature id (FILE:LINE), and the loader a larger dim:
 * 2^32 f64 weights are already 32 GB. */
#define LR_MAX_DIM ((uint64_t)1 << 32)
/* The filters of DBPG with --l1 when --filter (pushes) or --filter-pull
 * (replies) is not given (docs/LR.md). */
#define LR_DBPG_FILTERS "keycache,zstd"

/* A linear model over features 0..dim-1 plus a bias: p(y=+1|x) = sigmoid(w.x + bias). */
typedef struct lr_model {
    uint64_t dim;
    double *w; /* dim weights */
    double bias;
} lr_model;

/* Text file, documented in docs/LR.md:
 *   line 1: "loom-lr 1 dim=<D> nnz=<K> bias=<b>"
 *   then K lines "<feature id, 0-based> <weight>" for every non-zero weight, ids ascending,
 *   weights printed with %.17g so a save/load round trip is exact.
 * lr_model_load checks everything and reports "FILE:LINE: what is wrong" in err. */
int lr_model_save(const lr_model *m, const char *path, char *err, size_t errlen);
int lr_model_load(const char *path, lr_model *m, char *err, size_t errlen);
void lr_model_free(lr_model *m);
/* w.x + bias for example i of d (features >= dim count as weight 0). */
double lr_margin(const lr_model *m, const loom_dataset *d, size_t i);

/* ---- metrics ---- */

typedef struct lr_metrics {
    size_t n;
    double logloss;  /* mean -log p(true label) */
    double accuracy; /* fraction with sign(margin) == label (margin 0 counts as -1) */
    double auc;      /* ROC AUC, ties counted half; 0.5 if one class is absent */
} lr_metrics;

/* Metrics of margins against +1/-1 labels (n of each). Returns 0, or -1 when
 * n is 0, a label is not +1/-1, a margin is NaN, or memory runs out. */
int lr_evaluate(const double *margin, const double *label, size_t n, lr_metrics *out);
/* log(1 + exp(-y m)) computed without overflow. */
double lr_logistic_loss(double margin, double label);
double lr_sigmoid(double margin);

/* ---- synthetic data ---- */

typedef struct lr_gen_opts {
    uint64_t rows, features;
    uint32_t nnz; /* non-zeros per row (distinct features) */
    uint64_t seed;
    double zipf;            /* power-law exponent of feature frequencies (click logs: ~1.1) */
    double planted_density; /* fraction of features with a non-zero planted weight */
} lr_gen_opts;

#define LR_GEN_OPTS_DEFAULT                                                                        \
    {                                                                                              \
        100000, 100000, 30, 1, 1.1, 0.1                                                            \
    }

/* Write rows to out in LIBSVM format (1-based ids, labels +1/-1, values 1),
 * labels drawn from the logistic model of a planted sparse weight vector.
 * Deterministic for a seed. If planted is not NULL it receives the planted
 * model (for tests). Reports progress on stderr when progress != 0. */
int lr_generate(const lr_gen_opts *o, FILE *out, lr_model *planted, int progress, char *err,
                size_t errlen);

/* A planted term beyond the linear model (apps/fm: pairwise interactions):
 * term(ids, nnz, user) of a row's ids (ascending), scaled so that its
 * standard deviation over the calibration's pilot rows is std, is added to
 * the row's margin before its label is drawn (the bias is calibrated with
 * it). It must compute with +, -, * and / only, for gen.c's determinism. */
typedef struct lr_gen_extra {
    double (*term)(const uint64_t *ids, uint32_t nnz, void *user);
    void *user;
    double std;
} lr_gen_extra;

/* lr_generate with an extra term (NULL: none, lr_generate itself); progress:
 * the command that reports progress on stderr ("loom gen fm"), NULL for none. */
int lr_generate_extra(const lr_gen_opts *o, const lr_gen_extra *extra, FILE *out, lr_model *planted,
                      const char *progress, char *err, size_t errlen);

/* ---- training ---- */

typedef enum { LR_ALGO_SGD = 0, LR_ALGO_DBPG = 1 } lr_algo;
typedef enum { LR_UPD_SGD = 0, LR_UPD_ADAGRAD = 1, LR_UPD_FTRL = 2 } lr_updater;

typedef struct lr_train_opts {
    lr_algo algo;
    lr_updater updater; /* SGD only: the server-side optimiser */
    int consistency;    /* SGD: a loom_consistency; DBPG uses SSP with staleness `delay` */
    int staleness;      /* SSP staleness, in minibatches (SGD) */
    int delay;          /* DBPG: bounded delay tau, in steps */
    int blocks;         /* DBPG: number of key blocks */
    double lr, l1, l2;
    uint32_t minibatch; /* SGD: rows per minibatch (per worker) */
    int epochs;
    uint64_t seed;
    int threads; /* compute threads per worker (--threads; SGD: lanes, see train.c) */
} lr_train_opts;

#define LR_TRAIN_OPTS_DEFAULT                                                                      \
    {                                                                                              \
        LR_ALGO_SGD, LR_UPD_ADAGRAD, 1 /* LOOM_SSP */, 2, 2, 64, 0.1, 0, 0, 100, 10, 1, 1          \
    }

/* --l2 under minibatch SGD: what a worker adds to its pushed gradient of a
 * feature's weight w (not the bias) when the feature was last pushed k >= 1
 * of the worker's minibatches ago (k counts this one): the weight decay of
 * all k steps, paid lazily now instead of touching every weight every step
 * (see seq.c). share_weight is (workers) / (workers whose share has the
 * feature), so the decay per clock is the same for every feature. */
double lr_l2_push(lr_updater u, double lr, double l2, double share_weight, double w, uint64_t k);

/* DBPG's proximal step for one coordinate: w minimising
 * g (w - w0) + u / (2 eta) (w - w0)^2 + l1 |w| + l2 / 2 w^2
 * (u: the curvature bound of lr_dbpg_window; the bias gets l1 = l2 = 0). */
double lr_dbpg_prox(double w0, double g, double u, double eta, double l1, double l2);

/* DBPG's curvature bound. Step t's gradient misses the changes of the delay
 * steps before it, and its block's coordinates move together, so the steps
 * t - delay .. t act as one Jacobi step on the union of their blocks. The
 * pushed curvature of feature j is therefore
 *     u_j = sum_i p_i (1 - p_i) x_ij^2 c_i,
 * c_i = row i's non-zeros (the bias counts as one) in the blocks of those
 * steps: by Cauchy-Schwarz (sum_j x_ij d_j)^2 <= c_i sum_j x_ij^2 d_j^2, so
 * sum_j u_j d_j^2 bounds the loss's second-order change over the window's
 * steps (at the curvature p (1 - p) of the moment), and with eta <= 1 a
 * step cannot overshoot the way a diagonal Newton step on correlated
 * features does. The window slides by one block a step: at step t block
 * t mod B enters it and the block of step t - delay - 1 leaves (-1: none). */
void lr_dbpg_window(int64_t t, int delay, int blocks, int *enter, int *leave);

/* Keys [lo, hi) of DBPG block b of `blocks` over the dim + 1 keys (bias last). */
void lr_dbpg_block(uint64_t dim, int blocks, int b, uint64_t *lo, uint64_t *hi);

/* The order a worker visits its rows in an epoch (a seeded permutation). */
void lr_epoch_order(uint64_t seed, int rank, int epoch, size_t rows, size_t *order);

/* The sequential reference: the same algorithm as a one-worker run of
 * `loom train lr` with o->threads compute threads (same order, same
 * arithmetic), in this process. The model has dim weights (features
 * 0..dim-1) and the bias. */
int lr_train_sequential(const lr_train_opts *o, const loom_dataset *train, uint64_t dim,
                        lr_model *out);

/* Everything `loom train lr` takes on its command line. The job flags
 * (--train, --workers, --consistency, --seed, ...) are in job; parsing copies
 * --consistency and --seed into train, where the algorithms read them. */
typedef struct lr_cli {
    app_job job;
    lr_train_opts train;
    loom_libsvm_opts data;
    int data_parts;      /* --data-parts: 0 a fixed share per worker, -1 auto (4 per worker) */
    double part_timeout; /* --part-timeout, seconds; 0 never */
} lr_cli;

/* Parse `loom train lr` flags into *cli, an lr_cli (its signature is
 * app_parse_fn: tools/models.c calls every model's alike; argv[0] is the
 * command name). Returns 0, or 2
 * with a sentence naming the offending flag in err. Defaults: 2 workers,
 * 1 server, --algo sgd, --updater adagrad, --consistency ssp:2, --lr 0.1
 * (dbpg: 1), --minibatch 100, --epochs 10, --blocks 64, --delay 2, --seed 1. */
int lr_parse_flags(int argc, char **argv, void *cli, char *err, size_t errlen);
/* Its help: every flag, with its range and default (from the parser's table). */
void lr_train_help(FILE *out);

/* The distributed trainer, run by every node of a Loom job (the `loom train
 * lr` program under a launcher), cli an lr_cli. Returns the process exit status. */
int lr_train_node(const void *cli);

/* ---- `loom gen lr` and `loom predict lr` (cli.c) ---- */

int lr_gen_main(int argc, char **argv);
int lr_predict_main(int argc, char **argv);
/* The lr part of `loom help gen` and `loom help predict`. */
void lr_gen_help(FILE *out);
void lr_predict_help(FILE *out);

/* The rows of `loom gen lr`'s flag table that shape the data (LR_GEN_OPTS_DEFAULT's
 * defaults), shared with `loom gen fm`; lr_gen_read_flags reads them. */
#define LR_GEN_FLAGS                                                                               \
    {.name = "--rows",                                                                             \
     .kind = APP_INT,                                                                              \
     .arg = "N",                                                                                   \
     .lo = 1,                                                                                      \
     .hi = UINT64_MAX,                                                                             \
     .def = "100000",                                                                              \
     .help = "number of rows"},                                                                    \
        {.name = "--features",                                                                     \
         .kind = APP_INT,                                                                          \
         .arg = "F",                                                                               \
         .lo = 1,                                                                                  \
         .hi = UINT64_MAX,                                                                         \
         .def = "100000",                                                                          \
         .help = "number of features, ids 1 to F"},                                                \
        {.name = "--nnz",                                                                          \
         .kind = APP_INT,                                                                          \
         .arg = "K",                                                                               \
         .lo = 1,                                                                                  \
         .hi = UINT32_MAX,                                                                         \
         .def = "30",                                                                              \
         .help = "distinct features in every row, at most F"},                                     \
        APP_FLAG_GEN_SEED,                                                                         \
        {.name = "--zipf",                                                                         \
         .kind = APP_NUM,                                                                          \
         .arg = "A",                                                                               \
         .min = 0,                                                                                 \
         .max = 1e6,                                                                               \
         .def = "1.1",                                                                             \
         .help = "power-law exponent of feature popularity; 0 makes all\n"                         \
                 "features equally common"},                                                       \
    {                                                                                              \
        .name = "--density", .kind = APP_NUM, .arg = "P", .min = 0, .max = 1, .def = "0.1",        \
        .help = "fraction of the features with a non-zero planted weight,\n"                       \
                "above 0"                                                                          \
    }                                                                                              \
/* Those flags' values into o, over its defaults: 0, or 2 after a usage error of cmd. */
int lr_gen_read_flags(const char *cmd, const app_flag *flags, size_t n, const app_flag_value *v,
                      lr_gen_opts *o);

/* `loom predict MODEL` for any binary classifier with a margin (lr, fm): its
 * flags, summary line and --out are lr's; the model is the scorer's. */
typedef struct lr_scorer {
    const char *cmd; /* "loom predict lr": the prefix of its messages */
    /* 0 with *model set, or -1 with "FILE:LINE: what is wrong" in err */
    int (*load)(const char *path, void **model, char *err, size_t errlen);
    double (*margin)(const void *model, const loom_dataset *d, size_t i);
    void (*free)(void *model);
    void (*help)(FILE *out);
} lr_scorer;
int lr_predict_run(const lr_scorer *s, int argc, char **argv);
/* The help of such a command: intro (usage, what it prints), then lr's predict flags. */
void lr_predict_help_with(FILE *out, const char *intro);

#endif
