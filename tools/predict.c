/* loom predict: apply a saved model to a data set and report how well it does.
 *
 * `loom predict MODEL [OPTIONS]` picks the predictor for MODEL from the table
 * below, the same way `loom gen` picks a generator. Prediction runs in this
 * one process: it is a single pass over the data, with no parameter server. */
#include "commands.h"

#include "common/app.h"

#include "lasso/lasso.h"
#include "lr/lr.h"
#include "mf/mf.h"
#include "mlr/mlr.h"
#include "svm/svm.h"

#include <stdio.h>
#include <string.h>

struct predictor {
    const char *name;
    const char *summary;
    int (*fn)(int argc, char **argv); /* argv[0] is the model's name */
};

/* The one list of models: the usage and the help are printed from it. */
static const struct predictor predictors[] = {
    {"lr", "logistic regression (the model file of `loom train lr --model-out`)", lr_predict_main},
    {"mf", "matrix factorisation (`loom train mf --model-out`)", mf_predict_main},
    {"lasso", "L1-regularised least squares (`loom train lasso --model-out`)", lasso_predict_main},
    {"mlr", "softmax regression (`loom train mlr --model-out`)", mlr_predict_main},
    {"svm", "linear SVM (`loom train svm --model-out`)", svm_predict_main},
};

#define NUM_PREDICTORS (sizeof predictors / sizeof predictors[0])

static void list_predictors(FILE *out)
{
    for (size_t i = 0; i < NUM_PREDICTORS; i++)
        fprintf(out, "  %-6s %s\n", predictors[i].name, predictors[i].summary);
}

static void print_usage(FILE *out)
{
    fprintf(out, "Usage: loom predict MODEL [OPTIONS]\n\nModels:\n");
    list_predictors(out);
    fprintf(out, "\nRun 'loom help predict' for the options.\n");
}

/* The models, then lr's options; each other model's with loom predict MODEL --help. */
static void print_help(FILE *out)
{
    fputs("Usage: loom predict MODEL [OPTIONS]\n\nApply a saved model to a data set. MODEL is one "
          "of:\n",
          out);
    list_predictors(out);
    fputs("(the options of one: loom predict MODEL --help; lr's follow)\n\n", out);
    lr_predict_help(out);
}

int cmd_predict(int argc, char **argv)
{
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        print_help(stdout);
        return 0;
    }
    for (size_t i = 0; i < NUM_PREDICTORS; i++)
        if (strcmp(argv[1], predictors[i].name) == 0) return predictors[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "loom predict: unknown model '%s'\n\n", argv[1]);
    print_usage(stderr);
    return 2;
}
