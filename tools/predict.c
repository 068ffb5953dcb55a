/* loom predict: apply a saved model to a data set and report how well it does.
 *
 * `loom predict MODEL [OPTIONS]` picks the predictor for MODEL from the table
 * below, the same way `loom gen` picks a generator. Prediction runs in this
 * one process: it is a single pass over the data, with no parameter server. */
#include "commands.h"

#include "common/app.h"

#include "lr/lr.h"
#include "mf/mf.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/data.h>

/* predict lr's flags: the parser reads the command line against this table
 * and the help is printed from it. */
static const app_flag predict_lr_flags[] = {
    {.name = "--model", .kind = APP_TEXT, .arg = "M", .help = "the model file (required)"},
    {.name = "--data",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "LIBSVM data with +1/-1 (or 1/0) labels (required)"},
    {.name = "--out",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "also write p(label = +1) of every row, one per line (%.6f);\n"
             "- for standard output (the summary then goes to standard error)"},
    {.name = "--one-based",
     .kind = APP_SWITCH,
     .excludes = "--zero-based",
     .help = "feature ids in FILE start at 1 (LIBSVM's convention)"},
    {.name = "--zero-based",
     .kind = APP_SWITCH,
     .help = "feature ids in FILE start at 0\n"
             "(default: 1-based, unless an id 0 appears in FILE)"},
};
#define PREDICT_LR_NFLAGS (sizeof predict_lr_flags / sizeof predict_lr_flags[0])

static void print_help(FILE *out)
{
    fputs("Usage: loom predict MODEL [OPTIONS]\n"
          "\n"
          "Apply a saved model to a data set. MODEL is one of:\n"
          "  lr   logistic regression (the model file of `loom train lr --model-out`)\n"
          "  mf   matrix factorisation (`loom train mf --model-out`; loom predict mf --help)\n"
          "\n"
          "loom predict lr --model M --data FILE [--out FILE] [--zero-based|--one-based]\n"
          "\n"
          "Prints \"rows N  accuracy A  auc U  logloss L\" for the LIBSVM file FILE: the\n"
          "fraction of rows whose label has the sign of the margin, the ROC AUC and the\n"
          "mean negative log-likelihood of the labels. See docs/LR.md.\n"
          "\n"
          "Options (--name value or --name=value):\n",
          out);
    app_flags_help(out, predict_lr_flags, PREDICT_LR_NFLAGS);
    fputs("  -h, --help              show this help\n"
          "\n"
          "Exit status: 0 on success, 1 if a file could not be read or written, 2 for a\n"
          "usage error.\n",
          out);
}

#if defined(__GNUC__)
#define PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define PRINTF_LIKE(fmt, args)
#endif

static int predict_lr(int argc, char **argv);

struct predictor {
    const char *name;
    const char *summary;
    int (*fn)(int argc, char **argv); /* argv[0] is the model's name */
};

static const struct predictor predictors[] = {
    {"lr", "logistic regression", predict_lr},
    {"mf", "matrix factorisation", mf_predict_main},
};

#define NUM_PREDICTORS (sizeof predictors / sizeof predictors[0])

static void list_predictors(FILE *out)
{
    fprintf(out, "Usage: loom predict MODEL [OPTIONS]\n\nModels:\n");
    for (size_t i = 0; i < NUM_PREDICTORS; i++)
        fprintf(out, "  %-6s %s\n", predictors[i].name, predictors[i].summary);
    fprintf(out, "\nRun 'loom help predict' for the options.\n");
}

int cmd_predict(int argc, char **argv)
{
    if (argc < 2) {
        list_predictors(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        print_help(stdout);
        return 0;
    }
    for (size_t i = 0; i < NUM_PREDICTORS; i++)
        if (strcmp(argv[1], predictors[i].name) == 0) return predictors[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "loom predict: unknown model '%s'\n\n", argv[1]);
    list_predictors(stderr);
    return 2;
}

/* ---- loom predict lr ---- */

static int usage_error(const char *fmt, ...) PRINTF_LIKE(1, 2);
static int usage_error(const char *fmt, ...)
{
    fprintf(stderr, "loom predict lr: ");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'loom predict lr --help'.\n");
    return 2;
}

struct predict_args {
    const char *model, *data, *out;
    loom_id_base ids;
};

/* 0: parsed; 2: usage error (reported); -1: help printed. */
static int parse_predict_lr(int argc, char **argv, struct predict_args *a)
{
    *a = (struct predict_args){.ids = LOOM_IDS_AUTO};
    app_flag_value v[PREDICT_LR_NFLAGS];
    char err[512];
    int rc = app_flags_parse(predict_lr_flags, PREDICT_LR_NFLAGS, argc, argv, 1, v, NULL, err,
                             sizeof err);
    if (rc == APP_FLAGS_HELP) {
        print_help(stdout);
        return -1;
    }
    if (rc) return usage_error("%s", err);
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(predict_lr_flags, PREDICT_LR_NFLAGS, v, name))
    if (GIVEN("--model")) a->model = x->text;
    if (GIVEN("--data")) a->data = x->text;
    if (GIVEN("--out")) a->out = x->text;
    if (GIVEN("--one-based")) a->ids = LOOM_IDS_ONE_BASED;
    if (GIVEN("--zero-based")) a->ids = LOOM_IDS_ZERO_BASED;
#undef GIVEN
    if (!a->model) return usage_error("--model M is required");
    if (!a->data) return usage_error("--data FILE is required");
    return 0;
}

/* One probability per row; 0 or 1 (reported). */
static int write_probabilities(const char *path, const double *margin, size_t n)
{
    int to_stdout = strcmp(path, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(path, "w");
    if (!f) {
        fprintf(stderr, "loom predict lr: %s: cannot create: %s\n", path, strerror(errno));
        return 1;
    }
    for (size_t i = 0; i < n; i++) fprintf(f, "%.6f\n", lr_sigmoid(margin[i]));
    /* A full disk may only show when the last buffer is written. */
    int bad = ferror(f);
    if ((to_stdout ? fflush(f) : fclose(f)) != 0) bad = 1;
    if (bad) {
        fprintf(stderr, "loom predict lr: %s: write failed: %s\n",
                to_stdout ? "standard output" : path, strerror(errno));
        return 1;
    }
    return 0;
}

static int predict_lr(int argc, char **argv)
{
    struct predict_args a;
    int rc = parse_predict_lr(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;

    char err[512];
    lr_model m;
    if (lr_model_load(a.model, &m, err, sizeof err)) {
        fprintf(stderr, "loom predict lr: %s\n", err);
        return 1;
    }
    loom_libsvm_opts o = LOOM_LIBSVM_OPTS_DEFAULT;
    o.ids = a.ids;
    loom_dataset *d = NULL;
    if (loom_libsvm_read(a.data, 0, 1, &o, &d, err, sizeof err)) {
        fprintf(stderr, "loom predict lr: %s\n", err);
        lr_model_free(&m);
        return 1;
    }

    rc = 1;
    double *margin = NULL;
    lr_metrics mt;
    if (d->rows == 0) {
        fprintf(stderr, "loom predict lr: %s: no examples\n", a.data);
    } else if (!(margin = malloc(d->rows * sizeof *margin))) {
        fprintf(stderr, "loom predict lr: out of memory for %zu rows\n", d->rows);
    } else {
        size_t nan_row = d->rows;
        for (size_t i = 0; i < d->rows; i++) {
            margin[i] = lr_margin(&m, d, i);
            if (isnan(margin[i]) && nan_row == d->rows) nan_row = i;
        }
        /* Finite weights and values can still add up to inf - inf. */
        if (nan_row < d->rows)
            fprintf(stderr, "loom predict lr: %s: row %zu: the margin is not a number\n", a.data,
                    nan_row + 1);
        else if (lr_evaluate(margin, d->label, d->rows, &mt))
            fprintf(stderr, "loom predict lr: out of memory for %zu rows\n", d->rows);
        else
            rc = a.out ? write_probabilities(a.out, margin, d->rows) : 0;
    }
    if (rc == 0) {
        /* With the probabilities on standard output, the summary goes aside. */
        FILE *summary = a.out && strcmp(a.out, "-") == 0 ? stderr : stdout;
        fprintf(summary, "rows %zu  accuracy %.6f  auc %.6f  logloss %.6f\n", mt.n, mt.accuracy,
                mt.auc, mt.logloss);
        if (fflush(summary) != 0) {
            fprintf(stderr, "loom predict lr: writing the summary failed: %s\n", strerror(errno));
            rc = 1;
        }
    }
    free(margin);
    loom_dataset_free(d);
    lr_model_free(&m);
    return rc;
}
