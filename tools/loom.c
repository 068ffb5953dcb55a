/* loom: the command-line entry point.
 *
 * `loom SUBCOMMAND [ARGS...]` looks SUBCOMMAND up in one table and hands it
 * the rest of the command line. Each table row carries everything the
 * dispatcher needs to know about a subcommand (name, one-line summary,
 * function), so adding one is one new row here plus its declarations in
 * commands.h. Every subcommand prints its own help for --help, and
 * `loom help NAME [ARGS...]` is `loom NAME [ARGS...] --help`, so the two
 * never differ. */
#include "commands.h"

#include "loom/loom.h"

#include <stdio.h>
#include <string.h>

static int cmd_help(int argc, char **argv);
static int cmd_version(int argc, char **argv);

static const char cmd_help_help[] = "Usage: loom help [SUBCOMMAND [ARGS...]]\n"
                                    "\n"
                                    "List the subcommands, or show the help of one: the same as\n"
                                    "'loom SUBCOMMAND [ARGS...] --help' (loom help train lr).\n";

static const char cmd_version_help[] = "Usage: loom version\n"
                                       "\n"
                                       "Print the version of Loom.\n";

struct command {
    const char *name;
    const char *summary;
    int (*fn)(int argc, char **argv);
};

static const struct command commands[] = {
    {"run", "start a job on this machine: a scheduler, servers and workers", cmd_run},
    {"join",
     "start a worker or server that joins a running job (an elastic job: loom run "
     "--max-workers, --max-servers)",
     cmd_join},
    {"leave",
     "ask a running job that one of its workers or servers leave it (loom join's other half)",
     cmd_leave},
    {"gen", "write a synthetic data set", cmd_gen},
    {"train", "train a model with a job on this machine or a cluster (models: loom help train)",
     cmd_train},
    {"predict", "apply a saved model to a data set", cmd_predict},
    {"checkpoint", "list, verify or export the checkpoints of a job (loom train --checkpoint-dir)",
     cmd_checkpoint},
    {"keygen", "write a job secret that encrypts and authenticates a job", cmd_keygen},
    {"status", "print the status of a running job (its status page)", cmd_status},
    {"plot", "overlay the metrics of runs (loom train --metrics) in a PNG", cmd_plot},
    {"help", "list the subcommands, or show the help of one", cmd_help},
    {"version", "print the version of Loom", cmd_version},
};

#define NUM_COMMANDS (sizeof commands / sizeof commands[0])

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < NUM_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

static void print_usage(FILE *out)
{
    fprintf(out, "Usage: loom SUBCOMMAND [ARGS...]\n\nSubcommands:\n");
    for (size_t i = 0; i < NUM_COMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\nRun 'loom help SUBCOMMAND' for the options of one.\n");
}

static int unknown_command(const char *name)
{
    fprintf(stderr, "loom: unknown subcommand '%s'\n\n", name);
    print_usage(stderr);
    return 2;
}

static int is_help_flag(const char *arg)
{
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

static int cmd_help(int argc, char **argv)
{
    if (argc == 1) {
        print_usage(stdout);
        return 0;
    }
    if (is_help_flag(argv[1])) {
        fputs(cmd_help_help, stdout);
        return 0;
    }
    const struct command *cmd = find_command(argv[1]);
    if (!cmd) return unknown_command(argv[1]);
    /* argv[1..argc) and "--help"; argv[argc] is NULL, so there is room. */
    char *args[argc + 1];
    for (int i = 1; i < argc; i++) args[i - 1] = argv[i];
    args[argc - 1] = "--help";
    args[argc] = NULL;
    return cmd->fn(argc, args);
}

static int cmd_version(int argc, char **argv)
{
    if (argc == 2 && is_help_flag(argv[1])) {
        fputs(cmd_version_help, stdout);
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "loom version: takes no arguments\n");
        return 2;
    }
    printf("loom %d.%d.%d\n", LOOM_VERSION_MAJOR, LOOM_VERSION_MINOR, LOOM_VERSION_PATCH);
    return 0;
}

int main(int argc, char **argv)
{
    /* A bare `loom` is a usage error, so scripts calling it wrongly fail. */
    if (argc < 2) {
        print_usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0) name = "help";
    if (strcmp(name, "--version") == 0) name = "version";

    const struct command *cmd = find_command(name);
    if (!cmd) return unknown_command(name);
    return cmd->fn(argc - 1, argv + 1);
}
