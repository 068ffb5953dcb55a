/* storage: the rows of one table partition; see storage.h.
 *
 * Dense partitions are two calloc'd arrays indexed by key - begin, one for
 * the values and one for the updater state, allocated (and, for a random
 * initial value, filled) once at creation.
 *
 * Sparse partitions give each key a slot on first write, through a u64map,
 * and keep slot s in a chunk of 2^chunk_shift rows (about 64 KB). Chunks are
 * never moved or freed before store_destroy(), so a row pointer returned by
 * store_row() stays valid while later rows are added, and growing costs no
 * copying, only a new chunk now and then.
 *
 * Initial values are drawn per value from a counter-based generator: a hash
 * of (seed, key, column), never a stream consumed in some order, so a row's
 * initial value does not depend on which server holds it, on which rows were
 * touched before, or on whether the partition is dense or sparse. */
#include "ps/storage.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rand.h"
#include "core/u64map.h"
#include "loom/error.h"

/* Dense partitions above this many bytes are refused: no server has the
 * memory, and asking calloc for it would only fail later or worse. */
#define DENSE_MAX_BYTES ((uint64_t)1 << 40)
#define CHUNK_BYTES     ((size_t)1 << 16)
#define MAX_STATE       4 /* state values per value; loom_updater_register allows 0..4 */

/* The caller's promise about keys, checked in debug builds. */
#define IN_RANGE(s, key) ((key) >= (s)->spec.begin && ((s)->spec.end == 0 || (key) < (s)->spec.end))

typedef struct chunk {
    unsigned char *values, *state;
} chunk;

struct ps_store {
    ps_store_spec spec;
    size_t row_bytes;   /* width values */
    size_t state_bytes; /* width * state_per_value values; 0 when there is no state */
    size_t nrows;       /* dense: end - begin; sparse: rows materialised */
    /* dense */
    unsigned char *values, *state;
    /* sparse */
    u64map map; /* key -> slot */
    unsigned chunk_shift;
    chunk *chunks;
    size_t nchunks, chunk_cap;
    /* changes since the last store_for_each: one byte per row (dense) or slot (sparse) */
    unsigned char *changed;
    size_t changed_cap; /* 0: not tracking */
};

/* A uniform double in [0, 1), the k-th draw for value (key, col). */
static double draw(uint64_t seed, uint64_t key, uint32_t col, unsigned k)
{
    uint64_t h = rand_hash64(rand_hash64(rand_hash64(seed) ^ key) ^ ((uint64_t)col << 1 | k));
    return rand_unit(h);
}

static double initial_value(const ps_store_spec *spec, uint64_t key, uint32_t col)
{
    double a = spec->init_a, b = spec->init_b;
    if (spec->init == LOOM_INIT_UNIFORM) {
        double v = a + (b - a) * draw(spec->init_seed, key, col, 0);
        return v < b ? v : a; /* rounding can reach b itself */
    }
    /* Box-Muller; 1 - u lies in (0, 1], so the log is finite. */
    double u1 = 1.0 - draw(spec->init_seed, key, col, 0);
    double u2 = draw(spec->init_seed, key, col, 1);
    return a + b * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void store_initial_row(const ps_store_spec *spec, uint64_t key, void *out)
{
    int is_float = spec->type == LOOM_F32 || spec->type == LOOM_F64;
    if (spec->init == LOOM_INIT_ZERO || !is_float) {
        memset(out, 0, spec->width * loom_type_size(spec->type));
        return;
    }
    for (uint32_t j = 0; j < spec->width; j++) {
        double v = initial_value(spec, key, j);
        if (spec->type == LOOM_F64) {
            ((double *)out)[j] = v;
        } else {
            float f = (float)v;
            /* Rounding to float can also reach the excluded upper bound. */
            if (spec->init == LOOM_INIT_UNIFORM && !(f < spec->init_b)) f = (float)spec->init_a;
            ((float *)out)[j] = f;
        }
    }
}

static int spec_valid(const ps_store_spec *s)
{
    if (loom_type_size(s->type) == 0 || s->width == 0 || s->state_per_value > MAX_STATE) return 0;
    if (s->storage == LOOM_DENSE) {
        if (s->end <= s->begin) return 0; /* finite and non-empty */
    } else if (s->storage == LOOM_SPARSE) {
        if (s->end != 0 && s->end <= s->begin) return 0;
    } else {
        return 0;
    }
    switch (s->init) {
    case LOOM_INIT_ZERO:
        return 1;
    case LOOM_INIT_UNIFORM:
        if (!isfinite(s->init_b - s->init_a) || s->init_a > s->init_b) return 0;
        break;
    case LOOM_INIT_NORMAL:
        if (!isfinite(s->init_a) || !isfinite(s->init_b) || s->init_b < 0) return 0;
        break;
    default:
        return 0;
    }
    return s->type == LOOM_F32 || s->type == LOOM_F64; /* random values only for floats */
}

static int dense_create(ps_store *s)
{
    uint64_t rows = s->spec.end - s->spec.begin;
    uint64_t per_row = s->row_bytes + s->state_bytes;
    if (rows > DENSE_MAX_BYTES / per_row) return LOOM_ENOMEM; /* also rules out overflow */
    s->nrows = (size_t)rows;
    s->values = calloc(s->nrows, s->row_bytes);
    if (!s->values) return LOOM_ENOMEM;
    if (s->state_bytes) {
        s->state = calloc(s->nrows, s->state_bytes);
        if (!s->state) return LOOM_ENOMEM;
    }
    if (s->spec.init != LOOM_INIT_ZERO)
        for (size_t i = 0; i < s->nrows; i++)
            store_initial_row(&s->spec, s->spec.begin + i, s->values + i * s->row_bytes);
    return 0;
}

int store_create(const ps_store_spec *spec, ps_store **out)
{
    if (!spec || !out || !spec_valid(spec)) return LOOM_EINVAL;
    ps_store *s = calloc(1, sizeof *s);
    if (!s) return LOOM_ENOMEM;
    s->spec = *spec;
    s->row_bytes = spec->width * loom_type_size(spec->type);
    s->state_bytes = s->row_bytes * spec->state_per_value;
    int rc;
    if (spec->storage == LOOM_DENSE) {
        rc = dense_create(s);
    } else {
        while ((s->row_bytes << (s->chunk_shift + 1)) <= CHUNK_BYTES) s->chunk_shift++;
        rc = u64map_init(&s->map, 0);
    }
    if (rc != 0) {
        store_destroy(s);
        return rc;
    }
    *out = s;
    return 0;
}

void store_destroy(ps_store *s)
{
    if (!s) return;
    free(s->values);
    free(s->state);
    for (size_t c = 0; c < s->nchunks; c++) {
        free(s->chunks[c].values);
        free(s->chunks[c].state);
    }
    free(s->chunks);
    free(s->changed);
    u64map_free(&s->map);
    free(s);
}

/* Sparse slot -> its row and state. */
static unsigned char *slot_row(const ps_store *s, uint32_t slot)
{
    size_t in_chunk = slot & (((size_t)1 << s->chunk_shift) - 1);
    return s->chunks[slot >> s->chunk_shift].values + in_chunk * s->row_bytes;
}

static unsigned char *slot_state(const ps_store *s, uint32_t slot)
{
    size_t in_chunk = slot & (((size_t)1 << s->chunk_shift) - 1);
    return s->state_bytes ? s->chunks[slot >> s->chunk_shift].state + in_chunk * s->state_bytes
                          : NULL;
}

/* Make sure the chunk for slot s->nrows exists. 0 or LOOM_ENOMEM. */
static int reserve_slot(ps_store *s)
{
    size_t c = s->nrows >> s->chunk_shift;
    if (c < s->nchunks) return 0;
    if (s->nchunks == s->chunk_cap) {
        size_t cap = s->chunk_cap ? 2 * s->chunk_cap : 16;
        chunk *grown = realloc(s->chunks, cap * sizeof *grown);
        if (!grown) return LOOM_ENOMEM;
        s->chunks = grown;
        s->chunk_cap = cap;
    }
    size_t rows = (size_t)1 << s->chunk_shift;
    chunk ch = {malloc(rows * s->row_bytes), NULL};
    if (s->state_bytes) ch.state = malloc(rows * s->state_bytes);
    if (!ch.values || (s->state_bytes && !ch.state)) {
        free(ch.values);
        free(ch.state);
        return LOOM_ENOMEM;
    }
    s->chunks[s->nchunks++] = ch;
    if (s->changed_cap) {
        size_t cap = s->nchunks << s->chunk_shift;
        unsigned char *grown = realloc(s->changed, cap);
        if (!grown) return LOOM_ENOMEM;
        memset(grown + s->changed_cap, 0, cap - s->changed_cap);
        s->changed = grown;
        s->changed_cap = cap;
    }
    return 0;
}

void *store_row(ps_store *s, uint64_t key, void **state)
{
    assert(IN_RANGE(s, key));
    if (s->spec.storage == LOOM_DENSE) {
        size_t i = (size_t)(key - s->spec.begin);
        if (state) *state = s->state_bytes ? s->state + i * s->state_bytes : NULL;
        if (s->changed_cap) s->changed[i] = 1;
        return s->values + i * s->row_bytes;
    }
    uint32_t slot;
    if (!u64map_get(&s->map, key, &slot)) {
        /* Slots are 32-bit and UINT32_MAX is not a valid one. */
        if (s->nrows >= UINT32_MAX || reserve_slot(s) != 0) return NULL;
        int inserted;
        slot = u64map_put(&s->map, key, (uint32_t)s->nrows, &inserted);
        if (slot == UINT32_MAX) return NULL;
        s->nrows++;
        store_initial_row(&s->spec, key, slot_row(s, slot));
        if (s->state_bytes) memset(slot_state(s, slot), 0, s->state_bytes);
    }
    if (state) *state = slot_state(s, slot);
    if (s->changed_cap) s->changed[slot] = 1;
    return slot_row(s, slot);
}

void store_read(ps_store *s, uint64_t key, void *out)
{
    assert(IN_RANGE(s, key));
    uint32_t slot;
    if (s->spec.storage == LOOM_DENSE)
        memcpy(out, s->values + (size_t)(key - s->spec.begin) * s->row_bytes, s->row_bytes);
    else if (u64map_get(&s->map, key, &slot))
        memcpy(out, slot_row(s, slot), s->row_bytes);
    else
        store_initial_row(&s->spec, key, out);
}

void store_read_many(ps_store *s, const uint64_t *keys, size_t n, void *out)
{
    unsigned char *o = out;
    if (s->spec.storage != LOOM_DENSE) {
        for (size_t i = 0; i < n; i++) store_read(s, keys[i], o + i * s->row_bytes);
        return;
    }
    /* Dense: index the array directly; one-value rows are the common case. */
    uint64_t begin = s->spec.begin;
    if (s->row_bytes == 4) {
        for (size_t i = 0; i < n; i++)
            memcpy(o + 4 * i, s->values + 4 * (size_t)(keys[i] - begin), 4);
    } else if (s->row_bytes == 8) {
        for (size_t i = 0; i < n; i++)
            memcpy(o + 8 * i, s->values + 8 * (size_t)(keys[i] - begin), 8);
    } else {
        for (size_t i = 0; i < n; i++)
            memcpy(o + i * s->row_bytes, s->values + (size_t)(keys[i] - begin) * s->row_bytes,
                   s->row_bytes);
    }
}

void *store_dense_rows(ps_store *s)
{
    return s->spec.storage == LOOM_DENSE ? s->values : NULL;
}

void store_read_range(ps_store *s, uint64_t begin, uint64_t end, void *out)
{
    uint64_t n = end - begin;
    if (n == 0) return;
    if (s->spec.storage == LOOM_DENSE) {
        assert(IN_RANGE(s, begin) && IN_RANGE(s, end - 1));
        memcpy(out, s->values + (size_t)(begin - s->spec.begin) * s->row_bytes,
               (size_t)n * s->row_bytes);
        return;
    }
    for (uint64_t i = 0; i < n; i++)
        store_read(s, begin + i, (unsigned char *)out + (size_t)i * s->row_bytes);
}

size_t store_num_rows(const ps_store *s)
{
    return s->nrows;
}

int store_track_changes(ps_store *s)
{
    if (s->changed_cap) return 0;
    size_t cap = s->spec.storage == LOOM_DENSE ? s->nrows : s->nchunks << s->chunk_shift;
    s->changed = calloc(cap ? cap : 1, 1);
    if (!s->changed) return LOOM_ENOMEM;
    s->changed_cap = cap ? cap : 1;
    /* A sparse row materialised before tracking began differs from its initial value. */
    if (s->spec.storage != LOOM_DENSE) memset(s->changed, 1, s->nrows);
    return 0;
}

void store_mark_changed(ps_store *s, const uint64_t *keys, size_t n)
{
    if (!s->changed_cap) return;
    if (s->spec.storage == LOOM_DENSE) {
        for (size_t i = 0; i < n; i++) s->changed[keys[i] - s->spec.begin] = 1;
        return;
    }
    for (size_t i = 0; i < n; i++) store_row(s, keys[i], NULL);
}

void store_mark_changed_range(ps_store *s, uint64_t begin, uint64_t end)
{
    if (!s->changed_cap || end <= begin) return;
    if (s->spec.storage == LOOM_DENSE)
        memset(s->changed + (begin - s->spec.begin), 1, (size_t)(end - begin));
    else
        for (uint64_t k = begin; k < end; k++) store_row(s, k, NULL);
}

/* Sparse: the key of each slot, in slot order (the map knows key -> slot only). */
static uint64_t *slot_keys(ps_store *s)
{
    uint64_t *keys = malloc((s->nrows ? s->nrows : 1) * sizeof *keys);
    if (!keys) return NULL;
    if (s->map.slots)
        for (size_t b = 0; b <= s->map.mask; b++)
            if (s->map.slots[b]) keys[s->map.slots[b] - 1] = s->map.keys[b];
    return keys;
}

int store_for_each(ps_store *s, int only_changed, store_row_fn fn, void *ctx)
{
    int rc = 0;
    int track = s->changed_cap != 0;
    if (s->spec.storage == LOOM_DENSE) {
        for (size_t i = 0; i < s->nrows && !rc; i++) {
            if (only_changed && track && !s->changed[i]) continue;
            rc = fn(ctx, s->spec.begin + i, s->values + i * s->row_bytes,
                    s->state_bytes ? s->state + i * s->state_bytes : NULL);
        }
    } else {
        uint64_t *keys = slot_keys(s);
        if (!keys) return LOOM_ENOMEM;
        for (size_t i = 0; i < s->nrows && !rc; i++) {
            if (only_changed && track && !s->changed[i]) continue;
            rc = fn(ctx, keys[i], slot_row(s, (uint32_t)i), slot_state(s, (uint32_t)i));
        }
        free(keys);
    }
    if (!rc) store_forget_changes(s);
    return rc;
}

void store_forget_changes(ps_store *s)
{
    if (s->changed_cap) memset(s->changed, 0, s->changed_cap);
}

size_t store_state_bytes(const ps_store *s)
{
    return s->state_bytes;
}
