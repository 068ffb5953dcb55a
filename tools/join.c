/* loom join: start a worker or server that joins a running job (docs/ELASTIC.md).
 *
 * `loom join ADDRESS --role worker|server -- PROGRAM ARGS` checks its
 * arguments, sets the launch environment a joining node reads
 * (LOOM_SCHEDULER=ADDRESS, LOOM_ROLE, LOOM_JOIN=1, no LOOM_RANK: the
 * scheduler gives it a free slot of its role) and runs PROGRAM in its place. The job's size, token
 * and secret come from the environment as for any node (LOOM_NUM_SERVERS, LOOM_NUM_WORKERS,
 * LOOM_JOB_TOKEN, LOOM_SECRET_FILE), or from --servers,
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
    "Usage: loom join ADDRESS --role worker|server [--servers S] [--workers W]\n"
    "                 [--secret FILE] -- PROGRAM [ARGS...]\n"
    "\n"
    "Start PROGRAM as a worker or a server that joins the running job whose\n"
    "scheduler is at ADDRESS (host:port; loom run --max-workers or --max-servers\n"
    "prints it). A worker needs a free worker slot (loom run --max-workers M starts\n"
    "W of M workers) and a job that hands out data parts (loom train lr|fm\n"
    "--data-parts). A server needs a free server slot (loom run --max-servers M\n"
    "starts S of M servers, with replicas of at least M - S): it copies that\n"
    "slot's ranges from the live servers and takes them over. S and W are the\n"
    "job's server and worker slots (default: LOOM_NUM_SERVERS and\n"
    "LOOM_NUM_WORKERS); the job token and secret come from LOOM_JOB_TOKEN and\n"
    "LOOM_SECRET_FILE (or --secret), the replicas from LOOM_REPLICAS or the\n"
    "program's flags. SIGTERM makes the worker or server leave the job again\n"
    "(docs/ELASTIC.md).\n"
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
    if (!role) return usage("%s", "give --role worker or --role server");
    if (strcmp(role, "worker") && strcmp(role, "server"))
        return usage("--role '%s' is not a role that joins: give worker or server", role);
    if (!program || program >= argc) return usage("give the %s's program after --", role);
    if (setenv("LOOM_SCHEDULER", address, 1) || setenv("LOOM_ROLE", role, 1) ||
        setenv("LOOM_JOIN", "1", 1) || unsetenv("LOOM_RANK") || unsetenv("LOOM_START_WORKERS") ||
        unsetenv("LOOM_START_SERVERS")) {
        perror("loom join: cannot set the environment");
        return 1;
    }
    execvp(argv[program], argv + program);
    fprintf(stderr, "loom join: cannot run %s: %s\n", argv[program], strerror(errno));
    return 127;
}
