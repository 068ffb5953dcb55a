/* What sampler.c asks of the Metropolis-Hastings sampler (mh.c): the word
 * entries as hash tables, the sampler's own tokens, and a document's sweep. */
#ifndef LOOM_APPS_LDA_MH_H
#define LOOM_APPS_LDA_MH_H

#include <stddef.h>
#include <stdint.h>

#include "lda/lda.h"

/* Slots of a word's hash table that holds at most n non-zero topics. */
size_t lda_mh_room(size_t n);
void lda_mh_free(lda_sampler *s);
/* The sampler's documents d (after its first load): each word's tokens, and
 * their counts where d holds only some of the word's tokens. 0, LOOM_ENOMEM
 * or LOOM_EINVAL (over 2^32 tokens). */
int lda_mh_docs(lda_sampler *s, const lda_docs *d);
/* Word w's hash table from its row (s->rows). */
void lda_mh_pack(lda_sampler *s, size_t w);
/* Word w's count of topic k. */
int32_t lda_mh_count(const lda_sampler *s, size_t w, uint32_t k);
/* Sample the tokens of words [wlo, whi) of document i of d. */
void lda_mh_sweep_doc(lda_sampler *s, lda_docs *d, size_t i, app_rng *rng, uint32_t wlo,
                      uint32_t whi);

#endif
