/* seq: the sequential reference of `loom train lasso`.
 *
 * Cyclic coordinate descent from beta = 0 (r = y, centred with an
 * intercept): every pass sets each
 * beta_j in turn, j = 0..dim-1, to its exact minimiser given the current
 * residual (cd.c), so F never increases. It stops after a pass in which no
 * coefficient moved by more than tol * max(1, max_j |beta_j|) (scikit-learn
 * divides by max_j |beta_j| alone, then also checks the duality gap), or
 * after the iteration limit. The distributed schedules of issue 13
 * are measured against this: the same objective, in how many coordinate
 * updates. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lasso/lasso.h"

int lasso_train_sequential(const lasso_train_opts *o, const lasso_problem *p, double *beta,
                           double *intercept, lasso_pass_fn fn, void *arg)
{
    memset(beta, 0, (size_t)p->dim * sizeof *beta);
    lasso_residual r;
    if (lasso_residual_init(p, beta, &r)) return -1;
    double start = app_now_s();
    uint64_t updates = 0;
    int it = 0;
    while (it < o->iterations) {
        double max_change = 0, max_beta = 0;
        for (uint64_t j = 0; j < p->dim; j++) {
            max_change = fmax(max_change, fabs(lasso_update_coordinate(p, j, beta, &r, o->lambda)));
            max_beta = fmax(max_beta, fabs(beta[j]));
        }
        updates += p->dim;
        it++;
        if (fn) {
            lasso_pass s = {.iteration = it, .updates = updates, .max_change = max_change};
            double rr = lasso_residual_sq(p, &r);
            s.objective = lasso_objective(p, rr, beta, o->lambda);
            s.train_rmse = sqrt(rr / (double)p->n);
            for (uint64_t j = 0; j < p->dim; j++) s.nnz += beta[j] != 0;
            s.seconds = app_now_s() - start;
            fn(arg, &s, beta);
        }
        if (max_change <= o->tol * fmax(1, max_beta)) break;
    }
    *intercept = lasso_intercept(p, &r);
    lasso_residual_free(&r);
    return it;
}
