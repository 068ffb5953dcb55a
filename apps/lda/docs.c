/* docs: a worker's share of a corpus as token arrays.
 *
 * The reader gives (word, count) pairs per document; Gibbs sampling needs one
 * topic per token, so every pair becomes `count` tokens of its word. Words are
 * renumbered into the share's own vocabulary (its distinct ids, ascending),
 * which indexes the worker's copy of the word-topic rows: a worker only reads
 * and writes the rows of words its documents contain.
 *
 * Random numbers come in one stream per (iteration, document), keyed by the
 * document's index in the whole file, so a document draws the same numbers
 * whichever worker holds it: a one-worker job and the sequential reference
 * draw identically by construction. */
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "lda/lda.h"

uint64_t lda_stream(int iteration, uint64_t doc)
{
    /* 2^40 documents per iteration is far more than any corpus has. */
    return ((uint64_t)iteration << 40) ^ doc;
}

/* Renumber the share's words: d->vocab gets their distinct ids ascending
 * (d->nwords of them) and *table, unless the ids are sparse, each id's
 * position + 1 (0: not in the share), so that a pair's local word is one
 * lookup. Ids are 32-bit, so the table costs 4 bytes per id up to the
 * largest; it is used where that is within a few times the pairs (one pass
 * to mark the ids, one to number them). Otherwise (a share of a much larger
 * vocabulary) the ids are sorted and each pair's is found by binary search,
 * which took 84 ms of a one-worker job's start on AP (302k pairs). */
static int renumber_words(const loom_corpus *c, lda_docs *d, uint32_t **table)
{
    *table = NULL;
    uint32_t top = 0;
    for (size_t k = 0; k < c->nnz; k++)
        if (c->word[k] > top) top = c->word[k];
    if ((uint64_t)top < 4 * (uint64_t)c->nnz + 65536) {
        uint32_t *t = calloc((size_t)top + 1, sizeof *t);
        if (!t) return LOOM_ENOMEM;
        for (size_t k = 0; k < c->nnz; k++) t[c->word[k]] = 1;
        size_t n = 0;
        for (uint64_t v = 0; v <= top; v++)
            if (t[v]) {
                d->vocab[n++] = v;
                t[v] = (uint32_t)n;
            }
        d->nwords = n;
        *table = t;
        return 0;
    }
    for (size_t k = 0; k < c->nnz; k++) d->vocab[k] = c->word[k];
    d->nwords = app_sort_unique(d->vocab, c->nnz);
    return 0;
}

int lda_docs_build(const loom_corpus *c, lda_docs *d)
{
    *d = (lda_docs){.ndocs = c->docs, .first_doc = c->first_doc, .ntokens = c->tokens};
    d->doc = malloc((c->docs + 1) * sizeof *d->doc);
    d->word = malloc((c->tokens ? c->tokens : 1) * sizeof *d->word);
    d->z = malloc((c->tokens ? c->tokens : 1) * sizeof *d->z);
    d->vocab = malloc((c->nnz ? c->nnz : 1) * sizeof *d->vocab);
    uint32_t *table = NULL;
    if (!d->doc || !d->word || !d->z || !d->vocab || renumber_words(c, d, &table)) {
        lda_docs_free(d);
        return LOOM_ENOMEM;
    }
    size_t t = 0;
    for (size_t i = 0; i < c->docs; i++) {
        d->doc[i] = t;
        for (size_t k = c->doc[i]; k < c->doc[i + 1]; k++) {
            uint32_t w = table ? table[c->word[k]] - 1
                               : (uint32_t)app_lower_bound(d->vocab, d->nwords, c->word[k]);
            for (uint32_t r = 0; r < c->count[k]; r++) d->word[t++] = w;
        }
    }
    free(table);
    d->doc[c->docs] = t;
    d->ntokens = t;
    return 0;
}

void lda_docs_free(lda_docs *d)
{
    free(d->doc);
    free(d->word);
    free(d->z);
    free(d->vocab);
    *d = (lda_docs){0};
}

void lda_docs_init_topics(lda_docs *d, uint32_t topics, uint64_t seed)
{
    for (size_t i = 0; i < d->ndocs; i++) {
        app_rng r;
        app_rng_seed(&r, seed, lda_stream(0, d->first_doc + i));
        for (size_t t = d->doc[i]; t < d->doc[i + 1]; t++) d->z[t] = app_rng_below(&r, topics);
    }
}

int lda_count(const lda_docs *d, lda_rows *rows, int64_t *totals)
{
    for (size_t t = 0; t < d->ntokens; t++) {
        if (lda_rows_add(rows, d->word[t], d->z[t], 1)) return LOOM_ENOMEM;
        totals[d->z[t]]++;
    }
    return 0;
}

int lda_eval_due(const lda_train_opts *o, int it)
{
    if (it + 1 == o->iterations) return 1;
    return o->eval_every > 0 && (it + 1) % o->eval_every == 0;
}

void lda_segment(size_t n, int syncs, int sync, size_t *lo, size_t *hi)
{
    *lo = n * (size_t)sync / (size_t)syncs;
    *hi = n * (size_t)(sync + 1) / (size_t)syncs;
}
