/* loom gen: write synthetic data sets, so examples and tests need no download.
 *
 * `loom gen MODEL [OPTIONS]` looks MODEL up in the table of generators below
 * and hands it the rest of the command line. Each generator lives with its
 * application (apps/MODEL/cli.c): adding one is a row in the table and a line
 * in the help text. */
#include "commands.h"

#include "common/app.h"

#include "lasso/lasso.h"
#include "lda/lda.h"
#include "lr/lr.h"
#include "mf/mf.h"
#include "mlr/mlr.h"

#include <stdio.h>
#include <string.h>

static void print_help(FILE *out)
{
    fputs(
        "Usage: loom gen MODEL [OPTIONS]\n"
        "\n"
        "Write a synthetic data set. MODEL is one of:\n"
        "  lr   sparse binary classification rows from a planted logistic regression model\n"
        "  mf   MovieLens-like ratings from a planted biased low-rank model (loom gen mf --help)\n"
        "  lda  bag-of-words documents from a planted topic model (loom gen lda --help)\n"
        "  lasso  regression rows with correlated feature groups and a planted sparse beta\n"
        "         (loom gen lasso --help)\n"
        "  mlr  multiclass rows from a planted softmax model (loom gen mlr --help)\n"
        "\n",
        out);
    lr_gen_help(out);
}

struct generator {
    const char *name;
    const char *summary;
    int (*fn)(int argc, char **argv); /* argv[0] is the generator's name */
};

static const struct generator generators[] = {
    {"lr", "sparse binary classification rows from a planted logistic regression model",
     lr_gen_main},
    {"mf", "ratings from a planted biased low-rank model", mf_gen_main},
    {"lda", "bag-of-words documents from a planted topic model", lda_gen_main},
    {"lasso", "regression rows, correlated feature groups, a planted sparse beta", lasso_gen_main},
    {"mlr", "multiclass rows from a planted softmax model", mlr_gen_main},
};

#define NUM_GENERATORS (sizeof generators / sizeof generators[0])

static void list_generators(FILE *out)
{
    fprintf(out, "Usage: loom gen MODEL [OPTIONS]\n\nModels:\n");
    for (size_t i = 0; i < NUM_GENERATORS; i++)
        fprintf(out, "  %-6s %s\n", generators[i].name, generators[i].summary);
    fprintf(out, "\nRun 'loom help gen' for the options.\n");
}

int cmd_gen(int argc, char **argv)
{
    if (argc < 2) {
        list_generators(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        print_help(stdout);
        return 0;
    }
    for (size_t i = 0; i < NUM_GENERATORS; i++)
        if (strcmp(argv[1], generators[i].name) == 0) return generators[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "loom gen: unknown model '%s'\n\n", argv[1]);
    list_generators(stderr);
    return 2;
}
