/* msg: encoding and validation of Loom's message header and blob payloads.
 * See msg.h for the layout. Nothing here trusts a received byte: every read
 * is bounds-checked, and decoding reports why a message must be dropped. */
#include "core/msg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Who may send each type (bits 1 << loom_role) and the payload frames it may
 * carry: [min, max]. Unknown types have max -1. */
#define BY_SCHED  (1u << 0) /* LOOM_SCHEDULER */
#define BY_SERVER (1u << 1) /* LOOM_SERVER */
#define BY_WORKER (1u << 2) /* LOOM_WORKER */
static const struct {
    const char *name;
    signed char min_frames, max_frames;
    unsigned senders;
} type_info[MSG_TYPE_END_] = {
    [MSG_REGISTER] = {"REGISTER", 1, 1, BY_SERVER | BY_WORKER},
    [MSG_ROSTER] = {"ROSTER", 1, 1, BY_SCHED},
    [MSG_ROSTER_ACK] = {"ROSTER_ACK", 0, 0, BY_SERVER},
    [MSG_REJECT] = {"REJECT", 1, 1, BY_SCHED},
    [MSG_HEARTBEAT] = {"HEARTBEAT", 0, 0, BY_SCHED | BY_SERVER | BY_WORKER},
    [MSG_BARRIER] = {"BARRIER", 0, 0, BY_WORKER},
    [MSG_BARRIER_RELEASE] = {"BARRIER_RELEASE", 0, 0, BY_SCHED},
    [MSG_DONE] = {"DONE", 0, 0, BY_WORKER},
    [MSG_DONE_ACK] = {"DONE_ACK", 0, 0, BY_SCHED},
    [MSG_SHUTDOWN] = {"SHUTDOWN", 0, 0, BY_SCHED},
    [MSG_SHUTDOWN_ACK] = {"SHUTDOWN_ACK", 0, 0, BY_SERVER},
    [MSG_NODE_FAILED] = {"NODE_FAILED", 0, 0, BY_SCHED},
    [MSG_METRICS] = {"METRICS", 1, 1, BY_WORKER},
    [MSG_NODE_REJOINED] = {"NODE_REJOINED", 1, 1, BY_SCHED},
    [MSG_TABLE_OPEN] = {"TABLE_OPEN", 1, 1, BY_WORKER},
    [MSG_TABLE_CREATE] = {"TABLE_CREATE", 1, 1, BY_SCHED},
    [MSG_TABLE_CREATED] = {"TABLE_CREATED", 0, 0, BY_SERVER},
    [MSG_TABLE_OPENED] = {"TABLE_OPENED", 0, 0, BY_SCHED},
    [MSG_PUSH] = {"PUSH", 1, 2, BY_WORKER},
    [MSG_PUSH_ACK] = {"PUSH_ACK", 0, 0, BY_SERVER},
    [MSG_PULL] = {"PULL", 0, 1, BY_WORKER},
    [MSG_PULL_REPLY] = {"PULL_REPLY", 0, 1, BY_SERVER},
    [MSG_CLOCK] = {"CLOCK", 0, 0, BY_WORKER | BY_SCHED},
    [MSG_MIN_CLOCK] = {"MIN_CLOCK", 0, 0, BY_SCHED},
    [MSG_PUSH_ENC] = {"PUSH_ENC", 1, 1, BY_WORKER},
    [MSG_PULL_SINCE] = {"PULL_SINCE", 2, 2, BY_WORKER},
    [MSG_PULL_REPLY_ENC] = {"PULL_REPLY_ENC", 0, 2, BY_SERVER},
    [MSG_ROWS_PUSH] = {"ROWS_PUSH", 2, 2, BY_SERVER},
    [MSG_ROWS_PUSH_ACK] = {"ROWS_PUSH_ACK", 0, 0, BY_WORKER},
    [MSG_CKPT_PART] = {"CKPT_PART", 1, 1, BY_SERVER | BY_WORKER},
    [MSG_SCHED_BLOCK] = {"SCHED_BLOCK", 1, 1, BY_WORKER},
    [MSG_DYN_START] = {"DYN_START", 0, 0, BY_WORKER},
    [MSG_DYN_PLAN_REQ] = {"DYN_PLAN_REQ", 0, 0, BY_SCHED},
    [MSG_DYN_PLAN] = {"DYN_PLAN", 1, 1, BY_SCHED | BY_WORKER},
    [MSG_DYN_PSUM] = {"DYN_PSUM", 1, 1, BY_WORKER},
    [MSG_DYN_SUM] = {"DYN_SUM", 1, 1, BY_SCHED},
    [MSG_DYN_END] = {"DYN_END", 0, 0, BY_SCHED},
    [MSG_P2P_MODEL] = {"P2P_MODEL", 1, 1, BY_WORKER},
    [MSG_P2P_ACK] = {"P2P_ACK", 0, 0, BY_WORKER},
    [MSG_SVB_SVS] = {"SVB_SVS", 0, 1, BY_WORKER},
    [MSG_SVB_REPLICA] = {"SVB_REPLICA", 1, 1, BY_WORKER},
    [MSG_REPL] = {"REPL", 2, 2, BY_SERVER},
    [MSG_REPL_ACK] = {"REPL_ACK", 0, 0, BY_SERVER},
    [MSG_WORKER_LOST] = {"WORKER_LOST", 0, 0, BY_SCHED},
    [MSG_REJOIN_COPY] = {"REJOIN_COPY", 0, 0, BY_SCHED},
    [MSG_REJOIN_COPIED] = {"REJOIN_COPIED", 0, 0, BY_SERVER},
    [MSG_REJOIN_READY] = {"REJOIN_READY", 0, 0, BY_SCHED},
    [MSG_HANDBACK] = {"HANDBACK", 0, 0, BY_SCHED},
    [MSG_HANDBACK_ACK] = {"HANDBACK_ACK", 0, 0, BY_SERVER | BY_WORKER},
    [MSG_PARKED] = {"PARKED", 0, 0, BY_SERVER},
    [MSG_CKPT_BASE] = {"CKPT_BASE", 0, 0, BY_SCHED},
    [MSG_CKPT_PLAN] = {"CKPT_PLAN", 0, 0, BY_SCHED},
    [MSG_CKPT_SKIP] = {"CKPT_SKIP", 0, 0, BY_SERVER | BY_WORKER},
    [MSG_CKPT_EPOCH] = {"CKPT_EPOCH", 0, 0, BY_WORKER},
    [MSG_CKPT_FINAL] = {"CKPT_FINAL", 0, 0, BY_WORKER},
};

static int type_known(unsigned type)
{
    return type < MSG_TYPE_END_ && type_info[type].name != NULL;
}

const char *msg_type_name(unsigned type)
{
    return type_known(type) ? type_info[type].name : "UNKNOWN";
}

int msg_sender_allowed(unsigned type, int role)
{
    return type_known(type) && role >= 0 && role <= 2 && (type_info[type].senders >> role & 1u);
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
    if (!type_known(p[3])) return MSG_ERR_TYPE;
    h->type = p[3];
    h->flags = get16(p + 4);
    if (h->flags & ~MSG_F_KNOWN) return MSG_ERR_FLAGS;
    h->nframes = get16(p + 6);
    if (h->nframes != arrived || (int)arrived < type_info[h->type].min_frames ||
        (int)arrived > type_info[h->type].max_frames)
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
