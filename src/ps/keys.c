/* keys: sort and deduplicate key lists; see keys.h.
 *
 * keys_sort_unique() sorts (key, input position) pairs so that, walking the
 * sorted pairs once, it can both emit each distinct key and tell every input
 * position which distinct key it became.
 *
 * One scan of the input finds out whether it is already in order (callers
 * often pass sorted keys: then there is nothing to sort) and which bits vary
 * between keys. Otherwise the pairs are radix-sorted most significant digit
 * first, each digit taken just below the highest bit that still varies among
 * the keys being split, so bits every key shares cost nothing (row ids below
 * 2^20 are split on bits 12..19 first, not on 44 bits of zeros):
 *
 *   1. 256-way split of the whole input, read straight from the caller's
 *      array into the output key array plus a position array: the only pass
 *      that moves every pair through main memory;
 *   2. each bucket, now small enough to stay in cache, is split again on a
 *      digit wide enough (8 to 10 bits) to leave a few keys per sub-bucket,
 *      recursively, through a scratch area the size of the largest bucket;
 *      buckets of fewer than SMALL_BUCKET keys are insertion-sorted.
 *
 * A plain LSD radix sort needs eight passes over two n-sized pair buffers; at
 * a million keys, moving pairs through memory and faulting in fresh pages
 * dominates, which this layout keeps to one pass and the output arrays. */
#include "ps/keys.h"

#include <stdlib.h>
#include <string.h>

#include "loom/error.h"

#define TOP_BITS     8 /* digit of the first, memory-bound split */
#define TOP_RADIX    (1u << TOP_BITS)
#define MIN_BITS     8 /* digit widths of the in-cache splits */
#define MAX_BITS     10
#define SMALL_BUCKET 32 /* below this, insertion sort beats another split */

int keys_sorted_unique(const uint64_t *k, size_t n)
{
    /* Blocks without a branch inside, which the compiler vectorises (a 1M-key
     * pull checked its keys at 1-2 ns a key one comparison at a time); an
     * unsorted list still stops at the end of its first bad block. */
    enum { BLOCK = 256 };
    for (size_t i = 1; i < n; i += BLOCK) {
        size_t end = n - i < BLOCK ? n : i + BLOCK;
        unsigned bad = 0;
        for (size_t j = i; j < end; j++) bad |= k[j - 1] >= k[j];
        if (bad) return 0;
    }
    return 1;
}

static void insertion_sort(uint64_t *key, uint32_t *pos, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        uint64_t k = key[i];
        uint32_t p = pos[i];
        size_t j = i;
        for (; j > 0 && key[j - 1] > k; j--) {
            key[j] = key[j - 1];
            pos[j] = pos[j - 1];
        }
        key[j] = k;
        pos[j] = p;
    }
}

/* The shift of the `width`-bit digit that ends at the highest set bit of
 * varying (or starts at bit 0 when that bit is low). */
static unsigned digit_shift(uint64_t varying, unsigned width)
{
    unsigned top = 0;
    while (varying >> top > 1) top++;
    return top >= width ? top + 1 - width : 0;
}

/* Sort the n pairs (key[i], pos[i]) by key in place; tmp_key and tmp_pos
 * hold at least n entries of scratch space. */
static void msd_sort(uint64_t *key, uint32_t *pos, size_t n, uint64_t *tmp_key, uint32_t *tmp_pos)
{
    if (n < SMALL_BUCKET) {
        insertion_sort(key, pos, n);
        return;
    }
    uint64_t any = 0, all = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        any |= key[i];
        all &= key[i];
    }
    if (any == all) return; /* all equal */

    unsigned width = MIN_BITS; /* two to four keys per sub-bucket, if random */
    while (width < MAX_BITS && n >> (width + 1) > 1) width++;
    unsigned shift = digit_shift(any ^ all, width);
    uint32_t mask = (1u << width) - 1;

    /* Counts, then start offsets; after the scatter, end offsets. */
    uint32_t edge[1u << MAX_BITS];
    memset(edge, 0, (mask + 1) * sizeof *edge);
    for (size_t i = 0; i < n; i++) edge[key[i] >> shift & mask]++;
    uint32_t sum = 0;
    for (uint32_t v = 0; v <= mask; v++) {
        uint32_t count = edge[v];
        edge[v] = sum;
        sum += count;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t at = edge[key[i] >> shift & mask]++;
        tmp_key[at] = key[i];
        tmp_pos[at] = pos[i];
    }
    memcpy(key, tmp_key, n * sizeof *key);
    memcpy(pos, tmp_pos, n * sizeof *pos);
    for (uint32_t v = 0, begin = 0; v <= mask; begin = edge[v++])
        msd_sort(key + begin, pos + begin, edge[v] - begin, tmp_key, tmp_pos);
}

/* Sort the pairs (in[i], i) into key[] and pos[] (n entries each). The keys
 * are not all equal; the bits set in `varying` are those that differ between
 * some of them. 0 or LOOM_ENOMEM. */
static int sort_pairs(const uint64_t *in, size_t n, uint64_t varying, uint64_t *key, uint32_t *pos)
{
    unsigned shift = digit_shift(varying, TOP_BITS);
    size_t start[TOP_RADIX + 1] = {0}, next[TOP_RADIX], largest = 0;
    for (size_t i = 0; i < n; i++) start[(in[i] >> shift & (TOP_RADIX - 1)) + 1]++;
    for (unsigned v = 0; v < TOP_RADIX; v++) {
        if (start[v + 1] > largest) largest = start[v + 1];
        start[v + 1] += start[v];
        next[v] = start[v];
    }
    for (size_t i = 0; i < n; i++) {
        size_t at = next[in[i] >> shift & (TOP_RADIX - 1)]++;
        key[at] = in[i];
        pos[at] = (uint32_t)i;
    }

    uint64_t *tmp_key = malloc(largest * sizeof *tmp_key);
    uint32_t *tmp_pos = malloc(largest * sizeof *tmp_pos);
    int rc = tmp_key && tmp_pos ? 0 : LOOM_ENOMEM;
    for (unsigned v = 0; rc == 0 && v < TOP_RADIX; v++)
        msd_sort(key + start[v], pos + start[v], start[v + 1] - start[v], tmp_key, tmp_pos);
    free(tmp_key);
    free(tmp_pos);
    return rc;
}

int keys_sort_unique(const uint64_t *in, size_t n, uint64_t **uniq, size_t *nuniq,
                     uint32_t **slot_of)
{
    if (n > UINT32_MAX) return LOOM_EINVAL; /* positions are 32-bit */
    /* At least one element each, so that success never hands back NULL. */
    uint64_t *u = malloc((n ? n : 1) * sizeof *u);
    uint32_t *slot = malloc((n ? n : 1) * sizeof *slot);
    uint32_t *pos = NULL;
    if (!u || !slot) goto nomem;

    uint64_t any = 0, all = UINT64_MAX;
    int ordered = 1;
    for (size_t i = 0; i < n; i++) {
        any |= in[i];
        all &= in[i];
        if (i > 0 && in[i - 1] > in[i]) ordered = 0;
    }

    size_t nu = 0;
    if (ordered) { /* only duplicates to fold */
        for (size_t i = 0; i < n; i++) {
            if (nu == 0 || in[i] != u[nu - 1]) u[nu++] = in[i];
            slot[i] = (uint32_t)(nu - 1);
        }
    } else {
        pos = malloc(n * sizeof *pos);
        if (!pos || sort_pairs(in, n, any ^ all, u, pos) != 0) goto nomem;
        /* Fold in place: the write index never passes the read index. */
        for (size_t i = 0; i < n; i++) {
            uint64_t k = u[i];
            if (nu == 0 || k != u[nu - 1]) u[nu++] = k;
            slot[pos[i]] = (uint32_t)(nu - 1);
        }
        free(pos);
    }

    if (nu < n / 2) { /* many duplicates: give the excess back */
        uint64_t *shrunk = realloc(u, nu * sizeof *u);
        if (shrunk) u = shrunk;
    }
    *uniq = u;
    *nuniq = nu;
    *slot_of = slot;
    return 0;

nomem:
    free(u);
    free(slot);
    free(pos);
    return LOOM_ENOMEM;
}
