/* gen: `loom gen fm`, click-log-like rows whose labels depend on pairwise
 * interactions of features, so that a factorization machine has something
 * to find that logistic regression cannot.
 *
 * The rows, the popularity power law, the planted sparse linear model and
 * the labels are lr's generator (apps/lr/gen.c); fm adds one term to every
 * row's margin (lr_gen_extra): the interactions of a planted rank-r
 * factorization machine,
 *     sum_{i<j in row} <U_i, U_j> = 1/2 (||sum_i U_i||^2 - sum_i ||U_i||^2),
 * every feature with an r-vector U_i uniform in [-1, 1)^r. lr's calibration
 * scales the term so that its standard deviation over the pilot rows is
 * --interactions (the linear part's is 2), and picks the bias with it. Rare
 * features have factors too, as in real logs; no model can learn those from
 * the few rows they are in, which is what DiFacto's memory-adaptive
 * constraint (--threshold of `loom train fm`) bets on. --interactions 0
 * gives lr's data exactly.
 *
 * U comes from the seed by splitmix64 and the term is computed with +, -, *
 * only: the same file on every machine, as lr's generator promises. */
#include "fm/fm.h"

#include <stdlib.h>

#include "common/files.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#define CMD "loom gen fm"
/* Not one of lr's streams' numbers (apps/lr/gen.c), so U is independent of the rows. */
#define STREAM_FACTORS 0x464d

typedef struct planted {
    uint32_t rank;
    double *u; /* features x rank */
} planted;

static double interactions(const uint64_t *ids, uint32_t nnz, void *user)
{
    const planted *p = user;
    double s[64] = {0}, sq = 0, ss = 0;
    for (uint32_t k = 0; k < nnz; k++) {
        const double *u = p->u + ids[k] * p->rank;
        for (uint32_t c = 0; c < p->rank; c++) {
            s[c] += u[c];
            sq += u[c] * u[c];
        }
    }
    for (uint32_t c = 0; c < p->rank; c++) ss += s[c] * s[c];
    return 0.5 * (ss - sq);
}

static const app_flag gen_flags[] = {
    APP_FLAG_GEN_OUT("rows"),
    LR_GEN_FLAGS,
    {.name = "--rank",
     .kind = APP_INT,
     .arg = "R",
     .lo = 1,
     .hi = 64,
     .def = "4",
     .help = "factors per feature of the planted interactions"},
    {.name = "--interactions",
     .kind = APP_NUM,
     .arg = "S",
     .min = 0,
     .max = 100,
     .def = "2",
     .help = "standard deviation of the interaction term of the margin (the\n"
             "linear part's is 2); 0: no interactions (lr's data)"},
    {.name = "--quiet", .kind = APP_SWITCH, .help = "no progress messages on standard error"},
};
#define NFLAGS (sizeof gen_flags / sizeof gen_flags[0])

void fm_gen_help(FILE *out)
{
    app_command_help(
        out,
        "loom gen fm --out FILE [OPTIONS]\n"
        "\n"
        "Writes LIBSVM rows like `loom gen lr` (power-law feature popularity, a planted\n"
        "sparse linear model), whose labels also depend on planted pairwise interactions\n"
        "of the features: a rank-R factorization machine. The same options give the same\n"
        "file on every machine. See docs/FM.md.\n"
        "\n"
        "Options (--name value or --name=value):\n",
        gen_flags, NFLAGS, 0);
}

int fm_gen_main(int argc, char **argv)
{
    app_flag_value v[NFLAGS];
    int rc = app_command_flags(CMD, gen_flags, NFLAGS, v, argc, argv, fm_gen_help);
    if (rc) return rc < 0 ? 0 : rc;
    lr_gen_opts o = LR_GEN_OPTS_DEFAULT;
    if ((rc = lr_gen_read_flags(CMD, gen_flags, NFLAGS, v, &o))) return rc;
    const app_flag_value *x;
    const char *path = (x = app_flag_get(gen_flags, NFLAGS, v, "--out")) ? x->text : NULL;
    if (!path) return app_command_usage(CMD, "--out FILE is required (- for standard output)");
    planted p = {.rank = (x = app_flag_get(gen_flags, NFLAGS, v, "--rank")) ? (uint32_t)x->u : 4};
    lr_gen_extra extra = {interactions, &p, 2};
    if ((x = app_flag_get(gen_flags, NFLAGS, v, "--interactions"))) extra.std = x->x;
    if (extra.std > 0) {
        if (!(p.u = malloc(o.features * p.rank * sizeof *p.u))) {
            fprintf(stderr, CMD ": out of memory for %llu features\n",
                    (unsigned long long)o.features);
            return 1;
        }
        uint64_t st = o.seed ^ ((uint64_t)STREAM_FACTORS * 0xd1b54a32d192ed03ULL);
        for (uint64_t j = 0; j < o.features * p.rank; j++)
            p.u[j] = (double)(app_splitmix64(&st) >> 11) * 0x1.0p-52 - 1;
    }
    app_out out;
    if (app_out_open(&out, CMD, path)) {
        free(p.u);
        return 1;
    }
    static char buf[1 << 20];
    setvbuf(out.f, buf, _IOFBF, sizeof buf);
    char err[512];
    int quiet = app_flag_get(gen_flags, NFLAGS, v, "--quiet") != NULL;
    rc = lr_generate_extra(&o, extra.std > 0 ? &extra : NULL, out.f, NULL, quiet ? NULL : CMD, err,
                           sizeof err);
    if (rc) fprintf(stderr, CMD ": %s: %s\n", app_out_name(&out), err);
    free(p.u);
    return app_out_close(&out, CMD, rc != 0) || rc ? 1 : 0;
}
