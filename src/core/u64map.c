/* u64map: open addressing with linear probing; see u64map.h.
 *
 * Two parallel arrays of `capacity` entries (a power of two): keys[] and
 * slots[], where slots[b] == 0 marks bucket b empty and otherwise holds the
 * caller's slot + 1. A key lives in the first empty-or-matching bucket at or
 * after rand_mix64(key) & mask, wrapping around. Because nothing is ever deleted
 * one at a time there are no tombstones: a probe stops at the first empty
 * bucket. The table doubles when an insert would push the load above 50%,
 * which keeps probe runs short even for clustered keys, since the mixer
 * scatters consecutive keys (the common case: row ids) across the table.
 *
 * A zero-filled u64map is a valid empty map too: lookups see size 0 and the
 * first insert allocates. */
#include "core/u64map.h"

#include <stdlib.h>
#include <string.h>

#include "core/rand.h"
#include "loom/error.h"

#define MIN_CAPACITY 16

static size_t capacity(const u64map *m)
{
    return m->keys ? m->mask + 1 : 0;
}

/* The bucket holding key, or the empty bucket where it would go. */
static size_t find_bucket(const uint64_t *keys, const uint32_t *slots, size_t mask, uint64_t key)
{
    size_t b = (size_t)rand_mix64(key) & mask;
    while (slots[b] != 0 && keys[b] != key) b = (b + 1) & mask;
    return b;
}

/* Allocate an empty table of cap buckets (a power of two) and move every
 * entry of m into it. On failure m is untouched. */
static int rehash(u64map *m, size_t cap)
{
    uint64_t *keys = malloc(cap * sizeof *keys);
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!keys || !slots) {
        free(keys);
        free(slots);
        return LOOM_ENOMEM;
    }
    size_t old_cap = capacity(m);
    for (size_t i = 0; i < old_cap; i++) {
        if (m->slots[i] == 0) continue;
        size_t b = find_bucket(keys, slots, cap - 1, m->keys[i]);
        keys[b] = m->keys[i];
        slots[b] = m->slots[i];
    }
    free(m->keys);
    free(m->slots);
    m->keys = keys;
    m->slots = slots;
    m->mask = cap - 1;
    return 0;
}

int u64map_init(u64map *m, size_t hint)
{
    memset(m, 0, sizeof *m);
    if (hint > SIZE_MAX / 4 / sizeof(uint64_t)) return LOOM_ENOMEM;
    size_t cap = MIN_CAPACITY;
    while (cap < 2 * hint) cap *= 2; /* hint keys fit without crossing 50% */
    return rehash(m, cap);
}

void u64map_free(u64map *m)
{
    free(m->keys);
    free(m->slots);
    memset(m, 0, sizeof *m);
}

int u64map_get(const u64map *m, uint64_t key, uint32_t *slot)
{
    if (m->size == 0) return 0;
    size_t b = find_bucket(m->keys, m->slots, m->mask, key);
    if (m->slots[b] == 0) return 0;
    *slot = m->slots[b] - 1;
    return 1;
}

uint32_t u64map_put(u64map *m, uint64_t key, uint32_t new_slot, int *inserted)
{
    *inserted = 0;
    size_t b = 0;
    if (m->keys) {
        b = find_bucket(m->keys, m->slots, m->mask, key);
        if (m->slots[b] != 0) return m->slots[b] - 1;
    }
    size_t cap = capacity(m);
    if (2 * (m->size + 1) > cap) {
        size_t want = cap ? 2 * cap : MIN_CAPACITY;
        if (want > SIZE_MAX / sizeof(uint64_t) || rehash(m, want) != 0) return UINT32_MAX;
        b = find_bucket(m->keys, m->slots, m->mask, key);
    }
    m->keys[b] = key;
    m->slots[b] = new_slot + 1;
    m->size++;
    *inserted = 1;
    return new_slot;
}

void u64map_clear(u64map *m)
{
    if (m->slots) memset(m->slots, 0, capacity(m) * sizeof *m->slots);
    m->size = 0;
}
