/* mf_check: compare a model trained by a one-worker BSP Loom job with the
 * sequential reference computed here, in-process, from the same flags.
 *
 *   mf_check MODEL_FILE -- TRAIN_FLAGS...
 *
 * TRAIN_FLAGS are those given to `loom train mf` (at least --train FILE).
 * Exit 0 when every number of the two models is bitwise equal (header, ids,
 * biases, factors), 1 otherwise, naming the first difference; 2 on errors. */
#include <stdio.h>
#include <string.h>

#include <loom/loom.h>

#include "mf/mf.h"

/* Bitwise: == would call -0 and +0 equal, and NaN unequal to itself. */
static int same(double a, double b)
{
    return !memcmp(&a, &b, sizeof a);
}

static int compare_rows(const char *what, const int64_t *ida, const int64_t *idb, const double *a,
                        const double *b, size_t n, size_t w)
{
    for (size_t r = 0; r < n; r++) {
        if (ida[r] != idb[r]) {
            printf("mf_check: %s %zu: id %lld, reference %lld\n", what, r, (long long)ida[r],
                   (long long)idb[r]);
            return 1;
        }
        for (size_t j = 0; j < w; j++)
            if (!same(a[r * w + j], b[r * w + j])) {
                printf("mf_check: %s %lld value %zu: %.17g, reference %.17g\n", what,
                       (long long)ida[r], j, a[r * w + j], b[r * w + j]);
                return 1;
            }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4 || strcmp(argv[2], "--")) {
        fprintf(stderr, "usage: mf_check MODEL -- TRAIN_FLAGS...\n");
        return 2;
    }
    mf_cli cli;
    char err[1024];
    /* mf_parse_flags skips argv[0]: hand it the "--" as the command name. */
    if (mf_parse_flags(argc - 2, argv + 2, &cli, err, sizeof err)) {
        fprintf(stderr, "mf_check: %s\n", err);
        return 2;
    }
    loom_ratings *r;
    if (loom_ratings_read(cli.job.train_path, 0, 1, &cli.data, &r, err, sizeof err)) {
        fprintf(stderr, "mf_check: %s\n", err);
        return 2;
    }
    mf_model ref, got;
    if (mf_train_sequential(&cli.train, r, &ref, NULL, NULL)) {
        fprintf(stderr, "mf_check: reference training failed\n");
        return 2;
    }
    loom_ratings_free(r);
    if (mf_model_load(argv[1], &got, err, sizeof err)) {
        fprintf(stderr, "mf_check: %s\n", err);
        return 2;
    }
    int rc = 0;
    if (got.rank != ref.rank || got.users != ref.users || got.items != ref.items) {
        printf("mf_check: shape rank %u users %zu items %zu, reference %u %zu %zu\n", got.rank,
               got.users, got.items, ref.rank, ref.users, ref.items);
        rc = 1;
    } else if (!same(got.mean, ref.mean) || !same(got.min, ref.min) || !same(got.max, ref.max)) {
        printf("mf_check: mean %.17g min %g max %g, reference %.17g %g %g\n", got.mean, got.min,
               got.max, ref.mean, ref.min, ref.max);
        rc = 1;
    } else {
        size_t w = (size_t)ref.rank + 1;
        rc = compare_rows("user", got.user_id, ref.user_id, got.user, ref.user, ref.users, w) ||
             compare_rows("item", got.item_id, ref.item_id, got.item, ref.item, ref.items, w);
    }
    if (!rc)
        printf("mf_check: %zu users and %zu items of rank %u: every value identical\n", ref.users,
               ref.items, ref.rank);
    mf_model_free(&ref);
    mf_model_free(&got);
    return rc;
}
