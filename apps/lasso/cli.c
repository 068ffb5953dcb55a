/* cli: `loom gen lasso`, `loom train lasso` and `loom predict lasso`.
 *
 * tools/gen.c, tools/train.c and tools/predict.c each have one row pointing
 * here. All three read their flags through the table parser of apps/common,
 * which also prints their help; usage errors exit 2, failures to read or
 * write exit 1. `loom train lasso --sequential` runs the reference in this
 * process; without it, `loom train lasso` is a job scheduled by the dynamic
 * engine (dist.c). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/files.h"
#include "lasso/lasso.h"

/* ---- loom gen lasso ---- */

static const app_flag gen_flags[] = {
    APP_FLAG_GEN_OUT("rows"),
    {.name = "--rows",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = UINT32_MAX,
     .def = "1000",
     .help = "number of rows"},
    {.name = "--features",
     .kind = APP_INT,
     .arg = "F",
     .lo = 1,
     .hi = LASSO_MAX_DIM,
     .def = "1000",
     .help = "number of features, ids 1 to F"},
    {.name = "--group",
     .kind = APP_INT,
     .arg = "G",
     .lo = 1,
     .hi = 1000000,
     .def = "10",
     .help = "features per correlated group (consecutive ids)"},
    {.name = "--corr",
     .kind = APP_NUM,
     .arg = "C",
     .min = 0,
     .max = 0.999999,
     .def = "0.8",
     .help = "correlation of two features of one group"},
    {.name = "--density",
     .kind = APP_NUM,
     .arg = "P",
     .min = 1e-9,
     .max = 1,
     .def = "1",
     .help = "probability that a row has a group's features (else they are 0)"},
    {.name = "--nonzeros",
     .kind = APP_INT,
     .arg = "K",
     .lo = 0,
     .hi = LASSO_MAX_DIM,
     .def = "20",
     .help = "planted non-zero coefficients, +-U[1,2], at most F"},
    {.name = "--noise",
     .kind = APP_NUM,
     .arg = "S",
     .min = 0,
     .max = 1e6,
     .def = "0.1",
     .help = "standard deviation of the noise added to y"},
    {.name = "--intercept",
     .kind = APP_NUM,
     .arg = "B",
     .min = -1e6,
     .max = 1e6,
     .def = "0",
     .help = "planted intercept, added to every y"},
    APP_FLAG_GEN_SEED,
    {.name = "--planted-out",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "also save the planted beta as a model file (loom predict lasso)"},
};
#define GEN_NFLAGS (sizeof gen_flags / sizeof gen_flags[0])

void lasso_gen_help(FILE *out)
{
    app_command_help(
        out,
        "loom gen lasso --out FILE [OPTIONS]\n"
        "\n"
        "Writes LIBSVM regression rows (\"y 3:0.52 4:-1.1 ...\"): features in correlated\n"
        "groups, y = b + x.beta + noise for a planted intercept b and sparse beta. The\n"
        "same options give the same file. See docs/LASSO.md.\n"
        "\n"
        "Options (--name value or --name=value):\n",
        gen_flags, GEN_NFLAGS, 0);
}

int lasso_gen_main(int argc, char **argv)
{
    static const char cmd[] = "loom gen lasso";
    app_flag_value v[GEN_NFLAGS];
    char err[512];
    int rc = app_command_flags(cmd, gen_flags, GEN_NFLAGS, v, argc, argv, lasso_gen_help);
    if (rc) return rc < 0 ? 0 : rc;
    lasso_gen_opts o = LASSO_GEN_OPTS_DEFAULT;
    const char *path = NULL, *planted_path = NULL;
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(gen_flags, GEN_NFLAGS, v, name))
    if (GIVEN("--out")) path = x->text;
    if (GIVEN("--planted-out")) planted_path = x->text;
    if (GIVEN("--rows")) o.rows = x->u;
    if (GIVEN("--features")) o.features = x->u;
    if (GIVEN("--group")) o.group = (uint32_t)x->u;
    if (GIVEN("--corr")) o.corr = x->x;
    if (GIVEN("--density")) o.density = x->x;
    if (GIVEN("--nonzeros")) o.nonzeros = x->u;
    if (GIVEN("--noise")) o.noise = x->x;
    if (GIVEN("--intercept")) o.intercept = x->x;
    if (GIVEN("--seed")) o.seed = x->u;
#undef GIVEN
    if (!path) return app_command_usage(cmd, "--out FILE is required (- for standard output)");
    if (o.nonzeros > o.features)
        return app_command_usage(cmd, "--nonzeros (%llu) must be at most --features (%llu)",
                                 (unsigned long long)o.nonzeros, (unsigned long long)o.features);
    if (o.group > o.features)
        return app_command_usage(cmd, "--group (%lu) must be at most --features (%llu)",
                                 (unsigned long)o.group, (unsigned long long)o.features);

    app_out out;
    if (app_out_open(&out, cmd, path)) return 1;
    lasso_model planted = {0};
    rc = lasso_generate(&o, out.f, planted_path ? &planted : NULL, err, sizeof err);
    if (rc) fprintf(stderr, "%s: %s: %s\n", cmd, app_out_name(&out), err);
    if (app_out_close(&out, cmd, rc != 0)) {
        lasso_model_free(&planted);
        return 1;
    }
    if (planted_path) {
        rc = lasso_model_save(&planted, planted_path, err, sizeof err);
        lasso_model_free(&planted);
        if (rc) {
            fprintf(stderr, "%s: %s\n", cmd, err);
            return 1;
        }
    }
    return 0;
}

/* ---- loom train lasso ---- */

static const app_flag train_flags[] = {
    {.section = "data:",
     .name = "--train",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "LIBSVM regression rows \"y id:value ...\" (required)"},
    {.section = "algorithm:",
     .name = "--sequential",
     .kind = APP_SWITCH,
     .excludes = "--schedule",
     .help = "cyclic coordinate descent in this process, the reference of\n"
             "the scheduled engine (no job)"},
    {.name = "--in-process",
     .kind = APP_SWITCH,
     .excludes = "--sequential",
     .help = "the scheduled engine's rounds in this process, without a job: the\n"
             "results of a one-worker job bit for bit (for counting updates)"},
    {.name = "--schedule",
     .kind = APP_CHOICE,
     .arg = "dynamic|random|rotation",
     .def = "dynamic",
     .help = "which coordinates a round updates (docs/LASSO.md): sampled by\n"
             "priority and checked for coupling (dynamic), uniform with no check\n"
             "(random: Shotgun), consecutive blocks in turn (rotation)"},
    {.name = "--parallel",
     .kind = APP_INT,
     .arg = "P",
     .lo = 1,
     .hi = LOOM_DYN_MAX_PARALLEL,
     .def = "8",
     .help = "coordinates updated together in a round (default: 8, or every\n"
             "coordinate of the smallest shard if it has fewer, with --depth)"},
    {.name = "--candidates",
     .kind = APP_INT,
     .arg = "L",
     .lo = 1,
     .hi = 1 << 20,
     .def = "4P",
     .help = "dynamic: coordinates sampled per round before the dependency check"},
    {.name = "--rho",
     .kind = APP_NUM,
     .arg = "R",
     .min = 0,
     .max = 1,
     .def = "0.1",
     .help = "dynamic: no two coordinates whose columns' |correlation|\n"
             "|x_i.x_j| / (|x_i| |x_j|), x less its mean with an intercept,\n"
             "exceeds R in one round (1: no check)"},
    {.name = "--priority-floor",
     .kind = APP_NUM,
     .arg = "F",
     .min = 1e-12,
     .max = 1e12,
     .def = "1e-3",
     .help = "dynamic: priority (change)^2 + F times the mean (change)^2 of\n"
             "the first visits"},
    {.name = "--no-priority",
     .kind = APP_SWITCH,
     .help = "dynamic: sample candidates uniformly (the dependency check stays)"},
    {.name = "--depth",
     .kind = APP_INT,
     .arg = "S",
     .lo = 1,
     .hi = LOOM_DYN_MAX_DEPTH,
     .def = "1",
     .help = "rounds in flight: a round sees the updates of all but the\n"
             "S - 1 rounds before it"},
    {.name = "--no-intercept",
     .kind = APP_SWITCH,
     .help = "fit y ~ x.beta, without the unpenalised intercept b that is fitted\n"
             "by default (as scikit-learn's fit_intercept=False)"},
    {.name = "--lambda",
     .kind = APP_NUM,
     .arg = "L",
     .min = 0,
     .max = 1e300,
     .excludes = "--lambda-ratio",
     .help = "the L1 weight, above 0"},
    {.name = "--lambda-ratio",
     .kind = APP_NUM,
     .arg = "R",
     .min = 0,
     .max = 1,
     .def = "0.1",
     .help = "lambda = R * lambda_max, the smallest lambda whose\n"
             "solution is 0 (max_j |x_j.(y - mean y)| / n; without an intercept\n"
             "max_j |x_j.y| / n); 0 < R <= 1"},
    {.name = "--iterations",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = 1000000,
     .def = "1000",
     .help = "at most N passes over all coordinates"},
    {.name = "--tol",
     .kind = APP_NUM,
     .arg = "T",
     .min = 0,
     .max = 1,
     .def = "1e-6",
     .help = "stop after a pass in which no coefficient moved by more\n"
             "than T * max(1, max |beta_j|) (0: in which none moved)"},
    {.name = "--seed",
     .kind = APP_INT,
     .arg = "S",
     .lo = 0,
     .hi = UINT64_MAX,
     .def = "1",
     .help = "seed of the schedule's sampling"},
    {.name = "--reference",
     .kind = APP_TEXT,
     .arg = "MODEL",
     .help = "a model (e.g. from --sequential --tol 1e-12): the metrics count\n"
             "the coefficients within 1e-3 of it (\"converged\")"},
    APP_FLAGS_JOB,
    APP_FLAGS_OUTPUT("JSON line per pass: objective, train_rmse, nnz, ...",
                     "save the model (format: docs/LASSO.md)"),
    {.name = "--schedule-log",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "write every round's coordinates, \"ROUND K1 K2 ...\""},
};
#define TRAIN_NFLAGS (sizeof train_flags / sizeof train_flags[0])

void lasso_train_help(FILE *out)
{
    app_command_help(
        out,
        "usage: loom train lasso --train FILE [--sequential | --schedule S] [options]\n"
        "\n"
        "Fit min_{b,beta} 1/(2n) ||y - b - X beta||^2 + lambda ||beta||_1 (b, the\n"
        "intercept, unpenalised; --no-intercept fixes it at 0) by coordinate descent\n"
        "with soft-thresholding (docs/LASSO.md): in a job whose\n"
        "rounds of --parallel coordinates Loom's dynamic engine schedules\n"
        "(docs/SCHED.md), or with --sequential in this process.\n"
        "\n",
        train_flags, TRAIN_NFLAGS, 1);
}

int lasso_parse_flags(int argc, char **argv, void *out, char *err, size_t errlen)
{
    lasso_cli *cli = out;
    *cli = (lasso_cli){
        .train = {.iterations = 1000, .tol = 1e-6}, .lambda_ratio = 0.1, .intercept = 1};
    app_flag_value v[TRAIN_NFLAGS];
    int rc = app_train_flags(&cli->job, 0, train_flags, TRAIN_NFLAGS, argc, argv, v, err, errlen);
    if (rc) return rc;
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(train_flags, TRAIN_NFLAGS, v, name))
    cli->sequential = GIVEN("--sequential") != NULL;
    cli->in_process = GIVEN("--in-process") != NULL;
    cli->intercept = GIVEN("--no-intercept") == NULL;
    if (cli->in_process && (GIVEN("--workers") || GIVEN("--servers")))
        return app_usage(err, errlen,
                         "--workers and --servers are for a job; --in-process starts none");
    /* Training in this process starts no job: one process reads all the data. */
    if (cli->sequential || cli->in_process) cli->job.workers = 1;
    cli->parallel = 8;
    cli->rho = 0.1;
    cli->priority_floor = 1e-3;
    cli->depth = 1;
    if (GIVEN("--schedule")) cli->schedule = (int)x->choice;
    if (GIVEN("--parallel")) cli->parallel = (uint32_t)x->u;
    cli->parallel_default = !x;
    if (GIVEN("--candidates")) cli->candidates = (uint32_t)x->u;
    if (GIVEN("--rho")) cli->rho = x->x;
    if (GIVEN("--priority-floor")) cli->priority_floor = x->x;
    if (GIVEN("--depth")) cli->depth = (uint32_t)x->u;
    cli->no_priority = GIVEN("--no-priority") != NULL;
    if (GIVEN("--schedule-log")) cli->schedule_log = x->text;
    if (GIVEN("--reference")) cli->reference_path = x->text;
    if (!cli->sequential && !cli->in_process && cli->job.servers == 0)
        return app_usage(err, errlen,
                         "--servers 0: a Lasso job adds its final objective on a server");
    if (cli->job.threads > 1)
        return app_usage(err, errlen, "--threads: a Lasso worker computes in one thread");
    if (cli->candidates && cli->candidates < cli->parallel)
        return app_usage(err, errlen, "--candidates %u is below --parallel %u", cli->candidates,
                         cli->parallel);
    if (GIVEN("--lambda")) {
        if (x->x <= 0)
            return app_usage(err, errlen, "--lambda takes a number above 0, not '%s'", x->text);
        cli->train.lambda = x->x;
        cli->lambda_ratio = 0;
    }
    if (GIVEN("--lambda-ratio")) {
        if (x->x <= 0)
            return app_usage(err, errlen, "--lambda-ratio takes a number in (0, 1], not '%s'",
                             x->text);
        cli->lambda_ratio = x->x;
    }
    if (GIVEN("--iterations")) cli->train.iterations = (int)x->u;
    if (GIVEN("--tol")) cli->train.tol = x->x;
    if (!cli->job.train_path) return app_usage(err, errlen, "--train FILE is required");
    if (cli->sequential) {
        static const char *const engine_only[] = {
            "--parallel", "--candidates", "--rho",          "--priority-floor", "--no-priority",
            "--depth",    "--reference",  "--schedule-log", "--workers",        "--servers"};
        for (size_t i = 0; i < sizeof engine_only / sizeof *engine_only; i++)
            if (GIVEN(engine_only[i]))
                return app_usage(err, errlen, "%s is for the scheduled engine, not --sequential",
                                 engine_only[i]);
    }
#undef GIVEN
    return 0;
}

int lasso_trains_here(const void *out)
{
    const lasso_cli *cli = out;
    return cli->sequential || cli->in_process;
}

struct reporter {
    const lasso_cli *cli;
    FILE *metrics;
    int failed; /* writing the metrics failed (reported) */
};

static void report_pass(void *arg, const lasso_pass *s, const double *beta)
{
    (void)beta;
    struct reporter *r = arg;
    if (!r->cli->job.quiet)
        fprintf(stderr, "iteration %4d  objective %.9g  train rmse %.6f  nnz %llu  %.2f s\n",
                s->iteration, s->objective, s->train_rmse, (unsigned long long)s->nnz, s->seconds);
    if (!r->metrics || r->failed) return;
    fprintf(r->metrics,
            "{\"iteration\": %d, \"time_s\": %.3f, \"updates\": %llu, \"objective\": %.17g, "
            "\"train_rmse\": %.17g, \"nnz\": %llu, \"max_change\": %.9g}\n",
            s->iteration, s->seconds, (unsigned long long)s->updates, s->objective, s->train_rmse,
            (unsigned long long)s->nnz, s->max_change);
    /* Each line now, so that a full disk is reported when it happens. */
    if (app_metrics_flush("loom train lasso", r->metrics, r->cli->job.metrics_path)) r->failed = 1;
}

int lasso_train_here(const void *out)
{
    const lasso_cli *cli = out;
    if (cli->in_process) return lasso_train_in_process(cli);
    static const char prog[] = "loom train lasso";
    char err[512];
    loom_libsvm_opts lo = LOOM_LIBSVM_OPTS_DEFAULT;
    lo.labels = LOOM_LABELS_REAL;
    loom_dataset *d = NULL;
    if (loom_libsvm_read(cli->job.train_path, 0, 1, &lo, &d, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 1;
    }
    if (d->rows == 0) {
        fprintf(stderr, "%s: %s: no examples\n", prog, cli->job.train_path);
        loom_dataset_free(d);
        return 1;
    }
    lasso_problem p;
    int rc = lasso_problem_from(d, cli->intercept, &p, err, sizeof err);
    loom_dataset_free(d);
    if (rc) {
        fprintf(stderr, "%s: %s: %s\n", prog, cli->job.train_path, err);
        return 1;
    }
    lasso_train_opts o = cli->train;
    double lambda_max = lasso_lambda_max(&p);
    if (cli->lambda_ratio > 0) {
        o.lambda = cli->lambda_ratio * lambda_max;
        if (!(o.lambda > 0)) {
            fprintf(stderr,
                    "%s: %s: lambda_max is 0 (y is orthogonal to every feature), so "
                    "--lambda-ratio gives no lambda; give --lambda\n",
                    prog, cli->job.train_path);
            lasso_problem_free(&p);
            return 1;
        }
    }
    struct reporter r = {.cli = cli};
    if (cli->job.metrics_path && !(r.metrics = fopen(cli->job.metrics_path, "w"))) {
        fprintf(stderr, "%s: cannot create %s: %s\n", prog, cli->job.metrics_path, strerror(errno));
        lasso_problem_free(&p);
        return 1;
    }
    if (!cli->job.quiet)
        fprintf(stderr, "%zu rows, %llu features, lambda %.9g (lambda_max %.9g)\n", p.n,
                (unsigned long long)p.dim, o.lambda, lambda_max);
    lasso_model m = {.dim = p.dim, .lambda = o.lambda};
    rc = 1;
    if (!(m.beta = malloc((p.dim ? (size_t)p.dim : 1) * sizeof *m.beta))) {
        fprintf(stderr, "%s: out of memory for %llu coefficients\n", prog,
                (unsigned long long)p.dim);
    } else if (lasso_train_sequential(&o, &p, m.beta, &m.intercept, report_pass, &r) < 0) {
        fprintf(stderr, "%s: out of memory for the residual of %zu rows\n", prog, p.n);
    } else if (cli->job.model_path && lasso_model_save(&m, cli->job.model_path, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", prog, err);
    } else {
        rc = r.failed;
    }
    if (r.metrics && fclose(r.metrics) && !r.failed) {
        fprintf(stderr, "%s: cannot write %s: %s\n", prog, cli->job.metrics_path, strerror(errno));
        rc = 1;
    }
    lasso_model_free(&m);
    lasso_problem_free(&p);
    return rc;
}

/* ---- loom predict lasso ---- */

static const app_flag predict_flags[] = {
    APP_FLAG_MODEL_IN,
    {.name = "--data",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "LIBSVM regression rows (required)"},
    {.name = "--out",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "also write the prediction b + beta.x of every row, one per line\n"
             "(%.9g); - for standard output (the summary then goes to standard error)"},
};
#define PREDICT_NFLAGS (sizeof predict_flags / sizeof predict_flags[0])

void lasso_predict_help(FILE *out)
{
    app_command_help(
        out,
        "loom predict lasso --model M --data FILE [--out FILE]\n"
        "\n"
        "Prints \"rows N  rmse E  mae A\" of the model's predictions b + beta.x against\n"
        "the targets of FILE. See docs/LASSO.md.\n"
        "\n"
        "Options (--name value or --name=value):\n",
        predict_flags, PREDICT_NFLAGS, 1);
}

int lasso_predict_main(int argc, char **argv)
{
    static const char cmd[] = "loom predict lasso";
    app_flag_value v[PREDICT_NFLAGS];
    char err[512];
    int rc =
        app_command_flags(cmd, predict_flags, PREDICT_NFLAGS, v, argc, argv, lasso_predict_help);
    if (rc) return rc < 0 ? 0 : rc;
    const app_flag_value *x;
    const char *model =
        (x = app_flag_get(predict_flags, PREDICT_NFLAGS, v, "--model")) ? x->text : NULL;
    const char *data =
        (x = app_flag_get(predict_flags, PREDICT_NFLAGS, v, "--data")) ? x->text : NULL;
    const char *out =
        (x = app_flag_get(predict_flags, PREDICT_NFLAGS, v, "--out")) ? x->text : NULL;
    if (!model) return app_command_usage(cmd, "--model M is required");
    if (!data) return app_command_usage(cmd, "--data FILE is required");

    lasso_model m;
    if (lasso_model_load(model, &m, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return 1;
    }
    loom_libsvm_opts lo = LOOM_LIBSVM_OPTS_DEFAULT;
    lo.labels = LOOM_LABELS_REAL;
    loom_dataset *d = NULL;
    if (loom_libsvm_read(data, 0, 1, &lo, &d, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        lasso_model_free(&m);
        return 1;
    }
    rc = 1;
    app_out o = {0};
    if (d->rows == 0) {
        fprintf(stderr, "%s: %s: no examples\n", cmd, data);
    } else if (!out || app_out_open(&o, cmd, out) == 0) {
        double sse = 0, sae = 0;
        for (size_t i = 0; i < d->rows; i++) {
            double pred = lasso_predict_row(&m, d, i), e = pred - d->label[i];
            sse += e * e;
            sae += fabs(e);
            if (o.f) fprintf(o.f, "%.9g\n", pred);
        }
        rc = o.f ? app_out_close(&o, cmd, 0) : 0;
        if (rc == 0) {
            FILE *summary = o.f == stdout ? stderr : stdout;
            fprintf(summary, "rows %zu  rmse %.6f  mae %.6f\n", d->rows,
                    sqrt(sse / (double)d->rows), sae / (double)d->rows);
            rc = app_summary_flush(cmd, summary);
        }
    }
    loom_dataset_free(d);
    lasso_model_free(&m);
    return rc;
}
