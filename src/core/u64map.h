/* u64map: an open-addressing hash map from uint64 keys to uint32 slots.
 *
 * The map stores only the key and a 32-bit slot number; callers keep the
 * payload (rows, deltas) in their own arrays indexed by slot, so rows stay
 * contiguous and the map stays small. Linear probing over a power-of-two
 * table, grown at 50% load; no deletion except clearing everything (caches and
 * update buffers are emptied wholesale). Not thread-safe. */
#ifndef LOOM_CORE_U64MAP_H
#define LOOM_CORE_U64MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct u64map {
    uint64_t *keys;
    uint32_t *slots; /* slot + 1; 0 marks an empty bucket */
    size_t mask;     /* capacity - 1 */
    size_t size;
} u64map;

/* Prepare an empty map able to hold `hint` keys before growing. 0 or LOOM_ENOMEM. */
int u64map_init(u64map *m, size_t hint);
void u64map_free(u64map *m);
/* 1 and *slot set if key is present, 0 otherwise. */
int u64map_get(const u64map *m, uint64_t key, uint32_t *slot);
/* Find key or insert it with slot `new_slot`. Returns the key's slot (the
 * existing one, or new_slot) and sets *inserted to 1 when it was added; returns
 * UINT32_MAX if growing failed (map unchanged). new_slot must not be UINT32_MAX. */
uint32_t u64map_put(u64map *m, uint64_t key, uint32_t new_slot, int *inserted);
/* Remove every key, keeping the capacity. */
void u64map_clear(u64map *m);
static inline size_t u64map_size(const u64map *m)
{
    return m->size;
}

#endif
