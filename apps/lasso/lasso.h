/* lasso: L1-regularised least squares by coordinate descent (the first
 * application of STRADS, kim-thesis-strads.txt chapter 4, issue 13).
 *
 *   minimise  F(beta) = 1/(2n) ||y - X beta||^2 + lambda ||beta||_1
 *
 * over n rows of LIBSVM regression data, no intercept (scikit-learn's Lasso
 * with fit_intercept=False and alpha = lambda minimises the same function).
 *
 * Pieces, one file each:
 *   cd.c     the problem (a column-major copy of X, the residual) and the
 *            update of one coordinate given the residual: what a scheduler
 *            (src/sched, later) calls for the coordinates it picks
 *   seq.c    the sequential reference: cyclic passes of that update
 *   dist.c   the distributed trainer on the dynamic engine (src/sched)
 *   model.c  the model file (save, load) and prediction
 *   gen.c    synthetic data with correlated feature groups and a planted
 *            sparse beta
 *   cli.c    `loom gen lasso`, `loom train lasso [--sequential]`, `loom
 *            predict lasso` (tools/ has one row pointing at each) */
#ifndef LOOM_APPS_LASSO_H
#define LOOM_APPS_LASSO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <loom/data.h>

#include "common/app.h"

/* The most features a model has (a dense table of doubles, as lr's). */
#define LASSO_MAX_DIM ((uint64_t)1 << 32)

/* ---- the problem and one coordinate's update (cd.c) ---- */

/* X in compressed sparse columns (the coordinate update reads column j), y,
 * and per column a_j = ||x_j||^2 / n, the curvature of F along beta_j. */
typedef struct lasso_problem {
    size_t n;      /* rows */
    uint64_t dim;  /* columns: 1 + the largest feature id */
    size_t nnz;    /* stored entries */
    size_t *col;   /* dim + 1 offsets into row/val */
    uint32_t *row; /* nnz row indices, ascending within a column */
    double *val;   /* nnz values */
    double *y;     /* n targets */
    double *a;     /* dim curvatures ||x_j||^2 / n */
} lasso_problem;

/* The column-major copy of d (rows up to UINT32_MAX; labels read as real
 * numbers). 0, or -1 with the reason in err. */
int lasso_problem_from(const loom_dataset *d, lasso_problem *p, char *err, size_t errlen);
void lasso_problem_free(lasso_problem *p);

/* lambda_max = ||X^T y||_inf / n: the smallest lambda whose minimiser is 0. */
double lasso_lambda_max(const lasso_problem *p);

/* sign(z) max(|z| - t, 0). */
double lasso_soft_threshold(double z, double t);

/* The exact minimiser of F along coordinate j, all others fixed, given the
 * residual r = y - X beta and beta_j: S(x_j^T r / n + a_j beta_j, lambda) / a_j
 * (0 for an empty column). Reads r only, so a scheduler may compute several
 * coordinates' proposals from one residual before applying any. */
double lasso_coordinate_minimiser(const lasso_problem *p, uint64_t j, const double *r,
                                  double beta_j, double lambda);
/* r -= delta x_j: the residual after beta_j moved by delta. */
void lasso_residual_apply(const lasso_problem *p, uint64_t j, double delta, double *r);
/* Both, for one coordinate: beta[j] becomes its minimiser and r follows.
 * Returns the change of beta[j]. */
double lasso_update_coordinate(const lasso_problem *p, uint64_t j, double *beta, double *r,
                               double lambda);

/* F(beta) from the residual: ||r||^2 / (2n) + lambda ||beta||_1. */
double lasso_objective(const lasso_problem *p, const double *r, const double *beta, double lambda);

/* ---- the sequential reference (seq.c) ---- */

typedef struct lasso_train_opts {
    double lambda;  /* > 0 */
    int iterations; /* at most this many passes over all coordinates */
    double tol;     /* stop after a pass whose largest |change| <= tol * max(1, max|beta|) */
} lasso_train_opts;

/* What a pass reports (to the metrics file, and to tests). */
typedef struct lasso_pass {
    int iteration;     /* 1-based */
    uint64_t updates;  /* coordinate updates so far */
    double objective;  /* F after the pass */
    double train_rmse; /* ||r|| / sqrt(n) */
    uint64_t nnz;      /* non-zero coefficients */
    double max_change; /* largest |change of a beta_j| in the pass */
    double seconds;    /* since training started */
} lasso_pass;

typedef void (*lasso_pass_fn)(void *arg, const lasso_pass *pass, const double *beta);

/* Cyclic coordinate descent from beta = 0: passes over j = 0..dim-1, each
 * coordinate set to its minimiser, until the tolerance or the iteration
 * limit. beta (p->dim) receives the result; fn (if not NULL) is called after
 * every pass. Returns the number of passes run, or -1 if memory ran out. */
int lasso_train_sequential(const lasso_train_opts *o, const lasso_problem *p, double *beta,
                           lasso_pass_fn fn, void *arg);

/* ---- the model (model.c) ---- */

typedef struct lasso_model {
    uint64_t dim;
    double lambda; /* what it was trained with (informative) */
    double *beta;  /* dim coefficients */
} lasso_model;

/* Text, documented in docs/LASSO.md:
 *   line 1: "loom-lasso 1 dim=<D> nnz=<K> lambda=<l>"
 *   then K lines "<feature id, 0-based> <coefficient>" for every coefficient
 *   that is not +0.0, ids ascending, %.17g (a save/load round trip is exact).
 * The loader reports "FILE:LINE: what is wrong" in err. */
int lasso_model_save(const lasso_model *m, const char *path, char *err, size_t errlen);
int lasso_model_load(const char *path, lasso_model *m, char *err, size_t errlen);
void lasso_model_free(lasso_model *m);
/* beta.x for example i of d (features >= dim count as 0). */
double lasso_predict_row(const lasso_model *m, const loom_dataset *d, size_t i);

/* ---- synthetic data (gen.c) ---- */

typedef struct lasso_gen_opts {
    uint64_t rows, features;
    uint32_t group;    /* features per correlated group (the last group may be smaller) */
    double corr;       /* correlation of two features of one group, in [0, 1) */
    double density;    /* probability that a row has a group's features (else all 0) */
    uint64_t nonzeros; /* planted non-zero coefficients */
    double noise;      /* standard deviation of the noise added to y */
    uint64_t seed;
} lasso_gen_opts;

#define LASSO_GEN_OPTS_DEFAULT                                                                     \
    {                                                                                              \
        1000, 1000, 10, 0.8, 1.0, 20, 0.1, 1                                                       \
    }

/* Write the rows to out in LIBSVM format (1-based ids). planted (if not
 * NULL, dim = features) receives the planted beta. 0, or -1 with err. */
int lasso_generate(const lasso_gen_opts *o, FILE *out, lasso_model *planted, char *err,
                   size_t errlen);

/* ---- the commands (cli.c) ---- */

int lasso_gen_main(int argc, char **argv);
int lasso_predict_main(int argc, char **argv);
void lasso_gen_help(FILE *out);
void lasso_predict_help(FILE *out);

/* `loom train lasso`: its flags, in a struct that starts with its app_job as
 * every model's does (tools/train.c). */
typedef struct lasso_cli {
    app_job job;
    lasso_train_opts train;
    double lambda_ratio; /* > 0: lambda = ratio * lambda_max of the training data */
    int sequential;      /* --sequential: the reference, in this process */
    int in_process;      /* --in-process: the scheduled engine's rounds, in this process */
    /* The scheduled engine (dist.c): */
    int schedule;               /* LASSO_SCHEDULE_* */
    uint32_t parallel;          /* P, updates per round */
    int parallel_default;       /* no --parallel: P shrinks to fit a shard (dist.c) */
    uint32_t candidates;        /* L, sampled per round (0: 4 P) */
    double rho;                 /* the dependency check's threshold */
    double priority_floor;      /* the engine's floor (loom_dyn_opts.floor) */
    uint32_t depth;             /* rounds in flight */
    int no_priority;            /* --no-priority: uniform candidates, still checked */
    const char *schedule_log;   /* worker 0 writes every round's plan here */
    const char *reference_path; /* a model to count converged coefficients against */
} lasso_cli;

enum { LASSO_SCHEDULE_DYNAMIC, LASSO_SCHEDULE_RANDOM, LASSO_SCHEDULE_ROTATION };

/* The entry points of `loom train lasso` (app_parse_fn, app_cli_fn): cli is a
 * lasso_cli. */
int lasso_parse_flags(int argc, char **argv, void *cli, char *err, size_t errlen);
void lasso_train_help(FILE *out);
/* Train in this process (the sequential reference); the exit status. */
int lasso_train_here(const void *cli);
/* Whether the command line trains in this process (--sequential,
 * --in-process). */
int lasso_trains_here(const void *cli);
/* One node of a scheduled job (dist.c); the exit status. */
int lasso_train_node(const void *cli);
/* The scheduled engine's rounds in this process (dist.c); the exit status. */
int lasso_train_in_process(const lasso_cli *cli);

#endif
