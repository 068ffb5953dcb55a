/* bench_scale: what a job's size costs its scheduler (issue 27, "a job of a
 * thousand nodes"), by simulation: every server and worker is a real node
 * (its own ZeroMQ context, sockets and threads, talking TCP over loopback),
 * but all of them are threads of one process (or of P), while the scheduler runs
 * alone in a child process, so that its CPU time and memory can be read
 * from /proc without the others' mixed in.
 *
 *   bench_scale --workers W [--servers S] [--clocks C] [--barriers B] [--idle-ms MS] [--procs P]
 *
 * With --procs P the servers and workers are split over P processes (in
 * order of node id), for when one process cannot hold all their open files
 * (about 28 per worker: a thousand workers need more than a hard limit of
 * 20,000).
 *
 * The workers open an int64 BSP table, meet at a barrier, then:
 *   idle      worker 0 waits MS ms while the others wait in a barrier: the
 *             scheduler's CPU for nothing but heartbeats and ticks;
 *   clocks    C clocks, each worker adding 1 to one key and clocking;
 *   barriers  B barriers in a row, timed by worker 0;
 * and worker 0 checks the table holds exactly W * C. The scheduler's CPU
 * (the sum of its threads' run time, /proc/PID/task/TID/schedstat, in ns) is
 * read at each phase's ends, its resident memory (VmRSS) before any node
 * joined and once all had. One line of results, "scale k=v ...":
 *   assemble_ms        from the first node's start to the last worker's
 *                      loom_node_start() returning;
 *   rss_per_node_kib   the scheduler's VmRSS growth / (W + S);
 *   idle_cpu_ms_per_s  the scheduler's CPU per second of the idle phase
 *                      (heartbeats, ticks; on a loaded machine also the
 *                      last barrier's stragglers);
 *   clock_cpu_us       the scheduler's CPU per clock over the clock phase,
 *                      everything included (its idle rate too);
 *   clock_ms           wall time per clock;
 *   barrier_cpu_us     the scheduler's CPU per barrier, likewise;
 *   barrier_us         wall time per barrier at worker 0.
 * Nodes run without a job secret (CURVE's handshakes at this scale are a
 * measurement of their own: docs/BENCHMARKS.md). bench/run_scale.sh runs a
 * series of sizes and raises the open-file limit this needs. */
#define _GNU_SOURCE /* MAP_ANONYMOUS */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <loom/loom.h>

#define SUM_KEYS 16

static struct {
    int workers, servers, clocks, barriers, idle_ms, procs;
} opt = {.servers = 4, .clocks = 200, .barriers = 50, .idle_ms = 2000, .procs = 1};

static pid_t sched_pid;
static loom_config base;
static int64_t t_begin_ns;

/* What the node processes measure, in memory they share with main: when
 * the last worker started, errors, and what worker 0 measures. */
typedef struct shared {
    _Atomic int64_t last_started_ns;
    _Atomic int failures;
    int64_t rss_assembled_kib;
    int64_t
        cpu[4]; /* scheduler ns: idle start, idle end = clocks start, clocks end, barriers end */
    int64_t wall[4];
    int exact;
} shared;
static shared *sh;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The scheduler's CPU so far: the run time of each of its threads (ns). */
static int64_t sched_cpu_ns(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)sched_pid);
    DIR *d = opendir(path);
    if (!d) return -1;
    int64_t total = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char f[128];
        snprintf(f, sizeof f, "%s/%.32s/schedstat", path, e->d_name);
        FILE *s = fopen(f, "r");
        long long run = 0;
        if (s && fscanf(s, "%lld", &run) == 1) total += run;
        if (s) fclose(s);
    }
    closedir(d);
    return total;
}

static int64_t sched_rss_kib(void)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)sched_pid);
    FILE *f = fopen(path, "r");
    long long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %lld", &kib) == 1) break;
    if (f) fclose(f);
    return kib;
}

#define TRY(what, expr)                                                                            \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_) {                                                                                 \
            fprintf(stderr, "bench_scale: worker %d: %s: %s\n", rank, what, loom_strerror(rc_));   \
            return rc_;                                                                            \
        }                                                                                          \
    } while (0)

static int work(loom_node *n, int rank)
{
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_I64;
    o.consistency = LOOM_BSP;
    loom_table *t;
    TRY("open", loom_table_open(n, "sum", &o, &t));
    TRY("barrier", loom_barrier(n));
    if (rank == 0) {
        sh->rss_assembled_kib = sched_rss_kib();
        sh->cpu[0] = sched_cpu_ns();
        sh->wall[0] = now_ns();
        struct timespec idle = {opt.idle_ms / 1000, (long)(opt.idle_ms % 1000) * 1000000};
        nanosleep(&idle, NULL); /* the idle phase, measured: not a synchronisation */
        sh->cpu[1] = sched_cpu_ns();
        sh->wall[1] = now_ns();
    }
    TRY("barrier", loom_barrier(n));
    uint64_t key = (uint64_t)(rank % SUM_KEYS);
    int64_t one = 1;
    for (int c = 0; c < opt.clocks; c++) {
        TRY("push", loom_push(t, &key, 1, &one));
        TRY("clock", loom_clock(n));
    }
    TRY("barrier", loom_barrier(n));
    if (rank == 0) {
        sh->cpu[2] = sched_cpu_ns();
        sh->wall[2] = now_ns();
    }
    for (int b = 0; b < opt.barriers; b++) TRY("barrier", loom_barrier(n));
    if (rank == 0) {
        sh->cpu[3] = sched_cpu_ns();
        sh->wall[3] = now_ns();
        uint64_t keys[SUM_KEYS];
        int64_t got[SUM_KEYS], total = 0;
        for (int k = 0; k < SUM_KEYS; k++) keys[k] = (uint64_t)k;
        TRY("pull", loom_pull(t, keys, SUM_KEYS, got));
        for (int k = 0; k < SUM_KEYS; k++) total += got[k];
        sh->exact = total == (int64_t)opt.workers * opt.clocks;
    }
    return 0;
}

static void note_started(void)
{
    int64_t t = now_ns(), seen = atomic_load(&sh->last_started_ns);
    while (t > seen && !atomic_compare_exchange_weak(&sh->last_started_ns, &seen, t)) {
    }
}

static void *node_main(void *arg)
{
    loom_config cfg = base;
    int id = (int)(intptr_t)arg;
    cfg.role = id < opt.servers ? LOOM_SERVER : LOOM_WORKER;
    cfg.rank = id < opt.servers ? id : id - opt.servers;
    loom_node *n;
    int rc = loom_node_start(&cfg, &n);
    if (!rc && cfg.role == LOOM_SERVER) rc = loom_serve(n);
    if (!rc && cfg.role == LOOM_WORKER) {
        note_started();
        if (work(n, cfg.rank)) atomic_fetch_add(&sh->failures, 1);
        rc = loom_finalize(n);
    }
    if (rc) {
        fprintf(stderr, "bench_scale: %s %d: %s\n", cfg.role == LOOM_SERVER ? "server" : "worker",
                cfg.rank, loom_strerror(rc));
        atomic_fetch_add(&sh->failures, 1);
    }
    return NULL;
}

/* A node process: nodes [lo, hi) as threads. */
static int run_nodes(int lo, int hi)
{
    pthread_t *threads = calloc((size_t)(hi - lo), sizeof *threads);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int started = 0;
    for (int i = lo; i < hi; i++, started++)
        if (pthread_create(&threads[i - lo], &attr, node_main, (void *)(intptr_t)i)) {
            fprintf(stderr, "bench_scale: cannot start node thread %d: %s\n", i, strerror(errno));
            atomic_fetch_add(&sh->failures, 1);
            break;
        }
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    free(threads);
    return 0;
}

/* The child: the scheduler alone; its address goes up the pipe. */
static int run_scheduler(int fd)
{
    loom_config cfg = base;
    cfg.role = LOOM_SCHEDULER;
    cfg.rank = 0;
    loom_node *n;
    int rc = loom_node_start(&cfg, &n);
    const char *addr = rc ? "" : loom_node_address(n);
    if (write(fd, addr, strlen(addr) + 1) < 0) return 1;
    close(fd);
    return rc ? 1 : loom_serve(n) ? 1 : 0;
}

static int parse(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--workers"))
            opt.workers = v;
        else if (!strcmp(argv[i], "--servers"))
            opt.servers = v;
        else if (!strcmp(argv[i], "--clocks"))
            opt.clocks = v;
        else if (!strcmp(argv[i], "--barriers"))
            opt.barriers = v;
        else if (!strcmp(argv[i], "--idle-ms"))
            opt.idle_ms = v;
        else if (!strcmp(argv[i], "--procs"))
            opt.procs = v;
        else
            return -1;
    }
    return argc % 2 == 1 && opt.workers > 0 && opt.servers > 0 && opt.clocks > 0 &&
                   opt.barriers > 0 && opt.idle_ms > 0 && opt.procs > 0 &&
                   opt.procs <= opt.servers + opt.workers
               ? 0
               : -1;
}

int main(int argc, char **argv)
{
    if (parse(argc, argv)) {
        fprintf(stderr, "usage: bench_scale --workers W [--servers S] [--clocks C] "
                        "[--barriers B] [--idle-ms MS] [--procs P]\n");
        return 2;
    }
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) return 1;
    loom_config_default(&base);
    base.num_servers = opt.servers;
    base.num_workers = opt.workers;
    base.on_failure = LOOM_ON_FAILURE_RETURN;
    /* Thousands of threads share the machine's cores: a heartbeat thread can
     * wait seconds for one, which is not a death. */
    base.heartbeat_interval_ms = 1000;
    base.heartbeat_timeout_ms = 60000;
    base.connect_timeout_ms = 300000;
    base.status_port = -1;
    snprintf(base.scheduler, sizeof base.scheduler, "127.0.0.1:0");
    int fds[2];
    if (pipe(fds)) return 1;
    fflush(stdout);
    sched_pid = fork(); /* before any thread: the child is the scheduler alone */
    if (sched_pid < 0) return 1;
    if (sched_pid == 0) {
        close(fds[0]);
        _exit(run_scheduler(fds[1]));
    }
    close(fds[1]);
    char addr[sizeof base.scheduler];
    ssize_t got = read(fds[0], addr, sizeof addr - 1);
    close(fds[0]);
    if (got <= 1) {
        fprintf(stderr, "bench_scale: the scheduler did not start\n");
        return 1;
    }
    addr[got] = '\0';
    snprintf(base.scheduler, sizeof base.scheduler, "%s", addr);
    int64_t rss_start = sched_rss_kib();

    int nodes = opt.servers + opt.workers;
    t_begin_ns = now_ns();
    pid_t *procs = calloc((size_t)opt.procs, sizeof *procs);
    for (int k = 0; k < opt.procs; k++) {
        fflush(stdout);
        if ((procs[k] = fork()) < 0) return 1;
        if (procs[k] == 0) _exit(run_nodes(nodes * k / opt.procs, nodes * (k + 1) / opt.procs));
    }
    for (int k = 0; k < opt.procs; k++) {
        int st = 0;
        waitpid(procs[k], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st)) atomic_fetch_add(&sh->failures, 1);
    }
    free(procs);
    int status = 0;
    waitpid(sched_pid, &status, 0);
    if (atomic_load(&sh->failures) || !WIFEXITED(status) || WEXITSTATUS(status) || !sh->exact) {
        fprintf(stderr, "bench_scale: the job failed (%d node errors, scheduler status %d%s)\n",
                atomic_load(&sh->failures), status, sh->exact ? "" : ", table not exact");
        return 1;
    }
    double idle_s = (double)(sh->wall[1] - sh->wall[0]) / 1e9;
    double clocks_s = (double)(sh->wall[2] - sh->wall[1]) / 1e9;
    double barriers_s = (double)(sh->wall[3] - sh->wall[2]) / 1e9;
    printf("scale workers=%d servers=%d clocks=%d assemble_ms=%.0f rss_per_node_kib=%.1f "
           "idle_cpu_ms_per_s=%.2f clock_cpu_us=%.0f clock_ms=%.2f barrier_cpu_us=%.0f "
           "barrier_us=%.0f\n",
           opt.workers, opt.servers, opt.clocks,
           (double)(atomic_load(&sh->last_started_ns) - t_begin_ns) / 1e6,
           (double)(sh->rss_assembled_kib - rss_start) / nodes,
           (double)(sh->cpu[1] - sh->cpu[0]) / idle_s / 1e6,
           (double)(sh->cpu[2] - sh->cpu[1]) / opt.clocks / 1e3, clocks_s * 1e3 / opt.clocks,
           (double)(sh->cpu[3] - sh->cpu[2]) / opt.barriers / 1e3, barriers_s * 1e6 / opt.barriers);
    return 0;
}
