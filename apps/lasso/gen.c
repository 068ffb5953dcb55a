/* gen: a Lasso problem with correlated feature groups and a planted sparse beta.
 *
 * Coordinate descent is easy when the columns are uncorrelated and hard when
 * they are not: correlated columns trade weight back and forth, and parallel
 * updates of two of them conflict (kim-thesis-strads.txt 3.2, 4.1; the
 * dependency check of issue 13 exists for exactly this data). So:
 *
 *   groups   features 1..F in consecutive groups of `group` (the last may be
 *            smaller);
 *   rows     each row has each group with probability `density` (else all
 *            its features are 0 and absent from the row); a present group
 *            draws one shared z ~ N(0,1) and each of its features is
 *            sqrt(corr) z + sqrt(1 - corr) e with its own e ~ N(0,1). Two
 *            features of a group thus have correlation corr, whatever the
 *            density, and features of different groups are independent;
 *   beta     `nonzeros` features, chosen uniformly without replacement, get
 *            +-U[1, 2] (a random sign), the others 0;
 *   y        intercept + x.beta + noise * N(0,1).
 *
 * Values are printed with %.6g, so the file is what both Loom and another
 * tool (scikit-learn in tests/lasso) read. The rows come from one random
 * stream and beta from another (app_rng), so a seed gives the same file with
 * the same C library (the normals use libm's log and cos). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lasso/lasso.h"

enum { STREAM_BETA = 1, STREAM_ROWS = 2 };

int lasso_generate(const lasso_gen_opts *o, FILE *out, lasso_model *planted, char *err,
                   size_t errlen)
{
    /* The command line checks these too; a caller of the library gets a sentence, not a loop. */
    if (o->group == 0 || o->group > o->features || o->nonzeros > o->features ||
        !(o->corr >= 0 && o->corr < 1) || !(o->density > 0 && o->density <= 1) || !(o->noise >= 0))
        return app_error(err, errlen,
                         "bad options: need 1 <= group <= features, nonzeros <= features, "
                         "0 <= corr < 1, 0 < density <= 1, noise >= 0");
    if (o->features > LASSO_MAX_DIM || o->features > SIZE_MAX / sizeof(double))
        return app_error(err, errlen, "%llu features: at most %llu",
                         (unsigned long long)o->features, (unsigned long long)LASSO_MAX_DIM);
    size_t dim = (size_t)o->features;
    double *beta = calloc(dim, sizeof *beta);
    uint64_t *perm = malloc(dim * sizeof *perm);
    if (!beta || !perm) {
        free(beta);
        free(perm);
        return app_error(err, errlen, "out of memory for %llu features",
                         (unsigned long long)o->features);
    }
    /* The planted support: the first `nonzeros` of a partial Fisher-Yates shuffle. */
    app_rng rb;
    app_rng_seed(&rb, o->seed, STREAM_BETA);
    for (size_t j = 0; j < dim; j++) perm[j] = j;
    for (uint64_t k = 0; k < o->nonzeros; k++) {
        uint64_t pick = k + app_rng_next(&rb) % (o->features - k);
        uint64_t t = perm[k];
        perm[k] = perm[pick];
        perm[pick] = t;
        double magnitude = 1 + app_rng_uniform(&rb);
        beta[perm[k]] = (app_rng_next(&rb) >> 63) ? -magnitude : magnitude;
    }
    free(perm);

    app_rng rr;
    app_rng_seed(&rr, o->seed, STREAM_ROWS);
    double shared = sqrt(o->corr), own = sqrt(1 - o->corr);
    /* The row is printed after y is known: its entries go to a buffer first. */
    size_t cap = 1 << 16, len = 0;
    char *line = malloc(cap);
    int rc = line ? 0 : app_error(err, errlen, "out of memory");
    for (uint64_t i = 0; i < o->rows && rc == 0; i++) {
        double y = 0;
        len = 0;
        for (uint64_t g0 = 0; g0 < o->features && rc == 0; g0 += o->group) {
            uint64_t g1 = g0 + o->group < o->features ? g0 + o->group : o->features;
            if (o->density < 1 && app_rng_uniform(&rr) >= o->density) continue;
            double z = app_rng_normal(&rr);
            for (uint64_t j = g0; j < g1; j++) {
                /* Rounded as printed, so y is computed from the values in the file. */
                char text[32];
                int n = snprintf(text, sizeof text, "%.6g", shared * z + own * app_rng_normal(&rr));
                double v = strtod(text, NULL);
                if (v == 0) continue;
                y += beta[j] * v;
                if (len + (size_t)n + 32 > cap) {
                    char *grown = realloc(line, cap * 2);
                    if (!grown) {
                        rc = app_error(err, errlen, "out of memory for row %llu",
                                       (unsigned long long)i + 1);
                        break;
                    }
                    line = grown;
                    cap *= 2;
                }
                len += (size_t)snprintf(line + len, cap - len, " %llu:%s",
                                        (unsigned long long)j + 1, text);
            }
        }
        if (rc) break;
        y += o->intercept + o->noise * app_rng_normal(&rr);
        if (fprintf(out, "%.9g", y) < 0 || fwrite(line, 1, len, out) != len ||
            fputc('\n', out) == EOF)
            rc = app_error(err, errlen, "write failed");
    }
    free(line);
    if (rc == 0 && planted) {
        planted->dim = o->features;
        planted->lambda = 0;
        planted->intercept = o->intercept;
        planted->beta = beta;
    } else {
        free(beta);
    }
    return rc;
}
