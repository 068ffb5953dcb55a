/* cli: the SVM's model file and `loom predict svm`.
 *
 * The model file is the text format lr and lasso write (apps/common/modelfile): a header
 * "loom-svm 1 dim=D nnz=K bias=B", then "id weight" per non-zero weight, %.17g. */
#include <stdlib.h>
#include <string.h>

#include "common/files.h"
#include "common/modelfile.h"
#include "svm/svm.h"

#define MODEL_MAGIC   "loom-svm"
#define MODEL_VERSION 1

int svm_model_save(const svm_replica *r, const char *path, char *err, size_t errlen)
{
    double *w = malloc(((size_t)r->dim + 1) * sizeof *w);
    if (!w) return app_error(err, errlen, "out of memory saving %s", path);
    for (uint64_t k = 0; k <= r->dim; k++) w[k] = (double)r->v[k] * r->scale;
    const app_model_field bias = {"bias", "the bias", 1, w[r->dim]};
    int rc = app_model_save(path, MODEL_MAGIC, MODEL_VERSION, &bias, 1, w, r->dim, "weight", err,
                            errlen);
    free(w);
    return rc;
}

int svm_model_load(const char *path, svm_replica *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    app_model_reader rd;
    if (app_model_open(&rd, path, "SVM", err, errlen)) return -1;
    uint64_t dim = 0, nnz = 0;
    double *w = NULL;
    app_model_field bias = {"bias", "the bias", 1, 0};
    int rc =
        app_model_read_header(&rd, MODEL_MAGIC, MODEL_VERSION, MODEL_VERSION, &bias, 1, &dim, &nnz);
    if (!rc && dim > SVM_MAX_DIM)
        rc = app_error(err, errlen, "%s:1: dim=%llu is beyond the %llu features of an SVM model",
                       path, (unsigned long long)dim, (unsigned long long)SVM_MAX_DIM);
    if (!rc && (!(w = calloc((size_t)dim + 1, sizeof *w)) || svm_replica_init(r, dim)))
        rc = app_error(err, errlen, "%s:1: out of memory for dim=%llu", path,
                       (unsigned long long)dim);
    if (!rc) rc = app_model_read_sparse(&rd, nnz, dim, w, "weight", "weights");
    if (!rc) {
        for (uint64_t k = 0; k < dim; k++) r->v[k] = (float)w[k];
        r->v[dim] = (float)bias.value;
    } else {
        svm_replica_free(r);
    }
    free(w);
    app_model_close(&rd);
    return rc;
}

/* ---- loom predict svm ---- */

static const app_flag predict_flags[] = {
    {.name = "--model",
     .kind = APP_TEXT,
     .arg = "M",
     .help = "model file (loom train svm --model-out)"},
    {.name = "--data", .kind = APP_TEXT, .arg = "FILE", .help = "LIBSVM rows to predict"},
    {.name = "--out",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "write one label (+1/-1) per row; - for standard output"},
};
#define PREDICT_NFLAGS (sizeof predict_flags / sizeof predict_flags[0])

void svm_predict_help(FILE *out)
{
    fputs("usage: loom predict svm --model M --data FILE [--out FILE]\n"
          "\n"
          "Print the accuracy of an SVM model on LIBSVM rows (and write its labels).\n"
          "\n",
          out);
    app_flags_help(out, predict_flags, PREDICT_NFLAGS);
}

int svm_predict_main(int argc, char **argv)
{
    app_flag_value v[PREDICT_NFLAGS];
    char err[512];
    int rc = app_command_flags("loom predict svm", predict_flags, PREDICT_NFLAGS, v, argc, argv,
                               svm_predict_help);
    if (rc) return rc < 0 ? 0 : rc;
    const app_flag_value *model = app_flag_get(predict_flags, PREDICT_NFLAGS, v, "--model");
    const app_flag_value *data = app_flag_get(predict_flags, PREDICT_NFLAGS, v, "--data");
    const app_flag_value *outp = app_flag_get(predict_flags, PREDICT_NFLAGS, v, "--out");
    if (!model) return app_command_usage("loom predict svm", "--model M is required");
    if (!data) return app_command_usage("loom predict svm", "--data FILE is required");
    svm_replica m;
    if (svm_model_load(model->text, &m, err, sizeof err)) {
        fprintf(stderr, "loom predict svm: %s\n", err);
        return 1;
    }
    loom_libsvm_opts o = LOOM_LIBSVM_OPTS_DEFAULT;
    loom_dataset *d = NULL;
    if (loom_libsvm_read(data->text, 0, 1, &o, &d, err, sizeof err)) {
        fprintf(stderr, "loom predict svm: %s\n", err);
        svm_replica_free(&m);
        return 1;
    }
    rc = 0;
    if (d->rows == 0) {
        fprintf(stderr, "loom predict svm: %s: no examples\n", data->text);
        rc = 1;
    } else {
        svm_warn_unknown_features("loom predict svm", data->text, &m, d);
    }
    if (!rc && outp) {
        app_out out;
        rc = app_out_open(&out, "loom predict svm", outp->text);
        for (size_t i = 0; !rc && i < d->rows; i++)
            fprintf(out.f, "%d\n", svm_margin(&m, d, i) > 0 ? 1 : -1);
        if (!rc) rc = app_out_close(&out, "loom predict svm", 0);
    }
    if (!rc) {
        FILE *summary = outp && !strcmp(outp->text, "-") ? stderr : stdout;
        fprintf(summary, "rows %zu  accuracy %.4f%%\n", d->rows, svm_accuracy(&m, d));
    }
    loom_dataset_free(d);
    svm_replica_free(&m);
    return rc;
}
