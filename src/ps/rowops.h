/* rowops: arithmetic on rows of a runtime-chosen value type.
 *
 * Tables hold f32, f64, i32 or i64 values; these helpers switch on the type
 * once per call and loop over `count` values, so callers stay type-agnostic
 * without paying a switch per value. Integer addition wraps (two's complement,
 * computed on unsigned values) rather than being undefined on overflow. */
#ifndef LOOM_PS_ROWOPS_H
#define LOOM_PS_ROWOPS_H

#include <stddef.h>
#include <stdint.h>

#include "loom/table.h"

/* dst[i] += src[i] for i < count */
void rows_add(loom_type t, void *dst, const void *src, size_t count);
/* Scattered add into an array of rows: for i < n, the row of key keys[i] in
 * base (row index keys[i] - base_key, rows of `width` values) += row i of src. */
void rows_add_indexed(loom_type t, size_t width, void *base, uint64_t base_key,
                      const uint64_t *keys, size_t n, const void *src);
/* rows_add_indexed of rows given sparse: row i's values are vals[off[i] ..
 * off[i + 1]), at columns cols[...] (each below width), of a row otherwise 0. */
void rows_add_sparse(loom_type t, size_t width, void *base, uint64_t base_key, const uint64_t *keys,
                     size_t n, const uint64_t *off, const uint32_t *cols, const void *vals);
/* Gather with duplicates combined: for i < n, out[slot_of[i]] (op)= in[i], rows of
 * `width` values; out has nuniq rows and is zeroed first. op is add, or assign
 * (the last occurrence wins) when assign != 0. */
void rows_gather(loom_type t, size_t width, const void *in, const uint32_t *slot_of, size_t n,
                 void *out, size_t nuniq, int assign);
/* Scatter: for i < n, out[i] = uniq_rows[slot_of[i]] (rows of width values). */
void rows_scatter(loom_type t, size_t width, const void *uniq_rows, const uint32_t *slot_of,
                  size_t n, void *out);

#endif
