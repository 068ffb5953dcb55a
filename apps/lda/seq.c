/* seq: the sequential reference of `loom train lda`.
 *
 * One process, no Loom, the same code: the same initial topics, the same
 * sweeps over the same documents in the same segments (--syncs), and after
 * every segment the same rebuild of the sampler from the counts, which a
 * one-worker job makes from the rows it pulls back after its clock. Under BSP
 * those rows are exactly the counts it pushed, so the job's topics, counts
 * and log-likelihoods must equal these bit for bit (tests/lda): any
 * difference is a bug in the data path or the consistency machinery.
 * With --threads T the worker's documents are cut into T lanes, each with
 * its own sampler (AD-LDA inside the process): a clock's sweeps all start
 * from the counts as the clock found them, and their changes are summed
 * into the shared counts before every lane reloads. */
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "lda/lda.h"

/* Lane t's sampler from the shared counts: the rows of its words and the
 * totals (and, for mh, its tokens by word). */
static int load_lane(lda_sampler *s, const lda_docs *d, const lda_model *m)
{
    const size_t K = m->p.topics;
    for (size_t w = 0; w < d->nwords; w++)
        if (lda_rows_copy(&s->rows, w, &m->counts, d->vocab[w], NULL)) return LOOM_ENOMEM;
    memcpy(s->totals, m->totals, K * sizeof *s->totals);
    int rc = lda_sampler_load(s);
    return rc ? rc : lda_sampler_docs(s, d);
}

/* The same after a clock, at a cost that follows the changes: the lane's
 * own changes are written back, and only the words whose counts another
 * lane changed are rebuilt (with one lane, none). reload: room for the
 * lane's words. */
static int reload_lane(lda_sampler *s, const lda_docs *d, const lda_model *m, int lanes,
                       uint32_t *reload)
{
    const size_t K = m->p.topics;
    size_t n = 0;
    if (lda_sampler_store(s)) return LOOM_ENOMEM;
    for (size_t w = 0; lanes > 1 && w < d->nwords; w++) {
        int changed;
        if (lda_rows_copy(&s->rows, w, &m->counts, d->vocab[w], &changed)) return LOOM_ENOMEM;
        if (changed) reload[n++] = (uint32_t)w;
    }
    memcpy(s->totals, m->totals, K * sizeof *s->totals);
    return lda_sampler_reload(s, reload, n);
}

int lda_train_sequential(const lda_train_opts *o, const loom_corpus *c, uint64_t vocab,
                         lda_report_fn report, void *arg, lda_model *out)
{
    const lda_params p = {o->topics, vocab, o->alpha, o->beta};
    const size_t K = o->topics;
    const int lanes = o->threads > 1 ? o->threads : 1;
    const lda_sampler_kind kind = lda_sampler_choose(o->sampler, o->topics);
    lda_docs *d = calloc((size_t)lanes, sizeof *d);
    lda_sampler *s = calloc((size_t)lanes, sizeof *s);
    *out = (lda_model){.p = p};
    int32_t *scratch = malloc(K * sizeof *scratch);
    uint32_t *reload = NULL;
    int64_t *tdelta = malloc(K * sizeof *tdelta);
    int rows_rc = lda_rows_init(&out->counts, o->topics, (size_t)vocab);
    out->totals = calloc(K, sizeof *out->totals);
    int rc = d && s && scratch && tdelta && !rows_rc && out->totals ? 0 : LOOM_ENOMEM;
    size_t most = 1;
    for (int t = 0; t < lanes && !rc; t++) {
        if ((rc = lda_docs_build_part(c, lanes, t, &d[t]))) break;
        if ((rc = lda_sampler_init_kind(&s[t], &p, d[t].nwords, kind))) break;
        if (d[t].nwords > most) most = d[t].nwords;
        lda_docs_init_topics(&d[t], o->topics, o->seed);
        if ((rc = lda_count(&d[t], &s[t].rows, s[t].totals))) break;
        uint32_t topic;
        int32_t n;
        for (size_t w = 0; w < d[t].nwords && !rc; w++)
            for (size_t pos = 0; !rc && lda_rows_next(&s[t].rows, w, &pos, &topic, &n);)
                rc = lda_rows_add(&out->counts, d[t].vocab[w], topic, n);
        for (size_t k = 0; k < K; k++) out->totals[k] += s[t].totals[k];
    }
    if (!rc && !(reload = malloc(most * sizeof *reload))) rc = LOOM_ENOMEM;
    for (int t = 0; t < lanes && !rc; t++) rc = load_lane(&s[t], &d[t], out);
    double sample_s = 0;
    for (int it = 0; it < o->iterations && !rc; it++) {
        double t0 = app_now_s();
        for (int sync = 0; sync < o->syncs && !rc; sync++) {
            /* Every lane samples from the counts as the clock found them ... */
            for (int t = 0; t < lanes; t++) {
                size_t lo, hi;
                lda_segment(d[t].ndocs, o->syncs, sync, &lo, &hi);
                lda_sweep(&s[t], &d[t], lo, hi, o->seed, it);
            }
            /* ... then their changes meet in the shared counts, which every
             * lane reloads (a one-worker job: push, clock, pull back). */
            for (int t = 0; t < lanes && !rc; t++) {
                size_t n;
                if ((rc = lda_sampler_changes(&s[t], &n, tdelta))) break;
                for (size_t i = 0; i < n && !rc; i++)
                    rc = lda_rows_add(&out->counts, d[t].vocab[s[t].chg_word[i]], s[t].chg_topic[i],
                                      s[t].chg_delta[i]);
                for (size_t k = 0; k < K; k++) out->totals[k] += tdelta[k];
            }
            for (int t = 0; t < lanes && !rc; t++)
                rc = reload_lane(&s[t], &d[t], out, lanes, reload);
        }
        sample_s += app_now_s() - t0;
        if (!rc && lda_eval_due(o, it)) {
            double docs = 0;
            for (int t = 0; t < lanes; t++) docs += lda_ll_docs(&p, &d[t], scratch);
            double words = lda_ll_words_rows(&p, &out->counts, 0);
            double ll = docs + words + lda_ll_topics(&p, out->totals);
            if (report) report(arg, it, ll, sample_s);
            sample_s = 0;
        }
    }
    if (!rc) {
        for (int t = 0; t < lanes; t++) out->tokens += d[t].ntokens;
    } else {
        lda_model_free(out);
    }
    for (int t = 0; t < lanes; t++) {
        if (s) lda_sampler_free(&s[t]);
        if (d) lda_docs_free(&d[t]);
    }
    free(s), free(d), free(scratch), free(tdelta), free(reload);
    return rc;
}
