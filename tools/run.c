/* loom run: start a whole Loom job on this machine.
 *
 * The launcher forks one scheduler, S servers and W workers of the same
 * PROGRAM and tells each its role through LOOM_* environment variables (the
 * contract is in docs/LAUNCHING.md). The scheduler starts first, binds port 0
 * and writes the address it got into a pipe (LOOM_ADDRESS_FD); only then are
 * servers and workers started, pointed at that address. No port is guessed,
 * so there is no race with other programs picking ports.
 *
 * After that everything happens in one poll() loop:
 *   - each child's stdout and stderr are pipes; complete lines are re-emitted
 *     on the launcher's stdout/stderr with a "[worker 0] " prefix;
 *   - signals (SIGINT/SIGTERM/SIGHUP to the launcher, SIGCHLD) only set a
 *     flag and write a byte into a self-pipe, which wakes poll();
 *   - deadlines (address wait, --timeout, stop grace) are poll timeouts.
 * Each child runs in its own process group, so a terminal's Ctrl-C reaches
 * the launcher alone and the launcher decides how the job ends: SIGTERM to
 * every group, 3 s grace, then SIGKILL. The loop ends only once every child
 * has been reaped, whatever made the job stop.
 *
 * The job's traffic is encrypted with a job secret (docs/SECURITY.md): the
 * file of --secret or LOOM_SECRET_FILE, or else a throw-away one the launcher
 * writes into a private temporary directory before the first child starts
 * and removes once the last one is reaped (also when the job fails or the
 * launcher is stopped by a signal it handles), so that other users of the
 * machine cannot join or read a job by default.
 *
 * This file is the command itself: its options and help, the job's secret and
 * environment, and the job's lifecycle (start, restart, end). The others
 * (run_impl.h says which does what) start and reap the children, relay their
 * output, run the loop and make the report at the end. */
#include "commands.h"
#include "run_impl.h"

#include "common/app.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <loom/checkpoint.h>
#include <loom/error.h>
#include <loom/node.h>

/* Limits for the flags: generous for one machine (a job of 256 workers is
 * tested, tests/mp/test_many.sh). The two pipes kept per child outgrow the
 * usual soft limit of 1024 open files at about 500 processes: the launcher
 * raises its own (raise_fd_limit), and its children inherit it. */
#define MAX_SERVERS      LOOM_MAX_SERVERS
#define MAX_WORKERS      4096
#define MAX_TIMEOUT_S    (366L * 24 * 3600)
#define MAX_RESTARTS     1000
#define MAX_HEARTBEAT_MS 3600000L
/* A node missing this many heartbeats in a row is dead: with fewer, one late
 * heartbeat on a busy machine would kill a healthy node. The library keeps
 * the same ratio when it picks the interval itself (src/core/config.c). */
#define HEARTBEATS_PER_TIMEOUT 4
#define MAX_BIND_LEN           127 /* loom_config.bind_host holds 128 bytes */

/* The flags, in one table that is both what the parser accepts and what the
 * help prints (apps/common/flags.c). */
static const app_flag run_flags[] = {
    {.name = "--servers",
     .kind = APP_INT,
     .arg = "S",
     .lo = 0,
     .hi = MAX_SERVERS,
     .def = "1",
     .help = "number of servers (0: workers only, a serverless job)"},
    {.name = "--workers",
     .kind = APP_INT,
     .arg = "W",
     .lo = 1,
     .hi = MAX_WORKERS,
     .def = "2",
     .help = "number of workers"},
    {.name = "--max-workers",
     .kind = APP_INT,
     .arg = "M",
     .lo = 1,
     .hi = MAX_WORKERS,
     .help = "an elastic job: M worker slots, W of them started; workers join the running job "
             "in the others (loom join; docs/ELASTIC.md)"},
    {.name = "--max-servers",
     .kind = APP_INT,
     .arg = "M",
     .lo = 1,
     .hi = MAX_SERVERS,
     .help = "an elastic job: M server slots, S of them started; servers join the running job "
             "in the others (loom join --role server) and take their ranges back; needs replicas "
             "(loom train --replicas, LOOM_REPLICAS) of at least M - S (docs/ELASTIC.md)"},
    {.name = "--bind",
     .kind = APP_TEXT,
     .arg = "HOST",
     .def = "127.0.0.1",
     .excludes = "--interface",
     .help = "address every process binds to (LOOM_BIND)"},
    {.name = "--interface",
     .kind = APP_TEXT,
     .arg = "NAME",
     .help = "bind the IPv4 address of network interface NAME instead"},
    {.name = "--heartbeat-timeout",
     .kind = APP_INT,
     .arg = "MS",
     .lo = 1,
     .hi = MAX_HEARTBEAT_MS,
     .def = "5000",
     .help = "declare a silent process dead after MS milliseconds\n"
             "(LOOM_HEARTBEAT_TIMEOUT_MS); at least 4 heartbeat intervals\n"
             "(LOOM_HEARTBEAT_MS): 2000 with the default interval of 500"},
    {.name = "--timeout",
     .kind = APP_INT,
     .arg = "SECONDS",
     .lo = 0,
     .hi = MAX_TIMEOUT_S,
     .def = "0",
     .help = "stop the whole job after SECONDS; 0 = never"},
    {.name = "--on-failure",
     .kind = APP_CHOICE,
     .arg = "stop|wait",
     .def = "stop",
     .help = "when a process fails: stop the others at once,\n"
             "or wait for them to notice and end on their own"},
    {.name = "--on-server-failure",
     .kind = APP_CHOICE,
     .arg = "failover|restart",
     .def = "failover",
     .help = "with replicas (LOOM_REPLICAS), when a server is killed: go on\n"
             "without it, or also start a replacement that copies its ranges\n"
             "back (docs/FAULTS.md)"},
    {.name = "--on-worker-failure",
     .kind = APP_CHOICE,
     .arg = "fail|continue|restart",
     .help = "when a worker is killed: stop the job, go on without it, or start\n"
             "the whole job again from its newest checkpoint in LOOM_CHECKPOINT_DIR\n"
             "(LOOM_ON_WORKER_FAILURE; default: fail)"},
    {.name = "--max-restarts",
     .kind = APP_INT,
     .arg = "N",
     .lo = 0,
     .hi = MAX_RESTARTS,
     .def = "3",
     .help = "with --on-worker-failure restart: restarts before the job fails"},
    {.name = "--secret",
     .kind = APP_TEXT,
     .arg = "FILE",
     .excludes = "--insecure",
     .help = "the job secret (loom keygen; LOOM_SECRET_FILE); default: a\n"
             "throw-away secret made for this job and removed at its end"},
    {.name = "--insecure",
     .kind = APP_SWITCH,
     .help = "no secret: traffic is neither encrypted nor authenticated"},
    {.name = "--no-status",
     .kind = APP_SWITCH,
     .help = "no status page: the scheduler does not listen for HTTP\n"
             "(LOOM_STATUS_PORT=-1; docs/USAGE.md)"},
    {.name = "--status-bind",
     .kind = APP_TEXT,
     .arg = "ADDR",
     .excludes = "--no-status",
     .help = "the address the status page listens on (LOOM_STATUS_BIND);\n"
             "default 127.0.0.1; with a secret, its URL carries a token"},
    {.name = "--verbose",
     .kind = APP_SWITCH,
     .help = "lifecycle messages from Loom and the launcher (LOOM_VERBOSE=1)"},
};
#define NFLAGS (sizeof run_flags / sizeof run_flags[0])

static void print_help(FILE *out)
{
    fputs(
        "Usage: loom run [OPTIONS] [--] PROGRAM [ARGS...]\n"
        "\n"
        "Start a Loom job on this machine: one scheduler, S servers and W workers, each\n"
        "running PROGRAM with its role in LOOM_* environment variables. Their output is\n"
        "shown line by line, prefixed with \"[scheduler] \", \"[server N] \" or \"[worker N] \".\n"
        "\n"
        "Options (--name value or --name=value):\n",
        out);
    app_flags_help(out, run_flags, NFLAGS);
    fputs("  -h, --help              show this help\n"
          "\n"
          "Exit status: 0 if every process exited with status 0; 1 if any failed; 2 for\n"
          "a usage error; 124 if --timeout expired; 128+N if the launcher got signal N\n"
          "(130 for Ctrl-C). See docs/LAUNCHING.md.\n",
          out);
}

static int usage_error(const char *fmt, ...) PRINTF_LIKE(1, 2);

static int usage_error(const char *fmt, ...)
{
    fprintf(stderr, "loom run: ");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'loom run --help'.\n");
    return 2;
}

/* --- options ------------------------------------------------------------ */

/* The heartbeat interval the nodes will use: LOOM_HEARTBEAT_MS if it is a
 * number (the library reports it otherwise), else the library's default. */
static long heartbeat_interval_ms(void)
{
    loom_config cfg;
    loom_config_default(&cfg);
    const char *v = getenv("LOOM_HEARTBEAT_MS");
    char *end;
    long ms = v ? strtol(v, &end, 10) : 0;
    /* Beyond the library's range (1 to 600000) the nodes refuse it themselves. */
    return v && *v && !*end && ms > 0 && ms <= 600000 ? ms : cfg.heartbeat_interval_ms;
}

/* 0: options parsed; 2: usage error (reported); -1: help printed. */
static int parse_options(int argc, char **argv, struct options *opt)
{
    *opt = (struct options){.servers = 1, .workers = 2, .bind = "127.0.0.1", .max_restarts = 3};
    app_flag_value v[NFLAGS];
    char err[512];
    int program;
    int rc = app_flags_parse(run_flags, NFLAGS, argc, argv, 1, v, &program, err, sizeof err);
    if (rc == APP_FLAGS_HELP) {
        print_help(stdout);
        return -1;
    }
    if (rc) return usage_error("%s", err);
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(run_flags, NFLAGS, v, name))
    if (GIVEN("--servers")) opt->servers = (long)x->u;
    if (GIVEN("--workers")) opt->workers = (long)x->u;
    if (GIVEN("--max-workers")) {
        if ((long)x->u < opt->workers)
            return usage_error("--max-workers %ld is below --workers %ld", (long)x->u,
                               opt->workers);
        opt->max_workers = (long)x->u;
    }
    if (GIVEN("--max-servers")) {
        if (opt->servers < 1)
            return usage_error("--max-servers needs --servers 1 or more: the servers the job "
                               "starts with hold the free slots' ranges");
        if ((long)x->u < opt->servers)
            return usage_error("--max-servers %ld is below --servers %ld", (long)x->u,
                               opt->servers);
        opt->max_servers = (long)x->u;
    }
    if (GIVEN("--timeout")) opt->timeout_s = (long)x->u;
    if (GIVEN("--on-failure")) opt->on_failure = x->choice ? ON_FAILURE_WAIT : ON_FAILURE_STOP;
    if (GIVEN("--on-server-failure") && x->choice) {
        const char *k = getenv("LOOM_REPLICAS");
        if (!k || strtol(k, NULL, 10) < 1)
            return usage_error("--on-server-failure restart needs replicas (loom train "
                               "--replicas K, or LOOM_REPLICAS=K for loom run): a replacement "
                               "server copies its ranges from the servers that hold them");
        opt->restart_servers = 1;
    }
    static const char *const worker_policies[] = {"fail", "continue", "restart"};
    if (GIVEN("--on-worker-failure") &&
        setenv("LOOM_ON_WORKER_FAILURE", worker_policies[x->choice], 1) < 0)
        return usage_error("cannot set LOOM_ON_WORKER_FAILURE: %s", strerror(errno));
    const char *policy = getenv("LOOM_ON_WORKER_FAILURE");
    opt->restart_workers = policy && !strcmp(policy, "restart");
    if (GIVEN("--max-restarts")) {
        if (!opt->restart_workers)
            return usage_error("--max-restarts needs --on-worker-failure restart");
        opt->max_restarts = (long)x->u;
    }
    if (opt->restart_workers) {
        opt->checkpoint_dir = getenv("LOOM_CHECKPOINT_DIR");
        if (!opt->checkpoint_dir || !opt->checkpoint_dir[0])
            return usage_error("--on-worker-failure restart needs checkpoints to restart from: "
                               "LOOM_CHECKPOINT_DIR (loom train --checkpoint-dir)");
    }
    opt->verbose = GIVEN("--verbose") != NULL;
    opt->no_status = GIVEN("--no-status") != NULL;
    if (GIVEN("--status-bind")) {
        if (x->text[0] == '\0') return usage_error("--status-bind takes an address");
        opt->status_bind = x->text;
    }
    if (GIVEN("--bind")) {
        if (strlen(x->text) > MAX_BIND_LEN)
            return usage_error("--bind takes a host name or address of at most %d characters",
                               MAX_BIND_LEN);
        opt->bind = x->text;
    }
    if (GIVEN("--interface")) {
        if (loom_interface_address(x->text, opt->interface_addr, sizeof opt->interface_addr))
            return usage_error("--interface takes a network interface with an IPv4 address, "
                               "not '%s'",
                               x->text);
        opt->interface = x->text;
        opt->bind = opt->interface_addr;
    }
    if (GIVEN("--heartbeat-timeout")) {
        long timeout = (long)x->u, interval = heartbeat_interval_ms();
        if (timeout < HEARTBEATS_PER_TIMEOUT * interval)
            return usage_error("--heartbeat-timeout %ld is too short: a process is declared "
                               "dead after %d missed heartbeats, so the minimum is %ld ms "
                               "with heartbeats every %ld ms (LOOM_HEARTBEAT_MS%s)",
                               timeout, HEARTBEATS_PER_TIMEOUT, HEARTBEATS_PER_TIMEOUT * interval,
                               interval, getenv("LOOM_HEARTBEAT_MS") ? "" : ", the default");
        opt->heartbeat_timeout_ms = timeout;
    }
    if (GIVEN("--secret")) {
        if (x->text[0] == '\0') return usage_error("--secret takes a file made by loom keygen");
        opt->secret = x->text;
    }
    opt->insecure = GIVEN("--insecure") != NULL;
    if (!opt->secret && !opt->insecure) {
        const char *inherited = getenv("LOOM_SECRET_FILE");
        if (inherited && inherited[0]) opt->secret = inherited;
    }
#undef GIVEN
    opt->program = argv + program;
    return 0;
}

/* stdin, stdout or stderr closed would let a pipe take their number. */
static int ensure_std_fds(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) >= 0) continue;
        if (open("/dev/null", O_RDWR) != fd) return -1;
    }
    return 0;
}

/* Every process of the job gets one random LOOM_JOB_TOKEN (unless the caller
 * chose one): the scheduler refuses nodes of any other job, say one started
 * by hand on the same fixed port (docs/SECURITY.md, "Node identity"). */
static int set_job_token(void)
{
    if (getenv("LOOM_JOB_TOKEN") && *getenv("LOOM_JOB_TOKEN")) return 0;
    uint8_t bytes[16];
    if (getrandom(bytes, sizeof bytes, 0) != (ssize_t)sizeof bytes) return -1;
    char token[2 * sizeof bytes + 1];
    for (size_t i = 0; i < sizeof bytes; i++) snprintf(token + 2 * i, 3, "%02x", bytes[i]);
    return setenv("LOOM_JOB_TOKEN", token, 1);
}

/* --- the job secret ------------------------------------------------------ */

/* The throw-away secret: a file in a directory of its own (mode 0700), so that
 * nobody else can have placed or replaced anything there. */
struct temp_secret {
    char dir[PATH_MAX];
    char file[PATH_MAX + 8]; /* dir + "/secret" */
};

static void remove_temp_secret(struct temp_secret *t)
{
    if (t->file[0]) unlink(t->file);
    if (t->dir[0]) rmdir(t->dir);
    t->file[0] = t->dir[0] = '\0';
}

/* Check the given secret, or make a throw-away one; export LOOM_SECRET_FILE.
 * Returns 0, or the exit status after a message. */
static int prepare_secret(const struct options *opt, struct temp_secret *t)
{
    char err[PATH_MAX + 256];
    if (opt->insecure) return unsetenv("LOOM_SECRET_FILE") ? 1 : 0;
    if (opt->secret) {
        char key[LOOM_SECRET_LEN + 1];
        int rc = loom_secret_load(opt->secret, key, err, sizeof err);
        memset(key, 0, sizeof key);
        if (rc) {
            run_say("%s", err);
            return 2;
        }
        return setenv("LOOM_SECRET_FILE", opt->secret, 1) ? 1 : 0;
    }
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !tmp[0]) tmp = "/tmp";
    if ((size_t)snprintf(t->dir, sizeof t->dir, "%s/loom-job.XXXXXX", tmp) >= sizeof t->dir ||
        !mkdtemp(t->dir)) {
        run_say("cannot make a directory for the job secret in %s: %s", tmp, strerror(errno));
        t->dir[0] = '\0';
        return 1;
    }
    snprintf(t->file, sizeof t->file, "%s/secret", t->dir);
    if (loom_secret_generate(t->file, 0, err, sizeof err)) {
        run_say("cannot make the job secret: %s", err);
        t->file[0] = '\0';
        remove_temp_secret(t);
        return 1;
    }
    if (opt->verbose) run_say("job secret in %s (removed at the end of the job)", t->file);
    return setenv("LOOM_SECRET_FILE", t->file, 1) ? 1 : 0;
}

static int set_common_env(const struct options *opt)
{
    if (set_job_token() < 0) return -1;
    if (run_setenv_long("LOOM_NUM_SERVERS", opt->max_servers ? opt->max_servers : opt->servers) <
            0 ||
        (opt->max_servers ? run_setenv_long("LOOM_START_SERVERS", opt->servers)
                          : unsetenv("LOOM_START_SERVERS")) < 0 ||
        run_setenv_long("LOOM_NUM_WORKERS", opt->max_workers ? opt->max_workers : opt->workers) <
            0 ||
        (opt->max_workers ? run_setenv_long("LOOM_START_WORKERS", opt->workers)
                          : unsetenv("LOOM_START_WORKERS")) < 0 ||
        setenv("LOOM_BIND", opt->bind, 1) < 0 ||
        unsetenv("LOOM_INTERFACE") < 0) /* --interface is already LOOM_BIND */
        return -1;
    if (opt->heartbeat_timeout_ms &&
        run_setenv_long("LOOM_HEARTBEAT_TIMEOUT_MS", opt->heartbeat_timeout_ms) < 0)
        return -1;
    if (opt->verbose && setenv("LOOM_VERBOSE", "1", 1) < 0) return -1;
    if (opt->no_status && setenv("LOOM_STATUS_PORT", "-1", 1) < 0) return -1;
    if (opt->status_bind && setenv("LOOM_STATUS_BIND", opt->status_bind, 1) < 0) return -1;
    return 0;
}

/* Start the scheduler, then (once it has published its address) the others,
 * and run the loop until every child is reaped. 0, or 1 after a message. */
static int run_job(struct job *job)
{
    int addr_pipe[2];
    if (run_make_pipe(addr_pipe) < 0) {
        run_say("cannot set up: %s", strerror(errno));
        return 1;
    }
    char scheduler_addr[MAX_BIND_LEN + 8];
    snprintf(scheduler_addr, sizeof scheduler_addr, "%s:0", job->opt->bind);
    job->addr_deadline = run_now_ms() + ADDRESS_TIMEOUT_MS;
    int rc = run_spawn(job, &job->children[0], "scheduler", 0, scheduler_addr, addr_pipe[1]);
    close(addr_pipe[1]); /* now only the scheduler holds it: EOF when it is gone */
    if (rc < 0) {
        close(addr_pipe[0]);
        return 1;
    }
    job->addr_fd = addr_pipe[0];
    run_set_nonblock(job->addr_fd);

    if (run_event_loop(job) < 0) {
        job->error = 1;
        run_kill_and_reap_all(job);
    }
    if (job->addr_fd >= 0) close(job->addr_fd);
    job->addr_fd = -1;
    return 0;
}

/* --on-worker-failure restart, before the job first starts: the checkpoint
 * directory must hold nothing a restart could mistake for this job's, unless
 * the job resumes from that very directory (whose newest checkpoint is then
 * where it starts anyway). 0, or 2 after a message. */
static int check_restart_dir(const struct options *opt)
{
    loom_checkpoint *ck;
    int rc = loom_checkpoint_open(opt->checkpoint_dir, -1, &ck);
    if (rc == LOOM_ENOTFOUND) return 0;
    const char *resume = getenv("LOOM_RESUME");
    struct stat dir, from;
    if (resume && !stat(opt->checkpoint_dir, &dir) && !stat(resume, &from) &&
        dir.st_dev == from.st_dev && dir.st_ino == from.st_ino) {
        if (!rc) loom_checkpoint_close(ck);
        return 0;
    }
    if (rc) {
        run_say("--on-worker-failure restart: %s", loom_last_error());
        return 2;
    }
    run_say("--on-worker-failure restart: %s already holds a checkpoint (clock %lld) of an earlier "
            "job, which a restart would take for this job's: resume from it (loom train --resume "
            "%s) or give an empty directory",
            opt->checkpoint_dir, (long long)loom_checkpoint_clock(ck), opt->checkpoint_dir);
    loom_checkpoint_close(ck);
    return 2;
}

/* A worker died (--on-worker-failure restart) and every child is reaped:
 * point the next start at the newest checkpoint (LOOM_RESUME) and count the
 * restart (LOOM_RESTART, which tells `loom train` to resume where the launcher
 * says). With no checkpoint committed yet, the job starts as it did the first
 * time. 0, or 1 after a message. */
static int prepare_restart(struct job *job)
{
    const struct options *opt = job->opt;
    char count[24];
    job->restarts++;
    loom_checkpoint *ck;
    int rc = loom_checkpoint_open(opt->checkpoint_dir, -1, &ck);
    if (rc == LOOM_ENOTFOUND) {
        const char *resume = getenv("LOOM_RESUME");
        run_say("restart %d of %ld: no checkpoint committed yet; the job starts again from %s",
                job->restarts, opt->max_restarts, resume ? resume : "the beginning");
    } else if (rc) {
        run_say("cannot restart: %s", loom_last_error());
        return 1;
    } else {
        run_say("restart %d of %ld: the job starts again from its checkpoint at clock %lld",
                job->restarts, opt->max_restarts, (long long)loom_checkpoint_clock(ck));
        loom_checkpoint_close(ck);
        if (setenv("LOOM_RESUME", opt->checkpoint_dir, 1) < 0) return 1;
    }
    snprintf(count, sizeof count, "%d", job->restarts);
    if (setenv("LOOM_RESTART", count, 1) < 0) return 1;
    run_init_children(job);
    job->addr_eof = job->published = 0;
    job->addr_len = 0;
    job->addr[0] = '\0';
    job->stopping = job->killed = job->rollback = 0;
    job->failures = job->deaths = job->scheduler_gone = 0;
    job->replacement_deadline = 0;
    job->named_dead = -1;
    return 0;
}

/* Open files for `children` processes: the two pipes kept per child, a few
 * of the launcher's own, and the pipe of the child being started. The soft
 * limit is raised to the hard one when short (any process may); a hard
 * limit that is short too ends the launcher before it starts anything. */
static int raise_fd_limit(int children)
{
    rlim_t need = 2 * (rlim_t)children + 32;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= need) return 0;
    struct rlimit raised = {rl.rlim_max == RLIM_INFINITY ? need : rl.rlim_max, rl.rlim_max};
    if (raised.rlim_cur >= need && !setrlimit(RLIMIT_NOFILE, &raised)) return 0;
    run_say("failed: a job of %d processes needs %llu open files in the launcher, but the hard "
            "limit is %llu (ulimit -Hn): raise it (ulimit -Hn as root, nofile in "
            "/etc/security/limits.conf) or start fewer processes",
            children, (unsigned long long)need, (unsigned long long)rl.rlim_max);
    return 1;
}

int cmd_run(int argc, char **argv)
{
    struct options opt;
    int rc = parse_options(argc, argv, &opt);
    if (rc) return rc < 0 ? 0 : rc;
    if (opt.restart_workers && (rc = check_restart_dir(&opt))) return rc;

    struct job job = {.opt = &opt, .addr_fd = -1, .launcher_pid = getpid(), .named_dead = -1};
    struct temp_secret temp_secret = {{0}, {0}};
    job.nchildren = 1 + (int)opt.servers + (int)opt.workers;
    if (raise_fd_limit(job.nchildren)) return 1;
    job.children = calloc((size_t)job.nchildren, sizeof *job.children);
    job.pfds = calloc(2 + 2 * (size_t)job.nchildren, sizeof *job.pfds);
    job.pstreams = calloc(2 + 2 * (size_t)job.nchildren, sizeof *job.pstreams);
    if (!job.children || !job.pfds || !job.pstreams) {
        run_say("out of memory");
        rc = 1;
        goto out;
    }
    run_init_children(&job);

    sigprocmask(SIG_SETMASK, NULL, &job.orig_mask);
    if (ensure_std_fds() < 0 || run_install_signal_handlers() < 0 || set_common_env(&opt) < 0) {
        run_say("cannot set up: %s", strerror(errno));
        rc = 1;
        goto out;
    }
    /* After the signal handlers: a SIGINT from now on ends in the loop or at
     * `out`, both of which remove the throw-away secret. */
    rc = prepare_secret(&opt, &temp_secret);
    if (rc) goto out;

    /* --timeout bounds the whole job, restarts included. */
    job.job_deadline = run_now_ms() + (int64_t)opt.timeout_s * 1000;
    while (!(rc = run_job(&job)) && job.rollback && !job.error && !job.exit_signal &&
           !job.timed_out && !(rc = prepare_restart(&job))) {
    }
    if (rc) goto out;
    rc = run_exit_status(&job, run_print_failures(&job));
    if (rc == 0 && job.restarts)
        run_say("the job finished after %d restart(s) (--on-worker-failure restart)", job.restarts);
    if (run_output_errno && rc == 0) {
        run_say("failed: cannot write the job's output: %s", strerror(run_output_errno));
        rc = 1;
    }

out:
    remove_temp_secret(&temp_secret);
    free(job.children);
    free(job.pfds);
    free(job.pstreams);
    return rc;
}
