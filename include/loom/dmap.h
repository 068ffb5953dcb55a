/* Distributed maps and the loops over them (STRADS-AP's dmap with SyncFor and
 * AsyncFor, kim-thesis-strads.txt chapter 7; docs/LOOPS.md, "SyncFor and
 * AsyncFor over maps").
 *
 * A dmap is a key -> value container spread over the workers of a job: each
 * key (an int64, or a string of 1 to LOOM_DMAP_MAX_KEY bytes) is hashed to the
 * worker that owns it, and its value is `width` doubles. Every call here is
 * collective: every worker of the job makes it, in the same order as its other
 * maps, darrays, loops and engines, each with its own arguments (its own keys
 * to insert, erase or look up, which go to their owners and back).
 *
 * Keys are passed as `const void *keys`: n int64_t for LOOM_DMAP_I64, n
 * pointers to NUL-terminated strings (const char *const *) for LOOM_DMAP_STR;
 * one key (loom_map_get and friends) as a pointer to an int64_t or a string.
 * Keys are ordered numerically (int64) or bytewise with a prefix first
 * (strings): the loops' serial order.
 *
 * The loops run a body over every entry of the map, each owner over its own
 * entries in key order, pass after pass; the body reads entries by key
 * (loom_map_get), sets them (loom_map_set) and adds to them (loom_map_add):
 *
 *   loom_map_sync_for   SyncFor (BSP): every read of a pass sees the map as
 *                       the pass started; the writes are applied at its end:
 *                       an entry set by several iterations takes the value of
 *                       the last in key order, then every add to it is added
 *                       (an absent key is created, from zeros). The result is
 *                       the serial loop's over the keys in order, bit for bit
 *                       (adds: when they are exact, as integer counts are).
 *   loom_map_async_for  AsyncFor: a worker's writes reach its own reads from
 *                       its next iteration on, and the owners at the latest
 *                       `delay` iterations later, when every worker sends what it wrote and
 *                       takes the others' changes (rounds of `delay`
 *                       iterations, in step). Serialisable per key: a worker
 *                       sets only keys it owns (their writes are its
 *                       iterations', in order), and adds from anywhere are
 *                       applied whole, one after another, after the owner's
 *                       writes of the round. One worker with delay 1 is the
 *                       serial loop writing in place.
 *
 * During a loop every worker holds a copy of the whole map (as SyncFor over a
 * vector reads the whole vector). Errors are int codes (loom/error.h); err,
 * when given, gets a sentence. */
#ifndef LOOM_DMAP_H
#define LOOM_DMAP_H

#include <stddef.h>
#include <stdint.h>

#include "node.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_DMAP_MAX_KEY   1024 /* bytes of a string key */
#define LOOM_DMAP_MAX_WIDTH 65536

typedef enum { LOOM_DMAP_I64 = 0, LOOM_DMAP_STR = 1 } loom_dmap_key_kind;

typedef struct loom_dmap_opts {
    loom_dmap_key_kind keys;
    uint32_t width; /* doubles a value (0 or 1: one) */
} loom_dmap_opts;

typedef struct loom_dmap loom_dmap;

/* An empty map (collective). LOOM_EINVAL for a bad kind or width, LOOM_EROLE
 * on a node that is not a worker. */
int loom_dmap_open(loom_node *node, const loom_dmap_opts *o, loom_dmap **out, char *err,
                   size_t errlen);
/* Inserts this worker's n keys with their values (n x width), replacing the
 * values of keys already there (collective). Several inserts of one key in
 * one call are applied in rank order, then in each worker's order: the last
 * wins. LOOM_EINVAL (every worker) for an empty or too long string key, or
 * two strings whose 64-bit hashes agree (about n^2 / 2^65 likely). */
int loom_dmap_insert(loom_dmap *m, const void *keys, const double *values, size_t n, char *err,
                     size_t errlen);
/* Erases this worker's n keys (collective; a key not there is no error). */
int loom_dmap_erase(loom_dmap *m, const void *keys, size_t n, char *err, size_t errlen);
/* Looks up this worker's n keys on their owners (collective): values
 * (n x width; zeros for a key not there) and found (n flags, or NULL). */
int loom_dmap_lookup(loom_dmap *m, const void *keys, size_t n, double *values, uint8_t *found);
/* Entries of every worker after the last collective call, and this worker's. */
uint64_t loom_dmap_size(const loom_dmap *m);
size_t loom_dmap_local(const loom_dmap *m);
uint32_t loom_dmap_width(const loom_dmap *m);
/* The worker that owns `key` (an int64_t * or a string). */
uint32_t loom_dmap_owner(const loom_dmap *m, const void *key);
void loom_dmap_free(loom_dmap *m);

/* ---- loops over a map ---- */

typedef struct loom_map_iter loom_map_iter;
/* One iteration: the entry's key (an int64_t * or a string) and its value
 * (width doubles, as the loop sees it; the body writes through loom_map_set,
 * not here). */
typedef void (*loom_map_body_fn)(void *user, loom_map_iter *it, const void *key,
                                 const double *value);

/* Entry `key` as this iteration reads it (width doubles), or NULL when the
 * map has no such key: the writes of this iteration are not in it (they
 * apply after the body returns). Valid until the body returns. */
const double *loom_map_get(loom_map_iter *it, const void *key);
/* The new value of entry `key` (width doubles, starting from the value the
 * iteration reads, zeros for an absent key), which the body writes; the same
 * row for the same key within one iteration. AsyncFor: only keys this worker
 * owns (loom_dmap_owner). A key it may not set, a string key empty or too
 * long, two strings of one hash, or no memory give a scratch row that is never
 * applied, and the run fails (every worker; LOOM_EINVAL, LOOM_ENOMEM). */
double *loom_map_set(loom_map_iter *it, const void *key);
/* A change to add to entry `key` (width doubles, zeros until the body adds to
 * them), any key; failures as loom_map_set's. */
double *loom_map_add(loom_map_iter *it, const void *key);

/* Run `passes` passes of the body over the map's entries (collective). 0 or
 * the first error, the same on every worker. AsyncFor: delay >= 1. */
int loom_map_sync_for(loom_dmap *m, loom_map_body_fn body, void *user, int64_t passes, char *err,
                      size_t errlen);
int loom_map_async_for(loom_dmap *m, loom_map_body_fn body, void *user, uint64_t delay,
                       int64_t passes, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
