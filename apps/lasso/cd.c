/* cd: the Lasso problem in columns, and the update of one coordinate.
 *
 * Coordinate descent changes one beta_j at a time to its exact minimiser
 * with the others fixed. With the residual r = y - X beta kept up to date,
 * that costs one pass over column j twice (read x_j^T r, then r -= delta
 * x_j), so X is copied into compressed sparse columns once, up front.
 *
 * Along beta_j, F is a parabola with curvature a_j = ||x_j - mu_j||^2 / n
 * plus lambda |beta_j| (the intercept moving with beta_j keeps the rows of r
 * adding up to 0, which is what centring the column does); its minimiser is
 * the soft-threshold
 *     beta_j' = S(x_j^T r / n + a_j beta_j, lambda) / a_j.
 * The update is split into the part that reads the residual
 * (lasso_coordinate_minimiser) and the part that writes it
 * (lasso_residual_apply): STRADS's update() and aggregate(), which a
 * scheduler runs for the coordinates it picked (kim-thesis-strads.txt 4.1). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lasso/lasso.h"

int lasso_problem_from(const loom_dataset *d, int intercept, lasso_problem *p, char *err,
                       size_t errlen)
{
    memset(p, 0, sizeof *p);
    p->intercept = intercept;
    if (d->rows > UINT32_MAX)
        return app_error(err, errlen, "%zu rows: at most %u rows fit a Lasso problem", d->rows,
                         (unsigned)UINT32_MAX);
    if (d->max_feature > LASSO_MAX_DIM)
        return app_error(err, errlen, "feature id %llu is beyond the %llu features of a model",
                         (unsigned long long)d->max_feature, (unsigned long long)LASSO_MAX_DIM);
    p->n = d->rows;
    p->dim = d->max_feature;
    p->nnz = d->nnz;
    size_t dim = (size_t)p->dim;
    p->row = malloc((p->nnz ? p->nnz : 1) * sizeof *p->row);
    p->val = malloc((p->nnz ? p->nnz : 1) * sizeof *p->val);
    p->y = malloc((p->n ? p->n : 1) * sizeof *p->y);
    if (!p->row || !p->val || !p->y) {
        lasso_problem_free(p);
        return app_error(err, errlen, "out of memory for %zu rows and %zu entries", d->rows,
                         d->nnz);
    }
    /* The columns are as many as the largest feature id, whatever the rows: a
     * file of 2 rows with id 4000000000 needs 96 GB here. Name the id and the
     * size, since a stray large id is the likely cause, not the data's size. */
    p->col = calloc(dim + 1, sizeof *p->col);
    p->a = calloc(dim ? dim : 1, sizeof *p->a);
    p->mu = calloc(dim ? dim : 1, sizeof *p->mu);
    if (!p->col || !p->a || !p->mu) {
        lasso_problem_free(p);
        return app_error(err, errlen,
                         "out of memory for %llu columns (%.3g GB): the largest feature id is "
                         "%llu, and Lasso keeps a column for every id up to it",
                         (unsigned long long)d->max_feature,
                         (double)(dim + 1) * (sizeof *p->col + 2 * sizeof *p->a) / 1e9,
                         (unsigned long long)d->max_feature);
    }
    /* Counting sort by column: rows are visited in order, so each column's
     * rows come out ascending. */
    for (size_t k = 0; k < d->nnz; k++) p->col[d->idx[k] + 1]++;
    for (size_t j = 0; j < dim; j++) p->col[j + 1] += p->col[j];
    size_t *next = malloc((dim ? dim : 1) * sizeof *next);
    if (!next) {
        lasso_problem_free(p);
        return app_error(err, errlen, "out of memory for %llu columns",
                         (unsigned long long)d->max_feature);
    }
    memcpy(next, p->col, dim * sizeof *next);
    for (size_t i = 0; i < d->rows; i++) {
        p->y[i] = d->label[i];
        for (size_t k = d->row[i]; k < d->row[i + 1]; k++) {
            size_t at = next[d->idx[k]]++;
            p->row[at] = (uint32_t)i;
            p->val[at] = d->val[k];
        }
    }
    free(next);
    double n = (double)p->n;
    if (intercept) {
        double sum = 0;
        for (size_t i = 0; i < p->n; i++) sum += p->y[i];
        p->y_mean = sum / n;
        for (size_t i = 0; i < p->n; i++) p->y[i] -= p->y_mean;
    }
    for (size_t j = 0; j < dim; j++) {
        double sum = 0, ss = 0;
        for (size_t k = p->col[j]; k < p->col[j + 1]; k++) sum += p->val[k];
        double mu = intercept ? sum / n : 0;
        /* Centred in two parts, the stored entries and the rows where x_j is
         * 0, so a column of equal values has a curvature of exactly 0. */
        for (size_t k = p->col[j]; k < p->col[j + 1]; k++)
            ss += (p->val[k] - mu) * (p->val[k] - mu);
        ss += (double)(p->n - (p->col[j + 1] - p->col[j])) * mu * mu;
        p->mu[j] = mu;
        p->a[j] = ss / n;
    }
    return 0;
}

void lasso_problem_free(lasso_problem *p)
{
    free(p->col);
    free(p->row);
    free(p->val);
    free(p->y);
    free(p->a);
    free(p->mu);
    memset(p, 0, sizeof *p);
}

/* x_j^T v */
static double column_dot(const lasso_problem *p, uint64_t j, const double *v)
{
    double s = 0;
    for (size_t k = p->col[j]; k < p->col[j + 1]; k++) s += p->val[k] * v[p->row[k]];
    return s;
}

double lasso_lambda_max(const lasso_problem *p)
{
    double m = 0;
    for (uint64_t j = 0; j < p->dim; j++) m = fmax(m, fabs(column_dot(p, j, p->y)));
    return m / (double)p->n;
}

double lasso_soft_threshold(double z, double t)
{
    if (z > t) return z - t;
    if (z < -t) return z + t;
    return 0;
}

int lasso_residual_init(const lasso_problem *p, const double *beta, lasso_residual *r)
{
    r->shift = 0;
    r->q = malloc((p->n ? p->n : 1) * sizeof *r->q);
    if (!r->q) return -1;
    memcpy(r->q, p->y, p->n * sizeof *r->q);
    for (uint64_t j = 0; j < p->dim; j++)
        if (beta[j] != 0) lasso_residual_apply(p, j, beta[j], r);
    return 0;
}

void lasso_residual_free(lasso_residual *r)
{
    free(r->q);
    r->q = NULL;
}

double lasso_residual_sq(const lasso_problem *p, const lasso_residual *r)
{
    double rr = 0;
    for (size_t i = 0; i < p->n; i++) rr += (r->q[i] + r->shift) * (r->q[i] + r->shift);
    return rr;
}

double lasso_intercept(const lasso_problem *p, const lasso_residual *r)
{
    return p->y_mean - r->shift;
}

double lasso_coordinate_minimiser(const lasso_problem *p, uint64_t j, const lasso_residual *r,
                                  double beta_j, double lambda)
{
    /* A column that does not vary does not enter the loss (the intercept
     * absorbs a constant one): the L1 term alone puts it at 0. */
    if (p->a[j] == 0) return 0;
    double g = (column_dot(p, j, r->q) + r->shift * (double)p->n * p->mu[j]) / (double)p->n;
    return lasso_soft_threshold(g + p->a[j] * beta_j, lambda) / p->a[j];
}

void lasso_residual_apply(const lasso_problem *p, uint64_t j, double delta, lasso_residual *r)
{
    for (size_t k = p->col[j]; k < p->col[j + 1]; k++) r->q[p->row[k]] -= delta * p->val[k];
    r->shift += delta * p->mu[j];
}

double lasso_update_coordinate(const lasso_problem *p, uint64_t j, double *beta, lasso_residual *r,
                               double lambda)
{
    double next = lasso_coordinate_minimiser(p, j, r, beta[j], lambda);
    double delta = next - beta[j];
    if (delta != 0) lasso_residual_apply(p, j, delta, r);
    beta[j] = next;
    return delta;
}

double lasso_objective(const lasso_problem *p, double rr, const double *beta, double lambda)
{
    double l1 = 0;
    for (uint64_t j = 0; j < p->dim; j++) l1 += fabs(beta[j]);
    return rr / (2 * (double)p->n) + lambda * l1;
}
