/* mh: Metropolis-Hastings sampling of topics in O(1) a token, for many
 * topics (--sampler mh): LightLDA's cycle of a document proposal and a word
 * proposal (Yuan et al., WWW 2015), with the word proposal of WarpLDA (Chen
 * et al., VLDB 2016) drawn from the current counts, so that the chain is
 * exact.
 *
 * SparseLDA (sampler.c) draws from the exact conditional
 *     p(k) ∝ (α + n_dk)(β + n_wk) / (Vβ + n_k)
 * (counts without the token) at O(K_d + K_w) a token, plus an O(K_d)
 * setup per document; with K = 100,000 topics a frequent word has
 * thousands of non-zero topics, and that walk dominates. Here a token
 * instead runs a short Metropolis-Hastings chain on its topic c, starting at
 * its topic, aimed at p, alternating two proposals, each drawn in O(1):
 *
 *   document proposal q_d(k | c) ∝ n_dk + [k = c] + α: with probability
 *     n_d / (n_d + Kα) the topic of a uniformly chosen token of the
 *     document, the token itself counting at c, else a uniform topic;
 *   word proposal q_w(k | c) ∝ l_wk + [k = c] + β: with probability
 *     m_w / (m_w + Kβ) the topic of a uniformly chosen one of the sampler's
 *     m_w tokens of word w (a list per word), the token itself counting at
 *     c, else a uniform topic. l_wk counts the sampler's tokens of w (but
 *     this one) in topic k: n_wk when its documents hold all of w's tokens
 *     (one worker, one lane), else a hash table of its own (the other
 *     workers' tokens are in n_wk but cannot be drawn here).
 *
 * A proposal t from c is accepted with probability
 * min(1, p(t) q(c | t) / (p(c) q(t | c))), where
 *     q_d(c | t) / q_d(t | c) = (n_dc + α) / (n_dt + α),
 *     q_w(c | t) / q_w(t | c) = (l_wc + β) / (l_wt + β),
 * one hash look-up of n_wt (and l_wt) a proposal: each word's counts are an
 * open-addressing hash table (linear probing, at most half full, deletion
 * by backward shift), so n_wk is O(1) where SparseLDA's sorted list needs a
 * walk. Both proposals are functions of the current state (the other
 * tokens' topics, which do not move during the token's chain, and c) with
 * exactly known densities, so each step is a Metropolis-Hastings step
 * reversible with respect to p, and the token's chain leaves p invariant:
 * the sampler is collapsed Gibbs with each conditional draw replaced by a
 * p-invariant kernel, exact like SparseLDA, with more iterations to mix.
 *
 * Why not LightLDA's alias tables of q_w ∝ (n_wk + β) / (n_k + Vβ): such a
 * table, built at some earlier time and reused for O(1) draws, made the chain
 * settle 3.4% of log-likelihood above SparseLDA's on a planted corpus
 * (docs/LDA.md, "Exactness"). Evaluating its density with the current
 * counts instead of the ones it was built with is wrong, and a table that
 * counts the token at its old topic makes the proposal depend on where the
 * token's chain starts. Both are fixable, but a table of the other tokens
 * alone, built earlier, is still a function of their past topics, and
 * those, given their present topics, still say something about this
 * token's topic (it drove their moves): the kernel would depend on the
 * state through the history, an adaptive proposal, with no stationarity
 * guarantee. Drawing a token of the word reads the present only.
 *
 * Counts change only when the token's chain ends: the token is removed at
 * the start and added at its final topic, as in SparseLDA, so the counts,
 * the touched bits and the synchronisation (sampler.c) are the same for both
 * samplers. */
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "lda/lda.h"
#include "lda/mh.h"

#define ONE      (1ull << 32)
#define TOPIC(e) ((uint32_t)(e))
#define COUNT(e) ((uint32_t)((e) >> 32))

size_t lda_mh_room(size_t n)
{
    size_t cap = 1;
    while (cap < 2 * n) cap <<= 1;
    return cap;
}

void lda_mh_free(lda_sampler *s)
{
    free(s->woff), free(s->wtok), free(s->loff), free(s->lpacked);
    s->woff = s->loff = NULL, s->wtok = NULL, s->lpacked = NULL;
}

/* ---- a word's counts: hash table ---- */

static inline size_t home(uint32_t k, size_t mask)
{
    return (size_t)(((uint64_t)k * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

/* The slot of topic k, or the empty slot where it would go. */
static inline size_t find(const uint64_t *e, size_t mask, uint32_t k)
{
    size_t j = home(k, mask);
    while (e[j] && TOPIC(e[j]) != k) j = (j + 1) & mask;
    return j;
}

static inline uint32_t lookup(const uint64_t *e, size_t mask, uint32_t k)
{
    return COUNT(e[find(e, mask, k)]);
}

static inline void inc(uint64_t *e, size_t mask, uint32_t k)
{
    size_t j = find(e, mask, k);
    e[j] = (e[j] ? e[j] : k) + ONE;
}

/* Topic k's count less one (it is there); returns the new count. A count
 * that reaches zero leaves the table, and the entries after it in its probe
 * run move back so that every lookup still finds them. */
static inline uint32_t dec(uint64_t *e, size_t mask, uint32_t k)
{
    size_t j = find(e, mask, k);
    e[j] -= ONE;
    uint32_t c = COUNT(e[j]);
    if (c) return c;
    e[j] = 0;
    for (size_t i = (j + 1) & mask; e[i]; i = (i + 1) & mask)
        if (((i - home(TOPIC(e[i]), mask)) & mask) >= ((i - j) & mask)) {
            e[j] = e[i];
            e[i] = 0;
            j = i;
        }
    return 0;
}

void lda_mh_pack(lda_sampler *s, size_t w)
{
    size_t cap = s->off[w + 1] - s->off[w];
    uint64_t *e = s->packed + s->off[w];
    memset(e, 0, cap * sizeof *e);
    uint32_t k;
    int32_t c;
    for (size_t pos = 0; lda_rows_next(&s->rows, w, &pos, &k, &c);)
        if (c > 0) e[find(e, cap - 1, k)] = (uint64_t)c << 32 | k;
    s->dirty[w] = 0;
    memset(s->touched + w * s->kw, 0, s->kw * sizeof *s->touched);
}

int32_t lda_mh_count(const lda_sampler *s, size_t w, uint32_t k)
{
    return (int32_t)lookup(s->packed + s->off[w], s->off[w + 1] - s->off[w] - 1, k);
}

/* ---- the sampler's own tokens ---- */

int lda_mh_docs(lda_sampler *s, const lda_docs *d)
{
    const size_t V = s->nwords;
    if (d->ntokens > UINT32_MAX) return LOOM_EINVAL; /* tokens are listed as uint32 */
    lda_mh_free(s);
    s->woff = calloc(V + 1, sizeof *s->woff);
    s->loff = calloc(V + 1, sizeof *s->loff);
    s->wtok = malloc((d->ntokens ? d->ntokens : 1) * sizeof *s->wtok);
    if (!s->woff || !s->loff || !s->wtok) return LOOM_ENOMEM;
    /* The tokens of each word, in corpus order (a counting sort). */
    for (uint64_t t = 0; t < d->ntokens; t++) s->woff[d->word[t] + 1]++;
    for (size_t w = 0; w < V; w++) s->woff[w + 1] += s->woff[w];
    for (uint64_t t = 0; t < d->ntokens; t++) s->wtok[s->woff[d->word[t]]++] = (uint32_t)t;
    for (size_t w = V; w > 0; w--) s->woff[w] = s->woff[w - 1];
    s->woff[0] = 0;
    /* A word whose total count (which never changes) exceeds the sampler's
     * tokens of it has a table of their counts; the others read n_wk. */
    for (size_t w = 0; w < V; w++) {
        uint64_t m = s->woff[w + 1] - s->woff[w];
        uint64_t n = (uint64_t)lda_rows_sum(&s->rows, w);
        s->loff[w + 1] = s->loff[w] + (n == m ? 0 : lda_mh_room(m < s->p.topics ? m : s->p.topics));
    }
    s->lpacked = calloc(s->loff[V] ? s->loff[V] : 1, sizeof *s->lpacked);
    if (!s->lpacked) return LOOM_ENOMEM;
    for (uint64_t t = 0; t < d->ntokens; t++) {
        size_t w = d->word[t];
        if (s->loff[w + 1] > s->loff[w])
            inc(s->lpacked + s->loff[w], s->loff[w + 1] - s->loff[w] - 1, d->z[t]);
    }
    return 0;
}

/* ---- sampling ---- */

void lda_mh_sweep_doc(lda_sampler *s, lda_docs *d, size_t i, app_rng *rng, uint32_t wlo,
                      uint32_t whi)
{
    const double vb = (double)s->p.vocab * s->p.beta, alpha = s->p.alpha, beta = s->p.beta;
    const uint32_t K = s->p.topics;
    const size_t t0 = d->doc[i], t1 = d->doc[i + 1];
    const double nd = (double)(t1 - t0), dmass = nd + K * alpha;
    for (size_t t = t0; t < t1; t++) s->ndk[d->z[t]]++;
    for (size_t t = t0; t < t1; t++) {
        uint32_t w = d->word[t], old = d->z[t];
        if (w < wlo || w >= whi) continue; /* not this sweep's words */
        uint64_t *e = s->packed + s->off[w];
        size_t mask = s->off[w + 1] - s->off[w] - 1;
        /* l_wk: the word's own table, or n_wk itself. */
        uint64_t *le = e;
        size_t lmask = mask;
        if (s->loff[w + 1] > s->loff[w]) {
            le = s->lpacked + s->loff[w];
            lmask = s->loff[w + 1] - s->loff[w] - 1;
        }
        /* The token leaves: from here on the counts are without it. */
        uint32_t nwc = dec(e, mask, old), lwc = le == e ? nwc : dec(le, lmask, old);
        s->ndk[old]--;
        s->nk[old]--;
        const uint32_t *toks = s->wtok + s->woff[w];
        const double mw = (double)(s->woff[w + 1] - s->woff[w]), wmass = mw + K * beta;
        /* The chain's state c with n_wc, l_wc and p(c). */
        uint32_t c = old;
        double pc = (s->ndk[c] + alpha) * (nwc + beta) / (vb + (double)s->nk[c]);
        for (int step = 0; step < LDA_MH_STEPS; step++) {
            /* Document proposal: a token of the document (this one at c) or a uniform topic. */
            double u = app_rng_uniform(rng) * dmass;
            uint32_t k;
            if (u < nd) {
                size_t j = t0 + (size_t)u;
                if (j >= t1) j = t1 - 1;
                k = j == t ? c : d->z[j];
            } else {
                k = (uint32_t)((u - nd) / alpha);
                if (k >= K) k = K - 1;
            }
            if (k != c) {
                uint32_t nwk = lookup(e, mask, k);
                double pk = (s->ndk[k] + alpha) * (nwk + beta) / (vb + (double)s->nk[k]);
                if (app_rng_uniform(rng) * pc * (s->ndk[k] + alpha) < pk * (s->ndk[c] + alpha)) {
                    c = k, nwc = nwk, pc = pk;
                    lwc = le == e ? nwk : lookup(le, lmask, k);
                }
            }
            /* Word proposal: a token of the word (this one at c) or a uniform topic. */
            u = app_rng_uniform(rng) * wmass;
            if (u < mw) {
                size_t j = (size_t)u;
                if (j >= (size_t)mw) j = (size_t)mw - 1;
                k = toks[j] == t ? c : d->z[toks[j]];
            } else {
                k = (uint32_t)((u - mw) / beta);
                if (k >= K) k = K - 1;
            }
            if (k != c) {
                uint32_t nwk = lookup(e, mask, k), lwk = le == e ? nwk : lookup(le, lmask, k);
                double pk = (s->ndk[k] + alpha) * (nwk + beta) / (vb + (double)s->nk[k]);
                if (app_rng_uniform(rng) * pc * (lwk + beta) < pk * (lwc + beta))
                    c = k, nwc = nwk, lwc = lwk, pc = pk;
            }
        }
        inc(e, mask, c);
        if (le != e) inc(le, lmask, c);
        s->ndk[c]++;
        s->nk[c]++;
        d->z[t] = c;
        if (c != old) {
            uint64_t *bits = s->touched + (size_t)w * s->kw;
            bits[old / 64] |= 1ull << (old % 64);
            bits[c / 64] |= 1ull << (c % 64);
            s->dirty[w] = 1;
        }
    }
    for (size_t t = t0; t < t1; t++) s->ndk[d->z[t]] = 0;
}
