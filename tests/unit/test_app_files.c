/* app_files: the applications' checks of the files a user names
 * (apps/common/files.c) and their bounded getline, on files in a temporary
 * directory: what is refused and why, that a check leaves no file behind,
 * changes none and does not disturb a FIFO's reader, and that a line one byte
 * over the bound stops the read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/files.h"

static char dir[] = "/tmp/loom-app-files.XXXXXX";

static void path_in_dir(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

static void write_text(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* err must hold want. */
static void assert_says(const char *err, const char *want)
{
    if (!strstr(err, want)) fail_msg("'%s' lacks '%s'", err, want);
}

static void test_check_output(void **state)
{
    (void)state;
    char path[256], err[512];
    /* A new file can be created: yes, and it is not left behind. */
    path_in_dir(path, sizeof path, "new");
    assert_int_equal(app_check_output(path, err, sizeof err), 0);
    assert_int_not_equal(access(path, F_OK), 0);
    /* An existing file is neither truncated nor removed. */
    path_in_dir(path, sizeof path, "old");
    write_text(path, "kept\n", 5);
    assert_int_equal(app_check_output(path, err, sizeof err), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 5);
    /* Refused with the reason. */
    assert_int_equal(app_check_output(dir, err, sizeof err), -1);
    assert_says(err, "Is a directory");
    path_in_dir(path, sizeof path, "none/new");
    assert_int_equal(app_check_output(path, err, sizeof err), -1);
    assert_says(err, "cannot write ");
    assert_says(err, "none/new: No such file or directory");
    path_in_dir(path, sizeof path, "old/new");
    assert_int_equal(app_check_output(path, err, sizeof err), -1);
    assert_says(err, "Not a directory");
}

/* A FIFO's reader must not see a writer come and go (it would read the end
 * of its input): on Linux, poll() reports POLLHUP to a reader once a writer
 * has opened and closed the FIFO, and nothing before. */
static void test_check_fifo(void **state)
{
    (void)state;
    char path[256], err[512];
    path_in_dir(path, sizeof path, "fifo");
    assert_int_equal(mkfifo(path, 0600), 0);
    int reader = open(path, O_RDONLY | O_NONBLOCK);
    assert_true(reader >= 0);
    assert_int_equal(app_check_output(path, err, sizeof err), 0);
    assert_int_equal(app_check_input(path, err, sizeof err), 0);
    struct pollfd p = {.fd = reader, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 0), 0);
    /* The test itself can tell: a writer that comes and goes is seen. */
    int writer = open(path, O_WRONLY | O_NONBLOCK);
    assert_true(writer >= 0);
    close(writer);
    assert_int_equal(poll(&p, 1, 0), 1);
    assert_true(p.revents & POLLHUP);
    close(reader);
}

static void test_check_input(void **state)
{
    (void)state;
    char path[256], err[512];
    path_in_dir(path, sizeof path, "in");
    write_text(path, "x\n", 2);
    assert_int_equal(app_check_input(path, err, sizeof err), 0);
    path_in_dir(path, sizeof path, "absent");
    assert_int_equal(app_check_input(path, err, sizeof err), -1);
    assert_says(err, "cannot read ");
    assert_says(err, "absent: No such file or directory");
    assert_int_equal(app_check_input(dir, err, sizeof err), -1);
    assert_says(err, "Is a directory");
}

static void test_getline_bounded(void **state)
{
    (void)state;
    char path[256];
    path_in_dir(path, sizeof path, "lines");
    /* "abcd\n", "ab\0d" without a newline at the end of the file. */
    write_text(path, "abcd\nab\0d", 9);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *line = NULL;
    size_t cap = 0;
    assert_int_equal(app_getline(&line, &cap, 4, f), 5);
    assert_memory_equal(line, "abcd\n", 6);
    assert_int_equal(app_getline(&line, &cap, 4, f), 4);
    assert_memory_equal(line, "ab\0d", 5);
    assert_int_equal(app_getline(&line, &cap, 4, f), -1);
    assert_false(ferror(f));
    fclose(f);

    /* One byte over the bound: refused after reading max + 1 bytes, no more. */
    write_text(path, "abcde\nxy\n", 9);
    f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(app_getline(&line, &cap, 4, f), APP_LINE_TOO_LONG);
    assert_int_equal(ftell(f), 5);
    assert_true(cap <= 4 + 2);
    fclose(f);

    /* /dev/zero: refused at the bound, in a buffer no larger. */
    f = fopen("/dev/zero", "rb");
    assert_non_null(f);
    assert_int_equal(app_getline(&line, &cap, 1 << 20, f), APP_LINE_TOO_LONG);
    assert_true(cap <= (1 << 20) + 2);
    fclose(f);
    free(line);
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    static const char *const names[] = {"old", "in", "lines", "fifo"};
    char path[256];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        path_in_dir(path, sizeof path, names[i]);
        unlink(path);
    }
    return rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_output),
        cmocka_unit_test(test_check_input),
        cmocka_unit_test(test_check_fifo),
        cmocka_unit_test(test_getline_bounded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
