/* decimal: the number syntax of the text readers (libsvm.c, ratings.c, bow.c),
 * parsed in place, fast, and exactly as the C library would.
 *
 * Integers are read digit by digit with an overflow check (decimal_scan_u64).
 * Real numbers are scanned once for their syntax into a mantissa and a
 * decimal exponent (decimal_scan), then converted: decimal_to_float gives
 * exactly what strtof() gives (the correctly rounded float), not
 * (float)strtod(), which rounds twice and is off by one unit now and then;
 * decimal_to_double gives strtod()'s double. Two fast paths, after Clinger,
 * avoid strto*() for the usual values: a mantissa m of at most 2^24 with a
 * decimal exponent e, |e| <= 10 ("1", "0.25", "-3.5e-2", "0.123457") is
 * m * 10^e or m / 10^-e computed in float, one IEEE operation on two exact
 * floats, hence correctly rounded. Otherwise, with m below 2^53 and
 * |e| <= 22, the same in double gives the correctly rounded double, and
 * rounding that to float is right unless the double lies exactly halfway
 * between two floats (or below float's normal range): midpoints are doubles,
 * so this is checked. Those cases and everything else (long mantissas, big
 * exponents) go to strtof() or strtod(), which run directly on the text: the
 * syntax was checked first and a byte that cannot continue a number follows
 * it (the readers' lines all end with '\n'), so they read exactly the token.
 * Callers switch the thread to the "C" locale around the parse
 * (textfile_c_locale), so a program's setlocale() cannot turn strto*()'s
 * decimal point into a comma.
 *
 * Everything is static inline: the readers' inner loops call these once per
 * number, and a call across translation units would cost more than the
 * parse of a short number. */
#ifndef LOOM_IO_DECIMAL_H
#define LOOM_IO_DECIMAL_H

#include <float.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DECIMAL_MAX_SIG 19     /* significant digits kept: 10^19 - 1 fits in uint64 */
#define DECIMAL_EXP_CAP 100000 /* exponents saturate here: far beyond any double */

/* Exact powers of ten: 10^22 is the largest that a double holds exactly. */
static const double decimal_pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                               1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                               1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
/* ... and 10^10 the largest a float holds exactly (5^10 < 2^24). */
static const float decimal_pow10_float[11] = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f,
                                              1e6f, 1e7f, 1e8f, 1e9f, 1e10f};

/* The value of a digit character; 10 or more for any other byte. */
static inline unsigned decimal_digit(char c)
{
    return (unsigned)(unsigned char)c - '0';
}

/* Scans the digits at p into *v. Returns the end of the digits (p itself if
 * there is none); *overflow is set if the value does not fit in 64 bits
 * (*v is then meaningless) and left alone otherwise. */
static inline const char *decimal_scan_u64(const char *p, uint64_t *v, int *overflow)
{
    uint64_t x = 0;
    for (unsigned c; (c = decimal_digit(*p)) < 10; p++) {
        /* x * 10 + c <= UINT64_MAX = 18446744073709551615 */
        if (x >= 1844674407370955161u && (x > 1844674407370955161u || c > 5)) *overflow = 1;
        x = x * 10 + c;
    }
    *v = x;
    return p;
}

/* A decimal number as written: value = (neg ? -1 : 1) * mant * 10^exp10,
 * exactly so when fast is set. */
typedef struct decimal {
    uint64_t mant;
    int exp10;
    int neg;
    int fast; /* every significant digit is in mant, and mant < 2^53 */
} decimal;

/* Scans [+-]digits[.digits][(e|E)[+-]digits] with at least one mantissa
 * digit. Returns the end of the number, or NULL if the syntax is wrong.
 * (Branch-free SWAR digit parsing was tried: it was slower on every file
 * measured, because it turns the pointer's advance into a chain of data
 * dependencies that branch prediction otherwise runs ahead of.) */
static inline const char *decimal_scan(const char *p, decimal *x)
{
    uint64_t m = 0;
    int sig = 0, dropped = 0;
    ptrdiff_t e = 0; /* digit counts are bounded by the file size: no overflow */
    unsigned c;

    x->neg = *p == '-';
    if (*p == '+' || *p == '-') p++;
    const char *digits = p;
    /* Digits past DECIMAL_MAX_SIG significant ones are dropped, and with them
     * the fast paths: mant and exp10 then no longer matter, strto*() reads
     * the text. */
    for (; (c = decimal_digit(*p)) < 10; p++) {
        if (sig < DECIMAL_MAX_SIG) {
            m = m * 10 + c;
            sig += m != 0; /* leading zeros are not significant */
        } else {
            dropped = 1;
        }
    }
    if (*p == '.') {
        digits++; /* the point is not a digit */
        for (p++; (c = decimal_digit(*p)) < 10; p++) {
            if (sig < DECIMAL_MAX_SIG) {
                m = m * 10 + c;
                sig += m != 0;
                e--;
            } else {
                dropped = 1;
            }
        }
    }
    if (p == digits) return NULL;
    if (*p == 'e' || *p == 'E') {
        const char *q = p + 1;
        int eneg = *q == '-', ev = 0;
        if (*q == '+' || *q == '-') q++;
        if (decimal_digit(*q) >= 10) return NULL;
        for (; (c = decimal_digit(*q)) < 10; q++)
            if (ev < DECIMAL_EXP_CAP) ev = ev * 10 + (int)c;
        e += eneg ? -ev : ev;
        p = q;
    }
    x->mant = m;
    /* Only |exp10| <= 22 takes the fast path: clamping changes nothing. */
    x->exp10 = e > DECIMAL_EXP_CAP    ? DECIMAL_EXP_CAP
               : e < -DECIMAL_EXP_CAP ? -DECIMAL_EXP_CAP
                                      : (int)e;
    x->fast = !dropped && m <= (uint64_t)1 << 53;
    return p;
}

/* The fast paths need IEEE operations rounded once, to the type's own
 * precision; x87 (FLT_EVAL_METHOD 2) would round twice, so there everything
 * goes to strtod()/strtof(). */
#define DECIMAL_ROUNDS_ONCE (FLT_EVAL_METHOD == 0)

/* The double nearest to the decimal (strtod's result); s is its text. */
static inline double decimal_to_double(const decimal *x, const char *s)
{
    if (DECIMAL_ROUNDS_ONCE && x->fast && x->exp10 >= -22 && x->exp10 <= 22) {
        double v = (double)x->mant;
        v = x->exp10 < 0 ? v / decimal_pow10_exact[-x->exp10] : v * decimal_pow10_exact[x->exp10];
        return x->neg ? -v : v;
    }
    if (x->mant == 0) return x->neg ? -0.0 : 0.0; /* no digit was dropped: exactly 0 */
    return strtod(s, NULL);
}

/* Whether rounding the double v to float could differ from rounding the
 * decimal it came from: v lies exactly halfway between two floats (the 29
 * bits below float's 24-bit significand are 1000...0), or below float's
 * normal range, where the halfway bit sits elsewhere. */
static inline int decimal_float_unsafe(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    unsigned biased = (unsigned)(b >> 52) & 0x7ff;
    return biased < 1023 - 126 || (b & 0x1fffffff) == 0x10000000;
}

/* The float nearest to the decimal (strtof's result); s is its text. */
static inline float decimal_to_float(const decimal *x, const char *s)
{
    if (DECIMAL_ROUNDS_ONCE && x->fast && x->exp10 >= -22 && x->exp10 <= 22) {
        /* Most values ("1", "0.25", "0.123457") have a mantissa below 2^24
         * and a small exponent: one float operation on exact floats. */
        if (x->mant <= 1 << 24 && x->exp10 >= -10 && x->exp10 <= 10) {
            float f = (float)x->mant;
            f = x->exp10 < 0 ? f / decimal_pow10_float[-x->exp10]
                             : f * decimal_pow10_float[x->exp10];
            return x->neg ? -f : f;
        }
        double v = (double)x->mant;
        v = x->exp10 < 0 ? v / decimal_pow10_exact[-x->exp10] : v * decimal_pow10_exact[x->exp10];
        if (!decimal_float_unsafe(v)) return (float)(x->neg ? -v : v);
    }
    if (x->mant == 0) return x->neg ? -0.0f : 0.0f;
    return strtof(s, NULL);
}

#endif
