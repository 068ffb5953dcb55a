/* strads: SyncFor and AsyncFor (loom/strads.h) as loops of loom/loop.h.
 *
 * Both are a 1D loop over i whose only declared accesses are reads (the
 * element i, the whole vector x(*)), so the planner finds no dependence and
 * every worker runs the range of i it was given; the new x[i] goes through a
 * write buffer whose merge sets the row to it.
 *
 * AsyncFor: one array, one buffer with the user's delay. A flush pushes the
 * change (new - copy) into the sum table and reads x again, so the worker
 * sees its own values after at most `delay` iterations and the others' as
 * they flush. With a lead L, each pass ends with loom_clock and a table of
 * SSP(L - 1), which holds nothing, makes the node's clocks wait for the
 * slowest worker as SSP does: a pass starts only once every worker finished
 * the pass L before it.
 *
 * SyncFor: the sum table cannot take a value, only a change, and copy +
 * (new - copy) is not always new in floating point. So two arrays take turns
 * (X0, X1): a pass reads one, say X0, whose values are the previous pass's,
 * and its buffers set the other, X1, from 0 (exact: 0 + new = new) and set
 * X0 back to 0 (exact: copy + (-copy) = 0), each at the end of the pass
 * (delay unbounded: the flush at the end of the worker's block). Every worker
 * reads X0 before any flushes (loom_loop_run's barrier when buffers merge
 * into whole arrays), and one loom_loop_run per pass puts a barrier between
 * passes. */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/error.h"
#include "loom/loop.h"
#include "loom/strads.h"
#include "loom/table.h"
#include "sched/loop_impl.h"

enum { SPACE = 0, X0 = 1, X1 = 2 };
enum { BUF0 = 0, BUF1 = 1 };

struct loom_for {
    loom_loop *loop;
    loom_for_opts o;
    uint32_t width; /* values a row (1 for a vector of doubles) */
    int sync;
    int64_t passes;           /* run so far: SyncFor's values are in X(passes % 2) */
    loom_loop_buffer *buf[2]; /* SyncFor: the buffers on X0 and X1; AsyncFor: buf[0] */
};

static void set_row(void *user, uint64_t row, void *value, const void *update)
{
    const loom_for *f = user;
    (void)row;
    memcpy(value, update, f->width * sizeof(double));
}

static void init_row(void *user, uint32_t array, uint64_t row, void *values)
{
    const loom_for *f = user;
    if (array == X0 && f->o.init)
        memcpy(values, f->o.init + row * f->width, f->width * sizeof(double));
    else
        memset(values, 0, f->width * sizeof(double));
}

/* The new x[i] from x into the buffer's row for it. */
static void compute(loom_for *f, uint64_t i, const double *x, loom_loop_buffer *b)
{
    double *row = loom_loop_buffer_row(b, i);
    if (f->o.row_fn)
        f->o.row_fn(f->o.user, i, x, row);
    else
        *row = f->o.fn(f->o.user, i, x);
}

static void body(void *user, const int64_t *index, double value, void *const *rows)
{
    loom_for *f = user;
    (void)value;
    uint64_t i = (uint64_t)index[0];
    if (!f->sync) {
        compute(f, i, rows[1], f->buf[0]);
        return;
    }
    int from = (int)(f->passes % 2); /* read X(from), set X(1 - from), clear X(from) */
    compute(f, i, rows[1 + from], f->buf[1 - from]);
    loom_loop_buffer_row(f->buf[from], i); /* stays 0: the merge clears x[i] */
}

/* AsyncFor's lead L: the table name.c of SSP(L - 1), which bounds the
 * node's clocks, and a clock at the end of every pass. */
static int open_lead(loom_node *node, const loom_for_opts *o, loom_loop *loop, char *err,
                     size_t errlen)
{
    char name[LOOM_MAX_NAME + 1];
    snprintf(name, sizeof name, "%s.c", o->name);
    loom_table_opts to = LOOM_TABLE_OPTS_DEFAULT;
    to.type = LOOM_F64;
    to.storage = LOOM_DENSE;
    to.key_begin = 0;
    to.key_end = 1;
    to.consistency = LOOM_SSP;
    to.staleness = (int)(o->lead - 1);
    to.cache = 0;
    loom_table *t;
    int rc = loom_table_open(node, name, &to, &t);
    if (rc)
        return loop_refuse(err, errlen, rc, "the table %s that bounds the lead: %s", name,
                           loom_strerror(rc));
    loop->clock_passes = 1;
    return 0;
}

static int open_for(loom_node *node, const loom_for_opts *o, int sync, loom_for **out, char *err,
                    size_t errlen)
{
    if (!node || !o || !out)
        return loop_refuse(err, errlen, LOOM_EINVAL, "no node, options or place for the loop");
    *out = NULL;
    if (!o->n) return loop_refuse(err, errlen, LOOM_EINVAL, "the vector is empty (n is 0)");
    uint32_t width = o->width ? o->width : 1;
    if (width == 1 && (!o->fn || o->row_fn))
        return loop_refuse(err, errlen, LOOM_EINVAL,
                           "no function for an iteration (fn, for a vector of doubles)");
    if (width > 1 && (!o->row_fn || o->fn))
        return loop_refuse(err, errlen, LOOM_EINVAL,
                           "no function for an iteration (row_fn, for rows of %u values)", width);
    if (!o->name || !*o->name || strlen(o->name) + 2 > LOOM_MAX_NAME)
        return loop_refuse(err, errlen, LOOM_EINVAL,
                           "the vector needs a name of 1 to 61 characters");
    if (!sync && !o->delay)
        return loop_refuse(err, errlen, LOOM_EINVAL,
                           "AsyncFor needs a delay of at least 1 iteration");
    if (sync && o->lead)
        return loop_refuse(err, errlen, LOOM_EINVAL,
                           "a lead is AsyncFor's: SyncFor's passes are in step already");
    if (o->lead > (uint64_t)INT_MAX + 1)
        return loop_refuse(err, errlen, LOOM_EINVAL,
                           "a lead of %llu passes is more than an SSP bound can say (2^31)",
                           (unsigned long long)o->lead);
    loom_for *f = calloc(1, sizeof *f);
    int W = loom_num_workers(node), rank = loom_rank(node);
    uint64_t lo = o->n * (uint64_t)rank / (uint64_t)W,
             hi = o->n * (uint64_t)(rank + 1) / (uint64_t)W;
    int64_t *idx = malloc((size_t)(hi - lo + 1) * sizeof *idx);
    double *val = calloc((size_t)(hi - lo + 1), sizeof *val);
    if (!f || !idx || !val) {
        free(f), free(idx), free(val);
        return LOOM_ENOMEM;
    }
    for (uint64_t i = lo; i < hi; i++) idx[i - lo] = (int64_t)i;
    f->o = *o, f->sync = sync, f->width = width;
    char names[2][LOOM_MAX_NAME + 1];
    snprintf(names[0], sizeof names[0], "%s.0", o->name);
    snprintf(names[1], sizeof names[1], "%s.1", o->name);
    const loom_access acc[] = {{SPACE, 0, 1, {LOOM_SUB(0, 0)}},
                               {X0, 0, 1, {LOOM_SUB_EVERY}},
                               {X1, 0, 1, {LOOM_SUB_EVERY}}};
    const loom_loop_array arrays[] = {{X0, names[0], o->n, width, LOOM_F64, init_row},
                                      {X1, names[1], o->n, width, LOOM_F64, init_row}};
    const loom_loop_buffer_decl buffers[] = {{BUF0, X0, sync ? UINT64_MAX : o->delay, set_row},
                                             {BUF1, X1, UINT64_MAX, set_row}};
    size_t narr = sync ? 2 : 1;
    loom_loop_opts lo_opts = {.dims = 1,
                              .extents = &o->n,
                              .acc = acc,
                              .nacc = 1 + narr,
                              .arrays = arrays,
                              .narrays = narr,
                              .indices = idx,
                              .values = val,
                              .n = (size_t)(hi - lo),
                              .body = body,
                              .user = f,
                              .buffers = buffers,
                              .nbuffers = narr};
    int rc = loom_loop_open(node, &lo_opts, &f->loop, err, errlen);
    free(idx), free(val);
    if (rc) {
        free(f);
        return rc;
    }
    for (size_t k = 0; k < narr; k++) f->buf[k] = loom_loop_buffer_of(f->loop, (uint32_t)k);
    if (o->lead && (rc = open_lead(node, o, f->loop, err, errlen))) {
        loom_for_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

int loom_sync_for_open(loom_node *node, const loom_for_opts *o, loom_for **out, char *err,
                       size_t errlen)
{
    return open_for(node, o, 1, out, err, errlen);
}

int loom_async_for_open(loom_node *node, const loom_for_opts *o, loom_for **out, char *err,
                        size_t errlen)
{
    return open_for(node, o, 0, out, err, errlen);
}

int loom_for_run(loom_for *f, int64_t passes)
{
    if (!f || passes < 0) return LOOM_EINVAL;
    if (!f->sync) return loom_loop_run(f->loop, passes);
    int rc = 0;
    for (int64_t p = 0; p < passes && !rc; p++) /* one run a pass: a barrier between them */
        if (!(rc = loom_loop_run(f->loop, 1))) f->passes++;
    return rc;
}

int loom_for_values(loom_for *f, double *out)
{
    if (!f || !out) return LOOM_EINVAL;
    uint32_t array = f->sync && f->passes % 2 ? X1 : X0;
    return loom_pull_range(loom_loop_table(f->loop, array), 0, f->o.n, out);
}

void loom_for_close(loom_for *f)
{
    if (!f) return;
    loom_loop_close(f->loop);
    free(f);
}
