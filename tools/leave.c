/* loom leave: ask a running job that one of its workers or servers leave it
 * (docs/ELASTIC.md).
 *
 * `loom leave ADDRESS --worker R | --server R` sends the job's scheduler a
 * leave request (loom_request_leave, src/core/leave_request.c), with the
 * job's token and secret as a node that joins has them (LOOM_JOB_TOKEN,
 * LOOM_SECRET_FILE or --secret), and waits, up to --timeout, for the
 * scheduler's answer and then for the node to be gone: a worker leaves after
 * the part it trains on, as on SIGTERM; a server at once, its ranges going
 * to the servers that hold their replicas. It prints the scheduler's
 * sentence: what happened, or why it refused. */
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/app.h"
#include "loom/loom.h"

static const app_flag leave_flags[] = {
    {.name = "--worker",
     .kind = APP_INT,
     .arg = "R",
     .lo = 0,
     .hi = LOOM_MAX_WORKERS - 1,
     .help = "the worker of rank R leaves (after the part it trains on)",
     .excludes = "--server"},
    {.name = "--server",
     .kind = APP_INT,
     .arg = "R",
     .lo = 0,
     .hi = LOOM_MAX_SERVERS - 1,
     .help = "the server of rank R leaves (its ranges go to their replicas' holders)"},
    {.name = "--servers",
     .kind = APP_INT,
     .arg = "S",
     .lo = 0,
     .hi = LOOM_MAX_SERVERS,
     .def = "LOOM_NUM_SERVERS",
     .help = "the job's server slots, checked by the scheduler if given"},
    {.name = "--workers",
     .kind = APP_INT,
     .arg = "W",
     .lo = 1,
     .hi = LOOM_MAX_WORKERS,
     .def = "LOOM_NUM_WORKERS",
     .help = "the job's worker slots, checked by the scheduler if given"},
    {.name = "--secret",
     .kind = APP_TEXT,
     .arg = "FILE",
     .def = "LOOM_SECRET_FILE",
     .help = "the job's secret (loom keygen), if it has one"},
    {.name = "--timeout",
     .kind = APP_INT,
     .arg = "SECONDS",
     .lo = 1,
     .hi = 86400,
     .def = "120",
     .help = "give up if the scheduler has not answered, or the node has not left, in SECONDS"},
    {.name = "--no-wait",
     .kind = APP_SWITCH,
     .help = "return once the scheduler accepted the leave, without waiting for the node to "
             "be gone"},
};
#define NFLAGS (sizeof leave_flags / sizeof leave_flags[0])

static void print_help(FILE *out)
{
    fputs("Usage: loom leave ADDRESS --worker R | --server R [OPTIONS]\n"
          "\n"
          "Ask the running job whose scheduler is at ADDRESS (host:port; loom run\n"
          "--max-workers or --max-servers prints it) that its worker or server of rank R\n"
          "leave it, and wait until it is gone. A worker leaves as on SIGTERM: it\n"
          "finishes the part it trains on, reports it and ends, its slot free for a\n"
          "worker that joins (a job with data parts: loom train lr|fm --data-parts). A\n"
          "server leaves at once: the job goes on without it, its ranges served by\n"
          "the servers that hold their replicas (--replicas), and it ends with status\n"
          "0. The scheduler refuses a rank the job does not have, a node already gone\n"
          "or still joining, the job's last worker, a worker of a job without data\n"
          "parts, and a server whose ranges would lose their last live holder. The\n"
          "job token and secret are the job's, as for loom join: LOOM_JOB_TOKEN,\n"
          "LOOM_SECRET_FILE or --secret.\n"
          "\n"
          "Options:\n",
          out);
    app_flags_help(out, leave_flags, NFLAGS);
    fputs("  -h, --help              show this help\n"
          "\n"
          "Exit status: 0 the node left (or, with --no-wait, the scheduler accepted the\n"
          "leave), 1 refused or no answer, 2 usage error, 3 accepted but the node had\n"
          "not left within --timeout (it still leaves).\n"
          "\n"
          "Example:\n"
          "  LOOM_JOB_TOKEN=t loom leave 127.0.0.1:40123 --worker 2\n",
          out);
}

/* A count from the environment, or 0 if unset. 0, or -1 if not a count. */
static int env_count(const char *name, int hi, int *out)
{
    const char *v = getenv(name);
    *out = 0;
    if (!v || !*v) return 0;
    char *end;
    long x = strtol(v, &end, 10);
    if (*end || x < 0 || x > hi) return -1;
    *out = (int)x;
    return 0;
}

int cmd_leave(int argc, char **argv)
{
    app_flag_value values[NFLAGS];
    char err[512];
    int has_address = argc > 1 && argv[1][0] != '-';
    int rc = app_flags_parse(leave_flags, NFLAGS, argc, argv, 1 + has_address, values, NULL, err,
                             sizeof err);
    if (rc == APP_FLAGS_HELP) {
        print_help(stdout);
        return 0;
    }
    if (rc) return app_command_usage("loom leave", "%s", err);
    if (!has_address) return app_command_usage("loom leave", "give the scheduler's ADDRESS first");
    const char *address = argv[1];
    loom_config cfg;
    loom_config_default(&cfg);
    const char *colon = strrchr(address, ':');
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    if (!colon || colon == address || !colon[1] || *end || port < 1 || port > 65535 ||
        strlen(address) >= sizeof cfg.scheduler)
        return app_command_usage("loom leave",
                                 "'%s' is not a scheduler address: give host:port, port 1 to 65535",
                                 address);
    const app_flag_value *w = app_flag_get(leave_flags, NFLAGS, values, "--worker");
    const app_flag_value *s = app_flag_get(leave_flags, NFLAGS, values, "--server");
    if (!w && !s) return app_command_usage("loom leave", "give --worker R or --server R");
    snprintf(cfg.scheduler, sizeof cfg.scheduler, "%s", address);
    const char *token = getenv("LOOM_JOB_TOKEN");
    if (token && strlen(token) >= sizeof cfg.job_token)
        return app_command_usage("loom leave", "LOOM_JOB_TOKEN is longer than %zu characters",
                                 sizeof cfg.job_token - 1);
    snprintf(cfg.job_token, sizeof cfg.job_token, "%s", token ? token : "");
    if (env_count("LOOM_NUM_SERVERS", LOOM_MAX_SERVERS, &cfg.num_servers) ||
        env_count("LOOM_NUM_WORKERS", LOOM_MAX_WORKERS, &cfg.num_workers))
        return app_command_usage("loom leave", "LOOM_NUM_SERVERS or LOOM_NUM_WORKERS is no count");
    const app_flag_value *v = app_flag_get(leave_flags, NFLAGS, values, "--servers");
    if (v) cfg.num_servers = (int)v->u;
    v = app_flag_get(leave_flags, NFLAGS, values, "--workers");
    if (v) cfg.num_workers = (int)v->u;
    v = app_flag_get(leave_flags, NFLAGS, values, "--secret");
    const char *secret = v ? v->text : getenv("LOOM_SECRET_FILE");
    if (secret && *secret && loom_secret_load(secret, cfg.secret, err, sizeof err)) {
        fprintf(stderr, "loom leave: %s\n", err);
        return 1;
    }
    v = app_flag_get(leave_flags, NFLAGS, values, "--timeout");
    int timeout_ms = (int)(v ? v->u : 120) * 1000;
    int wait = !app_flag_get(leave_flags, NFLAGS, values, "--no-wait");
    int accepted = 0;
    char msg[512];
    rc = loom_request_leave(&cfg, w ? LOOM_WORKER : LOOM_SERVER, (int)(w ? w->u : s->u), timeout_ms,
                            wait, &accepted, msg, sizeof msg);
    if (rc) {
        fprintf(stderr, "loom leave: %s\n", msg);
        return accepted ? 3 : 1;
    }
    printf("loom leave: %s\n", msg);
    return 0;
}
