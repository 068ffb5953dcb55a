/* run_impl: what the files of `loom run` share (tools/run*.c only).
 *
 * tools/run.c is the command: its options and help, the job's secret and
 * environment, and the job's lifecycle (start, restart, end). The children
 * are started, stopped and reaped in run_children.c; their output is relayed,
 * and the lines the launcher acts on are read, in run_output.c; the poll()
 * loop with its signals and deadlines is run_loop.c; the report at the end of
 * the job and its exit status are run_report.c. Here: the job's structs, the
 * limits more than one of them uses, and their cross-file functions, each
 * prefixed run_. */
#ifndef LOOM_TOOLS_RUN_IMPL_H
#define LOOM_TOOLS_RUN_IMPL_H

#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Deadlines (poll timeouts, in ms) and sizes that more than one file uses. */
#define ADDRESS_TIMEOUT_MS 30000
#define GRACE_MS           3000
/* A replacement the launcher stops because the scheduler ended is only
 * waiting to register (nothing of the job's to save): a short grace. */
#define REPLACEMENT_GRACE_MS 1000
#define LINE_BUF             4096 /* longer lines are split into pieces of this size */
#define LABEL_MAX            32

enum on_failure { ON_FAILURE_STOP, ON_FAILURE_WAIT };

struct options {
    long servers, workers;
    long max_workers; /* --max-workers: worker slots of an elastic job; 0 = workers */
    long max_servers; /* --max-servers: server slots of an elastic job; 0 = servers */
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

#if defined(__GNUC__)
#define PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define PRINTF_LIKE(fmt, args)
#endif

/* run_output.c: the launcher's output */
extern int run_output_errno;
void run_write_all(int fd, const char *buf, size_t len);
void run_say(const char *fmt, ...) PRINTF_LIKE(1, 2);
int run_read_stream(struct stream *s);
void run_drain_stream(struct stream *s);
void run_read_address(struct job *job);

/* run_children.c: the job's processes */
int run_set_nonblock(int fd);
int run_make_pipe(int fds[2]);
int run_setenv_long(const char *name, long value);
void run_init_children(struct job *job);
int run_spawn(struct job *job, struct child *c, const char *role, int rank, const char *scheduler,
              int addr_fd);
void run_start_servers_and_workers(struct job *job);
void run_signal_child(struct child *c, int sig);
void run_begin_stop(struct job *job);
void run_kill_all(struct job *job);
void run_scheduler_ended(struct job *job);
void run_reap_children(struct job *job);
int run_live_children(const struct job *job);
void run_kill_and_reap_all(struct job *job);

/* run_loop.c: the loop, its signals and deadlines */
extern const int run_handled_signals[4];
#define RUN_NUM_HANDLED (sizeof run_handled_signals / sizeof run_handled_signals[0])
int64_t run_now_ms(void);
int run_install_signal_handlers(void);
int run_event_loop(struct job *job);

/* run_report.c: the end of the job */
const char *run_describe_status(int status, char *buf, size_t size);
int run_print_failures(const struct job *job);
int run_exit_status(const struct job *job, int failed);

#endif
