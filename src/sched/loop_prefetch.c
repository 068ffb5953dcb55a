/* loop_prefetch: server-hosted arrays reached by data-dependent rows,
 * pulled in bulk per batch of elements (loom/loop.h; Orion's server-hosted
 * DistArrays and bulk prefetching, wei-thesis-bosen-orion.txt 3.5-3.6).
 *
 * Orion analyses the loop body to generate a function that, given an
 * iteration, lists the rows of a server-hosted array it will read, and calls
 * it for a batch of iterations before running them, to fetch the union in
 * one request. In C the user writes that function: loom_loop_prefetch_decl.rows_of.
 * When loop_run_one reaches an element outside the array's current batch,
 * the batch is gathered from it: up to `prefetch` elements, never past the
 * end of the block (the next block may run at another time, after other
 * workers' merges) nor past the next flush of a buffer on the array (whose
 * merge changes the rows: the elements after it must see the change, as
 * they would with a whole copy read again). Their declared rows are made
 * unique through a hash map, in order of first use (a sort of the batch's
 * rows cost sparse LR a tenth of its time; loom_pull takes keys in any
 * order), and pulled with one loom_pull(); each element's list of
 * rows then points into the pulled values, so the body reads row k of its
 * own list with no lookup, and loom_loop_fetched_row() finds a row by
 * number in the element's own list, refusing (and counting) any it did not
 * declare. A worker thus moves the rows its elements touch, not the array:
 * for sparse LR on 20 million features, the few hundred of a minibatch.
 *
 * A hosted array (ROLE_HOSTED: read only, keyed by a loop index that
 * neither keeps its rows on a worker nor rotates them) is prefetched the
 * same way, its rows listed from the declared subscripts instead of a
 * rows_of, and each access gets its row (loop_run_one) rather than a
 * loom_loop_fetched. */
#include <stdlib.h>
#include <string.h>

#include "loom/error.h"
#include "sched/loop_impl.h"

#define DEFAULT_BATCH 256

void loom_loop_rows_add(loom_loop_rows *out, uint64_t row)
{
    if (!out || out->bad) return;
    if (row >= out->limit) {
        out->bad = LOOM_EKEYRANGE;
        return;
    }
    if (out->n == out->cap) {
        size_t cap = out->cap ? 2 * out->cap : 256;
        uint64_t *r = realloc(out->row, cap * sizeof *r);
        if (!r) {
            out->bad = LOOM_ENOMEM;
            return;
        }
        out->row = r, out->cap = cap;
    }
    out->row[out->n++] = row;
}

int loop_prefetch_open(loom_loop *l)
{
    for (size_t i = 0; i < l->narr; i++) {
        loop_array *a = &l->arr[i];
        if (a->role != ROLE_PREFETCH && a->role != ROLE_HOSTED) continue;
        if (!(a->pf = calloc(1, sizeof *a->pf))) return LOOM_ENOMEM;
        a->pf->l = l;
        a->pf->a = a;
        a->pf->r.limit = a->a.rows;
        if (u64map_init(&a->pf->index, DEFAULT_BATCH)) return LOOM_ENOMEM;
    }
    return 0;
}

static int grow(void **p, size_t *cap, size_t want, size_t size)
{
    if (want <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < want) c *= 2;
    void *n = realloc(*p, c * size);
    if (!n) return LOOM_ENOMEM;
    *p = n, *cap = c;
    return 0;
}

/* A hosted array's rows_of, from the declaration: the row each access of
 * it names (a row before the first or past the last is the loop's
 * boundary: the body gets NULL, nothing is pulled). */
static void subscript_rows(const loom_loop *l, const loop_array *a, const int64_t *x,
                           loom_loop_rows *out)
{
    for (size_t k = 0; k < l->o.nacc; k++) {
        if (l->acc_arr[k] < 0 || &l->arr[l->acc_arr[k]] != a) continue;
        int64_t r = x[a->key] + l->acc[k].sub[0].offset;
        if (r >= 0 && (uint64_t)r < a->a.rows) loom_loop_rows_add(out, (uint64_t)r);
    }
}

/* Elements [i, i + count) of the batch from element i (see the top). */
static size_t batch_size(const loom_loop *l, const loop_array *a, size_t i)
{
    uint64_t n = a->pd.batch ? a->pd.batch : DEFAULT_BATCH;
    if (n > l->blk_end - i) n = l->blk_end - i;
    for (size_t k = 0; k < l->o.nbuffers; k++) {
        const struct loom_loop_buffer *b = &l->buf[k];
        if (b->target == a && b->d.delay - b->calls < n) n = b->d.delay - b->calls;
    }
    return n ? (size_t)n : 1;
}

static int gather(loom_loop *l, loop_array *a, size_t i)
{
    struct loom_loop_prefetch *pf = a->pf;
    size_t count = batch_size(l, a, i);
    pf->valid = 0;
    pf->r.n = 0;
    int rc = grow((void **)&pf->start, &pf->start_cap, count + 1, sizeof *pf->start);
    for (size_t j = 0; j < count && !rc; j++) {
        const elem *e = &l->el[i + j];
        double v;
        memcpy(&v, &e->bits, 8);
        pf->start[j] = pf->r.n;
        if (a->role == ROLE_HOSTED)
            subscript_rows(l, a, &e->key[1], &pf->r);
        else
            a->pd.rows_of(l->o.user, a->a.array, &e->key[1], v, &pf->r);
        rc = pf->r.bad;
    }
    if (rc) return rc;
    pf->start[count] = pf->r.n;
    size_t n = pf->r.n;
    if ((rc = grow((void **)&pf->keys, &pf->keys_cap, n + 1, sizeof *pf->keys)) ||
        (rc = grow((void **)&pf->ptr, &pf->ptr_cap, n + 1, sizeof *pf->ptr)))
        return rc;
    /* vals: sized with keys_cap, which only grows */
    uint8_t *vals = realloc(pf->vals, (pf->keys_cap + 1) * a->row_bytes);
    if (!vals) return LOOM_ENOMEM;
    pf->vals = vals;
    u64map_clear(&pf->index);
    size_t u = 0;
    for (size_t k = 0; k < n; k++) {
        int added;
        uint32_t slot = u64map_put(&pf->index, pf->r.row[k], (uint32_t)u, &added);
        if (slot == UINT32_MAX) return LOOM_ENOMEM;
        if (added) pf->keys[u++] = pf->r.row[k];
        pf->ptr[k] = vals + (size_t)slot * a->row_bytes;
    }
    pf->nkeys = u;
    if (u && (rc = loom_pull(a->t, pf->keys, u, pf->vals))) return rc;
    pf->lo = i, pf->hi = i + count, pf->valid = 1;
    pf->stats.batches++;
    pf->stats.rows_pulled += u;
    return 0;
}

loom_loop_fetched *loop_prefetch_at(loom_loop *l, loop_array *a, size_t i, int *rc)
{
    struct loom_loop_prefetch *pf = a->pf;
    if (!pf->valid || i < pf->lo || i >= pf->hi) {
        if ((*rc = gather(l, a, i))) return NULL;
    }
    size_t j = i - pf->lo;
    pf->cur.n = pf->start[j + 1] - pf->start[j];
    pf->cur.row = pf->r.row + pf->start[j];
    pf->cur.value = pf->ptr + pf->start[j];
    pf->cur.prefetch = pf;
    return &pf->cur;
}

void loop_prefetch_drop(loom_loop *l)
{
    for (size_t i = 0; i < l->narr; i++)
        if (l->arr[i].pf) l->arr[i].pf->valid = 0;
}

const uint8_t *loop_prefetch_value(const loop_array *a, uint64_t r)
{
    const struct loom_loop_prefetch *pf = a->pf;
    uint32_t slot;
    if (!pf || !pf->valid || !u64map_get(&pf->index, r, &slot)) return NULL;
    return pf->vals + (size_t)slot * a->row_bytes;
}

const void *loom_loop_fetched_row(const loom_loop_fetched *f, uint64_t row)
{
    if (!f) return NULL;
    for (size_t k = 0; k < f->n; k++)
        if (f->row[k] == row) return f->value[k];
    if (f->prefetch) {
        f->prefetch->stats.refused++;
        f->prefetch->l->refused++;
    }
    return NULL;
}

int loom_loop_prefetch_stats_of(const loom_loop *l, uint32_t array, loom_loop_prefetch_stats *out)
{
    int s = l && out ? loop_slot_of(l, array) : -1;
    if (s < 0 || !l->arr[s].pf) return LOOM_EINVAL;
    *out = l->arr[s].pf->stats;
    return 0;
}

void loop_prefetch_close(loom_loop *l)
{
    for (size_t i = 0; l->arr && i < l->narr; i++) {
        struct loom_loop_prefetch *pf = l->arr[i].pf;
        if (!pf) continue;
        free(pf->r.row);
        free(pf->start);
        free(pf->keys);
        u64map_free(&pf->index);
        free(pf->vals);
        free(pf->ptr);
        free(pf);
    }
}
