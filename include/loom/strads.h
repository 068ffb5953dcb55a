/* STRADS-AP's loop operators over a distributed vector (kim-thesis-strads.txt,
 * chapter 7; docs/LOOPS.md, "SyncFor and AsyncFor").
 *
 * A vector x of n doubles (or of n rows of `width` doubles) lives on the
 * servers; the user writes what one iteration i computes from x, the new
 * x[i]:
 *
 *     double jacobi(void *user, uint64_t i, const double *x);
 *     void jacobi_rows(void *user, uint64_t i, const double *x, double *row);
 *
 * and runs it over i = 0 .. n - 1, pass after pass, on every worker of a job:
 *
 *   loom_sync_for_open   SyncFor (BSP): every iteration of a pass reads the
 *                        values of the pass before, and the new values replace
 *                        them at the pass's end. The result equals the serial
 *                        loop that reads old values and writes new ones (a
 *                        Jacobi sweep) bit for bit, on any number of workers.
 *   loom_async_for_open  AsyncFor: an iteration's new value reaches x as the
 *                        loop goes, at the latest `delay` iterations later on
 *                        its worker, and the other workers' values as they
 *                        flush theirs. With one worker and delay 1 it is the
 *                        serial loop that writes in place (Gauss-Seidel), each
 *                        write made as a sum table makes it: x[i] + (new -
 *                        x[i]). Within a run the workers' passes are not kept
 *                        in step unless `lead` bounds how far one may run
 *                        ahead of the slowest (every run ends at a barrier).
 *
 * Both are thin forms over loom/loop.h: a 1D loop over i, data-parallel (each
 * worker runs the range n * rank / W .. n * (rank + 1) / W), whose writes go
 * through a write buffer on a whole array. Errors are int codes
 * (loom/error.h); err, when given, gets a sentence. */
#ifndef LOOM_STRADS_H
#define LOOM_STRADS_H

#include <stddef.h>
#include <stdint.h>

#include "node.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The new value of x[i]; x is this worker's view of the whole vector. */
typedef double (*loom_for_fn)(void *user, uint64_t i, const double *x);
/* A vector of rows (width > 1): the new row x[i] into row (width values);
 * x is this worker's view of every row, n x width values, row i at
 * x + i * width. */
typedef void (*loom_for_row_fn)(void *user, uint64_t i, const double *x, double *row);

typedef struct loom_for_opts {
    const char *name;   /* the vector's name (its tables are name.0 and name.1) */
    uint64_t n;         /* its length (>= 1) */
    const double *init; /* its first values (n x width of them), or NULL: zeros */
    loom_for_fn fn;     /* for a vector of doubles (width 0 or 1) */
    void *user;
    uint64_t delay; /* AsyncFor: the delay bound in iterations (>= 1) */
    uint32_t width; /* values a row: 0 or 1 for a vector of doubles (fn), more for rows (row_fn) */
    loom_for_row_fn row_fn;
    /* AsyncFor: 0 (the default) lets a worker run every pass of a run ahead
     * of the others; L >= 1 lets it start pass p of a run only once every
     * worker has finished pass p - L (1: the passes in step, without a
     * barrier). Each pass is then a clock of the node (loom_clock), and the
     * bound is SSP's: the loop opens a table name.c of SSP(L - 1) to set it,
     * which bounds the node's other clocks alike (loom/node.h). */
    uint64_t lead;
} loom_for_opts;

typedef struct loom_for loom_for;

/* Every worker calls these alike (in the same order as its other table and
 * loop opens). LOOM_EINVAL with a sentence for n 0, no function or name, a
 * name too long for a table, an AsyncFor with delay 0, fn given for rows or
 * row_fn for doubles, a lead for SyncFor or above 2^31. */
int loom_sync_for_open(loom_node *node, const loom_for_opts *o, loom_for **out, char *err,
                       size_t errlen);
int loom_async_for_open(loom_node *node, const loom_for_opts *o, loom_for **out, char *err,
                        size_t errlen);
/* Run `passes` passes (every worker); ends at a barrier. 0 or the first error. */
int loom_for_run(loom_for *f, int64_t passes);
/* The vector after the last run: n x width values into out. */
int loom_for_values(loom_for *f, double *out);
void loom_for_close(loom_for *f);

#ifdef __cplusplus
}
#endif

#endif
