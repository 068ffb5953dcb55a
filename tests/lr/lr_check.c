/* lr_check: compare a model trained by a one-worker Loom job with the
 * sequential reference computed here, in-process, from the same flags.
 *
 *   lr_check MODEL_FILE TOLERANCE -- TRAIN_FLAGS...
 *
 * TRAIN_FLAGS are those given to `loom train lr` (at least --train FILE).
 * Exit 0 when every weight and the bias agree within TOLERANCE (relative to
 * max(1, |w|)), 1 otherwise, printing the largest difference either way. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "lr/lr.h"

int main(int argc, char **argv)
{
    if (argc < 5 || strcmp(argv[3], "--")) {
        fprintf(stderr, "usage: lr_check MODEL TOLERANCE -- TRAIN_FLAGS...\n");
        return 2;
    }
    double tol = atof(argv[2]);
    lr_cli cli;
    char err[512];
    /* lr_parse_flags skips argv[0]: hand it the "--" as the command name. */
    if (lr_parse_flags(argc - 3, argv + 3, &cli, err, sizeof err)) {
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
    if (got.dim != ref.dim) {
        fprintf(stderr, "lr_check: dimension %llu, reference %llu\n", (unsigned long long)got.dim,
                (unsigned long long)ref.dim);
        return 1;
    }
    double worst = fabs(got.bias - ref.bias) / fmax(1, fabs(ref.bias));
    uint64_t worst_at = got.dim, nonzero = 0;
    for (uint64_t j = 0; j < ref.dim; j++) {
        double diff = fabs(got.w[j] - ref.w[j]) / fmax(1, fabs(ref.w[j]));
        nonzero += ref.w[j] != 0;
        if (diff > worst) {
            worst = diff;
            worst_at = j;
        }
    }
    printf("lr_check: %llu weights (%llu non-zero), largest relative difference %.3g at %s %llu\n",
           (unsigned long long)ref.dim, (unsigned long long)nonzero, worst,
           worst_at == got.dim ? "bias" : "feature", (unsigned long long)worst_at);
    lr_model_free(&ref);
    lr_model_free(&got);
    loom_dataset_free(d);
    return worst <= tol && nonzero > 0 ? 0 : 1;
}
