/* p2p: serverless data parallelism, stochastic reduce over a communication graph (ASAP).
 *
 * Every worker holds a whole replica of a dense float model. After each local step (or
 * group of minibatches) it calls loom_reduce(): its model goes to its out-neighbours in a
 * fixed directed graph, and it replaces its model by the average of its own and its
 * in-neighbours' models, each weighted 1 / (in-degree + 1): one row of the averaging matrix
 * P = diag(d_in + 1)^-1 (A + I). How fast the replicas agree is governed by the spectral
 * gap 1 - sigma_2(P) (1: all-reduce, near 0: a long ring, 0: disconnected).
 *
 * Synchronisation (loom_sync):
 *   LOOM_SYNC_BSP         send, a global barrier of all workers, then reduce with every
 *                         in-neighbour's model of this round;
 *   LOOM_SYNC_ASYNC       send, then reduce with whatever in-neighbours' models arrived since
 *                         the last reduce (a later one replaces an unread earlier one);
 *   LOOM_SYNC_NOTIFY_ACK  per edge, no barrier: a worker sends round t to a receiver only
 *                         once that receiver acknowledged round t - W (the window, W >= 1:
 *                         each of the W rounds in flight has its own receive slot, so a
 *                         sender never overwrites a model its receiver has not consumed),
 *                         reduces when every in-neighbour's round-t model is there, then
 *                         acknowledges. W = 1 is lock-step per edge; W > 1 takes the
 *                         acknowledgement's round trip off the critical path and lets
 *                         neighbours drift up to W rounds apart (to absorb a late worker).
 * BSP and NOTIFY-ACK (any window) average exactly the round-t models at round t: they compute
 * the same numbers; only the waiting differs.
 *
 * A job of workers only (`--servers 0`) is enough: the scheduler still keeps membership and
 * heartbeats, and a worker that dies ends the job (every loom_reduce returns LOOM_EPEERFAIL
 * or the process exits, as for any failure; docs/P2P.md). */
#ifndef LOOM_P2P_H
#define LOOM_P2P_H

#include <stddef.h>
#include <stdint.h>

#include "node.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- communication graphs ---- */

typedef struct loom_graph loom_graph;

/* The graph `spec` on n nodes (workers 0..n-1, 1 <= n <= 1024):
 *   "allreduce"  every node sends to every other;
 *   "ring"       i -> i+1 (mod n);
 *   "expander"   the root expander: i -> i+1 and i -> i+ceil(sqrt(n)) (mod n);
 *   "halton"     i -> i+1, then i -> i + floor(n h_k) (mod n) for the next distinct non-zero
 *                offsets of the base-2 Halton (van der Corput) sequence h = 1/2, 1/4, 3/4, ...,
 *                ceil(log2 n) offsets in all (the ring edge keeps every n connected);
 *   "star"       0 <-> every other node (not regular: see loom_graph_regular);
 *   anything else is a file of edges "FROM TO" (one per line, node numbers, '#' comments).
 * Refused with LOOM_ECONFIG and a sentence (loom_last_error): an unreadable file, a line that
 * is not two node numbers below n, a self-loop, an edge given twice, and a graph in which
 * some node cannot reach every other (its gap is 0: the replicas would never agree). */
int loom_graph_build(const char *spec, int n, loom_graph **out);
void loom_graph_free(loom_graph *g);

int loom_graph_nodes(const loom_graph *g);
/* The in-neighbours (senders to i) and out-neighbours (receivers from i) of node i:
 * their number, and the k-th of them in ascending order. */
int loom_graph_in_degree(const loom_graph *g, int i);
int loom_graph_in(const loom_graph *g, int i, int k);
int loom_graph_out_degree(const loom_graph *g, int i);
int loom_graph_out(const loom_graph *g, int i, int k);
/* 1 if every node has the same in-degree and the same out-degree, so that P is doubly
 * stochastic and the replicas agree on the plain average; 0 otherwise (e.g. star). */
int loom_graph_regular(const loom_graph *g);
/* P[i][j]: the weight of node j's model in node i's average (rows sum to 1). */
double loom_graph_weight(const loom_graph *g, int i, int j);
/* 1 - sigma_2(P), from the eigenvalues of P^T P (cyclic Jacobi, O(n^3) per sweep). */
double loom_graph_spectral_gap(const loom_graph *g);

/* ---- stochastic reduce ---- */

typedef enum { LOOM_SYNC_BSP = 0, LOOM_SYNC_ASYNC = 1, LOOM_SYNC_NOTIFY_ACK = 2 } loom_sync;

/* "bsp", "async", "notify-ack" into *out: 0, or LOOM_EINVAL. */
int loom_sync_parse(const char *name, loom_sync *out);
const char *loom_sync_name(loom_sync s);

typedef struct loom_reducer loom_reducer;

/* NOTIFY-ACK's window: the default of the apps' --window, and the largest accepted. */
#define LOOM_REDUCE_WINDOW_DEFAULT 2
#define LOOM_REDUCE_WINDOW_MAX     64

/* Start stochastic reduce on worker node n over graph g (which must have as many nodes as
 * the job has workers, and outlive the reducer) for a model of dim floats. `window` (1 to
 * LOOM_REDUCE_WINDOW_MAX) is NOTIFY-ACK's rounds in flight per edge; BSP and ASYNC ignore it.
 * Every worker opens one, with the same graph, mode, window and dim (a model that disagrees
 * ends its receiver's reduce with LOOM_EPROTO): it is a barrier of all workers (so that
 * every worker knows every other before the first model travels). LOOM_EINVAL on a bad
 * argument, LOOM_EROLE on a non-worker, LOOM_ELIMIT if a model does not fit in one message
 * frame (loom_config.max_frame_mib). */
int loom_reducer_open(loom_node *n, const loom_graph *g, loom_sync sync, int window, size_t dim,
                      loom_reducer **out);
/* One round: send model to the out-neighbours, then overwrite it with the average (above).
 * 0, or LOOM_EPEERFAIL / LOOM_ETRANSPORT / LOOM_EPROTO (a peer's model of another size or
 * window). */
int loom_reduce(loom_reducer *r, float *model);
/* Wait until every out-neighbour acknowledged the last model sent (NOTIFY-ACK; other
 * modes return at once), then free the reducer. Call before loom_finalize(). */
int loom_reducer_close(loom_reducer *r);

/* What one edge saw (recorded by both of its ends). */
typedef struct loom_edge_stats {
    int peer;             /* the other end's worker rank */
    uint64_t models;      /* models sent (out-edge) or received (in-edge) */
    uint64_t used;        /* in-edge: models used in a reduce */
    uint64_t overwrites;  /* in-edge: models that landed on an unread one in their receive
                             slot (never under BSP and NOTIFY-ACK) */
    uint64_t max_unread;  /* in-edge: the most of its models held unread at once (<= the
                             window under NOTIFY-ACK, <= 2 under BSP) */
    uint64_t max_unacked; /* out-edge: the most models in flight unacknowledged at once
                             (<= the window under NOTIFY-ACK) */
} loom_edge_stats;

typedef struct loom_reducer_stats {
    uint64_t rounds;
    uint64_t bytes_sent;  /* model bytes sent to out-neighbours (payload only) */
    uint64_t inputs_used; /* in-neighbours' models averaged in, over all rounds */
    int in_degree, out_degree;
    loom_edge_stats in[64], out[64]; /* the first 64 edges each way */
} loom_reducer_stats;

void loom_reducer_stats_get(loom_reducer *r, loom_reducer_stats *out);

#ifdef __cplusplus
}
#endif
#endif
