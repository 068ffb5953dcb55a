/* The model file and prediction.
 *
 * Text, like lr's model file (docs/LASSO.md): a header with the dimension,
 * the number of coefficients that follow, the lambda the model was trained
 * with and (from version 2) its intercept, then "id coefficient" for every coefficient that is not
 * +0.0, ids ascending, %.17g so save then load is bit-exact. A Lasso model is sparse, so the file
 * is small. The loader checks every line and reports "FILE:LINE: what is wrong" (common/modelfile,
 * shared with lr). */
#include <stdlib.h>
#include <string.h>

#include "common/modelfile.h"
#include "lasso/lasso.h"

#define MODEL_MAGIC   "loom-lasso"
#define MODEL_VERSION 2 /* 1: no intercept */

/* The header's numbers; the intercept joined in version 2. */
enum { FIELD_LAMBDA, FIELD_INTERCEPT, FIELDS };
static const app_model_field fields[FIELDS] = {
    [FIELD_LAMBDA] = {"lambda", "lambda", 1, 0},
    [FIELD_INTERCEPT] = {"intercept", "the intercept", 2, 0},
};

int lasso_model_save(const lasso_model *m, const char *path, char *err, size_t errlen)
{
    app_model_field f[FIELDS] = {fields[FIELD_LAMBDA], fields[FIELD_INTERCEPT]};
    f[FIELD_LAMBDA].value = m->lambda;
    f[FIELD_INTERCEPT].value = m->intercept;
    return app_model_save(path, MODEL_MAGIC, MODEL_VERSION, f, FIELDS, m->beta, m->dim,
                          "coefficient", err, errlen);
}

/* ---- loading ---- */

int lasso_model_load(const char *path, lasso_model *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    app_model_reader r;
    if (app_model_open(&r, path, "Lasso", err, errlen)) return -1;
    uint64_t dim = 0, nnz = 0;
    app_model_field f[FIELDS] = {fields[FIELD_LAMBDA], fields[FIELD_INTERCEPT]};
    int rc = app_model_read_header(&r, MODEL_MAGIC, 1, MODEL_VERSION, f, FIELDS, &dim, &nnz);
    if (rc == 0) {
        if (dim > LASSO_MAX_DIM)
            rc = app_error(err, errlen, "%s:1: dim=%llu is beyond the %llu features of a model",
                           path, (unsigned long long)dim, (unsigned long long)LASSO_MAX_DIM);
        else if (!(m->beta = calloc(dim ? (size_t)dim : 1, sizeof(double))))
            rc = app_error(err, errlen, "%s:1: out of memory for dim=%llu", path,
                           (unsigned long long)dim);
    }
    if (rc == 0) {
        m->dim = dim;
        m->lambda = f[FIELD_LAMBDA].value;
        m->intercept = f[FIELD_INTERCEPT].value;
        rc = app_model_read_sparse(&r, nnz, dim, m->beta, "coefficient", "coefficients");
    }
    app_model_close(&r);
    if (rc) lasso_model_free(m);
    return rc;
}

void lasso_model_free(lasso_model *m)
{
    free(m->beta);
    memset(m, 0, sizeof *m);
}

double lasso_predict_row(const lasso_model *m, const loom_dataset *d, size_t i)
{
    double s = m->intercept;
    for (size_t k = d->row[i]; k < d->row[i + 1]; k++)
        if (d->idx[k] < m->dim) s += m->beta[d->idx[k]] * d->val[k];
    return s;
}
