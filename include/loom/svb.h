/* Sufficient-vector broadcasting (Orpheus, xie-orpheus.txt): data-parallel
 * training of a matrix-parameterised model without parameter servers.
 *
 * Every worker holds a whole replica of a rows x width matrix W (row-major:
 * row j is `width` doubles). When one example's update is an outer product,
 * W += u v^T with u dense (width floats) and v sparse (row ids and values),
 * workers exchange (u, v), the sufficient vectors (SVs), instead of the
 * update: width + 2 nnz numbers rather than a rows x width matrix. For
 * softmax regression u = -(lr / n)(p - t) and v = x (apps/mlr).
 *
 *     loom_svb_opts o = LOOM_SVB_OPTS_DEFAULT;
 *     o.width = K; o.rows = D + 1;
 *     loom_svb *s;  loom_svb_open(node, &o, &s);
 *     double *W = loom_svb_replica(s);
 *     each clock:   compute SVs against W; loom_svb_add(s, u, idx, val, nnz) for each;
 *                   loom_svb_clock(s);       // send, wait, apply every SV of the clock
 *
 * loom_svb_clock() sends the clock's SVs to `peers` randomly drawn workers
 * (random multicast; 0: to all of them, broadcast) and to every other worker
 * a clock mark, so each worker knows every peer's clock; then it waits as
 * the consistency model says: BSP until every peer's clock-c message is in,
 * SSP(s) until no peer is more than s clocks behind. It applies the SVs in a
 * fixed order: its own, then each peer's by rank, clock by clock. Every
 * `average_every` clocks all replicas are replaced by their exact average;
 * every `rotate_every` clocks each replica moves to the next worker of a
 * ring (rank r's to r + 1) while the data stays. With a log file, every SV
 * applied and every replica installed whole is appended to it, so the
 * replica of any earlier clock can be restored exactly (loom_svb_restore).
 *
 * Workers talk to each other directly; a job may have no servers. Every
 * worker of the job must open an SVB with the same options. One SVB per node. */
#ifndef LOOM_SVB_H
#define LOOM_SVB_H

#include <stddef.h>
#include <stdint.h>

#include "node.h"
#include "table.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_svb loom_svb;

typedef struct loom_svb_opts {
    uint32_t width;               /* length of u: the replica's row width (>= 1) */
    uint64_t rows;                /* the replica's rows: ids in v are below it (>= 1, < 2^32) */
    loom_consistency consistency; /* LOOM_BSP or LOOM_SSP (ASP is SSP with a huge bound) */
    int staleness;                /* SSP: how many clocks a peer may be behind */
    uint32_t peers;               /* random multicast to this many peers a clock; 0: all */
    uint32_t average_every;       /* exact averaging every R clocks; 0: never */
    uint32_t rotate_every;        /* replica rotation every S clocks; 0: never */
    const char *log_path;         /* incremental SV checkpoint (NULL: none); truncated at open */
    uint64_t seed;                /* the multicast draws */
    double adagrad;               /* > 0: apply SVs by AdaGrad with this learning rate
                                     (below); 0: W += u v^T */
} loom_svb_opts;

#define LOOM_SVB_OPTS_DEFAULT                                                                      \
    {                                                                                              \
        1, 1, LOOM_BSP, 0, 0, 0, 0, NULL, 1, 0.0                                                   \
    }

/* Open this worker's SVB (every worker of the job, same options): the
 * replica starts at zero. Every worker must have opened before any calls
 * loom_svb_clock (a message for a worker without an SVB is dropped): open,
 * then loom_barrier(). LOOM_EINVAL for bad options, LOOM_ESTATE if one is
 * open already. */
int loom_svb_open(loom_node *node, const loom_svb_opts *opts, loom_svb **out);
/* The replica: rows x width doubles, the caller's to read (and to change
 * between clocks only through the SVB: restore, apply). */
double *loom_svb_replica(loom_svb *s);
/* Add one SV of this clock: u (width floats), v = nnz (idx, val) pairs with
 * idx < rows. Copied. LOOM_EINVAL for a bad id or a non-finite value. */
int loom_svb_add(loom_svb *s, const float *u, const uint64_t *idx, const float *val, uint32_t nnz);
/* End this clock: send, wait (see above), apply, log, average, rotate. */
int loom_svb_clock(loom_svb *s);
/* Wait until every peer's messages of every clock so far are in and apply
 * them (under SSP some may still be out after loom_svb_clock): before the
 * replica is evaluated or saved. */
int loom_svb_sync(loom_svb *s);
/* Clocks completed. */
int64_t loom_svb_clocks(const loom_svb *s);
/* Replace the replica by the one this worker had after `clock` clocks (0: the
 * start), rebuilt from the log. Needs a log; LOOM_EINVAL for a clock not in
 * it. Later clocks stay in the log, so a restore can go forward again; after
 * a restore the SVB only restores or closes (loom_svb_clock: LOOM_ESTATE):
 * a recovered job starts again from the restored replica. */
int loom_svb_restore(loom_svb *s, int64_t clock);

/* The replica a log (log_path of an SVB) describes after `clock` clocks (-1:
 * all of it), rebuilt from zero into w (rows x width, the SVB's options);
 * *svs (if not NULL) gets the number of SVs applied. 0, LOOM_ENOTFOUND (no
 * file), LOOM_EINVAL (the log ends before that clock), LOOM_EPROTO (not such
 * a log). What loom_svb_restore does; tests check replicas with it. */
int loom_svb_replay(const char *log_path, uint32_t width, uint64_t rows, int64_t clock, double *w,
                    uint64_t *svs);

typedef struct loom_svb_stats {
    uint64_t svs_sent;           /* SVs sent (one count per destination) */
    uint64_t svs_received;       /* SVs received from peers */
    uint64_t svs_applied;        /* SVs applied to the replica (own and received) */
    uint64_t sv_bytes_sent;      /* bytes of SV messages sent (headers included) */
    uint64_t replica_bytes_sent; /* bytes of whole replicas sent (averaging, rotation) */
    uint64_t dropped;            /* malformed SVB messages dropped */
} loom_svb_stats;

void loom_svb_get_stats(const loom_svb *s, loom_svb_stats *out);
/* Close (after the last clock; other workers may still wait for nothing). */
void loom_svb_close(loom_svb *s);

/* W += u v^T on a replica of `width`-wide rows: for each (idx, val) in
 * order, row idx += (double)u[k] * (double)val. The arithmetic every
 * replica applies SVs with; a sequential reference calls it too. */
void loom_svb_apply(double *w, uint32_t width, const float *u, const uint64_t *idx,
                    const float *val, uint32_t nnz);

/* With opts.adagrad = lr > 0 each SV is a gradient u v^T: every replica
 * sums those it applies in a clock (its own and its peers'; under BSP every
 * worker's of that clock) and takes one AdaGrad step with the sum, as a
 * parameter server under BSP applies a clock's pushes: per weight the sum G
 * touches, n += g^2, w -= lr g / (sqrt(n) + 1e-8), n (rows x width, zero at
 * the start) the accumulators of the worker the replica is on. A rate that
 * follows each weight's own gradients needs no tuning to the data's scale,
 * which plain SGD does. Accumulators stay with their worker when replicas are
 * averaged or rotated (every replica sees the same gradients under
 * broadcast); a log replays them too.
 *
 * loom_svb_adagrad_step is that step: G summed into g (rows x width, by
 * loom_svb_apply on zeros), the `n` rows it touches listed in rows; g is left
 * zero again. A sequential reference calls it too. */
void loom_svb_adagrad_step(double *w, double *acc, double *g, uint32_t width, const uint64_t *rows,
                           size_t n, double lr);
/* SV selection: choose c of the n SVs (u_i = u + i width, v_i = idx/val
 * [off[i], off[i + 1])) that best represent them all, by joint column subset
 * selection (Orpheus Algorithm 2): c times, draw one with probability
 * proportional to |u_i'|^2 |v_i'|^2, u', v' the parts of u, v outside the
 * spans of the chosen ones (Gram-Schmidt), then project. Deterministic for a
 * seed. Writes the chosen indices, ascending, to chosen; returns how many
 * (c, fewer only if the rest have no norm left), or -1 out of memory. */
int loom_svb_select(const double *u, uint32_t width, const uint64_t *idx, const float *val,
                    const size_t *off, size_t n, size_t c, uint64_t seed, size_t *chosen);

#ifdef __cplusplus
}
#endif

#endif
