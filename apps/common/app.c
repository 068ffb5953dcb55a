/* app: the toolbox shared by Loom's applications (see app.h). */
#include "common/app.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char app_job_help[] = "job:\n"
                            "  --train FILE            training data; each worker reads its share\n"
                            "  --test FILE             held-out data, evaluated after every epoch\n"
                            "  --format NAME           input format (default: detect)\n"
                            "  --workers W             default 2\n"
                            "  --servers S             default 1\n"
                            "  --consistency bsp|ssp:S|asp  staleness bound in clocks\n"
                            "  --seed N                random seed (default 1)\n"
                            "  --metrics FILE          JSON line per epoch\n"
                            "  --model-out FILE        save the model\n"
                            "  --quiet                 no progress lines\n";

void app_job_init(app_job *j, int staleness)
{
    *j = (app_job){
        .workers = 2, .servers = 1, .consistency = LOOM_SSP, .staleness = staleness, .seed = 1};
}

int app_usage(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return 2;
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

int app_parse_int(const char *flag, const char *v, long lo, long hi, long *out, char *err,
                  size_t errlen)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return app_usage(err, errlen, "%s takes a whole number from %ld to %ld, not '%s'", flag, lo,
                         hi, v);
    *out = x;
    return 0;
}

int app_parse_num(const char *flag, const char *v, double lo, double hi, double *out, char *err,
                  size_t errlen)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi))
        return app_usage(err, errlen, "%s takes a number from %g to %g, not '%s'", flag, lo, hi, v);
    *out = x;
    return 0;
}

int app_parse_consistency(const char *flag, const char *v, int *consistency, int *staleness,
                          char *err, size_t errlen)
{
    long n = 0;
    if (!strcmp(v, "bsp")) {
        *consistency = LOOM_BSP;
        *staleness = 0;
    } else if (!strcmp(v, "asp")) {
        *consistency = LOOM_ASP;
    } else if (!strncmp(v, "ssp:", 4)) {
        if (app_parse_int(flag, v + 4, 0, 1000000, &n, err, errlen)) return 2;
        *consistency = LOOM_SSP;
        *staleness = (int)n;
    } else {
        return app_usage(err, errlen, "%s takes bsp, asp or ssp:S (S a staleness >= 0), not '%s'",
                         flag, v);
    }
    return 0;
}

int app_job_flag(app_job *j, int argc, char **argv, int *i, char *err, size_t errlen)
{
    const char *f = argv[*i];
    if (!strcmp(f, "--quiet")) {
        j->quiet = 1;
        return 0;
    }
    static const char *const valued[] = {"--train",   "--test",    "--format",
                                         "--workers", "--servers", "--consistency",
                                         "--seed",    "--metrics", "--model-out"};
    size_t k = 0, nvalued = sizeof valued / sizeof valued[0];
    while (k < nvalued && strcmp(f, valued[k])) k++;
    if (k == nvalued) return APP_FLAG_NOT_MINE;
    if (*i + 1 >= argc) return app_usage(err, errlen, "%s needs a value", f);
    const char *v = argv[++*i];
    long n = 0;
    if (!strcmp(f, "--train")) {
        j->train_path = v;
    } else if (!strcmp(f, "--test")) {
        j->test_path = v;
    } else if (!strcmp(f, "--format")) {
        j->format = v;
    } else if (!strcmp(f, "--metrics")) {
        j->metrics_path = v;
    } else if (!strcmp(f, "--model-out")) {
        j->model_path = v;
    } else if (!strcmp(f, "--consistency")) {
        return app_parse_consistency(f, v, &j->consistency, &j->staleness, err, errlen);
    } else if (!strcmp(f, "--seed")) {
        if (app_parse_int(f, v, 0, 2147483647L, &n, err, errlen)) return 2;
        j->seed = (uint64_t)n;
    } else {
        if (app_parse_int(f, v, 1, 128, &n, err, errlen)) return 2;
        *(strcmp(f, "--workers") ? &j->servers : &j->workers) = (int)n;
    }
    return 0;
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
    if (!loom_is_worker(n)) return loom_serve(n) ? 1 : 0;
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

int app_stats_open(loom_node *n, const char *name, uint32_t fields, int epochs, app_stats *s)
{
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_F64;
    o.storage = LOOM_DENSE;
    o.key_end = (uint64_t)fields * (uint64_t)(epochs > 0 ? epochs : 1);
    o.consistency = LOOM_ASP;
    o.cache = 0;
    s->fields = fields;
    return loom_table_open(n, name, &o, &s->table);
}

int app_stats_add(app_stats *s, int epoch, const double *v)
{
    uint64_t base = (uint64_t)epoch * s->fields;
    loom_ts ts;
    int rc = loom_push_range_async(s->table, base, base + s->fields, v, &ts);
    return rc ? rc : loom_wait(loom_table_node(s->table), ts);
}

int app_stats_read(app_stats *s, int epoch, double *v)
{
    uint64_t base = (uint64_t)epoch * s->fields;
    return loom_pull_range(s->table, base, base + s->fields, v);
}
