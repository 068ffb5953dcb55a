/* storage: the rows one server holds for one table partition.
 *
 * A partition covers the keys [begin, end). Dense storage allocates every row
 * up front in one array (key - begin is the row index); sparse storage keeps a
 * u64map from key to a slot in a growing row arena. Each row has `width`
 * values and, after them in a separate array, width * state_per_value values
 * of updater state (AdaGrad's accumulators, FTRL's z and n), zero-initialised.
 * Rows never written read as the table's initial value: zero, or a seeded
 * uniform/normal draw that depends only on (seed, key, column), so every
 * partitioning of the table gives the same initial model. */
#ifndef LOOM_PS_STORAGE_H
#define LOOM_PS_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#include "loom/table.h"

typedef struct ps_store ps_store;

typedef struct ps_store_spec {
    loom_type type;
    uint32_t width;
    uint32_t state_per_value;
    loom_storage storage;
    uint64_t begin, end; /* end > begin; for sparse, end may be 0 meaning 2^64 */
    loom_init_kind init;
    double init_a, init_b;
    uint64_t init_seed;
} ps_store_spec;

/* LOOM_EINVAL for a bad spec, LOOM_ENOMEM when the dense array cannot be had. */
int store_create(const ps_store_spec *spec, ps_store **out);
void store_destroy(ps_store *s);

/* The row for key (which must lie in [begin, end)), created with its initial
 * value if absent; *state (if not NULL) receives its state area. NULL on ENOMEM. */
void *store_row(ps_store *s, uint64_t key, void **state);
/* Copy the row for key into out without creating it (initial value if absent). */
void store_read(ps_store *s, uint64_t key, void *out);
/* Copy rows for sorted keys, or for every key of [begin, end), into out. */
void store_read_many(ps_store *s, const uint64_t *keys, size_t n, void *out);
void store_read_range(ps_store *s, uint64_t begin, uint64_t end, void *out);
/* Dense storage: the row array (key k's row at (k - begin) * row size), for
 * whole-message fast paths; NULL for sparse storage. */
void *store_dense_rows(ps_store *s);
/* Number of rows materialised (dense: all of them). */
size_t store_num_rows(const ps_store *s);
/* The initial value of a row (what store_read returns for an unwritten key). */
void store_initial_row(const ps_store_spec *spec, uint64_t key, void *out);

/* ---- changes, for incremental checkpoints (src/ft) ----
 * Once tracking is on, every row handed out by store_row() counts as changed,
 * and so does every row named to store_mark_changed() (writers that bypass
 * store_row, such as the dense fast path of a sum push). One byte per row. */
int store_track_changes(ps_store *s); /* 0 or LOOM_ENOMEM */
void store_mark_changed(ps_store *s, const uint64_t *keys, size_t n);
void store_mark_changed_range(ps_store *s, uint64_t begin, uint64_t end);
/* Call fn for every materialised row (only_changed: every changed one), value
 * and state (NULL without state), then forget the changes. Stops at, and
 * returns, fn's first non-zero result. */
typedef int (*store_row_fn)(void *ctx, uint64_t key, const void *row, const void *state);
int store_for_each(ps_store *s, int only_changed, store_row_fn fn, void *ctx);
/* Forget the changes so far (after a restore: the rows equal the checkpoint's). */
void store_forget_changes(ps_store *s);
/* Bytes of updater state per row (0: none). */
size_t store_state_bytes(const ps_store *s);

#endif
