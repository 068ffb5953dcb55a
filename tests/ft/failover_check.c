/* failover_check: the program of the server-failover tests (test_failover.sh,
 * test_failover_ckpt.sh).
 *
 *   failover_check bsp|ssp|asp --pid-dir DIR [--clocks N] [--pace-ms MS]
 *   failover_check check CKPT_DIR WORKERS
 *
 * Every node writes DIR/<role>-<rank>.pid once the job is assembled. Each
 * worker then runs N clocks; in clock c it pushes 50 known int64 deltas into a
 * "sum" table of 1000 keys (so every range of the ring gets some), pulls every
 * key, prints "worker W clock c" every 10 clocks and sleeps MS (pacing only, so
 * that a test can kill a server mid-run; nothing waits on it). At the end,
 * after a barrier, every worker pulls the table and compares it with the
 * totals it computes itself: a lost update makes a key too small, one applied
 * twice too large. Exit 0 and "exact" when every key matches.
 *
 * With checkpoints (LOOM_CHECKPOINT_DIR ...), a worker saves its job clock
 * whenever one is due; resumed (LOOM_RESUME), it goes on from the clock of the
 * checkpoint, so the totals at the end are still those of clocks 0..N-1.
 * `check` opens every committed checkpoint of CKPT_DIR and requires every key
 * to hold exactly the pushes of the clocks before its clock, and every worker
 * to have saved that clock. */
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

static uint64_t key_of(int w, int c, int j)
{
    return (uint64_t)((c * 37 + w * 101 + j * 13) % NKEYS);
}

static int64_t delta_of(int w, int c, int j)
{
    return (int64_t)(w + 1) * 1000003 + c * 101 + j;
}

/* want[k]: the sum of every worker's pushes to key k in the clocks before `clocks`. */
static void totals(int workers, int64_t clocks, int64_t *want)
{
    memset(want, 0, NKEYS * sizeof *want);
    for (int w = 0; w < workers; w++)
        for (int c = 0; c < clocks; c++)
            for (int j = 0; j < NPUSH; j++) want[key_of(w, c, j)] += delta_of(w, c, j);
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

static int run_worker(loom_node *n, loom_consistency consistency, int clocks, int pace_ms)
{
    int rank = loom_rank(n), W = loom_num_workers(n);
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_I64;
    o.consistency = consistency;
    o.staleness = consistency == LOOM_SSP ? 2 : 0;
    o.key_end = NKEYS;
    loom_table *t;
    int rc = loom_table_open(n, "failover", &o, &t);
    if (rc) return fail("open", rc);
    static uint64_t all[NKEYS];
    static int64_t got[NKEYS], want[NKEYS];
    for (int k = 0; k < NKEYS; k++) all[k] = (uint64_t)k;
    const void *state;
    size_t len;
    int64_t from = 0;
    if (!loom_checkpoint_resumed(n, &state, &len, NULL) && len == sizeof from)
        memcpy(&from, state, sizeof from);
    if (from) {
        printf("worker %d resumed at clock %" PRId64 "\n", rank, from);
        fflush(stdout);
    }
    for (int c = (int)from; c < clocks; c++) {
        uint64_t keys[NPUSH];
        int64_t vals[NPUSH];
        for (int j = 0; j < NPUSH; j++) {
            keys[j] = key_of(rank, c, j);
            vals[j] = delta_of(rank, c, j);
        }
        if ((rc = loom_push(t, keys, NPUSH, vals))) return fail("push", rc);
        if ((rc = loom_pull(t, all, NPULLS, got))) return fail("pull", rc);
        if ((rc = loom_clock(n))) return fail("clock", rc);
        int64_t next = c + 1;
        if (loom_checkpoint_due(n) && (rc = loom_checkpoint_save(n, &next, sizeof next)))
            return fail("checkpoint", rc);
        if (c % 10 == 0) {
            printf("worker %d clock %d\n", rank, c);
            fflush(stdout);
        }
        struct timespec pace = {pace_ms / 1000, (long)(pace_ms % 1000) * 1000000L};
        nanosleep(&pace, NULL);
    }
    if ((rc = loom_barrier(n))) return fail("barrier", rc);
    if ((rc = loom_pull(t, all, NKEYS, got))) return fail("final pull", rc);
    totals(W, clocks, want);
    int bad = 0;
    for (int k = 0; k < NKEYS; k++)
        if (got[k] != want[k] && bad++ < 5)
            fprintf(stderr,
                    "failover_check: worker %d: key %d holds %lld, the pushes sum to %lld\n", rank,
                    k, (long long)got[k], (long long)want[k]);
    if (bad) return 1;
    printf("worker %d: %d clocks, all %d keys exact\n", rank, clocks, NKEYS);
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
                        "[--pace-ms MS]\n");
        return 2;
    }
    loom_consistency consistency = !strcmp(argv[1], "bsp")   ? LOOM_BSP
                                   : !strcmp(argv[1], "ssp") ? LOOM_SSP
                                                             : LOOM_ASP;
    const char *dir = NULL;
    int clocks = 150, pace_ms = 20;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--pid-dir")) dir = argv[i + 1];
        if (!strcmp(argv[i], "--clocks")) clocks = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--pace-ms")) pace_ms = atoi(argv[i + 1]);
    }
    if (!dir || clocks < 1 || pace_ms < 0) return 2;
    loom_node *n;
    int rc = loom_init(&n, NULL, NULL);
    if (rc) return fail("init", rc);
    if (write_pid(dir, n)) return fail("pid file", LOOM_EINVAL);
    if (!loom_is_worker(n)) return loom_serve(n) ? 1 : 0;
    int bad = run_worker(n, consistency, clocks, pace_ms);
    rc = loom_finalize(n);
    return bad ? bad : rc ? fail("finalize", rc) : 0;
}
