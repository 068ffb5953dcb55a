/* bow: the bag-of-words reader (LDA-C and UCI docword); one worker's share of
 * one shared file, as whole documents.
 *
 * LDA-C: one document per line, "N id:count id:count ..." with N the number
 * of pairs, word ids 0-based, counts >= 1; "0" is an empty document. Blank
 * lines are not documents (ap.dat has none; a blank last line is common), so
 * a document's index is the number of non-blank lines before it: a share
 * counts those before its first line (one memchr per line, fast for lines of
 * hundreds of bytes). With skip_bad a malformed line stays in place as an
 * empty document, so that indices are the same in every share.
 *
 * UCI docword: three header lines D, W, NNZ, then "doc word count" lines,
 * ids 1-based (stored 0-based), grouped by document in ascending order. A
 * document may span a share boundary, and belongs to the share in which its
 * first line starts: every share moves both ends of its line range (textfile
 * shares) with the same function, bound(), past the lines that continue the
 * document before them, so the end one share computes is the start the next
 * one does. Documents are numbered by id: a document whose id the file skips
 * (it has no words) is an empty document of the share whose range the gap
 * falls into, so first_doc + i is always the id - 1 of a share's document i,
 * and the last share runs on to D. For that every line whose doc id is valid
 * (1..D) opens its document, even if the rest of the line is malformed and
 * skipped; a doc id lower than the one before it is an error even with
 * skip_bad, since the shares could then not agree on where documents start.
 * Everything else is read as in textfile.h: absolute line numbers, the
 * newline sentinel, "FILE:LINE: what" messages. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/decimal.h"
#include "io/textfile.h"
#include "loom/data.h"
#include "loom/error.h"

/* The parse of one share. */
typedef struct reader {
    const textfile *f;
    loom_bow_opts o;
    loom_corpus *c;
    size_t cap_docs; /* capacity of c->doc, less one */
    size_t cap_nnz;  /* capacity of c->word and c->count */
    size_t line;     /* absolute 1-based number of the line being parsed */
    /* UCI */
    uint64_t D, W;  /* NNZ and its line are the corpus's header_nnz, header_nnz_line */
    size_t body;    /* where the "doc word count" lines start */
    uint64_t cur;   /* the last valid doc id seen (0: none) */
    uint64_t pairs; /* non-blank lines read */
    int fatal;      /* the error cannot be skipped */
    textfile_fault why;
    char *err;
    size_t errlen;
} reader;

static inline int ends_token(const char *p)
{
    return textfile_blank(*p) || textfile_eol(p);
}

static const char *quote(const char *p, char out[TEXTFILE_QUOTED])
{
    return textfile_quote(p, '\n', out);
}

/* Whether the line at p is blank. */
static int is_blank_line(const char *p)
{
    while (textfile_blank(*p)) p++;
    return textfile_eol(p);
}

/* Whether the line at p is one integer (digits, blanks around). */
static int is_integer_line(const char *p)
{
    while (textfile_blank(*p)) p++;
    const char *q = p;
    while (decimal_digit(*q) < 10) q++;
    while (textfile_blank(*q)) q++;
    return q > p && textfile_eol(q);
}

/* ---- growing the corpus ---- */

static int grow_docs(reader *rd, size_t need)
{
    loom_corpus *c = rd->c;
    size_t cap = rd->cap_docs;
    while (cap < need) cap *= 2;
    if (cap == rd->cap_docs) return 0;
    size_t *doc = realloc(c->doc, (cap + 1) * sizeof *doc);
    if (!doc) return LOOM_ENOMEM;
    c->doc = doc;
    rd->cap_docs = cap;
    return 0;
}

static int grow_nnz(reader *rd)
{
    loom_corpus *c = rd->c;
    size_t cap = rd->cap_nnz * 2;
    uint32_t *t;
    if (!(t = realloc(c->word, cap * sizeof *t))) return LOOM_ENOMEM;
    c->word = t;
    if (!(t = realloc(c->count, cap * sizeof *t))) return LOOM_ENOMEM;
    c->count = t;
    rd->cap_nnz = cap;
    return 0;
}

/* Appends empty documents until there are `docs`. */
static int pad_docs(reader *rd, size_t docs)
{
    loom_corpus *c = rd->c;
    if (docs <= c->docs) return 0;
    if (grow_docs(rd, docs)) return LOOM_ENOMEM;
    for (size_t k = c->docs + 1; k <= docs; k++) c->doc[k] = c->nnz;
    c->docs = docs;
    return 0;
}

/* ---- LDA-C ---- */

/* Parses the LDA-C line at p (not blank), ending with a newline before end,
 * and appends its document. Returns 0, LOOM_EINVAL (rd->why; nothing was
 * appended) or LOOM_ENOMEM. */
static int parse_ldac_line(reader *rd, const char *p, const char *end, const char **next)
{
    loom_corpus *c = rd->c;
    char shown[TEXTFILE_QUOTED];
    int overflow = 0;
    uint64_t n_said, v;

    while (textfile_blank(*p)) p++;
    const char *tok = p;
    p = decimal_scan_u64(tok, &n_said, &overflow);
    if (p == tok || !ends_token(p) || overflow)
        return textfile_fail(&rd->why, tok, "bad N '%s': want the number of pairs",
                             quote(tok, shown));

    /* Locals until the line is known good. */
    size_t n = c->nnz, cap = rd->cap_nnz;
    uint32_t max_word = 0;
    uint64_t tokens = 0;
    for (;;) {
        while (textfile_blank(*p)) p++;
        if (textfile_eol(p)) break;
        tok = p;
        uint64_t id, count;
        p = decimal_scan_u64(tok, &id, &overflow);
        if (p == tok || *p != ':')
            return textfile_fail(&rd->why, tok, "bad pair '%s'", quote(tok, shown));
        if (overflow || id > UINT32_MAX)
            return textfile_fail(&rd->why, tok, "word id in '%s' out of range", quote(tok, shown));
        const char *ct = ++p;
        p = decimal_scan_u64(ct, &count, &overflow);
        if (p == ct || !ends_token(p))
            return textfile_fail(&rd->why, tok, "bad pair '%s'", quote(tok, shown));
        if (overflow || count > UINT32_MAX)
            return textfile_fail(&rd->why, tok, "count in '%s' out of range", quote(tok, shown));
        if (count == 0)
            return textfile_fail(&rd->why, tok, "zero count in '%s'", quote(tok, shown));
        if (n == cap) {
            if (grow_nnz(rd)) return LOOM_ENOMEM;
            cap = rd->cap_nnz;
        }
        c->word[n] = (uint32_t)id;
        c->count[n] = (uint32_t)count;
        n++;
        tokens += count;
        if (id > max_word) max_word = (uint32_t)id;
    }
    v = n - c->nnz;
    if (v != n_said)
        return textfile_fail(&rd->why, tok, "N is %" PRIu64 " but the line has %" PRIu64 " pairs",
                             n_said, v);

    if (pad_docs(rd, c->docs + 1)) return LOOM_ENOMEM;
    c->doc[c->docs] = c->nnz = n;
    c->tokens += tokens;
    if (v > 0 && max_word >= c->vocab) c->vocab = (uint64_t)max_word + 1;
    *next = textfile_after_line(p, end);
    return 0;
}

/* ---- UCI ---- */

/* The doc id of a "doc word count" line if it is valid (1..D), else 0: the
 * test by which a line opens its document (parse_uci_line) and by which
 * shares agree on document boundaries (bound). */
static uint64_t line_doc(const reader *rd, const char *p)
{
    int overflow = 0;
    uint64_t id;
    while (textfile_blank(*p)) p++;
    const char *e = decimal_scan_u64(p, &id, &overflow);
    return e == p || !ends_token(e) || overflow || id > rd->D ? 0 : id;
}

/* Reads one unsigned field of a UCI line into *v, at most max. */
static int uci_field(reader *rd, const char **p, const char *what, int fields, uint64_t max,
                     uint64_t *v)
{
    char shown[TEXTFILE_QUOTED];
    int overflow = 0;
    const char *q = *p;
    while (textfile_blank(*q)) q++;
    if (textfile_eol(q))
        return textfile_fail(&rd->why, q, "too few fields (%d): want doc word count", fields);
    const char *e = decimal_scan_u64(q, v, &overflow);
    if (e == q || !ends_token(e))
        return textfile_fail(&rd->why, q, "bad %s '%s'", what, quote(q, shown));
    if (overflow || *v > max)
        return textfile_fail(&rd->why, q, "%s '%s' out of range", what, quote(q, shown));
    *p = e;
    return 0;
}

/* Parses the UCI line at p (not blank), ending with a newline before end,
 * and appends its pair. A valid doc id opens its document first. Returns 0,
 * LOOM_EINVAL (rd->why; rd->fatal if it cannot be skipped) or LOOM_ENOMEM. */
static int parse_uci_line(reader *rd, const char *p, const char *end, const char **next)
{
    loom_corpus *c = rd->c;
    uint64_t doc = 0, word = 0, count = 0;
    int rc;

    while (textfile_blank(*p)) p++;
    const char *tok = p;
    if ((rc = uci_field(rd, &p, "doc id", 0, UINT64_MAX, &doc))) return rc;
    if (doc == 0) return textfile_fail(&rd->why, tok, "doc id 0: ids are 1-based");
    if (doc > rd->D)
        return textfile_fail(&rd->why, tok, "doc id %" PRIu64 " is beyond D = %" PRIu64, doc,
                             rd->D);
    if (doc < rd->cur) {
        rd->fatal = 1;
        return textfile_fail(&rd->why, tok,
                             "doc ids not ascending (%" PRIu64 " after %" PRIu64
                             "): lines must be grouped by document",
                             doc, rd->cur);
    }
    /* Document doc is number doc - 1 - first_doc of the share. */
    if (pad_docs(rd, (size_t)(doc - c->first_doc))) return LOOM_ENOMEM;
    rd->cur = doc;

    tok = p;
    if ((rc = uci_field(rd, &p, "word id", 1, UINT32_MAX, &word))) return rc;
    while (textfile_blank(*tok)) tok++;
    if (word == 0) return textfile_fail(&rd->why, tok, "word id 0: ids are 1-based");
    if (word > rd->W)
        return textfile_fail(&rd->why, tok, "word id %" PRIu64 " is beyond W = %" PRIu64, word,
                             rd->W);
    tok = p;
    if ((rc = uci_field(rd, &p, "count", 2, UINT32_MAX, &count))) return rc;
    while (textfile_blank(*tok)) tok++;
    if (count == 0) return textfile_fail(&rd->why, tok, "zero count");
    while (textfile_blank(*p)) p++;
    if (!textfile_eol(p)) {
        char shown[TEXTFILE_QUOTED];
        return textfile_fail(&rd->why, p, "extra field '%s': want doc word count", quote(p, shown));
    }

    if (c->nnz == rd->cap_nnz && grow_nnz(rd)) return LOOM_ENOMEM;
    c->word[c->nnz] = (uint32_t)(word - 1);
    c->count[c->nnz] = (uint32_t)count;
    c->doc[c->docs] = ++c->nnz;
    c->tokens += count;
    *next = textfile_after_line(p, end);
    return 0;
}

/* The doc id of the nearest line before x (a line start after the header)
 * with a valid one, 0 if none. */
static uint64_t doc_before(const reader *rd, size_t x)
{
    const textfile *f = rd->f;
    while (x > rd->body) {
        size_t q = x - 1; /* the previous line's last byte */
        while (q > 0 && f->s[q - 1] != '\n') q--;
        x = q;
        uint64_t d = line_doc(rd, textfile_line(f, x));
        if (d) return d;
    }
    return 0;
}

/* Where a share's line range that would start (or end) at the line start x
 * really does: past the lines that continue the document before x (same doc
 * id, or blank, or without a valid doc id), at the next line that starts a
 * document. A pure function of x and the file, so two neighbouring shares
 * compute the same boundary. */
static size_t bound(const reader *rd, size_t x)
{
    const textfile *f = rd->f;
    if (x <= rd->body) return rd->body;
    uint64_t d = doc_before(rd, x);
    while (x < f->size) {
        uint64_t id = line_doc(rd, textfile_line(f, x));
        if (id && id != d) break;
        x = textfile_next_line(f, x);
    }
    return x;
}

/* ---- the header and the format ---- */

/* The first `want` (<= 3) non-blank lines: their starts and numbers. Returns
 * how many there are. */
static int first_lines(const textfile *f, int want, size_t *at, size_t *line)
{
    int k = 0;
    size_t n = 1;
    for (size_t pos = 0; pos < f->size && k < want; pos = textfile_next_line(f, pos), n++) {
        if (is_blank_line(textfile_line(f, pos))) continue;
        at[k] = pos;
        line[k++] = n;
    }
    return k;
}

/* Decides the format (AUTO: UCI if the first three non-blank lines are single
 * integers) and reads the UCI header. */
static int read_header(reader *rd)
{
    static const char *names[3] = {"the number of documents D", "the vocabulary size W",
                                   "the number of pairs NNZ"};
    static const uint64_t max[3] = {UINT32_MAX, UINT32_MAX, UINT64_MAX};
    const textfile *f = rd->f;
    size_t at[3], line[3];
    int k = first_lines(f, 3, at, line);
    loom_bow_format fmt = rd->o.format;
    if (fmt == LOOM_BOW_AUTO) {
        fmt = LOOM_BOW_UCI;
        for (int i = 0; i < 3; i++)
            if (i >= k || !is_integer_line(textfile_line(f, at[i]))) fmt = LOOM_BOW_LDAC;
    }
    rd->c->format = fmt;
    if (fmt == LOOM_BOW_LDAC) return 0;

    uint64_t v[3];
    for (int i = 0; i < 3; i++) {
        if (i >= k) {
            size_t last = 1 + textfile_count_newlines(f->s, f->size) + (f->tail < f->size);
            textfile_set_err(rd->err, rd->errlen, "%s:%zu: bad UCI header: the file ends before %s",
                             f->path, last, names[i]);
            return LOOM_EINVAL;
        }
        const char *p = textfile_line(f, at[i]);
        char shown[TEXTFILE_QUOTED];
        int overflow = 0;
        while (textfile_blank(*p)) p++;
        const char *q = decimal_scan_u64(p, &v[i], &overflow);
        if (q == p || !is_integer_line(p) || overflow || v[i] > max[i]) {
            /* The first token, or what follows a number and a blank. */
            const char *bad = p;
            if (q > p && textfile_blank(*q)) {
                while (textfile_blank(*q)) q++;
                if (!textfile_eol(q)) bad = q;
            }
            textfile_set_err(rd->err, rd->errlen, "%s:%zu: bad UCI header: want %s, found '%s'",
                             f->path, line[i], names[i], quote(bad, shown));
            return LOOM_EINVAL;
        }
    }
    rd->D = v[0];
    rd->W = v[1];
    rd->c->header_nnz = v[2];
    rd->c->header_nnz_line = line[2];
    rd->body = textfile_next_line(f, at[2]);
    rd->c->vocab = rd->W;
    return 0;
}

/* ---- shares ---- */

/* Parses the lines starting in [p, stop) (textfile_lines_fn). */
static int parse_lines(void *ctx, const char *p, const char *stop, const char *end)
{
    reader *rd = ctx;
    const int uci = rd->c->format == LOOM_BOW_UCI;
    while (p < stop) {
        int rc = 0;
        if (is_blank_line(p)) {
            p = textfile_after_line(p, end);
        } else {
            rd->pairs++;
            rc = uci ? parse_uci_line(rd, p, end, &p) : parse_ldac_line(rd, p, end, &p);
        }
        if (rc == LOOM_EINVAL && rd->o.skip_bad && !rd->fatal) {
            rd->c->skipped++;
            p = textfile_after_line(rd->why.at, end);
            /* LDA-C: the line keeps its place as an empty document */
            if (!uci && pad_docs(rd, rd->c->docs + 1))
                rc = LOOM_ENOMEM;
            else
                rc = 0;
        }
        if (rc) return textfile_report(rd->f, rd->line, rc, &rd->why, rd->err, rd->errlen);
        rd->line++;
    }
    return 0;
}

/* Lines, and non-blank lines (LDA-C documents), before the line start x. */
static size_t count_docs(const textfile *f, size_t x, size_t *lines)
{
    size_t docs = 0, n = 0;
    const char *p = f->s, *e = f->s + (x < f->tail ? x : f->tail);
    for (; p < e; n++) {
        docs += !is_blank_line(p);
        p = textfile_after_line(p, e);
    }
    if (x > f->tail) { /* x is the end, after an unterminated last line */
        docs += !is_blank_line(f->last);
        n++;
    }
    *lines = n;
    return docs;
}

static int new_corpus(reader *rd, size_t bytes)
{
    loom_corpus *c = rd->c = calloc(1, sizeof *c);
    if (!c) return LOOM_ENOMEM;
    c->bytes = bytes;
    rd->cap_docs = bytes / 256 + 16;
    rd->cap_nnz = bytes / 6 + 16; /* ap.dat: 7 bytes a pair; UCI lines are longer */
    c->doc = malloc((rd->cap_docs + 1) * sizeof *c->doc);
    c->word = malloc(rd->cap_nnz * sizeof *c->word);
    c->count = malloc(rd->cap_nnz * sizeof *c->count);
    if (!c->doc || !c->word || !c->count) return LOOM_ENOMEM;
    c->doc[0] = 0;
    return 0;
}

/* Shrinks the arrays to their contents; a failed shrink keeps the larger
 * block, which is still valid. */
static void trim(loom_corpus *c)
{
    size_t nnz = c->nnz ? c->nnz : 1;
    void *t;
    if ((t = realloc(c->doc, (c->docs + 1) * sizeof *c->doc))) c->doc = t;
    if ((t = realloc(c->word, nnz * sizeof *c->word))) c->word = t;
    if ((t = realloc(c->count, nnz * sizeof *c->count))) c->count = t;
}

static int read_share(void *ctx, const textfile *f, int shard, int nshards)
{
    reader *rd = ctx;
    rd->f = f;
    size_t lo = textfile_edge(f->size, shard, nshards);
    size_t hi = textfile_edge(f->size, shard + 1, nshards);
    if (new_corpus(rd, hi - lo)) {
        textfile_set_err(rd->err, rd->errlen, "%s: out of memory", f->path);
        return LOOM_ENOMEM;
    }
    int rc = read_header(rd);
    if (rc) return rc;
    loom_corpus *c = rd->c;
    size_t start = textfile_line_start(f, lo), stop = textfile_line_start(f, hi), lines;
    if (c->format == LOOM_BOW_UCI) {
        start = bound(rd, start);
        stop = bound(rd, stop);
        rd->cur = doc_before(rd, start);
        c->first_doc = rd->cur;
        lines = textfile_count_newlines(f->s, start);
    } else {
        c->first_doc = count_docs(f, start, &lines);
    }
    c->first_line = rd->line = 1 + lines;
    if ((rc = textfile_parse(f, start, stop, parse_lines, rd))) return rc;

    if (c->format == LOOM_BOW_UCI) {
        /* the documents after the file's last one are empty, and the last share's */
        if (shard == nshards - 1 && pad_docs(rd, (size_t)(rd->D - c->first_doc))) {
            textfile_set_err(rd->err, rd->errlen, "%s: out of memory", f->path);
            return LOOM_ENOMEM;
        }
        if (nshards == 1 && !rd->o.skip_bad && rd->pairs != c->header_nnz) {
            textfile_set_err(rd->err, rd->errlen,
                             "%s:%zu: the header says NNZ = %" PRIu64 " but the file has %" PRIu64
                             " pairs",
                             f->path, c->header_nnz_line, c->header_nnz, rd->pairs);
            return LOOM_EINVAL;
        }
    }
    trim(c);
    return 0;
}

int loom_bow_read(const char *path, int shard, int nshards, const loom_bow_opts *opts,
                  loom_corpus **out, char *err, size_t errlen)
{
    static const loom_bow_opts defaults = LOOM_BOW_OPTS_DEFAULT;

    reader rd = {.o = opts ? *opts : defaults, .err = err, .errlen = errlen};
    const char *bad_opts = rd.o.format > LOOM_BOW_UCI ? "invalid options (format)" : NULL;
    int rc =
        textfile_read(path, shard, nshards, out != NULL, bad_opts, 0, read_share, &rd, err, errlen);
    if (rc) loom_corpus_free(rd.c);
    if (out) *out = rc ? NULL : rd.c;
    return rc;
}

void loom_corpus_free(loom_corpus *c)
{
    if (!c) return;
    free(c->doc);
    free(c->word);
    free(c->count);
    free(c);
}
