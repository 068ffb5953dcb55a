/* model: a factorization machine's margin, its model file and `loom predict fm`.
 *
 * The margin uses the identity
 *     sum_{i<j} <V_i, V_j> x_i x_j = 1/2 (||sum_i x_i V_i||^2 - sum_i x_i^2 ||V_i||^2),
 * which costs O(k nnz) instead of O(k nnz^2) (thesis eq. 10.5). A feature's
 * V_i takes part only if it was allocated in training and w_i != 0, the rule
 * DiFacto trains under (V_i = 0 whenever w_i = 0), so a model predicts as
 * its trainer evaluated it.
 *
 * The file is apps/common's sparse text format (lr's, mlr's), one vector of
 * dim (k + 1) + 1 values: feature i's w_i at i (k + 1), its V_i after it,
 * the bias last; header "loom-fm 1 dim=N nnz=K factors=k". %.17g makes save
 * then load exact, and a V_i that was never allocated is a row of zeros that
 * the file does not hold. */
#include "fm/fm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/modelfile.h"

#define MODEL_MAGIC   "loom-fm"
#define MODEL_VERSION 1

int fm_model_init(fm_model *m, uint64_t dim, uint32_t k)
{
    *m = (fm_model){.dim = dim, .k = k};
    size_t n = dim ? (size_t)dim : 1;
    m->w = calloc(n, sizeof *m->w);
    m->v = calloc(n * k, sizeof *m->v);
    m->has_v = calloc(n, 1);
    if (m->w && m->v && m->has_v) return 0;
    fm_model_free(m);
    return -1;
}

void fm_model_free(fm_model *m)
{
    free(m->w);
    free(m->v);
    free(m->has_v);
    memset(m, 0, sizeof *m);
}

double fm_margin(const fm_model *m, const loom_dataset *d, size_t i)
{
    double lin = m->bias, sq = 0, s[FM_MAX_FACTORS];
    memset(s, 0, m->k * sizeof *s); /* the k in use, not the 8 KB of the largest k */
    for (size_t e = d->row[i]; e < d->row[i + 1]; e++) {
        uint64_t f = d->idx[e];
        if (f >= m->dim) continue;
        double x = d->val[e];
        lin += m->w[f] * x;
        if (!m->has_v[f] || m->w[f] == 0) continue;
        const double *v = m->v + f * m->k;
        for (uint32_t c = 0; c < m->k; c++) {
            s[c] += v[c] * x;
            sq += v[c] * v[c] * x * x;
        }
    }
    double ss = 0;
    for (uint32_t c = 0; c < m->k; c++) ss += s[c] * s[c];
    return lin + 0.5 * (ss - sq);
}

int fm_model_save(const fm_model *m, const char *path, char *err, size_t errlen)
{
    uint64_t row = (uint64_t)m->k + 1, n = m->dim * row + 1;
    double *x = calloc((size_t)n, sizeof *x);
    if (!x) return app_error(err, errlen, "%s: out of memory", path);
    for (uint64_t f = 0; f < m->dim; f++) {
        x[f * row] = m->w[f];
        if (m->has_v[f]) memcpy(x + f * row + 1, m->v + f * m->k, m->k * sizeof *x);
    }
    x[n - 1] = m->bias;
    const app_model_field factors = {"factors", "the factor count", 1, (double)m->k};
    int rc =
        app_model_save(path, MODEL_MAGIC, MODEL_VERSION, &factors, 1, x, n, "value", err, errlen);
    free(x);
    return rc;
}

int fm_model_load(const char *path, fm_model *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    app_model_reader r;
    if (app_model_open(&r, path, "FM", err, errlen)) return -1;
    uint64_t n = 0, nnz = 0;
    app_model_field factors = {"factors", "the factor count", 1, 0};
    int rc =
        app_model_read_header(&r, MODEL_MAGIC, MODEL_VERSION, MODEL_VERSION, &factors, 1, &n, &nnz);
    double k = factors.value;
    double *x = NULL;
    if (rc == 0) {
        if (!(k >= 1 && k <= FM_MAX_FACTORS && k == floor(k)))
            rc = app_model_bad_line(&r, "factors=%g is not a whole number from 1 to %u", k,
                                    FM_MAX_FACTORS);
        else if (n == 0 || (n - 1) % ((uint64_t)k + 1) || (n - 1) / ((uint64_t)k + 1) > FM_MAX_DIM)
            rc = app_model_bad_line(&r,
                                    "dim=%llu is not features x (factors + 1) + 1 with at most "
                                    "%llu features",
                                    (unsigned long long)n, (unsigned long long)FM_MAX_DIM);
        else if (!(x = calloc((size_t)n, sizeof *x)) ||
                 fm_model_init(m, (n - 1) / ((uint64_t)k + 1), (uint32_t)k))
            rc = app_model_bad_line(&r, "out of memory for dim=%llu", (unsigned long long)n);
    }
    if (rc == 0) rc = app_model_read_sparse(&r, nnz, n, x, "value", "values");
    if (rc == 0) {
        uint64_t row = (uint64_t)m->k + 1;
        for (uint64_t f = 0; f < m->dim; f++) {
            m->w[f] = x[f * row];
            for (uint32_t c = 0; c < m->k; c++) {
                m->v[f * m->k + c] = x[f * row + 1 + c];
                m->has_v[f] |= x[f * row + 1 + c] != 0;
            }
            m->v_rows += m->has_v[f];
        }
        m->bias = x[n - 1];
    }
    free(x);
    app_model_close(&r);
    if (rc) fm_model_free(m);
    return rc;
}

/* ---- loom predict fm ---- */

static int load(const char *path, void **model, char *err, size_t errlen)
{
    fm_model *m = malloc(sizeof *m);
    if (!m) return app_error(err, errlen, "out of memory");
    if (fm_model_load(path, m, err, errlen)) {
        free(m);
        return -1;
    }
    *model = m;
    return 0;
}

static double margin(const void *m, const loom_dataset *d, size_t i)
{
    return fm_margin(m, d, i);
}

static void release(void *m)
{
    fm_model_free(m);
    free(m);
}

void fm_predict_help(FILE *out)
{
    lr_predict_help_with(
        out, "loom predict fm --model M --data FILE [--out FILE] [--zero-based|--one-based]\n"
             "\n"
             "Prints \"rows N  accuracy A  auc U  logloss L\" for the LIBSVM file FILE, scored\n"
             "by a factorization machine (the model file of `loom train fm --model-out`), as\n"
             "`loom predict lr` does for logistic regression. See docs/FM.md.\n"
             "\n"
             "Options (--name value or --name=value):\n");
}

int fm_predict_main(int argc, char **argv)
{
    static const lr_scorer fm = {"loom predict fm", load, margin, release, fm_predict_help};
    return lr_predict_run(&fm, argc, argv);
}
