/* updater_impl: resolving an updater name and applying it to stored rows.
 *
 * The public registry (loom_updater_register) and the built-in rules live in
 * updater.c. A table resolves its updater once, at creation, into a
 * ps_updater; servers then apply whole batches of rows through it, with the
 * built-in math in tight per-type loops and user functions called per row. */
#ifndef LOOM_PS_UPDATER_IMPL_H
#define LOOM_PS_UPDATER_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "loom/updater.h"

typedef enum {
    UPD_SUM = 0,
    UPD_ASSIGN,
    UPD_SGD,
    UPD_ADAGRAD,
    UPD_FTRL,
    UPD_USER,
} upd_kind;

typedef struct ps_updater {
    upd_kind kind;
    uint32_t state_per_value; /* extra values per row value kept on the server */
    loom_updater_fn fn;       /* UPD_USER only */
    void *user;               /* UPD_USER only */
} ps_updater;

/* Resolve name for a table of value type t. LOOM_ENOTFOUND for an unknown
 * name, LOOM_EINVAL for a gradient updater on an integer table. */
int updater_resolve(const char *name, loom_type t, ps_updater *out);

/* How the client may combine two deltas for the same row before sending:
 * 1 = add them (every updater but assign), 0 = the later replaces the earlier. */
int updater_coalesces_by_sum(const ps_updater *u);

/* Apply one pushed delta row to a stored row (value and its state area).
 * Formulas (per value j, g = delta[j], w = value[j]):
 *   sum:     w += g
 *   assign:  w = g
 *   sgd:     w -= lr * (g + l2 * w)
 *   adagrad: n += g*g;  w -= lr * g / (sqrt(n) + eps)                  (state: n)
 *   ftrl:    McMahan et al. 2013, per coordinate, with alpha = lr:      (state: z, n)
 *            sigma = (sqrt(n + g*g) - sqrt(n)) / alpha; z += g - sigma * w; n += g*g;
 *            w = |z| <= l1 ? 0 : -(z - sign(z) * l1) / ((beta + sqrt(n)) / alpha + l2)
 * The state of adagrad is n[width]; of ftrl z[width] then n[width]. */
void updater_apply(const ps_updater *u, const loom_table_opts *o, loom_type t, uint32_t width,
                   uint64_t key, void *value, void *state, const void *delta);

#endif
