/* attach: give a node the parameter-server part of its role; the job's
 * replication factor, which every server and worker reads the same way, and
 * how long a request waits before the log names it. */
#include <errno.h>
#include <stdlib.h>

#include "core/log.h"
#include "loom/error.h"
#include "ps/ps.h"
#include "ps/ring.h"

int ps_replicas_from_env(int num_servers, int *replicas)
{
    *replicas = 0;
    const char *v = getenv("LOOM_REPLICAS");
    if (!v || !*v) return 0;
    char *end;
    errno = 0;
    long k = strtol(v, &end, 10);
    if (errno || *end || k < 0 || k > PS_MAX_REPLICAS) {
        log_error("LOOM_REPLICAS=%s: give a number of replicas from 0 to %d", v, PS_MAX_REPLICAS);
        return LOOM_ECONFIG;
    }
    if (k > 0 && k >= num_servers) {
        log_error("LOOM_REPLICAS=%ld needs more servers than replicas (this job has %d): each "
                  "range's replicas live on other servers than its master",
                  k, num_servers);
        return LOOM_ECONFIG;
    }
    *replicas = (int)k;
    return 0;
}

uint64_t ps_stall_report_ms(void)
{
    const char *v = getenv("LOOM_STALL_REPORT_MS");
    if (!v || !*v) return PS_STALL_REPORT_MS;
    char *end;
    errno = 0;
    unsigned long long ms = strtoull(v, &end, 10);
    if (errno || *end || *v == '-' || ms < 100 || ms > 86400000ULL) {
        log_warn("LOOM_STALL_REPORT_MS=%s: give milliseconds from 100 to 86400000; using %d", v,
                 PS_STALL_REPORT_MS);
        return PS_STALL_REPORT_MS;
    }
    return ms;
}

/* Whether the job survives server `rank` dying too: with K replicas any K
 * servers may die, as each range has K + 1 holders. The scheduler and every
 * node decide the same way. */
int ps_survives(loom_node *n, int replicas, uint8_t *dead, uint32_t id)
{
    int rank;
    if (!replicas || node_peer_role(n, id, &rank) != LOOM_SERVER || dead[rank] == PS_DOWN) return 0;
    /* A JOINING replacement already counts as dead: its copies are not whole. */
    int ndead = dead[rank] != PS_JOINING;
    for (int s = 0; s < loom_num_servers(n); s++)
        ndead += dead[s] == PS_DOWN || dead[s] == PS_JOINING;
    if (ndead > replicas) return 0;
    dead[rank] = PS_DOWN;
    return 1;
}

void ps_counters_stats(void *ctx, loom_stats *out)
{
    ps_counters *c = ctx;
    out->pulls_from_cache = atomic_load(&c->pulls_from_cache);
    out->pulls_from_server = atomic_load(&c->pulls_from_server);
    out->table_messages = atomic_load(&c->table_messages);
    out->table_bytes_raw = atomic_load(&c->table_bytes_raw);
    out->table_bytes_wire = atomic_load(&c->table_bytes_wire);
    out->managed_rows_sent = atomic_load(&c->managed_rows_sent);
    out->pushed_rows_received = atomic_load(&c->pushed_rows_received);
    out->pushes_resent = atomic_load(&c->pushes_resent);
    out->pushes_redirected = atomic_load(&c->pushes_redirected);
}

int ps_attach(loom_node *n)
{
    int rc = node_layer_register(&ps_layer_def);
    if (rc) return rc;
    switch (loom_node_role(n)) {
    case LOOM_SCHEDULER:
        return ps_registry_attach(n);
    case LOOM_SERVER:
        return ps_server_attach(n);
    default:
        return ps_client_attach(n);
    }
}
