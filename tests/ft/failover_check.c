/* failover_check: the program of the server-failover and fault-loop tests
 * (test_failover.sh, test_failover_ckpt.sh, test_fault_loop.sh, test_restart_exact.sh,
 * test_worker_error_exit.sh, test_rejoin.sh).
 *
 *   failover_check bsp|ssp|asp --pid-dir DIR [--clocks N] [--pace-ms MS]
 *                  [--workers-may-die] [--error-exit W:C] [--finish-early W:C] [--stamps 1]
 *                  [--end-file FILE] [--save-may-fail]
 *   failover_check check CKPT_DIR WORKERS
 *
 * Every node writes DIR/<role>-<rank>.pid once the job is assembled. Each
 * worker then runs N clocks; in clock c it pushes 50 known int64 deltas into a
 * "sum" table of 1000 keys (so every range of the ring gets some), pulls every
 * key, prints "worker W clock c" every 10 clocks and sleeps MS (pacing only, so
 * that a test can kill a process mid-run; nothing waits on it). Worker w adds
 * c + 1 in clock c, shifted into a bit field of its own (FIELD_BITS bits from
 * bit FIELD_BITS * w), so every key's value is the sum of separate per-worker
 * parts. At the end, after a barrier, every worker pulls the table and
 * compares each worker's part of each key with the total it computes itself:
 * a lost update makes a part too small, one applied twice too large. Exit 0
 * and "exact" when every part matches.
 *
 * --workers-may-die (run with LOOM_ON_WORKER_FAILURE=continue): a worker may
 * be killed. Each worker then waits, every clock, until its pushes are
 * acknowledged (loom_flush, loom_wait) and the clock is ended (loom_clock),
 * and only then appends the clock to DIR/worker-W.clocks (one write(2) a
 * line: a SIGKILL leaves the file whole up to its last line; no fsync, since
 * only the process dies, not the machine). A worker whose file ends before
 * clock N-1 was lost after its last clock L there: docs/FAULTS.md ("What is
 * kept, exactly") says its pushes of every clock up to L stay applied, and
 * of clock L + 1 a part may (BSP: the servers whose CLOCK it reached; SSP,
 * ASP: the pushes that arrived), so its part of each key must be its pushes
 * of clocks 0..L, plus its push of clock L + 1 to that key or not.
 *
 * --error-exit W:C: worker W exits with status 1 (an application error, not a
 * signal) after clock C, without loom_finalize.
 *
 * --finish-early W:C: worker W stops after clock C and finishes (loom_finalize,
 * no barrier, no check) while the others go on; their check takes its part to
 * be its pushes of clocks 0..C.
 *
 * --stamps 1: each worker prints every clock's wall-clock times (seconds, to
 * the ms) before its push and when its loom_clock returned; the failover
 * benchmark (bench/run_faults.sh) measures from a kill to these.
 *
 * --end-file FILE: the job runs until a test decides to end it, however long
 * its faults took: before each clock a worker looks for FILE, and once it is
 * there takes the number in it as N (its clocks so far must not exceed it, or
 * the worker fails saying so), so every worker ends after the same N clocks.
 * (test_fault_mix.sh: its faults take as long as the machine's load makes
 * them, so no fixed N fits.)
 *
 * --save-may-fail: a checkpoint the worker cannot save (a full disk) is
 * reported ("worker W: checkpoint at clock C not saved: ...") and the worker
 * goes on; that checkpoint is then never committed. Without it such a
 * failure fails the worker, as it fails the apps.
 *
 * With checkpoints (LOOM_CHECKPOINT_DIR ...), a worker saves its job clock
 * whenever one is due; resumed (LOOM_RESUME), it goes on from the clock of the
 * checkpoint, so the totals at the end are still those of clocks 0..N-1.
 * `check` opens every committed checkpoint of CKPT_DIR and requires every key
 * to hold exactly the pushes of the clocks before its clock, and every worker
 * to have saved that clock. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <loom/loom.h>

#define NKEYS  1000
#define NPUSH  50
#define NPULLS NKEYS
/* Three workers' parts fit an int64: a part is at most the sum of c + 1 over
 * one worker's pushes to one key (about N / 20 of them: key_of), so about
 * N * N / 20, below 2^21 for N <= 5000 clocks. */
#define FIELD_BITS  21
#define MAX_WORKERS 3

static uint64_t key_of(int w, int c, int j)
{
    return (uint64_t)((c * 37 + w * 101 + j * 13) % NKEYS);
}

/* Worker w's part of key k: its bit field of the table's value. */
static int64_t part_of(int64_t value, int w)
{
    return (int64_t)(((uint64_t)value >> (FIELD_BITS * w)) & ((UINT64_C(1) << FIELD_BITS) - 1));
}

static int64_t delta_of(int w, int c)
{
    return (int64_t)((uint64_t)(c + 1) << (FIELD_BITS * w));
}

/* want[k]: the sum of every worker's pushes to key k in the clocks before `clocks`. */
static void totals(int workers, int64_t clocks, int64_t *want)
{
    memset(want, 0, NKEYS * sizeof *want);
    for (int w = 0; w < workers; w++)
        for (int c = 0; c < clocks; c++)
            for (int j = 0; j < NPUSH; j++) want[key_of(w, c, j)] += delta_of(w, c);
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "failover_check: %s: %s (%s)\n", what, loom_strerror(rc), loom_last_error());
    return 1;
}

static int write_pid(const char *dir, loom_node *n)
{
    static const char *const roles[] = {"scheduler", "server", "worker"};
    char path[512], tmp[520];
    snprintf(path, sizeof path, "%s/%s-%d.pid", dir, roles[loom_node_role(n)], loom_rank(n));
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return 1;
    fprintf(f, "%ld\n", (long)getpid());
    return fclose(f) || rename(tmp, path);
}

struct options {
    loom_consistency consistency;
    const char *dir;
    int clocks, pace_ms;
    int workers_may_die;
    int stamps;
    int save_may_fail;
    const char *end_file;          /* --end-file; NULL: none */
    int exit_worker, exit_clock;   /* --error-exit W:C; -1: none */
    int early_worker, early_clock; /* --finish-early W:C; -1: none */
};

/* The last clock DIR/worker-W.clocks records (-1 if none): the worker's last
 * clock whose pushes were acknowledged and which loom_clock() ended. */
static int last_clock_of(const char *dir, int w)
{
    char path[512];
    snprintf(path, sizeof path, "%s/worker-%d.clocks", dir, w);
    FILE *f = fopen(path, "r");
    int last = -1, c;
    while (f && fscanf(f, "%d", &c) == 1) last = c;
    if (f) fclose(f);
    return last;
}

/* One clock: push, pull every key, end the clock; with --workers-may-die,
 * also wait for the pushes' acknowledgement before ending the clock, and
 * afterwards record the clock in the file whose fd is progress. */
static int run_clock(loom_node *n, loom_table *t, const struct options *o, int c, int progress)
{
    static uint64_t all[NKEYS];
    static int64_t got[NKEYS];
    uint64_t keys[NPUSH];
    int64_t vals[NPUSH];
    int rank = loom_rank(n), rc;
    for (int k = 0; k < NKEYS; k++) all[k] = (uint64_t)k;
    for (int j = 0; j < NPUSH; j++) {
        keys[j] = key_of(rank, c, j);
        vals[j] = delta_of(rank, c);
    }
    if ((rc = loom_push(t, keys, NPUSH, vals))) return fail("push", rc);
    /* Sent before the pull, so that a kill during the pull finds the pushes
     * on their way: some applied, some not. */
    loom_ts ts;
    if (o->workers_may_die && (rc = loom_flush(t, &ts))) return fail("flush", rc);
    if ((rc = loom_pull(t, all, NPULLS, got))) return fail("pull", rc);
    if (o->workers_may_die && (rc = loom_wait(n, ts))) return fail("flush", rc);
    if ((rc = loom_clock(n))) return fail("clock", rc);
    if (o->workers_may_die) {
        char line[32];
        int len = snprintf(line, sizeof line, "%d\n", c);
        if (write(progress, line, (size_t)len) != len) return fail("clocks file", LOOM_EINVAL);
    }
    return 0;
}

/* After the barrier: every worker's part of every key against its pushes.
 * Returns the number of wrong parts. */
static int check_table(loom_node *n, loom_table *t, const struct options *o)
{
    static uint64_t all[NKEYS];
    static int64_t got[NKEYS], want[NKEYS];
    int rank = loom_rank(n), bad = 0, rc;
    for (int k = 0; k < NKEYS; k++) all[k] = (uint64_t)k;
    if ((rc = loom_pull(t, all, NKEYS, got))) return fail("final pull", rc);
    for (int w = 0; w < loom_num_workers(n); w++) {
        int last = o->workers_may_die     ? last_clock_of(o->dir, w)
                   : w == o->early_worker ? o->early_clock
                                          : o->clocks - 1;
        int lost = o->workers_may_die && last < o->clocks - 1;
        memset(want, 0, sizeof want);
        for (int c = 0; c <= last; c++)
            for (int j = 0; j < NPUSH; j++) want[key_of(w, c, j)] += delta_of(w, c);
        /* A lost worker's clock last + 1 may be applied in part: each key it
         * pushed to then holds that push or not (every key once a clock). */
        uint8_t maybe[NKEYS] = {0};
        int torn = 0;
        if (lost)
            for (int j = 0; j < NPUSH; j++) maybe[key_of(w, last + 1, j)] = 1;
        for (int k = 0; k < NKEYS; k++) {
            int64_t part = part_of(got[k], w), base = part_of(want[k], w);
            if (maybe[k] && part == base + part_of(delta_of(w, last + 1), w)) {
                torn++;
            } else if (part != base && bad++ < 5) {
                fprintf(stderr,
                        "failover_check: worker %d: key %d holds %" PRId64 " of worker %d, its "
                        "pushes of clocks 0..%d sum to %" PRId64 "%s\n",
                        rank, k, part, w, last, base,
                        maybe[k] ? " (and its push of the next clock, if applied, more)" : "");
            }
        }
        if (lost)
            printf("worker %d: worker %d was lost after clock %d; %d of the %d pushes of its clock "
                   "%d applied\n",
                   rank, w, last, torn, NPUSH, last + 1);
    }
    return bad;
}

/* --end-file: 0 while FILE is absent; 1 once it set o->clocks; -1 (said why)
 * if this worker, before its clock c, is already past the end it names. */
static int read_end_file(struct options *o, int rank, int c)
{
    FILE *f = fopen(o->end_file, "r");
    if (!f) return 0;
    int end = -1;
    int got = fscanf(f, "%d", &end);
    fclose(f);
    if (got != 1) return 0; /* still being written: the test renames it in place, but be safe */
    if (end < c || end > 5000) {
        fprintf(stderr,
                "failover_check: worker %d: %s says end after clock %d, but it is at clock %d\n",
                rank, o->end_file, end, c);
        return -1;
    }
    o->clocks = end;
    printf("worker %d: the job ends after %d clocks (%s)\n", rank, end, o->end_file);
    fflush(stdout);
    return 1;
}

static int run_worker(loom_node *n, struct options *o)
{
    int rank = loom_rank(n);
    if (loom_num_workers(n) > MAX_WORKERS) return fail("more than 3 workers", LOOM_EINVAL);
    loom_table_opts to = LOOM_TABLE_OPTS_DEFAULT;
    to.type = LOOM_I64;
    to.consistency = o->consistency;
    to.staleness = o->consistency == LOOM_SSP ? 2 : 0;
    to.key_end = NKEYS;
    loom_table *t;
    int rc = loom_table_open(n, "failover", &to, &t);
    if (rc) return fail("open", rc);
    int progress = -1;
    if (o->workers_may_die) {
        char path[512];
        snprintf(path, sizeof path, "%s/worker-%d.clocks", o->dir, rank);
        progress = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
        if (progress < 0) return fail("clocks file", LOOM_EINVAL);
    }
    const void *state;
    size_t len;
    int64_t from = 0;
    if (!loom_checkpoint_resumed(n, &state, &len, NULL) && len == sizeof from)
        memcpy(&from, state, sizeof from);
    if (from) {
        printf("worker %d resumed at clock %" PRId64 "\n", rank, from);
        fflush(stdout);
    }
    int early = 0, ended = 0;
    for (int c = (int)from; c < o->clocks && !rc; c++) {
        if (o->end_file && !ended && (ended = read_end_file(o, rank, c)) < 0) return 1;
        if (c >= o->clocks) break;
        struct timespec start, end;
        clock_gettime(CLOCK_REALTIME, &start);
        rc = run_clock(n, t, o, c, progress);
        if (o->stamps) {
            clock_gettime(CLOCK_REALTIME, &end);
            printf("worker %d clock %d from %lld.%03ld to %lld.%03ld\n", rank, c,
                   (long long)start.tv_sec, start.tv_nsec / 1000000L, (long long)end.tv_sec,
                   end.tv_nsec / 1000000L);
            fflush(stdout);
        }
        int64_t next = c + 1;
        if (!rc && loom_checkpoint_due(n) && (rc = loom_checkpoint_save(n, &next, sizeof next))) {
            if (!o->save_may_fail) return fail("checkpoint", rc);
            printf("worker %d: checkpoint at clock %d not saved: %s (%s); going on\n", rank, c + 1,
                   loom_strerror(rc), loom_last_error());
            fflush(stdout);
            rc = 0;
        }
        if (c % 10 == 0) {
            printf("worker %d clock %d\n", rank, c);
            fflush(stdout);
        }
        if (rank == o->exit_worker && c == o->exit_clock) {
            printf("worker %d: exits with status 1 after clock %d, as asked\n", rank, c);
            exit(1);
        }
        if (rank == o->early_worker && c == o->early_clock) {
            printf("worker %d: finishes after clock %d, as asked\n", rank, c);
            fflush(stdout);
            early = 1;
            break;
        }
        struct timespec pace = {o->pace_ms / 1000, (long)(o->pace_ms % 1000) * 1000000L};
        nanosleep(&pace, NULL);
    }
    if (progress >= 0) close(progress);
    if (rc || early) return rc;
    if ((rc = loom_barrier(n))) return fail("barrier", rc);
    if (check_table(n, t, o)) return 1;
    printf("worker %d: %d clocks, all %d keys exact\n", rank, o->clocks, NKEYS);
    return 0;
}

typedef struct check {
    int bad, rows;
    int64_t clock;
    int64_t want[NKEYS];
} check;

static int check_row(void *ctx, uint64_t key, const void *row)
{
    check *c = ctx;
    int64_t v;
    memcpy(&v, row, sizeof v);
    c->rows++;
    if (key < NKEYS && v == c->want[key]) return 0;
    fprintf(stderr,
            "failover_check: checkpoint at clock %" PRId64 ": key %" PRIu64 " holds %" PRId64
            ", the pushes of the clocks before it sum to %" PRId64 "\n",
            c->clock, key, v, key < NKEYS ? c->want[key] : -1);
    c->bad = 1;
    return 1;
}

static const char *check_dir;
static int check_workers, checked, check_failed;

static void check_one(void *ctx, int64_t clock, int status)
{
    (void)ctx;
    if (status) return; /* partial or removed: only committed ones are promised */
    loom_checkpoint *ck;
    if (loom_checkpoint_open(check_dir, clock, &ck)) {
        fprintf(stderr, "failover_check: %s\n", loom_last_error());
        check_failed = 1;
        return;
    }
    static check c;
    c = (check){.clock = clock};
    totals(check_workers, clock, c.want);
    /* Keys no push reached are absent from a sparse table's part: every key
     * present must be exact, and every key pushed to must be present. */
    int pushed = 0;
    for (uint64_t k = 0; k < NKEYS; k++) pushed += c.want[k] != 0;
    if (loom_checkpoint_rows(ck, "failover", NULL, NULL, check_row, &c) || c.rows != pushed) {
        if (!c.bad)
            fprintf(stderr, "failover_check: checkpoint at clock %" PRId64 ": %d rows, not %d\n",
                    clock, c.rows, pushed);
        check_failed = 1;
    }
    for (int r = 0; r < check_workers; r++) {
        const void *st;
        size_t len;
        int64_t saved = -1;
        if (!loom_checkpoint_worker_state(ck, r, &st, &len) && len == sizeof saved)
            memcpy(&saved, st, sizeof saved);
        if (saved != clock) {
            fprintf(stderr,
                    "failover_check: checkpoint at clock %" PRId64
                    ": worker %d saved clock %" PRId64 "\n",
                    clock, r, saved);
            check_failed = 1;
        }
    }
    loom_checkpoint_close(ck);
    checked++;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "check")) {
        check_dir = argv[2];
        check_workers = atoi(argv[3]);
        if (loom_checkpoint_list(check_dir, check_one, NULL) < 0 || !checked) {
            fprintf(stderr, "failover_check: no committed checkpoint in %s\n", check_dir);
            return 1;
        }
        printf("%d committed checkpoint(s) hold exactly the pushes before their clock\n", checked);
        return check_failed;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: failover_check bsp|ssp|asp --pid-dir DIR [--clocks N] "
                        "[--pace-ms MS] [--workers-may-die] [--error-exit W:C] "
                        "[--finish-early W:C] [--stamps 1] [--end-file FILE] "
                        "[--save-may-fail]\n");
        return 2;
    }
    struct options o = {.consistency = !strcmp(argv[1], "bsp")   ? LOOM_BSP
                                       : !strcmp(argv[1], "ssp") ? LOOM_SSP
                                                                 : LOOM_ASP,
                        .clocks = 150,
                        .pace_ms = 20,
                        .exit_worker = -1,
                        .exit_clock = -1,
                        .early_worker = -1,
                        .early_clock = -1};
    for (int i = 2; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(argv[i], "--workers-may-die"))
            o.workers_may_die = 1;
        else if (!strcmp(argv[i], "--pid-dir"))
            o.dir = argv[++i];
        else if (!strcmp(argv[i], "--clocks"))
            o.clocks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pace-ms"))
            o.pace_ms = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--save-may-fail"))
            o.save_may_fail = 1;
        else if (!strcmp(argv[i], "--end-file") && i + 1 < argc)
            o.end_file = argv[++i];
        else if (!strcmp(argv[i], "--stamps"))
            o.stamps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--error-exit") &&
                 sscanf(value, "%d:%d", &o.exit_worker, &o.exit_clock) == 2)
            i++;
        else if (!strcmp(argv[i], "--finish-early") &&
                 sscanf(value, "%d:%d", &o.early_worker, &o.early_clock) == 2)
            i++;
        else
            return fprintf(stderr, "failover_check: bad argument %s\n", argv[i]), 2;
    }
    if (!o.dir || o.clocks < 1 || o.clocks > 5000 || o.pace_ms < 0) return 2;
    loom_node *n;
    int rc = loom_init(&n, NULL, NULL);
    if (rc) return fail("init", rc);
    if (write_pid(o.dir, n)) return fail("pid file", LOOM_EINVAL);
    if (!loom_is_worker(n)) return loom_serve(n) ? 1 : 0;
    int bad = run_worker(n, &o);
    rc = loom_finalize(n);
    return bad ? bad : rc ? fail("finalize", rc) : 0;
}
