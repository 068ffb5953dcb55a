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

#include <loom/loom.h>

#include "lda/lda.h"

void lda_model_free(lda_model *m)
{
    free(m->counts);
    free(m->totals);
    *m = (lda_model){0};
}

int lda_model_save(const lda_model *m, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return 1;
    }
    const size_t K = m->p.topics;
    fprintf(f, "loom-lda 1 topics=%u vocab=%" PRIu64 " alpha=%.17g beta=%.17g tokens=%" PRIu64 "\n",
            m->p.topics, m->p.vocab, m->p.alpha, m->p.beta, m->tokens);
    for (uint64_t w = 0; w < m->p.vocab; w++) {
        const int32_t *row = m->counts + w * K;
        int started = 0;
        for (size_t k = 0; k < K; k++) {
            if (!row[k]) continue;
            if (!started) fprintf(f, "%" PRIu64, w);
            started = 1;
            fprintf(f, " %zu:%" PRId32, k, row[k]);
        }
        if (started) fputc('\n', f);
    }
    if (ferror(f) | fclose(f)) {
        snprintf(err, errlen, "cannot write %s", path);
        return 1;
    }
    return 0;
}

static int load_fail(FILE *f, lda_model *m, char *err, size_t errlen, const char *path, size_t line,
                     const char *what)
{
    snprintf(err, errlen, "%s:%zu: %s", path, line, what);
    fclose(f);
    lda_model_free(m);
    return 1;
}

int lda_model_load(const char *path, lda_model *m, char *err, size_t errlen)
{
    *m = (lda_model){0};
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return 1;
    }
    unsigned topics;
    uint64_t vocab, tokens;
    double alpha, beta;
    int used = 0;
    if (fscanf(f, "loom-lda 1 topics=%u vocab=%" SCNu64 " alpha=%lf beta=%lf tokens=%" SCNu64 "%n",
               &topics, &vocab, &alpha, &beta, &tokens, &used) != 5 ||
        !used || fgetc(f) != '\n')
        return load_fail(f, m, err, errlen, path, 1,
                         "not a loom-lda model (expected \"loom-lda 1 topics=K vocab=V alpha=A "
                         "beta=B tokens=N\")");
    if (topics < 1 || topics > LDA_MAX_TOPICS || vocab < 1 || vocab > (1ull << 32) ||
        !(alpha > 0) || !(beta > 0))
        return load_fail(f, m, err, errlen, path, 1, "topics, vocab, alpha or beta out of range");
    const size_t K = topics;
    m->p = (lda_params){topics, vocab, alpha, beta};
    m->tokens = tokens;
    m->counts = calloc(vocab * K, sizeof *m->counts);
    m->totals = calloc(K, sizeof *m->totals);
    if (!m->counts || !m->totals) return load_fail(f, m, err, errlen, path, 1, "out of memory");
    char *buf = NULL;
    size_t cap = 0, line = 1;
    ssize_t got;
    int64_t last = -1;
    uint64_t sum = 0;
    while ((got = getline(&buf, &cap, f)) > 0) {
        line++;
        char *p = buf, *end;
        errno = 0;
        uint64_t w = strtoull(p, &end, 10);
        if (end == p || errno || *p == '-' || w >= vocab || (int64_t)w <= last) {
            free(buf);
            return load_fail(f, m, err, errlen, path, line,
                             "expected a word id below vocab, ascending");
        }
        last = (int64_t)w;
        p = end;
        int pairs = 0;
        for (;;) {
            while (*p == ' ') p++;
            if (*p == '\n' || *p == '\0') break;
            uint64_t k = strtoull(p, &end, 10);
            long long c = 0;
            if (end == p || *p == '-' || *end != ':' || k >= K ||
                (c = strtoll(end + 1, &p, 10)) <= 0 || c > INT32_MAX || m->counts[w * K + k]) {
                free(buf);
                return load_fail(f, m, err, errlen, path, line,
                                 "expected topic:count pairs (topic below topics, count >= 1, "
                                 "each topic once)");
            }
            m->counts[w * K + k] = (int32_t)c;
            m->totals[k] += c;
            sum += (uint64_t)c;
            pairs++;
        }
        if (!pairs) {
            free(buf);
            return load_fail(f, m, err, errlen, path, line, "a word line without counts");
        }
    }
    free(buf);
    if (sum != tokens) {
        char what[128];
        snprintf(what, sizeof what,
                 "the counts add up to %" PRIu64 ", the header says tokens=%" PRIu64, sum, tokens);
        return load_fail(f, m, err, errlen, path, line, what);
    }
    fclose(f);
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
    size_t cap = 0, len = 0;
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
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
    const size_t K = m->p.topics;
    size_t have = 0;
    for (uint64_t w = 0; w < m->p.vocab; w++) {
        int32_t c = m->counts[w * K + k];
        if (c <= 0) continue;
        /* Insertion into the n best so far; ties keep the smaller id first. */
        size_t j = have < n ? have++ : n;
        while (j > 0 && m->counts[out[j - 1] * K + k] < c) {
            if (j < n) out[j] = out[j - 1];
            j--;
        }
        if (j < n) out[j] = w;
    }
    return have;
}

int lda_print_top_words(FILE *f, const lda_model *m, const lda_vocab *vocab, size_t n)
{
    uint64_t *top = malloc((n ? n : 1) * sizeof *top);
    if (!top) return LOOM_ENOMEM;
    for (uint32_t k = 0; k < m->p.topics; k++) {
        size_t got = lda_top_words(m, k, n, top);
        fprintf(f, "topic %3u (%" PRId64 " tokens):", k, m->totals[k]);
        for (size_t i = 0; i < got; i++) {
            if (vocab && top[i] < vocab->n)
                fprintf(f, " %s", vocab->word[top[i]]);
            else
                fprintf(f, " %" PRIu64, top[i]);
        }
        fputc('\n', f);
    }
    free(top);
    return 0;
}
