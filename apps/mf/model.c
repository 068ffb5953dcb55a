/* model: the matrix-factorisation model file, and prediction.
 *
 * The file is text (docs/MF.md): a header with the shape, the mean and the
 * rating range, then one line per user and per item with its file id, bias
 * and factors. The file ids make it the id mapping too: a model predicts
 * ratings of any file that uses the same ids, whatever order the training
 * file had. Numbers are written with %.17g, enough for strtod to give back
 * the same double, so save then load is bit-exact (tests compare models of
 * the distributed trainer and its reference through this file).
 *
 * The loader trusts nothing: every line must be exactly in the format, ids
 * strictly ascending (so lookups can bisect), every number finite, and each
 * problem is reported as "FILE:LINE: what is wrong". */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/files.h"
#include "mf/mf.h"

#define MODEL_MAGIC   "loom-mf"
#define MODEL_VERSION 1
#define HEADER_MAX    1024 /* bytes in the header line; %.17g numbers need under 200 */

int mf_model_alloc(mf_model *m, uint32_t rank, size_t users, size_t items)
{
    *m = (mf_model){.rank = rank, .users = users, .items = items};
    size_t w = (size_t)rank + 1;
    m->user_id = calloc(users ? users : 1, sizeof *m->user_id);
    m->item_id = calloc(items ? items : 1, sizeof *m->item_id);
    m->user = calloc((users ? users : 1) * w, sizeof *m->user);
    m->item = calloc((items ? items : 1) * w, sizeof *m->item);
    if (m->user_id && m->item_id && m->user && m->item) return 0;
    mf_model_free(m);
    return -1;
}

void mf_model_free(mf_model *m)
{
    free(m->user_id);
    free(m->item_id);
    free(m->user);
    free(m->item);
    *m = (mf_model){0};
}

int64_t mf_model_user(const mf_model *m, int64_t id)
{
    return app_index_i64(m->user_id, m->users, id);
}

int64_t mf_model_item(const mf_model *m, int64_t id)
{
    return app_index_i64(m->item_id, m->items, id);
}

double mf_model_predict(const mf_model *m, int64_t u, int64_t i)
{
    size_t w = (size_t)m->rank + 1;
    const double *urow = u < 0 ? NULL : m->user + (size_t)u * w;
    const double *irow = i < 0 ? NULL : m->item + (size_t)i * w;
    double p = mf_predict_rows(m->mean, urow, irow, m->rank);
    return p < m->min ? m->min : p > m->max ? m->max : p;
}

/* ---- saving ---- */

static int rows_finite(const double *v, size_t n)
{
    for (size_t j = 0; j < n; j++)
        if (!isfinite(v[j])) return 0;
    return 1;
}

static void write_rows(FILE *f, char tag, const int64_t *ids, const double *v, size_t n,
                       uint32_t rank)
{
    for (size_t r = 0; r < n; r++) {
        fprintf(f, "%c %lld", tag, (long long)ids[r]);
        for (uint32_t k = 0; k <= rank; k++) fprintf(f, " %.17g", v[r * (rank + 1) + k]);
        fputc('\n', f);
    }
}

int mf_model_save(const mf_model *m, const char *path, char *err, size_t errlen)
{
    /* Refuse what the loader would refuse, so every saved file loads. */
    size_t w = (size_t)m->rank + 1;
    if (!isfinite(m->mean) || !isfinite(m->min) || !isfinite(m->max) || !(m->min <= m->max))
        return app_error(err, errlen, "%s: the mean or rating range is not finite", path);
    if (!rows_finite(m->user, m->users * w) || !rows_finite(m->item, m->items * w))
        return app_error(err, errlen, "%s: a bias or factor is not finite (try a smaller --lr)",
                         path);
    FILE *f = fopen(path, "w");
    if (!f) return app_error(err, errlen, "%s: cannot create: %s", path, strerror(errno));
    /* Only a regular file is removed after a failure: never /dev/full or a FIFO. */
    struct stat st;
    int regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    fprintf(f, MODEL_MAGIC " %d rank=%u users=%zu items=%zu mean=%.17g min=%.17g max=%.17g\n",
            MODEL_VERSION, m->rank, m->users, m->items, m->mean, m->min, m->max);
    write_rows(f, 'u', m->user_id, m->user, m->users, m->rank);
    write_rows(f, 'i', m->item_id, m->item, m->items, m->rank);
    int bad = ferror(f), saved_errno = errno;
    if (fclose(f) != 0 && !bad) bad = 1, saved_errno = errno;
    if (bad) {
        if (regular) remove(path);
        return app_error(err, errlen, "%s: write failed: %s", path, strerror(saved_errno));
    }
    return 0;
}

/* ---- loading ---- */

typedef struct reader {
    FILE *f;
    const char *path;
    char *line;
    size_t cap;
    unsigned long long lineno;
} reader;

/* Next line without its newline, at most max bytes long; 0, or -1 at the
 * end of the file. A longer line, or no memory for it, is an error (-2, in
 * err): lines are bounded, so that /dev/zero or a large binary file fails on
 * its first line instead of filling memory. */
static int next_line(reader *r, size_t max, char *err, size_t errlen)
{
    ssize_t len = app_getline(&r->line, &r->cap, max, r->f);
    if (len == -1) return -1;
    r->lineno++;
    if (len == APP_LINE_NO_MEMORY || len == APP_LINE_TOO_LONG) {
        if (len == APP_LINE_NO_MEMORY)
            app_error(err, errlen, "%s: out of memory", r->path);
        else
            app_error(err, errlen, "%s:%llu: line longer than %zu bytes, not a loom-mf model",
                      r->path, r->lineno, max);
        return -2;
    }
    if (r->line[len - 1] == '\n') r->line[len - 1] = '\0';
    return 0;
}

/* "name=<value>" at *s, then a blank or the end of the line. */
static int header_field(const char **s, const char *name, int integer, double *num, size_t *count)
{
    size_t n = strlen(name);
    if (strncmp(*s, name, n) || (*s)[n] != '=') return -1;
    const char *v = *s + n + 1;
    char *end;
    errno = 0;
    if (integer) {
        if (*v < '0' || *v > '9') return -1;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno == ERANGE) return -1;
        *count = (size_t)x;
    } else {
        *num = strtod(v, &end);
        if (end == v || !isfinite(*num)) return -1;
    }
    if (*end != ' ' && *end != '\0') return -1;
    *s = *end ? end + 1 : end;
    return 0;
}

/* "<tag> <id> <rank + 1 numbers>" into ids[r] and v[r * (rank + 1)...]. */
static int parse_row(reader *rd, char tag, int64_t *ids, double *v, size_t r, uint32_t rank,
                     char *err, size_t errlen)
{
    const char *s = rd->line;
    const char *what = tag == 'u' ? "user" : "item";
    if (s[0] != tag || s[1] != ' ')
        return app_error(err, errlen, "%s:%llu: expected a %s line \"%c <id> <bias> <factors>\"",
                         rd->path, rd->lineno, what, tag);
    s += 2;
    char *end;
    errno = 0;
    long long id = strtoll(s, &end, 10);
    if (end == s || errno == ERANGE || (*end != ' '))
        return app_error(err, errlen, "%s:%llu: bad %s id", rd->path, rd->lineno, what);
    if (r > 0 && id <= ids[r - 1])
        return app_error(err, errlen, "%s:%llu: %s ids must be ascending (%lld after %lld)",
                         rd->path, rd->lineno, what, id, (long long)ids[r - 1]);
    ids[r] = id;
    s = end;
    for (uint32_t k = 0; k <= rank; k++) {
        if (*s != ' ')
            return app_error(err, errlen, "%s:%llu: expected %u numbers after the %s id, found %u",
                             rd->path, rd->lineno, rank + 1, what, k);
        s++;
        double x = strtod(s, &end);
        if (end == s || (*end != ' ' && *end != '\0'))
            return app_error(err, errlen, "%s:%llu: bad number '%.20s'", rd->path, rd->lineno, s);
        if (!isfinite(x))
            return app_error(err, errlen, "%s:%llu: a value is not finite", rd->path, rd->lineno);
        v[r * (rank + 1) + k] = x;
        s = end;
    }
    if (*s)
        return app_error(err, errlen, "%s:%llu: more than %u numbers after the %s id", rd->path,
                         rd->lineno, rank + 1, what);
    return 0;
}

static int load(reader *rd, mf_model *m, char *err, size_t errlen)
{
    int got = next_line(rd, HEADER_MAX, err, errlen);
    if (got == -1)
        return app_error(err, errlen, "%s:1: empty file, expected a \"" MODEL_MAGIC "\" header",
                         rd->path);
    if (got) return -1;
    const char *s = rd->line;
    const char *magic = MODEL_MAGIC " 1 ";
    if (strncmp(s, magic, strlen(magic)))
        return app_error(err, errlen, "%s:1: not a loom-mf version 1 model", rd->path);
    s += strlen(magic);
    size_t rank = 0, users = 0, items = 0;
    double mean = 0, min = 0, max = 0;
    if (header_field(&s, "rank", 1, NULL, &rank) || header_field(&s, "users", 1, NULL, &users) ||
        header_field(&s, "items", 1, NULL, &items) || header_field(&s, "mean", 0, &mean, NULL) ||
        header_field(&s, "min", 0, &min, NULL) || header_field(&s, "max", 0, &max, NULL) || *s)
        return app_error(err, errlen,
                         "%s:1: bad header, expected \"" MODEL_MAGIC
                         " 1 rank=K users=U items=I mean=M min=A max=B\"",
                         rd->path);
    if (rank < 1 || rank > MF_MAX_RANK || !(min <= max))
        return app_error(err, errlen, "%s:1: rank must be 1 to %d and min <= max", rd->path,
                         MF_MAX_RANK);
    if (users > ((size_t)1 << 32) || items > ((size_t)1 << 32))
        return app_error(err, errlen, "%s:1: too many users or items", rd->path);
    if (mf_model_alloc(m, (uint32_t)rank, users, items))
        return app_error(err, errlen, "%s: out of memory", rd->path);
    m->mean = mean, m->min = min, m->max = max;
    /* "u <id>" and rank + 1 numbers, each at most 24 bytes as %.17g writes
     * them; room for more digits written by hand. */
    size_t row_max = 32 + (rank + 1) * 32;
    for (size_t r = 0; r < users + items; r++) {
        int user = r < users;
        if ((got = next_line(rd, row_max, err, errlen)) == -2) return -1;
        if (got)
            return app_error(err, errlen, "%s:%llu: the file ends after %zu of %zu %s", rd->path,
                             rd->lineno + 1, user ? r : r - users, user ? users : items,
                             user ? "users" : "items");
        if (user ? parse_row(rd, 'u', m->user_id, m->user, r, m->rank, err, errlen)
                 : parse_row(rd, 'i', m->item_id, m->item, r - users, m->rank, err, errlen))
            return -1;
    }
    if ((got = next_line(rd, row_max, err, errlen)) == -2) return -1;
    if (!got)
        return app_error(err, errlen,
                         "%s:%llu: more lines than the header's %zu users and %zu items", rd->path,
                         rd->lineno, users, items);
    return 0;
}

int mf_model_load(const char *path, mf_model *m, char *err, size_t errlen)
{
    *m = (mf_model){0};
    reader rd = {.path = path};
    if (!(rd.f = fopen(path, "r"))) return app_error(err, errlen, "%s: %s", path, strerror(errno));
    int rc = load(&rd, m, err, errlen);
    if (!rc && ferror(rd.f)) rc = app_error(err, errlen, "%s: read failed", path);
    fclose(rd.f);
    free(rd.line);
    if (rc) mf_model_free(m);
    return rc;
}
