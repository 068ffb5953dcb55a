/* libsvm: the LIBSVM reader; one worker's share of one shared file.
 *
 * Sharding. The file is mapped, not read. Share i of n owns every line whose
 * first byte lies in the byte range [i*size/n, (i+1)*size/n): a share whose
 * range starts mid-line skips to the next line start, and a share's last line
 * may run past its range end into the next one. Every line starts in exactly
 * one range, so every line is read by exactly one share, and a range holding
 * no line start gives an empty share. Line numbers in messages are absolute:
 * a share first counts the newlines before its first line.
 *
 * Sentinel. Every line of the mapping that the parser sees ends with '\n',
 * except possibly the file's last line; that one line is copied and given a
 * newline. So every token loop stops at a byte that cannot continue the token
 * (at the latest the newline), and needs no end-of-buffer check.
 *
 * Numbers. Ids are parsed digit by digit with an overflow check. Values are
 * stored as float and are exactly what strtof() gives (the correctly rounded
 * float), not (float)strtod(), which rounds twice and is off by one unit now
 * and then. Two fast paths, after Clinger, avoid strtof() for the usual
 * values: a mantissa m of at most 2^24 with a decimal exponent e, |e| <= 10
 * ("1", "0.25", "-3.5e-2", "0.123457") is m * 10^e or m / 10^-e computed in
 * float, one IEEE operation on two exact floats, hence correctly rounded.
 * Otherwise, with m below 2^53 and |e| <= 22, the same in double gives the
 * correctly rounded double, and rounding that to float is right unless the
 * double lies exactly halfway between two floats (or below float's normal
 * range): midpoints are doubles, so this is checked. Those cases and
 * everything else (long mantissas, big exponents) go to strtof(); labels, as
 * doubles, to the double path or strtod(). The strto* functions run directly
 * on the mapped bytes: the token's syntax was checked first and a delimiter
 * (at the latest the newline) follows it, so they read exactly the token.
 * Around the parse the thread's locale is "C", so a program's setlocale()
 * cannot turn their decimal point into a comma.
 *
 * Id base. LOOM_IDS_AUTO must decide alike in every share, so each share
 * scans the whole file for an id 0 (has_id_zero): 2-6 GB/s, against about
 * 0.5 GB/s for parsing, so with n shares on one machine the scans add about
 * n/10 of a single read's time; across machines each worker also reads the
 * whole file from its disk or network. Pass the base explicitly for big files
 * read by many workers. */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom/data.h"
#include "loom/error.h"

#define TOKEN_SHOWN 40     /* at most this many bytes of a bad token are quoted */
#define SCAN_BLOCK  4096   /* bytes per block of the id-0 scan */
#define MAX_SIG     19     /* significant digits kept: 10^19 - 1 fits in uint64 */
#define EXP_CAP     100000 /* exponents saturate here: far beyond any double */

/* The parse of one share. */
typedef struct reader {
    const char *path;
    loom_libsvm_opts o;
    int one_based;
    loom_dataset *d;
    size_t cap_rows; /* capacity of d->label (d->row holds one more) */
    size_t cap_nnz;  /* capacity of d->idx and d->val */
    size_t line;     /* absolute 1-based number of the line being parsed */
    const char *at;  /* after a malformed line: where the parser stopped */
    char msg[160];   /* after a malformed line: what is wrong */
} reader;

/* Exact powers of ten: 10^22 is the largest that a double holds exactly. */
static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
/* ... and 10^10 the largest a float holds exactly (5^10 < 2^24). */
static const float pow10_float[11] = {1e0f, 1e1f, 1e2f, 1e3f, 1e4f, 1e5f,
                                      1e6f, 1e7f, 1e8f, 1e9f, 1e10f};

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int bad(reader *r, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Records why the current line is malformed; returns LOOM_EINVAL. */
static int bad(reader *r, const char *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    r->at = at;
    return LOOM_EINVAL;
}

static inline int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* End of the line's content: the newline, or "\r\n". */
static inline int at_eol(const char *p)
{
    return *p == '\n' || (*p == '\r' && p[1] == '\n');
}

/* The value of a digit character; 10 or more for any other byte. */
static inline unsigned digit(char c)
{
    return (unsigned)(unsigned char)c - '0';
}

/* Whether a token ends at p: a blank, the end of the line or a comment. */
static inline int ends_token(const char *p)
{
    return is_blank(*p) || *p == '#' || at_eol(p);
}

/* The token at p, as quoted in a message: up to its end or TOKEN_SHOWN bytes,
 * unprintable bytes as '?' (the input may be binary garbage). */
static const char *quote(const char *p, char out[TOKEN_SHOWN + 4])
{
    size_t n = 0;
    for (; n < TOKEN_SHOWN && !ends_token(p + n); n++) {
        unsigned char c = (unsigned char)p[n];
        out[n] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (n == TOKEN_SHOWN && !ends_token(p + n)) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
    return out;
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
static inline const char *scan_decimal(const char *p, decimal *x)
{
    uint64_t m = 0;
    int sig = 0, dropped = 0;
    ptrdiff_t e = 0; /* digit counts are bounded by the file size: no overflow */
    unsigned c;

    x->neg = *p == '-';
    if (*p == '+' || *p == '-') p++;
    const char *digits = p;
    /* Digits past MAX_SIG significant ones are dropped, and with them the
     * fast paths: mant and exp10 then no longer matter, strtof() reads the
     * text. */
    for (; (c = digit(*p)) < 10; p++) {
        if (sig < MAX_SIG) {
            m = m * 10 + c;
            sig += m != 0; /* leading zeros are not significant */
        } else {
            dropped = 1;
        }
    }
    if (*p == '.') {
        digits++; /* the point is not a digit */
        for (p++; (c = digit(*p)) < 10; p++) {
            if (sig < MAX_SIG) {
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
        if (digit(*q) >= 10) return NULL;
        for (; (c = digit(*q)) < 10; q++)
            if (ev < EXP_CAP) ev = ev * 10 + (int)c;
        e += eneg ? -ev : ev;
        p = q;
    }
    x->mant = m;
    /* Only |exp10| <= 22 takes the fast path: clamping changes nothing. */
    x->exp10 = e > EXP_CAP ? EXP_CAP : e < -EXP_CAP ? -EXP_CAP : (int)e;
    x->fast = !dropped && m <= (uint64_t)1 << 53;
    return p;
}

/* The fast paths need IEEE operations rounded once, to the type's own
 * precision; x87 (FLT_EVAL_METHOD 2) would round twice, so there everything
 * goes to strtod()/strtof(). */
#define ROUNDS_ONCE (FLT_EVAL_METHOD == 0)

/* The double nearest to the decimal; s is its text (for strtod). */
static double to_double(const decimal *x, const char *s)
{
    if (ROUNDS_ONCE && x->fast && x->exp10 >= -22 && x->exp10 <= 22) {
        double v = (double)x->mant;
        v = x->exp10 < 0 ? v / pow10_exact[-x->exp10] : v * pow10_exact[x->exp10];
        return x->neg ? -v : v;
    }
    if (x->mant == 0) return x->neg ? -0.0 : 0.0; /* no digit was dropped: exactly 0 */
    return strtod(s, NULL);
}

/* Whether rounding the double v to float could differ from rounding the
 * decimal it came from: v lies exactly halfway between two floats (the 29
 * bits below float's 24-bit significand are 1000...0), or below float's
 * normal range, where the halfway bit sits elsewhere. */
static inline int float_unsafe(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    unsigned biased = (unsigned)(b >> 52) & 0x7ff;
    return biased < 1023 - 126 || (b & 0x1fffffff) == 0x10000000;
}

/* The float nearest to the decimal (strtof's result); s is its text. */
static inline float to_float(const decimal *x, const char *s)
{
    if (ROUNDS_ONCE && x->fast && x->exp10 >= -22 && x->exp10 <= 22) {
        /* Most values ("1", "0.25", "0.123457") have a mantissa below 2^24
         * and a small exponent: one float operation on exact floats. */
        if (x->mant <= 1 << 24 && x->exp10 >= -10 && x->exp10 <= 10) {
            float f = (float)x->mant;
            f = x->exp10 < 0 ? f / pow10_float[-x->exp10] : f * pow10_float[x->exp10];
            return x->neg ? -f : f;
        }
        double v = (double)x->mant;
        v = x->exp10 < 0 ? v / pow10_exact[-x->exp10] : v * pow10_exact[x->exp10];
        if (!float_unsafe(v)) return (float)(x->neg ? -v : v);
    }
    if (x->mant == 0) return x->neg ? -0.0f : 0.0f;
    return strtof(s, NULL);
}

/* Makes room for one more row; d->row has rows + 1 entries. */
static int grow_rows(reader *r)
{
    loom_dataset *d = r->d;
    size_t cap = r->cap_rows * 2;
    double *label = realloc(d->label, cap * sizeof *label);
    if (!label) return LOOM_ENOMEM;
    d->label = label;
    size_t *row = realloc(d->row, (cap + 1) * sizeof *row);
    if (!row) return LOOM_ENOMEM;
    d->row = row;
    r->cap_rows = cap;
    return 0;
}

static int grow_nnz(reader *r)
{
    loom_dataset *d = r->d;
    size_t cap = r->cap_nnz * 2;
    uint64_t *idx = realloc(d->idx, cap * sizeof *idx);
    if (!idx) return LOOM_ENOMEM;
    d->idx = idx;
    float *val = realloc(d->val, cap * sizeof *val);
    if (!val) return LOOM_ENOMEM;
    d->val = val;
    r->cap_nnz = cap;
    return 0;
}

/* Parses the line at p, which ends with a newline before end, and appends its
 * row unless it is blank or a comment. Sets *next to the next line's start.
 * Returns 0, LOOM_EINVAL (r->msg and r->at tell what and where; nothing was
 * appended) or LOOM_ENOMEM. */
static int parse_line(reader *r, const char *p, const char *end, const char **next)
{
    loom_dataset *d = r->d;
    char shown[TOKEN_SHOWN + 4];
    decimal x;

    while (is_blank(*p)) p++;
    if (*p == '#' || at_eol(p)) { /* blank or comment line: no row */
        *next = (const char *)memchr(p, '\n', (size_t)(end - p)) + 1;
        return 0;
    }

    const char *tok = p;
    p = scan_decimal(tok, &x);
    if (!p || !ends_token(p)) return bad(r, tok, "bad label '%s'", quote(tok, shown));
    double label = to_double(&x, tok);
    if (r->o.labels == LOOM_LABELS_CLASS) {
        if (label == 0.0)
            label = -1.0;
        else if (label != 1.0 && label != -1.0)
            return bad(r, tok, "label '%s' is not +1, -1, 1 or 0", quote(tok, shown));
    } else if (!isfinite(label)) {
        return bad(r, tok, "label '%s' out of range", quote(tok, shown));
    }

    while (is_blank(*p)) p++;
    /* Short-circuit order keeps every read before the first mismatch, and the
     * newline mismatches. */
    if (p[0] == 'q' && p[1] == 'i' && p[2] == 'd' && p[3] == ':') {
        tok = p;
        for (p += 4; digit(*p) < 10;) p++;
        if (p == tok + 4 || !ends_token(p)) return bad(r, tok, "bad qid '%s'", quote(tok, shown));
    }

    /* Locals, not d->...: stores into idx[] may alias size_t fields, which
     * would make the compiler reload them for every feature. */
    const size_t first = d->nnz;
    size_t n = first, cap = r->cap_nnz;
    uint64_t *idx = d->idx;
    float *val = d->val;
    const uint64_t base = r->one_based ? 1 : 0;
    for (;;) {
        while (is_blank(*p)) p++;
        if (*p == '#' || at_eol(p)) break;

        tok = p;
        uint64_t id = 0;
        int overflow = 0;
        for (unsigned c; (c = digit(*p)) < 10; p++) {
            /* id * 10 + c <= UINT64_MAX = 18446744073709551615 */
            if (id >= 1844674407370955161u && (id > 1844674407370955161u || c > 5)) overflow = 1;
            id = id * 10 + c;
        }
        if (p == tok || *p != ':') return bad(r, tok, "bad feature '%s'", quote(tok, shown));
        /* 0-based UINT64_MAX is out too: max_feature, 1 + the id, must fit */
        if (overflow || (id == UINT64_MAX && !base)) {
            /* the digits alone: the quote would run on over ':' and the value */
            int len = (int)(p - tok) < TOKEN_SHOWN ? (int)(p - tok) : TOKEN_SHOWN;
            return bad(r, tok, "feature id '%.*s' out of range", len, tok);
        }
        if (id < base) return bad(r, tok, "feature id 0 in a 1-based file");
        if (n > first && id - base <= idx[n - 1])
            return bad(r, tok, "feature ids not ascending (%" PRIu64 " after %" PRIu64 ")", id,
                       idx[n - 1] + base);
        if (r->o.max_features && id - base >= r->o.max_features)
            return bad(r, tok, "feature id %" PRIu64 " is beyond max_features %" PRIu64, id,
                       r->o.max_features);

        const char *vt = ++p;
        p = scan_decimal(vt, &x);
        if (!p || !ends_token(p)) return bad(r, vt, "bad feature value '%s'", quote(vt, shown));
        float v = to_float(&x, vt);
        if (!isfinite(v)) return bad(r, vt, "feature value '%s' out of range", quote(vt, shown));

        if (n == cap) {
            if (grow_nnz(r)) return LOOM_ENOMEM;
            idx = d->idx;
            val = d->val;
            cap = r->cap_nnz;
        }
        idx[n] = id - base;
        val[n] = v;
        n++;
    }

    if (d->rows == r->cap_rows && grow_rows(r)) return LOOM_ENOMEM;
    d->label[d->rows] = label;
    d->row[++d->rows] = n;
    d->nnz = n;
    if (n > first && idx[n - 1] >= d->max_feature) d->max_feature = idx[n - 1] + 1;
    *next = (const char *)memchr(p, '\n', (size_t)(end - p)) + 1;
    return 0;
}

/* Parses the lines starting in [p, stop); every one ends with a newline
 * before end. */
static int parse_lines(reader *r, const char *p, const char *stop, const char *end, char *err,
                       size_t errlen)
{
    while (p < stop) {
        int rc = parse_line(r, p, end, &p);
        if (rc == LOOM_EINVAL && r->o.skip_bad) {
            r->d->skipped++;
            p = (const char *)memchr(r->at, '\n', (size_t)(end - r->at)) + 1;
        } else if (rc == LOOM_EINVAL) {
            set_err(err, errlen, "%s:%zu: %s", r->path, r->line, r->msg);
            return rc;
        } else if (rc) {
            set_err(err, errlen, "%s:%zu: out of memory", r->path, r->line);
            return rc;
        }
        r->line++;
    }
    return 0;
}

/* Newlines in [p, p + n). glibc's memchr runs at 10-20 GB/s here, with any
 * compiler; a counting loop needs the auto-vectoriser (gcc -O3) to match it. */
static size_t count_newlines(const char *p, size_t n)
{
    size_t count = 0;
    for (const char *e = p + n; (p = memchr(p, '\n', (size_t)(e - p))); p++) count++;
    return count;
}

#define ONES 0x0101010101010101u

/* Eight bytes at p as a word in the machine's byte order: one load. */
static inline uint64_t load8(const char *p)
{
    uint64_t w;
    memcpy(&w, p, sizeof w);
    return w;
}

/* The high bit of every byte of w equal to c. Exact: (x & 0x7f) + 0x7f stays
 * below 0x100, so no carry crosses into the next byte. */
static inline uint64_t bytes_equal(uint64_t w, unsigned char c)
{
    uint64_t x = w ^ c * ONES;
    return ~(((x & 0x7f * ONES) + 0x7f * ONES) | x | 0x7f * ONES);
}

/* Nonzero if one of s[i .. i + 8) could end an id 0: a ':' after "0" after a
 * blank, or after "00" after a blank or another '0'. Ids that are multiples
 * of 1000 are false candidates (rare); ids like 100 are not. */
static inline uint64_t candidates8(const char *s, size_t i)
{
    uint64_t w2 = load8(s + i - 2), w3 = load8(s + i - 3);
    uint64_t blank2 = bytes_equal(w2, ' ') | bytes_equal(w2, '\t');
    uint64_t lead3 = bytes_equal(w3, ' ') | bytes_equal(w3, '\t') | bytes_equal(w3, '0');
    return bytes_equal(load8(s + i), ':') & bytes_equal(load8(s + i - 1), '0') &
           (blank2 | (bytes_equal(w2, '0') & lead3));
}

/* Whether the ':' at s[i], after a '0', ends an id 0 ("0:", "00:") outside
 * a comment and not in the label. */
static int is_id_zero(const char *s, size_t i)
{
    size_t j = i - 1;
    while (j > 0 && s[j - 1] == '0') j--;
    if (j == 0 || !is_blank(s[j - 1])) return 0; /* "1000:", or the file's start */
    size_t ls = j - 1;
    while (ls > 0 && s[ls - 1] != '\n') ls--;
    size_t k = ls;
    while (is_blank(s[k])) k++;
    if (k == j) return 0; /* the line's first token: a (bad) label, not an id */
    return memchr(s + ls, '#', j - ls) == NULL;
}

/* Whether an id 0 appears anywhere in the file. Blocks of 4 KiB are tested
 * eight bytes at a time without a branch (2-5 GB/s with gcc or clang, -O2 or
 * -O3); only the words of a block with a candidate are looked at byte by
 * byte (which byte of the word flagged it depends on the byte order, so all
 * eight are). A ':' at s[1] or s[2] can only follow the file's first token, a
 * label, so the scan starts at s[3]; the last size % 8 bytes go one by one. */
static int has_id_zero(const char *s, size_t size)
{
    size_t words_end = size < 3 ? 3 : 3 + (size - 3) / 8 * 8, i;
    for (size_t b = 3; b < words_end; b += SCAN_BLOCK) {
        size_t e = words_end - b < SCAN_BLOCK ? words_end : b + SCAN_BLOCK;
        uint64_t any = 0;
        for (i = b; i < e; i += 8) any |= candidates8(s, i);
        if (!any) continue;
        for (i = b; i < e; i += 8) {
            if (!candidates8(s, i)) continue;
            for (size_t j = i; j < i + 8; j++)
                if (s[j] == ':' && s[j - 1] == '0' && is_id_zero(s, j)) return 1;
        }
    }
    for (i = words_end; i < size; i++)
        if (s[i] == ':' && s[i - 1] == '0' && is_id_zero(s, i)) return 1;
    return 0;
}

/* Whole contents of a non-regular file (pipe, device), newline-terminated.
 * Returns 0, LOOM_ENOMEM, or -1 with errno set. */
static int slurp(int fd, char **buf, size_t *size)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    if (!b) return LOOM_ENOMEM;
    for (;;) {
        if (n + 1 >= cap) { /* keep a byte for the final newline */
            char *nb = realloc(b, cap *= 2);
            if (!nb) {
                free(b);
                return LOOM_ENOMEM;
            }
            b = nb;
        }
        ssize_t k = read(fd, b + n, cap - n - 1);
        if (k == 0) break;
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            int e = errno;
            free(b);
            errno = e;
            return -1;
        }
        n += (size_t)k;
    }
    if (n && b[n - 1] != '\n') b[n++] = '\n';
    *buf = b;
    *size = n;
    return 0;
}

/* floor(i * size / n) without overflowing 64 bits. */
static size_t share_edge(size_t size, int i, int n)
{
    size_t q = size / (size_t)n, rem = size % (size_t)n;
    return q * (size_t)i + rem * (size_t)i / (size_t)n;
}

/* Parses the share [lo, hi) of the file s[0, size): lines starting in it. */
static int read_share(reader *r, const char *s, size_t size, size_t lo, size_t hi, char *err,
                      size_t errlen)
{
    loom_dataset *d = r->d;
    size_t start = lo;
    if (start > 0 && s[start - 1] != '\n') {
        const char *nl = memchr(s + start, '\n', size - start);
        start = nl ? (size_t)(nl - s) + 1 : size;
    }
    d->first_line = 1 + count_newlines(s, start);
    r->line = d->first_line;

    /* tail: where the last line starts if it lacks its newline, else size */
    size_t tail = size;
    if (size > 0 && s[size - 1] != '\n')
        for (tail = size - 1; tail > 0 && s[tail - 1] != '\n';) tail--;

    const char *stop = s + (hi < tail ? hi : tail);
    int rc = parse_lines(r, s + start, stop, s + tail, err, errlen);
    if (rc || tail == size || tail < start || tail >= hi) return rc;

    size_t len = size - tail;
    char *copy = malloc(len + 1);
    if (!copy) {
        set_err(err, errlen, "%s: out of memory", r->path);
        return LOOM_ENOMEM;
    }
    memcpy(copy, s + tail, len);
    copy[len] = '\n';
    rc = parse_lines(r, copy, copy + len + 1, copy + len + 1, err, errlen);
    free(copy);
    return rc;
}

/* A new dataset for a share of `bytes` bytes. Its arrays start at sizes that
 * rarely need growing (a9a has 70 bytes per row and 5 per nonzero); untouched
 * capacity costs address space, not memory, and is trimmed at the end. */
static int new_dataset(reader *r, size_t bytes)
{
    loom_dataset *d = r->d = calloc(1, sizeof *d);
    if (!d) return LOOM_ENOMEM;
    d->bytes = bytes;
    r->cap_rows = bytes / 32 + 16;
    r->cap_nnz = bytes / 4 + 16;
    d->label = malloc(r->cap_rows * sizeof *d->label);
    d->row = malloc((r->cap_rows + 1) * sizeof *d->row);
    d->idx = malloc(r->cap_nnz * sizeof *d->idx);
    d->val = malloc(r->cap_nnz * sizeof *d->val);
    if (!d->label || !d->row || !d->idx || !d->val) return LOOM_ENOMEM;
    d->row[0] = 0;
    return 0;
}

/* Shrinks the arrays to their contents; a failed shrink keeps the larger
 * block, which is still valid. */
static void trim(loom_dataset *d)
{
    size_t rows = d->rows ? d->rows : 1, nnz = d->nnz ? d->nnz : 1;
    void *t;
    if ((t = realloc(d->label, rows * sizeof *d->label))) d->label = t;
    if ((t = realloc(d->row, (d->rows + 1) * sizeof *d->row))) d->row = t;
    if ((t = realloc(d->idx, nnz * sizeof *d->idx))) d->idx = t;
    if ((t = realloc(d->val, nnz * sizeof *d->val))) d->val = t;
}

/* Reads share `shard` of the file contents s[0, size) into r->d, parsing in
 * the "C" locale. */
static int parse_file(reader *r, const char *s, size_t size, int shard, int nshards, char *err,
                      size_t errlen)
{
    size_t lo = share_edge(size, shard, nshards), hi = share_edge(size, shard + 1, nshards);
    locale_t c_locale;
    if (new_dataset(r, hi - lo) || !(c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0))) {
        set_err(err, errlen, "%s: out of memory", r->path);
        return LOOM_ENOMEM;
    }
    r->one_based =
        r->o.ids == LOOM_IDS_ONE_BASED || (r->o.ids == LOOM_IDS_AUTO && !has_id_zero(s, size));
    locale_t old = uselocale(c_locale);
    int rc = read_share(r, s, size, lo, hi, err, errlen);
    uselocale(old);
    freelocale(c_locale);
    if (!rc) trim(r->d);
    return rc;
}

/* A file's contents: mapped if it is a regular file, else (a pipe, a
 * device) read whole into memory, which only one share can do. */
typedef struct contents {
    const char *s;
    size_t size;
    void *map;    /* the mapping, or NULL */
    char *loaded; /* the bytes read, or NULL */
} contents;

static int load(const char *path, int nshards, contents *c, char *err, size_t errlen)
{
    char why[128];
    *c = (contents){.s = ""};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        strerror_r(e, why, sizeof why);
        set_err(err, errlen, "%s: cannot open: %s", path, why);
        return e == ENOENT || e == ENOTDIR ? LOOM_ENOTFOUND : LOOM_EINVAL;
    }
    struct stat st;
    int rc = 0, e = fstat(fd, &st) < 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
    if (e) {
        strerror_r(e, why, sizeof why);
        set_err(err, errlen, "%s: cannot read: %s", path, why);
        rc = LOOM_EINVAL;
    } else if (S_ISREG(st.st_mode) && (uintmax_t)st.st_size > SIZE_MAX / 2) {
        set_err(err, errlen, "%s: file too large to map", path);
        rc = LOOM_EINVAL;
    } else if (S_ISREG(st.st_mode) && st.st_size > 0) { /* mmap of 0 bytes fails */
        c->size = (size_t)st.st_size;
        c->map = mmap(NULL, c->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (c->map == MAP_FAILED) {
            e = errno;
            c->map = NULL;
            strerror_r(e, why, sizeof why);
            set_err(err, errlen, "%s: cannot map: %s", path, why);
            rc = e == ENOMEM ? LOOM_ENOMEM : LOOM_EINVAL;
        } else {
            posix_madvise(c->map, c->size, POSIX_MADV_SEQUENTIAL);
            c->s = c->map;
        }
    } else if (!S_ISREG(st.st_mode) && nshards > 1) {
        /* A pipe's bytes go to whoever reads them first: it cannot be shared. */
        set_err(err, errlen, "%s: not a regular file, cannot read a share of it", path);
        rc = LOOM_EINVAL;
    } else if (!S_ISREG(st.st_mode)) {
        rc = slurp(fd, &c->loaded, &c->size);
        if (rc < 0) strerror_r(errno, why, sizeof why);
        if (rc) set_err(err, errlen, "%s: cannot read: %s", path, rc < 0 ? why : "out of memory");
        if (rc < 0) rc = LOOM_EINVAL;
        if (!rc) c->s = c->loaded;
    }
    close(fd); /* a mapping stays valid */
    return rc;
}

int loom_libsvm_read(const char *path, int shard, int nshards, const loom_libsvm_opts *opts,
                     loom_dataset **out, char *err, size_t errlen)
{
    static const loom_libsvm_opts defaults = LOOM_LIBSVM_OPTS_DEFAULT;

    if (out) *out = NULL;
    if (!path || !out || nshards < 1 || shard < 0 || shard >= nshards) {
        set_err(err, errlen, "%s: invalid arguments (share %d of %d)", path ? path : "(null)",
                shard, nshards);
        return LOOM_EINVAL;
    }
    reader r = {.path = path, .o = opts ? *opts : defaults};
    if (r.o.ids > LOOM_IDS_ZERO_BASED || r.o.labels > LOOM_LABELS_REAL) {
        set_err(err, errlen, "%s: invalid options", path);
        return LOOM_EINVAL;
    }
    contents c;
    int rc = load(path, nshards, &c, err, errlen);
    if (!rc) rc = parse_file(&r, c.s, c.size, shard, nshards, err, errlen);
    if (c.map) munmap(c.map, c.size);
    free(c.loaded);
    if (rc) {
        loom_dataset_free(r.d);
        return rc;
    }
    *out = r.d;
    return 0;
}

void loom_dataset_free(loom_dataset *d)
{
    if (!d) return;
    free(d->label);
    free(d->row);
    free(d->idx);
    free(d->val);
    free(d);
}
