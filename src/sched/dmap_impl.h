/* dmap_impl: what dmap_store.c (keys and one worker's entries), dmap.c (the
 * container and its exchanges) and dmap_for.c (SyncFor and AsyncFor over a
 * map) share (loom/dmap.h). */
#ifndef LOOM_SCHED_DMAP_IMPL_H
#define LOOM_SCHED_DMAP_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "core/u64map.h"
#include "loom/dmap.h"

/* A key as the runtime handles it: the int64, or the string's bytes (not
 * NUL-terminated when it points into a message), and its 64-bit hash, which
 * names its owner and its place in a store. */
typedef struct dkey {
    int64_t i;
    const char *s;
    uint32_t len;
    uint64_t hash;
} dkey;

/* The user's key (an int64_t * or a string) as a dkey: 0, or LOOM_EINVAL for
 * an empty string or one longer than LOOM_DMAP_MAX_KEY. */
int dkey_of(loom_dmap_key_kind kind, const void *key, dkey *out);
/* <0, 0, >0: the loops' serial order (numeric; bytewise, a prefix first). */
int dkey_cmp(loom_dmap_key_kind kind, const dkey *a, const dkey *b);

/* Entries keyed by dkeys: slots found through a u64map of the hashes (two
 * strings of one hash cannot both be held: store_put refuses the second),
 * each slot a key (kept NUL-terminated for strings), width values and a live
 * flag (erased slots keep their key and come back on a new put). */
typedef struct dmap_store {
    loom_dmap_key_kind kind;
    uint32_t width;
    u64map index;
    size_t n, cap, live;
    uint64_t *hash;
    int64_t *ikey;
    uint64_t *soff;
    uint32_t *slen;
    char *arena;
    size_t alen, acap;
    double *val;
    uint8_t *alive;
} dmap_store;

int store_init(dmap_store *s, loom_dmap_key_kind kind, uint32_t width);
void store_free(dmap_store *s);
/* Forgets every entry, keeping the memory. */
void store_clear(dmap_store *s);
/* The live slot holding key k, or -1. */
int64_t store_find(const dmap_store *s, const dkey *k);
/* The slot of key k, made live (values zeroed when it was not): 0, LOOM_ENOMEM,
 * or LOOM_EINVAL for a string whose hash another string has. */
int store_put(dmap_store *s, const dkey *k, uint32_t *slot);
void store_erase(dmap_store *s, uint32_t slot);
dkey store_key(const dmap_store *s, uint32_t slot);
/* The key as the user sees it: an int64_t * or a NUL-terminated string. */
const void *store_user_key(const dmap_store *s, uint32_t slot);
static inline double *store_val(const dmap_store *s, uint32_t slot)
{
    return s->val + (size_t)slot * s->width;
}
/* The live slots in key order (*n of them), allocated; LOOM_ENOMEM. */
int store_sorted(const dmap_store *s, uint32_t **slots, size_t *n);

/* A growing message, and a reader of one. Writes after a failed allocation
 * are dropped and `oom` set; reads past the end fail. */
typedef struct dbuf {
    unsigned char *p;
    size_t n, cap;
    int oom;
} dbuf;
void dbuf_put(dbuf *b, const void *p, size_t len);
void dbuf_key(dbuf *b, loom_dmap_key_kind kind, const dkey *k);
void dbuf_free(dbuf *b);
typedef struct drd {
    const unsigned char *p;
    size_t n, at;
} drd;
int drd_get(drd *r, void *p, size_t len);
/* A key from a message (a string's bytes point into it): 0, or LOOM_EPROTO. */
int drd_key(drd *r, loom_dmap_key_kind kind, dkey *k);

struct loom_dmap {
    loom_node *node;
    uint32_t engine; /* the engine number its worker-to-worker messages carry */
    uint64_t seq;    /* exchanges made: each uses a version of its own */
    uint32_t W, rank;
    loom_dmap_key_kind kind;
    uint32_t width;
    uint64_t total; /* every worker's entries after the last collective call */
    dmap_store own; /* the entries this worker owns */
};

uint32_t dmap_owner_of(const loom_dmap *m, const dkey *k);
/* Collective: out[w] (W messages, out[rank] included) to worker w, and in[w]
 * what worker w sent this one (in[rank] takes out[rank]'s bytes), each
 * message behind this worker's rc; returns the first non-zero rc of any
 * worker in rank order (a sentence naming it in err on the others), else 0
 * or the exchange's own error. The out messages are emptied. */
int dmap_exchange(loom_dmap *m, int rc, dbuf *out, dbuf *in, char *err, size_t errlen);
/* Collective: every worker's live count into m->total (0 or an error). */
int dmap_agree_size(loom_dmap *m);

#endif
