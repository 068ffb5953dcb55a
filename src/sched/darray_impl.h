/* darray_impl: what darray.c (making, spreading, gathering), darray_file.c
 * (reading text, saving, loading) and darray_value.c (the value types)
 * share (loom/darray.h). */
#ifndef LOOM_SCHED_DARRAY_IMPL_H
#define LOOM_SCHED_DARRAY_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "loom/darray.h"

struct loom_darray {
    loom_node *node;
    uint32_t engine; /* the engine number its worker-to-worker messages carry */
    uint32_t seq;    /* collective exchanges made: each uses versions of its own */
    uint32_t W, rank;
    uint32_t dims, part_dim, width;
    loom_darray_type type;
    uint32_t vsize; /* bytes a value */
    int dense;
    uint64_t ext[LOOM_DARRAY_MAX_DIMS];
    uint64_t *bounds; /* W + 1: worker w holds part_dim coordinates [bounds[w], bounds[w + 1]) */
    uint64_t total;   /* every worker's elements */
    size_t n;         /* this worker's */
    int64_t *idx;     /* n x dims, sorted; a dense array's made on demand */
    void *val;        /* n x width values of the type */
};

/* Bytes of one value of type t (0 for no type). */
uint32_t darray_type_size(loom_darray_type t);
/* The value of type t at p (any alignment) as a double (an int64 past 2^53
 * rounded). */
double darray_value_get(loom_darray_type t, const void *p);
/* The value of type t at p set to x: an integer type takes x rounded to the
 * nearest integer, held to the type's range (NaN: 0). */
void darray_value_set(loom_darray_type t, void *p, double x);
/* Two values of type t: < 0, 0 or > 0 in the type's order (floats: NaNs
 * last; -0 and +0, and NaNs, by their bits). */
int darray_value_cmp(loom_darray_type t, const unsigned char *a, const unsigned char *b);

/* One element with its index padded to the largest rank, and its values:
 * what is sorted. Indices compare lexicographically, then the values (NaNs
 * last, ties by their bits), so that the order of elements at one index
 * never depends on who held them. */
typedef struct darray_elem {
    int64_t key[LOOM_DARRAY_MAX_DIMS];
    const unsigned char *v; /* its width values, set by darray_elems_sort */
    uint32_t width;
    loom_darray_type type;
} darray_elem;

/* A growing list of elements (element i's values at v + i * width * the
 * type's size until it is sorted), with the box they must lie in (0: any). */
typedef struct darray_elems {
    darray_elem *e;
    unsigned char *v;
    size_t n, cap;
    uint32_t dims, width;
    loom_darray_type type;
    const uint64_t *ext;
} darray_elems;

/* What a parser's loom_darray_emit adds to. */
struct loom_darray_sink {
    darray_elems *list;
    char why[160]; /* loom_darray_refuse's message, or the emit's own */
};

/* Appends an element (width values of the list's type, copied bytewise);
 * LOOM_EKEYRANGE (with why) for an index outside the box or negative,
 * LOOM_ENOMEM. */
int darray_elems_add(darray_elems *l, const int64_t *index, const void *values, char *why,
                     size_t whylen);
/* Sorts the list; its elements' values are then reached through e[i].v. */
void darray_elems_sort(darray_elems *l);
void darray_elems_free(darray_elems *l);

/* A new array of this worker (collective: the engine number), its options
 * checked alike on every worker. */
int darray_new(loom_node *node, const loom_darray_opts *o, int dense, loom_darray **out, char *err,
               size_t errlen);
/* Collective: every worker's `failed` (0 or an error code, its sentence in
 * err) are compared, then the box and the count agreed, the ranges cut and
 * each element sent to the worker holding it; the list is consumed. A dense
 * array must then hold every index of its box exactly once. */
int darray_settle(loom_darray *d, darray_elems *l, int failed, char *err, size_t errlen);
/* Collective: every worker's `mine` (words values) into all (W x words), in
 * rank order. */
int darray_allgather(loom_darray *d, const int64_t *mine, size_t words, int64_t *all);
/* Collective: 0 if every worker's rc is 0, else the first failing worker's
 * code, with a sentence naming it in err on the others. */
int darray_agree_rc(loom_darray *d, int rc, char *err, size_t errlen);
/* This worker's elements replaced by the n given (width 1; indices n x
 * dims; values as doubles, set into the array's type by darray_value_set),
 * which must be the same indices in any order (a loop's elements after a
 * run, loop_run.c), then sorted: 0, LOOM_ENOMEM, or LOOM_EINVAL for another
 * count. */
int darray_set_local(loom_darray *d, const int64_t *idx, const double *val, size_t n);
/* Index of element i of this worker (dims values), for either kind. */
void darray_index_of(const loom_darray *d, size_t i, int64_t *index);

#endif
