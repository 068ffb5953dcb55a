/* cd: the Lasso problem in columns, and the update of one coordinate.
 *
 * Coordinate descent changes one beta_j at a time to its exact minimiser
 * with the others fixed. With the residual r = y - X beta kept up to date,
 * that costs one pass over column j twice (read x_j^T r, then r -= delta
 * x_j), so X is copied into compressed sparse columns once, up front.
 *
 * Along beta_j, F is a parabola with curvature a_j = ||x_j||^2 / n plus
 * lambda |beta_j|; its minimiser is the soft-threshold
 *     beta_j' = S(x_j^T r / n + a_j beta_j, lambda) / a_j.
 * The update is split into the part that reads the residual
 * (lasso_coordinate_minimiser) and the part that writes it
 * (lasso_residual_apply): STRADS's update() and aggregate(), which a
 * scheduler runs for the coordinates it picked (kim-thesis-strads.txt 4.1). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lasso/lasso.h"

int lasso_problem_from(const loom_dataset *d, lasso_problem *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
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
     * file of 2 rows with id 4000000000 needs 64 GB here. Name the id and the
     * size, since a stray large id is the likely cause, not the data's size. */
    p->col = calloc(dim + 1, sizeof *p->col);
    p->a = calloc(dim ? dim : 1, sizeof *p->a);
    if (!p->col || !p->a) {
        lasso_problem_free(p);
        return app_error(err, errlen,
                         "out of memory for %llu columns (%.3g GB): the largest feature id is "
                         "%llu, and Lasso keeps a column for every id up to it",
                         (unsigned long long)d->max_feature,
                         (double)(dim + 1) * (sizeof *p->col + sizeof *p->a) / 1e9,
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
    for (size_t j = 0; j < dim; j++) {
        double s = 0;
        for (size_t k = p->col[j]; k < p->col[j + 1]; k++) s += p->val[k] * p->val[k];
        p->a[j] = s / (double)p->n;
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

double lasso_coordinate_minimiser(const lasso_problem *p, uint64_t j, const double *r,
                                  double beta_j, double lambda)
{
    /* An empty column does not enter the loss: the L1 term alone puts it at 0. */
    if (p->a[j] == 0) return 0;
    double z = column_dot(p, j, r) / (double)p->n + p->a[j] * beta_j;
    return lasso_soft_threshold(z, lambda) / p->a[j];
}

void lasso_residual_apply(const lasso_problem *p, uint64_t j, double delta, double *r)
{
    for (size_t k = p->col[j]; k < p->col[j + 1]; k++) r[p->row[k]] -= delta * p->val[k];
}

double lasso_update_coordinate(const lasso_problem *p, uint64_t j, double *beta, double *r,
                               double lambda)
{
    double next = lasso_coordinate_minimiser(p, j, r, beta[j], lambda);
    double delta = next - beta[j];
    if (delta != 0) lasso_residual_apply(p, j, delta, r);
    beta[j] = next;
    return delta;
}

double lasso_objective(const lasso_problem *p, const double *r, const double *beta, double lambda)
{
    double rr = 0, l1 = 0;
    for (size_t i = 0; i < p->n; i++) rr += r[i] * r[i];
    for (uint64_t j = 0; j < p->dim; j++) l1 += fabs(beta[j]);
    return rr / (2 * (double)p->n) + lambda * l1;
}
