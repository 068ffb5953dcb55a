/* Checkpoints of a job, and resuming from one (docs/FAULTS.md).
 *
 * A job started with LOOM_CHECKPOINT_DIR and LOOM_CHECKPOINT_EVERY (what
 * `loom train --checkpoint-dir DIR --checkpoint-every N|Ns|Ne` sets: every N
 * clocks, N seconds or N epochs) checkpoints at clocks C the scheduler plans,
 * one checkpoint at a time (one falling due while the previous is still
 * being written is skipped): each server writes the rows of its
 * partitions as they are with every update of the clocks before C applied and
 * none of a later clock (all rows, or only those changed since its previous
 * cut; every LOOM_CHECKPOINT_FULL_EVERY-th checkpoint is full), each worker
 * writes the application's state at C (loom_checkpoint_save), and the
 * scheduler, once every part is on disk, commits the checkpoint by writing its
 * MANIFEST (file names, sizes, CRC-32C checksums), after syncing every file
 * it names. Files are written to a temporary name and renamed, so a crash
 * leaves either a whole file or none, and a checkpoint without a MANIFEST is
 * ignored. A worker that does not save when a checkpoint is due, or a disk
 * that is full, makes the scheduler give that checkpoint up (its files are
 * removed) and plan another; the job goes on.
 *
 * A job started with LOOM_RESUME = DIR starts from the newest committed
 * checkpoint in DIR: servers fill each table from it when it is opened (its
 * definition must be the same), and workers read their state back with
 * loom_checkpoint_resumed(). The job's clocks then count on from the
 * checkpoint's clock. A checkpoint that does not verify, or was made by
 * another model or another number of servers or workers, is refused with the
 * file and the reason (loom_last_error(), and on stderr). */
#ifndef LOOM_CHECKPOINT_H
#define LOOM_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "node.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- inside a job (workers) ---- */

/* 1 if the clock this worker just completed is the checkpoint clock the
 * scheduler planned: the application then calls loom_checkpoint_save()
 * before pushing anything of the next clock. 0 otherwise (or without
 * checkpoints). Ask after every clock: a plan the worker goes past without
 * saving is given up, and another planned. */
int loom_checkpoint_due(loom_node *node);
/* The clock this worker just completed ends an epoch of the application
 * (the same clocks on every worker). With LOOM_CHECKPOINT_EVERY = "Ne" the
 * checkpoints fall at the end of every N-th epoch; call it after the clock
 * (and loom_checkpoint_save, if due) and before the next one. 0 or a loom
 * error. */
int loom_checkpoint_epoch_end(loom_node *node);
/* The clock this worker just completed is its last (call it in place of
 * loom_checkpoint_due there): with checkpoints, the scheduler is asked to
 * make that clock the job's final checkpoint, and this waits until it says
 * (a few ms, or up to the heartbeat timeout if it cannot). 1: call
 * loom_checkpoint_save() now, as when due; 0: no checkpoint there (none
 * configured, already saved, or it could not be planned). */
int loom_checkpoint_final(loom_node *node);
/* Write this worker's part of the checkpoint at the current clock: `state`,
 * whatever the application needs to go on from here (data position, random
 * streams, local model parts), as opaque bytes. 0 or a loom error:
 * LOOM_ESTATE if no checkpoint is due at this clock. A checkpoint that
 * loom_checkpoint_due() or loom_checkpoint_final() said was due, and that
 * the scheduler gave up since (another node went past its clock without
 * its part), is not written: 0. */
int loom_checkpoint_save(loom_node *node, const void *state, size_t len);
/* In a resumed job: the state this worker saved in the checkpoint (the memory
 * stays valid until the node ends) and the job's clock it was saved at.
 * LOOM_ENOTFOUND if the job did not resume. */
int loom_checkpoint_resumed(loom_node *node, const void **state, size_t *len, int64_t *clock);

/* ---- reading a checkpoint directory (tools) ---- */

typedef struct loom_checkpoint loom_checkpoint;

/* Open checkpoint `clock` of DIR (-1: the newest one with a MANIFEST) and
 * verify it: the manifest's own checksum, then every file it names (present,
 * its size, its CRC-32C, its header). 0; LOOM_ENOTFOUND if DIR has no
 * committed checkpoint; LOOM_EPROTO (a file missing, truncated, corrupt or
 * unreadable) with loom_last_error() naming the file and the problem. */
int loom_checkpoint_open(const char *dir, int64_t clock, loom_checkpoint **out);
void loom_checkpoint_close(loom_checkpoint *ck);

int64_t loom_checkpoint_clock(const loom_checkpoint *ck);
/* The model that wrote it (LOOM_CHECKPOINT_MODEL of the job: "lr", "mf" ...). */
const char *loom_checkpoint_model(const loom_checkpoint *ck);
int loom_checkpoint_num_servers(const loom_checkpoint *ck);
int loom_checkpoint_num_workers(const loom_checkpoint *ck);
/* Bytes of the files the checkpoint consists of (its chain of parts). */
uint64_t loom_checkpoint_bytes(const loom_checkpoint *ck);

/* Every row of table `name` as of the checkpoint (the servers' parts, the
 * newest value of each key), in no particular order: fn(ctx, key, row, width
 * values of the table's type) for each. Returns fn's first non-zero result, 0,
 * or LOOM_ENOTFOUND if no server holds a table of that name. *width and
 * *value_size (if not NULL) receive the table's row shape. */
typedef int (*loom_checkpoint_row_fn)(void *ctx, uint64_t key, const void *row);
int loom_checkpoint_rows(const loom_checkpoint *ck, const char *name, uint32_t *width,
                         size_t *value_size, loom_checkpoint_row_fn fn, void *ctx);
/* Worker `rank`'s saved state (valid until loom_checkpoint_close). */
int loom_checkpoint_worker_state(const loom_checkpoint *ck, int rank, const void **state,
                                 size_t *len);

/* Every checkpoint directory in DIR, oldest first: fn(ctx, clock, status),
 * status 0 for a committed one that verifies, else the reason it does not
 * (loom_last_error() while fn runs says why). A job may be checkpointing into
 * DIR meanwhile: one it removed before it could be opened is left out, and
 * the newer ones it made are listed. Returns the number listed, or a
 * negative loom error if DIR cannot be read. */
typedef void (*loom_checkpoint_list_fn)(void *ctx, int64_t clock, int status);
int loom_checkpoint_list(const char *dir, loom_checkpoint_list_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif

#endif
