/* sketch: Count-Min sketches over a dense int64 "sum" table (loom/sketch.h).
 *
 * Counter (i, h_i(k)) is key i * w + h_i(k) of the table, h_i(k) =
 * rand_mix64(k ^ seed_i) mod w with a seed per row drawn from the sketch's
 * seed, so the rows hash independently and every worker computes the same
 * positions. An addition of n keys becomes one push of at most d * n
 * counters, whose equal keys the push adds together first (keys.h), so a
 * counter is sent once per call however often its keys repeat. A query
 * pulls them (each distinct counter asked once) and takes the minimum over
 * a key's rows. The table is dense (its d * w counters are what the sketch costs the
 * servers, split by range), without a process cache: a query always asks
 * the servers. */
#include <stdlib.h>
#include <string.h>

#include <loom/sketch.h>

#include "core/rand.h"
#include "loom/error.h"

#define SKETCH_MAX_DEPTH    32
#define SKETCH_MAX_COUNTERS (1ull << 40)

struct loom_sketch {
    loom_table *table;
    uint32_t depth;
    uint64_t width;
    uint64_t row_seed[SKETCH_MAX_DEPTH];
};

static uint64_t position(const loom_sketch *s, uint32_t row, uint64_t key)
{
    return (uint64_t)row * s->width + rand_mix64(key ^ s->row_seed[row]) % s->width;
}

int loom_sketch_open(loom_node *node, const char *name, const loom_sketch_opts *opts,
                     loom_sketch **out)
{
    static const loom_sketch_opts defaults = LOOM_SKETCH_OPTS_DEFAULT;
    const loom_sketch_opts *o = opts ? opts : &defaults;
    if (!out || !name) return LOOM_EINVAL;
    *out = NULL;
    if (o->depth < 1 || o->depth > SKETCH_MAX_DEPTH || o->width < 1 ||
        o->width > SKETCH_MAX_COUNTERS / o->depth)
        return LOOM_EINVAL;
    loom_sketch *s = calloc(1, sizeof *s);
    if (!s) return LOOM_ENOMEM;
    s->depth = o->depth;
    s->width = o->width;
    uint64_t state = o->seed;
    for (uint32_t i = 0; i < s->depth; i++) s->row_seed[i] = rand_splitmix64(&state);
    loom_table_opts to = LOOM_TABLE_OPTS_DEFAULT;
    to.type = LOOM_I64;
    to.storage = LOOM_DENSE;
    to.key_begin = 0;
    to.key_end = (uint64_t)s->depth * s->width;
    to.consistency = o->consistency;
    to.staleness = o->staleness;
    to.cache = 0;
    int rc = loom_table_open(node, name, &to, &s->table);
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* pos[j * d + i] = key j's counter in row i. */
static uint64_t *positions(const loom_sketch *s, const uint64_t *keys, size_t n)
{
    uint64_t *pos = malloc(n * s->depth * sizeof *pos);
    if (!pos) return NULL;
    for (size_t j = 0; j < n; j++)
        for (uint32_t i = 0; i < s->depth; i++) pos[j * s->depth + i] = position(s, i, keys[j]);
    return pos;
}

int loom_sketch_add(loom_sketch *s, const uint64_t *keys, const int64_t *counts, size_t n)
{
    if (!s || (n && (!keys || !counts))) return LOOM_EINVAL;
    for (size_t j = 0; j < n; j++)
        if (counts[j] < 0) return LOOM_EINVAL;
    if (!n) return 0;
    uint64_t *pos = positions(s, keys, n);
    int64_t *add = malloc(n * s->depth * sizeof *add);
    int rc = pos && add ? 0 : LOOM_ENOMEM;
    for (size_t k = 0; !rc && k < n * s->depth; k++) add[k] = counts[k / s->depth];
    if (!rc) rc = loom_push(s->table, pos, n * s->depth, add); /* equal keys are added first */
    free(pos), free(add);
    return rc;
}

int loom_sketch_query(loom_sketch *s, const uint64_t *keys, size_t n, int64_t *out)
{
    if (!s || (n && (!keys || !out))) return LOOM_EINVAL;
    if (!n) return 0;
    uint64_t *pos = positions(s, keys, n);
    int64_t *val = malloc(n * s->depth * sizeof *val);
    int rc = pos && val ? 0 : LOOM_ENOMEM;
    if (!rc) rc = loom_pull(s->table, pos, n * s->depth, val); /* each counter asked once */
    for (size_t j = 0; !rc && j < n; j++) {
        out[j] = val[j * s->depth];
        for (uint32_t i = 1; i < s->depth; i++)
            if (val[j * s->depth + i] < out[j]) out[j] = val[j * s->depth + i];
    }
    free(pos), free(val);
    return rc;
}

loom_table *loom_sketch_table(loom_sketch *s)
{
    return s ? s->table : NULL;
}

void loom_sketch_close(loom_sketch *s)
{
    free(s);
}
