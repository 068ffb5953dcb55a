/* app: what every Loom application shares (apps/lr, apps/mf, apps/lda).
 *
 *   - the job flags every `loom train MODEL` takes, spelled alike everywhere:
 *     --train, --test, --workers, --servers, --consistency, --seed, --metrics,
 *     --model-out, --format, --quiet (app_job_flag);
 *   - number parsing for flags with messages that name the flag;
 *   - a seeded random stream (splitmix64 seeding a xoshiro256** generator),
 *     identical on every machine, so runs and their sequential references
 *     can draw the same numbers;
 *   - sorted key lists (sort and deduplicate, lower bound);
 *   - per-epoch statistics: every worker adds its numbers into a small sum
 *     table, and after a barrier worker 0 reads the totals (app_stats_*).
 *
 * Applications use only Loom's public API; this is their common toolbox. */
#ifndef LOOM_APPS_COMMON_APP_H
#define LOOM_APPS_COMMON_APP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <loom/loom.h>

/* ---- flags ---- */

typedef struct app_job {
    const char *train_path, *test_path, *metrics_path, *model_path;
    const char *format; /* --format NAME, checked by the application (NULL: detect) */
    int workers, servers;
    int consistency; /* a loom_consistency */
    int staleness;   /* SSP staleness in the application's clocks */
    uint64_t seed;
    int quiet;
} app_job;

/* Defaults: 2 workers, 1 server, SSP staleness `staleness`, seed 1. */
void app_job_init(app_job *j, int staleness);

#define APP_FLAG_NOT_MINE (-1)

/* If argv[*i] is a job flag, consume it (and its value, advancing *i) and
 * return 0, or 2 with a sentence in err when its value is bad. Returns
 * APP_FLAG_NOT_MINE for any other flag, leaving *i alone. */
int app_job_flag(app_job *j, int argc, char **argv, int *i, char *err, size_t errlen);

/* The help lines of the job flags, for an application's help text. */
extern const char app_job_help[];

/* Parse a flag's number into *out; 2 with "FLAG takes ... not 'V'" in err. */
int app_parse_int(const char *flag, const char *v, long lo, long hi, long *out, char *err,
                  size_t errlen);
int app_parse_num(const char *flag, const char *v, double lo, double hi, double *out, char *err,
                  size_t errlen);
/* "bsp", "asp" or "ssp:S" into a loom_consistency and staleness. */
int app_parse_consistency(const char *flag, const char *v, int *consistency, int *staleness,
                          char *err, size_t errlen);
#if defined(__GNUC__)
#define APP_PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define APP_PRINTF_LIKE(fmt, args)
#endif

/* printf-style message into err; returns 2 (a usage error). */
int app_usage(char *err, size_t errlen, const char *fmt, ...) APP_PRINTF_LIKE(3, 4);
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

/* ---- sorted key lists ---- */

/* Sort keys ascending and drop repeats; returns how many remain. */
size_t app_sort_unique(uint64_t *keys, size_t n);
/* Index of the first of n sorted keys that is >= k (n if none). */
size_t app_lower_bound(const uint64_t *keys, size_t n, uint64_t k);

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

/* A table of `fields` f64 sums per epoch (0..epochs-1), ASP, no cache. */
typedef struct app_stats {
    loom_table *table;
    uint32_t fields;
} app_stats;

int app_stats_open(loom_node *n, const char *name, uint32_t fields, int epochs, app_stats *s);
/* Add v[0..fields) into epoch's row and wait until the server has it. */
int app_stats_add(app_stats *s, int epoch, const double *v);
/* The totals of an epoch (after a barrier that follows every worker's add). */
int app_stats_read(app_stats *s, int epoch, double *v);

#endif
