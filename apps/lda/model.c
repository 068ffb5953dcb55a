/* model: the trained word-topic counts as a file, the vocabulary file, and
 * the top words of each topic.
 *
 * The counts are the model: with α and β they give the topic-word
 * distributions φ_kw = (n_wk + β) / (n_k + Vβ). The file keeps them sparse
 * (most words occur in few topics), one line per word, so it stays small
 * and diffable; the totals are the column sums and are recomputed on load,
 * which also checks them against the header's token count. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <loom/loom.h>

#include "common/files.h"
#include "lda/lda.h"

/* Bytes in the header line: its numbers need under 200. */
#define HEADER_MAX 1024

void lda_model_free(lda_model *m)
{
    lda_rows_free(&m->counts);
    free(m->totals);
    *m = (lda_model){0};
}

int lda_model_open(lda_model_writer *mw, const lda_params *p, uint64_t tokens, const char *path,
                   char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return 1;
    }
    /* Only a regular file is removed after a failure: never /dev/full or a FIFO. */
    struct stat st;
    *mw = (lda_model_writer){.f = f, .path = path, .topics = p->topics};
    mw->regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    fprintf(f, "loom-lda 1 topics=%u vocab=%" PRIu64 " alpha=%.17g beta=%.17g tokens=%" PRIu64 "\n",
            p->topics, p->vocab, p->alpha, p->beta, tokens);
    return 0;
}

void lda_model_write_row(lda_model_writer *mw, uint64_t w, const int32_t *row)
{
    int started = 0;
    for (size_t k = 0; k < mw->topics; k++) {
        if (!row[k]) continue;
        if (!started) fprintf(mw->f, "%" PRIu64, w);
        started = 1;
        fprintf(mw->f, " %zu:%" PRId32, k, row[k]);
    }
    if (started) fputc('\n', mw->f);
}

int lda_model_close(lda_model_writer *mw, char *err, size_t errlen)
{
    /* A full disk shows up in ferror() or, for the last buffer, in fclose(). */
    int bad = ferror(mw->f), saved_errno = errno;
    if (fclose(mw->f) && !bad) bad = 1, saved_errno = errno;
    if (bad) {
        if (mw->regular) remove(mw->path);
        snprintf(err, errlen, "cannot write %s: %s", mw->path, strerror(saved_errno));
        return 1;
    }
    return 0;
}

int lda_model_save(const lda_model *m, const char *path, char *err, size_t errlen)
{
    lda_model_writer mw;
    if (lda_model_open(&mw, &m->p, m->tokens, path, err, errlen)) return 1;
    uint32_t k;
    int32_t c;
    for (uint64_t w = 0; w < m->p.vocab; w++) {
        /* As lda_model_write_row: no line for a zero row. */
        size_t pos = 0;
        if (!lda_rows_next(&m->counts, w, &pos, &k, &c)) continue;
        fprintf(mw.f, "%" PRIu64, w);
        do fprintf(mw.f, " %" PRIu32 ":%" PRId32, k, c);
        while (lda_rows_next(&m->counts, w, &pos, &k, &c));
        fputc('\n', mw.f);
    }
    return lda_model_close(&mw, err, errlen);
}

/* An open model file, its current line and where to say what is wrong. */
typedef struct reader {
    FILE *f;
    const char *path;
    char *line;
    size_t cap, lineno;
    char *err;
    size_t errlen;
} reader;

/* "FILE:LINE: what", and the reader and the half-loaded model released. */
static int load_fail(reader *r, lda_model *m, const char *what)
{
    snprintf(r->err, r->errlen, "%s:%zu: %s", r->path, r->lineno, what);
    fclose(r->f);
    free(r->line);
    lda_model_free(m);
    return 1;
}

/* The next line, at most max bytes: its length, or -1 at the end of the file
 * (and on a line too long or no memory, which load_fail then reports).
 * Lines are bounded, so that /dev/zero or a large binary file fails on its
 * first line instead of filling memory. */
static ssize_t next_line(reader *r, size_t max, const char **why)
{
    ssize_t got = app_getline(&r->line, &r->cap, max, r->f);
    if (got != -1) r->lineno++;
    *why = got == APP_LINE_TOO_LONG    ? "line too long for a loom-lda model"
           : got == APP_LINE_NO_MEMORY ? "out of memory"
                                       : NULL;
    return got < 0 ? -1 : got;
}

int lda_model_load(const char *path, lda_model *m, char *err, size_t errlen)
{
    *m = (lda_model){0};
    reader r = {.f = fopen(path, "r"), .path = path, .err = err, .errlen = errlen};
    if (!r.f) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return 1;
    }
    unsigned topics;
    uint64_t vocab, tokens;
    double alpha, beta;
    int used = 0;
    const char *why;
    ssize_t got = next_line(&r, HEADER_MAX, &why);
    if (why) return load_fail(&r, m, why);
    if (got < 0 ||
        sscanf(r.line,
               "loom-lda 1 topics=%u vocab=%" SCNu64 " alpha=%lf beta=%lf tokens=%" SCNu64 "%n",
               &topics, &vocab, &alpha, &beta, &tokens, &used) != 5 ||
        used + 1 != got || r.line[used] != '\n') {
        r.lineno = 1;
        return load_fail(&r, m,
                         "not a loom-lda model (expected \"loom-lda 1 topics=K vocab=V alpha=A "
                         "beta=B tokens=N\")");
    }
    if (topics < 1 || topics > LDA_MAX_TOPICS || vocab < 1 || vocab > (1ull << 32) ||
        !(alpha > 0) || !(beta > 0))
        return load_fail(&r, m, "topics, vocab, alpha or beta out of range");
    const size_t K = topics;
    m->p = (lda_params){topics, vocab, alpha, beta};
    m->tokens = tokens;
    int rows_rc = lda_rows_init(&m->counts, topics, (size_t)vocab);
    m->totals = calloc(K, sizeof *m->totals);
    if (rows_rc || !m->totals) return load_fail(&r, m, "out of memory");
    /* "<word> <topic>:<count>..." with each topic at most once. */
    size_t row_max = 32 + K * 24;
    int64_t last = -1;
    uint64_t sum = 0;
    while ((got = next_line(&r, row_max, &why)) > 0) {
        char *p = r.line, *end;
        errno = 0;
        uint64_t w = strtoull(p, &end, 10);
        if (end == p || errno || *p == '-' || w >= vocab || (int64_t)w <= last)
            return load_fail(&r, m, "expected a word id below vocab, ascending");
        last = (int64_t)w;
        p = end;
        int pairs = 0;
        for (;;) {
            while (*p == ' ') p++;
            if (*p == '\n' || *p == '\0') break;
            uint64_t k = strtoull(p, &end, 10);
            long long c = 0;
            if (end == p || *p == '-' || *end != ':' || k >= K ||
                (c = strtoll(end + 1, &p, 10)) <= 0 || c > INT32_MAX ||
                lda_rows_get(&m->counts, w, (uint32_t)k))
                return load_fail(&r, m,
                                 "expected topic:count pairs (topic below topics, count >= 1, "
                                 "each topic once)");
            if (lda_rows_add(&m->counts, w, (uint32_t)k, (int32_t)c))
                return load_fail(&r, m, "out of memory");
            m->totals[k] += c;
            sum += (uint64_t)c;
            pairs++;
        }
        if (!pairs) return load_fail(&r, m, "a word line without counts");
    }
    if (why) return load_fail(&r, m, why);
    if (sum != tokens) {
        char what[128];
        snprintf(what, sizeof what,
                 "the counts add up to %" PRIu64 ", the header says tokens=%" PRIu64, sum, tokens);
        return load_fail(&r, m, what);
    }
    fclose(r.f);
    free(r.line);
    return 0;
}

void lda_vocab_free(lda_vocab *v)
{
    free(v->word);
    free(v->text);
    *v = (lda_vocab){0};
}

int lda_vocab_load(const char *path, lda_vocab *v, char *err, size_t errlen)
{
    *v = (lda_vocab){0};
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return 1;
    }
    size_t cap = 0, len = 0, word_len = 0, lines = 0;
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        /* Words are bounded, so that /dev/zero or a large binary file fails
         * early instead of filling memory. */
        for (size_t i = 0; i < got; i++) {
            word_len = chunk[i] == '\n' ? 0 : word_len + 1;
            lines += chunk[i] == '\n';
            if (word_len > LDA_WORD_MAX) {
                fclose(f);
                lda_vocab_free(v);
                snprintf(err, errlen, "%s:%zu: a word longer than %d bytes, not a vocabulary", path,
                         lines + 1, LDA_WORD_MAX);
                return 1;
            }
        }
        if (len + got + 2 > cap) {
            cap = 2 * (len + got + 2);
            char *t = realloc(v->text, cap);
            if (!t) {
                fclose(f);
                lda_vocab_free(v);
                snprintf(err, errlen, "%s: out of memory", path);
                return 1;
            }
            v->text = t;
        }
        memcpy(v->text + len, chunk, got);
        len += got;
    }
    fclose(f);
    if (!v->text && !(v->text = malloc(2))) return 1;
    if (len == 0 || v->text[len - 1] != '\n') v->text[len++] = '\n';
    v->text[len] = '\0';
    for (size_t i = 0; i < len; i++) v->n += v->text[i] == '\n';
    v->word = malloc(v->n * sizeof *v->word);
    if (!v->word) {
        lda_vocab_free(v);
        snprintf(err, errlen, "%s: out of memory", path);
        return 1;
    }
    char *p = v->text;
    for (size_t i = 0; i < v->n; i++) {
        /* memchr, not strchr: a NUL byte in the file must not hide the newline. */
        char *nl = memchr(p, '\n', (size_t)(v->text + len - p));
        *nl = '\0';
        if (nl > p && nl[-1] == '\r') nl[-1] = '\0';
        v->word[i] = p;
        p = nl + 1;
    }
    return 0;
}

size_t lda_top_words(const lda_model *m, uint32_t k, size_t n, uint64_t *out)
{
    size_t have = 0;
    for (uint64_t w = 0; w < m->p.vocab; w++) {
        int32_t c = lda_rows_get(&m->counts, w, k);
        if (c <= 0) continue;
        /* Insertion into the n best so far; ties keep the smaller id first. */
        size_t j = have < n ? have++ : n;
        while (j > 0 && lda_rows_get(&m->counts, out[j - 1], k) < c) {
            if (j < n) out[j] = out[j - 1];
            j--;
        }
        if (j < n) out[j] = w;
    }
    return have;
}

int lda_top_init(lda_top *t, uint32_t topics, size_t n)
{
    *t = (lda_top){.topics = topics, .n = n};
    size_t cells = (size_t)topics * (n ? n : 1);
    t->word = malloc(cells * sizeof *t->word);
    t->count = malloc(cells * sizeof *t->count);
    t->have = calloc(topics ? topics : 1, sizeof *t->have);
    if (t->word && t->count && t->have) return 0;
    lda_top_free(t);
    return LOOM_ENOMEM;
}

void lda_top_free(lda_top *t)
{
    free(t->word), free(t->count), free(t->have);
    *t = (lda_top){0};
}

/* Word w's count c of topic k among topic k's best words. */
static void top_add_one(lda_top *t, uint64_t w, uint32_t k, int32_t c)
{
    const size_t n = t->n;
    if (c <= 0 || !n) return;
    uint64_t *word = t->word + (size_t)k * n;
    int32_t *count = t->count + (size_t)k * n;
    /* As lda_top_words: insertion into the n best, ties keep the earlier word. */
    size_t j = t->have[k] < n ? t->have[k]++ : n;
    while (j > 0 && count[j - 1] < c) {
        if (j < n) word[j] = word[j - 1], count[j] = count[j - 1];
        j--;
    }
    if (j < n) word[j] = w, count[j] = c;
}

void lda_top_add(lda_top *t, uint64_t w, const int32_t *row)
{
    for (uint32_t k = 0; k < t->topics; k++) top_add_one(t, w, k, row[k]);
}

void lda_top_add_row(lda_top *t, uint64_t w, const lda_rows *r, size_t i)
{
    uint32_t k;
    int32_t c;
    for (size_t pos = 0; lda_rows_next(r, i, &pos, &k, &c);) top_add_one(t, w, k, c);
}

void lda_top_print(FILE *f, const lda_top *t, const int64_t *totals, const lda_vocab *vocab)
{
    for (uint32_t k = 0; k < t->topics; k++) {
        fprintf(f, "topic %3u (%" PRId64 " tokens):", k, totals[k]);
        for (size_t i = 0; i < t->have[k]; i++) {
            uint64_t w = t->word[(size_t)k * t->n + i];
            if (vocab && w < vocab->n)
                fprintf(f, " %s", vocab->word[w]);
            else
                fprintf(f, " %" PRIu64, w);
        }
        fputc('\n', f);
    }
}

int lda_print_top_words(FILE *f, const lda_model *m, const lda_vocab *vocab, size_t n)
{
    lda_top t;
    if (lda_top_init(&t, m->p.topics, n)) return LOOM_ENOMEM;
    uint32_t k;
    int32_t c;
    for (uint64_t w = 0; w < m->p.vocab; w++)
        for (size_t pos = 0; lda_rows_next(&m->counts, w, &pos, &k, &c);) top_add_one(&t, w, k, c);
    lda_top_print(f, &t, m->totals, vocab);
    lda_top_free(&t);
    return 0;
}
