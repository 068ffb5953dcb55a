/* sampler: collapsed Gibbs sampling of topics with the SparseLDA bucket
 * decomposition (Yao, Mimno & McCallum, KDD 2009), as in Mallet.
 *
 * A token of word w in document d takes topic k with probability
 *     p(k) ∝ (α + n_dk)(β + n_wk) / (Vβ + n_k)
 * (counts without the token itself). Summing over K topics for every token
 * costs O(K). SparseLDA splits the product into three buckets:
 *     s = Σ_k αβ / (Vβ + n_k)                  every topic, changes slowly
 *     r = Σ_k n_dk β / (Vβ + n_k)              the document's non-zero topics
 *     q = Σ_k n_wk (α + n_dk) / (Vβ + n_k)     the word's non-zero topics
 * s and r are kept up to date incrementally (two topics change per token),
 * and q uses the coefficient c_k = (α + n_dk) / (Vβ + n_k), kept for every
 * topic, so a token costs O(K_d + K_w). One uniform draw u in [0, s + r + q)
 * picks the bucket, then the topic inside it. Most of the mass is in q, so
 * it is tested first; each word keeps its non-zero topics sorted by count,
 * descending, so the walk through q usually stops after a few entries.
 *
 * A word's topics are packed as count << 32 | topic in one uint64 and kept
 * sorted descending by that value: a total order, so a list maintained by
 * local swaps is exactly the list a fresh sort would give, and a rebuild
 * from the same counts reproduces the same walk order (the one-worker job and
 * the sequential reference rebuild at the same points and must agree bit for
 * bit).
 *
 * A word's number of non-zero topics never exceeds its total count, which
 * sampling does not change (a token leaves a topic of its own word and joins
 * another), so each word's list is allocated once per load with that bound.
 *
 * --sampler mh (mh.c) keeps the same counts in the same room, as a hash table
 * per word instead of a sorted list, and samples them its own way; loading,
 * changes and stores below serve both. */
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "lda/lda.h"
#include "lda/mh.h"

#define ONE      (1ull << 32)
#define TOPIC(e) ((uint32_t)(e))
#define COUNT(e) ((uint32_t)((e) >> 32))

lda_sampler_kind lda_sampler_choose(lda_sampler_kind kind, uint32_t topics)
{
    if (kind != LDA_SAMPLER_AUTO) return kind;
    return topics > LDA_MH_ABOVE ? LDA_SAMPLER_MH : LDA_SAMPLER_SPARSE; /* lda.h */
}

int lda_sampler_init(lda_sampler *s, const lda_params *p, size_t nwords)
{
    return lda_sampler_init_kind(s, p, nwords, LDA_SAMPLER_SPARSE);
}

int lda_sampler_init_kind(lda_sampler *s, const lda_params *p, size_t nwords, lda_sampler_kind kind)
{
    size_t K = p->topics;
    *s = (lda_sampler){.p = *p, .nwords = nwords, .kind = kind};
    int rows_rc = lda_rows_init(&s->rows, p->topics, nwords);
    s->totals = calloc(K, sizeof *s->totals);
    s->nk = calloc(K, sizeof *s->nk);
    s->off = calloc(nwords + 1, sizeof *s->off);
    s->len = calloc(nwords ? nwords : 1, sizeof *s->len);
    s->dirty = calloc(nwords ? nwords : 1, 1);
    s->ndk = calloc(K, sizeof *s->ndk);
    s->dtopics = calloc(K, sizeof *s->dtopics);
    s->dpos = calloc(K, sizeof *s->dpos);
    s->coef = calloc(K, sizeof *s->coef);
    s->qval = calloc(K, sizeof *s->qval);
    s->kw = (K + 63) / 64;
    s->touched = calloc(nwords && K ? nwords * s->kw : 1, sizeof *s->touched);
    s->scratch = calloc(K ? K : 1, sizeof *s->scratch);
    s->sorted = malloc((K ? K : 1) * sizeof *s->sorted);
    if (rows_rc || !s->totals || !s->nk || !s->off || !s->len || !s->dirty || !s->ndk ||
        !s->dtopics || !s->dpos || !s->coef || !s->qval || !s->touched || !s->scratch ||
        !s->sorted) {
        lda_sampler_free(s);
        return LOOM_ENOMEM;
    }
    return 0;
}

void lda_sampler_free(lda_sampler *s)
{
    lda_rows_free(&s->rows);
    free(s->totals), free(s->nk), free(s->packed), free(s->off), free(s->len);
    free(s->dirty), free(s->ndk), free(s->dtopics), free(s->dpos), free(s->coef), free(s->qval);
    free(s->touched), free(s->scratch), free(s->sorted), free(s->chg_word), free(s->chg_topic),
        free(s->chg_delta);
    lda_mh_free(s);
    *s = (lda_sampler){0};
}

/* The room of a word of `sum` tokens: its largest number of non-zero topics,
 * and for mh twice that, rounded up to a power of two. */
static size_t room(const lda_sampler *s, uint64_t sum)
{
    size_t n = sum < s->p.topics ? (size_t)sum : s->p.topics;
    return s->kind == LDA_SAMPLER_MH ? lda_mh_room(n) : n;
}

/* The entries to look at for word w's counts: for mh the whole table,
 * whose empty slots have count 0. */
static inline size_t span(const lda_sampler *s, size_t w)
{
    return s->kind == LDA_SAMPLER_MH ? s->off[w + 1] - s->off[w] : s->len[w];
}

/* Runs of 16 by insertion, then merged through tmp (lda.h). Inline,
 * without qsort's call per comparison: a load sorts every word's list. */
void lda_sort_desc(uint64_t *e, size_t n, uint64_t *tmp)
{
    for (size_t r = 0; r < n; r += 16)
        for (size_t i = r + 1; i < n && i < r + 16; i++) {
            uint64_t v = e[i];
            size_t j = i;
            for (; j > r && e[j - 1] < v; j--) e[j] = e[j - 1];
            e[j] = v;
        }
    uint64_t *a = e, *b = tmp;
    for (size_t w = 16; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            size_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) b[k++] = a[i] > a[j] ? a[i++] : a[j++];
            while (i < mid) b[k++] = a[i++];
            while (j < hi) b[k++] = a[j++];
        }
        uint64_t *t = a;
        a = b, b = t;
    }
    if (a != e) memcpy(e, a, n * sizeof *e);
}

/* The same for a list that is nearly in order (rebuilt from its old order
 * after a few counts changed): insertion sort takes it in about n steps;
 * past a budget of moves (many counts changed) the rest is lda_sort_desc's.
 * Entries are distinct, so either way the order is the one order. */
static void resort_desc(uint64_t *e, size_t n, uint64_t *tmp)
{
    size_t moves = 0, budget = 4 * n + 32;
    for (size_t i = 1; i < n; i++) {
        uint64_t v = e[i];
        size_t j = i;
        for (; j > 0 && e[j - 1] < v; j--) e[j] = e[j - 1];
        e[j] = v;
        moves += i - j;
        if (moves > budget) {
            lda_sort_desc(e, n, tmp);
            return;
        }
    }
}

static void packed_word(lda_sampler *s, size_t w, uint32_t n)
{
    s->len[w] = n;
    s->dirty[w] = 0;
    memset(s->touched + w * s->kw, 0, s->kw * sizeof *s->touched);
}

/* Word w's entries from its row: non-zero topics, sorted. */
static void pack_word(lda_sampler *s, size_t w)
{
    if (s->kind == LDA_SAMPLER_MH) {
        lda_mh_pack(s, w);
        return;
    }
    uint64_t *e = s->packed + s->off[w];
    uint32_t n = 0, k;
    int32_t c;
    for (size_t pos = 0; lda_rows_next(&s->rows, w, &pos, &k, &c);)
        if (c > 0) e[n++] = (uint64_t)c << 32 | k;
    lda_sort_desc(e, n, s->sorted);
    packed_word(s, w, n);
}

/* pack_word for a word whose entries hold its earlier counts (a reload, a
 * rotation's block taken again): the row's topics in the entries' order,
 * those the entries lacked after them, then sorted. Rotation rebuilds every
 * word of every block it takes whose counts others changed, and a fresh
 * sort of each cost more than the rest of a hand-over; the same entries
 * come out. s->scratch holds the row's counts meanwhile (-1: placed). */
static void repack_word(lda_sampler *s, size_t w)
{
    if (s->kind == LDA_SAMPLER_MH) {
        lda_mh_pack(s, w);
        return;
    }
    uint64_t *e = s->packed + s->off[w];
    int32_t *sc = s->scratch, c;
    uint32_t n = 0, k, old = s->len[w];
    for (size_t pos = 0; lda_rows_next(&s->rows, w, &pos, &k, &c);)
        if (c > 0) sc[k] = c;
    for (uint32_t j = 0; j < old; j++) { /* n <= j: in place */
        k = TOPIC(e[j]);
        if (sc[k] > 0) e[n++] = (uint64_t)sc[k] << 32 | k, sc[k] = -1;
    }
    for (size_t pos = 0; lda_rows_next(&s->rows, w, &pos, &k, &c);) {
        if (c > 0 && sc[k] > 0) e[n++] = (uint64_t)c << 32 | k;
        sc[k] = 0;
    }
    resort_desc(e, n, s->sorted);
    packed_word(s, w, n);
}

/* The totals, the smoothing bucket and the coefficients of a document with no tokens. */
static void load_totals(lda_sampler *s)
{
    size_t K = s->p.topics;
    memcpy(s->nk, s->totals, K * sizeof *s->nk);
    double vb = (double)s->p.vocab * s->p.beta, ab = s->p.alpha * s->p.beta;
    s->s_sum = 0;
    for (size_t k = 0; k < K; k++) {
        double denom = vb + (double)s->nk[k];
        s->s_sum += ab / denom;
        s->coef[k] = s->p.alpha / denom;
    }
}

int lda_sampler_load(lda_sampler *s)
{
    size_t total = 0;
    for (size_t w = 0; w < s->nwords; w++) {
        s->off[w] = total;
        total += room(s, (uint64_t)lda_rows_sum(&s->rows, w));
    }
    s->off[s->nwords] = total;
    free(s->packed);
    s->packed = malloc((total ? total : 1) * sizeof *s->packed);
    if (!s->packed) return LOOM_ENOMEM;
    for (size_t w = 0; w < s->nwords; w++) pack_word(s, w);
    load_totals(s);
    return 0;
}

int lda_sampler_docs(lda_sampler *s, const lda_docs *d)
{
    return s->kind == LDA_SAMPLER_MH ? lda_mh_docs(s, d) : 0;
}

int lda_sampler_reload(lda_sampler *s, const uint32_t *words, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        /* The entries were sized by the row's total at the last full load. */
        uint64_t sum = (uint64_t)lda_rows_sum(&s->rows, words[i]);
        if (room(s, sum) > s->off[words[i] + 1] - s->off[words[i]]) return lda_sampler_load(s);
    }
    for (size_t i = 0; i < n; i++) repack_word(s, words[i]);
    load_totals(s);
    return 0;
}

int32_t lda_sampler_count(const lda_sampler *s, size_t w, uint32_t k)
{
    if (s->kind == LDA_SAMPLER_MH) return lda_mh_count(s, w, k);
    const uint64_t *e = s->packed + s->off[w];
    for (uint32_t j = 0; j < s->len[w]; j++)
        if (TOPIC(e[j]) == k) return (int32_t)COUNT(e[j]);
    return 0;
}

/* ---- a word's sorted topic list ---- */

void lda_word_dec(uint64_t *e, uint32_t *len, uint32_t k)
{
    uint32_t j = 0;
    while (TOPIC(e[j]) != k) j++;
    uint64_t v = e[j] - ONE;
    uint32_t n = *len;
    while (j + 1 < n && e[j + 1] > v) {
        e[j] = e[j + 1];
        j++;
    }
    e[j] = v;
    if (COUNT(v) == 0) *len = n - 1; /* a zero count sorts last */
}

void lda_word_inc_at(uint64_t *e, uint32_t j)
{
    uint64_t v = e[j] + ONE;
    while (j > 0 && e[j - 1] < v) {
        e[j] = e[j - 1];
        j--;
    }
    e[j] = v;
}

void lda_word_inc(uint64_t *e, uint32_t *len, uint32_t k)
{
    uint32_t j = 0, n = *len;
    while (j < n && TOPIC(e[j]) != k) j++;
    if (j == n) {
        e[j] = k; /* count 0, then incremented into place */
        *len = n + 1;
    }
    lda_word_inc_at(e, j);
}

/* ---- sampling ---- */

/* Move topic k's terms out of s and r, change the counts by `by`, and put
 * the new terms back (with k's coefficient). */
static inline void change(lda_sampler *s, uint32_t k, int by, double vb, double ab)
{
    double denom = vb + (double)s->nk[k];
    s->s_sum -= ab / denom;
    s->r_sum -= s->p.beta * s->ndk[k] / denom;
    s->ndk[k] += by;
    s->nk[k] += by;
    denom = vb + (double)s->nk[k];
    s->s_sum += ab / denom;
    s->r_sum += s->p.beta * s->ndk[k] / denom;
    s->coef[k] = (s->p.alpha + s->ndk[k]) / denom;
}

static void doc_add_topic(lda_sampler *s, uint32_t k)
{
    s->dpos[k] = s->ndtopics;
    s->dtopics[s->ndtopics++] = k;
}

static void doc_remove_topic(lda_sampler *s, uint32_t k)
{
    uint32_t last = s->dtopics[--s->ndtopics], at = s->dpos[k];
    s->dtopics[at] = last;
    s->dpos[last] = at;
}

static void sweep_doc(lda_sampler *s, lda_docs *d, size_t i, app_rng *rng, uint32_t wlo,
                      uint32_t whi)
{
    const double vb = (double)s->p.vocab * s->p.beta, ab = s->p.alpha * s->p.beta;
    const double alpha = s->p.alpha, beta = s->p.beta;
    const uint32_t K = s->p.topics;
    size_t t0 = d->doc[i], t1 = d->doc[i + 1];
    /* The document's counts, r and the coefficients of its topics. */
    s->ndtopics = 0;
    for (size_t t = t0; t < t1; t++)
        if (s->ndk[d->z[t]]++ == 0) doc_add_topic(s, d->z[t]);
    s->r_sum = 0;
    for (uint32_t j = 0; j < s->ndtopics; j++) {
        uint32_t k = s->dtopics[j];
        double denom = vb + (double)s->nk[k];
        s->r_sum += beta * s->ndk[k] / denom;
        s->coef[k] = (alpha + s->ndk[k]) / denom;
    }
    for (size_t t = t0; t < t1; t++) {
        uint32_t w = d->word[t], old = d->z[t];
        if (w < wlo || w >= whi) continue; /* not this sweep's words */
        uint64_t *e = s->packed + s->off[w];
        change(s, old, -1, vb, ab);
        if (s->ndk[old] == 0) doc_remove_topic(s, old);
        lda_word_dec(e, &s->len[w], old);
        uint32_t n = s->len[w];
        double q_sum = 0;
        for (uint32_t j = 0; j < n; j++) {
            double q = s->coef[TOPIC(e[j])] * COUNT(e[j]);
            s->qval[j] = q;
            q_sum += q;
        }
        double u = app_rng_uniform(rng) * (s->s_sum + s->r_sum + q_sum);
        uint32_t k;
        if (u < q_sum) {
            uint32_t j = 0;
            while (j + 1 < n && (u -= s->qval[j]) >= 0) j++;
            k = TOPIC(e[j]);
            lda_word_inc_at(e, j);
        } else {
            u -= q_sum;
            if (u < s->r_sum && s->ndtopics > 0) {
                uint32_t j = 0;
                for (; j + 1 < s->ndtopics; j++) {
                    uint32_t c = s->dtopics[j];
                    if ((u -= beta * s->ndk[c] / (vb + (double)s->nk[c])) < 0) break;
                }
                k = s->dtopics[j];
            } else {
                u -= s->r_sum;
                k = 0;
                for (; k + 1 < K; k++)
                    if ((u -= ab / (vb + (double)s->nk[k])) < 0) break;
            }
            lda_word_inc(e, &s->len[w], k);
        }
        if (s->ndk[k] == 0) doc_add_topic(s, k);
        change(s, k, +1, vb, ab);
        d->z[t] = k;
        if (k != old) {
            uint64_t *bits = s->touched + (size_t)w * s->kw;
            bits[old / 64] |= 1ull << (old % 64);
            bits[k / 64] |= 1ull << (k % 64);
            s->dirty[w] = 1;
        }
    }
    /* Back to the coefficients of a document without tokens. */
    for (uint32_t j = 0; j < s->ndtopics; j++) {
        uint32_t k = s->dtopics[j];
        s->ndk[k] = 0;
        s->coef[k] = alpha / (vb + (double)s->nk[k]);
    }
    s->ndtopics = 0;
}

void lda_sweep(lda_sampler *s, lda_docs *d, size_t lo, size_t hi, uint64_t seed, int iteration)
{
    for (size_t i = lo; i < hi; i++) {
        app_rng rng;
        app_rng_seed(&rng, seed, lda_stream(iteration + 1, d->first_doc + i));
        if (s->kind == LDA_SAMPLER_MH)
            lda_mh_sweep_doc(s, d, i, &rng, 0, UINT32_MAX);
        else
            sweep_doc(s, d, i, &rng, 0, UINT32_MAX);
    }
}

void lda_sweep_words(lda_sampler *s, lda_docs *d, app_rng *rng, size_t wlo, size_t whi)
{
    lda_sweep_part(s, d, rng, 0, d->ndocs, wlo, whi);
}

void lda_sweep_part(lda_sampler *s, lda_docs *d, app_rng *rng, size_t lo, size_t hi, size_t wlo,
                    size_t whi)
{
    for (size_t i = lo; i < hi; i++)
        if (s->kind == LDA_SAMPLER_MH)
            lda_mh_sweep_doc(s, d, i, &rng[i], (uint32_t)wlo, (uint32_t)whi);
        else
            sweep_doc(s, d, i, &rng[i], (uint32_t)wlo, (uint32_t)whi);
}

/* ---- lanes (--threads) ----
 *
 * A lane is a sampler without word entries of its own: it owns what a
 * document's sweep changes besides them (the document's counts, the
 * coefficients, the buckets' sums and its copy of the topic totals) and
 * borrows the word entries of the process's one sampler, of which each lane
 * writes only the words of the block it holds (lanes.c). */

int lda_sampler_lane_init(lda_sampler *l, const lda_sampler *s)
{
    size_t K = s->p.topics;
    *l = (lda_sampler){.p = s->p, .kind = s->kind};
    l->totals = calloc(K, sizeof *l->totals);
    l->nk = calloc(K, sizeof *l->nk);
    l->ndk = calloc(K, sizeof *l->ndk);
    l->dtopics = calloc(K, sizeof *l->dtopics);
    l->dpos = calloc(K, sizeof *l->dpos);
    l->coef = calloc(K, sizeof *l->coef);
    l->qval = calloc(K, sizeof *l->qval);
    if (!l->totals || !l->nk || !l->ndk || !l->dtopics || !l->dpos || !l->coef || !l->qval) {
        lda_sampler_lane_free(l);
        return LOOM_ENOMEM;
    }
    return 0;
}

void lda_sampler_lane_free(lda_sampler *l)
{
    free(l->totals), free(l->nk), free(l->ndk), free(l->dtopics), free(l->dpos), free(l->coef);
    free(l->qval);
    *l = (lda_sampler){0};
}

void lda_sampler_lane_begin(lda_sampler *l, const lda_sampler *s)
{
    /* s's entries may have moved since the last step (a reload reallocates them). */
    l->nwords = s->nwords;
    l->packed = s->packed, l->off = s->off, l->len = s->len;
    l->dirty = s->dirty, l->touched = s->touched, l->kw = s->kw;
    l->woff = s->woff, l->wtok = s->wtok, l->loff = s->loff, l->lpacked = s->lpacked;
    memcpy(l->totals, s->nk, s->p.topics * sizeof *l->totals);
    load_totals(l);
}

void lda_sampler_lane_end(lda_sampler *s, const lda_sampler *l)
{
    for (size_t k = 0; k < s->p.topics; k++) s->nk[k] += l->nk[k] - l->totals[k];
}

/* ---- synchronisation ---- */

/* Word w's current counts as a dense row. */
static void expand(const lda_sampler *s, size_t w, int32_t *row)
{
    memset(row, 0, s->p.topics * sizeof *row);
    const uint64_t *e = s->packed + s->off[w];
    for (size_t j = 0, n = span(s, w); j < n; j++)
        if (e[j]) row[TOPIC(e[j])] = (int32_t)COUNT(e[j]);
}

size_t lda_sampler_deltas(lda_sampler *s, const uint64_t *vocab, uint64_t *keys, int32_t *vals,
                          int64_t *totals_delta)
{
    size_t K = s->p.topics, n = 0;
    for (size_t w = 0; w < s->nwords; w++) {
        if (!s->dirty[w]) continue;
        int32_t *v = vals + n * K;
        expand(s, w, v);
        uint32_t k;
        int32_t c;
        for (size_t pos = 0; lda_rows_next(&s->rows, w, &pos, &k, &c);) v[k] -= c;
        keys[n++] = vocab[w];
    }
    for (size_t k = 0; k < K; k++) totals_delta[k] = s->nk[k] - s->totals[k];
    return n;
}

/* Word w's current counts into s->scratch (all zero before), and back. */
static void scratch_fill(lda_sampler *s, size_t w)
{
    const uint64_t *e = s->packed + s->off[w];
    for (size_t j = 0, n = span(s, w); j < n; j++)
        if (e[j]) s->scratch[TOPIC(e[j])] = (int32_t)COUNT(e[j]);
}

static void scratch_clear(lda_sampler *s, size_t w)
{
    const uint64_t *e = s->packed + s->off[w];
    for (size_t j = 0, n = span(s, w); j < n; j++) s->scratch[TOPIC(e[j])] = 0;
}

/* The next topic touched in word w's bits from topic k on, or K. */
static size_t next_touched(const lda_sampler *s, size_t w, size_t k)
{
    const uint64_t *bits = s->touched + w * s->kw;
    size_t i = k / 64;
    if (i >= s->kw) return s->p.topics;
    uint64_t b = bits[i] & (~0ull << (k % 64));
    while (!b) {
        if (++i == s->kw) return s->p.topics;
        b = bits[i];
    }
    return i * 64 + (size_t)__builtin_ctzll(b);
}

/* Room for m + 1 triples in the change lists. 0 or LOOM_ENOMEM. */
static int chg_room(lda_sampler *s, size_t m)
{
    if (m < s->chg_cap) return 0;
    size_t cap = s->chg_cap ? 2 * s->chg_cap : 4096;
    uint32_t *cw = realloc(s->chg_word, cap * sizeof *cw);
    if (cw) s->chg_word = cw;
    uint32_t *ck = realloc(s->chg_topic, cap * sizeof *ck);
    if (ck) s->chg_topic = ck;
    int32_t *cd = realloc(s->chg_delta, cap * sizeof *cd);
    if (cd) s->chg_delta = cd;
    if (!cw || !ck || !cd) return LOOM_ENOMEM;
    s->chg_cap = cap;
    return 0;
}

int lda_sampler_counts(lda_sampler *s, size_t *n)
{
    size_t m = 0;
    uint32_t k;
    int32_t c;
    for (size_t w = 0; w < s->nwords; w++)
        for (size_t pos = 0; lda_rows_next(&s->rows, w, &pos, &k, &c); m++) {
            if (chg_room(s, m)) return LOOM_ENOMEM;
            s->chg_word[m] = (uint32_t)w;
            s->chg_topic[m] = k;
            s->chg_delta[m] = c;
        }
    *n = m;
    return 0;
}

int lda_sampler_changes(lda_sampler *s, size_t *n, int64_t *totals_delta)
{
    size_t K = s->p.topics, m = 0;
    for (size_t w = 0; w < s->nwords; w++) {
        if (!s->dirty[w]) continue;
        scratch_fill(s, w);
        for (size_t k = next_touched(s, w, 0); k < K; k = next_touched(s, w, k + 1)) {
            int32_t d = s->scratch[k] - lda_rows_get(&s->rows, w, (uint32_t)k);
            if (!d) continue;
            if (chg_room(s, m)) {
                scratch_clear(s, w);
                return LOOM_ENOMEM;
            }
            s->chg_word[m] = (uint32_t)w;
            s->chg_topic[m] = (uint32_t)k;
            s->chg_delta[m++] = d;
        }
        scratch_clear(s, w);
    }
    for (size_t k = 0; k < K; k++) totals_delta[k] = s->nk[k] - s->totals[k];
    *n = m;
    return 0;
}

int lda_sampler_store(lda_sampler *s)
{
    size_t K = s->p.topics;
    for (size_t w = 0; w < s->nwords; w++) {
        if (!s->dirty[w]) continue;
        scratch_fill(s, w);
        for (size_t k = next_touched(s, w, 0); k < K; k = next_touched(s, w, k + 1)) {
            int32_t d = s->scratch[k] - lda_rows_get(&s->rows, w, (uint32_t)k);
            if (d && lda_rows_add(&s->rows, w, (uint32_t)k, d)) {
                scratch_clear(s, w);
                return LOOM_ENOMEM;
            }
        }
        scratch_clear(s, w);
        memset(s->touched + w * s->kw, 0, s->kw * sizeof *s->touched);
        s->dirty[w] = 0;
    }
    memcpy(s->totals, s->nk, K * sizeof *s->totals);
    return 0;
}
