/* Metrics of a binary classifier's margins: logloss, accuracy and ROC AUC.
 *
 * AUC is the probability that a random positive gets a larger margin than a
 * random negative, ties counting half. It is computed exactly, not from a
 * binned ROC curve: sort the margins once, then walk runs of equal margins;
 * every positive in a run beats all negatives below the run and ties with the
 * negatives inside it. That is O(n log n) for the sort and O(n) after.
 *
 * The logistic functions are written so that no intermediate overflows:
 * exp() only ever sees a non-positive argument. */
#include "lr/lr.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

double lr_sigmoid(double margin)
{
    if (margin >= 0) return 1 / (1 + exp(-margin));
    double e = exp(margin);
    return e / (1 + e);
}

/* log(1 + exp(-z)) = log1p(exp(-|z|)) + max(-z, 0): for z = -800 the naive
 * form gives log(inf) = inf, this one 800. */
double lr_logistic_loss(double margin, double label)
{
    double z = label * margin;
    return log1p(exp(-fabs(z))) + (z < 0 ? -z : 0);
}

struct scored {
    double margin;
    int positive;
};

static int by_margin(const void *a, const void *b)
{
    double x = ((const struct scored *)a)->margin, y = ((const struct scored *)b)->margin;
    return (x > y) - (x < y);
}

/* AUC of s (sorted ascending by margin), counting in halves so the sum stays
 * an exact integer: 2 * (pairs won) + (pairs tied). */
static double auc_sorted(const struct scored *s, size_t n, uint64_t pos, uint64_t neg)
{
    if (pos == 0 || neg == 0) return 0.5;
    uint64_t halves = 0, neg_below = 0;
    for (size_t i = 0; i < n;) {
        uint64_t p = 0, q = 0;
        size_t j = i;
        for (; j < n && s[j].margin == s[i].margin; j++) {
            if (s[j].positive)
                p++;
            else
                q++;
        }
        halves += 2 * p * neg_below + p * q;
        neg_below += q;
        i = j;
    }
    return (double)halves / 2 / ((double)pos * (double)neg);
}

int lr_evaluate(const double *margin, const double *label, size_t n, lr_metrics *out)
{
    if (n == 0) return -1;
    struct scored *s = malloc(n * sizeof *s);
    if (!s) return -1;
    uint64_t pos = 0, correct = 0;
    double loss = 0;
    for (size_t i = 0; i < n; i++) {
        /* A NaN would make the sort's comparisons inconsistent. */
        if (isnan(margin[i]) || (label[i] != 1 && label[i] != -1)) {
            free(s);
            return -1;
        }
        int positive = label[i] > 0;
        s[i] = (struct scored){margin[i], positive};
        pos += (uint64_t)positive;
        correct += (uint64_t)((margin[i] > 0) == positive);
        loss += lr_logistic_loss(margin[i], label[i]);
    }
    qsort(s, n, sizeof *s, by_margin);
    out->n = n;
    out->logloss = loss / (double)n;
    out->accuracy = (double)correct / (double)n;
    out->auc = auc_sorted(s, n, pos, n - pos);
    free(s);
    return 0;
}
