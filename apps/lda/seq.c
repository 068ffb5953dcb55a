/* seq: the sequential reference of `loom train lda`.
 *
 * One process, no Loom, the same code: the same initial topics, the same
 * sweeps over the same documents in the same segments (--syncs), and after
 * every segment the same rebuild of the sampler from the counts, which a
 * one-worker job makes from the rows it pulls back after its clock. Under BSP
 * those rows are exactly the counts it pushed, so the job's topics, counts
 * and log-likelihoods must equal these bit for bit (tests/lda): any
 * difference is a bug in the data path or the consistency machinery. */
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "lda/lda.h"

int lda_train_sequential(const lda_train_opts *o, const loom_corpus *c, uint64_t vocab,
                         lda_report_fn report, void *arg, lda_model *out)
{
    const lda_params p = {o->topics, vocab, o->alpha, o->beta};
    const size_t K = o->topics;
    lda_docs d;
    lda_sampler s;
    *out = (lda_model){.p = p};
    if (lda_docs_build(c, &d)) return LOOM_ENOMEM;
    int rc = lda_sampler_init(&s, &p, d.nwords);
    if (rc) {
        lda_docs_free(&d);
        return rc;
    }
    int32_t *scratch = malloc(K * sizeof *scratch);
    out->counts = calloc(vocab > 0 ? vocab * K : 1, sizeof *out->counts);
    out->totals = calloc(K, sizeof *out->totals);
    if (!scratch || !out->counts || !out->totals) rc = LOOM_ENOMEM;
    if (!rc) {
        lda_docs_init_topics(&d, o->topics, o->seed);
        lda_count(&d, o->topics, s.rows, s.totals);
        rc = lda_sampler_load(&s);
    }
    double sample_s = 0;
    for (int it = 0; it < o->iterations && !rc; it++) {
        double t0 = app_now_s();
        for (int sync = 0; sync < o->syncs && !rc; sync++) {
            size_t lo, hi;
            lda_segment(d.ndocs, o->syncs, sync, &lo, &hi);
            lda_sweep(&s, &d, lo, hi, o->seed, it);
            lda_sampler_store(&s);
            rc = lda_sampler_load(&s);
        }
        sample_s += app_now_s() - t0;
        if (!rc && lda_eval_due(o, it)) {
            double docs = lda_ll_docs(&p, &d, scratch), words = lda_ll_words(&p, s.rows, d.nwords);
            double ll = docs + words + lda_ll_topics(&p, s.totals);
            if (report) report(arg, it, ll, sample_s);
            sample_s = 0;
        }
    }
    if (!rc) {
        for (size_t w = 0; w < d.nwords; w++)
            memcpy(out->counts + d.vocab[w] * K, s.rows + w * K, K * sizeof *out->counts);
        memcpy(out->totals, s.totals, K * sizeof *out->totals);
        out->tokens = d.ntokens;
    } else {
        lda_model_free(out);
    }
    free(scratch);
    lda_sampler_free(&s);
    lda_docs_free(&d);
    return rc;
}
