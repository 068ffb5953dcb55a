/* mlr_check: compare a model trained by a Loom job with the sequential
 * reference computed here, in-process, from the same flags.
 *
 *   mlr_check MODEL_FILE -- TRAIN_FLAGS...
 *
 * TRAIN_FLAGS are those given to `loom train mlr`. docs/MLR.md promises a
 * one-worker BSP job exactly the reference's weights (in the arithmetic of
 * its --mode), so the comparison is bit for bit: exit 0 when the shape and
 * every weight are bitwise equal (and the model is not all zeros), 1
 * otherwise, naming the first difference; 2 on errors.
 *
 *   mlr_check MODEL_FILE --replay SVS LOG...
 *
 * Replays each worker's SV log (--svlog) from zero (loom_svb_replay): the
 * first must give exactly MODEL (worker 0's replica), every other the same
 * matrix, and each must hold SVS sufficient vectors. */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include <loom/loom.h>
#include <loom/svb.h>

#include "mlr/mlr.h"

/* Bitwise equal matrices of n values; prints the first difference. */
static int equal(const double *a, const double *b, size_t n, const char *what)
{
    for (size_t e = 0; e < n; e++)
        if (memcmp(&a[e], &b[e], sizeof(double))) {
            printf("mlr_check: %s: value %zu is %.17g, not %.17g\n", what, e, a[e], b[e]);
            return 0;
        }
    return 1;
}

static int replay(int argc, char **argv)
{
    char err[512];
    mlr_model m;
    if (mlr_model_load(argv[1], &m, err, sizeof err)) {
        fprintf(stderr, "mlr_check: %s\n", err);
        return 2;
    }
    uint64_t want = strtoull(argv[3], NULL, 10);
    size_t n = (size_t)(m.dim + 1) * m.classes;
    double *first = malloc(n * sizeof *first), *w = malloc(n * sizeof *w);
    int bad = 0;
    for (int a = 4; a < argc && !bad; a++) {
        uint64_t svs;
        int rc = loom_svb_replay(argv[a], m.classes, m.dim + 1, -1, a == 4 ? first : w, &svs);
        if (rc) {
            fprintf(stderr, "mlr_check: %s: %s\n", argv[a], loom_strerror(rc));
            return 2;
        }
        if (svs != want)
            printf("mlr_check: %s holds %llu SVs, not %llu\n", argv[a], (unsigned long long)svs,
                   (unsigned long long)want);
        bad = svs != want || (a == 4 ? !equal(first, m.w, n, "worker 0's model and its log")
                                     : !equal(w, first, n, argv[a]));
    }
    if (!bad)
        printf("mlr_check: %d replicas equal their %llu SVs replayed\n", argc - 4,
               (unsigned long long)want);
    free(first), free(w);
    mlr_model_free(&m);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc >= 5 && !strcmp(argv[2], "--replay")) return replay(argc, argv);
    if (argc < 4 || strcmp(argv[2], "--")) {
        fprintf(stderr, "usage: mlr_check MODEL -- TRAIN_FLAGS...\n");
        return 2;
    }
    mlr_cli cli;
    char err[512];
    if (mlr_parse_flags(argc - 2, argv + 2, &cli, err, sizeof err)) {
        fprintf(stderr, "mlr_check: %s\n", err);
        return 2;
    }
    loom_dataset *d;
    if (loom_libsvm_read(cli.job.train_path, 0, 1, &cli.data, &d, err, sizeof err)) {
        fprintf(stderr, "mlr_check: %s\n", err);
        return 2;
    }
    uint32_t K;
    if (mlr_check_labels(d, &K)) {
        fprintf(stderr, "mlr_check: bad labels\n");
        return 2;
    }
    mlr_model ref, got;
    if (mlr_train_sequential(&cli.train, d, K, d->max_feature, &ref)) {
        fprintf(stderr, "mlr_check: the reference failed\n");
        return 2;
    }
    if (mlr_model_load(argv[1], &got, err, sizeof err)) {
        fprintf(stderr, "mlr_check: %s\n", err);
        return 2;
    }
    if (got.classes != ref.classes || got.dim != ref.dim) {
        printf("mlr_check: model %u x %llu, reference %u x %llu\n", got.classes,
               (unsigned long long)got.dim, ref.classes, (unsigned long long)ref.dim);
        return 1;
    }
    size_t n = (size_t)(ref.dim + 1) * ref.classes, differ = 0, nonzero = 0;
    for (size_t e = 0; e < n; e++) {
        nonzero += ref.w[e] != 0;
        if (!memcmp(&got.w[e], &ref.w[e], sizeof(double))) continue;
        if (!differ)
            printf("mlr_check: weight %zu (feature %zu, class %zu) is %.17g, reference %.17g\n", e,
                   e / ref.classes, e % ref.classes, got.w[e], ref.w[e]);
        differ++;
    }
    if (!nonzero) {
        printf("mlr_check: the reference is all zeros: nothing was compared\n");
        return 1;
    }
    if (differ) printf("mlr_check: %zu of %zu weights differ\n", differ, n);
    mlr_model_free(&ref);
    mlr_model_free(&got);
    loom_dataset_free(d);
    return differ ? 1 : 0;
}
