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
 * machine cannot join or read a job by default. */
#include "commands.h"

#include "common/app.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <loom/checkpoint.h>
#include <loom/error.h>
#include <loom/node.h>

/* Limits for the flags: generous for one machine, and small enough that
 * the two pipes kept per child stay far below the usual 1024-fd limit. */
#define MAX_SERVERS      128
#define MAX_WORKERS      128
#define MAX_TIMEOUT_S    (366L * 24 * 3600)
#define MAX_RESTARTS     1000
#define MAX_HEARTBEAT_MS 3600000L
/* A node missing this many heartbeats in a row is dead: with fewer, one late
 * heartbeat on a busy machine would kill a healthy node. The library keeps
 * the same ratio when it picks the interval itself (src/core/config.c). */
#define HEARTBEATS_PER_TIMEOUT 4
#define MAX_BIND_LEN           127 /* loom_config.bind_host holds 128 bytes */
#define ADDRESS_TIMEOUT_MS     30000
#define ADDRESS_EOF_MS         1000 /* see read_address() */
#define GRACE_MS               3000
/* A replacement the launcher stops because the scheduler ended is only
 * waiting to register (nothing of the job's to save): a short grace. */
#define REPLACEMENT_GRACE_MS 1000
#define LINE_BUF             4096 /* longer lines are split into pieces of this size */
#define LABEL_MAX            32

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

enum on_failure { ON_FAILURE_STOP, ON_FAILURE_WAIT };

struct options {
    long servers, workers;
    const char *bind;
    const char *interface; /* --interface NAME; bind then holds its address */
    char interface_addr[64];
    long heartbeat_timeout_ms; /* 0: flag not given, leave the variable alone */
    long timeout_s;            /* 0: no bound */
    enum on_failure on_failure;
    int restart_servers; /* --on-server-failure restart */
    int restart_workers; /* --on-worker-failure restart (or LOOM_ON_WORKER_FAILURE) */
    long max_restarts;
    const char *checkpoint_dir; /* LOOM_CHECKPOINT_DIR, where a restarted job resumes */
    int verbose;
    int no_status;
    const char *status_bind; /* --status-bind ADDR; NULL: LOOM_STATUS_BIND or loopback */
    const char *secret;      /* --secret FILE, else LOOM_SECRET_FILE; NULL: make a throw-away one */
    int insecure;
    char **program; /* PROGRAM and its arguments, NULL-terminated */
};

struct job;

/* One of a child's output pipes, and the unfinished line read from it. */
struct stream {
    int fd;   /* read end; -1 before the child starts and once closed (0 is a valid fd) */
    int dest; /* where its lines go: STDOUT_FILENO or STDERR_FILENO */
    const char *label;
    struct job *job;
    size_t len;
    char buf[LINE_BUF];
};

struct child {
    char label[LABEL_MAX]; /* "scheduler", "server 1", "worker 0" */
    pid_t pid;             /* also its process group id */
    int started, reaped;
    int status;    /* wait status, once reaped */
    int signalled; /* the launcher has told it to stop */
    int failed;    /* ended badly on its own, before being told to stop: the
                      how-manieth failure of the job (1, 2, ...), 0 if none */
    struct stream out, err;
    int replaced; /* a replacement runs under this label (--on-server-failure restart) */
    /* A server killed by a signal that the launcher replaced: the job's
     * how-manieth such death, and its wait status; 0 once the scheduler says
     * the replacement is back (holds full copies of its ranges again). If the
     * job fails before, these deaths are what brought it down. */
    int died;
    int died_status;
    int missing; /* the scheduler gave up assembling the job without it */
};

struct job {
    const struct options *opt;
    struct child *children; /* [0] scheduler, [1..S] servers, then workers */
    int nchildren;
    pid_t launcher_pid;
    sigset_t orig_mask; /* the mask the launcher was started with, for children */

    int addr_fd; /* read end of the scheduler's LOOM_ADDRESS_FD pipe; -1 when closed */
    int addr_eof;
    int published;
    size_t addr_len;
    char addr[256];
    int64_t addr_deadline, job_deadline, kill_deadline; /* ms, monotonic */

    int stopping; /* SIGTERM sent to every child */
    int killed;   /* SIGKILL sent to every child */
    int timed_out;
    int error;       /* the launcher itself failed (exit 1) */
    int exit_signal; /* signal that stopped the launcher, 0 if none */
    int signals_seen;
    int failures;   /* children that failed so far */
    int named_dead; /* the child the library's messages first named dead; -1: none */
    int rollback;   /* a worker died: start the job again (--on-worker-failure restart) */
    int deaths;     /* servers killed and replaced so far (child.died) */
    /* The scheduler ended or gave up ("...; stopping"): no replacement can
     * join any more. */
    int scheduler_gone;
    int64_t replacement_deadline; /* SIGKILL the replacements stopped then; 0: none */
    int restarts;                 /* how many times the job was started again */

    struct pollfd *pfds;
    struct stream **pstreams; /* pfds[i] belongs to pstreams[i] (NULL: not a stream) */
};

/* Written by the signal handler, read by the loop. */
static int self_pipe[2] = {-1, -1};
static volatile sig_atomic_t child_exited;
static volatile sig_atomic_t term_signal; /* last SIGINT/SIGTERM/SIGHUP */
static volatile sig_atomic_t term_count;

static const int handled_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};
#define NUM_HANDLED (sizeof handled_signals / sizeof handled_signals[0])

#if defined(__GNUC__)
#define PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define PRINTF_LIKE(fmt, args)
#endif
static void say(const char *fmt, ...) PRINTF_LIKE(1, 2);
static int usage_error(const char *fmt, ...) PRINTF_LIKE(1, 2);

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The first error other than EPIPE in writing the job's output (a full
 * disk, an I/O error), 0 if none: the job's results were lost, so a job that
 * otherwise succeeded must not exit 0. */
static int output_errno;

static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            /* Nobody reads our output any more (EPIPE, `loom run ... | head`):
             * the job goes on regardless. */
            if (n < 0 && errno != EPIPE && !output_errno) output_errno = errno;
            return;
        }
        buf += n;
        len -= (size_t)n;
    }
}

/* A launcher message on stderr, as one write so it never splits a line. */
static void say(const char *fmt, ...)
{
    char line[1024] = "loom run: ";
    size_t n = strlen(line);
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    if (len < 0) return;
    n += (size_t)len < sizeof line - n - 1 ? (size_t)len : sizeof line - n - 2;
    line[n++] = '\n';
    write_all(STDERR_FILENO, line, n);
}

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

/* "exited with status 3" / "was killed by signal 9 (Killed)" */
static const char *describe_status(int status, char *buf, size_t size)
{
    if (WIFEXITED(status))
        snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, size, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, size, "ended with wait status %d", status);
    return buf;
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGINT:
        return "SIGINT";
    case SIGTERM:
        return "SIGTERM";
    case SIGHUP:
        return "SIGHUP";
    default:
        return "a signal";
    }
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

/* --- output streams ------------------------------------------------------ */

/* When a process stops answering, it does not fail by itself: its peers
 * notice, say which node died, and exit with LOOM_EXIT_PEER_FAILED. Their
 * messages (src/core/node_control.c) read "... worker 1 (node 5) died: ..." or
 * "... lost the scheduler: ...". The first node so named, while the job
 * still runs, is the culprit to report if no process failed by itself. */
static void note_named_dead(struct job *job, const char *text);
/* The scheduler's messages that change what the launcher does: "...;
 * stopping" (node_fail in src/core/node_control.c) says it gave up on the job, "the
 * job did not assemble: ...; missing: worker 1 (node 3)" (src/core/
 * scheduler.c) which processes never registered, and "server 1 rejoined: it
 * holds full copies ..." (src/ps/registry.c) that a replacement is back, so
 * that server's death no longer counts against the replicas. */
static void note_scheduler_line(struct job *job, const char *text);

static void emit_line(const struct stream *s, const char *data, size_t len)
{
    char line[LABEL_MAX + 4 + LINE_BUF + 1];
    int n = snprintf(line, sizeof line, "[%s] ", s->label);
    memcpy(line + n, data, len);
    line[(size_t)n + len] = '\n';
    write_all(s->dest, line, (size_t)n + len + 1);
    if (s->dest == STDERR_FILENO) {
        line[(size_t)n + len] = '\0';
        note_named_dead(s->job, line + n);
        if (s == &s->job->children[0].err) note_scheduler_line(s->job, line + n);
    }
}

/* Emit every complete line in s->buf and keep the unfinished tail, unless
 * the buffer is full (the line is split) or the stream ended (flushed). */
static void flush_lines(struct stream *s, int at_eof)
{
    size_t start = 0;
    const char *nl;
    while ((nl = memchr(s->buf + start, '\n', s->len - start)) != NULL) {
        size_t end = (size_t)(nl - s->buf);
        emit_line(s, s->buf + start, end - start);
        start = end + 1;
    }
    if (start < s->len && (at_eof || (start == 0 && s->len == sizeof s->buf))) {
        emit_line(s, s->buf + start, s->len - start);
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
}

static void close_stream(struct stream *s)
{
    if (s->fd < 0) return;
    flush_lines(s, 1);
    close(s->fd);
    s->fd = -1;
}

/* One read: 1 if data came, 0 if nothing is available now, -1 once closed. */
static int read_stream(struct stream *s)
{
    ssize_t n = read(s->fd, s->buf + s->len, sizeof s->buf - s->len);
    if (n > 0) {
        s->len += (size_t)n;
        flush_lines(s, 0);
        return 1;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    close_stream(s);
    return -1;
}

/* After the child is reaped everything it wrote is already in the pipe. Read
 * it all, then close: a grandchild holding the pipe open must not keep the
 * launcher waiting. */
static void drain_stream(struct stream *s)
{
    while (s->fd >= 0 && read_stream(s) > 0) {
    }
    close_stream(s);
}

/* --- children ------------------------------------------------------------ */

static int set_cloexec(int fd)
{
    int flags = fcntl(fd, F_GETFD);
    return flags < 0 ? -1 : fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

static int set_nonblock(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

/* Both ends close-on-exec, so no child inherits another child's pipes. */
static int make_pipe(int fds[2])
{
    if (pipe(fds) < 0) return -1;
    if (set_cloexec(fds[0]) < 0 || set_cloexec(fds[1]) < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    return 0;
}

static void child_fail(const char *what, const char *program)
{
    char msg[512];
    int n = snprintf(msg, sizeof msg, "loom run: %s %s: %s\n", what, program, strerror(errno));
    if (n > 0) write_all(STDERR_FILENO, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
    _exit(127);
}

/* In the forked child: become a process group of its own, die with the
 * launcher, restore default signal handling, wire up stdio, exec. */
static void child_exec(const struct job *job, int out_fd, int err_fd, int addr_fd)
{
    const char *program = job->opt->program[0];
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != job->launcher_pid) _exit(127); /* the launcher died before prctl */

    for (size_t i = 0; i < NUM_HANDLED; i++) signal(handled_signals[i], SIG_DFL);
    signal(SIGPIPE, SIG_DFL); /* ignored dispositions would survive exec */
    sigprocmask(SIG_SETMASK, &job->orig_mask, NULL);

    /* No terminal input: the child is not in the foreground process group. */
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0)
        child_fail("cannot open /dev/null for", program);
    if (null_fd != STDIN_FILENO) close(null_fd);
    if (dup2(out_fd, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0)
        child_fail("cannot redirect the output of", program);
    if (addr_fd >= 0 && fcntl(addr_fd, F_SETFD, 0) < 0) /* the one fd the scheduler inherits */
        child_fail("cannot pass LOOM_ADDRESS_FD to", program);

    execvp(program, job->opt->program);
    child_fail("cannot execute", program);
}

static int setenv_long(const char *name, long value)
{
    char text[32];
    snprintf(text, sizeof text, "%ld", value);
    return setenv(name, text, 1);
}

/* Start one child. The per-child variables are set in the launcher's own
 * environment just before fork(), so the child needs no allocation before
 * exec; the launcher itself never reads them. */
static int spawn(struct job *job, struct child *c, const char *role, int rank,
                 const char *scheduler, int addr_fd)
{
    int out[2], err[2], saved_errno;
    if (make_pipe(out) < 0) goto fail;
    if (make_pipe(err) < 0) {
        saved_errno = errno;
        close(out[0]);
        close(out[1]);
        errno = saved_errno;
        goto fail;
    }
    if (setenv("LOOM_ROLE", role, 1) < 0 || setenv_long("LOOM_RANK", rank) < 0 ||
        setenv("LOOM_SCHEDULER", scheduler, 1) < 0 ||
        (addr_fd >= 0 ? setenv_long("LOOM_ADDRESS_FD", addr_fd) : unsetenv("LOOM_ADDRESS_FD")) < 0)
        goto fail_pipes;

    /* Signals stay blocked until the child has dropped our handlers: a SIGTERM
     * meant for the child must not run the launcher's handler in it. */
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < NUM_HANDLED; i++) sigaddset(&block, handled_signals[i]);
    sigprocmask(SIG_BLOCK, &block, &old);
    pid_t pid = fork();
    if (pid == 0) child_exec(job, out[1], err[1], addr_fd);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) goto fail_pipes;

    /* Also done by the child; doing it here too means the group exists
     * before the launcher could ever signal it. EACCES: child already exec'd. */
    setpgid(pid, pid);
    close(out[1]);
    close(err[1]);
    set_nonblock(out[0]);
    set_nonblock(err[0]);
    c->pid = pid;
    c->started = 1;
    c->out = (struct stream){.fd = out[0], .dest = STDOUT_FILENO, .label = c->label, .job = job};
    c->err = (struct stream){.fd = err[0], .dest = STDERR_FILENO, .label = c->label, .job = job};
    if (job->opt->verbose) say("started %s (pid %ld)", c->label, (long)pid);
    return 0;

fail_pipes:
    saved_errno = errno;
    close(out[0]);
    close(out[1]);
    close(err[0]);
    close(err[1]);
    errno = saved_errno;
fail:
    say("cannot start %s: %s", c->label, strerror(errno));
    return -1;
}

static void signal_child(struct child *c, int sig)
{
    if (!c->started || c->reaped) return;
    /* The whole group, so that helpers the child forked go too. */
    if (kill(-c->pid, sig) < 0) kill(c->pid, sig);
    c->signalled = 1;
}

static void begin_stop(struct job *job)
{
    if (job->stopping) return;
    job->stopping = 1;
    job->kill_deadline = now_ms() + GRACE_MS;
    for (int i = 0; i < job->nchildren; i++) signal_child(&job->children[i], SIGTERM);
}

static void kill_all(struct job *job)
{
    job->stopping = 1;
    job->killed = 1;
    for (int i = 0; i < job->nchildren; i++) signal_child(&job->children[i], SIGKILL);
}

/* The scheduler ended or gave up: no replacement can join the job any more.
 * One still waiting to register would wait out its connect timeout
 * (LOOM_CONNECT_TIMEOUT_MS, a minute by default) and then fail as if it were
 * the cause, so it is stopped now: SIGTERM, SIGKILL after a short grace
 * (check_deadlines). Every other process hears the end from the scheduler. */
static void scheduler_ended(struct job *job)
{
    if (job->scheduler_gone) return;
    job->scheduler_gone = 1;
    for (int i = 1; i <= job->opt->servers && !job->stopping; i++) {
        struct child *c = &job->children[i];
        if (!c->replaced || !c->started || c->reaped) continue;
        say("stopping the replacement for %s: the scheduler has ended the job", c->label);
        signal_child(c, SIGTERM);
        job->replacement_deadline = now_ms() + REPLACEMENT_GRACE_MS;
    }
}

/* Start server or worker children[i] (i >= 1) in its role and rank. */
static int spawn_member(struct job *job, int i)
{
    int is_server = i <= job->opt->servers;
    int rank = is_server ? i - 1 : i - 1 - (int)job->opt->servers;
    return spawn(job, &job->children[i], is_server ? "server" : "worker", rank, job->addr, -1);
}

static void start_servers_and_workers(struct job *job)
{
    for (int i = 1; i < job->nchildren && !job->stopping; i++) {
        if (spawn_member(job, i) < 0) {
            job->error = 1;
            begin_stop(job);
        }
    }
}

/* Start a replacement for child c, which died: the same role, rank and
 * environment. LOOM_REJOIN=1 lets it ask to join again until the scheduler
 * has declared the dead one dead (node_start, src/core/node.c). Its output streams are
 * new; the old ones were drained when it was reaped. */
static int respawn(struct job *job, struct child *c)
{
    char label[LABEL_MAX];
    memcpy(label, c->label, sizeof label);
    *c = (struct child){
        .out.fd = -1, .err.fd = -1, .replaced = 1, .died = ++job->deaths, .died_status = c->status};
    memcpy(c->label, label, sizeof label);
    if (setenv("LOOM_REJOIN", "1", 1) < 0) return -1;
    int rc = spawn_member(job, (int)(c - job->children));
    unsetenv("LOOM_REJOIN");
    return rc;
}

/* "host:port" with a non-empty host and a port from 1 to 65535. */
static int valid_address(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr) return 0;
    char *end;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    return end != colon + 1 && *end == '\0' && errno == 0 && port >= 1 && port <= 65535;
}

static void publish_address(struct job *job)
{
    close(job->addr_fd);
    job->addr_fd = -1;
    job->addr[strcspn(job->addr, "\r\n")] = '\0';
    if (!valid_address(job->addr)) {
        say("scheduler published an invalid address '%s' (expected host:port)", job->addr);
        job->error = 1;
        begin_stop(job);
        return;
    }
    job->published = 1;
    if (job->opt->verbose) say("scheduler is at %s", job->addr);
    if (!job->stopping) start_servers_and_workers(job);
}

/* The scheduler writes "host:port\n" and closes the pipe. */
static void read_address(struct job *job)
{
    ssize_t n = read(job->addr_fd, job->addr + job->addr_len, sizeof job->addr - 1 - job->addr_len);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n > 0) {
        job->addr_len += (size_t)n;
        job->addr[job->addr_len] = '\0';
        if (memchr(job->addr, '\n', job->addr_len) || job->addr_len == sizeof job->addr - 1)
            publish_address(job);
        return;
    }
    if (job->addr_len > 0) { /* a last line without newline still counts */
        publish_address(job);
        return;
    }
    /* Closed without an address. Usually the scheduler is exiting, and the
     * kernel closes its files before it becomes reapable, so wait a moment
     * for it: then the error can name the scheduler's exit status. */
    close(job->addr_fd);
    job->addr_fd = -1;
    job->addr_eof = 1;
    int64_t soon = now_ms() + ADDRESS_EOF_MS;
    if (soon < job->addr_deadline) job->addr_deadline = soon;
}

/* With --on-worker-failure continue a worker that dies (killed by a signal:
 * a crash, the OOM killer, a kill) is no failure of the job: the scheduler
 * goes on without it (docs/FAULTS.md). A worker that exits with an error
 * status did not die: it failed (an app error, or LOOM_EXIT_PEER_FAILED when
 * the job did), and so does the job. */
static int worker_may_be_lost(const struct job *job, const struct child *c, int status)
{
    const char *policy = getenv("LOOM_ON_WORKER_FAILURE");
    return policy && !strcmp(policy, "continue") && c - job->children > job->opt->servers &&
           !job->stopping && WIFSIGNALED(status);
}

/* With --on-worker-failure restart a worker killed by a signal makes the
 * launcher start the whole job again from its newest checkpoint (restart_job),
 * up to --max-restarts times. Only a death: a worker that exits with an error
 * status would fail again. */
static int worker_died_under_restart(const struct job *job, const struct child *c, int status)
{
    return job->opt->restart_workers && c - job->children > job->opt->servers && !job->stopping &&
           WIFSIGNALED(status);
}

static void child_ended(struct job *job, struct child *c, int status)
{
    char how[128];
    c->reaped = 1;
    c->status = status;
    drain_stream(&c->out);
    drain_stream(&c->err);

    if (c == &job->children[0]) scheduler_ended(job);

    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    int before_address = c == &job->children[0] && !job->published;
    if (c->signalled || (ok && !before_address)) {
        /* Success, or ended because the launcher stopped it: not a failure. */
        if (job->opt->verbose) say("%s %s", c->label, describe_status(status, how, sizeof how));
        return;
    }
    /* children[0] is the scheduler, whose death ends the job: never replaced;
     * nor is a server once the scheduler is gone (no replacement could join). */
    if (job->opt->restart_servers && c > job->children && c - job->children <= job->opt->servers &&
        !job->stopping && !job->scheduler_gone && WIFSIGNALED(status)) {
        say("%s %s; starting a replacement (--on-server-failure restart)", c->label,
            describe_status(status, how, sizeof how));
        if (respawn(job, c) == 0) return;
        job->error = 1;
        begin_stop(job);
        return;
    }
    if (worker_died_under_restart(job, c, status)) {
        if (job->restarts < job->opt->max_restarts) {
            say("%s %s; stopping the job to start it again from its newest checkpoint "
                "(--on-worker-failure restart)",
                c->label, describe_status(status, how, sizeof how));
            /* Everything since that checkpoint is thrown away: no grace needed. */
            job->rollback = 1;
            kill_all(job);
            return;
        }
        say("no restart left (--max-restarts %ld)", job->opt->max_restarts);
    }
    if (worker_may_be_lost(job, c, status)) {
        say("%s %s; the job goes on without it (LOOM_ON_WORKER_FAILURE=continue)", c->label,
            describe_status(status, how, sizeof how));
        return;
    }
    c->failed = ++job->failures;
    say("%s %s", c->label, describe_status(status, how, sizeof how));
    if (before_address) {
        say("scheduler exited before publishing its address");
        job->error = 1;
        begin_stop(job);
    } else if (job->opt->on_failure == ON_FAILURE_STOP) {
        begin_stop(job);
    }
}

static void reap_children(struct job *job)
{
    for (int i = 0; i < job->nchildren; i++) {
        struct child *c = &job->children[i];
        if (!c->started || c->reaped) continue;
        int status;
        pid_t r = waitpid(c->pid, &status, WNOHANG);
        if (r == c->pid) {
            child_ended(job, c, status);
        } else if (r < 0 && errno != EINTR) {
            /* Cannot happen for our own child; do not wait for it forever. */
            say("cannot wait for %s: %s", c->label, strerror(errno));
            c->reaped = 1;
            job->error = 1;
            begin_stop(job);
        }
    }
}

static int live_children(const struct job *job)
{
    int n = 0;
    for (int i = 0; i < job->nchildren; i++)
        n += job->children[i].started && !job->children[i].reaped;
    return n;
}

/* --- signals ------------------------------------------------------------- */

static void on_signal(int sig)
{
    int saved_errno = errno;
    if (sig == SIGCHLD) {
        child_exited = 1;
    } else {
        term_signal = sig;
        term_count++; /* safe: the handler runs with all our signals blocked */
    }
    char byte = 0;
    ssize_t unused = write(self_pipe[1], &byte, 1); /* full pipe: a wake-up is pending anyway */
    (void)unused;
    errno = saved_errno;
}

static int install_signal_handlers(void)
{
    if (make_pipe(self_pipe) < 0 || set_nonblock(self_pipe[0]) < 0 ||
        set_nonblock(self_pipe[1]) < 0)
        return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NUM_HANDLED; i++) sigaddset(&sa.sa_mask, handled_signals[i]);
    for (size_t i = 0; i < NUM_HANDLED; i++)
        if (sigaction(handled_signals[i], &sa, NULL) < 0) return -1;
    /* A closed stdout must not kill the launcher and orphan the job. */
    signal(SIGPIPE, SIG_IGN);
    /* Our parent may have blocked them; children get the original mask back. */
    return sigprocmask(SIG_UNBLOCK, &sa.sa_mask, NULL);
}

static void handle_signals(struct job *job)
{
    /* The bytes only woke us up; the flags say what happened. */
    char bytes[64];
    while (read(self_pipe[0], bytes, sizeof bytes) > 0) {
    }

    int count = term_count;
    if (count != job->signals_seen) {
        int repeated = job->exit_signal != 0 || count - job->signals_seen > 1;
        job->signals_seen = count;
        job->exit_signal = term_signal;
        if (repeated && !job->killed) {
            say("received %s again; killing the job now", signal_name(job->exit_signal));
            kill_all(job);
        } else if (!repeated) {
            say("received %s; stopping the job", signal_name(job->exit_signal));
            begin_stop(job);
        }
    }
    if (child_exited) {
        child_exited = 0;
        reap_children(job);
    }
}

/* --- the loop ------------------------------------------------------------ */

static void check_deadlines(struct job *job)
{
    int64_t now = now_ms();
    if (!job->stopping && !job->published && now >= job->addr_deadline) {
        if (job->addr_eof)
            say("scheduler closed LOOM_ADDRESS_FD without publishing its address; stopping it");
        else
            say("scheduler did not publish its address within %d s; stopping it",
                ADDRESS_TIMEOUT_MS / 1000);
        job->error = 1;
        begin_stop(job);
    }
    if (!job->stopping && job->opt->timeout_s > 0 && now >= job->job_deadline) {
        say("job exceeded --timeout %ld s; stopping it", job->opt->timeout_s);
        job->timed_out = 1;
        begin_stop(job);
    }
    if (job->replacement_deadline && !job->killed && now >= job->replacement_deadline) {
        job->replacement_deadline = 0;
        for (int i = 1; i <= job->opt->servers; i++) {
            struct child *c = &job->children[i];
            if (!c->replaced || !c->signalled || !c->started || c->reaped) continue;
            say("the replacement for %s did not stop within %d ms; killing it", c->label,
                REPLACEMENT_GRACE_MS);
            signal_child(c, SIGKILL);
        }
    }
    if (job->stopping && !job->killed && now >= job->kill_deadline) {
        for (int i = 0; i < job->nchildren; i++) {
            const struct child *c = &job->children[i];
            if (c->started && !c->reaped)
                say("%s did not stop within %d s; killing it", c->label, GRACE_MS / 1000);
        }
        kill_all(job);
    }
}

static int poll_timeout(const struct job *job)
{
    int64_t next = INT64_MAX;
    if (!job->stopping && !job->published && job->addr_deadline < next) next = job->addr_deadline;
    if (!job->stopping && job->opt->timeout_s > 0 && job->job_deadline < next)
        next = job->job_deadline;
    if (job->stopping && !job->killed && job->kill_deadline < next) next = job->kill_deadline;
    if (job->replacement_deadline && !job->killed && job->replacement_deadline < next)
        next = job->replacement_deadline;
    if (next == INT64_MAX) return -1;
    int64_t wait = next - now_ms();
    if (wait < 0) return 0;
    return wait > INT_MAX ? INT_MAX : (int)wait;
}

static int event_loop(struct job *job)
{
    while (live_children(job) > 0) {
        nfds_t n = 0;
        job->pfds[n] = (struct pollfd){.fd = self_pipe[0], .events = POLLIN};
        job->pstreams[n++] = NULL;
        if (job->addr_fd >= 0) {
            job->pfds[n] = (struct pollfd){.fd = job->addr_fd, .events = POLLIN};
            job->pstreams[n++] = NULL;
        }
        for (int i = 0; i < job->nchildren; i++) {
            struct stream *streams[2] = {&job->children[i].out, &job->children[i].err};
            for (int k = 0; k < 2; k++) {
                if (streams[k]->fd < 0) continue;
                job->pfds[n] = (struct pollfd){.fd = streams[k]->fd, .events = POLLIN};
                job->pstreams[n++] = streams[k];
            }
        }

        if (poll(job->pfds, n, poll_timeout(job)) < 0 && errno != EINTR) {
            say("poll failed: %s", strerror(errno));
            return -1;
        }
        /* Output and the address before SIGCHLD: what a child wrote before
         * exiting is then handled before its exit. */
        for (nfds_t i = 0; i < n; i++) {
            if (!job->pfds[i].revents) continue;
            if (job->pstreams[i])
                read_stream(job->pstreams[i]);
            else if (job->pfds[i].fd == job->addr_fd)
                read_address(job);
        }
        handle_signals(job);
        check_deadlines(job);
    }
    return 0;
}

/* Last resort when the loop itself broke: no child may outlive the launcher. */
static void kill_and_reap_all(struct job *job)
{
    kill_all(job);
    for (int i = 0; i < job->nchildren; i++) {
        struct child *c = &job->children[i];
        if (!c->started || c->reaped) continue;
        while (waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR) {
        }
        c->reaped = 1;
        drain_stream(&c->out);
        drain_stream(&c->err);
    }
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
            say("%s", err);
            return 2;
        }
        return setenv("LOOM_SECRET_FILE", opt->secret, 1) ? 1 : 0;
    }
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !tmp[0]) tmp = "/tmp";
    if ((size_t)snprintf(t->dir, sizeof t->dir, "%s/loom-job.XXXXXX", tmp) >= sizeof t->dir ||
        !mkdtemp(t->dir)) {
        say("cannot make a directory for the job secret in %s: %s", tmp, strerror(errno));
        t->dir[0] = '\0';
        return 1;
    }
    snprintf(t->file, sizeof t->file, "%s/secret", t->dir);
    if (loom_secret_generate(t->file, 0, err, sizeof err)) {
        say("cannot make the job secret: %s", err);
        t->file[0] = '\0';
        remove_temp_secret(t);
        return 1;
    }
    if (opt->verbose) say("job secret in %s (removed at the end of the job)", t->file);
    return setenv("LOOM_SECRET_FILE", t->file, 1) ? 1 : 0;
}

static int set_common_env(const struct options *opt)
{
    if (set_job_token() < 0) return -1;
    if (setenv_long("LOOM_NUM_SERVERS", opt->servers) < 0 ||
        setenv_long("LOOM_NUM_WORKERS", opt->workers) < 0 ||
        setenv("LOOM_BIND", opt->bind, 1) < 0 ||
        unsetenv("LOOM_INTERFACE") < 0) /* --interface is already LOOM_BIND */
        return -1;
    if (opt->heartbeat_timeout_ms &&
        setenv_long("LOOM_HEARTBEAT_TIMEOUT_MS", opt->heartbeat_timeout_ms) < 0)
        return -1;
    if (opt->verbose && setenv("LOOM_VERBOSE", "1", 1) < 0) return -1;
    if (opt->no_status && setenv("LOOM_STATUS_PORT", "-1", 1) < 0) return -1;
    if (opt->status_bind && setenv("LOOM_STATUS_BIND", opt->status_bind, 1) < 0) return -1;
    return 0;
}

static void note_named_dead(struct job *job, const char *text)
{
    if (job->named_dead >= 0 || job->stopping || strncmp(text, "loom", 4) != 0) return;
    if (strstr(text, "lost the scheduler")) {
        job->named_dead = 0;
        return;
    }
    const char *died = strstr(text, " died");
    if (!died) return;
    for (int i = 0; i < job->nchildren; i++) {
        const char *label = job->children[i].label;
        size_t len = strlen(label);
        for (const char *p = strstr(text, label); p && p < died; p = strstr(p + 1, label)) {
            const char *after = p + len, *paren;
            int whole_name = p > text && p[-1] == ' ';
            int named = after == died || (strncmp(after, " (node ", 7) == 0 &&
                                          (paren = strchr(after, ')')) && paren + 1 == died);
            if (whole_name && named) {
                job->named_dead = i;
                return;
            }
        }
    }
}

static void note_scheduler_line(struct job *job, const char *text)
{
    static const char gave_up[] = "; stopping";
    size_t len = strlen(text), tail = sizeof gave_up - 1;
    if (strncmp(text, "loom", 4) != 0) return;
    if (len >= tail && !strcmp(text + len - tail, gave_up)) {
        scheduler_ended(job);
        return;
    }
    const char *missing = strstr(text, "; missing: ");
    for (int i = 1; missing && strstr(text, "the job did not assemble: ") && i < job->nchildren;
         i++) {
        struct child *c = &job->children[i];
        size_t n = strlen(c->label);
        /* "worker 1 (node 3)", not the "worker 1" of "worker 12 (node 14)" */
        for (const char *p = strstr(missing, c->label); p; p = strstr(p + 1, c->label))
            if (p[-1] == ' ' && !strncmp(p + n, " (node ", 7)) c->missing = 1;
    }
    const char *back = strstr(text, " rejoined: it holds full copies");
    for (int i = 1; back && i <= job->opt->servers; i++) {
        struct child *c = &job->children[i];
        size_t n = strlen(c->label);
        if ((size_t)(back - text) > n && back[-(ptrdiff_t)n - 1] == ' ' &&
            !strncmp(back - n, c->label, n))
            c->died = 0;
    }
}

/* LOOM_REPLICAS: how many servers the job may lose at a time. */
static long replicas(void)
{
    const char *v = getenv("LOOM_REPLICAS");
    return v ? strtol(v, NULL, 10) : 0;
}

/* The servers killed and replaced whose replacements were not back: more of
 * them than the replicas cover is what ended the job (the scheduler gave up
 * on the one too many, and everyone else ended with LOOM_EXIT_PEER_FAILED or
 * was stopped). Names them, in the order they died, in one `failed:` line
 * and returns 1; 0 if there are not that many. */
static int print_lost_servers(const struct job *job)
{
    char how[128], list[768] = "";
    size_t used = 0;
    int lost = 0;
    for (int seq = 1; seq <= job->deaths; seq++)
        for (int i = 1; i <= job->opt->servers; i++) {
            const struct child *c = &job->children[i];
            if (c->died != seq) continue;
            lost++;
            int n = snprintf(list + used, sizeof list - used, "%s%s %s", used ? ", " : "", c->label,
                             describe_status(c->died_status, how, sizeof how));
            if (n > 0) used = (size_t)n < sizeof list - used ? used + (size_t)n : sizeof list - 1;
        }
    if (lost <= replicas()) return 0;
    say("failed: %d servers died before their replacements were back, more than LOOM_REPLICAS=%ld "
        "allows, and the scheduler ended the job: %s",
        lost, replicas(), list);
    return 1;
}

/* The scheduler gave up assembling the job: the processes that had come then
 * exit with an error of their own (they were refused), but the cause is the
 * ones that never registered (never started, frozen, stuck before joining).
 * Names them in one `failed:` line and returns 1; 0 if the scheduler named
 * none. */
static int print_missing(const struct job *job)
{
    char how[128], list[768] = "";
    size_t used = 0;
    for (int i = 1; i < job->nchildren; i++) {
        const struct child *c = &job->children[i];
        if (!c->missing) continue;
        char it[160] = "";
        if (c->failed)
            snprintf(it, sizeof it, " (it %s)", describe_status(c->status, how, sizeof how));
        int n = snprintf(list + used, sizeof list - used, "%s%s%s", used ? ", " : "", c->label, it);
        if (n > 0) used = (size_t)n < sizeof list - used ? used + (size_t)n : sizeof list - 1;
    }
    if (!used) return 0;
    say("failed: %s never registered with the scheduler, which gave up assembling the job "
        "(LOOM_CONNECT_TIMEOUT_MS)",
        list);
    return 1;
}

static int peer_failed(int status)
{
    return WIFEXITED(status) && WEXITSTATUS(status) == LOOM_EXIT_PEER_FAILED;
}

static int survived(const struct job *job);

/* The failure that brought the job down, and then the others, so that the
 * last words of `loom run` name the culprit, not the first process to go:
 * the processes that never registered if the job did not assemble; else the
 * first process that failed with a reason of its own (any status but
 * LOOM_EXIT_PEER_FAILED, which only says a peer failed first, or a signal);
 * else the process its peers named dead; else the replaced servers that died
 * one too many for the replicas; else the first to fail. Returns how many
 * failed. */
static int print_failures(const struct job *job)
{
    char how[128];
    int root = -1;
    if (!job->failures) return 0;
    int told = print_missing(job);
    for (int seq = 1; seq <= job->failures && root < 0 && !told; seq++)
        for (int i = 0; i < job->nchildren; i++)
            if (job->children[i].failed == seq && !peer_failed(job->children[i].status)) root = i;
    /* Not a replaced server the peers named dead: its rank is up again, and
     * a later failure is another process's (ft.fault_mix: a server frozen
     * until declared dead stops with LOOM_EXIT_PEER_FAILED, and the summary
     * named a server replaced long before). */
    if (root < 0 && !told && job->named_dead >= 0 && !job->children[job->named_dead].replaced)
        root = job->named_dead;
    if (root < 0 && !told) told = print_lost_servers(job);
    for (int seq = 1; seq <= job->failures && root < 0 && !told; seq++)
        for (int i = 0; i < job->nchildren; i++)
            if (job->children[i].failed == seq) root = i;
    if (root < 0 && !told) return 0;

    /* A job that went on without servers whose ranges had replicas succeeded
     * (exit_status): their deaths are losses it survived, not its failure. */
    const char *what =
        !job->error && !job->exit_signal && !job->timed_out && survived(job) ? "lost" : "failed";
    const struct child *r = root >= 0 ? &job->children[root] : NULL;
    if (r && r->failed)
        say("%s: %s %s", what, r->label, describe_status(r->status, how, sizeof how));
    else if (r)
        say("%s: %s stopped responding: its peers declared it dead", what, r->label);
    for (int seq = 1; seq <= job->failures; seq++)
        for (int i = 0; i < job->nchildren; i++) {
            const struct child *c = &job->children[i];
            if (c->failed != seq || i == root || c->missing) continue; /* told already */
            say("also %s: %s %s%s", what, c->label, describe_status(c->status, how, sizeof how),
                peer_failed(c->status) ? " (a peer failed)" : "");
        }
    return job->failures;
}

/* With LOOM_REPLICAS=K the job goes on without up to K dead servers
 * (docs/FAULTS.md): if only servers failed, no more than K, and every other
 * process ended well, the job succeeded. */
static int survived(const struct job *job)
{
    long k = replicas();
    int dead = 0;
    for (int i = 0; i < job->nchildren; i++) {
        if (!job->children[i].failed) continue;
        if (i == 0 || i > (int)job->opt->servers) return 0;
        dead++;
    }
    return dead > 0 && dead <= k;
}

static int exit_status(const struct job *job, int failed)
{
    if (job->exit_signal) return 128 + job->exit_signal;
    if (job->timed_out) return 124;
    if (failed && !job->error && survived(job)) {
        say("the job went on without its dead server(s): their ranges had replicas");
        return 0;
    }
    return failed || job->error ? 1 : 0;
}

/* The children's slots, none started: [0] the scheduler, then servers and workers. */
static void init_children(struct job *job)
{
    const struct options *opt = job->opt;
    for (int i = 0; i < job->nchildren; i++) {
        struct child *c = &job->children[i];
        int is_server = i <= opt->servers;
        *c = (struct child){0};
        if (i == 0)
            snprintf(c->label, LABEL_MAX, "scheduler");
        else
            snprintf(c->label, LABEL_MAX, "%s %d", is_server ? "server" : "worker",
                     is_server ? i - 1 : i - 1 - (int)opt->servers);
        /* Not started yet, so no streams: an fd of 0 here would make the loop
         * poll, read and finally close the caller's standard input. */
        c->out.fd = c->err.fd = -1;
    }
}

/* Start the scheduler, then (once it has published its address) the others,
 * and run the loop until every child is reaped. 0, or 1 after a message. */
static int run_job(struct job *job)
{
    int addr_pipe[2];
    if (make_pipe(addr_pipe) < 0) {
        say("cannot set up: %s", strerror(errno));
        return 1;
    }
    char scheduler_addr[MAX_BIND_LEN + 8];
    snprintf(scheduler_addr, sizeof scheduler_addr, "%s:0", job->opt->bind);
    job->addr_deadline = now_ms() + ADDRESS_TIMEOUT_MS;
    int rc = spawn(job, &job->children[0], "scheduler", 0, scheduler_addr, addr_pipe[1]);
    close(addr_pipe[1]); /* now only the scheduler holds it: EOF when it is gone */
    if (rc < 0) {
        close(addr_pipe[0]);
        return 1;
    }
    job->addr_fd = addr_pipe[0];
    set_nonblock(job->addr_fd);

    if (event_loop(job) < 0) {
        job->error = 1;
        kill_and_reap_all(job);
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
        say("--on-worker-failure restart: %s", loom_last_error());
        return 2;
    }
    say("--on-worker-failure restart: %s already holds a checkpoint (clock %lld) of an earlier "
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
        say("restart %d of %ld: no checkpoint committed yet; the job starts again from %s",
            job->restarts, opt->max_restarts, resume ? resume : "the beginning");
    } else if (rc) {
        say("cannot restart: %s", loom_last_error());
        return 1;
    } else {
        say("restart %d of %ld: the job starts again from its checkpoint at clock %lld",
            job->restarts, opt->max_restarts, (long long)loom_checkpoint_clock(ck));
        loom_checkpoint_close(ck);
        if (setenv("LOOM_RESUME", opt->checkpoint_dir, 1) < 0) return 1;
    }
    snprintf(count, sizeof count, "%d", job->restarts);
    if (setenv("LOOM_RESTART", count, 1) < 0) return 1;
    init_children(job);
    job->addr_eof = job->published = 0;
    job->addr_len = 0;
    job->addr[0] = '\0';
    job->stopping = job->killed = job->rollback = 0;
    job->failures = job->deaths = job->scheduler_gone = 0;
    job->replacement_deadline = 0;
    job->named_dead = -1;
    return 0;
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
    job.children = calloc((size_t)job.nchildren, sizeof *job.children);
    job.pfds = calloc(2 + 2 * (size_t)job.nchildren, sizeof *job.pfds);
    job.pstreams = calloc(2 + 2 * (size_t)job.nchildren, sizeof *job.pstreams);
    if (!job.children || !job.pfds || !job.pstreams) {
        say("out of memory");
        rc = 1;
        goto out;
    }
    init_children(&job);

    sigprocmask(SIG_SETMASK, NULL, &job.orig_mask);
    if (ensure_std_fds() < 0 || install_signal_handlers() < 0 || set_common_env(&opt) < 0) {
        say("cannot set up: %s", strerror(errno));
        rc = 1;
        goto out;
    }
    /* After the signal handlers: a SIGINT from now on ends in the loop or at
     * `out`, both of which remove the throw-away secret. */
    rc = prepare_secret(&opt, &temp_secret);
    if (rc) goto out;

    /* --timeout bounds the whole job, restarts included. */
    job.job_deadline = now_ms() + (int64_t)opt.timeout_s * 1000;
    while (!(rc = run_job(&job)) && job.rollback && !job.error && !job.exit_signal &&
           !job.timed_out && !(rc = prepare_restart(&job))) {
    }
    if (rc) goto out;
    rc = exit_status(&job, print_failures(&job));
    if (rc == 0 && job.restarts)
        say("the job finished after %d restart(s) (--on-worker-failure restart)", job.restarts);
    if (output_errno && rc == 0) {
        say("failed: cannot write the job's output: %s", strerror(output_errno));
        rc = 1;
    }

out:
    remove_temp_secret(&temp_secret);
    free(job.children);
    free(job.pfds);
    free(job.pstreams);
    return rc;
}
