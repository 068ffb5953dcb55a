/* eval: the log-likelihood and the count checks of distributed LDA, at a
 * cost that follows each worker's share, and the model at the end.
 *
 * Every --eval-every iterations the workers meet at a barrier and each one
 * adds into the statistics table its part: the document part of the
 * log-likelihood of its documents, and for the words w ≡ rank (mod W),
 * pulled fresh a chunk at a time (LDA_EVAL_VALUES counts), their word part
 * and what the count checks need: the column sums, their total and the
 * number of negative counts, summed over the workers in the table
 * "lda.check" (one row of K + 2 per evaluation; sums of integers, exact in
 * doubles below 2^53). Worker 0 adds the topic part, checks that the counts
 * add up to the number of tokens and every total is its column's sum (a
 * failure stops the job with status 1), and reports. No worker holds the
 * whole V x K table (at K = 100,000 it is 4 GB), and none pulls it while
 * every worker is there; after a worker was lost (--on-worker-failure
 * continue) its words are nobody's share, and worker 0 checks all words
 * itself, a chunk at a time. The only worker of a data-parallel job pulls
 * nothing: it holds every count already (its own rows, the sum of all it
 * pushed), so it adds the word part and the checks' sums over their
 * non-zero counts, as the sequential reference does, and the checks compare
 * them with the servers' totals; the only worker of any job also skips the
 * barriers and the two tables, whose sums would be its own values. With --test each
 * worker also scores its share of the test documents (heldout.c) against
 * rows pulled fresh, adding the log-likelihood and the number of scored
 * tokens to the same table: worker 0 reports the held-out perplexity.
 *
 * At the end worker 0 reads the table once more, a chunk of words at a
 * time, into the top words of each topic (K x N words kept) and the model
 * file (written a word at a time): the counts of the last evaluation, since
 * nothing is pushed after it; an only worker takes the top words (without
 * a model file) from its own rows. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "lda/lda.h"
#include "lda/train_impl.h"

int lda_open_check(worker *w)
{
    /* Like app_stats' tables: sparse over every key, so that a resumed run
     * with more iterations opens the same table; one row per evaluation. */
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_F64;
    o.width = w->p.topics + 2;
    o.storage = LOOM_SPARSE;
    o.consistency = LOOM_ASP;
    o.cache = 0;
    TRY("open the count checks", loom_table_open(w->n, "lda.check", &o, &w->check));
    return 0;
}

/* Pull the rows of words first, first + step, ... chunk by chunk and add
 * them to w->cols (column sums, their total, the number of negative counts;
 * zeroed first: the first negative count is said here, with the worker that
 * saw it); *ll (if not NULL) gets their word part of the log-likelihood,
 * added in the order of one pass over them, so that one worker's result is
 * the sequential reference's bit for bit. */
static int scan_words(worker *w, uint64_t first, uint64_t step, double *ll)
{
    const size_t K = w->p.topics;
    double *cols = w->cols;
    memset(cols, 0, (K + 2) * sizeof *cols);
    if (ll) *ll = 0;
    for (uint64_t v = first; v < w->p.vocab;) {
        size_t n = 0;
        for (; n < w->chunk && v < w->p.vocab; v += step) w->words[n++] = v;
        size_t nkeys = lda_block_keys(w, w->words, n, w->keys);
        TRY("pull word-topic rows", loom_pull(w->wt, w->keys, nkeys, w->vals));
        if (ll) *ll = lda_ll_words_add(&w->p, w->vals, n, *ll);
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < K; k++) {
                int32_t c = w->vals[i * K + k];
                if (c > 0) { /* zeros, nearly all counts at large K, add nothing */
                    cols[k] += c;
                    cols[K] += c;
                } else if (c < 0 && cols[K + 1]++ == 0) {
                    fprintf(stderr,
                            PROG ": worker %d: word %" PRIu64 " topic %zu has count %" PRId32 "\n",
                            w->rank, w->words[i], k, c);
                }
            }
    }
    return 0;
}

/* The only worker of a data-parallel job holds every count the servers
 * hold: the rows of its one sampler (which its compute threads share) are
 * its initial counts and every change it pushed, or, resumed, what it
 * pulled at the start and its changes since. Their rows and the ascending
 * word ids they are rows of; NULL when the counts must be pulled (several
 * workers, or the rotation, whose engine holds the rows). */
static const lda_rows *own_rows(const worker *w, const uint64_t **words)
{
    if (w->nworkers != 1 || w->c->train.schedule != LDA_SCHEDULE_DATA) return NULL;
    *words = w->lanes[0].d.vocab;
    return &w->lanes[0].s.rows;
}

/* scan_words over all words from the rows r of `words` instead of pulled
 * rows, at a cost that follows their non-zero counts: the same sums (the
 * word part in lda_ll_words_rows's order, ascending words and topics, as the
 * sequential reference adds it; a word absent from r has no counts). */
static void sum_rows(worker *w, const lda_rows *r, const uint64_t *words, double *ll)
{
    const size_t K = w->p.topics;
    double *cols = w->cols;
    memset(cols, 0, (K + 2) * sizeof *cols);
    *ll = lda_ll_words_rows(&w->p, r, 0);
    uint32_t k;
    int32_t c;
    for (size_t i = 0; i < r->n; i++)
        for (size_t pos = 0; lda_rows_next(r, i, &pos, &k, &c);) {
            if (c > 0) {
                cols[k] += c;
                cols[K] += c;
            } else if (cols[K + 1]++ == 0) {
                fprintf(stderr,
                        PROG ": worker %d: word %" PRIu64 " topic %" PRIu32 " has count %" PRId32
                             "\n",
                        w->rank, words[i], k, c);
            }
        }
}

/* Worker 0: the counts, checked by the workers' sums `all` (K column sums,
 * their total, the negative counts), are consistent with the number of
 * tokens: 1; 0 when they are not; -1 when only the topic totals differ from
 * the word-topic columns, which a worker lost while sending its last clock
 * can cause (its pushes reached one server and not another: docs/FAULTS.md). */
static int check_counts(const worker *w, const double *all, uint64_t tokens, char *why, size_t len)
{
    const size_t K = w->p.topics;
    uint64_t sum = (uint64_t)all[K];
    if (all[K + 1] > 0)
        return snprintf(why, len, "%.0f word-topic counts are negative", all[K + 1]), 0;
    /* A lost worker's documents keep their last assignments in the counts
     * (--on-worker-failure continue) but no longer report their tokens. */
    if (loom_workers_lost(w->n, NULL) ? sum < tokens : sum != tokens)
        return snprintf(why, len, "word-topic counts add up to %" PRIu64 ", not %" PRIu64 " tokens",
                        sum, tokens),
               0;
    for (size_t k = 0; k < K; k++)
        if ((int64_t)all[k] != w->totals[k])
            return snprintf(why, len, "topic %zu: total %" PRId64 ", column sum %" PRId64, k,
                            w->totals[k], (int64_t)all[k]),
                   -1;
    return 1;
}

/* --test: this worker's part of the held-out log-likelihood, from rows and
 * totals pulled after the evaluation's barrier. */
static int test_ll(worker *w, int it, double *v)
{
    static const uint64_t zero = 0;
    const lda_heldout *h = &w->h;
    if (h->d.nwords)
        TRY("pull the test words' rows",
            loom_pull(w->wt, w->test_keys, h->d.nwords * w->nblocks, w->test_rows));
    TRY("pull topic totals", loom_pull(w->tt, &zero, 1, w->test_totals));
    v[ST_TEST_LL] =
        lda_heldout_ll(&w->p, &w->h, w->test_rows, w->test_totals, w->c->train.seed, it);
    if (v[ST_TEST_LL] != v[ST_TEST_LL]) return app_fail(PROG, "held-out evaluation", LOOM_ENOMEM);
    v[ST_TEST_SCORED] = (double)h->scored;
    v[ST_TEST_SKIPPED] = (double)h->skipped;
    return 0;
}

/* Add this worker's statistics v and count checks (w->cols) to the tables
 * of evaluation `it`, and, on worker 0, read everyone's sums back into st
 * and w->cols. The only worker of a job skips the tables and the barrier:
 * the sums would be its own values (one term each, bit for bit), and the
 * four round trips cost it more than its evaluation's arithmetic at K = 50
 * (docs/BENCHMARKS.md, "LDA: the only worker's evaluation without round
 * trips"). */
static int gather(worker *w, uint64_t row, const double *v, double *st)
{
    if (w->nworkers == 1) {
        memcpy(st, v, STAT_FIELDS * sizeof *st);
        return 0;
    }
    loom_ts ts;
    TRY("push the count checks", loom_push_async(w->check, &row, 1, w->cols, &ts));
    TRY("push the count checks", loom_wait(w->n, ts));
    TRY("push statistics", app_stats_add(&w->stats, (int)row, v));
    TRY("barrier", loom_barrier(w->n));
    if (w->rank != 0) return 0;
    TRY("pull statistics", app_stats_read(&w->stats, (int)row, st));
    /* A lost worker's words are nobody's share: worker 0 checks them all. */
    if (loom_workers_lost(w->n, NULL)) return scan_words(w, 0, 1, NULL);
    TRY("pull the count checks", loom_pull(w->check, &row, 1, w->cols));
    return 0;
}

int lda_evaluate(worker *w, int it)
{
    static const uint64_t zero = 0;
    /* Every worker evaluates the same iteration (the only one: no one to meet). */
    if (w->nworkers > 1) TRY("barrier", loom_barrier(w->n));
    /* Now: once past the next barrier the others sample on. */
    if (w->rank == 0) TRY("pull topic totals", loom_pull(w->tt, &zero, 1, w->totals));
    double v[STAT_FIELDS] = {0};
    const uint64_t *words;
    const lda_rows *own = own_rows(w, &words);
    if (own)
        sum_rows(w, own, words, &v[ST_LL_WORDS]);
    else if (scan_words(w, (uint64_t)w->rank, (uint64_t)w->nworkers, &v[ST_LL_WORDS]))
        return 1;
    if (w->c->job.test_path && test_ll(w, it, v)) return 1;
    loom_stats ns;
    loom_node_stats(w->n, &ns);
    v[ST_LL_DOCS] = lda_ll_docs(&w->p, &w->lanes->d, w->scratch);
    v[ST_TOKENS] = (double)w->lanes->d.ntokens;
    v[ST_BYTES_SENT] = (double)ns.bytes_sent;
    v[ST_BYTES_RECEIVED] = (double)ns.bytes_received;
    v[ST_MESSAGES] = (double)ns.table_messages;
    v[ST_BYTES_RAW] = (double)ns.table_bytes_raw;
    v[ST_BYTES_WIRE] = (double)ns.table_bytes_wire;
    v[ST_MANAGED] = (double)ns.managed_rows_sent;
    v[ST_PUSHED] = (double)ns.pushed_rows_received;
    double st[STAT_FIELDS];
    if (gather(w, (uint64_t)it, v, st)) return 1;
    if (w->rank != 0) return 0;
    double ll = st[ST_LL_DOCS] + st[ST_LL_WORDS] + lda_ll_topics(&w->p, w->totals);
    loom_report_metric(w->n, "iteration", it + 1); /* for the status page */
    loom_report_metric(w->n, "log_likelihood", ll);
    uint64_t tokens = (uint64_t)st[ST_TOKENS];
    w->tokens = tokens;
    char why[256] = "";
    int counts = check_counts(w, w->cols, tokens, why, sizeof why), ok = counts == 1;
    /* A lost worker's torn last clock is said, not fatal: the sampler only
     * needs the totals close to the columns. */
    int tolerated = counts == -1 && loom_workers_lost(w->n, NULL) > 0;
    if (tolerated && !w->torn_said++)
        fprintf(stderr,
                PROG ": warning: %s after iteration %d (a lost worker's last clock reached only "
                     "some servers)\n",
                why, it + 1);
    double time_s = app_now_s() - w->start;
    double tps = w->train_s > 0 ? (double)tokens * w->iters_since_eval / w->train_s : 0;
    /* Held-out perplexity; empty strings without --test. */
    char test_line[64] = "", test_json[160] = "";
    if (w->c->job.test_path) {
        double perplexity = exp(-st[ST_TEST_LL] / st[ST_TEST_SCORED]);
        snprintf(test_line, sizeof test_line, "  test perplexity %.2f", perplexity);
        loom_report_metric(w->n, "test_perplexity", perplexity);
        snprintf(test_json, sizeof test_json,
                 ", \"test_perplexity\": %.17g, \"test_tokens\": %.0f, "
                 "\"test_skipped_tokens\": %.0f",
                 perplexity, st[ST_TEST_SCORED], st[ST_TEST_SKIPPED]);
    }
    char lost_json[96], lost_text[128];
    app_lost_note(w->n, "documents", lost_json, sizeof lost_json, lost_text, sizeof lost_text);
    if (!w->c->job.quiet)
        fprintf(stderr,
                "iteration %4d  log-likelihood %.6e%s  %.0f tokens/s  sent %.1f MB  recv %.1f MB  "
                "%.1f s%s\n",
                it + 1, ll, test_line, tps, st[ST_BYTES_SENT] / 1e6, st[ST_BYTES_RECEIVED] / 1e6,
                time_s, lost_text);
    if (w->metrics) {
        fprintf(
            w->metrics,
            "{\"iteration\": %d, \"time_s\": %.3f, \"log_likelihood\": %.17g%s, "
            "\"tokens_per_s\": %.1f, \"tokens\": %" PRIu64 ", \"bytes_sent\": %.0f, "
            "\"bytes_received\": %.0f, \"messages\": %.0f, \"bytes_raw\": %.0f, "
            "\"bytes_wire\": %.0f, \"managed_rows_sent\": %.0f, \"pushed_rows_received\": %.0f, "
            "\"counts_consistent\": %s%s}\n",
            it + 1, time_s, ll, test_json, tps, tokens, st[ST_BYTES_SENT], st[ST_BYTES_RECEIVED],
            st[ST_MESSAGES], st[ST_BYTES_RAW], st[ST_BYTES_WIRE], st[ST_MANAGED], st[ST_PUSHED],
            ok ? "true" : "false", lost_json);
        /* Each line now, so that a full disk stops the run rather than its end. */
        if (fflush(w->metrics) || ferror(w->metrics)) {
            fprintf(stderr, PROG ": cannot write %s: %s\n", w->c->job.metrics_path,
                    strerror(errno));
            return 1;
        }
    }
    w->train_s = 0;
    w->iters_since_eval = 0;
    if (!ok && !tolerated) {
        fprintf(stderr, "loom train lda: counts inconsistent after iteration %d: %s\n", it + 1,
                why);
        return 1;
    }
    return 0;
}

int lda_finish(worker *w)
{
    const lda_cli *c = w->c;
    const size_t K = w->p.topics;
    size_t ntop = c->top_words > 0 ? (size_t)c->top_words : 0;
    if (!ntop && !c->job.model_path) return 0;
    char err[512];
    lda_top top = {0};
    lda_model_writer mw;
    if (ntop && lda_top_init(&top, w->p.topics, ntop))
        return app_fail(PROG, "top words", LOOM_ENOMEM);
    if (c->job.model_path &&
        lda_model_open(&mw, &w->p, w->tokens, c->job.model_path, err, sizeof err)) {
        lda_top_free(&top);
        fprintf(stderr, PROG ": %s\n", err);
        return 1;
    }
    int rc = 0;
    /* The top words alone come from the only worker's own rows; the model
     * file is the servers' table (so the tests' comparison of it with the
     * sequential reference's checks the servers' counts too). */
    const uint64_t *words;
    const lda_rows *own = c->job.model_path ? NULL : own_rows(w, &words);
    for (size_t i = 0; own && i < own->n; i++) /* a word without counts adds nothing */
        lda_top_add_row(&top, words[i], own, i);
    for (uint64_t v0 = 0; !own && v0 < w->p.vocab && !rc; v0 += w->chunk) {
        uint64_t v1 = v0 + w->chunk < w->p.vocab ? v0 + w->chunk : w->p.vocab;
        rc = loom_pull_range(w->wt, v0 * w->nblocks, v1 * w->nblocks, w->vals);
        for (uint64_t v = v0; v < v1 && !rc; v++) {
            const int32_t *r = w->vals + (v - v0) * K;
            if (ntop) lda_top_add(&top, v, r);
            if (c->job.model_path) lda_model_write_row(&mw, v, r);
        }
    }
    if (rc) app_fail(PROG, "pull the word-topic table", rc);
    if (!rc && ntop) {
        lda_top_print(stdout, &top, w->totals, c->vocab_path ? &w->vocab : NULL);
        fflush(stdout);
    }
    lda_top_free(&top);
    if (c->job.model_path && lda_model_close(&mw, err, sizeof err) && !rc) {
        fprintf(stderr, PROG ": %s\n", err);
        rc = 1;
    } else if (rc && c->job.model_path && mw.regular) {
        remove(c->job.model_path); /* not half a model */
    }
    return rc ? 1 : 0;
}
