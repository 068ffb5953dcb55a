/* keys: the sorted key lists the trainer and its reference both build. */
#include <stdlib.h>

#include "lr/lr.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

size_t lr_sort_unique(uint64_t *keys, size_t n)
{
    qsort(keys, n, sizeof *keys, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || keys[i] != keys[u - 1]) keys[u++] = keys[i];
    return u;
}

size_t lr_find_key(const uint64_t *keys, size_t n, uint64_t k)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}
