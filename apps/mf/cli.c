/* cli: `loom gen mf` and `loom predict mf`.
 *
 * tools/gen.c and tools/predict.c each have one row pointing here, so the
 * matrix-factorisation commands live with the application they belong to.
 * Both read their flags through the table parser of apps/common ("--flag
 * value" or "--flag=value", each flag once), which also prints their help;
 * usage errors exit 2, failures to read or write exit 1. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "common/files.h"
#include "mf/mf.h"

/* The flags of the two commands: the parser reads the command line against
 * these tables and the help is printed from them (apps/common). */
static const app_flag gen_flags[] = {
    APP_FLAG_GEN_OUT("ratings"),
    {.name = "--users",
     .kind = APP_INT,
     .arg = "U",
     .lo = 1,
     .hi = 100000000,
     .def = "1000",
     .help = "number of users"},
    {.name = "--items",
     .kind = APP_INT,
     .arg = "I",
     .lo = 1,
     .hi = 100000000,
     .def = "2000",
     .help = "number of items"},
    {.name = "--ratings",
     .kind = APP_INT,
     .arg = "N",
     .lo = 1,
     .hi = 10000000000ull,
     .def = "100000",
     .help = "at most U x I/3 (a user rates at most a third of the\n"
             "items)"},
    {.name = "--rank",
     .kind = APP_INT,
     .arg = "K",
     .lo = 1,
     .hi = MF_MAX_RANK,
     .def = "8",
     .help = "rank of the planted factors"},
    {.name = "--noise",
     .kind = APP_NUM,
     .arg = "S",
     .min = 0,
     .max = 100,
     .def = "0.5",
     .help = "standard deviation of the noise"},
    APP_FLAG_GEN_SEED,
    {.name = "--real",
     .kind = APP_SWITCH,
     .help = "real-valued ratings (no rounding, no clipping)"},
    {.name = "--planted-out",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "also save the planted model (a `loom predict mf` model): the\n"
             "RMSE it gets is the noise level, the best a model can do"},
    {.name = "--quiet", .kind = APP_SWITCH, .help = "no progress messages"},
};
#define GEN_NFLAGS (sizeof gen_flags / sizeof gen_flags[0])

static const app_flag predict_flags[] = {
    {.name = "--model",
     .kind = APP_TEXT,
     .arg = "M",
     .help = "the model file of `loom train mf --model-out` (required)"},
    {.name = "--data",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "ratings \"user item rating [timestamp]\" (required)"},
    {.name = "--out",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "also write every rating's prediction, one per line in file order\n"
             "(%.6f); - for standard output (the summary then goes to stderr)"},
    {.name = "--format",
     .kind = APP_CHOICE,
     .arg = "tsv|csv|space",
     .def = "detect",
     .help = "field separator"},
};
#define PREDICT_NFLAGS (sizeof predict_flags / sizeof predict_flags[0])

static void gen_help(FILE *out)
{
    fputs("usage: loom gen mf --out FILE [options]\n"
          "\n"
          "Write ratings \"user item rating timestamp\" (TSV, ids 1-based, sorted by user then\n"
          "item, distinct pairs) from a planted model mean + b_u + b_i + p_u.q_i plus Gaussian\n"
          "noise, rounded to half stars in [0.5, 5] like MovieLens. User activity and item\n"
          "popularity follow power laws. The same options give the same file. See docs/MF.md.\n"
          "\n"
          "options (--name value or --name=value):\n",
          out);
    app_flags_help(out, gen_flags, GEN_NFLAGS);
    fputs("\nExit status: 0 on success, 1 if writing failed, 2 for a usage error.\n", out);
}

static void predict_help(FILE *out)
{
    fputs("usage: loom predict mf --model M --data RATINGS [--out FILE] [--format tsv|csv|space]\n"
          "\n"
          "Prints \"ratings N  rmse R  mae A  unknown_users U  unknown_items I\" for the ratings\n"
          "file: the errors of the model's predictions, clipped to the training ratings' range.\n"
          "Users or items the model has not seen get zero factors and bias (mean + the known\n"
          "bias). See docs/MF.md.\n"
          "\n"
          "options (--name value or --name=value):\n",
          out);
    app_flags_help(out, predict_flags, PREDICT_NFLAGS);
    fputs("\nExit status: 0 on success, 1 if a file could not be read or written, 2 for a\n"
          "usage error.\n",
          out);
}

/* ---- loom gen mf ---- */

int mf_gen_main(int argc, char **argv)
{
    const char *cmd = "loom gen mf";
    app_flag_value values[GEN_NFLAGS];
    int rc = app_command_flags(cmd, gen_flags, GEN_NFLAGS, values, argc, argv, gen_help);
    if (rc) return rc < 0 ? 0 : rc;
    mf_gen_opts o = MF_GEN_OPTS_DEFAULT;
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(gen_flags, GEN_NFLAGS, values, name))
    if (!GIVEN("--out"))
        return app_command_usage(cmd, "--out FILE is required (- for standard output)");
    const char *out = x->text;
    const char *planted_out = GIVEN("--planted-out") ? x->text : NULL;
    if (GIVEN("--users")) o.users = x->u;
    if (GIVEN("--items")) o.items = x->u;
    if (GIVEN("--ratings")) o.ratings = x->u;
    if (GIVEN("--rank")) o.rank = (uint32_t)x->u;
    if (GIVEN("--seed")) o.seed = x->u;
    if (GIVEN("--noise")) o.noise = x->x;
    o.real = GIVEN("--real") != NULL;
    int quiet = GIVEN("--quiet") != NULL;
#undef GIVEN
    app_out f;
    if (app_out_open(&f, cmd, out)) return 1;
    static char buf[1 << 20];
    setvbuf(f.f, buf, _IOFBF, sizeof buf);
    char err[512];
    mf_model planted = {0};
    rc = mf_generate(&o, f.f, planted_out ? &planted : NULL, !quiet, err, sizeof err);
    if (rc && rc != 2) fprintf(stderr, "%s: %s: %s\n", cmd, app_out_name(&f), err);
    if (app_out_close(&f, cmd, rc != 0)) {
        mf_model_free(&planted);
        return rc == 2 ? app_command_usage(cmd, "%s", err) : 1;
    }
    if (planted_out) {
        rc = mf_model_save(&planted, planted_out, err, sizeof err);
        mf_model_free(&planted);
        if (rc) {
            fprintf(stderr, "%s: %s\n", cmd, err);
            return 1;
        }
    }
    return 0;
}

/* ---- loom predict mf ---- */

int mf_predict_main(int argc, char **argv)
{
    const char *cmd = "loom predict mf";
    app_flag_value values[PREDICT_NFLAGS];
    int rc =
        app_command_flags(cmd, predict_flags, PREDICT_NFLAGS, values, argc, argv, predict_help);
    if (rc) return rc < 0 ? 0 : rc;
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(predict_flags, PREDICT_NFLAGS, values, name))
    if (!GIVEN("--model")) return app_command_usage(cmd, "--model M is required");
    const char *model = x->text;
    if (!GIVEN("--data")) return app_command_usage(cmd, "--data FILE is required");
    const char *data = x->text;
    const char *out = GIVEN("--out") ? x->text : NULL;
    loom_ratings_opts ro = LOOM_RATINGS_OPTS_DEFAULT;
    static const char separators[] = {'\t', ',', ' '}; /* in the order of the choices */
    if (GIVEN("--format")) ro.separator = separators[x->choice];
#undef GIVEN
    char err[1024];
    mf_model m;
    if (mf_model_load(model, &m, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return 1;
    }
    loom_ratings *r;
    if (loom_ratings_read(data, 0, 1, &ro, &r, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        mf_model_free(&m);
        return 1;
    }
    rc = 0;
    app_out o = {0};
    if (r->n == 0) {
        fprintf(stderr, "%s: %s: no ratings\n", cmd, data);
        rc = 1;
    } else if (out && app_out_open(&o, cmd, out)) {
        rc = 1;
    }
    FILE *f = o.f;
    double sse = 0, sae = 0;
    size_t unknown_u = 0, unknown_i = 0;
    /* Every id of the file, looked up once (the reader's indices are dense). */
    int64_t *umap = malloc((r->users ? r->users : 1) * sizeof *umap);
    int64_t *imap = malloc((r->items ? r->items : 1) * sizeof *imap);
    if (!rc && (!umap || !imap)) {
        fprintf(stderr, "%s: out of memory\n", cmd);
        rc = 1;
    }
    for (size_t u = 0; !rc && u < r->users; u++) {
        umap[u] = mf_model_user(&m, r->user_id[u]);
        unknown_u += umap[u] < 0;
    }
    for (size_t i = 0; !rc && i < r->items; i++) {
        imap[i] = mf_model_item(&m, r->item_id[i]);
        unknown_i += imap[i] < 0;
    }
    for (size_t k = 0; !rc && k < r->n; k++) {
        double p = mf_model_predict(&m, umap[r->user[k]], imap[r->item[k]]);
        double e = r->rating[k] - p;
        sse += e * e;
        sae += fabs(e);
        if (f) fprintf(f, "%.6f\n", p);
    }
    if (f && app_out_close(&o, cmd, rc)) rc = 1;
    if (!rc) {
        FILE *summary = f == stdout ? stderr : stdout;
        fprintf(summary, "ratings %zu  rmse %.6f  mae %.6f  unknown_users %zu  unknown_items %zu\n",
                r->n, sqrt(sse / (double)r->n), sae / (double)r->n, unknown_u, unknown_i);
        if (fflush(summary)) rc = 1;
    }
    free(umap);
    free(imap);
    loom_ratings_free(r);
    mf_model_free(&m);
    return rc;
}
