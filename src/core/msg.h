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

/* The wire's type numbers: core's own (REGISTER to NODE_REJOINED, and
 * WORKER_LOST), which msg.c knows, and those of the layers above, kept here
 * so that no two layers take the same number. What a layer's type is (its
 * name, who may send it, its payload frames) core learns only when the layer
 * registers it (msg_register_types, from node_layer_register in the layer's
 * attach); until then a message of that type is of an unknown type. */
enum msg_type {
    /* membership and control (core) */
    MSG_REGISTER = 1, /* node -> scheduler: blob (msg_register) */
    MSG_ROSTER,       /* scheduler -> node: blob (every node's id, role, rank, address) */
    MSG_ROSTER_ACK,   /* server -> scheduler: roster installed */
    MSG_REJECT,    /* scheduler -> node: registration refused; a = loom error code, blob = reason */
    MSG_HEARTBEAT, /* both directions, no payload; node -> scheduler: a = bytes it sent,
                      b = bytes it received (its totals so far, for the status page) */
    MSG_BARRIER,   /* worker -> scheduler: req = barrier generation */
    MSG_BARRIER_RELEASE, /* scheduler -> workers: req = generation */
    MSG_DONE,            /* worker -> scheduler: this worker finished */
    MSG_DONE_ACK,        /* scheduler -> worker */
    MSG_SHUTDOWN,        /* scheduler -> server: the job is over */
    MSG_SHUTDOWN_ACK,    /* server -> scheduler */
    MSG_NODE_FAILED,     /* scheduler -> all: a = id of the dead node */
    MSG_METRICS,         /* worker -> scheduler: blob (the application's latest metrics) */
    MSG_NODE_REJOINED,   /* scheduler -> all: a = id of a dead node a replacement took over;
                            frame its routing id (MSG_RID_SIZE bytes), then its address (str) */
    /* parameter server (ps) */
    MSG_TABLE_OPEN = 32, /* worker -> scheduler: blob (table name and options) */
    MSG_TABLE_CREATE,    /* scheduler -> server: table = id, blob as above */
    MSG_TABLE_CREATED,   /* server -> scheduler: table = id, a = status */
    MSG_TABLE_OPENED,    /* scheduler -> worker: table = id, a = status, req echoed */
    MSG_PUSH,            /* worker -> server: req = sequence, clock = the pusher's clock;
                            frames keys, values; or MSG_F_RANGE with a = begin, b = end
                            and one values frame */
    MSG_PUSH_ACK,        /* server -> worker: req = sequence, a = status, b = last
                            sequence applied from this worker (BSP applies later);
                            with replicas, clock = last sequence the replicas hold */
    MSG_PULL,            /* worker -> server: req = request id, clock = oldest clock the
                            answer may reflect; frame keys, or MSG_F_RANGE with a, b */
    MSG_PULL_REPLY,      /* server -> worker: req echoed, clock = server's min clock,
                            a = last push sequence applied from this worker, b = status;
                            frame values */
    MSG_CLOCK,           /* worker -> servers, scheduler: clock = clocks completed */
    MSG_MIN_CLOCK,       /* scheduler -> workers: clock = slowest worker's clock */
    /* ps: filtered and sparse rows (src/ps/filter.c's encoding) */
    MSG_PUSH_ENC = 48,  /* worker -> server: as PUSH (keyed), one frame: the table's push
                           chain's encoding of the keys and delta rows */
    MSG_PULL_SINCE,     /* worker -> server: as PULL (keyed), a = the oldest row version the
                           reader holds; frames keys, a bitmap of the keys it holds */
    MSG_PULL_REPLY_ENC, /* server -> worker: as PULL_REPLY; frames u64 row version of the
                           answer, the pull chain's encoding of the rows that changed */
    /* managed communication (ps/comm.h) */
    MSG_ROWS_PUSH = 56, /* server -> worker: rows that changed, for the worker's cache;
                           req = push id, clock = server's min clock, a = last push
                           sequence applied from this worker, b = the row version
                           the rows reflect (as PULL_REPLY_ENC's); frames keys, values */
    MSG_ROWS_PUSH_ACK,  /* worker -> server: req echoed */
    /* ckpt (ft) */
    MSG_CKPT_PART = 64, /* server/worker -> scheduler: its part of checkpoint `clock` is on
                           disk; a = 1 if it holds every row (full), b = the server deaths
                           and req = the handbacks it knew of; blob (the part's kind, rank,
                           full, path, size, CRC: src/ft/ft.c send_part) */
    /* rotation (src/sched/ring.c) */
    MSG_SCHED_BLOCK = 80, /* worker -> worker: table = engine, a = block, b = version; frame rows */
    /* dynamic scheduling engine (sched, src/sched/dynamic.c) */
    MSG_DYN_START = 88, /* worker -> scheduler: a = dim, b = max rounds, req = depth,
                           table = parallel updates, clock = extra values */
    MSG_DYN_PLAN_REQ,   /* scheduler -> shard's worker: req = round */
    MSG_DYN_PLAN,       /* shard -> scheduler, scheduler -> workers: req = round,
                           frame keys (u64) */
    MSG_DYN_PSUM,       /* worker -> scheduler: req = round, a = stop; frame f64 values */
    MSG_DYN_SUM,        /* scheduler -> workers: req = round; frame f64 sums */
    MSG_DYN_END,        /* scheduler -> workers: req = rounds run, a = loom error or 0 */
    /* p2p */
    MSG_P2P_MODEL = 96, /* worker -> worker: req = round, a = model length (floats); frame values */
    MSG_P2P_ACK = 97,   /* worker -> worker: req = round consumed */
    /* mlr (sufficient-vector broadcasting, src/p2p/svb.c) */
    MSG_SVB_SVS = 112, /* worker -> worker: clock = the sender's clock, a = SVs, b = width;
                          frame SVs (none with a = 0: a clock mark) */
    MSG_SVB_REPLICA,   /* worker -> worker: clock = after which clock, a = 0 averaging,
                          1 rotation; frame the replica (rows x width f64) */
    /* replication (src/ft/replica.c, src/ps/ring.h; docs/FAULTS.md) */
    MSG_REPL = 120, /* server -> server (a range's master to its replicas): table = id,
                       req = replication round, a = ring range, b = rows; frames the
                       last push sequence applied per worker (u64 each), the rows
                       changed since the last round ([u64 key][values][updater state]) */
    MSG_REPL_ACK,   /* server -> server (replica to master): table = id, req = round */
    /* worker failure (core, --on-worker-failure continue) */
    MSG_WORKER_LOST = 136, /* scheduler -> servers, workers: a = node id of a dead worker
                              the job goes on without, b = its share of the data (the
                              "share" metric it reported, 0 = unknown) */
    /* a replacement server rejoining (src/ps/registry.c, src/ft/rejoin.c; docs/FAULTS.md) */
    MSG_REJOIN_COPY = 144, /* scheduler -> servers: a = node id of a rejoining server,
                              req = generation; copy it the ranges you are master of */
    MSG_REJOIN_COPIED,     /* server -> scheduler: a, req echoed; the copies are acknowledged */
    MSG_REJOIN_READY,      /* scheduler -> servers, workers: a = node id of a rejoined
                              server, which now holds full copies of its ranges */
    /* a replacement taking its ranges back (src/ft/handback.c; docs/FAULTS.md) */
    MSG_HANDBACK = 152, /* scheduler -> servers (b = 0 fence, 2 abort), servers and workers
                           (b = 1 commit): a = node id of the server taking its ranges
                           back, req = generation */
    MSG_HANDBACK_ACK,   /* server -> scheduler: fenced, its last round acknowledged;
                           worker -> that server: switched, its pushes sent again; req
                           (and, answering PARKED, b) echoed */
    MSG_PARKED,         /* server -> worker: table = id, req = the sequence of a push not
                           applied (its range is fenced, or an older push to it is): hold
                           it; req = 0: send again every push parked here (and ask again
                           every pull refused here), a = generation, b = the number of
                           such PARKED so far */
    /* a replacement server in a resumed job (ft, src/ft/ft.c; docs/FAULTS.md) */
    MSG_CKPT_BASE = 160, /* scheduler -> a replacement server: clock = the job's clock at
                            this run's clock 0 (the resumed checkpoint's; 0 if not resumed) */
    MSG_CKPT_PLAN,       /* scheduler -> servers, workers: clock = the job clock of the next
                            checkpoint, a = 1 if servers write every row; b = 1 (to
                            workers): the final checkpoint at `clock` was given up */
    MSG_CKPT_SKIP,       /* server/worker -> scheduler: no part of checkpoint `clock`;
                            a = the sender's job clock now + 1 (0: finished), b = why (FT_SKIP_*) */
    MSG_CKPT_EPOCH,      /* worker 0 -> scheduler: an epoch ended at job clock `clock`,
                            a = its length in clocks */
    MSG_CKPT_FINAL,      /* worker -> scheduler: `clock` is its last: checkpoint it */
    MSG_TYPE_END_
};

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
 * again does nothing. 0, or -1 if a number is core's, out of range, or taken
 * by another entry. */
int msg_register_types(const msg_type_info *types, size_t count);
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
