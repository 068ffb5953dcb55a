/* Count-Min sketches on the servers: approximate counts of a huge key space in
 * a fixed, small table (Cormode and Muthukrishnan, 2005; DiFacto counts how
 * often each feature occurs with one before giving it an embedding:
 * li-thesis-parameter-server.txt, chapter 10).
 *
 * A sketch of depth d and width w is d rows of w integer counters, kept as a
 * dense int64 "sum" table of d * w keys, so it is cut into ranges over the
 * servers like any table. Adding c to key k adds c to one counter in every
 * row, counter h_i(k) of row i (d independent hashes); a query returns the
 * smallest of k's d counters. Counters only grow, and each of k's holds k's
 * own count, so an estimate is never below the true count; it is above it by
 * the counts of other keys that share all d counters. With w = ceil(e / eps)
 * and d = ceil(ln(1 / delta)), an estimate exceeds the true count by more
 * than eps * N (N: the sum of all counts added) with probability at most
 * delta, whatever the keys.
 *
 * Additions are pushes: batched and sent like any push (flushed at
 * loom_clock(), loom_flush() or loom_barrier()), each worker's adds to one
 * counter combined before they are sent. A query pulls; it sees what the
 * table's consistency model shows (see loom_sketch_opts), and after a
 * loom_barrier() every count added before it by every worker. */
#ifndef LOOM_SKETCH_H
#define LOOM_SKETCH_H

#include <stddef.h>
#include <stdint.h>

#include "node.h"
#include "table.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_sketch loom_sketch;

typedef struct loom_sketch_opts {
    uint32_t depth;               /* d: rows, 1 to 32; default 4 */
    uint64_t width;               /* w: counters a row, at least 1; default 2^20 */
    uint64_t seed;                /* of the hashes; every worker must give the same */
    loom_consistency consistency; /* of the counter table; default LOOM_ASP */
    int staleness;                /* for LOOM_SSP */
} loom_sketch_opts;

#define LOOM_SKETCH_OPTS_DEFAULT                                                                   \
    {                                                                                              \
        4, 1u << 20, 0, LOOM_ASP, 0                                                                \
    }

/* Open (creating on first use) the sketch `name` (a table of that name) on
 * every worker, with the same options. LOOM_EINVAL for a depth or width out
 * of range or d * w above 2^40 counters; otherwise loom_table_open()'s
 * errors. */
int loom_sketch_open(loom_node *node, const char *name, const loom_sketch_opts *opts,
                     loom_sketch **out);

/* Add counts[j] (>= 0) to keys[j], for j < n; a key may repeat. LOOM_EINVAL
 * for a negative count, LOOM_ENOMEM, or loom_push()'s errors. */
int loom_sketch_add(loom_sketch *s, const uint64_t *keys, const int64_t *counts, size_t n);

/* out[j] = the estimated count of keys[j] (never below the true count of the
 * additions this query sees). Waits like loom_pull(). */
int loom_sketch_query(loom_sketch *s, const uint64_t *keys, size_t n, int64_t *out);

/* The sketch's counter table (for loom_flush, statistics). */
loom_table *loom_sketch_table(loom_sketch *s);

/* Free the handle (the counters stay on the servers until the job ends). */
void loom_sketch_close(loom_sketch *s);

#ifdef __cplusplus
}
#endif

#endif
