/* What the distributed LDA trainer's files share (apps/lda/train.c, the node;
 * apps/lda/checkpoint.c, a worker's checkpointed state): the worker's
 * documents and sampler (its lane) and the worker that holds them. */
#ifndef LOOM_APPS_LDA_TRAIN_IMPL_H
#define LOOM_APPS_LDA_TRAIN_IMPL_H

#include <stdint.h>
#include <stdio.h>

#include <loom/loom.h>

#include "lda/lda.h"

#define PROG            "loom train lda"
#define TRY(what, expr) APP_TRY(PROG, what, expr)

/* The fields of the statistics table "lda.stats", summed over the workers
 * at each evaluation (eval.c). */
#define STAT_FIELDS 13
enum {
    ST_LL_DOCS,
    ST_LL_WORDS,
    ST_TOKENS,
    ST_BYTES_SENT,
    ST_BYTES_RECEIVED,
    ST_TEST_LL,
    ST_TEST_SCORED,
    ST_TEST_SKIPPED,
    ST_MESSAGES,   /* table messages (loom_stats.table_messages) */
    ST_BYTES_RAW,  /* their payload as plain rows */
    ST_BYTES_WIRE, /* and as sent (docs/FILTERS.md) */
    ST_MANAGED,    /* rows sent between clocks (--priority) */
    ST_PUSHED,     /* cached rows the servers' row pushes refreshed */
};

/* Counts of an evaluation's pull of rows (eval.c): a chunk of words is
 * about this many counts, so its buffer does not grow with V x K. */
#define LDA_EVAL_VALUES (1u << 22)

/* The worker's documents and its one sampler, which its compute threads
 * share (see the top of train.c). */
typedef struct lane {
    lda_docs d;
    lda_sampler s;
    uint64_t *keys;  /* table keys of a clock's changed blocks (ncols_cap) */
    uint64_t *ckeys; /* table keys of a chunk of pulled words (w->chunk x nblocks) */
    /* A chunk's pulled rows, sparse (loom_pull_sparse): per table row its
     * number of non-zero counts, their columns (then topics) and counts;
     * room for w->chunk words of K, so the pull is done in place. */
    uint32_t *pnnz;  /* w->chunk x nblocks */
    uint32_t *pcols; /* w->chunk x K */
    int32_t *vals;   /* w->chunk x K */
    int64_t *tdelta; /* K */
    size_t nkeys;    /* table rows of this clock's changes */
    /* A clock's changes as sparse rows of keys (loom_push_sparse): row i has
     * nnz[i] changed counts, at columns cols (topic mod block) of the deltas
     * in the sampler's chg_delta. */
    uint32_t *nnz;  /* ncols_cap: a change at most per row */
    uint32_t *cols; /* ncols_cap */
    size_t ncols_cap, nchanges;
    /* A clock's pushes still in flight: waited for before the next changes
     * are listed (lanes_wait_pushed), since the totals go from tdelta without
     * a copy (the sparse rows are copied: loom_push_sparse_async), not at the
     * clock, so the servers apply them while the next clock samples. */
    loom_ts pushed[2];
    int npushed;
    uint32_t *reload; /* local words whose rows a refresh replaced */
    /* Words that other workers' documents contain too: only their rows can
     * change behind the process's back, so only they are pulled each clock. */
    uint32_t *shared_idx; /* their local indices */
    size_t nshared;
} lane;

typedef struct worker {
    loom_node *n;
    const lda_cli *c;
    int rank, nworkers;
    lda_params p;
    app_team *team;
    int threads;
    lane *lanes;    /* one */
    lda_lanes grid; /* the compute threads' lanes and word blocks over it (lanes.c) */
    /* the clock, its step (--steps) and the step of the lanes (--threads) being swept */
    int it, sync, step, lstep;
    loom_table *wt, *tt;
    app_stats stats;
    uint32_t block, nblocks; /* a word's row is nblocks table rows of block topics */
    /* The evaluation (eval.c) reads rows `chunk` words at a time. */
    size_t chunk;
    uint64_t *words;   /* a chunk's words */
    uint64_t *keys;    /* their table keys, nblocks per word */
    int32_t *vals;     /* their rows */
    double *cols;      /* K + 2: this worker's column sums, sum and negative counts */
    loom_table *check; /* "lda.check": those, summed over the workers, per evaluation */
    int32_t *scratch;
    /* --test: this worker's share of the test documents, the table keys of
     * their words, and their rows and the totals as pulled at an evaluation */
    lda_heldout h;
    uint64_t *test_keys;
    int32_t *test_rows;
    int64_t *test_totals;
    /* worker 0 */
    int64_t *totals; /* the topic totals, as of the last evaluation */
    uint64_t tokens; /* the tokens counted at it */
    lda_vocab vocab;
    FILE *metrics;
    double start, train_s;
    int iters_since_eval;
    int torn_said; /* the warning of a lost worker's torn clock was printed */
    /* Resumed from a checkpoint: the topics are the checkpoint's, the counts
     * the servers'; training goes on at iteration first_it, clock first_sync. */
    int resuming, first_it, first_sync;
    /* --schedule rotation (rotate() in train.c) */
    loom_sched *engine;
    app_rng *rng;     /* per document: its stream of the iteration, where it stopped */
    int64_t *tloaded; /* K: the totals as a sub-iteration pulled them */
} worker;

/* The table keys of n words' rows, nblocks per word (train.c). */
size_t lda_block_keys(const worker *w, const uint64_t *words, size_t n, uint64_t *keys);

/* ---- evaluation (eval.c) ---- */

/* Open the table of the count checks (with the other tables). */
int lda_open_check(worker *w);
/* The log-likelihood and the count checks after iteration it, every worker
 * together; worker 0 reports. 0, or 1 after saying why. */
int lda_evaluate(worker *w, int it);
/* Worker 0, at the end: the top words and the model file. */
int lda_finish(worker *w);

/* ---- checkpoints (checkpoint.c) ---- */

/* Save this worker's state at iteration it, whose clock next_sync comes next;
 * 0, or 1 after saying why. */
int lda_save_state(worker *w, int it, int next_sync);
/* A resumed job: this worker's state from its checkpoint (w->resuming and where
 * training goes on); 0, or 1 after saying why. Nothing resumed: 0. */
int lda_load_state(worker *w);

#endif
