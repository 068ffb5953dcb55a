/* ft: checkpoints and resume, as a layer of every node (docs/FAULTS.md).
 *
 * Configured from the environment (what `loom train` sets from its flags):
 * LOOM_CHECKPOINT_DIR, LOOM_CHECKPOINT_EVERY (N clocks, "Ns" seconds, "Ne"
 * epochs), LOOM_CHECKPOINT_FULL_EVERY (every K-th checkpoint is full;
 * default 10), LOOM_CHECKPOINT_MODEL (recorded, and compared on resume) and
 * LOOM_RESUME (a checkpoint directory).
 *
 * The scheduler decides which clock C is checkpointed next and tells every
 * server and worker (CKPT_PLAN; plan.c says how it picks C, and why only one
 * checkpoint is ever in progress). Then each role does its part:
 *   - a server, when its min clock reaches C (src/ps calls cut()), writes its
 *     partitions (every row, or those changed since its previous part) to
 *     ckpt-C/server-R.part and tells the scheduler (CKPT_PART);
 *   - a worker, when the application calls loom_checkpoint_save() after its
 *     clock C, writes the application's state to ckpt-C/worker-R.part and
 *     tells the scheduler;
 *   - the first C of an interval of N clocks needs no message: every node
 *     knows it from the start (ft_first_plan), so a worker that runs ahead
 *     (ASP) cannot pass it before a plan would have reached it;
 *   - a node that is past C when the plan comes, that cannot write its part
 *     (a full disk) or that finishes first says so (CKPT_SKIP), and the
 *     scheduler gives C up and plans another;
 *   - the scheduler, once it has every part of C, writes ckpt-C/MANIFEST: the
 *     commit (plan.c).
 * Everything a server does runs on its I/O thread (the cut happens inside the
 * CLOCK handler that moved its min clock), so the cut sees the partitions
 * exactly at C. Files are written relative to the checked directory (dir.c).
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
#include <sys/uio.h>
#include <unistd.h>

#include "core/log.h"
#include "core/msg.h"
#include "core/node_impl.h"
#include "ft/ft.h"
#include "ft/ft_impl.h"
#include "ft/msg_types.h"
#include "ft/replica.h"
#include "loom/checkpoint.h"
#include "loom/error.h"
#include "ps/ps.h"

static ft *ft_of(loom_node *n)
{
    return node_layer(n, &ft_layer_def);
}

static void ft_destroy(void *state)
{
    ft *f = state;
    if (f->sched) ft_sched_destroy(f);
    if (f->coord) ft_coord_destroy(f->coord);
    if (f->rejoin_coord) ft_rejoin_coord_destroy(f->rejoin_coord);
    if (f->repl) ft_repl_destroy(f->repl);
    ft_manifest_free(&f->resumed);
    free(f->resumed_part);
    if (f->dirfd >= 0) close(f->dirfd);
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
        log_error("%s=\"%s\" is not a number from 1 to 10^9", name, v);
        return LOOM_ECONFIG;
    }
    *out = x;
    return 0;
}

/* LOOM_CHECKPOINT_EVERY: "N" clocks, "Ns" / "Nm" / "Nh" (kept in seconds),
 * "Ne" epochs; N from 1 to 10^9. */
static int env_every(ft_every *out)
{
    const char *v = getenv("LOOM_CHECKPOINT_EVERY");
    *out = (ft_every){'c', 10};
    if (!v || !*v) return 0;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    int64_t scale = 1;
    char unit = 'c';
    if (*end == 's' || *end == 'm' || *end == 'h') {
        unit = 's';
        scale = *end == 's' ? 1 : *end == 'm' ? 60 : 3600;
        end++;
    } else if (*end == 'e') {
        unit = 'e';
        end++;
    }
    if (errno || end == v || *end || x < 1 || x > 1000000000) {
        log_error("LOOM_CHECKPOINT_EVERY=\"%s\" is not N clocks, Ns seconds (or Nm, Nh) or Ne "
                  "epochs, with N from 1 to 10^9",
                  v);
        return LOOM_ECONFIG;
    }
    *out = (ft_every){unit, x * scale};
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

int ft_open_dir(ft *f)
{
    return f->dirfd >= 0 ? 0 : ft_dir_open(f->dir, 0, &f->dirfd);
}

int64_t ft_first_plan(const ft *f)
{
    if (!f->dir[0] || f->every.unit != 'c') return -1;
    return (f->base / f->every.n + 1) * f->every.n;
}

void ft_send_skip(ft *f, int64_t clock, int64_t now, int why)
{
    msg_header h = {.type = MSG_CKPT_SKIP,
                    .clock = clock,
                    .a = now < 0 ? 0 : (uint64_t)now + 1,
                    .b = (uint64_t)why};
    node_send(f->node, 0, &h, NULL, 0);
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

/* Write this node's part of checkpoint `clock`: the header, then body(ctx,
 * file). p->kind, rank and full are set; size, crc and path are filled in. */
static int write_part(ft *f, int64_t clock, ft_part *p, int (*body)(void *ctx, ft_file *file),
                      void *ctx, int *gone)
{
    const char *kind = p->kind == FT_SERVER ? "server" : "worker";
    char name[32], shown[PATH_MAX + 32];
    snprintf(name, sizeof name, "%s-%u.part", kind, p->rank);
    snprintf(p->path, sizeof p->path, "ckpt-%012" PRId64 "/%s", clock, name);
    snprintf(shown, sizeof shown, "%s/ckpt-%012" PRId64, f->dir, clock);
    ft_header h = {p->kind, clock, p->rank, f->servers, f->workers, p->full};
    uint8_t hb[FT_HEADER_SIZE];
    ft_header_encode(&h, hb);
    int sub = -1, rc = ft_open_dir(f);
    if (!rc) rc = ft_dir_ckpt(f->dirfd, f->dir, clock, 1, &sub);
    ft_file file = {.gone = 0};
    if (!rc) rc = ft_file_open(&file, sub, shown, name);
    if (!rc) {
        rc = ft_file_write(&file, hb, sizeof hb);
        if (!rc) rc = body(ctx, &file);
        if (rc)
            ft_file_abort(&file);
        else
            rc = ft_file_commit(&file, 0); /* the scheduler syncs it before committing */
    }
    if (sub >= 0) close(sub);
    *gone = file.gone || rc == LOOM_ENOTFOUND;
    if (!rc) {
        p->size = file.size;
        p->crc = file.crc;
    }
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

typedef struct server_part {
    loom_node *node;
    int full;
} server_part;

static int server_body(void *ctx, ft_file *file)
{
    server_part *sp = ctx;
    /* Encoding forgets the changes: from here on the next part is relative to this one. */
    return ps_server_encode(sp->node, sp->full, emit_section, file);
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
        ft_send_skip(f, clock, clock, FT_SKIP_UNSAFE);
        return;
    }
    uint64_t t0 = node_now_ms();
    int full = must_full || f->force_full;
    ft_part p = {.kind = FT_SERVER, .rank = (uint32_t)loom_rank(f->node), .full = (uint32_t)full};
    server_part sp = {f->node, full};
    int gone;
    int rc = write_part(f, clock, &p, server_body, &sp, &gone);
    if (!rc) rc = send_part(f, clock, &p, deaths, handbacks);
    f->force_full = rc != 0;
    if (rc && gone) {
        ft_send_skip(f, clock, clock, FT_SKIP_PASSED);
    } else if (rc) {
        log_error("checkpoint at clock %" PRId64 " not written (%s): it will not be committed",
                  clock, loom_strerror(rc));
        ft_send_skip(f, clock, clock, FT_SKIP_FAILED);
    } else {
        log_info("checkpoint part %s/%s written (%" PRIu64 " bytes, %s) in %" PRIu64 " ms", f->dir,
                 p.path, p.size, full ? "full" : "incremental", node_now_ms() - t0);
    }
}

static void server_skip(void *ctx, int64_t clock, int64_t now, const char *why)
{
    ft *f = ctx;
    log_info("checkpoint at clock %" PRId64 " skipped: %s", clock, why);
    ft_send_skip(f, clock, now,
                 now < 0        ? FT_SKIP_FINISHED
                 : now == clock ? FT_SKIP_UNSAFE
                                : FT_SKIP_PASSED);
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
        while (j && ft_part_clock(&f->resumed.parts[order[j - 1]]) >
                        ft_part_clock(&f->resumed.parts[i])) {
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

/* ---- plans (CKPT_PLAN) ---- */

/* The ps layer's hooks of a server: cut where the scheduler plans, named by
 * the job's clocks (f->base + the run's); restore from f->resumed when
 * resuming. */
static void set_server_hooks(ft *f)
{
    ps_ckpt_hooks h = {.base = f->base,
                       .ctx = f,
                       .cut = f->dir[0] ? server_cut : NULL,
                       .skip = server_skip,
                       .restore = f->resume[0] ? server_restore : NULL};
    ps_server_set_ckpt(f->node, &h);
}

/* The scheduler's next checkpoint: a server cuts when its min clock gets
 * there, a worker saves when the application asks after that clock. */
static void on_plan(loom_node *n, void *ctx, node_msg *m)
{
    ft *f = ctx;
    if (!f->dir[0] || m->h.clock <= 0 || m->h.a > 1 || m->h.b > 1) {
        node_drop(n, m, "CKPT_PLAN without checkpoints, or malformed");
        return;
    }
    if (f->role == LOOM_WORKER) {
        node_lock(n); /* loom_checkpoint_final may wait for it */
        if (m->h.b)
            atomic_store(&f->final_refused, m->h.clock);
        else
            atomic_store(&f->plan, m->h.clock);
        node_broadcast(n);
        node_unlock(n);
        return;
    }
    if (node_is_replacement(n) && !f->base_heard) {
        ft_send_skip(f, m->h.clock, m->h.clock, FT_SKIP_UNSAFE);
        return;
    }
    int64_t now = ps_server_plan_cut(n, m->h.clock, (int)m->h.a);
    if (now >= 0)
        ft_send_skip(f, m->h.clock, now == INT64_MAX ? -1 : now,
                     now == INT64_MAX ? FT_SKIP_FINISHED : FT_SKIP_PASSED);
}

/* A worker is past the planned clock without having saved there (its
 * application did not ask, or the plan came late): say so once. */
static void worker_passed(ft *f, int64_t now, int why)
{
    int64_t p = atomic_load(&f->plan);
    if (p < 0 || p > now || (p == now && why != FT_SKIP_FINISHED) || p == f->last_saved) return;
    if (atomic_compare_exchange_strong(&f->plan, &p, -1)) ft_send_skip(f, p, now, why);
}

void ft_worker_clocked(loom_node *n)
{
    ft *f = ft_of(n);
    if (f && f->dir[0]) worker_passed(f, f->base + ps_current_clock(n), FT_SKIP_PASSED);
}

void ft_worker_finished(loom_node *n)
{
    ft *f = ft_of(n);
    if (f && f->dir[0]) worker_passed(f, f->base + ps_current_clock(n), FT_SKIP_FINISHED);
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
    if (f->dir[0]) set_server_hooks(f);
    if (f->base)
        log_info("the job resumed at clock %" PRId64
                 ": this replacement's checkpoint parts are named from there",
                 f->base);
}

/* ---- attach ---- */

/* The scheduler's timer: a handback to try again, a leave's handover
 * (handback_coord.c), then the checkpoint plans (plan.c). */
static uint64_t sched_timer(loom_node *n, void *ctx, uint64_t now)
{
    (void)n;
    ft *f = ctx;
    ft_rejoin_coord_tick(f->rejoin_coord);
    uint64_t next = ft_coord_tick(f->coord, now);
    uint64_t plan = f->sched ? ft_sched_tick(f, now) : UINT64_MAX;
    return plan < next ? plan : next;
}

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
    log_info("resuming from %s at clock %" PRId64, f->resume, m->clock);
    return 0;
}

int ft_attach(loom_node *n)
{
    int rc = node_layer_register(&ft_layer_def);
    if (rc) return rc;
    ft *f = calloc(1, sizeof *f);
    if (!f) return LOOM_ENOMEM;
    f->node = n;
    f->role = loom_node_role(n);
    f->rank = loom_rank(n);
    f->servers = (uint32_t)loom_num_servers(n);
    f->workers = (uint32_t)loom_num_workers(n);
    f->dirfd = -1;
    f->last_saved = -1;
    f->told_due = -1;
    atomic_init(&f->plan, -1);
    atomic_init(&f->final_refused, -1);
    node_set_layer(n, &ft_layer_def, f, ft_destroy);
    rc = env_path("LOOM_CHECKPOINT_DIR", f->dir, sizeof f->dir);
    if (!rc) rc = env_path("LOOM_RESUME", f->resume, sizeof f->resume);
    /* A server started as a replacement (LOOM_REJOIN=1: loom run, or by
     * hand) leaves the directory alone: it takes nothing from it (on_base,
     * server_restore), and the scheduler may be removing the checkpoints
     * the directory's newest manifest names while it would read them. */
    const char *rejoin = getenv("LOOM_REJOIN");
    if (f->role == LOOM_SERVER && rejoin && !strcmp(rejoin, "1")) f->resume[0] = '\0';
    if (!rc) rc = env_every(&f->every);
    if (!rc) rc = env_count("LOOM_CHECKPOINT_FULL_EVERY", 10, &f->full_every);
    const char *model = getenv("LOOM_CHECKPOINT_MODEL");
    snprintf(f->model, sizeof f->model, "%s", model && *model ? model : "");
    if (rc) return rc;
    if (f->resume[0] && (rc = load_resume(f))) return rc;
    f->epoch_end = f->base;
    if (f->role == LOOM_SCHEDULER) {
        node_set_timer(n, &ft_layer_def, sched_timer, f);
        if ((rc = ft_rejoin_coord_attach(f)) || (rc = ft_coord_attach(f))) return rc;
    }
    if (f->role == LOOM_SCHEDULER && f->dir[0] &&
        (rc = ft_sched_attach(f, f->resume[0] ? &f->resumed : NULL)))
        return rc;
    if (f->role != LOOM_SCHEDULER) node_set_handler(n, MSG_CKPT_PLAN, on_plan, f);
    if (f->role == LOOM_SERVER) node_set_handler(n, MSG_CKPT_BASE, on_base, f);
    if (f->role == LOOM_WORKER && (rc = ft_client_attach(n))) return rc;
    if (f->role == LOOM_SERVER && (rc = ft_repl_attach(n, &f->repl))) return rc;
    if (f->role == LOOM_SERVER && (f->dir[0] || f->resume[0])) set_server_hooks(f);
    /* The first plan, as the scheduler makes it (ft_sched_attach); not a
     * replacement's: the job is past it, and the scheduler plans anew when
     * a replacement joins. */
    int64_t first = ft_first_plan(f);
    if (first > 0 && !(rejoin && !strcmp(rejoin, "1"))) {
        if (f->role == LOOM_WORKER) atomic_store(&f->plan, first);
        if (f->role == LOOM_SERVER) ps_server_plan_cut(n, first, 1);
    }
    return 0;
}

/* ---- the public worker calls ---- */

int loom_checkpoint_due(loom_node *n)
{
    if (!n || !loom_is_worker(n)) return 0;
    ft *f = ft_of(n);
    int64_t c = f->base + ps_current_clock(n);
    int due = f->dir[0] && c > f->base && atomic_load(&f->plan) == c && c != f->last_saved;
    if (due) f->told_due = c;
    return due;
}

static int worker_body(void *ctx, ft_file *file)
{
    const struct iovec *state = ctx;
    return state->iov_len ? ft_file_write(file, state->iov_base, state->iov_len) : 0;
}

int loom_checkpoint_save(loom_node *n, const void *state, size_t len)
{
    if (!n || (!state && len)) return LOOM_EINVAL;
    if (!loom_is_worker(n)) return LOOM_EROLE;
    ft *f = ft_of(n);
    int64_t clock = f->base + ps_current_clock(n);
    if (!loom_checkpoint_due(n)) {
        /* Told it was due, and the plan moved on since: the scheduler gave
         * the checkpoint up (another node passed its clock without a part)
         * and planned the next, while the application gathered its state.
         * Nothing is wanted of this clock any more. */
        if (clock == f->told_due && clock != f->last_saved) {
            log_info("checkpoint at clock %" PRId64 " given up before this worker's part was "
                     "written: not written",
                     clock);
            f->last_saved = clock;
            return 0;
        }
        return LOOM_ESTATE;
    }
    uint64_t t0 = node_now_ms();
    ft_part p = {.kind = FT_WORKER, .rank = (uint32_t)loom_rank(f->node), .full = 1};
    struct iovec body = {(void *)state, len};
    int gone;
    int rc = write_part(f, clock, &p, worker_body, &body, &gone);
    f->last_saved = clock;
    if (rc && gone) {
        ft_send_skip(f, clock, clock, FT_SKIP_PASSED);
        return 0;
    }
    if (rc == LOOM_EIO || rc == LOOM_ECONFIG) {
        /* The job goes on: this checkpoint is given up (the scheduler plans
         * another), as a disk that filled up may have room again later. */
        log_error("checkpoint at clock %" PRId64 " not written (%s): it will not be committed",
                  clock, loom_strerror(rc));
        ft_send_skip(f, clock, clock, FT_SKIP_FAILED);
        return 0;
    }
    if (!rc) rc = send_part(f, clock, &p, 0, 0);
    if (!rc)
        log_info("checkpoint part %s/%s written (%zu bytes) in %" PRIu64 " ms", f->dir, p.path,
                 (size_t)p.size, node_now_ms() - t0);
    return rc;
}

int loom_checkpoint_epoch_end(loom_node *n)
{
    if (!n) return LOOM_EINVAL;
    if (!loom_is_worker(n)) return LOOM_EROLE;
    ft *f = ft_of(n);
    int64_t c = f->base + ps_current_clock(n);
    if (c <= f->epoch_end) return 0; /* no clock since the last one: not an epoch */
    msg_header h = {.type = MSG_CKPT_EPOCH, .clock = c, .a = (uint64_t)(c - f->epoch_end)};
    f->epoch_end = c;
    /* One worker speaks for all: their epochs have the same clocks. */
    return f->dir[0] && f->every.unit == 'e' && loom_rank(n) == 0 ? node_send(n, 0, &h, NULL, 0)
                                                                  : 0;
}

int loom_checkpoint_final(loom_node *n)
{
    if (!n || !loom_is_worker(n)) return 0;
    ft *f = ft_of(n);
    int64_t c = f->base + ps_current_clock(n);
    if (!f->dir[0] || c <= f->base || c == f->last_saved) return 0;
    if (atomic_load(&f->plan) != c) {
        msg_header h = {.type = MSG_CKPT_FINAL, .clock = c};
        if (node_send(n, 0, &h, NULL, 0)) return 0;
        /* The scheduler answers at once, or once the checkpoint it is
         * committing is on disk; a job whose scheduler is gone fails anyway. */
        uint64_t deadline = node_now_ms() + node_heartbeat_timeout_ms(n);
        node_lock(n);
        while (atomic_load(&f->plan) != c && atomic_load(&f->final_refused) != c &&
               !node_wait(n, deadline))
            ;
        node_unlock(n);
    }
    return loom_checkpoint_due(n);
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
