/* lr_minimum: check that a model trained with --l2 sits at the minimum of the
 * objective `loom train lr` reports (docs/LR.md):
 *     F(w, b) = mean log loss + (l2 / 2) ||w||^2      (no penalty on the bias b)
 *
 *   lr_minimum MODEL TOL -- TRAIN_FLAGS...
 *
 * The minimiser is computed here, independently of the trainer, by full-batch
 * gradient descent with Nesterov momentum and step 1/L, where L bounds the
 * curvature (a quarter of the largest squared row norm, the bias included,
 * plus l2), until the gradient's largest entry is below 1e-12. Prints the
 * model's objective, the minimum, the largest weight difference and the
 * model's ||w||; exit 0 when every weight and the bias are within TOL of the
 * minimiser, 1 otherwise, 2 on errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "lr/lr.h"

/* F and its gradient at x (dim weights, then the bias) into grad. */
static double objective(const loom_dataset *d, uint64_t dim, double l2, const double *x,
                        double *grad)
{
    double loss = 0, n = (double)d->rows;
    if (grad) memset(grad, 0, (dim + 1) * sizeof *grad);
    for (size_t i = 0; i < d->rows; i++) {
        double m = x[dim];
        for (size_t k = d->row[i]; k < d->row[i + 1]; k++) m += x[d->idx[k]] * d->val[k];
        loss += lr_logistic_loss(m, d->label[i]);
        if (!grad) continue;
        double err = (lr_sigmoid(m) - (d->label[i] > 0 ? 1.0 : 0.0)) / n;
        for (size_t k = d->row[i]; k < d->row[i + 1]; k++) grad[d->idx[k]] += err * d->val[k];
        grad[dim] += err;
    }
    double norm2 = 0;
    for (uint64_t j = 0; j < dim; j++) {
        norm2 += x[j] * x[j];
        if (grad) grad[j] += l2 * x[j];
    }
    return loss / n + l2 / 2 * norm2;
}

int main(int argc, char **argv)
{
    if (argc < 5 || strcmp(argv[3], "--")) {
        fprintf(stderr, "usage: lr_minimum MODEL TOL -- TRAIN_FLAGS...\n");
        return 2;
    }
    double tol = atof(argv[2]);
    lr_cli cli;
    char err[512];
    if (lr_parse_flags(argc - 3, argv + 3, &cli, err, sizeof err)) {
        fprintf(stderr, "lr_minimum: %s\n", err);
        return 2;
    }
    loom_dataset *d;
    lr_model got;
    if (loom_libsvm_read(cli.job.train_path, 0, 1, &cli.data, &d, err, sizeof err) ||
        lr_model_load(argv[1], &got, err, sizeof err)) {
        fprintf(stderr, "lr_minimum: %s\n", err);
        return 2;
    }
    uint64_t dim = d->max_feature;
    double l2 = cli.train.l2;
    if (got.dim != dim || !(tol > 0) || !(l2 > 0)) {
        fprintf(stderr, "lr_minimum: needs --l2 > 0, TOL > 0 and a model of dimension %llu\n",
                (unsigned long long)dim);
        return 2;
    }
    double *x = calloc(dim + 1, sizeof *x), *y = calloc(dim + 1, sizeof *y);
    double *prev = calloc(dim + 1, sizeof *prev), *g = malloc((dim + 1) * sizeof *g);
    if (!x || !y || !prev || !g) return 2;
    double rownorm = 0;
    for (size_t i = 0; i < d->rows; i++) {
        double s = 1; /* the bias's input */
        for (size_t k = d->row[i]; k < d->row[i + 1]; k++) s += d->val[k] * d->val[k];
        if (s > rownorm) rownorm = s;
    }
    double step = 1 / (rownorm / 4 + l2), gmax = INFINITY;
    long it;
    for (it = 1; it <= 2000000 && gmax > 1e-12; it++) {
        objective(d, dim, l2, y, g);
        memcpy(prev, x, (dim + 1) * sizeof *x);
        gmax = 0;
        for (uint64_t j = 0; j <= dim; j++) {
            x[j] = y[j] - step * g[j];
            if (fabs(g[j]) > gmax) gmax = fabs(g[j]);
        }
        double mom = (double)(it - 1) / (double)(it + 2);
        for (uint64_t j = 0; j <= dim; j++) y[j] = x[j] + mom * (x[j] - prev[j]);
    }
    if (gmax > 1e-12) {
        fprintf(stderr, "lr_minimum: the reference did not converge (gradient %g)\n", gmax);
        return 2;
    }
    double *mw = malloc((dim + 1) * sizeof *mw);
    if (!mw) return 2;
    memcpy(mw, got.w, dim * sizeof *mw);
    mw[dim] = got.bias;
    double diff = 0, norm2 = 0;
    for (uint64_t j = 0; j <= dim; j++) {
        if (fabs(mw[j] - x[j]) > diff) diff = fabs(mw[j] - x[j]);
        if (j < dim) norm2 += mw[j] * mw[j];
    }
    printf("lr_minimum: objective %.9f, minimum %.9f (%ld iterations), largest weight "
           "difference %.3g (tolerance %g), norm %.6f\n",
           objective(d, dim, l2, mw, NULL), objective(d, dim, l2, x, NULL), it - 1, diff, tol,
           sqrt(norm2));
    free(x), free(y), free(prev), free(g), free(mw);
    lr_model_free(&got);
    loom_dataset_free(d);
    return diff <= tol ? 0 : 1;
}
