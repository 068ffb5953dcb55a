/* gen: corpora drawn from a planted LDA model, so the trainer can be checked
 * without downloads: a trained model's top words should name the planted
 * topics.
 *
 * The vocabulary is cut into K blocks; planted topic t draws words only from
 * block t, with weights from a symmetric Dirichlet(β) over the block, so the
 * planted topics are disjoint and a word's name ("t03_w0017": planted topic
 * 3, word 17 of its block) tells which topic it came from. Each document
 * draws topic proportions from Dirichlet(α) and a length uniform in
 * [L/2, 3L/2], then every token a topic and a word. Document i draws from its
 * own random stream, so the output is a pure function of the options and can
 * be produced twice (UCI's header needs the number of pairs before the
 * pairs). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "lda/lda.h"

/* log of a Gamma(a, 1) draw (Marsaglia & Tsang; a < 1 boosted by U^(1/a)),
 * in logs so that tiny shapes do not underflow. */
static double log_gamma_draw(app_rng *r, double a)
{
    double boost = 0;
    if (a < 1) {
        boost = log(1 - app_rng_uniform(r)) / a;
        a += 1;
    }
    double d = a - 1.0 / 3, c = 1 / sqrt(9 * d);
    for (;;) {
        double x = app_rng_normal(r), v = 1 + c * x;
        if (v <= 0) continue;
        v = v * v * v;
        double u = 1 - app_rng_uniform(r);
        if (log(u) < 0.5 * x * x + d - d * v + d * log(v)) return log(d * v) + boost;
    }
}

/* A Dirichlet(a) draw of n weights as a cumulative distribution in cdf. */
static void dirichlet_cdf(app_rng *r, double a, size_t n, double *cdf)
{
    double top = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        cdf[i] = log_gamma_draw(r, a);
        if (cdf[i] > top) top = cdf[i];
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum = cdf[i] = sum + exp(cdf[i] - top);
    for (size_t i = 0; i < n; i++) cdf[i] /= sum;
}

static uint64_t block_start(const lda_gen_opts *o, uint32_t t)
{
    return o->vocab * t / o->topics;
}

static int digits(uint64_t x)
{
    int n = 1;
    while (x >= 10) x /= 10, n++;
    return n;
}

void lda_gen_word_name(const lda_gen_opts *o, uint64_t w, char *buf, size_t len)
{
    uint32_t t = (uint32_t)((w * o->topics + o->topics - 1) / o->vocab);
    while (t > 0 && block_start(o, t) > w) t--;
    while (t + 1 < o->topics && block_start(o, t + 1) <= w) t++;
    uint64_t widest = o->vocab / o->topics + 1;
    int tw = digits(o->topics - 1), ww = digits(widest - 1);
    snprintf(buf, len, "t%0*u_w%0*llu", tw < 2 ? 2 : tw, t, ww < 4 ? 4 : ww,
             (unsigned long long)(w - block_start(o, t)));
}

typedef struct planted {
    double *phi;   /* per topic, the cdf over its block (V values in all) */
    double *theta; /* K: one document's cdf */
    uint32_t *count;
    uint64_t *seen; /* the document's distinct words */
} planted;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Document i's distinct words (ascending, into p->seen) and their counts. */
static size_t draw_doc(const lda_gen_opts *o, planted *p, uint64_t i)
{
    app_rng r;
    app_rng_seed(&r, o->seed, i + 1);
    uint32_t len = o->doc_length / 2 + app_rng_below(&r, o->doc_length + 1);
    dirichlet_cdf(&r, o->alpha, o->topics, p->theta);
    size_t n = 0;
    for (uint32_t j = 0; j < len; j++) {
        uint32_t t = (uint32_t)app_draw_cumulative(p->theta, o->topics, app_rng_uniform(&r));
        uint64_t lo = block_start(o, t), size = block_start(o, t + 1) - lo;
        uint64_t w = lo + app_draw_cumulative(p->phi + lo, size, app_rng_uniform(&r));
        if (p->count[w]++ == 0) p->seen[n++] = w;
    }
    qsort(p->seen, n, sizeof *p->seen, cmp_u64);
    return n;
}

int lda_generate(const lda_gen_opts *o, FILE *out, char *err, size_t errlen)
{
    if (o->topics < 1 || o->vocab < o->topics || o->docs < 1 || o->doc_length < 1) {
        snprintf(err, errlen, "need at least one topic, document and token, and vocab >= topics");
        return -1;
    }
    planted p = {0};
    size_t maxlen = (size_t)o->doc_length / 2 + o->doc_length + 1;
    p.phi = malloc(o->vocab * sizeof *p.phi);
    p.theta = malloc(o->topics * sizeof *p.theta);
    p.count = calloc(o->vocab, sizeof *p.count);
    p.seen = malloc(maxlen * sizeof *p.seen);
    int rc = 0;
    if (!p.phi || !p.theta || !p.count || !p.seen) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    if (!rc) {
        app_rng r;
        app_rng_seed(&r, o->seed, 0);
        for (uint32_t t = 0; t < o->topics; t++) {
            uint64_t lo = block_start(o, t);
            dirichlet_cdf(&r, o->beta, block_start(o, t + 1) - lo, p.phi + lo);
        }
    }
    if (!rc && o->format == LOOM_BOW_UCI) {
        uint64_t nnz = 0;
        for (uint64_t i = 0; i < o->docs; i++) {
            size_t n = draw_doc(o, &p, i);
            for (size_t j = 0; j < n; j++) p.count[p.seen[j]] = 0;
            nnz += n;
        }
        fprintf(out, "%llu\n%llu\n%llu\n", (unsigned long long)o->docs,
                (unsigned long long)o->vocab, (unsigned long long)nnz);
    }
    for (uint64_t i = 0; i < o->docs && !rc; i++) {
        size_t n = draw_doc(o, &p, i);
        if (o->format != LOOM_BOW_UCI) fprintf(out, "%zu", n);
        for (size_t j = 0; j < n; j++) {
            uint64_t w = p.seen[j];
            if (o->format == LOOM_BOW_UCI)
                fprintf(out, "%llu %llu %u\n", (unsigned long long)i + 1, (unsigned long long)w + 1,
                        p.count[w]);
            else
                fprintf(out, " %llu:%u", (unsigned long long)w, p.count[w]);
            p.count[w] = 0;
        }
        if (o->format != LOOM_BOW_UCI) fputc('\n', out);
        if (ferror(out)) {
            snprintf(err, errlen, "write failed");
            rc = -1;
        }
    }
    free(p.phi), free(p.theta), free(p.count), free(p.seen);
    return rc;
}
