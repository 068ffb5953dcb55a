/* msg: Loom's wire format.
 *
 * A message is a ZeroMQ multipart message: one fixed 48-byte header frame,
 * then 0 to 2 payload frames (keys, values, or one encoded blob). The header
 * is little-endian on the wire whatever the host:
 *
 *   off size field
 *    0   2   magic     0x4D4C ("LM")
 *    2   1   version   MSG_VERSION
 *    3   1   type      enum msg_type
 *    4   2   flags     MSG_F_*
 *    6   2   nframes   payload frames that follow (must match what arrived)
 *    8   4   sender    node id of the sender
 *   12   4   table     table id (data messages), else 0
 *   16   8   req       request id / push sequence number
 *   24   8   clock     a clock value (signed)
 *   32   8   a         type-specific argument
 *   40   8   b         type-specific argument
 *
 * msg_decode_header() checks every field that does not need context (size,
 * magic, version, known type, frame count allowed for the type, reserved
 * flags; a layer's type is known once the layer registered it); handlers check the rest (table
 * exists, sizes match the table's row size, keys in range) before touching payload.
 * docs/PROTOCOL.md lists every type with its fields and frames. */
#ifndef LOOM_CORE_MSG_H
#define LOOM_CORE_MSG_H

#include <stddef.h>
#include <stdint.h>

/* 6: replacement servers (NODE_REJOINED, REJOIN_*), CLOCK.b; 7: HANDBACK*, PARKED, CKPT_BASE;
 * 8: heartbeats on sockets of their own (the ROSTER's req is their port); CKPT_PLAN,
 * CKPT_SKIP, CKPT_EPOCH, CKPT_FINAL; 9: PARKED.b, echoed by HANDBACK_ACK */
#define MSG_MAGIC       0x4D4Cu
#define MSG_VERSION     9
#define MSG_HEADER_SIZE 48
#define MSG_MAX_FRAMES  2
#define MSG_ADDR_MAX    256 /* a node's "host:port", NUL included */
#define MSG_TOKEN_MAX   65  /* a job token, NUL included (loom_config.job_token) */
/* A node's routing id: MSG_RID_TAG, then 8 random bytes drawn when the
 * process starts. The scheduler learns it from the connection a REGISTER
 * came on and hands it to every node in the ROSTER; a ROUTER accepts a
 * message only from the routing id the roster binds to the sender's node id,
 * so a stranger cannot speak as a node of the job without guessing 64 random
 * bits (docs/SECURITY.md). */
#define MSG_RID_SIZE 9
#define MSG_RID_TAG  0x4C /* 'L': never 0, which libzmq reserves for ids it makes up */
/* The default of the largest payload frame a node sends or accepts
 * (loom_config.max_frame_mib): the ps layer splits pushes and pulls so that
 * no frame of keys, values or replies exceeds it. */
#define MSG_MAX_PAYLOAD_MIB 256

/* The wire's type numbers. Here are only core's own: membership and control,
 * and WORKER_LOST. Each layer above declares its own numbers in a header of
 * its own (<layer>/msg_types.h), so that core names no layer's type; what a
 * layer's type is (its name, who may send it, its payload frames) core learns
 * only when the layer registers it (msg_register_types, from
 * node_layer_register in the layer's attach), and until then a message of
 * that type is of an unknown type. docs/PROTOCOL.md is the one table of every
 * number, core's and the layers', where a new type takes a free one;
 * registering a number that core or another layer has already fails, so two
 * layers that took the same number cannot both attach. */
enum msg_type {
    /* membership and control (core) */
    MSG_REGISTER = 1, /* node -> scheduler: blob (msg_register) */
    MSG_ROSTER,       /* scheduler -> node: blob (every node's id, role, rank, address) */
    MSG_ROSTER_ACK,   /* server, joining worker -> scheduler: roster installed */
    MSG_REJECT,    /* scheduler -> node: registration refused; a = loom error code, blob = reason */
    MSG_HEARTBEAT, /* both directions, no payload; node -> scheduler: a = bytes it sent,
                      b = bytes it received (its totals so far, for the status page) */
    MSG_BARRIER,   /* worker -> scheduler: req = barrier generation */
    MSG_BARRIER_RELEASE, /* scheduler -> workers: req = generation */
    MSG_DONE,            /* worker -> scheduler: this worker finished (a = 1: it leaves);
                          * server -> scheduler, a = 1: it asks to leave (docs/ELASTIC.md) */
    MSG_DONE_ACK,        /* scheduler -> worker; -> server: a = why it may not leave */
    MSG_SHUTDOWN,        /* scheduler -> server: the job is over (a = 1: it left the job) */
    MSG_SHUTDOWN_ACK,    /* server -> scheduler */
    MSG_NODE_FAILED,     /* scheduler -> all: a = id of the dead node */
    MSG_METRICS,         /* worker -> scheduler: blob (the application's latest metrics) */
    MSG_NODE_REJOINED,   /* scheduler -> all: a = id of a dead node a replacement took over;
                            frame its routing id (MSG_RID_SIZE bytes), then its address (str) */
    MSG_LEAVE,           /* `loom leave` -> scheduler: blob (msg_register naming the node to
                          * leave, with the job's token); scheduler -> worker: leave the running
                          * job, as on SIGTERM (docs/ELASTIC.md) */
    MSG_LEAVE_ACK,       /* scheduler -> `loom leave`: a = 0 the leave was accepted, 1 the node
                          * is gone; blob = what happened (str) */
    /* worker failure (core, --on-worker-failure continue) */
    MSG_WORKER_LOST = 136, /* scheduler -> servers, workers: a = node id of a dead worker
                              the job goes on without, b = its share of the data (the
                              "share" metric it reported, 0 = unknown) */
};

/* A layer's numbers start at MSG_LAYER_TYPE_MIN: those below are kept for
 * core (WORKER_LOST, core's too, is older than the rule). A type is one byte
 * on the wire: MSG_TYPE_LIMIT bounds every table indexed by type (core's, the
 * layers' registry, a node's handlers). */
#define MSG_LAYER_TYPE_MIN 32
#define MSG_TYPE_LIMIT     256

#define MSG_F_RANGE 0x0001u
/* PULL, PULL_SINCE: the keys frame is the table's key-list chain's encoding
 * (src/ps/filter.c), not plain u64 keys */
#define MSG_F_KEYS_ENC 0x0002u
#define MSG_F_KNOWN    (MSG_F_RANGE | MSG_F_KEYS_ENC)

typedef struct msg_header {
    uint8_t type;
    uint16_t flags;
    uint16_t nframes;
    uint32_t sender;
    uint32_t table;
    uint64_t req;
    int64_t clock;
    uint64_t a, b;
} msg_header;

/* Why a received message was dropped (the node counts drops and logs the reason). */
enum msg_error {
    MSG_OK = 0,
    MSG_ERR_SIZE, /* header frame not MSG_HEADER_SIZE bytes */
    MSG_ERR_MAGIC,
    MSG_ERR_VERSION,
    MSG_ERR_TYPE,    /* unknown type */
    MSG_ERR_FLAGS,   /* unknown flag bits */
    MSG_ERR_FRAMES,  /* frame count wrong for the type, or header disagrees with arrival */
    MSG_ERR_SENDER,  /* sender unknown or not allowed to send this type */
    MSG_ERR_PAYLOAD, /* payload sizes or contents invalid for the type/table */
    MSG_ERR_COUNT_
};

/* Whether a message of `type` may come from a routing id no node owns (the
 * scheduler's stranger hook takes it): a REGISTER, or a leave request
 * (`loom leave`, docs/ELASTIC.md). */
static inline int msg_stranger_type(unsigned type)
{
    return type == MSG_REGISTER || type == MSG_LEAVE;
}

/* Who may send a type: bits 1 << loom_role. */
#define MSG_BY_SCHED  (1u << 0) /* LOOM_SCHEDULER */
#define MSG_BY_SERVER (1u << 1) /* LOOM_SERVER */
#define MSG_BY_WORKER (1u << 2) /* LOOM_WORKER */

/* A message type: its number, name, the payload frames it may carry [min,
 * max] and who may send it (MSG_BY_*). */
typedef struct msg_type_info {
    uint8_t type;
    const char *name;
    signed char min_frames, max_frames;
    uint8_t senders;
} msg_type_info;

/* Make a layer's types known to every node of the process (from any thread;
 * the entries must outlive the process's nodes). Registering the same entries
 * again does nothing. 0; or -1, registering none of them, if an entry has no
 * name, a number below MSG_LAYER_TYPE_MIN, or a number that core, an entry
 * registered before or an earlier entry of `types` has: then *refused (unless
 * NULL) is the index of the first such entry. */
int msg_register_types(const msg_type_info *types, size_t count, size_t *refused);
/* A known type's name, else "UNKNOWN". */
const char *msg_type_name(unsigned type);
/* Whether a node of `role` (a loom_role) may send messages of `type`:
 * control messages come only from the scheduler, data requests only from
 * workers, and so on (core's table in msg.c, the layers' in what they
 * registered; docs/PROTOCOL.md). */
int msg_sender_allowed(unsigned type, int role);
/* The ZMQ_MAXMSGSIZE of every socket of a job of nnodes nodes whose payload
 * frames are at most max_payload bytes: max_payload, or the largest possible
 * ROSTER of that job if it is larger. A peer announcing a larger frame is
 * disconnected by libzmq before anything is allocated. */
int64_t msg_max_frame(uint32_t nnodes, uint64_t max_payload);
const char *msg_error_name(int err);

void msg_encode_header(const msg_header *h, uint8_t out[MSG_HEADER_SIZE]);
/* Decode and validate a header frame of `len` bytes followed by `arrived`
 * payload frames. Returns MSG_OK or the reason to drop it. */
int msg_decode_header(const void *buf, size_t len, size_t arrived, msg_header *h);

/* Little-endian loads and stores that work at any alignment. */
static inline uint64_t msg_load_u64(const void *p)
{
    const uint8_t *b = p;
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}

static inline void msg_store_u64(void *p, uint64_t v)
{
    uint8_t *b = p;
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t msg_load_u32(const void *p)
{
    const uint8_t *b = p;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static inline void msg_store_u32(void *p, uint32_t v)
{
    uint8_t *b = p;
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
}

/* A bounded reader/writer for blob payloads (registration, roster, table
 * options). Readers never read past the end: a short read sets `bad` and
 * returns zeros, so parsers check `bad` once at the end. */
typedef struct blob_reader {
    const uint8_t *p;
    size_t left;
    int bad;
} blob_reader;

typedef struct blob_writer {
    uint8_t *buf;
    size_t len, cap;
    int bad; /* allocation failed */
} blob_writer;

uint8_t blob_get_u8(blob_reader *r);
uint32_t blob_get_u32(blob_reader *r);
uint64_t blob_get_u64(blob_reader *r);
double blob_get_f64(blob_reader *r);
/* A length-prefixed (u16) string copied into out (NUL-terminated, at most
 * outlen-1 bytes, outlen >= 1); sets bad if it is longer or contains a NUL byte. */
void blob_get_str(blob_reader *r, char *out, size_t outlen);

/* n raw bytes (zeros on a short read). */
void blob_get_bytes(blob_reader *r, void *out, size_t n);
void blob_put_bytes(blob_writer *w, const void *data, size_t n);
void blob_put_u8(blob_writer *w, uint8_t v);
void blob_put_u32(blob_writer *w, uint32_t v);
void blob_put_u64(blob_writer *w, uint64_t v);
void blob_put_f64(blob_writer *w, double v);
void blob_put_str(blob_writer *w, const char *s);

/* ---- membership payloads ---- */

/* Role (a loom_role value) and rank of node `id` in a job of `nnodes` nodes
 * with `num_servers` servers: the scheduler is 0, server r is 1 + r, worker r
 * is 1 + S + r. Returns -1 (rank -1) for an id outside the job. */
int msg_node_role(uint32_t id, uint32_t nnodes, uint32_t num_servers, int *rank);

/* REGISTER: who a node is and which job it was started for. */
typedef struct msg_register {
    int role; /* LOOM_SERVER or LOOM_WORKER */
    int rank; /* -1: let the scheduler choose */
    uint32_t num_servers, num_workers;
    uint32_t max_frame_mib;    /* its frame limit, which must be the job's */
    char token[MSG_TOKEN_MAX]; /* the job token it was started with; "" = none */
    char address[MSG_ADDR_MAX];
} msg_register;

void msg_register_encode(const msg_register *r, blob_writer *w);
/* 0, or -1 if the payload is not a well-formed REGISTER. */
int msg_register_decode(const void *data, size_t len, msg_register *r);

/* ROSTER: every node's id, role, rank, address and routing id, in id order.
 * Addresses are read from / written to addrs + id * stride (MSG_ADDR_MAX
 * bytes each), routing ids to rids + id * stride (MSG_RID_SIZE bytes each),
 * so a caller can point straight into its own per-node records. */
void msg_roster_encode(uint32_t nnodes, uint32_t num_servers, const char *addrs,
                       const uint8_t *rids, size_t stride, blob_writer *w);
/* 0, or -1 unless the payload lists exactly the nodes 0..nnodes-1 of this job
 * shape, in order, each with the role and rank its id implies and a routing
 * id that starts with MSG_RID_TAG. */
int msg_roster_decode(const void *data, size_t len, uint32_t nnodes, uint32_t num_servers,
                      char *addrs, uint8_t *rids, size_t stride);

/* METRICS: the latest values a worker's application reported (loom_report_metric),
 * shown on the scheduler's status page. At most MSG_METRICS_MAX names, each 1 to
 * MSG_METRIC_NAME_MAX characters of [A-Za-z0-9_.-], distinct, with a finite
 * value; so the payload is at most 1 + 8 * (2 + 31 + 8) = 329 bytes. */
#define MSG_METRICS_MAX     8
#define MSG_METRIC_NAME_MAX 31
typedef struct msg_metrics {
    uint32_t count;
    char name[MSG_METRICS_MAX][MSG_METRIC_NAME_MAX + 1];
    double value[MSG_METRICS_MAX];
} msg_metrics;

/* 1 if name is a valid metric name (the rule above). */
int msg_metric_name_ok(const char *name);
void msg_metrics_encode(const msg_metrics *m, blob_writer *w);
/* 0, or -1 unless the payload is exactly a METRICS blob that keeps every rule above. */
int msg_metrics_decode(const void *data, size_t len, msg_metrics *m);

#endif
