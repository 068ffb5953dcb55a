/* modelfile: writing and reading the text model files of lr, lasso, mlr and
 * svm.
 *
 * All write "MAGIC VERSION dim=D nnz=K NAME=X ...", then one "id value" line per
 * stored entry of a sparse vector, ids ascending, %.17g. The reader trusts
 * nothing: lines are bounded (so /dev/zero or a binary file fails on its first
 * line), must end in a newline (a truncated file can end in a line that still
 * parses: "0.12" of "0.1234") and hold no NUL byte, and every problem is
 * reported as "FILE:LINE: what is wrong". */
#ifndef LOOM_APPS_COMMON_MODELFILE_H
#define LOOM_APPS_COMMON_MODELFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/app.h"

/* The longest line: a header or "<id> <value>" is under 100 bytes; the rest is
 * room for numbers written by hand. */
#define APP_MODEL_LINE_MAX 1024

typedef struct app_model_reader {
    FILE *f;
    const char *path;
    const char *kind; /* "LR", "Lasso": in "not a Loom <kind> model" */
    char *line;       /* the current line, without its '\n' */
    size_t cap;
    uint64_t lineno;
    char *err;
    size_t errlen;
} app_model_reader;

/* A number of the header, "NAME=X" after nnz: lr's bias, lasso's lambda and
 * intercept. A field joins a format at a version (since); the reader of an older
 * file leaves its value as the caller set it. */
typedef struct app_model_field {
    const char *name;     /* in the file: "bias" */
    const char *the_name; /* in messages: "the bias" */
    unsigned since;       /* the first version whose header has it */
    double value;         /* what is written; what was read */
} app_model_field;

/* Writes the file: the header "MAGIC VERSION dim=D nnz=K" and every field of
 * that version, then every entry of vec[0..dim) that is not +0.0 (-0.0 is kept,
 * so the round trip is exact down to the sign of zero). Refuses what the reader
 * would refuse (a value that is not finite), so every saved file loads; a failed
 * write removes a half-written regular file. 0, or -1 with the reason in err. */
int app_model_save(const char *path, const char *magic, unsigned version,
                   const app_model_field *fields, size_t nfields, const double *vec, uint64_t dim,
                   const char *noun, char *err, size_t errlen);

/* Opens path for reading: 0, or -1 with "PATH: cannot open: <reason>" in err. */
int app_model_open(app_model_reader *r, const char *path, const char *kind, char *err,
                   size_t errlen);
void app_model_close(app_model_reader *r);

/* "FILE:LINE: " and the message into err; -1. */
int app_model_bad_line(app_model_reader *r, const char *fmt, ...) APP_PRINTF_LIKE(2, 3);

/* The next line into r->line: 1 if read, 0 at the end of the file, -1 on
 * error (reported). */
int app_model_next_line(app_model_reader *r);

/* "MAGIC V dim=D nnz=K NAME=X ...", V from oldest to newest, then the fields
 * of version V in order, each finite; nnz <= dim. 0, or -1 (reported). */
int app_model_read_header(app_model_reader *r, const char *magic, unsigned oldest, unsigned newest,
                          app_model_field *fields, size_t nfields, uint64_t *dim, uint64_t *nnz);

/* nnz lines "id value", ids ascending and below dim, values finite, into
 * x[id]; then the end of the file. noun/nouns name a value in messages
 * ("weight"/"weights"). 0, or -1 (reported). */
int app_model_read_sparse(app_model_reader *r, uint64_t nnz, uint64_t dim, double *x,
                          const char *noun, const char *nouns);

#endif
