/* run_loop: the one poll() loop of `loom run`, its signals and deadlines.
 *
 * The loop polls a self-pipe, the scheduler's address pipe and every child's
 * output pipes together. Signals (SIGINT/SIGTERM/SIGHUP to the launcher,
 * SIGCHLD) only set a flag and write a byte into the self-pipe, which wakes
 * poll(); the loop acts on them outside the handler: the first SIGINT, SIGTERM
 * or SIGHUP stops the job, a second kills it, SIGCHLD reaps. Deadlines (the
 * address wait, --timeout, the stop grace, a stopped replacement's grace) are
 * poll timeouts. The loop ends only once every child has been reaped. */
#include "run_impl.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Written by the signal handler, read by the loop. */
static int self_pipe[2] = {-1, -1};
static volatile sig_atomic_t child_exited;
static volatile sig_atomic_t term_signal; /* last SIGINT/SIGTERM/SIGHUP */
static volatile sig_atomic_t term_count;

const int run_handled_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD};

int64_t run_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

int run_install_signal_handlers(void)
{
    if (run_make_pipe(self_pipe) < 0 || run_set_nonblock(self_pipe[0]) < 0 ||
        run_set_nonblock(self_pipe[1]) < 0)
        return -1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < RUN_NUM_HANDLED; i++) sigaddset(&sa.sa_mask, run_handled_signals[i]);
    for (size_t i = 0; i < RUN_NUM_HANDLED; i++)
        if (sigaction(run_handled_signals[i], &sa, NULL) < 0) return -1;
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
            run_say("received %s again; killing the job now", signal_name(job->exit_signal));
            run_kill_all(job);
        } else if (!repeated) {
            run_say("received %s; stopping the job", signal_name(job->exit_signal));
            run_begin_stop(job);
        }
    }
    if (child_exited) {
        child_exited = 0;
        run_reap_children(job);
    }
}

/* --- the loop ------------------------------------------------------------ */

static void check_deadlines(struct job *job)
{
    int64_t now = run_now_ms();
    if (!job->stopping && !job->published && now >= job->addr_deadline) {
        if (job->addr_eof)
            run_say("scheduler closed LOOM_ADDRESS_FD without publishing its address; stopping it");
        else
            run_say("scheduler did not publish its address within %d s; stopping it",
                    ADDRESS_TIMEOUT_MS / 1000);
        job->error = 1;
        run_begin_stop(job);
    }
    if (!job->stopping && job->opt->timeout_s > 0 && now >= job->job_deadline) {
        run_say("job exceeded --timeout %ld s; stopping it", job->opt->timeout_s);
        job->timed_out = 1;
        run_begin_stop(job);
    }
    if (job->replacement_deadline && !job->killed && now >= job->replacement_deadline) {
        job->replacement_deadline = 0;
        for (int i = 1; i <= job->opt->servers; i++) {
            struct child *c = &job->children[i];
            if (!c->replaced || !c->signalled || !c->started || c->reaped) continue;
            run_say("the replacement for %s did not stop within %d ms; killing it", c->label,
                    REPLACEMENT_GRACE_MS);
            run_signal_child(c, SIGKILL);
        }
    }
    if (job->stopping && !job->killed && now >= job->kill_deadline) {
        for (int i = 0; i < job->nchildren; i++) {
            const struct child *c = &job->children[i];
            if (c->started && !c->reaped)
                run_say("%s did not stop within %d s; killing it", c->label, GRACE_MS / 1000);
        }
        run_kill_all(job);
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
    int64_t wait = next - run_now_ms();
    if (wait < 0) return 0;
    return wait > INT_MAX ? INT_MAX : (int)wait;
}

int run_event_loop(struct job *job)
{
    while (run_live_children(job) > 0) {
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
            run_say("poll failed: %s", strerror(errno));
            return -1;
        }
        /* Output and the address before SIGCHLD: what a child wrote before
         * exiting is then handled before its exit. */
        for (nfds_t i = 0; i < n; i++) {
            if (!job->pfds[i].revents) continue;
            if (job->pstreams[i])
                run_read_stream(job->pstreams[i]);
            else if (job->pfds[i].fd == job->addr_fd)
                run_read_address(job);
        }
        handle_signals(job);
        check_deadlines(job);
    }
    return 0;
}
