/* The models the `loom` command knows, in one table (tools/models.c) that
 * `loom gen`, `loom predict` and `loom train` all read: for each model, what
 * each command calls and the line it lists the model with. Adding a model is
 * a row there, from which the three commands' usages and helps are printed. */
#ifndef LOOM_TOOLS_MODELS_H
#define LOOM_TOOLS_MODELS_H

#include <stddef.h>
#include <stdio.h>

#include "common/app.h"

/* What `loom gen` or `loom predict` does with a model. */
typedef struct model_tool {
    const char *summary;                /* its line in the command's list; NULL: no such tool */
    int (*main)(int argc, char **argv); /* argv[0] is the model's name */
} model_tool;

enum { MODEL_GEN, MODEL_PREDICT, MODEL_TOOLS };

/* What `loom train` does with a model. A model's command-line struct starts
 * with its app_job (apps/common/app.h), which is all tools/train.c needs to
 * know of it. */
typedef struct model_trainer {
    const char *summary;
    void (*help)(FILE *out); /* every flag, from the model's flag table */
    size_t cli_size;
    app_parse_fn *parse;
    app_cli_fn *node;
    /* Not NULL: the model trains in this process instead of starting a job
     * (its flags checked, its files too) when wants_here(cli) says so;
     * returns the exit status. */
    app_cli_fn *here, *wants_here;
} model_trainer;

typedef struct model_row {
    const char *name;
    model_trainer train;
    model_tool tools[MODEL_TOOLS]; /* [MODEL_GEN], [MODEL_PREDICT] */
} model_row;

extern const model_row models[];
extern const size_t num_models;

/* `loom gen` or `loom predict` (tool MODEL_GEN or MODEL_PREDICT; argv[0] is
 * "gen" or "predict", argv[1] MODEL): hands the rest of the command line to
 * MODEL's tool. Its help says what the command does (`what`, a sentence)
 * and lists the models, then prints lr's options (lr_help). */
int models_tool_main(int tool, const char *what, void (*lr_help)(FILE *out), int argc, char **argv);

#endif
