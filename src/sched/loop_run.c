/* loop_run: a planned loop on the workers of a job (loom/loop.h,
 * docs/LOOPS.md; Orion, wei-thesis-bosen-orion.txt 3.6-3.7).
 *
 * Opening a loop, every worker:
 *   1. plans it (loop_plan.c) and refuses what cannot run yet: serial
 *      plans, arrays keyed by neither the space index nor (2D) the time
 *      index or reached whole (A(*)), more than one rotated array, rows
 *      read before the iteration's own but in a wavefront, writes to the
 *      iteration space but to the iteration's own element (whose value the
 *      body may change: loop_run_one keeps it with the element), and
 *      malformed accumulators and buffers (loop_write.c); a preferred space
 *      index (loom_loop_opts.prefer_space) is taken where the plan allows;
 *   2. agrees on the blocks: each pushes the histogram of its elements'
 *      space and time coordinates (the time index skewed for a wavefront)
 *      into a sum table, and after a barrier all
 *      read the same totals and cut them alike (loom_loop_balance);
 *   3. exchanges elements: each sends every other worker the elements of
 *      that worker's space block (first their count, then them: two
 *      SCHED_BLOCK messages on an engine number of the loop's own), and keeps
 *      its own; then sorts them by time block and, inside one, in the loop's
 *      lexicographic order, so the order never depends on who was given what.
 *      A loop without dependences whose arrays are all reached whole keeps
 *      the elements where they were given (data parallelism: no block needs
 *      them) and only sorts them; so does a loop over a darray whose
 *      part_dim is its space index (loom_loop_opts.space), whose space
 *      blocks are then the darray's ranges (step 2 keeps the time blocks'
 *      cut only), and which writes its elements back into the darray after
 *      each run;
 *   4. opens a dense sum table per array and initialises its rows: those
 *      keyed by the space index (local) in memory, for the rows of its
 *      space block; the rotated array's rows of its time block pushed into
 *      the table, which the rotation engine reads at its first step; the
 *      rows of whole arrays pushed into their tables in shares by rank.
 *
 * Running: 1D, every worker calls the body on its elements in order, pass
 * after pass; a wavefront, loop_wave.c; 2D, the static engine of loom/sched.h rotates the
 * time-keyed array's blocks (worker w holds time block (w + s) mod W in step s, as the plan says)
 * and its update() calls the body on the elements of (w, that block). Whole arrays are read into
 * each worker's copy at a run's start (and after each flush of a buffer on them); the buffers are
 * flushed at the end of every block (a 1D pass is one) and of the run. At the end of a run each
 * worker pushes the change of its local rows since the last run, the accumulators are reduced, and
 * a barrier makes every table whole. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/darray.h"
#include "loom/error.h"
#include "loom/loop.h"
#include "loom/sched.h"
#include "sched/darray_impl.h"
#include "sched/loop_impl.h"
#include "sched/sched.h"

int loop_refuse(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

int loop_slot_of(const loom_loop *l, uint32_t array)
{
    for (size_t i = 0; i < l->narr; i++)
        if (l->arr[i].a.array == array) return (int)i;
    return -1;
}

/* Check the options and each array's accesses; set acc_arr and keys. */
static int check_opts(loom_loop *l, char *err, size_t errlen)
{
    const loom_loop_opts *o = &l->o;
    if (!o->body || (o->n && (!o->indices || !o->values)) || !o->extents ||
        (o->narrays && !o->arrays) || (o->nprefetch && !o->prefetch))
        return loop_refuse(err, errlen, LOOM_EINVAL,
                           "a loop needs a body, extents and its elements");
    int wave = loom_loop_plan_kind(l->plan) == LOOM_LOOP_WAVEFRONT;
    for (uint32_t v = 0; v < o->dims && v < LOOM_LOOP_MAX_DIMS; v++)
        if (!o->extents[v])
            return loop_refuse(err, errlen, LOOM_EINVAL, "index %u has extent 0", v);
    for (size_t i = 0; i < l->narr; i++) {
        const loom_loop_array *a = &l->arr[i].a;
        if (!a->table || !a->rows || !a->width || (unsigned)a->type > LOOM_I64)
            return loop_refuse(err, errlen, LOOM_EINVAL,
                               "array %u: a table name, rows, a width and type f32, f64, i32 or "
                               "i64 are needed",
                               a->array);
        l->arr[i].key = UINT32_MAX;
        l->arr[i].row_bytes = a->width * loom_type_size(a->type);
        l->arr[i].halo = 0;
    }
    for (size_t k = 0; k < o->nacc; k++) {
        const loom_access *x = &l->acc[k];
        int s = loop_slot_of(l, x->array);
        l->acc_arr[k] = s;
        if (s < 0) { /* the iteration space: read, or its own element written */
            int own = x->ndims == o->dims;
            for (uint32_t d = 0; d < x->ndims && own; d++)
                own = x->sub[d].kind == LOOM_SUB_INDEX && x->sub[d].index == d &&
                      x->sub[d].offset == 0;
            if (x->write && !own)
                return loop_refuse(
                    err, errlen, LOOM_EINVAL,
                    "access %zu writes array %u, which is not among the loop's arrays "
                    "(only the iteration space may be left out, and an iteration writes "
                    "only its own element of it, S(p0, p1, ...))",
                    k, x->array);
            l->acc_arr[k] = x->write ? LOOP_ACC_ELEMENT : LOOP_ACC_SPACE;
            continue;
        }
        loop_array *a = &l->arr[s];
        int whole = 1;
        for (uint32_t d = 0; d < x->ndims; d++) whole &= x->sub[d].kind == LOOM_SUB_ALL;
        if (whole) {
            if (x->write)
                return loop_refuse(err, errlen, LOOM_EINVAL,
                                   "access %zu writes all of array %u: every iteration would "
                                   "depend on every other; write it through a buffer",
                                   k, x->array);
            if (a->key != UINT32_MAX && a->key != LOOP_KEY_WHOLE)
                return loop_refuse(err, errlen, LOOM_EINVAL,
                                   "array %u is reached both whole and by loop index %u", x->array,
                                   a->key);
            a->key = LOOP_KEY_WHOLE;
            continue;
        }
        /* A(i, *), A(i, j + c), A(i, c); a wavefront also reads rows before
         * its own, A(i - k, ...), which the worker before sends (loop_wave.c) */
        int64_t off = x->sub[0].offset;
        int rowwise = x->sub[0].kind == LOOM_SUB_INDEX &&
                      (off == 0 || (wave && !x->write && off < 0 && off >= -LOOP_MAX_HALO));
        for (uint32_t d = 2; d < x->ndims; d++) rowwise &= x->sub[d].kind == LOOM_SUB_ALL;
        if (!rowwise)
            return loop_refuse(err, errlen, LOOM_EINVAL,
                               "access %zu of array %u: an array of rows is reached as A(index, "
                               "column, *...), its first subscript a loop index with offset 0 "
                               "(a wavefront also reads rows up to %d before), or whole as A(*)",
                               k, x->array, LOOP_MAX_HALO);
        if (-off > (int64_t)a->halo) a->halo = (uint32_t)-off;
        if (a->key != UINT32_MAX && a->key != x->sub[0].index)
            return loop_refuse(err, errlen, LOOM_EINVAL,
                               "array %u is reached by loop indices %u and %u: its rows follow one",
                               x->array, a->key, x->sub[0].index);
        a->key = x->sub[0].index;
        if (o->extents[a->key] > a->a.rows)
            return loop_refuse(err, errlen, LOOM_EINVAL,
                               "array %u has %llu rows, but index %u goes up to %llu", x->array,
                               (unsigned long long)a->a.rows, a->key,
                               (unsigned long long)o->extents[a->key] - 1);
    }
    for (size_t k = 0; k < o->nprefetch; k++) {
        const loom_loop_prefetch_decl *pd = &o->prefetch[k];
        int s = loop_slot_of(l, pd->array);
        if (s < 0 || !pd->rows_of || l->arr[s].pd.rows_of)
            return loop_refuse(err, errlen, LOOM_EINVAL, "prefetch declaration %zu: array %u %s", k,
                               pd->array,
                               s < 0          ? "is not among the loop's arrays"
                               : !pd->rows_of ? "has no rows_of function"
                                              : "is declared prefetched twice");
        l->arr[s].pd = *pd;
    }
    /* an array only a buffer writes is reached whole */
    for (size_t b = 0; b < o->nbuffers && o->buffers; b++) {
        int s = loop_slot_of(l, o->buffers[b].target);
        if (s >= 0 && l->arr[s].key == UINT32_MAX) l->arr[s].key = LOOP_KEY_WHOLE;
    }
    for (size_t i = 0; i < l->narr; i++)
        if (l->arr[i].key == UINT32_MAX)
            return loop_refuse(err, errlen, LOOM_EINVAL, "array %u is never accessed",
                               l->arr[i].a.array);
    return 0;
}

/* Whether an access of array slot s writes it. */
static int writes_array(const loom_loop *l, size_t s)
{
    for (size_t k = 0; k < l->o.nacc; k++)
        if (l->acc_arr[k] == (int)s && l->acc[k].write) return 1;
    return 0;
}

/* Roles by the plan (see the top). */
static int assign_roles(loom_loop *l, char *err, size_t errlen)
{
    loom_loop_kind kind = loom_loop_plan_kind(l->plan);
    if (kind != LOOM_LOOP_1D && kind != LOOM_LOOP_2D && kind != LOOM_LOOP_WAVEFRONT)
        return loop_refuse(err, errlen, LOOM_EINVAL, "the loop's plan cannot run yet (%s)",
                           loom_loop_plan_explain(l->plan));
    l->rotated = -1;
    for (size_t i = 0; i < l->narr; i++) {
        loop_array *a = &l->arr[i];
        if (a->key == LOOP_KEY_WHOLE) {
            a->role = a->pd.rows_of ? ROLE_PREFETCH : ROLE_WHOLE;
        } else if (a->pd.rows_of) {
            return loop_refuse(
                err, errlen, LOOM_EINVAL,
                "array %u is declared prefetched, but is reached by loop index %u: a "
                "prefetched array is declared whole, A(*), and read only",
                a->a.array, a->key);
        } else if (a->key == l->space) {
            a->role = ROLE_SPACE;
        } else if (kind == LOOM_LOOP_2D && a->key == l->time && l->rotated < 0) {
            a->role = ROLE_ROTATED;
            l->rotated = (int)i;
            if (a->a.rows < l->W)
                return loop_refuse(
                    err, errlen, LOOM_EINVAL,
                    "array %u has %llu rows, fewer than the %u workers it rotates among",
                    a->a.array, (unsigned long long)a->a.rows, l->W);
        } else if (!writes_array(l, i)) {
            /* read only: its rows stay on the servers, pulled by batch */
            a->role = ROLE_HOSTED;
            a->halo = 0;
        } else {
            return loop_refuse(
                err, errlen, LOOM_EINVAL,
                "array %u is written and keyed by loop index %u, which is neither the "
                "space index %u nor the time index of a 2D loop with one rotated array "
                "(a wavefront keeps all by the space index); only an array read so is "
                "hosted on the servers (%s)",
                a->a.array, a->key, l->space, loom_loop_plan_explain(l->plan));
        }
    }
    for (size_t i = 0; i < l->narr; i++)
        if (l->arr[i].halo > l->halo) l->halo = l->arr[i].halo;
    /* Iterations that share no element, and no array kept by blocks: each
     * worker runs the elements it was given (Orion's data parallelism). */
    l->stay = !loom_loop_plan_deps(l->plan);
    for (size_t i = 0; i < l->narr; i++)
        l->stay &= l->arr[i].role == ROLE_WHOLE || l->arr[i].role == ROLE_PREFETCH ||
                   l->arr[i].role == ROLE_HOSTED;
    return 0;
}

static uint32_t block_of(const size_t *bounds, uint32_t parts, int64_t c)
{
    uint32_t lo = 0, hi = parts; /* the last b with bounds[b] <= c */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if ((int64_t)bounds[mid] <= c)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Every worker's histograms added in a table, then cut alike. */
static int agree_bounds(loom_loop *l)
{
    /* time coordinates: the time index plus skew times the space index */
    uint64_t es = l->o.extents[l->space], et = l->o.extents[l->time] + (uint64_t)l->skew * (es - 1);
    char name[64];
    snprintf(name, sizeof name, "loom.loop.%u.histogram", l->id);
    loom_table_opts to = LOOM_TABLE_OPTS_DEFAULT;
    to.type = LOOM_I64;
    to.storage = LOOM_DENSE;
    to.key_end = es + et;
    to.consistency = LOOM_ASP;
    to.cache = 0;
    loom_table *t;
    int rc = loom_table_open(l->node, name, &to, &t);
    int64_t *h = calloc(es + et, sizeof *h);
    if (!rc && !h) rc = LOOM_ENOMEM;
    for (size_t i = 0; !rc && i < l->o.n; i++)
        for (uint32_t v = 0; v < l->dims && !rc; v++)
            if (l->o.indices[i * l->dims + v] < 0 ||
                (uint64_t)l->o.indices[i * l->dims + v] >= l->o.extents[v])
                rc = LOOM_EKEYRANGE;
    for (size_t i = 0; !rc && i < l->o.n; i++) {
        int64_t sc, tc;
        loom_loop_coords(l->plan, l->o.indices + i * l->dims, &sc, &tc);
        h[sc]++;
        h[es + (uint64_t)tc]++;
    }
    loom_ts ts;
    if (!rc && !(rc = loom_push_range_async(t, 0, es + et, h, &ts))) rc = loom_wait(l->node, ts);
    if (!rc) rc = loom_barrier(l->node);
    if (!rc) rc = loom_pull_range(t, 0, es + et, h);
    if (!rc) rc = loom_loop_balance((const uint64_t *)h, es, l->W, l->sb);
    if (!rc) rc = loom_loop_balance((const uint64_t *)h + es, et, l->W, l->tb);
    for (uint32_t w = 0; !rc && l->keep && w <= l->W; w++) l->sb[w] = l->o.space->bounds[w];
    free(h);
    if (!rc && l->halo) rc = loop_wave_bounds(l);
    if (rc || l->rotated < 0) return rc;
    /* The rotation engine wants every block to hold a row: nudge empty ranges
     * (rows >= W), and let the last one reach the array's last row. */
    size_t rows = l->arr[l->rotated].a.rows;
    l->tb[l->W] = rows;
    for (uint32_t b = 1; b < l->W; b++)
        if (l->tb[b] <= l->tb[b - 1]) l->tb[b] = l->tb[b - 1] + 1;
    for (uint32_t b = l->W - 1; b > 0; b--)
        if (l->tb[b] >= l->tb[b + 1]) l->tb[b] = l->tb[b + 1] - 1;
    return 0;
}

static int cmp_elem(const void *pa, const void *pb)
{
    const elem *a = pa, *b = pb;
    for (int v = 0; v <= LOOM_LOOP_MAX_DIMS; v++)
        if (a->key[v] != b->key[v]) return a->key[v] < b->key[v] ? -1 : 1;
    return a->bits < b->bits ? -1 : a->bits > b->bits;
}

/* Step 3 at the top: this worker ends with the elements of its space block,
 * sorted, and the offsets of their time blocks. */
static int exchange(loom_loop *l)
{
    uint32_t W = l->W, me = l->rank;
    size_t *count = calloc(W, sizeof *count), *fill = calloc(W, sizeof *fill);
    elem **out = calloc(W, sizeof *out);
    uint64_t *in = calloc(W, sizeof *in);
    int rc = count && fill && out && in ? 0 : LOOM_ENOMEM;
    for (size_t i = 0; !rc && i < l->o.n; i++)
        count[l->stay ? me : block_of(l->sb, W, l->o.indices[i * l->dims + l->space])]++;
    for (uint32_t w = 0; !rc && w < W; w++)
        if (!(out[w] = calloc(count[w] + 1, sizeof *out[w]))) rc = LOOM_ENOMEM;
    for (size_t i = 0; !rc && i < l->o.n; i++) {
        size_t at = i * l->dims;
        uint32_t w = l->stay ? me : block_of(l->sb, W, l->o.indices[at + l->space]);
        elem *e = &out[w][fill[w]++];
        int64_t sc, tc;
        loom_loop_coords(l->plan, l->o.indices + at, &sc, &tc);
        e->key[0] = l->rotated < 0 && !l->wave ? 0 : (int64_t)block_of(l->tb, W, tc);
        memcpy(&e->key[1], l->o.indices + at, l->dims * sizeof *l->o.indices);
        memcpy(&e->bits, &l->o.values[i], 8);
    }
    /* to each other worker: the count (version 0), then the elements (1) */
    for (uint32_t w = 0; !rc && w < W; w++) {
        uint64_t c = count[w];
        if (w == me) continue;
        rc = sched_send_block(l->node, l->id, (int)w, me, 0, &c, 8, 0);
        if (!rc && c)
            rc = sched_send_block(l->node, l->id, (int)w, me, 1, out[w], c * sizeof(elem), 0);
    }
    size_t total = count[me];
    for (uint32_t w = 0; !rc && w < W; w++) {
        if (w == me) continue;
        rc = sched_take_block(l->node, l->id, (int)w, w, 0, &in[w], 8, 0);
        if (!rc && in[w] > SIZE_MAX / sizeof(elem) - total - 1) rc = LOOM_EPROTO;
        if (!rc) total += in[w];
    }
    if (!rc && !(l->el = malloc((total + 1) * sizeof *l->el))) rc = LOOM_ENOMEM;
    if (!rc) memcpy(l->el, out[me], count[me] * sizeof *l->el);
    size_t at = count[me];
    for (uint32_t w = 0; !rc && w < W; w++) {
        if (w == me || !in[w]) continue;
        rc = sched_take_block(l->node, l->id, (int)w, w, 1, l->el + at, in[w] * sizeof(elem), 0);
        at += in[w];
    }
    for (uint32_t w = 0; out && w < W; w++) free(out[w]);
    free(out);
    free(count);
    free(fill);
    free(in);
    if (rc) return rc;
    l->n = total;
    qsort(l->el, l->n, sizeof *l->el, cmp_elem);
    for (uint32_t b = 0, i = 0; b <= W; b++) {
        while (i < l->n && l->el[i].key[0] < (int64_t)b) i++;
        l->bucket[b] = i;
    }
    l->bucket[W] = l->n;
    return 0;
}

static void init_rows(loom_loop *l, const loop_array *a, uint64_t lo, uint64_t hi, uint8_t *rows)
{
    for (uint64_t r = lo; a->a.init && r < hi; r++)
        a->a.init(l->o.user, a->a.array, r, rows + (r - lo) * a->row_bytes);
}

/* Step 4 at the top. */
static int open_arrays(loom_loop *l)
{
    int rc = 0;
    for (size_t i = 0; i < l->narr && !rc; i++) {
        loop_array *a = &l->arr[i];
        loom_table_opts to = LOOM_TABLE_OPTS_DEFAULT;
        to.type = a->a.type;
        to.width = a->a.width;
        to.storage = LOOM_DENSE;
        to.key_end = a->a.rows;
        to.consistency = LOOM_ASP; /* what the rotation engine needs */
        to.cache = 0;
        rc = loom_table_open(l->node, a->a.table, &to, &a->t);
        uint64_t lo, hi;
        if (a->role == ROLE_SPACE) {
            lo = l->sb[l->rank];
            hi = l->rank + 1 == l->W ? a->a.rows : l->sb[l->rank + 1];
        } else if (a->role == ROLE_WHOLE || a->role == ROLE_PREFETCH || a->role == ROLE_HOSTED) {
            /* each worker starts a share of the rows */
            lo = a->a.rows * l->rank / l->W;
            hi = a->a.rows * (l->rank + 1) / l->W;
        } else {
            lo = l->tb[l->rank];
            hi = l->tb[l->rank + 1];
        }
        size_t bytes = (size_t)(hi - lo) * a->row_bytes + 1;
        uint8_t *rows = rc ? NULL : calloc(1, bytes);
        if (!rc && !rows) rc = LOOM_ENOMEM;
        if (rc) break;
        init_rows(l, a, lo, hi, rows);
        if (a->role == ROLE_SPACE) {
            a->lo = lo, a->hi = hi, a->rows = rows;
            if (!(a->pushed = calloc(1, bytes))) rc = LOOM_ENOMEM;
        } else { /* the rotated and whole arrays' rows start in the table */
            loom_ts ts;
            if (hi > lo && !(rc = loom_push_range_async(a->t, lo, hi, rows, &ts)))
                rc = loom_wait(l->node, ts);
            free(rows);
            if (a->role != ROLE_ROTATED) a->lo = 0, a->hi = a->a.rows;
            if (!rc && a->role == ROLE_WHOLE && /* the worker's copy */
                !(a->rows = malloc(a->a.rows * a->row_bytes)))
                rc = LOOM_ENOMEM;
        }
    }
    return rc ? rc : loom_barrier(l->node);
}

/* One iteration: the rows its accesses touch, then the body, then the
 * buffers' count. task: the rotated block held (2D), or NULL. */
int loop_run_one(loom_loop *l, elem *e, const loom_sched_task *task)
{
    const int64_t *x = &e->key[1];
    double v, mine; /* the element's value: as given to the body, and as it may write it */
    memcpy(&v, &e->bits, 8);
    mine = v;
    for (size_t k = 0; k < l->o.nacc; k++) {
        int s = l->acc_arr[k];
        if (s < 0) {
            l->rowptr[k] = s == LOOP_ACC_ELEMENT ? &mine : NULL;
            continue;
        }
        loop_array *a = &l->arr[s];
        if (a->role == ROLE_WHOLE) {
            l->rowptr[k] = a->rows;
            continue;
        }
        if (a->role == ROLE_PREFETCH) {
            int rc = 0;
            if (!(l->rowptr[k] = loop_prefetch_at(l, a, (size_t)(e - l->el), &rc))) return rc;
            continue;
        }
        const loom_access *ac = &l->acc[k];
        int64_t r = x[a->key] + ac->sub[0].offset;
        uint8_t *row;
        if (a->role == ROLE_HOSTED) { /* the batch holds every row its subscripts name */
            int rc = 0;
            if (!loop_prefetch_at(l, a, (size_t)(e - l->el), &rc)) return rc;
        }
        if (r < 0)
            row = NULL; /* before the array's first row: the body sees NULL */
        else if (a->role == ROLE_HOSTED)
            row = (uint8_t *)loop_prefetch_value(a, (uint64_t)r);
        else if (a->role == ROLE_ROTATED)
            row = (uint8_t *)task->block.rows + ((uint64_t)r - task->block.begin) * a->row_bytes;
        else if ((uint64_t)r < a->lo) /* a row of the worker before (wavefront) */
            row = a->halo_rows + ((uint64_t)r - (a->lo - l->halo)) * a->row_bytes;
        else
            row = a->rows + ((uint64_t)r - a->lo) * a->row_bytes;
        if (row && ac->ndims > 1 && ac->sub[1].kind != LOOM_SUB_ALL) { /* one column */
            int64_t c =
                ac->sub[1].offset + (ac->sub[1].kind == LOOM_SUB_INDEX ? x[ac->sub[1].index] : 0);
            size_t esize = a->row_bytes / a->a.width;
            row = c < 0 || (uint64_t)c >= a->a.width ? NULL : row + (size_t)c * esize;
        }
        l->rowptr[k] = row;
    }
    uint64_t refused = l->refused;
    l->o.body(l->o.user, x, v, l->rowptr);
    memcpy(&e->bits, &mine, 8);
    return l->refused != refused ? LOOM_EKEYRANGE : loop_after_body(l);
}

/* A block of a 2D step; its end flushes the buffers (Orion: the end of an
 * iteration-space partition). */
static int update(void *user, const loom_sched_task *task)
{
    loom_loop *l = user;
    int rc = 0;
    l->pass = task->iteration; /* the engine's iterations are the loop's passes */
    l->blk_end = l->bucket[task->block.index + 1];
    for (size_t i = l->bucket[task->block.index]; !rc && i < l->bucket[task->block.index + 1]; i++)
        rc = loop_run_one(l, &l->el[i], task);
    return rc ? rc : loop_flush_all(l);
}

static int open_engine(loom_loop *l)
{
    uint64_t *bounds = malloc((l->W + 1) * sizeof *bounds);
    if (!bounds) return LOOM_ENOMEM;
    for (uint32_t b = 0; b <= l->W; b++) bounds[b] = l->tb[b];
    loom_sched_static_opts so = LOOM_SCHED_STATIC_OPTS_DEFAULT;
    so.bounds = bounds;
    so.update = update;
    so.user = l;
    /* A run's passes hand the blocks on from one pass to the next: the table
     * is read at the run's start and written at its end only (a pass of
     * their own, pulling and pushing the whole array, would cost more than
     * many passes' hand-overs; docs/SCHED.md, keep_blocks). */
    so.keep_blocks = 1;
    int rc = loom_sched_static_open(l->arr[l->rotated].t, &so, &l->engine);
    free(bounds);
    return rc;
}

/* The iteration space from o.space: its dimensions, box and this worker's
 * elements as the loop's, their values as doubles (the body's `value`):
 * those of an array of another type converted (exact but for int64 past
 * 2^53), and written back by darray_set_local's rounding. */
static int take_darray(loom_loop *l, char *err, size_t errlen)
{
    loom_darray *d = l->o.space;
    if (l->o.indices || l->o.values || l->o.n)
        return loop_refuse(err, errlen, LOOM_EINVAL,
                           "the iteration space is given both as a darray and as elements");
    if (d->width != 1 || (l->o.dims && l->o.dims != d->dims))
        return loop_refuse(err, errlen, LOOM_EINVAL,
                           "the darray of the iteration space has %u dimensions and %u values "
                           "an element; the loop wants %u and 1",
                           d->dims, d->width, l->o.dims ? l->o.dims : d->dims);
    for (uint32_t v = 0; l->o.extents && v < d->dims; v++)
        if (l->o.extents[v] != d->ext[v])
            return loop_refuse(err, errlen, LOOM_EINVAL,
                               "extent %u of the loop (%llu) is not the darray's (%llu)", v,
                               (unsigned long long)l->o.extents[v], (unsigned long long)d->ext[v]);
    memcpy(l->ext, d->ext, d->dims * sizeof *l->ext);
    l->o.dims = d->dims;
    l->o.extents = l->ext;
    const void *values;
    l->o.n = loom_darray_local(d, &l->o.indices, &values);
    if (l->o.n != d->n) return LOOM_ENOMEM;
    if (d->type == LOOM_DARRAY_F64) {
        l->o.values = values;
        return 0;
    }
    if (!(l->space_val = malloc((l->o.n + 1) * sizeof *l->space_val))) return LOOM_ENOMEM;
    for (size_t i = 0; i < l->o.n; i++)
        l->space_val[i] = darray_value_get(d->type, (const unsigned char *)values + i * d->vsize);
    l->o.values = l->space_val;
    return 0;
}

/* Whether the darray's ranges can be the space blocks, and a loop that
 * writes its elements keeps them on their workers. */
static int keep_darray(loom_loop *l, char *err, size_t errlen)
{
    const loom_darray *d = l->o.space;
    for (size_t k = 0; k < l->o.nacc; k++) l->write_el |= l->acc_arr[k] == LOOP_ACC_ELEMENT;
    l->keep = !l->stay && !l->wave && l->space == d->part_dim;
    if (l->write_el && !l->keep && !l->stay)
        return loop_refuse(err, errlen, LOOM_EINVAL,
                           "the loop writes the elements of its darray, but the darray's "
                           "part_dim %u cannot be its space index (%s): they would leave their "
                           "workers",
                           d->part_dim, loom_loop_plan_explain(l->plan));
    return 0;
}

/* A run's element values back into the darray (its elements, reordered). */
static int write_back(loom_loop *l)
{
    int64_t *idx = malloc((l->n + 1) * l->dims * sizeof *idx);
    double *val = malloc((l->n + 1) * sizeof *val);
    int rc = idx && val ? 0 : LOOM_ENOMEM;
    for (size_t i = 0; !rc && i < l->n; i++) {
        memcpy(idx + i * l->dims, &l->el[i].key[1], l->dims * sizeof *idx);
        memcpy(val + i, &l->el[i].bits, sizeof *val);
    }
    if (!rc) rc = darray_set_local(l->o.space, idx, val, l->n);
    free(idx);
    free(val);
    return rc;
}

int loom_loop_open(loom_node *node, const loom_loop_opts *o, loom_loop **out, char *err,
                   size_t errlen)
{
    if (!node || !o || !out)
        return loop_refuse(err, errlen, LOOM_EINVAL, "no node, options or place for the loop");
    *out = NULL;
    if (!loom_is_worker(node)) return loop_refuse(err, errlen, LOOM_EROLE, "loops run on workers");
    loom_loop *l = calloc(1, sizeof *l);
    if (!l) return LOOM_ENOMEM;
    l->node = node;
    l->o = *o;
    l->dims = o->dims ? o->dims : o->space ? o->space->dims : 0;
    l->rank = (uint32_t)loom_rank(node);
    l->W = (uint32_t)loom_num_workers(node);
    l->narr = o->narrays;
    int rc = o->space ? take_darray(l, err, errlen) : 0;
    if (!rc)
        rc = loom_loop_plan_make(l->o.dims, o->acc, o->nacc, o->ordered, l->o.extents, &l->plan,
                                 err, errlen);
    if (!rc) {
        l->acc = malloc((o->nacc + 1) * sizeof *l->acc);
        l->arr = calloc(l->narr + 1, sizeof *l->arr);
        l->acc_arr = malloc((o->nacc + 1) * sizeof *l->acc_arr);
        l->rowptr = calloc(o->nacc + 1, sizeof *l->rowptr);
        l->sb = calloc(l->W + 1, sizeof *l->sb);
        l->tb = calloc(l->W + 1, sizeof *l->tb);
        l->bucket = calloc(l->W + 1, sizeof *l->bucket);
        if (!l->acc || !l->arr || !l->acc_arr || !l->rowptr || !l->sb || !l->tb || !l->bucket)
            rc = LOOM_ENOMEM;
    }
    if (!rc && o->prefer_space && !loom_loop_plan_prefer_space(l->plan, o->prefer_space - 1) &&
        o->prefer_space - 1 >= l->o.dims)
        rc = loop_refuse(err, errlen, LOOM_EINVAL,
                         "prefer_space names index %u, but the loop has %u", o->prefer_space - 1,
                         l->o.dims);
    if (!rc && o->space && !o->prefer_space)
        loom_loop_plan_prefer_space(l->plan, o->space->part_dim);
    if (!rc) {
        memcpy(l->acc, o->acc, o->nacc * sizeof *l->acc);
        for (size_t i = 0; i < l->narr; i++) l->arr[i].a = o->arrays[i];
        loom_loop_plan_axes(l->plan, &l->space, &l->time, &l->skew);
        l->wave = loom_loop_plan_kind(l->plan) == LOOM_LOOP_WAVEFRONT;
        rc = check_opts(l, err, errlen);
    }
    if (!rc) rc = assign_roles(l, err, errlen);
    if (!rc && o->space) rc = keep_darray(l, err, errlen);
    if (!rc) rc = loop_write_open(l, err, errlen);
    /* From here every worker takes part in collective steps: a failure stops
     * this worker, and the others fail with the job. */
    if (!rc) {
        l->id = sched_next_engine(node);
        rc = agree_bounds(l);
        if (rc == LOOM_EKEYRANGE)
            loop_refuse(err, errlen, rc, "an element's index is outside the loop's extents");
        else if (rc == LOOM_EINVAL)
            loop_refuse(err, errlen, rc,
                        "the wavefront's %u workers but the last each pass on %u rows of the "
                        "space index, more than its extent %llu",
                        l->W, l->halo, (unsigned long long)l->o.extents[l->space]);
    }
    if (!rc) rc = exchange(l);
    if (!rc) rc = open_arrays(l);
    if (!rc) rc = loop_buffers_ready(l);
    if (!rc) rc = loop_prefetch_open(l);
    if (!rc && l->halo) rc = loop_wave_open(l);
    if (!rc && l->rotated >= 0) rc = open_engine(l);
    if (rc) {
        if (err && errlen && !err[0]) snprintf(err, errlen, "%s", loom_strerror(rc));
        loom_loop_close(l);
        return rc;
    }
    *out = l;
    return 0;
}

/* Each local array's change since the last run, into its table. */
static int push_local(loom_loop *l)
{
    for (size_t i = 0; i < l->narr; i++) {
        loop_array *a = &l->arr[i];
        if (a->role != ROLE_SPACE || a->hi == a->lo) continue;
        size_t n = (size_t)(a->hi - a->lo) * a->a.width, bytes = n * loom_type_size(a->a.type);
        loop_diff(a->a.type, a->pushed, a->rows, a->pushed, n);
        loom_ts ts;
        int rc = loom_push_range_async(a->t, a->lo, a->hi, a->pushed, &ts);
        if (!rc) rc = loom_wait(l->node, ts);
        memcpy(a->pushed, a->rows, bytes);
        if (rc) return rc;
    }
    return 0;
}

int loom_loop_run(loom_loop *l, int64_t passes)
{
    if (!l || passes < 0) return LOOM_EINVAL;
    int rc = 0;
    loop_accum_reset(l);
    for (size_t i = 0; i < l->narr && !rc; i++)
        if (l->arr[i].role == ROLE_WHOLE) rc = loop_read_whole(&l->arr[i]);
    /* Merges into a whole array change it on the servers: no worker may
     * flush before every worker has read the values the run starts from
     * (SyncFor, loom/strads.h, depends on it). */
    int merges_whole = 0;
    for (size_t k = 0; k < l->o.nbuffers; k++)
        merges_whole |=
            l->buf[k].target->role == ROLE_WHOLE || l->buf[k].target->role == ROLE_PREFETCH;
    /* A 1D run's first batch of each prefetched array is pulled before that
     * barrier too: a run whose buffers flush only at its end then reads what
     * a whole copy would have. */
    loop_prefetch_drop(l);
    l->blk_end = l->n;
    for (size_t i = 0; i < l->narr && !rc && !l->engine && !l->wave && l->n; i++)
        if ((l->arr[i].role == ROLE_PREFETCH || l->arr[i].role == ROLE_HOSTED) &&
            !loop_prefetch_at(l, &l->arr[i], 0, &rc) && !rc)
            rc = LOOM_EPROTO;
    if (!rc && merges_whole) rc = loom_barrier(l->node);
    int64_t first_pass = l->pass;
    if (!rc && l->engine) {
        rc = loom_sched_run(l->engine, passes);
    } else if (!rc && l->wave) {
        rc = loop_wave_run(l, passes);
    } else if (!rc) { /* 1D: a pass is the worker's one block */
        for (int64_t p = 0; p < passes && !rc; p++, l->pass++) {
            for (size_t i = 0; i < l->n && !rc; i++) rc = loop_run_one(l, &l->el[i], NULL);
            if (!rc) rc = loop_flush_all(l);
            if (!rc && l->clock_passes) rc = loom_clock(l->node);
        }
    }
    l->pass = first_pass + passes; /* also where a worker has no block to run */
    if (!rc) rc = loop_flush_all(l);
    if (!rc) rc = push_local(l);
    if (!rc) rc = loop_accum_reduce(l);
    if (!rc && l->write_el && l->o.space) rc = write_back(l);
    l->runs++;
    return rc ? rc : loom_barrier(l->node);
}

int64_t loom_loop_pass(const loom_loop *l)
{
    return l ? l->pass : -1;
}

const loom_loop_plan *loom_loop_get_plan(const loom_loop *l)
{
    return l->plan;
}

loom_table *loom_loop_table(loom_loop *l, uint32_t array)
{
    int s = l ? loop_slot_of(l, array) : -1;
    return s < 0 ? NULL : l->arr[s].t;
}

size_t loom_loop_elements(const loom_loop *l)
{
    return l->n;
}

int loom_loop_element(const loom_loop *l, size_t i, int64_t *index, double *value)
{
    if (!l || i >= l->n) return LOOM_EINVAL;
    if (index) memcpy(index, &l->el[i].key[1], l->dims * sizeof *index);
    if (value) memcpy(value, &l->el[i].bits, 8);
    return 0;
}

void loom_loop_bounds(const loom_loop *l, size_t *space, size_t *time)
{
    if (space) memcpy(space, l->sb, (l->W + 1) * sizeof *space);
    if (time) memcpy(time, l->tb, (l->W + 1) * sizeof *time);
}

void loom_loop_close(loom_loop *l)
{
    if (!l) return;
    if (l->engine) loom_sched_close(l->engine);
    for (size_t i = 0; l->arr && i < l->narr; i++) {
        free(l->arr[i].rows);
        free(l->arr[i].pushed);
    }
    loop_write_close(l);
    loop_prefetch_close(l);
    for (size_t i = 0; l->arr && i < l->narr; i++) free(l->arr[i].halo_rows);
    free(l->halo_msg);
    loom_loop_plan_free(l->plan);
    free(l->acc);
    free(l->arr);
    free(l->acc_arr);
    free(l->rowptr);
    free(l->sb);
    free(l->tb);
    free(l->bucket);
    free(l->el);
    free(l->space_val);
    free(l);
}
