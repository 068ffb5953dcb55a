/* fuzz_decode: every decoder that reads bytes off the network, fed arbitrary input.
 *
 * Built two ways from this one file (tests/fuzz/CMakeLists.txt):
 *   - with LOOM_FUZZ=ON and clang: a libFuzzer target (-fsanitize=fuzzer,address,undefined);
 *   - always: a plain driver (LOOM_FUZZ_DRIVER) whose main() replays the seed corpus, every
 *     truncation of every seed, each of its frames a few bytes shorter or longer, and a few
 *     thousand deterministic random and mutated inputs,
 *     so the ordinary gcc build (and the ASan/UBSan build) runs the same checks. The driver
 *     also writes the seed corpus (--write-seeds DIR).
 *
 * Input layout: byte 0 = (frames) | (selector << 3): frames = byte0 % 8 (0..7, more than
 * any type allows); the selector (0..31) picks the job shape for the ROSTER parser. Then,
 * per frame, a 2-byte little-endian length and that many bytes (a length running past the
 * end takes what is left; missing frames are empty). Frame 0 is the header frame, the
 * others are payload frames. Every frame is copied to its own heap buffer of exactly its
 * size so that AddressSanitizer reports any read past a frame.
 *
 * Checks, for every input:
 *   - msg_decode_header() with the frame count that arrived, and with the count the header
 *     claims: on success the fields are within the rules and re-encoding gives back the
 *     identical 48 bytes;
 *   - every frame parsed as a REGISTER blob, a ROSTER blob, a REJECT reason, a METRICS
 *     blob, a table definition, and by a byte-driven walk of the blob reader: parsers never
 *     read out of bounds (the sanitizers), a successful REGISTER/ROSTER/METRICS/definition
 *     re-encodes to the identical bytes (ps_def_decode's encoding is canonical: the scheduler
 * compares definitions as bytes), and the reader keeps its contract (a short read sets `bad`,
 *     returns zeros and consumes nothing).
 *
 * REGISTER and ROSTER go through msg_register_decode() and msg_roster_decode(), the
 * functions the scheduler and the nodes use. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/msg.h"
#include "ft/ft_impl.h"
#include "fuzz_driver.h"
#include "loom/error.h"
#include "ps/msg_types.h"
#include "ps/ps.h"

#define FUZZ_MAX_FRAMES 7

/* What decoded successfully, so the driver can tell that its seeds reach every success
 * path (a corpus that only exercises the error paths proves little). */
static struct {
    unsigned long header_ok, register_ok, roster_ok, def_ok, reject_ok, metrics_ok;
} stats;

/* ---- the input's frames ---- */

typedef struct frames {
    size_t count;
    unsigned selector;
    uint8_t *data[FUZZ_MAX_FRAMES];
    size_t len[FUZZ_MAX_FRAMES];
} frames;

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static void split_frames(const uint8_t *in, size_t size, frames *f)
{
    memset(f, 0, sizeof *f);
    if (size == 0) return;
    f->count = in[0] % 8u;
    f->selector = in[0] >> 3;
    size_t pos = 1;
    for (size_t i = 0; i < f->count; i++) {
        size_t len = 0;
        if (size - pos >= 2) {
            len = le16(in + pos);
            pos += 2;
        } else {
            pos = size;
        }
        if (len > size - pos) len = size - pos;
        /* Exactly len bytes (malloc(0) may return NULL: keep a valid pointer anyway). */
        f->data[i] = malloc(len ? len : 1);
        FUZZ_CHECK(f->data[i] != NULL);
        if (len) memcpy(f->data[i], in + pos, len);
        f->len[i] = len;
        pos += len;
    }
}

static void free_frames(frames *f)
{
    for (size_t i = 0; i < f->count; i++) free(f->data[i]);
}

/* ---- header ---- */

static void check_header(const frames *f, size_t arrived)
{
    msg_header h;
    memset(&h, 0xA5, sizeof h);
    int err = msg_decode_header(f->data[0], f->len[0], arrived, &h);
    FUZZ_CHECK(msg_type_name(f->len[0] > 3 ? f->data[0][3] : 0) != NULL);
    FUZZ_CHECK(err >= MSG_OK && err < MSG_ERR_COUNT_);
    FUZZ_CHECK(strcmp(msg_error_name(err), "unknown") != 0);
    if (err != MSG_OK) return;
    stats.header_ok++;
    FUZZ_CHECK(f->len[0] == MSG_HEADER_SIZE);
    FUZZ_CHECK(strcmp(msg_type_name(h.type), "UNKNOWN") != 0);
    FUZZ_CHECK((h.flags & ~MSG_F_KNOWN) == 0);
    FUZZ_CHECK(h.nframes == arrived && arrived <= MSG_MAX_FRAMES);
    uint8_t again[MSG_HEADER_SIZE];
    msg_encode_header(&h, again);
    FUZZ_CHECK(memcmp(again, f->data[0], MSG_HEADER_SIZE) == 0);
}

/* ---- REGISTER and ROSTER: the library's own codecs (msg.c) ---- */

static void same_bytes(blob_writer *w, const uint8_t *p, size_t len)
{
    FUZZ_CHECK(!w->bad);
    FUZZ_CHECK(w->len == len);
    FUZZ_CHECK(len == 0 || memcmp(w->buf, p, len) == 0);
    free(w->buf);
}

static void check_register(const uint8_t *p, size_t len)
{
    msg_register r;
    if (msg_register_decode(p, len, &r)) return;
    stats.register_ok++;
    FUZZ_CHECK(strlen(r.address) < sizeof r.address);
    blob_writer w = {0};
    msg_register_encode(&r, &w);
    same_bytes(&w, p, len);
}

/* METRICS (a worker's latest metrics for the status page): a decoded payload keeps every
 * rule (msg.h) and re-encodes to the identical bytes. */
static void check_metrics(const uint8_t *p, size_t len)
{
    msg_metrics m;
    if (msg_metrics_decode(p, len, &m)) return;
    stats.metrics_ok++;
    FUZZ_CHECK(m.count <= MSG_METRICS_MAX);
    for (uint32_t i = 0; i < m.count; i++)
        FUZZ_CHECK(msg_metric_name_ok(m.name[i]) && isfinite(m.value[i]));
    blob_writer w = {0};
    msg_metrics_encode(&m, &w);
    same_bytes(&w, p, len);
}

/* One node's record as msg_roster_decode() fills it (strided, like a peer). */
typedef struct roster_entry {
    char addr[MSG_ADDR_MAX];
    uint8_t rid[MSG_RID_SIZE];
} roster_entry;

static void check_roster(const uint8_t *p, size_t len, unsigned selector)
{
    blob_reader r = {p, len, 0};
    uint32_t count = blob_get_u32(&r);
    /* A job of the roster's own size (the only one it can be valid for), the
     * number of servers picked by the selector, within validate_config()'s
     * limits (1..1000 servers, 1..65536 workers). */
    if (r.bad || count < 3 || count > 1u + 1000u + 65536u) return;
    uint32_t servers = 1u + selector % (count - 2u);
    if (servers > 1000 || count - 1u - servers > 65536u) return;
    roster_entry *e = malloc((size_t)count * sizeof *e);
    FUZZ_CHECK(e != NULL);
    if (!msg_roster_decode(p, len, count, servers, e[0].addr, e[0].rid, sizeof *e)) {
        stats.roster_ok++;
        blob_writer w = {0};
        msg_roster_encode(count, servers, e[0].addr, e[0].rid, sizeof *e, &w);
        same_bytes(&w, p, len);
    }
    free(e);
}

/* ---- REJECT: on_reject() reads one string ---- */

static void check_reject(const uint8_t *p, size_t len)
{
    char why[256];
    blob_reader r = {p, len, 0};
    blob_get_str(&r, why, sizeof why);
    FUZZ_CHECK(strlen(why) < sizeof why);
    if (!r.bad) stats.reject_ok++;
}

/* ---- table definitions: ps_def_decode() and the partitioning of a decoded table ---- */

static void check_def(const uint8_t *p, size_t len, unsigned selector)
{
    ps_table_def d;
    if (ps_def_decode(p, len, &d)) return;
    stats.def_ok++;
    const loom_table_opts *o = &d.opts;
    FUZZ_CHECK(o->updater == d.updater);
    FUZZ_CHECK(strlen(d.name) >= 1 && strlen(d.name) <= LOOM_MAX_NAME);
    FUZZ_CHECK(strlen(d.updater) >= 1 && strlen(d.updater) <= LOOM_MAX_NAME);
    size_t vsize = loom_type_size(o->type);
    FUZZ_CHECK(vsize != 0 && o->width >= 1 && (size_t)o->width * vsize <= PS_MAX_ROW_BYTES);
    FUZZ_CHECK((ps_u128)o->key_begin < ps_key_end(o));

    blob_writer w = {0};
    FUZZ_CHECK(ps_def_encode(&d, &w) == 0);
    same_bytes(&w, p, len);

    /* A server computes its slice of a received table (on_create): slices must tile the
     * key range in order, and ps_server_of() must agree with them. */
    int servers = 1 + (int)(selector * 37u % 1000u);
    ps_u128 prev = ps_slice_start(o, servers, 0);
    FUZZ_CHECK(prev == o->key_begin);
    ps_u128 end = ps_slice_start(o, servers, servers);
    FUZZ_CHECK(end == ps_key_end(o));
    ps_u128 span = end - prev;
    for (int k = 0; k < 4; k++) {
        static const uint64_t probes[4] = {0, 1, 0x9E3779B97F4A7C15u, UINT64_MAX};
        uint64_t key = (uint64_t)((ps_u128)o->key_begin + (ps_u128)probes[k] % span);
        int s = ps_server_of(o, servers, key);
        FUZZ_CHECK(s >= 0 && s < servers);
        FUZZ_CHECK(ps_slice_start(o, servers, s) <= key && key < ps_slice_start(o, servers, s + 1));
    }
}

/* ---- the blob reader, driven by the bytes of another frame ---- */

static void walk_reader(const uint8_t *p, size_t len, const uint8_t *ops, size_t nops)
{
    blob_reader r = {p, len, 0};
    for (size_t i = 0; i < nops; i++) {
        const uint8_t *before = r.p;
        size_t left = r.left;
        int was_bad = r.bad;
        size_t want = 0;
        uint64_t v = 0;
        switch (ops[i] % 5) {
        case 0:
            v = blob_get_u8(&r), want = 1;
            break;
        case 1:
            v = blob_get_u32(&r), want = 4;
            break;
        case 2:
            v = blob_get_u64(&r), want = 8;
            break;
        case 3: {
            double d = blob_get_f64(&r);
            memcpy(&v, &d, sizeof v);
            want = 8;
            break;
        }
        default: {
            char s[300];
            size_t outlen = 1 + ops[i] % (sizeof s - 1);
            size_t slen = left >= 2 ? le16(before) : 0;
            blob_get_str(&r, s, outlen);
            FUZZ_CHECK(strlen(s) < outlen);
            if (!r.bad) {
                /* Consumed the length and the string, copied exactly. */
                FUZZ_CHECK(r.left == left - 2 - slen && strlen(s) == slen);
                FUZZ_CHECK(memcmp(s, before + 2, slen) == 0);
            } else {
                FUZZ_CHECK(s[0] == '\0');
                if (was_bad) FUZZ_CHECK(r.left == left && r.p == before);
            }
            continue;
        }
        }
        if (was_bad || left < want) {
            /* A short read: marks the reader bad, returns zero, consumes nothing. */
            FUZZ_CHECK(r.bad && v == 0 && r.left == left && r.p == before);
        } else {
            FUZZ_CHECK(!r.bad && r.left == left - want && r.p == before + want);
        }
    }
}

/* ---- the entry point ---- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The header's types: core's, and those of the ps and ft layers (replication, a
     * replacement's return and handbacks are ft's), as a node of a job knows them once
     * its layers registered theirs. */
    static int registered;
    if (!registered) {
        FUZZ_CHECK(msg_register_types(ps_layer_def.types, ps_layer_def.ntypes, NULL) == 0);
        FUZZ_CHECK(msg_register_types(ft_layer_def.types, ft_layer_def.ntypes, NULL) == 0);
        registered = 1;
    }
    frames f;
    split_frames(data, size, &f);
    if (f.count == 0) return 0;
    /* As received: frame 0 the header, the others payload. */
    check_header(&f, f.count - 1);
    /* As if the header's frame count were right, to reach the success path more often. */
    if (f.len[0] >= 8 && le16(f.data[0] + 6) != f.count - 1) {
        msg_header h;
        int err = msg_decode_header(f.data[0], f.len[0], le16(f.data[0] + 6), &h);
        if (err == MSG_OK) {
            uint8_t again[MSG_HEADER_SIZE];
            msg_encode_header(&h, again);
            FUZZ_CHECK(memcmp(again, f.data[0], MSG_HEADER_SIZE) == 0);
        }
    }
    for (size_t i = 0; i < f.count; i++) {
        check_register(f.data[i], f.len[i]);
        check_roster(f.data[i], f.len[i], f.selector);
        check_reject(f.data[i], f.len[i]);
        check_metrics(f.data[i], f.len[i]);
        check_def(f.data[i], f.len[i], f.selector);
        size_t other = (i + 1) % f.count; /* the next frame's bytes drive the reader */
        walk_reader(f.data[i], f.len[i], f.data[other], f.len[other]);
    }
    free_frames(&f);
    return 0;
}

#ifdef LOOM_FUZZ_DRIVER
/* ---- the plain driver: seeds, truncations, random and mutated inputs ---- */

typedef fuzz_input input;

static void in_frame(input *in, const void *p, size_t len)
{
    FUZZ_CHECK(in->len + 2 + len <= sizeof in->buf && len <= UINT16_MAX);
    in->buf[in->len++] = (uint8_t)len;
    in->buf[in->len++] = (uint8_t)(len >> 8);
    if (len) memcpy(in->buf + in->len, p, len);
    in->len += len;
}

/* Start an input of `nframes` frames: a header for h (h->nframes set to nframes - 1). */
static void in_start(input *in, msg_header h, unsigned nframes, unsigned selector)
{
    in->len = 0;
    in->buf[in->len++] = (uint8_t)(nframes | selector << 3);
    h.nframes = (uint16_t)(nframes - 1);
    uint8_t hdr[MSG_HEADER_SIZE];
    msg_encode_header(&h, hdr);
    in_frame(in, hdr, sizeof hdr);
}

static void in_blob(input *in, blob_writer *w)
{
    FUZZ_CHECK(!w->bad);
    in_frame(in, w->buf, w->len);
    free(w->buf);
    *w = (blob_writer){0};
}

#define MAX_SEEDS 32

typedef struct seeds {
    input in[MAX_SEEDS];
    const char *name[MAX_SEEDS];
    int n;
} seeds;

static input *seed_new(seeds *s, const char *name)
{
    FUZZ_CHECK(s->n < MAX_SEEDS);
    s->name[s->n] = name;
    return &s->in[s->n++];
}

static void roster_blob(blob_writer *w, uint32_t nnodes, uint32_t servers)
{
    roster_entry *e = calloc(nnodes, sizeof *e);
    FUZZ_CHECK(e != NULL);
    for (uint32_t i = 0; i < nnodes; i++) {
        snprintf(e[i].addr, MSG_ADDR_MAX, "127.0.0.1:%u", 40000u + i);
        e[i].rid[0] = MSG_RID_TAG;
        e[i].rid[1] = (uint8_t)(i + 1);
    }
    msg_roster_encode(nnodes, servers, e[0].addr, e[0].rid, sizeof *e, w);
    free(e);
}

/* Valid messages of every shape the decoders accept. */
static void make_seeds(seeds *s)
{
    blob_writer w = {0};
    input *in;
    /* Header-only control and data messages. */
    in_start(seed_new(s, "heartbeat"), (msg_header){.type = MSG_HEARTBEAT, .sender = 3}, 1, 0);
    in_start(seed_new(s, "barrier"), (msg_header){.type = MSG_BARRIER, .sender = 4, .req = 7}, 1,
             0);
    in_start(seed_new(s, "clock"), (msg_header){.type = MSG_CLOCK, .sender = 4, .clock = -5}, 1, 0);
    in_start(seed_new(s, "push_ack"),
             (msg_header){.type = MSG_PUSH_ACK, .sender = 1, .table = 2, .req = 99, .a = 0}, 1, 0);
    in_start(seed_new(s, "node_failed"), (msg_header){.type = MSG_NODE_FAILED, .a = 2}, 1, 0);

    /* REGISTER: a server with a rank, a worker without one. */
    in = seed_new(s, "register_server");
    in_start(in, (msg_header){.type = MSG_REGISTER, .sender = 1}, 2, 0);
    msg_register_encode(&(msg_register){LOOM_SERVER, 0, 2, 3, 256, "job-1", "127.0.0.1:5555"}, &w);
    in_blob(in, &w);
    in = seed_new(s, "register_worker");
    in_start(in, (msg_header){.type = MSG_REGISTER, .sender = UINT32_MAX}, 2, 0);
    msg_register_encode(&(msg_register){LOOM_WORKER, -1, 1, 1, 1, "", "10.0.0.7:41234"}, &w);
    in_blob(in, &w);

    /* The longest address a node keeps (MSG_ADDR_MAX - 1 bytes), and one byte more. */
    static msg_register longest = {LOOM_WORKER, 0, 1, 1, 256, "", ""};
    memset(longest.address, 'a', MSG_ADDR_MAX - 1);
    in = seed_new(s, "register_longest_address");
    in_start(in, (msg_header){.type = MSG_REGISTER}, 2, 0);
    msg_register_encode(&longest, &w);
    in_blob(in, &w);
    in = seed_new(s, "register_address_too_long");
    in_start(in, (msg_header){.type = MSG_REGISTER}, 2, 0);
    msg_register_encode(&longest, &w);
    FUZZ_CHECK(!w.bad && w.len == 2 + 2 + 17 + MSG_ADDR_MAX - 1);
    uint8_t *grown = realloc(w.buf, w.len + 1);
    FUZZ_CHECK(grown != NULL);
    grown[19] = (uint8_t)MSG_ADDR_MAX, grown[20] = (uint8_t)(MSG_ADDR_MAX >> 8);
    grown[w.len] = 'a';
    in_frame(in, grown, w.len + 1);
    free(grown);
    w = (blob_writer){0};

    /* ROSTER: 1 server + 1 worker; 2 servers + 3 workers (selector 1 picks 2 servers). */
    in = seed_new(s, "roster_3");
    in_start(in, (msg_header){.type = MSG_ROSTER, .a = 2}, 2, 0);
    roster_blob(&w, 3, 1);
    in_blob(in, &w);
    in = seed_new(s, "roster_6");
    in_start(in, (msg_header){.type = MSG_ROSTER, .a = 4}, 2, 1);
    roster_blob(&w, 6, 2);
    in_blob(in, &w);

    /* REJECT with its reason. */
    in = seed_new(s, "reject");
    in_start(in, (msg_header){.type = MSG_REJECT, .a = LOOM_ECONFIG}, 2, 0);
    blob_put_str(&w, "worker rank 9 is out of range or already taken");
    in_blob(in, &w);

    /* METRICS: two names, and the most a worker may send. */
    in = seed_new(s, "metrics");
    in_start(in, (msg_header){.type = MSG_METRICS, .sender = 3}, 2, 0);
    msg_metrics_encode(&(msg_metrics){2, {"objective", "test_accuracy"}, {0.693, 0.84}}, &w);
    in_blob(in, &w);
    msg_metrics most = {.count = MSG_METRICS_MAX};
    for (uint32_t i = 0; i < MSG_METRICS_MAX; i++) {
        memset(most.name[i], 'a' + (int)i, MSG_METRIC_NAME_MAX);
        most.value[i] = -1e300 * i;
    }
    in = seed_new(s, "metrics_most");
    in_start(in, (msg_header){.type = MSG_METRICS, .sender = 3}, 2, 0);
    msg_metrics_encode(&most, &w);
    in_blob(in, &w);

    /* TABLE_OPEN / TABLE_CREATE: the default table and a dense adagrad table. */
    ps_table_def d;
    FUZZ_CHECK(ps_def_from_user(&d, "weights", NULL, NULL, 0) == 0);
    in = seed_new(s, "table_open_default");
    in_start(in, (msg_header){.type = MSG_TABLE_OPEN, .sender = 3, .req = 1}, 2, 0);
    FUZZ_CHECK(ps_def_encode(&d, &w) == 0);
    in_blob(in, &w);
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_F64;
    o.width = 16;
    o.storage = LOOM_DENSE;
    o.key_begin = 100;
    o.key_end = 1000000;
    o.consistency = LOOM_BSP;
    o.updater = "adagrad";
    o.init = LOOM_INIT_NORMAL;
    o.init_b = 0.01;
    o.init_seed = 42;
    FUZZ_CHECK(ps_def_from_user(&d, "embeddings", &o, NULL, 0) == 0);
    in = seed_new(s, "table_create_dense");
    in_start(in, (msg_header){.type = MSG_TABLE_CREATE, .table = 5}, 2, 3);
    FUZZ_CHECK(ps_def_encode(&d, &w) == 0);
    in_blob(in, &w);

    /* Data messages: keys and values, ranges, a reply. */
    uint64_t keys[3];
    float vals[3] = {1.5f, -2.0f, 0.25f};
    for (int i = 0; i < 3; i++) msg_store_u64(&keys[i], (uint64_t)(10 * i + 1));
    in = seed_new(s, "push_keys");
    in_start(in, (msg_header){.type = MSG_PUSH, .sender = 3, .table = 1, .req = 4}, 3, 0);
    in_frame(in, keys, sizeof keys);
    in_frame(in, vals, sizeof vals);
    in = seed_new(s, "push_range");
    in_start(in,
             (msg_header){
                 .type = MSG_PUSH, .flags = MSG_F_RANGE, .sender = 3, .table = 1, .a = 10, .b = 13},
             2, 0);
    in_frame(in, vals, sizeof vals);
    in = seed_new(s, "pull_keys");
    in_start(in, (msg_header){.type = MSG_PULL, .sender = 3, .table = 1, .req = 1ull << 32 | 7}, 2,
             0);
    in_frame(in, keys, sizeof keys);
    in_start(seed_new(s, "pull_range"),
             (msg_header){.type = MSG_PULL,
                          .flags = MSG_F_RANGE,
                          .sender = 3,
                          .clock = INT64_MIN,
                          .a = 0,
                          .b = 1000},
             1, 0);
    in = seed_new(s, "pull_reply");
    in_start(in, (msg_header){.type = MSG_PULL_REPLY, .sender = 1, .req = 5, .clock = 3}, 2, 0);
    in_frame(in, vals, sizeof vals);
}

/* One random edit: flip a bit, set a byte to an edge value, insert, delete or truncate. */
static void mutate(input *in)
{
    static const uint8_t edges[] = {0x00, 0x01, 0x02, 0x7F, 0x80, 0xFE, 0xFF, 0x30, 0x31};
    if (fuzz_rng() % 6 == 0 && in->len)
        /* A frame count of up to 7: more frames than any type allows. */
        in->buf[0] = (uint8_t)((in->buf[0] & ~7u) | (fuzz_rng() % 8));
    else
        fuzz_edit(in, 0, edges, sizeof edges);
}

/* src with payload frame `frame` `delta` bytes longer (filled with `fill`) or shorter, its
 * length prefix adjusted. Returns 0 if src has no such frame or it is too short. */
static int resize_frame(const input *src, size_t frame, int delta, uint8_t fill, input *out)
{
    if (src->len == 0 || frame >= src->buf[0] % 8u) return 0;
    size_t pos = 1;
    for (size_t i = 0; i < frame; i++) {
        if (src->len - pos < 2) return 0;
        pos += 2 + le16(src->buf + pos);
    }
    if (pos > src->len || src->len - pos < 2) return 0;
    size_t len = le16(src->buf + pos), rest = pos + 2 + len;
    if (rest > src->len || (delta < 0 && len < (size_t)-delta)) return 0;
    size_t nlen = (size_t)((long)len + delta);
    if (nlen > UINT16_MAX || src->len - len + nlen > sizeof out->buf) return 0;
    memcpy(out->buf, src->buf, pos);
    out->buf[pos] = (uint8_t)nlen;
    out->buf[pos + 1] = (uint8_t)(nlen >> 8);
    memcpy(out->buf + pos + 2, src->buf + pos + 2, len < nlen ? len : nlen);
    if (nlen > len) memset(out->buf + pos + 2 + len, fill, nlen - len);
    memcpy(out->buf + pos + 2 + nlen, src->buf + rest, src->len - rest);
    out->len = src->len - len + nlen;
    return 1;
}

static seeds s;

static const char *seed(int i, input *in)
{
    *in = s.in[i];
    return s.name[i];
}

/* Each frame of seed i a few bytes shorter or longer (its length prefix adjusted): a blob
 * with a byte missing or one too many. */
static void resized(int i, input *seed)
{
    static const int deltas[] = {-8, -1, 1, 8};
    for (size_t f = 0; f < FUZZ_MAX_FRAMES; f++)
        for (size_t d = 0; d < sizeof deltas / sizeof *deltas; d++) {
            input in;
            if (resize_frame(seed, f, deltas[d], (uint8_t)(d * 0x55), &in))
                fuzz_run(in.buf, in.len);
        }
    (void)i;
}

/* Each seed must still reach the success path it was written for. */
static void check_seeds(void)
{
    FUZZ_CHECK(stats.header_ok >= (unsigned long)s.n);
    FUZZ_CHECK(stats.register_ok >= 2 && stats.roster_ok >= 2 && stats.def_ok >= 2);
    FUZZ_CHECK(stats.reject_ok >= 1 && stats.metrics_ok >= 2);
}

static void report(void)
{
    printf("decoded ok: header %lu, register %lu, roster %lu, table def %lu\n", stats.header_ok,
           stats.register_ok, stats.roster_ok, stats.def_ok);
}

int main(int argc, char **argv)
{
    make_seeds(&s);
    return fuzz_driver_main(argc, argv,
                            &(fuzz_target){.name = "fuzz_decode",
                                           .rng_seed = 0x5EED5EED12345678u,
                                           .nseeds = s.n,
                                           .variant_kind = "resized",
                                           .seed = seed,
                                           .variants = resized,
                                           .check_seeds = check_seeds,
                                           .random = 5000,
                                           .random_len = 600,
                                           .mutated = 20000,
                                           .mutate = mutate,
                                           .report = report});
}
#endif
