/* darray_file: distributed arrays from and to files (loom/darray.h).
 *
 * Text: each worker parses its share of the file's lines (src/io/textfile.h
 * cuts it on line boundaries, as the LIBSVM reader does) through the user's
 * parser, in the "C" locale, then darray_settle() spreads the elements.
 *
 * Saved arrays: a directory holding
 *
 *   manifest                 text, written last by worker 0:
 *                              loom-darray 1
 *                              kind sparse|dense
 *                              dims D
 *                              width C
 *                              type f64|f32|i32|i64   (absent: f64)
 *                              part_dim P
 *                              extents E0 ... E(D-1)
 *                              parts N
 *                              elements T
 *   part-R-of-N.bin          worker R's elements: a 32-byte header
 *                            ("LOOMDAR1", then little-endian u32 dims, u32 R,
 *                            u32 N, u32 C, u64 count) and count records of
 *                            D int64 indices and C values of the type
 *                            (IEEE doubles or floats, int32 or int64),
 *                            all little-endian.
 *
 * Each file is written under a dot-name of its own and renamed once complete
 * (and flushed to the disk), and the manifest only after every worker's part
 * is: a directory with a manifest holds a whole array, and a save that fails
 * halfway (a full disk) leaves the previous save readable. Nothing else in
 * the directory is touched. Loading on any number of workers: worker w reads
 * parts w, w + W, ..., checking every header, size and index against the
 * manifest, and the elements are spread again as at construction. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/msg.h"
#include "io/textfile.h"
#include "loom/darray.h"
#include "loom/error.h"
#include "sched/darray_impl.h"

#define MAGIC        "LOOMDAR1"
#define HEADER_BYTES 32
#define MANIFEST_MAX 4096
#define WRITE_CHUNK  (1u << 16)

/* ---- text ---- */

typedef struct parse_ctx {
    loom_darray_parse_fn parse;
    void *user;
    loom_darray_sink sink;
    size_t line; /* of the line being parsed, from 1 */
} parse_ctx;

static int parse_lines(void *arg, const char *p, const char *stop, const char *end)
{
    parse_ctx *c = arg;
    for (; p < stop; p = textfile_after_line(p, end)) {
        c->line++;
        size_t len = (size_t)((const char *)memchr(p, '\n', (size_t)(end - p)) - p);
        if (len && p[len - 1] == '\r') len--;
        c->sink.why[0] = '\0';
        int rc = c->parse(c->user, (uint64_t)c->line - 1, p, len, &c->sink);
        if (rc) return rc;
    }
    return 0;
}

/* This worker's share of the file into list; 0 or an error with its sentence. */
static int read_text(const loom_darray *d, const char *path, loom_darray_parse_fn parse, void *user,
                     darray_elems *list, char *err, size_t errlen)
{
    textfile f;
    int rc = textfile_open(&f, path, (int)d->W, err, errlen);
    if (rc) return rc;
    if (textfile_c_locale(&f)) {
        textfile_close(&f);
        textfile_set_err(err, errlen, "%s: out of memory", path);
        return LOOM_ENOMEM;
    }
    size_t from = textfile_line_start(&f, textfile_edge(f.size, (int)d->rank, (int)d->W));
    size_t to = textfile_edge(f.size, (int)d->rank + 1, (int)d->W);
    parse_ctx c = {.parse = parse, .user = user, .sink = {.list = list}};
    c.line = textfile_count_newlines(f.s, from < f.tail ? from : f.tail);
    rc = textfile_parse(&f, from, to, parse_lines, &c);
    if (rc)
        textfile_set_err(err, errlen, "%s:%zu: %s", path, c.line,
                         rc == LOOM_ENOMEM ? "out of memory"
                         : c.sink.why[0]   ? c.sink.why
                                           : "the parser refused the line");
    textfile_close(&f);
    return rc ? (rc > 0 && rc < LOOM_ERROR_COUNT_ ? rc : LOOM_EINVAL) : 0;
}

int loom_darray_from_file(loom_node *node, const char *path, const loom_darray_opts *o,
                          loom_darray_parse_fn parse, void *user, loom_darray **out, char *err,
                          size_t errlen)
{
    loom_darray *d;
    int rc = darray_new(node, o, 0, &d, err, errlen);
    if (rc) return rc;
    *out = NULL;
    darray_elems l = {.dims = d->dims, .width = d->width, .type = d->type, .ext = d->ext};
    int failed = 0;
    if (!path || !parse) {
        textfile_set_err(err, errlen, "darray: no file or no parser");
        failed = LOOM_EINVAL;
    }
    if (!failed) failed = read_text(d, path, parse, user, &l, err, errlen);
    rc = darray_settle(d, &l, failed, err, errlen);
    if (rc) {
        loom_darray_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

/* ---- saving ---- */

/* Writes all of p or says why (a full disk is ENOSPC here). */
static int write_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return k < 0 ? errno : EIO;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* path.tmp written by fill(), flushed, then renamed to path. */
typedef int (*fill_fn)(const loom_darray *d, int fd);

static int write_file(const loom_darray *d, const char *dir, const char *name, fill_fn fill,
                      char *err, size_t errlen)
{
    char tmp[4096], path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path ||
        (size_t)snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name) >= sizeof tmp) {
        textfile_set_err(err, errlen, "%s: path too long", dir);
        return LOOM_EINVAL;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        textfile_set_err(err, errlen, "%s: %s", tmp, strerror(errno));
        return LOOM_EIO;
    }
    int e = fill(d, fd);
    if (!e && fsync(fd)) e = errno;
    if (close(fd) && !e) e = errno;
    if (!e && rename(tmp, path)) e = errno;
    if (e) {
        unlink(tmp); /* our own temporary name, never the user's files */
        textfile_set_err(err, errlen, "%s: %s", path, strerror(e));
        return LOOM_EIO;
    }
    return 0;
}

/* A value's bytes stored little-endian (size 4 or 8) at p, or loaded. */
static void store_value(unsigned char *p, const unsigned char *v, uint32_t size)
{
    if (size == 8) {
        uint64_t bits;
        memcpy(&bits, v, 8);
        msg_store_u64(p, bits);
    } else {
        uint32_t bits;
        memcpy(&bits, v, 4);
        msg_store_u32(p, bits);
    }
}

static void load_value(unsigned char *v, const unsigned char *p, uint32_t size)
{
    if (size == 8) {
        uint64_t bits = msg_load_u64(p);
        memcpy(v, &bits, 8);
    } else {
        uint32_t bits = msg_load_u32(p);
        memcpy(v, &bits, 4);
    }
}

static const char *const type_names[] = {[LOOM_DARRAY_F64] = "f64",
                                         [LOOM_DARRAY_F32] = "f32",
                                         [LOOM_DARRAY_I32] = "i32",
                                         [LOOM_DARRAY_I64] = "i64"};

static int fill_part(const loom_darray *d, int fd)
{
    size_t rec = d->dims * 8 + (size_t)d->width * d->vsize;
    uint8_t head[HEADER_BYTES] = MAGIC, *buf = malloc(WRITE_CHUNK + rec);
    if (!buf) return ENOMEM;
    const uint32_t fields[4] = {d->dims, d->rank, d->W, d->width};
    for (int i = 0; i < 4; i++) msg_store_u32(head + 8 + 4 * i, fields[i]);
    msg_store_u64(head + 24, d->n);
    int e = write_all(fd, head, sizeof head);
    size_t used = 0;
    int64_t index[LOOM_DARRAY_MAX_DIMS];
    for (size_t i = 0; !e && i < d->n; i++) {
        darray_index_of(d, i, index);
        for (uint32_t k = 0; k < d->dims; k++)
            msg_store_u64(buf + used + 8 * k, (uint64_t)index[k]);
        const unsigned char *row = (const unsigned char *)d->val + i * d->width * d->vsize;
        for (uint32_t c = 0; c < d->width; c++)
            store_value(buf + used + 8 * d->dims + c * d->vsize, row + c * d->vsize, d->vsize);
        if ((used += rec) >= WRITE_CHUNK) {
            e = write_all(fd, buf, used);
            used = 0;
        }
    }
    if (!e && used) e = write_all(fd, buf, used);
    free(buf);
    return e;
}

static int fill_manifest(const loom_darray *d, int fd)
{
    char text[MANIFEST_MAX];
    size_t at = 0;
    at += (size_t)snprintf(text + at, sizeof text - at,
                           "loom-darray 1\nkind %s\ndims %u\nwidth %u\ntype %s\npart_dim "
                           "%u\nextents",
                           d->dense ? "dense" : "sparse", d->dims, d->width, type_names[d->type],
                           d->part_dim);
    for (uint32_t k = 0; k < d->dims; k++)
        at += (size_t)snprintf(text + at, sizeof text - at, " %llu", (unsigned long long)d->ext[k]);
    at += (size_t)snprintf(text + at, sizeof text - at, "\nparts %u\nelements %llu\n", d->W,
                           (unsigned long long)d->total);
    return write_all(fd, text, at);
}

static void part_name(char *name, size_t len, uint32_t part, uint32_t parts)
{
    snprintf(name, len, "part-%05u-of-%05u.bin", part, parts);
}

int loom_darray_save(loom_darray *d, const char *dir, char *err, size_t errlen)
{
    if (!d || !dir) {
        textfile_set_err(err, errlen, "darray: no array or no directory");
        return LOOM_EINVAL;
    }
    int rc = 0;
    struct stat st;
    if (mkdir(dir, 0777) && errno != EEXIST) {
        textfile_set_err(err, errlen, "%s: %s", dir, strerror(errno));
        rc = LOOM_EIO;
    } else if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
        textfile_set_err(err, errlen, "%s: not a directory", dir);
        rc = LOOM_EINVAL;
    }
    char name[64];
    part_name(name, sizeof name, d->rank, d->W);
    if (!rc) rc = write_file(d, dir, name, fill_part, err, errlen);
    /* the manifest only once every part is whole */
    if ((rc = darray_agree_rc(d, rc, err, errlen))) return rc;
    if (d->rank == 0) rc = write_file(d, dir, "manifest", fill_manifest, err, errlen);
    return darray_agree_rc(d, rc, err, errlen);
}

/* ---- loading ---- */

typedef struct manifest {
    loom_darray_opts o;
    int dense;
    uint32_t parts;
    uint64_t elements;
} manifest;

/* "KEY VALUE..." lines, in the order fill_manifest writes them. */
static int parse_manifest(char *text, manifest *m)
{
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    char kind[16];
    unsigned long long v[LOOM_DARRAY_MAX_DIMS + 1];
    int n;
    memset(m, 0, sizeof *m);
    if (!line || strcmp(line, "loom-darray 1")) return 0;
    if (!(line = strtok_r(NULL, "\n", &save)) || sscanf(line, "kind %15s%n", kind, &n) != 1 ||
        line[n] || (strcmp(kind, "sparse") && strcmp(kind, "dense")))
        return 0;
    m->dense = !strcmp(kind, "dense");
    if (!(line = strtok_r(NULL, "\n", &save)) || sscanf(line, "dims %llu%n", &v[0], &n) != 1 ||
        line[n] || v[0] < 1 || v[0] > LOOM_DARRAY_MAX_DIMS)
        return 0;
    m->o.dims = (uint32_t)v[0];
    if (!(line = strtok_r(NULL, "\n", &save)) || sscanf(line, "width %llu%n", &v[0], &n) != 1 ||
        line[n] || v[0] < 1 || v[0] > LOOM_DARRAY_MAX_WIDTH)
        return 0;
    m->o.width = (uint32_t)v[0];
    if (!(line = strtok_r(NULL, "\n", &save))) return 0;
    if (!strncmp(line, "type ", 5)) { /* absent in saves of doubles before types */
        int known = 0;
        for (int t = 0; t < 4 && !known; t++)
            if (!strcmp(line + 5, type_names[t])) m->o.type = (loom_darray_type)t, known = 1;
        if (!known || !(line = strtok_r(NULL, "\n", &save))) return 0;
    }
    if (sscanf(line, "part_dim %llu%n", &v[0], &n) != 1 || line[n] || v[0] >= m->o.dims) return 0;
    m->o.part_dim = (uint32_t)v[0];
    if (!(line = strtok_r(NULL, "\n", &save)) || strncmp(line, "extents", 7)) return 0;
    const char *p = line + 7;
    for (uint32_t k = 0; k < m->o.dims; k++) {
        char *end;
        if (*p != ' ' || p[1] < '0' || p[1] > '9') return 0;
        errno = 0;
        m->o.extents[k] = strtoull(p + 1, &end, 10);
        if (errno || m->o.extents[k] > (uint64_t)INT64_MAX) return 0;
        p = end;
    }
    if (*p) return 0;
    if (!(line = strtok_r(NULL, "\n", &save)) || sscanf(line, "parts %llu%n", &v[0], &n) != 1 ||
        line[n] || v[0] < 1 || v[0] > 99999)
        return 0;
    m->parts = (uint32_t)v[0];
    if (!(line = strtok_r(NULL, "\n", &save)) || sscanf(line, "elements %llu%n", &v[0], &n) != 1 ||
        line[n])
        return 0;
    m->elements = v[0];
    if (m->dense) { /* the whole box, cut by rows */
        uint64_t total = 1;
        for (uint32_t k = 0; k < m->o.dims; k++) {
            if (!m->o.extents[k] || total > (uint64_t)INT64_MAX / m->o.extents[k]) return 0;
            total *= m->o.extents[k];
        }
        if (m->o.part_dim || total != m->elements) return 0;
    }
    return !strtok_r(NULL, "\n", &save);
}

static int read_manifest(const char *dir, manifest *m, char *err, size_t errlen)
{
    char path[4096], text[MANIFEST_MAX + 1];
    if ((size_t)snprintf(path, sizeof path, "%s/manifest", dir) >= sizeof path) {
        textfile_set_err(err, errlen, "%s: path too long", dir);
        return LOOM_EINVAL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        textfile_set_err(err, errlen, "%s: %s", path, strerror(e));
        return e == ENOENT ? LOOM_ENOTFOUND : LOOM_EIO;
    }
    size_t n = fread(text, 1, sizeof text, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || n > MANIFEST_MAX || memchr(text, '\0', n)) {
        textfile_set_err(err, errlen, "%s: %s", path,
                         bad ? "cannot be read" : "not a darray manifest");
        return bad ? LOOM_EIO : LOOM_EINVAL;
    }
    text[n] = '\0';
    if (!parse_manifest(text, m)) {
        textfile_set_err(err, errlen, "%s: not a darray manifest (or a malformed one)", path);
        return LOOM_EINVAL;
    }
    return 0;
}

static int read_part(const char *dir, const manifest *m, uint32_t part, darray_elems *l, char *err,
                     size_t errlen)
{
    char name[64], path[4096];
    part_name(name, sizeof name, part, m->parts);
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) {
        textfile_set_err(err, errlen, "%s: path too long", dir);
        return LOOM_EINVAL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        textfile_set_err(err, errlen, "%s: %s", path, strerror(e));
        return e == ENOENT ? LOOM_ENOTFOUND : LOOM_EIO;
    }
    uint32_t vsize = darray_type_size(m->o.type);
    size_t rec = m->o.dims * 8 + (size_t)m->o.width * vsize;
    uint8_t head[HEADER_BYTES], *buf = malloc(rec);
    unsigned char *v = malloc((size_t)m->o.width * vsize);
    struct stat st;
    int rc = buf && v ? 0 : LOOM_ENOMEM;
    if (rc) {
        textfile_set_err(err, errlen, "%s: out of memory", path);
    } else if (fstat(fileno(f), &st) || fread(head, 1, sizeof head, f) != sizeof head ||
               memcmp(head, MAGIC, 8)) {
        rc = LOOM_EINVAL;
        textfile_set_err(err, errlen, "%s: not a darray part (its header)", path);
    }
    uint32_t fields[4] = {0};
    for (int i = 0; !rc && i < 4; i++) fields[i] = msg_load_u32(head + 8 + 4 * i);
    uint64_t count = rc ? 0 : msg_load_u64(head + 24);
    if (!rc && (fields[0] != m->o.dims || fields[1] != part || fields[2] != m->parts ||
                fields[3] != m->o.width || count > ((uint64_t)st.st_size - HEADER_BYTES) / rec ||
                (uint64_t)st.st_size != HEADER_BYTES + count * rec)) {
        rc = LOOM_EINVAL;
        textfile_set_err(
            err, errlen,
            "%s: its header (dims %u, part %u of %u, width %u, %llu elements) does not match "
            "the manifest or the file's %lld bytes",
            path, fields[0], fields[1], fields[2], fields[3], (unsigned long long)count,
            (long long)st.st_size);
    }
    char why[160];
    for (uint64_t i = 0; !rc && i < count; i++) {
        int64_t index[LOOM_DARRAY_MAX_DIMS];
        if (fread(buf, 1, rec, f) != rec) {
            rc = LOOM_EIO;
            textfile_set_err(err, errlen, "%s: truncated at element %llu", path,
                             (unsigned long long)i);
            break;
        }
        for (uint32_t k = 0; k < m->o.dims; k++) index[k] = (int64_t)msg_load_u64(buf + 8 * k);
        for (uint32_t c = 0; c < m->o.width; c++)
            load_value(v + c * vsize, buf + 8 * m->o.dims + c * vsize, vsize);
        if ((rc = darray_elems_add(l, index, v, why, sizeof why)))
            textfile_set_err(err, errlen, "%s: element %llu: %s", path, (unsigned long long)i, why);
    }
    fclose(f);
    free(buf);
    free(v);
    return rc;
}

int loom_darray_load(loom_node *node, const char *dir, loom_darray **out, char *err, size_t errlen)
{
    if (!node || !dir || !out) {
        textfile_set_err(err, errlen, "darray: no node, directory or result");
        return LOOM_EINVAL;
    }
    /* The array is made before the manifest is read, so that a worker that
     * cannot read it tells the others instead of leaving them waiting. */
    static const loom_darray_opts unknown = {.dims = 1};
    loom_darray *d;
    int rc = darray_new(node, &unknown, 0, &d, err, errlen);
    if (rc) return rc;
    *out = NULL;
    manifest m;
    if ((rc = darray_agree_rc(d, read_manifest(dir, &m, err, errlen), err, errlen))) {
        loom_darray_free(d);
        return rc;
    }
    d->dims = m.o.dims;
    d->width = m.o.width;
    d->type = m.o.type;
    d->vsize = darray_type_size(m.o.type);
    d->part_dim = m.o.part_dim;
    d->dense = m.dense;
    memcpy(d->ext, m.o.extents, sizeof d->ext);
    int failed = 0;
    darray_elems l = {.dims = d->dims, .width = d->width, .type = d->type, .ext = d->ext};
    for (uint32_t p = d->rank; !failed && p < m.parts; p += d->W)
        failed = read_part(dir, &m, p, &l, err, errlen);
    rc = darray_settle(d, &l, failed, err, errlen);
    if (!rc && d->total != m.elements) {
        textfile_set_err(err, errlen,
                         "%s: its parts hold %llu elements where the manifest says %llu", dir,
                         (unsigned long long)d->total, (unsigned long long)m.elements);
        rc = LOOM_EINVAL;
    }
    if (rc) {
        loom_darray_free(d);
        return rc;
    }
    *out = d;
    return 0;
}
