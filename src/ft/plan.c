/* plan: the scheduler's side of checkpoints: which clock to checkpoint next,
 * the commit, and what the directory keeps (docs/FAULTS.md).
 *
 * One checkpoint at a time. The scheduler plans a clock C (CKPT_PLAN to
 * every server and worker), collects the parts, and once it has every part
 * hands the manifest to the committer thread, which syncs the parts, writes
 * ckpt-C/MANIFEST and removes the directories no kept manifest needs. Only
 * then is the next checkpoint planned. A checkpoint that falls due while one
 * is still being written is skipped (and counted): the directory holds the
 * kept checkpoints and at most the one in progress, however short the
 * interval and however slow the disk, and nothing piles up uncommitted.
 *
 * The first plan of an interval of N clocks is made before the job starts,
 * and no message carries it: every node knows it (ft_first_plan).
 *
 * Which clock: the next one the interval allows (a multiple of N clocks, the
 * end of every N-th epoch, or any clock once N seconds have passed) that is
 * still ahead of the job. The scheduler sees no CLOCK message, so it guesses
 * the job's clock from what the nodes said last (parts and skips carry
 * clocks) and the rate they said it at, plus a lead. A node already past C
 * when the plan comes says so (CKPT_SKIP, with its clock); the plan is given
 * up, its files removed, the lead doubled, and another planned at once. A
 * node that cannot write its part (a full disk) gives the plan up too; the
 * next is planned no sooner than a second later.
 *
 * A given-up plan may have left parts that a later incremental part would
 * be relative to, so the plan after it is full. So every incremental part's
 * predecessor is in a committed checkpoint, and a directory of a clock that
 * was never committed is never needed: it is removed whole (dir.c removes
 * only Loom's own files in it).
 *
 * Everything here but the committer runs on the scheduler's I/O thread. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/log.h"
#include "core/msg.h"
#include "core/node_impl.h"
#include "ft/ft.h"
#include "ft/ft_impl.h"
#include "ft/msg_types.h"
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
} commit_job;

struct ft_sched {
    /* the checkpoint in progress */
    int64_t plan;   /* its clock; -1: none */
    int plan_full;  /* its server parts hold every row */
    int committing; /* every part came; the committer has it */
    ft_part *parts; /* servers, then workers, by rank; kind 0 = not yet */
    /* per server: the deaths and handbacks its part was cut knowing of
     * (parts cut on either side of a handback may both hold, or both miss,
     * the ranges it moved) */
    uint32_t *known, *handbacks;
    /* planning */
    int64_t last_plan;     /* the clock of the last plan (the base before any) */
    uint64_t last_plan_ms; /* when it was made */
    int64_t max_plan;      /* the newest clock ever planned */
    int64_t horizon;       /* the newest job clock a node reported */
    uint64_t horizon_ms;   /* when */
    double rate;           /* clocks per ms, smoothed */
    int64_t pace_clock;    /* the clock and time the pace was last measured from */
    uint64_t pace_ms;
    int64_t lead;                 /* clocks a plan is put past the guess */
    uint64_t not_before;          /* no plan before this node_now_ms() (after a failed write) */
    int64_t epoch_end, epoch_len; /* the newest epoch end a worker reported, and its length */
    int64_t final_wanted; /* a worker's last clock to checkpoint once the commit in progress is done
                             (-1: none) */
    int64_t final_clock;  /* the final checkpoint's clock once asked for (-1: none) */
    int force_full, finished;
    uint64_t plans, committed_count, skipped, given_up;
    int64_t committed; /* the newest clock committed */
    /* per server: 0 alive (a replacement too), else the how-many-th death
     * of the job it was */
    uint32_t *death_index;
    uint32_t ndeaths;
    known_part **chain; /* per server: its parts since its newest full one */
    size_t *chain_len, *chain_cap;
    int lockfd;
    /* The committer thread: makes the parts durable, writes the manifest and
     * removes old directories, off the I/O thread (which the workers' clocks
     * wait on), then says it is done (done, and a poke of the timer).
     * keep_from: the oldest directory the previous manifest needs. */
    pthread_t committer;
    int committer_running, stopping;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    commit_job *job;
    _Atomic int done;
    int64_t keep_from;
};

/* ---- chains ---- */

static void chain_add(ft_sched *s, int64_t clock, const ft_part *p)
{
    uint32_t r = p->rank;
    if (s->chain_len[r] == s->chain_cap[r]) {
        size_t cap = s->chain_cap[r] ? 2 * s->chain_cap[r] : 8;
        known_part *g = realloc(s->chain[r], cap * sizeof *g);
        if (!g) return; /* the commit below then finds the chain short and refuses */
        s->chain[r] = g;
        s->chain_cap[r] = cap;
    }
    s->chain[r][s->chain_len[r]++] = (known_part){clock, *p};
}

/* Drop server r's parts before its newest full part at or before `clock`:
 * a manifest of that clock or a later one starts its chain there. */
static void chain_trim(ft_sched *s, uint32_t r, int64_t clock)
{
    size_t from = 0;
    for (size_t i = 0; i < s->chain_len[r]; i++)
        if (s->chain[r][i].clock <= clock && s->chain[r][i].part.full) from = i;
    if (!from) return;
    memmove(s->chain[r], s->chain[r] + from, (s->chain_len[r] - from) * sizeof *s->chain[r]);
    s->chain_len[r] -= from;
}

/* Forget the parts of a given-up clock. */
static void chain_forget(ft_sched *s, uint32_t servers, int64_t clock)
{
    for (uint32_t r = 0; r < servers; r++)
        while (s->chain_len[r] && s->chain[r][s->chain_len[r] - 1].clock == clock)
            s->chain_len[r]--;
}

/* The oldest checkpoint clock a manifest's parts live under. */
static int64_t oldest_dir(const ft_manifest *m)
{
    int64_t oldest = m->clock;
    for (size_t i = 0; i < m->nparts; i++)
        if (ft_part_clock(&m->parts[i]) < oldest) oldest = ft_part_clock(&m->parts[i]);
    return oldest;
}

/* ---- the directory ---- */

/* The ckpt-<clock> directories of DIR, ascending (malloc'd; *n of them). */
static int64_t *list_ckpts(int dirfd, size_t *n)
{
    *n = 0;
    int fd = dup(dirfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return NULL;
    }
    rewinddir(d);
    int64_t *v = NULL;
    size_t cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        int64_t c;
        if (!ft_ckpt_name(e->d_name, &c)) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *g = realloc(v, cap * sizeof *g);
            if (!g) break;
            v = g;
        }
        size_t i = (*n)++;
        while (i && v[i - 1] > c) v[i] = v[i - 1], i--;
        v[i] = c;
    }
    closedir(d);
    return v;
}

/* Remove the checkpoint directories older than `before` (only Loom's files
 * in them; dir.c), the newest first: a manifest names parts of its own
 * clock or older, so whenever the committer is stopped, every manifest
 * left names only directories still there. */
static void remove_old(ft *f, int64_t before)
{
    size_t n;
    int64_t *c = list_ckpts(f->dirfd, &n);
    for (size_t i = n; i-- > 0;)
        if (c[i] < before) ft_dir_remove_ckpt(f->dirfd, f->dir, c[i]);
    free(c);
}

/* Whether DIR/ckpt-<clock> holds a MANIFEST (was committed). */
static int has_manifest(const ft *f, int64_t clock)
{
    struct stat st;
    char manifest[48];
    snprintf(manifest, sizeof manifest, "ckpt-%012" PRId64 "/MANIFEST", clock);
    return !fstatat(f->dirfd, manifest, &st, AT_SYMLINK_NOFOLLOW);
}

/* A new job in this directory: finish the removals a run before it was
 * killed in, and remove what it left uncommitted (a crash mid-checkpoint),
 * except the directories the newest committed checkpoint needs, so that the
 * directory holds committed checkpoints only. */
static void tidy(ft *f, const ft_manifest *newest)
{
    ft_dir_remove_gone(f->dirfd, f->dir);
    size_t n;
    int64_t *c = list_ckpts(f->dirfd, &n);
    for (size_t i = 0; i < n; i++) {
        int needed = 0;
        for (size_t k = 0; newest && k < newest->nparts && !needed; k++)
            needed = ft_part_clock(&newest->parts[k]) == c[i];
        if (needed || has_manifest(f, c[i])) continue;
        if (!ft_dir_remove_ckpt(f->dirfd, f->dir, c[i]))
            log_info("removed %s/ckpt-%012" PRId64 ": a checkpoint a run before left uncommitted",
                     f->dir, c[i]);
    }
    free(c);
}

/* A node's late word (a part, a skip) of `clock`, a plan given up: its
 * directory goes, unless it is newer than any plan (a forgery) or holds a
 * manifest (a committed checkpoint: a server declared dead that wrote its
 * part after the commit went on without it). Given-up directories older
 * than the newest commit go with remove_old() anyway. */
static void remove_late(ft *f, int64_t clock)
{
    if (clock > f->sched->max_plan || clock <= f->sched->committed || has_manifest(f, clock))
        return;
    ft_dir_remove_ckpt(f->dirfd, f->dir, clock);
}

/* fsync dirfd/path (a directory: O_DIRECTORY in flags), never through a link. */
static int sync_at(int dirfd, const char *path, int flags)
{
    int fd = openat(dirfd, path, flags | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* ---- the committer thread ---- */

static int write_manifest(ft *f, commit_job *j)
{
    ft_sched *s = f->sched;
    char dir[32];
    int rc = 0;
    for (size_t i = 0; i < j->m.nparts && !rc; i++) {
        snprintf(dir, sizeof dir, "%.17s", j->m.parts[i].path);
        if (sync_at(f->dirfd, j->m.parts[i].path, O_RDONLY) ||
            sync_at(f->dirfd, dir, O_RDONLY | O_DIRECTORY)) {
            log_error("checkpoint at clock %" PRId64 " not committed: cannot sync %s/%s: %s",
                      j->clock, f->dir, j->m.parts[i].path, strerror(errno));
            rc = LOOM_EIO;
        }
    }
    int sub = -1;
    if (!rc) rc = ft_dir_ckpt(f->dirfd, f->dir, j->clock, 0, &sub);
    ft_file file;
    char shown[PATH_MAX + 32];
    snprintf(shown, sizeof shown, "%s/ckpt-%012" PRId64, f->dir, j->clock);
    if (!rc) rc = ft_file_open(&file, sub, shown, "MANIFEST");
    if (!rc) {
        rc = ft_file_write(&file, j->text, j->len);
        if (rc)
            ft_file_abort(&file);
        else
            rc = ft_file_commit(&file, 1);
    }
    if (sub >= 0) close(sub);
    if (rc) {
        log_error("checkpoint at clock %" PRId64 " not committed", j->clock);
        return rc;
    }
    log_info("checkpoint at clock %" PRId64 " committed (%s/MANIFEST)", j->clock, shown);
    remove_old(f, j->oldest < s->keep_from ? j->oldest : s->keep_from);
    s->keep_from = j->oldest;
    return 0;
}

static void *committer_main(void *arg)
{
    ft *f = arg;
    ft_sched *s = f->sched;
    log_set_tag("scheduler 0");
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->job && !s->stopping) pthread_cond_wait(&s->cv, &s->mu);
        commit_job *j = s->job;
        if (!j) break;
        pthread_mutex_unlock(&s->mu);
        int rc = write_manifest(f, j);
        free(j->text);
        ft_manifest_free(&j->m);
        free(j);
        pthread_mutex_lock(&s->mu);
        s->job = NULL;
        atomic_store(&s->done, rc ? 2 : 1);
        if (!s->stopping) node_timer_poke(f->node, &ft_layer_def);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- planning ---- */

/* A node said it was at job clock `clock` at `now`. The pace is measured
 * over 50 ms or more: reports come in bursts (every node's part of one
 * checkpoint), and a millisecond between two of them says nothing. */
static void heard(ft_sched *s, int64_t clock, uint64_t now)
{
    if (clock <= s->horizon) return;
    s->horizon = clock;
    s->horizon_ms = now;
    if (now < s->pace_ms + 50) return;
    double r = (double)(clock - s->pace_clock) / (double)(now - s->pace_ms);
    s->rate = s->rate > 0 ? 0.5 * s->rate + 0.5 * r : r;
    s->pace_clock = clock;
    s->pace_ms = now;
}

/* The clock of the next checkpoint the interval allows after the job's
 * guessed clock; -1 if none is due yet (wake: when to look again). */
static int64_t next_clock(ft *f, uint64_t now, uint64_t *wake)
{
    ft_sched *s = f->sched;
    double ahead = s->rate * (double)(now - s->horizon_ms);
    int64_t guess = s->horizon + (ahead < 1e12 ? (int64_t)ahead : (int64_t)1e12) + s->lead;
    if (guess < s->last_plan) guess = s->last_plan;
    int64_t step, from, c;
    switch (f->every.unit) {
    case 's':
        if (now < s->last_plan_ms + (uint64_t)f->every.n * 1000) {
            *wake = s->last_plan_ms + (uint64_t)f->every.n * 1000;
            return -1;
        }
        return guess + 1;
    case 'e':
        if (!s->epoch_len) return -1; /* no epoch has ended yet */
        step = f->every.n * s->epoch_len;
        from = s->epoch_end;
        break;
    default:
        step = f->every.n;
        from = 0;
        break;
    }
    c = guess < from ? from + step : from + ((guess - from) / step + 1) * step;
    /* The interval's checkpoints between the last one and this one: due
     * while one was in progress, or passed before a plan reached the job. */
    if (s->plans && c - s->last_plan > step)
        s->skipped += (uint64_t)((c - s->last_plan) / step - 1);
    return c;
}

static void send_plan(ft *f)
{
    ft_sched *s = f->sched;
    msg_header h = {.type = MSG_CKPT_PLAN, .clock = s->plan, .a = (uint64_t)s->plan_full};
    for (uint32_t r = 0; r < f->servers + f->workers; r++)
        node_send(f->node,
                  r < f->servers ? node_server_id((int)f->servers, (int)r)
                                 : node_worker_id((int)f->servers, (int)(r - f->servers)),
                  &h, NULL, 0);
}

/* Plan the next checkpoint if none is in progress and one is due; returns
 * when to look again (the timer's next run). */
static uint64_t plan_next(ft *f, uint64_t now)
{
    ft_sched *s = f->sched;
    uint64_t wake = UINT64_MAX;
    if (s->plan >= 0 || s->finished) return wake;
    if (!node_assembled(f->node)) return now + 10; /* no node could hear a plan yet */
    int64_t c = s->final_wanted;
    s->final_wanted = -1;
    if (c < 0 && now < s->not_before) return s->not_before;
    if (c < 0) c = next_clock(f, now, &wake);
    if (c < 0) return wake;
    s->plan = c;
    s->plan_full = s->force_full || s->plans % (uint64_t)f->full_every == 0;
    s->force_full = 0;
    s->plans++;
    s->last_plan = c;
    s->last_plan_ms = now;
    if (c > s->max_plan) s->max_plan = c;
    memset(s->parts, 0, (f->servers + f->workers) * sizeof *s->parts);
    send_plan(f);
    return wake;
}

/* Give the plan in progress up: its files go, the next plan is full. */
static void give_up(ft *f, const char *why, int64_t clock, int sender_rank, int sender_role)
{
    ft_sched *s = f->sched;
    s->given_up++;
    if (s->given_up <= 5 || !(s->given_up & (s->given_up - 1)))
        log_info("checkpoint at clock %" PRId64 " given up: %s %d %s (%" PRIu64 " given up so far)",
                 clock, sender_role == LOOM_SERVER ? "server" : "worker", sender_rank, why,
                 s->given_up);
    chain_forget(s, f->servers, clock);
    ft_dir_remove_ckpt(f->dirfd, f->dir, clock);
    s->plan = -1;
    s->force_full = 1;
    if (clock == s->final_clock) { /* the workers waiting for it go on without it */
        msg_header h = {.type = MSG_CKPT_PLAN, .clock = clock, .b = 1};
        for (uint32_t w = 0; w < f->workers; w++)
            node_send(f->node, node_worker_id((int)f->servers, (int)w), &h, NULL, 0);
        s->finished = 1;
    }
}

/* ---- the commit ---- */

/* Whether the plan has every part it needs: every worker's, and every
 * server's but a dead one's whose ranges the others' parts hold (each was
 * cut knowing of its death; ps.h). Server parts cut after different numbers
 * of handbacks may hold a moved range twice or not at all: such a
 * checkpoint is given up. */
static int complete(const ft *f, int *mixed)
{
    const ft_sched *s = f->sched;
    *mixed = 0;
    for (uint32_t w = 0; w < f->workers; w++)
        if (!s->parts[f->servers + w].kind) return 0;
    uint32_t known = UINT32_MAX;
    int first = -1;
    for (uint32_t r = 0; r < f->servers; r++) {
        if (!s->parts[r].kind) continue;
        if (s->known[r] < known) known = s->known[r];
        if (first < 0) first = (int)r;
        if (s->handbacks[r] != s->handbacks[first]) *mixed = 1;
    }
    for (uint32_t r = 0; r < f->servers; r++)
        if (!s->parts[r].kind && (!s->death_index[r] || s->death_index[r] > known)) return 0;
    return !*mixed;
}

/* Every part of the plan is on disk: hand its manifest to the committer. It
 * names each server's newest full part at or before the clock and the parts
 * after it; a dead server that wrote no part is named as moved (its ranges
 * are in the parts of the servers that took them over). */
static void commit(ft *f)
{
    ft_sched *s = f->sched;
    commit_job *j = calloc(1, sizeof *j);
    size_t cap = f->workers;
    for (uint32_t r = 0; r < f->servers; r++) cap += s->chain_len[r];
    if (j) j->m.parts = malloc((cap ? cap : 1) * sizeof *j->m.parts);
    if (j && s->ndeaths) j->m.moved = calloc(f->servers, 1);
    ft_manifest *m = j ? &j->m : NULL;
    if (!j || !m->parts || (s->ndeaths && !m->moved)) goto nomem;
    m->clock = s->plan;
    m->servers = f->servers;
    m->workers = f->workers;
    snprintf(m->model, sizeof m->model, "%s", f->model);
    for (uint32_t r = 0; r < f->servers; r++) {
        if (!s->parts[r].kind) {
            m->moved[r] = 1;
            continue;
        }
        chain_trim(s, r, s->plan); /* parts before its newest full one: needed no more */
        for (size_t i = 0; i < s->chain_len[r] && s->chain[r][i].clock <= s->plan; i++)
            m->parts[m->nparts++] = s->chain[r][i].part;
    }
    for (uint32_t w = 0; w < f->workers; w++) m->parts[m->nparts++] = s->parts[f->servers + w];
    j->clock = s->plan;
    j->oldest = oldest_dir(m);
    j->text = ft_manifest_format(m, &j->len);
    if (!j->text) goto nomem;
    s->committing = 1;
    pthread_mutex_lock(&s->mu);
    s->job = j;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return;
nomem:
    if (j) ft_manifest_free(&j->m);
    free(j);
    give_up(f, "(no memory for the manifest)", s->plan, 0, LOOM_SCHEDULER);
}

/* A dead server whose part the plan can never do without: it wrote none,
 * and a live server's part came cut before it knew of that death (a part is
 * sent once, so it never will hold the dead one's ranges); -1 if none. */
static int dead_part_missing(const ft *f)
{
    const ft_sched *s = f->sched;
    uint32_t known = UINT32_MAX;
    for (uint32_t r = 0; r < f->servers; r++)
        if (s->parts[r].kind && s->known[r] < known) known = s->known[r];
    for (uint32_t r = 0; r < f->servers; r++)
        if (!s->parts[r].kind && s->death_index[r] && s->death_index[r] > known) return (int)r;
    return -1;
}

static void check_plan(ft *f)
{
    ft_sched *s = f->sched;
    int mixed, dead;
    if (s->plan < 0 || s->committing) return;
    if (complete(f, &mixed))
        commit(f);
    else if (mixed)
        give_up(f, "cut it on the other side of a handback", s->plan, 0, LOOM_SERVER);
    else if ((dead = dead_part_missing(f)) >= 0)
        give_up(f, "died before writing its part, which parts cut before its death do not hold",
                s->plan, dead, LOOM_SERVER);
    if (s->plan < 0) node_timer_poke(f->node, &ft_layer_def);
}

uint64_t ft_sched_tick(ft *f, uint64_t now)
{
    ft_sched *s = f->sched;
    int done = atomic_exchange(&s->done, 0);
    if (done && s->committing) {
        s->committing = 0;
        if (done == 1) {
            s->committed = s->plan;
            s->committed_count++;
            s->lead /= 2;
        } else { /* the manifest could not be written: nothing may build on this one */
            chain_forget(s, f->servers, s->plan);
            ft_dir_remove_ckpt(f->dirfd, f->dir, s->plan);
            s->force_full = 1;
            s->not_before = now + 1000;
        }
        s->plan = -1;
    }
    return plan_next(f, now);
}

/* ---- messages ---- */

/* The role and rank of a message's sender (a server or a worker), -1 if neither. */
static int sender(loom_node *n, const node_msg *m, int *rank)
{
    int role = node_peer_role(n, m->from, rank);
    return role == LOOM_SERVER || role == LOOM_WORKER ? role : -1;
}

static void on_part(loom_node *n, void *ctx, node_msg *m)
{
    ft *f = ctx;
    ft_sched *s = f->sched;
    int rank;
    int role = sender(n, m, &rank);
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
    if (role < 0 || rd.bad || rd.left || m->h.clock <= 0 ||
        p.kind != (role == LOOM_SERVER ? FT_SERVER : FT_WORKER) || p.rank != (uint32_t)rank ||
        p.full > 1 || strcmp(p.path, want) || m->h.b > s->ndeaths || m->h.req > UINT32_MAX) {
        node_drop(n, m, "malformed CKPT_PART");
        return;
    }
    heard(s, m->h.clock, node_now_ms());
    if (m->h.clock != s->plan || s->committing) {
        /* A part of a plan given up, written after its files were removed. */
        if (m->h.clock != s->plan) remove_late(f, m->h.clock);
        return;
    }
    size_t slot = (role == LOOM_SERVER ? 0 : f->servers) + (size_t)rank;
    if (s->parts[slot].kind) {
        node_drop(n, m, "CKPT_PART sent twice");
        return;
    }
    if (role == LOOM_SERVER && !p.full && s->plan_full) {
        node_drop(n, m, "CKPT_PART incremental where the plan asked for every row");
        return;
    }
    s->parts[slot] = p;
    if (role == LOOM_SERVER) {
        s->known[rank] = (uint32_t)m->h.b;
        s->handbacks[rank] = (uint32_t)m->h.req;
        chain_add(s, m->h.clock, &p);
    }
    check_plan(f);
}

static void on_skip(loom_node *n, void *ctx, node_msg *m)
{
    ft *f = ctx;
    ft_sched *s = f->sched;
    int rank;
    int role = sender(n, m, &rank);
    if (role < 0 || m->h.clock <= 0 || m->h.b > FT_SKIP_UNSAFE || m->h.a > INT64_MAX) {
        node_drop(n, m, "malformed CKPT_SKIP");
        return;
    }
    uint64_t now = node_now_ms();
    if (m->h.a) heard(s, (int64_t)m->h.a - 1, now);
    /* A worker finished, or a server's every worker: the job is ending. */
    if (m->h.b == FT_SKIP_FINISHED) s->finished = 1;
    if (m->h.clock != s->plan || s->committing) {
        if (m->h.clock != s->plan) remove_late(f, m->h.clock);
        return;
    }
    static const char *const why[] = {"was past it", "could not write its part",
                                      "finished before it", "could not cut exactly there"};
    if (m->h.b == FT_SKIP_PASSED) {
        /* Twice the lead, up to about a second of the job's pace: beyond,
         * what is missing is not lead but a guess of the pace. */
        double second = s->rate * 1000 < 1e9 ? s->rate * 1000 : 1e9;
        int64_t cap = second > 64 ? (int64_t)second : 64;
        s->lead = s->lead ? (2 * s->lead < cap ? 2 * s->lead : cap) : 1;
    }
    if (m->h.b == FT_SKIP_FAILED) s->not_before = now + 1000;
    give_up(f, why[m->h.b], m->h.clock, rank, role);
    node_timer_poke(n, &ft_layer_def);
}

static void on_epoch(loom_node *n, void *ctx, node_msg *m)
{
    ft *f = ctx;
    ft_sched *s = f->sched;
    int rank;
    if (sender(n, m, &rank) != LOOM_WORKER || m->h.clock <= 0 || !m->h.a ||
        m->h.a > (uint64_t)m->h.clock) {
        node_drop(n, m, "malformed CKPT_EPOCH");
        return;
    }
    heard(s, m->h.clock, node_now_ms());
    int first = !s->epoch_len;
    s->epoch_end = m->h.clock;
    s->epoch_len = (int64_t)m->h.a;
    if (first) node_timer_poke(n, &ft_layer_def);
}

/* A worker's last clock: made the final checkpoint, ahead of any other.
 * One being committed is finished first (its parts are all on disk); one
 * still collecting parts is given up for it. */
static void on_final(loom_node *n, void *ctx, node_msg *m)
{
    ft *f = ctx;
    ft_sched *s = f->sched;
    int rank;
    if (sender(n, m, &rank) != LOOM_WORKER || m->h.clock <= 0) {
        node_drop(n, m, "malformed CKPT_FINAL");
        return;
    }
    int64_t c = m->h.clock;
    heard(s, c, node_now_ms());
    if (c == s->plan || c == s->final_wanted) return; /* asked for by another worker already */
    if (c <= s->committed) {                          /* nothing newer to commit: say no */
        msg_header h = {.type = MSG_CKPT_PLAN, .clock = c, .b = 1};
        node_send(n, m->from, &h, NULL, 0);
        return;
    }
    if (s->plan >= 0 && !s->committing)
        give_up(f, "made way for the final checkpoint", s->plan, rank, LOOM_WORKER);
    s->final_clock = c; /* give_up() of another clock leaves it */
    s->final_wanted = c;
    s->finished = 0;
    node_timer_poke(n, &ft_layer_def);
}

/* The node's failover subscriber (node_add_failover, after the ps layer's,
 * which decides): the job went on without node `id`; a server's death
 * counts in the plan. It has no say in whether the job goes on. */
static int on_server_death(loom_node *n, void *ctx, uint32_t id)
{
    ft *f = ctx;
    int rank;
    if (node_peer_role(n, id, &rank) != LOOM_SERVER) return 1;
    f->sched->death_index[rank] = ++f->sched->ndeaths;
    check_plan(f);
    return 1;
}

/* A replacement registered for dead server rank `rank` (rejoin_coord.c,
 * the registry's hook `joining`, before the registry sends it its tables).
 * It names its parts by the job's clocks, which it learns here (CKPT_BASE,
 * before any plan): in a resumed job, the clock this job resumed at, which
 * LOOM_RESUME cannot tell it (the directory's newest checkpoint may be one
 * this job committed since). */
void ft_sched_base(ft *f, int rank)
{
    msg_header h = {.type = MSG_CKPT_BASE, .clock = f->base};
    int rc = node_send(f->node, node_server_id((int)f->servers, rank), &h, NULL, 0);
    if (rc)
        log_error("cannot tell server %d's replacement the job's clock (%s): it will write no "
                  "checkpoint part, and no checkpoint will be committed",
                  rank, loom_strerror(rc));
}

/* The node's rejoin subscriber (node_add_rejoin, after the ps layer's,
 * which has sent the replacement its tables): a replacement registered for
 * dead server node `id`, and has been told the job's clock (ft_sched_base).
 * From now on a checkpoint needs its part: it is master of nothing until it
 * is back, but then of a range whose other holders die, and its part says
 * how many deaths it knew of like any other. A plan made before it joined
 * is given up: the replacement never heard of it. */
static void on_server_rejoin(loom_node *n, void *ctx, uint32_t id)
{
    ft *f = ctx;
    ft_sched *s = f->sched;
    int rank;
    if (node_peer_role(n, id, &rank) != LOOM_SERVER) return;
    s->death_index[rank] = 0;
    if (s->plan >= 0 && !s->committing) {
        give_up(f, "was replaced", s->plan, rank, LOOM_SERVER);
        node_timer_poke(f->node, &ft_layer_def);
    }
}

/* ---- attach ---- */

int ft_sched_attach(ft *f, const ft_manifest *resumed)
{
    loom_node *n = f->node;
    ft_sched *s = calloc(1, sizeof *s);
    if (!s) return LOOM_ENOMEM;
    f->sched = s;
    s->lockfd = -1;
    s->plan = -1;
    s->committed = -1;
    s->final_wanted = s->final_clock = -1;
    s->last_plan = s->horizon = s->epoch_end = f->base;
    s->last_plan_ms = s->horizon_ms = s->pace_ms = node_now_ms();
    s->pace_clock = f->base;
    s->force_full = 1;
    size_t ns = f->servers ? f->servers : 1;
    s->parts = calloc(f->servers + f->workers + 1, sizeof *s->parts);
    s->known = calloc(ns, sizeof *s->known);
    s->handbacks = calloc(ns, sizeof *s->handbacks);
    s->death_index = calloc(ns, sizeof *s->death_index);
    s->chain = calloc(ns, sizeof *s->chain);
    s->chain_len = calloc(ns, sizeof *s->chain_len);
    s->chain_cap = calloc(ns, sizeof *s->chain_cap);
    if (!s->parts || !s->known || !s->handbacks || !s->death_index || !s->chain || !s->chain_len ||
        !s->chain_cap)
        return LOOM_ENOMEM;
    int rc = ft_dir_open(f->dir, 1, &f->dirfd);
    if (!rc) rc = ft_dir_lock(f->dirfd, f->dir, &s->lockfd);
    if (rc) return rc;
    /* What a crashed run left is tidied away; the chains go on from the
     * resumed manifest's (its parts are whole, or the resume refused). */
    ft_manifest newest = {0};
    char why[256];
    int have = !resumed && !ft_manifest_load(f->dir, -1, &newest, why, sizeof why);
    tidy(f, resumed ? resumed : have ? &newest : NULL);
    if (have) ft_manifest_free(&newest);
    if (resumed) {
        for (size_t i = 0; i < resumed->nparts; i++)
            if (resumed->parts[i].kind == FT_SERVER)
                chain_add(s, resumed->clock, &resumed->parts[i]);
        s->keep_from = oldest_dir(resumed);
        s->committed = resumed->clock;
    }
    node_set_handler(n, MSG_CKPT_PART, on_part, f);
    node_set_handler(n, MSG_CKPT_SKIP, on_skip, f);
    node_set_handler(n, MSG_CKPT_EPOCH, on_epoch, f);
    node_set_handler(n, MSG_CKPT_FINAL, on_final, f);
    rc = node_add_failover(n, on_server_death, f);
    if (!rc) rc = node_add_rejoin(n, on_server_rejoin, f);
    if (rc) return rc;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->committer, NULL, committer_main, f)) return LOOM_ENOMEM;
    s->committer_running = 1;
    /* The first plan is made already: every node takes it from the start
     * (ft_first_plan), so nothing is sent. */
    int64_t first = ft_first_plan(f);
    if (first > 0) {
        s->plan = s->last_plan = s->max_plan = first;
        s->plan_full = 1;
        s->force_full = 0;
        s->plans = 1;
    }
    node_timer_poke(n, &ft_layer_def); /* ft.c's timer */
    return 0;
}

void ft_sched_destroy(ft *f)
{
    ft_sched *s = f->sched;
    if (s->committer_running) { /* the job is over: finish the commit queued */
        pthread_mutex_lock(&s->mu);
        s->stopping = 1;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->committer, NULL);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        int done = atomic_load(&s->done);
        if (done == 1) s->committed = s->plan;
    }
    /* A plan the job ended before committing leaves nothing behind. */
    if (f->dirfd >= 0 && s->plan >= 0 && s->plan != s->committed)
        ft_dir_remove_ckpt(f->dirfd, f->dir, s->plan);
    if (f->dirfd >= 0 && (s->plans || s->skipped))
        log_info("checkpoints: %" PRIu64 " committed, %" PRIu64 " given up, %" PRIu64
                 " skipped (due while one was in progress)",
                 s->committed_count + (atomic_load(&s->done) == 1), s->given_up, s->skipped);
    if (s->lockfd >= 0) close(s->lockfd);
    for (uint32_t r = 0; s->chain && r < f->servers; r++) free(s->chain[r]);
    free(s->chain);
    free(s->chain_len);
    free(s->chain_cap);
    free(s->parts);
    free(s->known);
    free(s->handbacks);
    free(s->death_index);
    free(s);
    f->sched = NULL;
}
