/* gen: synthetic MovieLens-like ratings from a planted biased low-rank model.
 *
 *   model     mean 3.5, user biases N(0, 0.4^2), item biases N(0, 0.5^2),
 *             factors N(0, s^2) with s = (0.25 / K)^(1/4), so p_u . q_i has
 *             a standard deviation of about 0.5; like MovieLens, where the
 *             biases explain more than the interactions.
 *   rating    planted prediction + N(0, noise^2), rounded to half stars and
 *             clipped to [0.5, 5] (MovieLens' scale), or left real-valued.
 *   who rates popularity follows power laws, as in MovieLens: the user of
 *             activity rank r (ids shuffled) gets a share (r + 1)^-0.6 of the
 *             ratings, the item of popularity rank r is picked with weight
 *             (r + 1)^-0.9. A user's count is capped at a third of the items
 *             (the shares are water-filled up to the cap), so drawing distinct
 *             items by popularity, with a redraw on a repeat, stays cheap.
 *   order     sorted by user, then item (like ratings.csv), ids 1-based,
 *             and a made-up increasing timestamp.
 *
 * Every random number comes from app_rng streams, one per purpose and per
 * user, so a seed gives the same file on one C library (the normal deviates
 * use log and cos). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "mf/mf.h"

#define MEAN       3.5
#define USER_BIAS  0.4
#define ITEM_BIAS  0.5
#define USER_ZIPF  0.6
#define ITEM_ZIPF  0.9
#define STREAM_USR 1
#define STREAM_ITM 2
#define STREAM_ROW 1000 /* + user: that user's items and noise */

/* Weights (r + 1)^-a given to a seeded shuffle of 0..n-1. 0, or -1 out of memory. */
static int popularity(double *w, size_t n, double a, uint64_t seed, uint64_t stream)
{
    size_t *perm = malloc((n ? n : 1) * sizeof *perm);
    if (!perm) return -1;
    mf_permutation(seed, stream, n, perm);
    for (size_t i = 0; i < n; i++) w[perm[i]] = pow((double)i + 1, -a);
    free(perm);
    return 0;
}

/* Ratings per user: shares of the weights, water-filled up to cap, rounded
 * through the running total so they add up to exactly n. */
static void user_counts(const double *w, size_t users, uint64_t n, double cap, uint64_t *count)
{
    double lo = 0, hi = 1;
    for (;;) { /* find a scale that reaches n */
        double s = 0;
        for (size_t u = 0; u < users; u++) s += fmin(cap, hi * w[u]);
        if (s >= (double)n) break;
        hi *= 2;
    }
    for (int it = 0; it < 100; it++) {
        double mid = (lo + hi) / 2, s = 0;
        for (size_t u = 0; u < users; u++) s += fmin(cap, mid * w[u]);
        *(s < (double)n ? &lo : &hi) = mid;
    }
    double total = 0;
    uint64_t given = 0;
    for (size_t u = 0; u < users; u++) {
        total += fmin(cap, hi * w[u]);
        uint64_t upto = u + 1 == users ? n : (uint64_t)llround(total);
        if (upto > n) upto = n;
        count[u] = upto > given ? upto - given : 0;
        given += count[u];
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

int mf_generate(const mf_gen_opts *o, FILE *out, mf_model *planted, int progress, char *err,
                size_t errlen)
{
    size_t U = (size_t)o->users, I = (size_t)o->items, w = (size_t)o->rank + 1;
    double cap = floor((double)I / 3);
    if (cap < 1) cap = 1;
    if ((double)o->ratings > cap * (double)U) {
        snprintf(err, errlen,
                 "%llu ratings do not fit: at most %.0f per user (a third of the items) "
                 "x %zu users",
                 (unsigned long long)o->ratings, cap, U);
        return 2;
    }
    mf_model m;
    if (mf_model_alloc(&m, o->rank, U, I)) {
        snprintf(err, errlen, "out of memory");
        return 1;
    }
    double *uw = malloc(U * sizeof *uw), *cum = malloc(I * sizeof *cum);
    uint64_t *count = malloc(U * sizeof *count);
    uint32_t *stamp = calloc(I, sizeof *stamp), *row = malloc((size_t)cap * sizeof *row);
    int rc = 1;
    if (!uw || !cum || !count || !stamp || !row) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    /* The planted model: ids 1..U and 1..I. */
    m.mean = MEAN;
    m.min = o->real ? -INFINITY : 0.5;
    m.max = o->real ? INFINITY : 5;
    double s = pow(0.25 / o->rank, 0.25);
    app_rng r;
    app_rng_seed(&r, o->seed, STREAM_USR);
    for (size_t u = 0; u < U; u++) {
        m.user_id[u] = (int64_t)u + 1;
        m.user[u * w] = USER_BIAS * app_rng_normal(&r);
        for (size_t k = 1; k < w; k++) m.user[u * w + k] = s * app_rng_normal(&r);
    }
    app_rng_seed(&r, o->seed, STREAM_ITM);
    for (size_t i = 0; i < I; i++) {
        m.item_id[i] = (int64_t)i + 1;
        m.item[i * w] = ITEM_BIAS * app_rng_normal(&r);
        for (size_t k = 1; k < w; k++) m.item[i * w + k] = s * app_rng_normal(&r);
    }
    if (popularity(uw, U, USER_ZIPF, o->seed, STREAM_USR + 100) ||
        popularity(cum, I, ITEM_ZIPF, o->seed, STREAM_ITM + 100)) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (size_t i = 1; i < I; i++) cum[i] += cum[i - 1];
    user_counts(uw, U, o->ratings, cap, count);
    double lo = INFINITY, hi = -INFINITY;
    uint64_t written = 0, next_report = o->ratings / 10;
    for (size_t u = 0; u < U; u++) {
        app_rng_seed(&r, o->seed, STREAM_ROW + u);
        size_t n = (size_t)count[u];
        for (size_t k = 0; k < n; k++) {
            size_t i;
            do i = app_draw_cumulative(cum, I, app_rng_uniform(&r) * cum[I - 1]);
            while (stamp[i] == u + 1);
            stamp[i] = (uint32_t)(u + 1);
            row[k] = (uint32_t)i;
        }
        qsort(row, n, sizeof *row, cmp_u32);
        for (size_t k = 0; k < n; k++) {
            size_t i = row[k];
            double x = mf_dot_predict(MEAN, m.user + u * w, m.item + i * w, o->rank) +
                       o->noise * app_rng_normal(&r);
            if (!o->real) x = fmin(5, fmax(0.5, round(2 * x) / 2));
            lo = fmin(lo, x), hi = fmax(hi, x);
            fprintf(out, "%zu\t%zu\t%.*f\t%llu\n", u + 1, i + 1, o->real ? 4 : 1, x,
                    1000000000ull + 60 * (unsigned long long)written);
            written++;
        }
        if (progress && written >= next_report && o->ratings >= 1000000) {
            fprintf(stderr, "loom gen mf: %llu of %llu ratings\n", (unsigned long long)written,
                    (unsigned long long)o->ratings);
            next_report += o->ratings / 10;
        }
    }
    if (ferror(out)) {
        snprintf(err, errlen, "write failed");
        goto out;
    }
    if (o->real) m.min = lo, m.max = hi;
    rc = 0;
out:
    free(uw), free(cum), free(count), free(stamp), free(row);
    if (!rc && planted)
        *planted = m;
    else
        mf_model_free(&m);
    return rc;
}
