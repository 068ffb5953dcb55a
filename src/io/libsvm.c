/* libsvm: the LIBSVM reader; one worker's share of one shared file.
 *
 * Sharding, the newline sentinel, messages and loading are textfile.h's: a
 * share reads the lines that start in its byte range, every line it sees
 * ends with '\n' (so a token loop stops at the newline at the latest, with
 * no end-of-buffer check), and line numbers in messages are absolute.
 *
 * Numbers are decimal.h's: ids digit by digit with an overflow check, values
 * exactly as strtof() gives them (labels as strtod()), with fast paths for the
 * usual short decimals, in the "C" locale whatever the program's setlocale().
 *
 * Id base. LOOM_IDS_AUTO must decide alike in every share, so each share
 * scans the whole file for an id 0 (has_id_zero): 2-6 GB/s, against about
 * 0.5 GB/s for parsing, so with n shares on one machine the scans add about
 * n/10 of a single read's time; across machines each worker also reads the
 * whole file from its disk or network. Pass the base explicitly for big files
 * read by many workers. */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/decimal.h"
#include "io/textfile.h"
#include "loom/data.h"
#include "loom/error.h"

#define SCAN_BLOCK 4096 /* bytes per block of the id-0 scan */

/* The parse of one share. */
typedef struct reader {
    const textfile *f;
    loom_libsvm_opts o;
    int one_based;
    loom_dataset *d;
    size_t cap_rows;    /* capacity of d->label (d->row holds one more) */
    size_t cap_nnz;     /* capacity of d->idx and d->val */
    size_t line;        /* absolute 1-based number of the line being parsed */
    textfile_fault why; /* after a malformed line: what is wrong, and where */
    char *err;
    size_t errlen;
} reader;

/* Whether a token ends at p: a blank, the end of the line or a comment. */
static inline int ends_token(const char *p)
{
    return textfile_blank(*p) || *p == '#' || textfile_eol(p);
}

/* The token at p, as quoted in a message. */
static const char *quote(const char *p, char out[TEXTFILE_QUOTED])
{
    return textfile_quote(p, '#', out);
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
 * Returns 0, LOOM_EINVAL (r->why tells what and where; nothing was appended)
 * or LOOM_ENOMEM. */
static int parse_line(reader *r, const char *p, const char *end, const char **next)
{
    loom_dataset *d = r->d;
    char shown[TEXTFILE_QUOTED];
    decimal x;

    while (textfile_blank(*p)) p++;
    if (*p == '#' || textfile_eol(p)) { /* blank or comment line: no row */
        *next = textfile_after_line(p, end);
        return 0;
    }

    const char *tok = p;
    p = decimal_scan(tok, &x);
    if (!p || !ends_token(p))
        return textfile_fail(&r->why, tok, "bad label '%s'", quote(tok, shown));
    double label = decimal_to_double(&x, tok);
    if (r->o.labels == LOOM_LABELS_CLASS) {
        if (label == 0.0)
            label = -1.0;
        else if (label != 1.0 && label != -1.0)
            return textfile_fail(&r->why, tok, "label '%s' is not +1, -1, 1 or 0",
                                 quote(tok, shown));
    } else if (!isfinite(label)) {
        return textfile_fail(&r->why, tok, "label '%s' out of range", quote(tok, shown));
    }

    while (textfile_blank(*p)) p++;
    /* Short-circuit order keeps every read before the first mismatch, and the
     * newline mismatches. */
    if (p[0] == 'q' && p[1] == 'i' && p[2] == 'd' && p[3] == ':') {
        tok = p;
        for (p += 4; decimal_digit(*p) < 10;) p++;
        if (p == tok + 4 || !ends_token(p))
            return textfile_fail(&r->why, tok, "bad qid '%s'", quote(tok, shown));
    }

    /* Locals, not d->...: stores into idx[] may alias size_t fields, which
     * would make the compiler reload them for every feature. */
    const size_t first = d->nnz;
    size_t n = first, cap = r->cap_nnz;
    uint64_t *idx = d->idx;
    float *val = d->val;
    const uint64_t base = r->one_based ? 1 : 0;
    for (;;) {
        while (textfile_blank(*p)) p++;
        if (*p == '#' || textfile_eol(p)) break;

        tok = p;
        uint64_t id;
        int overflow = 0;
        p = decimal_scan_u64(p, &id, &overflow);
        if (p == tok || *p != ':')
            return textfile_fail(&r->why, tok, "bad feature '%s'", quote(tok, shown));
        /* 0-based UINT64_MAX is out too: max_feature, 1 + the id, must fit */
        if (overflow || (id == UINT64_MAX && !base)) {
            /* the digits alone: the quote would run on over ':' and the value */
            int len = (int)(p - tok) < TEXTFILE_TOKEN_SHOWN ? (int)(p - tok) : TEXTFILE_TOKEN_SHOWN;
            return textfile_fail(&r->why, tok, "feature id '%.*s' out of range", len, tok);
        }
        if (id < base) return textfile_fail(&r->why, tok, "feature id 0 in a 1-based file");
        if (n > first && id - base <= idx[n - 1])
            return textfile_fail(&r->why, tok,
                                 "feature ids not ascending (%" PRIu64 " after %" PRIu64 ")", id,
                                 idx[n - 1] + base);
        if (r->o.max_features && id - base >= r->o.max_features)
            return textfile_fail(&r->why, tok,
                                 "feature id %" PRIu64 " is beyond max_features %" PRIu64, id,
                                 r->o.max_features);

        const char *vt = ++p;
        p = decimal_scan(vt, &x);
        if (!p || !ends_token(p))
            return textfile_fail(&r->why, vt, "bad feature value '%s'", quote(vt, shown));
        float v = decimal_to_float(&x, vt);
        if (!isfinite(v))
            return textfile_fail(&r->why, vt, "feature value '%s' out of range", quote(vt, shown));

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
    *next = textfile_after_line(p, end);
    return 0;
}

/* Parses the lines starting in [p, stop); every one ends with a newline
 * before end (textfile_lines_fn). */
static int parse_lines(void *ctx, const char *p, const char *stop, const char *end)
{
    reader *r = ctx;
    while (p < stop) {
        int rc = parse_line(r, p, end, &p);
        if (rc == LOOM_EINVAL && r->o.skip_bad) {
            r->d->skipped++;
            p = textfile_after_line(r->why.at, end);
        } else if (rc) {
            return textfile_report(r->f, r->line, rc, &r->why, r->err, r->errlen);
        }
        r->line++;
    }
    return 0;
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
    if (j == 0 || !textfile_blank(s[j - 1])) return 0; /* "1000:", or the file's start */
    size_t ls = j - 1;
    while (ls > 0 && s[ls - 1] != '\n') ls--;
    size_t k = ls;
    while (textfile_blank(s[k])) k++;
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

/* Reads share `shard` of `nshards` of f into r->d, in the "C" locale. */
static int read_share(void *ctx, const textfile *f, int shard, int nshards)
{
    reader *r = ctx;
    r->f = f;
    size_t lo = textfile_edge(f->size, shard, nshards);
    size_t hi = textfile_edge(f->size, shard + 1, nshards);
    if (new_dataset(r, hi - lo)) {
        textfile_set_err(r->err, r->errlen, "%s: out of memory", f->path);
        return LOOM_ENOMEM;
    }
    r->one_based = r->o.ids == LOOM_IDS_ONE_BASED ||
                   (r->o.ids == LOOM_IDS_AUTO && !has_id_zero(f->s, f->size));
    size_t start = textfile_line_start(f, lo), stop = textfile_line_start(f, hi);
    r->d->first_line = 1 + textfile_count_newlines(f->s, start);
    r->line = r->d->first_line;
    int rc = textfile_parse(f, start, stop, parse_lines, r);
    if (!rc) trim(r->d);
    return rc;
}

int loom_libsvm_read(const char *path, int shard, int nshards, const loom_libsvm_opts *opts,
                     loom_dataset **out, char *err, size_t errlen)
{
    static const loom_libsvm_opts defaults = LOOM_LIBSVM_OPTS_DEFAULT;

    reader r = {.o = opts ? *opts : defaults, .err = err, .errlen = errlen};
    const char *bad_opts =
        r.o.ids > LOOM_IDS_ZERO_BASED || r.o.labels > LOOM_LABELS_REAL ? "invalid options" : NULL;
    int rc =
        textfile_read(path, shard, nshards, out != NULL, bad_opts, 1, read_share, &r, err, errlen);
    if (rc) loom_dataset_free(r.d);
    if (out) *out = rc ? NULL : r.d;
    return rc;
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
