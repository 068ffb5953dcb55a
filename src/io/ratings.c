/* ratings: the ratings reader ("user item rating [timestamp ...]"); one
 * worker's share of one shared file.
 *
 * Format. One rating per line, three fields or more: two integer ids (int64,
 * a sign allowed) and a rating (a decimal number, finite as a float, read
 * exactly as strtof() reads it: decimal.h). What follows the rating (a
 * timestamp, anything) is not looked at. The separator is one of three, the
 * same on every line: a comma or a tab (either may have blanks around it, as
 * padding), or spaces (a run of spaces and tabs). Unless the options name
 * it, it is detected from the first data line: comma if the line has one,
 * else tab if it has one, else spaces. Blank lines are skipped. The file's
 * first non-blank line is a header, and skipped, if its first field does not
 * start like a number (a digit, or a sign and a digit): ratings.csv's
 * "userId,movieId,rating,timestamp". Every share looks at the start of the
 * file to decide both, so all decide alike.
 *
 * Ids. The dense indices must be the same in every share without the
 * workers talking, and they are the ranks of the ids over the whole file: so
 * every share parses every line. It keeps the ratings of its own lines (the
 * lines that start in its byte range, textfile.h), and numbers every id in
 * order of first appearance (idset: a table indexed by the id for the usual
 * small ones, a hash map for the rest); at the end the distinct ids are
 * sorted and those numbers replaced by ranks. Only lines
 * that parse completely give ids, so a malformed line changes the mapping in
 * no share: its own share reports it (or skips it, with skip_bad), the others
 * pass over it in silence. Parsing the whole file costs each share a full
 * read, but ratings files are small next to what they train (MovieLens 25M
 * is 680 MB, read here at several hundred MB/s); consecutive repeats of an
 * id (files sorted by user) skip the lookup. */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/sorted.h"
#include "core/u64map.h"
#include "io/decimal.h"
#include "io/textfile.h"
#include "loom/data.h"
#include "loom/error.h"

/* Dense indices are uint32 and u64map cannot hold slot UINT32_MAX. */
#define MAX_IDS ((size_t)UINT32_MAX - 1)
/* The direct table (see idset) covers ids below file size / 4, and at least
 * 2^16 and at most 2^24 of them: at most as many bytes as the file. */
#define DIRECT_MIN ((size_t)1 << 16)
#define DIRECT_MAX ((size_t)1 << 24)

/* The ids of one column (users or items), numbered in order of first
 * appearance. Ids are usually small and dense (MovieLens: 1..200000), and
 * then a table indexed by the id is much faster than a hash map, whose
 * probes miss the cache when ids come in random order (items): ids in
 * [0, direct_max) go to the table, the others (negative, huge) to u64map. */
typedef struct idset {
    uint32_t *direct;  /* direct[id]: its number + 1, or 0 if not seen */
    size_t ndirect;    /* entries of direct */
    size_t direct_max; /* how far direct may grow */
    u64map map;        /* the other ids: id (as uint64) -> number */
    int64_t *ids;      /* the ids, by number */
    size_t n, cap;     /* ids numbered; capacity of ids */
    int64_t last;      /* the last id looked up ... */
    uint32_t slot;     /* ... and its number */
    int have_last;     /* whether last is set */
    const char *of;    /* "user" or "item", for messages */
} idset;

/* The parse of one share. */
typedef struct reader {
    const textfile *f;
    loom_ratings_opts o;
    char sep; /* ',', '\t' or ' ' */
    loom_ratings *r;
    size_t cap;  /* capacity of r->user, item, rating, line */
    int own;     /* whether the lines being parsed are this share's */
    size_t line; /* absolute 1-based number of the line being parsed */
    idset users, items;
    textfile_fault why; /* after a malformed line: what is wrong, and where */
    char *err;
    size_t errlen;
} reader;

/* Whether a field ends at p: a blank, a comma or the end of the line. The
 * separator check after it tells whether that is the file's separator. */
static inline int ends_field(const char *p)
{
    return textfile_blank(*p) || *p == ',' || textfile_eol(p);
}

static const char *quote(const char *p, char out[TEXTFILE_QUOTED])
{
    return textfile_quote(p, ',', out);
}

static const char *sep_plural(char sep)
{
    return sep == ',' ? "commas" : sep == '\t' ? "tabs" : "spaces";
}

static const char *sep_single(char c)
{
    return c == ',' ? "a comma" : c == '\t' ? "a tab" : "a space";
}

/* Parses an id field at *p into *id and moves *p past it. */
static int parse_id(reader *rd, const char **p, const char *what, int64_t *id)
{
    char shown[TEXTFILE_QUOTED];
    const char *tok = *p, *q = tok;
    int neg = *q == '-', overflow = 0;
    if (*q == '+' || *q == '-') q++;
    uint64_t m;
    const char *e = decimal_scan_u64(q, &m, &overflow);
    if (e == q || !ends_field(e))
        return textfile_fail(&rd->why, tok, "bad %s id '%s'", what, quote(tok, shown));
    if (overflow || m > (uint64_t)INT64_MAX + neg)
        return textfile_fail(&rd->why, tok, "%s id '%s' out of range", what, quote(tok, shown));
    /* -m, also for m = 2^63, without signed overflow */
    *id = !neg ? (int64_t)m : m ? -(int64_t)(m - 1) - 1 : 0;
    *p = e;
    return 0;
}

/* Moves *p from the end of field `fields` (1-based) over the file's
 * separator to the start of the next field. After the rating (fields 3) the
 * line may end there, or after the separator: the rest is not looked at. */
static int separator(reader *rd, const char **p, int fields, const char *after)
{
    const char sep = rd->sep;
    const char *q = *p;
    if (sep == ' ') {
        while (textfile_blank(*q)) q++;
        if (q == *p && !textfile_eol(q)) goto inconsistent; /* a comma: see ends_field */
    } else {
        /* Blanks around a comma, spaces around a tab, are padding. */
        while (*q == ' ' || (sep == ',' && *q == '\t')) q++;
        if (*q == sep) {
            for (q++; *q == ' ' || (sep == ',' && *q == '\t');) q++;
        } else if (!textfile_eol(q)) {
            goto inconsistent;
        } else if (fields >= 3) {
            q = *p; /* the line ends after the rating */
        }
    }
    if (textfile_eol(q) && fields < 3)
        return textfile_fail(&rd->why, *p, "too few fields (%d): want user, item, rating", fields);
    *p = q;
    return 0;

inconsistent:;
    /* What stood there: a comma or tab after the padding, else what the
     * padding was (a space where the file wants a tab, a tab for a comma). */
    char found = *q == ',' || *q == '\t' ? *q : **p;
    return textfile_fail(&rd->why, *p,
                         "inconsistent separator: %s after the %s, but the file uses %s",
                         sep_single(found), after, sep_plural(sep));
}

/* Parses the line at p, which ends with a newline before end. Sets *got to 1
 * and the fields if it holds a rating, to 0 if it is blank; *next to the next
 * line's start. Returns 0 or LOOM_EINVAL (rd->why tells what and where). */
static int parse_line(reader *rd, const char *p, const char *end, const char **next, int *got,
                      int64_t *user, int64_t *item, float *rating)
{
    char shown[TEXTFILE_QUOTED];
    int rc;
    *got = 0;
    while (textfile_blank(*p)) p++;
    if (textfile_eol(p)) {
        *next = textfile_after_line(p, end);
        return 0;
    }
    if ((rc = parse_id(rd, &p, "user", user)) || (rc = separator(rd, &p, 1, "user id")) ||
        (rc = parse_id(rd, &p, "item", item)) || (rc = separator(rd, &p, 2, "item id")))
        return rc;

    const char *tok = p;
    decimal x;
    p = decimal_scan(tok, &x);
    if (!p || !ends_field(p)) {
        const char *s = tok + (*tok == '+' || *tok == '-');
        /* No read past a mismatch, and '\n' | 0x20 is no letter. */
        if (((s[0] | 0x20) == 'n' && (s[1] | 0x20) == 'a' && (s[2] | 0x20) == 'n') ||
            ((s[0] | 0x20) == 'i' && (s[1] | 0x20) == 'n' && (s[2] | 0x20) == 'f'))
            return textfile_fail(&rd->why, tok, "rating '%s' is not a finite number",
                                 quote(tok, shown));
        return textfile_fail(&rd->why, tok, "bad rating '%s'", quote(tok, shown));
    }
    *rating = decimal_to_float(&x, tok);
    if (!isfinite(*rating))
        return textfile_fail(&rd->why, tok, "rating '%s' out of range", quote(tok, shown));

    /* After the rating: the end of the line, or a separator and whatever. */
    if ((rc = separator(rd, &p, 3, "rating"))) return rc;
    *next = textfile_after_line(p, end);
    *got = 1;
    return 0;
}

/* Makes s->direct cover id (< s->direct_max), growing it by doubling. */
static int grow_direct(idset *s, uint64_t id)
{
    size_t n = s->ndirect ? s->ndirect : 4096;
    while (n <= id) n *= 2;
    if (n > s->direct_max) n = s->direct_max;
    uint32_t *d = realloc(s->direct, n * sizeof *d);
    if (!d) return LOOM_ENOMEM;
    memset(d + s->ndirect, 0, (n - s->ndirect) * sizeof *d);
    s->direct = d;
    s->ndirect = n;
    return 0;
}

/* The number of id in s, given it now if it has none. Returns 0,
 * LOOM_ENOMEM, or LOOM_ELIMIT with rd->why set. */
static int number(reader *rd, idset *s, int64_t id, const char *at, uint32_t *slot)
{
    if (s->have_last && s->last == id) { /* files sorted by user */
        *slot = s->slot;
        return 0;
    }
    const size_t n = s->n;
    const int direct = id >= 0 && (uint64_t)id < s->direct_max;
    uint32_t k = 0;
    int fresh = 1;
    if (direct) {
        if ((uint64_t)id >= s->ndirect && grow_direct(s, (uint64_t)id)) return LOOM_ENOMEM;
        if (s->direct[id]) {
            k = s->direct[id] - 1;
            fresh = 0;
        }
    } else if (n < MAX_IDS) { /* numbered n if new */
        k = u64map_put(&s->map, (uint64_t)id, (uint32_t)n, &fresh);
        if (k == UINT32_MAX) return LOOM_ENOMEM;
    } else {
        fresh = !u64map_get(&s->map, (uint64_t)id, &k);
    }
    if (fresh) {
        if (n == MAX_IDS) {
            textfile_fail(&rd->why, at, "more than %zu distinct %s ids", MAX_IDS, s->of);
            return LOOM_ELIMIT;
        }
        if (n == s->cap) {
            size_t cap = s->cap ? 2 * s->cap : 1024;
            int64_t *ids = realloc(s->ids, cap * sizeof *ids);
            if (!ids) return LOOM_ENOMEM;
            s->ids = ids;
            s->cap = cap;
        }
        s->ids[n] = id;
        s->n = n + 1;
        k = (uint32_t)n;
        if (direct) s->direct[id] = k + 1;
    }
    s->last = id;
    s->slot = *slot = k;
    s->have_last = 1;
    return 0;
}

static int grow(reader *rd)
{
    loom_ratings *r = rd->r;
    size_t cap = rd->cap * 2;
    void *t;
    if (!(t = realloc(r->user, cap * sizeof *r->user))) return LOOM_ENOMEM;
    r->user = t;
    if (!(t = realloc(r->item, cap * sizeof *r->item))) return LOOM_ENOMEM;
    r->item = t;
    if (!(t = realloc(r->rating, cap * sizeof *r->rating))) return LOOM_ENOMEM;
    r->rating = t;
    if (!(t = realloc(r->line, cap * sizeof *r->line))) return LOOM_ENOMEM;
    r->line = t;
    rd->cap = cap;
    return 0;
}

/* Numbers the line's ids and, for this share's lines, keeps the rating. */
static int add(reader *rd, const char *at, int64_t user, int64_t item, float rating)
{
    uint32_t u, i;
    int rc;
    if ((rc = number(rd, &rd->users, user, at, &u)) || (rc = number(rd, &rd->items, item, at, &i)))
        return rc;
    if (!rd->own) return 0;
    loom_ratings *r = rd->r;
    if (r->n == rd->cap && grow(rd)) return LOOM_ENOMEM;
    r->user[r->n] = u;
    r->item[r->n] = i;
    r->rating[r->n] = rating;
    r->line[r->n] = rd->line;
    r->n++;
    return 0;
}

/* Parses the lines starting in [p, stop) (textfile_lines_fn). */
static int parse_lines(void *ctx, const char *p, const char *stop, const char *end)
{
    reader *rd = ctx;
    while (p < stop) {
        const char *line = p;
        int64_t user = 0, item = 0;
        float rating = 0;
        int got, rc = parse_line(rd, p, end, &p, &got, &user, &item, &rating);
        if (!rc && got) rc = add(rd, line, user, item, rating);
        if (rc == LOOM_EINVAL && (!rd->own || rd->o.skip_bad)) {
            rd->r->skipped += (size_t)rd->own;
            p = textfile_after_line(rd->why.at, end);
        } else if (rc) {
            return textfile_report(rd->f, rd->line, rc, &rd->why, rd->err, rd->errlen);
        }
        rd->line++;
    }
    return 0;
}

/* Where the data starts (after the header line, if there is one), and the
 * separator if the options leave it open: from the first non-blank lines. */
static size_t data_start(reader *rd)
{
    const textfile *f = rd->f;
    size_t pos = 0, body = 0;
    int first = 1;
    rd->sep = rd->o.separator ? rd->o.separator : ' ';
    for (; pos < f->size; pos = textfile_next_line(f, pos)) {
        const char *p = textfile_line(f, pos);
        while (textfile_blank(*p)) p++;
        if (textfile_eol(p)) continue;
        if (first) {
            first = 0;
            const char *q = p + (*p == '+' || *p == '-');
            if (decimal_digit(*q) >= 10) {
                body = textfile_next_line(f, pos);
                continue;
            }
        }
        if (!rd->o.separator) {
            int comma = 0, tab = 0;
            for (; *p != '\n'; p++) {
                comma |= *p == ',';
                tab |= *p == '\t';
            }
            rd->sep = comma ? ',' : tab ? '\t' : ' ';
        }
        break;
    }
    return body;
}

typedef struct numbered {
    int64_t id;
    uint32_t number;
} numbered;

static int by_id(const void *a, const void *b)
{
    int64_t x = ((const numbered *)a)->id, y = ((const numbered *)b)->id;
    return (x > y) - (x < y);
}

/* Puts s's ids in ascending order into *sorted (*count of them) and replaces
 * the numbers in v[0, n) by ranks. The direct table is in order already;
 * only the hash map's ids are sorted, and they are the negative ones, before
 * the table's, and the large ones, after. */
static int rank(const idset *s, int64_t **sorted, size_t *count, uint32_t *v, size_t n)
{
    const size_t k = s->n, h = u64map_size(&s->map);
    *count = k;
    numbered *p = malloc((h ? h : 1) * sizeof *p);
    uint32_t *rank_of = malloc((k ? k : 1) * sizeof *rank_of);
    int64_t *out = *sorted = malloc((k ? k : 1) * sizeof *out);
    if (!out || !p || !rank_of) {
        free(p);
        free(rank_of);
        return LOOM_ENOMEM;
    }
    size_t m = 0, r = 0, neg = 0;
    for (size_t j = 0; j < k; j++)
        if (s->ids[j] < 0 || (uint64_t)s->ids[j] >= s->direct_max)
            p[m++] = (numbered){s->ids[j], (uint32_t)j};
    qsort(p, m, sizeof *p, by_id);
    while (neg < m && p[neg].id < 0) neg++;
    for (size_t i = 0; i < neg; i++) {
        rank_of[p[i].number] = (uint32_t)r;
        out[r++] = p[i].id;
    }
    for (size_t id = 0; id < s->ndirect; id++) {
        if (!s->direct[id]) continue;
        rank_of[s->direct[id] - 1] = (uint32_t)r;
        out[r++] = (int64_t)id;
    }
    for (size_t i = neg; i < m; i++) {
        rank_of[p[i].number] = (uint32_t)r;
        out[r++] = p[i].id;
    }
    for (size_t i = 0; i < n; i++) v[i] = rank_of[v[i]];
    free(p);
    free(rank_of);
    return 0;
}

static int new_ratings(reader *rd, size_t bytes)
{
    loom_ratings *r = rd->r = calloc(1, sizeof *r);
    if (!r) return LOOM_ENOMEM;
    r->bytes = bytes;
    rd->cap = bytes / 16 + 16; /* ratings.csv: 25 bytes a line, u.data 21 */
    r->user = malloc(rd->cap * sizeof *r->user);
    r->item = malloc(rd->cap * sizeof *r->item);
    r->rating = malloc(rd->cap * sizeof *r->rating);
    r->line = malloc(rd->cap * sizeof *r->line);
    if (!r->user || !r->item || !r->rating || !r->line) return LOOM_ENOMEM;
    if (u64map_init(&rd->users.map, 64) || u64map_init(&rd->items.map, 64)) return LOOM_ENOMEM;
    size_t direct = rd->f->size / 4;
    direct = direct < DIRECT_MIN ? DIRECT_MIN : direct > DIRECT_MAX ? DIRECT_MAX : direct;
    rd->users.direct_max = rd->items.direct_max = direct;
    return 0;
}

/* Shrinks the arrays to their contents; a failed shrink keeps the larger
 * block, which is still valid. */
static void trim(loom_ratings *r)
{
    size_t n = r->n ? r->n : 1;
    void *t;
    if ((t = realloc(r->user, n * sizeof *r->user))) r->user = t;
    if ((t = realloc(r->item, n * sizeof *r->item))) r->item = t;
    if ((t = realloc(r->rating, n * sizeof *r->rating))) r->rating = t;
    if ((t = realloc(r->line, n * sizeof *r->line))) r->line = t;
}

/* Reads share `shard` of `nshards` of the open file into rd->r. */
static int read_share(void *ctx, const textfile *f, int shard, int nshards)
{
    reader *rd = ctx;
    rd->f = f;
    size_t lo = textfile_edge(f->size, shard, nshards);
    size_t hi = textfile_edge(f->size, shard + 1, nshards);
    if (new_ratings(rd, hi - lo)) {
        textfile_set_err(rd->err, rd->errlen, "%s: out of memory", f->path);
        return LOOM_ENOMEM;
    }
    size_t body = data_start(rd);
    size_t start = textfile_line_start(f, lo), stop = textfile_line_start(f, hi);
    if (start < body) start = body;
    if (stop < body) stop = body;

    /* Every line, for the ids; this share's lines also for the ratings. */
    rd->line = 1 + textfile_count_newlines(f->s, body);
    int rc = textfile_parse(f, body, start, parse_lines, rd);
    rd->r->first_line = rd->line;
    rd->own = 1;
    if (!rc) rc = textfile_parse(f, start, stop, parse_lines, rd);
    rd->own = 0;
    if (!rc) rc = textfile_parse(f, stop, f->size, parse_lines, rd);
    if (rc) return rc;

    loom_ratings *r = rd->r;
    if (rank(&rd->users, &r->user_id, &r->users, r->user, r->n) ||
        rank(&rd->items, &r->item_id, &r->items, r->item, r->n)) {
        textfile_set_err(rd->err, rd->errlen, "%s: out of memory", f->path);
        return LOOM_ENOMEM;
    }
    trim(r);
    return 0;
}

int loom_ratings_read(const char *path, int shard, int nshards, const loom_ratings_opts *opts,
                      loom_ratings **out, char *err, size_t errlen)
{
    static const loom_ratings_opts defaults = LOOM_RATINGS_OPTS_DEFAULT;

    reader rd = {.o = opts ? *opts : defaults, .err = err, .errlen = errlen};
    rd.users.of = "user";
    rd.items.of = "item";
    char s = rd.o.separator;
    const char *bad_opts =
        s != 0 && s != '\t' && s != ',' && s != ' ' ? "invalid options (separator)" : NULL;
    int rc =
        textfile_read(path, shard, nshards, out != NULL, bad_opts, 1, read_share, &rd, err, errlen);
    u64map_free(&rd.users.map);
    u64map_free(&rd.items.map);
    free(rd.users.direct);
    free(rd.items.direct);
    free(rd.users.ids);
    free(rd.items.ids);
    if (rc) loom_ratings_free(rd.r);
    if (out) *out = rc ? NULL : rd.r;
    return rc;
}

void loom_ratings_free(loom_ratings *r)
{
    if (!r) return;
    free(r->user);
    free(r->item);
    free(r->rating);
    free(r->line);
    free(r->user_id);
    free(r->item_id);
    free(r);
}

int64_t loom_ratings_user_index(const loom_ratings *r, int64_t id)
{
    return r ? sorted_index_i64(r->user_id, r->users, id) : -1;
}

int64_t loom_ratings_item_index(const loom_ratings *r, int64_t id)
{
    return r ? sorted_index_i64(r->item_id, r->items, id) : -1;
}
