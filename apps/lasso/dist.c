/* dist: `loom train lasso --schedule dynamic|random|rotation`, coordinate
 * descent scheduled by Loom's dynamic engine (include/loom/sched.h,
 * docs/SCHED.md), as SchMP-Lasso does (kim-thesis-strads.txt Algorithm 6).
 *
 * Every worker reads the whole file (the shard it schedules needs whole
 * columns for the coupling, their |correlation|, and every worker needs
 * n and a_j) but owns only its rows [lo, hi) (app_team_split): it keeps the
 * residual of those rows, and for a round's coordinates it sends
 * x_j^T r over them (update()). The coordinator adds them; every worker then
 * sets each beta_j to S(x_j^T r / n + a_j beta_j, lambda) / a_j and folds the
 * change into its rows of the residual (aggregate()). Every worker applies the
 * same totals in the same order, so they hold the same beta, and the same
 * shift of the residual that carries the intercept (lasso_residual): each
 * worker's x_j^T r over its rows is x_j^T q + shift sum(x_j) there, with the
 * shift of the moment it is taken.
 *
 * The coordinates of one round are updated from the same residual, as
 * Shotgun does; the dependency check keeps strongly coupled columns out of
 * the same round. An "iteration" (a metrics line) is ceil(dim / P) rounds,
 * about dim updates: the unit of a sequential pass. Its objective and
 * train_rmse come from every worker's ||r||^2 of its rows, sent as the extra
 * value of the first round of the next iteration (state after the rounds the
 * pipeline lets that round see).
 *
 * --in-process runs the same rounds without a job (loom_dyn_run_local): the
 * results of a one-worker job, bit for bit, for counting updates quickly. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lasso/lasso.h"

#define PROG "loom train lasso"

/* A coefficient is counted converged when within this of the reference
 * (relative to max(1, max |reference|)). Not tighter: with correlated
 * columns F is nearly flat along their differences, so runs whose objectives
 * agree to 1e-6 still differ in the 4th-5th digit of such coefficients. */
#define CONVERGED_TOL 1e-3

typedef struct snapshot {
    double l1;                /* ||beta||_1 when the round's partial sums were taken */
    uint64_t nnz;             /* non-zero coefficients then */
    uint64_t updates;         /* coordinate updates applied then */
    double converged;         /* share within CONVERGED_TOL of the reference, or -1 */
    double converged_support; /* the same among the reference's non-zeros */
} snapshot;

typedef struct dist {
    const lasso_cli *cli;
    const lasso_problem *p;
    double lambda;
    int rank;
    size_t lo, hi;           /* this worker's rows */
    lasso_residual r;        /* rows [lo, hi) of q used */
    double *beta;            /* every coefficient (the same on every worker) */
    const double *reference; /* --reference beta, or NULL */
    double reference_scale;
    uint64_t rounds_per_iteration;
    uint32_t depth;
    snapshot *snaps; /* depth of them, round t in t % depth */
    uint64_t updates;
    int iteration;
    /* The stopping rule's window: the largest |change| since it opened, and
     * which coordinates were updated since. It closes at the end of the first
     * iteration by which every coordinate was: a pass for cyclic rounds, a
     * few iterations for sampled ones, which may skip coordinates in an
     * iteration (one in which nothing moved, as happens near the end with few
     * non-zeros, says nothing about the coordinates it did not visit). */
    double window_max;
    unsigned char *in_window;
    uint64_t window_count;
    double start;
    FILE *metrics, *schedule_log; /* worker 0 */
    int failed;
    int diverged; /* a coefficient became infinite or NaN */
} dist;

/* The entries of column j in rows [lo, hi): rows ascend within a column. */
static void column_rows(const lasso_problem *p, uint64_t j, size_t lo, size_t hi, size_t *from,
                        size_t *to)
{
    size_t a = p->col[j], b = p->col[j + 1];
    while (a < b) { /* first entry with row >= lo */
        size_t mid = a + (b - a) / 2;
        if (p->row[mid] < lo)
            a = mid + 1;
        else
            b = mid;
    }
    *from = a;
    for (b = a; b < p->col[j + 1] && p->row[b] < hi; b++) {
    }
    *to = b;
}

/* |correlation| of columns i and j: centred with an intercept (a_j is). */
static double coupling(void *arg, uint64_t i, uint64_t j)
{
    const dist *d = arg;
    const lasso_problem *p = d->p;
    if (p->a[i] == 0 || p->a[j] == 0) return 0;
    double dot = 0;
    size_t a = p->col[i], ae = p->col[i + 1], b = p->col[j], be = p->col[j + 1];
    while (a < ae && b < be) {
        if (p->row[a] < p->row[b])
            a++;
        else if (p->row[a] > p->row[b])
            b++;
        else
            dot += p->val[a++] * p->val[b++];
    }
    double n = (double)p->n;
    return fabs(dot - n * p->mu[i] * p->mu[j]) / (n * sqrt(p->a[i] * p->a[j]));
}

/* ||r||^2 over this worker's rows. */
static double rows_sq(const dist *d)
{
    double rr = 0;
    for (size_t i = d->lo; i < d->hi; i++)
        rr += (d->r.q[i] + d->r.shift) * (d->r.q[i] + d->r.shift);
    return rr;
}

static void partial(void *arg, uint64_t round, const uint64_t *keys, size_t n, double *out)
{
    dist *d = arg;
    const lasso_problem *p = d->p;
    for (size_t k = 0; k < n; k++) {
        size_t from, to;
        column_rows(p, keys[k], d->lo, d->hi, &from, &to);
        double s = 0, sum = 0;
        for (size_t e = from; e < to; e++) {
            s += p->val[e] * d->r.q[p->row[e]];
            sum += p->val[e];
        }
        out[k] = s + d->r.shift * sum;
    }
    if (round == 0 || round % d->rounds_per_iteration) return;
    /* The first round of an iteration: the state the last one left. */
    out[n] = rows_sq(d);
    snapshot *s = &d->snaps[round % d->depth];
    *s = (snapshot){.updates = d->updates, .converged = -1};
    uint64_t close = 0, support = 0, support_close = 0;
    for (uint64_t j = 0; j < p->dim; j++) {
        s->l1 += fabs(d->beta[j]);
        s->nnz += d->beta[j] != 0;
        if (!d->reference) continue;
        int near = fabs(d->beta[j] - d->reference[j]) <= d->reference_scale;
        close += near;
        support += d->reference[j] != 0;
        support_close += d->reference[j] != 0 && near;
    }
    if (d->reference) {
        s->converged = (double)close / (double)p->dim;
        s->converged_support = support ? (double)support_close / (double)support : 1;
    }
}

static void write_metrics(dist *d, const snapshot *s, double rr)
{
    double n = (double)d->p->n;
    double objective = rr / (2 * n) + d->lambda * s->l1, rmse = sqrt(rr / n);
    double seconds = app_now_s() - d->start;
    if (!d->cli->job.quiet)
        fprintf(stderr, "iteration %4d  objective %.9g  train rmse %.6f  nnz %llu  %.2f s\n",
                d->iteration, objective, rmse, (unsigned long long)s->nnz, seconds);
    if (!d->metrics || d->failed) return;
    fprintf(d->metrics, "{\"iteration\": %d, \"time_s\": %.3f, \"updates\": %llu", d->iteration,
            seconds, (unsigned long long)s->updates);
    /* A diverged run's values are null: JSON has no inf or nan. */
    if (isfinite(objective))
        fprintf(d->metrics, ", \"objective\": %.17g, \"train_rmse\": %.17g", objective, rmse);
    else
        fputs(", \"objective\": null, \"train_rmse\": null", d->metrics);
    fprintf(d->metrics, ", \"nnz\": %llu", (unsigned long long)s->nnz);
    if (s->converged >= 0)
        fprintf(d->metrics, ", \"converged\": %.6f, \"converged_support\": %.6f", s->converged,
                s->converged_support);
    fputs("}\n", d->metrics);
    if (app_metrics_flush(PROG, d->metrics, d->cli->job.metrics_path)) d->failed = 1;
}

static int apply(void *arg, uint64_t round, const uint64_t *keys, size_t n, const double *sums,
                 double *change)
{
    dist *d = arg;
    const lasso_problem *p = d->p;
    for (size_t k = 0; k < n; k++) {
        uint64_t j = keys[k];
        double next = 0;
        if (p->a[j] != 0)
            next = lasso_soft_threshold(sums[k] / (double)p->n + p->a[j] * d->beta[j], d->lambda) /
                   p->a[j];
        change[k] = next - d->beta[j];
        if (change[k] != 0) {
            size_t from, to;
            column_rows(p, j, d->lo, d->hi, &from, &to);
            for (size_t e = from; e < to; e++) d->r.q[p->row[e]] -= change[k] * p->val[e];
            d->r.shift += change[k] * p->mu[j];
        }
        d->beta[j] = next;
        d->window_max = fmax(d->window_max, fabs(change[k]));
        if (!d->in_window[j]) {
            d->in_window[j] = 1;
            d->window_count++;
        }
        if (!isfinite(next)) d->diverged = 1;
    }
    if (d->diverged) return 1; /* every worker sees the same totals: all stop */
    d->updates += n;
    if (d->schedule_log) {
        fprintf(d->schedule_log, "%llu", (unsigned long long)round);
        for (size_t k = 0; k < n; k++)
            fprintf(d->schedule_log, " %llu", (unsigned long long)keys[k]);
        fputc('\n', d->schedule_log);
    }
    if (round && round % d->rounds_per_iteration == 0) {
        if (!isfinite(sums[n])) d->diverged = 1;
        if (d->rank == 0) write_metrics(d, &d->snaps[round % d->depth], sums[n]);
        if (d->diverged) return 1;
    }
    if ((round + 1) % d->rounds_per_iteration) return 0;
    /* The end of an iteration: the sequential reference's stopping rule,
     * over the window once every coordinate was updated in it. */
    d->iteration++;
    if (d->iteration >= d->cli->train.iterations) return 1;
    if (d->window_count < p->dim) return 0;
    double max_beta = 0;
    for (uint64_t j = 0; j < p->dim; j++) max_beta = fmax(max_beta, fabs(d->beta[j]));
    int stop = d->window_max <= d->cli->train.tol * fmax(1, max_beta);
    memset(d->in_window, 0, (size_t)p->dim);
    d->window_count = 0;
    d->window_max = 0;
    return stop;
}

static const int schedule_of[] = {LOOM_DYN_PRIORITY, LOOM_DYN_RANDOM, LOOM_DYN_ROUND_ROBIN};

/* The final objective from every worker's ||r||^2 (a sum table). */
static int final_objective(loom_node *n, dist *d, double *objective)
{
    app_stats st;
    double rr = rows_sq(d), total = 0;
    int rc = 0;
    if (!n) {
        total = rr;
    } else {
        rc = app_stats_open(n, "lasso.final", 1, &st);
        if (!rc) rc = app_stats_add(&st, 0, &rr);
        if (!rc) rc = loom_barrier(n);
        if (!rc) rc = app_stats_read(&st, 0, &total);
    }
    *objective = lasso_objective(d->p, total, d->beta, d->lambda);
    return rc;
}

/* A worker of a job, or (n NULL) the engine's rounds in this process. */
static int train(loom_node *n, const lasso_cli *cli)
{
    char err[512];
    loom_libsvm_opts lo = LOOM_LIBSVM_OPTS_DEFAULT;
    lo.labels = LOOM_LABELS_REAL;
    loom_dataset *data = NULL;
    if (loom_libsvm_read(cli->job.train_path, 0, 1, &lo, &data, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", PROG, err);
        return 1;
    }
    if (data->rows == 0) {
        loom_dataset_free(data);
        if (n)
            app_fail_together(n, "%s: %s: no examples", PROG, cli->job.train_path);
        else
            fprintf(stderr, "%s: %s: no examples\n", PROG, cli->job.train_path);
        return 1;
    }
    lasso_problem p;
    int rc = lasso_problem_from(data, cli->intercept, &p, err, sizeof err);
    loom_dataset_free(data);
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", PROG, cli->job.train_path, err);
        return 1;
    }
    int rank = n ? loom_rank(n) : 0, workers = n ? loom_num_workers(n) : 1;
    dist d = {.cli = cli, .p = &p, .rank = rank, .depth = cli->depth, .start = app_now_s()};
    double lambda_max = lasso_lambda_max(&p);
    d.lambda = cli->lambda_ratio > 0 ? cli->lambda_ratio * lambda_max : cli->train.lambda;
    lasso_model reference = {0};
    rc = 1;
    if (!(d.lambda > 0)) {
        if (rank == 0)
            fprintf(stderr,
                    "%s: %s: lambda_max is 0 (y is orthogonal to every feature), so "
                    "--lambda-ratio gives no lambda; give --lambda\n",
                    PROG, cli->job.train_path);
        goto out;
    }
    if (cli->reference_path) {
        if (lasso_model_load(cli->reference_path, &reference, err, sizeof err)) {
            fprintf(stderr, "%s: %s\n", PROG, err);
            goto out;
        }
        if (reference.dim != p.dim) {
            fprintf(stderr, "%s: %s has %llu coefficients, the data %llu features\n", PROG,
                    cli->reference_path, (unsigned long long)reference.dim,
                    (unsigned long long)p.dim);
            goto out;
        }
        d.reference = reference.beta;
        double m = 0;
        for (uint64_t j = 0; j < p.dim; j++) m = fmax(m, fabs(reference.beta[j]));
        d.reference_scale = CONVERGED_TOL * fmax(1, m);
    }
    app_team_split(p.n, workers, rank, &d.lo, &d.hi);
    d.beta = calloc(p.dim ? (size_t)p.dim : 1, sizeof *d.beta);
    d.snaps = calloc(cli->depth, sizeof *d.snaps);
    d.in_window = calloc(p.dim ? (size_t)p.dim : 1, 1);
    if (!d.beta || !d.snaps || !d.in_window || lasso_residual_init(&p, d.beta, &d.r)) {
        fprintf(stderr, "%s: out of memory for %llu coefficients\n", PROG,
                (unsigned long long)p.dim);
        goto out;
    }
    /* The default P suits a wide problem; on a narrow one (abalone's 8 features
     * are 4 a shard for 2 workers) it would be refused for exceeding a shard,
     * an error the user did not ask for. So the default shrinks to what the
     * smallest shard holds over --depth rounds in flight; a --parallel the user
     * gave is kept, and refused by the engine if impossible. No room at all
     * (fewer features than workers) is left to the engine's sentence too. */
    uint32_t parallel = cli->parallel;
    uint64_t room = p.dim / (uint64_t)workers / cli->depth;
    if (cli->parallel_default && room >= 1 && room < parallel) {
        parallel = (uint32_t)room;
        if (rank == 0 && !cli->job.quiet)
            fprintf(stderr,
                    "%s: --parallel %u: the default %u exceeds the %llu features a shard has "
                    "for each of %u rounds in flight\n",
                    PROG, parallel, cli->parallel, (unsigned long long)(p.dim / (uint64_t)workers),
                    cli->depth);
    }
    loom_dyn_opts o = {.dim = p.dim,
                       .parallel = parallel,
                       .candidates = cli->candidates ? cli->candidates : 4 * parallel,
                       .rho = cli->rho,
                       .floor = cli->priority_floor,
                       .depth = cli->depth,
                       .extra = 1,
                       .schedule = schedule_of[cli->schedule],
                       .seed = cli->job.seed};
    if (o.schedule == LOOM_DYN_PRIORITY && cli->no_priority) o.schedule = LOOM_DYN_UNIFORM;
    d.rounds_per_iteration = (p.dim + o.parallel - 1) / o.parallel;
    /* One round more than the iterations: its partial sums carry the last
     * iteration's objective. */
    o.max_rounds = d.rounds_per_iteration * (uint64_t)cli->train.iterations + 1;
    if (rank == 0) {
        if (cli->job.metrics_path && !(d.metrics = fopen(cli->job.metrics_path, "w"))) {
            fprintf(stderr, "%s: cannot create %s: %s\n", PROG, cli->job.metrics_path,
                    strerror(errno));
            goto out;
        }
        if (cli->schedule_log && !(d.schedule_log = fopen(cli->schedule_log, "w"))) {
            fprintf(stderr, "%s: cannot create %s: %s\n", PROG, cli->schedule_log, strerror(errno));
            goto out;
        }
        if (!cli->job.quiet)
            fprintf(stderr,
                    "%zu rows, %llu features, lambda %.9g (lambda_max %.9g), %d workers, %u "
                    "parallel updates, depth %u\n",
                    p.n, (unsigned long long)p.dim, d.lambda, lambda_max, workers, o.parallel,
                    o.depth);
    }
    loom_dyn_app app = {.arg = &d, .coupling = coupling, .partial = partial, .apply = apply};
    uint64_t rounds = 0;
    int erc = n ? loom_dyn_run(n, &o, &app, &rounds, err, sizeof err)
                : loom_dyn_run_local(&o, &app, &rounds, err, sizeof err);
    if (erc) {
        fprintf(stderr, "%s: %s%s%s\n", PROG, loom_strerror(erc), err[0] ? ": " : "", err);
        goto out;
    }
    double objective = 0;
    if ((erc = final_objective(n, &d, &objective))) {
        rc = app_fail(PROG, "final objective", erc);
        goto out;
    }
    rc = d.failed;
    if (d.diverged) {
        if (rank == 0)
            fprintf(stderr, "%s: diverged after %llu updates (a coefficient is not finite)\n", PROG,
                    (unsigned long long)d.updates);
        rc = 1;
    } else if (rank == 0) {
        uint64_t nnz = 0;
        for (uint64_t j = 0; j < p.dim; j++) nnz += d.beta[j] != 0;
        if (!cli->job.quiet)
            fprintf(stderr, "done: %llu rounds, %llu updates, objective %.17g, nnz %llu\n",
                    (unsigned long long)rounds, (unsigned long long)d.updates, objective,
                    (unsigned long long)nnz);
        lasso_model m = {.dim = p.dim,
                         .lambda = d.lambda,
                         .intercept = lasso_intercept(&p, &d.r),
                         .beta = d.beta};
        if (cli->job.model_path && lasso_model_save(&m, cli->job.model_path, err, sizeof err)) {
            fprintf(stderr, "%s: %s\n", PROG, err);
            rc = 1;
        }
    }
out:
    if (d.metrics && fclose(d.metrics) && !d.failed) {
        fprintf(stderr, "%s: cannot write %s: %s\n", PROG, cli->job.metrics_path, strerror(errno));
        rc = 1;
    }
    if (d.schedule_log && fclose(d.schedule_log)) {
        fprintf(stderr, "%s: cannot write %s: %s\n", PROG, cli->schedule_log, strerror(errno));
        rc = 1;
    }
    lasso_residual_free(&d.r);
    free(d.beta);
    free(d.snaps);
    free(d.in_window);
    lasso_model_free(&reference);
    lasso_problem_free(&p);
    return rc;
}

static int worker_main(loom_node *n, const void *cli)
{
    return train(n, cli);
}

int lasso_train_node(const void *cli)
{
    return app_node_main(PROG, worker_main, cli);
}

int lasso_train_in_process(const lasso_cli *cli)
{
    return train(NULL, cli);
}
