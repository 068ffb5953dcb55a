/* dmap: distributed maps (loom/dmap.h; STRADS-AP's dmap, kim-thesis-strads.txt
 * chapter 7).
 *
 * Each worker owns the keys whose hash it is given (hash mod W) and holds
 * their entries in a store (dmap_store.c). Every operation is one or two
 * all-to-all exchanges of worker-to-worker messages (SCHED_BLOCK messages on
 * the map's own engine number, as darrays and loops send theirs): a worker
 * packs each key it was given into the message to its owner, the owners
 * apply what they receive in rank order (so the result never depends on
 * timing), and answer lookups in the order asked. Every message starts with
 * its sender's error code, so a worker that cannot go on (a malformed key, no
 * memory) fails every worker's call instead of leaving them waiting. The
 * loops over a map are dmap_for.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/textfile.h"
#include "loom/dmap.h"
#include "loom/error.h"
#include "sched/dmap_impl.h"
#include "sched/sched.h"

uint32_t dmap_owner_of(const loom_dmap *m, const dkey *k)
{
    return (uint32_t)(k->hash % m->W);
}

uint32_t loom_dmap_owner(const loom_dmap *m, const void *key)
{
    dkey k;
    return m && !dkey_of(m->kind, key, &k) ? dmap_owner_of(m, &k) : 0;
}

int loom_dmap_open(loom_node *node, const loom_dmap_opts *o, loom_dmap **out, char *err,
                   size_t errlen)
{
    if (!node || !o || !out) {
        textfile_set_err(err, errlen, "dmap: no node, options or result");
        return LOOM_EINVAL;
    }
    *out = NULL;
    if (!loom_is_worker(node)) {
        textfile_set_err(err, errlen, "dmap: only workers hold distributed maps");
        return LOOM_EROLE;
    }
    if ((o->keys != LOOM_DMAP_I64 && o->keys != LOOM_DMAP_STR) || o->width > LOOM_DMAP_MAX_WIDTH) {
        textfile_set_err(err, errlen,
                         "dmap: keys LOOM_DMAP_I64 or LOOM_DMAP_STR and a width of 1 to %d "
                         "values (got kind %d, width %u)",
                         LOOM_DMAP_MAX_WIDTH, (int)o->keys, o->width);
        return LOOM_EINVAL;
    }
    /* a node drops what comes from a worker before it knows the job's
     * roster: after a barrier every worker has started */
    int rc = loom_barrier(node);
    if (rc) {
        textfile_set_err(err, errlen, "dmap: the barrier before making the map failed (%s)",
                         loom_strerror(rc));
        return rc;
    }
    loom_dmap *m = calloc(1, sizeof *m);
    if (!m || store_init(&m->own, o->keys, o->width ? o->width : 1)) {
        if (m) store_free(&m->own);
        free(m);
        textfile_set_err(err, errlen, "dmap: out of memory");
        return LOOM_ENOMEM;
    }
    m->node = node;
    m->engine = sched_next_engine(node);
    m->W = (uint32_t)loom_num_workers(node);
    m->rank = (uint32_t)loom_rank(node);
    m->kind = o->keys;
    m->width = o->width ? o->width : 1;
    *out = m;
    return 0;
}

void loom_dmap_free(loom_dmap *m)
{
    if (!m) return;
    store_free(&m->own);
    free(m);
}

uint64_t loom_dmap_size(const loom_dmap *m)
{
    return m ? m->total : 0;
}

size_t loom_dmap_local(const loom_dmap *m)
{
    return m ? m->own.live : 0;
}

uint32_t loom_dmap_width(const loom_dmap *m)
{
    return m ? m->width : 0;
}

/* ---- the exchange ---- */

int dmap_exchange(loom_dmap *m, int rc, dbuf *out, dbuf *in, char *err, size_t errlen)
{
    uint64_t version = m->seq++;
    int xrc = 0;
    for (uint32_t w = 0; w < m->W; w++) {
        dbuf_free(&in[w]);
        if (out[w].oom && !rc) rc = LOOM_ENOMEM;
    }
    for (uint32_t w = 0; !xrc && w < m->W; w++) {
        if (w == m->rank) continue;
        int64_t head[2] = {rc, rc ? 0 : (int64_t)out[w].n};
        xrc = sched_send_block(m->node, m->engine, (int)w, m->rank, 2 * version, head, sizeof head,
                               0);
        if (!xrc && head[1])
            xrc = sched_send_block(m->node, m->engine, (int)w, m->rank, 2 * version + 1, out[w].p,
                                   out[w].n, 0);
        dbuf_free(&out[w]);
    }
    int first = rc, from = (int)m->rank;
    in[m->rank] = out[m->rank];
    memset(&out[m->rank], 0, sizeof out[m->rank]);
    for (uint32_t w = 0; !xrc && w < m->W; w++) {
        if (w == m->rank) continue;
        int64_t head[2];
        xrc = sched_take_block(m->node, m->engine, (int)w, w, 2 * version, head, sizeof head, 0);
        if (!xrc && (head[1] < 0 || (head[0] && head[1]))) xrc = LOOM_EPROTO;
        if (!xrc && head[1]) {
            in[w].p = malloc((size_t)head[1]);
            if (!in[w].p) {
                xrc = LOOM_ENOMEM;
                break;
            }
            in[w].n = in[w].cap = (size_t)head[1];
            xrc = sched_take_block(m->node, m->engine, (int)w, w, 2 * version + 1, in[w].p, in[w].n,
                                   0);
        }
        /* the first failing worker in rank order names the failure */
        if (!xrc && head[0] && (!first || (int)w < from)) first = (int)head[0], from = (int)w;
    }
    for (uint32_t w = 0; w < m->W; w++) dbuf_free(&out[w]);
    if (xrc) {
        textfile_set_err(err, errlen, "dmap: the exchange between workers failed (%s)",
                         loom_strerror(xrc));
        return xrc;
    }
    if (first && from != (int)m->rank)
        textfile_set_err(err, errlen, "dmap: worker %d failed (%s)", from, loom_strerror(first));
    return first;
}

static dbuf *bufs(uint32_t W)
{
    return calloc(2 * (size_t)W, sizeof(dbuf));
}

static void free_bufs(dbuf *b, uint32_t W)
{
    for (size_t w = 0; b && w < 2 * (size_t)W; w++) dbuf_free(&b[w]);
    free(b);
}

int dmap_agree_size(loom_dmap *m)
{
    dbuf *b = bufs(m->W);
    if (!b) return LOOM_ENOMEM;
    uint64_t mine = m->own.live;
    for (uint32_t w = 0; w < m->W; w++) dbuf_put(&b[w], &mine, sizeof mine);
    int rc = dmap_exchange(m, 0, b, b + m->W, NULL, 0);
    uint64_t total = 0;
    for (uint32_t w = 0; !rc && w < m->W; w++) {
        drd r = {b[m->W + w].p, b[m->W + w].n, 0};
        uint64_t c;
        if (drd_get(&r, &c, sizeof c))
            rc = LOOM_EPROTO;
        else
            total += c;
    }
    if (!rc) m->total = total;
    free_bufs(b, m->W);
    return rc;
}

/* ---- insert, erase, lookup ---- */

/* Key i of the user's list. */
static int key_at(const loom_dmap *m, const void *keys, size_t i, dkey *k)
{
    const void *one = m->kind == LOOM_DMAP_I64 ? (const void *)((const int64_t *)keys + i)
                                               : (const void *)((const char *const *)keys)[i];
    return dkey_of(m->kind, one, k);
}

/* Packs each key (and its values, when given) into the message to its
 * owner; the first malformed key makes rc LOOM_EINVAL, with a sentence. */
static int pack_keys(loom_dmap *m, const void *keys, const double *values, size_t n, dbuf *out,
                     char *err, size_t errlen)
{
    if (n && !keys) {
        textfile_set_err(err, errlen, "dmap: %zu keys but no list of them", n);
        return LOOM_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        dkey k;
        if (key_at(m, keys, i, &k)) {
            textfile_set_err(err, errlen,
                             "dmap: key %zu is an empty string or longer than %d bytes", i,
                             LOOM_DMAP_MAX_KEY);
            return LOOM_EINVAL;
        }
        dbuf *b = &out[dmap_owner_of(m, &k)];
        dbuf_key(b, m->kind, &k);
        if (values) dbuf_put(b, values + i * m->width, m->width * sizeof *values);
    }
    return 0;
}

/* insert (values) or erase (no values): each owner applies the keys it was
 * sent in rank order; a collision fails every worker's call at the next
 * exchange. */
static int change(loom_dmap *m, const void *keys, const double *values, size_t n, char *err,
                  size_t errlen)
{
    if (!m) return LOOM_EINVAL;
    dbuf *b = bufs(m->W);
    if (!b) return LOOM_ENOMEM;
    int rc = pack_keys(m, keys, values, n, b, err, errlen);
    rc = dmap_exchange(m, rc, b, b + m->W, rc ? NULL : err, errlen);
    int mine = 0;
    for (uint32_t w = 0; !rc && !mine && w < m->W; w++) {
        drd r = {b[m->W + w].p, b[m->W + w].n, 0};
        while (!mine && r.at < r.n) {
            dkey k;
            uint32_t slot;
            if ((mine = drd_key(&r, m->kind, &k))) break;
            if (!values) {
                int64_t at = store_find(&m->own, &k);
                if (at >= 0) store_erase(&m->own, (uint32_t)at);
                continue;
            }
            if ((mine = store_put(&m->own, &k, &slot))) {
                if (mine == LOOM_EINVAL)
                    textfile_set_err(err, errlen,
                                     "dmap: two keys \"%.*s\" and another hash alike (64 bits)",
                                     (int)k.len, k.s);
                break;
            }
            if (drd_get(&r, store_val(&m->own, slot), m->width * sizeof(double)))
                mine = LOOM_EPROTO;
        }
    }
    free_bufs(b, m->W);
    if (rc) return rc;
    /* one more exchange: a worker's failure to apply fails every worker */
    b = bufs(m->W);
    if (!b) return LOOM_ENOMEM;
    rc = dmap_exchange(m, mine, b, b + m->W, mine ? NULL : err, errlen);
    free_bufs(b, m->W);
    return rc ? rc : dmap_agree_size(m);
}

int loom_dmap_insert(loom_dmap *m, const void *keys, const double *values, size_t n, char *err,
                     size_t errlen)
{
    if (m && n && !values) {
        textfile_set_err(err, errlen, "dmap: %zu keys to insert but no values", n);
        return LOOM_EINVAL;
    }
    static const double none = 0;
    return change(m, keys, values ? values : &none, n, err, errlen);
}

int loom_dmap_erase(loom_dmap *m, const void *keys, size_t n, char *err, size_t errlen)
{
    return change(m, keys, NULL, n, err, errlen);
}

int loom_dmap_lookup(loom_dmap *m, const void *keys, size_t n, double *values, uint8_t *found)
{
    if (!m || (n && !values)) return LOOM_EINVAL;
    dbuf *b = bufs(m->W);
    if (!b) return LOOM_ENOMEM;
    int rc = pack_keys(m, keys, NULL, n, b, NULL, 0);
    rc = dmap_exchange(m, rc, b, b + m->W, NULL, 0);
    /* answers: for each key asked, a found flag and its values, in order */
    int mine = 0;
    dbuf *ans = rc ? NULL : bufs(m->W);
    if (!rc && !ans) mine = LOOM_ENOMEM;
    for (uint32_t w = 0; !rc && !mine && w < m->W; w++) {
        drd r = {b[m->W + w].p, b[m->W + w].n, 0};
        while (!mine && r.at < r.n) {
            dkey k;
            if ((mine = drd_key(&r, m->kind, &k))) break;
            int64_t at = store_find(&m->own, &k);
            uint8_t f = at >= 0;
            dbuf_put(&ans[w], &f, 1);
            if (f) dbuf_put(&ans[w], store_val(&m->own, (uint32_t)at), m->width * sizeof(double));
        }
    }
    if (!rc) rc = dmap_exchange(m, mine, ans, ans + m->W, NULL, 0);
    /* the answers come back per owner in the order this worker asked */
    drd *rd = rc ? NULL : calloc(m->W, sizeof *rd);
    if (!rc && !rd) rc = LOOM_ENOMEM;
    for (uint32_t w = 0; rd && w < m->W; w++) rd[w] = (drd){ans[m->W + w].p, ans[m->W + w].n, 0};
    for (size_t i = 0; !rc && i < n; i++) {
        dkey k;
        key_at(m, keys, i, &k); /* well formed: pack_keys checked it */
        drd *r = &rd[dmap_owner_of(m, &k)];
        uint8_t f;
        if (drd_get(r, &f, 1)) {
            rc = LOOM_EPROTO;
            break;
        }
        if (found) found[i] = f;
        if (f)
            rc = drd_get(r, values + i * m->width, m->width * sizeof(double));
        else
            memset(values + i * m->width, 0, m->width * sizeof(double));
    }
    free(rd);
    free_bufs(ans, m->W);
    free_bufs(b, m->W);
    return rc;
}
