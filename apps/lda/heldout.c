/* heldout: held-out perplexity by document completion (Wallach, Murray,
 * Salakhutdinov & Mimno, "Evaluation methods for topic models", ICML 2009).
 *
 * A test document's tokens are split in two halves by position: the even
 * positions (0, 2, 4, ...) estimate its topic mix, the odd ones are scored.
 * Tokens come in the file's order of (word, count) pairs, so alternating
 * positions puts about half of each repeated word in each half instead of
 * giving the first half the small word ids.
 *
 * With the word-topic counts held fixed, φ_wk = (n_wk + β) / (n_k + Vβ), a
 * few Gibbs sweeps over the estimation half sample its topics with
 *     p(z = k) ∝ (α + n_dk) φ_wk
 * (the plain O(K) rule: SparseLDA's buckets pay off when counts change with
 * every token, and here φ does not). θ_dk = (n_dk + α) / (n + Kα) is averaged
 * over the second half of the sweeps, and each scored token adds
 * log Σ_k θ_dk φ_wk. Perplexity = exp(−Σ log p / scored tokens).
 *
 * Document i of the file samples from its own stream (seed, test stream of
 * the iteration and i), like training documents, so the numbers do not depend
 * on how the test file is split across workers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "lda/lda.h"

/* Training streams are lda_stream(iteration, doc), iteration < 2^23; the top
 * bit keeps the held-out streams apart from them. */
static uint64_t test_stream(int iteration, uint64_t doc)
{
    return lda_stream(iteration + 1, doc) ^ (1ull << 63);
}

int lda_heldout_build(const loom_corpus *c, uint64_t vocab, lda_heldout *h)
{
    *h = (lda_heldout){0};
    if (lda_docs_build(c, &h->d)) return LOOM_ENOMEM;
    lda_docs *d = &h->d;
    /* The share's words are ascending: those outside the vocabulary are the
     * last local indices. */
    size_t keep = app_lower_bound(d->vocab, d->nwords, vocab), t = 0;
    for (size_t i = 0; i < d->ndocs; i++) {
        size_t t0 = d->doc[i], t1 = d->doc[i + 1];
        d->doc[i] = t;
        for (size_t s = t0; s < t1; s++)
            if (d->word[s] < keep) d->word[t++] = d->word[s];
        size_t n = t - d->doc[i];
        h->scored += n / 2;
    }
    d->doc[d->ndocs] = t;
    h->skipped = d->ntokens - t;
    d->ntokens = t;
    d->nwords = keep;
    return 0;
}

void lda_heldout_free(lda_heldout *h)
{
    lda_docs_free(&h->d);
    *h = (lda_heldout){0};
}

double lda_heldout_ll(const lda_params *p, lda_heldout *h, const int32_t *rows,
                      const int64_t *totals, uint64_t seed, int iteration)
{
    const size_t K = p->topics;
    const double vb = (double)p->vocab * p->beta, ka = (double)K * p->alpha;
    lda_docs *d = &h->d;
    double *phi = malloc((d->nwords ? d->nwords : 1) * K * sizeof *phi);
    double *cum = malloc(K * sizeof *cum), *theta = malloc(K * sizeof *theta);
    int32_t *ndk = malloc(K * sizeof *ndk);
    if (!phi || !cum || !theta || !ndk) {
        free(phi), free(cum), free(theta), free(ndk);
        return NAN;
    }
    for (size_t w = 0; w < d->nwords; w++)
        for (size_t k = 0; k < K; k++)
            phi[w * K + k] = (rows[w * K + k] + p->beta) / ((double)totals[k] + vb);
    double ll = 0;
    for (size_t i = 0; i < d->ndocs; i++) {
        size_t t0 = d->doc[i], t1 = d->doc[i + 1], nobs = (t1 - t0 + 1) / 2;
        if (t1 - t0 < 2) continue; /* nothing to score */
        app_rng r;
        app_rng_seed(&r, seed, test_stream(iteration, d->first_doc + i));
        memset(ndk, 0, K * sizeof *ndk);
        memset(theta, 0, K * sizeof *theta);
        for (size_t t = t0; t < t1; t += 2) ndk[d->z[t] = app_rng_below(&r, (uint32_t)K)]++;
        for (int sweep = 0; sweep < LDA_HELDOUT_SWEEPS; sweep++) {
            for (size_t t = t0; t < t1; t += 2) {
                const double *f = phi + (size_t)d->word[t] * K;
                ndk[d->z[t]]--;
                double sum = 0;
                for (size_t k = 0; k < K; k++) cum[k] = sum += (p->alpha + ndk[k]) * f[k];
                double u = app_rng_uniform(&r) * sum;
                size_t k = 0;
                while (k + 1 < K && cum[k] <= u) k++;
                ndk[d->z[t] = (uint32_t)k]++;
            }
            if (sweep >= LDA_HELDOUT_SWEEPS / 2)
                for (size_t k = 0; k < K; k++) theta[k] += (ndk[k] + p->alpha) / (nobs + ka);
        }
        const double avg = LDA_HELDOUT_SWEEPS - LDA_HELDOUT_SWEEPS / 2;
        for (size_t t = t0 + 1; t < t1; t += 2) {
            const double *f = phi + (size_t)d->word[t] * K;
            double pw = 0;
            for (size_t k = 0; k < K; k++) pw += theta[k] / avg * f[k];
            /* pw > 0: every phi and theta term is positive (smoothed by beta, alpha). */
            // cppcheck-suppress invalidFunctionArg
            ll += log(pw);
        }
    }
    free(phi), free(cum), free(theta), free(ndk);
    return ll;
}
