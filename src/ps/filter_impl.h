/* filter_impl: what the files of the filter module share (filter.c: spec,
 * chain, wire format, key cache; filter_select.c: kkt, sigmod, skip;
 * filter_codec.c: quantisation and compression). Not for other modules: they
 * use filter.h. */
#ifndef LOOM_PS_FILTER_IMPL_H
#define LOOM_PS_FILTER_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "core/u64map.h"
#include "ps/filter.h"

/* The rows of a message while the select filters work on it: keys and values
 * as doubles (the select filters take f32 and f64 tables only). */
typedef struct filter_rows {
    uint64_t *keys;
    double *vals;
    size_t n, cap;
} filter_rows;

/* Per-key state of sigmod: what is held back (push) or what was last sent
 * (pull), a row of width doubles per slot of the map. */
typedef struct filter_held {
    u64map map;
    uint64_t *keys; /* of each slot */
    double *rows;
    size_t nslots, cap;
} filter_held;

struct filter_chain {
    filter_spec spec;
    filter_dir dir;
    loom_type type;
    size_t width, value_size;
    uint64_t rng[4]; /* xoshiro256** state */
    filter_stats stats[FILTER_KIND_COUNT];
    uint64_t raw_bytes, wire_bytes, dropped;
    filter_held held;
    filter_rows work;
    /* key cache: the receiver's lists, the sender's digests of what it sent;
     * both replace the oldest entry first, so they stay alike while messages
     * arrive in order. */
    struct keycache_entry {
        uint64_t digest;
        uint64_t *keys; /* receiver only */
        size_t n;
        int used;
    } cache[FILTER_KEYCACHE_ENTRIES];
    size_t cache_next;
};

/* A uniform double in [0, 1) from the chain's stream. */
double filter_uniform(filter_chain *c);
/* Bytes of n rows as plain keys and values. */
uint64_t filter_row_bytes(const filter_chain *c, size_t n);

/* Room for n working rows. */
int filter_work_reserve(filter_chain *c, size_t n);
/* The select filters, in place on c->work (filter_select.c). */
int filter_kkt(filter_chain *c, const filter_msg *m);
int filter_sigmod(filter_chain *c, int flush);
void filter_skip(filter_chain *c);
void filter_held_free(filter_held *h);

/* Quantisation (filter_codec.c). Encoded size of count values at `bits`. */
size_t filter_quant_size(size_t count, int bits);
/* Write count values (doubles) as quantised blocks to out (filter_quant_size bytes).
 * LOOM_EINVAL if a value is not finite. */
int filter_quant_encode(filter_chain *c, const double *vals, size_t count, int bits, uint8_t *out);
/* Read them back into out (count values of type t). LOOM_EPROTO for a bad scale
 * or an integer outside the symmetric range. */
int filter_quant_decode(const uint8_t *in, size_t count, int bits, loom_type t, void *out);

/* Compression: codec 1 = lz4, 2 = zstd (level). The compressed form of
 * body into a new buffer; *outlen = 0 when it would not be smaller. */
int filter_compress(int codec, int level, const uint8_t *body, size_t len, uint8_t **out,
                    size_t *outlen);
/* Decompress in (len bytes) into out, which must come out exactly body_len
 * bytes; LOOM_EPROTO otherwise. */
int filter_decompress(int codec, const uint8_t *in, size_t len, uint8_t *out, size_t body_len);

#endif
