/* loom gen: write synthetic data sets, so examples and tests need no download.
 *
 * `loom gen MODEL [OPTIONS]` looks MODEL up in the table of generators below
 * and hands it the rest of the command line; adding a generator (mf, lda,
 * ...) is one function and one row there, plus its part of the help text. */
#include "commands.h"

#include "lda/lda.h"
#include "lr/lr.h"
#include "mf/mf.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The defaults below are those of LR_GEN_OPTS_DEFAULT (apps/lr/lr.h). */
static const char cmd_gen_help[] =
    "Usage: loom gen MODEL [OPTIONS]\n"
    "\n"
    "Write a synthetic data set. MODEL is one of:\n"
    "  lr   sparse binary classification rows from a planted logistic regression model\n"
    "  mf   MovieLens-like ratings from a planted biased low-rank model (loom gen mf --help)\n"
    "\n"
    "loom gen lr --out FILE [OPTIONS]\n"
    "\n"
    "Writes LIBSVM rows (\"+1 3:1 17:1 ...\", feature ids 1-based and ascending, every\n"
    "value 1). Feature popularity follows a power law, as in click logs, and the labels\n"
    "come from a planted sparse model, so the data is learnable. The same options give\n"
    "the same file on every machine. See docs/LR.md.\n"
    "\n"
    "Options:\n"
    "  --out FILE          where to write the rows; - for standard output (required)\n"
    "  --rows N            number of rows (default 100000)\n"
    "  --features F        number of features, ids 1 to F (default 100000)\n"
    "  --nnz K             distinct features in every row, 1 to F (default 30)\n"
    "  --seed S            random seed, 0 to 18446744073709551615 (default 1)\n"
    "  --zipf A            power-law exponent of feature popularity, >= 0; 0 makes all\n"
    "                      features equally common (default 1.1)\n"
    "  --density P         fraction of the features with a non-zero planted weight,\n"
    "                      above 0 and at most 1 (default 0.1)\n"
    "  --planted-out FILE  also save the planted model (the model file of `loom predict\n"
    "                      lr`): the best any model can do on this data, for tests\n"
    "  --quiet             no progress messages on standard error\n"
    "  -h, --help          show this help\n"
    "\n"
    "Exit status: 0 on success, 1 if writing failed, 2 for a usage error.\n";

#if defined(__GNUC__)
#define PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define PRINTF_LIKE(fmt, args)
#endif

static int gen_lr(int argc, char **argv);

struct generator {
    const char *name;
    const char *summary;
    int (*fn)(int argc, char **argv); /* argv[0] is the generator's name */
};

static const struct generator generators[] = {
    {"lr", "sparse binary classification rows from a planted logistic regression model", gen_lr},
    {"mf", "ratings from a planted biased low-rank model", mf_gen_main},
    {"lda", "bag-of-words documents from a planted topic model", lda_gen_main},
};

#define NUM_GENERATORS (sizeof generators / sizeof generators[0])

static void list_generators(FILE *out)
{
    fprintf(out, "Usage: loom gen MODEL [OPTIONS]\n\nModels:\n");
    for (size_t i = 0; i < NUM_GENERATORS; i++)
        fprintf(out, "  %-6s %s\n", generators[i].name, generators[i].summary);
    fprintf(out, "\nRun 'loom help gen' for the options.\n");
}

int cmd_gen(int argc, char **argv)
{
    if (argc < 2) {
        list_generators(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fputs(cmd_gen_help, stdout);
        return 0;
    }
    for (size_t i = 0; i < NUM_GENERATORS; i++)
        if (strcmp(argv[1], generators[i].name) == 0) return generators[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "loom gen: unknown model '%s'\n\n", argv[1]);
    list_generators(stderr);
    return 2;
}

/* ---- loom gen lr ---- */

static int usage_error(const char *fmt, ...) PRINTF_LIKE(1, 2);
static int usage_error(const char *fmt, ...)
{
    fprintf(stderr, "loom gen lr: ");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'loom help gen'.\n");
    return 2;
}

/* Digits only: strtoull alone would accept blanks, a sign ("-1" wraps to
 * 2^64-1) and stop silently at the first non-digit. */
static int parse_u64(const char *flag, const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno == ERANGE || v < min || v > max)
        return usage_error("%s takes a whole number from %llu to %llu, not '%s'", flag,
                           (unsigned long long)min, (unsigned long long)max, text);
    *out = v;
    return 0;
}

static int parse_double(const char *flag, const char *text, double *out)
{
    char *end;
    double v = strtod(text, &end);
    /* strtod would also take blanks, "nan" and "inf"; an underflow to 0 is harmless. */
    int number_first = (text[0] >= '0' && text[0] <= '9') || text[0] == '.' || text[0] == '-';
    if (!number_first || *end != '\0' || !isfinite(v))
        return usage_error("%s takes a number, not '%s'", flag, text);
    *out = v;
    return 0;
}

struct gen_lr_args {
    lr_gen_opts opts;
    const char *out;
    const char *planted_out;
    int quiet;
};

/* The flags that take a value; each may be given once. */
static const char *const value_flags[] = {"--out",  "--rows", "--features", "--nnz",
                                          "--seed", "--zipf", "--density",  "--planted-out"};
#define NUM_VALUE_FLAGS (sizeof value_flags / sizeof value_flags[0])

static int set_flag(struct gen_lr_args *a, const char *name, const char *value)
{
    lr_gen_opts *o = &a->opts;
    uint64_t v = 0;
    int rc = 0;
    if (strcmp(name, "--out") == 0 || strcmp(name, "--planted-out") == 0) {
        if (value[0] == '\0') return usage_error("%s needs a non-empty FILE", name);
        if (strcmp(name, "--out") == 0)
            a->out = value;
        else
            a->planted_out = value;
    } else if (strcmp(name, "--rows") == 0) {
        rc = parse_u64(name, value, 1, UINT64_MAX, &o->rows);
    } else if (strcmp(name, "--features") == 0) {
        rc = parse_u64(name, value, 1, UINT64_MAX, &o->features);
    } else if (strcmp(name, "--nnz") == 0) {
        if (!(rc = parse_u64(name, value, 1, UINT32_MAX, &v))) o->nnz = (uint32_t)v;
    } else if (strcmp(name, "--seed") == 0) {
        rc = parse_u64(name, value, 0, UINT64_MAX, &o->seed);
    } else if (strcmp(name, "--zipf") == 0) {
        if (!(rc = parse_double(name, value, &o->zipf)) && o->zipf < 0)
            rc = usage_error("--zipf takes a number >= 0, not '%s'", value);
    } else { /* --density */
        if (!(rc = parse_double(name, value, &o->planted_density)) &&
            !(o->planted_density > 0 && o->planted_density <= 1))
            rc = usage_error("--density takes a number above 0 and at most 1, not '%s'", value);
    }
    return rc;
}

/* 0: parsed; 2: usage error (reported); -1: help printed. */
static int parse_gen_lr(int argc, char **argv, struct gen_lr_args *a)
{
    *a = (struct gen_lr_args){.opts = LR_GEN_OPTS_DEFAULT};
    int seen[NUM_VALUE_FLAGS] = {0};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            fputs(cmd_gen_help, stdout);
            return -1;
        }
        if (strncmp(arg, "--", 2) != 0) return usage_error("unexpected argument '%s'", arg);

        /* "--name value" or "--name=value" */
        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        char name[32];
        if (name_len >= sizeof name) return usage_error("unknown flag '%.*s'", (int)name_len, arg);
        memcpy(name, arg, name_len);
        name[name_len] = '\0';

        if (strcmp(name, "--quiet") == 0) {
            if (eq) return usage_error("--quiet takes no value");
            a->quiet = 1;
            continue;
        }
        size_t f = 0;
        while (f < NUM_VALUE_FLAGS && strcmp(name, value_flags[f]) != 0) f++;
        if (f == NUM_VALUE_FLAGS) return usage_error("unknown flag '%s'", name);
        if (seen[f]++) return usage_error("%s given twice", name);
        const char *value;
        if (eq)
            value = eq + 1;
        else if (i + 1 < argc)
            value = argv[++i];
        else
            return usage_error("%s needs a value", name);
        int rc = set_flag(a, name, value);
        if (rc) return rc;
    }
    if (!a->out) return usage_error("--out FILE is required (- for standard output)");
    if (a->opts.nnz > a->opts.features)
        return usage_error("--nnz (%lu) must be at most --features (%llu)",
                           (unsigned long)a->opts.nnz, (unsigned long long)a->opts.features);
    return 0;
}

static int gen_lr(int argc, char **argv)
{
    struct gen_lr_args a;
    int rc = parse_gen_lr(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;

    int to_stdout = strcmp(a.out, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(a.out, "w");
    if (!f) {
        fprintf(stderr, "loom gen lr: %s: cannot create: %s\n", a.out, strerror(errno));
        return 1;
    }
    /* Only a regular file is removed after a failure: never /dev/full or a FIFO. */
    struct stat st;
    int regular = !to_stdout && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    /* Rows are written one fwrite each: a big buffer makes that cheap. */
    static char buf[1 << 20];
    setvbuf(f, buf, _IOFBF, sizeof buf);

    char err[512];
    lr_model planted = {0};
    rc = lr_generate(&a.opts, f, a.planted_out ? &planted : NULL, !a.quiet, err, sizeof err);
    /* A full disk may only show when the last buffer is written. */
    int closed = to_stdout ? fflush(f) : fclose(f);
    if (rc == 0 && closed != 0) {
        snprintf(err, sizeof err, "write failed: %s", strerror(errno));
        rc = -1;
    }
    if (rc != 0) {
        fprintf(stderr, "loom gen lr: %s: %s\n", to_stdout ? "standard output" : a.out, err);
        if (regular) remove(a.out); /* no half-written data set left behind */
        return 1;
    }
    if (a.planted_out) {
        rc = lr_model_save(&planted, a.planted_out, err, sizeof err);
        lr_model_free(&planted);
        if (rc) {
            fprintf(stderr, "loom gen lr: %s\n", err);
            return 1;
        }
    }
    return 0;
}
