/* Server-side updaters: how a pushed delta changes a row.
 *
 * Built in: "sum" (value += delta), "assign" (value = delta), and for float
 * tables "sgd", "adagrad" and "ftrl" (FTRL-proximal), which read the delta as a
 * gradient; docs/USAGE.md gives each formula. An application adds its own by
 * registering a function under a name before loom_init(): every process runs
 * the same program, so the servers find the function by the name the table
 * was opened with. */
#ifndef LOOM_UPDATER_H
#define LOOM_UPDATER_H

#include <stdint.h>

#include "table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One row update, handed to a user updater. */
typedef struct loom_update {
    loom_type type;              /* value type of the table */
    uint32_t width;              /* values per row */
    uint64_t key;                /* the row's key */
    void *value;                 /* width values, to update in place */
    void *state;                 /* state_per_value * width values of the same type, initially 0 */
    const void *delta;           /* width values pushed by a worker (coalesced per row) */
    const loom_table_opts *opts; /* the table's options: lr, l1, l2, params[] ... */
} loom_update;

typedef void (*loom_updater_fn)(const loom_update *u, void *user);

/* Register fn under name (at most LOOM_MAX_NAME bytes, not a built-in name).
 * state_per_value extra values per row value are kept for it on the server
 * (0 to 4). Returns LOOM_EINVAL for a bad name or count, LOOM_ELIMIT when the
 * registry (64 entries) is full; registering the same name again replaces it. */
int loom_updater_register(const char *name, uint32_t state_per_value, loom_updater_fn fn,
                          void *user);

#ifdef __cplusplus
}
#endif
#endif
