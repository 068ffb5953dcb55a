/* darray_value: the value types of distributed arrays (loom/darray.h,
 * loom_darray_type): doubles, floats, int32 and int64, one type an array.
 *
 * An array keeps its values in their own type (an int32 word id takes half a
 * double's memory; an int64 count stays exact past 2^53), so every step that
 * looks at a value rather than moving its bytes goes through here: its size,
 * the order of elements at one index (sorting must not depend on who held
 * them), and the double a loop's body sees and writes back (sums of hosted
 * elements are ps/rowops.h's, in the table's type). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "sched/darray_impl.h"

uint32_t darray_type_size(loom_darray_type t)
{
    switch (t) {
    case LOOM_DARRAY_F64:
        return sizeof(double);
    case LOOM_DARRAY_F32:
        return sizeof(float);
    case LOOM_DARRAY_I32:
        return sizeof(int32_t);
    case LOOM_DARRAY_I64:
        return sizeof(int64_t);
    }
    return 0;
}

double darray_value_get(loom_darray_type t, const void *p)
{
    double f64;
    float f32;
    int32_t i32;
    int64_t i64;
    switch (t) {
    case LOOM_DARRAY_F64:
        memcpy(&f64, p, sizeof f64);
        return f64;
    case LOOM_DARRAY_F32:
        memcpy(&f32, p, sizeof f32);
        return f32;
    case LOOM_DARRAY_I32:
        memcpy(&i32, p, sizeof i32);
        return i32;
    case LOOM_DARRAY_I64:
        memcpy(&i64, p, sizeof i64);
        return (double)i64;
    }
    return 0;
}

/* x rounded and held to [lo, hi] (NaN: 0); hi as a double may round up to
 * 2^63, which the comparison then keeps out. */
static int64_t held_integer(double x, double lo, double hi, int64_t ilo, int64_t ihi)
{
    if (isnan(x)) return 0;
    x = nearbyint(x);
    return x <= lo ? ilo : x >= hi ? ihi : (int64_t)x;
}

void darray_value_set(loom_darray_type t, void *p, double x)
{
    float f32 = (float)x;
    int32_t i32 = (int32_t)held_integer(x, INT32_MIN, INT32_MAX, INT32_MIN, INT32_MAX);
    int64_t i64 = held_integer(x, (double)INT64_MIN, (double)INT64_MAX, INT64_MIN, INT64_MAX);
    switch (t) {
    case LOOM_DARRAY_F64:
        memcpy(p, &x, sizeof x);
        break;
    case LOOM_DARRAY_F32:
        memcpy(p, &f32, sizeof f32);
        break;
    case LOOM_DARRAY_I32:
        memcpy(p, &i32, sizeof i32);
        break;
    case LOOM_DARRAY_I64:
        memcpy(p, &i64, sizeof i64);
        break;
    }
}

/* Two values of a floating type (NaNs last; -0 and +0, NaNs: by their bits). */
static int cmp_float(double va, double vb, uint64_t ba, uint64_t bb)
{
    if (isnan(va) != isnan(vb)) return isnan(va) ? 1 : -1;
    if (va != vb && !isnan(va)) return va < vb ? -1 : 1;
    return ba == bb ? 0 : ba < bb ? -1 : 1;
}

int darray_value_cmp(loom_darray_type t, const unsigned char *a, const unsigned char *b)
{
    switch (t) {
    case LOOM_DARRAY_F64: {
        double va, vb;
        uint64_t ba, bb;
        memcpy(&va, a, 8), memcpy(&vb, b, 8), memcpy(&ba, a, 8), memcpy(&bb, b, 8);
        return cmp_float(va, vb, ba, bb);
    }
    case LOOM_DARRAY_F32: {
        float va, vb;
        uint32_t ba, bb;
        memcpy(&va, a, 4), memcpy(&vb, b, 4), memcpy(&ba, a, 4), memcpy(&bb, b, 4);
        return cmp_float(va, vb, ba, bb);
    }
    case LOOM_DARRAY_I32: {
        int32_t va, vb;
        memcpy(&va, a, 4), memcpy(&vb, b, 4);
        return va == vb ? 0 : va < vb ? -1 : 1;
    }
    case LOOM_DARRAY_I64: {
        int64_t va, vb;
        memcpy(&va, a, 8), memcpy(&vb, b, 8);
        return va == vb ? 0 : va < vb ? -1 : 1;
    }
    }
    return 0;
}
