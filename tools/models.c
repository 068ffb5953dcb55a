/* The one table of models of `loom gen`, `loom predict` and `loom train`
 * (tools/models.h), and the dispatch `loom gen` and `loom predict` share:
 * each model's generator, predictor and trainer live with its application
 * (apps/MODEL). */
#include "models.h"

#include <string.h>

#include "fm/fm.h"
#include "lasso/lasso.h"
#include "lda/lda.h"
#include "lr/lr.h"
#include "mf/mf.h"
#include "mlr/mlr.h"
#include "svm/svm.h"

/* In the order the commands list them. */
const model_row models[] = {
    {.name = "lr",
     .train = {.summary = "sparse logistic regression",
               .help = lr_train_help,
               .cli_size = sizeof(lr_cli),
               .parse = lr_parse_flags,
               .node = lr_train_node},
     .tools =
         {[MODEL_GEN] =
              {"sparse binary classification rows from a planted logistic regression model",
               lr_gen_main},
          [MODEL_PREDICT] = {"logistic regression (the model file of `loom train lr --model-out`)",
                             lr_predict_main}}},
    {.name = "fm",
     .train = {.summary = "factorization machine for click logs (DiFacto)",
               .help = fm_train_help,
               .cli_size = sizeof(fm_cli),
               .parse = fm_parse_flags,
               .node = fm_train_node},
     .tools = {[MODEL_GEN] = {"click-log rows with planted pairwise interactions", fm_gen_main},
               [MODEL_PREDICT] = {"factorization machine (`loom train fm --model-out`)",
                                  fm_predict_main}}},
    {.name = "mf",
     .train = {.summary = "matrix factorisation with biases (ratings)",
               .help = mf_train_help,
               .cli_size = sizeof(mf_cli),
               .parse = mf_parse_flags,
               .node = mf_train_node},
     .tools = {[MODEL_GEN] = {"MovieLens-like ratings from a planted biased low-rank model",
                              mf_gen_main},
               [MODEL_PREDICT] = {"matrix factorisation (`loom train mf --model-out`)",
                                  mf_predict_main}}},
    {.name = "lda",
     .train = {.summary = "topic model (collapsed Gibbs, SparseLDA)",
               .help = lda_train_help,
               .cli_size = sizeof(lda_cli),
               .parse = lda_parse_flags,
               .node = lda_train_node},
     .tools = {[MODEL_GEN] = {"bag-of-words documents from a planted topic model", lda_gen_main}}},
    {.name = "lasso",
     .train = {.summary = "L1-regularised least squares (coordinate descent)",
               .help = lasso_train_help,
               .cli_size = sizeof(lasso_cli),
               .parse = lasso_parse_flags,
               .node = lasso_train_node,
               .here = lasso_train_here,
               .wants_here = lasso_trains_here},
     .tools =
         {[MODEL_GEN] = {"regression rows with correlated feature groups and a planted sparse beta",
                         lasso_gen_main},
          [MODEL_PREDICT] = {"L1-regularised least squares (`loom train lasso --model-out`)",
                             lasso_predict_main}}},
    {.name = "mlr",
     .train = {.summary = "multiclass softmax regression (parameter server or SV broadcasting)",
               .help = mlr_train_help,
               .cli_size = sizeof(mlr_cli),
               .parse = mlr_parse_flags,
               .node = mlr_train_node},
     .tools = {[MODEL_GEN] = {"multiclass rows from a planted softmax model", mlr_gen_main},
               [MODEL_PREDICT] = {"softmax regression (`loom train mlr --model-out`)",
                                  mlr_predict_main}}},
    {.name = "svm",
     .train = {.summary = "linear SVM on stochastic reduce (serverless)",
               .help = svm_train_help,
               .cli_size = sizeof(svm_cli),
               .parse = svm_parse_flags,
               .node = svm_train_node},
     .tools = {[MODEL_PREDICT] = {"linear SVM (`loom train svm --model-out`)", svm_predict_main}}},
};
const size_t num_models = sizeof models / sizeof models[0];

static const char *const tool_names[MODEL_TOOLS] = {"gen", "predict"};

static void list_tool(int tool, FILE *out)
{
    for (size_t i = 0; i < num_models; i++)
        if (models[i].tools[tool].summary)
            fprintf(out, "  %-6s %s\n", models[i].name, models[i].tools[tool].summary);
}

static void print_usage(int tool, FILE *out)
{
    fprintf(out, "Usage: loom %s MODEL [OPTIONS]\n\nModels:\n", tool_names[tool]);
    list_tool(tool, out);
    fprintf(out, "\nRun 'loom help %s' for the options.\n", tool_names[tool]);
}

int models_tool_main(int tool, const char *what, void (*lr_help)(FILE *out), int argc, char **argv)
{
    const char *cmd = tool_names[tool];
    if (argc < 2) {
        print_usage(tool, stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        /* The models, then lr's options; each other model's with loom CMD MODEL --help. */
        fprintf(stdout, "Usage: loom %s MODEL [OPTIONS]\n\n%s MODEL is one of:\n", cmd, what);
        list_tool(tool, stdout);
        fprintf(stdout, "(the options of one: loom %s MODEL --help; lr's follow)\n\n", cmd);
        lr_help(stdout);
        return 0;
    }
    for (size_t i = 0; i < num_models; i++)
        if (models[i].tools[tool].main && strcmp(argv[1], models[i].name) == 0)
            return models[i].tools[tool].main(argc - 1, argv + 1);
    fprintf(stderr, "loom %s: unknown model '%s'\n\n", cmd, argv[1]);
    print_usage(tool, stderr);
    return 2;
}
