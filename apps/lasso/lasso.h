/* lasso: L1-regularised least squares by coordinate descent (the first
 * application of STRADS, kim-thesis-strads.txt chapter 4, issue 13).
 *
 *   minimise  F(b, beta) = 1/(2n) ||y - b - X beta||^2 + lambda ||beta||_1
 *
 * over n rows of LIBSVM regression data, with an unpenalised intercept b as
 * scikit-learn's Lasso(alpha = lambda) and glmnet fit by default, or without
 * one (b = 0: --no-intercept, scikit-learn's fit_intercept=False).
 *
 * The intercept is never a coordinate of its own: for any beta its best value
 * is b = mean(y) - mu.beta (mu the column means), so the problem is solved in
 * beta alone on centred data, y - mean(y) and x_j - mu_j, as glmnet does. The
 * columns stay sparse: centring is carried in mu and in one number of the
 * residual (lasso_residual), never written into X.
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

/* X in compressed sparse columns (the coordinate update reads column j), the
 * centred y, and per column its mean mu_j and a_j = ||x_j - mu_j||^2 / n, the
 * curvature of F along beta_j (the intercept following). Without an
 * intercept y_mean and every mu_j are 0. */
typedef struct lasso_problem {
    size_t n;      /* rows */
    uint64_t dim;  /* columns: 1 + the largest feature id */
    size_t nnz;    /* stored entries */
    size_t *col;   /* dim + 1 offsets into row/val */
    uint32_t *row; /* nnz row indices, ascending within a column */
    double *val;   /* nnz values */
    double *y;     /* n targets less y_mean */
    double y_mean; /* the targets' mean, with an intercept; else 0 */
    double *mu;    /* dim column means, with an intercept; else 0 */
    double *a;     /* dim curvatures ||x_j - mu_j||^2 / n */
    int intercept; /* the model has one */
} lasso_problem;

/* The column-major copy of d (rows up to UINT32_MAX; labels read as real
 * numbers), centred if intercept. 0, or -1 with the reason in err. */
int lasso_problem_from(const loom_dataset *d, int intercept, lasso_problem *p, char *err,
                       size_t errlen);
void lasso_problem_free(lasso_problem *p);

/* lambda_max = ||X^T (y - y_mean)||_inf / n: the smallest lambda whose
 * minimiser is beta = 0. */
double lasso_lambda_max(const lasso_problem *p);

/* sign(z) max(|z| - t, 0). */
double lasso_soft_threshold(double z, double t);

/* The residual r = y - b - X beta with b at its best for beta, held as
 * r = q + shift: q = (y - y_mean) - X beta changes in column j's rows when
 * beta_j moves, and shift = mu.beta is one number, so an update costs column
 * j's entries, not n. The rows of r add up to 0 (b is at its best), so
 * x_j^T r = x_j^T q + shift n mu_j is also (x_j - mu_j)^T r, the centred
 * gradient. Without an intercept shift stays 0 and q is r. */
typedef struct lasso_residual {
    double *q;    /* n */
    double shift; /* mu.beta */
} lasso_residual;

/* The residual of beta, from scratch. 0, or -1 if memory ran out. */
int lasso_residual_init(const lasso_problem *p, const double *beta, lasso_residual *r);
void lasso_residual_free(lasso_residual *r);
/* ||r||^2 */
double lasso_residual_sq(const lasso_problem *p, const lasso_residual *r);
/* The intercept that goes with the residual's beta: y_mean - mu.beta. */
double lasso_intercept(const lasso_problem *p, const lasso_residual *r);

/* The exact minimiser of F along coordinate j, all others fixed, given the
 * residual and beta_j: S(x_j^T r / n + a_j beta_j, lambda) / a_j (0 for a
 * column that is empty, or constant with an intercept). Reads r only, so a
 * scheduler may compute several coordinates' proposals from one residual
 * before applying any. */
double lasso_coordinate_minimiser(const lasso_problem *p, uint64_t j, const lasso_residual *r,
                                  double beta_j, double lambda);
/* The residual after beta_j moved by delta: q -= delta x_j, shift += delta mu_j. */
void lasso_residual_apply(const lasso_problem *p, uint64_t j, double delta, lasso_residual *r);
/* Both, for one coordinate: beta[j] becomes its minimiser and r follows.
 * Returns the change of beta[j]. */
double lasso_update_coordinate(const lasso_problem *p, uint64_t j, double *beta, lasso_residual *r,
                               double lambda);

/* F from ||r||^2: rr / (2n) + lambda ||beta||_1. */
double lasso_objective(const lasso_problem *p, double rr, const double *beta, double lambda);

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
 * limit. beta (p->dim) and intercept receive the result; fn (if not NULL) is
 * called after every pass. Returns the number of passes run, or -1 if memory
 * ran out. */
int lasso_train_sequential(const lasso_train_opts *o, const lasso_problem *p, double *beta,
                           double *intercept, lasso_pass_fn fn, void *arg);

/* ---- the model (model.c) ---- */

typedef struct lasso_model {
    uint64_t dim;
    double lambda;    /* what it was trained with (informative) */
    double intercept; /* b; 0 without one */
    double *beta;     /* dim coefficients */
} lasso_model;

/* Text, documented in docs/LASSO.md:
 *   line 1: "loom-lasso 2 dim=<D> nnz=<K> lambda=<l> intercept=<b>"
 *   then K lines "<feature id, 0-based> <coefficient>" for every coefficient
 *   that is not +0.0, ids ascending, %.17g (a save/load round trip is exact).
 * Version 1 files (no intercept) still load, with b = 0. The loader reports
 * "FILE:LINE: what is wrong" in err. */
int lasso_model_save(const lasso_model *m, const char *path, char *err, size_t errlen);
int lasso_model_load(const char *path, lasso_model *m, char *err, size_t errlen);
void lasso_model_free(lasso_model *m);
/* b + beta.x for example i of d (features >= dim count as 0). */
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
    double intercept; /* planted b, added to every y */
} lasso_gen_opts;

#define LASSO_GEN_OPTS_DEFAULT                                                                     \
    {                                                                                              \
        1000, 1000, 10, 0.8, 1.0, 20, 0.1, 1, 0                                                    \
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
    int intercept;       /* fit b (no --no-intercept) */
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
