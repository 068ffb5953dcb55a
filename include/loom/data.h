/* Datasets: reading training data, each worker its own share of one file.
 *
 * Three kinds of file: LIBSVM rows (loom_dataset), ratings (loom_ratings)
 * and bag-of-words corpora (loom_corpus); all share the conventions below.
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

/* ---- ratings: "user item rating [timestamp]" ----
 *
 * One rating per line, fields separated by tabs, commas or spaces (MovieLens
 * u.data and ratings.csv both work); an optional header line (a first line
 * whose first field is not a number) is skipped; a fourth field (timestamp)
 * and anything after it is ignored. User and item ids are integers (int64,
 * negative ones too); they are remapped to dense indices 0..users-1 and
 * 0..items-1 in ascending order of id, over the whole file (every worker
 * scans every line's ids, so all workers agree on the mapping without
 * talking; a malformed line gives no ids). Details: docs/DATA.md. */
typedef struct loom_ratings {
    size_t n;          /* ratings in this share */
    uint32_t *user;    /* n dense user indices */
    uint32_t *item;    /* n dense item indices */
    float *rating;     /* n ratings (finite) */
    uint64_t *line;    /* n 1-based line numbers in the file (seeded splits use them) */
    size_t users;      /* distinct user ids in the whole file */
    size_t items;      /* distinct item ids in the whole file */
    int64_t *user_id;  /* users ids, ascending: user_id[u] is the file's id of index u */
    int64_t *item_id;  /* items ids, ascending */
    size_t skipped;    /* malformed lines skipped (only with skip_bad) */
    size_t first_line; /* 1-based line number of this share's first line */
    uint64_t bytes;    /* bytes of the file this share covered */
} loom_ratings;

typedef struct loom_ratings_opts {
    char separator; /* 0: detect from the first data line; or '\t', ',', ' ' */
    int skip_bad;   /* 1: skip malformed lines and count them instead of failing */
} loom_ratings_opts;

#define LOOM_RATINGS_OPTS_DEFAULT                                                                  \
    {                                                                                              \
        0, 0                                                                                       \
    }

/* Read share `shard` of `nshards` of a ratings file. Returns 0, or an error
 * code with a "FILE:LINE: what is wrong" sentence in err. */
int loom_ratings_read(const char *path, int shard, int nshards, const loom_ratings_opts *opts,
                      loom_ratings **out, char *err, size_t errlen);
void loom_ratings_free(loom_ratings *r);
/* Dense index of a file id in r's mapping, or -1 if the id is not in it. */
int64_t loom_ratings_user_index(const loom_ratings *r, int64_t id);
int64_t loom_ratings_item_index(const loom_ratings *r, int64_t id);

/* ---- bag-of-words corpora ----
 *
 * LDA-C: one document per line, "N id:count id:count ..." with N the number
 * of pairs and word ids 0-based (../shared/data/ap/ap.dat).
 * UCI docword: three header lines (documents D, vocabulary W, pairs NNZ),
 * then "doc word count" lines grouped by document, both ids 1-based (stored
 * 0-based). A share holds whole documents: a document belongs to the share
 * its first line starts in. Document first_doc + i of the file is document i
 * of the share: LDA-C counts non-blank lines (blank lines are no documents;
 * with skip_bad a malformed line stays as an empty one); UCI numbers them by
 * id, ids the file skips being empty documents, up to D. UCI's NNZ is checked
 * when the file is read as one share; a share of several gives it (header_nnz)
 * for the readers together to check the sum of their nnz. Details: docs/DATA.md. */
typedef enum { LOOM_BOW_AUTO = 0, LOOM_BOW_LDAC, LOOM_BOW_UCI } loom_bow_format;

typedef struct loom_corpus {
    size_t docs;            /* documents in this share (LDA-C: empty lines "0" count) */
    size_t nnz;             /* (document, word) pairs */
    uint64_t tokens;        /* sum of the counts */
    size_t *doc;            /* docs + 1 offsets into word/count */
    uint32_t *word;         /* nnz 0-based word ids */
    uint32_t *count;        /* nnz counts, >= 1 */
    uint64_t vocab;         /* UCI: W from the header; LDA-C: 1 + the largest id in this share */
    uint64_t first_doc;     /* 0-based index in the file of this share's first document */
    loom_bow_format format; /* what was read (never AUTO) */
    size_t skipped;         /* malformed lines skipped (only with skip_bad) */
    size_t first_line;      /* 1-based line number of this share's first line */
    uint64_t bytes;         /* bytes of the file this share covered */
    uint64_t header_nnz;    /* UCI: NNZ, the header's count of pairs in the file; LDA-C: 0 */
    size_t header_nnz_line; /* UCI: the line of NNZ; LDA-C: 0 */
} loom_corpus;

typedef struct loom_bow_opts {
    loom_bow_format format; /* AUTO: UCI if the first three lines are single integers */
    int skip_bad;
} loom_bow_opts;

#define LOOM_BOW_OPTS_DEFAULT                                                                      \
    {                                                                                              \
        LOOM_BOW_AUTO, 0                                                                           \
    }

int loom_bow_read(const char *path, int shard, int nshards, const loom_bow_opts *opts,
                  loom_corpus **out, char *err, size_t errlen);
void loom_corpus_free(loom_corpus *c);

#ifdef __cplusplus
}
#endif
#endif
