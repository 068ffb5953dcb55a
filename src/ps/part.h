/* part: what a server's parts offer the fault-tolerance layer (src/ft).
 *
 * A server holds its tables' ranges as parts (server_impl.h); src/ft keeps
 * them replicated and moves them between servers when one dies or comes back
 * (src/ft/replica.c, failover.c, rejoin.c). ps never calls ft by name: ft
 * registers hooks here (ps_server_set_repl, as ps_server_set_ckpt for
 * checkpoints) and calls down through the functions below, which name a part
 * by its table id and its index among the parts this server holds. All of
 * it runs on the server's I/O thread. */
#ifndef LOOM_PS_PART_H
#define LOOM_PS_PART_H

#include <stddef.h>
#include <stdint.h>

#include "core/msg.h"
#include "core/node_impl.h"

/* ---- hooks: what ps tells ft (with replicas) ----
 *
 * pushed: a push put rows into part `part` of table `table`; `bytes` is what
 * forwarding it would cost per replica (keys and rows). hold_ack: keep the
 * acknowledgement of push `req` of node `to` until the replicas hold it (then
 * ps_part_ack); 0 when it cannot be held (no memory). next_round: the
 * number the next replication round will have. cut: cut a round now if rows
 * changed since the last one, or always when `force` (its completion may
 * call ps_part_rounds_done before cut returns). */
typedef struct ps_repl_hooks {
    void *ctx;
    void (*pushed)(void *ctx, uint32_t table, size_t part, uint64_t bytes);
    int (*hold_ack)(void *ctx, uint32_t to, uint32_t table, uint64_t req, uint64_t applied,
                    int status);
    uint64_t (*next_round)(void *ctx);
    void (*cut)(void *ctx, int force);
} ps_repl_hooks;
void ps_server_set_repl(loom_node *n, const ps_repl_hooks *hooks);

/* ---- the parts ---- */

/* Copies of each range on other servers (LOOM_REPLICAS). */
int ps_part_replicas(loom_node *n);
/* One past the largest table id; the parts of table `table` (0: no such
 * table); the ring range of a part, and holder i (0: the range's first
 * server, then its replicas) of that range; whether this server is the
 * part's master now (ring.h). */
uint32_t ps_part_tables(loom_node *n);
size_t ps_part_count(loom_node *n, uint32_t table);
size_t ps_part_range(loom_node *n, uint32_t table, size_t part);
int ps_part_holder(loom_node *n, uint32_t table, size_t part, int i);
int ps_part_is_master(loom_node *n, uint32_t table, size_t part);
/* Per worker rank: the last push sequence applied to a part, and to its
 * table (num_workers values each). */
const uint64_t *ps_part_applied(loom_node *n, uint32_t table, size_t part);
const uint64_t *ps_table_applied(loom_node *n, uint32_t table);
/* Append a part's rows (all, or those changed since the last call, whose
 * change marks it clears) to w as [u64 key][values][updater state]; sets
 * *rows to how many. 0 or LOOM_ENOMEM. */
int ps_part_rows(loom_node *n, uint32_t table, size_t part, int changed, blob_writer *w,
                 uint64_t *rows);
/* A master's replication of ring range `range` of `table`, from server
 * rank `from`: per worker its last applied push sequence (`applied`, alen
 * bytes), then `nrows` rows as ps_part_rows writes them (`len` bytes). The
 * rows overwrite this server's copy (with new row versions); nothing of them
 * is left to replicate on. 0, LOOM_EPROTO with why (dropped), or
 * LOOM_ENOMEM (logged). */
int ps_part_replicated(loom_node *n, uint32_t table, uint64_t range, int from,
                       const uint8_t *applied, size_t alen, const uint8_t *rows, size_t len,
                       uint64_t nrows, const char **why);
/* The replicas hold every push of table `table` up to applied[w] per worker
 * (`durable`, which acknowledgements report). */
void ps_table_durable(loom_node *n, uint32_t table, const uint64_t *applied);
/* Send a push acknowledgement held by the hold_ack hook. */
void ps_part_ack(loom_node *n, uint32_t to, uint32_t table, uint64_t req, int status,
                 uint64_t applied);

/* ---- servers: their states (ring.h: PS_UP, PS_DOWN, PS_JOINING, PS_BACK) ---- */

/* Whether routing id `id` is a server's; sets *rank. */
int ps_server_rank_of(loom_node *n, uint64_t id, int *rank);
int ps_server_state(loom_node *n, int rank);
/* Set server rank's state; `returned`: the order it came back in, when BACK
 * (else unused). */
void ps_server_set_state(loom_node *n, int rank, int state, uint32_t returned);
/* Whether the job goes on without node `id` (ps_survives; marks it DOWN). */
int ps_part_survives(loom_node *n, uint32_t id);

/* ---- failover and handback ---- */

/* A death: counted for checkpoints (ps_ckpt_hooks' deaths), and with
 * took_over, this server is master of ranges of a dead server. */
void ps_part_death(loom_node *n, int took_over);
/* A replacement learns the job's counts of deaths and handbacks. */
void ps_part_set_counts(loom_node *n, uint32_t deaths, uint32_t handbacks);
/* The masters changed after a death: a fence in progress is off, and ranges
 * whose master this server is again reopen (server_handback.c). */
void ps_part_reopen(loom_node *n);
/* Every replication round up to `done` is acknowledged (a fence's last
 * round among them: the handback goes on). */
void ps_part_rounds_done(loom_node *n, uint64_t done);

#endif
