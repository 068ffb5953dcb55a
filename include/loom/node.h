/* A node: one process (or, in tests, one thread) of a Loom job.
 *
 * A job has one scheduler, S servers and W workers. Every process runs the same
 * program (SPMD); loom_init() reads the process's role and the scheduler's
 * address from the environment, set by `loom run`, by hand, or by mpirun/srun
 * (docs/LAUNCHING.md, docs/CLUSTER.md), registers
 * with the scheduler and returns once the whole job has registered. Workers
 * then run the application; the scheduler and the servers call loom_serve(),
 * which returns when every worker has called loom_finalize().
 *
 *     loom_node *node;
 *     int rc = loom_init(&node, &argc, &argv);
 *     if (rc) { fprintf(stderr, "loom: %s\n", loom_strerror(rc)); return 1; }
 *     if (!loom_is_worker(node)) return loom_serve(node);
 *     ... tables, pull, push, loom_clock(node) ...
 *     return loom_finalize(node);
 *
 * If any process of the job dies, the others notice within the heartbeat
 * timeout. By default (LOOM_ON_FAILURE_EXIT) the process then prints which node
 * died and exits with status LOOM_EXIT_PEER_FAILED; with LOOM_ON_FAILURE_RETURN
 * blocked and later calls return LOOM_EPEERFAIL instead (used when several nodes
 * share one process, as in tests). */
#ifndef LOOM_NODE_H
#define LOOM_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "secret.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_node loom_node;

typedef enum { LOOM_SCHEDULER = 0, LOOM_SERVER = 1, LOOM_WORKER = 2 } loom_role;

typedef enum { LOOM_ON_FAILURE_EXIT = 0, LOOM_ON_FAILURE_RETURN = 1 } loom_failure_policy;

/* What the job does when a worker dies (the scheduler decides; docs/FAULTS.md).
 * FAIL: the job ends, as when any other process dies. CONTINUE: the job goes
 * on without it; its share of the data is lost, every clock it finished is
 * kept. RESTART: inside the job as FAIL; the launcher (`loom run`) then starts
 * the whole job again from its newest checkpoint. */
typedef enum {
    LOOM_WORKER_FAILURE_FAIL = 0,
    LOOM_WORKER_FAILURE_CONTINUE = 1,
    LOOM_WORKER_FAILURE_RESTART = 2
} loom_worker_failure_policy;

/* Exit status of a process that stops because another process of the job died. */
#define LOOM_EXIT_PEER_FAILED 3

/* The largest job loom_init() accepts (larger counts are LOOM_ECONFIG).
 * Servers are bounded tightly because every node keeps state per server in
 * arrays sized at compile time (the I/O thread's poll set, a message's split
 * by server); workers are many and kept only in arrays sized at run time. */
#define LOOM_MAX_SERVERS 1000
#define LOOM_MAX_WORKERS 65536

/* Everything a node needs to join a job. loom_config_from_env() fills it from
 * the LOOM_* environment variables; programs that embed several nodes fill it
 * by hand. */
typedef struct loom_config {
    loom_role role;
    int rank;                  /* rank within the role, 0-based; -1: assigned on arrival */
    int num_servers;           /* 1 <= S <= LOOM_MAX_SERVERS */
    int num_workers;           /* 1 <= W <= LOOM_MAX_WORKERS */
    char scheduler[256];       /* "host:port" of the scheduler; port 0 = any (scheduler only) */
    char bind_host[128];       /* interface address this node binds to; "" = 127.0.0.1 */
    int heartbeat_interval_ms; /* how often nodes and scheduler exchange heartbeats */
    int heartbeat_timeout_ms;  /* silence after which a node is declared dead */
    int connect_timeout_ms;    /* how long to wait for the whole job to register */
    loom_failure_policy on_failure;
    /* Scheduler: what a worker's death does (LOOM_ON_WORKER_FAILURE). */
    loom_worker_failure_policy on_worker_failure;
    int verbose; /* 0 quiet, 1 lifecycle messages, 2 debug */
    /* Names the job this node belongs to: the scheduler refuses a REGISTER
     * whose token differs from its own, so nodes of another job (same fixed
     * port, a stale script) never join. "" on every node = no check. Up to
     * 64 characters; docs/SECURITY.md says where it comes from. */
    char job_token[65];
    /* The largest payload frame (MiB) any node of the job sends or accepts;
     * 0 = 256. Pushes and pulls are split to fit; a peer announcing a larger
     * frame is disconnected. Must be the same on every node (the scheduler
     * refuses a node with another value). 1 to 2047. */
    int max_frame_mib;
    /* The job's secret (loom_secret_load; secret.h): every socket then uses
     * CURVE with the key pair derived from it. "": no encryption. */
    char secret[LOOM_SECRET_LEN + 1];
    /* Scheduler: the TCP port of its read-only status page (HTTP;
     * docs/USAGE.md "The status page"). 0 = a free port chosen at start
     * (loom_status_address() tells which), -1 = no page. */
    int status_port;
    /* Scheduler: the address (or host name) its status page binds;
     * "" = 127.0.0.1, whatever the job binds. "0.0.0.0" makes it reachable
     * from other machines: with a secret, only with the token in its URL
     * (loom_status_url()). */
    char status_bind[128];
    /* Scheduler, an elastic job (LOOM_START_WORKERS; docs/ELASTIC.md): the
     * job starts once the servers and this many workers registered, and the
     * other num_workers - start_workers worker ranks are free slots that
     * workers joining the running job take (`loom join`). 0 = num_workers. */
    int start_workers;
    /* Scheduler, the same for servers (LOOM_START_SERVERS; docs/ELASTIC.md):
     * the job starts once this many servers (ranks 0 to start_servers - 1)
     * registered; the other server ranks are free slots whose ranges the
     * live servers hold (it needs LOOM_REPLICAS >= num_servers -
     * start_servers) until a server joins (`loom join --role server`) and
     * takes them back. 0 = num_servers. */
    int start_servers;
} loom_config;

/* Defaults: heartbeat every 500 ms, declared dead after 5000 ms, rendezvous
 * within 60000 ms, exit on failure. Role, counts and scheduler must be set. */
void loom_config_default(loom_config *cfg);

/* Fill cfg from LOOM_ROLE, LOOM_RANK, LOOM_SCHEDULER, LOOM_NUM_SERVERS,
 * LOOM_NUM_WORKERS, LOOM_BIND or LOOM_INTERFACE, LOOM_HEARTBEAT_MS,
 * LOOM_HEARTBEAT_TIMEOUT_MS, LOOM_CONNECT_TIMEOUT_MS, LOOM_VERBOSE, LOOM_LOG_TIME,
 * LOOM_JOB_TOKEN, LOOM_MAX_FRAME_MIB, LOOM_ON_WORKER_FAILURE (fail, continue, restart),
 * LOOM_SECRET_FILE (read with loom_secret_load), LOOM_STATUS_PORT, LOOM_STATUS_BIND
 * (docs/LAUNCHING.md). Without LOOM_JOB_TOKEN, a process that mpirun or srun started takes the
 * launcher's job id as its job token.
 *
 * Without LOOM_ROLE, a launcher must have started the process (see
 * loom_launched()): its rank decides the role (rank 0 the scheduler, the next
 * LOOM_NUM_SERVERS ranks servers, the rest workers) and the scheduler is found
 * by rendezvous (LOOM_SCHEDULER, LOOM_RENDEZVOUS_DIR, LOOM_PORT, LOOM_JOB_ID;
 * docs/CLUSTER.md). A server or worker may then wait here, up to
 * LOOM_CONNECT_TIMEOUT_MS, for the scheduler to publish its address.
 *
 * A server or worker binds LOOM_INTERFACE's address, or LOOM_BIND, or else the
 * local address of its route to the scheduler. The scheduler binds the port
 * of LOOM_SCHEDULER on LOOM_INTERFACE's address or LOOM_BIND if one is set.
 *
 * On failure, writes a sentence naming the bad or missing variable into err
 * (if not NULL) and returns LOOM_ECONFIG (LOOM_ETIMEDOUT if the scheduler's
 * address did not appear in time). */
int loom_config_from_env(loom_config *cfg, char *err, size_t errlen);

/* 1 if this process was started as one node of a job: LOOM_ROLE is set, or a
 * launcher started it as one of several processes (Open MPI's mpirun:
 * OMPI_COMM_WORLD_RANK; MPICH/Hydra mpiexec: PMI_RANK; Slurm's srun:
 * SLURM_PROCID in a job step; PMIX_RANK). 0 otherwise; a command such as
 * `loom train` then starts a whole job on this machine itself. */
int loom_launched(void);

/* The IPv4 address of network interface `name` ("eth0", "ib0"), as text: what
 * a process binds with LOOM_INTERFACE=name. addrlen must be at least 16.
 * Returns 0, LOOM_EINVAL, or LOOM_ECONFIG if no such interface has an IPv4
 * address. */
int loom_interface_address(const char *name, char *addr, size_t addrlen);

/* Start a node from the environment (loom_config_from_env). Under a launcher,
 * the scheduler also publishes its address for the rendezvous. argc/argv are
 * accepted for symmetry with MPI-style launchers and are currently left
 * untouched (may be NULL). */
int loom_init(loom_node **node, int *argc, char ***argv);

/* Start a node from an explicit configuration. Blocks until the whole job has
 * registered with the scheduler (or connect_timeout_ms passes). For a
 * scheduler with port 0, loom_node_address() tells the port chosen; the
 * scheduler's start does not wait for the others, its loom_serve() does. */
int loom_node_start(const loom_config *cfg, loom_node **node);

loom_role loom_node_role(const loom_node *node);
int loom_is_worker(const loom_node *node);
int loom_rank(const loom_node *node); /* rank within the role */
int loom_num_workers(const loom_node *node);
int loom_num_servers(const loom_node *node);
/* The "host:port" this node listens on (for a scheduler started with port 0,
 * the port it was given). */
const char *loom_node_address(const loom_node *node);

/* Scheduler: "host:port" of its status page, or "" if it has none. */
const char *loom_status_address(const loom_node *node);
/* Scheduler: its status page's URL, "http://host:port/", with "?token=T" for a
 * job with a secret (requests without the token are refused), or "". */
const char *loom_status_url(const loom_node *node);

/* Workers: the application's latest value of metric `name` (an objective, an
 * accuracy), shown with the worker on the scheduler's status page. Up to
 * LOOM_METRICS_MAX names per worker, each 1 to 31 characters of
 * [A-Za-z0-9_.-]; reporting a name again replaces its value. The values go to
 * the scheduler with the worker's next heartbeat: the call never blocks nor
 * sends. Returns 0, LOOM_EINVAL (bad name, value not finite), LOOM_ELIMIT (a
 * name beyond the first LOOM_METRICS_MAX), LOOM_EROLE (not a worker). */
#define LOOM_METRICS_MAX 8
int loom_report_metric(loom_node *node, const char *name, double value);

/* Scheduler and servers: serve the job until every worker has finished, then
 * release the node. Returns 0 on an orderly end, an error code otherwise. */
int loom_serve(loom_node *node);

/* Workers: flush pending updates, wait until the servers acknowledged them,
 * tell the scheduler this worker is done, and release the node. */
int loom_finalize(loom_node *node);

/* End of this worker's iteration. Flushes the buffered updates of every table,
 * tells servers and scheduler, and, if any open table is BSP or SSP(s), blocks
 * until the slowest worker is at most s clocks behind (s = smallest staleness
 * among those tables). Process-wide: call it once per iteration, after every thread finished it. */
int loom_clock(loom_node *node);
int64_t loom_current_clock(const loom_node *node);

/* Workers: flush buffered updates, wait until servers have them, then wait
 * until every worker reaches the barrier. Drops cached rows, so pulls after the
 * barrier see every update pushed before it by any worker (in ASP and SSP
 * tables; BSP tables show a clock's updates when that clock ends). */
int loom_barrier(loom_node *node);

/* With --on-worker-failure continue (LOOM_ON_WORKER_FAILURE): how many workers
 * the job has gone on without so far, as this worker or the scheduler has
 * heard; *share (if not NULL) gets the sum of the "share" metric they had
 * reported (loom_report_metric: an application reports its share of the data,
 * in rows or documents, under that name), 0 if none did. */
int loom_workers_lost(loom_node *node, double *share);

/* Elastic jobs (docs/ELASTIC.md). A worker started with LOOM_JOIN=1 (`loom
 * join`) joins a running job in a free worker slot: loom_joined() is 1 on it,
 * and it starts at the job's current clock, barrier and (with data parts,
 * loom/parts.h) epoch; it did not take part in what the job did before it
 * came (an agreement among the first workers, say). loom_leave() asks this
 * worker to leave the running job: loom_parts_next() then reports the part
 * it finished and answers LOOM_PARTS_LEFT, and the worker ends with
 * loom_finalize() like one that finished, its slot free again. It only sets
 * a flag (async-signal-safe: a SIGTERM handler may call it). loom_leaving()
 * says whether it was asked. A server started with LOOM_JOIN=1 and
 * LOOM_ROLE=server joins in a free server slot (loom_joined() is 1 on it
 * once loom_init returned) and takes that slot's ranges from the live
 * servers; loom_leave() on a server asks the scheduler to let the job go on
 * without it (its replicas serve its ranges), and loom_serve() then returns
 * 0; refused, with a logged reason, when its ranges would have no live
 * holder. All three are 0 (no-ops) on the scheduler. */
int loom_joined(const loom_node *node);
void loom_leave(loom_node *node);
int loom_leaving(const loom_node *node);
/* Ask the scheduler of a running job that its worker or server `rank` leave
 * it (`loom leave`; docs/ELASTIC.md), from a process that is no node of the
 * job. cfg names the job as a joining node's does: scheduler (its address),
 * job_token and secret, and num_servers and num_workers, checked if not both
 * 0. A worker leaves as on SIGTERM, after the part it trains on (a job with
 * data parts, loom/parts.h); a server at once, its ranges going to the
 * servers that hold their replicas. Waits up to timeout_ms for the
 * scheduler's answer and, with wait_gone, until the node is gone from the
 * job (a worker: its last part reported; a server: the job went on without
 * it). Returns 0 (accepted, and gone if wait_gone); the scheduler's refusal
 * (LOOM_ENOTFOUND no such rank; LOOM_ESTATE gone already, still joining, the
 * last worker, a server whose ranges would lose their last holder;
 * LOOM_ECONFIG another job, or a worker of a job without data parts;
 * LOOM_ESHUTDOWN the job is ending); LOOM_ETIMEDOUT (no answer in time, or
 * accepted but not gone in time); LOOM_EINVAL, LOOM_ECONFIG (a bad secret),
 * LOOM_ETRANSPORT. msg (msglen bytes, if not NULL) gets the scheduler's
 * sentence or why there was none; *accepted (if not NULL) whether the
 * scheduler accepted the leave. */
int loom_request_leave(const loom_config *cfg, loom_role role, int rank, int timeout_ms,
                       int wait_gone, int *accepted, char *msg, size_t msglen);
/* Workers: how many workers the job started with (their ranks are 0 to
 * this - 1; the others were free slots), as this worker's roster said:
 * num_workers unless the job is elastic (start_workers). */
int loom_workers_started(const loom_node *node);

/* Asynchronous operations return a timestamp; loom_wait() blocks until it has
 * completed and returns its result (0 or an error code). */
typedef uint64_t loom_ts;
int loom_wait(loom_node *node, loom_ts ts);
/* Non-blocking: 1 if ts has completed, 0 if not. */
int loom_test(loom_node *node, loom_ts ts);

/* Call fn(arg, result) once ts completes, from the thread that handles the
 * answer completing it (Loom's I/O thread, or a thread of the application
 * blocked in loom_wait() on the same node), or at once, from the caller, if it
 * already has; or with LOOM_ESHUTDOWN when the node is destroyed first. fn must
 * be short and must not block or call loom_wait(). */
typedef void (*loom_callback)(void *arg, int result);
int loom_on_complete(loom_node *node, loom_ts ts, loom_callback fn, void *arg);

/* Traffic and health counters of one node since it started. */
typedef struct loom_stats {
    uint64_t bytes_sent, bytes_received;
    uint64_t messages_sent, messages_received;
    uint64_t malformed_dropped;   /* received messages that failed validation */
    uint64_t connections_refused; /* peers without the job's secret refused in the handshake */
    uint64_t pulls_from_cache;    /* rows served from the process cache */
    uint64_t pulls_from_server;   /* rows fetched from servers */
    /* Workers: the pushes and keyed pull requests sent and the pull replies
     * received of every table, and
     * their payload as plain keys and dense rows (raw) and as sent, through
     * filters and as sparse rows (wire); per table: loom_table_filter_stats(). */
    uint64_t table_messages, table_bytes_raw, table_bytes_wire;
    /* Managed communication (docs/USAGE.md): rows this node sent between
     * clocks (a worker's early pushes, a server's pushes of changed rows),
     * and rows servers pushed into this worker's cache. */
    uint64_t managed_rows_sent, pushed_rows_received;
    /* Servers of a job with replicas (docs/FAULTS.md): bytes this node sent
     * to replicas of the ranges it is master of. */
    uint64_t replicated_bytes;
    /* Workers of a job with replicas: pushes sent again to a range's new
     * master after its server died, or moved by a handback (pushes_resent:
     * the old master may have applied them; the new one skips those it
     * holds), and pushes a server parked, or held for a server that left
     * after handing its ranges over, sent to the master now
     * (pushes_redirected: never applied anywhere). */
    uint64_t pushes_resent, pushes_redirected;
} loom_stats;
void loom_node_stats(loom_node *node, loom_stats *out);

#ifdef __cplusplus
}
#endif
#endif
