/* loom predict: apply a saved model to a data set and report how well it does.
 *
 * `loom predict MODEL [OPTIONS]` picks the predictor for MODEL from the table
 * of models (tools/models.c), the same way `loom gen` picks a generator.
 * Prediction runs in this one process: it is a single pass over the data,
 * with no parameter server. */
#include "commands.h"
#include "models.h"

#include "lr/lr.h"

int cmd_predict(int argc, char **argv)
{
    return models_tool_main(MODEL_PREDICT, "Apply a saved model to a data set.", lr_predict_help,
                            argc, argv);
}
