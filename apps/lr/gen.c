/* Synthetic click-log-like data for logistic regression, from a planted model.
 *
 * Click logs are sparse and lopsided: a few features (a big advertiser, a
 * common query word) are in most examples, most features are rare. So:
 *
 *   popularity  feature ids are shuffled, and the one of popularity rank r
 *               (0 = most popular) gets weight (r + 1)^-zipf. Shuffling keeps
 *               the popular ids from being just the small ones.
 *   rows        every row holds exactly nnz distinct features, drawn one after
 *               the other by popularity among those not yet in the row
 *               (sampling without replacement), all with value 1.
 *   model       a random planted_density fraction of the features get a
 *               N(0, sigma^2) weight, the others 0. sigma and the bias are
 *               calibrated on a pilot sample of rows so the margin w.x + bias
 *               has standard deviation MARGIN_STD and ~POSITIVE_RATE of the
 *               labels are +1 (like a9a): the data is learnable, and the
 *               classes are unbalanced enough that beating the majority class
 *               means something.
 *   labels      +1 with probability sigmoid(margin), so the planted model is
 *               the Bayes-optimal classifier of the data.
 *
 * Drawing without replacement has two phases. While the row's features hold
 * at most half of the popularity weight, a feature is drawn from all of them
 * with Walker's alias table (O(1)) and drawn again if the row has it: that is
 * exactly the without-replacement distribution, and the common case for click
 * logs. Past half, redraws would pile up (long rows, steep zipf), so the rest
 * of the row comes from a Fenwick tree over the integer popularity weights
 * with the row's features subtracted out (O(log features) a draw). Integer
 * weights make "subtracted out" exact, so a row never repeats a feature
 * however skewed the weights are.
 *
 * The output is the same for a seed on every machine: the random numbers
 * come from splitmix64, and exp/log are computed here from +, -, *, / and
 * the exact frexp/ldexp/sqrt only, because libm's exp and log may differ in
 * the last bit between C libraries, and one bit can flip a label. */
#include "lr/lr.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The determinism above also needs a*b+c not to be fused into one rounding
 * where the CPU has FMA: GCC fuses in its GNU modes (-std=gnu11 -march=...),
 * clang within expressions. GCC does not know the standard pragma. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#define MARGIN_STD    2.0    /* of the planted margins: Bayes accuracy well above the majority */
#define POSITIVE_RATE 0.30   /* expected fraction of +1 labels */
#define PILOT_ROWS    2048   /* rows the calibration looks at */
#define WEIGHT_SCALE  0x1p61 /* the integer popularity weights sum to about this */

/* Independent random streams, one per use, so that for instance the rows do
 * not change when the pilot sample gets bigger, and the first N rows of a
 * file are the same whatever --rows is. */
enum { STREAM_PERM = 1, STREAM_MODEL, STREAM_PILOT, STREAM_ROWS };

/* ---- random numbers ---- */

static uint64_t stream_state(uint64_t seed, uint64_t stream)
{
    uint64_t s = seed ^ (stream * 0xd1b54a32d192ed03ULL);
    return app_splitmix64(&s);
}

/* Uniform in [0, n), n >= 1, without modulo bias: draw below the next power
 * of two and retry (at most twice on average). */
static uint64_t uniform_below(uint64_t *state, uint64_t n)
{
    uint64_t mask = n - 1;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    mask |= mask >> 32;
    for (;;) {
        uint64_t r = app_splitmix64(state) & mask;
        if (r < n) return r;
    }
}

/* Uniform in [0, 1) with 53 random bits. */
static double uniform01(uint64_t *state)
{
    return (double)(app_splitmix64(state) >> 11) * 0x1p-53;
}

/* ---- exp and log from IEEE basic operations (see the top of the file) ---- */

static const double LN2_HI = 6.93147180369123816490e-01; /* trailing zeros: k * LN2_HI is exact */
static const double LN2_LO = 1.90821492927058770002e-10;

/* exp(x) for x <= 0, to about 1e-16 relative: exp(x) = 2^k exp(r) with |r| <= ln2/2. */
static double det_exp(double x)
{
    if (x < -746) return 0;
    double k = floor(x * 1.4426950408889634 + 0.5);
    double r = (x - k * LN2_HI) - k * LN2_LO;
    double p = 1;
    for (int n = 13; n >= 1; n--) p = 1 + p * r / n; /* Taylor series, Horner form */
    return ldexp(p, (int)k);
}

/* log(x) for finite x > 0: x = 2^e m with m in [sqrt(1/2), sqrt(2)), and
 * log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172. */
static double det_log(double x)
{
    int e;
    double m = frexp(x, &e);
    if (m < 0.70710678118654752) {
        m *= 2;
        e--;
    }
    double f = m - 1;
    double s = f / (2 + f), s2 = s * s;
    double p = 0;
    for (int n = 21; n >= 3; n -= 2) p = (p + 1.0 / n) * s2;
    return e * LN2_HI + (2 * s * (1 + p) + e * LN2_LO);
}

static double det_sigmoid(double z)
{
    if (z >= 0) return 1 / (1 + det_exp(-z));
    double e = det_exp(z);
    return e / (1 + e);
}

/* Standard normal (Marsaglia's polar method: no sin/cos needed). */
static double normal(uint64_t *state)
{
    for (;;) {
        double u = 2 * uniform01(state) - 1, v = 2 * uniform01(state) - 1;
        double s = u * u + v * v;
        if (s > 0 && s < 1) return u * sqrt(-2 * det_log(s) / s);
    }
}

/* ---- rows: popularity-weighted sampling without replacement ---- */

struct alias_slot {
    double keep;    /* probability of returning this slot's own rank */
    uint64_t other; /* the rank returned otherwise */
};

struct sampler {
    uint64_t features;
    uint64_t *weight;         /* [rank] integer popularity, >= 1 */
    uint64_t total;           /* sum of weight */
    struct alias_slot *alias; /* [rank] Walker's alias table over weight */
    uint64_t *tree;           /* Fenwick tree over weight, 1-based: tree[1..features] */
    uint64_t top;             /* highest power of two <= features, where a descent starts */
    uint64_t *perm;           /* [rank] feature id */
    uint64_t *rank;           /* nnz ranks drawn for the current row */
    uint64_t *set;            /* hash set of rank + 1 (0: empty) of the current row */
    uint64_t set_mask;        /* set size - 1, size a power of two >= 2 nnz */
};

/* Walker's alias method (Vose's construction): slot j keeps its own rank
 * with probability keep and gives the rest to one heavier rank, so a draw
 * is O(1): pick a slot, then one of its two ranks. `work` holds features
 * indices: light slots from the front, heavy ones from the back. */
static void alias_init(struct sampler *s, uint64_t *work)
{
    uint64_t f = s->features, light = 0, heavy = f;
    double per_slot = (double)f / (double)s->total;
    for (uint64_t r = 0; r < f; r++) {
        s->alias[r] = (struct alias_slot){(double)s->weight[r] * per_slot, r};
        if (s->alias[r].keep < 1)
            work[light++] = r;
        else
            work[--heavy] = r;
    }
    while (light > 0 && heavy < f) {
        uint64_t l = work[--light], h = work[heavy++];
        s->alias[l].other = h;
        s->alias[h].keep -= 1 - s->alias[l].keep;
        if (s->alias[h].keep < 1)
            work[light++] = h;
        else
            work[--heavy] = h;
    }
    /* What is left is 1 up to rounding. */
    while (light > 0) s->alias[work[--light]].keep = 1;
    while (heavy < f) s->alias[work[heavy++]].keep = 1;
}

static uint64_t alias_draw(const struct sampler *s, uint64_t *state)
{
    uint64_t j = uniform_below(state, s->features);
    return uniform01(state) < s->alias[j].keep ? j : s->alias[j].other;
}

static void tree_add(struct sampler *s, uint64_t rank, uint64_t delta)
{
    /* delta may be a "negative" -w: unsigned arithmetic wraps back exactly. */
    for (uint64_t i = rank + 1; i <= s->features; i += i & (0 - i)) s->tree[i] += delta;
}

/* The rank r with weight[0] + ... + weight[r-1] <= u < weight[0] + ... + weight[r]. */
static uint64_t tree_find(const struct sampler *s, uint64_t u)
{
    uint64_t pos = 0;
    for (uint64_t step = s->top; step; step >>= 1) {
        uint64_t next = pos + step;
        if (next <= s->features && s->tree[next] <= u) {
            pos = next;
            u -= s->tree[next];
        }
    }
    return pos;
}

/* Adds rank to the row's set; 0 if it was there already. */
static int set_insert(struct sampler *s, uint64_t rank)
{
    uint64_t i = ((rank * 0x9e3779b97f4a7c15ULL) >> 32) & s->set_mask;
    for (; s->set[i]; i = (i + 1) & s->set_mask)
        if (s->set[i] == rank + 1) return 0;
    s->set[i] = rank + 1;
    return 1;
}

static int sampler_init(struct sampler *s, const lr_gen_opts *o, char *err, size_t errlen)
{
    uint64_t f = o->features;
    memset(s, 0, sizeof *s);
    s->features = f;
    uint64_t set_size = 1;
    while (set_size < 2 * (uint64_t)o->nnz) set_size <<= 1;
    s->set_mask = set_size - 1;
    if (f >= SIZE_MAX / (8 * sizeof(uint64_t)) || !(s->weight = malloc(f * sizeof *s->weight)) ||
        !(s->alias = malloc(f * sizeof *s->alias)) ||
        !(s->tree = malloc((f + 1) * sizeof *s->tree)) ||
        !(s->perm = malloc(f * sizeof *s->perm)) || !(s->rank = malloc(o->nnz * sizeof *s->rank)) ||
        !(s->set = malloc(set_size * sizeof *s->set))) {
        snprintf(err, errlen, "out of memory for %llu features", (unsigned long long)f);
        return -1;
    }

    /* Integer weights proportional to (r + 1)^-zipf, each at least 1 so that
     * any row length up to features can be drawn. */
    double sum = 0;
    for (uint64_t r = 0; r < f; r++) sum += det_exp(-o->zipf * det_log((double)(r + 1)));
    double scale = WEIGHT_SCALE / sum;
    for (uint64_t r = 0; r < f; r++) {
        uint64_t w = (uint64_t)(det_exp(-o->zipf * det_log((double)(r + 1))) * scale);
        s->weight[r] = w ? w : 1;
        s->total += s->weight[r];
    }

    /* The alias table borrows perm as its work space; perm is filled after. */
    alias_init(s, s->perm);

    /* Fenwick tree in O(features): each node passes its sum up to its parent. */
    s->tree[0] = 0;
    memcpy(s->tree + 1, s->weight, f * sizeof *s->weight);
    for (uint64_t i = 1; i <= f; i++) {
        uint64_t parent = i + (i & (0 - i));
        if (parent <= f) s->tree[parent] += s->tree[i];
    }
    s->top = 1;
    while (s->top <= f / 2) s->top <<= 1;

    /* Popularity rank -> feature id: a uniform random permutation (Fisher-Yates). */
    uint64_t st = stream_state(o->seed, STREAM_PERM);
    for (uint64_t i = 0; i < f; i++) s->perm[i] = i;
    for (uint64_t i = f - 1; i > 0; i--) {
        uint64_t j = uniform_below(&st, i + 1), t = s->perm[i];
        s->perm[i] = s->perm[j];
        s->perm[j] = t;
    }
    return 0;
}

static void sampler_free(struct sampler *s)
{
    free(s->weight);
    free(s->alias);
    free(s->tree);
    free(s->perm);
    free(s->rank);
    free(s->set);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Draw one row's nnz distinct feature ids into ids, ascending.
 *
 * Drawing from all features and redrawing repeats gives exactly the
 * distribution of drawing from the features not yet taken, and is fast
 * while the taken ones hold little of the weight: the alias table does it
 * in O(1) with no updates. Once they hold more than half (long rows, or
 * steep zipf), redraws would pile up, so the rest of the row is drawn from
 * the Fenwick tree with the taken features removed, O(log features) each. */
static void draw_row(struct sampler *s, uint32_t nnz, uint64_t *state, uint64_t *ids)
{
    uint64_t taken = 0; /* weight of the ranks in the row */
    uint32_t k = 0;
    memset(s->set, 0, (s->set_mask + 1) * sizeof *s->set);
    while (k < nnz && taken <= s->total / 2) {
        uint64_t r = alias_draw(s, state);
        if (!set_insert(s, r)) continue;
        s->rank[k++] = r;
        taken += s->weight[r];
    }
    if (k < nnz) {
        for (uint32_t i = 0; i < k; i++) tree_add(s, s->rank[i], 0 - s->weight[s->rank[i]]);
        for (; k < nnz; k++) {
            uint64_t r = tree_find(s, uniform_below(state, s->total - taken));
            s->rank[k] = r;
            tree_add(s, r, 0 - s->weight[r]);
            taken += s->weight[r];
        }
        /* Put the tree back for the next row. */
        for (uint32_t i = 0; i < nnz; i++) tree_add(s, s->rank[i], s->weight[s->rank[i]]);
    }
    for (uint32_t i = 0; i < nnz; i++) ids[i] = s->perm[s->rank[i]];
    /* Insertion sort is fastest for click-log-sized rows; long rows need qsort. */
    if (nnz > 32) {
        qsort(ids, nnz, sizeof *ids, cmp_u64);
        return;
    }
    for (uint32_t i = 1; i < nnz; i++) {
        uint64_t v = ids[i];
        uint32_t j = i;
        for (; j > 0 && ids[j - 1] > v; j--) ids[j] = ids[j - 1];
        ids[j] = v;
    }
}

/* Summed in ascending id order, bias last: the same double lr_margin() gets. */
static double row_margin(const double *w, const uint64_t *ids, uint32_t nnz, double bias)
{
    double m = 0;
    for (uint32_t k = 0; k < nnz; k++) m += w[ids[k]];
    return m + bias;
}

/* ---- the planted model ---- */

/* Exactly round(density * features) (at least 1) features, a uniform random
 * subset (Knuth's selection sampling), get a N(0, 1) weight. */
static void plant_unit_weights(const lr_gen_opts *o, double *w)
{
    uint64_t st = stream_state(o->seed, STREAM_MODEL);
    double want = floor(o->planted_density * (double)o->features + 0.5);
    uint64_t need = want < 1 ? 1 : want >= (double)o->features ? o->features : (uint64_t)want;
    for (uint64_t j = 0; j < o->features; j++) {
        if (uniform_below(&st, o->features - j) < need) {
            w[j] = normal(&st);
            need--;
        }
    }
}

/* The standard deviation of the pilot rows' values x; 1 when they have no
 * spread, so that dividing by it leaves a constant term as it is. */
static double pilot_sd(const double *x)
{
    double mean = 0, var = 0;
    for (int i = 0; i < PILOT_ROWS; i++) mean += x[i];
    mean /= PILOT_ROWS;
    for (int i = 0; i < PILOT_ROWS; i++) var += (x[i] - mean) * (x[i] - mean);
    double sd = sqrt(var / PILOT_ROWS);
    return sd > 1e-9 * (1 + fabs(mean)) ? sd : 1;
}

/* Scale the unit weights and pick the bias on a pilot sample of rows: margin
 * standard deviation MARGIN_STD, mean probability of +1 POSITIVE_RATE. The
 * extra term (lr_gen_extra) gets the scale that makes its standard deviation
 * its std, and is part of the margins the bias is chosen for. */
static int calibrate(struct sampler *s, const lr_gen_opts *o, const lr_gen_extra *x, double *w,
                     double *bias, double *extra_scale, uint64_t *ids, char *err, size_t errlen)
{
    double *m = malloc(2 * PILOT_ROWS * sizeof *m), *e = m + PILOT_ROWS;
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    uint64_t st = stream_state(o->seed, STREAM_PILOT);
    double mean = 0, var = 0;
    for (int i = 0; i < PILOT_ROWS; i++) {
        draw_row(s, o->nnz, &st, ids);
        m[i] = row_margin(w, ids, o->nnz, 0);
        e[i] = x ? x->term(ids, o->nnz, x->user) : 0;
        mean += m[i];
    }
    *extra_scale = x ? x->std / pilot_sd(e) : 0;
    mean /= PILOT_ROWS;
    for (int i = 0; i < PILOT_ROWS; i++) var += (m[i] - mean) * (m[i] - mean);
    /* No spread (say nnz = features: every row is the same; the mean may
     * still be an ulp off each margin) leaves nothing to scale, and the
     * labels are then noise at POSITIVE_RATE. */
    double sd = sqrt(var / PILOT_ROWS);
    double sigma = sd > 1e-9 * (1 + fabs(mean)) ? MARGIN_STD / sd : 1;
    for (uint64_t j = 0; j < o->features; j++) w[j] *= sigma;
    for (int i = 0; i < PILOT_ROWS; i++) m[i] = sigma * m[i] + *extra_scale * e[i];

    /* The mean probability grows with the bias: bisect. */
    double hi = 40; /* sigmoid(+-40) is 0 or 1 to 1e-17 */
    for (int i = 0; i < PILOT_ROWS; i++)
        if (fabs(m[i]) + 40 > hi) hi = fabs(m[i]) + 40;
    double lo = -hi;
    for (int it = 0; it < 200 && lo < hi; it++) {
        double mid = lo + (hi - lo) / 2, p = 0;
        if (mid == lo || mid == hi) break;
        for (int i = 0; i < PILOT_ROWS; i++) p += det_sigmoid(m[i] + mid);
        if (p / PILOT_ROWS < POSITIVE_RATE)
            lo = mid;
        else
            hi = mid;
    }
    *bias = lo + (hi - lo) / 2;
    free(m);
    return 0;
}

/* ---- output ---- */

/* "+1 3:1 17:1 ...\n" (1-based ids); returns the length. */
static size_t format_row(char *buf, int positive, const uint64_t *ids, uint32_t nnz)
{
    char *p = buf;
    *p++ = positive ? '+' : '-';
    *p++ = '1';
    for (uint32_t k = 0; k < nnz; k++) {
        char digits[20];
        int n = 0;
        for (uint64_t v = ids[k] + 1; v; v /= 10) digits[n++] = (char)('0' + v % 10);
        *p++ = ' ';
        while (n > 0) *p++ = digits[--n];
        *p++ = ':';
        *p++ = '1';
    }
    *p++ = '\n';
    return (size_t)(p - buf);
}

static int check_opts(const lr_gen_opts *o, char *err, size_t errlen)
{
    if (o->rows == 0) {
        snprintf(err, errlen, "rows must be at least 1");
        return -1;
    }
    if (o->features == 0) {
        snprintf(err, errlen, "features must be at least 1");
        return -1;
    }
    if (o->nnz == 0 || o->nnz > o->features) {
        snprintf(err, errlen, "nnz must be from 1 to features (%llu), got %lu",
                 (unsigned long long)o->features, (unsigned long)o->nnz);
        return -1;
    }
    if (!(o->zipf >= 0) || !isfinite(o->zipf)) {
        snprintf(err, errlen, "zipf must be a finite number >= 0, got %g", o->zipf);
        return -1;
    }
    if (!(o->planted_density > 0 && o->planted_density <= 1)) {
        snprintf(err, errlen, "planted density must be above 0 and at most 1, got %g",
                 o->planted_density);
        return -1;
    }
    return 0;
}

int lr_generate(const lr_gen_opts *o, FILE *out, lr_model *planted, int progress, char *err,
                size_t errlen)
{
    return lr_generate_extra(o, NULL, out, planted, progress ? "loom gen lr" : NULL, err, errlen);
}

int lr_generate_extra(const lr_gen_opts *o, const lr_gen_extra *x, FILE *out, lr_model *planted,
                      const char *progress, char *err, size_t errlen)
{
    if (check_opts(o, err, errlen)) return -1;
    struct sampler s;
    int rc = sampler_init(&s, o, err, errlen);
    double *w = NULL;
    uint64_t *ids = NULL;
    char *line = NULL;
    double bias = 0, extra_scale = 0;
    if (rc == 0 &&
        (!(w = calloc(o->features, sizeof *w)) || !(ids = malloc(o->nnz * sizeof *ids)) ||
         /* per id: a blank, up to 20 digits, ":1" */
         !(line = malloc((size_t)o->nnz * 23 + 4)))) {
        snprintf(err, errlen, "out of memory for %llu features", (unsigned long long)o->features);
        rc = -1;
    }
    if (rc == 0) {
        plant_unit_weights(o, w);
        rc = calibrate(&s, o, x, w, &bias, &extra_scale, ids, err, errlen);
    }

    uint64_t st = stream_state(o->seed, STREAM_ROWS);
    unsigned reported = 0; /* tenths */
    for (uint64_t i = 0; rc == 0 && i < o->rows; i++) {
        draw_row(&s, o->nnz, &st, ids);
        double margin = row_margin(w, ids, o->nnz, bias);
        if (x) margin += extra_scale * x->term(ids, o->nnz, x->user);
        int positive = uniform01(&st) < det_sigmoid(margin);
        size_t len = format_row(line, positive, ids, o->nnz);
        if (fwrite(line, 1, len, out) != len) {
            snprintf(err, errlen, "write failed: %s", strerror(errno));
            rc = -1;
        }
        unsigned tenths = (unsigned)(10.0 * (double)(i + 1) / (double)o->rows);
        if (progress && tenths > reported) {
            reported = tenths;
            fprintf(stderr, "%s: %u%% (%llu of %llu rows)\n", progress, tenths * 10,
                    (unsigned long long)(i + 1), (unsigned long long)o->rows);
        }
    }

    sampler_free(&s);
    free(ids);
    free(line);
    if (rc == 0 && planted) {
        planted->dim = o->features;
        planted->w = w;
        planted->bias = bias;
    } else {
        free(w);
    }
    return rc;
}
