/* app: what every Loom application shares (apps/lr, apps/mf, apps/lda).
 *
 *   - the command-line parser of every `loom` subcommand, driven by a table
 *     of flags that also prints the help (app_flags_*), and the job flags
 *     every `loom train MODEL` takes, spelled alike everywhere (app_job);
 *   - a seeded random stream (splitmix64 seeding a xoshiro256** generator),
 *     identical on every machine, so runs and their sequential references
 *     can draw the same numbers;
 *   - sorted key lists (sort and deduplicate, lower bound);
 *   - per-epoch statistics: every worker adds its numbers into a small sum
 *     table, and after a barrier (or, for a clocked table, its next clock)
 *     worker 0 reads the totals (app_stats_*).
 *
 * Applications use only Loom's public API; this is their common toolbox. */
#ifndef LOOM_APPS_COMMON_APP_H
#define LOOM_APPS_COMMON_APP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <loom/data.h>
#include <loom/loom.h>

#include "common/team.h"

/* ---- flags ---- */

/* One flag of a command. A command's flags are one table of these: the parser
 * (app_flags_parse) reads the command line against it and the help
 * (app_flags_help) is printed from it, so the two never disagree. Every
 * flag is "--name value" or "--name=value" (a switch: "--name"), at most
 * once. An APP_INT is a whole number >= 0 in decimal digits, an APP_NUM a
 * finite real, an APP_CHOICE one of the words of its arg. */
typedef enum { APP_SWITCH, APP_INT, APP_NUM, APP_TEXT, APP_CHOICE } app_flag_kind;

typedef struct app_flag {
    const char *section; /* heading the help prints before this flag ("data:"), or NULL */
    const char *name;    /* "--workers" */
    app_flag_kind kind;
    const char *arg;      /* the value in the help ("W"); APP_CHOICE: the choices, "sgd|dbpg" */
    uint64_t lo, hi;      /* APP_INT: the accepted range, both included */
    double min, max;      /* APP_NUM: the accepted range, both included */
    const char *def;      /* the default, as the help shows it; NULL: none */
    const char *help;     /* what it does ('\n' continues on the next line) */
    const char *excludes; /* a flag that may not be given with this one, or NULL */
} app_flag;

/* What the command line said of one flag. */
typedef struct app_flag_value {
    const char *text; /* the value as given ("" for a switch); NULL: flag absent */
    uint64_t u;       /* APP_INT */
    double x;         /* APP_NUM */
    size_t choice;    /* APP_CHOICE: the index of the choice */
} app_flag_value;

#define APP_FLAGS_HELP (-1)

/* Read argv[first..argc) against flags[0..n) into values[0..n). With program
 * NULL every argument must be a flag; otherwise the first argument that is
 * not a flag, or the one after "--", is PROGRAM: its index goes to *program
 * and the rest is not read (loom run). Returns 0, APP_FLAGS_HELP for -h or
 * --help, or 2 with a sentence naming the culprit in err: "unknown flag
 * '--x'", "unexpected argument 'x'", "--x needs a value", "--x given twice",
 * a value out of range, or two flags that exclude each other. */
int app_flags_parse(const app_flag *flags, size_t n, int argc, char **argv, int first,
                    app_flag_value *values, int *program, char *err, size_t errlen);
/* The value of flag `name`, or NULL if it was not given. */
const app_flag_value *app_flag_get(const app_flag *flags, size_t n, const app_flag_value *values,
                                   const char *name);
/* One line per flag (under its section's heading): name, value, what it
 * does, its range and its default. */
void app_flags_help(FILE *out, const app_flag *flags, size_t n);

/* The job flags every `loom train MODEL` takes, read by app_job_from_flags.
 * A model's table holds these rows and its own --train, --test, --format,
 * --consistency and --seed (whose meaning differs between models). */
#define APP_FLAGS_JOB                                                                              \
    {.section = "job:",                                                                            \
     .name = "--workers",                                                                          \
     .kind = APP_INT,                                                                              \
     .arg = "W",                                                                                   \
     .lo = 1,                                                                                      \
     .hi = 128,                                                                                    \
     .def = "2",                                                                                   \
     .help = "worker processes"},                                                                  \
        {.name = "--servers",                                                                      \
         .kind = APP_INT,                                                                          \
         .arg = "S",                                                                               \
         .lo = 0,                                                                                  \
         .hi = 128,                                                                                \
         .def = "1",                                                                               \
         .help = "server processes (0: a serverless job, docs/P2P.md)"},                           \
        {.name = "--threads",                                                                      \
         .kind = APP_INT,                                                                          \
         .arg = "T",                                                                               \
         .lo = 1,                                                                                  \
         .hi = APP_MAX_THREADS,                                                                    \
         .def = "1",                                                                               \
         .help = "compute threads per worker process, sharing its cache, update\n"                 \
                 "buffer and clock (docs/USAGE.md)"},                                              \
        {.name = "--interface",                                                                    \
         .kind = APP_TEXT,                                                                         \
         .arg = "NAME",                                                                            \
         .help = "network interface to bind (LOOM_INTERFACE; docs/CLUSTER.md); default\n"          \
                 "127.0.0.1 here, the route to the scheduler under mpirun/srun"},                  \
        {.name = "--secret",                                                                       \
         .kind = APP_TEXT,                                                                         \
         .arg = "FILE",                                                                            \
         .help = "job secret (loom keygen; LOOM_SECRET_FILE; docs/SECURITY.md); default:\n"        \
                 "a throw-away one on this machine, none under mpirun/srun"},                      \
        {.name = "--insecure",                                                                     \
         .kind = APP_SWITCH,                                                                       \
         .help = "no job secret: traffic neither encrypted nor authenticated (faster;\n"           \
                 "for a machine or network you trust, docs/SECURITY.md)"},                         \
    {                                                                                              \
        .name = "--no-status", .kind = APP_SWITCH,                                                 \
        .help = "no status page (LOOM_STATUS_PORT=-1; docs/USAGE.md)"                              \
    }
/* Checkpoints and resume (docs/FAULTS.md): rows of the tables of the models
 * that train as a job (lr, mf, lda). */
#define APP_FLAGS_CHECKPOINT                                                                       \
    {.section = "checkpoints and failures (docs/FAULTS.md):",                                      \
     .name = "--checkpoint-dir",                                                                   \
     .kind = APP_TEXT,                                                                             \
     .arg = "DIR",                                                                                 \
     .help = "write a checkpoint of the whole job into DIR every --checkpoint-every\n"             \
             "(a directory of yours every process can reach; one job at a time)"},                 \
        {.name = "--checkpoint-every",                                                             \
         .kind = APP_TEXT,                                                                         \
         .arg = "N|Ns|Ne",                                                                         \
         .def = "1e",                                                                              \
         .help = "how often: every N clocks, N seconds (also Nm, Nh) or N epochs;\n"               \
                 "one falling due while the previous is still being written is\n"                  \
                 "skipped"},                                                                       \
        {.name = "--checkpoint-full-every",                                                        \
         .kind = APP_INT,                                                                          \
         .arg = "K",                                                                               \
         .lo = 1,                                                                                  \
         .hi = 1000000,                                                                            \
         .def = "10",                                                                              \
         .help = "every K-th checkpoint holds every row; the others only the rows\n"               \
                 "changed since the previous one"},                                                \
        {.name = "--resume",                                                                       \
         .kind = APP_TEXT,                                                                         \
         .arg = "DIR",                                                                             \
         .help = "continue from the newest checkpoint in DIR (same flags, same\n"                  \
                 "numbers of servers and workers)"},                                               \
        {.name = "--on-worker-failure",                                                            \
         .kind = APP_CHOICE,                                                                       \
         .arg = "fail|continue|restart",                                                           \
         .def = "fail",                                                                            \
         .help = "when a worker dies: end the job (status 3), go on without it and\n"              \
                 "its share of the data, or restart the whole job from its newest\n"               \
                 "checkpoint (loom run; needs --checkpoint-dir)"},                                 \
        {.name = "--max-restarts",                                                                 \
         .kind = APP_INT,                                                                          \
         .arg = "N",                                                                               \
         .lo = 0,                                                                                  \
         .hi = 1000,                                                                               \
         .def = "3",                                                                               \
         .help = "with --on-worker-failure restart: restarts before the job fails"},               \
        {.name = "--replicas",                                                                     \
         .kind = APP_INT,                                                                          \
         .arg = "K",                                                                               \
         .lo = 0,                                                                                  \
         .hi = 7,                                                                                  \
         .def = "0",                                                                               \
         .help = "copies of every key range on the K servers after its master\n"                   \
                 "(LOOM_REPLICAS): a server may die and the job goes on (K < --servers)"},         \
    {                                                                                              \
        .name = "--on-server-failure", .kind = APP_CHOICE, .arg = "failover|restart",              \
        .def = "failover",                                                                         \
        .help = "with --replicas, when a server is killed: go on without it, or also\n"            \
                "start a replacement that copies its ranges back (loom run)"                       \
    }
/* The managed-communication flags of `loom train lr|mf|lda` (docs/USAGE.md,
 * "Managed communication"), read by app_job_from_flags, applied to a table's
 * options by app_job_comm. */
#define APP_FLAGS_COMM                                                                             \
    {.section = "communication:",                                                                  \
     .name = "--bandwidth",                                                                        \
     .kind = APP_NUM,                                                                              \
     .arg = "MBITS",                                                                               \
     .min = 0,                                                                                     \
     .max = 1e6,                                                                                   \
     .def = "0",                                                                                   \
     .help = "budget of every process in Mbit/s (0: none): pushes, pull replies\n"                 \
             "and managed sends are paced to it"},                                                 \
        {.name = "--priority",                                                                     \
         .kind = APP_CHOICE,                                                                       \
         .arg = "none|random|roundrobin|abs|rel",                                                  \
         .def = "none",                                                                            \
         .help = "send buffered rows between clocks, and let servers push changed\n"               \
                 "rows, in this order (SSP and ASP; none: only at clock ends)"},                   \
    {                                                                                              \
        .name = "--queue-rows", .kind = APP_INT, .arg = "ROWS", .lo = 1, .hi = 1000000,            \
        .def = "100", .help = "rows per managed message"                                           \
    }
#define APP_FLAGS_OUTPUT(metrics_help, model_help)                                                 \
    {.section = "output:",                                                                         \
     .name = "--metrics",                                                                          \
     .kind = APP_TEXT,                                                                             \
     .arg = "FILE",                                                                                \
     .help = metrics_help},                                                                        \
        {.name = "--model-out", .kind = APP_TEXT, .arg = "FILE", .help = model_help},              \
    {                                                                                              \
        .name = "--quiet", .kind = APP_SWITCH, .help = "no progress lines"                         \
    }

/* Filters of the model's tables (docs/FILTERS.md), in the flag tables of
 * `loom train lr|mf|lda`; read by app_job_from_flags, checked there. */
#define APP_FLAGS_FILTER                                                                           \
    {.name = "--filter",                                                                           \
     .kind = APP_TEXT,                                                                             \
     .arg = "NAME[:ARG],...",                                                                      \
     .help = "filters of the model's pushes: kkt:T, sigmod:T, skip:Q, quant:8|16,\n"               \
             "keycache, lz4, zstd[:L]; sparse or dense forces the rows' form\n"                    \
             "(docs/FILTERS.md); default none (rows sparse when smaller)"},                        \
    {                                                                                              \
        .name = "--filter-pull", .kind = APP_TEXT, .arg = "NAME[:ARG],...",                        \
        .help = "filters of the servers' pull replies: quant:8|16, keycache, lz4,\n"               \
                "zstd[:L], sparse, dense"                                                          \
    }

/* Rows that several commands' tables hold alike, spelled once. */
/* Reading data (loom train lr|mf|lda|mlr): malformed lines skipped. */
#define APP_FLAG_SKIP_BAD                                                                          \
    {                                                                                              \
        .name = "--skip-bad", .kind = APP_SWITCH,                                                  \
        .help = "skip malformed lines (and report how many) instead of stopping"                   \
    }
/* Data parts handed out on demand (loom/parts.h; lr and fm): --data-parts
 * N|auto, --part-timeout S. */
#define APP_FLAGS_PARTS                                                                            \
    {.name = "--data-parts",                                                                       \
     .kind = APP_TEXT,                                                                             \
     .arg = "N|auto",                                                                              \
     .help = "cut the data into N parts the scheduler hands to idle workers,\n"                    \
             "a dead worker's back to the pool (auto: 4 per worker;\n"                             \
             "default: each worker reads a fixed share)"},                                         \
    {                                                                                              \
        .name = "--part-timeout", .kind = APP_NUM, .arg = "S", .min = 0, .max = 1e6,               \
        .def = "0 (never)", .help = "with --data-parts: a part held longer goes back to the pool"  \
    }
/* APP_FLAGS_PARTS' values: *parts 0 (not given: fixed shares), -1 (auto) or
 * N, and *timeout_s (0: never). 0, or 2 with the flag named in err. */
int app_parts_flags(const app_flag *flags, size_t n, const app_flag_value *values, int *parts,
                    double *timeout_s, char *err, size_t errlen);
/* How many parts: N, or for auto 4 per worker. */
uint32_t app_parts_count(int parts, int workers);
/* Data part i of nparts of the LIBSVM file path (share i of nparts: a byte
 * range split at line boundaries) into *d, unless *d holds it already, with
 * o's settings and at most max_dim features (o's own bound when it is
 * smaller); skipped lines said. 0, or 1 having said why, prefixed "prog: ". */
int app_part_read(const char *prog, const char *path, const loom_libsvm_opts *o, uint64_t max_dim,
                  uint32_t i, uint32_t nparts, loom_dataset **d);
/* Rows [lo, hi) of d as a dataset of their own (a compute thread's lane):
 * labels, ids and values point into d's; view->row is allocated (free it).
 * 0 or LOOM_ENOMEM. */
int app_rows_view(const loom_dataset *d, size_t lo, size_t hi, loom_dataset *view);
/* LIBSVM feature ids of `loom train lr|mlr`'s files. */
#define APP_FLAGS_IDS                                                                              \
    {.name = "--zero-based",                                                                       \
     .kind = APP_SWITCH,                                                                           \
     .excludes = "--one-based",                                                                    \
     .help = "feature ids start at 0 (default: 1, unless an id 0 appears)"},                       \
    {                                                                                              \
        .name = "--one-based", .kind = APP_SWITCH, .help = "feature ids start at 1"                \
    }
/* The same of `loom predict lr|mlr`'s FILE. */
#define APP_FLAGS_FILE_IDS                                                                         \
    {.name = "--one-based",                                                                        \
     .kind = APP_SWITCH,                                                                           \
     .excludes = "--zero-based",                                                                   \
     .help = "feature ids in FILE start at 1 (LIBSVM's convention)"},                              \
    {                                                                                              \
        .name = "--zero-based", .kind = APP_SWITCH,                                                \
        .help = "feature ids in FILE start at 0\n"                                                 \
                "(default: 1-based, unless an id 0 appears in FILE)"                               \
    }
/* `loom train MODEL --seed`: what it seeds is the model's own. */
#define APP_FLAG_SEED(what)                                                                        \
    {                                                                                              \
        .name = "--seed", .kind = APP_INT, .arg = "N", .lo = 0, .hi = 2147483647, .def = "1",      \
        .help = what                                                                               \
    }
/* `loom train mf|lda --schedule data|rotation` (what each does: the model's
 * own help) and the rotation's log. */
#define APP_FLAG_ROTATION_SCHEDULE(what)                                                           \
    {                                                                                              \
        .name = "--schedule", .kind = APP_CHOICE, .arg = "data|rotation", .def = "data",           \
        .help = what                                                                               \
    }
#define APP_FLAG_ROTATION_LOG                                                                      \
    {                                                                                              \
        .name = "--schedule-log", .kind = APP_TEXT, .arg = "FILE",                                 \
        .help = "rotation: each worker writes a line per block it held\n"                          \
                "(\"iteration sub block worker version\") to FILE, with %d\n"                      \
                "replaced by its rank"                                                             \
    }
/* `loom gen MODEL`: where the data set goes (`what`: "rows", ...) and the seed. */
#define APP_FLAG_GEN_OUT(what)                                                                     \
    {                                                                                              \
        .name = "--out", .kind = APP_TEXT, .arg = "FILE",                                          \
        .help = "where to write the " what "; - for standard output (required)"                    \
    }
#define APP_FLAG_GEN_SEED                                                                          \
    {                                                                                              \
        .name = "--seed", .kind = APP_INT, .arg = "S", .lo = 0, .hi = UINT64_MAX, .def = "1",      \
        .help = "random seed"                                                                      \
    }
/* `loom predict MODEL --model M`. */
#define APP_FLAG_MODEL_IN                                                                          \
    {                                                                                              \
        .name = "--model", .kind = APP_TEXT, .arg = "M", .help = "the model file (required)"       \
    }

typedef struct app_job {
    const char *train_path, *test_path, *metrics_path, *model_path;
    const char *format;    /* --format NAME, checked by the application (NULL: detect) */
    const char *interface; /* --interface NAME (NULL: the launcher's choice) */
    const char *secret;    /* --secret FILE (NULL: LOOM_SECRET_FILE or the launcher's choice) */
    int insecure;          /* --insecure: no secret at all */
    int no_status;         /* --no-status: the scheduler serves no status page */
    int workers, servers;
    int threads;                      /* --threads: compute threads per worker process */
    int workers_given, servers_given; /* given on the command line */
    int consistency;                  /* a loom_consistency */
    int staleness;                    /* SSP staleness in the application's clocks */
    double bandwidth_mbits;           /* --bandwidth (0: no budget) */
    int priority;                     /* --priority: a loom_priority */
    uint32_t queue_rows;              /* --queue-rows */
    uint64_t seed;
    int quiet;
    /* --checkpoint-dir, --resume (NULL: none), --checkpoint-every, --checkpoint-full-every */
    const char *checkpoint_dir, *resume_dir;
    const char *checkpoint_every; /* "N", "Ns" or "Ne" (LOOM_CHECKPOINT_EVERY) */
    uint64_t checkpoint_full_every;
    int replicas;        /* --replicas K (docs/FAULTS.md) */
    int restart_servers; /* --on-server-failure restart */
    /* --on-worker-failure: loom_worker_failure_policy; -1 not given */
    int on_worker_failure;
    int max_restarts;                      /* --max-restarts, with --on-worker-failure restart */
    const char *filter_push, *filter_pull; /* --filter, --filter-pull (NULL: not given) */
} app_job;

/* --data-parts (parts != 0) with the job's other flags: checkpoints
 * (--checkpoint-dir, --resume) of several workers under ASP are refused, as
 * there an idle worker does no clocks and no clock cuts every worker in the
 * same epoch (loom/parts.h). 0, or 2 with the reason in err. */
int app_parts_job_check(const app_job *j, int parts, char *err, size_t errlen);

/* The entry points of `loom train MODEL` have one signature for every model,
 * so that tools/models.c calls them all from one table: cli points to the
 * model's own MODEL_cli, which starts with its app_job. */
typedef int app_parse_fn(int argc, char **argv, void *cli, char *err, size_t errlen);
typedef int app_cli_fn(const void *cli);

/* The job flags' values into j, over the defaults: 2 workers, 1 server, 1 thread, SSP
 * with staleness `staleness`, seed 1. 0, or 2 with a message in err. */
int app_job_from_flags(app_job *j, int staleness, const app_flag *flags, size_t n,
                       const app_flag_value *values, char *err, size_t errlen);
/* A `loom train MODEL` command line (flags from argv[1]) against flags into values,
 * then its job flags into j (app_job_from_flags): 0, APP_FLAGS_HELP, or 2 with a
 * message in err. */
int app_train_flags(app_job *j, int staleness, const app_flag *flags, size_t n, int argc,
                    char **argv, app_flag_value *values, char *err, size_t errlen);
/* The job's managed communication (APP_FLAGS_COMM) on a table's options. */
/* --on-worker-failure continue (docs/FAULTS.md): once the job has gone on
 * without workers, json gets `, "workers_lost": K, "UNIT_lost": N` for a
 * metrics line and text a note for the progress line (N: the "share" metric
 * the lost workers reported, in UNIT, e.g. rows); both "" otherwise. */
void app_lost_note(loom_node *n, const char *unit, char *json, size_t jlen, char *text,
                   size_t tlen);
void app_job_comm(const app_job *j, loom_table_opts *o);

#if defined(__GNUC__)
#define APP_PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define APP_PRINTF_LIKE(fmt, args)
#endif

/* printf-style message into err; returns 2 (a usage error). */
int app_usage(char *err, size_t errlen, const char *fmt, ...) APP_PRINTF_LIKE(3, 4);
/* A usage error of command `cmd` ("loom gen mf"): "CMD: message" and where its
 * help is, on stderr; returns 2, the exit status of a usage error. */
int app_command_usage(const char *cmd, const char *fmt, ...) APP_PRINTF_LIKE(2, 3);
/* Read command `cmd`'s command line (flags from argv[1]) against flags into values:
 * 0; 2 after reporting a usage error (app_command_usage); or -1 after printing the
 * command's help (help(stdout)), after which the command exits 0. */
int app_command_flags(const char *cmd, const app_flag *flags, size_t n, app_flag_value *values,
                      int argc, char **argv, void (*help)(FILE *));
/* The help of command `cmd`: intro (its usage, what it does, up to the heading
 * of its options), a line per flag, -h, and the exit status: "1 if writing
 * failed" (a generator), or with reads "1 if a file could not be read or
 * written". */
void app_command_help(FILE *out, const char *intro, const app_flag *flags, size_t n, int reads);
/* A `loom predict MODEL`'s summary line, printed on summary, flushed: 0, or 1
 * after saying on stderr that writing it failed. */
int app_summary_flush(const char *cmd, FILE *summary);
/* A metrics line written to metrics (the file of --metrics, `path`): flushed
 * at once, so that a full disk stops the run rather than its end. 0, or 1
 * after "PROG: cannot write PATH: ..." on stderr. */
int app_metrics_flush(const char *prog, FILE *metrics, const char *path);
/* printf-style message into err (if err is not NULL); returns -1 (a failed
 * load, save or check). */
int app_error(char *err, size_t errlen, const char *fmt, ...) APP_PRINTF_LIKE(3, 4);

/* ---- a node program ---- */

/* Print "PROG: WHAT: <error>" on stderr and return 1, a failed node's status
 * (inline, so that compilers see the non-zero result in callers' flow). */
static inline int app_fail(const char *prog, const char *what, int rc)
{
    fprintf(stderr, "%s: %s: %s\n", prog, what, loom_strerror(rc));
    return 1;
}

/* A failure all workers found together, from totals they agreed on (an empty
 * training set, a wrong header count): worker 0 prints the message, and the
 * others wait at a barrier until it has, because a worker that exited first
 * would make the launcher stop worker 0 before it said why. The caller then
 * returns 1, a failed node's status. */
void app_fail_together(loom_node *n, const char *fmt, ...) APP_PRINTF_LIKE(2, 3);

#define APP_TRY(prog, what, expr)                                                                  \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_) return app_fail(prog, what, rc_);                                                 \
    } while (0)

/* The user updater "app.max": value = max(value, delta) per i64 column, for
 * workers to agree on sizes (dimension, vocabulary, largest share). */
#define APP_MAX_UPDATER "app.max"

/* One node of a job, as its launcher started it: join (after registering
 * "app.max"; register the application's own updaters before calling), then
 * the scheduler and servers serve, workers run worker(node, arg); finally
 * leave the job. Returns the process exit status. */
int app_node_main(const char *prog, int (*worker)(loom_node *n, const void *arg), const void *arg);

/* Agree on sizes: every worker's `width` int64 values, element by element
 * the largest of all workers' (a one-row dense table `table` under the
 * APP_MAX_UPDATER, ASP). Every worker pushes `mine`, meets the others at a
 * barrier and pulls the maxima into `all`. Returns 0 or the loom error of the
 * open, push, barrier or pull. */
int app_agree_max(loom_node *n, const char *table, uint32_t width, const int64_t *mine,
                  int64_t *all);

/* A worker of a job with data parts (loom/parts.h): SIGTERM asks it to leave
 * the running job (loom_leave; docs/ELASTIC.md): it finishes the part it
 * trains on, reports it and ends like a worker that finished. A second
 * SIGTERM ends the process at once, as without. A worker that joined the
 * running job skips app_agree_max's push and barrier and reads the result. */
void app_leave_on_sigterm(loom_node *n);
/* Whether this worker can run: an elastic job (free worker slots, or this
 * worker joined it) needs data parts (`data_parts` nonzero), since a fixed
 * share per worker rank cannot follow workers that come and go. If not,
 * says so and returns 1 (a joined worker then leaves the job, which goes on). */
int app_elastic_check(const char *prog, loom_node *n, int data_parts);

/* ---- sorted key lists ---- */

/* Sort keys ascending and drop repeats; returns how many remain. */
size_t app_sort_unique(uint64_t *keys, size_t n);
/* Index of the first of n sorted keys that is >= k (n if none). */
size_t app_lower_bound(const uint64_t *keys, size_t n, uint64_t k);
/* Index of id in ids[0, n) (ascending, distinct), -1 if it is not there. */
int64_t app_index_i64(const int64_t *ids, size_t n, int64_t id);
/* A draw from cumulative weights cum[0, n) (ascending, n >= 1): the index
 * of the first that is > x (n - 1 if none), for x uniform in [0, cum[n-1]). */
size_t app_draw_cumulative(const double *cum, size_t n, double x);

/* ---- random numbers ---- */

typedef struct app_rng {
    uint64_t s[4];
} app_rng;

/* Stream `stream` of seed `seed`: different streams are independent. */
void app_rng_seed(app_rng *r, uint64_t seed, uint64_t stream);
uint64_t app_splitmix64(uint64_t *state);

static inline uint64_t app_rng_next(app_rng *r)
{
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5, result = ((x << 7) | (x >> 57)) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double app_rng_uniform(app_rng *r)
{
    return (double)(app_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform integer in [0, n), n >= 1 (Lemire's multiply-shift, unbiased enough
 * for n far below 2^32; exact rejection is not needed by any caller). */
static inline uint32_t app_rng_below(app_rng *r, uint32_t n)
{
    return (uint32_t)(((app_rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* Standard normal (Box-Muller, one value per call). */
double app_rng_normal(app_rng *r);

/* ---- time ---- */

double app_now_s(void); /* monotonic seconds */

/* ---- per-epoch statistics ---- */

/* A table of `fields` f64 sums per epoch (any epoch from 0), ASP, no cache.
 * Its definition does not depend on how many epochs the job runs: a job
 * resumed with more epochs (--epochs, --iterations) opens the same table
 * as the run it continues, which a checkpoint requires. */
typedef struct app_stats {
    loom_table *table;
    uint32_t fields;
} app_stats;

int app_stats_open(loom_node *n, const char *name, uint32_t fields, app_stats *s);
/* The same table under BSP: what every worker added during a clock can be
 * read, without a barrier, once the reader has called loom_clock() again
 * (the read waits until every worker has ended that clock too). */
int app_stats_open_clocked(loom_node *n, const char *name, uint32_t fields, app_stats *s);
/* Add v[0..fields) into epoch's row and wait until the server has it. */
int app_stats_add(app_stats *s, int epoch, const double *v);
/* The same without waiting: v must stay valid until loom_wait(ts). Enough
 * for a clocked table, whose reader waits for the adder's next clock (sent
 * after the add on the same connection). */
int app_stats_add_async(app_stats *s, int epoch, const double *v, loom_ts *ts);
/* The totals of an epoch (after a barrier that follows every worker's add). */
int app_stats_read(app_stats *s, int epoch, double *v);
/* The same, asynchronous: v is written by loom_wait(ts). */
int app_stats_read_async(app_stats *s, int epoch, double *v, loom_ts *ts);

#endif
