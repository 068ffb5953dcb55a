/* sorted: binary search in ascending arrays, the one copy every layer uses
 * (key lists, id tables, sufficient-vector ids).
 *
 * Header-only: the searches run once per key in the push and pull paths, where
 * a call would cost as much as the search. */
#ifndef LOOM_CORE_SORTED_H
#define LOOM_CORE_SORTED_H

#include <stddef.h>
#include <stdint.h>

/* The index of the first of v[0, n) (ascending) that is >= x; n if none. */
static inline size_t sorted_lower_bound_u64(const uint64_t *v, size_t n, uint64_t x)
{
    size_t lo = 0, hi = n; /* the answer lies in [lo, hi] */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The index of x in v[0, n) (ascending, distinct), -1 if it is not there. */
static inline int64_t sorted_index_i64(const int64_t *v, size_t n, int64_t x)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo] == x ? (int64_t)lo : -1;
}

#endif
