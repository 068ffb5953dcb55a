/* failover_check: the program of the server-failover tests (test_failover.sh).
 *
 *   failover_check bsp|ssp|asp --pid-dir DIR [--clocks N] [--pace-ms MS] [--stamps 1]
 *
 * Every node writes DIR/<role>-<rank>.pid once the job is assembled. Each
 * worker then runs N clocks; in clock c it pushes 50 known int64 deltas into a
 * "sum" table of 1000 keys (so every range of the ring gets some), pulls every
 * key, prints "worker W clock c" every 10 clocks and sleeps MS (pacing only, so
 * that a test can kill a server mid-run; nothing waits on it). With --stamps 1
 * it also prints "worker W clock c from T0 to T1" after every clock: the
 * wall-clock times (seconds, to the ms) before its push and when its
 * loom_clock returned; the failover benchmark (bench/run_faults.sh) measures
 * from a kill to these. At the end,
 * after a barrier, every worker pulls the table and compares it with the
 * totals it computes itself: a lost update makes a key too small, one applied
 * twice too large. Exit 0 and "exact" when every key matches. */
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

static int run_worker(loom_node *n, loom_consistency consistency, int clocks, int pace_ms,
                      int stamps)
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
    for (int c = 0; c < clocks; c++) {
        uint64_t keys[NPUSH];
        int64_t vals[NPUSH];
        struct timespec start, end;
        clock_gettime(CLOCK_REALTIME, &start);
        for (int j = 0; j < NPUSH; j++) {
            keys[j] = key_of(rank, c, j);
            vals[j] = delta_of(rank, c, j);
        }
        if ((rc = loom_push(t, keys, NPUSH, vals))) return fail("push", rc);
        if ((rc = loom_pull(t, all, NPULLS, got))) return fail("pull", rc);
        if ((rc = loom_clock(n))) return fail("clock", rc);
        if (stamps) {
            clock_gettime(CLOCK_REALTIME, &end);
            printf("worker %d clock %d from %lld.%03ld to %lld.%03ld\n", rank, c,
                   (long long)start.tv_sec, start.tv_nsec / 1000000L, (long long)end.tv_sec,
                   end.tv_nsec / 1000000L);
        }
        if (c % 10 == 0) printf("worker %d clock %d\n", rank, c);
        if (stamps || c % 10 == 0) fflush(stdout);
        struct timespec pace = {pace_ms / 1000, (long)(pace_ms % 1000) * 1000000L};
        nanosleep(&pace, NULL);
    }
    if ((rc = loom_barrier(n))) return fail("barrier", rc);
    if ((rc = loom_pull(t, all, NKEYS, got))) return fail("final pull", rc);
    for (int w = 0; w < W; w++)
        for (int c = 0; c < clocks; c++)
            for (int j = 0; j < NPUSH; j++) want[key_of(w, c, j)] += delta_of(w, c, j);
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

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: failover_check bsp|ssp|asp --pid-dir DIR [--clocks N] "
                        "[--pace-ms MS] [--stamps 1]\n");
        return 2;
    }
    loom_consistency consistency = !strcmp(argv[1], "bsp")   ? LOOM_BSP
                                   : !strcmp(argv[1], "ssp") ? LOOM_SSP
                                                             : LOOM_ASP;
    const char *dir = NULL;
    int clocks = 150, pace_ms = 20, stamps = 0;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--pid-dir")) dir = argv[i + 1];
        if (!strcmp(argv[i], "--clocks")) clocks = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--pace-ms")) pace_ms = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--stamps")) stamps = atoi(argv[i + 1]);
    }
    if (!dir || clocks < 1 || pace_ms < 0) return 2;
    loom_node *n;
    int rc = loom_init(&n, NULL, NULL);
    if (rc) return fail("init", rc);
    if (write_pid(dir, n)) return fail("pid file", LOOM_EINVAL);
    if (!loom_is_worker(n)) return loom_serve(n) ? 1 : 0;
    int bad = run_worker(n, consistency, clocks, pace_ms, stamps);
    rc = loom_finalize(n);
    return bad ? bad : rc ? fail("finalize", rc) : 0;
}
