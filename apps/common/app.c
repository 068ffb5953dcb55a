/* app: the toolbox shared by Loom's applications (see app.h). */
#include "common/app.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int app_usage(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return 2;
}

int app_command_usage(const char *cmd, const char *fmt, ...)
{
    fprintf(stderr, "%s: ", cmd);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help'.\n", cmd);
    return 2;
}

int app_command_flags(const char *cmd, const app_flag *flags, size_t n, app_flag_value *values,
                      int argc, char **argv, void (*help)(FILE *))
{
    char err[512];
    int rc = app_flags_parse(flags, n, argc, argv, 1, values, NULL, err, sizeof err);
    if (rc == APP_FLAGS_HELP) {
        help(stdout);
        return -1;
    }
    return rc ? app_command_usage(cmd, "%s", err) : 0;
}

void app_command_help(FILE *out, const char *intro, const app_flag *flags, size_t n, int reads)
{
    fputs(intro, out);
    app_flags_help(out, flags, n);
    fputs("  -h, --help              show this help\n"
          "\n",
          out);
    fputs(reads ? "Exit status: 0 on success, 1 if a file could not be read or written, 2 for a\n"
                  "usage error.\n"
                : "Exit status: 0 on success, 1 if writing failed, 2 for a usage error.\n",
          out);
}

int app_summary_flush(const char *cmd, FILE *summary)
{
    if (fflush(summary) == 0) return 0;
    fprintf(stderr, "%s: writing the summary failed: %s\n", cmd, strerror(errno));
    return 1;
}

int app_metrics_flush(const char *prog, FILE *metrics, const char *path)
{
    if (fflush(metrics) == 0 && !ferror(metrics)) return 0;
    fprintf(stderr, "%s: cannot write %s: %s\n", prog, path, strerror(errno));
    return 1;
}

int app_error(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

void app_fail_together(loom_node *n, const char *fmt, ...)
{
    if (loom_rank(n) == 0) {
        char line[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(line, sizeof line, fmt, ap);
        va_end(ap);
        fprintf(stderr, "%s\n", line);
    }
    /* A failed barrier (a peer already gone) changes nothing: this node fails. */
    (void)loom_barrier(n);
}

void app_lost_note(loom_node *n, const char *unit, char *json, size_t jlen, char *text, size_t tlen)
{
    double share = 0;
    int lost = loom_workers_lost(n, &share);
    json[0] = text[0] = '\0';
    if (!lost) return;
    snprintf(json, jlen, ", \"workers_lost\": %d, \"%s_lost\": %.0f", lost, unit, share);
    snprintf(text, tlen, "  (%d worker%s lost: %.0f %s of the data not trained on)", lost,
             lost == 1 ? "" : "s", share, unit);
}

int app_parts_flags(const app_flag *flags, size_t n, const app_flag_value *values, int *parts,
                    double *timeout_s, char *err, size_t errlen)
{
    const app_flag_value *x = app_flag_get(flags, n, values, "--data-parts");
    *parts = 0;
    *timeout_s = 0;
    if (x) {
        char *end;
        unsigned long long p = strtoull(x->text, &end, 10);
        if (!strcmp(x->text, "auto"))
            *parts = -1;
        else if (x->text[0] < '0' || x->text[0] > '9' || *end || p < 1 || p > LOOM_PARTS_MAX)
            return app_usage(err, errlen,
                             "--data-parts %s: give auto or a number of parts from 1 to %u",
                             x->text, LOOM_PARTS_MAX);
        else
            *parts = (int)p;
    }
    if ((x = app_flag_get(flags, n, values, "--part-timeout"))) {
        if (!*parts) return app_usage(err, errlen, "--part-timeout needs --data-parts");
        *timeout_s = x->x;
    }
    return 0;
}

uint32_t app_parts_count(int parts, int workers)
{
    return parts > 0 ? (uint32_t)parts : 4 * (uint32_t)(workers > 0 ? workers : 1);
}

int app_parts_job_check(const app_job *j, int parts, char *err, size_t errlen)
{
    if (parts && (j->checkpoint_dir || j->resume_dir) && j->consistency == LOOM_ASP &&
        j->workers > 1)
        return app_usage(err, errlen,
                         "--data-parts with %s needs --consistency bsp or ssp with several "
                         "workers: under asp a worker waiting for a part does no clocks, so "
                         "no checkpoint's clock cuts every worker in the same epoch "
                         "(docs/FAULTS.md)",
                         j->checkpoint_dir ? "--checkpoint-dir" : "--resume");
    return 0;
}

int app_part_read(const char *prog, const char *path, const loom_libsvm_opts *o, uint64_t max_dim,
                  uint32_t i, uint32_t nparts, loom_dataset **d)
{
    if (*d) return 0;
    char err[1024];
    loom_libsvm_opts lo = *o;
    if (!lo.max_features || lo.max_features > max_dim) lo.max_features = max_dim;
    if (loom_libsvm_read(path, (int)i, (int)nparts, &lo, d, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    if ((*d)->skipped)
        fprintf(stderr, "%s: skipped %zu malformed line(s) in part %u of %s\n", prog, (*d)->skipped,
                i, path);
    return 0;
}

int app_rows_view(const loom_dataset *d, size_t lo, size_t hi, loom_dataset *view)
{
    size_t base = d->row[lo];
    *view = (loom_dataset){.rows = hi - lo,
                           .nnz = d->row[hi] - base,
                           .label = d->label + lo,
                           .idx = d->idx + base,
                           .val = d->val + base};
    if (!(view->row = malloc((hi - lo + 1) * sizeof *view->row))) return LOOM_ENOMEM;
    for (size_t i = lo; i <= hi; i++) view->row[i - lo] = d->row[i] - base;
    return 0;
}

/* "bsp", "asp" or "ssp:S" into a loom_consistency and staleness. */
static int parse_consistency(const char *v, int *consistency, int *staleness, char *err,
                             size_t errlen)
{
    const char *s = v + 4;
    char *end;
    long n = -1;
    if (!strncmp(v, "ssp:", 4) && *s >= '0' && *s <= '9') {
        errno = 0;
        n = strtol(s, &end, 10);
        if (errno || *end || n > 1000000) n = -1;
    }
    if (!strcmp(v, "bsp")) {
        *consistency = LOOM_BSP;
        *staleness = 0;
    } else if (!strcmp(v, "asp")) {
        *consistency = LOOM_ASP;
    } else if (n >= 0) {
        *consistency = LOOM_SSP;
        *staleness = (int)n;
    } else {
        return app_usage(err, errlen,
                         "--consistency takes bsp, asp or ssp:S (S a staleness from 0 to "
                         "1000000), not '%s'",
                         v);
    }
    return 0;
}

/* A checkpoint directory flag's PATH: missing (to be created) or a directory.
 * Anything else (a regular file, a FIFO, a path through a file) would fail
 * only at the job's first checkpoint, in every process, with a vaguer
 * message; so it is refused here, before any process starts. */
static int dir_flag_ok(const char *flag, const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (!stat(path, &st)) {
        if (!S_ISDIR(st.st_mode))
            return app_usage(err, errlen, "%s %s: not a directory", flag, path);
        return 0;
    }
    /* --resume's missing directory is refused later with the reader's own words. */
    if (errno == ENOENT) return 0;
    return app_usage(err, errlen, "%s %s: %s", flag, path, strerror(errno));
}

int app_train_flags(app_job *j, int staleness, const app_flag *flags, size_t n, int argc,
                    char **argv, app_flag_value *values, char *err, size_t errlen)
{
    int rc = app_flags_parse(flags, n, argc, argv, 1, values, NULL, err, errlen);
    return rc ? rc : app_job_from_flags(j, staleness, flags, n, values, err, errlen);
}

/* --checkpoint-every: "N" clocks, "Ns" / "Nm" / "Nh", "Ne" epochs, N from 1
 * to 10^9 (src/ft reads the same spelling from LOOM_CHECKPOINT_EVERY). */
static int checkpoint_interval_ok(const char *t)
{
    size_t digits = strspn(t, "0123456789");
    if (!digits || digits > 10 || (t[digits] && (!strchr("smhe", t[digits]) || t[digits + 1])))
        return 0;
    unsigned long long v = strtoull(t, NULL, 10);
    return v >= 1 && v <= 1000000000ull;
}

int app_job_from_flags(app_job *j, int staleness, const app_flag *flags, size_t n,
                       const app_flag_value *values, char *err, size_t errlen)
{
    *j = (app_job){.workers = 2,
                   .servers = 1,
                   .threads = 1,
                   .consistency = LOOM_SSP,
                   .staleness = staleness,
                   .seed = 1};
    const app_flag_value *v;
#define TEXT(name, field)                                                                          \
    if ((v = app_flag_get(flags, n, values, name))) j->field = v->text
    TEXT("--train", train_path);
    TEXT("--test", test_path);
    TEXT("--format", format);
    TEXT("--metrics", metrics_path);
    TEXT("--model-out", model_path);
    TEXT("--interface", interface);
    TEXT("--secret", secret);
    TEXT("--checkpoint-dir", checkpoint_dir);
    TEXT("--resume", resume_dir);
    TEXT("--filter", filter_push);
    TEXT("--filter-pull", filter_pull);
#undef TEXT
    int rc = 0;
    if (j->checkpoint_dir) rc = dir_flag_ok("--checkpoint-dir", j->checkpoint_dir, err, errlen);
    if (!rc && j->resume_dir) rc = dir_flag_ok("--resume", j->resume_dir, err, errlen);
    if (rc) return rc;
    j->checkpoint_every = "1e";
    j->checkpoint_full_every = 10;
    if ((v = app_flag_get(flags, n, values, "--checkpoint-every"))) {
        if (!j->checkpoint_dir)
            return app_usage(err, errlen, "--checkpoint-every needs --checkpoint-dir");
        if (!checkpoint_interval_ok(v->text))
            return app_usage(err, errlen,
                             "--checkpoint-every \"%s\": give N clocks, Ns seconds (or Nm, Nh) "
                             "or Ne epochs, N from 1 to 1000000000",
                             v->text);
        j->checkpoint_every = v->text;
    }
    if ((v = app_flag_get(flags, n, values, "--checkpoint-full-every"))) {
        if (!j->checkpoint_dir)
            return app_usage(err, errlen, "--checkpoint-full-every needs --checkpoint-dir");
        j->checkpoint_full_every = v->u;
    }
    j->on_worker_failure = -1;
    if ((v = app_flag_get(flags, n, values, "--on-worker-failure"))) {
        /* The choices' order is loom_worker_failure_policy's: fail, continue, restart. */
        if (v->choice == LOOM_WORKER_FAILURE_RESTART && !j->checkpoint_dir)
            return app_usage(err, errlen,
                             "--on-worker-failure restart needs --checkpoint-dir: the job "
                             "restarts from its newest checkpoint");
        j->on_worker_failure = (int)v->choice;
    }
    j->max_restarts = 3;
    if ((v = app_flag_get(flags, n, values, "--max-restarts"))) {
        if (j->on_worker_failure != LOOM_WORKER_FAILURE_RESTART)
            return app_usage(err, errlen, "--max-restarts needs --on-worker-failure restart");
        j->max_restarts = (int)v->u;
    }
    char why[200];
    if (j->filter_push && loom_filter_check(j->filter_push, LOOM_DIR_PUSH, why, sizeof why))
        return app_usage(err, errlen, "--filter: %s", why);
    if (j->filter_pull && loom_filter_check(j->filter_pull, LOOM_DIR_PULL, why, sizeof why))
        return app_usage(err, errlen, "--filter-pull: %s", why);
    j->insecure = app_flag_get(flags, n, values, "--insecure") != NULL;
    j->no_status = app_flag_get(flags, n, values, "--no-status") != NULL;
    if ((v = app_flag_get(flags, n, values, "--workers")))
        j->workers = (int)v->u, j->workers_given = 1;
    if ((v = app_flag_get(flags, n, values, "--servers")))
        j->servers = (int)v->u, j->servers_given = 1;
    if ((v = app_flag_get(flags, n, values, "--threads"))) j->threads = (int)v->u;
    if ((v = app_flag_get(flags, n, values, "--seed"))) j->seed = (uint64_t)v->u;
    j->quiet = app_flag_get(flags, n, values, "--quiet") != NULL;
    if ((v = app_flag_get(flags, n, values, "--bandwidth"))) j->bandwidth_mbits = v->x;
    /* The choices' order is loom_priority's. */
    if ((v = app_flag_get(flags, n, values, "--priority"))) j->priority = (int)v->choice;
    j->queue_rows = (v = app_flag_get(flags, n, values, "--queue-rows")) ? (uint32_t)v->u : 0;
    /* Rows sent and pushed between clocks are not cut at a clock: refused
     * rather than checkpointed inconsistently (docs/FAULTS.md). */
    if (j->priority != LOOM_PRIORITY_NONE && (j->checkpoint_dir || j->resume_dir))
        return app_usage(err, errlen, "--priority has no checkpoints yet: leave out %s",
                         j->checkpoint_dir ? "--checkpoint-dir" : "--resume");
    if ((v = app_flag_get(flags, n, values, "--replicas"))) j->replicas = (int)v->u;
    if (j->replicas && j->replicas >= j->servers)
        return app_usage(err, errlen,
                         "--replicas %d needs more servers than replicas (a range's replicas live "
                         "on other servers than its master): give --servers %d or more",
                         j->replicas, j->replicas + 1);
    if ((v = app_flag_get(flags, n, values, "--on-server-failure")) && v->choice) {
        if (!j->replicas)
            return app_usage(err, errlen,
                             "--on-server-failure restart needs --replicas 1 or more: a "
                             "replacement server copies its ranges from their replicas");
        j->restart_servers = 1;
    }
    v = app_flag_get(flags, n, values, "--consistency");
    return v ? parse_consistency(v->text, &j->consistency, &j->staleness, err, errlen) : 0;
}

void app_job_comm(const app_job *j, loom_table_opts *o)
{
    o->bandwidth_mbits = j->bandwidth_mbits;
    o->priority = (loom_priority)j->priority;
    o->queue_rows = j->queue_rows;
}

static void max_updater(const loom_update *u, void *user)
{
    (void)user;
    int64_t *v = u->value;
    const int64_t *d = u->delta;
    for (uint32_t j = 0; j < u->width; j++)
        if (d[j] > v[j]) v[j] = d[j];
}

int app_node_main(const char *prog, int (*worker)(loom_node *n, const void *arg), const void *arg)
{
    loom_updater_register(APP_MAX_UPDATER, 0, max_updater, NULL);
    loom_node *n;
    int rc = loom_init(&n, NULL, NULL);
    if (rc) return app_fail(prog, "cannot join the job", rc);
    if (!loom_is_worker(n)) {
        /* A server that joined the running job leaves it on SIGTERM (docs/ELASTIC.md);
         * those the launcher started end with it, as before. */
        if (loom_joined(n)) app_leave_on_sigterm(n);
        return loom_serve(n) ? 1 : 0;
    }
    rc = worker(n, arg);
    int frc = loom_finalize(n);
    if (frc && !rc) rc = app_fail(prog, "finalize", frc);
    return rc;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

size_t app_sort_unique(uint64_t *keys, size_t n)
{
    qsort(keys, n, sizeof *keys, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || keys[i] != keys[u - 1]) keys[u++] = keys[i];
    return u;
}

size_t app_lower_bound(const uint64_t *keys, size_t n, uint64_t k)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (keys[mid] < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int64_t app_index_i64(const int64_t *ids, size_t n, int64_t id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && ids[lo] == id ? (int64_t)lo : -1;
}

size_t app_draw_cumulative(const double *cum, size_t n, double x)
{
    size_t lo = 0, hi = n - 1;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cum[mid] <= x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

uint64_t app_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void app_rng_seed(app_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t st = seed ^ (stream * 0xD1B54A32D192ED03ull);
    for (int i = 0; i < 4; i++) r->s[i] = app_splitmix64(&st);
}

double app_rng_normal(app_rng *r)
{
    double u = app_rng_uniform(r), v = app_rng_uniform(r);
    return sqrt(-2 * log(1 - u)) * cos(6.283185307179586 * v);
}

double app_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int app_agree_max(loom_node *n, const char *table, uint32_t width, const int64_t *mine,
                  int64_t *all)
{
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_I64;
    o.width = width;
    o.storage = LOOM_DENSE;
    o.key_end = 1;
    o.consistency = LOOM_ASP;
    o.updater = APP_MAX_UPDATER;
    o.cache = 0;
    loom_table *t;
    uint64_t key = 0;
    loom_ts ts;
    int rc = loom_table_open(n, table, &o, &t);
    /* A worker that joined the running job reads what the others agreed on. */
    if (!rc && loom_joined(n)) return loom_pull(t, &key, 1, all);
    if (!rc) rc = loom_push_async(t, &key, 1, mine, &ts);
    if (!rc) rc = loom_wait(n, ts);
    if (!rc) rc = loom_barrier(n);
    if (!rc) rc = loom_pull(t, &key, 1, all);
    return rc;
}

int app_elastic_check(const char *prog, loom_node *n, int data_parts)
{
    if (data_parts || (!loom_joined(n) && loom_workers_started(n) == loom_num_workers(n))) return 0;
    if (loom_joined(n)) {
        fprintf(stderr,
                "%s: this job trains on fixed shares of the data (no --data-parts), which a "
                "worker joining it cannot take: leaving it\n",
                prog);
        loom_leave(n);
    } else {
        fprintf(stderr,
                "%s: a job with free worker slots (loom run --max-workers) needs --data-parts: "
                "fixed shares of the data cannot follow workers that join and leave\n",
                prog);
    }
    return 1;
}

static loom_node *leave_node;

static void on_sigterm(int sig)
{
    (void)sig;
    loom_leave(leave_node); /* an atomic store: async-signal-safe */
}

void app_leave_on_sigterm(loom_node *n)
{
    leave_node = n;
    struct sigaction sa = {0};
    sa.sa_handler = on_sigterm;
    sa.sa_flags = SA_RESETHAND; /* a second SIGTERM ends the process as before */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
}

static int stats_open(loom_node *n, const char *name, uint32_t fields, loom_consistency consistency,
                      app_stats *s)
{
    /* Sparse over every key: rows exist for the epochs run, and no key range
     * sized by --epochs makes the definition differ from a resumed run's. */
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_F64;
    o.storage = LOOM_SPARSE;
    o.consistency = consistency;
    o.cache = 0;
    s->fields = fields;
    return loom_table_open(n, name, &o, &s->table);
}

int app_stats_open(loom_node *n, const char *name, uint32_t fields, app_stats *s)
{
    return stats_open(n, name, fields, LOOM_ASP, s);
}

int app_stats_open_clocked(loom_node *n, const char *name, uint32_t fields, app_stats *s)
{
    return stats_open(n, name, fields, LOOM_BSP, s);
}

int app_stats_add_async(app_stats *s, int epoch, const double *v, loom_ts *ts)
{
    uint64_t base = (uint64_t)epoch * s->fields;
    return loom_push_range_async(s->table, base, base + s->fields, v, ts);
}

int app_stats_add(app_stats *s, int epoch, const double *v)
{
    loom_ts ts;
    int rc = app_stats_add_async(s, epoch, v, &ts);
    return rc ? rc : loom_wait(loom_table_node(s->table), ts);
}

int app_stats_read_async(app_stats *s, int epoch, double *v, loom_ts *ts)
{
    uint64_t base = (uint64_t)epoch * s->fields;
    return loom_pull_range_async(s->table, base, base + s->fields, v, ts);
}

int app_stats_read(app_stats *s, int epoch, double *v)
{
    uint64_t base = (uint64_t)epoch * s->fields;
    return loom_pull_range(s->table, base, base + s->fields, v);
}
