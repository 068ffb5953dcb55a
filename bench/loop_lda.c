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
 * The draw is the app's SparseLDA (apps/lda/sampler.c: the s, r and q
 * buckets, O(K_d + K_w) a token), so the comparison is of the runtimes, not
 * of two samplers. W(w, *) and D(d, *) are K i32 counts, as the app keeps
 * them. A word's list of non-zero topics sorted by count is built from its
 * row the first time a block's tokens reach it (the app: for the rows that
 * changed, when a block arrives), then kept with the row by the app's own
 * lda_word_dec/lda_word_inc as the tokens move; a new block (or pass) makes
 * every list stale. What depends on the totals alone (the s bucket, α /
 * (Vβ + n_k)) is set up from T(*) after each flush and at a pass's start,
 * O(K); the document's state (its topics, the r bucket, the coefficients
 * (α + n_dk) / (Vβ + n_k) of its topics) from D(d, *) when a run of the
 * document's tokens starts (they come together inside a block), and both
 * are kept up to date by its moves.
 *
 * Reused from apps/lda: the corpus reader and the initial topics (so the
 * chains start where the app's does), the per-document random streams of an
 * iteration, the sorted lists' updates and the log-likelihood
 * (likelihood.c). The passes between two evaluations (every --eval-every
 * passes; 0: after the last only) are one run of the loop, so the
 * word-topic blocks pass from worker to worker and reach the table only
 * before an evaluation reads it (the app's rotation does the same); a
 * document's stream is seeded for the pass (loom_loop_pass) at its first
 * token of the pass. Worker 0 prints a line per run: tokens per second and
 * seconds a pass, and the log-likelihood, which reads the tables (outside
 * the passes' time).
 * --check: at the end, the counts against those recomputed from the
 * tokens' topics (loom_loop_element), exactly. */
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/data.h>
#include <loom/loom.h>

#include "lda/lda.h"

enum { Z, DOCS, WORDS, TOTALS };
enum { TOTALS_BUF };

#define TOPIC(e) ((uint32_t)(e))
#define COUNT(e) ((uint32_t)((e) >> 32))

typedef struct lda_loop {
    lda_params p;
    int counting;    /* the first run: add each token's topic */
    int failed;      /* a word's list found no memory */
    uint64_t doc_lo; /* the first document of this worker's space block */
    loom_loop *loop;
    uint64_t seed;
    int64_t pass;        /* the pass of the last token (loom_loop_pass) */
    app_rng *rng;        /* per document of the block: its stream of the pass */
    int64_t *rng_pass;   /* per document: the pass its stream was seeded for */
    loom_loop_buffer *t; /* the totals' write buffer */
    /* SparseLDA's state of the document whose tokens run (sampler.c) */
    int64_t doc;                        /* that document, -1 at a pass's start */
    int fresh;                          /* nk, s_sum and coef follow T(*) as last read */
    int64_t *nk;                        /* K: the totals this worker sees, with its own moves */
    double *coef, *qval;                /* K: (α + n_dk) / (Vβ + n_k); the q bucket's terms */
    uint32_t *dtopics, *dpos, ndtopics; /* the document's non-zero topics */
    double s_sum, r_sum;
    /* the words' sorted lists, valid while their block is held */
    size_t *tb;          /* W + 1: the time blocks' bounds (word ids) */
    uint32_t W, block;   /* the block of the last token; UINT32_MAX at a run's start */
    uint64_t gen, *wgen; /* lists built since the last block change; per word: its list's */
    size_t *woff;        /* per word: its list's place in the pool */
    uint32_t *wlen;      /* per word: its list's length */
    uint64_t *pool;      /* the lists: room for min(count, K) entries a word */
    uint64_t *sorting;   /* K: room to sort a list */
    size_t pool_used, pool_cap;
} lda_loop;

/* Word w's list, built from its row if this block has not yet: NULL when
 * out of memory. */
static uint64_t *word_list(lda_loop *s, uint64_t w, const int32_t *nw)
{
    uint32_t b = 0, hi = s->W; /* the block of w: the last b with tb[b] <= w */
    while (hi - b > 1) {
        uint32_t mid = (b + hi) / 2;
        if (s->tb[mid] <= w)
            b = mid;
        else
            hi = mid;
    }
    if (b != s->block) { /* a block arrived: every list is stale */
        s->block = b;
        s->gen++;
        s->pool_used = 0;
    }
    if (s->wgen[w] == s->gen) return s->pool + s->woff[w];
    const uint32_t K = s->p.topics;
    uint64_t sum = 0;
    for (uint32_t k = 0; k < K; k++) sum += (uint32_t)nw[k];
    size_t room = sum < K ? (size_t)sum : K;
    if (s->pool_used + room > s->pool_cap) {
        size_t cap = 2 * (s->pool_used + room);
        uint64_t *g = realloc(s->pool, cap * sizeof *g);
        if (!g) return NULL;
        s->pool = g, s->pool_cap = cap;
    }
    uint64_t *e = s->pool + s->pool_used;
    uint32_t n = 0;
    for (uint32_t k = 0; k < K; k++)
        if (nw[k]) e[n++] = (uint64_t)(uint32_t)nw[k] << 32 | k;
    lda_sort_desc(e, n, s->sorting);
    s->woff[w] = s->pool_used, s->wlen[w] = n, s->wgen[w] = s->gen;
    s->pool_used += room;
    return e;
}

/* What depends on the totals alone (nk, the s bucket, every coefficient
 * at α / (Vβ + n_k)), from T(*) as last read and this worker's moves since
 * (the buffer's row): O(K), once after each flush brought the other
 * workers' moves (merge) and at a pass's start. */
static void read_totals(lda_loop *s, const int64_t *t, const int64_t *mine)
{
    const double vb = (double)s->p.vocab * s->p.beta, ab = s->p.alpha * s->p.beta;
    s->s_sum = 0;
    for (uint32_t k = 0; k < s->p.topics; k++) {
        s->nk[k] = t[k] + mine[k];
        double denom = vb + (double)s->nk[k];
        s->s_sum += ab / denom;
        s->coef[k] = s->p.alpha / denom;
    }
    s->fresh = 1;
}

/* A run of document d's tokens starts: the last document's coefficients
 * back to α / (Vβ + n_k), then d's state from D(d, *): divisions for its
 * topics only (SparseLDA's r bucket). */
static void start_doc(lda_loop *s, int64_t d, const int32_t *nd, const int64_t *t,
                      const int64_t *mine)
{
    const double vb = (double)s->p.vocab * s->p.beta;
    if (!s->fresh)
        read_totals(s, t, mine);
    else
        for (uint32_t j = 0; j < s->ndtopics; j++) {
            uint32_t k = s->dtopics[j];
            s->coef[k] = s->p.alpha / (vb + (double)s->nk[k]);
        }
    s->doc = d;
    s->r_sum = 0;
    s->ndtopics = 0;
    for (uint32_t k = 0; k < s->p.topics; k++) {
        if (!nd[k]) continue;
        double denom = vb + (double)s->nk[k];
        s->coef[k] = (s->p.alpha + nd[k]) / denom;
        s->r_sum += s->p.beta * nd[k] / denom;
        s->dpos[k] = s->ndtopics;
        s->dtopics[s->ndtopics++] = k;
    }
}

/* Topic k's count of the document and the totals by `by`, with the buckets
 * and the document's topics (sampler.c's change()). */
static void change(lda_loop *s, int32_t *nd, int64_t *mine, uint32_t k, int by)
{
    const double vb = (double)s->p.vocab * s->p.beta, ab = s->p.alpha * s->p.beta;
    double denom = vb + (double)s->nk[k];
    s->s_sum -= ab / denom;
    s->r_sum -= s->p.beta * nd[k] / denom;
    if (by > 0 && !nd[k]) {
        s->dpos[k] = s->ndtopics;
        s->dtopics[s->ndtopics++] = k;
    }
    nd[k] += by, s->nk[k] += by, mine[k] += by;
    if (by < 0 && !nd[k]) {
        uint32_t last = s->dtopics[--s->ndtopics], at = s->dpos[k];
        s->dtopics[at] = last;
        s->dpos[last] = at;
    }
    denom = vb + (double)s->nk[k];
    s->s_sum += ab / denom;
    s->r_sum += s->p.beta * nd[k] / denom;
    s->coef[k] = (s->p.alpha + nd[k]) / denom;
}

static void body(void *user, const int64_t *index, double value, void *const *rows)
{
    lda_loop *s = user;
    int32_t *nd = rows[1], *nw = rows[2];
    int64_t *mine = loom_loop_buffer_row(s->t, 0);
    uint32_t old = (uint32_t)value, k;
    if (s->counting) {
        nd[old]++, nw[old]++, mine[old]++;
        return;
    }
    if (loom_loop_pass(s->loop) != s->pass) { /* a new pass: the others changed every block */
        s->pass = loom_loop_pass(s->loop);
        s->doc = -1;
        s->fresh = 0;
        s->block = UINT32_MAX;
    }
    uint64_t *e = word_list(s, (uint64_t)index[1], nw);
    if (!e) { /* out of memory: the token keeps its topic, the run is reported failed */
        s->failed = 1;
        return;
    }
    uint32_t *len = &s->wlen[index[1]];
    if (index[0] != s->doc) start_doc(s, index[0], nd, rows[3], mine);
    size_t di = (size_t)((uint64_t)index[0] - s->doc_lo);
    if (s->rng_pass[di] != s->pass) { /* the document's first token of the pass */
        app_rng_seed(&s->rng[di], s->seed, lda_stream((int)s->pass, s->doc_lo + di));
        s->rng_pass[di] = s->pass;
    }
    const double vb = (double)s->p.vocab * s->p.beta, ab = s->p.alpha * s->p.beta;
    const uint32_t K = s->p.topics;
    change(s, nd, mine, old, -1);
    nw[old]--;
    lda_word_dec(e, len, old);
    double q_sum = 0;
    for (uint32_t j = 0; j < *len; j++) q_sum += s->qval[j] = s->coef[TOPIC(e[j])] * COUNT(e[j]);
    double u = app_rng_uniform(&s->rng[di]) * (s->s_sum + s->r_sum + q_sum);
    if (u < q_sum) { /* the word's topics */
        uint32_t j = 0;
        while (j + 1 < *len && (u -= s->qval[j]) >= 0) j++;
        k = TOPIC(e[j]);
        lda_word_inc_at(e, j);
    } else {
        u -= q_sum;
        if (u < s->r_sum && s->ndtopics > 0) { /* the document's topics */
            uint32_t j = 0;
            for (; j + 1 < s->ndtopics; j++) {
                uint32_t c = s->dtopics[j];
                if ((u -= s->p.beta * nd[c] / (vb + (double)s->nk[c])) < 0) break;
            }
            k = s->dtopics[j];
        } else { /* smoothing: every topic */
            u -= s->r_sum;
            for (k = 0; k + 1 < K; k++)
                if ((u -= ab / (vb + (double)s->nk[k])) < 0) break;
        }
        lda_word_inc(e, len, k);
    }
    change(s, nd, mine, k, +1);
    nw[k]++;
    *(double *)rows[0] = k;
}

/* A flush of the totals' buffer: T(*) is read again after it, with the
 * other workers' moves. */
static void merge(void *user, uint64_t row, void *value, const void *update)
{
    lda_loop *s = user;
    (void)row;
    int64_t *v = value;
    const int64_t *u = update;
    for (uint32_t k = 0; k < s->p.topics; k++) v[k] += u[k];
    s->fresh = 0;
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
    double mism = 0;
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

/* The first run: the body adds each token's initial topic (s->counting, which
 * it reads during the run) instead of sampling. */
static int count_pass(loom_loop *l, lda_loop *s)
{
    s->counting = 1;
    int rc = loom_loop_run(l, 1);
    s->counting = 0;
    return rc;
}

int main(int argc, char **argv)
{
#ifdef M_MMAP_THRESHOLD
    /* As app_node_main does for `loom train lda` (apps/common/app.c): keep
     * freed blocks for the next message of the same size instead of a fresh
     * page fault for every page of it. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
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
    size_t *sb = malloc(((size_t)W + 1) * sizeof *sb), ndocs = 0;
    s.tb = malloc(((size_t)W + 1) * sizeof *s.tb);
    if (sb && s.tb) {
        loom_loop_bounds(l, sb, s.tb);
        s.doc_lo = sb[me];
        ndocs = (size_t)((me + 1 == W ? docs : sb[me + 1]) - s.doc_lo);
    }
    free(sb);
    s.W = (uint32_t)W;
    s.t = loom_loop_buffer_of(l, TOTALS_BUF);
    s.wgen = calloc(s.p.vocab, sizeof *s.wgen);
    s.woff = malloc(s.p.vocab * sizeof *s.woff);
    s.wlen = malloc(s.p.vocab * sizeof *s.wlen);
    s.rng = malloc((ndocs + 1) * sizeof *s.rng);
    s.rng_pass = calloc(ndocs + 1, sizeof *s.rng_pass); /* pass 0 counts: no draws */
    s.nk = malloc(s.p.topics * sizeof *s.nk);
    s.coef = malloc(s.p.topics * sizeof *s.coef);
    s.qval = malloc(s.p.topics * sizeof *s.qval);
    s.dtopics = malloc(s.p.topics * sizeof *s.dtopics);
    s.dpos = malloc(s.p.topics * sizeof *s.dpos);
    s.sorting = malloc(s.p.topics * sizeof *s.sorting);
    s.loop = l;
    s.seed = seed;
    if (!s.tb || !s.wgen || !s.woff || !s.wlen || !s.rng || !s.rng_pass || !s.nk || !s.coef ||
        !s.qval || !s.dtopics || !s.dpos || !s.sorting)
        rc = LOOM_ENOMEM;
    if (!rc) rc = count_pass(l, &s);
    if (!rc && me == 0)
        fprintf(stderr, "loop_lda: %s; %zu tokens here, %.2f s to open and count\n",
                loom_loop_plan_explain(loom_loop_get_plan(l)), loom_loop_elements(l),
                app_now_s() - t0);
    /* ---- the loop ends here: passes and evaluations ---- */

    app_stats ll_t;
    double tokens = (double)loom_loop_elements(l);
    if (!rc && !(rc = app_stats_open(n, "loop_lda.ll", 1, &ll_t)) &&
        !(rc = app_stats_add(&ll_t, 0, &tokens)) && !(rc = loom_barrier(n)))
        rc = app_stats_read(&ll_t, 0, &tokens);
    /* One run from an evaluation to the next: the word-topic blocks go from
     * worker to worker and reach the table only at the run's end. */
    int chunk = eval_every ? eval_every : passes;
    for (int p = 0; p < passes && !rc; p += chunk) {
        if (chunk > passes - p) chunk = passes - p;
        double ts = app_now_s();
        if ((rc = loom_loop_run(l, chunk)) || (rc = s.failed ? LOOM_ENOMEM : 0)) break;
        double pass_s = (app_now_s() - ts) / chunk, ll = 0;
        char llpart[48] = "";
        if (p + chunk == passes || (eval_every && (p + chunk) % eval_every == 0)) {
            if ((rc = log_likelihood(l, &s.p, docs, me, W, &ll)) ||
                (rc = app_stats_add(&ll_t, p + chunk, &ll)) || (rc = loom_barrier(n)) ||
                (rc = app_stats_read(&ll_t, p + chunk, &ll)))
                break;
            snprintf(llpart, sizeof llpart, "  log-likelihood %.6e", ll);
        }
        if (me == 0)
            printf("pass %3d%s  %.0f tokens/s  %.2f s a pass  total %.2f s\n", p + chunk, llpart,
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
    free(idx), free(z), free(s.rng), free(s.rng_pass), free(s.nk), free(s.coef), free(s.qval),
        free(s.dtopics);
    free(s.dpos), free(s.tb), free(s.wgen), free(s.woff), free(s.wlen), free(s.pool),
        free(s.sorting);
    return rc || bad ? 1 : loom_finalize(n) ? 1 : 0;
}
