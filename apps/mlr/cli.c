/* cli: `loom gen mlr` and `loom predict mlr` (tools/gen.c and tools/predict.c
 * point here). Usage errors exit 2, failures to read or write exit 1. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/data.h>

#include "common/files.h"
#include "mlr/mlr.h"

/* ---- loom gen mlr ---- */

static const app_flag gen_flags[] = {
    APP_FLAG_GEN_OUT("rows"),
    {.name = "--rows",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = UINT64_MAX,
     .def = "10000",
     .help = "number of rows"},
    {.name = "--features",
     .kind = APP_INT,
     .arg = "D",
     .lo = 1,
     .hi = MLR_MAX_DIM,
     .def = "1000",
     .help = "number of features, ids 1 to D"},
    {.name = "--classes",
     .kind = APP_INT,
     .arg = "K",
     .lo = 2,
     .hi = MLR_MAX_CLASSES,
     .def = "10",
     .help = "number of classes, labels 0 to K-1"},
    {.name = "--nnz",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = 100000,
     .def = "20",
     .help = "distinct features in every row, at most D"},
    {.name = "--signal",
     .kind = APP_NUM,
     .arg = "X",
     .min = 0,
     .max = 1e3,
     .def = "3",
     .help = "scale of the planted weights: larger is easier"},
    APP_FLAG_GEN_SEED,
    {.name = "--planted-out",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "also save the planted model (the model file of `loom predict mlr`)"},
};
#define GEN_NFLAGS (sizeof gen_flags / sizeof gen_flags[0])

void mlr_gen_help(FILE *out)
{
    app_command_help(
        out,
        "loom gen mlr --out FILE [OPTIONS]\n"
        "\n"
        "Writes LIBSVM rows (\"3 5:1 17:1 ...\": a class id 0..K-1, then feature ids 1-based\n"
        "and ascending, every value 1) whose labels come from a planted softmax model.\n"
        "The same options give the same file. See docs/MLR.md.\n"
        "\n"
        "Options (--name value or --name=value):\n",
        gen_flags, GEN_NFLAGS, 0);
}

int mlr_gen_main(int argc, char **argv)
{
    static const char cmd[] = "loom gen mlr";
    app_flag_value v[GEN_NFLAGS];
    char err[512];
    int rc = app_command_flags(cmd, gen_flags, GEN_NFLAGS, v, argc, argv, mlr_gen_help);
    if (rc) return rc < 0 ? 0 : rc;
    mlr_gen_opts o = MLR_GEN_OPTS_DEFAULT;
    const char *path = NULL, *planted_path = NULL;
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(gen_flags, GEN_NFLAGS, v, name))
    if (GIVEN("--out")) path = x->text;
    if (GIVEN("--planted-out")) planted_path = x->text;
    if (GIVEN("--rows")) o.rows = x->u;
    if (GIVEN("--features")) o.features = x->u;
    if (GIVEN("--classes")) o.classes = (uint32_t)x->u;
    if (GIVEN("--nnz")) o.nnz = (uint32_t)x->u;
    if (GIVEN("--signal")) o.signal = x->x;
    if (GIVEN("--seed")) o.seed = x->u;
#undef GIVEN
    if (!path) return app_command_usage(cmd, "--out FILE is required (- for standard output)");
    if (o.nnz > o.features)
        return app_command_usage(cmd, "--nnz (%u) must be at most --features (%llu)", o.nnz,
                                 (unsigned long long)o.features);
    app_out out;
    if (app_out_open(&out, cmd, path)) return 1;
    static char buf[1 << 20];
    setvbuf(out.f, buf, _IOFBF, sizeof buf);
    mlr_model planted = {0};
    rc = mlr_generate(&o, out.f, planted_path ? &planted : NULL, err, sizeof err);
    if (rc) fprintf(stderr, "%s: %s: %s\n", cmd, app_out_name(&out), err);
    if (app_out_close(&out, cmd, rc != 0)) {
        mlr_model_free(&planted);
        return 1;
    }
    if (planted_path) {
        rc = mlr_model_save(&planted, planted_path, err, sizeof err);
        mlr_model_free(&planted);
        if (rc) {
            fprintf(stderr, "%s: %s\n", cmd, err);
            return 1;
        }
    }
    return 0;
}

/* ---- loom predict mlr ---- */

static const app_flag predict_flags[] = {
    APP_FLAG_MODEL_IN,
    {.name = "--data",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "LIBSVM data, labels class ids (required)"},
    {.name = "--out",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "also write the predicted class of every row, one per line;\n"
             "- for standard output (the summary then goes to standard error)"},
    APP_FLAGS_FILE_IDS,
};
#define PREDICT_NFLAGS (sizeof predict_flags / sizeof predict_flags[0])

void mlr_predict_help(FILE *out)
{
    app_command_help(
        out,
        "loom predict mlr --model M --data FILE [--out FILE] [--zero-based|--one-based]\n"
        "\n"
        "Prints \"rows N  accuracy A  logloss L\" for the LIBSVM file FILE: the fraction of\n"
        "rows whose label is the highest-scoring class, and the mean -log p(label).\n"
        "See docs/MLR.md.\n"
        "\n"
        "Options (--name value or --name=value):\n",
        predict_flags, PREDICT_NFLAGS, 1);
}

int mlr_predict_main(int argc, char **argv)
{
    static const char cmd[] = "loom predict mlr";
    app_flag_value v[PREDICT_NFLAGS];
    char err[512];
    int rc = app_command_flags(cmd, predict_flags, PREDICT_NFLAGS, v, argc, argv, mlr_predict_help);
    if (rc) return rc < 0 ? 0 : rc;
    const char *model = NULL, *data = NULL, *outp = NULL;
    loom_libsvm_opts o = LOOM_LIBSVM_OPTS_DEFAULT;
    o.labels = LOOM_LABELS_REAL;
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(predict_flags, PREDICT_NFLAGS, v, name))
    if (GIVEN("--model")) model = x->text;
    if (GIVEN("--data")) data = x->text;
    if (GIVEN("--out")) outp = x->text;
    if (GIVEN("--one-based")) o.ids = LOOM_IDS_ONE_BASED;
    if (GIVEN("--zero-based")) o.ids = LOOM_IDS_ZERO_BASED;
#undef GIVEN
    if (!model) return app_command_usage(cmd, "--model M is required");
    if (!data) return app_command_usage(cmd, "--data FILE is required");
    mlr_model m;
    if (mlr_model_load(model, &m, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return 1;
    }
    loom_dataset *d = NULL;
    if (loom_libsvm_read(data, 0, 1, &o, &d, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        mlr_model_free(&m);
        return 1;
    }
    uint32_t classes;
    size_t bad = mlr_check_labels(d, &classes);
    mlr_metrics mt;
    rc = 1;
    if (d->rows == 0)
        fprintf(stderr, "%s: %s: no examples\n", cmd, data);
    else if (bad)
        fprintf(stderr, "%s: %s: example %zu: the label %g is not a class id from 0 to %u\n", cmd,
                data, bad, d->label[bad - 1], MLR_MAX_CLASSES - 1);
    else if (mlr_evaluate(&m, d, &mt))
        fprintf(stderr, "%s: out of memory\n", cmd);
    else
        rc = 0;
    if (rc == 0 && outp) {
        app_out out;
        double *s = malloc(m.classes * sizeof *s);
        if (!s || app_out_open(&out, cmd, outp)) {
            rc = 1;
        } else {
            for (size_t i = 0; i < d->rows; i++)
                fprintf(out.f, "%u\n", mlr_scores(m.w, m.classes, m.dim, d, i, s));
            rc = app_out_close(&out, cmd, 0);
        }
        free(s);
    }
    if (rc == 0) {
        FILE *summary = outp && strcmp(outp, "-") == 0 ? stderr : stdout;
        fprintf(summary, "rows %zu  accuracy %.6f  logloss %.6f\n", mt.n, mt.accuracy, mt.logloss);
        rc = app_summary_flush(cmd, summary);
    }
    loom_dataset_free(d);
    mlr_model_free(&m);
    return rc;
}
