/* fm: factorization machines for click logs on Loom (DiFacto,
 * li-thesis-parameter-server.txt chapter 10; docs/FM.md).
 *
 * The model scores x as
 *     g(x) = b + <w, x> + 1/2 (||V^T x||^2 - sum_i x_i^2 ||V_i||^2),
 * the pairwise interactions sum_{i<j} <V_i, V_j> x_i x_j with a k-vector V_i
 * per feature, and p(y = +1 | x) = sigmoid(g(x)). Under DiFacto's
 * memory-adaptive constraint a feature only has a V_i once it has been seen
 * in more than --threshold rows, and V_i only counts while w_i != 0.
 *
 * Pieces, one file each:
 *   model.c  the model, its margin, the model file and `loom predict fm`
 *   gen.c    `loom gen fm`: lr's click-log generator with planted interactions
 *   flags.c  the command line of `loom train fm`
 *   batch.c  a worker's minibatch: the keys, which V_i it uses, the gradients
 *   train.c  the distributed trainer: tables, the sketch, epochs and reports */
#ifndef LOOM_APPS_FM_H
#define LOOM_APPS_FM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <loom/data.h>

#include "common/app.h"
#include "lr/lr.h"

/* The most features: w is a dense table over them (as lr's). */
#define FM_MAX_DIM ((uint64_t)1 << 32)
/* The most factors per feature (--dim): a V_i is one row of a table. */
#define FM_MAX_FACTORS 1024

/* ---- the model (model.c) ---- */

typedef struct fm_model {
    uint64_t dim; /* features 0..dim-1 */
    uint32_t k;   /* factors per feature */
    double *w;    /* dim weights */
    double bias;
    double *v;       /* dim * k factors, feature-major; a row of zeros: no V_i */
    uint8_t *has_v;  /* per feature: V_i is allocated (a row of v that is not all zero) */
    uint64_t v_rows; /* how many are */
} fm_model;

/* A model of dim features and k factors, every value zero. 0 or -1 (memory). */
int fm_model_init(fm_model *m, uint64_t dim, uint32_t k);
void fm_model_free(fm_model *m);
/* g(x) of row i of d (features >= dim weigh 0): V_i counts where has_v[i] and w_i != 0. */
double fm_margin(const fm_model *m, const loom_dataset *d, size_t i);

/* The model file (docs/FM.md): apps/common's sparse format over the
 * dim (k + 1) + 1 values w_0, V_0, w_1, V_1, ..., bias, with header field
 * factors=k. The loader reports "FILE:LINE: what is wrong". */
int fm_model_save(const fm_model *m, const char *path, char *err, size_t errlen);
int fm_model_load(const char *path, fm_model *m, char *err, size_t errlen);

/* ---- training ---- */

typedef struct fm_train_opts {
    uint32_t k;         /* --dim */
    uint64_t threshold; /* --threshold: V_i once feature i is in more rows than this; 0: always */
    double lr_w, beta, l1, l2; /* FTRL of w (and the bias) */
    double lr_v, l2_v;         /* AdaGrad of V; l2_v: mu, applied when the feature occurs */
    double init;               /* V starts uniform in [-init, init) */
    uint32_t minibatch;
    int epochs;
    uint64_t seed;
    int consistency, staleness;
    uint32_t sketch_depth;
    uint64_t sketch_width;
} fm_train_opts;

#define FM_TRAIN_OPTS_DEFAULT                                                                      \
    {                                                                                              \
        16, 50, 0.1, 1, 0, 0, 0.03, 1e-3, 0.01, 100, 10, 1, 1 /* LOOM_SSP */, 2, 4, 1u << 20       \
    }

/* Everything `loom train fm` takes on its command line. */
typedef struct fm_cli {
    app_job job;
    fm_train_opts train;
    loom_libsvm_opts data;
    int data_parts;      /* --data-parts: 0 a fixed share per worker, -1 auto (4 per worker) */
    double part_timeout; /* --part-timeout, seconds; 0 never */
} fm_cli;

void fm_train_help(FILE *out);
/* Flags into *cli, an fm_cli (app_parse_fn): 0, APP_FLAGS_HELP or 2. */
int fm_parse_flags(int argc, char **argv, void *cli, char *err, size_t errlen);
/* A node of the job (cli: an fm_cli); returns the exit status. */
int fm_train_node(const void *cli);

/* ---- a worker's minibatch (batch.c) ---- */

/* What a worker keeps between minibatches, per feature of its share. */
typedef struct fm_share {
    const loom_dataset *d;
    uint64_t dim;
    uint32_t k;
    uint64_t *keys; /* the share's distinct features, ascending */
    size_t nkeys;
    uint32_t *col;     /* per non-zero: its feature's index in keys */
    uint8_t *frequent; /* the sketch said: seen in more than threshold rows (counts only grow) */
    uint8_t *counted;  /* V_i was pushed at least once by this worker (fm.vrows has it) */
    /* The minibatch: per key the last batch that used it and where. */
    uint32_t *stamp, *slot, batch;
} fm_share;

int fm_share_init(fm_share *s, const loom_dataset *d, uint64_t dim, uint32_t k);
void fm_share_free(fm_share *s);

/* One minibatch's keys and values. J: the batch's features in order of first
 * use, then the bias; A: the features of J whose V_i is used (frequent and
 * w_i != 0), in J's order. */
typedef struct fm_batch {
    uint64_t *keys;  /* J */
    uint32_t *cols;  /* their index in the share's keys (the bias: nkeys) */
    int64_t *counts; /* rows of the batch holding each */
    double *w, *gw;  /* pulled w_J, its gradient */
    size_t nj;
    uint64_t *vkeys; /* A */
    uint32_t *vslot; /* per key of J: its index in A, or UINT32_MAX */
    double *v, *gv;  /* pulled V_A (k each), its gradient */
    size_t na;
    double *sum; /* k: V^T x of the row */
    size_t cap;
} fm_batch;

void fm_batch_free(fm_batch *b);
/* J and the counts of rows order[0..n) of the share (b->w, b->v not filled). */
int fm_batch_keys(fm_share *s, const size_t *order, size_t n, fm_batch *b);
/* A from J, the pulled w_J and the share's frequent[] (threshold 0: all of J). */
void fm_batch_active(fm_share *s, fm_batch *b, uint64_t threshold);
/* The mean gradients of the rows' logistic loss into gw, gv (plus l2_v V_A),
 * from the pulled w_J and V_A; returns the rows' summed loss. */
double fm_batch_gradient(const fm_share *s, const size_t *order, size_t n, double l2_v,
                         fm_batch *b);

/* ---- `loom gen fm` and `loom predict fm` ---- */

int fm_gen_main(int argc, char **argv);
void fm_gen_help(FILE *out);
int fm_predict_main(int argc, char **argv);
void fm_predict_help(FILE *out);

#endif
