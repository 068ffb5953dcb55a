/* rowops: type-switched loops over rows of values; see rowops.h.
 *
 * Each function switches on the value type once and then runs a plain loop
 * over that C type. Integer tables are handled as uint32_t / uint64_t: C
 * allows reading a signed integer object through its unsigned counterpart,
 * and unsigned addition wraps, so adding two's-complement values that way is
 * exactly the wrapping signed addition we want, with no undefined overflow
 * and no implementation-defined conversion. */
#include "ps/rowops.h"

#include <string.h>

/* dst[i] += src[i], i < count, for one C type T (float, double, uint32_t, uint64_t). */
#define ADD_LOOP(T, dst, src, count)                                                               \
    do {                                                                                           \
        T *d_ = (T *)(dst);                                                                        \
        const T *s_ = (const T *)(src);                                                            \
        for (size_t i_ = 0; i_ < (count); i_++) d_[i_] += s_[i_];                                  \
    } while (0)

void rows_add(loom_type t, void *dst, const void *src, size_t count)
{
    switch (t) {
    case LOOM_F32:
        ADD_LOOP(float, dst, src, count);
        break;
    case LOOM_F64:
        ADD_LOOP(double, dst, src, count);
        break;
    case LOOM_I32:
        ADD_LOOP(uint32_t, dst, src, count);
        break;
    case LOOM_I64:
        ADD_LOOP(uint64_t, dst, src, count);
        break;
    }
}

/* For sorted or unsorted keys: base's row (keys[i] - base_key) += src's row i. */
#define ADD_INDEXED_LOOP(T, base, base_key, keys, n, width, src)                                   \
    do {                                                                                           \
        T *b_ = (T *)(base);                                                                       \
        const T *s_ = (const T *)(src);                                                            \
        for (size_t i_ = 0; i_ < (n); i_++) {                                                      \
            T *d_ = b_ + (size_t)((keys)[i_] - (base_key)) * (width);                              \
            for (size_t j_ = 0; j_ < (width); j_++) d_[j_] += s_[i_ * (width) + j_];               \
        }                                                                                          \
    } while (0)

void rows_add_indexed(loom_type t, size_t width, void *base, uint64_t base_key,
                      const uint64_t *keys, size_t n, const void *src)
{
    switch (t) {
    case LOOM_F32:
        ADD_INDEXED_LOOP(float, base, base_key, keys, n, width, src);
        break;
    case LOOM_F64:
        ADD_INDEXED_LOOP(double, base, base_key, keys, n, width, src);
        break;
    case LOOM_I32:
        ADD_INDEXED_LOOP(uint32_t, base, base_key, keys, n, width, src);
        break;
    case LOOM_I64:
        ADD_INDEXED_LOOP(uint64_t, base, base_key, keys, n, width, src);
        break;
    }
}

#define ADD_SPARSE_LOOP(T)                                                                         \
    do {                                                                                           \
        T *b_ = (T *)base;                                                                         \
        const T *v_ = (const T *)vals;                                                             \
        for (size_t i_ = 0; i_ < n; i_++) {                                                        \
            T *d_ = b_ + (size_t)(keys[i_] - base_key) * width;                                    \
            for (uint64_t e_ = off[i_]; e_ < off[i_ + 1]; e_++) d_[cols[e_]] += v_[e_];            \
        }                                                                                          \
    } while (0)

void rows_add_sparse(loom_type t, size_t width, void *base, uint64_t base_key, const uint64_t *keys,
                     size_t n, const uint64_t *off, const uint32_t *cols, const void *vals)
{
    switch (t) {
    case LOOM_F32:
        ADD_SPARSE_LOOP(float);
        break;
    case LOOM_F64:
        ADD_SPARSE_LOOP(double);
        break;
    case LOOM_I32:
        ADD_SPARSE_LOOP(uint32_t);
        break;
    case LOOM_I64:
        ADD_SPARSE_LOOP(uint64_t);
        break;
    }
}

/* out[slot_of[i]] += in[i] for rows of width values of type T (in rows_gather). */
#define GATHER_ADD(T)                                                                              \
    for (size_t i = 0; i < n; i++)                                                                 \
    ADD_LOOP(T, (T *)out + (size_t)slot_of[i] * width, (const T *)in + i * width, width)

void rows_gather(loom_type t, size_t width, const void *in, const uint32_t *slot_of, size_t n,
                 void *out, size_t nuniq, int assign)
{
    size_t row = width * loom_type_size(t);
    if (nuniq > 0 && row > 0) memset(out, 0, nuniq * row);
    if (assign) { /* in input order, so the last occurrence of a key wins */
        for (size_t i = 0; i < n; i++)
            memcpy((char *)out + slot_of[i] * row, (const char *)in + i * row, row);
        return;
    }
    switch (t) {
    case LOOM_F32:
        GATHER_ADD(float);
        break;
    case LOOM_F64:
        GATHER_ADD(double);
        break;
    case LOOM_I32:
        GATHER_ADD(uint32_t);
        break;
    case LOOM_I64:
        GATHER_ADD(uint64_t);
        break;
    }
}

void rows_scatter(loom_type t, size_t width, const void *uniq_rows, const uint32_t *slot_of,
                  size_t n, void *out)
{
    size_t row = width * loom_type_size(t);
    for (size_t i = 0; i < n; i++)
        memcpy((char *)out + i * row, (const char *)uniq_rows + slot_of[i] * row, row);
}
