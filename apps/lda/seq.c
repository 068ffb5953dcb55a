/* seq: the sequential reference of `loom train lda`.
 *
 * One process, no Loom, the same code: the same initial topics, the same
 * sweeps over the same documents in the same segments (--syncs), and after
 * every segment the same rebuild of the sampler from the counts, which a
 * one-worker job makes from the rows it pulls back after its clock. Under BSP
 * those rows are exactly the counts it pushed, so the job's topics, counts
 * and log-likelihoods must equal these bit for bit (tests/lda): any
 * difference is a bug in the data path or the consistency machinery.
 * With --threads T the same T lanes over one sampler, in the same steps
 * (lanes.c), one lane after the other. */
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "lda/lda.h"

int lda_train_sequential(const lda_train_opts *o, const loom_corpus *c, uint64_t vocab,
                         lda_report_fn report, void *arg, lda_model *out)
{
    const lda_params p = {o->topics, vocab, o->alpha, o->beta};
    const size_t K = o->topics;
    const int lanes = o->threads > 1 ? o->threads : 1;
    lda_docs d = {0};
    lda_sampler s = {0};
    lda_lanes ls = {0};
    *out = (lda_model){.p = p};
    int32_t *scratch = malloc(K * sizeof *scratch);
    int64_t *tdelta = malloc(K * sizeof *tdelta);
    int rows_rc = lda_rows_init(&out->counts, o->topics, (size_t)vocab);
    out->totals = calloc(K, sizeof *out->totals);
    int rc = scratch && tdelta && !rows_rc && out->totals ? 0 : LOOM_ENOMEM;
    if (!rc) rc = lda_docs_build(c, &d);
    if (!rc)
        rc = lda_sampler_init_kind(&s, &p, d.nwords, lda_sampler_choose(o->sampler, o->topics));
    if (!rc) {
        lda_docs_init_topics(&d, o->topics, o->seed);
        rc = lda_count(&d, &s.rows, s.totals);
    }
    uint32_t topic;
    int32_t n;
    for (size_t w = 0; w < d.nwords && !rc; w++)
        for (size_t pos = 0; !rc && lda_rows_next(&s.rows, w, &pos, &topic, &n);)
            rc = lda_rows_add(&out->counts, d.vocab[w], topic, n);
    if (!rc) {
        memcpy(out->totals, s.totals, K * sizeof *out->totals);
        rc = lda_sampler_load(&s);
    }
    if (!rc) rc = lda_sampler_docs(&s, &d);
    if (!rc) rc = lda_lanes_init(&ls, &s, &d, lanes);
    double sample_s = 0;
    for (int it = 0; it < o->iterations && !rc; it++) {
        double t0 = app_now_s();
        for (int sync = 0; sync < o->syncs && !rc; sync++) {
            lda_lanes_run(&ls, &s, &d, o->syncs, sync, o->seed, it);
            /* The changes meet the counts, and the sampler goes on from
             * them (a one-worker job: push, clock, pull back). */
            size_t m;
            if ((rc = lda_sampler_changes(&s, &m, tdelta))) break;
            for (size_t i = 0; i < m && !rc; i++)
                rc = lda_rows_add(&out->counts, d.vocab[s.chg_word[i]], s.chg_topic[i],
                                  s.chg_delta[i]);
            for (size_t k = 0; k < K; k++) out->totals[k] += tdelta[k];
            if (!rc) rc = lda_sampler_store(&s);
            if (!rc) rc = lda_sampler_reload(&s, NULL, 0);
        }
        sample_s += app_now_s() - t0;
        if (!rc && lda_eval_due(o, it)) {
            double docs = lda_ll_docs(&p, &d, scratch);
            double words = lda_ll_words_rows(&p, &out->counts, 0);
            double ll = docs + words + lda_ll_topics(&p, out->totals);
            if (report) report(arg, it, ll, sample_s);
            sample_s = 0;
        }
    }
    if (!rc)
        out->tokens = d.ntokens;
    else
        lda_model_free(out);
    lda_lanes_free(&ls);
    lda_sampler_free(&s);
    lda_docs_free(&d);
    free(scratch), free(tdelta);
    return rc;
}
