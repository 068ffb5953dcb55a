/* darray: distributed arrays, made and spread over the workers (loom/darray.h;
 * Orion's DistArrays, wei-thesis-bosen-orion.txt 3.4 and 3.7).
 *
 * Every constructor ends in darray_settle(), collective:
 *   1. the workers exchange one small row each (its error code, its count,
 *      one more than its largest index per dimension) worker to worker
 *      (SCHED_BLOCK messages on the array's own engine number, as a loop's
 *      elements travel), so that a failure on one worker fails every
 *      worker's call instead of leaving the others waiting, and all agree on
 *      the box and the total;
 *   2. the ranges of part_dim are cut: a dense array's rows evenly; a sparse
 *      array's by a histogram of its elements' coordinates, added up in a
 *      sum table on the servers (at most HIST_BINS bins: a box of a billion
 *      rows must not mean a billion-entry histogram) and balanced by
 *      loom_loop_balance, Orion's histogram partitioning;
 *   3. every element goes to the worker whose range holds it (a count, then
 *      the elements packed to dims + 1 words), and each worker sorts what it
 *      holds by index, so nothing depends on who read which line.
 * The files' side (text, save, load) is darray_file.c. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rand.h"
#include "io/textfile.h"
#include "loom/darray.h"
#include "loom/error.h"
#include "loom/loop.h"
#include "loom/table.h"
#include "ps/rowops.h"
#include "sched/darray_impl.h"
#include "sched/sched.h"

#define HIST_BINS 65536 /* at most this many bins in a sparse array's histogram */

/* ---- element lists ---- */

int darray_elems_add(darray_elems *l, const int64_t *index, const void *values, char *why,
                     size_t whylen)
{
    for (uint32_t k = 0; k < l->dims; k++)
        if (index[k] < 0 || (l->ext && l->ext[k] && (uint64_t)index[k] >= l->ext[k])) {
            textfile_set_err(
                why, whylen, "index %lld of dimension %u lies outside [0, %llu)",
                (long long)index[k], k,
                (unsigned long long)(l->ext && l->ext[k] ? l->ext[k] : (uint64_t)INT64_MAX));
            return LOOM_EKEYRANGE;
        }
    size_t row = (size_t)l->width * darray_type_size(l->type);
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        darray_elem *e = cap < SIZE_MAX / sizeof *e ? realloc(l->e, cap * sizeof *e) : NULL;
        if (e) l->e = e;
        unsigned char *v = e && cap < SIZE_MAX / row ? realloc(l->v, cap * row) : NULL;
        if (!v) {
            textfile_set_err(why, whylen, "out of memory");
            return LOOM_ENOMEM;
        }
        l->v = v;
        l->cap = cap;
    }
    darray_elem *e = &l->e[l->n];
    memset(e, 0, sizeof *e);
    memcpy(e->key, index, l->dims * sizeof *index);
    e->width = l->width;
    e->type = l->type;
    memcpy(l->v + l->n * row, values, row);
    l->n++;
    return 0;
}

void darray_elems_free(darray_elems *l)
{
    free(l->e);
    free(l->v);
    l->e = NULL;
    l->v = NULL;
    l->n = l->cap = 0;
}

int loom_darray_emit(loom_darray_sink *s, const int64_t *index, const void *values)
{
    if (!s || !index || !values) return LOOM_EINVAL;
    return darray_elems_add(s->list, index, values, s->why, sizeof s->why);
}

int loom_darray_refuse(loom_darray_sink *s, const char *fmt, ...)
{
    if (s && fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->why, sizeof s->why, fmt, ap);
        va_end(ap);
    }
    return LOOM_EINVAL;
}

static int cmp_elem(const void *pa, const void *pb)
{
    const darray_elem *a = pa, *b = pb;
    for (int k = 0; k < LOOM_DARRAY_MAX_DIMS; k++)
        if (a->key[k] != b->key[k]) return a->key[k] < b->key[k] ? -1 : 1;
    uint32_t size = darray_type_size(a->type);
    for (uint32_t c = 0; c < a->width; c++) {
        int r = darray_value_cmp(a->type, a->v + c * size, b->v + c * size);
        if (r) return r;
    }
    return 0;
}

void darray_elems_sort(darray_elems *l)
{
    size_t row = (size_t)l->width * darray_type_size(l->type);
    for (size_t i = 0; i < l->n; i++) l->e[i].v = l->v + i * row;
    if (l->n) qsort(l->e, l->n, sizeof *l->e, cmp_elem); /* an empty list has no array */
}

/* ---- making ---- */

int darray_new(loom_node *node, const loom_darray_opts *o, int dense, loom_darray **out, char *err,
               size_t errlen)
{
    if (!node || !o || !out) {
        textfile_set_err(err, errlen, "darray: no node, options or result");
        return LOOM_EINVAL;
    }
    *out = NULL;
    if (!loom_is_worker(node)) {
        textfile_set_err(err, errlen, "darray: only workers hold distributed arrays");
        return LOOM_EROLE;
    }
    if (o->dims < 1 || o->dims > LOOM_DARRAY_MAX_DIMS || o->part_dim >= o->dims) {
        textfile_set_err(err, errlen,
                         "darray: %u dimensions (1 to %d) and part_dim %u (below them)", o->dims,
                         LOOM_DARRAY_MAX_DIMS, o->part_dim);
        return LOOM_EINVAL;
    }
    if (!darray_type_size(o->type)) {
        textfile_set_err(err, errlen,
                         "darray: value type %d (LOOM_DARRAY_F64, F32, I32 or I64, 0 to 3)",
                         (int)o->type);
        return LOOM_EINVAL;
    }
    if (o->width > LOOM_DARRAY_MAX_WIDTH) {
        textfile_set_err(err, errlen, "darray: width %u (1 to %d values an element)", o->width,
                         LOOM_DARRAY_MAX_WIDTH);
        return LOOM_EINVAL;
    }
    for (uint32_t k = 0; k < o->dims; k++)
        if (o->extents[k] > (uint64_t)INT64_MAX) {
            textfile_set_err(err, errlen, "darray: extent %u (%llu) above 2^63 - 1", k,
                             (unsigned long long)o->extents[k]);
            return LOOM_EINVAL;
        }
    /* Workers send to each other from the first step on, and a node drops
     * what comes from a worker before it knows the job's roster: after a
     * barrier every worker has started. */
    int rc = loom_barrier(node);
    if (rc) {
        textfile_set_err(err, errlen, "darray: the barrier before making the array failed (%s)",
                         loom_strerror(rc));
        return rc;
    }
    loom_darray *d = calloc(1, sizeof *d);
    uint32_t W = (uint32_t)loom_num_workers(node);
    if (d) d->bounds = calloc(W + 1, sizeof *d->bounds);
    if (!d || !d->bounds) {
        free(d);
        textfile_set_err(err, errlen, "darray: out of memory");
        return LOOM_ENOMEM;
    }
    d->node = node;
    d->engine = sched_next_engine(node);
    d->W = W;
    d->rank = (uint32_t)loom_rank(node);
    d->dims = o->dims;
    d->part_dim = o->part_dim;
    d->width = o->width ? o->width : 1;
    d->type = o->type;
    d->vsize = darray_type_size(o->type);
    d->dense = dense;
    memcpy(d->ext, o->extents, o->dims * sizeof *o->extents);
    *out = d;
    return 0;
}

/* Sends `bytes` to worker w as exchange `version` (a count first, then the
 * bytes when there are any), or takes them from it. */
static int send_to(loom_darray *d, uint32_t w, uint64_t version, const void *p, uint64_t bytes)
{
    int rc = sched_send_block(d->node, d->engine, (int)w, d->rank, 2 * version, &bytes, 8, 0);
    if (!rc && bytes)
        rc = sched_send_block(d->node, d->engine, (int)w, d->rank, 2 * version + 1, p,
                              (size_t)bytes, 0);
    return rc;
}

static int take_count(loom_darray *d, uint32_t w, uint64_t version, uint64_t *bytes)
{
    return sched_take_block(d->node, d->engine, (int)w, w, 2 * version, bytes, 8, 0);
}

static int take_bytes(loom_darray *d, uint32_t w, uint64_t version, void *p, uint64_t bytes)
{
    return bytes ? sched_take_block(d->node, d->engine, (int)w, w, 2 * version + 1, p,
                                    (size_t)bytes, 0)
                 : 0;
}

int darray_allgather(loom_darray *d, const int64_t *mine, size_t words, int64_t *all)
{
    uint64_t version = d->seq++, bytes = words * sizeof *mine;
    int rc = 0;
    for (uint32_t w = 0; !rc && w < d->W; w++)
        if (w != d->rank) rc = send_to(d, w, version, mine, bytes);
    memcpy(all + (size_t)d->rank * words, mine, (size_t)bytes);
    for (uint32_t w = 0; !rc && w < d->W; w++) {
        if (w == d->rank) continue;
        uint64_t got;
        if (!(rc = take_count(d, w, version, &got)) && got != bytes) rc = LOOM_EPROTO;
        if (!rc) rc = take_bytes(d, w, version, all + (size_t)w * words, bytes);
    }
    return rc;
}

int darray_agree_rc(loom_darray *d, int rc, char *err, size_t errlen)
{
    int64_t mine = rc, *all = calloc(d->W, sizeof *all);
    if (!all) return LOOM_ENOMEM; /* the others then wait: the node is failing anyway */
    int xrc = darray_allgather(d, &mine, 1, all);
    for (uint32_t w = 0; !xrc && w < d->W; w++)
        if (all[w]) {
            xrc = (int)all[w];
            if (w != d->rank)
                textfile_set_err(err, errlen,
                                 "darray: worker %u could not make its part of the array (%s)", w,
                                 loom_strerror(xrc));
            break;
        }
    free(all);
    return xrc;
}

/* Step 1: the rows (rc, count, one past the largest index per dimension). */
static int agree_box(loom_darray *d, const darray_elems *l, int failed, char *err, size_t errlen)
{
    size_t words = 2 + d->dims;
    int64_t mine[2 + LOOM_DARRAY_MAX_DIMS] = {failed, (int64_t)l->n};
    for (size_t i = 0; i < l->n; i++)
        for (uint32_t k = 0; k < d->dims; k++)
            if (l->e[i].key[k] + 1 > mine[2 + k]) mine[2 + k] = l->e[i].key[k] + 1;
    int64_t *all = calloc(d->W, words * sizeof *all);
    if (!all) return LOOM_ENOMEM;
    int rc = darray_allgather(d, mine, words, all);
    for (uint32_t w = 0; !rc && w < d->W; w++)
        if (all[w * words]) {
            rc = (int)all[w * words];
            if (w != d->rank)
                textfile_set_err(err, errlen,
                                 "darray: worker %u could not make its part of the array (%s)", w,
                                 loom_strerror(rc));
        }
    int from_elements[LOOM_DARRAY_MAX_DIMS] = {0}; /* extents not given */
    for (uint32_t k = 0; k < d->dims; k++) from_elements[k] = !d->dense && !d->ext[k];
    d->total = 0;
    for (uint32_t w = 0; !rc && w < d->W; w++) {
        d->total += (uint64_t)all[w * words + 1];
        for (uint32_t k = 0; k < d->dims; k++)
            if (from_elements[k] && (uint64_t)all[w * words + 2 + k] > d->ext[k])
                d->ext[k] = (uint64_t)all[w * words + 2 + k];
    }
    free(all);
    return rc;
}

/* Rows [0, E) cut evenly: worker w from floor(w E / W), without overflow. */
static void even_bounds(loom_darray *d, uint64_t E)
{
    for (uint32_t w = 0; w <= d->W; w++) d->bounds[w] = E / d->W * w + E % d->W * w / d->W;
}

/* Step 2 for a sparse array. */
static int histogram_bounds(loom_darray *d, const darray_elems *l)
{
    uint64_t E = d->ext[d->part_dim];
    if (!E || !d->total) {
        even_bounds(d, E);
        return 0;
    }
    uint64_t step = (E + HIST_BINS - 1) / HIST_BINS, bins = (E + step - 1) / step;
    char name[64];
    snprintf(name, sizeof name, "loom.darray.%u.histogram", d->engine);
    loom_table_opts to = LOOM_TABLE_OPTS_DEFAULT;
    to.type = LOOM_I64;
    to.storage = LOOM_DENSE;
    to.key_end = bins;
    to.consistency = LOOM_ASP;
    to.cache = 0;
    loom_table *t;
    int rc = loom_table_open(d->node, name, &to, &t);
    int64_t *h = calloc(bins, sizeof *h);
    size_t *cut = calloc(d->W + 1, sizeof *cut);
    if (!rc && (!h || !cut)) rc = LOOM_ENOMEM;
    for (size_t i = 0; !rc && i < l->n; i++) h[(uint64_t)l->e[i].key[d->part_dim] / step]++;
    loom_ts ts;
    if (!rc && !(rc = loom_push_range_async(t, 0, bins, h, &ts))) rc = loom_wait(d->node, ts);
    if (!rc) rc = loom_barrier(d->node);
    if (!rc) rc = loom_pull_range(t, 0, bins, h);
    if (!rc) rc = loom_loop_balance((const uint64_t *)h, (size_t)bins, d->W, cut);
    for (uint32_t w = 0; !rc && w <= d->W; w++)
        d->bounds[w] = cut[w] * step < E ? cut[w] * step : E;
    free(h);
    free(cut);
    return rc;
}

static uint32_t holder_of(const loom_darray *d, int64_t c)
{
    uint32_t lo = 0, hi = d->W; /* the last w with bounds[w] <= c */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (d->bounds[mid] <= (uint64_t)c)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* An element between workers: its index (dims int64), then its width
 * values, unaligned. */
static size_t record_bytes(const loom_darray *d)
{
    return d->dims * sizeof(int64_t) + (size_t)d->width * d->vsize;
}

/* Element i of l (not yet sorted) packed to a record. */
static void pack(const darray_elems *l, size_t i, unsigned char *out)
{
    size_t row = (size_t)l->width * darray_type_size(l->type);
    memcpy(out, l->e[i].key, l->dims * sizeof(int64_t));
    memcpy(out + l->dims * sizeof(int64_t), l->v + i * row, row);
}

/* n records appended to l. */
static int unpack(const unsigned char *in, size_t n, darray_elems *l)
{
    size_t rec = l->dims * sizeof(int64_t) + (size_t)l->width * darray_type_size(l->type);
    int64_t index[LOOM_DARRAY_MAX_DIMS];
    int rc = 0;
    char why[160];
    for (size_t i = 0; !rc && i < n; i++, in += rec) {
        memcpy(index, in, l->dims * sizeof *index);
        rc = darray_elems_add(l, index, in + l->dims * sizeof *index, why, sizeof why);
    }
    return rc == LOOM_EKEYRANGE ? LOOM_EPROTO : rc;
}

/* Step 3: each element to its holder; held gets this worker's, sorted. */
static int exchange(loom_darray *d, darray_elems *l, darray_elems *held)
{
    uint32_t W = d->W, me = d->rank;
    size_t rec = record_bytes(d);
    size_t *count = calloc(W, sizeof *count), *fill = calloc(W, sizeof *fill);
    unsigned char **out = calloc(W, sizeof *out);
    uint64_t *in = calloc(W, sizeof *in), version = d->seq++;
    int rc = count && fill && out && in ? 0 : LOOM_ENOMEM;
    for (size_t i = 0; !rc && i < l->n; i++) count[holder_of(d, l->e[i].key[d->part_dim])]++;
    for (uint32_t w = 0; !rc && w < W; w++)
        if (!(out[w] = malloc(count[w] * rec + 1))) rc = LOOM_ENOMEM;
    for (size_t i = 0; !rc && i < l->n; i++) {
        uint32_t w = holder_of(d, l->e[i].key[d->part_dim]);
        pack(l, i, out[w] + fill[w]++ * rec);
    }
    darray_elems_free(l);
    for (uint32_t w = 0; !rc && w < W; w++)
        if (w != me) rc = send_to(d, w, version, out[w], count[w] * rec);
    if (!rc) rc = unpack(out[me], count[me], held);
    unsigned char *buf = NULL;
    for (uint32_t w = 0; !rc && w < W; w++) {
        if (w == me) continue;
        if (!(rc = take_count(d, w, version, &in[w])) && in[w] % rec) rc = LOOM_EPROTO;
        unsigned char *nb = rc ? NULL : realloc(buf, in[w] + 1);
        if (!rc && !nb) rc = LOOM_ENOMEM;
        if (!rc) buf = nb;
        if (!rc && !(rc = take_bytes(d, w, version, buf, in[w])))
            rc = unpack(buf, in[w] / rec, held);
    }
    free(buf);
    for (uint32_t w = 0; out && w < W; w++) free(out[w]);
    free(out);
    free(count);
    free(fill);
    free(in);
    if (!rc) darray_elems_sort(held);
    return rc;
}

/* A dense array's worker must hold each index of its rows once, in order. */
static int check_dense(const loom_darray *d, const darray_elem *e, size_t n, char *err,
                       size_t errlen)
{
    uint64_t rows = d->bounds[d->rank + 1] - d->bounds[d->rank], inner = 1;
    for (uint32_t k = 1; k < d->dims; k++) inner *= d->ext[k];
    int64_t want[LOOM_DARRAY_MAX_DIMS] = {(int64_t)d->bounds[d->rank]};
    if (n != rows * inner) {
        textfile_set_err(
            err, errlen, "darray: a dense array's rows [%llu, %llu) hold %zu elements, not %llu",
            (unsigned long long)d->bounds[d->rank], (unsigned long long)d->bounds[d->rank + 1], n,
            (unsigned long long)(rows * inner));
        return LOOM_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (memcmp(e[i].key, want, d->dims * sizeof *want)) {
            textfile_set_err(err, errlen,
                             "darray: a dense array lacks an element or holds one twice");
            return LOOM_EINVAL;
        }
        for (uint32_t k = d->dims - 1;; k--) { /* the next index, row-major */
            if (k == 0) {
                want[0]++;
                break;
            }
            if ((uint64_t)++want[k] < d->ext[k]) break;
            want[k] = 0;
        }
    }
    return 0;
}

int darray_settle(loom_darray *d, darray_elems *l, int failed, char *err, size_t errlen)
{
    int rc = agree_box(d, l, failed, err, errlen);
    if (!rc) {
        if (d->dense)
            even_bounds(d, d->ext[0]);
        else
            rc = histogram_bounds(d, l);
    }
    darray_elems held = {.dims = d->dims, .width = d->width, .type = d->type};
    if (!rc) rc = exchange(d, l, &held);
    darray_elems_free(l);
    if (rc) {
        darray_elems_free(&held);
        return rc;
    }
    size_t n = held.n;
    int local = d->dense ? check_dense(d, held.e, n, err, errlen) : 0;
    size_t row = (size_t)d->width * d->vsize;
    d->n = n;
    d->val = malloc(n * row + 1);
    d->idx = d->dense ? NULL : malloc((n * d->dims + 1) * sizeof *d->idx);
    if (!local && (!d->val || (!d->dense && !d->idx))) local = LOOM_ENOMEM;
    for (size_t i = 0; !local && i < n; i++) {
        memcpy((unsigned char *)d->val + i * row, held.e[i].v, row);
        if (!d->dense) memcpy(d->idx + i * d->dims, held.e[i].key, d->dims * sizeof *d->idx);
    }
    darray_elems_free(&held);
    return darray_agree_rc(d, local, err, errlen);
}

static int finish(loom_darray *d, int rc, loom_darray **out)
{
    if (rc) {
        loom_darray_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

int loom_darray_from_elements(loom_node *node, const loom_darray_opts *o, const int64_t *indices,
                              const void *values, size_t n, loom_darray **out, char *err,
                              size_t errlen)
{
    loom_darray *d;
    int rc = darray_new(node, o, 0, &d, err, errlen);
    if (rc) return rc;
    *out = NULL;
    size_t row = (size_t)d->width * d->vsize;
    darray_elems l = {.dims = d->dims, .width = d->width, .type = d->type, .ext = d->ext};
    int failed = n && (!indices || !values) ? LOOM_EINVAL : 0;
    if (failed) textfile_set_err(err, errlen, "darray: %zu elements without indices or values", n);
    char why[160];
    for (size_t i = 0; !failed && i < n; i++)
        if ((failed = darray_elems_add(&l, indices + i * d->dims,
                                       (const unsigned char *)values + i * row, why, sizeof why)))
            textfile_set_err(err, errlen, "darray: element %zu: %s", i, why);
    return finish(d, darray_settle(d, &l, failed, err, errlen), out);
}

int loom_darray_generate(loom_node *node, const loom_darray_opts *o,
                         void (*gen)(void *user, const int64_t *index, void *values), void *user,
                         loom_darray **out, char *err, size_t errlen)
{
    loom_darray *d;
    int rc = darray_new(node, o, 1, &d, err, errlen);
    if (rc) return rc;
    *out = NULL;
    uint64_t total = 1;
    int bad = o->part_dim != 0;
    for (uint32_t k = 0; k < d->dims; k++) {
        if (!d->ext[k] || total > UINT64_MAX / d->ext[k]) bad = 1;
        if (!bad) total *= d->ext[k];
    }
    if (bad) {
        textfile_set_err(err, errlen,
                         "darray: a dense array needs every extent (their product below "
                         "2^64) and part_dim 0");
        loom_darray_free(d);
        return LOOM_EINVAL;
    }
    d->total = total;
    even_bounds(d, d->ext[0]);
    uint64_t inner = total / d->ext[0], rows = d->bounds[d->rank + 1] - d->bounds[d->rank];
    size_t row = (size_t)d->width * d->vsize;
    int local = rows > (SIZE_MAX - 1) / row / inner ? LOOM_ENOMEM : 0;
    d->n = local ? 0 : (size_t)(rows * inner);
    if (!local && !(d->val = calloc(d->n * row + 1, 1))) local = LOOM_ENOMEM;
    if (local)
        textfile_set_err(err, errlen, "darray: out of memory for %llu elements",
                         (unsigned long long)(rows * inner));
    int64_t index[LOOM_DARRAY_MAX_DIMS];
    for (size_t i = 0; !local && gen && i < d->n; i++) {
        darray_index_of(d, i, index);
        gen(user, index, (unsigned char *)d->val + i * row);
    }
    return finish(d, darray_agree_rc(d, local, err, errlen), out);
}

/* ---- this worker's part ---- */

void darray_index_of(const loom_darray *d, size_t i, int64_t *index)
{
    if (!d->dense) {
        memcpy(index, d->idx + i * d->dims, d->dims * sizeof *index);
        return;
    }
    uint64_t r = i;
    for (uint32_t k = d->dims; k-- > 1;) {
        index[k] = (int64_t)(r % d->ext[k]);
        r /= d->ext[k];
    }
    index[0] = (int64_t)(d->bounds[d->rank] + r);
}

void loom_darray_map(loom_darray *d, void (*fn)(void *user, const int64_t *index, void *values),
                     void *user)
{
    int64_t index[LOOM_DARRAY_MAX_DIMS];
    for (size_t i = 0; d && fn && i < d->n; i++) {
        darray_index_of(d, i, index);
        fn(user, index, (unsigned char *)d->val + i * d->width * d->vsize);
    }
}

void loom_darray_fill_random(loom_darray *d, uint64_t seed, double lo, double hi)
{
    int64_t index[LOOM_DARRAY_MAX_DIMS], prev[LOOM_DARRAY_MAX_DIMS];
    uint64_t dup = 0;
    for (size_t i = 0; d && i < d->n; i++) {
        darray_index_of(d, i, index);
        /* elements at one index are adjacent (sorted): number them there */
        dup = i && !memcmp(index, prev, d->dims * sizeof *index) ? dup + 1 : 0;
        memcpy(prev, index, d->dims * sizeof *index);
        uint64_t h = rand_hash64(seed);
        for (uint32_t k = 0; k < d->dims; k++) h = rand_hash64(h ^ (uint64_t)index[k]);
        h = rand_hash64(h ^ dup);
        unsigned char *row = (unsigned char *)d->val + i * d->width * d->vsize;
        for (uint32_t c = 0; c < d->width; c++) {
            double x = lo + (hi - lo) * rand_unit(rand_hash64(h ^ c));
            if (d->type == LOOM_DARRAY_I32 || d->type == LOOM_DARRAY_I64) {
                x = floor(x); /* below hi, but for the draw's rounding near it */
                if (x >= hi && ceil(hi) - 1 >= lo) x = ceil(hi) - 1;
            }
            darray_value_set(d->type, row + c * d->vsize, x);
        }
    }
}

size_t loom_darray_local(loom_darray *d, const int64_t **indices, const void **values)
{
    if (!d || !d->n) {
        if (indices) *indices = NULL;
        if (values) *values = NULL;
        return 0;
    }
    if (!d->idx) { /* a dense array's, made once: its indices never change */
        int64_t *idx = malloc(d->n * d->dims * sizeof *idx);
        if (!idx) {
            if (indices) *indices = NULL;
            if (values) *values = d->val;
            return 0;
        }
        for (size_t i = 0; i < d->n; i++) darray_index_of(d, i, idx + i * d->dims);
        d->idx = idx;
    }
    if (indices) *indices = d->idx;
    if (values) *values = d->val;
    return d->n;
}

int darray_set_local(loom_darray *d, const int64_t *idx, const double *val, size_t n)
{
    if (n != d->n || d->width != 1) return LOOM_EINVAL;
    darray_elems l = {.dims = d->dims, .width = 1, .type = d->type};
    unsigned char v[sizeof(int64_t)]; /* the largest type */
    for (size_t i = 0; i < n; i++) {
        darray_value_set(d->type, v, val[i]);
        if (darray_elems_add(&l, idx + i * d->dims, v, NULL, 0)) {
            darray_elems_free(&l);
            return LOOM_ENOMEM; /* the indices were the array's: in its box */
        }
    }
    darray_elems_sort(&l);
    for (size_t i = 0; i < n; i++) {
        if (!d->dense) memcpy(d->idx + i * d->dims, l.e[i].key, d->dims * sizeof *d->idx);
        memcpy((unsigned char *)d->val + i * d->vsize, l.e[i].v, d->vsize);
    }
    darray_elems_free(&l);
    return 0;
}

uint32_t loom_darray_dims(const loom_darray *d)
{
    return d ? d->dims : 0;
}

uint32_t loom_darray_width(const loom_darray *d)
{
    return d ? d->width : 0;
}

loom_darray_type loom_darray_value_type(const loom_darray *d)
{
    return d ? d->type : LOOM_DARRAY_F64;
}

void loom_darray_extents(const loom_darray *d, uint64_t *extents)
{
    if (d && extents) memcpy(extents, d->ext, d->dims * sizeof *extents);
}

uint64_t loom_darray_size(const loom_darray *d)
{
    return d ? d->total : 0;
}

void loom_darray_range(const loom_darray *d, uint32_t w, uint64_t *lo, uint64_t *hi)
{
    int ok = d && w < d->W;
    if (lo) *lo = ok ? d->bounds[w] : 0;
    if (hi) *hi = ok ? d->bounds[w + 1] : 0;
}

/* ---- the whole array ---- */

int loom_darray_gather(loom_darray *d, uint32_t root, int64_t **indices, void **values, size_t *n)
{
    if (!d || !indices || !values || !n || root >= d->W) return LOOM_EINVAL;
    *indices = NULL;
    *values = NULL;
    *n = 0;
    size_t rec = record_bytes(d), row = (size_t)d->width * d->vsize;
    uint64_t version = d->seq++;
    unsigned char *buf = malloc(d->n * rec + 1);
    if (!buf) return LOOM_ENOMEM;
    int64_t index[LOOM_DARRAY_MAX_DIMS];
    for (size_t i = 0; i < d->n; i++) {
        darray_index_of(d, i, index);
        memcpy(buf + i * rec, index, d->dims * sizeof *index);
        memcpy(buf + i * rec + d->dims * sizeof *index, (unsigned char *)d->val + i * row, row);
    }
    if (d->rank != root) {
        int rc = send_to(d, root, version, buf, d->n * rec);
        free(buf);
        return rc;
    }
    darray_elems all = {.dims = d->dims, .width = d->width, .type = d->type};
    int rc = unpack(buf, d->n, &all);
    for (uint32_t w = 0; !rc && w < d->W; w++) {
        uint64_t bytes;
        if (w == root) continue;
        if (!(rc = take_count(d, w, version, &bytes)) &&
            (bytes % rec || bytes / rec > d->total - all.n))
            rc = LOOM_EPROTO;
        unsigned char *nb = rc ? NULL : realloc(buf, bytes + 1);
        if (!rc && !nb) rc = LOOM_ENOMEM;
        if (!rc) buf = nb;
        if (!rc && !(rc = take_bytes(d, w, version, buf, bytes)))
            rc = unpack(buf, bytes / rec, &all);
    }
    free(buf);
    if (!rc) darray_elems_sort(&all);
    int64_t *idx = rc ? NULL : malloc((all.n * d->dims + 1) * sizeof *idx);
    unsigned char *val = rc ? NULL : malloc(all.n * row + 1);
    if (!rc && (!idx || !val)) rc = LOOM_ENOMEM;
    if (!rc) {
        for (size_t i = 0; i < all.n; i++) {
            memcpy(idx + i * d->dims, all.e[i].key, d->dims * sizeof *idx);
            memcpy(val + i * row, all.e[i].v, row);
        }
        *indices = idx;
        *values = val;
        *n = all.n;
    } else {
        free(idx);
        free(val);
    }
    darray_elems_free(&all);
    return rc;
}

uint64_t loom_darray_key(const loom_darray *d, const int64_t *index)
{
    if (!d || !index) return UINT64_MAX;
    uint64_t key = 0;
    for (uint32_t k = 0; k < d->dims; k++) {
        if (index[k] < 0 || (uint64_t)index[k] >= d->ext[k]) return UINT64_MAX;
        key = key * d->ext[k] + (uint64_t)index[k]; /* no overflow: host checked the box */
    }
    return key;
}

/* The box's positions, or 0 when it is empty or has 2^64 - 1 or more. */
static uint64_t box_positions(const loom_darray *d)
{
    uint64_t p = 1;
    for (uint32_t k = 0; k < d->dims; k++) {
        if (!d->ext[k] || p >= UINT64_MAX / d->ext[k]) return 0;
        p *= d->ext[k];
    }
    return p;
}

int loom_darray_host(loom_darray *d, const char *name, loom_table **out, char *err, size_t errlen)
{
    if (!d || !name || !out) {
        textfile_set_err(err, errlen, "darray: no array, name or result");
        return LOOM_EINVAL;
    }
    *out = NULL;
    uint64_t positions = box_positions(d);
    if (!positions) {
        textfile_set_err(err, errlen,
                         "darray: an empty box, or one of 2^64 - 1 positions or more, has "
                         "no table keys");
        return LOOM_EINVAL;
    }
    static const loom_type table_type[] = {[LOOM_DARRAY_F64] = LOOM_F64,
                                           [LOOM_DARRAY_F32] = LOOM_F32,
                                           [LOOM_DARRAY_I32] = LOOM_I32,
                                           [LOOM_DARRAY_I64] = LOOM_I64};
    loom_table_opts to = LOOM_TABLE_OPTS_DEFAULT;
    to.type = table_type[d->type];
    to.width = d->width;
    to.storage = positions <= (1u << 24) ? LOOM_DENSE : LOOM_SPARSE;
    to.key_end = positions;
    to.consistency = LOOM_ASP;
    to.cache = 0;
    loom_table *t;
    int rc = loom_table_open(d->node, name, &to, &t);
    if (rc) {
        textfile_set_err(err, errlen, "darray: cannot open table %s (%s)", name, loom_strerror(rc));
        return rc;
    }
    /* Sorted by index is sorted by key: elements at one index are adjacent,
     * added here into one row before they go. */
    size_t row = (size_t)d->width * d->vsize;
    uint64_t *keys = malloc((d->n + 1) * sizeof *keys);
    unsigned char *vals = malloc(d->n * row + 1);
    size_t n = 0;
    int64_t index[LOOM_DARRAY_MAX_DIMS];
    int local = keys && vals ? 0 : LOOM_ENOMEM;
    for (size_t i = 0; !local && i < d->n; i++) {
        darray_index_of(d, i, index);
        uint64_t key = loom_darray_key(d, index);
        const unsigned char *v = (const unsigned char *)d->val + i * row;
        if (n && keys[n - 1] == key) {
            rows_add(to.type, vals + (n - 1) * row, v, d->width);
        } else {
            keys[n] = key;
            memcpy(vals + n++ * row, v, row);
        }
    }
    loom_ts ts;
    if (!local && n && !(local = loom_push_async(t, keys, n, vals, &ts)))
        local = loom_wait(d->node, ts);
    free(keys);
    free(vals);
    if (local)
        textfile_set_err(err, errlen, "darray: hosting the array failed (%s)",
                         loom_strerror(local));
    /* every worker's elements in the table before any returns */
    if ((rc = darray_agree_rc(d, local, err, errlen))) return rc;
    *out = t;
    return 0;
}

void loom_darray_free(loom_darray *d)
{
    if (!d) return;
    free(d->bounds);
    free(d->idx);
    free(d->val);
    free(d);
}
