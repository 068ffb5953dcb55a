/* svm_seq: the SVM's sequential reference (apps/svm/seq.c) on a training file, and its
 * accuracy on a test file, for the tests and bench/run_p2p.sh to compare a job with.
 * Usage: svm_seq TRAIN TEST EPOCHS LR L2 SEED; prints "accuracy A" (percent) per epoch. */
#include <stdio.h>
#include <stdlib.h>

#include "svm/svm.h"

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: svm_seq TRAIN TEST EPOCHS LR L2 SEED\n");
        return 2;
    }
    char err[512];
    loom_libsvm_opts lo = LOOM_LIBSVM_OPTS_DEFAULT;
    loom_dataset *train, *test;
    if (loom_libsvm_read(argv[1], 0, 1, &lo, &train, err, sizeof err) ||
        loom_libsvm_read(argv[2], 0, 1, &lo, &test, err, sizeof err)) {
        fprintf(stderr, "svm_seq: %s\n", err);
        return 1;
    }
    svm_opts o = SVM_OPTS_DEFAULT;
    o.lr = atof(argv[4]);
    o.l2 = atof(argv[5]);
    o.seed = strtoull(argv[6], NULL, 10);
    int epochs = atoi(argv[3]);
    for (int e = 1; e <= epochs; e++) { /* each epoch count from scratch: the same first steps */
        o.epochs = e;
        svm_replica m;
        if (svm_train_sequential(&o, train, train->max_feature, &m)) return 1;
        printf("epoch %d accuracy %.4f\n", e, svm_accuracy(&m, test));
        svm_replica_free(&m);
    }
    loom_dataset_free(train);
    loom_dataset_free(test);
    return 0;
}
