/* mf_seq: the sequential reference of `loom train mf`, timed, for
 * bench/run_mf.sh to compare the distributed runs against.
 *
 *   mf_seq TRAIN_FLAGS... --metrics FILE
 *
 * TRAIN_FLAGS are those of `loom train mf` (--train, --test or
 * --test-fraction, --rank, --lr, --epochs, --seed ...; the other job flags
 * are accepted and ignored). Writes one JSON line per evaluation (every
 * --eval-every epochs and the last, as the trainer) with the same keys as the
 * trainer's metrics: time_s counts from after reading the data, and
 * includes, like the trainer's, the evaluations of the training and test
 * ratings; updates_per_s counts the SGD part only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "mf/mf.h"

typedef struct run {
    const mf_train_opts *opts;
    mf_data train, test;
    double start, epoch_start; /* epoch_start: the end of the last evaluation */
    int epochs;                /* trained since then */
    FILE *out;
} run;

static void after_epoch(void *arg, int epoch, const mf_model *m)
{
    run *r = arg;
    r->epochs++;
    if (!mf_eval_due(r->opts, epoch)) return;
    double train_s = app_now_s() - r->epoch_start;
    double train_rmse = sqrt(mf_model_sse(m, &r->train) / (double)r->train.n);
    char test[32] = "null";
    if (r->test.n)
        snprintf(test, sizeof test, "%.9g", sqrt(mf_model_sse(m, &r->test) / (double)r->test.n));
    fprintf(r->out,
            "{\"epoch\": %d, \"time_s\": %.3f, \"train_rmse\": %.9g, \"test_rmse\": %s, "
            "\"updates_per_s\": %.1f, \"bytes_sent\": 0, \"bytes_received\": 0}\n",
            epoch + 1, app_now_s() - r->start, train_rmse, test,
            train_s > 0 ? (double)r->train.n * r->epochs / train_s : 0);
    fflush(r->out);
    r->epochs = 0;
    r->epoch_start = app_now_s();
}

int main(int argc, char **argv)
{
    mf_cli cli;
    char err[1024];
    if (mf_parse_flags(argc, argv, &cli, err, sizeof err)) {
        fprintf(stderr, "mf_seq: %s\n", err);
        return 2;
    }
    if (!cli.job.metrics_path) {
        fprintf(stderr, "usage: mf_seq TRAIN_FLAGS... --metrics FILE\n");
        return 2;
    }
    loom_ratings *r, *t = NULL;
    if (loom_ratings_read(cli.job.train_path, 0, 1, &cli.data, &r, err, sizeof err) ||
        (cli.job.test_path &&
         loom_ratings_read(cli.job.test_path, 0, 1, &cli.data, &t, err, sizeof err))) {
        fprintf(stderr, "mf_seq: %s\n", err);
        return 1;
    }
    run ru = {.opts = &cli.train};
    if (!(ru.out = fopen(cli.job.metrics_path, "w"))) {
        perror(cli.job.metrics_path);
        return 1;
    }
    int rc = mf_data_split(r, cli.train.seed, cli.train.test_fraction, &ru.train, &ru.test);
    if (!rc && t) {
        mf_data_free(&ru.test);
        rc = mf_data_map(t, r, &ru.test);
    }
    mf_model m;
    ru.start = ru.epoch_start = app_now_s();
    if (!rc) rc = mf_train_sequential(&cli.train, r, &m, after_epoch, &ru);
    if (rc) {
        fprintf(stderr, "mf_seq: %s\n", loom_strerror(rc));
        return 1;
    }
    mf_model_free(&m);
    mf_data_free(&ru.train);
    mf_data_free(&ru.test);
    loom_ratings_free(r);
    loom_ratings_free(t);
    return fclose(ru.out) ? 1 : 0;
}
