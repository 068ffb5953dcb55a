/* lr_check: compare a model trained by a one-worker Loom job with the
 * sequential reference computed here, in-process, from the same flags.
 *
 *   lr_check MODEL_FILE -- TRAIN_FLAGS...
 *
 * TRAIN_FLAGS are those given to `loom train lr` (at least --train FILE).
 * docs/LR.md promises exactly the reference's weights, so the comparison is
 * bit for bit: exit 0 when the dimension, every weight and the bias are
 * bitwise equal (and the model is not all zeros, which would prove nothing),
 * 1 otherwise, naming the first difference and counting them; 2 on errors. */
#include <stdio.h>
#include <string.h>

#include <loom/loom.h>

#include "lr/lr.h"

/* Bitwise: == would call -0 and +0 equal, and NaN unequal to itself. */
static int same(double a, double b)
{
    return !memcmp(&a, &b, sizeof a);
}

/* Prints the first difference and returns how many numbers differ. */
static uint64_t count_differences(const lr_model *got, const lr_model *ref)
{
    uint64_t differ = 0;
    if (!same(got->bias, ref->bias)) {
        printf("lr_check: bias %.17g, reference %.17g\n", got->bias, ref->bias);
        differ++;
    }
    for (uint64_t j = 0; j < ref->dim; j++) {
        if (same(got->w[j], ref->w[j])) continue;
        if (!differ)
            printf("lr_check: weight %llu is %.17g, reference %.17g\n", (unsigned long long)j,
                   got->w[j], ref->w[j]);
        differ++;
    }
    return differ;
}

int main(int argc, char **argv)
{
    if (argc < 4 || strcmp(argv[2], "--")) {
        fprintf(stderr, "usage: lr_check MODEL -- TRAIN_FLAGS...\n");
        return 2;
    }
    lr_cli cli;
    char err[512];
    /* lr_parse_flags skips argv[0]: hand it the "--" as the command name. */
    if (lr_parse_flags(argc - 2, argv + 2, &cli, err, sizeof err)) {
        fprintf(stderr, "lr_check: %s\n", err);
        return 2;
    }
    loom_dataset *d;
    if (loom_libsvm_read(cli.job.train_path, 0, 1, &cli.data, &d, err, sizeof err)) {
        fprintf(stderr, "lr_check: %s\n", err);
        return 2;
    }
    lr_model ref, got;
    if (lr_train_sequential(&cli.train, d, d->max_feature, &ref)) {
        fprintf(stderr, "lr_check: reference training failed\n");
        return 2;
    }
    if (lr_model_load(argv[1], &got, err, sizeof err)) {
        fprintf(stderr, "lr_check: %s\n", err);
        return 2;
    }
    int rc = 0;
    if (got.dim != ref.dim) {
        printf("lr_check: dimension %llu, reference %llu\n", (unsigned long long)got.dim,
               (unsigned long long)ref.dim);
        rc = 1;
    } else {
        uint64_t nonzero = 0;
        for (uint64_t j = 0; j < ref.dim; j++) nonzero += ref.w[j] != 0;
        uint64_t differ = count_differences(&got, &ref);
        printf("lr_check: %llu weights (%llu non-zero) and the bias: %llu differ from the "
               "reference\n",
               (unsigned long long)ref.dim, (unsigned long long)nonzero,
               (unsigned long long)differ);
        if (!nonzero) printf("lr_check: the reference model is all zeros: nothing was compared\n");
        rc = differ || !nonzero;
    }
    lr_model_free(&ref);
    lr_model_free(&got);
    loom_dataset_free(d);
    return rc;
}
