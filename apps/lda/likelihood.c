/* likelihood: the collapsed joint log-likelihood log p(w, z) of LDA, the
 * standard progress measure of collapsed Gibbs samplers (Griffiths & Steyvers
 * 2004; Mallet's modelLogLikelihood):
 *
 *   log p(w, z) = K [lnΓ(Vβ) − V lnΓ(β)] + Σ_k [Σ_w lnΓ(n_wk + β) − lnΓ(n_k + Vβ)]
 *               + Σ_d [lnΓ(Kα) − K lnΓ(α) + Σ_k lnΓ(n_dk + α) − lnΓ(n_d + Kα)]
 *
 * Regrouped so that every zero count contributes nothing (lnΓ(0 + β) − lnΓ(β)
 * = 0), which lets a worker add up only the rows and documents it has: the
 * word part of the rows it is given, the document part of its documents.
 * lgamma is the C library's; its results are deterministic on one machine,
 * which the bitwise comparison with the sequential reference relies on. */
#include <math.h>
#include <string.h>

#include "lda/lda.h"

double lda_ll_docs(const lda_params *p, const lda_docs *d, int32_t *scratch)
{
    const uint32_t K = p->topics;
    const double ka = K * p->alpha, lg_ka = lgamma(ka), lg_a = lgamma(p->alpha);
    double sum = 0;
    memset(scratch, 0, K * sizeof *scratch);
    for (size_t i = 0; i < d->ndocs; i++) {
        size_t t0 = d->doc[i], t1 = d->doc[i + 1];
        for (size_t t = t0; t < t1; t++) scratch[d->z[t]]++;
        double part = lg_ka - lgamma((double)(t1 - t0) + ka);
        for (size_t t = t0; t < t1; t++) {
            int32_t n = scratch[d->z[t]];
            if (!n) continue; /* this topic was counted already */
            part += lgamma(n + p->alpha) - lg_a;
            scratch[d->z[t]] = 0;
        }
        sum += part;
    }
    return sum;
}

double lda_ll_words(const lda_params *p, const int32_t *rows, size_t nrows)
{
    return lda_ll_words_add(p, rows, nrows, 0);
}

double lda_ll_words_add(const lda_params *p, const int32_t *rows, size_t nrows, double sum)
{
    const double lg_b = lgamma(p->beta);
    for (size_t i = 0; i < nrows * p->topics; i++)
        if (rows[i]) sum += lgamma(rows[i] + p->beta) - lg_b;
    return sum;
}

double lda_ll_words_rows(const lda_params *p, const lda_rows *rows, double sum)
{
    const double lg_b = lgamma(p->beta);
    uint32_t k;
    int32_t c;
    for (size_t w = 0; w < rows->n; w++)
        for (size_t pos = 0; lda_rows_next(rows, w, &pos, &k, &c);)
            sum += lgamma(c + p->beta) - lg_b;
    return sum;
}

double lda_ll_topics(const lda_params *p, const int64_t *totals)
{
    const double vb = (double)p->vocab * p->beta, lg_vb = lgamma(vb);
    double sum = 0;
    for (uint32_t k = 0; k < p->topics; k++) sum += lg_vb - lgamma((double)totals[k] + vb);
    return sum;
}
