/* What the distributed lr trainer's files share (apps/lr/train.c, the node
 * and SGD; apps/lr/dbpg.c, DBPG's worker and server steps; apps/lr/parts.c,
 * SGD over data parts handed out on demand): a worker's view of its share of
 * the data, SGD's minibatch step and the epoch's report, and DBPG's per-step
 * state and steps. */
#ifndef LOOM_APPS_LR_TRAIN_IMPL_H
#define LOOM_APPS_LR_TRAIN_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <loom/loom.h>

#include "lr/lr.h"

#define PROG            "loom train lr"
#define TRY(what, expr) APP_TRY(PROG, what, expr)

/* ---- a worker's view of its data ---- */

typedef struct shard {
    const loom_dataset *d;
    uint64_t *keys; /* sorted distinct features of the share, then the bias key */
    size_t nkeys;
    double *w;     /* local copy of those weights (same order) */
    uint32_t *col; /* per nnz: index into keys (for local weight lookups) */
    double *y01;   /* labels as 0/1 */
    /* Minibatch bookkeeping, per key: the last batch that used it and where. */
    uint32_t *stamp, *slot;
    uint32_t batch;
    /* --l2 (see lr_l2_push): minibatches pushed so far, and per key the
     * minibatch that last pushed it and W / (shares holding it). */
    uint64_t step, *last_push;
    double *share_weight;
} shard;

/* ---- what train.c's SGD and report offer parts.c ---- */

/* A minibatch's keys, weights and gradient (lr_sgd_step), grown as needed. */
typedef struct batch_buf {
    uint64_t *keys; /* distinct features of the batch + bias */
    uint32_t *cols; /* their indices in the share's keys */
    double *w, *g;
    size_t cap;
} batch_buf;

/* A compute thread's lane (--threads T, train.c): rows [lo, hi) of a share
 * or of a part (app_team_split), with its own view, epoch order, minibatches
 * and --l2 bookkeeping. */
typedef struct lr_lane {
    loom_dataset part; /* the lane's rows: a view of the data with its own row offsets */
    shard s;
    batch_buf b;
    size_t *order;
    size_t nk;   /* keys of this clock's minibatch (0: none) */
    double loss; /* its loss at an epoch's end (lr_lane_loss) */
} lr_lane;

/* What the lanes share in a clock (or at an epoch's end). */
typedef struct lr_clock {
    loom_table *w;
    lr_lane *lanes;
    size_t batch, nbatches;
    uint64_t dim;
    const lr_train_opts *o;
} lr_clock;

/* Lane t of `threads` over d's rows. */
int lr_lane_init(lr_lane *l, const loom_dataset *d, uint64_t dim, int threads, int t);
void lr_lane_free(lr_lane *l);
/* Minibatches per epoch for `rows` rows in `threads` lanes: every lane runs
 * as many (at least 1), the largest one's of `minibatch` rows. */
size_t lr_lane_batches(size_t rows, int threads, size_t minibatch);
/* Team functions (app_team_run) on an lr_clock: lane t's minibatch
 * `batch` of `nbatches` into its nk and b; lane t's loss. */
int lr_lane_step(void *arg, int t);
int lr_lane_loss(void *arg, int t);
/* The lanes' gradients pushed in lane order. */
int lr_lanes_push(loom_table *w, lr_lane *lanes, int threads);

/* The per-epoch statistics table's fields (ST_*, STAT_FIELDS per epoch). */
#define STAT_FIELDS 9
/* ST_STEPS: minibatches pushed since the start (FTRL's l1 scale, see report).
 * ST_MESSAGES, ST_BYTES_RAW, ST_BYTES_WIRE: table traffic as plain rows and
 * as sent (docs/FILTERS.md). */
enum {
    ST_LOSS,
    ST_ROWS,
    ST_EXAMPLES,
    ST_BYTES_SENT,
    ST_BYTES_RECEIVED,
    ST_STEPS,
    ST_MESSAGES,
    ST_BYTES_RAW,
    ST_BYTES_WIRE
};

/* Worker 0's report of an epoch (lr_report). */
typedef struct lr_reporter {
    loom_node *node;
    const lr_cli *cli;
    FILE *metrics;
    const loom_dataset *test;
    double start;
    uint64_t dim;
    double *model;  /* dim + 1 rows of the model table, as pulled */
    uint32_t width; /* values per row: 1 (sgd) or 3 (dbpg) */
} lr_reporter;

/* A share's (or a part's) view: features, local weights, labels. */
int lr_shard_init(shard *s, const loom_dataset *d, uint64_t dim);
void lr_shard_free(shard *s);
/* The share's loss with the current model (one pull of every weight it needs). */
int lr_share_loss(loom_table *w, shard *s, double *loss);
/* One minibatch, rows order[0..n) of the share: its gradient into b, *nk_out keys. */
int lr_sgd_step(loom_table *wt, shard *s, const size_t *order, size_t n, uint64_t dim,
                const lr_train_opts *o, batch_buf *b, size_t *nk_out);
/* --l2's per-feature share counts (train.c, count_shares): the table of
 * counts; this share adding 1 for each of its keys; and its weights, `shares`
 * over the count of each key (see lr_l2_push). */
int lr_shares_open(loom_node *n, uint64_t dim, loom_table **t);
int lr_shares_count(loom_node *n, loom_table *t, shard *s);
int lr_shares_weigh(loom_table *t, shard *s, double shares);
/* The model and statistics tables. */
int lr_open_tables(loom_node *n, const lr_cli *c, uint64_t dim, loom_table **w, loom_table **stats);
/* This worker's part of epoch `epoch`'s statistics. */
int lr_push_stats(loom_node *n, loom_table *stats, int epoch, double loss, size_t rows,
                  uint64_t steps);
/* Worker 0, after the epoch's barrier: aggregate, evaluate, print, save. */
int lr_report(lr_reporter *r, loom_table *w, loom_table *stats, int epoch, double epoch_s);

/* ---- data parts on demand (--data-parts, parts.c) ---- */

/* Train with the data handed out in parts by the scheduler (loom/parts.h)
 * instead of a static share; worker 0 reports with test. */
int lr_train_parts(loom_node *n, const lr_cli *c, const loom_dataset *test);

/* ---- DBPG (dbpg.c) ---- */

/* What DBPG reads of a row for every non-zero it visits, in one place: the
 * column walks below jump from row to row, and in perf the scattered loads
 * of a value, a margin and a label per non-zero were the largest single item
 * of a one-worker DBPG run (docs/BENCHMARKS.md); now one cache line. */
typedef struct dbpg_row {
    double margin;    /* x_i . (local weights) */
    float y01;        /* label as 0/1 */
    uint32_t overlap; /* non-zeros (the bias counts) in the window's blocks (lr_dbpg_window) */
} dbpg_row;

/* A worker's DBPG bookkeeping: a column index of its share (for every local
 * feature, the rows containing it in ascending order and their values,
 * copied in column order so that the walk reads them in sequence), and the
 * per-row state. */
typedef struct dbpg_index {
    uint32_t *ptr, *row; /* column index */
    float *val;
    dbpg_row *rows;
    int *in_window; /* per block: how many of the window's steps it is */
} dbpg_index;

/* DBPG's work in a step, shared by the compute threads (--threads): the
 * block's local features [f0, f1), the share's index and rows, and the
 * block's rows [w, g, u] (as pulled, or to push). Thread t of T takes the
 * t-th part of the rows when margins change and the t-th part of the
 * block's features when their gradients and curvature bounds are computed,
 * so every number is computed by one thread in the order one thread would:
 * the result does not depend on T. The window's overlaps change between the
 * two, on the main thread (dbpg_slide). */
typedef struct dbpg_step {
    shard *s;
    dbpg_index *x;
    double *rows3;
    size_t f0, f1;
    uint64_t lo; /* the block's first key */
    int threads;
    double kkt; /* KKT threshold T (dbpg_kkt_threshold); < 0: off */
} dbpg_step;

/* DBPG's server step, the updater "lr.dbpg" (registered in every process
 * before loom_init). */
void lr_dbpg_updater(const loom_update *u, void *user);
/* Bring the local weights of block [lo, hi) and the margins up to the servers' values. */
int lr_dbpg_refresh(loom_table *wt, app_team *team, dbpg_step *st, uint64_t lo, uint64_t hi);
/* The window of the curvature bound slides to step t. */
void lr_dbpg_slide(const shard *s, dbpg_index *x, uint64_t dim, const lr_train_opts *o, int64_t t);
/* The KKT threshold of the workers' gradients; -1: off. */
double lr_dbpg_kkt_threshold(const char *filter_push, const lr_train_opts *o, int workers);
/* Push block [lo, hi)'s gradient and curvature bound over every row of the share. */
int lr_dbpg_push(loom_table *wt, app_team *team, dbpg_step *st, uint64_t lo, uint64_t hi);
/* The column index of the share, and the curvature window, empty. */
int lr_dbpg_index_init(const shard *s, const lr_train_opts *o, dbpg_index *x);

#endif
