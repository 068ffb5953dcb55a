/* train_impl: what `loom train fm`'s files share (apps/fm/train.c, the
 * node, the minibatch and the report over a worker's fixed share;
 * apps/fm/parts.c, the same over data parts handed out on demand). */
#ifndef LOOM_APPS_FM_TRAIN_IMPL_H
#define LOOM_APPS_FM_TRAIN_IMPL_H

#include <stdio.h>

#include <loom/loom.h>
#include <loom/sketch.h>

#include "fm/fm.h"

#define PROG            "loom train fm"
#define TRY(what, expr) APP_TRY(PROG, what, expr)

/* The statistics table's fields, per epoch. */
enum { ST_LOSS, ST_ROWS, ST_BYTES_SENT, ST_BYTES_RECEIVED, ST_BYTES_RAW, ST_BYTES_WIRE, ST_FIELDS };

/* The job's tables (train.c's top comment). */
typedef struct tables {
    loom_table *w, *v, *vrows;
    loom_sketch *sketch; /* NULL with --threshold 0 */
    app_stats stats;
} tables;

/* A compute thread's lane (--threads T; one lane without): rows of the
 * worker's share (or of a data part) with their own fm_share, epoch order
 * and minibatch buffers. The lanes of a clock each compute a minibatch from
 * the model as the clock found it, and push in lane order. */
typedef struct fm_worker_state {
    const fm_cli *c;
    tables *t;
    loom_dataset rows; /* the lane's rows: a view (app_rows_view) */
    fm_share share;    /* over rows */
    fm_share *s;       /* &share */
    size_t *order;     /* the epoch order of rows */
    size_t lo, hi;     /* this clock's minibatch: order[lo..hi) (none if equal) */
    double loss;       /* the epoch's progressive loss so far */
    fm_batch b;
    int64_t *est;   /* per key of the largest batch: sketch estimates */
    uint64_t *newk; /* and new V rows */
    double *ones;
    size_t scratch;
    int counting; /* the first epoch: the sketch counts the rows (docs/FM.md) */
} fm_worker_state;

/* Worker 0's report of an epoch. */
typedef struct fm_reporter {
    loom_node *node;
    const fm_cli *cli;
    const loom_dataset *test;
    FILE *metrics;
    double start;
    uint64_t dim;
    double *vrows; /* dim */
    uint64_t *keys;
} fm_reporter;

int fm_open_tables(loom_node *n, const fm_cli *c, uint64_t dim, tables *t);
/* Lane t of `threads` over d's rows (l->c set by the caller). */
int fm_lane_init(fm_worker_state *l, const loom_dataset *d, uint64_t dim, int threads, int t);
void fm_lane_free(fm_worker_state *l);
/* Minibatch `batch` of `nbatches` of every lane (lanes run as many, on
 * their own rows in their epoch order) into their lo and hi. */
void fm_lanes_batch(fm_worker_state *lanes, int threads, size_t batch, size_t nbatches);
/* Each lane's minibatch: keys and sketch in lane order, the pulls and
 * gradients in parallel on the team, the pushes in lane order; each lane's
 * loss added to its own. */
int fm_lanes_minibatch(app_team *team, fm_worker_state *lanes, int threads);
/* After the first epoch: which of the share's features the sketch says are frequent. */
int fm_final_counts(loom_sketch *sk, fm_share *s, uint64_t threshold);
/* This worker's part of epoch `epoch`'s statistics. */
int fm_add_stats(loom_node *n, tables *t, int epoch, double loss, size_t rows);
/* Worker 0, after the epoch's barrier: evaluate, print, save. */
int fm_report(fm_reporter *r, tables *t, int epoch, double epoch_s);

/* Train with the data handed out in parts (--data-parts, parts.c); worker 0
 * reports with test. */
int fm_train_parts(loom_node *n, const fm_cli *c, const loom_dataset *test);

#endif
