/* last_error: loom_last_error() holds the sentence of the calling thread's last logged
 * error (what the Python package attaches to a LoomError), warnings leave it alone,
 * loom_clear_last_error() empties it, other threads' errors do not show, and a sentence
 * longer than the buffer is cut, still terminated. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/log.h"
#include "loom/error.h"

static void test_records_errors_not_warnings(void **state)
{
    (void)state;
    loom_clear_last_error();
    assert_string_equal(loom_last_error(), "");
    log_error("table \"%s\": %s", "w", "bad");
    assert_string_equal(loom_last_error(), "table \"w\": bad");
    log_warn("only a warning");
    assert_string_equal(loom_last_error(), "table \"w\": bad");
    log_error("second %d", 2);
    assert_string_equal(loom_last_error(), "second 2");
    loom_clear_last_error();
    assert_string_equal(loom_last_error(), "");
}

static void *log_other(void *arg)
{
    (void)arg;
    log_error("from another thread");
    return strcmp(loom_last_error(), "from another thread") ? (void *)1 : NULL;
}

static void test_per_thread(void **state)
{
    (void)state;
    loom_clear_last_error();
    log_error("mine");
    pthread_t t;
    void *bad;
    assert_int_equal(pthread_create(&t, NULL, log_other, NULL), 0);
    assert_int_equal(pthread_join(t, &bad), 0);
    assert_null(bad);
    assert_string_equal(loom_last_error(), "mine");
}

static void test_long_sentence_cut(void **state)
{
    (void)state;
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    log_error("%s", big);
    size_t len = strlen(loom_last_error());
    assert_true(len > 500 && len < sizeof big - 1);
    assert_memory_equal(loom_last_error(), big, len);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_errors_not_warnings),
        cmocka_unit_test(test_per_thread),
        cmocka_unit_test(test_long_sentence_cut),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
