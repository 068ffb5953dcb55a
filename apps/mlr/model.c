/* The model file, the softmax residual, prediction and metrics.
 *
 * The file is the (D + 1) x K matrix flattened feature-major and written as
 * one sparse vector by apps/common/modelfile (the format lr and lasso use):
 * entry j K + k is the weight of feature j (j = D: the bias) for class k.
 * %.17g makes save then load exact; the loader reports "FILE:LINE: ...". */
#include "mlr/mlr.h"

#include "common/modelfile.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_MAGIC   "loom-mlr"
#define MODEL_VERSION 1

int mlr_model_save(const mlr_model *m, const char *path, char *err, size_t errlen)
{
    const app_model_field classes = {"classes", "the class count", 1, (double)m->classes};
    return app_model_save(path, MODEL_MAGIC, MODEL_VERSION, &classes, 1, m->w,
                          (m->dim + 1) * m->classes, "weight", err, errlen);
}

int mlr_model_load(const char *path, mlr_model *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    app_model_reader r;
    if (app_model_open(&r, path, "MLR", err, errlen)) return -1;
    uint64_t n = 0, nnz = 0;
    app_model_field classes = {"classes", "the class count", 1, 0};
    int rc =
        app_model_read_header(&r, MODEL_MAGIC, MODEL_VERSION, MODEL_VERSION, &classes, 1, &n, &nnz);
    double k = classes.value;
    if (rc == 0) {
        if (!(k >= 1 && k <= MLR_MAX_CLASSES && k == floor(k)))
            rc = app_model_bad_line(&r, "classes=%g is not a whole number from 1 to %u", k,
                                    MLR_MAX_CLASSES);
        else if (n % (uint64_t)k || n / (uint64_t)k == 0 || n / (uint64_t)k - 1 > MLR_MAX_DIM)
            rc = app_model_bad_line(&r,
                                    "dim=%llu is not (features + 1) x classes with at most %llu "
                                    "features",
                                    (unsigned long long)n, (unsigned long long)MLR_MAX_DIM);
        else if (!(m->w = calloc((size_t)n, sizeof *m->w)))
            rc = app_model_bad_line(&r, "out of memory for dim=%llu", (unsigned long long)n);
    }
    if (rc == 0) {
        m->classes = (uint32_t)k;
        m->dim = n / m->classes - 1;
        rc = app_model_read_sparse(&r, nnz, n, m->w, "weight", "weights");
    }
    app_model_close(&r);
    if (rc) mlr_model_free(m);
    return rc;
}

void mlr_model_free(mlr_model *m)
{
    free(m->w);
    memset(m, 0, sizeof *m);
}

size_t mlr_check_labels(const loom_dataset *d, uint32_t *classes)
{
    uint32_t k = 0;
    for (size_t i = 0; i < d->rows; i++) {
        double y = d->label[i];
        if (!(y >= 0 && y < MLR_MAX_CLASSES && y == floor(y))) return i + 1;
        if ((uint32_t)y + 1 > k) k = (uint32_t)y + 1;
    }
    *classes = k;
    return 0;
}

uint32_t mlr_scores(const double *w, uint32_t classes, uint64_t dim, const loom_dataset *d,
                    size_t i, double *s)
{
    const double *bias = w + dim * classes;
    for (uint32_t k = 0; k < classes; k++) s[k] = bias[k];
    for (size_t e = d->row[i]; e < d->row[i + 1]; e++) {
        if (d->idx[e] >= dim) continue;
        const double *row = w + d->idx[e] * classes;
        double x = d->val[e];
        for (uint32_t k = 0; k < classes; k++) s[k] += row[k] * x;
    }
    uint32_t best = 0;
    for (uint32_t k = 1; k < classes; k++)
        if (s[k] > s[best]) best = k;
    return best;
}

/* Softmax shifted by the largest score, so exp never overflows. */
double mlr_residual(double *s, uint32_t classes, uint32_t label)
{
    double top = s[0];
    for (uint32_t k = 1; k < classes; k++)
        if (s[k] > top) top = s[k];
    double z = 0;
    for (uint32_t k = 0; k < classes; k++) z += (s[k] = exp(s[k] - top));
    double p_label = label < classes ? s[label] / z : 0;
    for (uint32_t k = 0; k < classes; k++) s[k] /= z;
    if (label < classes) s[label] -= 1;
    return p_label > 0 ? -log(p_label) : 745;
}

int mlr_evaluate(const mlr_model *m, const loom_dataset *d, mlr_metrics *out)
{
    double *s = malloc(m->classes * sizeof *s);
    if (!s) return -1;
    size_t right = 0;
    double loss = 0;
    for (size_t i = 0; i < d->rows; i++) {
        uint32_t y = (uint32_t)d->label[i];
        right += mlr_scores(m->w, m->classes, m->dim, d, i, s) == y;
        loss += mlr_residual(s, m->classes, y);
    }
    free(s);
    *out = (mlr_metrics){.n = d->rows,
                         .logloss = d->rows ? loss / (double)d->rows : 0,
                         .accuracy = d->rows ? (double)right / (double)d->rows : 0};
    return 0;
}
