/* --sampler mh (apps/lda/mh.c) is an exact chain: on a corpus of 8 tokens
 * and 3 topics, whose 3^8 topic assignments can all be enumerated, the
 * chain's long-run averages equal the posterior's expectations, computed
 * exactly from p(z | w) ∝ exp(log p(w, z)):
 *   - the log joint log p(w, z) itself, and
 *   - the probability that two tokens of the same word in different
 *     documents share a topic.
 * (The chain of LightLDA-style reused alias tables that mh.c had before,
 * whose proposals depended on the token's own topic, missed them by 49 and
 * 41 standard errors.)
 * The chain's error is judged against its own Monte Carlo error (batch
 * means: 50 batches of 4000 sweeps): within 5 standard errors. Twice: with
 * the sampler holding every token of every word (l_wk = n_wk), and with
 * fixed counts of "another worker" added to the rows and totals (the
 * sampler's own table of its tokens' counts, and a target that includes the
 * other worker's counts). SparseLDA runs the same check as a control. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "lda/lda.h"

enum { K = 3, V = 3, N = 8, DOCS = 3, BATCHES = 50, BATCH = 4000 };

/* 3 documents: (w0 x2, w1), (w0, w2 x2), (w1, w2); tokens 0 and 3 are both w0. */
static const uint32_t cword[] = {0, 1, 0, 2, 1, 2}, ccount[] = {2, 1, 1, 2, 1, 1};
static const size_t cdoc[] = {0, 2, 4, 6};
/* "Another worker's" counts of (word, topic), in the shared case. */
static const int32_t other[V][K] = {{3, 0, 1}, {0, 2, 0}, {1, 0, 0}};

/* log p(w, z) up to a constant, with the other worker's counts if shared. */
static double log_joint(const lda_params *p, const lda_docs *d, const uint32_t *z, int shared)
{
    int32_t ndk[DOCS][K] = {{0}}, nwk[V][K] = {{0}}, nk[K] = {0};
    for (size_t i = 0; i < DOCS; i++)
        for (size_t t = d->doc[i]; t < d->doc[i + 1]; t++) {
            ndk[i][z[t]]++;
            nwk[d->word[t]][z[t]]++;
            nk[z[t]]++;
        }
    double ll = 0;
    for (uint32_t k = 0; k < K; k++) {
        int32_t total = nk[k];
        for (size_t i = 0; i < DOCS; i++) ll += lgamma(ndk[i][k] + p->alpha);
        for (size_t w = 0; w < V; w++) {
            int32_t o = shared ? other[w][k] : 0;
            ll += lgamma(nwk[w][k] + o + p->beta);
            total += o;
        }
        ll -= lgamma(total + V * p->beta);
    }
    return ll;
}

/* The posterior's E[log p(w, z)] and P(z_0 = z_3), over all K^N assignments. */
static void exact(const lda_params *p, const lda_docs *d, int shared, double *ell, double *esame)
{
    uint32_t z[N];
    double lmax = -INFINITY, zsum = 0;
    *ell = *esame = 0;
    for (int pass = 0; pass < 2; pass++) {
        memset(z, 0, sizeof z);
        for (size_t j = 0; j < N;) {
            double ll = log_joint(p, d, z, shared);
            if (pass == 0 && ll > lmax) lmax = ll;
            if (pass == 1) {
                double wgt = exp(ll - lmax);
                zsum += wgt, *ell += wgt * ll, *esame += wgt * (z[0] == z[3]);
            }
            for (j = 0; j < N && ++z[j] == K; j++) z[j] = 0; /* the next assignment */
        }
    }
    *ell /= zsum, *esame /= zsum;
}

static void check_exact(lda_sampler_kind kind, int shared, double alpha, double beta)
{
    loom_corpus c = {.docs = DOCS, .vocab = V, .tokens = N, .nnz = 6, .format = LOOM_BOW_LDAC};
    c.doc = (size_t *)cdoc, c.word = (uint32_t *)cword, c.count = (uint32_t *)ccount;
    lda_params p = {K, V, alpha, beta};
    lda_docs d;
    lda_sampler s;
    assert_int_equal(lda_docs_build(&c, &d), 0);
    assert_int_equal(d.ntokens, N);
    assert_int_equal(d.word[0], 0);
    assert_int_equal(d.word[3], 0);
    double ell, esame;
    exact(&p, &d, shared, &ell, &esame);
    /* The chain, from the initial topics, with a store and reload after
     * every sweep as a one-worker job makes them. */
    assert_int_equal(lda_sampler_init_kind(&s, &p, d.nwords, kind), 0);
    lda_docs_init_topics(&d, K, 3);
    assert_int_equal(lda_count(&d, &s.rows, s.totals), 0);
    for (size_t w = 0; shared && w < V; w++)
        for (uint32_t k = 0; k < K; k++) {
            assert_int_equal(lda_rows_add(&s.rows, w, k, other[w][k]), 0);
            s.totals[k] += other[w][k];
        }
    assert_int_equal(lda_sampler_load(&s), 0);
    assert_int_equal(lda_sampler_docs(&s, &d), 0);
    double bll[BATCHES] = {0}, bsame[BATCHES] = {0};
    for (int b = 0; b < BATCHES; b++)
        for (int it = 0; it < BATCH; it++) {
            lda_sweep(&s, &d, 0, DOCS, 17, b * BATCH + it);
            assert_int_equal(lda_sampler_store(&s), 0);
            assert_int_equal(lda_sampler_reload(&s, NULL, 0), 0);
            bll[b] += log_joint(&p, &d, d.z, shared) / BATCH;
            bsame[b] += (double)(d.z[0] == d.z[3]) / BATCH;
        }
    double mll = 0, msame = 0, vll = 0, vsame = 0;
    for (int b = 0; b < BATCHES; b++) mll += bll[b] / BATCHES, msame += bsame[b] / BATCHES;
    for (int b = 0; b < BATCHES; b++) {
        vll += (bll[b] - mll) * (bll[b] - mll) / (BATCHES - 1);
        vsame += (bsame[b] - msame) * (bsame[b] - msame) / (BATCHES - 1);
    }
    double sell = sqrt(vll / BATCHES), sesame = sqrt(vsame / BATCHES);
    printf("%s%s alpha %g beta %g: E[log p] %.4f, chain %.4f (%+.1f s.e.); "
           "P(same) %.4f, chain %.4f (%+.1f s.e.)\n",
           kind == LDA_SAMPLER_MH ? "mh" : "sparse", shared ? " shared" : "", alpha, beta, ell, mll,
           (mll - ell) / sell, esame, msame, (msame - esame) / sesame);
    assert_true(fabs(mll - ell) < 5 * sell);
    assert_true(fabs(msame - esame) < 5 * sesame);
    lda_sampler_free(&s);
    lda_docs_free(&d);
}

static void test_mh_exact(void **state)
{
    (void)state;
    check_exact(LDA_SAMPLER_MH, 0, 0.1, 0.1);
    check_exact(LDA_SAMPLER_MH, 1, 0.1, 0.1);
    check_exact(LDA_SAMPLER_MH, 0, 0.5, 0.01);
}

static void test_sparse_exact(void **state)
{
    (void)state;
    check_exact(LDA_SAMPLER_SPARSE, 0, 0.1, 0.1);
    check_exact(LDA_SAMPLER_SPARSE, 1, 0.1, 0.1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mh_exact),
        cmocka_unit_test(test_sparse_exact),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
