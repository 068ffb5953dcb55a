/* demo: a small Loom job that shows tables, push, pull and clock at work.
 *
 *   loom run --servers 2 --workers 3 -- loom_demo [--clocks N]
 *
 * Two tables:
 *  - "tally" (int64, BSP): at clock c every worker adds rank + 1 to row c.
 *    BSP promises that a pull at clock c sees every update of clocks < c, so
 *    each worker checks that row c - 1 holds exactly 1 + 2 + ... + W.
 *  - "weights" (float, SSP(1), AdaGrad on the servers): the workers fit a
 *    least-squares model to data drawn around a planted weight vector, each
 *    from its own seeded shard, and print the loss as it falls.
 * Exit status 0 only if every check held and the model got close. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#define DIM             32
#define ROWS_PER_WORKER 2000
#define BATCH           100

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_uniform(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static float planted(int j)
{
    return (float)(j % 5) - 2.0f;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "demo: %s: %s\n", what, loom_strerror(rc));
    return 1;
}

int main(int argc, char **argv)
{
    int clocks = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--clocks") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 100000) {
                fprintf(stderr, "demo: --clocks takes a number from 1 to 100000\n");
                return 2;
            }
            clocks = (int)v;
        } else {
            fprintf(stderr, "usage: loom run [options] -- loom_demo [--clocks N]\n");
            return 2;
        }
    }
    loom_node *node;
    int rc = loom_init(&node, &argc, &argv);
    if (rc) return fail("cannot join the job", rc);
    if (!loom_is_worker(node)) return loom_serve(node) ? 1 : 0;

    int rank = loom_rank(node), W = loom_num_workers(node);
    loom_table_opts to = LOOM_TABLE_OPTS_DEFAULT;
    to.type = LOOM_I64;
    to.storage = LOOM_DENSE;
    to.key_end = (uint64_t)clocks;
    to.consistency = LOOM_BSP;
    loom_table *tally;
    if ((rc = loom_table_open(node, "tally", &to, &tally))) return fail("open tally", rc);

    loom_table_opts wo = LOOM_TABLE_OPTS_DEFAULT;
    wo.type = LOOM_F32;
    wo.storage = LOOM_DENSE;
    wo.key_end = DIM;
    wo.consistency = LOOM_SSP;
    wo.staleness = 1;
    wo.updater = "adagrad";
    wo.lr = 0.2;
    wo.cache = 0; /* every minibatch reads the newest weights the bound allows */
    loom_table *weights;
    if ((rc = loom_table_open(node, "weights", &wo, &weights))) return fail("open weights", rc);

    /* This worker's shard of the regression data: y = x . w* + noise. */
    static float x[ROWS_PER_WORKER][DIM], y[ROWS_PER_WORKER];
    uint64_t seed = 1234 + (uint64_t)rank;
    for (int r = 0; r < ROWS_PER_WORKER; r++) {
        double dot = 0;
        for (int j = 0; j < DIM; j++) {
            x[r][j] = (float)rng_uniform(&seed);
            dot += x[r][j] * planted(j);
        }
        y[r] = (float)(dot + 0.01 * rng_uniform(&seed));
    }
    uint64_t keys[DIM];
    for (int j = 0; j < DIM; j++) keys[j] = (uint64_t)j;

    int ok = 1;
    float w[DIM], grad[DIM];
    double loss = 0;
    for (int c = 0; c < clocks; c++) {
        int64_t mine = rank + 1;
        uint64_t row = (uint64_t)c;
        if ((rc = loom_push(tally, &row, 1, &mine))) return fail("push tally", rc);
        if (c > 0) {
            int64_t got;
            uint64_t prev = (uint64_t)(c - 1);
            if ((rc = loom_pull(tally, &prev, 1, &got))) return fail("pull tally", rc);
            int64_t want = (int64_t)W * (W + 1) / 2;
            if (got != want) {
                fprintf(stderr, "demo: BSP violated: tally[%d] = %lld, expected %lld\n", c - 1,
                        (long long)got, (long long)want);
                ok = 0;
            }
        }
        loss = 0;
        for (int b = 0; b < ROWS_PER_WORKER; b += BATCH) {
            if ((rc = loom_pull(weights, keys, DIM, w))) return fail("pull weights", rc);
            memset(grad, 0, sizeof grad);
            for (int r = b; r < b + BATCH; r++) {
                double err = -y[r];
                for (int j = 0; j < DIM; j++) err += x[r][j] * w[j];
                loss += err * err / 2;
                for (int j = 0; j < DIM; j++) grad[j] += (float)(err * x[r][j] / BATCH);
            }
            if ((rc = loom_push(weights, keys, DIM, grad))) return fail("push weights", rc);
            /* Send each minibatch's gradient now rather than at the clock. */
            if ((rc = loom_flush(weights, NULL))) return fail("flush weights", rc);
        }
        loss /= ROWS_PER_WORKER;
        loom_report_metric(node, "loss", loss); /* shown on the scheduler's status page */
        printf("clock %2d: tally checked, mean squared-error loss %.6f\n", c, loss);
        fflush(stdout);
        if ((rc = loom_clock(node))) return fail("clock", rc);
    }
    if ((rc = loom_barrier(node))) return fail("barrier", rc);
    if ((rc = loom_pull(weights, keys, DIM, w))) return fail("pull weights", rc);
    double dist = 0;
    for (int j = 0; j < DIM; j++) dist += (w[j] - planted(j)) * (w[j] - planted(j));
    dist = sqrt(dist);
    loom_stats st;
    loom_node_stats(node, &st);
    printf("done: %d clocks, BSP tally %s, |w - w*| = %.4f, %.1f KB sent, %.1f KB received, "
           "%llu rows from cache, %llu from servers\n",
           clocks, ok ? "exact" : "WRONG", dist, st.bytes_sent / 1024.0, st.bytes_received / 1024.0,
           (unsigned long long)st.pulls_from_cache, (unsigned long long)st.pulls_from_server);
    if (dist > 0.1) {
        fprintf(stderr, "demo: the model did not converge (|w - w*| = %.4f)\n", dist);
        ok = 0;
    }
    if ((rc = loom_finalize(node))) return fail("finalize", rc);
    return ok ? 0 : 1;
}
