/* test_data: where the tests find the shared datasets (a9a, ap, MovieLens),
 * which are never committed: $LOOM_SHARED_DATA, else ../shared/data next to
 * the source tree. A test that needs one and does not find it prints
 * "skipped: ... not found" and exits 77, which CTest counts as skipped
 * (READER_TESTS_MAIN in test_files.h). */
#ifndef LOOM_TESTS_TEST_DATA_H
#define LOOM_TESTS_TEST_DATA_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The data directory, into buf. This file is tests/ in the source tree. */
static inline const char *shared_data(char *buf, size_t len)
{
    const char *env = getenv("LOOM_SHARED_DATA");
    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return buf;
    }
    snprintf(buf, len, "%s", __FILE__);
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(buf, len, ".");
    strncat(buf, "/../../shared/data", len - strlen(buf) - 1);
    return buf;
}

/* The path of `name` under the data directory, into buf. */
static inline const char *shared_file(char *buf, size_t len, const char *name)
{
    char dir[4096];
    snprintf(buf, len, "%s/%s", shared_data(dir, sizeof dir), name);
    return buf;
}

#endif
