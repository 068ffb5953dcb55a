/* log: see log.h. One fprintf per line, so lines of concurrent threads do not interleave.
 * Each thread also keeps the sentence of its last error, for loom_last_error().
 * With LOOM_LOG_TIME=1 each line carries the wall-clock time it was written, so
 * that the lines of several processes can be put on one time line (the
 * failover benchmark measures from a kill to what the survivors logged). */
#include "core/log.h"
#include "loom/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

static _Atomic int current_level = LOG_ERROR;
static _Atomic int with_time;
static _Thread_local char thread_tag[48];
static _Thread_local char last_error[1024];

void log_set_level(int level)
{
    current_level = level;
}

void log_set_time(int on)
{
    with_time = on;
}

int log_level(void)
{
    return current_level;
}

void log_set_tag(const char *tag)
{
    snprintf(thread_tag, sizeof thread_tag, "%s", tag ? tag : "");
}

static void log_line(const char *name, const char *fmt, va_list ap)
{
    char line[sizeof last_error];
    vsnprintf(line, sizeof line, fmt, ap);
    if (!strcmp(name, "error")) memcpy(last_error, line, sizeof line);
    char stamp[32] = "";
    if (with_time) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        snprintf(stamp, sizeof stamp, "%lld.%03ld ", (long long)now.tv_sec, now.tv_nsec / 1000000L);
    }
    if (thread_tag[0])
        fprintf(stderr, "loom[%s] %s%s: %s\n", thread_tag, stamp, name, line);
    else
        fprintf(stderr, "loom %s%s: %s\n", stamp, name, line);
}

void log_msg(int level, const char *fmt, ...)
{
    if (level > current_level) return;
    static const char *const names[] = {"error", "info", "debug"};
    va_list ap;
    va_start(ap, fmt);
    log_line(names[level], fmt, ap);
    va_end(ap);
}

void log_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_line("warning", fmt, ap);
    va_end(ap);
}

void log_set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
}

const char *loom_last_error(void)
{
    return last_error;
}

void loom_clear_last_error(void)
{
    last_error[0] = '\0';
}
