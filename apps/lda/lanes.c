/* lanes: --threads T compute threads sampling one copy of a worker's model
 * without a lock (a 2D schedule inside the process, as STRADS and Orion
 * schedule LDA across machines; kim-thesis-strads.txt, wei-thesis-bosen-orion.txt).
 *
 * The worker's documents are cut into T lanes and its local words into T
 * blocks. A clock's sweep is T steps; in step j lane t samples, in each of
 * its documents of the clock, the tokens whose words lie in block
 * (t + j) mod T. In a step the lanes hold different blocks, so a word's
 * entries, changed-count bits and tokens' topics are written by one lane
 * at a time, and a document's counts only by its lane: the threads share
 * the sampler's word entries (one copy per process, whatever T) and write
 * them without a lock. After T steps every token was sampled once.
 *
 * Only the topic totals are written by every lane. Each lane samples with
 * its own copy, taken at the step's start, and after the step thread 0 adds
 * the lanes' changes to the sampler's totals in lane order (what the
 * rotation schedule does across workers with the servers' totals): a token
 * misses at most the other lanes' moves of the current step. The result is
 * a fixed computation for a given T, whatever the threads' timing, and the
 * sequential reference (seq.c) runs the same steps one lane after the other.
 *
 * Blocks and lanes are cut at about equal numbers of tokens, so that a step's
 * cells are about N / T^2 tokens each (a step waits for its slowest lane). A
 * document is swept T times a clock, once per block: its O(n_d) set-up is
 * paid T times, its tokens once. */
#include <stdlib.h>

#include <loom/loom.h>

#include "lda/lda.h"

/* Cut n items of weights given by cum (cum[i]: the weight of items before i,
 * cum[n] the total) into parts ranges of about equal weight: cut[0] = 0,
 * cut[parts] = n, ascending. */
static void cut_even(const uint64_t *cum, size_t n, int parts, size_t *cut)
{
    size_t i = 0;
    cut[0] = 0;
    for (int p = 1; p < parts; p++) {
        uint64_t goal = (uint64_t)((unsigned __int128)cum[n] * (unsigned)p / (unsigned)parts);
        while (i < n && cum[i] < goal) i++;
        cut[p] = i;
    }
    cut[parts] = n;
}

int lda_lanes_init(lda_lanes *ls, const lda_sampler *s, const lda_docs *d, int lanes)
{
    *ls = (lda_lanes){.n = lanes};
    size_t T = (size_t)lanes, nw = d->nwords;
    ls->doc = malloc((T + 1) * sizeof *ls->doc);
    ls->word = malloc((T + 1) * sizeof *ls->word);
    ls->lane = calloc(T, sizeof *ls->lane);
    ls->rng = malloc((d->ndocs ? d->ndocs : 1) * sizeof *ls->rng);
    uint64_t *cum = calloc((nw > d->ndocs ? nw : d->ndocs) + 1, sizeof *cum);
    int rc = ls->doc && ls->word && ls->lane && ls->rng && cum ? 0 : LOOM_ENOMEM;
    for (size_t t = 0; t < T && !rc; t++) rc = lda_sampler_lane_init(&ls->lane[t], s);
    if (!rc) {
        for (size_t i = 0; i <= d->ndocs; i++) cum[i] = d->doc[i] - d->doc[0];
        cut_even(cum, d->ndocs, lanes, ls->doc);
        for (size_t w = 0; w <= nw; w++) cum[w] = 0;
        for (uint64_t k = 0; k < d->ntokens; k++) cum[d->word[k] + 1]++;
        for (size_t w = 0; w < nw; w++) cum[w + 1] += cum[w];
        cut_even(cum, nw, lanes, ls->word);
    }
    free(cum);
    if (rc) lda_lanes_free(ls);
    return rc;
}

void lda_lanes_free(lda_lanes *ls)
{
    for (int t = 0; ls->lane && t < ls->n; t++) lda_sampler_lane_free(&ls->lane[t]);
    free(ls->doc), free(ls->word), free(ls->lane), free(ls->rng);
    *ls = (lda_lanes){0};
}

void lda_lanes_sweep(lda_lanes *ls, lda_sampler *s, lda_docs *d, int t, int step, int parts,
                     int part, uint64_t seed, int iteration)
{
    size_t lo, hi, b = (size_t)(t + step) % (size_t)ls->n;
    lda_segment(ls->doc[t + 1] - ls->doc[t], parts, part, &lo, &hi);
    lo += ls->doc[t], hi += ls->doc[t];
    if (step == 0)
        for (size_t i = lo; i < hi; i++)
            app_rng_seed(&ls->rng[i], seed, lda_stream(iteration + 1, d->first_doc + i));
    lda_sampler *l = &ls->lane[t];
    lda_sampler_lane_begin(l, s);
    lda_sweep_part(l, d, ls->rng, lo, hi, ls->word[b], ls->word[b + 1]);
}

void lda_lanes_merge(lda_lanes *ls, lda_sampler *s)
{
    for (int t = 0; t < ls->n; t++) lda_sampler_lane_end(s, &ls->lane[t]);
}

void lda_lanes_run(lda_lanes *ls, lda_sampler *s, lda_docs *d, int parts, int part, uint64_t seed,
                   int iteration)
{
    for (int step = 0; step < ls->n; step++) {
        for (int t = 0; t < ls->n; t++)
            lda_lanes_sweep(ls, s, d, t, step, parts, part, seed, iteration);
        lda_lanes_merge(ls, s);
    }
}
