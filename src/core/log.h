/* log: one-line diagnostics on stderr.
 *
 * Lines look like "loom[worker 1] error: ...": the prefix says which node
 * spoke, which matters when a whole job shares one terminal. The level is
 * process-wide (LOOM_VERBOSE or loom_config.verbose); errors always print.
 * LOOM_LOG_TIME=1 puts the wall-clock time (seconds since the epoch, to the
 * millisecond) after the prefix: "loom[worker 1] 1795500000.123 error: ...". */
#ifndef LOOM_CORE_LOG_H
#define LOOM_CORE_LOG_H

/* Errors (and log_warn) always print; info and debug with LOOM_VERBOSE 1 and 2. */
enum { LOG_ERROR = 0, LOG_INFO = 1, LOG_DEBUG = 2 };

void log_set_level(int level);
int log_level(void);
/* Whether lines carry the wall-clock time (LOOM_LOG_TIME; process-wide). */
void log_set_time(int on);
/* Sets the "role rank" tag of this thread's lines (nodes may share a process). */
void log_set_tag(const char *tag);

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void log_msg(int level, const char *fmt, ...);
/* Same, named "warning" in the line. */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
void log_warn(const char *fmt, ...);

/* Record an error sentence for loom_last_error() without printing it (for
 * library calls whose caller decides what to print, such as a tool's check). */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
void log_set_error(const char *fmt, ...);

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
