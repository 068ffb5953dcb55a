/* ps: the parameter-server layer's internal interface.
 *
 * Three roles: the workers' side is client.c and the client_*.c beside it
 * (tables, cache, update buffer, pull/push/clock; client_impl.h), the
 * servers' side server.c and the server_*.c beside it (partitions, updaters,
 * clock-gated pulls; server_impl.h), the scheduler's side registry.c (table
 * names to ids, worker clocks). This header holds what they share and what
 * the layers above call: the table-options codec, the even split of a key
 * range over servers, the roles' entry points, the checkpoint hooks of
 * src/ft, and the workers' flush, clock and barrier. */
#ifndef LOOM_PS_PS_H
#define LOOM_PS_PS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/msg.h"
#include "core/node_impl.h"
#include "loom/table.h"

/* Worker clock that means "this worker has finished": never the slowest. */
#define PS_CLOCK_DONE INT64_MAX
/* Tables a job may open: workers find a table by id in a fixed array, so a
 * message's table id is checked with one comparison; 1024 is far more than any
 * app opens (two or three). */
#define PS_MAX_TABLES 1024
/* A pull or push still unanswered after this long is named in the log, once,
 * with what it waits for, by the server holding it (srv_report_stall) and the
 * worker waiting on it (client_report_stall): a job that stops moving says
 * where. LOOM_STALL_REPORT_MS overrides it (ps_stall_report_ms). */
#define PS_STALL_REPORT_MS 30000
/* Largest row a table may have, in bytes. */
#define PS_MAX_ROW_BYTES ((size_t)1 << 20)

/* Table options as they travel: the fields that define the table (client-only
 * knobs such as `cache` and `flush_rows` are not part of it). The updater name
 * is copied in, so the options do not point to the caller's memory. */
/* Longest filter spec text (filter_spec_parse's limit). */
#define PS_MAX_FILTER_SPEC 255

typedef struct ps_table_def {
    char name[LOOM_MAX_NAME + 1];
    char updater[LOOM_MAX_NAME + 1];
    char filter_push[PS_MAX_FILTER_SPEC + 1], filter_pull[PS_MAX_FILTER_SPEC + 1];
    loom_table_opts opts; /* opts.updater and opts.filter_* point to the arrays above */
} ps_table_def;

/* Fill def from a user's name and options (defaults applied, NULL opts =
 * defaults) and check them. Returns 0, or LOOM_EINVAL with a reason in why. */
int ps_def_from_user(ps_table_def *def, const char *name, const loom_table_opts *opts, char *why,
                     size_t whylen);
/* Encode (canonical: equal definitions give equal bytes) and decode with
 * full validation. encode returns 0 or LOOM_ENOMEM; decode 0 or LOOM_EPROTO. */
int ps_def_encode(const ps_table_def *def, blob_writer *w);
int ps_def_decode(const void *data, size_t len, ps_table_def *def);
/* Point a copied def's opts at its own strings. */
void ps_def_fix_pointers(ps_table_def *def);

/* Key range [begin, end) of a table as 128-bit numbers (end may be 2^64). */
typedef unsigned __int128 ps_u128;
static inline ps_u128 ps_key_end(const loom_table_opts *o)
{
    return o->key_end ? (ps_u128)o->key_end : (ps_u128)1 << 64;
}
static inline int ps_key_in_range(const loom_table_opts *o, uint64_t key)
{
    return key >= o->key_begin && (ps_u128)key < ps_key_end(o);
}
/* First key of server s's slice (s in [0, S]; s = S gives the table's end). */
ps_u128 ps_slice_start(const loom_table_opts *o, int num_servers, int s);
/* The server holding key (key must be in the table's range). */
int ps_server_of(const loom_table_opts *o, int num_servers, uint64_t key);

/* ---- checkpoints: what a server offers src/ft (docs/FAULTS.md) ----
 *
 * With hooks set, a server cuts its partitions at every clock C of the job
 * (the job's clock is base + this run's clock) with C % every == 0: the moment
 * its min clock reaches C, every push of a clock < C has been applied and none
 * of a clock >= C (BSP tables stage those anyway; pushes of other tables that
 * run ahead are held, and acknowledged, only after the cut), and cut() runs.
 * cut() reads the partitions with ps_server_encode. When a table is created,
 * restore() may fill it from a checkpoint through ps_snapshot_apply.
 *
 * With replicas, cut() gets must_full (replication rounds consume the rows'
 * change marks, so a part cannot be incremental) and `deaths`, the number of
 * server deaths of the job this server knew of at the cut, replaced servers'
 * included (a replacement knows the count once it is back, REJOIN_READY's
 * h.b; before, it is master of nothing and reports fewer): it wrote the
 * ranges it is master of after those deaths. A server that took ranges over from a dead one skips
 * the cut (no cut() call) unless every worker had sent again what the dead
 * server lacked before ending clock C-1 (its CLOCK says how many deaths it had
 * handled), so a part it writes holds exactly the clocks < C of every range.
 * `handbacks` is the number of handbacks (ranges a replacement took back)
 * this server knew of at the cut; a server whose ranges are fenced for a
 * handback skips the cut, and one that took ranges back counts the handback
 * as a death above. */
typedef struct ps_ckpt_hooks {
    int64_t base; /* the job's clock at this run's clock 0 */
    void *ctx;
    void (*cut)(void *ctx, int64_t clock, int must_full, uint32_t deaths, uint32_t handbacks);
    /* The planned cut at `clock` was not made: why, and the job clock the
     * server is at now (-1: every worker finished). */
    void (*skip)(void *ctx, int64_t clock, int64_t now, const char *why);
    /* 0, or a loom error (the table is then refused; restore() says why). */
    int (*restore)(void *ctx, const ps_table_def *def, void *table);
} ps_ckpt_hooks;
void ps_server_set_ckpt(loom_node *n, const ps_ckpt_hooks *hooks);
/* Cut when the min clock reaches job clock `clock` (the scheduler's plan,
 * I/O thread; full: every row), or now if it is there and no push of that
 * clock or a later one was applied (so also after every worker finished at
 * that clock: the final checkpoint). -1 if planned (or cut); else the job
 * clock this server is already past it at (INT64_MAX: every worker
 * finished), and nothing is planned. */
int64_t ps_server_plan_cut(loom_node *n, int64_t clock, int full);
/* Every table's rows (full), or those changed since the last cut, of the
 * ranges this server is master of, one section per table: emit(ctx, table
 * name, section bytes, length). */
typedef int (*ps_section_fn)(void *ctx, const char *table, const void *data, size_t len);
int ps_server_encode(loom_node *n, int full, ps_section_fn emit, void *ctx);
/* Apply one section (as ps_server_encode made it, by any server) to `table`
 * (restore()'s argument): its definition must equal the table's and every
 * key must lie in its key range; rows of ranges this server does not hold
 * are skipped, so that every server can read every part (the ranges a part
 * holds depend on the deaths at its cut and on the ring of the job that
 * wrote it). 0, or LOOM_EMISMATCH / LOOM_EPROTO with why. */
int ps_snapshot_apply(void *table, const void *data, size_t len, char *why, size_t whylen);
/* Read a section without a server: its definition, then fn(ctx, key, row) for
 * each row, every key checked against the definition's key range before fn
 * sees it. 0, fn's first non-zero result, or LOOM_EPROTO if malformed (why
 * says how: a key outside the range, sizes that do not fit). */
int ps_snapshot_read(const void *data, size_t len, ps_table_def *def,
                     int (*fn)(void *ctx, uint64_t key, const void *row), void *ctx, char *why,
                     size_t whylen);

/* Role entry points, called by the API glue (src/loom.c). ps_attach picks
 * the role's part (ps_registry_attach in registry.c, ps_server_attach in
 * server.c or ps_client_attach in client.c) and registers its
 * message handlers; it runs before the node's I/O thread starts. */
int ps_attach(loom_node *n);
/* The layer (attach.c): its message types, its slot on a node. */
extern node_layer_def ps_layer_def;
/* The counters of loom_stats that the ps layer counts (loom_stats says what
 * each is), one set per node: its client's or its server's. */
typedef struct ps_counters {
    _Atomic uint64_t pulls_from_cache, pulls_from_server;
    _Atomic uint64_t table_messages, table_bytes_raw, table_bytes_wire;
    _Atomic uint64_t managed_rows_sent, pushed_rows_received;
    _Atomic uint64_t pushes_resent, pushes_redirected;
} ps_counters;
/* node_set_stats's function of the ps layer; ctx is the node's ps_counters. */
void ps_counters_stats(void *ctx, loom_stats *out);
/* The job's replicas per key range from LOOM_REPLICAS (unset: 0): 0, or
 * LOOM_ECONFIG (logged) when it is not a number below num_servers. */
int ps_replicas_from_env(int num_servers, int *replicas);
/* LOOM_STALL_REPORT_MS, else PS_STALL_REPORT_MS (a bad value is named and
 * the default used). */
uint64_t ps_stall_report_ms(void);
/* Whether the job goes on without node `id`: a server, while no more than
 * `replicas` servers have died (dead[rank] per server, set here when so).
 * Every role decides the same way, so all agree on which ranges moved. */
int ps_survives(loom_node *n, int replicas, uint8_t *dead, uint32_t id);
int ps_registry_attach(loom_node *n);
int ps_server_attach(loom_node *n);
int ps_client_attach(loom_node *n);
int ps_clock(loom_node *n);
int64_t ps_current_clock(loom_node *n);
/* Workers: 1 if this worker's loom_clock() waits for the slowest worker (it
 * has opened an SSP or BSP table), else 0 (src/sched/parts.c: whether an
 * idle worker must do empty clocks). */
int ps_clock_gated(loom_node *n);
/* Workers: send every table's buffered updates and wait until servers applied them. */
int ps_flush_all(loom_node *n);
/* Workers: drop every cached row (after a barrier). */
void ps_invalidate_caches(loom_node *n);
/* Workers: flush, wait, and tell servers and scheduler that this worker finished. */
int ps_worker_finish(loom_node *n);
/* Workers: the barrier of loom_barrier(): flush and wait (ps_flush_all), meet
 * the other workers (node_barrier), then drop every cached row. */
static inline int ps_barrier(loom_node *n)
{
    int rc = ps_flush_all(n);
    if (!rc) rc = node_barrier(n);
    if (!rc) ps_invalidate_caches(n);
    return rc;
}

#endif
