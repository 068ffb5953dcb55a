/* Datasets: reading training data, each worker its own share of one file.
 *
 * A LIBSVM file ("label idx:val idx:val ...", one example per line) is read
 * into compressed sparse rows. Several workers can read the same file: worker
 * i of n takes the lines that start in the i-th of n equal byte ranges, so no
 * one has to split the data beforehand and every line is read by exactly one
 * worker.
 *
 *     loom_libsvm_opts o = LOOM_LIBSVM_OPTS_DEFAULT;
 *     loom_dataset *d;
 *     char err[512];
 *     if (loom_libsvm_read("train.svm", rank, nworkers, &o, &d, err, sizeof err))
 *         { fprintf(stderr, "%s\n", err); exit(1); }    // "train.svm:17: bad feature value 'x'"
 *
 * Errors name the file and the line (counted from the start of the file, also
 * for a worker reading from the middle), and what is wrong. */
#ifndef LOOM_DATA_H
#define LOOM_DATA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Compressed sparse rows: example i has features idx[row[i] .. row[i+1]) with
 * values val[...], and label label[i]. Feature ids are 0-based in memory. */
typedef struct loom_dataset {
    size_t rows;
    size_t nnz;
    double *label;        /* rows labels; classification labels as +1 / -1 */
    size_t *row;          /* rows + 1 offsets into idx/val */
    uint64_t *idx;        /* nnz feature ids, ascending within a row */
    float *val;           /* nnz values */
    uint64_t max_feature; /* 1 + the largest feature id seen (0 if none) */
    size_t skipped;       /* malformed lines skipped (only with skip_bad) */
    size_t first_line;    /* 1-based line number of this share's first line */
    uint64_t bytes;       /* bytes of the file this share covered */
} loom_dataset;

typedef enum {
    LOOM_IDS_AUTO = 0,  /* 1-based, unless an id 0 appears anywhere in the file */
    LOOM_IDS_ONE_BASED, /* LIBSVM's convention: ids start at 1 (stored as id - 1) */
    LOOM_IDS_ZERO_BASED /* ids start at 0 */
} loom_id_base;

typedef enum {
    LOOM_LABELS_CLASS = 0, /* binary: +1/-1 or 1/0, stored as +1/-1 */
    LOOM_LABELS_REAL       /* regression: any real number, stored as is */
} loom_label_kind;

typedef struct loom_libsvm_opts {
    loom_id_base ids; /* AUTO checks the whole file, so every worker decides alike */
    loom_label_kind labels;
    uint64_t max_features; /* 0: no limit; otherwise ids (0-based) must be below it */
    int skip_bad;          /* 1: skip malformed lines and count them instead of failing */
} loom_libsvm_opts;

#define LOOM_LIBSVM_OPTS_DEFAULT                                                                   \
    {                                                                                              \
        LOOM_IDS_AUTO, LOOM_LABELS_CLASS, 0, 0                                                     \
    }

/* Read share `shard` of `nshards` of the file at path. Returns 0, or an error
 * code with a "FILE:LINE: what is wrong" sentence in err. */
int loom_libsvm_read(const char *path, int shard, int nshards, const loom_libsvm_opts *opts,
                     loom_dataset **out, char *err, size_t errlen);
void loom_dataset_free(loom_dataset *d);

#ifdef __cplusplus
}
#endif
#endif
