/* loom gen: write synthetic data sets, so examples and tests need no download.
 *
 * `loom gen MODEL [OPTIONS]` looks MODEL up in the table of generators below
 * and hands it the rest of the command line; adding a generator (mf, lda,
 * ...) is one function and one row there, plus its part of the help text. */
#include "commands.h"

#include "common/app.h"

#include "lda/lda.h"
#include "lr/lr.h"
#include "mf/mf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* gen lr's flags: the parser reads the command line against this table and
 * the help is printed from it. The defaults are those of LR_GEN_OPTS_DEFAULT
 * (apps/lr/lr.h). */
static const app_flag gen_lr_flags[] = {
    {.name = "--out",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "where to write the rows; - for standard output (required)"},
    {.name = "--rows",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = UINT64_MAX,
     .def = "100000",
     .help = "number of rows"},
    {.name = "--features",
     .kind = APP_INT,
     .arg = "F",
     .lo = 1,
     .hi = UINT64_MAX,
     .def = "100000",
     .help = "number of features, ids 1 to F"},
    {.name = "--nnz",
     .kind = APP_INT,
     .arg = "K",
     .lo = 1,
     .hi = UINT32_MAX,
     .def = "30",
     .help = "distinct features in every row, at most F"},
    {.name = "--seed",
     .kind = APP_INT,
     .arg = "S",
     .lo = 0,
     .hi = UINT64_MAX,
     .def = "1",
     .help = "random seed"},
    {.name = "--zipf",
     .kind = APP_NUM,
     .arg = "A",
     .min = 0,
     .max = 1e6,
     .def = "1.1",
     .help = "power-law exponent of feature popularity; 0 makes all\n"
             "features equally common"},
    {.name = "--density",
     .kind = APP_NUM,
     .arg = "P",
     .min = 0,
     .max = 1,
     .def = "0.1",
     .help = "fraction of the features with a non-zero planted weight,\n"
             "above 0"},
    {.name = "--planted-out",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "also save the planted model (the model file of `loom predict\n"
             "lr`): the best any model can do on this data, for tests"},
    {.name = "--quiet", .kind = APP_SWITCH, .help = "no progress messages on standard error"},
};
#define GEN_LR_NFLAGS (sizeof gen_lr_flags / sizeof gen_lr_flags[0])

static void print_help(FILE *out)
{
    fputs(
        "Usage: loom gen MODEL [OPTIONS]\n"
        "\n"
        "Write a synthetic data set. MODEL is one of:\n"
        "  lr   sparse binary classification rows from a planted logistic regression model\n"
        "  mf   MovieLens-like ratings from a planted biased low-rank model (loom gen mf --help)\n"
        "  lda  bag-of-words documents from a planted topic model (loom gen lda --help)\n"
        "\n"
        "loom gen lr --out FILE [OPTIONS]\n"
        "\n"
        "Writes LIBSVM rows (\"+1 3:1 17:1 ...\", feature ids 1-based and ascending, every\n"
        "value 1). Feature popularity follows a power law, as in click logs, and the labels\n"
        "come from a planted sparse model, so the data is learnable. The same options give\n"
        "the same file on every machine. See docs/LR.md.\n"
        "\n"
        "Options (--name value or --name=value):\n",
        out);
    app_flags_help(out, gen_lr_flags, GEN_LR_NFLAGS);
    fputs("  -h, --help              show this help\n"
          "\n"
          "Exit status: 0 on success, 1 if writing failed, 2 for a usage error.\n",
          out);
}

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
        print_help(stdout);
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
    fprintf(stderr, "\nTry 'loom gen lr --help'.\n");
    return 2;
}

struct gen_lr_args {
    lr_gen_opts opts;
    const char *out;
    const char *planted_out;
    int quiet;
};

/* 0: parsed; 2: usage error (reported); -1: help printed. */
static int parse_gen_lr(int argc, char **argv, struct gen_lr_args *a)
{
    *a = (struct gen_lr_args){.opts = LR_GEN_OPTS_DEFAULT};
    app_flag_value v[GEN_LR_NFLAGS];
    char err[512];
    int rc = app_flags_parse(gen_lr_flags, GEN_LR_NFLAGS, argc, argv, 1, v, NULL, err, sizeof err);
    if (rc == APP_FLAGS_HELP) {
        print_help(stdout);
        return -1;
    }
    if (rc) return usage_error("%s", err);
    lr_gen_opts *o = &a->opts;
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(gen_lr_flags, GEN_LR_NFLAGS, v, name))
    if (GIVEN("--out")) a->out = x->text;
    if (GIVEN("--planted-out")) a->planted_out = x->text;
    if (GIVEN("--rows")) o->rows = x->u;
    if (GIVEN("--features")) o->features = x->u;
    if (GIVEN("--nnz")) o->nnz = (uint32_t)x->u;
    if (GIVEN("--seed")) o->seed = x->u;
    if (GIVEN("--zipf")) o->zipf = x->x;
    if (GIVEN("--density")) {
        if (x->x == 0) return usage_error("--density takes a number above 0, not '%s'", x->text);
        o->planted_density = x->x;
    }
    a->quiet = GIVEN("--quiet") != NULL;
#undef GIVEN
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
