/* Tables: named, typed, partitioned maps from uint64 keys to fixed-width rows.
 *
 * A table lives on the servers, split by key range: server i of S holds the
 * i-th of S equal slices of [key_begin, key_end) (with replicas, LOOM_REPLICAS,
 * the range is cut into more ranges on a ring of servers instead: docs/FAULTS.md,
 * "Replicas and server failover"). A row is `width` values of
 * one type; width 1 is a (key, value) vector, width K a Bösen row (a user's
 * factor vector, a word's topic counts). Rows that were never written read as
 * their initial value (zero unless the table says otherwise).
 *
 * Workers open a table by name; every worker must pass the same options (the
 * scheduler checks). Writes are pushes of deltas that the table's updater
 * applies on the server: "sum" adds them, "sgd"/"adagrad"/"ftrl" treat them as
 * gradients, "assign" overwrites, and any name registered with
 * loom_updater_register() runs user code.
 *
 * Consistency is per table:
 *   LOOM_BSP     a pull at clock c reflects exactly the updates of every worker
 *                from clocks < c (and the reader's own): servers apply a clock's
 *                pushes when every worker has finished that clock, so results
 *                equal a sequential run of the same clocks;
 *   LOOM_SSP(s)  a pull at clock c reflects at least the updates from clocks
 *                < c - s, waiting if needed, and no worker runs more than s
 *                clocks ahead of the slowest (loom_clock() blocks);
 *   LOOM_ASP     pulls never wait.
 * Under every model a worker sees its own updates: in "sum" tables at once (its
 * buffered and in-flight deltas are added to what the server returned), in
 * other tables once they were flushed and applied (after loom_clock(),
 * loom_flush() or loom_barrier()).
 *
 * The process cache keeps pulled rows with the clock they are fresh to; a pull
 * whose rows are all fresh enough costs no network round trip. Under ASP a row
 * is reused only within the clock in which it was fetched. */
#ifndef LOOM_TABLE_H
#define LOOM_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "node.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_table loom_table;

typedef enum { LOOM_F32 = 0, LOOM_F64 = 1, LOOM_I32 = 2, LOOM_I64 = 3 } loom_type;
/* Size in bytes of one value of type t (0 for an invalid type). */
size_t loom_type_size(loom_type t);

typedef enum { LOOM_ASP = 0, LOOM_SSP = 1, LOOM_BSP = 2 } loom_consistency;
typedef enum { LOOM_DENSE = 0, LOOM_SPARSE = 1 } loom_storage;
typedef enum { LOOM_INIT_ZERO = 0, LOOM_INIT_UNIFORM = 1, LOOM_INIT_NORMAL = 2 } loom_init_kind;
/* Which buffered rows managed communication sends first (docs/USAGE.md):
 * none (no sends between clocks), random, round robin in key order, the
 * largest accumulated change |d| first, the largest relative change |d/w|. */
typedef enum {
    LOOM_PRIORITY_NONE = 0,
    LOOM_PRIORITY_RANDOM = 1,
    LOOM_PRIORITY_ROUNDROBIN = 2,
    LOOM_PRIORITY_ABS = 3,
    LOOM_PRIORITY_REL = 4
} loom_priority;

#define LOOM_MAX_NAME   63
#define LOOM_MAX_PARAMS 8

typedef struct loom_table_opts {
    loom_type type;               /* value type; default LOOM_F32 */
    uint32_t width;               /* values per row; default 1 */
    loom_storage storage;         /* dense needs a finite key range; default sparse */
    uint64_t key_begin;           /* keys are in [key_begin, key_end); default all of uint64 */
    uint64_t key_end;             /* (key_end 0 means 2^64) */
    loom_consistency consistency; /* default LOOM_SSP */
    int staleness;                /* s for LOOM_SSP (>= 0); ignored otherwise; default 0 */
    const char *updater; /* "sum" (default), "assign", "sgd", "adagrad", "ftrl", or registered */
    /* Optimiser hyper-parameters (float tables):
     *   sgd:     w -= lr * g - lr * l2 * w ... see docs/USAGE.md for each formula
     *   adagrad: n += g^2; w -= lr * g / (sqrt(n) + eps)
     *   ftrl:    FTRL-proximal with alpha = lr, beta, l1, l2 */
    double lr, beta, l1, l2, eps;
    double params[LOOM_MAX_PARAMS]; /* free parameters passed to user updaters */
    /* Initial value of rows never written (float tables): zero, uniform in
     * [init_a, init_b), or normal(init_a, init_b); a pure function of
     * (init_seed, key, column), so it does not depend on the partitioning. */
    loom_init_kind init;
    double init_a, init_b;
    uint64_t init_seed;
    int cache; /* keep pulled rows in the process cache; default 1 */
    /* Buffered rows that trigger an automatic flush (0: only at clock/flush). */
    uint32_t flush_rows;
    /* Filters of the table's pushes and of the servers' pull replies, each a
     * spec "NAME[:ARG],..." (docs/FILTERS.md; NULL or "" for none), e.g.
     * "kkt:0.9,keycache,zstd". Rows travel sparse whenever that is smaller,
     * with or without a spec; "sparse" or "dense" in a spec forces one form.
     * Part of the table's definition: every worker must give the same. */
    const char *filter_push;
    const char *filter_pull;
    /* Managed communication (Bösen; docs/USAGE.md#managed-communication), for
     * SSP and ASP tables. bandwidth_mbits > 0 is a budget for every process
     * of the job that uses the table (the largest of its tables'): pushes, and
     * servers' replies and row pushes, are paced to it. With a priority, each
     * process also spends the spare budget between clocks: workers send
     * buffered rows early, servers push changed rows to the workers caching
     * them, queue_rows rows (0: 100) per message, chosen by the priority. */
    double bandwidth_mbits;
    loom_priority priority;
    uint32_t queue_rows;
} loom_table_opts;

#define LOOM_TABLE_OPTS_DEFAULT                                                                    \
    {                                                                                              \
        LOOM_F32, 1, LOOM_SPARSE, 0, 0, LOOM_SSP, 0, "sum", 0.1, 1.0, 0.0, 0.0, 1e-8, {0},         \
            LOOM_INIT_ZERO, 0.0, 0.0, 0, 1, 0, NULL, NULL, 0.0, LOOM_PRIORITY_NONE, 0              \
    }

/* Open (creating on first use) the table `name` with the given options.
 * Workers only. Returns LOOM_EMISMATCH if another worker opened it with other
 * options, LOOM_ENOTFOUND for an unknown updater. */
int loom_table_open(loom_node *node, const char *name, const loom_table_opts *opts,
                    loom_table **table);

const char *loom_table_name(const loom_table *t);
loom_node *loom_table_node(const loom_table *t);
const loom_table_opts *loom_table_options(const loom_table *t);

/* Read rows. keys may be unsorted and contain duplicates; out receives
 * n * width values of the table's type, row i for keys[i]. */
int loom_pull(loom_table *t, const uint64_t *keys, size_t n, void *out);
/* Same, asynchronous: keys and out must stay valid until loom_wait(ts). */
int loom_pull_async(loom_table *t, const uint64_t *keys, size_t n, void *out, loom_ts *ts);
/* Read the rows of every key in [begin, end) into out ((end-begin)*width values). */
int loom_pull_range(loom_table *t, uint64_t begin, uint64_t end, void *out);
int loom_pull_range_async(loom_table *t, uint64_t begin, uint64_t end, void *out, loom_ts *ts);

/* Read rows sparse, as CSR (the layout loom_push_sparse() takes): row i, for
 * keys[i], comes back as row_nnz[i] (column, value) pairs, its values whose
 * bits are not all 0 by ascending column, the columns next in cols and the
 * values next in vals (of the table's type). The same values as loom_pull()
 * of the same keys (keys as there); a row of zeros has no pairs. cols and
 * vals have room for cap pairs (n * width always suffices); *nnz receives
 * the number of pairs. LOOM_ELIMIT if there are more than cap (*nnz and
 * row_nnz are then set, cols and vals hold the first cap pairs). */
int loom_pull_sparse(loom_table *t, const uint64_t *keys, size_t n, uint32_t *row_nnz,
                     uint32_t *cols, void *vals, size_t cap, size_t *nnz);

/* Write deltas: vals holds n * width values, row i for keys[i]; duplicate keys
 * are combined. Buffered and coalesced per row in the update buffer, which is
 * sent at loom_clock(), loom_flush(), loom_barrier() or when it holds
 * flush_rows rows; with a priority (SSP, ASP), rows also go between those,
 * as the budget allows. */
int loom_push(loom_table *t, const uint64_t *keys, size_t n, const void *vals);
/* Send now, bypassing the buffer (Parameter-Server style): keys and vals must
 * stay valid and unchanged until loom_wait(ts) returns (successfully), which it
 * does once the servers have them (applied, except under BSP, where they apply
 * when the clock ends); after that the caller may free or reuse them: what
 * read-my-writes still needs of a push not yet applied, Loom has copied. If
 * loom_wait(ts) fails the job is failing: keep them until loom_finalize(). */
int loom_push_async(loom_table *t, const uint64_t *keys, size_t n, const void *vals, loom_ts *ts);
/* Push one delta row for every key in [begin, end); vals as for loom_push_async(). */
int loom_push_range_async(loom_table *t, uint64_t begin, uint64_t end, const void *vals,
                          loom_ts *ts);
/* Write deltas given sparse (CSR): row i, for keys[i], has row_nnz[i] values,
 * their columns next in cols (strictly ascending within a row, each below
 * the width) and the values next in vals (of the table's type). The same as
 * loom_push() of the dense rows they stand for (zero in every other column),
 * under every updater and consistency model, with read-my-writes as there;
 * a row with no values is a row of zeros. The update buffer keeps dense
 * rows: the values are added into them one by one, and the rows are scanned
 * when sent (loom_push_sparse_async() never makes them dense). Returns
 * LOOM_EINVAL for a column >= width, columns not ascending, more values than
 * the width or NULL arrays that have values to give, LOOM_EKEYRANGE for a key
 * outside the table; nothing is pushed then. */
int loom_push_sparse(loom_table *t, const uint64_t *keys, size_t n, const uint32_t *row_nnz,
                     const uint32_t *cols, const void *vals);
/* The same, sent now like loom_push_async(), but the arrays are copied: the
 * caller may reuse them as soon as it returns. With keys strictly ascending
 * the rows go on the wire in the sparse row encoding (docs/FILTERS.md)
 * straight from what was given, never as dense rows (unless the table's push
 * filters work on values, its spec says dense, or dense is smaller); other
 * keys are combined as loom_push_async() combines them. */
int loom_push_sparse_async(loom_table *t, const uint64_t *keys, size_t n, const uint32_t *row_nnz,
                           const uint32_t *cols, const void *vals, loom_ts *ts);
/* Send the update buffer now; ts completes once the servers have it and
 * every push of this table sent before it (by loom_clock() too), as for
 * loom_push_async(). */
int loom_flush(loom_table *t, loom_ts *ts);

#ifdef __cplusplus
}
#endif
#endif
