/* msg: encoding and validation of Loom's message header and blob payloads.
 * See msg.h for the layout. Nothing here trusts a received byte: every read
 * is bounds-checked, and decoding reports why a message must be dropped. */
#include "core/msg.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Core's own types, by number; every other type is a layer's, known once the
 * layer registered it (msg_register_types). */
#define CORE(t, min, max, by) [MSG_##t] = {MSG_##t, #t, min, max, by}
static const msg_type_info core_types[MSG_TYPE_LIMIT] = {
    CORE(REGISTER, 1, 1, MSG_BY_SERVER | MSG_BY_WORKER),
    CORE(ROSTER, 1, 1, MSG_BY_SCHED),
    CORE(ROSTER_ACK, 0, 0, MSG_BY_SERVER | MSG_BY_WORKER), /* a joining worker too */
    CORE(REJECT, 1, 1, MSG_BY_SCHED),
    CORE(HEARTBEAT, 0, 0, MSG_BY_SCHED | MSG_BY_SERVER | MSG_BY_WORKER),
    CORE(BARRIER, 0, 0, MSG_BY_WORKER),
    CORE(BARRIER_RELEASE, 0, 0, MSG_BY_SCHED),
    CORE(DONE, 0, 0, MSG_BY_WORKER | MSG_BY_SERVER),
    CORE(DONE_ACK, 0, 0, MSG_BY_SCHED),
    CORE(SHUTDOWN, 0, 0, MSG_BY_SCHED),
    CORE(SHUTDOWN_ACK, 0, 0, MSG_BY_SERVER),
    CORE(NODE_FAILED, 0, 0, MSG_BY_SCHED),
    CORE(METRICS, 1, 1, MSG_BY_WORKER),
    CORE(NODE_REJOINED, 1, 1, MSG_BY_SCHED),
    /* A request comes from no node (the scheduler's stranger hook takes it);
     * what a node accepts is the scheduler's order, without payload. */
    CORE(LEAVE, 0, 1, MSG_BY_SCHED),
    CORE(LEAVE_ACK, 1, 1, MSG_BY_SCHED),
    CORE(WORKER_LOST, 0, 0, MSG_BY_SCHED),
};
#undef CORE
static _Atomic(const msg_type_info *) layer_types[MSG_TYPE_LIMIT];

static const msg_type_info *type_info(unsigned type)
{
    if (type >= MSG_TYPE_LIMIT) return NULL;
    if (core_types[type].name) return &core_types[type];
    return atomic_load_explicit(&layer_types[type], memory_order_acquire);
}

/* A registration is checked whole before any of it is stored, under this
 * lock, so that a refused one leaves none of its types known; readers take no
 * lock (type_info). */
static pthread_mutex_t register_mu = PTHREAD_MUTEX_INITIALIZER;

/* Whether types[i] may be registered (msg_register_types' rule). */
static int may_register(const msg_type_info *types, size_t i)
{
    const msg_type_info *t = &types[i];
    if (!t->name || t->type < MSG_LAYER_TYPE_MIN || core_types[t->type].name) return 0;
    const msg_type_info *now = atomic_load_explicit(&layer_types[t->type], memory_order_relaxed);
    if (now && now != t) return 0;
    for (size_t j = 0; j < i; j++)
        if (types[j].type == t->type) return 0;
    return 1;
}

int msg_register_types(const msg_type_info *types, size_t count, size_t *refused)
{
    pthread_mutex_lock(&register_mu);
    size_t i = 0;
    while (i < count && may_register(types, i)) i++;
    if (i == count)
        for (size_t j = 0; j < count; j++)
            atomic_store_explicit(&layer_types[types[j].type], &types[j], memory_order_release);
    pthread_mutex_unlock(&register_mu);
    if (i == count) return 0;
    if (refused) *refused = i;
    return -1;
}

const char *msg_type_name(unsigned type)
{
    const msg_type_info *t = type_info(type);
    return t ? t->name : "UNKNOWN";
}

int msg_sender_allowed(unsigned type, int role)
{
    const msg_type_info *t = type_info(type);
    return t && role >= 0 && role <= 2 && (t->senders >> role & 1u);
}

int64_t msg_max_frame(uint32_t nnodes, uint64_t max_payload)
{
    /* One ROSTER entry: id, role, rank, address (u16 length + text), routing id. */
    uint64_t roster = 4 + (uint64_t)nnodes * (4 + 1 + 4 + 2 + MSG_ADDR_MAX + MSG_RID_SIZE);
    return (int64_t)(roster > max_payload ? roster : max_payload);
}

const char *msg_error_name(int err)
{
    static const char *const names[MSG_ERR_COUNT_] = {
        "ok",           "bad header size", "bad magic",       "unsupported version",
        "unknown type", "unknown flags",   "bad frame count", "unknown or unauthorised sender",
        "bad payload",
    };
    return err >= 0 && err < MSG_ERR_COUNT_ ? names[err] : "unknown";
}

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void msg_encode_header(const msg_header *h, uint8_t out[MSG_HEADER_SIZE])
{
    put16(out, MSG_MAGIC);
    out[2] = MSG_VERSION;
    out[3] = h->type;
    put16(out + 4, h->flags);
    put16(out + 6, h->nframes);
    put32(out + 8, h->sender);
    put32(out + 12, h->table);
    msg_store_u64(out + 16, h->req);
    msg_store_u64(out + 24, (uint64_t)h->clock);
    msg_store_u64(out + 32, h->a);
    msg_store_u64(out + 40, h->b);
}

int msg_decode_header(const void *buf, size_t len, size_t arrived, msg_header *h)
{
    const uint8_t *p = buf;
    if (len != MSG_HEADER_SIZE) return MSG_ERR_SIZE;
    if (get16(p) != MSG_MAGIC) return MSG_ERR_MAGIC;
    if (p[2] != MSG_VERSION) return MSG_ERR_VERSION;
    const msg_type_info *t = type_info(p[3]);
    if (!t) return MSG_ERR_TYPE;
    h->type = p[3];
    h->flags = get16(p + 4);
    if (h->flags & ~MSG_F_KNOWN) return MSG_ERR_FLAGS;
    h->nframes = get16(p + 6);
    if (h->nframes != arrived || (int)arrived < t->min_frames || (int)arrived > t->max_frames)
        return MSG_ERR_FRAMES;
    h->sender = get32(p + 8);
    h->table = get32(p + 12);
    h->req = msg_load_u64(p + 16);
    h->clock = (int64_t)msg_load_u64(p + 24);
    h->a = msg_load_u64(p + 32);
    h->b = msg_load_u64(p + 40);
    return MSG_OK;
}

/* ---- blobs ---- */

static const uint8_t *blob_take(blob_reader *r, size_t n)
{
    if (r->bad || r->left < n) {
        r->bad = 1;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    r->left -= n;
    return p;
}

void blob_get_bytes(blob_reader *r, void *out, size_t n)
{
    const uint8_t *p = blob_take(r, n);
    if (p)
        memcpy(out, p, n);
    else
        memset(out, 0, n);
}

uint8_t blob_get_u8(blob_reader *r)
{
    const uint8_t *p = blob_take(r, 1);
    return p ? p[0] : 0;
}

uint32_t blob_get_u32(blob_reader *r)
{
    const uint8_t *p = blob_take(r, 4);
    return p ? get32(p) : 0;
}

uint64_t blob_get_u64(blob_reader *r)
{
    const uint8_t *p = blob_take(r, 8);
    return p ? msg_load_u64(p) : 0;
}

double blob_get_f64(blob_reader *r)
{
    uint64_t bits = blob_get_u64(r);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

void blob_get_str(blob_reader *r, char *out, size_t outlen)
{
    out[0] = '\0';
    const uint8_t *lp = blob_take(r, 2);
    if (!lp) return;
    size_t n = get16(lp);
    const uint8_t *s = blob_take(r, n);
    if (!s) return;
    if (n >= outlen || memchr(s, '\0', n)) {
        r->bad = 1;
        return;
    }
    memcpy(out, s, n);
    out[n] = '\0';
}

static uint8_t *blob_room(blob_writer *w, size_t n)
{
    if (w->bad) return NULL;
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 256;
        while (cap < w->len + n) cap *= 2;
        uint8_t *nb = realloc(w->buf, cap);
        if (!nb) {
            w->bad = 1;
            return NULL;
        }
        w->buf = nb;
        w->cap = cap;
    }
    uint8_t *p = w->buf + w->len;
    w->len += n;
    return p;
}

void blob_put_bytes(blob_writer *w, const void *data, size_t n)
{
    uint8_t *p = blob_room(w, n);
    if (p) memcpy(p, data, n);
}

void blob_put_u8(blob_writer *w, uint8_t v)
{
    uint8_t *p = blob_room(w, 1);
    if (p) p[0] = v;
}

void blob_put_u32(blob_writer *w, uint32_t v)
{
    uint8_t *p = blob_room(w, 4);
    if (p) put32(p, v);
}

void blob_put_u64(blob_writer *w, uint64_t v)
{
    uint8_t *p = blob_room(w, 8);
    if (p) msg_store_u64(p, v);
}

void blob_put_f64(blob_writer *w, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    blob_put_u64(w, bits);
}

void blob_put_str(blob_writer *w, const char *s)
{
    size_t n = strlen(s);
    if (n > UINT16_MAX) {
        w->bad = 1;
        return;
    }
    uint8_t *p = blob_room(w, 2 + n);
    if (!p) return;
    put16(p, (uint16_t)n);
    memcpy(p + 2, s, n);
}

/* ---- membership payloads ---- */

int msg_node_role(uint32_t id, uint32_t nnodes, uint32_t num_servers, int *rank)
{
    int role = -1, r = -1;
    if (id == 0) {
        role = 0; /* LOOM_SCHEDULER */
        r = 0;
    } else if (id <= num_servers && id < nnodes) {
        role = 1; /* LOOM_SERVER */
        r = (int)(id - 1);
    } else if (id < nnodes) {
        role = 2; /* LOOM_WORKER */
        r = (int)(id - 1 - num_servers);
    }
    if (rank) *rank = r;
    return role;
}

void msg_register_encode(const msg_register *r, blob_writer *w)
{
    blob_put_u8(w, (uint8_t)r->role);
    blob_put_u32(w, (uint32_t)r->rank);
    blob_put_u32(w, r->num_servers);
    blob_put_u32(w, r->num_workers);
    blob_put_u32(w, r->max_frame_mib);
    blob_put_str(w, r->token);
    blob_put_str(w, r->address);
}

int msg_register_decode(const void *data, size_t len, msg_register *r)
{
    blob_reader rd = {data, len, 0};
    r->role = blob_get_u8(&rd);
    r->rank = (int)blob_get_u32(&rd);
    r->num_servers = blob_get_u32(&rd);
    r->num_workers = blob_get_u32(&rd);
    r->max_frame_mib = blob_get_u32(&rd);
    blob_get_str(&rd, r->token, sizeof r->token);
    blob_get_str(&rd, r->address, sizeof r->address);
    if (rd.bad || rd.left || (r->role != 1 && r->role != 2) || !r->address[0]) return -1;
    return 0;
}

void msg_roster_encode(uint32_t nnodes, uint32_t num_servers, const char *addrs,
                       const uint8_t *rids, size_t stride, blob_writer *w)
{
    blob_put_u32(w, nnodes);
    for (uint32_t i = 0; i < nnodes; i++) {
        int rank;
        int role = msg_node_role(i, nnodes, num_servers, &rank);
        blob_put_u32(w, i);
        blob_put_u8(w, (uint8_t)role);
        blob_put_u32(w, (uint32_t)rank);
        blob_put_str(w, addrs + (size_t)i * stride);
        blob_put_bytes(w, rids + (size_t)i * stride, MSG_RID_SIZE);
    }
}

int msg_roster_decode(const void *data, size_t len, uint32_t nnodes, uint32_t num_servers,
                      char *addrs, uint8_t *rids, size_t stride)
{
    blob_reader rd = {data, len, 0};
    if (blob_get_u32(&rd) != nnodes || rd.bad) return -1;
    for (uint32_t i = 0; i < nnodes; i++) {
        uint32_t id = blob_get_u32(&rd);
        int role = blob_get_u8(&rd);
        int rank = (int)blob_get_u32(&rd);
        char addr[MSG_ADDR_MAX];
        blob_get_str(&rd, addr, sizeof addr);
        uint8_t rid[MSG_RID_SIZE];
        blob_get_bytes(&rd, rid, sizeof rid);
        int expect_rank;
        if (rd.bad || id != i || msg_node_role(id, nnodes, num_servers, &expect_rank) != role ||
            rank != expect_rank || !addr[0] || rid[0] != MSG_RID_TAG)
            return -1;
        memcpy(addrs + (size_t)i * stride, addr, strlen(addr) + 1);
        memcpy(rids + (size_t)i * stride, rid, sizeof rid);
    }
    return rd.left ? -1 : 0;
}

/* ---- metrics ---- */

int msg_metric_name_ok(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || len > MSG_METRIC_NAME_MAX) return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '.' || c == '-';
        if (!ok) return 0;
    }
    return 1;
}

void msg_metrics_encode(const msg_metrics *m, blob_writer *w)
{
    blob_put_u8(w, (uint8_t)m->count);
    for (uint32_t i = 0; i < m->count; i++) {
        blob_put_str(w, m->name[i]);
        blob_put_f64(w, m->value[i]);
    }
}

int msg_metrics_decode(const void *data, size_t len, msg_metrics *m)
{
    blob_reader rd = {data, len, 0};
    m->count = blob_get_u8(&rd);
    if (rd.bad || m->count > MSG_METRICS_MAX) return -1;
    for (uint32_t i = 0; i < m->count; i++) {
        blob_get_str(&rd, m->name[i], sizeof m->name[i]);
        m->value[i] = blob_get_f64(&rd);
        if (rd.bad || !msg_metric_name_ok(m->name[i]) || !isfinite(m->value[i])) return -1;
        for (uint32_t k = 0; k < i; k++)
            if (!strcmp(m->name[k], m->name[i])) return -1;
    }
    return rd.bad || rd.left ? -1 : 0;
}
