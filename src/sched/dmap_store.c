/* dmap_store: a distributed map's keys and one worker's entries
 * (loom/dmap.h; shared parts in dmap_impl.h).
 *
 * A key is hashed once to 64 bits: an int64 by splitmix64's finaliser (a
 * bijection: two int64 keys never share a hash), a string by FNV-1a mixed by
 * the same finaliser. The hash names the key's owner and its place in a
 * store's u64map; a store therefore cannot hold two strings of one hash and
 * refuses the second (about n^2 / 2^65 likely) rather than confuse them.
 * Slots are never freed (an erased key keeps its slot and gets it back), so
 * an entry's values and key stay at one place while the store does not grow.
 *
 * Messages between workers are plain byte strings built with dbuf and read
 * with drd: a key is its 8 bytes, or a 4-byte length and its bytes. */
#include <stdlib.h>
#include <string.h>

#include "core/rand.h"
#include "loom/error.h"
#include "sched/dmap_impl.h"

int dkey_of(loom_dmap_key_kind kind, const void *key, dkey *out)
{
    memset(out, 0, sizeof *out);
    if (!key) return LOOM_EINVAL;
    if (kind == LOOM_DMAP_I64) {
        memcpy(&out->i, key, sizeof out->i);
        out->hash = rand_hash64((uint64_t)out->i);
        return 0;
    }
    const char *s = key;
    size_t len = strnlen(s, LOOM_DMAP_MAX_KEY + 1);
    if (!len || len > LOOM_DMAP_MAX_KEY) return LOOM_EINVAL;
    out->s = s;
    out->len = (uint32_t)len;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t k = 0; k < len; k++) h = (h ^ (unsigned char)s[k]) * 0x100000001b3ULL;
    out->hash = rand_mix64(h);
    return 0;
}

int dkey_cmp(loom_dmap_key_kind kind, const dkey *a, const dkey *b)
{
    if (kind == LOOM_DMAP_I64) return (a->i > b->i) - (a->i < b->i);
    int c = memcmp(a->s, b->s, a->len < b->len ? a->len : b->len);
    if (c) return c < 0 ? -1 : 1;
    return (a->len > b->len) - (a->len < b->len);
}

static int same_key(loom_dmap_key_kind kind, const dkey *a, const dkey *b)
{
    return kind == LOOM_DMAP_I64 ? a->i == b->i : a->len == b->len && !memcmp(a->s, b->s, a->len);
}

/* ---- stores ---- */

int store_init(dmap_store *s, loom_dmap_key_kind kind, uint32_t width)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->width = width;
    return u64map_init(&s->index, 64);
}

void store_free(dmap_store *s)
{
    u64map_free(&s->index);
    free(s->hash);
    free(s->ikey);
    free(s->soff);
    free(s->slen);
    free(s->arena);
    free(s->val);
    free(s->alive);
    memset(s, 0, sizeof *s);
}

void store_clear(dmap_store *s)
{
    u64map_clear(&s->index);
    s->n = s->live = s->alen = 0;
}

dkey store_key(const dmap_store *s, uint32_t slot)
{
    dkey k = {0};
    k.hash = s->hash[slot];
    if (s->kind == LOOM_DMAP_I64)
        k.i = s->ikey[slot];
    else
        k.s = s->arena + s->soff[slot], k.len = s->slen[slot];
    return k;
}

const void *store_user_key(const dmap_store *s, uint32_t slot)
{
    return s->kind == LOOM_DMAP_I64 ? (const void *)&s->ikey[slot]
                                    : (const void *)(s->arena + s->soff[slot]);
}

int64_t store_find(const dmap_store *s, const dkey *k)
{
    uint32_t slot;
    if (!u64map_get(&s->index, k->hash, &slot) || !s->alive[slot]) return -1;
    dkey have = store_key(s, slot);
    return same_key(s->kind, &have, k) ? (int64_t)slot : -1;
}

static int grow(dmap_store *s)
{
    size_t cap = s->cap ? 2 * s->cap : 64;
    if (cap >= UINT32_MAX || cap > SIZE_MAX / sizeof(double) / s->width) return LOOM_ENOMEM;
#define GROW(field)                                                                                \
    do {                                                                                           \
        void *p_ = realloc(s->field, cap * sizeof *s->field);                                      \
        if (!p_) return LOOM_ENOMEM;                                                               \
        s->field = p_;                                                                             \
    } while (0)
    GROW(hash);
    GROW(ikey);
    GROW(soff);
    GROW(slen);
    GROW(alive);
#undef GROW
    double *v = realloc(s->val, cap * s->width * sizeof *v);
    if (!v) return LOOM_ENOMEM;
    s->val = v;
    s->cap = cap;
    return 0;
}

static int add_string(dmap_store *s, const dkey *k, uint64_t *off)
{
    if (s->alen + k->len + 1 > s->acap) {
        size_t cap = s->acap ? 2 * s->acap : 4096;
        while (cap < s->alen + k->len + 1) cap *= 2;
        char *a = realloc(s->arena, cap);
        if (!a) return LOOM_ENOMEM;
        s->arena = a;
        s->acap = cap;
    }
    memcpy(s->arena + s->alen, k->s, k->len);
    s->arena[s->alen + k->len] = 0;
    *off = s->alen;
    s->alen += k->len + 1;
    return 0;
}

int store_put(dmap_store *s, const dkey *k, uint32_t *slot)
{
    uint32_t at;
    if (u64map_get(&s->index, k->hash, &at)) {
        dkey have = store_key(s, at);
        if (!same_key(s->kind, &have, k)) return LOOM_EINVAL;
        if (!s->alive[at]) {
            s->alive[at] = 1, s->live++;
            memset(store_val(s, at), 0, s->width * sizeof(double));
        }
        *slot = at;
        return 0;
    }
    int rc = s->n == s->cap ? grow(s) : 0;
    uint64_t off = 0;
    if (!rc && s->kind == LOOM_DMAP_STR) rc = add_string(s, k, &off);
    int inserted;
    if (!rc && u64map_put(&s->index, k->hash, (uint32_t)s->n, &inserted) == UINT32_MAX)
        rc = LOOM_ENOMEM;
    if (rc) return rc;
    at = (uint32_t)s->n++;
    s->hash[at] = k->hash;
    s->ikey[at] = k->i;
    s->soff[at] = off;
    s->slen[at] = k->len;
    s->alive[at] = 1;
    s->live++;
    memset(store_val(s, at), 0, s->width * sizeof(double));
    *slot = at;
    return 0;
}

void store_erase(dmap_store *s, uint32_t slot)
{
    if (s->alive[slot]) s->alive[slot] = 0, s->live--;
}

typedef struct keyed {
    dkey k;
    uint32_t slot;
} keyed;

/* qsort has no user pointer: one comparison per kind of key. */
static int cmp_i64(const void *pa, const void *pb)
{
    return dkey_cmp(LOOM_DMAP_I64, &((const keyed *)pa)->k, &((const keyed *)pb)->k);
}

static int cmp_str(const void *pa, const void *pb)
{
    return dkey_cmp(LOOM_DMAP_STR, &((const keyed *)pa)->k, &((const keyed *)pb)->k);
}

int store_sorted(const dmap_store *s, uint32_t **slots, size_t *n)
{
    uint32_t *v = malloc((s->live + 1) * sizeof *v);
    keyed *e = malloc((s->live + 1) * sizeof *e);
    if (!v || !e) {
        free(v), free(e);
        return LOOM_ENOMEM;
    }
    size_t m = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->alive[i]) e[m].k = store_key(s, (uint32_t)i), e[m++].slot = (uint32_t)i;
    qsort(e, m, sizeof *e, s->kind == LOOM_DMAP_I64 ? cmp_i64 : cmp_str);
    for (size_t i = 0; i < m; i++) v[i] = e[i].slot;
    free(e);
    *slots = v;
    *n = m;
    return 0;
}

/* ---- messages ---- */

void dbuf_put(dbuf *b, const void *p, size_t len)
{
    if (b->oom || !len) return;
    if (b->n + len > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 1024;
        while (cap < b->n + len) cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, len);
    b->n += len;
}

void dbuf_key(dbuf *b, loom_dmap_key_kind kind, const dkey *k)
{
    if (kind == LOOM_DMAP_I64) {
        dbuf_put(b, &k->i, sizeof k->i);
        return;
    }
    dbuf_put(b, &k->len, sizeof k->len);
    dbuf_put(b, k->s, k->len);
}

void dbuf_free(dbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

int drd_get(drd *r, void *p, size_t len)
{
    if (len > r->n - r->at) return LOOM_EPROTO;
    memcpy(p, r->p + r->at, len);
    r->at += len;
    return 0;
}

int drd_key(drd *r, loom_dmap_key_kind kind, dkey *k)
{
    memset(k, 0, sizeof *k);
    if (kind == LOOM_DMAP_I64) {
        if (drd_get(r, &k->i, sizeof k->i)) return LOOM_EPROTO;
        k->hash = rand_hash64((uint64_t)k->i);
        return 0;
    }
    uint32_t len;
    if (drd_get(r, &len, sizeof len) || !len || len > LOOM_DMAP_MAX_KEY || len > r->n - r->at)
        return LOOM_EPROTO;
    /* hashed as dkey_of hashes it: a copy with its NUL */
    char tmp[LOOM_DMAP_MAX_KEY + 1];
    memcpy(tmp, r->p + r->at, len);
    tmp[len] = 0;
    if (memchr(tmp, 0, len) || dkey_of(LOOM_DMAP_STR, tmp, k)) return LOOM_EPROTO;
    k->s = (const char *)r->p + r->at;
    r->at += len;
    return 0;
}
