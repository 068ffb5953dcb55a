/* loom join: start a worker that joins a running job (docs/ELASTIC.md).
 *
 * `loom join ADDRESS --role worker -- PROGRAM ARGS` checks its arguments,
 * sets the launch environment a joining worker reads (LOOM_SCHEDULER=ADDRESS,
 * LOOM_ROLE=worker, LOOM_JOIN=1, no LOOM_RANK: the scheduler gives it a free
 * worker slot) and runs PROGRAM in its place. The job's size, token and
 * secret come from the environment as for any node (LOOM_NUM_SERVERS,
 * LOOM_NUM_WORKERS, LOOM_JOB_TOKEN, LOOM_SECRET_FILE), or from --servers,
 * --workers and --secret; the scheduler refuses a worker whose size, token
 * or secret is not the job's, naming what differs. What the process does
 * once it runs is the application's: lr and fm with --data-parts ask for
 * parts at the job's current epoch. */
#include "commands.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char help[] =
    "Usage: loom join ADDRESS --role worker [--servers S] [--workers W] [--secret FILE]\n"
    "                 -- PROGRAM [ARGS...]\n"
    "\n"
    "Start PROGRAM as a worker that joins the running job whose scheduler is at\n"
    "ADDRESS (host:port; loom run --max-workers prints it). The job must have a free\n"
    "worker slot (loom run --max-workers M starts W of M workers) and hand out data\n"
    "parts (loom train lr|fm --data-parts). S and W are the job's servers and worker\n"
    "slots (default: LOOM_NUM_SERVERS and LOOM_NUM_WORKERS); the job token and secret\n"
    "come from LOOM_JOB_TOKEN and LOOM_SECRET_FILE (or --secret). SIGTERM to the\n"
    "worker makes it leave the job again (docs/ELASTIC.md).\n"
    "\n"
    "Example:\n"
    "  LOOM_JOB_TOKEN=t loom run --workers 2 --max-workers 4 -- loom train lr ... &\n"
    "  LOOM_JOB_TOKEN=t loom join 127.0.0.1:40123 --role worker --servers 1 --workers 4 \\\n"
    "      -- loom train lr ...\n";

static int usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "loom join: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(loom join --help for the usage)\n");
    return 2;
}

/* host:port with a port from 1 to 65535 and a host of no spaces. */
static int address_ok(const char *a)
{
    const char *colon = strrchr(a, ':');
    if (!colon || colon == a || strlen(a) > 255 || strchr(a, ' ')) return 0;
    char *end;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    return colon[1] && !*end && !errno && port >= 1 && port <= 65535;
}

/* A count flag's value: digits, within [lo, hi]. */
static int count_ok(const char *v, long lo, long hi)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    return *v && !*end && !errno && x >= lo && x <= hi;
}

int cmd_join(int argc, char **argv)
{
    const char *address = NULL, *role = NULL;
    int program = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(help, stdout);
            return 0;
        }
        if (!strcmp(a, "--")) {
            program = i + 1;
            break;
        }
        int flag = !strcmp(a, "--role") || !strcmp(a, "--servers") || !strcmp(a, "--workers") ||
                   !strcmp(a, "--secret");
        if (flag && i + 1 >= argc) return usage("%s needs a value", a);
        if (!strcmp(a, "--role")) {
            role = argv[++i];
        } else if (!strcmp(a, "--servers")) {
            if (!count_ok(argv[++i], 0, 1024))
                return usage("--servers %s: give 0 to 1024", argv[i]);
            setenv("LOOM_NUM_SERVERS", argv[i], 1);
        } else if (!strcmp(a, "--workers")) {
            if (!count_ok(argv[++i], 1, 65536))
                return usage("--workers %s: give the job's worker slots, 1 to 65536", argv[i]);
            setenv("LOOM_NUM_WORKERS", argv[i], 1);
        } else if (!strcmp(a, "--secret")) {
            setenv("LOOM_SECRET_FILE", argv[++i], 1);
        } else if (a[0] == '-') {
            return usage("unknown flag %s", a);
        } else if (!address) {
            address = a;
        } else {
            return usage("unexpected argument %s (the program comes after --)", a);
        }
    }
    if (!address) return usage("%s", "give the scheduler's ADDRESS (host:port)");
    if (!address_ok(address))
        return usage("'%s' is not a scheduler address: give host:port, port 1 to 65535", address);
    if (!role) return usage("%s", "give --role worker");
    if (!strcmp(role, "server"))
        return usage("--role %s: joining a server to a running job is not built yet "
                     "(docs/ELASTIC.md); only workers join",
                     role);
    if (strcmp(role, "worker"))
        return usage("--role '%s' is not a role that joins: give worker", role);
    if (!program || program >= argc) return usage("%s", "give the worker's program after --");
    if (setenv("LOOM_SCHEDULER", address, 1) || setenv("LOOM_ROLE", "worker", 1) ||
        setenv("LOOM_JOIN", "1", 1) || unsetenv("LOOM_RANK") || unsetenv("LOOM_START_WORKERS")) {
        perror("loom join: cannot set the environment");
        return 1;
    }
    execvp(argv[program], argv + program);
    fprintf(stderr, "loom join: cannot run %s: %s\n", argv[program], strerror(errno));
    return 127;
}
