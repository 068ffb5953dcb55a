/* Distributed arrays: the data a parallel loop runs over (Orion's DistArrays,
 * wei-thesis-bosen-orion.txt 3.4; docs/LOOPS.md, "Distributed arrays").
 *
 * A darray is an n-dimensional array (up to LOOM_DARRAY_MAX_DIMS dimensions)
 * whose elements are each `width` values (1 by default; more: an array of
 * rows, e.g. a factor's rows W(i, *)) of one type (doubles by default;
 * floats, int32 or int64, e.g. a corpus's word ids or a count that must stay
 * exact past 2^53), spread over the workers of a job. It is
 *
 *   sparse  a set of elements, each an index tuple and a value, e.g. the
 *           ratings (user, item) -> rating of matrix factorisation or the
 *           tokens (document, position) -> word of a corpus; the elements are
 *           kept as given, several at one index included;
 *   dense   every index of its box [0, e0) x [0, e1) x ... has a value.
 *
 * The workers split it by ranges of one dimension, `part_dim`: worker w holds
 * every element whose coordinate in that dimension lies in
 * [bounds[w], bounds[w + 1]). A sparse array's ranges are balanced by a
 * histogram of the elements' coordinates (Orion 3.7: ratings files are far
 * from uniform), a dense array's cut its rows evenly (part_dim 0). A worker's
 * elements are sorted by index (lexicographic; elements at one index by their
 * values, NaNs last), so what it holds never depends on which worker read or
 * made which element.
 *
 * Making one is collective: every worker of the job calls the same
 * constructor with the same options, in the same order as its other darrays,
 * loops (loom/loop.h) and engines (loom/sched.h); so is every call below
 * marked "collective". The workers meet through small tables on the servers
 * and worker-to-worker messages, so the job needs at least one server. When
 * one worker fails (an unreadable part, an index outside the extents, a
 * parser's refusal) every worker returns an error: the failing one says why
 * in err, the others that worker R failed.
 *
 * Arrays of rows that a loop body reads and writes (W(i, *), H(j, *)) are
 * loom/loop.h's loom_loop_array, kept in tables; a darray is what a loop
 * iterates over: loom_darray_local() gives a worker's elements in the form
 * loom_loop_opts wants (indices, values, n).
 *
 * Errors are int codes (loom/error.h); err, when given, gets a sentence. */
#ifndef LOOM_DARRAY_H
#define LOOM_DARRAY_H

#include <stddef.h>
#include <stdint.h>

#include "node.h"
#include "table.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_DARRAY_MAX_DIMS  4
#define LOOM_DARRAY_MAX_WIDTH 65536

typedef struct loom_darray loom_darray;

/* An element's value type. Every call that passes values passes them in the
 * array's type (`const void *values`: width doubles, floats, int32 or int64
 * in host order). Doubles are 0, so that options left zero mean doubles;
 * hence a type of its own rather than loom_type, whose 0 is LOOM_F32. */
typedef enum {
    LOOM_DARRAY_F64 = 0,
    LOOM_DARRAY_F32 = 1,
    LOOM_DARRAY_I32 = 2,
    LOOM_DARRAY_I64 = 3
} loom_darray_type;

typedef struct loom_darray_opts {
    uint32_t dims;
    /* The box: extents[v] for v < dims. 0 (sparse arrays only): one more than
     * the largest index any worker has in that dimension. An element outside
     * a given extent is an error. */
    uint64_t extents[LOOM_DARRAY_MAX_DIMS];
    /* The dimension cut into the workers' ranges (dense arrays: 0). */
    uint32_t part_dim;
    /* Values an element (0 or 1: one; at most LOOM_DARRAY_MAX_WIDTH). */
    uint32_t width;
    loom_darray_type type;
} loom_darray_opts;

/* ---- making one (collective) ---- */

/* What a parser adds elements through. */
typedef struct loom_darray_sink loom_darray_sink;
/* Adds one element (index: dims values; values: width values of the
 * array's type). LOOM_ENOMEM, LOOM_EKEYRANGE for an index outside the given
 * box. */
int loom_darray_emit(loom_darray_sink *s, const int64_t *index, const void *values);
/* Turns one line of the file (len bytes, without its "\n" or "\r\n"; `line`
 * its number in the file, from 0, e.g. a row index for a matrix stored a row
 * a line) into zero or more elements. Returns 0, or non-zero to refuse the
 * line (the construction then fails with "PATH:LINE: " and the message
 * given to loom_darray_refuse, else "the parser refused the line"). */
typedef int (*loom_darray_parse_fn)(void *user, uint64_t line, const char *text, size_t len,
                                    loom_darray_sink *s);
/* For a parser: the reason its line is refused (printf-style). Returns
 * LOOM_EINVAL, for `return loom_darray_refuse(s, "...")`. */
int loom_darray_refuse(loom_darray_sink *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A sparse array from a text file: each worker parses its share of the lines
 * (the file is cut on line boundaries, as the LIBSVM reader does), then the
 * elements go to the workers whose ranges hold them. */
int loom_darray_from_file(loom_node *node, const char *path, const loom_darray_opts *o,
                          loom_darray_parse_fn parse, void *user, loom_darray **out, char *err,
                          size_t errlen);
/* A sparse array from elements each worker was given or generated (n of them:
 * indices n x dims, values n x width of the array's type; copied), sent
 * where they belong. */
int loom_darray_from_elements(loom_node *node, const loom_darray_opts *o, const int64_t *indices,
                              const void *values, size_t n, loom_darray **out, char *err,
                              size_t errlen);
/* A dense array whose element at `index` gen(user, index, values) writes
 * (width values of the array's type), each worker making its own rows
 * (every extent given, part_dim 0). gen NULL: zeros. */
int loom_darray_generate(loom_node *node, const loom_darray_opts *o,
                         void (*gen)(void *user, const int64_t *index, void *values), void *user,
                         loom_darray **out, char *err, size_t errlen);

/* ---- this worker's part ---- */

/* Calls fn(user, index, values) on each of this worker's elements, which may
 * change its width values (of the array's type) in place. Runs on one
 * worker's elements: call it on every worker to map the array. */
void loom_darray_map(loom_darray *d, void (*fn)(void *user, const int64_t *index, void *values),
                     void *user);
/* Sets every value, on this worker, to a draw uniform in [lo, hi) that
 * depends only on the seed and the element's index (and, for elements at one
 * index, their order there): the same array on any number of workers. An
 * integer array draws integers: floor of the draw, at most the largest
 * integer below hi (lo and hi within the type's range). */
void loom_darray_fill_random(loom_darray *d, uint64_t seed, double lo, double hi);
/* This worker's elements, sorted by index: *indices (n x dims) and *values
 * (n x width of the array's type) point into the array (valid until the
 * next call that changes it or loom_darray_free; a dense array's indices are
 * made on the first call). Returns n, or 0 with both NULL when it holds
 * none. LOOM_ENOMEM is reported as 0 with *indices NULL and *values not
 * NULL. */
size_t loom_darray_local(loom_darray *d, const int64_t **indices, const void **values);
uint32_t loom_darray_dims(const loom_darray *d);
uint32_t loom_darray_width(const loom_darray *d);
loom_darray_type loom_darray_value_type(const loom_darray *d);
/* The box (dims values, the extents agreed at construction). */
void loom_darray_extents(const loom_darray *d, uint64_t *extents);
/* Every worker's elements together (agreed at construction). */
uint64_t loom_darray_size(const loom_darray *d);
/* Worker w's range of part_dim: [*lo, *hi). */
void loom_darray_range(const loom_darray *d, uint32_t w, uint64_t *lo, uint64_t *hi);

/* ---- the whole array (collective) ---- */

/* Hosts the array on the servers: table `name`, rows of width values of the
 * array's type (LOOM_F64, LOOM_F32, LOOM_I32 or LOOM_I64) keyed by each index's row-major position
 * in the box (loom_darray_key), summing the elements at one index, a key without one reading 0;
 * every worker's elements are in it when the call returns (ASP, no process cache: each pull reads
 * the servers, and any worker may pull or push any index, as Orion's server-hosted DistArrays are
 * read and written by every worker). Dense storage when the box has at most 2^24 positions, else
 * sparse. LOOM_EINVAL for an empty box or one of 2^64 - 1 positions or more. */
int loom_darray_host(loom_darray *d, const char *name, loom_table **out, char *err, size_t errlen);
/* The row-major position of `index` in the array's box (the key of
 * loom_darray_host's table), or UINT64_MAX for an index outside it. */
uint64_t loom_darray_key(const loom_darray *d, const int64_t *index);

/* Every element, on worker `root`, sorted by index: *indices (n x dims) and
 * *values (n x width of the array's type), freed with free(); the other
 * workers get n = 0 and NULLs. */
int loom_darray_gather(loom_darray *d, uint32_t root, int64_t **indices, void **values, size_t *n);
/* Saves the array into directory `dir` (made if missing): one file per worker
 * (part-W-of-N.bin) and, once every part is complete, a manifest written by
 * worker 0. Each file is written under a temporary name and renamed; files
 * of the directory that are not these are left alone. */
int loom_darray_save(loom_darray *d, const char *dir, char *err, size_t errlen);
/* Loads an array saved by loom_darray_save on any number of workers: each
 * worker reads some of the parts, then the elements are spread over this
 * job's workers as at construction. Malformed or truncated files, and
 * elements outside the manifest's box, are refused with a sentence. */
int loom_darray_load(loom_node *node, const char *dir, loom_darray **out, char *err, size_t errlen);

void loom_darray_free(loom_darray *d);

#ifdef __cplusplus
}
#endif

#endif
