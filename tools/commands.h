/* Subcommands of the `loom` command.
 *
 * A subcommand is a function called like main(): argv[0] is the subcommand's
 * name ("run"), argv[1..argc-1] its arguments, and it returns the process's
 * exit status (0 success, 1 failure, 2 usage error, or its own documented
 * codes). Its help text is printed by `loom help NAME` and by its own
 * -h/--help, so both always agree.
 *
 * To add a subcommand NAME: implement cmd_NAME() and cmd_NAME_help[] in
 * tools/NAME.c, declare them here, and add one line to the table in
 * tools/loom.c. */
#ifndef LOOM_TOOLS_COMMANDS_H
#define LOOM_TOOLS_COMMANDS_H

/* loom run: start a whole job (scheduler, servers, workers) on this machine. */
int cmd_run(int argc, char **argv);
extern const char cmd_run_help[];

#endif
