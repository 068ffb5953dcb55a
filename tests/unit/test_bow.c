/* The bag-of-words reader: LDA-C and UCI docword, format detection,
 * messages, skipping, sharding into whole documents, and ap.dat when it is
 * present.
 *
 * Every test writes small files into one temporary directory (mkdtemp) and
 * reads them back. Random corpora are written in both formats, which must
 * read the same; sharding is checked against a single-share read: the
 * shares' documents, concatenated in order, are its documents, and each
 * share's first_doc is the number of documents before it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "loom/data.h"
#include "loom/error.h"

#define TEST_RNG_SEED 0xb0bbedULL
#include "test_rng.h"
#define TEST_FILES_DIR "/tmp/loom-bow-XXXXXX"
#define TEST_FILES_EXT ".txt"
#include "test_files.h"

TEST_READER(loom_corpus, loom_bow_opts, loom_bow_read, read_opts, expect_error_o, expect_missing)

static loom_corpus *read_fmt(const char *path, int shard, int nshards, loom_bow_format fmt,
                             int skip_bad)
{
    loom_bow_opts o = {.format = fmt, .skip_bad = skip_bad};
    return read_opts(path, shard, nshards, &o);
}

static loom_corpus *read_ok(const char *path, int shard, int nshards)
{
    return read_fmt(path, shard, nshards, LOOM_BOW_AUTO, 0);
}

/* Reads text (as the whole file, one share) and checks the message is
 * exactly "PATH:line: msg". */
static void expect_error_opts(const char *text, loom_bow_format fmt, int skip_bad, size_t line,
                              const char *msg)
{
    loom_bow_opts o = {.format = fmt, .skip_bad = skip_bad};
    expect_error_o(text, &o, line, msg);
}

static void expect_error(const char *text, size_t line, const char *msg)
{
    expect_error_opts(text, LOOM_BOW_AUTO, 0, line, msg);
}

/* Document i of c has the n pairs words[k]:counts[k]. */
static void check_doc(const loom_corpus *c, size_t i, size_t n, const uint32_t *words,
                      const uint32_t *counts)
{
    assert_true(i < c->docs);
    assert_int_equal(c->doc[i + 1] - c->doc[i], n);
    for (size_t k = 0; k < n; k++) {
        assert_int_equal(c->word[c->doc[i] + k], words[k]);
        assert_int_equal(c->count[c->doc[i] + k], counts[k]);
    }
}

/* Documents [0, c->docs) of c are documents [at, at + c->docs) of ref. */
static void check_same_docs(const loom_corpus *c, const loom_corpus *ref, size_t at)
{
    assert_true(at + c->docs <= ref->docs);
    assert_int_equal(c->doc[0], 0);
    for (size_t i = 0; i < c->docs; i++) {
        size_t n = c->doc[i + 1] - c->doc[i], r = ref->doc[at + i];
        assert_int_equal(n, ref->doc[at + i + 1] - r);
        if (n) {
            assert_memory_equal(c->word + c->doc[i], ref->word + r, n * sizeof *c->word);
            assert_memory_equal(c->count + c->doc[i], ref->count + r, n * sizeof *c->count);
        }
    }
}

/* A whole-file read of the small corpus of test_ldac and test_uci: format,
 * docs documents, 6 pairs, 15 tokens, 10 words, from line first_line, and its
 * first three documents, which both formats share. */
static void check_whole(const loom_corpus *c, loom_bow_format format, size_t docs,
                        size_t first_line)
{
    assert_int_equal(c->format, format);
    assert_int_equal(c->docs, docs);
    assert_int_equal(c->nnz, 6);
    assert_int_equal(c->tokens, 15);
    assert_int_equal(c->vocab, 10);
    assert_int_equal(c->first_doc, 0);
    assert_int_equal(c->first_line, first_line);
    check_doc(c, 0, 2, (uint32_t[]){0, 6}, (uint32_t[]){1, 3});
    check_doc(c, 1, 0, NULL, NULL);
    check_doc(c, 2, 1, (uint32_t[]){2}, (uint32_t[]){7});
}

static void test_ldac(void **state)
{
    (void)state;
    const char *texts[] = {
        "2 0:1 6:3\n0\n\n1 2:7\r\n  3 9:1\t4:2  5:1 \n\n",
        "2 0:1 6:3\r\n0\r\n1 2:7\r\n3 9:1 4:2 5:1",
    };
    for (size_t t = 0; t < 2; t++) {
        char *path = write_str(texts[t]);
        loom_corpus *c = read_ok(path, 0, 1);
        check_whole(c, LOOM_BOW_LDAC, 4, 1);
        assert_int_equal(c->skipped, 0);
        assert_int_equal(c->bytes, strlen(texts[t]));
        check_doc(c, 3, 3, (uint32_t[]){9, 4, 5}, (uint32_t[]){1, 2, 1});
        loom_corpus_free(c);
        free(path);
    }
}

static void test_uci(void **state)
{
    (void)state;
    /* Documents 2 and 6 have no words (6 after the last line, D = 6). */
    const char *texts[] = {
        "6\n10\n6\n1 1 1\n1 7 3\n3 3 7\n4 10 1\n4 5 2\n5 6 1\n",
        "\n6\r\n 10 \r\n\r\n6\r\n1 1 1\r\n1\t7  3\r\n\r\n3 3 7\r\n4 10 1\r\n4 5 2\r\n5 6 1",
    };
    for (size_t t = 0; t < 2; t++) {
        char *path = write_str(texts[t]);
        loom_corpus *c = read_ok(path, 0, 1);
        check_whole(c, LOOM_BOW_UCI, 6, t ? 6 : 4);
        check_doc(c, 3, 2, (uint32_t[]){9, 4}, (uint32_t[]){1, 2});
        check_doc(c, 4, 1, (uint32_t[]){5}, (uint32_t[]){1});
        check_doc(c, 5, 0, NULL, NULL);
        loom_corpus_free(c);
        /* Every share gives the header's NNZ and its line, for the readers
         * together to check the sum of their pairs against. */
        for (int n = 1; n <= 4; n++) {
            size_t sum = 0;
            for (int s = 0; s < n; s++) {
                loom_corpus *part = read_ok(path, s, n);
                assert_int_equal(part->header_nnz, 6);
                assert_int_equal(part->header_nnz_line, t ? 5 : 3);
                sum += part->nnz;
                loom_corpus_free(part);
            }
            assert_int_equal(sum, 6);
        }
        free(path);
    }
}

/* AUTO: UCI if the first three non-blank lines are single integers. */
static void test_detect(void **state)
{
    (void)state;
    struct {
        const char *text;
        loom_bow_format fmt;
    } cases[] = {
        {"", LOOM_BOW_LDAC},
        {"\n\n", LOOM_BOW_LDAC},
        {"0\n0\n", LOOM_BOW_LDAC},
        {"1 3:1\n0\n0\n", LOOM_BOW_LDAC},
        {"0\n0\n1 0:2\n", LOOM_BOW_LDAC},
        {"2\n3\n0\n", LOOM_BOW_UCI},
        {"1\n\n 3 \n1\n1 1 1\n", LOOM_BOW_UCI},
    };
    for (size_t t = 0; t < sizeof cases / sizeof *cases; t++) {
        char *path = write_str(cases[t].text);
        loom_corpus *c = read_ok(path, 0, 1);
        assert_int_equal(c->format, cases[t].fmt);
        loom_corpus_free(c);
        free(path);
    }
    /* Explicit formats are not second-guessed. */
    expect_error_opts("2\n3\n1\n1 1 1\n", LOOM_BOW_LDAC, 0, 1, "N is 2 but the line has 0 pairs");
    expect_error_opts("1 3:1\n", LOOM_BOW_UCI, 0, 1,
                      "bad UCI header: want the number of documents D, found '3:1'");
    char *path = write_str("0\n0\n0\n");
    loom_corpus *c = read_fmt(path, 0, 1, LOOM_BOW_LDAC, 0);
    assert_int_equal(c->docs, 3);
    loom_corpus_free(c);
    c = read_ok(path, 0, 1); /* three empty LDA-C documents look like a UCI header */
    assert_int_equal(c->format, LOOM_BOW_UCI);
    assert_int_equal(c->docs, 0);
    loom_corpus_free(c);
    free(path);
}

static void test_ldac_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t line;
        const char *msg;
    } cases[] = {
        {"1 1:1\n2 1:1\n", 2, "N is 2 but the line has 1 pairs"},
        {"1 1:1 2:1\n", 1, "N is 1 but the line has 2 pairs"},
        {"0 1:1\n", 1, "N is 0 but the line has 1 pairs"},
        {"x 1:1\n", 1, "bad N 'x': want the number of pairs"},
        {"-1 1:1\n", 1, "bad N '-1': want the number of pairs"},
        {"1:1\n", 1, "bad N '1:1': want the number of pairs"},
        {"99999999999999999999 1:1\n", 1, "bad N '99999999999999999999': want the number of pairs"},
        {"1 a:1\n", 1, "bad pair 'a:1'"},
        {"1 :1\n", 1, "bad pair ':1'"},
        {"1 1:\n", 1, "bad pair '1:'"},
        {"1 1:x\n", 1, "bad pair '1:x'"},
        {"1 1\n", 1, "bad pair '1'"},
        {"1 1:1:1\n", 1, "bad pair '1:1:1'"},
        {"1 1:-1\n", 1, "bad pair '1:-1'"},
        {"1 1:1.5\n", 1, "bad pair '1:1.5'"},
        {"2 1:1 5:0\n", 1, "zero count in '5:0'"},
        {"1 4294967296:1\n", 1, "word id in '4294967296:1' out of range"},
        {"1 1:4294967296\n", 1, "count in '1:4294967296' out of range"},
        {"1 1:1\n\n1 1:1\n1 \x01:1", 4, "bad pair '?:1'"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        expect_error(cases[c].text, cases[c].line, cases[c].msg);
}

static void test_uci_errors(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        size_t line;
        const char *msg;
    } cases[] = {
        {"3\n5\n2\n1 1 1\n1 6 1\n", 5, "word id 6 is beyond W = 5"},
        {"3\n5\n2\n1 1 1\n1 0 1\n", 5, "word id 0: ids are 1-based"},
        {"3\n5\n2\n2 1 1\n1 1 1\n", 5,
         "doc ids not ascending (1 after 2): lines must be grouped by document"},
        {"3\n5\n3\n1 1 1\n3 1 1\n2 1 1\n", 6,
         "doc ids not ascending (2 after 3): lines must be grouped by document"},
        {"3\n5\n1\n0 1 1\n", 4, "doc id 0: ids are 1-based"},
        {"3\n5\n1\n4 1 1\n", 4, "doc id 4 is beyond D = 3"},
        {"3\n5\n1\n1 1 0\n", 4, "zero count"},
        {"3\n5\n1\n1 2\n", 4, "too few fields (2): want doc word count"},
        {"3\n5\n1\n1\n", 4, "too few fields (1): want doc word count"},
        {"3\n5\n1\n1 2 3 4\n", 4, "extra field '4': want doc word count"},
        {"3\n5\n1\n1 2 3 # c\n", 4, "extra field '#': want doc word count"},
        {"3\n5\n1\nx 2 3\n", 4, "bad doc id 'x'"},
        {"3\n5\n1\n1 2x 3\n", 4, "bad word id '2x'"},
        {"3\n5\n1\n1 2 3.0\n", 4, "bad count '3.0'"},
        {"3\n5\n1\n1 2 4294967296\n", 4, "count '4294967296' out of range"},
        {"3\n5\n1\n99999999999999999999 2 1\n", 4, "doc id '99999999999999999999' out of range"},
        /* the pair count: checked on a whole-file read */
        {"3\n5\n3\n1 1 1\n\n2 1 1\n", 3, "the header says NNZ = 3 but the file has 2 pairs"},
        {"3\n5\n\n1\n1 1 1\n2 1 1\n", 4, "the header says NNZ = 1 but the file has 2 pairs"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        expect_error(cases[c].text, cases[c].line, cases[c].msg);
    /* headers (with the format given: AUTO would read LDA-C) */
    loom_bow_format u = LOOM_BOW_UCI;
    expect_error_opts("3\nx\n1\n1 1 1\n", u, 0, 2,
                      "bad UCI header: want the vocabulary size W, found 'x'");
    expect_error_opts("3\n5 6\n1\n1 1 1\n", u, 0, 2,
                      "bad UCI header: want the vocabulary size W, found '6'");
    expect_error_opts("3\n5x\n1\n1 1 1\n", u, 0, 2,
                      "bad UCI header: want the vocabulary size W, found '5x'");
    expect_error_opts("3\n5\n-1\n1 1 1\n", u, 0, 3,
                      "bad UCI header: want the number of pairs NNZ, found '-1'");
    expect_error_opts("4294967296\n5\n1\n1 1 1\n", u, 0, 1,
                      "bad UCI header: want the number of documents D, found '4294967296'");
    expect_error_opts("3\n5\n", u, 0, 3,
                      "bad UCI header: the file ends before the number of pairs NNZ");
    expect_error_opts("", u, 0, 1,
                      "bad UCI header: the file ends before the number of documents D");
    /* decreasing doc ids cannot be skipped */
    expect_error_opts("3\n5\n3\n2 1 1\n1 1 1\n3 1 1\n", LOOM_BOW_AUTO, 1, 5,
                      "doc ids not ascending (1 after 2): lines must be grouped by document");
}

static void test_skip_bad(void **state)
{
    (void)state;
    /* LDA-C: a malformed line stays as an empty document */
    char *path = write_str("1 1:1\n2 1:1\nx\n\n1 3:2\n1 4:0");
    for (int n = 1; n <= 6; n++) {
        size_t docs = 0, skipped = 0, nnz = 0;
        for (int i = 0; i < n; i++) {
            loom_corpus *c = read_fmt(path, i, n, LOOM_BOW_AUTO, 1);
            assert_int_equal(c->first_doc, docs);
            if (n == 1) {
                check_doc(c, 0, 1, (uint32_t[]){1}, (uint32_t[]){1});
                check_doc(c, 1, 0, NULL, NULL);
                check_doc(c, 2, 0, NULL, NULL);
                check_doc(c, 3, 1, (uint32_t[]){3}, (uint32_t[]){2});
                check_doc(c, 4, 0, NULL, NULL);
                assert_int_equal(c->vocab, 4);
                assert_int_equal(c->tokens, 3);
            }
            docs += c->docs;
            skipped += c->skipped;
            nnz += c->nnz;
            loom_corpus_free(c);
        }
        assert_int_equal(docs, 5);
        assert_int_equal(skipped, 3);
        assert_int_equal(nnz, 2);
    }
    free(path);

    /* UCI: the pair is dropped; a valid doc id still opens its document */
    path = write_str("5\n4\n7\n1 1 1\n1 9 1\n2 x 1\nx 1 1\n4 2 2\n4 2 0\n9 1 1\n");
    for (int n = 1; n <= 6; n++) {
        size_t docs = 0, skipped = 0, nnz = 0;
        for (int i = 0; i < n; i++) {
            loom_corpus *c = read_fmt(path, i, n, LOOM_BOW_AUTO, 1);
            assert_int_equal(c->first_doc, docs);
            if (n == 1) {
                assert_int_equal(c->docs, 5);
                check_doc(c, 0, 1, (uint32_t[]){0}, (uint32_t[]){1});
                check_doc(c, 1, 0, NULL, NULL);
                check_doc(c, 3, 1, (uint32_t[]){1}, (uint32_t[]){2});
            }
            docs += c->docs;
            skipped += c->skipped;
            nnz += c->nnz;
            loom_corpus_free(c);
        }
        assert_int_equal(docs, 5);
        assert_int_equal(skipped, 5);
        assert_int_equal(nnz, 2);
    }
    free(path);
}

static void test_empty_files(void **state)
{
    (void)state;
    const char *texts[] = {"", "\n", "  \r\n\n", "3\n5\n0\n", "3\n5\n0"};
    for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
        char *path = write_str(texts[t]);
        for (int n = 1; n <= 3; n++) {
            size_t docs = 0;
            for (int i = 0; i < n; i++) {
                loom_corpus *c = read_ok(path, i, n);
                assert_int_equal(c->nnz, 0);
                assert_int_equal(c->doc[0], 0);
                assert_int_equal(c->first_doc, docs);
                docs += c->docs;
                loom_corpus_free(c);
            }
            assert_int_equal(docs, t >= 3 ? 3 : 0); /* UCI: D empty documents */
        }
        free(path);
    }
}

static void test_open_errors(void **state)
{
    (void)state;
    expect_missing("missing.dat");
    loom_corpus *c = (loom_corpus *)1;
    char err[512];
    char *path = write_str("1 1:1\n");
    assert_int_equal(loom_bow_read(path, 1, 1, NULL, &c, err, sizeof err), LOOM_EINVAL);
    assert_int_equal(loom_bow_read(path, 0, 1, NULL, NULL, err, sizeof err), LOOM_EINVAL);
    loom_bow_opts o = {(loom_bow_format)7, 0};
    assert_int_equal(loom_bow_read(path, 0, 1, &o, &c, err, sizeof err), LOOM_EINVAL);
    assert_null(c);
    loom_corpus_free(NULL);
    free(path);
}

/* A random corpus of D documents over W words, up to 60 pairs each (many
 * empty ones: the UCI file skips their ids), written both ways with blank
 * lines and "\r\n" here and there. */
typedef struct texts {
    char *ldac, *uci;
    size_t D, W, nnz;
} texts;

static void random_corpus(size_t D, texts *t, int final_newline)
{
    size_t cap = 64 + D * 61 * 24;
    t->ldac = malloc(cap);
    t->uci = malloc(cap);
    assert_non_null(t->ldac);
    assert_non_null(t->uci);
    t->D = D;
    t->W = 20 + rng() % 500;
    t->nnz = 0;
    size_t l = 0, u = 0;
    uint32_t(*pairs)[2] = malloc(61 * sizeof *pairs);
    assert_non_null(pairs);
    char *body = malloc(cap);
    assert_non_null(body);
    for (size_t d = 0; d < D; d++) {
        size_t n = rng() % 4 == 0 ? 0 : rng() % 3 == 0 ? 1 + rng() % 60 : 1 + rng() % 5;
        /* Three empty documents first would be a UCI header to AUTO (test_detect). */
        if (d == 2 && t->nnz == 0 && n == 0) n = 1;
        for (size_t k = 0; k < n; k++) {
            pairs[k][0] = (uint32_t)(rng() % t->W);
            pairs[k][1] = (uint32_t)(1 + rng() % (rng() % 8 ? 3 : 100000));
        }
        l += (size_t)sprintf(t->ldac + l, "%zu", n);
        for (size_t k = 0; k < n; k++) {
            l += (size_t)sprintf(t->ldac + l, " %u:%u", pairs[k][0], pairs[k][1]);
            u += (size_t)sprintf(body + u, "%zu %u %u%s\n", d + 1, pairs[k][0] + 1, pairs[k][1],
                                 rng() % 9 ? "" : "\r");
            if (rng() % 40 == 0) body[u++] = '\n'; /* a blank line */
        }
        t->nnz += n;
        if (rng() % 9 == 0) t->ldac[l++] = '\r';
        t->ldac[l++] = '\n';
        if (rng() % 30 == 0) t->ldac[l++] = '\n';
    }
    if (!final_newline) {
        while (l > 0 && (t->ldac[l - 1] == '\n' || t->ldac[l - 1] == '\r')) l--;
        while (u > 0 && (body[u - 1] == '\n' || body[u - 1] == '\r')) u--;
    }
    t->ldac[l] = '\0';
    body[u] = '\0';
    sprintf(t->uci, "%zu\n%zu\n%zu\n%s", D, t->W, t->nnz, body);
    free(body);
    free(pairs);
}

/* Both formats, one corpus. */
static void test_same_corpus(void **state)
{
    (void)state;
    for (int file = 0; file < 8; file++) {
        texts t;
        random_corpus(1 + (size_t)(rng() % 80), &t, file % 2);
        char *pl = write_str(t.ldac), *pu = write_str(t.uci);
        loom_corpus *l = read_ok(pl, 0, 1), *u = read_ok(pu, 0, 1);
        assert_int_equal(l->format, LOOM_BOW_LDAC);
        assert_int_equal(u->format, LOOM_BOW_UCI);
        assert_int_equal(l->docs, t.D);
        assert_int_equal(u->docs, t.D);
        assert_int_equal(l->nnz, t.nnz);
        assert_int_equal(u->nnz, t.nnz);
        assert_int_equal(l->tokens, u->tokens);
        assert_true(l->vocab <= u->vocab);
        assert_int_equal(u->vocab, t.W);
        check_same_docs(l, u, 0);
        loom_corpus_free(l);
        loom_corpus_free(u);
        free(pl);
        free(pu);
        free(t.ldac);
        free(t.uci);
    }
}

/* The shares of path (whose contents are text), concatenated, are ref's
 * documents; *mid counts share starts that fell inside a document of
 * several lines (UCI). */
static void check_shares(const char *path, const char *text, int n, const loom_corpus *ref,
                         size_t *mid)
{
    size_t size = strlen(text), docs = 0, nnz = 0, bytes = 0;
    uint64_t tokens = 0;
    for (int s = 0; s < n; s++) {
        loom_corpus *c = read_ok(path, s, n);
        loom_bow_format fmt = c->format;
        assert_int_equal(c->first_doc, docs);
        check_same_docs(c, ref, docs);
        if (fmt == LOOM_BOW_UCI) assert_int_equal(c->vocab, ref->vocab);
        docs += c->docs;
        nnz += c->nnz;
        tokens += c->tokens;
        bytes += c->bytes;
        loom_corpus_free(c);

        /* Did the byte range start inside a document? Its first line start
         * and the line before it have the same doc id. */
        size_t lo = (size_t)((uint64_t)s * size / (uint64_t)n), at = lo;
        if (s == 0 || fmt != LOOM_BOW_UCI) continue;
        if (text[lo - 1] != '\n') {
            const char *nl = strchr(text + lo, '\n');
            at = nl ? (size_t)(nl - text) + 1 : size;
        }
        if (at >= size) continue;
        size_t prev = at - 1;
        while (prev > 0 && text[prev - 1] != '\n') prev--;
        if (atol(text + prev) == atol(text + at) && atol(text + at) > 0) ++*mid;
    }
    assert_int_equal(docs, ref->docs);
    assert_int_equal(nnz, ref->nnz);
    assert_int_equal(tokens, ref->tokens);
    assert_int_equal(bytes, size);
}

static void test_sharding(void **state)
{
    (void)state;
    size_t mid = 0;
    for (int file = 0; file < 10; file++) {
        texts t;
        random_corpus(file < 2 ? 1 : 10 + (size_t)(rng() % 150), &t, file % 2);
        const char *both[2] = {t.ldac, t.uci};
        for (int f = 0; f < 2; f++) {
            char *path = write_str(both[f]);
            loom_corpus *ref = read_ok(path, 0, 1);
            assert_int_equal(ref->docs, t.D);
            for (int n = 1; n <= 7; n++) check_shares(path, both[f], n, ref, &mid);
            check_shares(path, both[f], (int)(t.nnz + t.D) + 5, ref, &mid);
            loom_corpus_free(ref);
            free(path);
        }
        free(t.ldac);
        free(t.uci);
    }
    /* The UCI files did have share starts inside documents. */
    assert_true(mid > 50);
}

/* A decreasing doc id is reported by exactly one share, whichever share
 * boundaries fall around it. */
static void test_decreasing_in_shares(void **state)
{
    (void)state;
    char text[4096];
    size_t len = (size_t)sprintf(text, "40\n9\n0\n");
    for (int d = 1; d <= 40; d++) {
        int id = d == 25 ? 23 : d; /* 23 after 24: line 3 + 24 * 3 + 1 */
        for (int k = 1; k <= 3; k++) len += (size_t)sprintf(text + len, "%d %d 1\n", id, k);
    }
    char *path = write_str(text);
    char want[512];
    snprintf(want, sizeof want,
             "%s:76: doc ids not ascending (23 after 24): lines must be grouped by document", path);
    for (int n = 2; n <= 40; n++) {
        int failed = 0;
        for (int i = 0; i < n; i++) {
            loom_corpus *c = NULL;
            char err[512] = "";
            int rc = loom_bow_read(path, i, n, NULL, &c, err, sizeof err);
            if (rc) {
                assert_int_equal(rc, LOOM_EINVAL);
                assert_string_equal(err, want);
                failed++;
            } else {
                loom_corpus_free(c);
            }
        }
        assert_int_equal(failed, 1);
    }
    free(path);
}

/* ap.dat: 2246 documents, LDA-C; also written as UCI and read back. */
static void test_ap(void **state)
{
    (void)state;
    char path[4200];
    shared_file(path, sizeof path, "ap/ap.dat");
    loom_corpus *ref = read_ok(path, 0, 1);
    assert_int_equal(ref->format, LOOM_BOW_LDAC);
    assert_int_equal(ref->docs, 2246);
    assert_int_equal(ref->nnz, 302031);
    assert_int_equal(ref->tokens, 435838);
    assert_int_equal(ref->vocab, 10473);
    size_t mid = 0;
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *text = malloc(2 << 20);
    assert_non_null(text);
    size_t len = fread(text, 1, (2 << 20) - 1, f);
    fclose(f);
    text[len] = '\0';
    for (int n = 2; n <= 5; n += 3) check_shares(path, text, n, ref, &mid);

    /* the same as UCI docword */
    char *uci = malloc(16 * ref->nnz + 64);
    assert_non_null(uci);
    size_t u = (size_t)sprintf(uci, "%zu\n%llu\n%zu\n", ref->docs, (unsigned long long)ref->vocab,
                               ref->nnz);
    for (size_t d = 0; d < ref->docs; d++)
        for (size_t k = ref->doc[d]; k < ref->doc[d + 1]; k++)
            u += (size_t)sprintf(uci + u, "%zu %u %u\n", d + 1, ref->word[k] + 1, ref->count[k]);
    char *upath = write_file(uci, u);
    for (int n = 1; n <= 4; n += 3) check_shares(upath, uci, n, ref, &mid);
    assert_true(mid > 0);
    free(upath);
    free(uci);
    free(text);
    loom_corpus_free(ref);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ldac),
        cmocka_unit_test(test_uci),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_ldac_errors),
        cmocka_unit_test(test_uci_errors),
        cmocka_unit_test(test_skip_bad),
        cmocka_unit_test(test_empty_files),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_same_corpus),
        cmocka_unit_test(test_sharding),
        cmocka_unit_test(test_decreasing_in_shares),
    };
    const struct CMUnitTest data_tests[] = {
        cmocka_unit_test(test_ap),
    };
    return READER_TESTS_MAIN(argc, argv, tests, data_tests, "ap/ap.dat");
}
