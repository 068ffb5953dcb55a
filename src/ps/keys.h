/* keys: turning an arbitrary key list into the sorted unique form the wire needs.
 *
 * Pushes and pulls accept unsorted keys with duplicates. Messages carry sorted,
 * unique keys (so a range partition is a slice and servers can apply in order).
 * keys_sort_unique() computes the unique sorted keys and, for every input
 * position, which unique key it maps to; the caller then gathers (push:
 * combining duplicates) or scatters (pull: copying a row to every position). */
#ifndef LOOM_PS_KEYS_H
#define LOOM_PS_KEYS_H

#include <stddef.h>
#include <stdint.h>

/* 1 if k[0] < k[1] < ... < k[n-1] (strictly increasing), else 0. */
int keys_sorted_unique(const uint64_t *k, size_t n);

/* Sort and deduplicate. On success *uniq (malloc'd, *nuniq keys ascending) and
 * *slot_of (malloc'd, n entries: uniq[(*slot_of)[i]] == in[i]) are set; the
 * caller frees both. Radix sort, O(n). Returns 0 or LOOM_ENOMEM (LOOM_EINVAL
 * unless n < 2^32). */
int keys_sort_unique(const uint64_t *in, size_t n, uint64_t **uniq, size_t *nuniq,
                     uint32_t **slot_of);

#endif
