/* client_pull_sparse: a worker's reads in sparse form (loom_pull_sparse).
 *
 * The rows come as loom_pull() gives them (cache, changed-only replies,
 * read-my-writes: the same values bit for bit) into the caller's vals when
 * it has room for them all dense (n * width values), else into a buffer of
 * this call, and are handed over as CSR, each row's values whose bits are not all 0 by
 * ascending column: the rule the wire's sparse row encoding uses
 * (docs/FILTERS.md), so a row that became all zero comes back with no pairs.
 * The caller then works on the non-zeros only, e.g. LDA rebuilding its
 * hybrid word-topic rows. The scan of the dense rows is still here: the
 * cache keeps rows dense, so it is done once, in the library, instead of in
 * every caller. In place, the pairs are written from the front of vals
 * while the dense rows are read further on: pair e comes from value
 * i * width + j >= e, so nothing is overwritten before it is read. */
#include <string.h>

#include "ps/client_impl.h"

/* Whether a value's bits are all 0. */
static int zero_bits(const uint8_t *v, size_t vs)
{
    for (size_t b = 0; b < vs; b++)
        if (v[b]) return 0;
    return 1;
}

int loom_pull_sparse(loom_table *t, const uint64_t *keys, size_t n, uint32_t *row_nnz,
                     uint32_t *cols, void *vals, size_t cap, size_t *nnz)
{
    if (!t || !nnz || (n && (!keys || !row_nnz)) || (cap && (!cols || !vals))) return LOOM_EINVAL;
    *nnz = 0;
    if (!n) return 0;
    const size_t width = t->def.opts.width, vs = loom_type_size(t->def.opts.type);
    int own = cap < n * width;
    uint8_t *dense = own ? malloc(n * t->row_bytes) : vals;
    if (!dense) return LOOM_ENOMEM;
    int rc = loom_pull(t, keys, n, dense);
    size_t total = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        const uint8_t *row = dense + i * t->row_bytes;
        uint32_t c = 0;
        for (size_t j = 0; j < width; j++) {
            if (zero_bits(row + j * vs, vs)) continue;
            if (total < cap) {
                cols[total] = (uint32_t)j;
                memmove((uint8_t *)vals + total * vs, row + j * vs, vs);
            }
            total++, c++;
        }
        row_nnz[i] = c;
    }
    if (own) free(dense);
    if (rc) return rc;
    *nnz = total;
    return total > cap ? LOOM_ELIMIT : 0;
}
