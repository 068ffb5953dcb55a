/* filter_helpers.h: what the filter tests (test_filter.c, test_filter_hostile.c)
 * share: a chain from a spec, random keys and values (test_rng.h, one seed for
 * both), one message encoded and decoded, frames built by hand field by field
 * and the code their decoding returns. */
#ifndef LOOM_TESTS_UNIT_FILTER_HELPERS_H
#define LOOM_TESTS_UNIT_FILTER_HELPERS_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "loom/error.h"
#include "ps/filter.h"

#define TEST_RNG_SEED 0x5eed5eed12345678ULL
#include "test_rng.h"

static inline filter_chain *chain(const char *spec_text, filter_dir dir, loom_type t, size_t width)
{
    filter_spec spec;
    char err[200] = "";
    assert_int_equal(filter_spec_parse(spec_text, &spec, err, sizeof err), 0);
    filter_chain *c = NULL;
    assert_int_equal(filter_chain_create(&spec, dir, t, width, 42, &c, err, sizeof err), 0);
    return c;
}

/* n ascending random keys. */
static inline uint64_t *random_keys(size_t n)
{
    uint64_t *k = malloc((n ? n : 1) * sizeof *k);
    uint64_t key = rng() % 8;
    for (size_t i = 0; i < n; i++) {
        k[i] = key;
        key += 1 + rng() % 5;
    }
    return k;
}

/* count random values of type t; about a third of them 0 (so that they compress). */
static inline void *random_values(loom_type t, size_t count)
{
    void *v = malloc(count * 8 + 1);
    for (size_t i = 0; i < count; i++) {
        int64_t x = rng() % 3 == 0 ? 0 : (int64_t)(rng() % 2001) - 1000;
        double d = (double)x / 7.0;
        switch (t) {
        case LOOM_F32:
            ((float *)v)[i] = (float)d;
            break;
        case LOOM_F64:
            ((double *)v)[i] = d;
            break;
        case LOOM_I32:
            ((int32_t *)v)[i] = (int32_t)x;
            break;
        case LOOM_I64:
            ((int64_t *)v)[i] = x * 1000003;
            break;
        }
    }
    return v;
}

typedef struct decoded {
    uint64_t *keys;
    void *vals;
    size_t n;
    uint64_t digest;
    size_t wire;
} decoded;

static inline void decoded_free(decoded *d)
{
    free(d->keys);
    free(d->vals);
    memset(d, 0, sizeof *d);
}

/* Encode with s, decode with r: the decoder's code. */
static inline int send_msg(filter_chain *s, filter_chain *r, const filter_msg *m, decoded *d)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    assert_int_equal(filter_chain_encode(s, m, &buf, &len), 0);
    d->wire = len;
    int rc = filter_chain_decode(r, buf, len, SIZE_MAX, &d->keys, &d->vals, &d->n, &d->digest);
    free(buf);
    return rc;
}

static inline double value_at(loom_type t, const void *v, size_t i)
{
    return t == LOOM_F32 ? (double)((const float *)v)[i] : ((const double *)v)[i];
}

static inline int decode_code(filter_chain *r, const uint8_t *buf, size_t len)
{
    uint64_t *k;
    void *v;
    size_t n;
    uint64_t digest;
    /* An exact-size copy, so that a read past the end is a fault under ASan. */
    uint8_t *copy = malloc(len ? len : 1);
    memcpy(copy, buf, len);
    int rc = filter_chain_decode(r, copy, len, SIZE_MAX, &k, &v, &n, &digest);
    free(copy);
    if (rc == 0) {
        free(k);
        free(v);
    } else {
        assert_null(k);
        assert_null(v);
        assert_true(rc == LOOM_EPROTO || rc == LOOM_ELIMIT || rc == LOOM_ENOTFOUND);
    }
    return rc;
}

/* Frames built by hand, field by field. */
static inline size_t put_frame(uint8_t *out, int codec, uint32_t body_len)
{
    out[0] = 1;
    out[1] = (uint8_t)codec;
    for (int i = 0; i < 4; i++) out[2 + i] = (uint8_t)(body_len >> (8 * i));
    return 6;
}

static inline size_t put_body_header(uint8_t *out, int type, int key_form, int bits, uint32_t width,
                                     uint64_t n)
{
    out[0] = (uint8_t)type;
    out[1] = (uint8_t)key_form;
    out[2] = (uint8_t)bits;
    out[3] = 0;
    for (int i = 0; i < 4; i++) out[4 + i] = (uint8_t)(width >> (8 * i));
    for (int i = 0; i < 8; i++) out[8 + i] = (uint8_t)(n >> (8 * i));
    return 16;
}

static inline void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

#endif
