/* checkpoint: a distributed LDA worker's state in a checkpoint of the job
 * (docs/FAULTS.md), saved at a clock and loaded on resume (apps/lda/train.c
 * calls them). */
#include <stdlib.h>
#include <string.h>

#include "lda/train_impl.h"

/* A worker's state at a clock: where it is (iteration, next clock of it), the
 * evaluation bookkeeping and every token's topic; the counts are the
 * servers', the random streams depend only on (iteration, document). */
#define LDA_STATE_MAGIC 0x3143444cu /* "LDC1" */
#define LDA_STATE_HEAD  8           /* u64 words before the topics */

int lda_save_state(worker *w, int it, int next_sync)
{
    uint64_t tokens = w->lanes->d.ntokens;
    size_t len = LDA_STATE_HEAD * 8 + tokens * 4;
    uint64_t *b = malloc(len);
    if (!b) return app_fail(PROG, "checkpoint", LOOM_ENOMEM);
    double train_s = w->train_s;
    b[0] = LDA_STATE_MAGIC;
    b[1] = (uint64_t)it;
    b[2] = (uint64_t)next_sync;
    b[3] = (uint64_t)w->iters_since_eval;
    memcpy(&b[4], &train_s, 8);
    b[5] = tokens;
    memcpy(&b[6], &w->p.alpha, 8); /* for `loom checkpoint export`, and checked on resume */
    memcpy(&b[7], &w->p.beta, 8);
    memcpy(b + LDA_STATE_HEAD, w->lanes->d.z, tokens * 4);
    int rc = loom_checkpoint_save(w->n, b, len);
    free(b);
    return rc ? app_fail(PROG, "checkpoint", rc) : 0;
}

int lda_load_state(worker *w)
{
    const void *data;
    size_t len;
    if (loom_checkpoint_resumed(w->n, &data, &len, NULL)) return 0;
    lda_docs *d = &w->lanes->d;
    uint64_t tokens = d->ntokens;
    uint64_t b[LDA_STATE_HEAD] = {0};
    if (len >= sizeof b) memcpy(b, data, sizeof b);
    int ok = len == sizeof b + tokens * 4 && b[0] == LDA_STATE_MAGIC && b[5] == tokens &&
             b[2] <= (uint64_t)w->c->train.syncs && !memcmp(&b[6], &w->p.alpha, 8) &&
             !memcmp(&b[7], &w->p.beta, 8);
    if (ok) memcpy(d->z, (const uint8_t *)data + sizeof b, tokens * 4);
    for (uint64_t k = 0; ok && k < tokens; k++) ok = d->z[k] < w->p.topics;
    if (!ok) {
        fprintf(stderr,
                PROG ": worker %d: the checkpoint does not fit this job (other corpus, "
                     "--topics, --alpha, --beta or --syncs?)\n",
                w->rank);
        return 1;
    }
    w->resuming = 1;
    w->first_it = (int)b[1];
    w->first_sync = (int)b[2];
    w->iters_since_eval = (int)b[3];
    memcpy(&w->train_s, &b[4], 8);
    return 0;
}
