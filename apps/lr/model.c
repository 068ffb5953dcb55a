/* The model file and prediction.
 *
 * A model is written as text: a header line with the dimension, the number of
 * weights that follow and the bias, then one "id weight" line per weight that
 * is not +0.0, ids ascending. Weights are printed with %.17g, which is enough
 * digits for strtod to give back the very same double, so save then load is
 * bit-exact (docs/LR.md has the format). Text keeps models diffable and easy
 * to produce from other tools; sparse models stay small.
 *
 * The loader trusts nothing: every line must be exactly in the format, and
 * any problem is reported as "FILE:LINE: what is wrong" so a hand-edited or
 * truncated model is caught at load time rather than predicting nonsense
 * (common/modelfile, shared with lasso). */
#include "lr/lr.h"

#include "common/modelfile.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_MAGIC   "loom-lr"
#define MODEL_VERSION 1

int lr_model_save(const lr_model *m, const char *path, char *err, size_t errlen)
{
    const app_model_field bias = {"bias", "the bias", 1, m->bias};
    return app_model_save(path, MODEL_MAGIC, MODEL_VERSION, &bias, 1, m->w, m->dim, "weight", err,
                          errlen);
}

/* ---- loading ---- */

int lr_model_load(const char *path, lr_model *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    app_model_reader r;
    if (app_model_open(&r, path, "LR", err, errlen)) return -1;

    uint64_t dim = 0, nnz = 0;
    app_model_field bias = {"bias", "the bias", 1, 0};
    int rc =
        app_model_read_header(&r, MODEL_MAGIC, MODEL_VERSION, MODEL_VERSION, &bias, 1, &dim, &nnz);
    if (rc == 0) {
        /* calloc(0) may return NULL: keep one slot so w is never NULL. */
        if (dim > LR_MAX_DIM)
            rc = app_error(err, errlen, "%s:1: dim=%llu is beyond the %llu features of an LR model",
                           path, (unsigned long long)dim, (unsigned long long)LR_MAX_DIM);
        else if (!(m->w = calloc(dim ? (size_t)dim : 1, sizeof(double))))
            rc = app_error(err, errlen, "%s:1: out of memory for dim=%llu", path,
                           (unsigned long long)dim);
    }
    if (rc == 0) {
        m->dim = dim;
        m->bias = bias.value;
        rc = app_model_read_sparse(&r, nnz, dim, m->w, "weight", "weights");
    }
    app_model_close(&r);
    if (rc) lr_model_free(m);
    return rc;
}

void lr_model_free(lr_model *m)
{
    free(m->w);
    memset(m, 0, sizeof *m);
}

double lr_margin(const lr_model *m, const loom_dataset *d, size_t i)
{
    double s = 0;
    for (size_t k = d->row[i]; k < d->row[i + 1]; k++)
        if (d->idx[k] < m->dim) s += m->w[d->idx[k]] * d->val[k];
    return s + m->bias;
}
