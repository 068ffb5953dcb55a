/* files: what the applications check of the files a user names.
 *
 *   - before a job starts, that its input files can be read and its output
 *     files (--model-out, --metrics) written, so a run is never lost at its
 *     end to a path that was wrong from the start;
 *   - a bounded getline() for the model loaders: a model file's lines have a
 *     known longest length, and a loader given /dev/zero, a FIFO or a huge
 *     binary file must fail on its first line rather than read until memory
 *     runs out;
 *   - the output file of gen and predict ("-": standard output), which a
 *     failed write never leaves half-written behind.
 *
 * Messages name the file and the reason (strerror). */
#ifndef LOOM_APPS_COMMON_FILES_H
#define LOOM_APPS_COMMON_FILES_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* 0 if path can be opened for reading (a FIFO: has read permission) and is
 * not a directory; otherwise -1 with "cannot read PATH: <reason>" in err. */
int app_check_input(const char *path, char *err, size_t errlen);

/* 0 if path can be written: an existing file (not a directory) opens for
 * writing (a FIFO: has write permission), or a new one can be created in its
 * directory. Nothing is truncated, and a file created to find out is removed
 * again. Otherwise -1 with "cannot write PATH: <reason>" in err. */
int app_check_output(const char *path, char *err, size_t errlen);

/* Both checks on a job's files: --train and --test read, --model-out and
 * --metrics written. 0, or -1 with the first problem in err. */
struct app_job;
int app_check_job_files(const struct app_job *j, char *err, size_t errlen);

/* app_getline's failures besides the end of the file. */
#define APP_LINE_TOO_LONG  (-2)
#define APP_LINE_NO_MEMORY (-3)

/* getline() for a file whose lines are at most max bytes long (not counting
 * the newline): the next line, with its newline if it has one, in *line
 * (grown as needed, NUL-terminated) and its length returned; -1 at the end of
 * the file or on a read error (ferror tells), APP_LINE_TOO_LONG as soon as
 * more than max bytes come without a newline, APP_LINE_NO_MEMORY. */
ssize_t app_getline(char **line, size_t *cap, size_t max, FILE *f);

/* An output file a command writes: path "-" is standard output. */
typedef struct app_out {
    FILE *f;
    const char *path;
    int regular; /* only a regular file is removed after a failure: never /dev/full or a FIFO */
} app_out;

/* Opens path for writing: 0, or 1 after "CMD: PATH: cannot create: <reason>"
 * on standard error. */
int app_out_open(app_out *o, const char *cmd, const char *path);

/* "standard output" or the path: how messages name the output. */
const char *app_out_name(const app_out *o);

/* Closes the output (standard output is flushed, not closed; a full disk may
 * only show there). failed: the caller's writing failed and was reported.
 * If it did, or a write or the close failed ("CMD: NAME: write failed:
 * <reason>" on standard error), a regular file is removed and 1 returned;
 * otherwise 0. */
int app_out_close(app_out *o, const char *cmd, int failed);

#endif
