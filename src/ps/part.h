/* part: what ps offers the fault-tolerance layer (src/ft).
 *
 * A server holds its tables' ranges as parts (server_impl.h); src/ft keeps
 * them replicated and moves them between servers when one dies or comes back
 * (src/ft/replica.c, failover.c, rejoin.c, handback.c). ps never calls ft by
 * name: ft registers hooks here (ps_server_set_repl, as ps_server_set_ckpt
 * for checkpoints; ps_registry_set_hooks on the scheduler) and calls down
 * through the functions below, which name a part by its table id and its
 * index among the parts this server holds. All of it runs on the node's I/O
 * thread. */
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
 * ps_part_ack); 0 when it cannot be held (no memory). cut: cut a round now
 * if rows changed since the last one. */
typedef struct ps_repl_hooks {
    void *ctx;
    void (*pushed)(void *ctx, uint32_t table, size_t part, uint64_t bytes);
    int (*hold_ack)(void *ctx, uint32_t to, uint32_t table, uint64_t req, uint64_t applied,
                    int status);
    void (*cut)(void *ctx);
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
/* ps_table_applied is taken for replication round `round` (rounds are cut
 * and complete in order): the round carries every push applied so far. */
const uint64_t *ps_table_applied(loom_node *n, uint32_t table, uint64_t round);
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
 * (`durable`, which acknowledgements report), and every push applied before
 * round `round` was cut. */
void ps_table_durable(loom_node *n, uint32_t table, const uint64_t *applied, uint64_t round);
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

/* ---- failover ---- */

/* A death: counted for checkpoints (ps_ckpt_hooks' deaths), and with
 * took_over, this server is master of ranges of a dead server. */
void ps_part_death(loom_node *n, int took_over);
/* A replacement learns the job's counts of deaths and handbacks. */
void ps_part_set_counts(loom_node *n, uint32_t deaths, uint32_t handbacks);

/* ---- handback: what the push and pull path does while ranges move
 * (src/ft/handback.c drives it; server_park.c) ----
 *
 * A part is open; fenced (being handed back by this server, or handed back:
 * its pushes are parked, its pulls held, or refused once another server is
 * its master); incoming (to be taken back by this server: pushes parked,
 * pulls held); or gated (pushes applied, pulls held until no running worker
 * owes an acknowledgement). A parked push is neither applied nor
 * acknowledged: its worker keeps it (PARKED) until told to send it again. */
enum { PS_PART_OPEN, PS_PART_FENCED, PS_PART_INCOMING, PS_PART_GATED };
int ps_part_state(loom_node *n, uint32_t table, size_t part);
void ps_part_set_state(loom_node *n, uint32_t table, size_t part, int state);
/* The rank of a part's master, or of the one it would have if server `up`
 * were UP (up < 0: as the servers are); of the one it would have if server
 * `down` were DOWN (-1: none). */
int ps_part_master(loom_node *n, uint32_t table, size_t part, int up);
int ps_part_master_without(loom_node *n, uint32_t table, size_t part, int down);
/* Handback `gen` fenced or marked parts incoming (ps_part_set_state): the
 * pushes staged or held for fenced parts are parked (PARKED to their
 * workers), the pulls waiting for parts not open are held, and PARKED req 0
 * carry gen from now on. froze: this server fenced parts it is master of,
 * so it cuts no checkpoint until ps_part_unpark. */
void ps_part_fenced(loom_node *n, uint64_t gen, int froze);
/* The masters changed (a handback committed or aborted, a failover): the
 * fence is off, and every worker whose pushes were parked or pulls refused
 * here is told to send them again (PARKED req 0), which it then owes an
 * acknowledgement of. */
void ps_part_unpark(loom_node *n);
/* Open the gated parts if no running worker owes an acknowledgement, and go
 * through the held pulls: answered or deferred if their part is open,
 * refused (LOOM_ESTATE) if another server is its master now, else kept. */
void ps_part_release(loom_node *n);
/* Handback `gen` committed, the job's `handbacks`-th (checkpoints count
 * them: ps_ckpt_hooks). took_back: this server took ranges back, so its
 * checkpoint cuts wait for the workers' CLOCKs after it, and its gated
 * parts' pulls for every worker's acknowledgement of gen. */
void ps_part_committed(loom_node *n, uint64_t gen, uint32_t handbacks, int took_back);
/* This server took over ranges of a server that left after handing them
 * over (drain `gen`): their pulls wait for every running worker's
 * acknowledgement of gen, sent once it sent the new masters the pushes it
 * held for them. */
void ps_part_owe(loom_node *n, uint64_t gen);
/* HANDBACK_ACK from node `from`: the worker sent again what it held for
 * this server's ranges, up to handback `gen` and PARKED req 0 number
 * `unparked`. 0, or LOOM_EPROTO if `from` is no running worker. */
int ps_part_acked(loom_node *n, uint32_t from, uint64_t gen, uint64_t unparked);

/* ---- the registry (the scheduler): what a replacement's copies and the
 * handbacks need of it (src/ft/rejoin_coord.c, handback_coord.c) ----
 *
 * A replacement registered for server rank `rank`: joining, before the
 * registry sends it anything (or marks it JOINING); joined, once it was
 * sent every table (TABLE_CREATE); created, once it created them all (at
 * once if there are none): its copies may start. Without hooks (ps alone)
 * nothing is copied to it or handed back. */
typedef struct ps_registry_hooks {
    void *ctx;
    void (*joining)(void *ctx, int rank);
    void (*joined)(void *ctx, int rank);
    void (*created)(void *ctx, int rank);
} ps_registry_hooks;
void ps_registry_set_hooks(loom_node *n, const ps_registry_hooks *hooks);
/* Server rank's state as the registry keeps it (ring.h), and for a BACK
 * one the order it came back in (*returned). */
int ps_registry_state(loom_node *n, int rank, uint32_t *returned);
/* Set server rank's state; `returned`: the order it came back in, when
 * BACK (else unused). */
void ps_registry_set_state(loom_node *n, int rank, int state, uint32_t returned);
/* Whether the job would go on without server rank `rank` (ps_survives,
 * nothing marked): its ranges keep a live holder. */
int ps_registry_may_leave(loom_node *n, int rank);
/* Whether worker rank finished; whether every worker did (the job ends). */
int ps_registry_worker_done(loom_node *n, int rank);
int ps_registry_ending(loom_node *n);

#endif
