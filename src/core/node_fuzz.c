/* node_fuzz: a whole job in one thread, for the fuzz targets; see node_fuzz.h. */
#include "core/node_fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/node_priv.h"
#include "core/status.h"
#include "loom/error.h"

typedef struct queued {
    node_fuzz_msg m;
    struct queued *next;
} queued;

struct node_fuzz_job {
    int num_servers, num_workers;
    int (*attach)(loom_node *n);
    int assembled;
    uint32_t nnodes;
    loom_node **nodes; /* by node id; NULL once destroyed */
    queued *head, *tail;
    size_t queued;
    uint64_t delivered, max_deliveries;
};

static node_fuzz_job *installed; /* node_fuzz_job_install */

void node_fuzz_rid(uint32_t id, uint8_t *rid, size_t *len)
{
    memset(rid, 0, MSG_RID_SIZE);
    rid[0] = MSG_RID_TAG;
    for (int i = 0; i < 4; i++) rid[1 + i] = (uint8_t)(id >> (8 * i));
    *len = MSG_RID_SIZE;
}

int node_fuzz_msg_add_frame(node_fuzz_msg *m, const void *data, size_t len)
{
    if (m->nframes >= MSG_MAX_FRAMES) return LOOM_EINVAL;
    uint8_t *copy = NULL;
    if (len && !(copy = malloc(len))) return LOOM_ENOMEM;
    if (len) memcpy(copy, data, len);
    m->frames[m->nframes].data = copy;
    m->frames[m->nframes++].len = len;
    return 0;
}

void node_fuzz_msg_close(node_fuzz_msg *m)
{
    for (size_t i = 0; i < m->nframes; i++) free(m->frames[i].data);
    m->nframes = 0;
}

/* ---- the seam ---- */

static int seam_send(void *ctx, loom_node *n, uint32_t dest, zmq_msg_t *hdr, zmq_msg_t *parts,
                     size_t nparts)
{
    node_fuzz_job *j = ctx;
    queued *q = calloc(1, sizeof *q);
    if (!q || zmq_msg_size(hdr) != MSG_HEADER_SIZE || nparts > MSG_MAX_FRAMES) {
        free(q);
        zmq_msg_close(hdr);
        for (size_t i = 0; i < nparts; i++) zmq_msg_close(&parts[i]);
        return q ? LOOM_EINVAL : LOOM_ENOMEM;
    }
    q->m.from = n->id;
    q->m.dest = dest;
    memcpy(q->m.hdr, zmq_msg_data(hdr), MSG_HEADER_SIZE);
    zmq_msg_close(hdr);
    /* The bytes are copied, as the wire would: a frame sent in place stays the
     * sender's memory, valid only until the answer (a repeated or delayed
     * delivery must not read it after that). */
    int rc = 0;
    for (size_t i = 0; i < nparts; i++) {
        if (!rc)
            rc = node_fuzz_msg_add_frame(&q->m, zmq_msg_data(&parts[i]), zmq_msg_size(&parts[i]));
        zmq_msg_close(&parts[i]);
    }
    if (rc) {
        node_fuzz_msg_close(&q->m);
        free(q);
        return rc;
    }
    if (j->tail)
        j->tail->next = q;
    else
        j->head = q;
    j->tail = q;
    j->queued++;
    atomic_fetch_add(&n->messages_sent, 1);
    return 0;
}

static int seam_pump(void *ctx)
{
    return node_fuzz_job_step(ctx);
}

static void seam_gone(void *ctx, loom_node *n)
{
    node_fuzz_job *j = ctx;
    if (n->id < j->nnodes && j->nodes[n->id] == n) j->nodes[n->id] = NULL;
}

static const struct node_seam seam = {seam_send, seam_pump, seam_gone};

/* ---- nodes ---- */

/* A node of the job for cfg, as node_start() would make it, minus the sockets. */
static int make_node(node_fuzz_job *j, const loom_config *cfg, int (*attach)(loom_node *n),
                     loom_node **out)
{
    *out = NULL;
    loom_node *n = calloc(1, sizeof *n);
    if (!n) return LOOM_ENOMEM;
    n->cfg = *cfg;
    n->cfg.on_failure = LOOM_ON_FAILURE_RETURN; /* the fuzzer's process must go on */
    n->cfg.status_port = -1;                    /* no sockets: no status page */
    if (!n->cfg.max_frame_mib) n->cfg.max_frame_mib = MSG_MAX_PAYLOAD_MIB; /* as node_start */
    n->nnodes = j->nnodes;
    n->id = cfg->role == LOOM_SCHEDULER ? 0
            : cfg->role == LOOM_SERVER  ? node_server_id(cfg->num_servers, cfg->rank)
                                        : node_worker_id(cfg->num_servers, cfg->rank);
    n->peers = calloc(n->nnodes, sizeof *n->peers);
    pthread_mutex_init(&n->mu, NULL);
    pthread_cond_init(&n->cv, NULL);
    pthread_mutex_init(&n->sock_mu, NULL);
    pthread_mutex_init(&n->recv_mu, NULL);
    pthread_mutex_init(&n->hb_mu, NULL);
    n->wake_fd = -1;
    n->hb_wake_fd = -1; /* no heartbeat thread: node_destroy must not close descriptor 0 */
    if (!n->peers || tracker_init(&n->ts) || u64map_init(&n->rid_index, n->nnodes)) {
        free(n->peers);
        free(n);
        return LOOM_ENOMEM;
    }
    n->seam = &seam;
    n->seam_ctx = j;
    snprintf(n->tag, sizeof n->tag, "fuzz node %u", n->id);
    snprintf(n->address, sizeof n->address, "fuzz:%u", n->id);
    node_fuzz_rid(n->id, n->my_rid, &n->my_rid_len);
    snprintf(n->peers[0].addr, sizeof n->peers[0].addr, "%s", cfg->scheduler);
    j->nodes[n->id] = n;
    int rc = cfg->role == LOOM_SCHEDULER ? status_attach(n) : node_member_attach(n);
    if (!rc && attach) rc = attach(n);
    if (!rc && cfg->role == LOOM_SCHEDULER) {
        rc = membership_attach(n);
        n->roster_installed = 1;
        n->state = NODE_RUNNING;
    }
    if (!rc && j->assembled) {
        /* What REGISTER and ROSTER would have left behind. */
        for (uint32_t id = 0; id < n->nnodes && !rc; id++) {
            peer *p = &n->peers[id];
            p->role = node_peer_role(n, id, &p->rank);
            uint8_t rid[NODE_RID_MAX];
            size_t rid_len;
            node_fuzz_rid(id, rid, &rid_len);
            if (id != 0 && id != n->id) rc = node_bind_rid(n, id, rid, rid_len);
            memcpy(p->rid, rid, rid_len);
            p->rid_len = rid_len;
            snprintf(p->addr, sizeof p->addr, "fuzz:%u", id);
            p->registered = id != 0;
            p->last_heard_ms = node_now_ms();
        }
        n->roster_installed = 1;
        n->state = NODE_RUNNING;
        if (cfg->role == LOOM_SCHEDULER) {
            sched_set_assembled(n, n->nnodes - 1);
        }
    }
    if (rc) {
        node_destroy(n);
        return rc;
    }
    *out = n;
    return 0;
}

static loom_config job_config(const node_fuzz_job *j, loom_role role, int rank)
{
    loom_config c;
    loom_config_default(&c);
    c.role = role;
    c.rank = rank;
    c.num_servers = j->num_servers;
    c.num_workers = j->num_workers;
    snprintf(c.scheduler, sizeof c.scheduler, "fuzz:0");
    c.max_frame_mib = NODE_FUZZ_FRAME_MIB;
    return c;
}

/* node_start() of an installed job: its worker of cfg's rank. */
static int start_from_job(const loom_config *cfg, int (*attach)(loom_node *n), loom_node **out)
{
    node_fuzz_job *j = installed;
    if (cfg->role != LOOM_WORKER || cfg->rank < 0 || cfg->num_servers != j->num_servers ||
        cfg->num_workers != j->num_workers || j->nodes[node_worker_id(j->num_servers, cfg->rank)])
        return LOOM_ECONFIG;
    return make_node(j, cfg, attach, out);
}

void node_fuzz_job_install(node_fuzz_job *j)
{
    installed = j;
    node_start_seam = j ? start_from_job : NULL;
}

int node_fuzz_job_new(int num_servers, int num_workers, int assembled, int make_workers,
                      int (*attach)(loom_node *n), uint64_t max_deliveries, node_fuzz_job **out)
{
    *out = NULL;
    if (num_servers < 1 || num_workers < 1 || num_servers > 64 || num_workers > 64)
        return LOOM_ECONFIG;
    node_fuzz_job *j = calloc(1, sizeof *j);
    if (!j) return LOOM_ENOMEM;
    *j = (node_fuzz_job){.num_servers = num_servers,
                         .num_workers = num_workers,
                         .attach = attach,
                         .assembled = assembled,
                         .nnodes = 1u + (uint32_t)num_servers + (uint32_t)num_workers,
                         .max_deliveries = max_deliveries};
    j->nodes = calloc(j->nnodes, sizeof *j->nodes);
    if (!j->nodes) {
        free(j);
        return LOOM_ENOMEM;
    }
    int rc = 0;
    loom_node *n;
    loom_config c = job_config(j, LOOM_SCHEDULER, 0);
    rc = make_node(j, &c, attach, &n);
    for (int r = 0; !rc && r < num_servers; r++) {
        c = job_config(j, LOOM_SERVER, r);
        rc = make_node(j, &c, attach, &n);
    }
    for (int r = 0; !rc && make_workers && r < num_workers; r++) {
        c = job_config(j, LOOM_WORKER, r);
        rc = make_node(j, &c, attach, &n);
    }
    if (rc) {
        node_fuzz_job_free(j);
        return rc;
    }
    *out = j;
    return 0;
}

loom_node *node_fuzz_job_node(const node_fuzz_job *j, uint32_t id)
{
    return id < j->nnodes ? j->nodes[id] : NULL;
}

size_t node_fuzz_job_queued(const node_fuzz_job *j)
{
    return j->queued;
}

int node_fuzz_job_overrun(const node_fuzz_job *j)
{
    return j->delivered >= j->max_deliveries;
}

int node_fuzz_job_take(node_fuzz_job *j, node_fuzz_msg *m)
{
    queued *q = j->head;
    if (!q) return 0;
    j->head = q->next;
    if (!j->head) j->tail = NULL;
    j->queued--;
    *m = q->m;
    free(q);
    return 1;
}

int node_fuzz_job_step(node_fuzz_job *j)
{
    node_fuzz_msg m;
    if (node_fuzz_job_overrun(j) || !node_fuzz_job_take(j, &m)) return 0;
    uint8_t rid[NODE_RID_MAX];
    size_t rid_len;
    node_fuzz_rid(m.from, rid, &rid_len);
    loom_node *from = m.from < j->nnodes ? j->nodes[m.from] : NULL;
    if (from) memcpy(rid, from->my_rid, rid_len); /* a rejoined node's (node_fuzz_job_rejoin) */
    node_fuzz_deliver(j, &m, rid, rid_len, MSG_HEADER_SIZE);
    return 1;
}

void node_fuzz_job_tick(node_fuzz_job *j)
{
    uint64_t now = node_now_ms();
    for (uint32_t id = 0; id < j->nnodes; id++)
        if (j->nodes[id]) node_run_timers(j->nodes[id], now);
}

void node_fuzz_job_rejoin(node_fuzz_job *j, uint32_t id, uint8_t *rid, size_t *len)
{
    node_fuzz_rid(id, rid, len);
    loom_node *n = id < j->nnodes ? j->nodes[id] : NULL;
    if (!n) return;
    n->my_rid[5]++;
    memcpy(rid, n->my_rid, MSG_RID_SIZE);
}

/* The sender receive_one() in node_recv.c would see, or NODE_NO_ID: on a DEALER
 * (a node's to the scheduler, a worker's to the servers once it has the roster)
 * the peer it connects to; on the ROUTER the node whose routing id rid is
 * (router_sender). */
static uint32_t sender_of(loom_node *n, uint32_t from, const uint8_t *rid, size_t rid_len)
{
    int role = n->cfg.role;
    if (from < n->nnodes && from != n->id && role != LOOM_SCHEDULER &&
        (from == 0 || (role == LOOM_WORKER && n->roster_installed &&
                       node_peer_role(n, from, &(int){0}) == LOOM_SERVER)))
        return from;
    uint32_t id;
    if (rid_len != MSG_RID_SIZE || !u64map_get(&n->rid_index, msg_load_u64(rid + 1), &id))
        return NODE_NO_ID;
    if (id == 0 || id == n->id || memcmp(n->peers[id].rid, rid, rid_len)) return NODE_NO_ID;
    return id;
}

static void free_frame(void *data, void *hint)
{
    (void)hint;
    free(data);
}

void node_fuzz_deliver(node_fuzz_job *j, node_fuzz_msg *fm, const uint8_t *rid, size_t rid_len,
                       size_t hdr_len)
{
    j->delivered++;
    loom_node *n = fm->dest < j->nnodes ? j->nodes[fm->dest] : NULL;
    if (!n) {
        node_fuzz_msg_close(fm);
        return;
    }
    atomic_fetch_add(&n->messages_received, 1);
    node_msg m = {0};
    int err = msg_decode_header(fm->hdr, hdr_len < MSG_HEADER_SIZE ? hdr_len : MSG_HEADER_SIZE,
                                fm->nframes, &m.h);
    if (err != MSG_OK) {
        node_drop_raw(n, msg_error_name(err));
        node_fuzz_msg_close(fm);
        return;
    }
    /* The frames' bytes are handed over, not copied. */
    m.nframes = fm->nframes;
    for (size_t i = 0; i < fm->nframes; i++) {
        zmq_msg_t *f = node_msg_frame(&m, i);
        if (!fm->frames[i].len ||
            zmq_msg_init_data(f, fm->frames[i].data, fm->frames[i].len, free_frame, NULL)) {
            free(fm->frames[i].data);
            zmq_msg_init(f);
        }
    }
    fm->nframes = 0;
    node_msg_note_frames(&m);
    /* The same decisions, in the same order, as receive_one() in node_recv.c. */
    m.from = sender_of(n, fm->from, rid, rid_len);
    void *ctx;
    const node_hooks *h =
        m.from == NODE_NO_ID && msg_stranger_type(m.h.type) ? node_stranger_hooks(n, &ctx) : NULL;
    if (h)
        h->stranger(n, ctx, rid, rid_len, &m);
    else if (m.from == NODE_NO_ID || (m.h.sender != m.from && m.h.type != MSG_REGISTER))
        node_drop_raw(n, msg_error_name(MSG_ERR_SENDER));
    else
        node_dispatch(n, &m);
    node_msg_release(&m);
}

void node_fuzz_job_free(node_fuzz_job *j)
{
    if (!j) return;
    if (installed == j) node_fuzz_job_install(NULL);
    /* Workers first, as a job ends: nothing they still send is delivered. */
    for (uint32_t id = j->nnodes; id-- > 0;) node_destroy(j->nodes[id]);
    node_fuzz_msg m;
    while (node_fuzz_job_take(j, &m)) node_fuzz_msg_close(&m);
    free(j->nodes);
    free(j);
}
