/* Subcommands of the `loom` command.
 *
 * A subcommand is a function called like main(): argv[0] is the subcommand's
 * name ("run"), argv[1..argc-1] its arguments, and it returns the process's
 * exit status (0 success, 1 failure, 2 usage error, or its own documented
 * codes). It prints its help for -h/--help; `loom help NAME` calls it so.
 *
 * To add a subcommand NAME: implement cmd_NAME() in tools/NAME.c, declare it
 * here, and add one line to the table in tools/loom.c. */
#ifndef LOOM_TOOLS_COMMANDS_H
#define LOOM_TOOLS_COMMANDS_H

/* loom run: start a whole job (scheduler, servers, workers) on this machine. */
int cmd_run(int argc, char **argv);

/* loom join: start a worker that joins a running job (tools/join.c). */
int cmd_join(int argc, char **argv);

/* loom leave: ask a running job that a worker or server leave it (tools/leave.c). */
int cmd_leave(int argc, char **argv);

/* loom gen: write a synthetic data set (tools/gen.c). */
int cmd_gen(int argc, char **argv);

/* loom train: train a model with a whole job (tools/train.c). */
int cmd_train(int argc, char **argv);

/* loom predict: apply a saved model to a data set (tools/predict.c). */
int cmd_predict(int argc, char **argv);

/* loom keygen: write a job secret (tools/keygen.c). */
int cmd_keygen(int argc, char **argv);

/* loom status: print a running job's status page (tools/status.c). */
int cmd_status(int argc, char **argv);

/* loom plot: overlay runs' metrics files in a PNG with gnuplot (tools/plot.c). */
int cmd_plot(int argc, char **argv);

/* loom checkpoint: list, verify and export checkpoints (tools/checkpoint.c). */
int cmd_checkpoint(int argc, char **argv);

#endif
