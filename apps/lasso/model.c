/* The model file and prediction.
 *
 * Text, like lr's model file (docs/LASSO.md): a header with the dimension,
 * the number of coefficients that follow and the lambda the model was
 * trained with, then "id coefficient" for every coefficient that is not +0.0,
 * ids ascending, %.17g so save then load is bit-exact. A Lasso model is
 * sparse, so the file is small. The loader checks every line and reports
 * "FILE:LINE: what is wrong" (common/modelfile, shared with lr). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/modelfile.h"
#include "lasso/lasso.h"

#define MODEL_MAGIC   "loom-lasso"
#define MODEL_VERSION 1

/* -0.0 is stored too, so the round trip keeps the sign of zero. */
static int stored(double b)
{
    return b != 0.0 || signbit(b);
}

int lasso_model_save(const lasso_model *m, const char *path, char *err, size_t errlen)
{
    /* Refuse what the loader would refuse, so every saved file loads. */
    if (!isfinite(m->lambda)) return app_error(err, errlen, "%s: lambda is not finite", path);
    uint64_t nnz = 0;
    for (uint64_t j = 0; j < m->dim; j++) {
        if (!isfinite(m->beta[j]))
            return app_error(err, errlen, "%s: coefficient %llu is not finite", path,
                             (unsigned long long)j);
        nnz += stored(m->beta[j]);
    }
    FILE *f = fopen(path, "w");
    if (!f) return app_error(err, errlen, "%s: cannot create: %s", path, strerror(errno));
    /* Only a regular file is removed after a failure: never /dev/full or a FIFO. */
    struct stat st;
    int regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    fprintf(f, MODEL_MAGIC " %d dim=%llu nnz=%llu lambda=%.17g\n", MODEL_VERSION,
            (unsigned long long)m->dim, (unsigned long long)nnz, m->lambda);
    for (uint64_t j = 0; j < m->dim; j++)
        if (stored(m->beta[j])) fprintf(f, "%llu %.17g\n", (unsigned long long)j, m->beta[j]);
    int bad = ferror(f);
    int saved_errno = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        saved_errno = errno;
    }
    if (bad) {
        if (regular) remove(path);
        return app_error(err, errlen, "%s: write failed: %s", path, strerror(saved_errno));
    }
    return 0;
}

/* ---- loading ---- */

int lasso_model_load(const char *path, lasso_model *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    app_model_reader r;
    if (app_model_open(&r, path, "Lasso", err, errlen)) return -1;
    uint64_t dim = 0, nnz = 0;
    double lambda = 0;
    int rc = app_model_read_header(&r, MODEL_MAGIC, MODEL_VERSION, "lambda", "lambda", &dim, &nnz,
                                   &lambda);
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
        m->lambda = lambda;
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
    double s = 0;
    for (size_t k = d->row[i]; k < d->row[i + 1]; k++)
        if (d->idx[k] < m->dim) s += m->beta[d->idx[k]] * d->val[k];
    return s;
}
