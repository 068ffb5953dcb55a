/* loop_lda: LDA by collapsed Gibbs sampling written as a serial loop over
 * the corpus's tokens with its accesses declared (loom/loop.h), against the
 * hand-written rotation of `loom train lda --schedule rotation`
 * (apps/lda/train.c). Run under `loom run`:
 *
 *   loom run --servers 1 --workers W -- loop_lda --train CORPUS [flags]
 *
 * The loop (Orion's LDA, wei-thesis-bosen-orion.txt chapter 3):
 *
 *   for each token (d, w) with topic z:       declared: Z(d, w) written (its own
 *       D(d, z)--, W(w, z)--, T(z)--                 element), D(d, *) written,
 *       z = a draw from p(k) ∝ (α + D(d, k))         W(w, *) written, T(*) read
 *             (β + W(w, k)) / (Vβ + T(k))
 *       D(d, z)++, W(w, z)++, T(z)++          T through a write buffer, merged
 *                                             at most every --delay tokens
 *
 * D keeps one document fixed, W one word: the planner makes it 2D, and with
 * the document as the space index (prefer_space) the doc-topic counts stay
 * on the worker of their documents while the word-topic rows rotate between
 * the workers, as the app's rotation does. The topic totals are every
 * token's, so they are written through a buffer: a worker sees its own moves
 * at once (the buffer's row is added to its copy) and the others' at its
 * flushes, at the latest --delay tokens later (the app: at the start of each
 * block). The first run, in counting mode, adds every token's initial topic
 * to the counts (the same loop, the serial program's initialisation).
 *
 * Reused from apps/lda: the corpus reader and the initial topics (so the
 * chains start where the app's does), the per-document random streams of an
 * iteration, and the log-likelihood (likelihood.c). The sampler is the plain
 * O(K) rule over dense rows, not the app's SparseLDA (O(K_d + K_w)): its
 * per-word sorted lists would have to live in the rotated rows. Worker 0
 * prints one line per pass: tokens per second of the pass, seconds, and
 * every --eval-every passes (0: after the last only) the log-likelihood,
 * which reads the tables (outside the pass's time). --check: at the end, the counts against those
 * recomputed from the tokens' topics (loom_loop_element), exactly. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/data.h>
#include <loom/loom.h>

#include "lda/lda.h"

enum { Z, DOCS, WORDS, TOTALS };
enum { TOTALS_BUF };

typedef struct lda_loop {
    lda_params p;
    int counting;        /* the first run: add each token's topic */
    uint64_t doc_lo;     /* the first document of this worker's space block */
    app_rng *rng;        /* per document of the block: its stream of the pass */
    double *cum;         /* K: the running sum of p(k) */
    loom_loop_buffer *t; /* the totals' write buffer */
} lda_loop;

static void body(void *user, const int64_t *index, double value, void *const *rows)
{
    lda_loop *s = user;
    int32_t *nd = rows[1], *nw = rows[2];
    const int64_t *nt = rows[3];
    int64_t *mine = loom_loop_buffer_row(s->t, 0); /* this worker's moves since its flush */
    uint32_t k = (uint32_t)value, K = s->p.topics;
    if (!s->counting) {
        nd[k]--, nw[k]--, mine[k]--;
        const double a = s->p.alpha, b = s->p.beta, vb = (double)s->p.vocab * b;
        double sum = 0;
        for (uint32_t j = 0; j < K; j++)
            s->cum[j] = sum += (a + nd[j]) * (b + nw[j]) / (vb + (double)(nt[j] + mine[j]));
        double u = app_rng_uniform(&s->rng[(uint64_t)index[0] - s->doc_lo]) * sum;
        uint32_t lo = 0, hi = K - 1; /* the first topic whose running sum exceeds u */
        while (lo < hi) {
            uint32_t mid = (lo + hi) / 2;
            if (s->cum[mid] > u)
                hi = mid;
            else
                lo = mid + 1;
        }
        k = lo;
        *(double *)rows[0] = k;
    }
    nd[k]++, nw[k]++, mine[k]++;
}

static void merge(void *user, uint64_t row, void *value, const void *update)
{
    const lda_loop *s = user;
    (void)row;
    int64_t *v = value;
    const int64_t *u = update;
    for (uint32_t k = 0; k < s->p.topics; k++) v[k] += u[k];
}

/* ---- the loop ends here: the rest reads the corpus and evaluates ---- */

/* This worker's part of log p(w, z) (likelihood.c's terms): the documents
 * and words of its share of the rows, and (worker 0) the topics. */
static int log_likelihood(loom_loop *l, const lda_params *p, uint64_t docs, int rank, int W,
                          double *out)
{
    const size_t K = p->topics, chunk = 4096;
    int32_t *rows = malloc(chunk * K * sizeof *rows);
    int64_t *totals = malloc(K * sizeof *totals);
    if (!rows || !totals) {
        free(rows), free(totals);
        return LOOM_ENOMEM;
    }
    lda_params pd = *p;
    pd.beta = p->alpha; /* a document's counts: the words' sum with α for β */
    const double ka = (double)K * p->alpha, lg_ka = lgamma(ka);
    double ll = 0;
    int rc = 0;
    for (int part = 0; part < 2 && !rc; part++) {
        uint64_t n = part ? p->vocab : docs, lo = n * (uint64_t)rank / (uint64_t)W,
                 hi = n * (uint64_t)(rank + 1) / (uint64_t)W;
        for (uint64_t r = lo; r < hi && !rc; r += chunk) {
            size_t m = hi - r < chunk ? (size_t)(hi - r) : chunk;
            if ((rc = loom_pull_range(loom_loop_table(l, part ? WORDS : DOCS), r, r + m, rows)))
                break;
            if (part) {
                ll = lda_ll_words_add(p, rows, m, ll);
                continue;
            }
            ll = lda_ll_words_add(&pd, rows, m, ll);
            for (size_t i = 0; i < m; i++) {
                int64_t nd = 0;
                for (size_t k = 0; k < K; k++) nd += rows[i * K + k];
                ll += lg_ka - lgamma((double)nd + ka);
            }
        }
    }
    if (!rc && rank == 0 && !(rc = loom_pull_range(loom_loop_table(l, TOTALS), 0, 1, totals)))
        ll += lda_ll_topics(p, totals);
    free(rows), free(totals);
    *out = ll;
    return rc;
}

/* --check: every count against the tokens' topics. Documents: this worker
 * holds all the tokens of its space block's documents; words and totals:
 * every worker adds its tokens' counts into tables of their own, then
 * compares its share of the rows. The mismatches, summed over the workers,
 * into *bad. */
static int check_counts(loom_node *n, loom_loop *l, const lda_params *p, uint64_t docs, int rank,
                        int W, double *bad)
{
    const size_t K = p->topics, ne = loom_loop_elements(l);
    size_t *sb = malloc(((size_t)W + 1) * sizeof *sb);
    if (!sb) return LOOM_ENOMEM;
    loom_loop_bounds(l, sb, NULL);
    uint64_t d0 = sb[rank], d1 = rank + 1 == W ? docs : sb[rank + 1];
    free(sb);
    uint64_t w0 = p->vocab * (uint64_t)rank / (uint64_t)W,
             w1 = p->vocab * (uint64_t)(rank + 1) / (uint64_t)W;
    size_t nd = (size_t)(d1 - d0), nw = (size_t)(w1 - w0);
    int32_t *dc = calloc(nd * K + 1, sizeof *dc), *dg = malloc((nd * K + 1) * sizeof *dg);
    int32_t *wc = calloc(p->vocab * K, sizeof *wc), *wg = malloc((nw * K + 1) * sizeof *wg),
            *wr = malloc((nw * K + 1) * sizeof *wr);
    int64_t *tc = calloc(K, sizeof *tc), *tg = malloc(K * sizeof *tg), *tr = malloc(K * sizeof *tr);
    uint64_t *keys = malloc((p->vocab + 1) * sizeof *keys);
    int rc = dc && dg && wc && wg && wr && tc && tg && tr && keys ? 0 : LOOM_ENOMEM;
    for (size_t e = 0; e < ne && !rc; e++) {
        int64_t at[2];
        double z;
        loom_loop_element(l, e, at, &z);
        if ((uint64_t)at[0] < d0 || (uint64_t)at[0] >= d1) rc = LOOM_EKEYRANGE;
        if (rc) break;
        dc[((uint64_t)at[0] - d0) * K + (size_t)z]++;
        wc[(uint64_t)at[1] * K + (size_t)z]++;
        tc[(size_t)z]++;
    }
    loom_table_opts to = LOOM_TABLE_OPTS_DEFAULT;
    to.type = LOOM_I32;
    to.width = (uint32_t)K;
    to.storage = LOOM_DENSE;
    to.key_end = p->vocab;
    loom_table *cw = NULL, *ct = NULL;
    if (!rc) rc = loom_table_open(n, "loop_lda.check_words", &to, &cw);
    to.type = LOOM_I64;
    to.key_end = 1;
    if (!rc) rc = loom_table_open(n, "loop_lda.check_totals", &to, &ct);
    for (uint64_t w = 0; w < p->vocab; w++) keys[w] = w;
    static const uint64_t zero = 0;
    if (!rc) rc = loom_push(cw, keys, p->vocab, wc);
    if (!rc) rc = loom_push(ct, &zero, 1, tc);
    if (!rc) rc = loom_barrier(n);
    if (!rc && nd) rc = loom_pull_range(loom_loop_table(l, DOCS), d0, d1, dg);
    if (!rc && nw) rc = loom_pull_range(loom_loop_table(l, WORDS), w0, w1, wg);
    if (!rc && nw) rc = loom_pull_range(cw, w0, w1, wr);
    if (!rc) rc = loom_pull_range(loom_loop_table(l, TOTALS), 0, 1, tg);
    if (!rc) rc = loom_pull_range(ct, 0, 1, tr);
    double mism = 0;
    for (size_t i = 0; !rc && i < nd * K; i++) mism += dc[i] != dg[i];
    for (size_t i = 0; !rc && i < nw * K; i++) mism += wr[i] != wg[i];
    for (size_t k = 0; !rc && rank == 0 && k < K; k++) mism += tr[k] != tg[k];
    app_stats st;
    if (!rc) rc = app_stats_open(n, "loop_lda.check", 1, &st);
    if (!rc) rc = app_stats_add(&st, 0, &mism);
    if (!rc) rc = loom_barrier(n);
    if (!rc) rc = app_stats_read(&st, 0, bad);
    free(dc), free(dg), free(wc), free(wg), free(wr), free(tc), free(tg), free(tr), free(keys);
    return rc;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: loom run ... -- loop_lda --train CORPUS [--topics K] [--passes N] "
            "[--alpha A] [--beta B] [--seed S] [--delay TOKENS] [--eval-every N] [--check]\n");
    return 2;
}

int main(int argc, char **argv)
{
    loom_node *n;
    int rc = loom_init(&n, &argc, &argv);
    if (rc) {
        fprintf(stderr, "loop_lda: cannot join the job: %s\n", loom_strerror(rc));
        return 1;
    }
    if (!loom_is_worker(n)) return loom_serve(n) ? 1 : 0;
    const char *path = NULL;
    int passes = 10, check = 0, eval_every = 1;
    uint64_t seed = 1, delay = 10000;
    lda_loop s = {.p = {50, 0, 0.1, 0.01}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--check"))
            check = 1;
        else if (!v)
            return usage();
        else if (!strcmp(a, "--train"))
            path = v, i++;
        else if (!strcmp(a, "--topics"))
            s.p.topics = (uint32_t)atoi(v), i++;
        else if (!strcmp(a, "--passes"))
            passes = atoi(v), i++;
        else if (!strcmp(a, "--eval-every"))
            eval_every = atoi(v), i++;
        else if (!strcmp(a, "--alpha"))
            s.p.alpha = atof(v), i++;
        else if (!strcmp(a, "--beta"))
            s.p.beta = atof(v), i++;
        else if (!strcmp(a, "--seed"))
            seed = strtoull(v, NULL, 10), i++;
        else if (!strcmp(a, "--delay"))
            delay = strtoull(v, NULL, 10), i++;
        else
            return usage();
    }
    if (!path || passes < 1 || eval_every < 0 || s.p.topics < 1 || s.p.topics > LDA_MAX_TOPICS ||
        delay < 1 || !(s.p.alpha > 0) || !(s.p.beta > 0))
        return usage();
    int W = loom_num_workers(n), me = loom_rank(n);
    loom_bow_opts bo = LOOM_BOW_OPTS_DEFAULT;
    loom_corpus *corpus;
    lda_docs d;
    char err[512];
    if ((rc = loom_bow_read(path, me, W, &bo, &corpus, err, sizeof err))) {
        fprintf(stderr, "loop_lda: %s\n", err);
        return 1;
    }
    if ((rc = lda_docs_build(corpus, &d))) return 1;
    lda_docs_init_topics(&d, s.p.topics, seed); /* the app's initial topics */
    /* the documents and the vocabulary: the largest of the workers' */
    app_stats agree;
    double *mine = calloc(2 * (size_t)W, sizeof *mine), *all = calloc(2 * (size_t)W, sizeof *all);
    if (!mine || !all) return 1;
    mine[me] = (double)(d.first_doc + d.ndocs);
    mine[W + me] = (double)corpus->vocab;
    if ((rc = app_stats_open(n, "loop_lda.sizes", 2 * (uint32_t)W, &agree)) ||
        (rc = app_stats_add(&agree, 0, mine)) || (rc = loom_barrier(n)) ||
        (rc = app_stats_read(&agree, 0, all)))
        return 1;
    uint64_t docs = 0;
    for (int w = 0; w < W; w++) {
        docs = (uint64_t)all[w] > docs ? (uint64_t)all[w] : docs;
        s.p.vocab = (uint64_t)all[W + w] > s.p.vocab ? (uint64_t)all[W + w] : s.p.vocab;
    }
    free(mine), free(all);
    if (docs < 1 || s.p.vocab < (uint64_t)W) {
        fprintf(stderr, "loop_lda: %s: %" PRIu64 " documents, %" PRIu64 " words for %d workers\n",
                path, docs, s.p.vocab, W);
        return 1;
    }
    /* the tokens: (document, word) and the topic */
    int64_t *idx = malloc(2 * (d.ntokens + 1) * sizeof *idx);
    double *z = malloc((d.ntokens + 1) * sizeof *z);
    if (!idx || !z) return 1;
    for (size_t i = 0; i < d.ndocs; i++)
        for (size_t t = d.doc[i]; t < d.doc[i + 1]; t++) {
            idx[2 * t] = (int64_t)(d.first_doc + i);
            idx[2 * t + 1] = (int64_t)d.vocab[d.word[t]];
            z[t] = d.z[t];
        }

    /* ---- the loop ---- */
    const loom_access acc[] = {
        {Z, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB(1, 0)}},     /* Z(d, w): the token's topic */
        {DOCS, 1, 2, {LOOM_SUB(0, 0), LOOM_SUB_EVERY}},  /* D(d, *) */
        {WORDS, 1, 2, {LOOM_SUB(1, 0), LOOM_SUB_EVERY}}, /* W(w, *) */
        {TOTALS, 0, 1, {LOOM_SUB_EVERY}},                /* T(*), read */
    };
    const uint64_t ext[2] = {docs, s.p.vocab};
    const loom_loop_array arrays[] = {
        {DOCS, "loop_lda.doc_topic", docs, s.p.topics, LOOM_I32, NULL},
        {WORDS, "loop_lda.word_topic", s.p.vocab, s.p.topics, LOOM_I32, NULL},
        {TOTALS, "loop_lda.topics", 1, s.p.topics, LOOM_I64, NULL},
    };
    const loom_loop_buffer_decl buffers[] = {{TOTALS_BUF, TOTALS, delay, merge}};
    loom_loop_opts o = {.dims = 2,
                        .extents = ext,
                        .acc = acc,
                        .nacc = 4,
                        .arrays = arrays,
                        .narrays = 3,
                        .indices = idx,
                        .values = z,
                        .n = d.ntokens,
                        .body = body,
                        .user = &s,
                        .buffers = buffers,
                        .nbuffers = 1,
                        .prefer_space = 1 + 0 /* documents: D stays, W rotates */};
    loom_loop *l;
    double t0 = app_now_s();
    if ((rc = loom_loop_open(n, &o, &l, err, sizeof err))) {
        fprintf(stderr, "loop_lda: %s\n", err);
        return 1;
    }
    size_t *sb = malloc(((size_t)W + 1) * sizeof *sb);
    if (!sb) return 1;
    loom_loop_bounds(l, sb, NULL);
    s.doc_lo = sb[me];
    size_t ndocs = (size_t)((me + 1 == W ? docs : sb[me + 1]) - s.doc_lo);
    free(sb);
    s.t = loom_loop_buffer_of(l, TOTALS_BUF);
    s.rng = malloc((ndocs + 1) * sizeof *s.rng);
    s.cum = malloc(s.p.topics * sizeof *s.cum);
    if (!s.rng || !s.cum) return 1;
    s.counting = 1; /* the initial counts */
    if ((rc = loom_loop_run(l, 1))) {
        fprintf(stderr, "loop_lda: %s\n", loom_strerror(rc));
        return 1;
    }
    s.counting = 0;
    if (me == 0)
        fprintf(stderr, "loop_lda: %s; %zu tokens here, %.2f s to open and count\n",
                loom_loop_plan_explain(loom_loop_get_plan(l)), loom_loop_elements(l),
                app_now_s() - t0);
    /* ---- the loop ends here: passes and evaluations ---- */

    app_stats ll_t;
    double tokens = (double)loom_loop_elements(l);
    if ((rc = app_stats_open(n, "loop_lda.ll", 1, &ll_t)) ||
        (rc = app_stats_add(&ll_t, 0, &tokens)) || (rc = loom_barrier(n)) ||
        (rc = app_stats_read(&ll_t, 0, &tokens)))
        return 1;
    for (int p = 0; p < passes && !rc; p++) {
        for (size_t i = 0; i < ndocs; i++)
            app_rng_seed(&s.rng[i], seed, lda_stream(p + 1, s.doc_lo + i));
        double ts = app_now_s();
        if ((rc = loom_loop_run(l, 1))) break;
        double pass_s = app_now_s() - ts, ll = 0;
        char llpart[48] = "";
        if (p + 1 == passes || (eval_every && (p + 1) % eval_every == 0)) {
            if ((rc = log_likelihood(l, &s.p, docs, me, W, &ll)) ||
                (rc = app_stats_add(&ll_t, p + 1, &ll)) || (rc = loom_barrier(n)) ||
                (rc = app_stats_read(&ll_t, p + 1, &ll)))
                break;
            snprintf(llpart, sizeof llpart, "  log-likelihood %.6e", ll);
        }
        if (me == 0)
            printf("pass %3d%s  %.0f tokens/s  %.2f s  total %.2f s\n", p + 1, llpart,
                   tokens / pass_s, pass_s, app_now_s() - t0);
        fflush(stdout);
    }
    double bad = 0;
    if (!rc && check && !(rc = check_counts(n, l, &s.p, docs, me, W, &bad)) && me == 0) {
        if (bad == 0)
            printf(
                "counts consistent: doc-topic, word-topic and totals equal the tokens' topics\n");
        else
            printf("counts INCONSISTENT: %.0f counts differ from the tokens' topics\n", bad);
    }
    if (rc) fprintf(stderr, "loop_lda: %s\n", loom_strerror(rc));
    loom_loop_close(l);
    lda_docs_free(&d);
    loom_corpus_free(corpus);
    free(idx), free(z), free(s.rng), free(s.cum);
    return rc || bad ? 1 : loom_finalize(n) ? 1 : 0;
}
