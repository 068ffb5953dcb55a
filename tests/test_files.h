/* test_files: what the dataset readers' unit tests (test_libsvm.c,
 * test_ratings.c, test_bow.c) share: one temporary directory (mkdtemp) for
 * the whole run, small files written into it and read back, and checks of
 * the readers' results and messages.
 *
 * Before including it, a test file defines TEST_FILES_DIR, the mkdtemp()
 * template of its directory ("/tmp/loom-NAME-XXXXXX"), and TEST_FILES_EXT,
 * the ending of its files (".txt"); it includes cmocka.h first. Its files are
 * DIR/f0EXT, DIR/f1EXT, ...; setup() and teardown() are the group's fixtures,
 * teardown() removing every file and the directory. READER_TESTS_MAIN() is
 * the test's main(), TEST_READER() defines the checks of one reader. */
#ifndef LOOM_TESTS_TEST_FILES_H
#define LOOM_TESTS_TEST_FILES_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loom/error.h"
#include "test_data.h"

static char tmpdir[] = TEST_FILES_DIR;
static int nfiles;

/* The path of file i, into buf. */
static inline char *file_path(char *buf, size_t len, int i)
{
    snprintf(buf, len, "%s/f%d%s", tmpdir, i, TEST_FILES_EXT);
    return buf;
}

/* A new file in the temporary directory holding len bytes of text; its path,
 * for free(). */
static inline char *write_file(const char *text, size_t len)
{
    size_t n = strlen(tmpdir) + 32;
    char *path = malloc(n);
    assert_non_null(path);
    file_path(path, n, nfiles++);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}

static inline char *write_str(const char *text)
{
    return write_file(text, strlen(text));
}

static inline int setup(void **state)
{
    (void)state;
    return mkdtemp(tmpdir) ? 0 : -1;
}

static inline int teardown(void **state)
{
    (void)state;
    char path[64];
    for (int i = 0; i < nfiles; i++) unlink(file_path(path, sizeof path, i));
    return rmdir(tmpdir);
}

/* The main() of a reader test. Without arguments it runs `tests`, which need
 * nothing; with --data it runs `data_tests` instead, which read the shared
 * datasets named in `need` (test_data.h), or, when one is absent, says which
 * and exits 77 without running any. CTest runs the two halves as two tests,
 * the second with SKIP_RETURN_CODE 77 (tests/CMakeLists.txt): a missing
 * dataset never hides the cases that need none, and counts as a skip, which
 * scripts/test.sh reports, instead of as a pass. */
static inline int reader_tests_main(int argc, char **argv, const char *group,
                                    const struct CMUnitTest *tests, size_t ntests,
                                    const struct CMUnitTest *data_tests, size_t ndata,
                                    const char *const *need)
{
    if (argc == 1) return _cmocka_run_group_tests(group, tests, ntests, setup, teardown);
    if (argc != 2 || strcmp(argv[1], "--data")) {
        fprintf(stderr, "usage: %s [--data]\n", argv[0]);
        return 2;
    }
    for (; *need; need++) {
        char path[4200];
        if (access(shared_file(path, sizeof path, *need), R_OK)) {
            printf("skipped: %s not found (the shared datasets are not part of a clone)\n", path);
            return 77;
        }
    }
    return _cmocka_run_group_tests(group, data_tests, ndata, setup, teardown);
}

/* READER_TESTS_MAIN(argc, argv, tests, data_tests, "dir/file", ...): the
 * above with the arrays' lengths and the datasets as a list. */
#define READER_TESTS_MAIN(argc, argv, tests, data_tests, ...)                                      \
    reader_tests_main(argc, argv, #tests, tests, sizeof tests / sizeof *tests, data_tests,         \
                      sizeof data_tests / sizeof *data_tests,                                      \
                      (const char *const[]){__VA_ARGS__, NULL})

/* The checks of a reader `int READ(path, shard, nshards, const OPTS *, TYPE
 * **out, err, errlen)` (loom/data.h), as three functions:
 *   TYPE *READ_OK(path, shard, nshards, const OPTS *o): reads the share, which
 *       must succeed (else the test fails with the message);
 *   EXPECT_ERROR(text, const OPTS *o, line, msg): reads text (as the whole
 *       file, one share), which must fail with LOOM_EINVAL, no result and the
 *       message exactly "PATH:line: msg";
 *   EXPECT_MISSING(name): reading name in the temporary directory, which does
 *       not exist, fails with LOOM_ENOTFOUND, no result and the message
 *       "PATH: cannot open: No such file or directory". */
#define TEST_READER(TYPE, OPTS, READ, READ_OK, EXPECT_ERROR, EXPECT_MISSING)                       \
    static inline TYPE *READ_OK(const char *path, int shard, int nshards, const OPTS *o)           \
    {                                                                                              \
        TYPE *out = NULL;                                                                          \
        char err[512] = "";                                                                        \
        int rc = READ(path, shard, nshards, o, &out, err, sizeof err);                             \
        if (rc) fail_msg("share %d/%d of %s: %s", shard, nshards, path, err);                      \
        assert_non_null(out);                                                                      \
        return out;                                                                                \
    }                                                                                              \
                                                                                                   \
    static inline void EXPECT_ERROR(const char *text, const OPTS *o, size_t line, const char *msg) \
    {                                                                                              \
        char *path = write_str(text);                                                              \
        TYPE *out = (TYPE *)1;                                                                     \
        char err[512] = "", want[768];                                                             \
        int rc = READ(path, 0, 1, o, &out, err, sizeof err);                                       \
        snprintf(want, sizeof want, "%s:%zu: %s", path, line, msg);                                \
        if (rc != LOOM_EINVAL) fail_msg("'%s': rc %d, want an error: %s", text, rc, msg);          \
        assert_null(out);                                                                          \
        assert_string_equal(err, want);                                                            \
        free(path);                                                                                \
    }                                                                                              \
                                                                                                   \
    static inline void EXPECT_MISSING(const char *name)                                            \
    {                                                                                              \
        TYPE *out = (TYPE *)1;                                                                     \
        char err[512], want[512];                                                                  \
        snprintf(want, sizeof want, "%s/%s", tmpdir, name);                                        \
        assert_int_equal(READ(want, 0, 1, NULL, &out, err, sizeof err), LOOM_ENOTFOUND);           \
        assert_null(out);                                                                          \
        strcat(want, ": cannot open: No such file or directory");                                  \
        assert_string_equal(err, want);                                                            \
    }

#endif
