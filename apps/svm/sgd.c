/* sgd: the arithmetic of the SVM, shared by the distributed trainer and the sequential
 * reference so that both take exactly the same steps.
 *
 * The objective is lambda/2 |w|^2 + mean(max(0, 1 - y (w.x + b))), minimised by SGD with
 * eta_t = eta_0 / (1 + eta_0 lambda t) (Bottou's SVM-SGD). The decay (1 - eta lambda) of
 * every step would touch every weight; instead w = scale * v and the decay multiplies the
 * scale, so a step costs the row's non-zeros. The bias is not decayed: it is kept in v[dim]
 * divided by the scale like the rest, and decayed back (multiplied by 1 / (1 - eta lambda))
 * so that its value only moves by the hinge steps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "svm/svm.h"

int svm_replica_init(svm_replica *r, uint64_t dim)
{
    *r = (svm_replica){.dim = dim, .scale = 1, .t_step = 1};
    r->v = calloc((size_t)dim + 1, sizeof *r->v);
    return r->v ? 0 : -1;
}

void svm_replica_free(svm_replica *r)
{
    free(r->v);
    memset(r, 0, sizeof *r);
}

void svm_materialise(svm_replica *r)
{
    for (uint64_t k = 0; k <= r->dim; k++) r->v[k] = (float)(r->v[k] * r->scale);
    r->scale = 1;
}

/* The raw margin in units of v (multiply by scale for the model's). */
static double raw_margin(const svm_replica *r, const loom_dataset *d, size_t i)
{
    double s = 0;
    for (size_t k = d->row[i]; k < d->row[i + 1]; k++)
        if (d->idx[k] < r->dim) s += (double)r->v[d->idx[k]] * d->val[k];
    return s + r->v[r->dim];
}

size_t svm_warn_unknown_features(const char *prog, const char *path, const svm_replica *r,
                                 const loom_dataset *d)
{
    size_t values = 0, rows = 0, first_row = 0;
    for (size_t i = 0; i < d->rows; i++) {
        size_t before = values;
        for (size_t k = d->row[i]; k < d->row[i + 1]; k++) values += d->idx[k] >= r->dim;
        if (values > before && !rows++) first_row = i + 1;
    }
    if (values)
        fprintf(stderr,
                "%s: warning: %s: %zu values in %zu rows (the first in row %zu) are of features "
                "beyond the model's %llu; they weigh 0\n",
                prog, path, values, rows, first_row, (unsigned long long)r->dim);
    return values;
}

double svm_margin(const svm_replica *r, const loom_dataset *d, size_t i)
{
    return raw_margin(r, d, i) * r->scale;
}

double svm_step(svm_replica *r, const svm_opts *o, const loom_dataset *d, size_t i)
{
    double eta = o->lr / (1 + o->lr * o->l2 * (double)r->t);
    r->t += r->t_step;
    double y = d->label[i], m = svm_margin(r, d, i);
    double decay = 1 - eta * o->l2;
    if (decay < 1e-3) decay = 1e-3; /* a step larger than 1 / lambda would flip the sign */
    r->scale *= decay;
    r->v[r->dim] = (float)(r->v[r->dim] / decay); /* the bias does not decay */
    if (y * m < 1) {
        double g = eta * y / r->scale;
        for (size_t k = d->row[i]; k < d->row[i + 1]; k++)
            if (d->idx[k] < r->dim) r->v[d->idx[k]] += (float)(g * d->val[k]);
        r->v[r->dim] += (float)g;
    }
    if (r->scale < 1e-6) svm_materialise(r); /* keep v in float range */
    return y * m < 1 ? 1 - y * m : 0;
}

double svm_accuracy(const svm_replica *r, const loom_dataset *d)
{
    size_t right = 0;
    for (size_t i = 0; i < d->rows; i++)
        right += (svm_margin(r, d, i) > 0 ? 1.0 : -1.0) == d->label[i];
    return d->rows ? 100.0 * (double)right / (double)d->rows : 0;
}

void svm_epoch_order(uint64_t seed, int rank, int epoch, size_t rows, size_t *order)
{
    app_rng rng;
    app_rng_seed(&rng, seed, ((uint64_t)rank << 32) | (uint32_t)epoch);
    for (size_t i = 0; i < rows; i++) order[i] = i;
    for (size_t i = rows; i > 1; i--) { /* Fisher-Yates */
        size_t j = (size_t)(app_rng_uniform(&rng) * (double)i);
        size_t t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
}
