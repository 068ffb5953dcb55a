/* loom gen: write synthetic data sets, so examples and tests need no download.
 *
 * `loom gen MODEL [OPTIONS]` looks MODEL's generator up in the table of
 * models (tools/models.c) and hands it the rest of the command line. Each
 * generator lives with its application (apps/MODEL/cli.c). */
#include "commands.h"
#include "models.h"

#include "lr/lr.h"

int cmd_gen(int argc, char **argv)
{
    return models_tool_main(MODEL_GEN, "Write a synthetic data set.", lr_gen_help, argc, argv);
}
