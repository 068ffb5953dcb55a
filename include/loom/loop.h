/* Parallel for-loops with declared accesses: the plan (Orion,
 * wei-thesis-bosen-orion.txt chapter 3; docs/LOOPS.md).
 *
 * The user writes a serial loop over an iteration space of up to
 * LOOM_LOOP_MAX_DIMS indices (p0, p1, ...) and declares every array access its
 * body makes, each subscript a loop index plus a constant, a constant, or the
 * whole dimension:
 *
 *     MF:      {ratings, (p0, p1)} read, {W, (p0, *)} written, {H, (p1, *)} written
 *     stencil: {x, (p0, p1)} written, {x, (p0 - 1, p1)} read, {x, (p0, p1 - 1)} read
 *
 * the C stand-in for Orion's static analysis of a Julia loop body. From the
 * declarations the planner computes the loop's dependence vectors (the
 * distance between two iterations that touch one element, at least one of
 * them writing it; LOOM_DEP_ANY where the distance can be anything) and
 * chooses a schedule that never runs two dependent iterations at once and,
 * for an ordered loop, runs them in their serial order:
 *
 *   LOOM_LOOP_1D         an index no dependence crosses (its distance is 0 in
 *                        every vector): its range is cut among the workers,
 *                        and each runs its part to the end, alone;
 *   LOOM_LOOP_2D         (unordered loops) two indices such that every
 *                        dependence keeps one of them fixed: the space index
 *                        is cut into W ranges and the time index into W; in
 *                        step s worker w runs block (w, (w + s) mod W), W
 *                        steps in all (Orion's relaxed ordering: the ring
 *                        rotation of loom/sched.h);
 *   LOOM_LOOP_WAVEFRONT  two indices whose distances are known and, after a
 *                        skew time' = time + f * space (f >= 0: the unimodular
 *                        transform of Wolf and Lam), never negative: block
 *                        (w, t) runs in step w + t, 2W - 1 steps, a block after
 *                        every block it depends on;
 *   LOOM_LOOP_SERIAL     none of these: one worker runs the loop in order.
 *
 * Inside a block the iterations run in the loop's lexicographic order.
 * This header is the planner and the block schedule, which need no job, and
 * loom_loop_open()/loom_loop_run(), which run a planned loop on the workers
 * of one. Errors are int codes (loom/error.h); err, when given, gets a
 * sentence. */
#ifndef LOOM_LOOP_H
#define LOOM_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "darray.h"
#include "node.h"
#include "table.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LOOM_LOOP_MAX_DIMS     4
#define LOOM_LOOP_MAX_ACCESSES 64

typedef enum {
    LOOM_SUB_INDEX = 0, /* loop index `index` plus `offset` */
    LOOM_SUB_ALL = 1,   /* the whole dimension ('*') */
    LOOM_SUB_CONST = 2  /* the constant `offset` */
} loom_sub_kind;

typedef struct loom_subscript {
    loom_sub_kind kind;
    uint32_t index;
    int64_t offset;
} loom_subscript;

#define LOOM_SUB(index, offset) ((loom_subscript){LOOM_SUB_INDEX, (index), (offset)})
#define LOOM_SUB_EVERY          ((loom_subscript){LOOM_SUB_ALL, 0, 0})
#define LOOM_SUB_AT(c)          ((loom_subscript){LOOM_SUB_CONST, 0, (c)})

/* One access of the loop body: array `array` (the user's number for it; two
 * accesses name one array by one number, and must then agree on its ndims),
 * read or written (a read-modify-write is a write). */
typedef struct loom_access {
    uint32_t array;
    int write;
    uint32_t ndims; /* 1 .. LOOM_LOOP_MAX_DIMS */
    loom_subscript sub[LOOM_LOOP_MAX_DIMS];
} loom_access;

typedef enum {
    LOOM_LOOP_1D = 1,
    LOOM_LOOP_2D = 2,
    LOOM_LOOP_WAVEFRONT = 3,
    LOOM_LOOP_SERIAL = 4
} loom_loop_kind;

/* Components of a dependence vector that are not one known number: any
 * value, and any value from 1 up (the leading component of a vector whose
 * pairs all have the source first in serial order). */
#define LOOM_DEP_ANY INT64_MIN
#define LOOM_DEP_POS (INT64_MIN + 1)

typedef struct loom_loop_plan loom_loop_plan;

/* Plan a loop of `dims` indices (1 .. LOOM_LOOP_MAX_DIMS) whose body makes
 * the nacc accesses (at most LOOM_LOOP_MAX_ACCESSES); ordered: keep the
 * serial order of dependent iterations, not only their mutual exclusion.
 * extents (dims values, or NULL) break ties between candidate indices
 * towards the longer ones. LOOM_EINVAL with a sentence in err for a
 * declaration that does not fit (an index the loop does not have, arrays
 * of one number with different ndims). */
int loom_loop_plan_make(uint32_t dims, const loom_access *acc, size_t nacc, int ordered,
                        const uint64_t *extents, loom_loop_plan **out, char *err, size_t errlen);
void loom_loop_plan_free(loom_loop_plan *p);

loom_loop_kind loom_loop_plan_kind(const loom_loop_plan *p);
/* The space index (1D, 2D, wavefront), the time index (2D, wavefront; the
 * space index otherwise) and the skew f (wavefront; 0 otherwise). */
void loom_loop_plan_axes(const loom_loop_plan *p, uint32_t *space, uint32_t *time, int64_t *skew);
/* Make `index` the space index if the plan's kind allows it: a 2D plan
 * whose time index it is (every dependence keeps one of the two fixed either
 * way: they trade places), or a 1D plan with no dependence crossing it
 * either. 1 if the plan now has that space index, 0 if it cannot (wavefront
 * and serial plans keep theirs). For a user who knows which arrays are
 * cheaper to keep local than the planner's tie-breaks (accesses, extents)
 * can tell. */
int loom_loop_plan_prefer_space(loom_loop_plan *p, uint32_t index);
/* Why the planner chose what it did, in a sentence. */
const char *loom_loop_plan_explain(const loom_loop_plan *p);
/* The dependence vectors: how many, and vector i (dims values, oriented so
 * that the first non-zero component is positive, the source of the
 * dependence first in serial order: a vector whose first non-zero component
 * could have either sign comes as its forms with that component
 * LOOM_DEP_POS, forwards and backwards, and with it 0). LOOM_EINVAL for i
 * out of range. */
size_t loom_loop_plan_deps(const loom_loop_plan *p);
int loom_loop_plan_dep(const loom_loop_plan *p, size_t i, int64_t *out);

/* ---- the block schedule ---- */

/* Steps of the schedule with `workers` workers: 1 (1D, serial), workers
 * (2D) or 2 * workers - 1 (wavefront). */
uint32_t loom_loop_steps(const loom_loop_plan *p, uint32_t workers);
/* The block worker `worker` runs in step `step`: 1 and its space and time
 * block numbers (each 0 .. workers - 1; time 0 for 1D; both 0 for serial,
 * which only worker 0 runs), or 0 when the worker has none in that step. */
int loom_loop_task(const loom_loop_plan *p, uint32_t workers, uint32_t step, uint32_t worker,
                   uint32_t *space_block, uint32_t *time_block);
/* The space and time coordinates of iteration `index` (dims values): the
 * space index's value, and the time index's plus skew times the space
 * index's. Blocks are ranges of these coordinates. */
void loom_loop_coords(const loom_loop_plan *p, const int64_t *index, int64_t *space, int64_t *time);
/* Histogram balancing (Orion 3.7): bounds[0..parts] over coordinates
 * 0 .. n - 1 with hist[c] iterations at coordinate c, cutting them into
 * `parts` ranges [bounds[b], bounds[b + 1]) of as equal a count as whole
 * coordinates allow (bounds[0] = 0, bounds[parts] = n; a range may be
 * empty). LOOM_EINVAL for parts 0 or NULL arrays. */
int loom_loop_balance(const uint64_t *hist, size_t n, uint32_t parts, size_t *bounds);

/* ---- running a loop on the workers of a job ---- */

typedef struct loom_loop loom_loop;
typedef struct loom_loop_rows loom_loop_rows;

/* An array of rows the body reads or writes: row r is `width` values of
 * `type` (LOOM_F32, LOOM_F64, or LOOM_I32 and LOOM_I64 for counts, which
 * every table and merge adds exactly), and every access of it subscripts its first
 * dimension by a loop index (offset 0; a wavefront may also read rows up to
 * 8 before, x(i - 1, j)), its second by '*', a loop index plus a constant or
 * a constant (a column of the row), and any others by '*': W(i, *), H(j, *),
 * g(i), x(i, j - 1); or every access reaches it whole, by '*' alone: w(*), read
 * only (it is written through a buffer), each worker reading all of it at a
 * run's start and after each flush of a buffer on it, or, declared prefetched
 * (loom_loop_prefetch_decl), only the rows its elements list. It lives in the dense
 * table `table` (created by loom_loop_open, which every worker calls alike),
 * where it can be read after a run. */
typedef struct loom_loop_array {
    uint32_t array; /* the number its accesses use */
    const char *table;
    uint64_t rows;
    uint32_t width;
    loom_type type;
    /* Row r's first values (width of them), called once per row by the worker
     * that first holds it; NULL: zeros. */
    void (*init)(void *user, uint32_t array, uint64_t row, void *values);
} loom_loop_array;

/* An array reached whole, A(*), may instead be hosted on the servers and
 * prefetched (Orion's server-hosted DistArrays with bulk prefetch): no
 * worker holds a copy; rows_of lists, with loom_loop_rows_add(), the rows
 * the element (index, value) will read, in the order the body wants them
 * (repeats allowed: e.g. the feature ids of a sample). Before running the
 * elements of a batch (at most `batch` elements, 0: 256, never across the
 * end of a block or a flush of a buffer on the array) the runtime pulls
 * the union of their rows from the table in one bulk pull (sorted, unique
 * keys), and gives each access of the array a loom_loop_fetched (below)
 * instead of the whole array. rows_of is called once per element per batch
 * (again in a later pass), before the elements of the batch run: it must list
 * the same rows for the same element and value. */
typedef struct loom_loop_prefetch_decl {
    uint32_t array; /* an array of the loop, every access of it A(*), read */
    void (*rows_of)(void *user, uint32_t array, const int64_t *index, double value,
                    loom_loop_rows *out);
    uint64_t batch;
} loom_loop_prefetch_decl;

/* rows_of's list: add row `row` (0 .. rows - 1; a row outside the array
 * fails the run with LOOM_EKEYRANGE). */
void loom_loop_rows_add(loom_loop_rows *out, uint64_t row);

/* What the body gets for an access of a prefetched array: the n rows its
 * element declared, in rows_of's order, row[k] and its values value[k]
 * (width values of the array's type, as pulled for the batch), and the
 * runtime's state, for loom_loop_fetched_row(). */
typedef struct loom_loop_prefetch loom_loop_prefetch;
typedef struct loom_loop_fetched {
    size_t n;
    const uint64_t *row;
    const void *const *value;
    loom_loop_prefetch *prefetch;
} loom_loop_fetched;

/* The values of row `row` of a prefetched array, which the element must
 * have declared; NULL for one it did not: the access is counted and the
 * run returns LOOM_EKEYRANGE (never values the body did not ask for). */
const void *loom_loop_fetched_row(const loom_loop_fetched *f, uint64_t row);

/* A prefetched array's traffic on this worker since the loop opened: bulk
 * pulls (batches), rows pulled (the unions' sizes; rows a flush of a buffer
 * on it pulled beside the batch's included) and refused reads (rows an
 * element had not declared). LOOM_EINVAL for an array that is not
 * prefetched. */
typedef struct loom_loop_prefetch_stats {
    uint64_t batches, rows_pulled, refused;
} loom_loop_prefetch_stats;
int loom_loop_prefetch_stats_of(const loom_loop *l, uint32_t array, loom_loop_prefetch_stats *out);

/* A per-worker value the body adds to (Orion's accumulator): `width` values
 * of `type` (LOOM_F32, LOOM_F64, LOOM_I32, LOOM_I64) reduced by sum, min or
 * max, or `width` bytes reduced by the user's `reduce`. Every run starts each
 * worker's value at the identity (0, the type's largest value, its smallest;
 * for LOOM_REDUCE_FN the `identity` bytes, zeros without them), and ends by
 * reducing the workers' values in rank order, so every worker reads the same
 * result. */
typedef enum {
    LOOM_REDUCE_SUM = 0,
    LOOM_REDUCE_MIN = 1,
    LOOM_REDUCE_MAX = 2,
    LOOM_REDUCE_FN = 3
} loom_reduce_op;

typedef struct loom_loop_accum_decl {
    uint32_t id; /* the number loom_loop_accum() takes */
    loom_reduce_op op;
    loom_type type; /* SUM, MIN, MAX */
    uint32_t width; /* values (SUM, MIN, MAX) or bytes (FN) */
    /* FN: into = into (+) from, an associative operation on width bytes. */
    void (*reduce)(void *user, void *into, const void *from);
    const void *identity; /* FN: width bytes, or NULL for zeros */
} loom_loop_accum_decl;

/* A write buffer (Orion's DistArray Buffer): writes the body makes through
 * it are exempt from dependence analysis (they are not among the loop's
 * accesses). Each worker collects them in rows shaped like the target's
 * (zeros when first written after a flush; the body adds to them), and
 * flushes at the latest every `delay` body calls, at the end of every block
 * and at the end of a run: merge(user, row, value, update) is called for each
 * written row with the target's row as this worker sees it, which it
 * changes. The target is an array of the loop: one kept local (keyed by the
 * space index; only rows this worker holds may be written), or one reached
 * whole, as A(*), which lives on the servers: there the change the merge
 * made is added into the table, and the worker's copy of the array is read
 * again (a prefetched array: the merge gets the row as the current batch
 * holds it, or pulled at the flush, and the batch is dropped), so merges of
 * several workers add up. */
typedef struct loom_loop_buffer_decl {
    uint32_t id;     /* the number loom_loop_buffer() takes */
    uint32_t target; /* the array its writes merge into */
    uint64_t delay;  /* the delay bound, in body calls on one worker (>= 1) */
    void (*merge)(void *user, uint64_t row, void *value, const void *update);
} loom_loop_buffer_decl;

typedef struct loom_loop_buffer loom_loop_buffer;

/* One iteration: its indices, its element's value, and rows[k] the row
 * access k of the declaration touches, or the element where the access names
 * a column (NULL for a row before the first or a column outside the row: the
 * loop's boundary), which the body may write where the access says it
 * writes. An access of the iteration space itself gets NULL when it reads;
 * one that writes names the iteration's own element, S(p0, p1, ...) (each
 * subscript the loop index of its dimension, offset 0), and gets a double
 * holding the element's value, which the body may change: the element keeps
 * the new value for the passes after (an LDA token's topic; Orion's loops
 * over a DistArray that write its elements). Elements may share their
 * indices (a word twice in one document): each keeps its own value. An
 * access of a prefetched array gets a const loom_loop_fetched * (the rows
 * the element declared) instead of the array. */
typedef void (*loom_loop_body_fn)(void *user, const int64_t *index, double value,
                                  void *const *rows);

typedef struct loom_loop_opts {
    uint32_t dims;
    const uint64_t *extents; /* dims values: indices are 0 .. extent - 1 */
    const loom_access *acc;
    size_t nacc;
    int ordered;
    /* The arrays of rows (each access names one of them, or the iteration
     * space: an array number not in this list, only read). */
    const loom_loop_array *arrays;
    size_t narrays;
    /* The iteration space: the n elements (indices: n x dims; values) this
     * worker was given, e.g. its share of a file. Every element of the loop
     * must be given to exactly one worker; the workers exchange them so that
     * each holds those of its blocks. */
    const int64_t *indices;
    const double *values;
    size_t n;
    loom_loop_body_fn body;
    void *user;
    /* 1 + the loop index to make the space index where the plan allows it
     * (a 2D plan whose time index it is: the two trade places; a 1D plan:
     * another index no dependence crosses), so that the arrays it keys stay
     * local; 0: the planner's choice (loom_loop_plan_prefer_space). */
    uint32_t prefer_space;
    const loom_loop_accum_decl *accums;
    size_t naccums;
    const loom_loop_buffer_decl *buffers;
    size_t nbuffers;
    /* Arrays reached whole that are prefetched rather than copied. */
    const loom_loop_prefetch_decl *prefetch;
    size_t nprefetch;
    /* The iteration space as a distributed array (loom/darray.h, width 1)
     * instead of indices, values and n (which must then be NULL and 0): its
     * dimensions and, when extents is NULL, its box are the loop's (given
     * extents must equal the box). Unless prefer_space says otherwise, its
     * part_dim is made the space index where the plan allows; when it is
     * (and the plan is 1D or 2D), the darray's ranges are the loop's space
     * blocks and no element leaves its worker. A loop that writes its
     * elements writes them back into the darray at the end of each run, and
     * must then keep them where they are (part_dim the space index, or a
     * loop without dependences): refused otherwise. */
    loom_darray *space;
} loom_loop_opts;

/* Plan the loop and prepare it on this worker: every worker calls it with the
 * same options (but its own elements), in the same order as its other
 * loom_loop_open and loom_table_open calls. Runs 1D, 2D and wavefront plans
 * whose arrays are each keyed by the space index (kept on the worker that
 * holds those rows; a wavefront's worker passes its last rows to the next
 * after each step) or, for 2D, one array keyed by the time index (rotated
 * between the workers, loom/sched.h), reached whole (on the servers), or
 * only read and keyed by another index (hosted on the servers: before a
 * batch of elements runs, the rows its subscripts name are pulled at once,
 * as a prefetched array's; loom_loop_prefetch_stats_of counts them); anything
 * else is refused with LOOM_EINVAL and a sentence saying what is not
 * supported yet, and so are malformed accumulators and buffers. A loop
 * without dependences whose arrays are all reached whole or hosted runs each
 * worker's elements where they were given (data parallelism). */
int loom_loop_open(loom_node *node, const loom_loop_opts *o, loom_loop **out, char *err,
                   size_t errlen);
/* Run `passes` passes over the iteration space (every worker), flush the
 * buffers, write every array's rows to its table, reduce the accumulators
 * and meet the other workers at a barrier. A loop with a buffer on a whole
 * array also meets them after reading the whole arrays at the start: no
 * worker's merge reaches the table before every worker has read the values
 * the run starts from.
 * 0 or the first error. */
int loom_loop_run(loom_loop *l, int64_t passes);
/* The pass running, counted from 0 over every run since the loop was opened
 * (a run of 3 passes after one of 2: passes 2, 3 and 4), for a body that
 * changes with the pass (a random stream per pass and element); between
 * runs, the number of passes run. */
int64_t loom_loop_pass(const loom_loop *l);
const loom_loop_plan *loom_loop_get_plan(const loom_loop *l);
/* The table of array `array`, or NULL. */
loom_table *loom_loop_table(loom_loop *l, uint32_t array);
/* Elements this worker holds after the exchange. */
size_t loom_loop_elements(const loom_loop *l);
/* Element i (0 .. loom_loop_elements() - 1) of this worker, in the order its
 * blocks run them: its indices (dims values) and its value as the last run
 * left it (see loom_loop_body_fn: a body may write its element). Either
 * output may be NULL. LOOM_EINVAL for i out of range. */
int loom_loop_element(const loom_loop *l, size_t i, int64_t *index, double *value);
/* The blocks: workers + 1 bounds of the space coordinates and of the time
 * coordinates (the rotated array's rows), the same on every worker. */
void loom_loop_bounds(const loom_loop *l, size_t *space, size_t *time);
void loom_loop_close(loom_loop *l);

/* This worker's value of accumulator `id` (width values or bytes), for the
 * body to add to; it stays at one place from open to close. NULL for an
 * unknown id. */
void *loom_loop_accum(loom_loop *l, uint32_t id);
/* The reduced value of accumulator `id` over all workers after the last run
 * (the same on every worker; the identity before any). LOOM_EINVAL for an
 * unknown id. */
int loom_loop_accum_result(const loom_loop *l, uint32_t id, void *out);
/* Buffer `id`, for the body (NULL for an unknown id), and the row of it for
 * target row `row`, which the body adds its update to. A row outside the
 * target, or of a local target outside this worker's rows, gets a scratch
 * row that is never merged, and the run returns LOOM_EKEYRANGE. */
loom_loop_buffer *loom_loop_buffer_of(loom_loop *l, uint32_t id);
void *loom_loop_buffer_row(loom_loop_buffer *b, uint64_t row);

#ifdef __cplusplus
}
#endif

#endif
