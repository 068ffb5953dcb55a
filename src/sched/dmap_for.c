/* dmap_for: SyncFor and AsyncFor over a distributed map (loom/dmap.h;
 * STRADS-AP, kim-thesis-strads.txt chapter 7).
 *
 * A pass starts with every worker sending its entries to every other, so each
 * holds a view of the whole map (as SyncFor over a vector reads the whole
 * vector), and each runs the body over its own entries in key order. What a
 * body sets or adds goes to rows of this iteration (stable pointers from a
 * pool: a body may ask for several), folded after it returns into the
 * worker's pending writes: a key's last set (with the iteration that made
 * it) and the sum of its adds. The pending writes go to the owners at a
 * flush, and each owner applies, per key, the set of the iteration last in
 * key order, then the adds in rank order: what the serial loop with writes
 * applied after the sweep does.
 *
 * SyncFor flushes once, at the end of the pass; its view is never written, so
 * every read sees the map as the pass started.
 *
 * AsyncFor folds each iteration's writes into the view at once too (the
 * worker's next iterations read them), and flushes every `delay` iterations:
 * rounds in step on every worker (as many as the longest worker needs), each
 * an exchange of writes and then one of the entries that changed, which every
 * worker copies into its view. Sets are limited to keys the worker owns, so a
 * key's sets are its owner's iterations in order; a set drops the worker's
 * pending adds to that key (its view has them under the set already), and the
 * others' adds land after it: per key, one serial order. */
#include <stdlib.h>
#include <string.h>

#include "io/textfile.h"
#include "loom/dmap.h"
#include "loom/error.h"
#include "sched/dmap_impl.h"

enum { TAG_SET = 1, TAG_ADD = 2 };

/* Rows that stay where they are until the pool is reset. */
typedef struct pool {
    double **blk;
    size_t nblk, cur, used, size;
} pool;

static double *pool_get(pool *p, uint32_t width)
{
    if (p->nblk && p->used + width > p->size) p->cur++, p->used = 0;
    if (p->cur == p->nblk) {
        double **b = realloc(p->blk, (p->nblk + 1) * sizeof *b);
        if (!b) return NULL;
        p->blk = b;
        if (!(p->blk[p->nblk] = malloc(p->size * sizeof(double)))) return NULL;
        p->nblk++;
    }
    double *row = p->blk[p->cur] + p->used;
    p->used += width;
    return row;
}

static void pool_free(pool *p)
{
    for (size_t b = 0; b < p->nblk; b++) free(p->blk[b]);
    free(p->blk);
}

/* Writes keyed by key: a store for the keys, a row per slot elsewhere (the
 * iteration's, from the pool) or in the store (the pending ones). */
typedef struct writes {
    dmap_store keys;
    double **row; /* per slot: an iteration's rows */
    uint32_t *by; /* per slot: pending sets, the iteration's own slot */
    size_t cap;
} writes;

struct loom_map_iter {
    loom_dmap *m;
    int async;
    uint32_t W, width;
    dmap_store view;
    pool rows;
    double *scratch;   /* what a refused write gets */
    writes set, add;   /* this iteration's */
    writes pset, padd; /* the pending ones */
    uint32_t cur;      /* the iteration's slot in m->own */
    uint8_t *dirty;    /* per own slot: changed in this flush */
    uint32_t *dlist;   /* those slots */
    size_t ndirty, nlist;
    int rc;
    char why[200];
};

static int writes_init(writes *w, loom_dmap_key_kind kind, uint32_t width)
{
    memset(w, 0, sizeof *w);
    return store_init(&w->keys, kind, width);
}

static void writes_free(writes *w)
{
    store_free(&w->keys);
    free(w->row);
    free(w->by);
}

/* The slot of key k in w, and whether it is new. */
static int writes_slot(writes *w, const dkey *k, uint32_t *slot, int *fresh)
{
    size_t before = w->keys.n;
    int64_t had = store_find(&w->keys, k);
    int rc = store_put(&w->keys, k, slot);
    if (rc) return rc;
    if (w->keys.n > w->cap) {
        size_t cap = w->keys.cap;
        double **r = realloc(w->row, cap * sizeof *r);
        if (r) w->row = r;
        uint32_t *b = r ? realloc(w->by, cap * sizeof *b) : NULL;
        if (!b) return LOOM_ENOMEM;
        w->by = b;
        w->cap = cap;
    }
    *fresh = had < 0 || w->keys.n > before;
    return 0;
}

static void fail(loom_map_iter *it, int rc, const char *why, const dkey *k)
{
    if (it->rc) return;
    it->rc = rc;
    if (!k)
        textfile_set_err(it->why, sizeof it->why, "dmap: %s", why);
    else if (it->m->kind == LOOM_DMAP_I64)
        textfile_set_err(it->why, sizeof it->why, "dmap: %s (key %lld)", why, (long long)k->i);
    else
        textfile_set_err(it->why, sizeof it->why, "dmap: %s (key \"%.*s\")", why, (int)k->len,
                         k->s);
}

const double *loom_map_get(loom_map_iter *it, const void *key)
{
    dkey k;
    if (!it || dkey_of(it->m->kind, key, &k)) return NULL;
    int64_t at = store_find(&it->view, &k);
    return at < 0 ? NULL : store_val(&it->view, (uint32_t)at);
}

static double *write_row(loom_map_iter *it, writes *w, const void *key, int set)
{
    dkey k;
    memset(it->scratch, 0, it->width * sizeof(double));
    if (dkey_of(it->m->kind, key, &k)) {
        fail(it, LOOM_EINVAL, "a write to a key that is an empty string or too long", NULL);
        return it->scratch;
    }
    if (set && it->async && dmap_owner_of(it->m, &k) != it->m->rank) {
        fail(it, LOOM_EINVAL, "AsyncFor sets only keys its worker owns; add to the others", &k);
        return it->scratch;
    }
    uint32_t slot;
    int fresh, rc = writes_slot(w, &k, &slot, &fresh);
    if (rc) {
        fail(it, rc, rc == LOOM_EINVAL ? "two keys hash alike" : "out of memory", &k);
        return it->scratch;
    }
    if (fresh) {
        double *row = pool_get(&it->rows, it->width);
        if (!row) {
            fail(it, LOOM_ENOMEM, "out of memory", &k);
            return it->scratch;
        }
        const double *now = set ? loom_map_get(it, key) : NULL;
        if (now)
            memcpy(row, now, it->width * sizeof *row);
        else
            memset(row, 0, it->width * sizeof *row);
        w->row[slot] = row;
    }
    return w->row[slot];
}

double *loom_map_set(loom_map_iter *it, const void *key)
{
    return it ? write_row(it, &it->set, key, 1) : NULL;
}

double *loom_map_add(loom_map_iter *it, const void *key)
{
    return it ? write_row(it, &it->add, key, 0) : NULL;
}

/* Folds the iteration's writes into the pending ones (and, AsyncFor, into
 * the view), then forgets them. */
static int fold(loom_map_iter *it)
{
    size_t bytes = it->width * sizeof(double);
    uint32_t slot;
    int fresh, rc = 0;
    for (uint32_t s = 0; !rc && s < it->set.keys.n; s++) {
        dkey k = store_key(&it->set.keys, s);
        if ((rc = writes_slot(&it->pset, &k, &slot, &fresh))) break;
        memcpy(store_val(&it->pset.keys, slot), it->set.row[s], bytes);
        it->pset.by[slot] = it->cur;
        if (!it->async) continue;
        int64_t a = store_find(&it->padd.keys, &k);
        if (a >= 0) memset(store_val(&it->padd.keys, (uint32_t)a), 0, bytes);
        if (!(rc = store_put(&it->view, &k, &slot)))
            memcpy(store_val(&it->view, slot), it->set.row[s], bytes);
    }
    for (uint32_t s = 0; !rc && s < it->add.keys.n; s++) {
        dkey k = store_key(&it->add.keys, s);
        if ((rc = writes_slot(&it->padd, &k, &slot, &fresh))) break;
        double *to = store_val(&it->padd.keys, slot);
        for (uint32_t c = 0; c < it->width; c++) to[c] += it->add.row[s][c];
        if (!it->async || (rc = store_put(&it->view, &k, &slot))) continue;
        to = store_val(&it->view, slot);
        for (uint32_t c = 0; c < it->width; c++) to[c] += it->add.row[s][c];
    }
    store_clear(&it->set.keys);
    store_clear(&it->add.keys);
    it->rows.cur = it->rows.used = 0;
    if (rc && !it->rc)
        fail(it, rc, rc == LOOM_EINVAL ? "two keys hash alike" : "out of memory", NULL);
    return it->rc;
}

/* Every worker's entries into every worker's view. */
static int gather_view(loom_map_iter *it, dbuf *b, char *err, size_t errlen)
{
    loom_dmap *m = it->m;
    for (uint32_t s = 0; s < m->own.n; s++) {
        if (!m->own.alive[s]) continue;
        dkey k = store_key(&m->own, s);
        for (uint32_t w = 0; w < it->W; w++) {
            dbuf_key(&b[w], m->kind, &k);
            dbuf_put(&b[w], store_val(&m->own, s), it->width * sizeof(double));
        }
    }
    int rc = dmap_exchange(m, 0, b, b + it->W, err, errlen);
    store_clear(&it->view);
    for (uint32_t w = 0; !rc && w < it->W; w++) {
        drd r = {b[it->W + w].p, b[it->W + w].n, 0};
        while (!rc && r.at < r.n) {
            dkey k;
            uint32_t slot;
            if (!(rc = drd_key(&r, m->kind, &k)) && !(rc = store_put(&it->view, &k, &slot)))
                rc = drd_get(&r, store_val(&it->view, slot), it->width * sizeof(double));
        }
    }
    return rc;
}

/* One record of a flush message: its tag, key, (sets) iteration key and
 * values (width doubles, unaligned: copied out by the caller). */
static int next_record(drd *r, loom_dmap_key_kind kind, size_t bytes, uint8_t *tag, dkey *k,
                       dkey *iter, const unsigned char **vals)
{
    if (drd_get(r, tag, 1) || drd_key(r, kind, k) || (*tag == TAG_SET && drd_key(r, kind, iter)) ||
        (*tag != TAG_SET && *tag != TAG_ADD) || bytes > r->n - r->at)
        return LOOM_EPROTO;
    *vals = r->p + r->at;
    r->at += bytes;
    return 0;
}

/* Own slot `slot` changed in this flush: listed once. */
static int mark(loom_map_iter *it, uint32_t slot)
{
    if (it->m->own.n > it->ndirty) {
        size_t cap = it->m->own.cap;
        uint8_t *d = realloc(it->dirty, cap);
        if (d) it->dirty = d;
        uint32_t *l = d ? realloc(it->dlist, cap * sizeof *l) : NULL;
        if (!l) return LOOM_ENOMEM;
        it->dlist = l;
        memset(it->dirty + it->ndirty, 0, cap - it->ndirty);
        it->ndirty = cap;
    }
    if (!it->dirty[slot]) it->dirty[slot] = 1, it->dlist[it->nlist++] = slot;
    return 0;
}

/* An owner's part of a flush: per key the set whose iteration is last in key
 * order, then the adds in rank order, into m->own; the slots changed marked. */
static int apply(loom_map_iter *it, dbuf *in)
{
    loom_dmap *m = it->m;
    size_t bytes = it->width * sizeof(double);
    dmap_store win;
    const unsigned char **row = NULL;
    dkey *by = NULL;
    int rc = store_init(&win, m->kind, 1);
    for (uint32_t w = 0; !rc && w < it->W; w++) {
        drd r = {in[w].p, in[w].n, 0};
        while (!rc && r.at < r.n) {
            uint8_t tag;
            dkey k, iter;
            const unsigned char *vals;
            uint32_t slot;
            size_t before = win.n;
            if ((rc = next_record(&r, m->kind, bytes, &tag, &k, &iter, &vals)) || tag != TAG_SET ||
                (rc = store_put(&win, &k, &slot)))
                continue;
            if (win.n > before) {
                const unsigned char **nr = realloc(row, win.cap * sizeof *nr);
                if (nr) row = nr;
                dkey *nb = nr ? realloc(by, win.cap * sizeof *nb) : NULL;
                if (!nb) {
                    rc = LOOM_ENOMEM;
                    continue;
                }
                by = nb;
            }
            if (win.n > before || dkey_cmp(m->kind, &iter, &by[slot]) > 0)
                row[slot] = vals, by[slot] = iter;
        }
    }
    for (uint32_t s = 0; !rc && s < win.n; s++) {
        dkey k = store_key(&win, s);
        uint32_t slot;
        if (!(rc = store_put(&m->own, &k, &slot)) && !(rc = mark(it, slot)))
            memcpy(store_val(&m->own, slot), row[s], bytes);
    }
    for (uint32_t w = 0; !rc && w < it->W; w++) {
        drd r = {in[w].p, in[w].n, 0};
        while (!rc && r.at < r.n) {
            uint8_t tag;
            dkey k, iter;
            const unsigned char *vals;
            uint32_t slot;
            if ((rc = next_record(&r, m->kind, bytes, &tag, &k, &iter, &vals)) || tag != TAG_ADD ||
                (rc = store_put(&m->own, &k, &slot)) || (rc = mark(it, slot)))
                continue;
            double *to = store_val(&m->own, slot), d;
            for (uint32_t c = 0; c < it->width; c++) {
                memcpy(&d, vals + c * sizeof d, sizeof d);
                to[c] += d;
            }
        }
    }
    store_free(&win);
    free(row);
    free(by);
    return rc;
}

/* Sends the pending writes to their owners, applies what comes, and
 * (AsyncFor) sends every worker the entries that changed; the last exchange
 * carries each owner's failure to apply, so that all fail alike. */
static int flush(loom_map_iter *it, dbuf *b, char *err, size_t errlen)
{
    loom_dmap *m = it->m;
    size_t bytes = it->width * sizeof(double);
    for (uint32_t s = 0; s < it->pset.keys.n; s++) {
        dkey k = store_key(&it->pset.keys, s), iter = store_key(&m->own, it->pset.by[s]);
        dbuf *o = &b[dmap_owner_of(m, &k)];
        uint8_t tag = TAG_SET;
        dbuf_put(o, &tag, 1);
        dbuf_key(o, m->kind, &k);
        dbuf_key(o, m->kind, &iter);
        dbuf_put(o, store_val(&it->pset.keys, s), bytes);
    }
    for (uint32_t s = 0; s < it->padd.keys.n; s++) {
        dkey k = store_key(&it->padd.keys, s);
        dbuf *o = &b[dmap_owner_of(m, &k)];
        uint8_t tag = TAG_ADD;
        dbuf_put(o, &tag, 1);
        dbuf_key(o, m->kind, &k);
        dbuf_put(o, store_val(&it->padd.keys, s), bytes);
    }
    store_clear(&it->pset.keys);
    store_clear(&it->padd.keys);
    int rc = dmap_exchange(m, it->rc, b, b + it->W, it->rc ? NULL : err, errlen);
    if (rc) return rc;
    it->nlist = 0;
    int mine = apply(it, b + it->W);
    for (size_t c = 0; c < it->nlist; c++) {
        uint32_t s = it->dlist[c];
        it->dirty[s] = 0;
        if (mine || !it->async) continue;
        dkey k = store_key(&m->own, s);
        for (uint32_t w = 0; w < it->W; w++) {
            dbuf_key(&b[w], m->kind, &k);
            dbuf_put(&b[w], store_val(&m->own, s), bytes);
        }
    }
    rc = dmap_exchange(m, mine, b, b + it->W, mine ? NULL : err, errlen);
    for (uint32_t w = 0; !rc && w < it->W; w++) {
        drd r = {b[it->W + w].p, b[it->W + w].n, 0};
        while (!rc && r.at < r.n) {
            dkey k;
            uint32_t slot;
            if (!(rc = drd_key(&r, m->kind, &k)) && !(rc = store_put(&it->view, &k, &slot)))
                rc = drd_get(&r, store_val(&it->view, slot), bytes);
        }
    }
    return rc;
}

/* One pass: the view, then the rounds (SyncFor: one). */
static int pass(loom_map_iter *it, loom_map_body_fn body, void *user, uint64_t delay, dbuf *b,
                char *err, size_t errlen)
{
    loom_dmap *m = it->m;
    int rc = gather_view(it, b, err, errlen);
    uint32_t *mine = NULL;
    size_t n = 0;
    /* from here every worker comes to every flush: a failure here is carried
     * by the first one (it->rc), which then ends every worker's pass */
    if (!rc && store_sorted(&m->own, &mine, &n)) fail(it, LOOM_ENOMEM, "out of memory", NULL);
    /* rounds: as many as the worker with the most entries needs */
    uint64_t rounds = 1;
    uint64_t *per = !rc && it->async ? calloc(it->W, sizeof *per) : NULL;
    if (!rc && it->async && !per) fail(it, LOOM_ENOMEM, "out of memory", NULL);
    for (uint32_t s = 0; per && s < it->view.n; s++) {
        dkey k = store_key(&it->view, s);
        per[dmap_owner_of(m, &k)]++;
    }
    for (uint32_t w = 0; per && w < it->W; w++)
        if ((per[w] + delay - 1) / delay > rounds) rounds = (per[w] + delay - 1) / delay;
    free(per);
    for (uint64_t r = 0; !rc && r < rounds; r++) {
        size_t lo = it->async ? (size_t)(r * delay) : 0, hi = it->async ? lo + delay : n;
        for (size_t i = lo; i < hi && i < n && !it->rc; i++) {
            dkey k = store_key(&m->own, mine[i]);
            int64_t at = store_find(&it->view, &k);
            it->cur = mine[i];
            body(user, it, store_user_key(&m->own, mine[i]),
                 at < 0 ? NULL : store_val(&it->view, (uint32_t)at));
            fold(it);
        }
        if (it->rc) textfile_set_err(err, errlen, "%s", it->why);
        rc = flush(it, b, err, errlen);
    }
    free(mine);
    return rc;
}

static int run(loom_dmap *m, int async, loom_map_body_fn body, void *user, uint64_t delay,
               int64_t passes, char *err, size_t errlen)
{
    if (!m || !body || passes < 0 || (async && !delay)) {
        textfile_set_err(err, errlen, "%s",
                         async && m && body && passes >= 0
                             ? "dmap: AsyncFor needs a delay of at least 1 iteration"
                             : "dmap: no map, no body or a negative number of passes");
        return LOOM_EINVAL;
    }
    loom_map_iter *it = calloc(1, sizeof *it);
    dbuf *b = calloc(2 * (size_t)m->W, sizeof *b);
    int rc = it && b ? 0 : LOOM_ENOMEM;
    if (!rc) {
        it->m = m, it->async = async, it->W = m->W, it->width = m->width;
        it->rows.size = m->width > 4096 ? m->width : 4096;
        it->scratch = malloc(m->width * sizeof(double));
        rc = it->scratch ? 0 : LOOM_ENOMEM;
        if (!rc) rc = store_init(&it->view, m->kind, m->width);
        if (!rc) rc = writes_init(&it->set, m->kind, 1);
        if (!rc) rc = writes_init(&it->add, m->kind, 1);
        if (!rc) rc = writes_init(&it->pset, m->kind, m->width);
        if (!rc) rc = writes_init(&it->padd, m->kind, m->width);
    }
    if (rc) textfile_set_err(err, errlen, "dmap: out of memory");
    for (int64_t p = 0; !rc && p < passes; p++) rc = pass(it, body, user, delay, b, err, errlen);
    if (!rc) rc = dmap_agree_size(m);
    if (it) {
        store_free(&it->view);
        writes_free(&it->set);
        writes_free(&it->add);
        writes_free(&it->pset);
        writes_free(&it->padd);
        pool_free(&it->rows);
        free(it->scratch);
        free(it->dirty);
        free(it->dlist);
    }
    for (size_t w = 0; b && w < 2 * (size_t)m->W; w++) dbuf_free(&b[w]);
    free(b);
    free(it);
    return rc;
}

int loom_map_sync_for(loom_dmap *m, loom_map_body_fn body, void *user, int64_t passes, char *err,
                      size_t errlen)
{
    return run(m, 0, body, user, 0, passes, err, errlen);
}

int loom_map_async_for(loom_dmap *m, loom_map_body_fn body, void *user, uint64_t delay,
                       int64_t passes, char *err, size_t errlen)
{
    return run(m, 1, body, user, delay, passes, err, errlen);
}
