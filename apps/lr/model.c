/* The model file and prediction.
 *
 * A model is written as text: a header line with the dimension, the number of
 * weights that follow and the bias, then one "id weight" line per weight that
 * is not +0.0, ids ascending. Weights are printed with %.17g, which is enough
 * digits for strtod to give back the very same double, so save then load is
 * bit-exact (docs/LR.md has the format). Text keeps models diffable and easy
 * to produce from other tools; sparse models stay small.
 *
 * The loader trusts nothing: every line must be exactly in the format, and
 * any problem is reported as "FILE:LINE: what is wrong" so a hand-edited or
 * truncated model is caught at load time rather than predicting nonsense. */
#include "lr/lr.h"

#include "common/files.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#define MODEL_MAGIC   "loom-lr"
#define MODEL_VERSION 1
/* The longest line: a header or "<id> <weight>" is under 100 bytes; the rest
 * is room for numbers written by hand. */
#define MODEL_LINE_MAX 1024

/* -0.0 is stored too: "every weight that is not +0.0" keeps the round trip
 * exact down to the sign of zero. */
static int stored(double w)
{
    return w != 0.0 || signbit(w);
}

int lr_model_save(const lr_model *m, const char *path, char *err, size_t errlen)
{
    /* Refuse what the loader would refuse, so every saved file loads. */
    if (!isfinite(m->bias)) return app_error(err, errlen, "%s: the bias is not finite", path);
    uint64_t nnz = 0;
    for (uint64_t j = 0; j < m->dim; j++) {
        if (!isfinite(m->w[j]))
            return app_error(err, errlen, "%s: weight %llu is not finite", path,
                             (unsigned long long)j);
        nnz += stored(m->w[j]);
    }

    FILE *f = fopen(path, "w");
    if (!f) return app_error(err, errlen, "%s: cannot create: %s", path, strerror(errno));
    /* Only a regular file is removed after a failure: never /dev/full or a FIFO. */
    struct stat st;
    int regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    fprintf(f, MODEL_MAGIC " %d dim=%llu nnz=%llu bias=%.17g\n", MODEL_VERSION,
            (unsigned long long)m->dim, (unsigned long long)nnz, m->bias);
    for (uint64_t j = 0; j < m->dim; j++)
        if (stored(m->w[j])) fprintf(f, "%llu %.17g\n", (unsigned long long)j, m->w[j]);
    /* A full disk shows up in ferror() or, for the last buffer, in fclose(). */
    int bad = ferror(f);
    int saved_errno = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        saved_errno = errno;
    }
    if (bad) {
        if (regular) remove(path);
        return app_error(err, errlen, "%s: write failed: %s", path, strerror(saved_errno));
    }
    return 0;
}

/* ---- loading ---- */

/* An unsigned decimal integer, digits only (strtoull alone would take
 * leading blanks, a sign and out-of-range values). Sets *end past it. */
static int parse_u64(const char *s, const char **end, uint64_t *out)
{
    if (*s < '0' || *s > '9') return -1;
    char *e;
    errno = 0;
    unsigned long long v = strtoull(s, &e, 10);
    if (errno == ERANGE) return -1;
    *end = e;
    *out = v;
    return 0;
}

/* A floating-point number as %.17g writes it. Not checked for finiteness
 * here, so the caller can say "not finite" rather than "not a number". */
static int parse_double(const char *s, const char **end, double *out)
{
    if (!((*s >= '0' && *s <= '9') || *s == '-' || *s == '+' || *s == '.')) return -1;
    char *e;
    /* errno is not looked at: ERANGE on underflow still gives the right
     * (subnormal or zero) value, and overflow gives inf, caught as non-finite. */
    *out = strtod(s, &e);
    if (e == s) return -1;
    *end = e;
    return 0;
}

struct reader {
    FILE *f;
    const char *path;
    char *line;
    size_t cap;
    uint64_t lineno;
    char *err;
    size_t errlen;
};

static int bad_line(struct reader *r, const char *fmt, ...) APP_PRINTF_LIKE(2, 3);

/* "FILE:LINE: " and the message. */
static int bad_line(struct reader *r, const char *fmt, ...)
{
    if (r->err && r->errlen) {
        int n = snprintf(r->err, r->errlen, "%s:%llu: ", r->path, (unsigned long long)r->lineno);
        if (n >= 0 && (size_t)n < r->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return -1;
}

/* Next line without its '\n' in r->line: 1 if read, 0 at end of file, -1 on
 * error (reported). Lines are bounded, so that /dev/zero or a large binary
 * file fails on its first line instead of filling memory. */
static int next_line(struct reader *r)
{
    errno = 0;
    ssize_t len = app_getline(&r->line, &r->cap, MODEL_LINE_MAX, r->f);
    if (len == APP_LINE_NO_MEMORY)
        return app_error(r->err, r->errlen, "%s: out of memory", r->path);
    if (len == -1) {
        if (ferror(r->f))
            return app_error(r->err, r->errlen, "%s: read error: %s", r->path, strerror(errno));
        return 0;
    }
    r->lineno++;
    if (len == APP_LINE_TOO_LONG)
        return bad_line(r, "line longer than %d bytes, not a Loom LR model", MODEL_LINE_MAX);
    /* A truncated file can end in a line that still parses ("0.12" of "0.1234"). */
    if (r->line[len - 1] != '\n')
        return bad_line(r, "line not ended by a newline (truncated file?)");
    r->line[--len] = '\0';
    if (strlen(r->line) != (size_t)len) return bad_line(r, "NUL byte in the line");
    return 1;
}

/* Header: "loom-lr 1 dim=<D> nnz=<K> bias=<b>". */
static int read_header(struct reader *r, uint64_t *dim, uint64_t *nnz, double *bias)
{
    int got = next_line(r);
    if (got < 0) return -1;
    if (got == 0)
        return app_error(r->err, r->errlen, "%s: empty file, not a Loom LR model", r->path);

    const char *p = r->line;
    static const char magic[] = MODEL_MAGIC " ";
    if (strncmp(p, magic, sizeof magic - 1) != 0)
        return bad_line(r, "not a Loom LR model (the first line must start with \"" MODEL_MAGIC
                           " \")");
    p += sizeof magic - 1;
    uint64_t version;
    if (parse_u64(p, &p, &version)) return bad_line(r, "bad header: no version");
    if (version != MODEL_VERSION)
        return bad_line(r, "unsupported model version %llu (this Loom reads %d)",
                        (unsigned long long)version, MODEL_VERSION);
    if (strncmp(p, " dim=", 5) != 0 || parse_u64(p + 5, &p, dim))
        return bad_line(r, "bad header: expected dim=<integer> after the version");
    if (strncmp(p, " nnz=", 5) != 0 || parse_u64(p + 5, &p, nnz))
        return bad_line(r, "bad header: expected nnz=<integer> after dim");
    if (strncmp(p, " bias=", 6) != 0 || parse_double(p + 6, &p, bias))
        return bad_line(r, "bad header: expected bias=<number> after nnz");
    if (*p != '\0') return bad_line(r, "bad header: unexpected text after the bias");
    if (!isfinite(*bias)) return bad_line(r, "bad header: the bias is not finite");
    if (*nnz > *dim) return bad_line(r, "bad header: nnz is larger than dim");
    return 0;
}

static int read_weights(struct reader *r, lr_model *m, uint64_t nnz)
{
    uint64_t prev = 0;
    for (uint64_t k = 0; k < nnz; k++) {
        int got = next_line(r);
        if (got < 0) return -1;
        if (got == 0)
            return bad_line(r, "the file ends after %llu weights, but the header says nnz=%llu",
                            (unsigned long long)k, (unsigned long long)nnz);
        const char *p = r->line;
        uint64_t id;
        double w;
        if (parse_u64(p, &p, &id) || *p != ' ')
            return bad_line(r, "expected \"<feature id> <weight>\"");
        if (parse_double(p + 1, &p, &w) || *p != '\0')
            return bad_line(r, "expected \"<feature id> <weight>\": bad weight");
        if (id >= m->dim)
            return bad_line(r, "feature id %llu is not below dim=%llu", (unsigned long long)id,
                            (unsigned long long)m->dim);
        if (k > 0 && id <= prev)
            return bad_line(r, "feature id %llu after %llu: ids must be ascending",
                            (unsigned long long)id, (unsigned long long)prev);
        if (!isfinite(w))
            return bad_line(r, "the weight of feature %llu is not finite", (unsigned long long)id);
        m->w[id] = w;
        prev = id;
    }
    int got = next_line(r);
    if (got < 0) return -1;
    if (got > 0)
        return bad_line(r, "trailing garbage after the last of the nnz=%llu weights",
                        (unsigned long long)nnz);
    return 0;
}

int lr_model_load(const char *path, lr_model *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    struct reader r = {.path = path, .err = err, .errlen = errlen};
    r.f = fopen(path, "r");
    if (!r.f) return app_error(err, errlen, "%s: cannot open: %s", path, strerror(errno));

    uint64_t dim = 0, nnz = 0;
    double bias = 0;
    int rc = read_header(&r, &dim, &nnz, &bias);
    if (rc == 0) {
        /* calloc(0) may return NULL: keep one slot so w is never NULL. */
        if (dim > LR_MAX_DIM)
            rc = app_error(err, errlen, "%s:1: dim=%llu is beyond the %llu features of an LR model",
                           path, (unsigned long long)dim, (unsigned long long)LR_MAX_DIM);
        else if (!(m->w = calloc(dim ? (size_t)dim : 1, sizeof(double))))
            rc = app_error(err, errlen, "%s:1: out of memory for dim=%llu", path,
                           (unsigned long long)dim);
    }
    if (rc == 0) {
        m->dim = dim;
        m->bias = bias;
        rc = read_weights(&r, m, nnz);
    }
    free(r.line);
    fclose(r.f);
    if (rc) lr_model_free(m);
    return rc;
}

void lr_model_free(lr_model *m)
{
    free(m->w);
    memset(m, 0, sizeof *m);
}

double lr_margin(const lr_model *m, const loom_dataset *d, size_t i)
{
    double s = 0;
    for (size_t k = d->row[i]; k < d->row[i + 1]; k++)
        if (d->idx[k] < m->dim) s += m->w[d->idx[k]] * d->val[k];
    return s + m->bias;
}
