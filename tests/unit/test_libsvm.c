/* The LIBSVM reader: syntax, messages, skipping, sharding, number parsing,
 * and the a9a files when they are present.
 *
 * Every test writes small files into one temporary directory (mkdtemp) and
 * reads them back. Sharding is checked against a single-share read of the
 * same file: the shares, concatenated in order, must give exactly the same
 * rows. Values are checked bit for bit against strtof(), the result the
 * reader promises (the correctly rounded float, not (float)strtod()). */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "loom/data.h"
#include "loom/error.h"

#define TEST_RNG_SEED 0x5eed11b5f00dULL
#include "test_rng.h"
#define TEST_FILES_DIR "/tmp/loom-libsvm-XXXXXX"
#define TEST_FILES_EXT ".svm"
#include "test_files.h"

TEST_READER(loom_dataset, loom_libsvm_opts, loom_libsvm_read, read_ok, expect_error, expect_missing)

static void check_row(const loom_dataset *d, size_t i, double label, size_t n, const uint64_t *ids,
                      const float *vals)
{
    assert_true(i < d->rows);
    assert_true(d->label[i] == label);
    assert_int_equal(d->row[i + 1] - d->row[i], n);
    for (size_t k = 0; k < n; k++) {
        assert_int_equal(d->idx[d->row[i] + k], ids[k]);
        assert_true(d->val[d->row[i] + k] == vals[k]);
    }
}

/* Every accepted form, one per line. */
static void test_syntax_variants(void **state)
{
    (void)state;
    const char *text = "# a comment line\n"
                       "\n"
                       "+1 1:0.5 3:2\n"
                       "-1 qid:3 2:1.5e-1   \n"
                       "1\t4:-3.5e-2\t\t7:1 # trailing comment\n"
                       "0 1:1\r\n"
                       "   \t \n"
                       "-1.0 2:1  5:.5 6:5. 8:+2 9:1E2\n"
                       "+1.0 \n"
                       "1 10:0#comment\n"
                       "\r\n"
                       "-1 qid:17\n"
                       "  +1   12:-0\t\r\n"
                       "-1 11:1";
    char *path = write_str(text);
    loom_dataset *d = read_ok(path, 0, 1, NULL);
    assert_int_equal(d->rows, 10);
    assert_int_equal(d->nnz, 14);
    assert_int_equal(d->first_line, 1);
    assert_int_equal(d->skipped, 0);
    assert_int_equal(d->bytes, strlen(text));
    assert_int_equal(d->max_feature, 12); /* id 12 (1-based) is the largest */
    check_row(d, 0, 1, 2, (uint64_t[]){0, 2}, (float[]){0.5f, 2});
    check_row(d, 1, -1, 1, (uint64_t[]){1}, (float[]){0.15f});
    check_row(d, 2, 1, 2, (uint64_t[]){3, 6}, (float[]){-0.035f, 1});
    check_row(d, 3, -1, 1, (uint64_t[]){0}, (float[]){1});
    check_row(d, 4, -1, 5, (uint64_t[]){1, 4, 5, 7, 8}, (float[]){1, 0.5f, 5, 2, 100});
    check_row(d, 5, 1, 0, NULL, NULL);
    check_row(d, 6, 1, 1, (uint64_t[]){9}, (float[]){0});
    check_row(d, 7, -1, 0, NULL, NULL);
    check_row(d, 8, 1, 1, (uint64_t[]){11}, (float[]){0});
    assert_true(signbit(d->val[d->row[8]])); /* "-0" is -0.0f, as strtof says */
    check_row(d, 9, -1, 1, (uint64_t[]){10}, (float[]){1});
    loom_dataset_free(d);
    free(path);
}

static void test_empty_files(void **state)
{
    (void)state;
    const char *texts[] = {"", "\n", "# only a comment", "\n\n  \n# c\n"};
    for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
        char *path = write_str(texts[t]);
        for (int n = 1; n <= 3; n++) {
            for (int i = 0; i < n; i++) {
                loom_dataset *d = read_ok(path, i, n, NULL);
                assert_int_equal(d->rows, 0);
                assert_int_equal(d->nnz, 0);
                assert_int_equal(d->max_feature, 0);
                assert_int_equal(d->row[0], 0);
                loom_dataset_free(d);
            }
        }
        free(path);
    }
}

static void test_labels(void **state)
{
    (void)state;
    char *path = write_str("+1\n-1\n1\n0\n1.0\n-1.0\n+1.00\n0.0\n-0\n1e0\n");
    loom_dataset *d = read_ok(path, 0, 1, NULL);
    const double want[] = {1, -1, 1, -1, 1, -1, 1, -1, -1, 1};
    assert_int_equal(d->rows, 10);
    for (size_t i = 0; i < 10; i++) assert_true(d->label[i] == want[i]);
    loom_dataset_free(d);
    free(path);

    loom_libsvm_opts o = LOOM_LIBSVM_OPTS_DEFAULT;
    o.labels = LOOM_LABELS_REAL;
    path = write_str("2.5 1:1\n-3\n1e3\n0\n0.1\n");
    d = read_ok(path, 0, 1, &o);
    const double real[] = {2.5, -3, 1000, 0, 0.1};
    assert_int_equal(d->rows, 5);
    for (size_t i = 0; i < 5; i++) assert_true(d->label[i] == real[i]);
    loom_dataset_free(d);
    free(path);
}

static void test_id_base(void **state)
{
    (void)state;
    loom_libsvm_opts o = LOOM_LIBSVM_OPTS_DEFAULT;
    struct {
        const char *text;
        loom_id_base ids;
        uint64_t first; /* stored id of the first row's first feature */
    } cases[] = {
        {"1 5:1\n-1 0:1 3:1\n", LOOM_IDS_AUTO, 5}, /* an id 0 anywhere: 0-based */
        {"1 5:1\n-1 00:1\n", LOOM_IDS_AUTO, 5},    /* "00" is 0 too */
        {"1 5:1\n-1\t0:1\n", LOOM_IDS_AUTO, 5},    /* after a tab */
        {"1 5:1 # 0:1\n", LOOM_IDS_AUTO, 4},       /* in a comment: not an id */
        {"1 qid:0 5:1\n", LOOM_IDS_AUTO, 4},       /* qid 0: not an id */
        {"1 5:1 10:0 100:1\n", LOOM_IDS_AUTO, 4},  /* values 0, ids ending in 0 */
        {"1 5:1\n", LOOM_IDS_ZERO_BASED, 5},
        {"1 5:1 0:1\n", LOOM_IDS_ONE_BASED, 4}, /* not reached: error on line 1 */
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases - 1; c++) {
        o.ids = cases[c].ids;
        char *path = write_str(cases[c].text);
        loom_dataset *d = read_ok(path, 0, 1, &o);
        assert_int_equal(d->idx[0], cases[c].first);
        loom_dataset_free(d);
        free(path);
    }
    o.ids = LOOM_IDS_ONE_BASED;
    expect_error("1 5:1\n1 0:1\n", &o, 2, "feature id 0 in a 1-based file");

    /* An id 0 at every alignment, also among the last bytes of the file and
     * after a comment line of every length (the scan reads 8-byte words). */
    o.ids = LOOM_IDS_AUTO;
    for (int pad = 0; pad < 24; pad++) {
        for (int last = 0; last < 2; last++) {
            char text[128];
            snprintf(text, sizeof text, "#%.*s\n1 7:1\n-1 %s:1%s", pad,
                     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", pad % 3 == 2 ? "000" : "0",
                     last ? "" : " 9:1\n");
            char *path = write_str(text);
            loom_dataset *d = read_ok(path, 0, 1, &o);
            assert_int_equal(d->idx[0], 7);
            loom_dataset_free(d);
            free(path);
        }
    }
    expect_error("000:1 1:1\n", &o, 1, "bad label '000:1'");

    /* A "0:" in the label position is a bad label, not an id. */
    o.skip_bad = 1;
    char *path = write_str("1 5:1\n  0:1 2:1\n");
    loom_dataset *d = read_ok(path, 0, 1, &o);
    assert_int_equal(d->rows, 1);
    assert_int_equal(d->skipped, 1);
    assert_int_equal(d->idx[0], 4);
    loom_dataset_free(d);
    free(path);
}

/* The id base is decided on the whole file, so every share agrees, also
 * when the only id 0 lies in one share. */
static void test_id_base_all_shares(void **state)
{
    (void)state;
    char text[4096] = "";
    for (int i = 0; i < 40; i++) strcat(text, "+1 3:1 7:1\n");
    strcat(text, "-1 0:1\n");
    char *path = write_str(text);
    for (int n = 1; n <= 8; n++) {
        for (int i = 0; i < n; i++) {
            loom_dataset *d = read_ok(path, i, n, NULL);
            if (d->rows > 0) assert_int_equal(d->idx[0], d->label[0] > 0 ? 3 : 0);
            loom_dataset_free(d);
        }
    }
    free(path);
}

static void test_errors(void **state)
{
    (void)state;
    loom_libsvm_opts o = LOOM_LIBSVM_OPTS_DEFAULT;
    static const struct {
        const char *text;
        size_t line;
        const char *msg;
    } cases[] = {
        {"1 1:x\n", 1, "bad feature value 'x'"},
        {"# c\n\n1 1:1\n2 1:1\n", 4, "label '2' is not +1, -1, 1 or 0"},
        {"1 1:1\n-2.5\n", 2, "label '-2.5' is not +1, -1, 1 or 0"},
        {"abc 1:1\n", 1, "bad label 'abc'"},
        {"+ 1:1\n", 1, "bad label '+'"},
        {"1x 1:1\n", 1, "bad label '1x'"},
        {"\x01\x02 1:1\n", 1, "bad label '?\?'"},
        {"1:1 2:1\n", 1, "bad label '1:1'"},
        {"1 9:1 7:1\n", 1, "feature ids not ascending (7 after 9)"},
        {"1 3:1 3:1\n", 1, "feature ids not ascending (3 after 3)"},
        {"1 1:\n", 1, "bad feature value ''"},
        {"1 1:1.2.3\n", 1, "bad feature value '1.2.3'"},
        {"1 1:1e\n", 1, "bad feature value '1e'"},
        {"1 1:1e+\n", 1, "bad feature value '1e+'"},
        {"1 1:.\n", 1, "bad feature value '.'"},
        {"1 1:nan\n", 1, "bad feature value 'nan'"},
        {"1 1:inf\n", 1, "bad feature value 'inf'"},
        {"1 1:0x10\n", 1, "bad feature value '0x10'"},
        {"1 1:2:3\n", 1, "bad feature value '2:3'"},
        {"1 1:1e39\n", 1, "feature value '1e39' out of range"},
        {"1 1:-4e38\n", 1, "feature value '-4e38' out of range"},
        {"1 :1\n", 1, "bad feature ':1'"},
        {"1 a:1\n", 1, "bad feature 'a:1'"},
        {"1 -3:1\n", 1, "bad feature '-3:1'"},
        {"1 1\n", 1, "bad feature '1'"},
        {"1 1:1 garbage\n", 1, "bad feature 'garbage'"},
        {"1 qid:x 1:1\n", 1, "bad qid 'qid:x'"},
        {"1 qid: 1:1\n", 1, "bad qid 'qid:'"},
        {"1 2:1 qid:3\n", 1, "bad feature 'qid:3'"},
        /* '\r' only ends a line before '\n'; unprintable bytes are quoted as '?' */
        {"1 1:1\r2:1\n", 1, "bad feature value '1?2:1'"},
        {"1 99999999999999999999:1\n", 1, "feature id '99999999999999999999' out of range"},
        {"1 18446744073709551616:1\n", 1, "feature id '18446744073709551616' out of range"},
        {"1 1:1 # fine\n1 2:1\n1 2:x", 3, "bad feature value 'x'"},
        {"1 1:xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n", 1,
         "bad feature value 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        expect_error(cases[c].text, &o, cases[c].line, cases[c].msg);
    o.max_features = 10;
    expect_error("1 10:1\n1 11:1\n", &o, 2, "feature id 11 is beyond max_features 10");
    o.ids = LOOM_IDS_ZERO_BASED;
    expect_error("1 9:1\n1 10:1\n", &o, 2, "feature id 10 is beyond max_features 10");
    o.max_features = 0;
    /* 0-based UINT64_MAX: 1 + the id (max_feature) would not fit */
    expect_error("1 18446744073709551615:1\n", &o, 1,
                 "feature id '18446744073709551615' out of range");
    o.ids = LOOM_IDS_AUTO;
    o.labels = LOOM_LABELS_REAL;
    expect_error("1e999 1:1\n", &o, 1, "label '1e999' out of range");
    expect_error("x 1:1\n", &o, 1, "bad label 'x'");
}

/* The largest 1-based id, and values at and beyond the ends of float's
 * range: FLT_MAX, zeros with huge exponents, underflow to (signed) zero. */
static void test_extreme_values(void **state)
{
    (void)state;
    loom_libsvm_opts o = LOOM_LIBSVM_OPTS_DEFAULT;
    o.ids = LOOM_IDS_ONE_BASED;
    char *path = write_str("1 18446744073709551615:1e-50\n"
                           "1 1:3.4028234e38 2:0e999 3:-1e-400 4:0.0000000000000000000000001\n");
    loom_dataset *d = read_ok(path, 0, 1, &o);
    assert_int_equal(d->idx[0], UINT64_MAX - 1);
    assert_true(d->max_feature == UINT64_MAX);
    assert_true(d->val[0] == 0.0f); /* underflows to 0, like strtof */
    assert_true(d->val[1] == 3.4028234e38f);
    assert_true(d->val[2] == 0.0f);
    assert_true(d->val[3] == 0.0f && signbit(d->val[3]));
    assert_true(d->val[4] == 1e-25f);
    loom_dataset_free(d);
    free(path);
}

/* The file's path is in every message; a missing file has no line. */
static void test_open_errors(void **state)
{
    (void)state;
    expect_missing("missing.svm");
    loom_dataset *d = (loom_dataset *)1;
    char err[512], want[512];

    assert_int_equal(loom_libsvm_read(tmpdir, 0, 1, NULL, &d, err, sizeof err), LOOM_EINVAL);
    snprintf(want, sizeof want, "%s: cannot read: Is a directory", tmpdir);
    assert_string_equal(err, want);

    char *path = write_str("1 1:1\n");
    assert_int_equal(loom_libsvm_read(path, 2, 2, NULL, &d, err, sizeof err), LOOM_EINVAL);
    assert_int_equal(loom_libsvm_read(path, -1, 2, NULL, &d, err, sizeof err), LOOM_EINVAL);
    assert_int_equal(loom_libsvm_read(path, 0, 0, NULL, &d, err, sizeof err), LOOM_EINVAL);
    assert_int_equal(loom_libsvm_read(path, 0, 1, NULL, NULL, err, sizeof err), LOOM_EINVAL);
    assert_int_equal(loom_libsvm_read(NULL, 0, 1, NULL, &d, err, sizeof err), LOOM_EINVAL);
    /* no room for a message is fine too */
    assert_int_equal(loom_libsvm_read(path, 2, 2, NULL, &d, NULL, 0), LOOM_EINVAL);
    free(path);
}

static void *feed_pipe(void *arg)
{
    FILE *f = fopen(arg, "w");
    if (f) {
        fputs("1 1:1\n-1 2:0.5", f);
        fclose(f);
    }
    return NULL;
}

/* A pipe cannot be mapped: it is read whole, as one share. */
static void test_pipe(void **state)
{
    (void)state;
    char path[64];
    file_path(path, sizeof path, nfiles++);
    assert_int_equal(mkfifo(path, 0600), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, feed_pipe, path), 0);
    loom_dataset *d = read_ok(path, 0, 1, NULL);
    pthread_join(t, NULL);
    assert_int_equal(d->rows, 2);
    check_row(d, 1, -1, 1, (uint64_t[]){1}, (float[]){0.5f});
    loom_dataset_free(d);
}

/* A device is no data file: /dev/zero would never end. /dev/null comes
 * first: if the rule is lost, its assertion stops the test before a reader
 * that regressed could read /dev/zero until memory runs out. */
static void test_device(void **state)
{
    (void)state;
    char err[256];
    loom_dataset *d = NULL;
    static const char *const devices[] = {"/dev/null", "/dev/zero"};
    for (size_t i = 0; i < 2; i++) {
        assert_int_equal(loom_libsvm_read(devices[i], 0, 1, NULL, &d, err, sizeof err),
                         LOOM_EINVAL);
        assert_null(d);
        char want[64];
        snprintf(want, sizeof want, "%s: a device, not a file of data", devices[i]);
        assert_string_equal(err, want);
    }
}

/* skip_bad: malformed lines are dropped and counted, whatever the share. */
static void test_skip_bad(void **state)
{
    (void)state;
    loom_libsvm_opts o = LOOM_LIBSVM_OPTS_DEFAULT;
    o.skip_bad = 1;
    const char *text = "1 1:1\n"
                       "2 1:1\n"
                       "-1 2:1 3:x\n"
                       "# comment\n"
                       "1 2:1\n"
                       "1 5:1 4:1 # not ascending\n"
                       "-1 7:1\n"
                       "-1 8:1 9:1 garbage";
    char *path = write_str(text);
    loom_dataset *d = read_ok(path, 0, 1, &o);
    assert_int_equal(d->rows, 3);
    assert_int_equal(d->skipped, 4);
    assert_int_equal(d->nnz, 3);
    check_row(d, 0, 1, 1, (uint64_t[]){0}, (float[]){1});
    check_row(d, 1, 1, 1, (uint64_t[]){1}, (float[]){1});
    check_row(d, 2, -1, 1, (uint64_t[]){6}, (float[]){1});
    assert_int_equal(d->max_feature, 7);
    loom_dataset_free(d);
    for (int n = 2; n <= 9; n++) {
        size_t rows = 0, skipped = 0;
        for (int i = 0; i < n; i++) {
            d = read_ok(path, i, n, &o);
            rows += d->rows;
            skipped += d->skipped;
            loom_dataset_free(d);
        }
        assert_int_equal(rows, 3);
        assert_int_equal(skipped, 4);
    }
    free(path);
}

/* A random LIBSVM text of nlines lines: rows of 0 to 30 features (now and
 * then 300), blank and comment lines, "\r\n" ends and trailing blanks, with
 * or without a final newline. lines[i] points at line i + 1. */
static char *random_text(size_t nlines, int final_newline, const char **lines)
{
    static const char *values[] = {"1", "0.5", "-3.5e-2", "12", "0.333333", "7e10", "-0"};
    size_t cap = 1 << 16, len = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    for (size_t l = 0; l < nlines; l++) {
        if (cap - len < 8192) {
            char *grown = realloc(t, cap *= 2);
            assert_non_null(grown);
            t = grown;
        }
        size_t at = len;
        unsigned kind = (unsigned)(rng() % 10);
        if (kind == 0) {
            /* blank line */
        } else if (kind == 1) {
            len += (size_t)sprintf(t + len, "# comment %u", (unsigned)(rng() % 1000));
        } else {
            size_t k = kind == 2 && rng() % 4 == 0 ? 300 : (size_t)(rng() % 31);
            len += (size_t)sprintf(t + len, "%s", rng() % 2 ? "+1" : "-1");
            uint64_t id = 0;
            for (size_t i = 0; i < k; i++) {
                id += 1 + rng() % 50;
                len += (size_t)sprintf(t + len, " %llu:%s", (unsigned long long)id,
                                       values[rng() % (sizeof values / sizeof *values)]);
            }
            if (rng() % 5 == 0) len += (size_t)sprintf(t + len, "  ");
        }
        if (rng() % 7 == 0) t[len++] = '\r';
        if (l + 1 < nlines || final_newline) t[len++] = '\n';
        lines[l] = (const char *)(uintptr_t)at; /* offsets until t stops moving */
    }
    t[len] = '\0';
    for (size_t l = 0; l < nlines; l++) lines[l] = t + (uintptr_t)lines[l];
    return t;
}

/* The shares of path, concatenated, equal the single-share read. */
static void check_shares(const char *path, size_t size, int n, const loom_dataset *ref)
{
    size_t rows = 0, nnz = 0, bytes = 0, prev_first = 1;
    uint64_t maxf = 0;
    for (int i = 0; i < n; i++) {
        loom_dataset *d = read_ok(path, i, n, NULL);
        assert_true(d->first_line >= prev_first);
        prev_first = d->first_line;
        assert_int_equal(d->bytes, (size_t)((uint64_t)(i + 1) * size / (uint64_t)n -
                                            (uint64_t)i * size / (uint64_t)n));
        bytes += d->bytes;
        assert_int_equal(d->row[0], 0);
        for (size_t r = 0; r < d->rows; r++) {
            assert_true(rows + r < ref->rows);
            assert_true(d->label[r] == ref->label[rows + r]);
            assert_int_equal(d->row[r + 1] - d->row[r],
                             ref->row[rows + r + 1] - ref->row[rows + r]);
        }
        for (size_t k = 0; k < d->nnz; k++) {
            assert_int_equal(d->idx[k], ref->idx[nnz + k]);
            assert_memory_equal(&d->val[k], &ref->val[nnz + k], sizeof(float));
        }
        rows += d->rows;
        nnz += d->nnz;
        if (d->max_feature > maxf) maxf = d->max_feature;
        loom_dataset_free(d);
    }
    assert_int_equal(rows, ref->rows);
    assert_int_equal(nnz, ref->nnz);
    assert_int_equal(bytes, size);
    assert_true(maxf == ref->max_feature);
}

static void test_sharding(void **state)
{
    (void)state;
    for (int file = 0; file < 12; file++) {
        size_t nlines = file < 2 ? (size_t)file + 1 : 20 + (size_t)(rng() % 200);
        const char **lines = malloc(nlines * sizeof *lines);
        assert_non_null(lines);
        char *text = random_text(nlines, file % 2, lines);
        size_t size = strlen(text);
        char *path = write_file(text, size);
        loom_dataset *ref = read_ok(path, 0, 1, NULL);

        /* the reference against the text itself: a row per non-blank line */
        size_t rows = 0;
        for (size_t l = 0; l < nlines; l++) rows += lines[l][0] == '+' || lines[l][0] == '-';
        assert_int_equal(ref->rows, rows);

        for (int n = 1; n <= 7; n++) check_shares(path, size, n, ref);
        check_shares(path, size, (int)nlines + 5, ref);
        if (size < 4096) check_shares(path, size, (int)size + 3, ref); /* more shares than bytes */
        loom_dataset_free(ref);
        free(path);
        free(text);
        free(lines);
    }
}

/* An error names its absolute line, whichever share finds it. */
static void test_error_lines_in_shares(void **state)
{
    (void)state;
    for (int file = 0; file < 6; file++) {
        size_t nlines = 30 + (size_t)(rng() % 100);
        const char **lines = malloc(nlines * sizeof *lines);
        assert_non_null(lines);
        char *text = random_text(nlines, file % 2, lines);
        /* Make a row line bad: its label becomes "2". */
        size_t bad = nlines / 2 + (size_t)(rng() % (nlines / 2));
        while (lines[bad][0] != '+' && lines[bad][0] != '-') bad--;
        ((char *)lines[bad])[0] = '2';
        ((char *)lines[bad])[1] = ' ';
        char *path = write_str(text);
        char want[512];
        snprintf(want, sizeof want, "%s:%zu: label '2' is not +1, -1, 1 or 0", path, bad + 1);
        for (int n = 1; n <= 9; n++) {
            int failed = 0;
            for (int i = 0; i < n; i++) {
                loom_dataset *d = NULL;
                char err[512] = "";
                int rc = loom_libsvm_read(path, i, n, NULL, &d, err, sizeof err);
                if (rc) {
                    assert_int_equal(rc, LOOM_EINVAL);
                    assert_string_equal(err, want);
                    failed++;
                } else {
                    /* the lines before the bad one are numbered right too */
                    assert_true(d->first_line != bad + 1);
                    loom_dataset_free(d);
                }
            }
            assert_int_equal(failed, 1);
        }
        free(path);
        free(text);
        free(lines);
    }
}

/* first_line is the absolute number of the share's first line. */
static void test_first_line(void **state)
{
    (void)state;
    const char *text = "1 1:1\n\n# c\n-1 2:1\n1 3:1\n";
    /* Line starts: 0 (line 1), 6 (2), 7 (3), 11 (4), 18 (5); 24 bytes. In 4
     * shares the ranges start at 0, 6, 12, 18: the third starts inside line
     * 4, skips to line 5, which starts at its end, so it is empty. */
    char *path = write_str(text);
    struct {
        int shard, n;
        size_t first_line, rows;
    } cases[] = {{0, 4, 1, 1}, {1, 4, 2, 1}, {2, 4, 5, 0}, {3, 4, 5, 1}, {1, 2, 5, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        loom_dataset *d = read_ok(path, cases[c].shard, cases[c].n, NULL);
        assert_int_equal(d->first_line, cases[c].first_line);
        assert_int_equal(d->rows, cases[c].rows);
        loom_dataset_free(d);
    }
    free(path);
}

/* Random decimal text of several shapes: short decimals (the fast path),
 * long ones, large and small exponents, and 16-digit neighbours of the
 * midpoints between floats, where (float)strtod() and strtof() disagree. */
static void random_decimal(char *out)
{
    switch (rng() % 6) {
    case 0: { /* up to 9 digits, point anywhere, optional exponent */
        int digits = 1 + (int)(rng() % 9), point = (int)(rng() % (uint64_t)(digits + 1));
        char *p = out;
        if (rng() % 3 == 0) *p++ = rng() % 2 ? '-' : '+';
        for (int i = 0; i < digits; i++) {
            if (i == point) *p++ = '.';
            *p++ = (char)('0' + rng() % 10);
        }
        if (rng() % 3 == 0) p += sprintf(p, "e%d", (int)(rng() % 60) - 35);
        *p = '\0';
        break;
    }
    case 1: /* a random double's 17 digits */
        sprintf(out, "%.16e", (double)(rng() >> 11) * 0x1p-53 * pow(10, (int)(rng() % 50) - 25));
        break;
    case 2:
    case 3: { /* near a midpoint between two floats */
        uint32_t bits = (uint32_t)(0x01000000u + rng() % 0x7e000000u);
        float f;
        memcpy(&f, &bits, sizeof f);
        double mid = ((double)f + (double)nextafterf(f, INFINITY)) / 2;
        sprintf(out, rng() % 2 ? "%.15e" : "%.16e", mid);
        break;
    }
    case 4: /* float subnormals and the edge of the range */
        sprintf(out, "%.*e", (int)(rng() % 12),
                (double)(rng() >> 11) * 0x1p-53 * (rng() % 2 ? 1e-38 : 3.4e38));
        break;
    default: /* 20 to 40 digits */
        out += sprintf(out, "0.");
        for (int i = 0, n = 20 + (int)(rng() % 21); i < n; i++) *out++ = (char)('0' + rng() % 10);
        *out = '\0';
        break;
    }
}

static void test_values_match_strtof(void **state)
{
    (void)state;
    enum { N = 6000 };
    char(*text)[64] = malloc(N * sizeof *text);
    char *file = malloc(N * 80);
    assert_non_null(text);
    assert_non_null(file);
    size_t len = 0, n = 0, double_rounding = 0;
    while (n < N) {
        random_decimal(text[n]);
        if (!isfinite(strtof(text[n], NULL))) continue; /* those are errors */
        len += (size_t)sprintf(file + len, "1 1:%s\n", text[n]);
        n++;
    }
    char *path = write_file(file, len);
    loom_dataset *d = read_ok(path, 0, 1, NULL);
    assert_int_equal(d->rows, N);
    for (size_t i = 0; i < N; i++) {
        float want = strtof(text[i], NULL);
        if (memcmp(&d->val[i], &want, sizeof want))
            fail_msg("'%s': read %a, strtof %a", text[i], (double)d->val[i], (double)want);
        double_rounding += (float)strtod(text[i], NULL) != want;
    }
    /* The sample does contain values where rounding via double goes wrong. */
    assert_true(double_rounding > 0);
    loom_dataset_free(d);
    free(path);
    free(file);
    free(text);
}

/* Integer ids of every length up to 20 digits. */
static void test_ids(void **state)
{
    (void)state;
    char file[64 * 1024];
    uint64_t want[400];
    size_t len = 0;
    for (int i = 0; i < 400; i++) {
        int digits = 1 + i % 20;
        uint64_t id = rng() % 10;
        for (int k = 1; k < digits && id < UINT64_MAX / 20; k++) id = id * 10 + rng() % 10;
        if (id == 0) id = 1;
        want[i] = id;
        len += (size_t)sprintf(file + len, "-1 %llu:1\n", (unsigned long long)id);
    }
    char *path = write_file(file, len);
    loom_dataset *d = read_ok(path, 0, 1, NULL);
    for (int i = 0; i < 400; i++) assert_true(d->idx[i] == want[i] - 1);
    loom_dataset_free(d);
    free(path);
}

static void check_a9a(const char *name, size_t rows, size_t nnz, size_t pos, uint64_t maxf)
{
    char path[4200], rel[64];
    snprintf(rel, sizeof rel, "a9a/%s", name);
    shared_file(path, sizeof path, rel);
    for (int n = 1; n <= 4; n += 3) {
        size_t r = 0, z = 0, p = 0, m = 0;
        uint64_t mf = 0;
        for (int i = 0; i < n; i++) {
            loom_dataset *d = read_ok(path, i, n, NULL);
            r += d->rows;
            z += d->nnz;
            for (size_t k = 0; k < d->rows; k++) {
                p += d->label[k] == 1;
                m += d->label[k] == -1;
            }
            for (size_t k = 0; k < d->nnz; k++) assert_true(d->val[k] == 1.0f);
            if (d->max_feature > mf) mf = d->max_feature;
            loom_dataset_free(d);
        }
        assert_int_equal(r, rows);
        assert_int_equal(z, nnz);
        assert_int_equal(p, pos);
        assert_int_equal(m, rows - pos);
        assert_true(mf == maxf);
    }
}

static void test_a9a(void **state)
{
    (void)state;
    check_a9a("a9a", 32561, 451592, 7841, 123);
}

static void test_a9a_t(void **state)
{
    (void)state;
    check_a9a("a9a.t", 16281, 225731, 3846, 122);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_syntax_variants),
        cmocka_unit_test(test_empty_files),
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_id_base),
        cmocka_unit_test(test_id_base_all_shares),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_extreme_values),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_pipe),
        cmocka_unit_test(test_device),
        cmocka_unit_test(test_skip_bad),
        cmocka_unit_test(test_sharding),
        cmocka_unit_test(test_error_lines_in_shares),
        cmocka_unit_test(test_first_line),
        cmocka_unit_test(test_values_match_strtof),
        cmocka_unit_test(test_ids),
    };
    const struct CMUnitTest data_tests[] = {
        cmocka_unit_test(test_a9a),
        cmocka_unit_test(test_a9a_t),
    };
    return READER_TESTS_MAIN(argc, argv, tests, data_tests, "a9a/a9a", "a9a/a9a.t");
}
