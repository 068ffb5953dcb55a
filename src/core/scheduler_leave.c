/* scheduler_leave: the scheduler's side of `loom leave` (docs/ELASTIC.md).
 *
 * `loom leave ADDRESS --worker R | --server R` (leave_request.c) asks the
 * scheduler that a node of the running job leave it. The request (MSG_LEAVE)
 * comes, like a REGISTER, from a routing id no node owns (the stranger
 * hook), and is authenticated like one: with a job secret nobody gets past
 * the CURVE handshake without it, and its job token (and its sizes, if
 * given) must be the job's. It is answered on that routing id: a REJECT
 * naming why not (no such rank, a node already gone, still joining, the
 * last worker, a job that hands out no data parts, a server whose ranges
 * would lose their last live holder), or LEAVE_ACK a = 0 (accepted), then
 * LEAVE_ACK a = 1 once the node is gone from the job.
 *
 * A worker leaves as on SIGTERM: the scheduler sends it MSG_LEAVE, which sets
 * the flag loom_leave() sets; it finishes the part it trains on, reports it
 * with its last request and ends with DONE a = 1 (scheduler.c's on_done),
 * which frees its slot and tells the requester (sched_leave_gone). A server
 * leaves by the path of its own DONE a = 1 (sched_server_leaves: its ranges
 * handed over to their next holders, fenced, or at once as a failover, and
 * it is told to end, SHUTDOWN a = 1); the requester hears LEAVE_ACK a = 1
 * once the scheduler has taken the leave on (a fenced handover then still
 * runs: the server's process ends when it is done). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "core/node_priv.h"
#include "loom/error.h"

/* Why worker node `id` is no longer in the job, or NULL if it is. */
static const char *worker_gone(const peer *p)
{
    if (p->vacant && p->left) return "left the job already";
    if (p->vacant) return "is a free slot: no worker runs in it";
    if (p->lost) return "died, and the job went on without it";
    if (p->done) return "finished already";
    return NULL;
}

/* Why server node `id` is no longer in the job, or NULL if it is. */
static const char *server_gone(const peer *p)
{
    if (p->failed && p->vacant && p->left) return "left the job already";
    if (p->failed && p->vacant) return "is a free slot: no server runs in it";
    if (p->failed) return "died, and the job went on without it";
    return NULL;
}

/* Workers that are neither gone nor asked to leave. */
static uint32_t workers_staying(const loom_node *n)
{
    uint32_t staying = 0;
    for (uint32_t i = 1 + (uint32_t)n->cfg.num_servers; i < n->nnodes; i++)
        staying += !n->peers[i].done && !n->peers[i].leave_asked;
    return staying;
}

/* A worker's leave: 0 and it was asked, or the code and why not. */
static int worker_leave(loom_node *n, uint32_t id, int rank, const uint8_t *rid, size_t rid_len,
                        char *why, size_t len)
{
    peer *p = &n->peers[id];
    const char *gone = worker_gone(p);
    if (gone) {
        snprintf(why, len, "worker %d %s", rank, gone);
        return LOOM_ESTATE;
    }
    if (p->rejoining) {
        snprintf(why, len, "worker %d is still joining the job: ask again once it joined", rank);
        return LOOM_ESTATE;
    }
    if (!node_leave_allowed(n, id)) {
        snprintf(why, len,
                 "worker %d cannot leave: the job hands out no data parts (loom/parts.h; loom "
                 "train lr|fm --data-parts), so nobody would train its share of the data",
                 rank);
        return LOOM_ECONFIG;
    }
    if (!p->leave_asked && workers_staying(n) <= 1) {
        snprintf(why, len,
                 "worker %d is the job's last worker (the others finished, left or are leaving): "
                 "without it the job would end before its parts are trained",
                 rank);
        return LOOM_ESTATE;
    }
    if (!p->leave_asked) node_send_control(n, id, MSG_LEAVE, 0, 0);
    p->leave_asked = 1;
    memcpy(p->leave_rid, rid, rid_len);
    p->leave_rid_len = rid_len;
    snprintf(why, len, "worker %d was asked to leave: it leaves after the part it trains on", rank);
    return 0;
}

/* A server's leave: 0 and it left, or the code and why not. */
static int server_leave(loom_node *n, uint32_t id, int rank, char *why, size_t len)
{
    peer *p = &n->peers[id];
    const char *gone = server_gone(p);
    if (gone) {
        snprintf(why, len, "server %d %s", rank, gone);
        return LOOM_ESTATE;
    }
    if (p->rejoining) {
        snprintf(why, len, "server %d is still joining the job: ask again once it joined", rank);
        return LOOM_ESTATE;
    }
    if (!sched_server_leaves(n, id, 0)) {
        snprintf(why, len,
                 "server %d cannot leave: its ranges would have no live holder without it (a job "
                 "without replicas cannot lose a server; with LOOM_REPLICAS K at most K servers "
                 "may be gone at once: left, dead, free slots or still copying their ranges)",
                 rank);
        return LOOM_ESTATE;
    }
    snprintf(why, len,
             "server %d left the running job: its ranges are served by the other servers, and it "
             "was told to end",
             rank);
    return 0;
}

void sched_leave_request(loom_node *n, const uint8_t *rid, size_t rid_len, const msg_register *reg)
{
    sched_state *s = &n->sched;
    char why[MSG_ADDR_MAX + 256];
    /* A leave request may leave a size out (0): each is checked if given. */
    msg_register r = *reg;
    if (!r.num_servers) r.num_servers = (uint32_t)n->cfg.num_servers;
    if (!r.num_workers) r.num_workers = (uint32_t)n->cfg.num_workers;
    int server = reg->role == LOOM_SERVER;
    const char *role = server ? "server" : "worker";
    int count = server ? n->cfg.num_servers : n->cfg.num_workers, rank = reg->rank;
    int rc = sched_check_job(n, &r, 1, why, sizeof why);
    if (rc) { /* not the job's: said in its answer, and logged as a refused REGISTER is */
        if (++s->refused <= 5 || log_level() >= LOG_DEBUG)
            log_error("refused a leave request: %s", why);
        sched_send_rid(n, rid, rid_len, MSG_REJECT, (uint64_t)rc, why);
        return;
    }
    if (s->roster_phase != 2 || n->state != NODE_RUNNING) {
        snprintf(why, sizeof why, "the job has not started yet: no %s can leave it", role);
        rc = LOOM_ESTATE;
    }
    if (!rc && s->shutting_down) {
        snprintf(why, sizeof why, "the job is ending: every worker finished");
        rc = LOOM_ESHUTDOWN;
    }
    if (!rc && (rank < 0 || rank >= count)) {
        snprintf(why, sizeof why, "the job has no %s %d: its %s ranks are 0 to %d", role, rank,
                 role, count - 1);
        rc = LOOM_ENOTFOUND;
    }
    if (!rc) {
        uint32_t id = (uint32_t)(server ? 1 + rank : 1 + n->cfg.num_servers + rank);
        rc = server ? server_leave(n, id, rank, why, sizeof why)
                    : worker_leave(n, id, rank, rid, rid_len, why, sizeof why);
    }
    /* Who asked, for the log: printable characters only. */
    char from[MSG_ADDR_MAX];
    size_t k = 0;
    for (; k < sizeof from - 1 && reg->address[k]; k++)
        from[k] = reg->address[k] >= ' ' && reg->address[k] <= '~' ? reg->address[k] : '?';
    from[k] = '\0';
    if (rc) {
        log_warn("refused to let a node leave (loom leave from %s): %s", from, why);
        sched_send_rid(n, rid, rid_len, MSG_REJECT, (uint64_t)rc, why);
        return;
    }
    log_warn("loom leave from %s: %s", from, why);
    sched_send_rid(n, rid, rid_len, MSG_LEAVE_ACK, 0, why);
    if (server) sched_send_rid(n, rid, rid_len, MSG_LEAVE_ACK, 1, why);
}

void sched_leave_gone(loom_node *n, uint32_t id, const char *how)
{
    peer *p = &n->peers[id];
    if (!p->leave_asked) return;
    char what[128];
    snprintf(what, sizeof what, "worker %d %s", p->rank, how);
    sched_send_rid(n, p->leave_rid, p->leave_rid_len, MSG_LEAVE_ACK, 1, what);
    p->leave_asked = 0;
    p->leave_rid_len = 0;
}
