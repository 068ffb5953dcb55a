/* lda: latent Dirichlet allocation by collapsed Gibbs sampling on Loom (the
 * topic-model workload of Bösen, STRADS and LightLDA; kim-thesis-strads.txt
 * chapter 3-4, wei-thesis-bosen-orion.txt chapter 2).
 *
 * Pieces, one file each:
 *   docs.c        a worker's documents as token arrays, its local vocabulary,
 *                 seeded initial topics
 *   sampler.c     the SparseLDA sampler (Yao, Mimno & McCallum 2009) over a
 *                 local copy of the word-topic counts
 *   mh.c          the Metropolis-Hastings sampler (LightLDA, Yuan et al.
 *                 2015): O(1) a token, for many topics (--sampler mh)
 *   lanes.c       --threads: T lanes of documents x T blocks of words
 *                 sampled in T steps with one sampler, without a lock
 *   likelihood.c  the collapsed joint log-likelihood log p(w, z)
 *   heldout.c     held-out perplexity by document completion
 *   model.c       the model file, top words, the vocabulary file
 *   seq.c         the sequential reference (the same sweeps in one process)
 *   rows.c        word-topic rows, dense or sparse per word (hybrid storage)
 *   flags.c       the command line of `loom train lda`
 *   train.c       distributed training on every node of a job
 *   eval.c        its evaluations (log-likelihood, count checks) and the
 *                 model at the end
 *   checkpoint.c  a training worker's state in the job's checkpoints
 *                 (train_impl.h: what train.c and checkpoint.c share)
 *   gen.c, cli.c  planted corpora and `loom gen lda`
 * docs/LDA.md describes the algorithm, the flags and the files. */
#ifndef LOOM_APPS_LDA_H
#define LOOM_APPS_LDA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <loom/data.h>

#include "common/app.h"

/* Largest --topics: topic ids live in the low 32 bits of the sampler's packed
 * entries; memory follows the non-zero counts (rows.c), but K-sized arrays,
 * the changed-count bits (vocabulary x topics / 8) and the pulls' dense
 * buffers still grow with K. */
#define LDA_MAX_TOPICS 100000

typedef struct lda_params {
    uint32_t topics; /* K */
    uint64_t vocab;  /* V: word ids are 0..V-1 */
    double alpha;    /* symmetric document-topic prior */
    double beta;     /* symmetric topic-word prior */
} lda_params;

/* ---- word-topic rows (rows.c) ---- */

/* Counts of words over K topics, each word's row in the smaller form: dense
 * (K int32) once its sum reaches K/2, else its non-zero counts as (topic,
 * count) pairs sorted by topic (LightLDA's hybrid storage). Memory follows
 * the non-zeros: at K = 100,000 on AP a few MB instead of 4.2 GB. */
typedef struct lda_row {
    void *v;      /* int32_t[K] when dense, else uint64_t[cap]: topic << 32 | count */
    int64_t sum;  /* the row's total */
    uint32_t nnz; /* sparse: pairs in use */
    uint32_t cap; /* sparse: room for pairs; UINT32_MAX when dense */
} lda_row;
typedef struct lda_rows {
    uint32_t topics;
    size_t n;
    lda_row *row;
} lda_rows;

/* n empty rows. 0 or LOOM_ENOMEM. */
int lda_rows_init(lda_rows *r, uint32_t topics, size_t n);
void lda_rows_free(lda_rows *r);
int32_t lda_rows_get(const lda_rows *r, size_t w, uint32_t k);
int64_t lda_rows_sum(const lda_rows *r, size_t w);
int lda_rows_dense(const lda_rows *r, size_t w);
/* Bytes the rows take (their arrays and the per-word headers). */
size_t lda_rows_bytes(const lda_rows *r);
/* Count (w, k) += by; a sparse row turns dense when its sum reaches K/2.
 * 0 or LOOM_ENOMEM. */
int lda_rows_add(lda_rows *r, size_t w, uint32_t k, int32_t by);
/* Word w's row becomes the K counts d, in the form its sum asks for;
 * *changed (if not NULL) says whether it differed. 0 or LOOM_ENOMEM. */
int lda_rows_assign(lda_rows *r, size_t w, const int32_t *d, int *changed);
/* The same from its non-zero counts only: nnz counts c at topics k
 * (strictly ascending, below K, none zero), as loom_pull_sparse() gives them. */
int lda_rows_assign_sparse(lda_rows *r, size_t w, const uint32_t *k, const int32_t *c, uint32_t nnz,
                           int *changed);
/* Word w's row as K dense counts. */
void lda_rows_expand(const lda_rows *r, size_t w, int32_t *out);
/* The next non-zero count of word w from *pos (start at 0), by ascending
 * topic in either form: 1 with *k and *c, or 0 at the end. */
int lda_rows_next(const lda_rows *r, size_t w, size_t *pos, uint32_t *k, int32_t *c);
/* Word dw of dst becomes word sw of src (its counts and form); *changed
 * (if not NULL) says whether the counts differed. 0 or LOOM_ENOMEM. */
int lda_rows_copy(lda_rows *dst, size_t dw, const lda_rows *src, size_t sw, int *changed);
/* The same counts (forms may differ). */
int lda_rows_equal(const lda_rows *a, const lda_rows *b);

/* ---- documents ---- */

/* A worker's share of the corpus, expanded to one entry per token: the tokens
 * of document i are [doc[i], doc[i+1]), in the file's order of (word, count)
 * pairs. Words are indices into vocab, the share's distinct word ids
 * ascending (the rows of the word-topic table this worker reads). */
typedef struct lda_docs {
    size_t ndocs;
    uint64_t first_doc; /* global index of document 0 (random streams use it) */
    uint64_t ntokens;
    size_t *doc;    /* ndocs + 1 offsets */
    uint32_t *word; /* per token: local word index */
    uint32_t *z;    /* per token: its topic */
    size_t nwords;
    uint64_t *vocab; /* nwords global word ids, ascending */
} lda_docs;

int lda_docs_build(const loom_corpus *c, lda_docs *d);
void lda_docs_free(lda_docs *d);
/* Random initial topics, uniform over K: document i draws from stream
 * (seed, stream lda_stream(0, first_doc + i)), so how the corpus is split
 * across workers does not change any document's draws. */
void lda_docs_init_topics(lda_docs *d, uint32_t topics, uint64_t seed);
/* The random stream of a document in an iteration (0: initialisation;
 * iteration t of training: t + 1). */
uint64_t lda_stream(int iteration, uint64_t doc);

/* ---- the sampler ---- */

/* --sampler: SparseLDA (exact Gibbs, O(K_d + K_w) a token after an O(K_d)
 * setup per document) or Metropolis-Hastings (mh.c, O(1) a token, exact).
 * LDA_SAMPLER_AUTO is resolved by lda_sampler_choose before training. */
typedef enum { LDA_SAMPLER_SPARSE = 0, LDA_SAMPLER_MH = 1, LDA_SAMPLER_AUTO = 2 } lda_sampler_kind;
/* --sampler auto takes mh above LDA_MH_ABOVE topics, SparseLDA up to it.
 * Measured on AP (docs/BENCHMARKS.md, "LDA: an exact Metropolis-Hastings
 * sampler"): the CPU seconds mh needs to reach SparseLDA's log-likelihood
 * after 10 iterations are 4.4x SparseLDA's at K = 100, 3.5x at 1000, 0.88x
 * at 10,000 (and a little over 1x for its level after 30 iterations: the
 * break-even), 0.46x at 20,000. */
#define LDA_MH_ABOVE 10000
/* mh: cycles of a document proposal and a word proposal per token (LightLDA's default). */
#define LDA_MH_STEPS 2
lda_sampler_kind lda_sampler_choose(lda_sampler_kind kind, uint32_t topics);

/* The SparseLDA sampler over a worker's copy of the counts. `rows` (nwords
 * hybrid rows: dense or sparse, whichever is smaller) and `totals` (K) hold
 * the counts as last synchronised; lda_sampler_load
 * builds the sampler's own structures from them (per word, its non-zero
 * topics packed as count << 32 | topic and sorted by count, descending).
 * Sampling changes only the sampler's structures; lda_sampler_deltas gives
 * the difference to rows/totals, lda_sampler_store writes it back. */
typedef struct lda_sampler {
    lda_params p;
    size_t nwords;
    lda_rows rows;   /* nwords rows, as last loaded */
    int64_t *totals; /* K, as last loaded */
    int64_t *nk;     /* K, current topic totals */
    uint64_t *packed;
    size_t *off;    /* nwords + 1: word i's entries start at off[i] (capacity off[i+1]-off[i]) */
    uint32_t *len;  /* non-zero topics of each word (sparse: mh keeps hash tables) */
    uint8_t *dirty; /* word changed since the last load or store */
    /* Per word, kw words of bits: the topics whose count a move changed
     * since then (a move from old to k sets both; the count may be back). */
    uint64_t *touched;
    size_t kw;
    int32_t *scratch; /* K, all zero between calls */
    uint64_t *sorted; /* K: room for sorting a word's entries */
    /* lda_sampler_changes' result: (word, topic, delta) triples */
    uint32_t *chg_word, *chg_topic;
    int32_t *chg_delta;
    size_t chg_cap;
    /* per-document state */
    int32_t *ndk;      /* K */
    uint32_t *dtopics; /* the document's non-zero topics */
    uint32_t *dpos;    /* K: position of a topic in dtopics */
    uint32_t ndtopics;
    double *coef; /* K: (alpha + n_dk) / (V beta + n_k) */
    double *qval; /* K: scratch for the q bucket */
    double s_sum, r_sum;
    /* --sampler mh (mh.c): each word's entries are an open-addressing hash
     * table of off[w+1] - off[w] slots (a power of two, at most half full;
     * 0 marks an empty slot); word proposals draw one of the sampler's
     * tokens of the word (lda_sampler_docs). */
    lda_sampler_kind kind;
    size_t *woff;      /* nwords + 1: word w's tokens are wtok[woff[w], woff[w+1]) */
    uint32_t *wtok;    /* the documents' tokens (indices into z), by word */
    size_t *loff;      /* nwords + 1: word w's table of its tokens' counts, if any */
    uint64_t *lpacked; /* loff[nwords]: those tables (as packed; none: n_wk) */
} lda_sampler;

/* A SparseLDA sampler (lda_sampler_init_kind with LDA_SAMPLER_SPARSE). */
int lda_sampler_init(lda_sampler *s, const lda_params *p, size_t nwords);
/* A sampler of the given kind (not AUTO); the rest of the interface is the same. */
int lda_sampler_init_kind(lda_sampler *s, const lda_params *p, size_t nwords,
                          lda_sampler_kind kind);
void lda_sampler_free(lda_sampler *s);
/* Add the counts of d's current topics into rows (d's local words) and
 * totals (zero them first for a fresh start): the initial counts.
 * 0 or LOOM_ENOMEM. */
int lda_count(const lda_docs *d, lda_rows *rows, int64_t *totals);
/* Rebuild the sampler from s->rows and s->totals. Returns 0 or LOOM_ENOMEM. */
int lda_sampler_load(lda_sampler *s);
/* The documents the sampler will sweep, with their current topics, after
 * its first load (mh lists each word's tokens; sparse needs nothing).
 * 0, LOOM_ENOMEM or LOOM_EINVAL (mh: over 2^32 tokens). */
int lda_sampler_docs(lda_sampler *s, const lda_docs *d);
/* Sample new topics for the tokens of documents [lo, hi) of d, in order,
 * document i with the stream lda_stream(iteration + 1, first_doc + i). */
void lda_sweep(lda_sampler *s, lda_docs *d, size_t lo, size_t hi, uint64_t seed, int iteration);
/* --schedule rotation: sample the tokens of local words [lo, hi) in every
 * document of d, in order, document i drawing from rng[i] where it stopped
 * (seeded per iteration as lda_sweep seeds it, so that one sweep over all
 * words is lda_sweep's). */
void lda_sweep_words(lda_sampler *s, lda_docs *d, app_rng *rng, size_t lo, size_t hi);
/* The same for documents [lo, hi) of d only, local words [wlo, whi). */
void lda_sweep_part(lda_sampler *s, lda_docs *d, app_rng *rng, size_t lo, size_t hi, size_t wlo,
                    size_t whi);
/* --threads (lanes.c): a lane of sampler s, a sampler with its own
 * document state and topic totals (K-sized arrays only) that samples with
 * s's word entries; lda_sampler_lane_free frees only what it owns. Before
 * each step lda_sampler_lane_begin points it at s's entries and copies s's
 * current totals; after it lda_sampler_lane_end adds the lane's change of
 * the totals into s's. 0 or LOOM_ENOMEM. */
int lda_sampler_lane_init(lda_sampler *l, const lda_sampler *s);
void lda_sampler_lane_free(lda_sampler *l);
void lda_sampler_lane_begin(lda_sampler *l, const lda_sampler *s);
void lda_sampler_lane_end(lda_sampler *s, const lda_sampler *l);
/* The changes since the last load: for every word changed, its global id into
 * keys (from vocab) and current - loaded counts into vals (K per word);
 * totals_delta gets the change of the totals. Returns the number of words. */
size_t lda_sampler_deltas(lda_sampler *s, const uint64_t *vocab, uint64_t *keys, int32_t *vals,
                          int64_t *totals_delta);
/* The same changes, sparse, at a cost that follows the words and topics
 * changed rather than nwords x K: *n triples (chg_word[i], chg_topic[i],
 * chg_delta[i]) of local word, topic and current - loaded count, every
 * delta non-zero, ascending by word then topic; totals_delta as above.
 * 0 or LOOM_ENOMEM. */
int lda_sampler_changes(lda_sampler *s, size_t *n, int64_t *totals_delta);
/* The rows' non-zero counts in the same triples (as changes from zero: the
 * initial push), ascending by word then topic. 0 or LOOM_ENOMEM. */
int lda_sampler_counts(lda_sampler *s, size_t *n);
/* Write the current counts into rows and totals (what a one-worker push and
 * pull would bring back): only the counts changed since the last load or
 * store are written. 0 or LOOM_ENOMEM. */
int lda_sampler_store(lda_sampler *s);
/* After lda_sampler_store, rows of the n local words in `words` were
 * replaced (a pull brought other workers' changes, or --schedule rotation
 * took a block whose rows others changed): rebuild those words and
 * the totals, what lda_sampler_load would give at a cost that follows n
 * (it falls back to lda_sampler_load when a row's total outgrew the room its
 * word was given). The other words' rows must be as stored. 0 or LOOM_ENOMEM. */
int lda_sampler_reload(lda_sampler *s, const uint32_t *words, size_t n);
/* A word's non-zero topics as the SparseLDA sampler keeps them: *len
 * entries count << 32 | topic, sorted descending (room for one more after
 * them). Topic k's count down by one (it must be there; an entry whose count
 * reaches 0 leaves the list, its value k left at e[*len]); the count of the
 * entry at j up by one; topic k's count up by one (added when absent). Each
 * keeps the order by local swaps (bench/loop_lda.c keeps such a list in a
 * word's row). */
void lda_word_dec(uint64_t *e, uint32_t *len, uint32_t k);
void lda_word_inc_at(uint64_t *e, uint32_t j);
void lda_word_inc(uint64_t *e, uint32_t *len, uint32_t k);
/* n such entries sorted descending, through tmp (room for n). */
void lda_sort_desc(uint64_t *e, size_t n, uint64_t *tmp);
/* The current count of topic k for local word w (tests). */
int32_t lda_sampler_count(const lda_sampler *s, size_t w, uint32_t k);

/* ---- compute threads over one model copy (lanes.c) ---- */

/* --threads T: the worker's documents cut into T lanes and its words into T
 * blocks (contiguous ranges of about equal tokens); a clock's sweep is T
 * steps, in step j lane t samples the tokens of its documents whose words
 * lie in block (t + j) mod T, with a lane of the one sampler (above). No
 * word is sampled by two lanes in a step, so the lanes write the shared
 * entries without a lock; each lane's change of the topic totals is added
 * in lane order after the step. Documents draw their streams as
 * lda_sweep's, continued from step to step: T = 1 is lda_sweep. */
typedef struct lda_lanes {
    int n;             /* T */
    size_t *doc;       /* T + 1: lane t's documents are [doc[t], doc[t+1]) */
    size_t *word;      /* T + 1: block b's local words are [word[b], word[b+1]) */
    lda_sampler *lane; /* T */
    app_rng *rng;      /* per document: its stream of the iteration, where it stopped */
} lda_lanes;

/* T lanes over sampler s (loaded) and its documents d. 0 or LOOM_ENOMEM. */
int lda_lanes_init(lda_lanes *ls, const lda_sampler *s, const lda_docs *d, int lanes);
void lda_lanes_free(lda_lanes *ls);
/* Lane t's step `step` of segment `part` of `parts` (lda_segment of each
 * lane's documents) in iteration `iteration`; step 0 seeds the documents'
 * streams. Lanes of one step may run at the same time. */
void lda_lanes_sweep(lda_lanes *ls, lda_sampler *s, lda_docs *d, int t, int step, int parts,
                     int part, uint64_t seed, int iteration);
/* After a step, every lane done: their changes of the totals into s, in lane order. */
void lda_lanes_merge(lda_lanes *ls, lda_sampler *s);
/* A segment's T steps, the lanes one after the other (the sequential reference). */
void lda_lanes_run(lda_lanes *ls, lda_sampler *s, lda_docs *d, int parts, int part, uint64_t seed,
                   int iteration);

/* ---- log-likelihood ---- */

/* log p(w, z) = docs + words + topics, with
 *   docs   = sum_d [lgamma(K a) - lgamma(n_d + K a) + sum_k (lgamma(n_dk + a) - lgamma(a))]
 *   words  = sum_w sum_k [lgamma(n_wk + b) - lgamma(b)]
 *   topics = sum_k [lgamma(V b) - lgamma(n_k + V b)]
 * (terms with a zero count vanish and are skipped). The parts add up over
 * documents and words, so workers compute them on their own share. */
double lda_ll_docs(const lda_params *p, const lda_docs *d, int32_t *scratch);
double lda_ll_words(const lda_params *p, const int32_t *rows, size_t nrows);
/* sum plus the word part of rows, added in the order lda_ll_words adds them:
 * rows given a chunk at a time sum to lda_ll_words' result bit for bit. */
double lda_ll_words_add(const lda_params *p, const int32_t *rows, size_t nrows, double sum);
/* The same over hybrid rows, in the same order (ascending words, then topics). */
double lda_ll_words_rows(const lda_params *p, const lda_rows *rows, double sum);
double lda_ll_topics(const lda_params *p, const int64_t *totals);

/* ---- held-out perplexity (document completion) ---- */

/* A worker's share of a test file: its documents with the tokens of words
 * outside the vocabulary (id >= V) removed and counted. In each document the
 * even token positions estimate its topic mix, the odd ones are scored. */
typedef struct lda_heldout {
    lda_docs d;       /* d.vocab[0..d.nwords): the test words' global ids */
    uint64_t skipped; /* tokens of words outside the vocabulary */
    uint64_t scored;  /* tokens scored at each evaluation */
} lda_heldout;

/* Gibbs sweeps over a test document's estimation half. */
#define LDA_HELDOUT_SWEEPS 20

int lda_heldout_build(const loom_corpus *c, uint64_t vocab, lda_heldout *h);
void lda_heldout_free(lda_heldout *h);
/* Σ log p(w | θ_d, φ) over the scored tokens, with φ from rows (the counts of
 * h->d's words, d.nwords x K) and totals; θ_d estimated with the random
 * streams of (seed, iteration). NAN when out of memory. */
double lda_heldout_ll(const lda_params *p, lda_heldout *h, const int32_t *rows,
                      const int64_t *totals, uint64_t seed, int iteration);

/* ---- model, vocabulary, top words ---- */

/* The trained counts: V hybrid word-topic rows and the K totals. */
typedef struct lda_model {
    lda_params p;
    uint64_t tokens;
    lda_rows counts; /* V rows */
    int64_t *totals; /* K */
} lda_model;

/* Text file, documented in docs/LDA.md:
 *   line 1: "loom-lda 1 topics=K vocab=V alpha=A beta=B tokens=N"
 *   then, for every word with a non-zero count, ascending:
 *   "<word id> <topic>:<count> <topic>:<count> ..." (topics ascending).
 * lda_model_load checks everything and reports "FILE:LINE: what is wrong". */
int lda_model_save(const lda_model *m, const char *path, char *err, size_t errlen);
/* The same file written a word at a time, ascending, without the whole
 * V x K counts in memory (a trainer streams the servers' rows into it):
 * lda_model_open writes the header, lda_model_write_row a word's line (none
 * for a zero row), lda_model_close reports a failed write (and removes the
 * partial file). */
typedef struct lda_model_writer {
    FILE *f;
    const char *path;
    uint32_t topics;
    int regular;
} lda_model_writer;
int lda_model_open(lda_model_writer *mw, const lda_params *p, uint64_t tokens, const char *path,
                   char *err, size_t errlen);
void lda_model_write_row(lda_model_writer *mw, uint64_t w, const int32_t *row);
int lda_model_close(lda_model_writer *mw, char *err, size_t errlen);
int lda_model_load(const char *path, lda_model *m, char *err, size_t errlen);
void lda_model_free(lda_model *m);

/* A vocabulary file: one word per line, line i (0-based) naming word id i;
 * a line longer than LDA_WORD_MAX bytes is refused. */
#define LDA_WORD_MAX 65536
typedef struct lda_vocab {
    size_t n;
    char **word;
    char *text;
} lda_vocab;
int lda_vocab_load(const char *path, lda_vocab *v, char *err, size_t errlen);
void lda_vocab_free(lda_vocab *v);

/* The n most frequent words of topic k into out (fewer if the topic has fewer
 * non-zero words); ties go to the smaller id. Returns how many. */
size_t lda_top_words(const lda_model *m, uint32_t k, size_t n, uint64_t *out);
/* "topic   k  word word ..." for every topic, words from vocab (ids if NULL). */
int lda_print_top_words(FILE *f, const lda_model *m, const lda_vocab *vocab, size_t n);
/* The same from rows given a word at a time, ascending (K x n words kept,
 * not the counts): lda_top_add each word's row, then lda_top_print. */
typedef struct lda_top {
    uint32_t topics;
    size_t n;
    uint64_t *word; /* topics x n: each topic's best words so far */
    int32_t *count;
    size_t *have;
} lda_top;
int lda_top_init(lda_top *t, uint32_t topics, size_t n);
void lda_top_free(lda_top *t);
void lda_top_add(lda_top *t, uint64_t w, const int32_t *row);
/* The same from row i of r, at a cost that follows its non-zero counts. */
void lda_top_add_row(lda_top *t, uint64_t w, const lda_rows *r, size_t i);
void lda_top_print(FILE *f, const lda_top *t, const int64_t *totals, const lda_vocab *vocab);

/* ---- training ---- */

/* --schedule: data-parallel clocks (AD-LDA) or word rotation (train.c). */
typedef enum { LDA_SCHEDULE_DATA = 0, LDA_SCHEDULE_ROTATION = 1 } lda_schedule;

typedef struct lda_train_opts {
    uint32_t topics;
    double alpha, beta;
    int iterations;
    int syncs;      /* clocks per iteration */
    int eval_every; /* iterations between log-likelihoods (0: at the end only) */
    uint64_t seed;
    int threads; /* compute threads per worker (--threads): lanes, see train.c */
    lda_schedule schedule;
    const char *schedule_log; /* --schedule-log: the rotation engine's per-task log */
    int steps;                /* sweep, push and refresh this many times a clock (train.c only) */
    lda_sampler_kind sampler; /* --sampler (AUTO until lda_parse_flags resolves it) */
} lda_train_opts;

#define LDA_DEFAULT_STALENESS 1
#define LDA_TRAIN_OPTS_DEFAULT                                                                     \
    {                                                                                              \
        50, 0.1, 0.01, 100, 1, 1, 1, 1, LDA_SCHEDULE_DATA, NULL, 1, LDA_SAMPLER_AUTO               \
    }

/* Is iteration it (0-based) one whose log-likelihood is reported? */
int lda_eval_due(const lda_train_opts *o, int it);
/* Documents [lo, hi) of n that clock `sync` of syncs sweeps. */
void lda_segment(size_t n, int syncs, int sync, size_t *lo, size_t *hi);

/* The sequential reference: the same initialisation, sweeps and cache
 * rebuilds as a one-worker `loom train lda` with o->threads lanes, in this
 * process. Calls
 * report(arg, iteration, log_likelihood, seconds sampling) at every
 * evaluation and leaves the final counts in out. */
typedef void (*lda_report_fn)(void *arg, int iteration, double ll, double sample_s);
int lda_train_sequential(const lda_train_opts *o, const loom_corpus *c, uint64_t vocab,
                         lda_report_fn report, void *arg, lda_model *out);

/* Everything `loom train lda` takes on its command line. */
typedef struct lda_cli {
    app_job job;
    lda_train_opts train;
    loom_bow_opts data;
    const char *vocab_path;
    int top_words;
} lda_cli;

/* Parse `loom train lda` flags into *cli, an lda_cli (app_parse_fn; argv[0]
 * is the command name). Returns 0, or
 * 2 with a sentence naming the offending flag in err. */
int lda_parse_flags(int argc, char **argv, void *cli, char *err, size_t errlen);
/* Its help: every flag, with its range and default (from the parser's table). */
void lda_train_help(FILE *out);

/* The distributed trainer, run by every node of a Loom job (cli: an
 * lda_cli). Returns the process exit status. */
int lda_train_node(const void *cli);

/* ---- synthetic corpora ---- */

typedef struct lda_gen_opts {
    uint64_t docs, vocab;
    uint32_t topics;
    uint32_t doc_length; /* mean tokens per document */
    double alpha, beta;
    uint64_t seed;
    loom_bow_format format; /* LDAC or UCI */
} lda_gen_opts;

#define LDA_GEN_OPTS_DEFAULT                                                                       \
    {                                                                                              \
        1000, 2000, 10, 100, 0.1, 0.1, 1, LOOM_BOW_LDAC                                            \
    }

/* Write a corpus drawn from a planted LDA model: planted topic t draws only
 * from its own block of the vocabulary (words [t V/K, (t+1) V/K)), with
 * Dirichlet(beta) weights inside the block; documents mix topics with
 * Dirichlet(alpha) proportions and have between L/2 and 3L/2 tokens.
 * Deterministic for a seed. */
int lda_generate(const lda_gen_opts *o, FILE *out, char *err, size_t errlen);
/* Word id w's name: "tTT_wWWWW", its planted topic and index in the block. */
void lda_gen_word_name(const lda_gen_opts *o, uint64_t w, char *buf, size_t len);

/* `loom gen lda ARGS` (argv[0] is "lda"); returns the exit status. */
int lda_gen_main(int argc, char **argv);

#endif
