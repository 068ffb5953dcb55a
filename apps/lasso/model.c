/* The model file and prediction.
 *
 * Text, like lr's model file (docs/LASSO.md): a header with the dimension,
 * the number of coefficients that follow and the lambda the model was
 * trained with, then "id coefficient" for every coefficient that is not +0.0,
 * ids ascending, %.17g so save then load is bit-exact. A Lasso model is
 * sparse, so the file is small. The loader checks every line and reports
 * "FILE:LINE: what is wrong". */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/files.h"
#include "lasso/lasso.h"

#define MODEL_MAGIC    "loom-lasso"
#define MODEL_VERSION  1
#define MODEL_LINE_MAX 1024 /* lines are under 100 bytes; the rest is for hand-written numbers */

/* -0.0 is stored too, so the round trip keeps the sign of zero. */
static int stored(double b)
{
    return b != 0.0 || signbit(b);
}

int lasso_model_save(const lasso_model *m, const char *path, char *err, size_t errlen)
{
    /* Refuse what the loader would refuse, so every saved file loads. */
    if (!isfinite(m->lambda)) return app_error(err, errlen, "%s: lambda is not finite", path);
    uint64_t nnz = 0;
    for (uint64_t j = 0; j < m->dim; j++) {
        if (!isfinite(m->beta[j]))
            return app_error(err, errlen, "%s: coefficient %llu is not finite", path,
                             (unsigned long long)j);
        nnz += stored(m->beta[j]);
    }
    FILE *f = fopen(path, "w");
    if (!f) return app_error(err, errlen, "%s: cannot create: %s", path, strerror(errno));
    /* Only a regular file is removed after a failure: never /dev/full or a FIFO. */
    struct stat st;
    int regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    fprintf(f, MODEL_MAGIC " %d dim=%llu nnz=%llu lambda=%.17g\n", MODEL_VERSION,
            (unsigned long long)m->dim, (unsigned long long)nnz, m->lambda);
    for (uint64_t j = 0; j < m->dim; j++)
        if (stored(m->beta[j])) fprintf(f, "%llu %.17g\n", (unsigned long long)j, m->beta[j]);
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

/* An unsigned decimal integer, digits only (strtoull would take blanks and signs). */
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

/* A number as %.17g writes it; finiteness is the caller's check. */
static int parse_double(const char *s, const char **end, double *out)
{
    if (!((*s >= '0' && *s <= '9') || *s == '-' || *s == '+' || *s == '.')) return -1;
    char *e;
    *out = strtod(s, &e);
    if (e == s) return -1;
    *end = e;
    return 0;
}

/* Next line without its '\n': 1, 0 at the end, -1 on error (reported). */
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
        return bad_line(r, "line longer than %d bytes, not a Loom Lasso model", MODEL_LINE_MAX);
    if (r->line[len - 1] != '\n')
        return bad_line(r, "line not ended by a newline (truncated file?)");
    r->line[--len] = '\0';
    if (strlen(r->line) != (size_t)len) return bad_line(r, "NUL byte in the line");
    return 1;
}

static int read_header(struct reader *r, uint64_t *dim, uint64_t *nnz, double *lambda)
{
    int got = next_line(r);
    if (got < 0) return -1;
    if (got == 0)
        return app_error(r->err, r->errlen, "%s: empty file, not a Loom Lasso model", r->path);
    const char *p = r->line;
    static const char magic[] = MODEL_MAGIC " ";
    if (strncmp(p, magic, sizeof magic - 1) != 0)
        return bad_line(r, "not a Loom Lasso model (the first line must start with \"" MODEL_MAGIC
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
    if (strncmp(p, " lambda=", 8) != 0 || parse_double(p + 8, &p, lambda))
        return bad_line(r, "bad header: expected lambda=<number> after nnz");
    if (*p != '\0') return bad_line(r, "bad header: unexpected text after lambda");
    if (!isfinite(*lambda)) return bad_line(r, "bad header: lambda is not finite");
    if (*nnz > *dim) return bad_line(r, "bad header: nnz is larger than dim");
    return 0;
}

static int read_coefficients(struct reader *r, lasso_model *m, uint64_t nnz)
{
    uint64_t prev = 0;
    for (uint64_t k = 0; k < nnz; k++) {
        int got = next_line(r);
        if (got < 0) return -1;
        if (got == 0)
            return bad_line(r,
                            "the file ends after %llu coefficients, but the header says nnz=%llu",
                            (unsigned long long)k, (unsigned long long)nnz);
        const char *p = r->line;
        uint64_t id;
        double b;
        if (parse_u64(p, &p, &id) || *p != ' ')
            return bad_line(r, "expected \"<feature id> <coefficient>\"");
        if (parse_double(p + 1, &p, &b) || *p != '\0')
            return bad_line(r, "expected \"<feature id> <coefficient>\": bad coefficient");
        if (id >= m->dim)
            return bad_line(r, "feature id %llu is not below dim=%llu", (unsigned long long)id,
                            (unsigned long long)m->dim);
        if (k > 0 && id <= prev)
            return bad_line(r, "feature id %llu after %llu: ids must be ascending",
                            (unsigned long long)id, (unsigned long long)prev);
        if (!isfinite(b))
            return bad_line(r, "the coefficient of feature %llu is not finite",
                            (unsigned long long)id);
        m->beta[id] = b;
        prev = id;
    }
    int got = next_line(r);
    if (got < 0) return -1;
    if (got > 0)
        return bad_line(r, "trailing garbage after the last of the nnz=%llu coefficients",
                        (unsigned long long)nnz);
    return 0;
}

int lasso_model_load(const char *path, lasso_model *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    struct reader r = {.path = path, .err = err, .errlen = errlen};
    r.f = fopen(path, "r");
    if (!r.f) return app_error(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    uint64_t dim = 0, nnz = 0;
    double lambda = 0;
    int rc = read_header(&r, &dim, &nnz, &lambda);
    if (rc == 0) {
        if (dim > LASSO_MAX_DIM)
            rc = app_error(err, errlen, "%s:1: dim=%llu is beyond the %llu features of a model",
                           path, (unsigned long long)dim, (unsigned long long)LASSO_MAX_DIM);
        else if (!(m->beta = calloc(dim ? (size_t)dim : 1, sizeof(double))))
            rc = app_error(err, errlen, "%s:1: out of memory for dim=%llu", path,
                           (unsigned long long)dim);
    }
    if (rc == 0) {
        m->dim = dim;
        m->lambda = lambda;
        rc = read_coefficients(&r, m, nnz);
    }
    free(r.line);
    fclose(r.f);
    if (rc) lasso_model_free(m);
    return rc;
}

void lasso_model_free(lasso_model *m)
{
    free(m->beta);
    memset(m, 0, sizeof *m);
}

double lasso_predict_row(const lasso_model *m, const loom_dataset *d, size_t i)
{
    double s = 0;
    for (size_t k = d->row[i]; k < d->row[i + 1]; k++)
        if (d->idx[k] < m->dim) s += m->beta[d->idx[k]] * d->val[k];
    return s;
}
