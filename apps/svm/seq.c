/* seq: the sequential reference of the SVM: the same steps (sgd.c) over every row of the
 * training file in one process, in the order a single worker would visit them, with no
 * reduce. The distributed trainer on any graph and synchronisation mode must reach its test
 * accuracy (tests/svm). */
#include <stdlib.h>

#include "svm/svm.h"

int svm_train_sequential(const svm_opts *o, const loom_dataset *train, uint64_t dim,
                         svm_replica *out)
{
    size_t *order = malloc((train->rows ? train->rows : 1) * sizeof *order);
    if (!order || svm_replica_init(out, dim)) {
        free(order);
        return -1;
    }
    for (int e = 0; e < o->epochs; e++) {
        svm_epoch_order(o->seed, 0, e, train->rows, order);
        for (size_t k = 0; k < train->rows; k++) svm_step(out, o, train, order[k]);
    }
    svm_materialise(out);
    free(order);
    return 0;
}
