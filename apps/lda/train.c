/* train: distributed LDA on Loom, run on every node of a job.
 *
 * Data: worker r of W reads share r of the corpus (whole documents, byte
 * ranges of one file); the document-topic counts of its documents never leave
 * it. The word-topic counts are a dense i32 table "lda.word_topic" (a word's
 * K counts, split into blocks of up to 64 topics, one table row per block)
 * and the topic totals a one-row i64 table "lda.topics", both summed on the
 * servers and both under --consistency.
 * V is agreed at start: every worker pushes its share's vocabulary size (and
 * the --vocab file's line count) into a max table.
 *
 * Each worker keeps a copy of the rows of its own words and of the totals,
 * which its SparseLDA sampler updates as it samples, exactly like sequential
 * Gibbs. An iteration is --syncs clocks; per clock the worker sweeps the next
 * 1/syncs of its documents, pushes the change of every row it touched and of
 * the totals, calls loom_clock(), pulls the totals (one worker: its own are
 * exact) and the rows of its words that other workers' documents contain too
 * (as fresh as the consistency
 * model lets them be: under SSP(s) at most s clocks of other workers' changes
 * are missing, its own are always there; the rows of words only it has
 * cannot have changed elsewhere) and rebuilds the sampler from them. So the other workers' moves
 * reach a worker only at clock boundaries: the staleness is the price of sampling in parallel
 * (AD-LDA, Newman et al. 2009; Bösen's LDA).
 *
 * Compute threads (--threads T, apps/common/team.h) share the worker's one
 * sampler, its one copy of the rows and its client: a clock's sweep is T
 * steps of T lanes (lanes.c), in each of which thread t samples, in its own
 * documents, the tokens of a block of words no other thread holds, so the
 * threads write the shared rows without a lock; thread 0 adds their changes
 * of the topic totals after each step. The worker then pushes, clocks and
 * pulls once, as with one thread. seq.c computes the same with T lanes.
 *
 * Every --eval-every iterations the workers meet at a barrier and add up
 * the log-likelihood and the count checks, each over its own documents and
 * words; at the end worker 0 prints the top words of each topic and saves
 * the model (eval.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "common/files.h"

#include "lda/lda.h"
#include "lda/train_impl.h"

/* Table rows of `block` topics: a clock's deltas then skip the blocks of a
 * word's row that did not change (most of them when K is large), and the
 * nblocks rows of word v, keys v * nblocks + b, sit next to each other in a
 * pull, so the pulled values have the layout of whole rows of K. Blocks of
 * 16 to 64 topics keep the 8-byte keys a small part of a pull; K without
 * such a divisor (or K <= 64) keeps whole rows. */
/* Beyond this many bytes of V x K counts the word-topic table is sparse on
 * the servers. */
#define LDA_DENSE_TABLE_BYTES (1ull << 28)
/* Beyond this many bytes of V x K counts the word-topic table is not cached. */
#define LDA_CACHE_BYTES (1ull << 30)

static uint32_t block_width(uint32_t topics)
{
    if (topics <= 64) return topics;
    for (uint32_t b = 64; b >= 16; b--)
        if (topics % b == 0) return b;
    return topics;
}

/* The worker's documents and sampler, the compute threads' lanes over them,
 * and buffers for a clock's changes (at most every word of the worker). */
static int lanes_init(worker *w, const loom_corpus *corpus)
{
    const size_t K = w->p.topics;
    w->lanes = calloc(1, sizeof *w->lanes);
    if (!w->lanes) return LOOM_ENOMEM;
    lane *l = w->lanes;
    int rc = lda_docs_build(corpus, &l->d);
    if (!rc) rc = lda_sampler_init_kind(&l->s, &w->p, l->d.nwords, w->c->train.sampler);
    if (!rc) rc = lda_lanes_init(&w->grid, &l->s, &l->d, w->threads);
    if (rc) return rc;
    size_t n = l->d.nwords ? l->d.nwords : 1;
    l->ckeys = malloc(w->chunk * w->nblocks * sizeof *l->ckeys);
    l->vals = malloc(w->chunk * K * sizeof *l->vals);
    l->pcols = malloc(w->chunk * K * sizeof *l->pcols);
    l->pnnz = malloc(w->chunk * w->nblocks * sizeof *l->pnnz);
    l->tdelta = calloc(K, sizeof *l->tdelta);
    l->shared_idx = malloc(n * sizeof *l->shared_idx);
    l->reload = malloc(n * sizeof *l->reload);
    if (!l->ckeys || !l->vals || !l->pcols || !l->pnnz || !l->tdelta || !l->shared_idx ||
        !l->reload)
        return LOOM_ENOMEM;
    /* What the job would lose with this worker (--on-worker-failure continue). */
    loom_report_metric(w->n, "share", (double)l->d.ndocs);
    return 0;
}

/* Wait for the clock's pushes still in flight (lane.pushed): before tdelta
 * changes, and before it is freed. */
static int lanes_wait_pushed(worker *w)
{
    lane *l = w->lanes;
    int rc = 0;
    for (int i = 0; l && i < l->npushed; i++) {
        int r = loom_wait(w->n, l->pushed[i]);
        if (!rc) rc = r;
    }
    if (l) l->npushed = 0;
    return rc;
}

static void lanes_free(worker *w)
{
    lane *l = w->lanes;
    if (l) {
        lanes_wait_pushed(w);
        free(l->keys), free(l->ckeys), free(l->vals), free(l->pcols), free(l->pnnz);
        free(l->tdelta);
        free(l->shared_idx);
        free(l->nnz), free(l->cols), free(l->reload);
        lda_sampler_free(&l->s);
        lda_docs_free(&l->d);
    }
    free(w->lanes);
    lda_lanes_free(&w->grid);
}

size_t lda_block_keys(const worker *w, const uint64_t *words, size_t n, uint64_t *keys)
{
    for (size_t i = 0; i < n; i++)
        for (uint32_t b = 0; b < w->nblocks; b++)
            keys[i * w->nblocks + b] = words[i] * w->nblocks + b;
    return n * w->nblocks;
}

/* Agree on the vocabulary (the largest of the workers' sizes), and check
 * UCI's NNZ: the header counts the pairs of the whole file, a worker read a
 * share, so the shares' pairs are summed here (a one-share read is checked by
 * the reader, with the same message). Every worker sees the same totals, so
 * all of them stop together. */
static int agree_corpus(worker *w, const loom_corpus *corpus, uint64_t mine, uint64_t *vocab)
{
    app_stats pairs;
    TRY("open the pair count", app_stats_open(w->n, "lda.pairs", 1, &pairs));
    double nnz = (double)corpus->nnz, total_nnz; /* exact below 2^53 pairs */
    TRY("push the pair count", app_stats_add(&pairs, 0, &nnz));
    int64_t v = (int64_t)mine, all;
    TRY("agree on the vocabulary", app_agree_max(w->n, "lda.sizes", 1, &v, &all));
    TRY("pull the pair count", app_stats_read(&pairs, 0, &total_nnz));
    /* With --skip-bad the skipped lines are pairs the header counts. */
    if (corpus->format == LOOM_BOW_UCI && !w->c->data.skip_bad &&
        total_nnz != (double)corpus->header_nnz) {
        app_fail_together(
            w->n, PROG ": %s:%zu: the header says NNZ = %" PRIu64 " but the file has %.0f pairs",
            w->c->job.train_path, corpus->header_nnz_line, corpus->header_nnz, total_nnz);
        return 1;
    }
    *vocab = (uint64_t)all;
    return 0;
}

static int open_tables(worker *w)
{
    const app_job *j = &w->c->job;
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_I32;
    o.width = w->block;
    /* A large table: a word's tokens touch few of its blocks (at K = 100,000
     * on AP a word has 2000 blocks and 42 tokens on average), so the servers
     * keep only the rows written (src/ps/storage.c). A table that fits is
     * dense: a sparse one costs a hash lookup per row pushed or pulled, 8-15%
     * of a one-worker job's CPU at K = 1000 on AP, where dense it takes
     * 42 MB. The rotation's engine hands blocks over explicitly and needs
     * them dense. */
    o.storage = (double)w->p.vocab * w->p.topics * sizeof(int32_t) > LDA_DENSE_TABLE_BYTES &&
                        w->c->train.schedule == LDA_SCHEDULE_DATA
                    ? LOOM_SPARSE
                    : LOOM_DENSE;
    o.key_end = w->p.vocab * w->nblocks;
    o.consistency = (loom_consistency)j->consistency;
    o.staleness = j->staleness;
    o.filter_push = j->filter_push;
    o.filter_pull = j->filter_pull;
    app_job_comm(j, &o);
    /* The process cache keeps every row pulled, dense: past LDA_CACHE_BYTES
     * of V x K counts it alone would hold more than a process should (4.2 GB
     * at K = 100,000 on AP), so the rows then come from the servers at every
     * pull, unless managed communication (--priority) pushes rows into it. */
    if ((double)w->p.vocab * w->p.topics * sizeof(int32_t) > LDA_CACHE_BYTES &&
        j->priority == LOOM_PRIORITY_NONE)
        o.cache = 0;
    if (w->c->train.schedule == LDA_SCHEDULE_ROTATION) { /* what the static engine needs */
        o.consistency = LOOM_ASP;
        o.cache = 0;
    }
    TRY("open the word-topic table", loom_table_open(w->n, "lda.word_topic", &o, &w->wt));
    o.type = LOOM_I64;
    o.width = w->p.topics;
    o.storage = LOOM_DENSE;
    o.key_end = 1;
    TRY("open the topic table", loom_table_open(w->n, "lda.topics", &o, &w->tt));
    TRY("open the statistics table", app_stats_open(w->n, "lda.stats", STAT_FIELDS, &w->stats));
    return lda_open_check(w);
}

/* --test: this worker's share of the test documents against the agreed
 * vocabulary, and buffers for their rows. All workers add up the tokens to
 * score and the ones skipped, so a test file with nothing to score stops
 * every worker together, and worker 0 reports the skipped ones once. */
static int prepare_test(worker *w, const loom_corpus *test)
{
    if (lda_heldout_build(test, w->p.vocab, &w->h))
        return app_fail(PROG, "prepare test documents", LOOM_ENOMEM);
    size_t n = w->h.d.nwords ? w->h.d.nwords : 1;
    w->test_keys = malloc(n * w->nblocks * sizeof *w->test_keys);
    w->test_rows = malloc(n * w->p.topics * sizeof *w->test_rows);
    w->test_totals = malloc(w->p.topics * sizeof *w->test_totals);
    if (!w->test_keys || !w->test_rows || !w->test_totals)
        return app_fail(PROG, "test buffers", LOOM_ENOMEM);
    lda_block_keys(w, w->h.d.vocab, w->h.d.nwords, w->test_keys);
    app_stats counts;
    TRY("open the test counts", app_stats_open(w->n, "lda.test", 2, &counts));
    double mine[2] = {(double)w->h.scored, (double)w->h.skipped}, all[2];
    TRY("push the test counts", app_stats_add(&counts, 0, mine));
    TRY("barrier", loom_barrier(w->n));
    TRY("pull the test counts", app_stats_read(&counts, 0, all));
    const char *path = w->c->job.test_path;
    if (all[0] == 0) {
        app_fail_together(w->n,
                          PROG ": %s has no words to score (a test document needs 2 tokens of "
                               "words of the training vocabulary)",
                          path);
        return 1;
    }
    if (w->rank == 0 && all[1] > 0)
        fprintf(stderr,
                PROG ": %s: skipped %.0f token(s) of words outside the vocabulary of %" PRIu64
                     " words\n",
                path, all[1], w->p.vocab);
    return 0;
}

/* The sampler's n change triples as sparse rows of the blocks they fall in:
 * they come by word and topic, so by block key and column. */
static int encode_changes(worker *w, lane *l, size_t n)
{
    if (n > l->ncols_cap) { /* n changes fall in at most n rows */
        uint32_t *cols = realloc(l->cols, n * sizeof *cols);
        if (cols) l->cols = cols;
        uint32_t *nnz = realloc(l->nnz, n * sizeof *nnz);
        if (nnz) l->nnz = nnz;
        uint64_t *keys = realloc(l->keys, n * sizeof *keys);
        if (keys) l->keys = keys;
        if (!cols || !nnz || !keys) return app_fail(PROG, "list the changes", LOOM_ENOMEM);
        l->ncols_cap = n;
    }
    size_t m = 0, B = w->block;
    for (size_t i = 0; i < n; i++) {
        uint64_t key = l->d.vocab[l->s.chg_word[i]] * w->nblocks + l->s.chg_topic[i] / B;
        if (!m || l->keys[m - 1] != key) {
            l->keys[m] = key;
            l->nnz[m++] = 0;
        }
        l->nnz[m - 1]++;
        l->cols[i] = (uint32_t)(l->s.chg_topic[i] % B);
    }
    l->nkeys = m;
    l->nchanges = n;
    return 0;
}

/* Send a step's changes (initial: the initial counts), and at the clock's
 * end (clock_end) the process's clock. At the clock's end the rows go at
 * once (loom_push_sparse_async copies them sparse: the update buffer would
 * make them dense), the totals from tdelta without a copy. The worker does
 * not wait for the servers to have them but goes on sampling, and waits
 * before the next changes are listed into tdelta (lanes_wait_pushed): under
 * SSP a server applies a clock's changes while the worker samples the next
 * (docs/BENCHMARKS.md, "LDA: a clock's pushes applied while the next one
 * samples"). The initial counts are waited for at once: their totals are
 * pulled into the array they were pushed from. Every step before
 * the clock's last (--steps) pushes into the update buffer, which holds them
 * until the clock sends them (or managed communication, --priority, sends
 * them while the clock runs). */
static int push_lanes(worker *w, int initial, int clock_end)
{
    static const uint64_t zero = 0;
    lane *l = w->lanes;
    const int64_t *totals = initial ? l->s.totals : l->tdelta;
    const int32_t *delta = l->s.chg_delta;
    if (!clock_end) {
        if (l->nkeys)
            TRY("push word-topic counts",
                loom_push_sparse(w->wt, l->keys, l->nkeys, l->nnz, l->cols, delta));
        TRY("push topic totals", loom_push(w->tt, &zero, 1, totals));
        return 0;
    }
    if (l->nkeys)
        TRY("push word-topic counts",
            loom_push_sparse_async(w->wt, l->keys, l->nkeys, l->nnz, l->cols, delta,
                                   &l->pushed[l->npushed++]));
    TRY("push topic totals", loom_push_async(w->tt, &zero, 1, totals, &l->pushed[l->npushed++]));
    if (initial) TRY("push", lanes_wait_pushed(w));
    TRY("clock", loom_clock(w->n));
    return 0;
}

/* Pull the rows of the worker's (l's) n local words `idx` (NULL: words 0..n-1) a chunk
 * of words at a time into the lane's rows; the words whose rows changed are
 * added to l->reload (from *nreload on) when reload is set. The rows come
 * sparse (loom_pull_sparse: a word's non-zero counts, by block and column,
 * so by topic), and a word's row is compared with and rebuilt from its
 * pairs; the buffers hold w->chunk words of K (room to pull in place), so
 * they and the keys stay the same size whatever the vocabulary. */
static int pull_rows(worker *w, lane *l, const uint32_t *idx, size_t n, int reload, size_t *nreload)
{
    const size_t K = w->p.topics;
    for (size_t i0 = 0; i0 < n; i0 += w->chunk) {
        size_t m = n - i0 < w->chunk ? n - i0 : w->chunk, total;
        for (size_t i = 0; i < m; i++)
            lda_block_keys(w, &l->d.vocab[idx ? idx[i0 + i] : i0 + i], 1,
                           l->ckeys + i * w->nblocks);
        TRY("pull word-topic rows", loom_pull_sparse(w->wt, l->ckeys, m * w->nblocks, l->pnnz,
                                                     l->pcols, l->vals, w->chunk * K, &total));
        size_t e = 0;
        for (size_t i = 0; i < m; i++) {
            uint32_t word = idx ? idx[i0 + i] : (uint32_t)(i0 + i), nnz = 0;
            for (uint32_t b = 0; b < w->nblocks; b++)
                for (uint32_t j = 0; j < l->pnnz[i * w->nblocks + b]; j++, nnz++)
                    l->pcols[e + nnz] += b * w->block;
            int changed;
            TRY("pull word-topic rows",
                lda_rows_assign_sparse(&l->s.rows, word, l->pcols + e, l->vals + e, nnz, &changed));
            if (reload && changed) l->reload[(*nreload)++] = word;
            e += nnz;
        }
    }
    return 0;
}

/* After a clock: the rows other workers change and the totals, then the
 * sampler. The other rows hold exactly this worker's counts, which is what
 * a pull of them would return (read-my-writes), so they are not pulled:
 * with one worker no row is pulled at all, nor the totals, which are then
 * its own (lda_sampler_store): a pull of them would wait for the server to
 * apply the clock's push, which it does while this worker samples on. */
static int refresh(worker *w)
{
    static const uint64_t zero = 0;
    lane *l = w->lanes;
    TRY("store the counts", lda_sampler_store(&l->s));
    /* Only the words whose rows differ from the sampler's are rebuilt. */
    size_t nreload = 0;
    if (pull_rows(w, l, l->shared_idx, l->nshared, 1, &nreload)) return 1;
    if (w->nworkers > 1) TRY("pull topic totals", loom_pull(w->tt, &zero, 1, l->s.totals));
    TRY("rebuild the sampler", lda_sampler_reload(&l->s, l->reload, nreload));
    return 0;
}

/* After the initial counts: all the worker's rows and the totals, the
 * sampler, and which words are shared with other workers: those whose total
 * count exceeds their count in this worker's documents (word totals never
 * change: a token changes topic, not word). The only worker of a job that
 * did not resume knows the servers' rows: its own initial counts, so it
 * pulls none (at K = 100,000 on AP a pull of them all is 21M table rows,
 * most of the start's CPU). */
static int start_lane(worker *w)
{
    static const uint64_t zero = 0;
    lane *l = w->lanes;
    uint64_t *own = calloc(l->d.nwords ? l->d.nwords : 1, sizeof *own);
    if (!own) return app_fail(PROG, "shared words", LOOM_ENOMEM);
    for (uint64_t k = 0; k < l->d.ntokens; k++) own[l->d.word[k]]++;
    if ((w->nworkers > 1 || w->resuming) && pull_rows(w, l, NULL, l->d.nwords, 0, NULL)) {
        free(own);
        return 1;
    }
    int rc = loom_pull(w->tt, &zero, 1, l->s.totals);
    if (!rc) rc = lda_sampler_load(&l->s);
    if (!rc) rc = lda_sampler_docs(&l->s, &l->d);
    if (rc) {
        free(own);
        return app_fail(PROG, "start the sampler", rc);
    }
    for (size_t i = 0; i < l->d.nwords; i++)
        if ((uint64_t)lda_rows_sum(&l->s.rows, i) != own[i])
            l->shared_idx[l->nshared++] = (uint32_t)i;
    free(own);
    return 0;
}

/* Initial topics: push the counts they make, and read everyone's back (a
 * resumed job: its topics and the servers' counts). */
static int initialise(worker *w)
{
    lane *l = w->lanes;
    if (!w->resuming) lda_docs_init_topics(&l->d, w->p.topics, w->c->train.seed);
    TRY("count the initial topics", lda_count(&l->d, &l->s.rows, l->s.totals));
    /* The initial counts go out as sparse rows, like a clock's changes. */
    size_t n;
    TRY("list the initial counts", lda_sampler_counts(&l->s, &n));
    if (encode_changes(w, l, n)) return 1;
    if (w->resuming)
        TRY("clock", loom_clock(w->n));
    else if (push_lanes(w, 1, 1))
        return 1;
    if (!w->resuming && loom_checkpoint_due(w->n) && lda_save_state(w, 0, 0)) return 1;
    /* Every worker starts from every worker's initial counts, whatever the staleness. */
    TRY("barrier", loom_barrier(w->n));
    return start_lane(w);
}

/* Thread t's part of a step of a clock's sweep (lanes.c). */
static int sweep(void *arg, int t)
{
    worker *w = arg;
    lane *l = w->lanes;
    int steps = w->c->train.steps;
    lda_lanes_sweep(&w->grid, &l->s, &l->d, t, w->lstep, w->c->train.syncs * steps,
                    w->sync * steps + w->step, w->c->train.seed, w->it);
    return 0;
}

/* One clock of --steps steps: in each the threads sweep the step's
 * documents (T steps of the lanes), the worker pushes the changes and
 * refreshes; the last step's push ends the clock.
 * Between steps the refresh reads the cache (the rows are fresh enough for
 * the clock already), so it sees the other workers' changes only where the
 * servers' row pushes of managed communication (--priority) brought them. */
static int sync_clock(worker *w, int sync, int it)
{
    lane *l = w->lanes;
    w->sync = sync, w->it = it;
    for (w->step = 0; w->step < w->c->train.steps; w->step++) {
        for (w->lstep = 0; w->lstep < w->threads; w->lstep++) {
            if (app_team_run(w->team, sweep, w)) return 1;
            lda_lanes_merge(&w->grid, &l->s);
        }
        size_t n;
        TRY("push", lanes_wait_pushed(w)); /* tdelta is rewritten */
        TRY("list the changes", lda_sampler_changes(&l->s, &n, l->tdelta));
        if (encode_changes(w, l, n) || push_lanes(w, 0, w->step == w->c->train.steps - 1) ||
            refresh(w))
            return 1;
    }
    /* The last training clock is the final checkpoint's (ft.h). */
    int last = it == w->c->train.iterations - 1 && sync == w->c->train.syncs - 1;
    return (last ? loom_checkpoint_final(w->n) : loom_checkpoint_due(w->n))
               ? lda_save_state(w, it, sync + 1)
               : 0;
}

/* ---- --schedule rotation ----
 *
 * The word-topic table is the static engine's rotated table (loom/sched.h),
 * cut into W blocks of words (equal ranges of word ids, each a whole number
 * of table rows). In sub-iteration i worker m holds word block (i + m) mod W
 * and samples, in every one of its documents, the tokens of those words: a
 * token always sees its word's exact counts, since nobody else may change
 * them meanwhile (STRADS's and LightLDA's model scheduling). After W
 * sub-iterations every token was sampled once.
 *
 * The topic totals (the summary row) are shared by all blocks, so they
 * cannot rotate: each sub-iteration pulls them, and pushes its change of
 * them at its end (waiting for the servers' acknowledgement). A worker's
 * totals thus miss at most the other workers' changes of the current
 * sub-iteration, about 1/W of an iteration's moves of 1/W of the tokens each.
 *
 * A document's random stream is seeded once per iteration and continues from
 * sub-iteration to sub-iteration, so with one worker (one block, one
 * sub-iteration) an iteration is lda_sweep over all documents: seq.c with
 * --syncs 1, bit for bit (tests/lda compare them).
 *
 * The engine keeps the blocks from iteration to iteration (keep_blocks) and
 * runs from one evaluation to the next in one call: the word-topic table is
 * written only before an evaluation reads it, not pulled twice and pushed
 * once a block per iteration; the counts are the same. */

/* update(): sample this worker's tokens of the block's words. */
static int rotate(void *arg, const loom_sched_task *task)
{
    static const uint64_t zero = 0;
    worker *w = arg;
    lane *l = &w->lanes[0];
    const size_t K = w->p.topics;
    uint64_t v0 = task->block.begin / w->nblocks, v1 = task->block.end / w->nblocks;
    size_t lo = app_lower_bound(l->d.vocab, l->d.nwords, v0);
    size_t hi = app_lower_bound(l->d.vocab, l->d.nwords, v1);
    int32_t *rows = task->block.rows;
    const lda_docs *d = &l->d;
    for (size_t i = 0; task->sub == 0 && i < d->ndocs; i++)
        app_rng_seed(&w->rng[i], w->c->train.seed,
                     lda_stream(w->first_it + (int)task->iteration + 1, d->first_doc + i));
    TRY("pull topic totals", loom_pull(w->tt, &zero, 1, l->s.totals));
    memcpy(w->tloaded, l->s.totals, K * sizeof *w->tloaded);
    /* Only the words whose counts others changed since this worker stored
     * them are rebuilt: the others' rows hold the sampler's counts. */
    size_t nchanged = 0;
    for (size_t i = lo; i < hi; i++) {
        int changed;
        TRY("take the block",
            lda_rows_assign(&l->s.rows, i, rows + (l->d.vocab[i] - v0) * K, &changed));
        if (changed) l->reload[nchanged++] = (uint32_t)i;
    }
    TRY("take the block", lda_sampler_reload(&l->s, l->reload, nchanged));
    lda_sweep_words(&l->s, &l->d, w->rng, lo, hi);
    TRY("store the counts", lda_sampler_store(&l->s));
    for (size_t i = lo; i < hi; i++)
        lda_rows_expand(&l->s.rows, i, rows + (l->d.vocab[i] - v0) * K);
    for (size_t k = 0; k < K; k++) l->tdelta[k] = l->s.totals[k] - w->tloaded[k];
    loom_ts ts;
    TRY("push topic totals", loom_push_async(w->tt, &zero, 1, l->tdelta, &ts));
    TRY("push topic totals", loom_wait(w->n, ts));
    return 0;
}

/* The engine over the word-topic table, after initialise(). */
static int rotation_open(worker *w)
{
    size_t W = (size_t)w->nworkers;
    if (w->p.vocab < W) {
        app_fail_together(w->n,
                          PROG ": %" PRIu64 " words for %zu workers: --schedule rotation gives "
                               "each worker a block of at least one",
                          w->p.vocab, W);
        return 1;
    }
    uint64_t *bounds = malloc((W + 1) * sizeof *bounds);
    w->rng = malloc((w->lanes[0].d.ndocs ? w->lanes[0].d.ndocs : 1) * sizeof *w->rng);
    w->tloaded = malloc(w->p.topics * sizeof *w->tloaded);
    if (!bounds || !w->rng || !w->tloaded) {
        free(bounds);
        return app_fail(PROG, "start the rotation", LOOM_ENOMEM);
    }
    for (size_t b = 0; b <= W; b++)
        bounds[b] = (uint64_t)((unsigned __int128)w->p.vocab * b / W) * w->nblocks;
    loom_sched_static_opts so = LOOM_SCHED_STATIC_OPTS_DEFAULT;
    so.bounds = bounds;
    so.update = rotate;
    so.user = w;
    so.log_path = w->c->train.schedule_log;
    so.keep_blocks = 1;
    int rc = loom_sched_static_open(w->wt, &so, &w->engine);
    free(bounds);
    TRY("start the rotation", rc);
    return 0;
}

/* Iteration `it`: at the first and after every evaluation, the full
 * rotations up to the next evaluation (the others ran in that call). */
static int rotation_iteration(worker *w, int it)
{
    const lda_train_opts *o = &w->c->train;
    if (it != w->first_it && !lda_eval_due(o, it - 1)) return 0;
    int n = 1;
    while (!lda_eval_due(o, it + n - 1)) n++;
    TRY("rotation", loom_sched_run(w->engine, n));
    return 0;
}

static int train_share(worker *w, const loom_corpus *corpus, const loom_corpus *test)
{
    const lda_cli *c = w->c;
    const lda_train_opts *o = &c->train;
    char err[512];
    if (c->vocab_path && lda_vocab_load(c->vocab_path, &w->vocab, err, sizeof err)) {
        fprintf(stderr, "loom train lda: %s\n", err);
        return 1;
    }
    uint64_t mine = corpus->vocab > w->vocab.n ? corpus->vocab : w->vocab.n, vocab;
    if (agree_corpus(w, corpus, mine, &vocab)) return 1;
    if (vocab == 0) {
        fprintf(stderr, "loom train lda: %s has no words\n", c->job.train_path);
        return 1;
    }
    if (c->vocab_path && w->vocab.n < vocab)
        fprintf(stderr,
                "loom train lda: %s names %zu words, the corpus has ids up to %" PRIu64
                "; the rest are shown as ids\n",
                c->vocab_path, w->vocab.n, vocab - 1);
    w->p = (lda_params){o->topics, vocab, o->alpha, o->beta};
    const size_t K = o->topics;
    w->block = block_width(o->topics);
    w->nblocks = o->topics / w->block;
    w->threads = c->job.threads > 1 ? c->job.threads : 1;
    /* Rows are pulled a chunk of words at a time (the evaluation's, eval.c,
     * and the lanes'). */
    w->chunk = (size_t)(LDA_EVAL_VALUES / K) ? (size_t)(LDA_EVAL_VALUES / K) : 1;
    TRY("start the compute threads", app_team_start(&w->team, w->threads));
    TRY("prepare documents", lanes_init(w, corpus));
    if (lda_load_state(w)) return 1;
    w->words = malloc(w->chunk * sizeof *w->words);
    w->keys = malloc(w->chunk * w->nblocks * sizeof *w->keys);
    w->vals = malloc(w->chunk * K * sizeof *w->vals);
    w->scratch = calloc(K, sizeof *w->scratch);
    w->cols = malloc((K + 2) * sizeof *w->cols);
    if (!w->words || !w->keys || !w->vals || !w->scratch || !w->cols)
        return app_fail(PROG, "buffers", LOOM_ENOMEM);
    if (w->rank == 0) {
        if (!(w->totals = calloc(K, sizeof *w->totals)))
            return app_fail(PROG, "model", LOOM_ENOMEM);
        if (c->job.metrics_path &&
            !(w->metrics = fopen(c->job.metrics_path, w->resuming ? "a" : "w"))) {
            fprintf(stderr, "loom train lda: cannot write %s: %s\n", c->job.metrics_path,
                    strerror(errno));
            return 1;
        }
    }
    if (open_tables(w) || (test && prepare_test(w, test)) || initialise(w)) return 1;
    int rotation = o->schedule == LDA_SCHEDULE_ROTATION;
    if (rotation && rotation_open(w)) return 1;
    w->start = app_now_s();
    for (int it = w->first_it; it < o->iterations; it++) {
        double t0 = app_now_s();
        if (rotation && rotation_iteration(w, it)) return 1;
        for (int sync = it == w->first_it ? w->first_sync : 0; !rotation && sync < o->syncs; sync++)
            if (sync_clock(w, sync, it)) return 1;
        TRY("epoch end", loom_checkpoint_epoch_end(w->n)); /* --checkpoint-every Ne */
        w->train_s += app_now_s() - t0;
        w->iters_since_eval++;
        if (lda_eval_due(o, it) && lda_evaluate(w, it)) return 1;
    }
    return w->rank == 0 ? lda_finish(w) : 0;
}

static int run_worker(loom_node *n, const lda_cli *c)
{
    char err[1024];
    loom_corpus *corpus;
    /* Under any launcher, before the data is read: outputs that cannot be
     * written must not be found after the last epoch. */
    if (loom_rank(n) == 0 && app_check_job_files(&c->job, err, sizeof err)) {
        fprintf(stderr, PROG ": %s\n", err);
        return 1;
    }
    if (loom_bow_read(c->job.train_path, loom_rank(n), loom_num_workers(n), &c->data, &corpus, err,
                      sizeof err)) {
        fprintf(stderr, "loom train lda: %s\n", err);
        return 1;
    }
    if (corpus->skipped)
        fprintf(stderr, "loom train lda: skipped %zu malformed line(s) in %s\n", corpus->skipped,
                c->job.train_path);
    /* The test documents are shared across the workers like the training ones. */
    loom_corpus *test = NULL;
    if (c->job.test_path && loom_bow_read(c->job.test_path, loom_rank(n), loom_num_workers(n),
                                          &c->data, &test, err, sizeof err)) {
        fprintf(stderr, "loom train lda: %s\n", err);
        loom_corpus_free(corpus);
        return 1;
    }
    if (test && test->skipped)
        fprintf(stderr, "loom train lda: skipped %zu malformed line(s) in %s\n", test->skipped,
                c->job.test_path);
    worker w = {.n = n, .c = c, .rank = loom_rank(n), .nworkers = loom_num_workers(n)};
    int rc = train_share(&w, corpus, test);
    if (w.metrics && fclose(w.metrics) && !rc) {
        fprintf(stderr, PROG ": cannot write %s: %s\n", c->job.metrics_path, strerror(errno));
        rc = 1;
    }
    app_team_stop(w.team);
    loom_sched_close(w.engine);
    free(w.rng), free(w.tloaded);
    lanes_free(&w);
    free(w.words), free(w.keys), free(w.vals), free(w.scratch), free(w.cols), free(w.totals);
    free(w.test_keys), free(w.test_rows), free(w.test_totals);
    lda_heldout_free(&w.h);
    loom_corpus_free(test);
    lda_vocab_free(&w.vocab);
    loom_corpus_free(corpus);
    return rc;
}

static int worker_main(loom_node *n, const void *c)
{
    return run_worker(n, c);
}

int lda_train_node(const void *cli)
{
    return app_node_main(PROG, worker_main, cli);
}
