/* svb_select: SV selection (Orpheus §3.2.1, Algorithm 2).
 *
 * A minibatch's n SVs cannot be summed into one SV, so sending them costs n
 * times one; sending c < n of them that span nearly what all n span keeps
 * most of the update for c/n of the bytes. Joint column subset selection
 * picks them by iterative norm sampling: each round draws an SV with
 * probability proportional to |u'|^2 |v'|^2, where u', v' are what is left
 * of its u and v outside the span of the u's and v's already chosen, then
 * projects the chosen one out of every other (Gram-Schmidt: the residuals
 * stay orthogonal to every chosen direction, so one projection a round is
 * the whole back-projection X - S S^+ X). The u's and v's are chosen
 * together, as the paper's product of norms says, so an SV stays whole.
 *
 * The v's are sparse; the rounds work on their dense copies over the union
 * of the ids the n SVs use (at most the sum of their non-zeros). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rand.h"
#include "core/sorted.h"
#include "loom/svb.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Remove from x (len) its component along the unit vector q. */
static void project_out(double *x, const double *q, size_t len)
{
    double dot = 0;
    for (size_t e = 0; e < len; e++) dot += q[e] * x[e];
    for (size_t e = 0; e < len; e++) x[e] -= dot * q[e];
}

static double norm2(const double *x, size_t len)
{
    double s = 0;
    for (size_t e = 0; e < len; e++) s += x[e] * x[e];
    return s;
}

int loom_svb_select(const double *u, uint32_t width, const uint64_t *idx, const float *val,
                    const size_t *off, size_t n, size_t c, uint64_t seed, size_t *chosen)
{
    if (c >= n) {
        for (size_t i = 0; i < n; i++) chosen[i] = i;
        return (int)n;
    }
    size_t total = off[n] - off[0], m = 0;
    uint64_t *ids = malloc((total ? total : 1) * sizeof *ids);
    if (!ids) return -1;
    memcpy(ids, idx + off[0], total * sizeof *ids);
    qsort(ids, total, sizeof *ids, cmp_u64);
    for (size_t e = 0; e < total; e++)
        if (!m || ids[e] != ids[m - 1]) ids[m++] = ids[e];
    double *U = malloc(n * width * sizeof *U), *V = calloc(n * (m ? m : 1), sizeof *V);
    double *score = malloc(n * sizeof *score);
    unsigned char *taken = calloc(n, 1);
    int got = -1;
    if (!U || !V || !score || !taken) goto out;
    memcpy(U, u, n * width * sizeof *U);
    for (size_t i = 0; i < n; i++)
        for (size_t e = off[i]; e < off[i + 1]; e++)
            V[i * m + sorted_lower_bound_u64(ids, m, idx[e])] += val[e];
    uint64_t state = seed;
    got = 0;
    for (size_t round = 0; round < c; round++) {
        double sum = 0;
        for (size_t i = 0; i < n; i++) {
            score[i] = taken[i] ? 0 : norm2(U + i * width, width) * norm2(V + i * m, m);
            sum += score[i];
        }
        if (!(sum > 0)) break; /* the chosen ones already span every SV */
        double x = rand_unit(rand_splitmix64(&state)) * sum;
        size_t pick = n;
        for (size_t i = 0; i < n; i++) {
            if (score[i] <= 0) continue;
            pick = i;
            if (x < score[i]) break;
            x -= score[i];
        }
        taken[pick] = 1;
        got++;
        /* The chosen residuals, normalised, become the next directions. */
        double *qu = U + pick * width, *qv = V + pick * m;
        double nu = sqrt(norm2(qu, width)), nv = sqrt(norm2(qv, m));
        for (size_t k = 0; k < width; k++) qu[k] /= nu;
        for (size_t e = 0; e < m; e++) qv[e] /= nv;
        for (size_t i = 0; i < n; i++) {
            if (taken[i]) continue;
            project_out(U + i * width, qu, width);
            project_out(V + i * m, qv, m);
        }
    }
    for (size_t i = 0, k = 0; i < n; i++)
        if (taken[i]) chosen[k++] = i;
out:
    free(ids), free(U), free(V), free(score), free(taken);
    return got;
}
