/* config: a node's configuration, from defaults and the LOOM_* environment.
 *
 * Any launcher (loom run, Kubernetes, a shell script) can start a job by
 * setting these variables; docs/LAUNCHING.md documents them. Without
 * LOOM_ROLE, role and scheduler come from mpirun's or srun's own variables
 * (launchenv.c, docs/CLUSTER.md). A bad value is an error naming the
 * variable, never a silent default. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/launchenv.h"
#include "core/log.h"
#include "loom/error.h"
#include "loom/node.h"
#include "loom/secret.h"

void loom_config_default(loom_config *cfg)
{
    *cfg = (loom_config){0};
    cfg->role = LOOM_WORKER;
    cfg->rank = -1;
    cfg->num_servers = 1;
    cfg->num_workers = 1;
    snprintf(cfg->bind_host, sizeof cfg->bind_host, "127.0.0.1");
    cfg->heartbeat_interval_ms = 500;
    cfg->heartbeat_timeout_ms = 5000;
    cfg->connect_timeout_ms = 60000;
    cfg->on_failure = LOOM_ON_FAILURE_EXIT;
}

/* Parse an integer in [lo, hi] from variable `name`; absent leaves *out alone. */
static int env_int(const char *name, long lo, long hi, int *out, char *err, size_t errlen)
{
    const char *v = getenv(name);
    if (!v) return 0;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        if (err)
            snprintf(err, errlen, "%s=\"%s\" is not a whole number from %ld to %ld", name, v, lo,
                     hi);
        return LOOM_ECONFIG;
    }
    *out = (int)x;
    return 0;
}

static int env_str(const char *name, char *out, size_t outlen, char *err, size_t errlen)
{
    const char *v = getenv(name);
    if (!v) return 0;
    if (!*v || strlen(v) >= outlen) {
        if (err)
            snprintf(err, errlen, "%s is empty or longer than %zu characters", name, outlen - 1);
        return LOOM_ECONFIG;
    }
    memcpy(out, v, strlen(v) + 1);
    return 0;
}

/* LOOM_ON_WORKER_FAILURE: fail (the default), continue or restart. */
static int env_worker_failure(loom_worker_failure_policy *out, char *err, size_t errlen)
{
    const char *v = getenv("LOOM_ON_WORKER_FAILURE");
    if (!v || !strcmp(v, "fail")) return 0;
    if (!strcmp(v, "continue") || !strcmp(v, "restart")) {
        *out = v[0] == 'c' ? LOOM_WORKER_FAILURE_CONTINUE : LOOM_WORKER_FAILURE_RESTART;
        return 0;
    }
    if (err)
        snprintf(err, errlen, "LOOM_ON_WORKER_FAILURE=\"%s\" is none of fail, continue, restart",
                 v);
    return LOOM_ECONFIG;
}

/* The role and scheduler given by LOOM_ROLE and LOOM_SCHEDULER (as `loom run`
 * and hand-written launch scripts set them). The scheduler binds LOOM_SCHEDULER's
 * port on `bind` if set, else on LOOM_SCHEDULER's host. */
static int role_from_env(loom_config *cfg, const char *role, const char *bind, char *err,
                         size_t errlen)
{
    if (!strcmp(role, "scheduler")) {
        cfg->role = LOOM_SCHEDULER;
        cfg->rank = 0;
    } else if (!strcmp(role, "server")) {
        cfg->role = LOOM_SERVER;
    } else if (!strcmp(role, "worker")) {
        cfg->role = LOOM_WORKER;
    } else {
        if (err) snprintf(err, errlen, "LOOM_ROLE=\"%s\" is not scheduler, server or worker", role);
        return LOOM_ECONFIG;
    }
    const char *colon;
    if (!getenv("LOOM_SCHEDULER") ||
        env_str("LOOM_SCHEDULER", cfg->scheduler, sizeof cfg->scheduler, NULL, 0) ||
        !(colon = strrchr(cfg->scheduler, ':'))) {
        if (err) snprintf(err, errlen, "LOOM_SCHEDULER must be set to the scheduler's host:port");
        return LOOM_ECONFIG;
    }
    if (cfg->role == LOOM_SCHEDULER && bind[0]) {
        char port[16];
        snprintf(port, sizeof port, "%s", colon + 1);
        snprintf(cfg->scheduler, sizeof cfg->scheduler, "%s:%s", bind, port);
    }
    return 0;
}

int config_from_env(loom_config *cfg, launch_plan *plan, char *err, size_t errlen)
{
    loom_config_default(cfg);
    memset(plan, 0, sizeof *plan);
    if (err && errlen) err[0] = '\0';
    int rc = env_int("LOOM_NUM_SERVERS", 0, LOOM_MAX_SERVERS, &cfg->num_servers, err, errlen);
    rc = rc ? rc : env_int("LOOM_NUM_WORKERS", 1, LOOM_MAX_WORKERS, &cfg->num_workers, err, errlen);
    rc = rc ? rc : env_int("LOOM_RANK", -1, LOOM_MAX_WORKERS - 1, &cfg->rank, err, errlen);
    rc =
        rc ? rc : env_int("LOOM_HEARTBEAT_MS", 1, 600000, &cfg->heartbeat_interval_ms, err, errlen);
    rc = rc ? rc
            : env_int("LOOM_HEARTBEAT_TIMEOUT_MS", 2, 3600000, &cfg->heartbeat_timeout_ms, err,
                      errlen);
    rc =
        rc ? rc
           : env_int("LOOM_CONNECT_TIMEOUT_MS", 1, 86400000, &cfg->connect_timeout_ms, err, errlen);
    rc = rc ? rc : env_int("LOOM_VERBOSE", 0, 2, &cfg->verbose, err, errlen);
    int log_time = 0;
    rc = rc ? rc : env_int("LOOM_LOG_TIME", 0, 1, &log_time, err, errlen);
    rc = rc ? rc : env_int("LOOM_MAX_FRAME_MIB", 1, 2047, &cfg->max_frame_mib, err, errlen);
    rc = rc ? rc : env_int("LOOM_STATUS_PORT", -1, 65535, &cfg->status_port, err, errlen);
    rc = rc ? rc
            : env_str("LOOM_STATUS_BIND", cfg->status_bind, sizeof cfg->status_bind, err, errlen);
    rc = rc ? rc : env_worker_failure(&cfg->on_worker_failure, err, errlen);
    rc = rc ? rc
            : env_int("LOOM_START_WORKERS", 0, LOOM_MAX_WORKERS, &cfg->start_workers, err, errlen);
    if (!rc && cfg->start_workers > cfg->num_workers) {
        if (err)
            snprintf(err, errlen, "LOOM_START_WORKERS=%d exceeds LOOM_NUM_WORKERS=%d",
                     cfg->start_workers, cfg->num_workers);
        rc = LOOM_ECONFIG;
    }
    rc = rc ? rc
            : env_int("LOOM_START_SERVERS", 0, LOOM_MAX_SERVERS, &cfg->start_servers, err, errlen);
    if (!rc && cfg->start_servers > cfg->num_servers) {
        if (err)
            snprintf(err, errlen, "LOOM_START_SERVERS=%d exceeds LOOM_NUM_SERVERS=%d",
                     cfg->start_servers, cfg->num_servers);
        rc = LOOM_ECONFIG;
    }
    /* Now: finding the scheduler below may wait, and says so. */
    if (!rc) log_set_level(cfg->verbose);
    if (!rc) log_set_time(log_time);
    const char *secret_file = getenv("LOOM_SECRET_FILE");
    if (!rc && secret_file) {
        rc = loom_secret_load(secret_file, cfg->secret, err, errlen);
        if (rc && err) /* name the variable, as for every other bad value */
            snprintf(err + strlen(err), errlen - strlen(err), " (LOOM_SECRET_FILE)");
    }
    char bind[sizeof cfg->bind_host];
    rc = rc ? rc : launch_explicit_bind(bind, sizeof bind, err, errlen);
    if (rc) return rc;
    /* A short timeout with the default interval would fire between two
     * heartbeats; keep at least four heartbeats per timeout. */
    if (!getenv("LOOM_HEARTBEAT_MS") && cfg->heartbeat_interval_ms * 4 > cfg->heartbeat_timeout_ms)
        cfg->heartbeat_interval_ms =
            cfg->heartbeat_timeout_ms / 4 > 0 ? cfg->heartbeat_timeout_ms / 4 : 1;
    if (cfg->heartbeat_timeout_ms <= cfg->heartbeat_interval_ms) {
        if (err)
            snprintf(err, errlen,
                     "LOOM_HEARTBEAT_TIMEOUT_MS (%d) must exceed LOOM_HEARTBEAT_MS (%d)",
                     cfg->heartbeat_timeout_ms, cfg->heartbeat_interval_ms);
        return LOOM_ECONFIG;
    }
    const char *role = getenv("LOOM_ROLE");
    /* A worker joining a running job (LOOM_JOIN=1, `loom join`; also under
     * mpirun or srun, whose ranks name no role of this job): any free worker
     * slot, at the scheduler LOOM_SCHEDULER names. With LOOM_ROLE=server, a
     * server joining in a free server slot (docs/ELASTIC.md). */
    const char *join = getenv("LOOM_JOIN");
    if (join && !strcmp(join, "1")) {
        if (role && strcmp(role, "worker") && strcmp(role, "server")) {
            if (err)
                snprintf(err, errlen,
                         "LOOM_JOIN=1 joins a worker or a server, but LOOM_ROLE=\"%s\"", role);
            return LOOM_ECONFIG;
        }
        if (!role) role = "worker";
        cfg->rank = -1;
    }
    rc = role ? role_from_env(cfg, role, bind, err, errlen)
              : launch_configure(cfg, plan, bind, err, errlen);
    rc = rc ? rc : launch_job_token(plan, cfg->job_token, sizeof cfg->job_token, err, errlen);
    if (rc) return rc;
    if (cfg->role == LOOM_SERVER && cfg->rank >= cfg->num_servers) {
        if (err)
            snprintf(err, errlen, "LOOM_RANK=%d but there are only %d servers", cfg->rank,
                     cfg->num_servers);
        return LOOM_ECONFIG;
    }
    if (cfg->role == LOOM_WORKER && cfg->rank >= cfg->num_workers) {
        if (err)
            snprintf(err, errlen, "LOOM_RANK=%d but there are only %d workers", cfg->rank,
                     cfg->num_workers);
        return LOOM_ECONFIG;
    }
    if (cfg->role == LOOM_SCHEDULER) {
        cfg->rank = 0;
        return 0;
    }
    /* Bind where the scheduler can reach us: the address we would reach it from. */
    if (bind[0]) {
        memcpy(cfg->bind_host, bind, strlen(bind) + 1);
        return 0;
    }
    return launch_route_source(cfg->scheduler, cfg->connect_timeout_ms, cfg->bind_host,
                               sizeof cfg->bind_host, err, errlen);
}

int loom_config_from_env(loom_config *cfg, char *err, size_t errlen)
{
    launch_plan plan;
    return config_from_env(cfg, &plan, err, errlen);
}
