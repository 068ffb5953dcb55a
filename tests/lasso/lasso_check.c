/* lasso_check: what tests/lasso/test_lasso_dynamic.sh asserts about a model,
 * computed here from the data alone (not from anything the trainer reports).
 *
 *   lasso_check DATA MODEL [--no-intercept] [--log FILE --rho R]
 *
 * Prints "objective F" (F(b, beta) with the residual r = y - b - X beta
 * recomputed from scratch, b the model's intercept) and "kkt V": the largest
 * violation of the Lasso's optimality conditions, relative to lambda, over j
 * with g_j = (x_j - mu_j)^T r / n (mu_j the column's mean; 0 with
 * --no-intercept, for a model trained so):
 *   beta_j = 0:  max(0, |g_j| - lambda),   beta_j != 0:  |g_j - lambda sign(beta_j)|,
 * and, with an intercept, |sum_i r_i| / n (b is not penalised, so its
 * gradient must vanish). With --log (a --schedule-log: "ROUND K1 K2 ..." per
 * line) it also checks that no two coordinates of one round have columns
 * whose |correlation| (centred as the trainer centres them) exceeds R, prints
 * "pairs P above N" and exits 1 if N > 0. Exit 2 for unreadable input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lasso/lasso.h"

/* (x_i - mu_i).(x_j - mu_j), with the column means of the problem (0
 * without an intercept). */
static double column_dot(const lasso_problem *p, uint64_t i, uint64_t j)
{
    /* Dense columns, then a pass over every row: independent of the
     * trainer's sorted merge and of its way of centring. */
    double *xi = calloc(p->n, sizeof *xi), *xj = calloc(p->n, sizeof *xj), s = 0;
    if (!xi || !xj) exit(2);
    for (size_t k = p->col[i]; k < p->col[i + 1]; k++) xi[p->row[k]] = p->val[k];
    for (size_t k = p->col[j]; k < p->col[j + 1]; k++) xj[p->row[k]] = p->val[k];
    for (size_t r = 0; r < p->n; r++) s += (xi[r] - p->mu[i]) * (xj[r] - p->mu[j]);
    free(xi);
    free(xj);
    return s;
}

static int check_log(const lasso_problem *p, const char *path, double rho)
{
    FILE *f = fopen(path, "r");
    if (!f) return perror(path), 2;
    char line[1 << 16];
    unsigned long long pairs = 0, above = 0, rounds = 0;
    while (fgets(line, sizeof line, f)) {
        uint64_t keys[4096];
        size_t n = 0;
        char *s = line, *end;
        strtoull(s, &end, 10); /* the round */
        for (s = end; n < 4096; s = end) {
            unsigned long long k = strtoull(s, &end, 10);
            if (end == s) break;
            if (k >= p->dim) {
                fprintf(stderr, "%s: key %llu out of range\n", path, k);
                return 1;
            }
            keys[n++] = k;
        }
        rounds++;
        for (size_t a = 0; a < n; a++)
            for (size_t b = 0; b < a; b++) {
                double nn = sqrt(column_dot(p, keys[a], keys[a]) * column_dot(p, keys[b], keys[b]));
                double c = nn > 0 ? fabs(column_dot(p, keys[a], keys[b])) / nn : 0;
                pairs++;
                if (c > rho * (1 + 1e-12)) {
                    if (!above)
                        fprintf(stderr, "round %llu: %llu and %llu have correlation %.6f > %g\n",
                                rounds - 1, (unsigned long long)keys[a],
                                (unsigned long long)keys[b], c, rho);
                    above++;
                }
            }
    }
    fclose(f);
    printf("rounds %llu pairs %llu above %llu\n", rounds, pairs, above);
    return above ? 1 : 0;
}

int main(int argc, char **argv)
{
    int intercept = 1;
    if (argc > 3 && !strcmp(argv[3], "--no-intercept")) { /* then as if it were not there */
        intercept = 0;
        for (int i = 3; i < argc; i++) argv[i] = argv[i + 1];
        argc--;
    }
    if (argc != 3 && !(argc == 7 && !strcmp(argv[3], "--log") && !strcmp(argv[5], "--rho"))) {
        fprintf(stderr, "usage: lasso_check DATA MODEL [--no-intercept] [--log FILE --rho R]\n");
        return 2;
    }
    char err[512];
    loom_libsvm_opts lo = LOOM_LIBSVM_OPTS_DEFAULT;
    lo.labels = LOOM_LABELS_REAL;
    loom_dataset *d = NULL;
    lasso_problem p;
    lasso_model m;
    if (loom_libsvm_read(argv[1], 0, 1, &lo, &d, err, sizeof err) ||
        lasso_problem_from(d, intercept, &p, err, sizeof err) ||
        lasso_model_load(argv[2], &m, err, sizeof err)) {
        fprintf(stderr, "lasso_check: %s\n", err);
        return 2;
    }
    loom_dataset_free(d);
    if (m.dim != p.dim) {
        fprintf(stderr, "lasso_check: model dim %llu, data %llu\n", (unsigned long long)m.dim,
                (unsigned long long)p.dim);
        return 2;
    }
    /* y as read (the problem holds it centred), less the model's b and X beta. */
    double *r = malloc(p.n * sizeof *r), rr = 0, sum = 0;
    if (!r) return 2;
    for (size_t i = 0; i < p.n; i++) r[i] = p.y[i] + p.y_mean - m.intercept;
    for (uint64_t j = 0; j < p.dim; j++)
        for (size_t k = p.col[j]; k < p.col[j + 1]; k++) r[p.row[k]] -= m.beta[j] * p.val[k];
    for (size_t i = 0; i < p.n; i++) rr += r[i] * r[i], sum += r[i];
    double kkt = intercept ? fabs(sum) / (double)p.n / m.lambda : 0;
    for (uint64_t j = 0; j < p.dim; j++) {
        double g = -p.mu[j] * sum;
        for (size_t k = p.col[j]; k < p.col[j + 1]; k++) g += p.val[k] * r[p.row[k]];
        g /= (double)p.n;
        double v = m.beta[j] == 0 ? fmax(0, fabs(g) - m.lambda)
                                  : fabs(g - m.lambda * (m.beta[j] > 0 ? 1 : -1));
        kkt = fmax(kkt, v / m.lambda);
    }
    printf("objective %.17g\nkkt %.3g\n", lasso_objective(&p, rr, m.beta, m.lambda), kkt);
    int rc = argc == 7 ? check_log(&p, argv[4], atof(argv[6])) : 0;
    free(r);
    lasso_model_free(&m);
    lasso_problem_free(&p);
    return rc;
}
