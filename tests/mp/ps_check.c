/* ps_check: the program the multi-process tests run under `loom run`.
 *
 *   ps_check bsp [--clocks N] [--pid-dir DIR [--hold FILE]]
 *       BSP across processes: every pull equals a sequential computation of
 *       all workers' pushes of earlier clocks, exactly (int64 table). With
 *       --pid-dir, every node writes DIR/<role>-<rank>.pid and .addr (its
 *       listening address) once the job is assembled; with --hold, workers
 *       then wait for FILE to exist before they start (the security tests
 *       attack the assembled job first).
 *   ps_check ssp --log DIR [--staleness S] [--clocks N]
 *       SSP(S) with the last worker slowed down: reads are never older than
 *       the bound, and each worker records when it called and left clock()
 *       (CLOCK_MONOTONIC, comparable across processes of one machine). After
 *       a barrier worker 0 checks that no worker entered clock c before every
 *       other worker had called clock() to enter c - S.
 *   ps_check run --pid-dir DIR
 *       Write DIR/<role>-<rank>.pid, then workers push/pull/clock until the
 *       job is stopped from outside (the kill -9 tests).
 *   ps_check status --pid-dir DIR --hold FILE [--clocks N]
 *       BSP as above; then each worker reports the metrics objective =
 *       0.25 * (rank + 1) and accuracy = 0.5 + 0.125 * rank, writes its pid
 *       file and waits for FILE before it finishes (the status page tests
 *       look at the job meanwhile). Scheduler and servers write theirs at once.
 *   ps_check sum [--clocks N]
 *       A job of many workers (tests/mp/test_many.sh): at every BSP clock c
 *       each worker adds rank + 1 + c to key c % SUM_KEYS of an int64 sum
 *       table; after its last clock each worker pulls the table, which must
 *       hold exactly the sum of every worker's additions.
 *   ps_check free-port
 *       Print a TCP port on 127.0.0.1 that is free right now.
 * Exit 0 when every check held. */
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <loom/loom.h>

static int usage(void)
{
    fprintf(stderr, "usage: ps_check bsp|ssp|run|status|sum|free-port [--clocks N] [--staleness S] "
                    "[--log DIR] [--pid-dir DIR] [--hold FILE]\n");
    return 2;
}

static int die(const char *what, int rc)
{
    fprintf(stderr, "ps_check: %s: %s\n", what, loom_strerror(rc));
    return 1;
}

#define TRY(what, expr)                                                                            \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_) return die(what, rc_);                                                            \
    } while (0)

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- bsp ---- */

#define NKEYS 40

static uint64_t bsp_key(int w, int c, int j)
{
    return (uint64_t)((c * 7 + w * 13 + j * j) % NKEYS);
}

static int64_t bsp_delta(int w, int c, int j)
{
    return (int64_t)((w + 1) * 1000 + c * 10 + j);
}

static int run_bsp(loom_node *n, int clocks)
{
    int rank = loom_rank(n), W = loom_num_workers(n);
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_I64;
    o.consistency = LOOM_BSP;
    loom_table *t;
    TRY("open", loom_table_open(n, "bsp", &o, &t));
    uint64_t all[NKEYS];
    for (int k = 0; k < NKEYS; k++) all[k] = (uint64_t)k;
    for (int c = 0; c < clocks; c++) {
        int64_t got[NKEYS], want[NKEYS] = {0};
        TRY("pull", loom_pull(t, all, NKEYS, got));
        for (int pc = 0; pc < c; pc++)
            for (int w = 0; w < W; w++)
                for (int j = 0; j < 12; j++) want[bsp_key(w, pc, j)] += bsp_delta(w, pc, j);
        for (int k = 0; k < NKEYS; k++) {
            if (got[k] != want[k]) {
                fprintf(stderr, "ps_check: BSP violated at clock %d, key %d: %lld != %lld\n", c, k,
                        (long long)got[k], (long long)want[k]);
                return 1;
            }
        }
        uint64_t keys[12];
        int64_t vals[12];
        for (int j = 0; j < 12; j++) {
            keys[j] = bsp_key(rank, c, j);
            vals[j] = bsp_delta(rank, c, j);
        }
        TRY("push", loom_push(t, keys, 12, vals));
        TRY("clock", loom_clock(n));
    }
    printf("bsp: %d clocks, every pull exact\n", clocks);
    return 0;
}

/* ---- sum ---- */

#define SUM_KEYS 16

static int run_sum(loom_node *n, int clocks)
{
    int rank = loom_rank(n), W = loom_num_workers(n);
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_I64;
    o.consistency = LOOM_BSP;
    loom_table *t;
    TRY("open", loom_table_open(n, "sum", &o, &t));
    for (int c = 0; c < clocks; c++) {
        uint64_t key = (uint64_t)(c % SUM_KEYS);
        int64_t add = rank + 1 + c;
        TRY("push", loom_push(t, &key, 1, &add));
        TRY("clock", loom_clock(n));
    }
    uint64_t keys[SUM_KEYS];
    int64_t got[SUM_KEYS], want[SUM_KEYS] = {0};
    for (int k = 0; k < SUM_KEYS; k++) keys[k] = (uint64_t)k;
    for (int c = 0; c < clocks; c++) /* sum over w of (w + 1 + c) */
        want[c % SUM_KEYS] += (int64_t)W * (W + 1) / 2 + (int64_t)W * c;
    TRY("pull", loom_pull(t, keys, SUM_KEYS, got));
    for (int k = 0; k < SUM_KEYS; k++) {
        if (got[k] != want[k]) {
            fprintf(stderr, "ps_check: key %d holds %lld after %d clocks of %d workers, not %lld\n",
                    k, (long long)got[k], clocks, W, (long long)want[k]);
            return 1;
        }
    }
    if (rank == 0) printf("sum: %d workers, %d clocks, the table exact\n", W, clocks);
    return 0;
}

/* ---- status ---- */

static int write_pid(const char *dir, loom_node *n);
static int wait_for_file(const char *path);

static int run_status(loom_node *n, int clocks, const char *dir, const char *hold)
{
    int rc = run_bsp(n, clocks);
    if (rc) return rc;
    double rank = loom_rank(n);
    TRY("report objective", loom_report_metric(n, "objective", 0.25 * (rank + 1)));
    TRY("report accuracy", loom_report_metric(n, "accuracy", 0.5 + 0.125 * rank));
    if (write_pid(dir, n)) return die("pid file", LOOM_EINVAL);
    return wait_for_file(hold);
}

/* ---- ssp ---- */

#define MAX_CLOCKS  200
#define MAX_WORKERS 16

static void slow_down(void)
{
    volatile double x = 0;
    for (int i = 0; i < 3000000; i++) x += (double)i * 1e-9;
    (void)x;
}

static int read_log(const char *dir, int w, int clocks, long long *called, long long *returned)
{
    char path[512];
    snprintf(path, sizeof path, "%s/worker-%d.log", dir, w);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "ps_check: cannot read %s: %s\n", path, strerror(errno));
        return 1;
    }
    int c, got = 0;
    long long a, b;
    while (fscanf(f, "%d %lld %lld", &c, &a, &b) == 3 && c >= 1 && c <= clocks) {
        called[c] = a;
        returned[c] = b;
        got++;
    }
    fclose(f);
    return got == clocks ? 0 : 1;
}

static int run_ssp(loom_node *n, int clocks, int s, const char *dir)
{
    int rank = loom_rank(n), W = loom_num_workers(n);
    if (W > MAX_WORKERS || clocks > MAX_CLOCKS) return die("ssp", LOOM_EINVAL);
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_I64;
    o.consistency = LOOM_SSP;
    o.staleness = s;
    loom_table *t;
    TRY("open", loom_table_open(n, "ssp", &o, &t));
    uint64_t keys[MAX_WORKERS];
    for (int w = 0; w < W; w++) keys[w] = (uint64_t)w;
    static long long called[MAX_CLOCKS + 1], returned[MAX_CLOCKS + 1];
    for (int c = 0; c < clocks; c++) {
        if (rank == W - 1) slow_down();
        int64_t one = 1, got[MAX_WORKERS];
        uint64_t me = (uint64_t)rank;
        TRY("push", loom_push(t, &me, 1, &one));
        TRY("pull", loom_pull(t, keys, (size_t)W, got));
        for (int w = 0; w < W; w++) {
            int bad = w == rank ? got[w] != c + 1 : got[w] < c - s || got[w] > c + s + 1;
            if (bad) {
                fprintf(
                    stderr,
                    "ps_check: SSP(%d) violated: worker %d at clock %d sees %lld from worker %d\n",
                    s, rank, c, (long long)got[w], w);
                return 1;
            }
        }
        called[c + 1] = now_ns();
        TRY("clock", loom_clock(n));
        returned[c + 1] = now_ns();
    }
    char path[512];
    snprintf(path, sizeof path, "%s/worker-%d.log", dir, rank);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "ps_check: cannot write %s: %s\n", path, strerror(errno));
        return 1;
    }
    for (int c = 1; c <= clocks; c++) fprintf(f, "%d %lld %lld\n", c, called[c], returned[c]);
    if (fclose(f)) return die("write log", LOOM_EINVAL);
    TRY("barrier", loom_barrier(n)); /* every log is complete after this */
    if (rank != 0) return 0;
    static long long all_called[MAX_WORKERS][MAX_CLOCKS + 1],
        all_returned[MAX_WORKERS][MAX_CLOCKS + 1];
    for (int w = 0; w < W; w++)
        if (read_log(dir, w, clocks, all_called[w], all_returned[w])) return 1;
    int waited = 0;
    for (int w = 0; w < W; w++)
        for (int c = s + 1; c <= clocks; c++)
            for (int v = 0; v < W; v++) {
                if (v == w) continue;
                if (all_called[v][c - s] >= all_returned[w][c]) {
                    fprintf(stderr,
                            "ps_check: worker %d entered clock %d before worker %d called clock() "
                            "for %d\n",
                            w, c, v, c - s);
                    return 1;
                }
                if (all_called[v][c - s] > all_called[w][c]) waited++;
            }
    printf("ssp: %d workers x %d clocks within staleness %d; %d waits enforced by the bound\n", W,
           clocks, s, waited);
    return waited > 0 ? 0 : (fprintf(stderr, "ps_check: no worker ever had to wait\n"), 1);
}

/* ---- run until killed ---- */

/* DIR/<role>-<rank>.<ext> holding one line; renamed into place so a reader
 * never sees a half-written file. */
static int write_node_file(const char *dir, loom_node *n, const char *ext, const char *line)
{
    static const char *const roles[] = {"scheduler", "server", "worker"};
    char path[512], tmp[520];
    snprintf(path, sizeof path, "%s/%s-%d.%s", dir, roles[loom_node_role(n)], loom_rank(n), ext);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return 1;
    fprintf(f, "%s\n", line);
    return fclose(f) || rename(tmp, path);
}

/* The address first: a test that sees the pid file finds the address too. */
static int write_pid(const char *dir, loom_node *n)
{
    char pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    return write_node_file(dir, n, "addr", loom_node_address(n)) ||
           write_node_file(dir, n, "pid", pid);
}

/* Wait (bounded) until the test creates `path`. */
static int wait_for_file(const char *path)
{
    long long deadline = now_ns() + 120LL * 1000000000LL;
    while (access(path, F_OK) != 0) {
        if (now_ns() > deadline) {
            fprintf(stderr, "ps_check: %s did not appear within 120 s\n", path);
            return 1;
        }
        struct timespec pause = {0, 20000000};
        nanosleep(&pause, NULL);
    }
    return 0;
}

static int run_forever(loom_node *n, const char *dir)
{
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.consistency = LOOM_SSP;
    o.staleness = 1;
    loom_table *t;
    TRY("open", loom_table_open(n, "run", &o, &t));
    if (write_pid(dir, n)) return die("pid file", LOOM_EINVAL);
    uint64_t keys[4] = {1, 1ull << 62, 1ull << 63, UINT64_MAX - 1};
    float vals[4] = {1, 1, 1, 1}, out[4];
    long long deadline = now_ns() + 300LL * 1000000000LL;
    while (now_ns() < deadline) {
        TRY("push", loom_push(t, keys, 4, vals));
        TRY("pull", loom_pull(t, keys, 4, out));
        TRY("clock", loom_clock(n));
    }
    return 0;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) ||
        getsockname(fd, (struct sockaddr *)&a, &len)) {
        perror("ps_check: free-port");
        return 1;
    }
    printf("%d\n", ntohs(a.sin_port));
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) return usage();
    const char *mode = argv[1], *dir = NULL, *hold = NULL;
    int clocks = 10, staleness = 2;
    for (int i = 2; i < argc; i++) {
        if (i + 1 >= argc) return usage();
        char *end;
        if (!strcmp(argv[i], "--clocks")) {
            clocks = (int)strtol(argv[++i], &end, 10);
            if (*end || clocks < 1 || clocks > MAX_CLOCKS) return usage();
        } else if (!strcmp(argv[i], "--staleness")) {
            staleness = (int)strtol(argv[++i], &end, 10);
            if (*end || staleness < 0) return usage();
        } else if (!strcmp(argv[i], "--log") || !strcmp(argv[i], "--pid-dir")) {
            dir = argv[++i];
        } else if (!strcmp(argv[i], "--hold")) {
            hold = argv[++i];
        } else {
            return usage();
        }
    }
    if (!strcmp(mode, "free-port")) return free_port();
    int status = !strcmp(mode, "status");
    int sum = !strcmp(mode, "sum");
    if (strcmp(mode, "bsp") && strcmp(mode, "ssp") && strcmp(mode, "run") && !status && !sum)
        return usage();
    if (strcmp(mode, "bsp") && !sum && !dir) return usage();
    if (sum && (dir || hold)) return usage();
    if (hold ? (strcmp(mode, "bsp") && !status) || !dir : status) return usage();
    int pid_files = dir && (!strcmp(mode, "run") || !strcmp(mode, "bsp") || status);

    loom_node *n;
    TRY("init", loom_init(&n, &argc, &argv));
    if (!loom_is_worker(n)) {
        if (pid_files && write_pid(dir, n)) return die("pid file", LOOM_EINVAL);
        int rc = loom_serve(n);
        return rc ? die("serve", rc) : 0;
    }
    if (!strcmp(mode, "bsp") && pid_files && write_pid(dir, n)) return die("pid file", LOOM_EINVAL);
    if (hold && !status && wait_for_file(hold)) return 1;
    int rc = sum                    ? run_sum(n, clocks)
             : status               ? run_status(n, clocks, dir, hold)
             : !strcmp(mode, "bsp") ? run_bsp(n, clocks)
             : !strcmp(mode, "ssp") ? run_ssp(n, clocks, staleness, dir)
                                    : run_forever(n, dir);
    int frc = loom_finalize(n);
    if (frc) return die("finalize", frc);
    return rc;
}
