/* cli: `loom gen lr` and `loom predict lr`.
 *
 * tools/gen.c and tools/predict.c each have one row pointing here, as for mf
 * and lda, so each model's commands live with the application they belong to.
 * Both read their flags through the table parser of apps/common ("--flag
 * value" or "--flag=value", each flag once), which also prints their help;
 * usage errors exit 2, failures to read or write exit 1. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/data.h>

#include "common/files.h"
#include "lr/lr.h"

/* ---- loom gen lr ---- */

int lr_gen_read_flags(const char *cmd, const app_flag *flags, size_t n, const app_flag_value *v,
                      lr_gen_opts *o)
{
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(flags, n, v, name))
    if (GIVEN("--rows")) o->rows = x->u;
    if (GIVEN("--features")) o->features = x->u;
    if (GIVEN("--nnz")) o->nnz = (uint32_t)x->u;
    if (GIVEN("--seed")) o->seed = x->u;
    if (GIVEN("--zipf")) o->zipf = x->x;
    if (GIVEN("--density")) {
        if (x->x == 0)
            return app_command_usage(cmd, "--density takes a number above 0, not '%s'", x->text);
        o->planted_density = x->x;
    }
#undef GIVEN
    if (o->nnz > o->features)
        return app_command_usage(cmd, "--nnz (%lu) must be at most --features (%llu)",
                                 (unsigned long)o->nnz, (unsigned long long)o->features);
    return 0;
}

/* gen lr's flags: the parser reads the command line against this table and
 * the help is printed from it. The defaults are those of LR_GEN_OPTS_DEFAULT
 * (apps/lr/lr.h). */
static const app_flag gen_lr_flags[] = {
    APP_FLAG_GEN_OUT("rows"),
    LR_GEN_FLAGS,
    {.name = "--planted-out",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "also save the planted model (the model file of `loom predict\n"
             "lr`): the best any model can do on this data, for tests"},
    {.name = "--quiet", .kind = APP_SWITCH, .help = "no progress messages on standard error"},
};
#define GEN_LR_NFLAGS (sizeof gen_lr_flags / sizeof gen_lr_flags[0])

void lr_gen_help(FILE *out)
{
    app_command_help(
        out,
        "loom gen lr --out FILE [OPTIONS]\n"
        "\n"
        "Writes LIBSVM rows (\"+1 3:1 17:1 ...\", feature ids 1-based and ascending, every\n"
        "value 1). Feature popularity follows a power law, as in click logs, and the labels\n"
        "come from a planted sparse model, so the data is learnable. The same options give\n"
        "the same file on every machine. See docs/LR.md.\n"
        "\n"
        "Options (--name value or --name=value):\n",
        gen_lr_flags, GEN_LR_NFLAGS, 0);
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
    int rc =
        app_command_flags("loom gen lr", gen_lr_flags, GEN_LR_NFLAGS, v, argc, argv, lr_gen_help);
    if (rc) return rc;
    lr_gen_opts *o = &a->opts;
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(gen_lr_flags, GEN_LR_NFLAGS, v, name))
    if (GIVEN("--out")) a->out = x->text;
    if (GIVEN("--planted-out")) a->planted_out = x->text;
    rc = lr_gen_read_flags("loom gen lr", gen_lr_flags, GEN_LR_NFLAGS, v, o);
    if (rc) return rc;
    a->quiet = GIVEN("--quiet") != NULL;
#undef GIVEN
    if (!a->out)
        return app_command_usage("loom gen lr", "--out FILE is required (- for standard output)");
    return 0;
}

int lr_gen_main(int argc, char **argv)
{
    struct gen_lr_args a;
    int rc = parse_gen_lr(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;

    static const char cmd[] = "loom gen lr";
    app_out out;
    if (app_out_open(&out, cmd, a.out)) return 1;
    /* Rows are written one fwrite each: a big buffer makes that cheap. */
    static char buf[1 << 20];
    setvbuf(out.f, buf, _IOFBF, sizeof buf);

    char err[512];
    lr_model planted = {0};
    rc = lr_generate(&a.opts, out.f, a.planted_out ? &planted : NULL, !a.quiet, err, sizeof err);
    if (rc) fprintf(stderr, "%s: %s: %s\n", cmd, app_out_name(&out), err);
    if (app_out_close(&out, cmd, rc != 0)) {
        lr_model_free(&planted);
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

/* ---- loom predict lr ---- */

/* predict lr's flags: the parser reads the command line against this table
 * and the help is printed from it. */
static const app_flag predict_lr_flags[] = {
    APP_FLAG_MODEL_IN,
    {.name = "--data",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "LIBSVM data with +1/-1 (or 1/0) labels (required)"},
    {.name = "--out",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "also write p(label = +1) of every row, one per line (%.6f);\n"
             "- for standard output (the summary then goes to standard error)"},
    APP_FLAGS_FILE_IDS,
};
#define PREDICT_LR_NFLAGS (sizeof predict_lr_flags / sizeof predict_lr_flags[0])

void lr_predict_help_with(FILE *out, const char *intro)
{
    app_command_help(out, intro, predict_lr_flags, PREDICT_LR_NFLAGS, 1);
}

void lr_predict_help(FILE *out)
{
    lr_predict_help_with(
        out, "loom predict lr --model M --data FILE [--out FILE] [--zero-based|--one-based]\n"
             "\n"
             "Prints \"rows N  accuracy A  auc U  logloss L\" for the LIBSVM file FILE: the\n"
             "fraction of rows whose label has the sign of the margin, the ROC AUC and the\n"
             "mean negative log-likelihood of the labels. See docs/LR.md.\n"
             "\n"
             "Options (--name value or --name=value):\n");
}

struct predict_args {
    const char *model, *data, *out;
    loom_id_base ids;
};

/* 0: parsed; 2: usage error (reported); -1: help printed. */
static int parse_predict(const lr_scorer *s, int argc, char **argv, struct predict_args *a)
{
    *a = (struct predict_args){.ids = LOOM_IDS_AUTO};
    app_flag_value v[PREDICT_LR_NFLAGS];
    int rc = app_command_flags(s->cmd, predict_lr_flags, PREDICT_LR_NFLAGS, v, argc, argv, s->help);
    if (rc) return rc;
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(predict_lr_flags, PREDICT_LR_NFLAGS, v, name))
    if (GIVEN("--model")) a->model = x->text;
    if (GIVEN("--data")) a->data = x->text;
    if (GIVEN("--out")) a->out = x->text;
    if (GIVEN("--one-based")) a->ids = LOOM_IDS_ONE_BASED;
    if (GIVEN("--zero-based")) a->ids = LOOM_IDS_ZERO_BASED;
#undef GIVEN
    if (!a->model) return app_command_usage(s->cmd, "--model M is required");
    if (!a->data) return app_command_usage(s->cmd, "--data FILE is required");
    return 0;
}

/* One probability per row; 0 or 1 (reported). */
static int write_probabilities(const char *cmd, const char *path, const double *margin, size_t n)
{
    app_out out;
    if (app_out_open(&out, cmd, path)) return 1;
    for (size_t i = 0; i < n; i++) fprintf(out.f, "%.6f\n", lr_sigmoid(margin[i]));
    return app_out_close(&out, cmd, 0);
}

int lr_predict_run(const lr_scorer *s, int argc, char **argv)
{
    struct predict_args a;
    int rc = parse_predict(s, argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;

    char err[512];
    void *m;
    if (s->load(a.model, &m, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", s->cmd, err);
        return 1;
    }
    loom_libsvm_opts o = LOOM_LIBSVM_OPTS_DEFAULT;
    o.ids = a.ids;
    loom_dataset *d = NULL;
    if (loom_libsvm_read(a.data, 0, 1, &o, &d, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", s->cmd, err);
        s->free(m);
        return 1;
    }

    rc = 1;
    double *margin = NULL;
    lr_metrics mt;
    if (d->rows == 0) {
        fprintf(stderr, "%s: %s: no examples\n", s->cmd, a.data);
    } else if (!(margin = malloc(d->rows * sizeof *margin))) {
        fprintf(stderr, "%s: out of memory for %zu rows\n", s->cmd, d->rows);
    } else {
        size_t nan_row = d->rows;
        for (size_t i = 0; i < d->rows; i++) {
            margin[i] = s->margin(m, d, i);
            if (isnan(margin[i]) && nan_row == d->rows) nan_row = i;
        }
        /* Finite weights and values can still add up to inf - inf. */
        if (nan_row < d->rows)
            fprintf(stderr, "%s: %s: row %zu: the margin is not a number\n", s->cmd, a.data,
                    nan_row + 1);
        else if (lr_evaluate(margin, d->label, d->rows, &mt))
            fprintf(stderr, "%s: out of memory for %zu rows\n", s->cmd, d->rows);
        else
            rc = a.out ? write_probabilities(s->cmd, a.out, margin, d->rows) : 0;
    }
    if (rc == 0) {
        /* With the probabilities on standard output, the summary goes aside. */
        FILE *summary = a.out && strcmp(a.out, "-") == 0 ? stderr : stdout;
        fprintf(summary, "rows %zu  accuracy %.6f  auc %.6f  logloss %.6f\n", mt.n, mt.accuracy,
                mt.auc, mt.logloss);
        rc = app_summary_flush(s->cmd, summary);
    }
    free(margin);
    loom_dataset_free(d);
    s->free(m);
    return rc;
}

static int load_lr(const char *path, void **model, char *err, size_t errlen)
{
    lr_model *m = malloc(sizeof *m);
    if (!m) return app_error(err, errlen, "out of memory");
    if (lr_model_load(path, m, err, errlen)) {
        free(m);
        return -1;
    }
    *model = m;
    return 0;
}

static double margin_lr(const void *m, const loom_dataset *d, size_t i)
{
    return lr_margin(m, d, i);
}

static void free_lr(void *m)
{
    lr_model_free(m);
    free(m);
}

int lr_predict_main(int argc, char **argv)
{
    static const lr_scorer lr = {"loom predict lr", load_lr, margin_lr, free_lr, lr_predict_help};
    return lr_predict_run(&lr, argc, argv);
}
