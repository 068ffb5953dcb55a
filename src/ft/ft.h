/* ft: the fault-tolerance layer's internal interface (checkpoints; docs/FAULTS.md).
 *
 * A checkpoint directory DIR holds one directory per checkpoint,
 * ckpt-<clock, 12 digits>/, with the parts written at that clock
 * (server-R.part, worker-R.part) and, once every part is on disk, the
 * MANIFEST the scheduler writes. A checkpoint is its MANIFEST: it names, in
 * the order to apply them, the parts that make up the state at its clock (a
 * server's last full part and the incremental ones after it, which may live
 * in older checkpoints' directories), each with its size and CRC-32C.
 *
 * A part file is a 40-byte header (below) and a body: for a server, one
 * section per table ([u16 name length][name][u64 length][section], the
 * section as src/ps encodes it); for a worker, the application's bytes.
 *
 * The MANIFEST is text, one record a line, ending with its own checksum:
 *     loom-checkpoint 1
 *     clock 120
 *     model lr
 *     servers 2
 *     workers 1
 *     part server 0 full ckpt-000000000100/server-0.part 81234 9a3c01f2
 *     part server 0 incr ckpt-000000000110/server-0.part 1234 77aa0b13
 *     part worker 0 full ckpt-000000000120/worker-0.part 88 0c0ffee1
 *     end 5e1d2c3b
 * ("end" carries the CRC-32C of every byte before that line). With replicas,
 * a server that died before the cut has no chain but a line "moved R": its
 * ranges are in the parts of the servers that took them over. A server's
 * part holds the ranges it was master of at the cut, so a resuming server
 * reads every server part and keeps the rows of the ranges it holds. */
#ifndef LOOM_FT_FT_H
#define LOOM_FT_FT_H

#include <stddef.h>
#include <stdint.h>

#include "loom/node.h"

#define FT_MAGIC       "LOOMCKPT"
#define FT_VERSION     1
#define FT_HEADER_SIZE 40
#define FT_PATH_MAX    64 /* "ckpt-<12 digits>/server-<rank>.part" and then some */
#define FT_MODEL_MAX   32

enum { FT_SERVER = 1, FT_WORKER = 2 };

/* CRC-32C (Castagnoli) of data, continuing from crc (0 to start). */
uint32_t ft_crc32c(uint32_t crc, const void *data, size_t len);

/* ---- part files ---- */

typedef struct ft_header {
    uint32_t kind; /* FT_SERVER or FT_WORKER */
    int64_t clock;
    uint32_t rank, servers, workers;
    uint32_t full; /* server: every row (else the rows changed since its previous part) */
} ft_header;

void ft_header_encode(const ft_header *h, uint8_t out[FT_HEADER_SIZE]);
/* 0, or -1 with why (bad magic, version). */
int ft_header_decode(const uint8_t *in, size_t len, ft_header *h, char *why, size_t whylen);

/* A file written atomically in a ckpt-<clock> directory (dirfd, the
 * caller's, open until the commit): to NAME.tmp (created O_EXCL|O_NOFOLLOW),
 * then (sync) fsync, rename to NAME, (sync) fsync the directory. Size and
 * CRC-32C are counted on the way. Parts are written without sync: the
 * scheduler syncs every file and directory a manifest names before it
 * writes (with sync) the manifest, so that a committed checkpoint is durable
 * while servers and workers never wait for the disk. */
typedef struct ft_file {
    int fd, dirfd;
    char name[FT_PATH_MAX], tmp[FT_PATH_MAX + 4];
    char shown[4200]; /* DIR/ckpt-<clock>/NAME, for messages */
    int gone;         /* it failed because its directory was removed (given up) */
    uint64_t size;
    uint32_t crc;
} ft_file;
/* 0 or LOOM_EIO, with the reason logged. */
int ft_file_open(ft_file *f, int dirfd, const char *shown_dir, const char *name);
int ft_file_write(ft_file *f, const void *data, size_t len);
int ft_file_commit(ft_file *f, int sync);
void ft_file_abort(ft_file *f);

/* ---- the directory (dir.c) ---- */

/* Open DIR (create: make it, and its missing parents, first) as a
 * directory this job may trust: not a link, this user's, not writable by
 * every user. 0 or LOOM_ECONFIG, with the reason logged. */
int ft_dir_open(const char *path, int create, int *out);
/* Lock DIR for this job (flock on DIR/LOCK, which names the holder); the
 * lock lasts while *out is open. 0; LOOM_ECONFIG, the reason (another job
 * holds it: its pid and host) logged. */
int ft_dir_lock(int dirfd, const char *path, int *out);
/* Open (create: make first) DIR/ckpt-<clock>, checked as ft_dir_open does. */
int ft_dir_ckpt(int dirfd, const char *path, int64_t clock, int create, int *out);
/* Remove DIR/ckpt-<clock>: renamed out of sight, the regular files of the
 * names Loom writes there, then the directory if that emptied it. 0
 * (removed or absent), -1 (left, with a warning: a link, another user's, or
 * holding other files). */
int ft_dir_remove_ckpt(int dirfd, const char *path, int64_t clock);
/* Finish the removals a killed run left (directories renamed out of sight). */
void ft_dir_remove_gone(int dirfd, const char *path);
/* 1 and *clock if name is "ckpt-<12 digits>", else 0. */
int ft_ckpt_name(const char *name, int64_t *clock);

/* ---- the manifest ---- */

typedef struct ft_part {
    uint32_t kind, rank, full;
    char path[FT_PATH_MAX]; /* relative to DIR */
    uint64_t size;
    uint32_t crc;
} ft_part;

/* The clock of the checkpoint directory a part lives in (its path's). */
int64_t ft_part_clock(const ft_part *p);

typedef struct ft_manifest {
    int64_t clock;
    char model[FT_MODEL_MAX];
    uint32_t servers, workers;
    size_t nparts;
    ft_part *parts; /* servers' chains (per rank, in order), then one per worker */
    uint8_t *moved; /* per server rank: died, ranges in others' parts (NULL: none did) */
} ft_manifest;

/* Parse a manifest's text (untrusted: every field checked, paths only of the
 * form ckpt-<digits>/(server|worker)-<rank>.part). 0, or -1 with the line and
 * the problem in why. */
int ft_manifest_parse(const char *text, size_t len, ft_manifest *m, char *why, size_t whylen);
/* The manifest's text (malloc'd), with its checksum line. NULL on ENOMEM. */
char *ft_manifest_format(const ft_manifest *m, size_t *len);
void ft_manifest_free(ft_manifest *m);

/* Read DIR/ckpt-<clock>/MANIFEST (clock -1: the newest one that has a
 * MANIFEST) and parse it. 0; LOOM_ENOTFOUND; LOOM_EPROTO with why naming
 * the file. */
int ft_manifest_load(const char *dir, int64_t clock, ft_manifest *m, char *why, size_t whylen);
/* Read part p of DIR whole (malloc'd) and check it against the manifest: size,
 * CRC-32C, header (kind, rank, job shape). 0, or LOOM_EPROTO with why naming
 * the file. */
int ft_part_load(const char *dir, const ft_manifest *m, const ft_part *p, uint8_t **data, char *why,
                 size_t whylen);
/* Walk a server part's sections: fn(ctx, name, section, length) for each;
 * stops at fn's first non-zero result. LOOM_EPROTO if the body is malformed. */
int ft_sections(const uint8_t *body, size_t len,
                int (*fn)(void *ctx, const char *name, const uint8_t *data, size_t len), void *ctx);

/* The layer's entry point: called for every node after ps has attached. */
int ft_attach(loom_node *n);
/* A worker completed a clock (loom_clock) or finished (loom_finalize): a
 * planned checkpoint it went past without saving is reported skipped. */
void ft_worker_clocked(loom_node *n);
void ft_worker_finished(loom_node *n);

#endif
