/* ft: checkpoints and resume, as a layer of every node (docs/FAULTS.md).
 *
 * Configured from the environment (what `loom train` sets from its flags):
 * LOOM_CHECKPOINT_DIR, LOOM_CHECKPOINT_EVERY (clocks), LOOM_CHECKPOINT_FULL_EVERY
 * (every K-th checkpoint is full; default 10), LOOM_CHECKPOINT_MODEL (recorded,
 * and compared on resume) and LOOM_RESUME (a checkpoint directory).
 *
 * Each role does its part of a checkpoint at clock C:
 *   - a server, when its min clock reaches C (src/ps calls cut()), writes its
 *     partitions (every row, or those changed since its previous part) to
 *     ckpt-C/server-R.part and tells the scheduler (CKPT_PART);
 *   - a worker, when the application calls loom_checkpoint_save() after its
 *     clock C, writes the application's state to ckpt-C/worker-R.part and
 *     tells the scheduler;
 *   - the scheduler, once it has every part of C, writes ckpt-C/MANIFEST: the
 *     commit. It names each server's chain: its newest full part at or before
 *     C and every part after it up to C (incremental parts are relative to the
 *     server's previous part, committed or not, so the chain lists them all).
 *     Then it removes checkpoint directories that neither this manifest nor
 *     the previous one needs.
 * Everything a server does runs on its I/O thread (the cut happens inside the
 * CLOCK handler that moved its min clock), so the cut sees the partitions
 * exactly at C, and the scheduler's bookkeeping runs on its I/O thread too.
 *
 * On resume every node reads the newest MANIFEST, checks it against the job
 * (model, servers, workers) and reads what it needs: a server its chain (on
 * each table's creation, src/ps calls restore()), a worker its state.
 *
 * A replacement server (docs/FAULTS.md, "A replacement server") is no part of
 * that: it gets its rows from the live servers (REJOIN_COPY), and the clock
 * its parts are named by from the scheduler (CKPT_BASE), never from
 * LOOM_RESUME, whose newest checkpoint may be newer than the job's by then. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/msg.h"
#include "core/node_impl.h"
#include "ft/ft.h"
#include "loom/checkpoint.h"
#include "loom/error.h"
#include "ps/ps.h"

/* A part the scheduler has been told of. */
typedef struct known_part {
    int64_t clock;
    ft_part part;
} known_part;

/* A manifest for the committer thread to write. */
typedef struct commit_job {
    int64_t clock, oldest; /* oldest: the oldest checkpoint directory it needs */
    char *text;
    size_t len;
    ft_manifest m; /* its parts: synced before the manifest is written */
    struct commit_job *next;
} commit_job;

typedef struct pending {
    int64_t clock;
    ft_part *parts;  /* servers, then workers, by rank; kind 0 = not yet */
    uint32_t *known; /* per server: the deaths its part was cut knowing of */
    /* per server: the handbacks its part was cut after (a handback moves
     * ranges between live servers, so parts cut on either side of one may
     * both hold, or both miss, the ranges it moved) */
    uint32_t *handbacks;
    struct pending *next;
} pending;

/* Checkpoints the scheduler keeps parts of while they wait for the rest:
 * more than that (a job that can no longer commit, say after a lost worker,
 * or a sender making clocks up) and the oldest is dropped, counted. */
#define FT_MAX_PENDING 16

typedef struct ft {
    loom_node *node;
    int role, rank;
    uint32_t servers, workers;
    char dir[PATH_MAX]; /* "" = no checkpoints */
    int64_t every, full_every;
    char model[FT_MODEL_MAX];
    char resume[PATH_MAX]; /* "" = a fresh start */
    ft_manifest resumed;   /* when resuming */
    int64_t base;          /* the job's clock at this run's clock 0 */
    /* server */
    int base_heard; /* a replacement: the scheduler told it f->base (CKPT_BASE) */
    /* The next part must be full: a part failed (the next must not depend on
     * it), or this run resumed (its ranges may have been another server's in
     * the resumed checkpoint, whose chain a later manifest may not name). */
    int force_full;
    /* worker */
    uint8_t *resumed_part; /* the file; the state follows its header */
    size_t resumed_len;
    int64_t last_saved;
    /* scheduler */
    pending *pending; /* in clock order */
    size_t npending;
    int64_t committed; /* the newest clock committed (queued for the committer) */
    uint64_t dropped;  /* checkpoints dropped uncommitted (superseded or too many) */
    /* per server: 0 alive (a replacement too), else the how-many-th death
     * of the job it was */
    uint32_t *death_index;
    uint32_t ndeaths;
    known_part **chain; /* per server: its parts since its newest full one */
    size_t *chain_len, *chain_cap;
    /* The committer thread: makes the parts durable, writes manifests and
     * removes old directories, off the I/O thread (which the workers' clocks
     * wait on). keep_from: the oldest directory the previous manifest needs. */
    pthread_t committer;
    int committer_running, stopping;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    commit_job *jobs, **jobs_tail;
    int64_t keep_from;
} ft;

static ft *ft_of(loom_node *n)
{
    return node_layer(n, NODE_LAYER_FT);
}

static void ft_destroy(void *state)
{
    ft *f = state;
    if (f->committer_running) { /* the job is over: finish the commits queued */
        pthread_mutex_lock(&f->mu);
        f->stopping = 1;
        pthread_cond_signal(&f->cv);
        pthread_mutex_unlock(&f->mu);
        pthread_join(f->committer, NULL);
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->cv);
    }
    ft_manifest_free(&f->resumed);
    free(f->resumed_part);
    while (f->pending) {
        pending *p = f->pending;
        f->pending = p->next;
        free(p->parts);
        free(p->known);
        free(p->handbacks);
        free(p);
    }
    free(f->death_index);
    for (uint32_t r = 0; f->chain && r < f->servers; r++) free(f->chain[r]);
    free(f->chain);
    free(f->chain_len);
    free(f->chain_cap);
    free(f);
}

/* ---- configuration ---- */

static int env_count(const char *name, int64_t def, int64_t *out)
{
    const char *v = getenv(name);
    if (!v || !*v) {
        *out = def;
        return 0;
    }
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || *end || x < 1 || x > 1000000000) {
        log_error("%s=\"%s\" is not a number of clocks from 1 to 10^9", name, v);
        return LOOM_ECONFIG;
    }
    *out = x;
    return 0;
}

static int env_path(const char *name, char *out, size_t len)
{
    const char *v = getenv(name);
    if (!v) v = "";
    if (strlen(v) >= len) {
        log_error("%s is too long", name);
        return LOOM_ECONFIG;
    }
    snprintf(out, len, "%s", v);
    return 0;
}

/* ---- files of this node ---- */

static void part_path(const ft *f, int64_t clock, const char *kind, int rank, char *rel,
                      size_t rellen, char *abs, size_t abslen)
{
    snprintf(rel, rellen, "ckpt-%012" PRId64 "/%s-%d.part", clock, kind, rank);
    snprintf(abs, abslen, "%s/%s", f->dir, rel);
}

static int make_ckpt_dir(const ft *f, int64_t clock)
{
    char d[PATH_MAX + 32];
    snprintf(d, sizeof d, "%s/ckpt-%012" PRId64, f->dir, clock);
    return ft_mkdirs(d);
}

/* Tell the scheduler that a part is on disk. */
static int send_part(ft *f, int64_t clock, const ft_part *p, uint32_t deaths, uint32_t handbacks)
{
    blob_writer w = {0};
    blob_put_u32(&w, p->kind);
    blob_put_u32(&w, p->rank);
    blob_put_u32(&w, p->full);
    blob_put_str(&w, p->path);
    blob_put_u64(&w, p->size);
    blob_put_u32(&w, p->crc);
    if (w.bad) {
        free(w.buf);
        return LOOM_ENOMEM;
    }
    msg_header h = {
        .type = MSG_CKPT_PART, .clock = clock, .a = p->full, .b = deaths, .req = handbacks};
    node_frame fr = {w.buf, w.len, NULL, NULL, 1};
    int rc = node_send(f->node, 0, &h, &fr, 1);
    free(w.buf);
    return rc;
}

/* ---- servers ---- */

static int emit_section(void *ctx, const char *table, const void *data, size_t len)
{
    ft_file *file = ctx;
    size_t nl = strlen(table);
    uint8_t head[2 + 255 + 8];
    head[0] = (uint8_t)nl;
    head[1] = (uint8_t)(nl >> 8);
    memcpy(head + 2, table, nl);
    msg_store_u64(head + 2 + nl, (uint64_t)len);
    int rc = ft_file_write(file, head, 2 + nl + 8);
    return rc ? rc : ft_file_write(file, data, len);
}

static void server_cut(void *ctx, int64_t clock, int must_full, uint32_t deaths, uint32_t handbacks)
{
    ft *f = ctx;
    /* A replacement names its parts by the job's clocks once the scheduler
     * has said where they start. CKPT_BASE is sent with NODE_REJOINED, which
     * the workers' CLOCKs to it follow, so this is a safeguard: a part named
     * by a guessed clock could be committed in the wrong checkpoint. */
    if (node_is_replacement(f->node) && !f->base_heard) {
        log_warn("checkpoint at run clock %" PRId64 " skipped: the scheduler has not yet said "
                 "which clock of the job this replacement's clock 0 is",
                 clock - f->base);
        return;
    }
    uint64_t t0 = node_now_ms();
    int full = must_full || f->force_full || (clock / f->every) % f->full_every == 0;
    ft_part p = {.kind = FT_SERVER, .rank = (uint32_t)f->rank, .full = (uint32_t)full};
    char abs[PATH_MAX + 64];
    part_path(f, clock, "server", f->rank, p.path, sizeof p.path, abs, sizeof abs);
    ft_header h = {FT_SERVER, clock, (uint32_t)f->rank, f->servers, f->workers, (uint32_t)full};
    uint8_t hb[FT_HEADER_SIZE];
    ft_header_encode(&h, hb);
    ft_file file;
    int rc = make_ckpt_dir(f, clock);
    if (!rc) rc = ft_file_open(&file, abs);
    if (!rc) {
        rc = ft_file_write(&file, hb, sizeof hb);
        /* Encoding forgets the changes: from here on the next part is relative to this one. */
        if (!rc) rc = ps_server_encode(f->node, full, emit_section, &file);
        if (rc)
            ft_file_abort(&file);
        else
            rc = ft_file_commit(&file, 0); /* the scheduler syncs it before committing */
    }
    if (!rc) {
        p.size = file.size;
        p.crc = file.crc;
        rc = send_part(f, clock, &p, deaths, handbacks);
    }
    f->force_full = rc != 0;
    if (rc)
        log_error("checkpoint at clock %" PRId64 " not written (%s): it will not be committed",
                  clock, loom_strerror(rc));
    else
        log_info("checkpoint part %s written (%" PRIu64 " bytes, %s) in %" PRIu64 " ms", abs,
                 p.size, full ? "full" : "incremental", node_now_ms() - t0);
}

typedef struct restore_ctx {
    const char *name;
    void *table;
    char why[512];
    int rc, found;
} restore_ctx;

static int restore_section(void *ctx, const char *name, const uint8_t *data, size_t len)
{
    restore_ctx *r = ctx;
    if (strcmp(name, r->name)) return 0;
    r->found = 1;
    r->rc = ps_snapshot_apply(r->table, data, len, r->why, sizeof r->why);
    return r->rc;
}

/* The clock of the checkpoint directory a part lives in. */
static int64_t part_clock(const ft_part *p)
{
    return strtoll(p->path + 5, NULL, 10);
}

/* Every server reads every server part, oldest first, and keeps the rows of
 * the ranges it holds (ps_snapshot_apply): which server wrote a range depends
 * on the deaths at the cut (a dead server's ranges are in its successors'
 * parts) and on the ring of the job that wrote it (--replicas), and a range
 * that moved was written whole by its new writer (resume: every server's
 * first part is full), so a newer part's rows replace an older one's. */
static int server_restore(void *ctx, const ps_table_def *def, void *table)
{
    ft *f = ctx;
    /* A replacement started without LOOM_REJOIN=1 read LOOM_RESUME like any
     * server, but restores nothing: REJOIN_COPY brings every row of every range
     * it holds from the live servers, as they are now, and the directory's
     * newest checkpoint is not even the job's. */
    if (node_is_replacement(f->node)) return 0;
    restore_ctx r = {.name = def->name, .table = table};
    size_t n = f->resumed.nparts;
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!order) return LOOM_ENOMEM;
    for (size_t i = 0; i < n; i++) { /* insertion sort by clock: stable, and parts are few */
        size_t j = i;
        while (j &&
               part_clock(&f->resumed.parts[order[j - 1]]) > part_clock(&f->resumed.parts[i])) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    int rc = 0;
    for (size_t k = 0; k < n && !rc; k++) {
        const ft_part *p = &f->resumed.parts[order[k]];
        if (p->kind != FT_SERVER) continue;
        uint8_t *data;
        char why[1024];
        rc = ft_part_load(f->resume, &f->resumed, p, &data, why, sizeof why);
        if (rc) {
            log_error("cannot resume: %s", why);
            break;
        }
        rc = ft_sections(data + FT_HEADER_SIZE, p->size - FT_HEADER_SIZE, restore_section, &r);
        free(data);
        if (rc && r.rc)
            log_error("cannot resume from %s/%s: %s", f->resume, p->path, r.why);
        else if (rc)
            log_error("cannot resume: %s/%s: malformed table section", f->resume, p->path);
    }
    free(order);
    if (rc) return rc;
    if (r.found)
        log_info("table \"%s\" restored from the checkpoint at clock %" PRId64, def->name,
                 f->resumed.clock);
    return 0;
}

/* ---- the scheduler: commit ---- */

static void chain_add(ft *f, int64_t clock, const ft_part *p)
{
    uint32_t r = p->rank;
    if (f->chain_len[r] == f->chain_cap[r]) {
        size_t cap = f->chain_cap[r] ? 2 * f->chain_cap[r] : 8;
        known_part *g = realloc(f->chain[r], cap * sizeof *g);
        if (!g) return; /* the commit below then finds the chain short and refuses */
        f->chain[r] = g;
        f->chain_cap[r] = cap;
    }
    f->chain[r][f->chain_len[r]++] = (known_part){clock, *p};
}

/* Drop server r's parts before its newest full part at or before `clock`:
 * a manifest of that clock or a later one starts its chain there. */
static void chain_trim(ft *f, uint32_t r, int64_t clock)
{
    size_t from = 0;
    for (size_t i = 0; i < f->chain_len[r]; i++)
        if (f->chain[r][i].clock <= clock && f->chain[r][i].part.full) from = i;
    if (!from) return;
    memmove(f->chain[r], f->chain[r] + from, (f->chain_len[r] - from) * sizeof *f->chain[r]);
    f->chain_len[r] -= from;
}

/* The oldest checkpoint clock a manifest's parts live under. */
static int64_t oldest_dir(const ft_manifest *m)
{
    int64_t oldest = m->clock;
    for (size_t i = 0; i < m->nparts; i++)
        if (part_clock(&m->parts[i]) < oldest) oldest = part_clock(&m->parts[i]);
    return oldest;
}

/* Remove ckpt-* directories older than `before`. */
static void remove_old(const ft *f, int64_t before)
{
    DIR *d = opendir(f->dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "ckpt-", 5) || strlen(e->d_name) != 17) continue;
        char *end;
        long long c = strtoll(e->d_name + 5, &end, 10);
        if (*end || c >= before) continue;
        char sub[PATH_MAX + 32];
        snprintf(sub, sizeof sub, "%s/%.17s", f->dir, e->d_name); /* 17: checked above */
        DIR *sd = opendir(sub);
        if (!sd) continue;
        for (struct dirent *se; (se = readdir(sd));) {
            if (se->d_name[0] == '.') continue;
            char file[PATH_MAX + 300];
            snprintf(file, sizeof file, "%s/%s", sub, se->d_name);
            unlink(file);
        }
        closedir(sd);
        rmdir(sub);
    }
    closedir(d);
}

/* Make a part durable: its data (the writer did not sync) and its directory entry. */
static int sync_path(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

static void write_manifest(ft *f, commit_job *j)
{
    char path[PATH_MAX + 64], dir[PATH_MAX + 64];
    int rc = 0;
    for (size_t i = 0; i < j->m.nparts && !rc; i++) {
        snprintf(path, sizeof path, "%s/%s", f->dir, j->m.parts[i].path);
        snprintf(dir, sizeof dir, "%s/%.17s", f->dir, j->m.parts[i].path);
        if (sync_path(path, O_RDONLY) || sync_path(dir, O_RDONLY | O_DIRECTORY)) {
            log_error("checkpoint at clock %" PRId64 " not committed: cannot sync %s: %s", j->clock,
                      path, strerror(errno));
            rc = LOOM_ECONFIG;
        }
    }
    snprintf(path, sizeof path, "%s/ckpt-%012" PRId64 "/MANIFEST", f->dir, j->clock);
    ft_file file;
    if (!rc) rc = ft_file_open(&file, path);
    if (!rc) {
        rc = ft_file_write(&file, j->text, j->len);
        if (rc)
            ft_file_abort(&file);
        else
            rc = ft_file_commit(&file, 1);
    }
    if (rc) {
        log_error("checkpoint at clock %" PRId64 " not committed", j->clock);
        return;
    }
    log_info("checkpoint at clock %" PRId64 " committed (%s)", j->clock, path);
    remove_old(f, j->oldest < f->keep_from ? j->oldest : f->keep_from);
    f->keep_from = j->oldest;
}

static void *committer_main(void *arg)
{
    ft *f = arg;
    log_set_tag("scheduler 0");
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (!f->jobs && !f->stopping) pthread_cond_wait(&f->cv, &f->mu);
        commit_job *j = f->jobs;
        if (!j) break;
        f->jobs = j->next;
        if (!f->jobs) f->jobs_tail = &f->jobs;
        pthread_mutex_unlock(&f->mu);
        write_manifest(f, j);
        free(j->text);
        ft_manifest_free(&j->m);
        free(j);
        pthread_mutex_lock(&f->mu);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

/* Every part of clock p->clock is on disk: queue its manifest. It names each
 * server's newest full part at or before the clock and the parts after it;
 * a dead server that wrote no part at the clock is named as moved (its
 * ranges are in the parts of the servers that took them over). */
static void commit(ft *f, pending *p)
{
    commit_job *j = calloc(1, sizeof *j);
    size_t cap = f->workers;
    for (uint32_t r = 0; r < f->servers; r++) cap += f->chain_len[r];
    if (j) j->m.parts = malloc((cap ? cap : 1) * sizeof *j->m.parts);
    if (j && f->ndeaths) j->m.moved = calloc(f->servers, 1);
    if (!j || !j->m.parts || (f->ndeaths && !j->m.moved)) {
        if (j) ft_manifest_free(&j->m);
        free(j);
        log_error("checkpoint at clock %" PRId64 " not committed: out of memory", p->clock);
        return;
    }
    ft_manifest *m = &j->m;
    m->clock = p->clock;
    m->servers = f->servers;
    m->workers = f->workers;
    snprintf(m->model, sizeof m->model, "%s", f->model);
    for (uint32_t r = 0; r < f->servers; r++) {
        if (!p->parts[r].kind) {
            m->moved[r] = 1;
            continue;
        }
        /* Parts before its newest full one are needed by no later manifest. */
        chain_trim(f, r, p->clock);
        for (size_t i = 0; i < f->chain_len[r] && f->chain[r][i].clock <= p->clock; i++)
            m->parts[m->nparts++] = f->chain[r][i].part;
    }
    for (uint32_t w = 0; w < f->workers; w++) m->parts[m->nparts++] = p->parts[f->servers + w];
    j->clock = p->clock;
    j->oldest = oldest_dir(m);
    j->text = ft_manifest_format(m, &j->len);
    if (!j->text) {
        ft_manifest_free(m);
        free(j);
        log_error("checkpoint at clock %" PRId64 " not committed: out of memory", p->clock);
        return;
    }
    f->committed = p->clock;
    pthread_mutex_lock(&f->mu);
    *f->jobs_tail = j;
    f->jobs_tail = &j->next;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* Whether checkpoint p has every part it needs: every worker's, and every
 * server's but a dead one's whose ranges the others' parts hold (each was cut
 * knowing of its death; ps.h). Server parts cut after different numbers of
 * handbacks may hold a moved range twice or not at all: such a checkpoint
 * never completes, and a newer one supersedes it. */
static int complete(const ft *f, const pending *p)
{
    for (uint32_t w = 0; w < f->workers; w++)
        if (!p->parts[f->servers + w].kind) return 0;
    uint32_t known = UINT32_MAX;
    int first = -1;
    for (uint32_t r = 0; r < f->servers; r++) {
        if (!p->parts[r].kind) continue;
        if (p->known[r] < known) known = p->known[r];
        if (first < 0) first = (int)r;
        if (p->handbacks[r] != p->handbacks[first]) return 0;
    }
    for (uint32_t r = 0; r < f->servers; r++)
        if (!p->parts[r].kind && (!f->death_index[r] || f->death_index[r] > known)) return 0;
    return 1;
}

/* Whether to log the dropped-th drop: the first few, then ever more rarely
 * (a sender making clocks up must not flood the log). */
static int worth_logging(uint64_t dropped)
{
    return dropped <= 5 || (dropped & (dropped - 1)) == 0;
}

static void pending_free(ft *f, pending **pp)
{
    pending *p = *pp;
    *pp = p->next;
    f->npending--;
    free(p->parts);
    free(p->known);
    free(p->handbacks);
    free(p);
}

/* Commit the complete checkpoints; drop those a newer commit supersedes. */
static void commit_ready(ft *f)
{
    for (pending **pp = &f->pending; *pp;) {
        if (!complete(f, *pp)) {
            pp = &(*pp)->next;
            continue;
        }
        commit(f, *pp);
        pending_free(f, pp);
    }
    while (f->pending && f->pending->clock < f->committed) {
        if (worth_logging(++f->dropped))
            log_warn("checkpoint at clock %" PRId64
                     " dropped uncommitted: parts are missing and the "
                     "one at clock %" PRId64 " is committed (%" PRIu64 " dropped)",
                     f->pending->clock, f->committed, f->dropped);
        pending_free(f, &f->pending);
    }
}

/* The job went on without server `rank` (ps_registry_on_failover). */
static void on_server_death(void *ctx, int rank)
{
    ft *f = ctx;
    f->death_index[rank] = ++f->ndeaths;
    commit_ready(f);
}

/* A replacement registered for dead server `rank` (ps_registry_on_failover).
 * From now on a checkpoint needs its part: it is master of nothing until it
 * is back, but then of a range whose other holders die, and its part says
 * how many deaths it knew of like any other. A checkpoint cut before it
 * joined that still waits for other parts then waits for its part too, which
 * it may never write (it cuts only the clocks after it got every worker's
 * clock): that one is dropped when a newer one is committed.
 *
 * It names its parts by the job's clocks, which it learns here (CKPT_BASE,
 * once it has its roster): in a resumed job, the clock this job resumed at,
 * which LOOM_RESUME cannot tell it (the directory's newest checkpoint may be
 * one this job committed since). */
static void on_server_rejoin(void *ctx, int rank)
{
    ft *f = ctx;
    f->death_index[rank] = 0;
    msg_header h = {.type = MSG_CKPT_BASE, .clock = f->base};
    int rc = node_send(f->node, node_server_id((int)f->servers, rank), &h, NULL, 0);
    if (rc)
        log_error("cannot tell server %d's replacement the job's clock (%s): it will write no "
                  "checkpoint part, and no checkpoint will be committed",
                  rank, loom_strerror(rc));
}

/* The pending checkpoint of clock `clock`, made if new (NULL: out of memory).
 * Beyond FT_MAX_PENDING the oldest is dropped, and with it the parts of the
 * chains only it could have needed. */
static pending *pending_of(ft *f, int64_t clock)
{
    pending **pp = &f->pending;
    while (*pp && (*pp)->clock < clock) pp = &(*pp)->next;
    pending *at = *pp;
    if (at && at->clock == clock) return at;
    pending *np = calloc(1, sizeof *np);
    if (np) {
        np->parts = calloc(f->servers + f->workers, sizeof *np->parts);
        np->known = calloc(f->servers, sizeof *np->known);
        np->handbacks = calloc(f->servers, sizeof *np->handbacks);
    }
    if (!np || !np->parts || !np->known || !np->handbacks) {
        if (np) {
            free(np->parts);
            free(np->known);
            free(np->handbacks);
        }
        free(np);
        log_error("checkpoint at clock %" PRId64 ": out of memory", clock);
        return NULL;
    }
    np->clock = clock;
    np->next = *pp;
    *pp = np;
    if (++f->npending > FT_MAX_PENDING) {
        if (worth_logging(++f->dropped))
            log_warn("checkpoint at clock %" PRId64 " dropped uncommitted: %d newer ones wait for "
                     "their parts too (%" PRIu64 " dropped)",
                     f->pending->clock, FT_MAX_PENDING, f->dropped);
        if (f->pending == np) np = NULL; /* the new one is the oldest: not kept either */
        pending_free(f, &f->pending);
        for (uint32_t r = 0; r < f->servers; r++) /* what the oldest left needs */
            chain_trim(f, r, f->pending ? f->pending->clock : INT64_MAX);
    }
    return np;
}

static void on_part(loom_node *n, void *ctx, node_msg *m)
{
    ft *f = ctx;
    int rank;
    int role = node_peer_role(n, m->from, &rank);
    blob_reader rd = {node_frame_data(m, 0), node_frame_size(m, 0), 0};
    ft_part p = {0};
    p.kind = blob_get_u32(&rd);
    p.rank = blob_get_u32(&rd);
    p.full = blob_get_u32(&rd);
    blob_get_str(&rd, p.path, sizeof p.path);
    p.size = blob_get_u64(&rd);
    p.crc = blob_get_u32(&rd);
    char want[FT_PATH_MAX];
    snprintf(want, sizeof want, "ckpt-%012" PRId64 "/%s-%d.part", m->h.clock,
             role == LOOM_SERVER ? "server" : "worker", rank);
    if (rd.bad || rd.left || !f->dir[0] || m->h.clock <= 0 ||
        p.kind != (role == LOOM_SERVER ? FT_SERVER : FT_WORKER) || p.rank != (uint32_t)rank ||
        p.full > 1 || strcmp(p.path, want) || m->h.b > f->ndeaths || m->h.req > UINT32_MAX) {
        node_drop(n, m, "malformed CKPT_PART");
        return;
    }
    if (m->h.clock <= f->committed) { /* a node sends its parts in clock order */
        node_drop(n, m, "CKPT_PART of a clock at or before the newest committed checkpoint");
        return;
    }
    pending *pe = pending_of(f, m->h.clock);
    if (!pe) return;
    size_t slot = (role == LOOM_SERVER ? 0 : f->servers) + (size_t)rank;
    if (pe->parts[slot].kind) {
        node_drop(n, m, "CKPT_PART sent twice");
        return;
    }
    pe->parts[slot] = p;
    if (role == LOOM_SERVER) {
        pe->known[rank] = (uint32_t)m->h.b;
        pe->handbacks[rank] = (uint32_t)m->h.req;
        chain_add(f, m->h.clock, &p);
    }
    commit_ready(f);
}

/* ---- a replacement server ---- */

/* The ps layer's hooks of a server: cut every f->every clocks of the job,
 * counted from f->base; restore from f->resumed when resuming. */
static void set_server_hooks(ft *f)
{
    ps_ckpt_hooks h = {.every = f->every,
                       .base = f->base,
                       .ctx = f,
                       .cut = server_cut,
                       .restore = f->resume[0] ? server_restore : NULL};
    ps_server_set_ckpt(f->node, &h);
}

/* CKPT_BASE (on_server_rejoin): this replacement's clock 0 is the job's
 * clock h.clock. From now on its cuts are named by the job's clocks. */
static void on_base(loom_node *n, void *ctx, node_msg *m)
{
    ft *f = ctx;
    if (!node_is_replacement(n) || f->base_heard || m->h.clock < 0) {
        node_drop(n, m, "CKPT_BASE to a server that is no replacement, twice, or negative");
        return;
    }
    f->base = m->h.clock;
    f->base_heard = 1;
    if (f->every) set_server_hooks(f);
    if (f->base)
        log_info("the job resumed at clock %" PRId64
                 ": this replacement's checkpoint parts are named from there",
                 f->base);
}

/* ---- attach ---- */

/* The newest checkpoint of f->resume, checked against this job. */
static int load_resume(ft *f)
{
    char why[1024];
    int rc = ft_manifest_load(f->resume, -1, &f->resumed, why, sizeof why);
    if (rc) {
        log_error("cannot resume: %s", why);
        return rc;
    }
    const ft_manifest *m = &f->resumed;
    const char *mine = f->model[0] ? f->model : "-";
    if (strcmp(m->model, mine)) {
        log_error("cannot resume: %s/ckpt-%012" PRId64
                  "/MANIFEST: the checkpoint is of model %s, this job trains %s",
                  f->resume, m->clock, m->model, mine);
        return LOOM_EMISMATCH;
    }
    if (m->servers != f->servers || m->workers != f->workers) {
        log_error("cannot resume: %s/ckpt-%012" PRId64
                  "/MANIFEST: the checkpoint has %u servers and %u workers, this job %u and %u "
                  "(a checkpoint is not resharded: resume with the same numbers)",
                  f->resume, m->clock, m->servers, m->workers, f->servers, f->workers);
        return LOOM_EMISMATCH;
    }
    f->base = m->clock;
    f->force_full = 1;
    for (size_t i = 0; i < m->nparts; i++) {
        const ft_part *p = &m->parts[i];
        int mine_part = (p->kind == FT_SERVER && f->role == LOOM_SERVER) ||
                        (p->kind == FT_WORKER && f->role == LOOM_WORKER);
        if (f->chain && p->kind == FT_SERVER) chain_add(f, m->clock, p);
        if (!mine_part || p->rank != (uint32_t)f->rank) continue;
        uint8_t *data;
        rc = ft_part_load(f->resume, m, p, &data, why, sizeof why);
        if (rc) {
            log_error("cannot resume: %s", why);
            return rc;
        }
        if (p->kind == FT_WORKER) {
            f->resumed_part = data;
            f->resumed_len = (size_t)p->size;
        } else {
            free(data); /* read again, table by table, when the tables are created */
        }
    }
    f->keep_from = oldest_dir(m);
    log_info("resuming from %s at clock %" PRId64, f->resume, m->clock);
    return 0;
}

int ft_attach(loom_node *n)
{
    ft *f = calloc(1, sizeof *f);
    if (!f) return LOOM_ENOMEM;
    f->node = n;
    f->role = loom_node_role(n);
    f->rank = loom_rank(n);
    f->servers = (uint32_t)loom_num_servers(n);
    f->workers = (uint32_t)loom_num_workers(n);
    f->last_saved = -1;
    node_set_layer(n, NODE_LAYER_FT, f, ft_destroy);
    int rc = env_path("LOOM_CHECKPOINT_DIR", f->dir, sizeof f->dir);
    if (!rc) rc = env_path("LOOM_RESUME", f->resume, sizeof f->resume);
    /* A server started as a replacement (LOOM_REJOIN=1: loom run, or by
     * hand) leaves the directory alone: it takes nothing from it (on_base,
     * server_restore), and the scheduler may be removing the checkpoints
     * the directory's newest manifest names while it would read them. */
    const char *rejoin = getenv("LOOM_REJOIN");
    if (f->role == LOOM_SERVER && rejoin && !strcmp(rejoin, "1")) f->resume[0] = '\0';
    if (!rc) rc = env_count("LOOM_CHECKPOINT_EVERY", f->dir[0] ? 10 : 0, &f->every);
    if (!rc) rc = env_count("LOOM_CHECKPOINT_FULL_EVERY", 10, &f->full_every);
    const char *model = getenv("LOOM_CHECKPOINT_MODEL");
    snprintf(f->model, sizeof f->model, "%s", model && *model ? model : "");
    if (!f->dir[0]) f->every = 0;
    if (rc) return rc;
    if (f->role == LOOM_SCHEDULER && f->dir[0]) {
        f->chain = calloc(f->servers ? f->servers : 1, sizeof *f->chain);
        f->chain_len = calloc(f->servers ? f->servers : 1, sizeof *f->chain_len);
        f->chain_cap = calloc(f->servers ? f->servers : 1, sizeof *f->chain_cap);
        if (!f->chain || !f->chain_len || !f->chain_cap) return LOOM_ENOMEM;
        f->death_index = calloc(f->servers ? f->servers : 1, sizeof *f->death_index);
        if (!f->death_index) return LOOM_ENOMEM;
        if ((rc = ft_mkdirs(f->dir))) return rc;
        node_set_handler(n, MSG_CKPT_PART, on_part, f);
        ps_registry_on_failover(n, on_server_death, on_server_rejoin, f);
    }
    if (f->resume[0] && (rc = load_resume(f))) return rc;
    if (f->chain) {
        f->jobs_tail = &f->jobs;
        pthread_mutex_init(&f->mu, NULL);
        pthread_cond_init(&f->cv, NULL);
        if (pthread_create(&f->committer, NULL, committer_main, f)) return LOOM_ENOMEM;
        f->committer_running = 1;
    }
    if (f->role == LOOM_SERVER) node_set_handler(n, MSG_CKPT_BASE, on_base, f);
    if (f->role == LOOM_SERVER && (f->every || f->resume[0])) set_server_hooks(f);
    return 0;
}

/* ---- the public worker calls ---- */

int loom_checkpoint_due(loom_node *n)
{
    if (!n || !loom_is_worker(n)) return 0;
    ft *f = ft_of(n);
    int64_t c = loom_current_clock(n);
    return f->every && c > 0 && (f->base + c) % f->every == 0 && c != f->last_saved;
}

int loom_checkpoint_save(loom_node *n, const void *state, size_t len)
{
    if (!n || (!state && len)) return LOOM_EINVAL;
    if (!loom_is_worker(n)) return LOOM_EROLE;
    ft *f = ft_of(n);
    if (!loom_checkpoint_due(n)) return LOOM_ESTATE;
    uint64_t t0 = node_now_ms();
    int64_t local = loom_current_clock(n), clock = f->base + local;
    ft_part p = {.kind = FT_WORKER, .rank = (uint32_t)f->rank, .full = 1};
    char abs[PATH_MAX + 64];
    part_path(f, clock, "worker", f->rank, p.path, sizeof p.path, abs, sizeof abs);
    ft_header h = {FT_WORKER, clock, (uint32_t)f->rank, f->servers, f->workers, 1};
    uint8_t hb[FT_HEADER_SIZE];
    ft_header_encode(&h, hb);
    ft_file file;
    int rc = make_ckpt_dir(f, clock);
    if (!rc) rc = ft_file_open(&file, abs);
    if (!rc) {
        rc = ft_file_write(&file, hb, sizeof hb);
        if (!rc && len) rc = ft_file_write(&file, state, len);
        if (rc)
            ft_file_abort(&file);
        else
            rc = ft_file_commit(&file, 0); /* the scheduler syncs it before committing */
    }
    if (!rc) {
        p.size = file.size;
        p.crc = file.crc;
        rc = send_part(f, clock, &p, 0, 0);
    }
    if (!rc) {
        f->last_saved = local;
        log_info("checkpoint part %s written (%zu bytes) in %" PRIu64 " ms", abs, (size_t)p.size,
                 node_now_ms() - t0);
    }
    return rc;
}

int loom_checkpoint_resumed(loom_node *n, const void **state, size_t *len, int64_t *clock)
{
    if (!n || !state || !len) return LOOM_EINVAL;
    if (!loom_is_worker(n)) return LOOM_EROLE;
    ft *f = ft_of(n);
    if (!f->resumed_part) return LOOM_ENOTFOUND;
    *state = f->resumed_part + FT_HEADER_SIZE;
    *len = f->resumed_len - FT_HEADER_SIZE;
    if (clock) *clock = f->resumed.clock;
    return 0;
}
