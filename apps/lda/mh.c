/* mh: Metropolis-Hastings sampling of topics in O(1) a token, for many
 * topics (LightLDA: Yuan et al., WWW 2015), --sampler mh.
 *
 * SparseLDA (sampler.c) draws from the exact conditional
 *     p(k) ∝ (α + n_dk)(β + n_wk) / (Vβ + n_k)
 * (counts without the token) at O(K_d + K_w) a token, plus an O(K_d)
 * setup per document; with K = 100,000 topics a frequent word has
 * thousands of non-zero topics, and that walk dominates. Here a token
 * instead runs a short Metropolis-Hastings chain aimed at the law
 * p, alternating two cheap proposals (LightLDA's cycle proposal):
 *
 *   document proposal q_d(k) ∝ n_dk + α, with the token counted at its old
 *     topic s: with probability n_d / (n_d + Kα) the topic of a uniformly
 *     chosen token of the document (their topics are the document's
 *     counts, so no table is needed), otherwise a uniform topic.
 *   word proposal q_w(k) ∝ (n_wk + β) / (n_k + Vβ): a mixture of the word's
 *     own alias table over its non-zero topics (weights n_wk / (n_k + Vβ))
 *     and one dense alias table over all topics (β / (n_k + Vβ)), each a draw
 *     in O(1) (Walker's alias method, Vose's construction).
 *
 * A proposal t from the current state c is accepted with probability
 * min(1, p(t) q(c) / (p(c) q(t))), one hash look-up of n_wt per proposal:
 * each word's counts are an open-addressing hash table (linear probing, at
 * most half full, deletion by backward shift), so n_wk is O(1) where
 * SparseLDA's sorted list needs a walk. The document proposal's q is exact.
 * The alias tables are built from the counts when a word is first met after
 * a load (the dense one at the first document after it) and then go stale
 * as sampling moves counts; as in LightLDA the acceptance evaluates q_w with
 * the current counts, which makes the chain's law approximate while a table
 * is stale (and a reused table, built while the token sat at its old
 * topic, makes the proposal depend on where the chain starts: a bias of a
 * few percent of log-likelihood on small corpora, docs/LDA.md "Known
 * bias"). A word's table is therefore rebuilt after a quarter as many of its
 * tokens as it has entries: a rebuild costs O(slots), at most 4 entries'
 * worth, so about 16 steps a token amortised, O(1); on AP with K = 1000 this
 * brought the log-likelihood after 10 iterations from 17% to 10% below
 * SparseLDA's (rebuilding at loads only, once an iteration with one clock)
 * where rebuilding at every token reaches 9.5%. The dense table, O(K), is
 * rebuilt at loads only: the topic totals move slowly.
 *
 * Counts change only when the chain ends: the token is removed at the start
 * and added at its final topic, as in SparseLDA, so the counts, the touched
 * bits and the synchronisation (sampler.c) are the same for both samplers. */
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

int lda_mh_init(lda_sampler *s)
{
    size_t K = s->p.topics ? s->p.topics : 1;
    s->dprob = malloc(K * sizeof *s->dprob);
    s->dalias = malloc(K * sizeof *s->dalias);
    s->bweight = malloc(K * sizeof *s->bweight);
    s->bscaled = malloc(K * sizeof *s->bscaled);
    s->bsmall = malloc(K * sizeof *s->bsmall);
    s->blarge = malloc(K * sizeof *s->blarge);
    size_t n = s->nwords ? s->nwords : 1;
    s->agen = calloc(n, sizeof *s->agen);
    s->aleft = calloc(n, sizeof *s->aleft);
    s->alen = calloc(n, sizeof *s->alen);
    s->amass = calloc(n, sizeof *s->amass);
    return s->dprob && s->dalias && s->bweight && s->bscaled && s->bsmall && s->blarge && s->agen &&
                   s->alen && s->amass
               ? 0
               : LOOM_ENOMEM;
}

void lda_mh_free(lda_sampler *s)
{
    free(s->dprob), free(s->dalias), free(s->bweight), free(s->bscaled), free(s->bsmall);
    free(s->blarge), free(s->agen), free(s->aleft), free(s->alen), free(s->amass), free(s->aprob);
    free(s->atopic), free(s->aalias);
}

int lda_mh_alloc(lda_sampler *s)
{
    size_t n = s->off[s->nwords] ? s->off[s->nwords] : 1;
    free(s->aprob), free(s->atopic), free(s->aalias);
    s->aprob = malloc(n * sizeof *s->aprob);
    s->atopic = malloc(n * sizeof *s->atopic);
    s->aalias = malloc(n * sizeof *s->aalias);
    memset(s->agen, 0, (s->nwords ? s->nwords : 1) * sizeof *s->agen);
    return s->aprob && s->atopic && s->aalias ? 0 : LOOM_ENOMEM;
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

/* ---- alias tables ---- */

/* Vose's alias table of weights s->bweight[0, n) (sum mass > 0): entry j
 * keeps itself with probability prob[j], else gives alias[j]; topic maps an
 * entry to its topic (NULL: the entry is the topic). */
static void build_alias(lda_sampler *s, uint32_t n, double mass, double *prob, uint32_t *alias,
                        const uint32_t *topic)
{
    uint32_t ns = 0, nl = 0;
    double *sc = s->bscaled;
    for (uint32_t j = 0; j < n; j++) {
        sc[j] = s->bweight[j] * n / mass;
        if (sc[j] < 1)
            s->bsmall[ns++] = j;
        else
            s->blarge[nl++] = j;
    }
    while (ns && nl) {
        uint32_t a = s->bsmall[--ns], b = s->blarge[nl - 1];
        prob[a] = sc[a];
        alias[a] = topic ? topic[b] : b;
        sc[b] -= 1 - sc[a];
        if (sc[b] < 1) s->bsmall[ns++] = s->blarge[--nl];
    }
    /* What is left is 1 up to rounding. */
    while (nl) prob[s->blarge[--nl]] = 1;
    while (ns) prob[s->bsmall[--ns]] = 1;
}

/* An entry of a table of n drawn with x uniform in [0, n). */
static inline uint32_t draw_alias(const double *prob, const uint32_t *alias, const uint32_t *topic,
                                  uint32_t n, double x)
{
    uint32_t j = (uint32_t)x;
    if (j >= n) j = n - 1;
    if (x - j < prob[j]) return topic ? topic[j] : j;
    return alias[j];
}

static void build_dense(lda_sampler *s, double vb)
{
    uint32_t K = s->p.topics;
    double mass = 0;
    for (uint32_t k = 0; k < K; k++) mass += s->bweight[k] = s->p.beta / (vb + (double)s->nk[k]);
    s->dmass = mass;
    build_alias(s, K, mass, s->dprob, s->dalias, NULL);
    s->dgen = s->gen;
}

/* Word w's table over its non-zero topics, with weights n_wk / (n_k + Vβ). */
static void build_word(lda_sampler *s, size_t w, double vb)
{
    const uint64_t *e = s->packed + s->off[w];
    size_t cap = s->off[w + 1] - s->off[w], base = s->off[w];
    uint32_t n = 0;
    double mass = 0;
    for (size_t j = 0; j < cap; j++) {
        if (!e[j]) continue;
        uint32_t k = TOPIC(e[j]);
        s->atopic[base + n] = k;
        mass += s->bweight[n++] = COUNT(e[j]) / (vb + (double)s->nk[k]);
    }
    if (n) build_alias(s, n, mass, s->aprob + base, s->aalias + base, s->atopic + base);
    s->alen[w] = n;
    s->amass[w] = mass;
    s->agen[w] = s->gen;
    s->aleft[w] = n / 4;
}

/* ---- sampling ---- */

void lda_mh_sweep_doc(lda_sampler *s, lda_docs *d, size_t i, app_rng *rng, uint32_t wlo,
                      uint32_t whi)
{
    const double vb = (double)s->p.vocab * s->p.beta, alpha = s->p.alpha, beta = s->p.beta;
    const uint32_t K = s->p.topics;
    const size_t t0 = d->doc[i], t1 = d->doc[i + 1];
    const double nd = (double)(t1 - t0), dmass = nd + K * alpha;
    if (s->dgen != s->gen) build_dense(s, vb);
    for (size_t t = t0; t < t1; t++) s->ndk[d->z[t]]++;
    for (size_t t = t0; t < t1; t++) {
        uint32_t w = d->word[t], old = d->z[t];
        if (w < wlo || w >= whi) continue; /* not this sweep's words */
        uint64_t *e = s->packed + s->off[w];
        size_t mask = s->off[w + 1] - s->off[w] - 1;
        /* The token leaves: from here on the counts are without it. */
        uint32_t nw_old = dec(e, mask, old);
        s->ndk[old]--;
        s->nk[old]--;
        if (s->agen[w] != s->gen || s->aleft[w]-- == 0) build_word(s, w, vb);
        const double amass = s->amass[w], wmass = amass + s->dmass;
        const size_t base = s->off[w];
        /* The chain's state c with its n_wc and p(c). */
        uint32_t c = old, nwc = nw_old;
        double pc = (s->ndk[c] + alpha) * (nwc + beta) / (vb + (double)s->nk[c]);
        for (int step = 0; step < LDA_MH_STEPS; step++) {
            /* Document proposal: q_d(k) = n_dk + [k = old] + α. */
            double u = app_rng_uniform(rng) * dmass;
            uint32_t k = u < nd ? d->z[t0 + (size_t)u] : (uint32_t)((u - nd) / alpha);
            if (k >= K) k = K - 1;
            if (k != c) {
                uint32_t nwk = lookup(e, mask, k);
                double pk = (s->ndk[k] + alpha) * (nwk + beta) / (vb + (double)s->nk[k]);
                double qk = s->ndk[k] + (k == old) + alpha, qc = s->ndk[c] + (c == old) + alpha;
                if (app_rng_uniform(rng) * pc * qk < pk * qc) c = k, nwc = nwk, pc = pk;
            }
            /* Word proposal: q_w(k) ∝ (n_wk + β) / (n_k + Vβ), counted with the token at old. */
            u = app_rng_uniform(rng) * wmass;
            if (u < amass)
                k = draw_alias(s->aprob + base, s->aalias + base, s->atopic + base, s->alen[w],
                               u / amass * s->alen[w]);
            else
                k = draw_alias(s->dprob, s->dalias, NULL, K, (u - amass) / s->dmass * K);
            if (k != c) {
                uint32_t nwk = lookup(e, mask, k);
                double pk = (s->ndk[k] + alpha) * (nwk + beta) / (vb + (double)s->nk[k]);
                double qk = (nwk + (k == old) + beta) / (vb + (double)s->nk[k] + (k == old));
                double qc = (nwc + (c == old) + beta) / (vb + (double)s->nk[c] + (c == old));
                if (app_rng_uniform(rng) * pc * qk < pk * qc) c = k, nwc = nwk, pc = pk;
            }
        }
        inc(e, mask, c);
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
