/* mf: matrix factorisation with biases on Loom (the recommendation workload
 * of Bösen and STRADS, wei-thesis-bosen-orion.txt chapter 2,
 * kim-thesis-strads.txt chapter 3).
 *
 * A rating r(u, i) is predicted as mu + b_u + b_i + p_u . q_i, with mu the
 * mean training rating, b_u and b_i biases and p_u, q_i factor vectors of
 * length K (the rank), learnt by SGD with L2 regularisation.
 *
 * Pieces, one file each:
 *   sgd.c    what the trainer and its sequential reference share: the SGD
 *            step, initial rows, the seeded test split and epoch order, one
 *            clock's batch of ratings on local copies of its rows
 *   train.c  distributed training: factor tables on the servers, a clock
 *            per batch under the table's consistency model
 *   rotation.c  --schedule rotation: model-parallel SGD, item blocks rotating
 *            among the workers on the static engine (loom/sched.h)
 *   seq.c    the sequential reference (a one-worker BSP job must match it bit for bit)
 *   model.c  the model file (save, load) and prediction
 *   gen.c    synthetic MovieLens-like ratings from a planted model
 *   flags.c  the command line of `loom train mf`
 *   cli.c    `loom gen mf` and `loom predict mf`
 * docs/MF.md documents the commands, the algorithm and the file formats. */
#ifndef LOOM_APPS_MF_H
#define LOOM_APPS_MF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <loom/data.h>

#include "common/app.h"

/* ---- model ---- */

/* Largest rank K (train, gen and model files): far above the ranks MF is used
 * with (tens to a few hundred), and small enough that code may keep one row on
 * the stack (seq.c). */
#define MF_MAX_RANK 1024

/* Rows are rank + 1 values: the bias, then the K factors. */
typedef struct mf_model {
    uint32_t rank;
    size_t users, items;
    double mean, min, max; /* mean, smallest and largest training rating */
    int64_t *user_id;      /* users file ids, ascending: row u is user user_id[u] */
    int64_t *item_id;      /* items file ids, ascending */
    double *user;          /* users * (rank + 1) values */
    double *item;          /* items * (rank + 1) values */
} mf_model;

/* Allocate the arrays of a model of the given shape (values zero). 0 or -1. */
int mf_model_alloc(mf_model *m, uint32_t rank, size_t users, size_t items);
void mf_model_free(mf_model *m);

/* Text file, documented in docs/MF.md:
 *   "loom-mf 1 rank=K users=U items=I mean=M min=A max=B"
 *   U lines "u <file id> <bias> <K factors>", ids ascending, then
 *   I lines "i <file id> <bias> <K factors>", ids ascending;
 * numbers with %.17g, so a save/load round trip is exact. Load reports
 * "FILE:LINE: what is wrong". */
int mf_model_save(const mf_model *m, const char *path, char *err, size_t errlen);
int mf_model_load(const char *path, mf_model *m, char *err, size_t errlen);

/* Row index of a file id, or -1 if the model has not seen it. */
int64_t mf_model_user(const mf_model *m, int64_t id);
int64_t mf_model_item(const mf_model *m, int64_t id);

/* Prediction for row indices u and i (-1: unknown, which counts as zero bias
 * and zero factors: a cold start gets mean + the known bias), clipped to
 * [min, max]. */
double mf_model_predict(const mf_model *m, int64_t u, int64_t i);

/* ---- what training and its reference share (sgd.c) ---- */

/* Unclipped prediction of two rows (bias then K factors each). */
static inline double mf_dot_predict(double mean, const double *urow, const double *irow,
                                    uint32_t rank)
{
    double dot = 0;
    for (uint32_t k = 1; k <= rank; k++) dot += urow[k] * irow[k];
    return mean + urow[0] + irow[0] + dot;
}

/* Unclipped prediction where a row may be unknown (NULL): an unknown row has
 * zero bias and zero factors, so a cold start gets mean + the known bias. */
static inline double mf_predict_rows(double mean, const double *urow, const double *irow,
                                     uint32_t rank)
{
    if (urow && irow) return mf_dot_predict(mean, urow, irow, rank);
    return mean + (urow ? urow[0] : 0) + (irow ? irow[0] : 0);
}

/* One SGD step on rating r: e = r - prediction (unclipped);
 *   b_u += lr (e - reg b_u), b_i += lr (e - reg b_i),
 *   p_u += lr (e q_i - reg p_u), q_i += lr (e p_u - reg q_i), both from the old values.
 * urow and irow must not be the same memory. Returns e. */
double mf_sgd_step(double *urow, double *irow, uint32_t rank, double mean, double rating, double lr,
                   double reg);

/* Initial row `row` of table `table` (0 users, 1 items): bias 0, factors
 * N(0, std^2) from a random stream of (seed, table, row) only, so the start
 * does not depend on how many workers there are. */
void mf_init_row(double *out, uint32_t rank, uint64_t seed, int table, uint64_t row, double std);

/* 1 if the rating on (1-based) line `line` of the training file belongs to
 * the test part of a --test-fraction split: a hash of (seed, line) below p. */
int mf_is_test(uint64_t seed, uint64_t line, double p);

/* The order in which worker `rank` visits its n ratings in `epoch`: a
 * permutation seeded by (seed, rank, epoch). */
void mf_epoch_order(uint64_t seed, int rank, int epoch, size_t n, size_t *order);
/* order[0..n) = a permutation of 0..n-1 drawn from the random stream
 * (seed, stream) (Fisher-Yates). */
void mf_permutation(uint64_t seed, uint64_t stream, size_t n, size_t *order);
/* The streams of the rotation's numbering of users (+ 0) and items (+ 1):
 * apart from mf_epoch_order's (below 2^40) and mf_init_row's. */
#define MF_STREAM_BLOCKS (3ull << 40)

/* The learning rate of epoch e (0-based): lr * decay^e. */
double mf_epoch_lr(double lr, double decay, int epoch);

/* Ratings [lo, hi) of the n of an epoch form clock b of `syncs`. */
void mf_clock_range(size_t n, int syncs, int b, size_t *lo, size_t *hi);

/* The factor by which --merge damped scales the workers' deltas of a row in
 * a clock. W workers each run SGD from the same old row over their own n_w
 * of the row's ratings, and the servers add the W moves. On a bias, one SGD
 * step shrinks the distance to the clock's optimum by a = lr (1 + reg), so
 * one pass over all n = sum n_w ratings covers 1 - (1 - a)^n of it, while
 * the W local passes add up to sum_w 1 - (1 - a)^(n_w): W times too far
 * when every worker reaches the optimum on its own (popular rows, big
 * shares: the servers' sum then oscillates or diverges), about right when
 * the steps are small. The factor is the ratio of the two, so the summed
 * move is the sequential one: 1 for small steps, 1/W when saturated, and
 * exactly 1 for a row only one worker rates. counts[w] is worker w's number
 * of training ratings of the row in an epoch, spread over `syncs` clocks. */
double mf_merge_scale(const double *counts, int workers, int syncs, double lr, double reg);

/* A worker's training (or test) ratings as dense row indices. */
typedef struct mf_data {
    size_t n;
    uint32_t *user, *item;
    double *rating;
} mf_data;

void mf_data_free(mf_data *d);

/* Training and test ratings of a share read from the training file: with
 * p > 0 the seeded split by line, else every rating trains (test empty). */
int mf_data_split(const loom_ratings *r, uint64_t seed, double p, mf_data *train, mf_data *test);

/* The ratings of a test file's share, mapped to the training file's rows;
 * ids the training file lacks become UINT32_MAX (evaluated as cold starts). */
int mf_data_map(const loom_ratings *test, const loom_ratings *train, mf_data *out);

/* Sum of squared errors of m's (clipped) predictions of d's ratings, in
 * order: what the trainer's evaluation adds up over the workers' shares. */
double mf_model_sse(const mf_model *m, const mf_data *d);

/* Sum (in order) and extremes of the ratings; min > max when d is empty. */
void mf_data_summary(const mf_data *d, double *sum, double *min, double *max);

/* One clock's batch: the distinct user and item rows its ratings touch,
 * local working copies of them, and the values they had when read. */
typedef struct mf_batch {
    uint32_t rank;
    size_t users, items;       /* rows of the tables */
    size_t nu, ni;             /* distinct rows touched */
    uint64_t *ukeys, *ikeys;   /* their row indices, ascending */
    uint32_t *uslot, *islot;   /* per rating of the batch: its rows' slots */
    double *urows, *irows;     /* nu (ni) rows of rank + 1: read, then trained */
    double *uold, *iold;       /* the rows as read; after mf_batch_train: new - old */
    uint32_t *ustamp, *istamp; /* per user/item: 1 + the slot in this batch, or 0 */
    size_t cap;                /* ratings the slot arrays hold */
} mf_batch;

int mf_batch_init(mf_batch *b, uint32_t rank, size_t users, size_t items);
void mf_batch_free(mf_batch *b);
/* Collect the rows of ratings d[idx[0..n)] (rows UINT32_MAX are skipped,
 * for evaluation of cold starts). 0 or LOOM_ENOMEM. */
int mf_batch_collect(mf_batch *b, const mf_data *d, const size_t *idx, size_t n);
/* Collect the rows of all of d1's ratings, then of all of d2's, as one batch
 * (one pull for both): d1's ratings are at the batch's positions [0, d1->n),
 * d2's at [d1->n, d1->n + d2->n). 0 or LOOM_ENOMEM. */
int mf_batch_collect_two(mf_batch *b, const mf_data *d1, const mf_data *d2);
/* After urows/irows were filled with the rows' current values: keep a copy,
 * run SGD over the ratings in order, and leave new - old in uold/iold. */
void mf_batch_train(mf_batch *b, const mf_data *d, const size_t *idx, size_t n, double mean,
                    double lr, double reg);
/* Sum of squared errors of the clipped predictions of d[idx[0..n)] with the
 * batch's rows (cold starts with zero rows), those ratings collected at the
 * batch's positions [first, first + n). */
double mf_batch_sse(const mf_batch *b, size_t first, const mf_data *d, const size_t *idx, size_t n,
                    double mean, double min, double max);

/* ---- training ---- */

/* How the workers' deltas for one row combine on the servers (train.c):
 * SUM adds them as they are; DAMPED first scales them by mf_merge_scale().
 * With one worker both are the same. */
typedef enum { MF_MERGE_DAMPED = 0, MF_MERGE_SUM = 1 } mf_merge;

/* --schedule: data-parallel clocks (train.c) or model-parallel rotation
 * (rotation.c). AUTO, the default, is rotation with more than one worker and
 * data otherwise; the workers resolve it once they know their number. */
typedef enum { MF_SCHEDULE_DATA = 0, MF_SCHEDULE_ROTATION = 1, MF_SCHEDULE_AUTO = 2 } mf_schedule;

typedef struct mf_train_opts {
    uint32_t rank;
    double lr, lr_decay, reg, init_std;
    double test_fraction; /* 0: no split */
    int epochs, syncs;
    uint64_t seed;
    mf_merge merge;
    int threads;    /* compute threads per worker (--threads): lanes, see train.c */
    int eval_every; /* evaluate after every N-th epoch and the last; 0: the last only */
    int steps;      /* pull, train and push this many times a clock (train.c only) */
    mf_schedule schedule;
    const char *schedule_log; /* --schedule-log: the rotation engine's per-task log */
    const char *data_because; /* the flag that made --schedule auto data parallel, or NULL */
} mf_train_opts;

#define MF_TRAIN_OPTS_DEFAULT                                                                      \
    {                                                                                              \
        16, 0.03, 0.95, 0.1, 0.1, 0, 40, 1, 1, MF_MERGE_DAMPED, 1, 1, 1, MF_SCHEDULE_AUTO, NULL,   \
            NULL                                                                                   \
    }

/* 1 if the model after epoch e (0-based) is evaluated: every --eval-every
 * epochs, and always after the last. */
int mf_eval_due(const mf_train_opts *o, int epoch);

/* Everything `loom train mf` takes. */
typedef struct mf_cli {
    app_job job;
    mf_train_opts train;
    loom_ratings_opts data;
} mf_cli;

/* Parse `loom train mf` flags into *cli, an mf_cli (app_parse_fn; argv[0] is
 * the command name). 0, or 2 with a sentence naming the flag in err. */
int mf_parse_flags(int argc, char **argv, void *cli, char *err, size_t errlen);
/* Its help: every flag, with its range and default (from the parser's table). */
void mf_train_help(FILE *out);

/* Called after every epoch of the sequential reference with the model so far. */
typedef void (*mf_epoch_fn)(void *arg, int epoch, const mf_model *m);

/* The sequential reference of a one-worker BSP job with o->threads compute
 * threads: the same split, mean, initial rows, lanes, order, batches and
 * arithmetic, over share 0 of 1 of the training file, in this process.
 * Fills out (ids from r); calls fn (if not NULL) after each epoch. 0,
 * LOOM_EINVAL without training ratings, or LOOM_ENOMEM.
 */
int mf_train_sequential(const mf_train_opts *o, const loom_ratings *r, mf_model *out,
                        mf_epoch_fn fn, void *arg);

/* The distributed trainer, run by every node of a job (cli: an mf_cli).
 * Returns the exit status. */
int mf_train_node(const void *cli);

/* ---- --schedule rotation (rotation.c) ---- */

/* Cut rows [0, rows) into `parts` blocks of about equal numbers of the n
 * ratings whose rows are row[0..n), each block at least one row (rows >=
 * parts): bounds[0..parts]. 0 or LOOM_ENOMEM. */
int mf_balanced_bounds(const uint32_t *row, size_t n, size_t rows, int parts, uint64_t *bounds);

/* Keep only the ratings of users [begin, end), in order. */
void mf_data_keep_users(mf_data *d, uint64_t begin, uint64_t end);

typedef struct mf_rotation mf_rotation;

/* A worker's rotation over its training ratings `train` (those of its user
 * block [ublock[0], ublock[1])), with the item table cut at ibounds (one block
 * per worker), after the setup put the initial rows on the servers: pulls the
 * user block and opens the static engine on `items` (which must be ASP, "sum",
 * cache 0). Every worker calls it. 0 or a loom error. */
int mf_rotation_open(loom_table *users, loom_table *items, const mf_train_opts *o,
                     const mf_data *train, const uint64_t ublock[2], const uint64_t *ibounds,
                     double mean, const char *log_path, mf_rotation **out);
/* One epoch: a full rotation of the item blocks, the user rows pushed, a barrier. */
int mf_rotation_epoch(mf_rotation *r, int epoch);
void mf_rotation_free(mf_rotation *r);

/* ---- synthetic data (gen.c) ---- */

typedef struct mf_gen_opts {
    uint64_t users, items, ratings;
    uint32_t rank;
    double noise; /* standard deviation of the noise added to the planted rating */
    uint64_t seed;
    int real; /* 1: real-valued ratings; 0: half stars in [0.5, 5] */
} mf_gen_opts;

#define MF_GEN_OPTS_DEFAULT                                                                        \
    {                                                                                              \
        1000, 2000, 100000, 8, 0.5, 1, 0                                                           \
    }

/* Write the ratings as TSV "user item rating timestamp" (ids 1-based, sorted
 * by user then item). planted, if not NULL, receives the planted model. */
int mf_generate(const mf_gen_opts *o, FILE *out, mf_model *planted, int progress, char *err,
                size_t errlen);

/* ---- `loom gen mf` and `loom predict mf` (cli.c) ---- */

int mf_gen_main(int argc, char **argv);
int mf_predict_main(int argc, char **argv);

#endif
