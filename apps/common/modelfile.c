/* modelfile: the reader of lr's and lasso's text model files (see modelfile.h). */
#include "common/modelfile.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/files.h"

static int stored(double v)
{
    return v != 0.0 || signbit(v);
}

int app_model_save(const char *path, const char *magic, unsigned version,
                   const app_model_field *fields, size_t nfields, const double *vec, uint64_t dim,
                   const char *noun, char *err, size_t errlen)
{
    for (size_t i = 0; i < nfields; i++)
        if (!isfinite(fields[i].value))
            return app_error(err, errlen, "%s: %s is not finite", path, fields[i].the_name);
    uint64_t nnz = 0;
    for (uint64_t j = 0; j < dim; j++) {
        if (!isfinite(vec[j]))
            return app_error(err, errlen, "%s: %s %llu is not finite", path, noun,
                             (unsigned long long)j);
        nnz += stored(vec[j]);
    }
    FILE *f = fopen(path, "w");
    if (!f) return app_error(err, errlen, "%s: cannot create: %s", path, strerror(errno));
    /* Only a regular file is removed after a failure: never /dev/full or a FIFO. */
    struct stat st;
    int regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    fprintf(f, "%s %u dim=%llu nnz=%llu", magic, version, (unsigned long long)dim,
            (unsigned long long)nnz);
    for (size_t i = 0; i < nfields; i++)
        if (fields[i].since <= version) fprintf(f, " %s=%.17g", fields[i].name, fields[i].value);
    fputc('\n', f);
    for (uint64_t j = 0; j < dim; j++)
        if (stored(vec[j])) fprintf(f, "%llu %.17g\n", (unsigned long long)j, vec[j]);
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

int app_model_open(app_model_reader *r, const char *path, const char *kind, char *err,
                   size_t errlen)
{
    *r = (app_model_reader){.path = path, .kind = kind, .err = err, .errlen = errlen};
    r->f = fopen(path, "r");
    if (!r->f) return app_error(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return 0;
}

void app_model_close(app_model_reader *r)
{
    free(r->line);
    r->line = NULL;
    if (r->f) fclose(r->f);
    r->f = NULL;
}

int app_model_bad_line(app_model_reader *r, const char *fmt, ...)
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

int app_model_next_line(app_model_reader *r)
{
    errno = 0;
    ssize_t len = app_getline(&r->line, &r->cap, APP_MODEL_LINE_MAX, r->f);
    if (len == APP_LINE_NO_MEMORY)
        return app_error(r->err, r->errlen, "%s: out of memory", r->path);
    if (len == -1) {
        if (ferror(r->f))
            return app_error(r->err, r->errlen, "%s: read error: %s", r->path, strerror(errno));
        return 0;
    }
    r->lineno++;
    if (len == APP_LINE_TOO_LONG)
        return app_model_bad_line(r, "line longer than %d bytes, not a Loom %s model",
                                  APP_MODEL_LINE_MAX, r->kind);
    if (r->line[len - 1] != '\n')
        return app_model_bad_line(r, "line not ended by a newline (truncated file?)");
    r->line[--len] = '\0';
    if (strlen(r->line) != (size_t)len) return app_model_bad_line(r, "NUL byte in the line");
    return 1;
}

int app_model_read_header(app_model_reader *r, const char *magic, unsigned oldest, unsigned newest,
                          app_model_field *fields, size_t nfields, uint64_t *dim, uint64_t *nnz)
{
    int got = app_model_next_line(r);
    if (got < 0) return -1;
    if (got == 0)
        return app_error(r->err, r->errlen, "%s: empty file, not a Loom %s model", r->path,
                         r->kind);

    const char *p = r->line;
    size_t magic_len = strlen(magic);
    if (strncmp(p, magic, magic_len) != 0 || p[magic_len] != ' ')
        return app_model_bad_line(r, "not a Loom %s model (the first line must start with \"%s \")",
                                  r->kind, magic);
    p += magic_len + 1;
    uint64_t v;
    if (parse_u64(p, &p, &v)) return app_model_bad_line(r, "bad header: no version");
    if (v < oldest || v > newest) {
        if (oldest == newest)
            return app_model_bad_line(r, "unsupported model version %llu (this Loom reads %u)",
                                      (unsigned long long)v, newest);
        return app_model_bad_line(r, "unsupported model version %llu (this Loom reads %u to %u)",
                                  (unsigned long long)v, oldest, newest);
    }
    if (strncmp(p, " dim=", 5) != 0 || parse_u64(p + 5, &p, dim))
        return app_model_bad_line(r, "bad header: expected dim=<integer> after the version");
    if (strncmp(p, " nnz=", 5) != 0 || parse_u64(p + 5, &p, nnz))
        return app_model_bad_line(r, "bad header: expected nnz=<integer> after dim");
    const char *after = "nnz", *last = "nnz";
    for (size_t i = 0; i < nfields; i++) {
        app_model_field *f = &fields[i];
        if (f->since > v) continue;
        size_t name_len = strlen(f->name);
        if (p[0] != ' ' || strncmp(p + 1, f->name, name_len) != 0 || p[1 + name_len] != '=' ||
            parse_double(p + 2 + name_len, &p, &f->value))
            return app_model_bad_line(r, "bad header: expected %s=<number> after %s", f->name,
                                      after);
        after = f->name;
        last = f->the_name;
    }
    if (*p != '\0') return app_model_bad_line(r, "bad header: unexpected text after %s", last);
    for (size_t i = 0; i < nfields; i++)
        if (fields[i].since <= v && !isfinite(fields[i].value))
            return app_model_bad_line(r, "bad header: %s is not finite", fields[i].the_name);
    if (*nnz > *dim) return app_model_bad_line(r, "bad header: nnz is larger than dim");
    return 0;
}

int app_model_read_sparse(app_model_reader *r, uint64_t nnz, uint64_t dim, double *x,
                          const char *noun, const char *nouns)
{
    uint64_t prev = 0;
    for (uint64_t k = 0; k < nnz; k++) {
        int got = app_model_next_line(r);
        if (got < 0) return -1;
        if (got == 0)
            return app_model_bad_line(r,
                                      "the file ends after %llu %s, but the header says nnz=%llu",
                                      (unsigned long long)k, nouns, (unsigned long long)nnz);
        const char *p = r->line;
        uint64_t id;
        double v;
        if (parse_u64(p, &p, &id) || *p != ' ')
            return app_model_bad_line(r, "expected \"<feature id> <%s>\"", noun);
        if (parse_double(p + 1, &p, &v) || *p != '\0')
            return app_model_bad_line(r, "expected \"<feature id> <%s>\": bad %s", noun, noun);
        if (id >= dim)
            return app_model_bad_line(r, "feature id %llu is not below dim=%llu",
                                      (unsigned long long)id, (unsigned long long)dim);
        if (k > 0 && id <= prev)
            return app_model_bad_line(r, "feature id %llu after %llu: ids must be ascending",
                                      (unsigned long long)id, (unsigned long long)prev);
        if (!isfinite(v))
            return app_model_bad_line(r, "the %s of feature %llu is not finite", noun,
                                      (unsigned long long)id);
        x[id] = v;
        prev = id;
    }
    int got = app_model_next_line(r);
    if (got < 0) return -1;
    if (got > 0)
        return app_model_bad_line(r, "trailing garbage after the last of the nnz=%llu %s",
                                  (unsigned long long)nnz, nouns);
    return 0;
}
