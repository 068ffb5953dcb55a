/* loom gen: write synthetic data sets, so examples and tests need no download.
 *
 * `loom gen MODEL [OPTIONS]` looks MODEL up in the table of generators below
 * and hands it the rest of the command line. Each generator lives with its
 * application (apps/MODEL/cli.c): adding one is a row in the table, from
 * which the usage and the help are printed. */
#include "commands.h"

#include "common/app.h"

#include "lasso/lasso.h"
#include "lda/lda.h"
#include "lr/lr.h"
#include "mf/mf.h"
#include "mlr/mlr.h"

#include <stdio.h>
#include <string.h>

struct generator {
    const char *name;
    const char *summary;
    int (*fn)(int argc, char **argv); /* argv[0] is the generator's name */
};

/* The one list of generators: the usage and the help are printed from it. */
static const struct generator generators[] = {
    {"lr", "sparse binary classification rows from a planted logistic regression model",
     lr_gen_main},
    {"mf", "MovieLens-like ratings from a planted biased low-rank model", mf_gen_main},
    {"lda", "bag-of-words documents from a planted topic model", lda_gen_main},
    {"lasso", "regression rows with correlated feature groups and a planted sparse beta",
     lasso_gen_main},
    {"mlr", "multiclass rows from a planted softmax model", mlr_gen_main},
};

#define NUM_GENERATORS (sizeof generators / sizeof generators[0])

static void list_generators(FILE *out)
{
    for (size_t i = 0; i < NUM_GENERATORS; i++)
        fprintf(out, "  %-6s %s\n", generators[i].name, generators[i].summary);
}

static void print_usage(FILE *out)
{
    fprintf(out, "Usage: loom gen MODEL [OPTIONS]\n\nModels:\n");
    list_generators(out);
    fprintf(out, "\nRun 'loom help gen' for the options.\n");
}

/* The models, then lr's options; each other model's with loom gen MODEL --help. */
static void print_help(FILE *out)
{
    fputs("Usage: loom gen MODEL [OPTIONS]\n\nWrite a synthetic data set. MODEL is one of:\n", out);
    list_generators(out);
    fputs("(the options of one: loom gen MODEL --help; lr's follow)\n\n", out);
    lr_gen_help(out);
}

int cmd_gen(int argc, char **argv)
{
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        print_help(stdout);
        return 0;
    }
    for (size_t i = 0; i < NUM_GENERATORS; i++)
        if (strcmp(argv[1], generators[i].name) == 0) return generators[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "loom gen: unknown model '%s'\n\n", argv[1]);
    print_usage(stderr);
    return 2;
}
