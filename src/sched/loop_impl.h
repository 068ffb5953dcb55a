/* loop_impl.h: what the files of a running loop share (loom/loop.h):
 * loop_run.c opens and runs it, loop_write.c keeps what the body writes
 * outside the declared accesses (accumulators and write buffers),
 * loop_prefetch.c pulls the rows of server-hosted arrays in batches. */
#ifndef LOOM_SCHED_LOOP_IMPL_H
#define LOOM_SCHED_LOOP_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "core/u64map.h"
#include "loom/loop.h"
#include "loom/sched.h"

/* Where an array's rows live: local (keyed by the space index: the rows of
 * this worker's space block), rotated (keyed by the 2D time index), whole
 * (reached as A(*): on the servers, each worker holding a copy),
 * prefetched (reached as A(*) with rows_of: on the servers, each worker
 * holding the rows of its current batch) or hosted (read only, keyed by
 * another loop index: on the servers, each worker holding the rows its
 * batch's subscripts name, prefetched like rows_of's). */
enum { ROLE_SPACE = 1, ROLE_ROTATED = 2, ROLE_WHOLE = 3, ROLE_PREFETCH = 4, ROLE_HOSTED = 5 };

/* rows_of's list: the rows the elements of a batch declare, in order */
struct loom_loop_rows {
    uint64_t *row;
    size_t n, cap;
    uint64_t limit; /* the array's rows */
    int bad;        /* a row outside the array, or no memory */
};

/* A prefetched array's batch: elements [lo, hi) of the worker's, the rows
 * each declared (start: hi - lo + 1 offsets into r), the union of them
 * (keys, sorted and unique) and their values as pulled (vals), and per
 * declared row the pointer to its values (ptr). */
struct loom_loop_prefetch {
    loom_loop *l;
    struct loop_array *a;
    struct loom_loop_rows r;
    size_t lo, hi, *start, start_cap;
    int valid;
    uint64_t *keys; /* the batch's unique rows, in order of first use */
    size_t nkeys, keys_cap;
    u64map index; /* row -> its place in keys and vals */
    uint8_t *vals;
    const void **ptr;
    size_t ptr_cap;
    loom_loop_fetched cur; /* what the body gets */
    loom_loop_prefetch_stats stats;
};

/* acc_arr of an access of the iteration space: read (the body gets NULL),
 * or writing the iteration's own element (the body gets its value) */
#define LOOP_ACC_SPACE   (-1)
#define LOOP_ACC_ELEMENT (-2)

/* key of an array reached whole */
#define LOOP_KEY_WHOLE (UINT32_MAX - 1)
/* the most rows before its own a wavefront's access may read: A(i - 8, ...) */
#define LOOP_MAX_HALO 8

typedef struct loop_array {
    loom_loop_array a;
    uint32_t key; /* the loop index its rows are keyed by, or LOOP_KEY_WHOLE */
    int role;
    loom_table *t;
    size_t row_bytes;
    uint64_t lo, hi; /* ROLE_SPACE: the rows this worker keeps; ROLE_WHOLE: all */
    uint8_t *rows, *pushed;
    uint32_t halo;                 /* rows before its own an access reads (wavefront) */
    uint8_t *halo_rows;            /* ROLE_SPACE in a wavefront: the loop's halo rows before lo */
    loom_loop_prefetch_decl pd;    /* its prefetch declaration (rows_of NULL: none) */
    struct loom_loop_prefetch *pf; /* ROLE_PREFETCH and ROLE_HOSTED */
} loop_array;

/* An element of the iteration space as a worker keeps and sends it: its
 * time block (0 for 1D) and indices (unused ones 0), compared as one key,
 * then its value's bits. */
typedef struct elem {
    int64_t key[1 + LOOM_LOOP_MAX_DIMS];
    int64_t bits;
} elem;

typedef struct loop_accum {
    loom_loop_accum_decl a;
    size_t bytes;
    uint8_t *mine, *result;
} loop_accum;

struct loom_loop_buffer {
    loom_loop *l;
    loom_loop_buffer_decl d;
    loop_array *target;
    uint64_t calls;   /* body calls since the last flush */
    uint8_t *rows;    /* the target's rows [target->lo, target->hi) */
    uint8_t *written; /* per row: written since the last flush */
    uint64_t *list;   /* the rows written since the last flush, in order */
    size_t nlist;
    uint8_t *scratch; /* for writes outside the target */
    uint8_t *delta;   /* whole and prefetched targets: the changes, the rows seen */
    size_t delta_cap; /* rows delta has room for */
    int bad;          /* a write outside the target was made */
    /* the last flush's push, in flight until sent_ts: its keys and changes */
    uint64_t *sent_keys;
    size_t sent_keys_cap;
    uint8_t *sent_delta;
    size_t sent_delta_cap;
    loom_ts sent_ts;
    int sending;
};

struct loom_loop {
    loom_node *node;
    loom_loop_opts o;
    loom_access *acc;
    loom_loop_plan *plan;
    uint32_t id, rank, W, space, time, dims;
    loop_array *arr;
    size_t narr;
    int *acc_arr; /* per access: its array's slot, or LOOP_ACC_SPACE or LOOP_ACC_ELEMENT */
    int rotated;  /* slot of the rotated array, -1 if none */
    int stay;     /* the elements stay where they were given (no exchange) */
    int keep;     /* the space blocks are the darray's ranges (o.space): no exchange either */
    int write_el; /* an access writes the iteration's own element */
    uint64_t ext[LOOM_LOOP_MAX_DIMS]; /* o.space's box, when the loop takes it */
    double *space_val;                /* o.space's values as doubles, when it holds another type */
    int wave;                         /* a wavefront plan */
    int64_t skew;
    uint32_t halo;     /* the most rows any access reads before its own */
    uint8_t *halo_msg; /* the halo rows as sent */
    size_t halo_bytes;
    uint64_t wave_steps; /* steps run so far: the halo messages' version */
    size_t *sb, *tb;
    size_t n;
    elem *el;
    size_t *bucket; /* W + 1 offsets of the time blocks' elements */
    loom_sched *engine;
    void **rowptr;
    loop_accum *accum;
    struct loom_loop_buffer *buf;
    uint64_t runs;    /* runs so far: the accumulators' messages' version */
    int64_t pass;     /* the pass running, from 0 at the first run (loom_loop_pass) */
    int rc;           /* the first error of a body's writes in this run */
    size_t blk_end;   /* one past the last element of the block running */
    uint64_t refused; /* reads of prefetched rows not declared */
    int clock_passes; /* 1D: each pass ends with loom_clock (AsyncFor's lead, strads.c) */
};

int loop_refuse(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int loop_slot_of(const loom_loop *l, uint32_t array);

/* loop_write.c: check the declared accumulators and buffers and allocate
 * the accumulators (after the arrays' roles are known, before any collective
 * step), allocate the buffers (once the arrays are open), reset the
 * accumulators at a run's start, count a body call (flushing a buffer at its
 * delay), flush every buffer, reduce the accumulators across the workers at
 * a run's end; free. */
int loop_write_open(loom_loop *l, char *err, size_t errlen);
int loop_buffers_ready(loom_loop *l);
void loop_accum_reset(loom_loop *l);
int loop_after_body(loom_loop *l);
int loop_flush_all(loom_loop *l);
int loop_accum_reduce(loom_loop *l);
/* d = a - b, n values of type t (d may be a or b). */
void loop_diff(loom_type t, uint8_t *d, const uint8_t *a, const uint8_t *b, size_t n);
/* Read whole arrays into the workers' copies. */
int loop_read_whole(loop_array *a);
void loop_write_close(loom_loop *l);

/* One element: the rows its accesses touch, the body, the buffers' count
 * (loop_run.c). */
int loop_run_one(loom_loop *l, elem *e, const loom_sched_task *task);
/* loop_prefetch.c: allocate the batches of prefetched arrays (after
 * open_arrays), the fetched rows of element i (gathering and pulling a batch
 * from i when i is outside the current one; NULL with *rc set on failure),
 * drop every batch (a block's end, a flush), the values of row r in a's
 * batch or NULL, count rows pulled beside a batch, free. */
int loop_prefetch_open(loom_loop *l);
loom_loop_fetched *loop_prefetch_at(loom_loop *l, loop_array *a, size_t i, int *rc);
void loop_prefetch_drop(loom_loop *l);
const uint8_t *loop_prefetch_value(const loop_array *a, uint64_t r);
void loop_prefetch_close(loom_loop *l);

/* loop_wave.c: give every space block but the last the halo's rows
 * (LOOM_EINVAL if the space index is too short), allocate the halos, run
 * passes of the wavefront's steps. */
int loop_wave_bounds(loom_loop *l);
int loop_wave_open(loom_loop *l);
int loop_wave_run(loom_loop *l, int64_t passes);

#endif
