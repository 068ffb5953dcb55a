/* filter: the chain of filters of one direction of one table on one link: the
 * spec parser, the wire format, the key cache, and encode/decode that run the
 * filters of filter_select.c and filter_codec.c in their fixed order.
 *
 * Wire format (little-endian), one frame per message:
 *   frame:  u8 version (1) | u8 codec (0 none, 1 lz4, 2 zstd) | u32 body length | payload
 *           payload: the body itself (codec 0, exactly body length bytes) or its
 *           compressed form, which must decompress to exactly body length bytes
 *   body:   u8 type | u8 key form | u8 value form (0 raw, 8 or 16 quantised) |
 *           u8 row layout (0 dense, 1 sparse; sparse only with raw values) |
 *           u32 width | u64 n | keys | values   (width 0: a key list, no values)
 *           key form 0: n u64 keys; 1: the same, and the receiver keeps the list
 *           (the sender cached it); 2: the u64 digest of a list kept before
 *           values, dense: n*width raw values of the type, or quantised blocks;
 *           sparse: u32 count of non-zero values per row (n of them), then every
 *           row's columns (u16 if width <= 65536, else u32; strictly ascending
 *           within a row, < width), then the non-zero values themselves
 * The decoder knows the size every field implies and refuses a body that is
 * not exactly that long, keys that are not strictly ascending, sparse columns
 * that are not ascending or not below the width, and a type or width other than
 * its table's, before it allocates for or trusts anything. */
#include "ps/filter.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/msg.h"
#include "core/rand.h"
#include "loom/error.h"
#include "loom/filter.h"
#include "ps/filter_impl.h"

/* u32 fields; u64 ones use msg_load_u64 / msg_store_u64. */
static void store_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#define FRAME_HEADER   6
#define BODY_HEADER    16
#define KEYS_LIST      0
#define KEYS_LIST_KEEP 1
#define KEYS_DIGEST    2
#define ROWS_DENSE     0
#define ROWS_SPARSE    1
/* Lists shorter than this are sent as they are: a digest would not save much. */
#define KEYCACHE_MIN_KEYS 4

static const char *const names[FILTER_KIND_COUNT] = {"kkt",      "sigmod", "skip", "quant",
                                                     "keycache", "lz4",    "zstd"};

const char *filter_name(filter_kind k)
{
    return (unsigned)k < FILTER_KIND_COUNT ? names[k] : "?";
}

static int spec_error(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return LOOM_EINVAL;
}

/* The argument of filter k from arg (NULL: none given) into spec. */
static int spec_arg(filter_kind k, const char *arg, filter_spec *spec, char *err, size_t errlen)
{
    const char *name = names[k];
    int needs = k == FILTER_KKT || k == FILTER_SIGMOD || k == FILTER_SKIP || k == FILTER_QUANT;
    int takes = needs || k == FILTER_ZSTD;
    if (!arg) {
        if (needs)
            return spec_error(err, errlen, "filter %s needs an argument (%s:VALUE)", name, name);
        spec->arg[k] = k == FILTER_ZSTD ? 3 : 0;
        return 0;
    }
    if (!takes) return spec_error(err, errlen, "filter %s takes no argument", name);
    char *end;
    errno = 0;
    double x = strtod(arg, &end);
    if (*arg == '\0' || *end != '\0' || errno || !isfinite(x))
        return spec_error(err, errlen, "filter %s: '%s' is not a number", name, arg);
    switch (k) {
    case FILTER_KKT:
    case FILTER_SIGMOD:
        if (x < 0) return spec_error(err, errlen, "filter %s: the threshold must be >= 0", name);
        break;
    case FILTER_SKIP:
        if (!(x > 0 && x <= 1))
            return spec_error(err, errlen, "filter skip: the keep probability must be in (0, 1]");
        break;
    case FILTER_QUANT:
        if (x != 8 && x != 16) return spec_error(err, errlen, "filter quant: bits must be 8 or 16");
        break;
    default: /* zstd */
        if (x != floor(x) || x < 1 || x > 19)
            return spec_error(err, errlen, "filter zstd: the level must be a whole number 1..19");
        break;
    }
    spec->arg[k] = x;
    return 0;
}

int filter_spec_parse(const char *text, filter_spec *spec, char *err, size_t errlen)
{
    memset(spec, 0, sizeof *spec);
    if (!text || !*text || !strcmp(text, "none")) return 0;
    char buf[256];
    if (strlen(text) >= sizeof buf) return spec_error(err, errlen, "filter spec too long");
    strcpy(buf, text);
    char *item = buf;
    for (;;) {
        char *comma = strchr(item, ',');
        if (comma) *comma = '\0';
        char *colon = strchr(item, ':');
        if (colon) *colon = '\0';
        if (!*item) return spec_error(err, errlen, "empty filter name in '%s'", text);
        if (!strcmp(item, "sparse") || !strcmp(item, "dense")) {
            if (colon) return spec_error(err, errlen, "%s takes no argument", item);
            if (spec->rows) return spec_error(err, errlen, "give at most one of sparse and dense");
            spec->rows = item[0] == 's' ? FILTER_ROWS_SPARSE : FILTER_ROWS_DENSE;
            if (!comma) break;
            item = comma + 1;
            continue;
        }
        int k = 0;
        while (k < FILTER_KIND_COUNT && strcmp(item, names[k]) != 0) k++;
        if (k == FILTER_KIND_COUNT)
            return spec_error(err, errlen,
                              "unknown filter '%s' (kkt, sigmod, skip, quant, keycache, lz4, "
                              "zstd; or sparse, dense)",
                              item);
        if (spec->on[k]) return spec_error(err, errlen, "filter %s given twice", item);
        int rc = spec_arg((filter_kind)k, colon ? colon + 1 : NULL, spec, err, errlen);
        if (rc) return rc;
        spec->on[k] = 1;
        if (!comma) break;
        item = comma + 1;
    }
    if (spec->on[FILTER_LZ4] && spec->on[FILTER_ZSTD])
        return spec_error(err, errlen, "lz4 and zstd exclude each other: choose one compressor");
    return 0;
}

int filter_spec_parse_dir(const char *text, filter_dir dir, filter_spec *spec, char *err,
                          size_t errlen)
{
    int rc = filter_spec_parse(text, spec, err, errlen);
    if (rc || dir == FILTER_PUSH) return rc;
    for (int k = FILTER_KKT; k <= FILTER_SKIP; k++)
        if (spec->on[k])
            return spec_error(err, errlen, "filter %s leaves rows out: pushes only", names[k]);
    return 0;
}

int loom_filter_check(const char *spec, loom_direction dir, char *err, size_t errlen)
{
    filter_spec s;
    if (dir != LOOM_DIR_PUSH && dir != LOOM_DIR_PULL) return LOOM_EINVAL;
    return filter_spec_parse_dir(spec, dir == LOOM_DIR_PUSH ? FILTER_PUSH : FILTER_PULL, &s, err,
                                 errlen);
}

/* ---- random numbers (core/rand.h) ---- */

double filter_uniform(filter_chain *c)
{
    return rand_unit(rand_next(c->rng));
}

/* ---- the chain ---- */

uint64_t filter_row_bytes(const filter_chain *c, size_t n)
{
    return (uint64_t)n * (8 + c->width * c->value_size);
}

static int is_float(loom_type t)
{
    return t == LOOM_F32 || t == LOOM_F64;
}

int filter_spec_any(const filter_spec *spec)
{
    for (int k = 0; k < FILTER_KIND_COUNT; k++)
        if (spec->on[k]) return 1;
    return 0;
}

/* Bytes of a column index in sparse rows of `width` values. */
static size_t column_bytes(size_t width)
{
    return width <= 65536 ? 2 : 4;
}

static int is_zero(const uint8_t *v, size_t vsize)
{
    for (size_t b = 0; b < vsize; b++)
        if (v[b]) return 0;
    return 1;
}

/* Values whose bits are not all 0. Called on every value of every row a
 * server answers or a worker sends (twice per sparse encoding), so the usual
 * sizes get loops of whole words the compiler vectorises: at K = 100,000 a
 * pull of a whole LDA table is 10^9 values, nearly all 0. */
static size_t count_nonzero(const uint8_t *vals, size_t count, size_t vsize)
{
    size_t nnz = 0;
    if (vsize == 4) {
        for (size_t i = 0; i < count; i++) {
            uint32_t v;
            memcpy(&v, vals + 4 * i, 4);
            nnz += v != 0;
        }
    } else if (vsize == 8) {
        for (size_t i = 0; i < count; i++) {
            uint64_t v;
            memcpy(&v, vals + 8 * i, 8);
            nnz += v != 0;
        }
    } else {
        for (size_t i = 0; i < count; i++) nnz += !is_zero(vals + i * vsize, vsize);
    }
    return nnz;
}

static size_t sparse_bytes(size_t n, size_t width, size_t vsize, size_t nnz)
{
    return n * 4 + nnz * (column_bytes(width) + vsize);
}

/* Whether 64 values spread over n rows, each in another column, are all
 * non-zero. Sparse rows pay only when at least a fifth of the values are 0
 * (2-byte columns and 8-byte values; more for narrower values), so such a
 * message is sent dense without counting: the count reads every value, and
 * dense rows (MF's factors, most gradients) are the common case; at width
 * 64 it was 5% of a push and pull's CPU. A message with many zeros that the
 * probe misses is sent dense, larger but the same. */
static int probe_all_nonzero(const uint8_t *vals, size_t n, size_t width, size_t vsize)
{
    enum { PROBES = 64 };
    if (n * width < 16 * PROBES) return 0; /* small: the count is cheap */
    for (size_t j = 0; j < PROBES; j++) {
        size_t row = n * j / PROBES, col = j * 37 % width;
        if (is_zero(vals + (row * width + col) * vsize, vsize)) return 0;
    }
    return 1;
}

int filter_sparse_pays(loom_type t, size_t width, const void *vals, size_t n, size_t dense_bytes)
{
    size_t vsize = loom_type_size(t);
    /* A row costs at least its key and count (12 bytes) more than its values. */
    if (width * vsize <= 12 || probe_all_nonzero(vals, n, width, vsize)) return 0;
    return filter_sparse_pays_nnz(t, width, n, count_nonzero(vals, n * width, vsize), dense_bytes);
}

int filter_sparse_pays_nnz(loom_type t, size_t width, size_t n, size_t nnz, size_t dense_bytes)
{
    size_t vsize = loom_type_size(t);
    if (width * vsize <= 12) return 0;
    /* The chain's own headers and keys: a sparse message carries its keys (8
     * bytes a row) even where a plain reply would not. */
    return FRAME_HEADER + BODY_HEADER + n * 8 + sparse_bytes(n, width, vsize, nnz) < dense_bytes;
}

/* A sparse row's column j in cb bytes. */
static void store_column(uint8_t *p, uint32_t j, size_t cb)
{
    if (cb == 2) {
        p[0] = (uint8_t)j;
        p[1] = (uint8_t)(j >> 8);
    } else {
        store_u32(p, j);
    }
}

/* Write n rows of dense values as sparse rows to out. */
static void sparse_write(const uint8_t *vals, size_t n, size_t width, size_t vsize, size_t nnz,
                         uint8_t *out)
{
    size_t cb = column_bytes(width);
    uint8_t *cols = out + n * 4, *nz = cols + nnz * cb;
    for (size_t i = 0; i < n; i++) {
        uint32_t row_nnz = 0;
        /* A row of zeros (most rows of a sparse table) is passed over by the
         * fast count rather than value by value. */
        size_t end = count_nonzero(vals + i * width * vsize, width, vsize) ? width : 0;
        for (size_t j = 0; j < end; j++) {
            const uint8_t *v = vals + (i * width + j) * vsize;
            if (is_zero(v, vsize)) continue;
            store_column(cols, (uint32_t)j, cb);
            cols += cb;
            memcpy(nz, v, vsize);
            nz += vsize;
            row_nnz++;
        }
        store_u32(out + 4 * i, row_nnz);
    }
}

/* Take sparse rows off the wire (len bytes, n rows) into *rows, whose off,
 * cols and vals share one new buffer *owned. LOOM_EPROTO unless the counts,
 * columns and length agree exactly; nothing is kept then. */
static int sparse_take(const uint8_t *in, size_t len, size_t n, size_t width, size_t vsize,
                       filter_sparse *rows, void **owned)
{
    size_t cb = column_bytes(width);
    if (len / 4 < n) return LOOM_EPROTO;
    uint64_t nnz = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t row_nnz = load_u32(in + 4 * i);
        if (row_nnz > width) return LOOM_EPROTO;
        nnz += row_nnz;
    }
    /* nnz <= n * width, which the caller bounded; the product cannot overflow. */
    if (len != n * 4 + nnz * (cb + vsize)) return LOOM_EPROTO;
    uint8_t *buf = malloc((n + 1) * 8 + nnz * (4 + vsize));
    if (!buf) return LOOM_ENOMEM;
    /* off, then the values, then the columns: each aligned for its type. */
    uint64_t *off = (uint64_t *)buf;
    uint8_t *vals = buf + (n + 1) * 8;
    uint32_t *col = (uint32_t *)(vals + nnz * vsize);
    const uint8_t *cols = in + n * 4;
    off[0] = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t row_nnz = load_u32(in + 4 * i);
        for (uint32_t e = 0; e < row_nnz; e++, cols += cb) {
            uint32_t j = cb == 2 ? (uint32_t)cols[0] | (uint32_t)cols[1] << 8 : load_u32(cols);
            if (j >= width || (e && j <= col[off[i] + e - 1])) {
                free(buf);
                return LOOM_EPROTO;
            }
            col[off[i] + e] = j;
        }
        off[i + 1] = off[i] + row_nnz;
    }
    memcpy(vals, cols, nnz * vsize); /* on the wire the values follow the columns */
    *rows = (filter_sparse){off, col, vals};
    *owned = buf;
    return 0;
}

/* Scatter n rows given sparse into n dense rows of width values at out. */
static void sparse_scatter(const filter_sparse *rows, size_t n, size_t width, size_t vsize,
                           uint8_t *out)
{
    const uint8_t *vals = rows->vals;
    memset(out, 0, n * width * vsize);
    for (size_t i = 0; i < n; i++)
        for (uint64_t e = rows->off[i]; e < rows->off[i + 1]; e++)
            memcpy(out + (i * width + rows->cols[e]) * vsize, vals + e * vsize, vsize);
}

void *filter_sparse_dense(const filter_chain *c, const filter_sparse *rows, size_t n)
{
    size_t bytes = n * c->width * c->value_size;
    uint8_t *out = malloc(bytes ? bytes : 1);
    if (out) sparse_scatter(rows, n, c->width, c->value_size, out);
    return out;
}

/* Whether the spec has a filter that works on values (kkt, sigmod, skip, quant). */
static int any_select_spec(const filter_spec *spec)
{
    return spec->on[FILTER_KKT] || spec->on[FILTER_SIGMOD] || spec->on[FILTER_SKIP] ||
           spec->on[FILTER_QUANT];
}

int filter_spec_keys(const filter_spec *pull, filter_spec *keys)
{
    memset(keys, 0, sizeof *keys);
    static const filter_kind encoders[] = {FILTER_KEYCACHE, FILTER_LZ4, FILTER_ZSTD};
    for (size_t i = 0; i < sizeof encoders / sizeof encoders[0]; i++) {
        keys->on[encoders[i]] = pull->on[encoders[i]];
        keys->arg[encoders[i]] = pull->arg[encoders[i]];
    }
    return filter_spec_any(keys);
}

int filter_chain_create(const filter_spec *spec, filter_dir dir, loom_type type, size_t width,
                        uint64_t seed, filter_chain **out, char *err, size_t errlen)
{
    *out = NULL;
    if (width > FILTER_MAX_BYTES / 8 || (unsigned)type > LOOM_I64)
        return spec_error(err, errlen, "filter chain: bad table type or width");
    if (width == 0 && (any_select_spec(spec) || spec->rows == FILTER_ROWS_SPARSE))
        return spec_error(err, errlen, "a chain of key lists takes keycache, lz4 and zstd only");
    if (spec->on[FILTER_KKT] && dir != FILTER_PUSH)
        return spec_error(err, errlen, "filter kkt applies to pushed gradients only");
    static const filter_kind lossy[] = {FILTER_KKT, FILTER_SIGMOD, FILTER_SKIP, FILTER_QUANT};
    for (size_t i = 0; i < sizeof lossy / sizeof lossy[0]; i++)
        if (spec->on[lossy[i]] && !is_float(type))
            return spec_error(err, errlen, "filter %s needs a f32 or f64 table", names[lossy[i]]);
    filter_chain *c = calloc(1, sizeof *c);
    if (!c) return LOOM_ENOMEM;
    if (spec->on[FILTER_SIGMOD] && u64map_init(&c->held.map, 64)) {
        free(c);
        return LOOM_ENOMEM;
    }
    c->spec = *spec;
    c->dir = dir;
    c->type = type;
    c->width = width;
    c->value_size = loom_type_size(type);
    rand_seed(c->rng, seed);
    *out = c;
    return 0;
}

void filter_chain_destroy(filter_chain *c)
{
    if (!c) return;
    if (c->spec.on[FILTER_SIGMOD]) filter_held_free(&c->held);
    for (size_t i = 0; i < FILTER_KEYCACHE_ENTRIES; i++) free(c->cache[i].keys);
    free(c->work.keys);
    free(c->work.vals);
    free(c);
}

filter_stats filter_chain_stats(const filter_chain *c, filter_kind k)
{
    filter_stats none = {0, 0, 0};
    return (unsigned)k < FILTER_KIND_COUNT ? c->stats[k] : none;
}

void filter_chain_totals(const filter_chain *c, uint64_t *raw_bytes, uint64_t *wire_bytes,
                         uint64_t *dropped)
{
    *raw_bytes = c->raw_bytes;
    *wire_bytes = c->wire_bytes;
    *dropped = c->dropped;
}

static void count(filter_chain *c, filter_kind k, uint64_t in, uint64_t out)
{
    c->stats[k].msgs++;
    c->stats[k].bytes_in += in;
    c->stats[k].bytes_out += out;
}

/* ---- key cache ---- */

/* The digest of a key list: a splitmix64 chain over the count and the keys. Not
 * cryptographic: two different lists of one link share a digest with probability
 * about 2^-64 (the link itself is authenticated, docs/SECURITY.md). */
uint64_t filter_keys_digest(const uint64_t *keys, size_t n)
{
    uint64_t h = n;
    uint64_t d = rand_splitmix64(&h);
    for (size_t i = 0; i < n; i++) {
        h = d ^ keys[i];
        d = rand_splitmix64(&h);
    }
    return d;
}

static struct keycache_entry *cache_find(filter_chain *c, uint64_t digest)
{
    for (size_t i = 0; i < FILTER_KEYCACHE_ENTRIES; i++)
        if (c->cache[i].used && c->cache[i].digest == digest) return &c->cache[i];
    return NULL;
}

/* Remember a list (the receiver keeps the keys, the sender only the digest),
 * in place of the oldest entry. */
static void cache_add(filter_chain *c, uint64_t digest, uint64_t *keys_owned, size_t n)
{
    struct keycache_entry *e = &c->cache[c->cache_next];
    c->cache_next = (c->cache_next + 1) % FILTER_KEYCACHE_ENTRIES;
    free(e->keys);
    e->digest = digest;
    e->keys = keys_owned;
    e->n = n;
    e->used = 1;
}

void filter_chain_forget_keys(filter_chain *c, uint64_t digest)
{
    struct keycache_entry *e = cache_find(c, digest);
    if (e) e->used = 0;
}

/* ---- encode ---- */

static int any_select(const filter_chain *c)
{
    return any_select_spec(&c->spec);
}

/* How a message's values are written into its body (encode_frame). */
typedef int (*write_vals_fn)(filter_chain *c, const void *ctx, uint8_t *p, size_t vals_bytes);

typedef struct quant_ctx {
    const double *vals;
    size_t count;
    int bits;
} quant_ctx;

static int write_quant(filter_chain *c, const void *ctx, uint8_t *p, size_t vals_bytes)
{
    const quant_ctx *q = ctx;
    int rc = filter_quant_encode(c, q->vals, q->count, q->bits, p);
    if (!rc) count(c, FILTER_QUANT, q->count * c->value_size, vals_bytes);
    return rc;
}

/* Dense rows as the table stores them, and their non-zero values. */
typedef struct dense_ctx {
    const uint8_t *typed;
    size_t n, nnz;
} dense_ctx;

static int write_dense(filter_chain *c, const void *ctx, uint8_t *p, size_t vals_bytes)
{
    (void)c;
    if (vals_bytes) memcpy(p, ((const dense_ctx *)ctx)->typed, vals_bytes);
    return 0;
}

static int write_dense_sparse(filter_chain *c, const void *ctx, uint8_t *p, size_t vals_bytes)
{
    (void)vals_bytes;
    const dense_ctx *d = ctx;
    sparse_write(d->typed, d->n, c->width, c->value_size, d->nnz, p);
    return 0;
}

/* The frame of n rows with keys: the body's header, the keys (or their
 * digest), vals_bytes of values written by write, then compressed when that
 * makes it smaller. Frees `owned` (the caller's converted values) either way. */
static int encode_frame(filter_chain *c, const uint64_t *keys, size_t n, int bits, int sparse,
                        size_t vals_bytes, write_vals_fn write, const void *ctx, void *owned,
                        uint8_t **out, size_t *outlen)
{
    int key_form = KEYS_LIST;
    uint64_t digest = 0;
    if (c->spec.on[FILTER_KEYCACHE] && n >= KEYCACHE_MIN_KEYS) {
        digest = filter_keys_digest(keys, n);
        key_form = cache_find(c, digest) ? KEYS_DIGEST : KEYS_LIST_KEEP;
    }
    size_t keys_bytes = key_form == KEYS_DIGEST ? 8 : n * 8;
    size_t body_len = BODY_HEADER + keys_bytes + vals_bytes;
    uint8_t *frame = body_len > FILTER_MAX_BYTES ? NULL : malloc(FRAME_HEADER + body_len);
    if (!frame) {
        free(owned);
        return body_len > FILTER_MAX_BYTES ? LOOM_ELIMIT : LOOM_ENOMEM;
    }
    uint8_t *body = frame + FRAME_HEADER, *p = body;
    p[0] = (uint8_t)c->type;
    p[1] = (uint8_t)key_form;
    p[2] = (uint8_t)bits;
    p[3] = sparse ? ROWS_SPARSE : ROWS_DENSE;
    store_u32(p + 4, (uint32_t)c->width);
    msg_store_u64(p + 8, n);
    p += BODY_HEADER;
    if (key_form == KEYS_DIGEST) {
        msg_store_u64(p, digest);
        p += 8;
    } else {
        for (size_t i = 0; i < n; i++, p += 8) msg_store_u64(p, keys[i]);
    }
    int rc = write(c, ctx, p, vals_bytes);
    free(owned);
    if (rc) {
        free(frame);
        return rc;
    }
    if (c->spec.on[FILTER_KEYCACHE]) {
        count(c, FILTER_KEYCACHE, n * 8, keys_bytes);
        if (key_form == KEYS_LIST_KEEP) cache_add(c, digest, NULL, n);
    }

    /* The frame, compressed when that makes it smaller. */
    int codec = c->spec.on[FILTER_LZ4] ? 1 : c->spec.on[FILTER_ZSTD] ? 2 : 0;
    size_t payload_len = body_len;
    if (codec) {
        uint8_t *z = NULL;
        size_t zlen = 0;
        rc = filter_compress(codec, (int)c->spec.arg[FILTER_ZSTD], body, body_len, &z, &zlen);
        if (rc) {
            free(frame);
            return rc;
        }
        if (zlen) {
            memcpy(body, z, zlen);
            payload_len = zlen;
        } else {
            codec = 0;
        }
        free(z);
        count(c, c->spec.on[FILTER_LZ4] ? FILTER_LZ4 : FILTER_ZSTD, body_len, payload_len);
    }
    frame[0] = 1;
    frame[1] = (uint8_t)codec;
    store_u32(frame + 2, (uint32_t)body_len);
    *out = frame;
    *outlen = FRAME_HEADER + payload_len;
    c->wire_bytes += *outlen;
    return 0;
}

int filter_chain_encode(filter_chain *c, const filter_msg *m, uint8_t **out, size_t *outlen)
{
    *out = NULL;
    *outlen = 0;
    for (size_t i = 1; i < m->n; i++)
        if (m->keys[i] <= m->keys[i - 1]) return LOOM_EINVAL;
    if (m->n > FILTER_MAX_BYTES / (8 + c->width * c->value_size)) return LOOM_ELIMIT;
    c->raw_bytes += filter_row_bytes(c, m->n);

    /* The rows to send: as doubles through the select filters (float tables),
     * or the caller's arrays as they are. */
    const uint64_t *keys = m->keys;
    const void *raw_vals = m->vals;
    size_t n = m->n;
    if (any_select(c)) {
        if (filter_work_reserve(c, n ? n : 1)) return LOOM_ENOMEM;
        if (n) memcpy(c->work.keys, m->keys, n * sizeof *m->keys);
        for (size_t i = 0; i < n * c->width; i++)
            c->work.vals[i] = c->type == LOOM_F32 ? (double)((const float *)m->vals)[i]
                                                  : ((const double *)m->vals)[i];
        c->work.n = n;
        if (c->spec.on[FILTER_KKT]) {
            uint64_t in = filter_row_bytes(c, c->work.n);
            filter_kkt(c, m);
            count(c, FILTER_KKT, in, filter_row_bytes(c, c->work.n));
        }
        if (c->spec.on[FILTER_SIGMOD]) {
            uint64_t in = filter_row_bytes(c, c->work.n);
            int rc = filter_sigmod(c, m->flush);
            if (rc) return rc;
            count(c, FILTER_SIGMOD, in, filter_row_bytes(c, c->work.n));
        }
        if (c->spec.on[FILTER_SKIP]) {
            uint64_t in = filter_row_bytes(c, c->work.n);
            filter_skip(c);
            count(c, FILTER_SKIP, in, filter_row_bytes(c, c->work.n));
        }
        keys = c->work.keys;
        raw_vals = NULL;
        n = c->work.n;
    }

    /* The body. */
    size_t count_vals = n * c->width;
    int bits = c->spec.on[FILTER_QUANT] ? (int)c->spec.arg[FILTER_QUANT] : 0;
    size_t vals_bytes = bits ? filter_quant_size(count_vals, bits) : count_vals * c->value_size;
    /* Unquantised values as the table stores them (the select filters worked
     * on doubles), then dense or sparse rows, whichever the spec asks or is smaller. */
    const uint8_t *typed = raw_vals;
    uint8_t *converted = NULL;
    int sparse = 0;
    size_t nnz = 0;
    if (!bits) {
        if (!typed && count_vals) {
            converted = malloc(count_vals * c->value_size);
            if (!converted) return LOOM_ENOMEM;
            for (size_t i = 0; i < count_vals; i++) {
                if (c->type == LOOM_F32) {
                    float f = (float)c->work.vals[i];
                    memcpy(converted + 4 * i, &f, 4);
                } else {
                    memcpy(converted + 8 * i, &c->work.vals[i], 8);
                }
            }
            typed = converted;
        }
        if (c->spec.rows != FILTER_ROWS_DENSE && c->width) {
            nnz = count_nonzero(typed, count_vals, c->value_size);
            size_t sb = sparse_bytes(n, c->width, c->value_size, nnz);
            sparse = c->spec.rows == FILTER_ROWS_SPARSE || sb < vals_bytes;
            if (sparse) vals_bytes = sb;
        }
    }
    if (bits) {
        quant_ctx q = {c->work.vals, count_vals, bits};
        return encode_frame(c, keys, n, bits, 0, vals_bytes, write_quant, &q, converted, out,
                            outlen);
    }
    dense_ctx dc = {typed, n, nnz};
    return encode_frame(c, keys, n, 0, sparse, vals_bytes,
                        sparse ? write_dense_sparse : write_dense, &dc, converted, out, outlen);
}

/* Rows given sparse (filter_chain_encode_sparse), and their values whose bits
 * are not all 0 (nnz): written sparse, or scattered into dense rows. */
typedef struct given_ctx {
    const filter_sparse *rows;
    size_t n, nnz;
} given_ctx;

static int write_given_sparse(filter_chain *c, const void *ctx, uint8_t *p, size_t vals_bytes)
{
    (void)vals_bytes;
    const given_ctx *g = ctx;
    const uint8_t *vals = g->rows->vals;
    size_t cb = column_bytes(c->width), vs = c->value_size;
    uint8_t *cols = p + g->n * 4, *nz = cols + g->nnz * cb;
    for (size_t i = 0; i < g->n; i++) {
        uint32_t row_nnz = 0;
        for (uint64_t e = g->rows->off[i]; e < g->rows->off[i + 1]; e++) {
            const uint8_t *v = vals + e * vs;
            if (is_zero(v, vs)) continue;
            uint32_t j = g->rows->cols[e];
            store_column(cols, j, cb);
            cols += cb;
            memcpy(nz, v, vs);
            nz += vs;
            row_nnz++;
        }
        store_u32(p + 4 * i, row_nnz);
    }
    return 0;
}

static int write_given_dense(filter_chain *c, const void *ctx, uint8_t *p, size_t vals_bytes)
{
    (void)vals_bytes;
    const given_ctx *g = ctx;
    sparse_scatter(g->rows, g->n, c->width, c->value_size, p);
    return 0;
}

int filter_chain_takes_sparse(const filter_chain *c)
{
    return !any_select(c) && !c->spec.on[FILTER_QUANT];
}

size_t filter_sparse_nonzero(loom_type t, const void *vals, size_t count)
{
    return count_nonzero(vals, count, loom_type_size(t));
}

int filter_chain_encode_sparse(filter_chain *c, const uint64_t *keys, size_t n,
                               const filter_sparse *rows, uint8_t **out, size_t *outlen)
{
    *out = NULL;
    *outlen = 0;
    if (!filter_chain_takes_sparse(c) || !c->width) return LOOM_EINVAL;
    for (size_t i = 1; i < n; i++)
        if (keys[i] <= keys[i - 1]) return LOOM_EINVAL;
    if (n > FILTER_MAX_BYTES / (8 + c->width * c->value_size)) return LOOM_ELIMIT;
    c->raw_bytes += filter_row_bytes(c, n);
    size_t nnz = count_nonzero((const uint8_t *)rows->vals + rows->off[0] * c->value_size,
                               (size_t)(rows->off[n] - rows->off[0]), c->value_size);
    size_t dense = n * c->width * c->value_size, sb = sparse_bytes(n, c->width, c->value_size, nnz);
    int sparse =
        c->spec.rows == FILTER_ROWS_SPARSE || (c->spec.rows != FILTER_ROWS_DENSE && sb < dense);
    given_ctx g = {rows, n, nnz};
    return encode_frame(c, keys, n, 0, sparse, sparse ? sb : dense,
                        sparse ? write_given_sparse : write_given_dense, &g, NULL, out, outlen);
}

/* ---- decode ---- */

/* Decode a body; with sp, sparse rows are left sparse (*sp, in *owned) and
 * *vals_out is NULL. */
static int decode_body(filter_chain *c, const uint8_t *body, size_t len, size_t max_rows,
                       uint64_t **keys_out, void **vals_out, filter_sparse *sp, void **owned,
                       size_t *n_out, uint64_t *digest_out)
{
    if (len < BODY_HEADER) return LOOM_EPROTO;
    int type = body[0], key_form = body[1], bits = body[2];
    uint32_t width = load_u32(body + 4);
    uint64_t n = msg_load_u64(body + 8);
    int sparse = body[3] == ROWS_SPARSE;
    if (type != (int)c->type || width != c->width || body[3] > ROWS_SPARSE ||
        key_form > KEYS_DIGEST)
        return LOOM_EPROTO;
    if (bits != 0 && (bits != 8 && bits != 16)) return LOOM_EPROTO;
    if (bits && (!is_float(c->type) || sparse)) return LOOM_EPROTO;
    /* Every dense value takes at least one byte, every sparse row four, so a
     * count above that is a lie; below it, the products cannot overflow. A
     * sparse message may still claim far more rows than it carries values:
     * what they decode to is bounded like any message. */
    if (sparse && width == 0) return LOOM_EPROTO;
    /* A key list without values: every key takes 8 bytes, or the digest's
     * count is checked against the list it names. */
    size_t row_min = sparse ? 4 : width ? width : key_form == KEYS_DIGEST ? 0 : 8;
    if ((row_min && n > len / row_min) || n > max_rows) return LOOM_EPROTO;
    if (sparse && n > FILTER_MAX_BYTES / (width * c->value_size)) return LOOM_ELIMIT;
    size_t count_vals = (size_t)n * width;
    size_t keys_bytes = key_form == KEYS_DIGEST ? 8 : (size_t)n * 8;
    size_t vals_bytes = bits ? filter_quant_size(count_vals, bits) : count_vals * c->value_size;
    if (sparse) {
        if (len < BODY_HEADER + keys_bytes) return LOOM_EPROTO;
        vals_bytes = len - BODY_HEADER - keys_bytes; /* checked exactly by sparse_take */
    }
    if (len != BODY_HEADER + keys_bytes + vals_bytes) return LOOM_EPROTO;
    const uint8_t *p = body + BODY_HEADER;

    struct keycache_entry *cached = NULL;
    uint64_t digest = 0;
    if (key_form == KEYS_DIGEST) {
        digest = msg_load_u64(p);
        cached = c->spec.on[FILTER_KEYCACHE] ? cache_find(c, digest) : NULL;
        if (!cached) {
            *digest_out = digest;
            return LOOM_ENOTFOUND;
        }
        if (cached->n != n) return LOOM_EPROTO;
    }
    uint64_t *keys = malloc(n ? n * sizeof *keys : 1);
    void *vals = sparse && sp ? NULL : malloc(count_vals ? count_vals * c->value_size : 1);
    if (!keys || (!vals && !(sparse && sp))) {
        free(keys);
        free(vals);
        return LOOM_ENOMEM;
    }
    if (cached) {
        memcpy(keys, cached->keys, n * sizeof *keys);
    } else {
        for (size_t i = 0; i < n; i++) {
            keys[i] = msg_load_u64(p + 8 * i);
            if (i && keys[i] <= keys[i - 1]) {
                free(keys);
                free(vals);
                return LOOM_EPROTO;
            }
        }
    }
    p += keys_bytes;
    filter_sparse taken;
    void *buf = NULL;
    int rc = bits     ? filter_quant_decode(p, count_vals, bits, c->type, vals)
             : sparse ? sparse_take(p, vals_bytes, n, width, c->value_size, &taken, &buf)
                      : (memcpy(vals, p, vals_bytes), 0);
    if (!rc && sparse && !sp) {
        sparse_scatter(&taken, n, width, c->value_size, vals);
        free(buf);
        buf = NULL;
    }
    uint64_t *kept = NULL;
    if (!rc && key_form == KEYS_LIST_KEEP && c->spec.on[FILTER_KEYCACHE]) {
        digest = filter_keys_digest(keys, n);
        if (!cache_find(c, digest)) {
            kept = malloc(n * sizeof *kept);
            if (!kept) rc = LOOM_ENOMEM;
        }
    }
    if (rc) {
        free(keys);
        free(vals);
        free(buf);
        return rc;
    }
    /* Everything checked: now the cache may change and the counts count. */
    if (kept) {
        memcpy(kept, keys, n * sizeof *kept);
        cache_add(c, digest, kept, n);
    }
    if (c->spec.on[FILTER_KEYCACHE]) count(c, FILTER_KEYCACHE, keys_bytes, n * 8);
    if (bits) count(c, FILTER_QUANT, vals_bytes, count_vals * c->value_size);
    *keys_out = keys;
    *vals_out = vals;
    if (buf) {
        *sp = taken;
        *owned = buf;
    }
    *n_out = n;
    return 0;
}

static int decode(filter_chain *c, const uint8_t *in, size_t len, size_t max_rows, uint64_t **keys,
                  void **vals, filter_sparse *sp, void **owned, size_t *n, uint64_t *digest)
{
    *keys = NULL;
    *vals = NULL;
    if (owned) *owned = NULL;
    *n = 0;
    *digest = 0;
    int rc = LOOM_EPROTO;
    uint8_t *inflated = NULL;
    if (len < FRAME_HEADER || in[0] != 1 || in[1] > 2) goto refused;
    int codec = in[1];
    size_t body_len = load_u32(in + 2);
    if (body_len > FILTER_MAX_BYTES) {
        rc = LOOM_ELIMIT;
        goto refused;
    }
    const uint8_t *body = in + FRAME_HEADER;
    size_t payload_len = len - FRAME_HEADER;
    if (codec == 0) {
        if (payload_len != body_len) goto refused;
    } else {
        if ((uint64_t)payload_len * FILTER_MAX_RATIO < body_len) {
            rc = LOOM_ELIMIT;
            goto refused;
        }
        inflated = malloc(body_len ? body_len : 1);
        if (!inflated) {
            rc = LOOM_ENOMEM;
            goto refused;
        }
        rc = filter_decompress(codec, body, payload_len, inflated, body_len);
        if (rc) goto refused;
        body = inflated;
    }
    rc = decode_body(c, body, body_len, max_rows, keys, vals, sp, owned, n, digest);
    if (rc) goto refused;
    filter_kind compressor = codec == 1 ? FILTER_LZ4 : FILTER_ZSTD;
    if (codec && c->spec.on[compressor]) count(c, compressor, payload_len, body_len);
    free(inflated);
    c->wire_bytes += len;
    c->raw_bytes += filter_row_bytes(c, *n);
    return 0;
refused:
    free(inflated);
    c->dropped++;
    return rc;
}

int filter_chain_decode(filter_chain *c, const uint8_t *in, size_t len, size_t max_rows,
                        uint64_t **keys, void **vals, size_t *n, uint64_t *digest)
{
    return decode(c, in, len, max_rows, keys, vals, NULL, NULL, n, digest);
}

int filter_chain_decode_sparse(filter_chain *c, const uint8_t *in, size_t len, size_t max_rows,
                               uint64_t **keys, void **vals, filter_sparse *rows, void **owned,
                               size_t *n, uint64_t *digest)
{
    return decode(c, in, len, max_rows, keys, vals, rows, owned, n, digest);
}
