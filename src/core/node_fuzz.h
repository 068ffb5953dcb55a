/* node_fuzz: a whole Loom job in one thread, for the fuzz targets (tests/fuzz).
 *
 * The job's nodes are real nodes of their roles, with the core handlers and
 * their layers attached (ps_attach), but without sockets or I/O threads (the
 * seam of node_priv.h): every message a node sends joins the job's queue, and
 * the queue is delivered as each node's I/O thread would deliver it (header
 * decoded and checked, sender resolved, then the handler). A node that waits
 * (loom_wait, a barrier, a clock gate, loom_table_open) delivers queued
 * messages meanwhile, so ordinary worker code runs to its end on the calling
 * thread; a wait for something that can no longer come returns LOOM_ETIMEDOUT.
 *
 * So a fuzz target can start a job, let a worker open tables, inject hostile
 * but well-framed messages from any node, tamper with, drop or repeat the
 * messages in flight, and even run an application's unmodified worker code
 * (node_fuzz_job_install: the next loom_init() joins the job). Nothing but the
 * fuzz targets uses this; see node_priv.h for why it is in every build. */
#ifndef LOOM_CORE_NODE_FUZZ_H
#define LOOM_CORE_NODE_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "core/msg.h"
#include "loom/node.h"

typedef struct node_fuzz_job node_fuzz_job;

/* The job's nodes' loom_config.max_frame_mib. The largest request a node must serve
 * is one frame's worth of rows: with the default 256 MiB, a valid range pull of a
 * sparse table reads 64 M rows, longer than a fuzzer waits for one input; 1 MiB
 * keeps every check the same. */
#define NODE_FUZZ_FRAME_MIB 1

/* A message in flight: from, dest, the header frame and the payload frames
 * (each its own malloc'd bytes, which the message owns: node_fuzz_msg_close
 * frees them, a delivery takes them). */
typedef struct node_fuzz_msg {
    uint32_t from, dest;
    uint8_t hdr[MSG_HEADER_SIZE];
    size_t nframes;
    struct {
        uint8_t *data; /* NULL when len is 0 */
        size_t len;
    } frames[MSG_MAX_FRAMES];
} node_fuzz_msg;

/* A job of 1 scheduler, num_servers servers and num_workers workers, each
 * with attach (NULL: none; ps_attach for the parameter server) run on it.
 * assembled: as after every REGISTER and the roster; otherwise the scheduler
 * waits for registrations and the others for the roster. make_workers: 0 to
 * leave the workers to node_start() (node_fuzz_job_install). At most
 * max_deliveries messages are delivered (then the queue is only drained), so
 * that a livelock of the protocol ends; node_fuzz_job_overrun() tells. */
int node_fuzz_job_new(int num_servers, int num_workers, int assembled, int make_workers,
                      int (*attach)(loom_node *n), uint64_t max_deliveries, node_fuzz_job **out);
/* Node `id` (0 the scheduler, then the servers, then the workers), or NULL. */
loom_node *node_fuzz_job_node(const node_fuzz_job *j, uint32_t id);

/* Make node_start() (and so loom_init()) return the job's worker of the
 * configured rank, attached with the caller's attach; NULL uninstalls. The job
 * must have been made with make_workers 0 and the configuration's sizes. */
void node_fuzz_job_install(node_fuzz_job *j);

/* Messages queued and not yet delivered. */
size_t node_fuzz_job_queued(const node_fuzz_job *j);
/* Take the oldest queued message (1), or 0 if none; the caller delivers it
 * (node_fuzz_deliver) or closes it (node_fuzz_msg_close). */
int node_fuzz_job_take(node_fuzz_job *j, node_fuzz_msg *m);
/* Deliver the oldest queued message; 0 if none was left or the budget is spent. */
int node_fuzz_job_step(node_fuzz_job *j);
/* Run every node's layer timers that are due now (node_run_timers): the job
 * has no I/O threads, so without this no timer ever runs (a server's
 * replication rounds, which a replicated push's acknowledgement may wait
 * for; the registry's retries). The timers' messages join the queue. */
void node_fuzz_job_tick(node_fuzz_job *j);
/* Node id comes back as a replacement process would: with a new routing id
 * (node_fuzz_rid's, its 6th byte counting the returns), written to rid, which
 * its messages carry from now on (node_fuzz_job_step); the caller tells the
 * other nodes (NODE_REJOINED), which accept it only as a new one. */
void node_fuzz_job_rejoin(node_fuzz_job *j, uint32_t id, uint8_t *rid, size_t *len);
/* Whether max_deliveries was reached. */
int node_fuzz_job_overrun(const node_fuzz_job *j);
/* Free every node the job still has, then the queue. */
void node_fuzz_job_free(node_fuzz_job *j);

/* Deliver a message to node m->dest (closing its frames), as sent by node
 * m->from over its connection to m->dest, with the routing id rid (rid_len
 * bytes; what a ROUTER resolves the sender by); from >= the job's size stands
 * for an identity that is no node. A destroyed destination loses it,
 * as a vanished peer would. Malformed messages and unknown senders are
 * dropped and counted (loom_node_stats' malformed_dropped). */
void node_fuzz_deliver(node_fuzz_job *j, node_fuzz_msg *m, const uint8_t *rid, size_t rid_len,
                       size_t hdr_len);
/* Node id's routing id in a fuzz job (MSG_RID_SIZE bytes into rid): MSG_RID_TAG,
 * then the id, then zeros; a stranger's differs in its last byte. */
void node_fuzz_rid(uint32_t id, uint8_t *rid, size_t *len);
/* Append a copy of len bytes at data to m's payload frames (at most
 * MSG_MAX_FRAMES); 0, or LOOM_EINVAL / LOOM_ENOMEM. */
int node_fuzz_msg_add_frame(node_fuzz_msg *m, const void *data, size_t len);
/* Free m's frames. */
void node_fuzz_msg_close(node_fuzz_msg *m);

#endif
