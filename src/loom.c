/* loom: the public node API, wiring the layers together.
 *
 * core/ knows nothing of tables and ps/ nothing of start-up; this file is the
 * one place that calls both, in the order each operation needs (for example
 * loom_finalize: flush the tables, tell the scheduler, end the node). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/launchenv.h"
#include "core/log.h"
#include "core/node_impl.h"
#include "ft/ft.h"
#include "layers.h"
#include "loom/loom.h"
#include "p2p/p2p.h"
#include "p2p/svb.h"
#include "ps/ps.h"
#include "sched/sched.h"

/* loom run passes the scheduler a pipe (LOOM_ADDRESS_FD) to learn the port it
 * bound; write "host:port\n" there once and close it. */
static int publish_address(loom_node *n)
{
    const char *fd_text = getenv("LOOM_ADDRESS_FD");
    if (!fd_text || loom_node_role(n) != LOOM_SCHEDULER) return 0;
    char *end;
    errno = 0;
    long fd = strtol(fd_text, &end, 10);
    if (errno || end == fd_text || *end || fd < 0 || fd > 65535) {
        log_error("LOOM_ADDRESS_FD=\"%s\" is not a file descriptor", fd_text);
        return LOOM_ECONFIG;
    }
    char line[300];
    int len = snprintf(line, sizeof line, "%s\n", loom_node_address(n));
    ssize_t w = write((int)fd, line, (size_t)len);
    close((int)fd);
    if (w != len) {
        log_error("cannot publish the scheduler address on fd %ld", fd);
        return LOOM_ECONFIG;
    }
    return 0;
}

/* Under mpirun or srun the scheduler may publish its address in a rendezvous
 * file (core/launchenv.c); it removes the file when the job is over. */
static char rendezvous_file[PATH_MAX];
static const loom_node *rendezvous_owner;

static int publish_rendezvous(loom_node *n, const launch_plan *plan)
{
    const launch_env *le = &plan->env;
    if (le->launcher)
        log_info("%s started %d processes; rank %d is %s", le->launcher, le->size, le->rank,
                 loom_is_worker(n)                  ? "a worker"
                 : loom_node_role(n) == LOOM_SERVER ? "a server"
                                                    : "the scheduler");
    if (!plan->publish_path[0]) return 0;
    char why[512];
    int rc = launch_publish(plan->publish_path, loom_node_address(n), why, sizeof why);
    if (rc) {
        log_error("%s", why);
        return rc;
    }
    log_info("published the scheduler's address %s in %s", loom_node_address(n),
             plan->publish_path);
    memcpy(rendezvous_file, plan->publish_path, sizeof rendezvous_file);
    rendezvous_owner = n;
    return 0;
}

int layers_attach(loom_node *n)
{
    int rc = ps_attach(n);
    if (!rc) rc = ft_attach(n);
    if (!rc) rc = sched_attach(n);
    if (!rc) rc = sched_dynamic_attach(n);
    if (!rc) rc = sched_parts_attach(n);
    if (!rc) rc = p2p_attach(n);
    return rc ? rc : svb_attach(n);
}

int loom_node_start(const loom_config *cfg, loom_node **node)
{
    if (!cfg || !node) return LOOM_EINVAL;
    return node_start(cfg, layers_attach, node);
}

int loom_init(loom_node **node, int *argc, char ***argv)
{
    (void)argc, (void)argv;
    if (!node) return LOOM_EINVAL;
    *node = NULL;
    loom_config cfg;
    launch_plan plan;
    char why[1024];
    int rc = config_from_env(&cfg, &plan, why, sizeof why);
    if (rc) {
        log_error("%s", why);
        return rc;
    }
    rc = loom_node_start(&cfg, node);
    /* One line per job, from the scheduler: every process of a job has the
     * same secret or none (a node that differs cannot even connect). */
    if (!rc && !cfg.secret[0] && cfg.role == LOOM_SCHEDULER)
        log_warn("this job runs without a secret: its traffic is neither encrypted nor "
                 "authenticated (set LOOM_SECRET_FILE or --secret; see docs/SECURITY.md)");
    /* Before the address goes out, so the line comes first in `loom run`'s output. */
    if (!rc && loom_status_url(*node)[0]) {
        const char *query = strchr(loom_status_url(*node), '?');
        fprintf(stderr, "loom[scheduler] status page at %s (JSON at /status.json%s)\n",
                loom_status_url(*node), query ? query : "");
    }
    if (!rc) rc = publish_address(*node);
    if (!rc) rc = publish_rendezvous(*node, &plan);
    if (rc && *node) {
        node_destroy(*node);
        *node = NULL;
    }
    return rc;
}

int loom_serve(loom_node *n)
{
    if (!n) return LOOM_EINVAL;
    if (loom_is_worker(n)) return LOOM_EROLE;
    int rc = node_serve(n);
    if (n == rendezvous_owner) {
        unlink(rendezvous_file);
        rendezvous_owner = NULL;
    }
    node_destroy(n);
    return rc;
}

int loom_finalize(loom_node *n)
{
    if (!n) return LOOM_EINVAL;
    if (!loom_is_worker(n)) return LOOM_EROLE;
    ft_worker_finished(n);
    int rc = ps_worker_finish(n);
    if (!rc) rc = node_worker_done(n);
    node_destroy(n);
    return rc;
}

int loom_clock(loom_node *n)
{
    if (!n) return LOOM_EINVAL;
    int rc = ps_clock(n);
    if (!rc && loom_is_worker(n)) ft_worker_clocked(n);
    return rc;
}

int64_t loom_current_clock(const loom_node *n)
{
    return n ? ps_current_clock((loom_node *)n) : 0;
}

int loom_barrier(loom_node *n)
{
    if (!n) return LOOM_EINVAL;
    if (!loom_is_worker(n)) return LOOM_EROLE;
    return ps_barrier(n);
}
