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
 * i * width + j >= e, and is loaded before it is stored, so nothing is
 * overwritten before it is read. */
#include <string.h>

#include "ps/client_impl.h"

/* The pairs of n rows of width values of C type T (uint32_t or uint64_t: a
 * value is left out when its bits are all 0) from dense into cols and vals,
 * at most cap of them; row_nnz per row. Returns the number of pairs. */
#define COMPACT(T)                                                                                 \
    do {                                                                                           \
        for (size_t i = 0; i < n; i++) {                                                           \
            const uint8_t *row = dense + i * width * sizeof(T);                                    \
            uint32_t c = 0;                                                                        \
            for (size_t j = 0; j < width; j++) {                                                   \
                T v;                                                                               \
                memcpy(&v, row + j * sizeof(T), sizeof v);                                         \
                if (!v) continue;                                                                  \
                if (total < cap) {                                                                 \
                    cols[total] = (uint32_t)j;                                                     \
                    memcpy((uint8_t *)vals + total * sizeof(T), &v, sizeof v);                     \
                }                                                                                  \
                total++, c++;                                                                      \
            }                                                                                      \
            row_nnz[i] = c;                                                                        \
        }                                                                                          \
    } while (0)

static size_t compact(const uint8_t *dense, size_t n, size_t width, size_t vs, uint32_t *row_nnz,
                      uint32_t *cols, void *vals, size_t cap)
{
    size_t total = 0;
    if (vs == 4)
        COMPACT(uint32_t);
    else
        COMPACT(uint64_t);
    return total;
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
    size_t total = rc ? 0 : compact(dense, n, width, vs, row_nnz, cols, vals, cap);
    if (own) free(dense);
    if (rc) return rc;
    *nnz = total;
    return total > cap ? LOOM_ELIMIT : 0;
}
