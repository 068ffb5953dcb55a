/* The parts of the LDA application that need no parameter server.
 *
 * The SparseLDA sampler is checked against the plain O(K) rule it replaces:
 * from one fixed state, many draws of the same token's topic must follow
 * p(k) ∝ (α + n_dk)(β + n_wk)/(Vβ + n_k) (a chi-square test, with priors
 * large enough that all three buckets carry mass), and after whole sweeps
 * its counts must equal a recount of the topics. The log-likelihood is
 * compared with the formula written out over every (word, topic) and
 * (document, topic) pair, zeros included; the model file by a round trip and
 * one broken file per error the loader promises; the generator by
 * determinism and by reading its output back. Corpora are built in memory. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "lda/lda.h"

/* A random corpus: docs documents of 1..maxlen (word, count) pairs over V words. */
static loom_corpus *make_corpus(uint64_t seed, size_t docs, uint32_t V, size_t maxlen)
{
    loom_corpus *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->doc = malloc((docs + 1) * sizeof *c->doc);
    c->word = malloc(docs * maxlen * sizeof *c->word);
    c->count = malloc(docs * maxlen * sizeof *c->count);
    assert_true(c->doc && c->word && c->count);
    app_rng r;
    app_rng_seed(&r, seed, 99);
    for (size_t i = 0; i < docs; i++) {
        c->doc[i] = c->nnz;
        size_t n = 1 + app_rng_below(&r, (uint32_t)maxlen);
        for (size_t j = 0; j < n; j++) {
            uint32_t w = app_rng_below(&r, V), k = 1 + app_rng_below(&r, 3);
            int dup = 0;
            for (size_t q = c->doc[i]; q < c->nnz; q++) dup |= c->word[q] == w;
            if (dup) continue;
            c->word[c->nnz] = w;
            c->count[c->nnz++] = k;
            c->tokens += k;
            if (w + 1 > c->vocab) c->vocab = w + 1;
        }
    }
    c->doc[docs] = c->nnz;
    c->docs = docs;
    c->format = LOOM_BOW_LDAC;
    return c;
}

static void free_corpus(loom_corpus *c)
{
    free(c->doc), free(c->word), free(c->count), free(c);
}

/* lda_docs_build renumbers a share's words into its distinct ids, ascending,
 * and expands each pair into `count` tokens of its local word: checked
 * against the corpus pair by pair, for ids that fill a small vocabulary (the
 * table by id) and ids spread over 32 bits (sorted and searched). */
static void check_docs(const loom_corpus *c)
{
    lda_docs d;
    assert_int_equal(lda_docs_build(c, &d), 0);
    for (size_t i = 1; i < d.nwords; i++) assert_true(d.vocab[i - 1] < d.vocab[i]);
    size_t t = 0, distinct = 0;
    for (size_t k = 0; k < c->nnz; k++) {
        int first = 1; /* the first pair of its id counts it */
        for (size_t q = 0; q < k; q++) first &= c->word[q] != c->word[k];
        distinct += first;
    }
    assert_int_equal(d.nwords, distinct);
    assert_int_equal(d.ndocs, c->docs);
    for (size_t i = 0; i < c->docs; i++) {
        assert_int_equal(d.doc[i], t);
        for (size_t k = c->doc[i]; k < c->doc[i + 1]; k++)
            for (uint32_t r = 0; r < c->count[k]; r++, t++) {
                assert_true(d.word[t] < d.nwords);
                assert_int_equal(d.vocab[d.word[t]], c->word[k]);
            }
    }
    assert_int_equal(d.doc[c->docs], t);
    assert_int_equal(d.ntokens, c->tokens);
    lda_docs_free(&d);
}

static void test_docs_build(void **state)
{
    (void)state;
    static const uint32_t vocabularies[] = {1, 7, 300, 100000, 4000000000u};
    for (size_t i = 0; i < sizeof vocabularies / sizeof *vocabularies; i++) {
        loom_corpus *c = make_corpus(11 + i, 60, vocabularies[i], 12);
        check_docs(c);
        free_corpus(c);
    }
}

/* One token's topic, drawn many times from one state, follows the plain rule. */
static void check_distribution(double alpha, double beta, uint32_t K)
{
    loom_corpus *c = make_corpus(7, 30, 20, 8);
    lda_params p = {K, 20, alpha, beta};
    lda_docs d;
    lda_sampler s;
    assert_int_equal(lda_docs_build(c, &d), 0);
    assert_int_equal(lda_sampler_init(&s, &p, d.nwords), 0);
    lda_docs_init_topics(&d, K, 3);
    assert_int_equal(lda_count(&d, &s.rows, s.totals), 0);
    /* Expected: the first token of document 0, removed from the counts. */
    uint32_t w = d.word[0], old = d.z[0];
    double prob[64], sum = 0;
    int32_t ndk[64] = {0};
    for (size_t t = d.doc[0]; t < d.doc[1]; t++) ndk[d.z[t]]++;
    ndk[old]--;
    for (uint32_t k = 0; k < K; k++) {
        double nwk = lda_rows_get(&s.rows, w, k) - (k == old),
               nk = (double)s.totals[k] - (k == old);
        prob[k] = (alpha + ndk[k]) * (beta + nwk) / (20 * beta + nk);
        sum += prob[k];
    }
    uint32_t *saved = malloc(d.ntokens * sizeof *saved);
    memcpy(saved, d.z, d.ntokens * sizeof *saved);
    const int draws = 40000;
    int seen[64] = {0};
    for (int i = 0; i < draws; i++) {
        memcpy(d.z, saved, d.ntokens * sizeof *saved);
        assert_int_equal(lda_sampler_load(&s), 0);
        lda_sweep(&s, &d, 0, 1, 11, i); /* a new stream per draw */
        seen[d.z[0]]++;
    }
    double chi2 = 0;
    for (uint32_t k = 0; k < K; k++) {
        double e = draws * prob[k] / sum;
        chi2 += (seen[k] - e) * (seen[k] - e) / e;
    }
    /* K - 1 degrees of freedom; 40 is far in the tail for K <= 12 (p < 1e-4). */
    printf("alpha %g beta %g K %u: chi-square %.2f\n", alpha, beta, K, chi2);
    assert_true(chi2 < 40);
    free(saved);
    lda_sampler_free(&s);
    lda_docs_free(&d);
    free_corpus(c);
}

/* Every word's entries are its row's positive counts, packed as count << 32
 * | topic, strictly descending. */
static void assert_lists(const lda_sampler *s)
{
    for (size_t w = 0; w < s->nwords; w++) {
        const uint64_t *e = s->packed + s->off[w];
        uint32_t n = 0, k;
        int32_t c;
        for (size_t pos = 0; lda_rows_next(&s->rows, w, &pos, &k, &c);) n += c > 0;
        assert_int_equal(s->len[w], n);
        for (uint32_t j = 0; j < s->len[w]; j++) {
            assert_true(j == 0 || e[j - 1] > e[j]);
            assert_int_equal(lda_rows_get(&s->rows, w, (uint32_t)e[j]), (int32_t)(e[j] >> 32));
        }
    }
}

/* A word's sorted list is rebuilt from its old order when its row changes
 * (lda_sampler_reload: a refresh, a rotation's block): after a few moves (insertion sort), and
 * after many (merge sort past the budget), the list is the one a fresh sort
 * gives; so is a load, from rows of up to K = 300 topics a word. */
static void test_sampler_lists(void **state)
{
    (void)state;
    const uint32_t K = 300, V = 40;
    lda_params p = {K, V, 0.1, 0.01};
    lda_sampler s;
    assert_int_equal(lda_sampler_init(&s, &p, V), 0);
    app_rng r;
    app_rng_seed(&r, 5, 1);
    for (uint32_t w = 0; w < V; w++) /* word w: about 20 w tokens, rare to frequent */
        for (uint32_t t = 0; t < 20 * w + 1; t++)
            assert_int_equal(lda_rows_add(&s.rows, w, app_rng_below(&r, K), 1), 0);
    assert_int_equal(lda_sampler_load(&s), 0);
    assert_lists(&s);
    for (int round = 0; round < 6; round++) {
        /* Moves that keep each word's total: few in even rounds, many in odd. */
        for (uint32_t w = 0; w < V; w++) {
            uint32_t moves = round % 2 ? 10 * w : 2;
            for (uint32_t m = 0; m < moves; m++) {
                uint32_t from = app_rng_below(&r, K), to = app_rng_below(&r, K);
                if (lda_rows_get(&s.rows, w, from) <= 0) continue;
                assert_int_equal(lda_rows_add(&s.rows, w, from, -1), 0);
                assert_int_equal(lda_rows_add(&s.rows, w, to, 1), 0);
            }
        }
        uint32_t words[40];
        for (uint32_t w = 0; w < V; w++) words[w] = w;
        assert_int_equal(lda_sampler_reload(&s, words, V), 0);
        assert_lists(&s);
    }
    lda_sampler_free(&s);
}

static void test_sampler_distribution(void **state)
{
    (void)state;
    check_distribution(0.5, 0.1, 8);    /* much of the mass in s and r */
    check_distribution(0.05, 0.01, 12); /* mostly q, as in real corpora */
    check_distribution(2.0, 1.0, 5);
}

/* Whole sweeps in segments: counts equal a recount of the topics, and the
 * deltas are exactly the change since the last load. */
static void test_sampler_counts(void **state)
{
    (void)state;
    const uint32_t K = 10;
    loom_corpus *c = make_corpus(5, 200, 300, 12);
    lda_params p = {K, 300, 0.1, 0.01};
    lda_docs d;
    lda_sampler s;
    assert_int_equal(lda_docs_build(c, &d), 0);
    assert_int_equal(lda_sampler_init(&s, &p, d.nwords), 0);
    lda_docs_init_topics(&d, K, 1);
    assert_int_equal(lda_count(&d, &s.rows, s.totals), 0);
    assert_int_equal(lda_sampler_load(&s), 0);
    int32_t *vals = malloc(d.nwords * K * sizeof *vals);
    int64_t totals[10], tdelta[10];
    uint64_t *keys = malloc(d.nwords * sizeof *keys);
    for (int it = 0; it < 6; it++) {
        size_t lo, hi;
        lda_segment(d.ndocs, 3, it % 3, &lo, &hi);
        lda_sweep(&s, &d, lo, hi, 9, it);
        lda_rows rows; /* a recount */
        assert_int_equal(lda_rows_init(&rows, K, d.nwords), 0);
        memset(totals, 0, sizeof totals);
        assert_int_equal(lda_count(&d, &rows, totals), 0);
        for (size_t w = 0; w < d.nwords; w++)
            for (uint32_t k = 0; k < K; k++)
                assert_int_equal(lda_sampler_count(&s, w, k), lda_rows_get(&rows, w, k));
        size_t n = lda_sampler_deltas(&s, d.vocab, keys, vals, tdelta);
        assert_true(n > 0);
        for (size_t i = 0; i < n; i++) {
            size_t w = 0;
            while (d.vocab[w] != keys[i]) w++;
            for (uint32_t k = 0; k < K; k++)
                assert_int_equal(lda_rows_get(&s.rows, w, k) + vals[i * K + k],
                                 lda_rows_get(&rows, w, k));
        }
        for (uint32_t k = 0; k < K; k++) assert_int_equal(s.totals[k] + tdelta[k], totals[k]);
        assert_int_equal(lda_sampler_store(&s), 0);
        assert_true(lda_rows_equal(&s.rows, &rows));
        lda_rows_free(&rows);
        assert_memory_equal(s.totals, totals, sizeof totals);
        assert_int_equal(lda_sampler_load(&s), 0);
    }
    free(vals), free(keys);
    lda_sampler_free(&s);
    lda_docs_free(&d);
    free_corpus(c);
}

/* A sampler of kind `kind` over c's documents, from the initial topics of seed 4. */
static void lanes_start(const loom_corpus *c, const lda_params *p, lda_sampler_kind kind,
                        lda_docs *d, lda_sampler *s)
{
    assert_int_equal(lda_docs_build(c, d), 0);
    assert_int_equal(lda_sampler_init_kind(s, p, d->nwords, kind), 0);
    lda_docs_init_topics(d, p->topics, 4);
    assert_int_equal(lda_count(d, &s->rows, s->totals), 0);
    assert_int_equal(lda_sampler_load(s), 0);
    assert_int_equal(lda_sampler_docs(s, d), 0);
}

/* --threads' lanes (lanes.c): one lane samples exactly as lda_sweep; with
 * T lanes the blocks and lanes cover the words and documents, the order in
 * which a step's lanes run changes nothing (no lane reads what another
 * writes in the step: threads may run them at once), and the counts and
 * totals stay those of the topics. Both samplers. */
static void test_lanes(void **state)
{
    (void)state;
    const uint32_t K = 70;
    loom_corpus *c = make_corpus(9, 120, 150, 25);
    lda_params p = {K, 150, 0.1, 0.01};
    for (int kind = LDA_SAMPLER_SPARSE; kind <= LDA_SAMPLER_MH; kind++) {
        lda_docs da, db;
        lda_sampler sa, sb;
        lda_lanes la, lb;
        lanes_start(c, &p, (lda_sampler_kind)kind, &da, &sa);
        lanes_start(c, &p, (lda_sampler_kind)kind, &db, &sb);
        assert_int_equal(lda_lanes_init(&la, &sa, &da, 1), 0);
        for (int it = 0; it < 3; it++) {
            lda_lanes_run(&la, &sa, &da, 2, it % 2, 7, it);
            size_t lo, hi;
            lda_segment(db.ndocs, 2, it % 2, &lo, &hi);
            lda_sweep(&sb, &db, lo, hi, 7, it);
            assert_memory_equal(da.z, db.z, da.ntokens * sizeof *da.z);
            assert_memory_equal(sa.nk, sb.nk, K * sizeof *sa.nk);
        }
        lda_lanes_free(&la);
        lda_sampler_free(&sa), lda_sampler_free(&sb);
        lda_docs_free(&da), lda_docs_free(&db);

        const int T = 3;
        lanes_start(c, &p, (lda_sampler_kind)kind, &da, &sa);
        lanes_start(c, &p, (lda_sampler_kind)kind, &db, &sb);
        assert_int_equal(lda_lanes_init(&la, &sa, &da, T), 0);
        assert_int_equal(lda_lanes_init(&lb, &sb, &db, T), 0);
        assert_int_equal(la.doc[0], 0);
        assert_int_equal(la.doc[T], da.ndocs);
        assert_int_equal(la.word[0], 0);
        assert_int_equal(la.word[T], da.nwords);
        for (int t = 0; t < T; t++) {
            assert_true(la.doc[t] < la.doc[t + 1]);
            assert_true(la.word[t] < la.word[t + 1]);
        }
        int64_t totals[70];
        for (int it = 0; it < 4; it++) {
            lda_lanes_run(&la, &sa, &da, 1, 0, 7, it);
            for (int step = 0; step < T; step++) {
                for (int t = T - 1; t >= 0; t--)
                    lda_lanes_sweep(&lb, &sb, &db, t, step, 1, 0, 7, it);
                lda_lanes_merge(&lb, &sb);
            }
            assert_memory_equal(da.z, db.z, da.ntokens * sizeof *da.z);
            lda_rows rows; /* a recount */
            assert_int_equal(lda_rows_init(&rows, K, da.nwords), 0);
            memset(totals, 0, sizeof totals);
            assert_int_equal(lda_count(&da, &rows, totals), 0);
            for (size_t w = 0; w < da.nwords; w++)
                for (uint32_t k = 0; k < K; k++)
                    assert_int_equal(lda_sampler_count(&sa, w, k), lda_rows_get(&rows, w, k));
            assert_memory_equal(sa.nk, totals, sizeof totals);
            lda_rows_free(&rows);
            assert_int_equal(lda_sampler_store(&sa), 0);
            assert_int_equal(lda_sampler_reload(&sa, NULL, 0), 0);
            assert_int_equal(lda_sampler_store(&sb), 0);
            assert_int_equal(lda_sampler_reload(&sb, NULL, 0), 0);
        }
        lda_lanes_free(&la), lda_lanes_free(&lb);
        lda_sampler_free(&sa), lda_sampler_free(&sb);
        lda_docs_free(&da), lda_docs_free(&db);
    }
    free_corpus(c);
}

/* lda_sampler_changes lists exactly the non-zero deltas of
 * lda_sampler_deltas, ascending; a sampler rebuilt with lda_sampler_reload
 * (only the rows that changed behind its back) samples exactly as one
 * rebuilt whole by lda_sampler_load. */
static void test_sampler_changes_and_reload(void **state)
{
    (void)state;
    const uint32_t K = 70; /* more than 64: two words of bits per word */
    loom_corpus *c = make_corpus(7, 150, 200, 30);
    lda_params p = {K, 200, 0.1, 0.01};
    lda_docs da, db;
    lda_sampler sa, sb;
    assert_int_equal(lda_docs_build(c, &da), 0);
    assert_int_equal(lda_docs_build(c, &db), 0);
    assert_int_equal(lda_sampler_init(&sa, &p, da.nwords), 0);
    assert_int_equal(lda_sampler_init(&sb, &p, db.nwords), 0);
    lda_docs_init_topics(&da, K, 3);
    lda_docs_init_topics(&db, K, 3);
    assert_int_equal(lda_count(&da, &sa.rows, sa.totals), 0);
    assert_int_equal(lda_count(&db, &sb.rows, sb.totals), 0);
    assert_int_equal(lda_sampler_load(&sa), 0);
    assert_int_equal(lda_sampler_load(&sb), 0);
    int32_t *vals = malloc(db.nwords * K * sizeof *vals), *dense = malloc(K * sizeof *dense);
    uint64_t *keys = malloc(db.nwords * sizeof *keys);
    int64_t ta[70], tb[70];
    int32_t other[200]; /* per word: the topic of another worker's token, or -1 */
    for (size_t w = 0; w < 200; w++) other[w] = -1;
    for (int it = 0; it < 8; it++) {
        size_t lo, hi;
        lda_segment(da.ndocs, 2, it % 2, &lo, &hi);
        lda_sweep(&sa, &da, lo, hi, 5, it);
        lda_sweep(&sb, &db, lo, hi, 5, it);
        assert_memory_equal(da.z, db.z, da.ntokens * sizeof *da.z);
        size_t n, m = lda_sampler_deltas(&sb, db.vocab, keys, vals, tb);
        assert_int_equal(lda_sampler_changes(&sa, &n, ta), 0);
        assert_memory_equal(ta, tb, sizeof ta);
        size_t j = 0, nonzero = 0;
        for (size_t i = 0; i < m; i++) {
            size_t w = 0;
            while (da.vocab[w] != keys[i]) w++;
            memset(dense, 0, K * sizeof *dense);
            for (; j < n && sa.chg_word[j] == w; j++) {
                assert_true(j == 0 || sa.chg_word[j - 1] < w ||
                            sa.chg_topic[j - 1] < sa.chg_topic[j]);
                assert_int_not_equal(sa.chg_delta[j], 0);
                dense[sa.chg_topic[j]] = sa.chg_delta[j];
            }
            assert_memory_equal(dense, vals + i * K, K * sizeof *dense);
            for (uint32_t k = 0; k < K; k++) nonzero += vals[i * K + k] != 0;
        }
        assert_int_equal(j, n);
        assert_int_equal(nonzero, n);
        assert_int_equal(lda_sampler_store(&sa), 0);
        assert_int_equal(lda_sampler_store(&sb), 0);
        assert_true(lda_rows_equal(&sa.rows, &sb.rows));
        /* Another worker's tokens: after even sweeps every third word gets
         * one (a row whose total outgrew its room: lda_sampler_reload loads
         * all), after odd ones they are gone again (rebuilt in place). */
        uint32_t changed[200];
        size_t nchanged = 0;
        for (size_t w = 0; w < da.nwords; w++) {
            int add = it % 2 == 0 && w % 3 == (size_t)it % 3, drop = other[w] >= 0;
            if (drop) {
                assert_int_equal(lda_rows_add(&sa.rows, w, (uint32_t)other[w], -1), 0);
                assert_int_equal(lda_rows_add(&sb.rows, w, (uint32_t)other[w], -1), 0);
                other[w] = -1;
            }
            if (add) {
                other[w] = (int32_t)((w + (size_t)it) % K);
                assert_int_equal(lda_rows_add(&sa.rows, w, (uint32_t)other[w], 1), 0);
                assert_int_equal(lda_rows_add(&sb.rows, w, (uint32_t)other[w], 1), 0);
            }
            if (add || drop) changed[nchanged++] = (uint32_t)w;
        }
        assert_int_equal(lda_sampler_reload(&sa, changed, nchanged), 0);
        assert_int_equal(lda_sampler_load(&sb), 0);
    }
    free(vals), free(dense), free(keys);
    lda_sampler_free(&sa), lda_sampler_free(&sb);
    lda_docs_free(&da), lda_docs_free(&db);
    free_corpus(c);
}

/* The regrouped log-likelihood equals the textbook formula. */
static void test_log_likelihood(void **state)
{
    (void)state;
    const uint32_t K = 4, V = 9;
    loom_corpus *c = make_corpus(3, 6, V, 5);
    lda_params p = {K, V, 0.3, 0.05};
    lda_docs d;
    assert_int_equal(lda_docs_build(c, &d), 0);
    lda_docs_init_topics(&d, K, 2);
    int32_t nwk[9 * 4] = {0}, scratch[4];
    int64_t nk[4] = {0};
    lda_rows local, global;
    assert_int_equal(lda_rows_init(&local, K, d.nwords), 0);
    assert_int_equal(lda_rows_init(&global, K, V), 0);
    assert_int_equal(lda_count(&d, &local, nk), 0);
    for (size_t w = 0; w < d.nwords; w++) lda_rows_expand(&local, w, nwk + d.vocab[w] * K);
    for (size_t w = 0; w < V; w++)
        assert_int_equal(lda_rows_assign(&global, w, nwk + w * K, NULL), 0);
    /* The hybrid rows' word part adds the same terms in the same order. */
    assert_true(lda_ll_words_rows(&p, &global, 0) == lda_ll_words(&p, nwk, V));
    lda_rows_free(&local), lda_rows_free(&global);
    double direct = K * (lgamma(V * p.beta) - V * lgamma(p.beta));
    for (uint32_t k = 0; k < K; k++) {
        for (uint32_t w = 0; w < V; w++) direct += lgamma(nwk[w * K + k] + p.beta);
        direct -= lgamma((double)nk[k] + V * p.beta);
    }
    for (size_t i = 0; i < d.ndocs; i++) {
        int n[4] = {0};
        for (size_t t = d.doc[i]; t < d.doc[i + 1]; t++) n[d.z[t]]++;
        direct += lgamma(K * p.alpha) - K * lgamma(p.alpha);
        for (uint32_t k = 0; k < K; k++) direct += lgamma(n[k] + p.alpha);
        direct -= lgamma((double)(d.doc[i + 1] - d.doc[i]) + K * p.alpha);
    }
    double ours = lda_ll_docs(&p, &d, scratch) + lda_ll_words(&p, nwk, V) + lda_ll_topics(&p, nk);
    printf("log-likelihood %.12f, direct %.12f\n", ours, direct);
    assert_true(fabs(ours - direct) <= 1e-9 * fabs(direct));
    lda_docs_free(&d);
    free_corpus(c);
}

/* Held-out documents: words outside the vocabulary are dropped and counted,
 * the odd token positions of what remains are scored, and with one topic
 * (θ = 1 whatever the sampling) the log-likelihood is Σ log φ_w over them. */
static void test_heldout(void **state)
{
    (void)state;
    const uint32_t V = 6; /* the corpus has words 0..8: 6, 7 and 8 are unknown */
    loom_corpus *c = make_corpus(11, 40, 9, 6);
    lda_heldout h;
    assert_int_equal(lda_heldout_build(c, V, &h), 0);
    uint64_t skipped = 0, scored = 0;
    double direct = 0;
    const double beta = 0.2;
    int32_t rows[9] = {0}; /* one topic: counts of the known words (local = global here) */
    int64_t total = 0;
    for (uint32_t w = 0; w < V; w++) total += rows[w] = (int32_t)(3 * w + 1);
    for (size_t i = 0; i < c->docs; i++) {
        size_t pos = 0;
        for (size_t k = c->doc[i]; k < c->doc[i + 1]; k++)
            for (uint32_t r = 0; r < c->count[k]; r++) {
                if (c->word[k] >= V) {
                    skipped++;
                    continue;
                }
                if (pos++ % 2)
                    direct += log((rows[c->word[k]] + beta) / ((double)total + V * beta)), scored++;
            }
    }
    assert_int_equal(h.skipped, skipped);
    assert_int_equal(h.scored, scored);
    assert_int_equal(h.d.ntokens + skipped, c->tokens);
    /* make_corpus draws every word in 40 documents: the local vocabulary is 0..V-1. */
    assert_int_equal(h.d.nwords, V);
    int32_t local[9];
    for (size_t w = 0; w < h.d.nwords; w++) local[w] = rows[h.d.vocab[w]];
    lda_params p1 = {1, V, 0.5, beta};
    double ll = lda_heldout_ll(&p1, &h, local, &total, 4, 0);
    printf("held-out log-likelihood %.12f, direct %.12f\n", ll, direct);
    assert_true(fabs(ll - direct) <= 1e-12 * fabs(direct));
    /* More topics: a function of the seed and the evaluation's streams. */
    lda_params p3 = {3, V, 0.5, beta};
    int32_t rows3[6 * 3];
    int64_t totals3[3] = {0};
    for (size_t j = 0; j < 6 * 3; j++) totals3[j % 3] += rows3[j] = (int32_t)((j * 7) % 5);
    double a = lda_heldout_ll(&p3, &h, rows3, totals3, 4, 2);
    double b = lda_heldout_ll(&p3, &h, rows3, totals3, 4, 2);
    double other = lda_heldout_ll(&p3, &h, rows3, totals3, 5, 2);
    assert_true(a == b);
    assert_true(a != other);
    assert_true(a < 0 && a > (double)scored * log(1e-3));
    lda_heldout_free(&h);
    free_corpus(c);
}

static char dir[] = "/tmp/loom-lda-test.XXXXXX";

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Hybrid rows: a row is dense from a sum of K/2 and sparse below, walks
 * give the non-zero counts by ascending topic in either form, and the
 * memory of sparse rows follows their non-zeros. */
static void test_rows(void **state)
{
    (void)state;
    const uint32_t K = 10;
    lda_rows r, q;
    assert_int_equal(lda_rows_init(&r, K, 3), 0);
    assert_int_equal(lda_rows_init(&q, K, 3), 0);
    /* Word 0: topics 7, 2, 9, 2 (out of order, one twice): sparse, sorted. */
    static const uint32_t topics[] = {7, 2, 9, 2};
    for (size_t i = 0; i < 4; i++) assert_int_equal(lda_rows_add(&r, 0, topics[i], 1), 0);
    assert_false(lda_rows_dense(&r, 0));
    static const uint32_t want_k[] = {2, 7, 9};
    static const int32_t want_c[] = {2, 1, 1};
    uint32_t k;
    int32_t c;
    size_t pos = 0, i = 0;
    while (lda_rows_next(&r, 0, &pos, &k, &c)) {
        assert_true(i < 3 && k == want_k[i] && c == want_c[i]);
        i++;
    }
    assert_int_equal(i, 3);
    /* Back to zero: the pair leaves the row. */
    assert_int_equal(lda_rows_add(&r, 0, 7, -1), 0);
    assert_int_equal(lda_rows_get(&r, 0, 7), 0);
    assert_int_equal(lda_rows_sum(&r, 0), 3);
    /* A fifth token: sum 5 = K/2, dense, same counts. */
    assert_int_equal(lda_rows_add(&r, 0, 4, 2), 0);
    assert_true(lda_rows_dense(&r, 0));
    int32_t d[10], e[10] = {0, 0, 2, 0, 2, 0, 0, 0, 0, 1};
    lda_rows_expand(&r, 0, d);
    assert_memory_equal(d, e, sizeof e);
    pos = 0, i = 0;
    while (lda_rows_next(&r, 0, &pos, &k, &c)) i++;
    assert_int_equal(i, 3);
    /* assign picks the form from the sum; copy and equal compare counts. */
    int changed;
    assert_int_equal(lda_rows_assign(&q, 0, e, &changed), 0);
    assert_true(changed && lda_rows_dense(&q, 0));
    assert_int_equal(lda_rows_assign(&q, 0, e, &changed), 0);
    assert_false(changed);
    int32_t f[10] = {0, 3, 0, 0, 0, 0, 0, 0, 0, 1};
    assert_int_equal(lda_rows_assign(&q, 1, f, &changed), 0);
    assert_true(changed && !lda_rows_dense(&q, 1));
    assert_int_equal(lda_rows_get(&q, 1, 1), 3);
    assert_int_equal(lda_rows_get(&q, 1, 2), 0);
    assert_false(lda_rows_equal(&r, &q));
    assert_int_equal(lda_rows_copy(&r, 1, &q, 1, &changed), 0);
    assert_true(changed);
    assert_true(lda_rows_equal(&r, &q));
    assert_int_equal(lda_rows_copy(&r, 1, &q, 1, &changed), 0);
    assert_false(changed);
    /* A dense row copied onto a sparse one, and the reverse. */
    assert_int_equal(lda_rows_copy(&r, 2, &q, 0, NULL), 0);
    assert_true(lda_rows_dense(&r, 2) && lda_rows_get(&r, 2, 4) == 2);
    assert_int_equal(lda_rows_copy(&r, 2, &q, 1, NULL), 0);
    assert_true(!lda_rows_dense(&r, 2) && lda_rows_get(&r, 2, 1) == 3);
    lda_rows_free(&r), lda_rows_free(&q);

    /* 100,000 topics, 1000 words of 1 to 20 tokens: a few hundred KB, not
     * the 400 MB of dense rows. */
    const uint32_t big = 100000;
    assert_int_equal(lda_rows_init(&r, big, 1000), 0);
    size_t tokens = 0;
    for (size_t w = 0; w < 1000; w++)
        for (size_t t = 0; t <= w % 20; t++, tokens++)
            assert_int_equal(lda_rows_add(&r, w, (uint32_t)((w * 7919 + t * 104729) % big), 1), 0);
    size_t header = 1000 * sizeof(lda_row);
    assert_true(lda_rows_bytes(&r) <= header + 2 * tokens * sizeof(uint64_t) + 1000 * 32);
    for (size_t w = 0; w < 1000; w++) assert_false(lda_rows_dense(&r, w));
    lda_rows_free(&r);
}

static void test_model_file(void **state)
{
    (void)state;
    char path[256], err[512];
    snprintf(path, sizeof path, "%s/model", dir);
    lda_model m = {.p = {3, 5, 0.1 / 3, 0.01}, .tokens = 0};
    int32_t counts[15] = {0, 0, 4, 1, 0, 0, 0, 0, 0, 7, 7, 1, 0, 0, 0};
    int64_t totals[3] = {8, 7, 5};
    m.totals = totals, m.tokens = 20;
    assert_int_equal(lda_rows_init(&m.counts, 3, 5), 0);
    for (size_t w = 0; w < 5; w++)
        assert_int_equal(lda_rows_assign(&m.counts, w, counts + 3 * w, NULL), 0);
    assert_int_equal(lda_model_save(&m, path, err, sizeof err), 0);
    lda_rows_free(&m.counts);
    lda_model got;
    if (lda_model_load(path, &got, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(got.p.topics, 3);
    assert_true(got.p.vocab == 5 && got.tokens == 20);
    assert_true(got.p.alpha == m.p.alpha && got.p.beta == m.p.beta); /* %.17g: exact */
    int32_t loaded[15];
    for (size_t w = 0; w < 5; w++) lda_rows_expand(&got.counts, w, loaded + 3 * w);
    assert_memory_equal(loaded, counts, sizeof counts);
    assert_memory_equal(got.totals, totals, sizeof totals);
    uint64_t top[3];
    assert_int_equal(lda_top_words(&got, 0, 3, top), 2);
    assert_true(top[0] == 3 && top[1] == 1); /* 7 before 1 */
    assert_int_equal(lda_top_words(&got, 2, 1, top), 1);
    assert_true(top[0] == 0);
    lda_model_free(&got);

    static const struct {
        const char *text, *want;
    } broken[] = {
        {"lda 1 topics=3\n", ":1: not a loom-lda model"},
        {"loom-lda 1 topics=0 vocab=5 alpha=0.1 beta=0.1 tokens=0\n", ":1: topics, vocab"},
        {"loom-lda 1 topics=3 vocab=5 alpha=0.1 beta=0.1 tokens=2\n7 0:2\n",
         ":2: expected a word id"},
        {"loom-lda 1 topics=3 vocab=5 alpha=0.1 beta=0.1 tokens=2\n1 3:2\n",
         ":2: expected topic:count"},
        {"loom-lda 1 topics=3 vocab=5 alpha=0.1 beta=0.1 tokens=2\n1 0:-2\n",
         ":2: expected topic:count"},
        {"loom-lda 1 topics=3 vocab=5 alpha=0.1 beta=0.1 tokens=2\n1 0:1 0:1\n",
         ":2: expected topic:count"},
        {"loom-lda 1 topics=3 vocab=5 alpha=0.1 beta=0.1 tokens=2\n2 0:1\n1 0:1\n",
         ":3: expected a word id"},
        {"loom-lda 1 topics=3 vocab=5 alpha=0.1 beta=0.1 tokens=3\n1 0:2\n", "add up to 2"},
        {"loom-lda 1 topics=3 vocab=5 alpha=0.1 beta=0.1 tokens=0\n1\n", ":2: a word line without"},
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        write_file(path, broken[i].text);
        err[0] = '\0';
        assert_int_not_equal(lda_model_load(path, &got, err, sizeof err), 0);
        if (!strstr(err, broken[i].want))
            fail_msg("case %zu: '%s' lacks '%s'", i, err, broken[i].want);
    }
    /* Lines are bounded by the topics: a word line of 3 topics padded far
     * beyond what its pairs take (as /dev/zero or a binary file would be) is
     * refused, not read whole. */
    static const char header[] = "loom-lda 1 topics=3 vocab=5 alpha=0.1 beta=0.1 tokens=2\n1 ";
    char padded[sizeof header + 4096];
    memcpy(padded, header, sizeof header - 1);
    memset(padded + sizeof header - 1, '0', 4000);
    strcpy(padded + sizeof header - 1 + 4000, "1:2\n");
    write_file(path, padded);
    assert_int_not_equal(lda_model_load(path, &got, err, sizeof err), 0);
    if (!strstr(err, ":2: line too long")) fail_msg("padded line: '%s'", err);
    assert_int_not_equal(lda_model_load("/dev/zero", &got, err, sizeof err), 0);
    if (!strstr(err, "/dev/zero:1: ")) fail_msg("/dev/zero: '%s'", err);
    snprintf(path, sizeof path, "%s/missing", dir);
    assert_int_not_equal(lda_model_load(path, &got, err, sizeof err), 0);
    assert_non_null(strstr(err, "cannot read"));
}

static void test_vocab_file(void **state)
{
    (void)state;
    char path[256], err[256];
    snprintf(path, sizeof path, "%s/vocab", dir);
    write_file(path, "apple\r\nbanana\n\ncherry");
    lda_vocab v;
    assert_int_equal(lda_vocab_load(path, &v, err, sizeof err), 0);
    assert_int_equal(v.n, 4);
    assert_string_equal(v.word[0], "apple");
    assert_string_equal(v.word[2], "");
    assert_string_equal(v.word[3], "cherry");
    lda_vocab_free(&v);

    /* A word longer than LDA_WORD_MAX bytes (as /dev/zero would give) is refused. */
    char *text = malloc(LDA_WORD_MAX + 16);
    assert_non_null(text);
    memcpy(text, "apple\n", 6);
    memset(text + 6, 'x', LDA_WORD_MAX + 1);
    strcpy(text + 6 + LDA_WORD_MAX + 1, "\n");
    write_file(path, text);
    free(text);
    assert_int_not_equal(lda_vocab_load(path, &v, err, sizeof err), 0);
    if (!strstr(err, ":2: a word longer than")) fail_msg("long word: '%s'", err);
    assert_int_not_equal(lda_vocab_load("/dev/zero", &v, err, sizeof err), 0);
    if (!strstr(err, "/dev/zero:1: a word longer than")) fail_msg("/dev/zero: '%s'", err);
}

/* Generated corpora: deterministic, well formed, words from one block per topic. */
static void test_generator(void **state)
{
    (void)state;
    lda_gen_opts o = LDA_GEN_OPTS_DEFAULT;
    o.docs = 50, o.vocab = 100, o.topics = 4, o.doc_length = 30;
    char *a = NULL, *b = NULL, err[128];
    size_t alen, blen;
    FILE *f = open_memstream(&a, &alen);
    assert_int_equal(lda_generate(&o, f, err, sizeof err), 0);
    fclose(f);
    f = open_memstream(&b, &blen);
    assert_int_equal(lda_generate(&o, f, err, sizeof err), 0);
    fclose(f);
    assert_true(alen == blen && !memcmp(a, b, alen));
    /* Every line "N id:count ..." with N pairs, ids ascending and below V. */
    size_t lines = 0, tokens = 0;
    for (char *line = strtok(a, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        char *p;
        long n = strtol(line, &p, 10), last = -1;
        assert_true(n >= 1);
        for (long j = 0; j < n; j++) {
            long w = strtol(p, &p, 10);
            assert_true(*p == ':' && w > last && w < 100);
            last = w;
            tokens += (size_t)strtol(p + 1, &p, 10);
        }
        assert_true(*p == '\0');
    }
    assert_int_equal(lines, 50);
    assert_true(tokens >= 50 * 15 && tokens <= 50 * 45);
    free(a), free(b);
    o.format = LOOM_BOW_UCI;
    f = open_memstream(&a, &alen);
    assert_int_equal(lda_generate(&o, f, err, sizeof err), 0);
    fclose(f);
    unsigned long D, V, nnz;
    assert_int_equal(sscanf(a, "%lu\n%lu\n%lu\n", &D, &V, &nnz), 3);
    assert_true(D == 50 && V == 100);
    size_t nl = 0;
    for (char *p = a; *p; p++) nl += *p == '\n';
    assert_int_equal(nl, 3 + nnz);
    free(a);
    char name[32];
    lda_gen_word_name(&o, 0, name, sizeof name);
    assert_string_equal(name, "t00_w0000");
    lda_gen_word_name(&o, 26, name, sizeof name);
    assert_string_equal(name, "t01_w0001");
    lda_gen_word_name(&o, 99, name, sizeof name);
    assert_string_equal(name, "t03_w0024");
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) ? -1 : 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docs_build),
        cmocka_unit_test(test_sampler_distribution),
        cmocka_unit_test(test_sampler_counts),
        cmocka_unit_test(test_sampler_lists),
        cmocka_unit_test(test_sampler_changes_and_reload),
        cmocka_unit_test(test_lanes),
        cmocka_unit_test(test_log_likelihood),
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_model_file),
        cmocka_unit_test(test_vocab_file),
        cmocka_unit_test(test_generator),
        cmocka_unit_test(test_heldout),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
