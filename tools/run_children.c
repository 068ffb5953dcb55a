/* run_children: the processes of a `loom run` job, started, stopped, reaped.
 *
 * Each child is forked with its role and rank in LOOM_* variables, set in the
 * launcher's own environment just before fork(); it runs in a process group
 * of its own, dies with the launcher, and writes its stdout and stderr into
 * pipes (run_output.c reads them). The launcher stops a child by signalling
 * its whole group: SIGTERM, and SIGKILL once the grace is over (run_loop.c
 * keeps the deadlines). When a child is reaped, child_ended decides what its
 * end means under the job's policies: nothing, a failure (which stops the
 * others unless --on-failure wait), a server to replace (--on-server-failure
 * restart), a worker the job goes on without (LOOM_ON_WORKER_FAILURE=
 * continue), or a worker whose death starts the job again (--on-worker-failure
 * restart, which run.c carries out). */
#include "run_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static int set_cloexec(int fd)
{
    int flags = fcntl(fd, F_GETFD);
    return flags < 0 ? -1 : fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
}

int run_set_nonblock(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

/* Both ends close-on-exec, so no child inherits another child's pipes. */
int run_make_pipe(int fds[2])
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
    if (n > 0)
        run_write_all(STDERR_FILENO, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
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

    for (size_t i = 0; i < RUN_NUM_HANDLED; i++) signal(run_handled_signals[i], SIG_DFL);
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

int run_setenv_long(const char *name, long value)
{
    char text[32];
    snprintf(text, sizeof text, "%ld", value);
    return setenv(name, text, 1);
}

/* Start one child. The per-child variables are set in the launcher's own
 * environment just before fork(), so the child needs no allocation before
 * exec; the launcher itself never reads them. */
int run_spawn(struct job *job, struct child *c, const char *role, int rank, const char *scheduler,
              int addr_fd)
{
    int out[2], err[2], saved_errno;
    if (run_make_pipe(out) < 0) goto fail;
    if (run_make_pipe(err) < 0) {
        saved_errno = errno;
        close(out[0]);
        close(out[1]);
        errno = saved_errno;
        goto fail;
    }
    if (setenv("LOOM_ROLE", role, 1) < 0 || run_setenv_long("LOOM_RANK", rank) < 0 ||
        setenv("LOOM_SCHEDULER", scheduler, 1) < 0 ||
        (addr_fd >= 0 ? run_setenv_long("LOOM_ADDRESS_FD", addr_fd) : unsetenv("LOOM_ADDRESS_FD")) <
            0)
        goto fail_pipes;

    /* Signals stay blocked until the child has dropped our handlers: a SIGTERM
     * meant for the child must not run the launcher's handler in it. */
    sigset_t block, old;
    sigemptyset(&block);
    for (size_t i = 0; i < RUN_NUM_HANDLED; i++) sigaddset(&block, run_handled_signals[i]);
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
    run_set_nonblock(out[0]);
    run_set_nonblock(err[0]);
    c->pid = pid;
    c->started = 1;
    c->out = (struct stream){.fd = out[0], .dest = STDOUT_FILENO, .label = c->label, .job = job};
    c->err = (struct stream){.fd = err[0], .dest = STDERR_FILENO, .label = c->label, .job = job};
    if (job->opt->verbose) run_say("started %s (pid %ld)", c->label, (long)pid);
    return 0;

fail_pipes:
    saved_errno = errno;
    close(out[0]);
    close(out[1]);
    close(err[0]);
    close(err[1]);
    errno = saved_errno;
fail:
    run_say("cannot start %s: %s", c->label, strerror(errno));
    return -1;
}

void run_signal_child(struct child *c, int sig)
{
    if (!c->started || c->reaped) return;
    /* The whole group, so that helpers the child forked go too. */
    if (kill(-c->pid, sig) < 0) kill(c->pid, sig);
    c->signalled = 1;
}

void run_begin_stop(struct job *job)
{
    if (job->stopping) return;
    job->stopping = 1;
    job->kill_deadline = run_now_ms() + GRACE_MS;
    for (int i = 0; i < job->nchildren; i++) run_signal_child(&job->children[i], SIGTERM);
}

void run_kill_all(struct job *job)
{
    job->stopping = 1;
    job->killed = 1;
    for (int i = 0; i < job->nchildren; i++) run_signal_child(&job->children[i], SIGKILL);
}

/* The scheduler ended or gave up: no replacement can join the job any more.
 * One still waiting to register would wait out its connect timeout
 * (LOOM_CONNECT_TIMEOUT_MS, a minute by default) and then fail as if it were
 * the cause, so it is stopped now: SIGTERM, SIGKILL after a short grace
 * (check_deadlines). Every other process hears the end from the scheduler. */
void run_scheduler_ended(struct job *job)
{
    if (job->scheduler_gone) return;
    job->scheduler_gone = 1;
    for (int i = 1; i <= job->opt->servers && !job->stopping; i++) {
        struct child *c = &job->children[i];
        if (!c->replaced || !c->started || c->reaped) continue;
        run_say("stopping the replacement for %s: the scheduler has ended the job", c->label);
        run_signal_child(c, SIGTERM);
        job->replacement_deadline = run_now_ms() + REPLACEMENT_GRACE_MS;
    }
}

/* Start server or worker children[i] (i >= 1) in its role and rank. */
static int spawn_member(struct job *job, int i)
{
    int is_server = i <= job->opt->servers;
    int rank = is_server ? i - 1 : i - 1 - (int)job->opt->servers;
    return run_spawn(job, &job->children[i], is_server ? "server" : "worker", rank, job->addr, -1);
}

void run_start_servers_and_workers(struct job *job)
{
    for (int i = 1; i < job->nchildren && !job->stopping; i++) {
        if (spawn_member(job, i) < 0) {
            job->error = 1;
            run_begin_stop(job);
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
 * launcher start the whole job again from its newest checkpoint (prepare_restart and the loop in
 * cmd_run, run.c), up to --max-restarts times. Only a death: a worker that exits with an error
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
    run_drain_stream(&c->out);
    run_drain_stream(&c->err);

    if (c == &job->children[0]) run_scheduler_ended(job);

    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    int before_address = c == &job->children[0] && !job->published;
    if (c->signalled || (ok && !before_address)) {
        /* Success, or ended because the launcher stopped it: not a failure. */
        if (job->opt->verbose)
            run_say("%s %s", c->label, run_describe_status(status, how, sizeof how));
        return;
    }
    /* children[0] is the scheduler, whose death ends the job: never replaced;
     * nor is a server once the scheduler is gone (no replacement could join). */
    if (job->opt->restart_servers && c > job->children && c - job->children <= job->opt->servers &&
        !job->stopping && !job->scheduler_gone && WIFSIGNALED(status)) {
        run_say("%s %s; starting a replacement (--on-server-failure restart)", c->label,
                run_describe_status(status, how, sizeof how));
        if (respawn(job, c) == 0) return;
        job->error = 1;
        run_begin_stop(job);
        return;
    }
    if (worker_died_under_restart(job, c, status)) {
        if (job->restarts < job->opt->max_restarts) {
            run_say("%s %s; stopping the job to start it again from its newest checkpoint "
                    "(--on-worker-failure restart)",
                    c->label, run_describe_status(status, how, sizeof how));
            /* Everything since that checkpoint is thrown away: no grace needed. */
            job->rollback = 1;
            run_kill_all(job);
            return;
        }
        run_say("no restart left (--max-restarts %ld)", job->opt->max_restarts);
    }
    if (worker_may_be_lost(job, c, status)) {
        run_say("%s %s; the job goes on without it (LOOM_ON_WORKER_FAILURE=continue)", c->label,
                run_describe_status(status, how, sizeof how));
        return;
    }
    c->failed = ++job->failures;
    run_say("%s %s", c->label, run_describe_status(status, how, sizeof how));
    if (before_address) {
        run_say("scheduler exited before publishing its address");
        job->error = 1;
        run_begin_stop(job);
    } else if (job->opt->on_failure == ON_FAILURE_STOP) {
        run_begin_stop(job);
    }
}

void run_reap_children(struct job *job)
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
            run_say("cannot wait for %s: %s", c->label, strerror(errno));
            c->reaped = 1;
            job->error = 1;
            run_begin_stop(job);
        }
    }
}

int run_live_children(const struct job *job)
{
    int n = 0;
    for (int i = 0; i < job->nchildren; i++)
        n += job->children[i].started && !job->children[i].reaped;
    return n;
}

/* Last resort when the loop itself broke: no child may outlive the launcher. */
void run_kill_and_reap_all(struct job *job)
{
    run_kill_all(job);
    for (int i = 0; i < job->nchildren; i++) {
        struct child *c = &job->children[i];
        if (!c->started || c->reaped) continue;
        while (waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR) {
        }
        c->reaped = 1;
        run_drain_stream(&c->out);
        run_drain_stream(&c->err);
    }
}

/* The children's slots, none started: [0] the scheduler, then servers and workers. */
void run_init_children(struct job *job)
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
