/* launchenv: a process's place in a job that mpirun or srun started, how it
 * finds the scheduler, and which address it binds. See launchenv.c for the
 * design and docs/CLUSTER.md for the user's view. */
#ifndef LOOM_CORE_LAUNCHENV_H
#define LOOM_CORE_LAUNCHENV_H

#include <limits.h>
#include <stddef.h>

#include "loom/node.h"

/* What a launcher told this process about its job. */
typedef struct launch_env {
    const char *launcher; /* "mpirun (Open MPI)", "srun (Slurm)"...; NULL: none */
    int rank, size;       /* size 0: the launcher does not say (PMIx alone) */
    int single_host;      /* 1: every rank of the job runs on this host */
    char job_id[128];     /* names the rendezvous file; "" if unknown */
    char first_host[240]; /* srun: the first host of the step's node list, where rank 0 runs */
} launch_env;

/* How a process found its place, and what loom_init() still has to do. */
typedef struct launch_plan {
    launch_env env;              /* env.launcher is NULL when LOOM_ROLE was set */
    char publish_path[PATH_MAX]; /* scheduler: write its address here once bound; "" = no */
} launch_plan;

/* loom_config_from_env(), also telling what the rendezvous needs of loom_init(). */
int config_from_env(loom_config *cfg, launch_plan *plan, char *err, size_t errlen);

/* Read the launcher's variables. 0 (le->launcher NULL if none was found), or
 * LOOM_ECONFIG with a sentence naming the malformed variable. */
int launch_detect(launch_env *le, char *err, size_t errlen);

/* LOOM_INTERFACE's IPv4 address or LOOM_BIND into out ("" if neither is set). */
int launch_explicit_bind(char *out, size_t outlen, char *err, size_t errlen);

/* For a process without LOOM_ROLE: role, rank and job size from the launcher,
 * then the scheduler's address (cfg->scheduler). For the scheduler that is
 * the address to bind: `bind` (from launch_explicit_bind) or a default that
 * suits the rendezvous; for the others it is where the scheduler listens,
 * which may mean waiting up to cfg->connect_timeout_ms for its file. */
int launch_configure(loom_config *cfg, launch_plan *plan, const char *bind, char *err,
                     size_t errlen);

/* The local address of the route to "host:port" (no packet is sent). A host
 * that does not resolve yet is retried until connect_timeout_ms has passed. */
int launch_route_source(const char *hostport, int timeout_ms, char *out, size_t outlen, char *err,
                        size_t errlen);

/* Scheduler: write "address\n" to path (temporary file, then rename). */
int launch_publish(const char *path, const char *address, char *err, size_t errlen);

/* The first host of a Slurm host list: "node[01-03,07],gpu5" -> "node01".
 * 0, or LOOM_ECONFIG if the list is malformed or the name does not fit. */
int launch_first_host(const char *list, char *out, size_t outlen);

/* The scheduler's port under srun without a shared directory: from 20000 to
 * 29999, a hash of the job id (below Linux's ephemeral ports, 32768 up). */
int launch_derived_port(const char *job_id);

/* The job token of cfg->job_token (outlen bytes): LOOM_JOB_TOKEN, else
 * derived from the launcher's job id in plan, else "". 0, or LOOM_ECONFIG
 * with a sentence in err if LOOM_JOB_TOKEN is malformed. */
int launch_job_token(const launch_plan *plan, char *out, size_t outlen, char *err, size_t errlen);

#endif
