/* What sampler.c asks of the Metropolis-Hastings sampler (mh.c): the word
 * entries as hash tables, the alias tables' memory, and a document's sweep. */
#ifndef LOOM_APPS_LDA_MH_H
#define LOOM_APPS_LDA_MH_H

#include <stddef.h>
#include <stdint.h>

#include "lda/lda.h"

/* Slots of a word's hash table that holds at most n non-zero topics. */
size_t lda_mh_room(size_t n);
/* The per-topic arrays (K); 0 or LOOM_ENOMEM. */
int lda_mh_init(lda_sampler *s);
void lda_mh_free(lda_sampler *s);
/* After a load sized the words' slots (s->off): alias tables of as many
 * entries, all stale. 0 or LOOM_ENOMEM. */
int lda_mh_alloc(lda_sampler *s);
/* Word w's hash table from its row (s->rows). */
void lda_mh_pack(lda_sampler *s, size_t w);
/* Word w's count of topic k. */
int32_t lda_mh_count(const lda_sampler *s, size_t w, uint32_t k);
/* Sample the tokens of words [wlo, whi) of document i of d. */
void lda_mh_sweep_doc(lda_sampler *s, lda_docs *d, size_t i, app_rng *rng, uint32_t wlo,
                      uint32_t whi);

#endif
