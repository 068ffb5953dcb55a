/* The ratings reader: separators, header, ids and their mapping, messages,
 * skipping, sharding, number parsing, and MovieLens when it is present.
 *
 * Every test writes small files into one temporary directory (mkdtemp) and
 * reads them back. Sharding is checked against a single-share read of the
 * same file: the shares, concatenated in order, must give exactly its
 * ratings, and every share must have its id mapping. */
#include <math.h>
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

#define TEST_RNG_SEED 0x7a71e55eedULL
#include "test_rng.h"
#define TEST_FILES_DIR "/tmp/loom-ratings-XXXXXX"
#define TEST_FILES_EXT ".txt"
#include "test_files.h"

TEST_READER(loom_ratings, loom_ratings_opts, loom_ratings_read, read_ok, expect_error,
            expect_missing)

/* Rating k is (user id, item id, rating, line). */
static void check_rating(const loom_ratings *r, size_t k, int64_t user, int64_t item, float rating,
                         uint64_t line)
{
    assert_true(k < r->n);
    assert_true(r->user[k] < r->users);
    assert_true(r->item[k] < r->items);
    assert_true(r->user_id[r->user[k]] == user);
    assert_true(r->item_id[r->item[k]] == item);
    assert_true(r->rating[k] == rating);
    assert_int_equal(r->line[k], line);
}

/* The same four ratings in every accepted form. */
static void test_formats(void **state)
{
    (void)state;
    const struct {
        const char *text;
        size_t first; /* line of the first rating */
    } forms[] = {
        {"196\t242\t3\t881250949\n186\t302\t3.5\t891717742\n\n22\t377\t1\t878887116\n"
         "196\t302\t5\t881250950\n",
         1}, /* u.data: tabs, timestamps */
        {"userId,movieId,rating,timestamp\n196,242,3,881250949\n186,302,3.5,891717742\n\n"
         "22,377,1.0,878887116\n196,302,5,881250950",
         2}, /* ratings.csv: a header, no final newline */
        {"196 242 3\n186   302\t3.5\n  \n22 377 1 878887116 more fields\n196\t\t302 5  \n", 1},
        {"\r\n196,242,3\r\n186 , 302,\t3.5\r\n\r\n22,377,1,x\r\n196,302,5,\r\n", 2},
        {"user\titem\trating\n196\t242\t3\n186 \t 302\t3.5\n\n22\t377\t1.\t\n196\t302\t5e0", 2},
        {"\n\n# a header too\n196 242 3\n186 302 +3.5\n\n22 377 1\n196 302 5", 4},
    };
    for (size_t t = 0; t < sizeof forms / sizeof *forms; t++) {
        char *path = write_str(forms[t].text);
        loom_ratings *r = read_ok(path, 0, 1, NULL);
        size_t l = forms[t].first;
        assert_int_equal(r->n, 4);
        assert_int_equal(r->users, 3);
        assert_int_equal(r->items, 3);
        assert_int_equal(r->skipped, 0);
        assert_int_equal(r->bytes, strlen(forms[t].text));
        check_rating(r, 0, 196, 242, 3, l);
        check_rating(r, 1, 186, 302, 3.5f, l + 1);
        check_rating(r, 2, 22, 377, 1, l + 3);
        check_rating(r, 3, 196, 302, 5, l + 4);
        loom_ratings_free(r);
        free(path);
    }
}

/* Dense indices follow the ids' order over the whole file. */
static void test_id_order(void **state)
{
    (void)state;
    char *path = write_str("100 5 1\n-5 9223372036854775807 2\n7 -9223372036854775808 3\n"
                           "100 0 4\n+7 5 5\n-0 5 6\n");
    loom_ratings *r = read_ok(path, 0, 1, NULL);
    assert_int_equal(r->users, 4);
    assert_int_equal(r->items, 4);
    const int64_t users[] = {-5, 0, 7, 100}, items[] = {INT64_MIN, 0, 5, INT64_MAX};
    for (size_t i = 0; i < 4; i++) {
        assert_true(r->user_id[i] == users[i]);
        assert_true(r->item_id[i] == items[i]);
        assert_int_equal(loom_ratings_user_index(r, users[i]), i);
        assert_int_equal(loom_ratings_item_index(r, items[i]), i);
    }
    const uint32_t u[] = {3, 0, 2, 3, 2, 1}, it[] = {2, 3, 0, 1, 2, 2};
    for (size_t k = 0; k < 6; k++) {
        assert_int_equal(r->user[k], u[k]);
        assert_int_equal(r->item[k], it[k]);
        assert_true(r->rating[k] == (float)(k + 1));
    }
    assert_int_equal(loom_ratings_user_index(r, 8), -1);
    assert_int_equal(loom_ratings_user_index(r, INT64_MIN), -1);
    assert_int_equal(loom_ratings_item_index(r, 6), -1);
    assert_int_equal(loom_ratings_user_index(NULL, 7), -1);
    loom_ratings_free(r);
    free(path);

    /* Around the reader's own limits: 4096 and 65536 (its table of small
     * ids grows from 4096 entries up to 65536 for a small file). */
    const int64_t ids[] = {65536, 4095, 65535, 4096, -1, 0, 70000, 1, 4097, 131072};
    char text[512];
    size_t len = 0;
    for (size_t k = 0; k < 10; k++)
        len +=
            (size_t)sprintf(text + len, "%lld %lld 1\n", (long long)ids[k], (long long)ids[9 - k]);
    path = write_str(text);
    r = read_ok(path, 0, 1, NULL);
    const int64_t sorted[] = {-1, 0, 1, 4095, 4096, 4097, 65535, 65536, 70000, 131072};
    assert_int_equal(r->users, 10);
    assert_int_equal(r->items, 10);
    assert_memory_equal(r->user_id, sorted, sizeof sorted);
    assert_memory_equal(r->item_id, sorted, sizeof sorted);
    for (size_t k = 0; k < 10; k++) check_rating(r, k, ids[k], ids[9 - k], 1, k + 1);
    loom_ratings_free(r);
    free(path);
}

static void test_errors(void **state)
{
    (void)state;
    loom_ratings_opts o = LOOM_RATINGS_OPTS_DEFAULT;
    static const struct {
        const char *text;
        size_t line;
        const char *msg;
    } cases[] = {
        {"1,2,3\n4,5\n", 2, "too few fields (2): want user, item, rating"},
        {"1,2,3\n4\n", 2, "too few fields (1): want user, item, rating"},
        {"1\t2\t3\n4\t5\t\n", 2, "too few fields (2): want user, item, rating"},
        {"1,2,3\n4,5,\n", 2, "too few fields (2): want user, item, rating"},
        {"1 2 3\n4 5\r\n", 2, "too few fields (2): want user, item, rating"},
        {"1,2,3\nx,5,3\n", 2, "bad user id 'x'"},
        {"1,2,3\n1.5,5,3\n", 2, "bad user id '1.5'"},
        {"1,2,3\n-,5,3\n", 2, "bad user id '-'"},
        {"1,2,3\n4,5x,3\n", 2, "bad item id '5x'"},
        {"1,2,3\n4,,3\n", 2, "bad item id ''"},
        {"1,2,3\n9223372036854775808,5,3\n", 2, "user id '9223372036854775808' out of range"},
        {"1,2,3\n4,-9223372036854775809,3\n", 2, "item id '-9223372036854775809' out of range"},
        {"1,2,3\n4,99999999999999999999999,3\n", 2,
         "item id '99999999999999999999999' out of range"},
        {"1,2,3\n4,5,x\n", 2, "bad rating 'x'"},
        {"1,2,3\n4,5,1e\n", 2, "bad rating '1e'"},
        {"1,2,3\n4,5,3.5.1\n", 2, "bad rating '3.5.1'"},
        {"1,2,3\n4,5,nan\n", 2, "rating 'nan' is not a finite number"},
        {"1,2,3\n4,5,-Inf\n", 2, "rating '-Inf' is not a finite number"},
        {"1,2,3\n4,5,infinity\n", 2, "rating 'infinity' is not a finite number"},
        {"1,2,3\n4,5,1e39\n", 2, "rating '1e39' out of range"},
        {"1,2,3\n4 5 3\n", 2,
         "inconsistent separator: a space after the user id, but the file uses commas"},
        {"1,2,3\n4,5\t3\n", 2,
         "inconsistent separator: a tab after the item id, but the file uses commas"},
        {"1,2,3\n4,5,3 7\n", 2,
         "inconsistent separator: a space after the rating, but the file uses commas"},
        {"1\t2\t3\n4 5\t3\n", 2,
         "inconsistent separator: a space after the user id, but the file uses tabs"},
        {"1\t2\t3\n4,5,3\n", 2,
         "inconsistent separator: a comma after the user id, but the file uses tabs"},
        {"1\t2\t3\n4\t5 ,3\n", 2,
         "inconsistent separator: a comma after the item id, but the file uses tabs"},
        {"1 2 3\n4,5,3\n", 2,
         "inconsistent separator: a comma after the user id, but the file uses spaces"},
        {"1 2 3\n4 5 3,0\n", 2,
         "inconsistent separator: a comma after the rating, but the file uses spaces"},
        /* only the first non-blank line can be a header */
        {"user,item,rating\nuser,item,rating\n", 2, "bad user id 'user'"},
        {"\n\n1,2,3\n\x01\x02,5,3\n", 4, "bad user id '?\?'"},
        {"1,2,3\n4,5,xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n", 2,
         "bad rating 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'"},
        {"1,2,3\n4,5,3\n6,7,8\n9,10,x", 4, "bad rating 'x'"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        expect_error(cases[c].text, &o, cases[c].line, cases[c].msg);

    /* a separator given in the options is the only one accepted */
    o.separator = ',';
    expect_error("1 2 3\n", &o, 1,
                 "inconsistent separator: a space after the user id, but the file uses commas");
    o.separator = '\t';
    expect_error("u,i,r\n1,2,3\n", &o, 2,
                 "inconsistent separator: a comma after the user id, but the file uses tabs");
}

/* Separators given in the options; spaces also accept tabs. */
static void test_explicit_separator(void **state)
{
    (void)state;
    loom_ratings_opts o = LOOM_RATINGS_OPTS_DEFAULT;
    o.separator = ' ';
    char *path = write_str("1\t2\t3\n4 5\t\t6\n");
    loom_ratings *r = read_ok(path, 0, 1, &o);
    assert_int_equal(r->n, 2);
    check_rating(r, 1, 4, 5, 6, 2);
    loom_ratings_free(r);
    free(path);

    /* a first line with a comma in a later field: detection says comma */
    path = write_str("1,2,3,a b\n4,5,6\n");
    r = read_ok(path, 0, 1, NULL);
    assert_int_equal(r->n, 2);
    loom_ratings_free(r);
    o.separator = '\t';
    expect_error("1,2,3,a b\n", &o, 1,
                 "inconsistent separator: a comma after the user id, but the file uses tabs");
    free(path);

    o.separator = ';';
    path = write_str("1;2;3\n");
    char err[256];
    r = (loom_ratings *)1;
    assert_int_equal(loom_ratings_read(path, 0, 1, &o, &r, err, sizeof err), LOOM_EINVAL);
    assert_null(r);
    free(path);
}

static void test_empty_files(void **state)
{
    (void)state;
    const char *texts[] = {"", "\n", "user,item,rating,timestamp\n", "\n  \r\n\t\n", "u i r"};
    for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
        char *path = write_str(texts[t]);
        for (int n = 1; n <= 3; n++) {
            for (int i = 0; i < n; i++) {
                loom_ratings *r = read_ok(path, i, n, NULL);
                assert_int_equal(r->n, 0);
                assert_int_equal(r->users, 0);
                assert_int_equal(r->items, 0);
                assert_int_equal(loom_ratings_user_index(r, 0), -1);
                loom_ratings_free(r);
            }
        }
        free(path);
    }
}

static void test_open_errors(void **state)
{
    (void)state;
    expect_missing("missing.csv");
    loom_ratings *r = (loom_ratings *)1;
    char err[512], want[512];

    assert_int_equal(loom_ratings_read(tmpdir, 0, 1, NULL, &r, err, sizeof err), LOOM_EINVAL);
    snprintf(want, sizeof want, "%s: cannot read: Is a directory", tmpdir);
    assert_string_equal(err, want);

    char *path = write_str("1 1 1\n");
    assert_int_equal(loom_ratings_read(path, 2, 2, NULL, &r, err, sizeof err), LOOM_EINVAL);
    assert_int_equal(loom_ratings_read(path, -1, 2, NULL, &r, err, sizeof err), LOOM_EINVAL);
    assert_int_equal(loom_ratings_read(path, 0, 0, NULL, &r, err, sizeof err), LOOM_EINVAL);
    assert_int_equal(loom_ratings_read(path, 0, 1, NULL, NULL, err, sizeof err), LOOM_EINVAL);
    assert_int_equal(loom_ratings_read(NULL, 0, 1, NULL, &r, NULL, 0), LOOM_EINVAL);
    loom_ratings_free(NULL);
    free(path);
}

/* skip_bad: malformed lines are dropped and counted, and give no ids, in
 * every share alike. */
static void test_skip_bad(void **state)
{
    (void)state;
    loom_ratings_opts o = LOOM_RATINGS_OPTS_DEFAULT;
    o.skip_bad = 1;
    const char *text = "u,i,r\n"
                       "1,10,1\n"
                       "2,20,x\n" /* bad rating: neither 2 nor 20 is an id */
                       "3,30\n"   /* too few fields */
                       "4 40 4\n" /* wrong separator */
                       "\n"
                       "1,20,2\n"
                       "5,99999999999999999999,5\n"
                       "6,60,nan\n"
                       "7,70,7";
    char *path = write_str(text);
    loom_ratings *r = read_ok(path, 0, 1, &o);
    assert_int_equal(r->n, 3);
    assert_int_equal(r->skipped, 5);
    assert_int_equal(r->users, 2);
    assert_int_equal(r->items, 3);
    check_rating(r, 0, 1, 10, 1, 2);
    check_rating(r, 1, 1, 20, 2, 7);
    check_rating(r, 2, 7, 70, 7, 10);
    assert_true(r->user_id[1] == 7 && r->item_id[1] == 20);
    loom_ratings_free(r);
    for (int n = 2; n <= 9; n++) {
        size_t got = 0, skipped = 0;
        for (int i = 0; i < n; i++) {
            r = read_ok(path, i, n, &o);
            got += r->n;
            skipped += r->skipped;
            assert_int_equal(r->users, 2);
            assert_int_equal(r->items, 3);
            loom_ratings_free(r);
        }
        assert_int_equal(got, 3);
        assert_int_equal(skipped, 5);
    }
    free(path);
}

/* A random ratings file of nlines lines after an optional header: ids in
 * small and large ranges, negative ones, ratings of several shapes, blank
 * lines, timestamps, "\r\n" ends, with or without a final newline. */
static char *random_text(size_t nlines, char sep, int header, int final_newline, size_t *rows)
{
    static const char *values[] = {"1", "0.5", "4.5", "3", "-2.25", "1e-3", "5.000001", "-0"};
    size_t cap = 64 * nlines + 64, len = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    const char *s = sep == ',' ? "," : sep == '\t' ? "\t" : " ";
    if (header) len += (size_t)sprintf(t + len, "user%sitem%srating\n", s, s);
    *rows = 0;
    for (size_t l = 0; l < nlines; l++) {
        if (rng() % 12 == 0) {
            if (rng() % 2) t[len++] = ' ';
        } else {
            long long u = (long long)(rng() % 40), i = (long long)(rng() % 100);
            if (rng() % 10 == 0) u = -u;
            if (rng() % 20 == 0) i = (long long)(rng() >> 2);
            len += (size_t)sprintf(t + len, "%lld%s%lld%s%s", u, s, i, s,
                                   values[rng() % (sizeof values / sizeof *values)]);
            if (rng() % 2) len += (size_t)sprintf(t + len, "%s%u", s, (unsigned)rng());
            ++*rows;
        }
        if (rng() % 7 == 0) t[len++] = '\r';
        if (l + 1 < nlines || final_newline) t[len++] = '\n';
    }
    t[len] = '\0';
    return t;
}

/* The shares of path, concatenated, are the single read; every share has
 * the same mapping. */
static void check_shares(const char *path, size_t size, int n, const loom_ratings *ref)
{
    size_t k = 0, bytes = 0, prev_first = 1;
    for (int s = 0; s < n; s++) {
        loom_ratings *r = read_ok(path, s, n, NULL);
        assert_int_equal(r->users, ref->users);
        assert_int_equal(r->items, ref->items);
        assert_memory_equal(r->user_id, ref->user_id, ref->users * sizeof *ref->user_id);
        assert_memory_equal(r->item_id, ref->item_id, ref->items * sizeof *ref->item_id);
        assert_true(r->first_line >= prev_first);
        prev_first = r->first_line;
        assert_true(k + r->n <= ref->n);
        if (r->n) {
            assert_memory_equal(r->user, ref->user + k, r->n * sizeof *r->user);
            assert_memory_equal(r->item, ref->item + k, r->n * sizeof *r->item);
            assert_memory_equal(r->rating, ref->rating + k, r->n * sizeof *r->rating);
            assert_memory_equal(r->line, ref->line + k, r->n * sizeof *r->line);
            assert_true(r->line[0] >= r->first_line);
        }
        k += r->n;
        bytes += r->bytes;
        loom_ratings_free(r);
    }
    assert_int_equal(k, ref->n);
    assert_int_equal(bytes, size);
}

static void test_sharding(void **state)
{
    (void)state;
    static const char seps[] = {',', '\t', ' '};
    for (int file = 0; file < 12; file++) {
        size_t nlines = file < 2 ? (size_t)file + 1 : 20 + (size_t)(rng() % 300), rows;
        char *text = random_text(nlines, seps[file % 3], file % 4 < 2, file % 2, &rows);
        size_t size = strlen(text);
        char *path = write_file(text, size);
        loom_ratings *ref = read_ok(path, 0, 1, NULL);
        assert_int_equal(ref->n, rows);
        for (size_t k = 1; k < ref->n; k++) assert_true(ref->line[k] > ref->line[k - 1]);
        for (size_t u = 1; u < ref->users; u++) assert_true(ref->user_id[u] > ref->user_id[u - 1]);
        for (size_t i = 1; i < ref->items; i++) assert_true(ref->item_id[i] > ref->item_id[i - 1]);
        for (int n = 1; n <= 7; n++) check_shares(path, size, n, ref);
        check_shares(path, size, (int)nlines + 5, ref); /* more shares than lines */
        loom_ratings_free(ref);
        free(path);
        free(text);
    }
}

/* An error names its absolute line and is reported by exactly one share;
 * the others read their lines, with the mapping of the good lines. */
static void test_error_lines_in_shares(void **state)
{
    (void)state;
    for (int file = 0; file < 6; file++) {
        size_t nlines = 30 + (size_t)(rng() % 100), rows;
        char *text = random_text(nlines, ',', 1, file % 2, &rows);
        /* Make one rating line bad: its user id starts with 'x'. */
        size_t line = 2 + nlines / 2 + (size_t)(rng() % (nlines / 2)), at = 1;
        char *p = text;
        for (; at < line; at++) p = strchr(p, '\n') + 1;
        while (*p != '-' && (*p < '0' || *p > '9')) { /* a blank line: the next one */
            p = strchr(p, '\n') + 1;
            line++;
        }
        *p = 'x';
        char *path = write_str(text);
        char want[512];
        snprintf(want, sizeof want, "%s:%zu: bad user id 'x", path, line);
        for (int n = 1; n <= 9; n++) {
            int failed = 0;
            for (int i = 0; i < n; i++) {
                loom_ratings *r = NULL;
                char err[512] = "";
                int rc = loom_ratings_read(path, i, n, NULL, &r, err, sizeof err);
                if (rc) {
                    assert_int_equal(rc, LOOM_EINVAL);
                    assert_memory_equal(err, want, strlen(want));
                    failed++;
                } else {
                    loom_ratings_free(r);
                }
            }
            assert_int_equal(failed, 1);
        }
        free(path);
        free(text);
    }
}

/* Ratings are exactly strtof()'s floats. */
static void test_values_match_strtof(void **state)
{
    (void)state;
    enum { N = 3000 };
    char(*text)[48] = malloc(N * sizeof *text);
    char *file = malloc(N * 64);
    assert_non_null(text);
    assert_non_null(file);
    size_t len = 0, n = 0;
    while (n < N) {
        switch (rng() % 3) {
        case 0: /* short decimals */
            sprintf(text[n], "%u.%0*u", (unsigned)(rng() % 6), 1 + (int)(rng() % 6),
                    (unsigned)(rng() % 100000));
            break;
        case 1: /* near a midpoint between two floats */
        {
            uint32_t bits = (uint32_t)(0x3f000000u + rng() % 0x01000000u);
            float f;
            memcpy(&f, &bits, sizeof f);
            sprintf(text[n], "%.16e", ((double)f + (double)nextafterf(f, INFINITY)) / 2);
            break;
        }
        default: /* long and exponent forms */
            sprintf(text[n], "%.*e", (int)(rng() % 20), (double)(rng() >> 11) * 0x1p-50);
            break;
        }
        len += (size_t)sprintf(file + len, "%zu\t7\t%s\n", n, text[n]);
        n++;
    }
    char *path = write_file(file, len);
    loom_ratings *r = read_ok(path, 0, 1, NULL);
    assert_int_equal(r->n, N);
    for (size_t i = 0; i < N; i++) {
        float want = strtof(text[i], NULL);
        if (memcmp(&r->rating[i], &want, sizeof want))
            fail_msg("'%s': read %a, strtof %a", text[i], (double)r->rating[i], (double)want);
    }
    loom_ratings_free(r);
    free(path);
    free(file);
    free(text);
}

/* MovieLens (ml-latest-small): 100836 ratings, 610 users, 9724 movies. */
static void test_movielens(void **state)
{
    (void)state;
    char path[4200];
    shared_file(path, sizeof path, "ml-latest-small/ratings.csv");
    loom_ratings *ref = read_ok(path, 0, 1, NULL);
    assert_int_equal(ref->n, 100836);
    assert_int_equal(ref->users, 610);
    assert_int_equal(ref->items, 9724);
    assert_int_equal(ref->first_line, 2);
    /* the first line: 1,1,4.0,964982703 */
    check_rating(ref, 0, 1, 1, 4.0f, 2);
    assert_int_equal(ref->line[ref->n - 1], 100837);
    double sum = 0;
    for (size_t k = 0; k < ref->n; k++) {
        assert_true(ref->rating[k] >= 0.5f && ref->rating[k] <= 5.0f);
        sum += ref->rating[k];
    }
    assert_true(fabs(sum / (double)ref->n - 3.5016) < 1e-3);
    check_shares(path, 2483723, 4, ref);
    loom_ratings_free(ref);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_id_order),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_explicit_separator),
        cmocka_unit_test(test_empty_files),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_skip_bad),
        cmocka_unit_test(test_sharding),
        cmocka_unit_test(test_error_lines_in_shares),
        cmocka_unit_test(test_values_match_strtof),
    };
    const struct CMUnitTest data_tests[] = {
        cmocka_unit_test(test_movielens),
    };
    return READER_TESTS_MAIN(argc, argv, tests, data_tests, "ml-latest-small/ratings.csv");
}
