/* status: the scheduler's read-only status page (HTTP: HTML and
 * /status.json), served from the I/O thread's poll loop.
 *
 * What it shows is what the scheduler's I/O thread already knows or is told
 * on the way: every node's role, address and last sign of life (heartbeats),
 * the byte totals each node puts in its HEARTBEATs (turned into rates here),
 * each worker's clock (the ps registry calls node_note_clock) and the job's
 * min clock, the latest metrics a worker's application reported (METRICS
 * messages), and failures. GET / is an HTML page that reloads itself every
 * STATUS_REFRESH_S seconds, GET /status.json the same data as JSON (what
 * `loom status` reads); docs/USAGE.md describes both.
 *
 * Why it cannot stall the scheduler: everything runs on the I/O thread, but
 * only as non-blocking socket calls made when poll says they will not wait.
 * A request must arrive whole (at most STATUS_MAX_REQUEST bytes, head only:
 * no body) and be answered within STATUS_CONN_MS of the connection's start,
 * or the connection is closed; at most STATUS_MAX_CONNS are open at once.
 * When all are taken, a new one takes the place of one already answered or
 * open for STATUS_EVICT_MS, or else waits in the kernel's backlog until a
 * slot frees (slot_for_new): every client is answered, and idle ones cannot
 * keep others out. A response is built at
 * once into memory (bounded: at most STATUS_MAX_LISTED nodes are listed) and
 * sent as fast as the client reads it. Bad requests get 400, 405, 413 or 431
 * and the connection is closed.
 *
 * The page attaches to the scheduler's node at start-up (status_attach) like
 * any part of core, through the node's hooks (node_priv.h): its listening
 * socket and connections are descriptors its poll hook adds to the I/O
 * thread's poll set, its serve hook handles what the poll found on them, and
 * its death hook notes failures; HEARTBEAT and METRICS are its handlers. With
 * status_port -1 there is no page, and only the handlers attach (METRICS
 * also gives the membership each worker's "share"). */
#define _GNU_SOURCE /* accept4 */
#include "core/status.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/heartbeat.h"
#include "core/log.h"
#include "core/node_priv.h"
#include "core/sha256.h"
#include "loom/error.h"

_Static_assert(STATUS_POLL_ITEMS <= NODE_HOOK_POLL_MAX, "the page's descriptors fit the poll set");

#define STATUS_MAX_REQUEST     4096 /* request line and headers */
#define STATUS_CONN_MS         5000 /* a whole exchange, from accept to the last byte sent */
#define STATUS_DRAIN_MS        1000 /* reading what a client still sends after our answer */
#define STATUS_MAX_LISTED      1024 /* nodes listed on the page; the rest are counted */
#define STATUS_REFRESH_S       2
#define STATUS_BACKLOG         1024 /* connections the kernel queues until accepted */
#define STATUS_EVICT_MS        1000 /* how long a connection keeps its slot against newcomers */
#define STATUS_RATE_MS         1000 /* bytes per second over at least this long */
#define STATUS_ACCEPT_PAUSE_MS 100
#define STATUS_TOKEN_BYTES     16 /* of the HMAC: 128 bits, 32 hex digits in the URL */

enum conn_state { CONN_FREE, CONN_READING, CONN_WRITING, CONN_DRAINING };

typedef struct conn {
    enum conn_state state;
    int fd;
    char local[NI_MAXHOST]; /* the address the client reached, numeric: a Host it may name */
    uint64_t started_ms, deadline_ms;
    size_t got;
    char req[STATUS_MAX_REQUEST + 1];
    char *resp;
    size_t resp_len, sent;
} conn;

/* What the page knows of one node besides its peer record. */
typedef struct node_record {
    int64_t clock;
    int has_clock;
    uint64_t sent, received; /* totals it reported */
    uint64_t rate_base_ms, rate_base_sent, rate_base_received;
    double send_rate, recv_rate; /* bytes per second */
    msg_metrics metrics;
    uint64_t metrics_ms; /* when they arrived; 0 = none yet */
} node_record;

typedef struct status_page {
    int listen_fd;
    char address[NODE_ADDR_MAX + 32]; /* "[host]:port" */
    char url[NODE_ADDR_MAX + 96];     /* "http://[host]:port/", and "?token=T" with a secret */
    char bind_host[NODE_ADDR_MAX];    /* what it was asked to bind, brackets stripped */
    char hostname[256];               /* this machine's name, another Host it may be called */
    char port[16];
    /* With a job secret, what a request's "token" parameter must be (hex); "" = none needed. */
    char token[2 * STATUS_TOKEN_BYTES + 1];
    uint64_t started_ms;
    conn conns[STATUS_MAX_CONNS];
    node_record *nodes; /* indexed by node id */
    int64_t min_clock;
    int failed;
    uint32_t dead;
    char failure[512];
    uint64_t requests, bad_requests, evicted;
    /* accept() failed for want of file descriptors: the listener is left out
     * of the poll set until then, or the loop would spin on it. */
    uint64_t accept_paused_until_ms;
} status_page;

static const node_hooks page_hooks; /* defined at the end */

/* n's page, NULL without one. */
static status_page *page_of(const loom_node *n)
{
    return node_hooks_ctx(n, &page_hooks);
}

/* ---- opening ---- */

/* The page's token for a job with a secret: HMAC-SHA-256 keyed with the secret
 * over a label and the job token. The scheduler derives it from what every
 * launcher already gives it, so no launcher has to pass it on; it names this
 * job's page (another job token, another token) and reveals nothing of the
 * secret, whose holders are exactly the job's processes. */
static void derive_token(const loom_config *cfg, char *out)
{
    char msg[sizeof cfg->job_token + 32];
    int len = snprintf(msg, sizeof msg, "loom status page\n%s", cfg->job_token);
    uint8_t mac[SHA256_LEN];
    hmac_sha256(cfg->secret, strlen(cfg->secret), msg, (size_t)len, mac);
    for (int i = 0; i < STATUS_TOKEN_BYTES; i++) snprintf(out + 2 * i, 3, "%02x", mac[i]);
}

/* Open n's page into *out; on an error *out, if set, is to be closed (page_close). */
static int page_open(loom_node *n, status_page **out)
{
    status_page *s = calloc(1, sizeof *s);
    node_record *nodes = calloc(n->nnodes, sizeof *nodes);
    if (!s || !nodes) {
        free(s);
        free(nodes);
        return LOOM_ENOMEM;
    }
    s->nodes = nodes;
    s->listen_fd = -1;
    s->started_ms = node_now_ms();
    for (int i = 0; i < STATUS_MAX_CONNS; i++) s->conns[i].fd = -1;
    *out = s;
    if (n->cfg.secret[0]) derive_token(&n->cfg, s->token);
    if (gethostname(s->hostname, sizeof s->hostname)) s->hostname[0] = '\0';
    s->hostname[sizeof s->hostname - 1] = '\0';
    /* Loopback unless asked otherwise (cfg.status_bind, LOOM_STATUS_BIND), whatever
     * the job binds: the page is for whoever runs the job, and under mpirun or srun
     * the job's own address is on an interface the whole network reaches. */
    char *host = s->bind_host;
    snprintf(host, sizeof s->bind_host, "%s",
             n->cfg.status_bind[0] ? n->cfg.status_bind : "127.0.0.1");
    if (host[0] == '[') { /* "[::1]" */
        memmove(host, host + 1, strlen(host));
        host[strcspn(host, "]")] = '\0';
    }
    char port[16];
    snprintf(port, sizeof port, "%d", n->cfg.status_port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | AI_PASSIVE};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai) {
        log_error("status page: cannot use the address %s: %s", host, gai_strerror(gai));
        return LOOM_ETRANSPORT;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, STATUS_BACKLOG)) {
        log_error("status page: cannot listen on %s port %s: %s", host, port, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return LOOM_ETRANSPORT;
    }
    freeaddrinfo(ai);
    s->listen_fd = fd;
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    char bound_port[16];
    if (getsockname(fd, (struct sockaddr *)&sa, &len) ||
        getnameinfo((struct sockaddr *)&sa, len, NULL, 0, bound_port, sizeof bound_port,
                    NI_NUMERICSERV)) {
        log_error("status page: cannot read the port it listens on: %s", strerror(errno));
        return LOOM_ETRANSPORT;
    }
    snprintf(s->port, sizeof s->port, "%s", bound_port);
    snprintf(s->address, sizeof s->address, "%s%s%s:%s", strchr(host, ':') ? "[" : "", host,
             strchr(host, ':') ? "]" : "", bound_port);
    snprintf(s->url, sizeof s->url, "http://%s/%s%s", s->address, s->token[0] ? "?token=" : "",
             s->token);
    return 0;
}

static void conn_close(conn *c)
{
    if (c->fd >= 0) close(c->fd);
    free(c->resp);
    *c = (conn){.state = CONN_FREE, .fd = -1};
}

static void page_close(void *ctx)
{
    status_page *s = ctx;
    for (int i = 0; i < STATUS_MAX_CONNS; i++) conn_close(&s->conns[i]);
    if (s->listen_fd >= 0) close(s->listen_fd);
    free(s->nodes);
    free(s);
}

const char *loom_status_address(const loom_node *n)
{
    const status_page *s = n ? page_of(n) : NULL;
    return s ? s->address : "";
}

const char *loom_status_url(const loom_node *n)
{
    const status_page *s = n ? page_of(n) : NULL;
    return s ? s->url : "";
}

/* ---- what the scheduler learns ---- */

static void rate_update(node_record *r, uint64_t sent, uint64_t received, uint64_t now)
{
    r->sent = sent;
    r->received = received;
    if (!r->rate_base_ms) {
        r->rate_base_ms = now;
        r->rate_base_sent = sent;
        r->rate_base_received = received;
        return;
    }
    uint64_t dt = now - r->rate_base_ms;
    if (dt < STATUS_RATE_MS) return;
    /* Totals only grow; a smaller one would be a confused peer: no rate then. */
    r->send_rate = sent >= r->rate_base_sent ? (double)(sent - r->rate_base_sent) * 1000.0 / dt : 0;
    r->recv_rate = received >= r->rate_base_received
                       ? (double)(received - r->rate_base_received) * 1000.0 / dt
                       : 0;
    r->rate_base_ms = now;
    r->rate_base_sent = sent;
    r->rate_base_received = received;
}

/* A node's status heartbeat, sent by its I/O thread with its byte totals
 * (h.a sent, h.b received). Liveness travels apart (heartbeat.c). */
static void on_heartbeat(loom_node *n, void *ctx, node_msg *m)
{
    status_page *s = ctx;
    if (s && m->from < n->nnodes) rate_update(&s->nodes[m->from], m->h.a, m->h.b, node_now_ms());
}

/* The death hook: the first failure is the one the page shows. */
static void note_death(loom_node *n, void *ctx, uint32_t dead, const char *why, int fatal)
{
    (void)n, (void)fatal;
    status_page *s = ctx;
    if (s->failed) return;
    s->failed = 1;
    s->dead = dead;
    snprintf(s->failure, sizeof s->failure, "%s", why);
}

void node_note_clock(loom_node *n, uint32_t worker, int64_t clock, int64_t min_clock)
{
    status_page *s = page_of(n);
    if (!s || worker >= n->nnodes) return;
    /* INT64_MAX is a worker's "done": the page keeps its last real clock. */
    if (clock != INT64_MAX) {
        s->nodes[worker].clock = clock;
        s->nodes[worker].has_clock = 1;
    }
    if (min_clock != INT64_MAX) s->min_clock = min_clock;
}

/* A worker's METRICS: validated, hostile payloads dropped and counted. */
static void on_metrics(loom_node *n, void *ctx, node_msg *m)
{
    status_page *s = ctx;
    msg_metrics mm;
    if (node_peer_role(n, m->from, NULL) != LOOM_WORKER ||
        msg_metrics_decode(node_frame_data(m, 0), node_frame_size(m, 0), &mm)) {
        node_drop(n, m, "invalid METRICS");
        return;
    }
    /* The size of the worker's share of the data, should the job go on without it. */
    for (uint32_t k = 0; k < mm.count; k++)
        if (!strcmp(mm.name[k], "share")) n->peers[m->from].share = mm.value[k];
    if (!s || m->from >= n->nnodes) return;
    s->nodes[m->from].metrics = mm;
    s->nodes[m->from].metrics_ms = node_now_ms();
}

/* ---- the data, as JSON and as HTML ---- */

static const char *role_text(int role)
{
    return role == LOOM_SCHEDULER ? "scheduler" : role == LOOM_SERVER ? "server" : "worker";
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void html_str(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc((unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f ? *s : '?', f);
        }
    }
}

/* One node's state word. */
static const char *node_state(const loom_node *n, uint32_t id)
{
    const status_page *s = page_of(n);
    const peer *p = &n->peers[id];
    if (s->failed && s->dead == id) return "dead";
    if (id == 0) return s->failed ? "failed" : "running";
    if (!p->registered) return "not registered";
    if (p->done) return "done";
    return "running";
}

static const char *job_state(const loom_node *n)
{
    sched_summary m;
    sched_summary_of(n, &m);
    if (page_of(n)->failed) return "failed";
    if (m.shutting_down) return "shutting down";
    if (m.assembling) return "assembling";
    return "running";
}

/* Heartbeat age, and the time left before the scheduler would declare the
 * node dead (0 for a node it no longer watches). */
static void heartbeat(loom_node *n, uint32_t id, uint64_t now, uint64_t *age, uint64_t *left)
{
    const peer *p = &n->peers[id];
    *age = 0;
    *left = 0;
    if (id == 0 || !p->registered) return;
    uint64_t timeout = (uint64_t)n->cfg.heartbeat_timeout_ms;
    uint64_t silent = heartbeat_silence(n, id, now, age);
    if (!p->done) *left = silent < timeout ? timeout - silent : 0;
}

static uint32_t listed(const loom_node *n)
{
    return n->nnodes < STATUS_MAX_LISTED ? n->nnodes : STATUS_MAX_LISTED;
}

static void write_json(loom_node *n, FILE *f, uint64_t now)
{
    status_page *s = page_of(n);
    loom_stats st;
    loom_node_stats(n, &st);
    sched_summary m;
    sched_summary_of(n, &m);
    fprintf(f, "{\"job\": {\"state\": ");
    json_str(f, job_state(n));
    fprintf(f, ", \"scheduler\": ");
    json_str(f, n->address);
    fprintf(f,
            ", \"servers\": %d, \"workers\": %d, \"registered\": %" PRIu32
            ", \"workers_done\": %" PRIu32 ", \"uptime_ms\": %" PRIu64
            ", \"heartbeat_interval_ms\": %d, \"heartbeat_timeout_ms\": %d, \"min_clock\": %" PRId64
            "},\n",
            n->cfg.num_servers, n->cfg.num_workers, m.registered, m.workers_done,
            now - s->started_ms, n->cfg.heartbeat_interval_ms, n->cfg.heartbeat_timeout_ms,
            s->min_clock);
    fprintf(f, "\"nodes\": [");
    for (uint32_t id = 0; id < listed(n); id++) {
        const peer *p = &n->peers[id];
        const node_record *r = &s->nodes[id];
        int rank;
        int role = node_peer_role(n, id, &rank);
        uint64_t age, left;
        heartbeat(n, id, now, &age, &left);
        fprintf(f, "%s\n {\"id\": %" PRIu32 ", \"role\": ", id ? "," : "", id);
        json_str(f, role_text(role));
        fprintf(f, ", \"rank\": %d, \"address\": ", rank);
        json_str(f, id == 0 ? n->address : p->addr);
        fprintf(f, ", \"state\": ");
        json_str(f, node_state(n, id));
        fprintf(f,
                ", \"bytes_sent\": %" PRIu64 ", \"bytes_received\": %" PRIu64
                ", \"send_bytes_per_s\": %.0f, \"recv_bytes_per_s\": %.0f"
                ", \"heartbeat_age_ms\": %" PRIu64 ", \"dead_in_ms\": %" PRIu64,
                r->sent, r->received, r->send_rate, r->recv_rate, age, left);
        if (role == LOOM_WORKER && r->has_clock)
            fprintf(f, ", \"clock\": %" PRId64 ", \"staleness\": %" PRId64, r->clock,
                    r->clock - s->min_clock);
        else if (role == LOOM_WORKER)
            fprintf(f, ", \"clock\": null, \"staleness\": null");
        fprintf(f, ", \"metrics\": {");
        for (uint32_t k = 0; k < r->metrics.count; k++) {
            fprintf(f, "%s", k ? ", " : "");
            json_str(f, r->metrics.name[k]);
            fprintf(f, ": %.9g", r->metrics.value[k]);
        }
        fprintf(f, "}}");
    }
    fprintf(f, "],\n\"nodes_not_listed\": %" PRIu32 ",\n", n->nnodes - listed(n));
    fprintf(f, "\"failures\": {\"failed_node\": ");
    if (s->failed)
        fprintf(f, "%" PRIu32 ", \"reason\": ", s->dead);
    else
        fprintf(f, "null, \"reason\": ");
    json_str(f, s->failure);
    fprintf(f,
            ", \"malformed_dropped\": %" PRIu64 ", \"registrations_refused\": %" PRIu64
            ", \"connections_refused\": %" PRIu64 "},\n",
            st.malformed_dropped, m.refused, st.connections_refused);
    fprintf(f,
            "\"http\": {\"requests\": %" PRIu64 ", \"bad_requests\": %" PRIu64
            ", \"connections_evicted\": %" PRIu64 "}}\n",
            s->requests, s->bad_requests, s->evicted);
}

static void html_rate(FILE *f, double bytes_per_s)
{
    if (bytes_per_s >= 1e6)
        fprintf(f, "%.1f MB/s", bytes_per_s / 1e6);
    else
        fprintf(f, "%.1f kB/s", bytes_per_s / 1e3);
}

static void write_html(loom_node *n, FILE *f, uint64_t now)
{
    status_page *s = page_of(n);
    loom_stats st;
    loom_node_stats(n, &st);
    sched_summary m;
    sched_summary_of(n, &m);
    fprintf(f,
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"refresh\" content=\"%d\"><title>Loom job</title><style>"
            "body{font-family:sans-serif;margin:0;background:#fff;color:#111}"
            "#bar{background:#1f5fa8;color:#fff;padding:12px 16px;font-size:20px}"
            "#failure{background:#c0262d;color:#fff;padding:8px 16px}"
            "table{border-collapse:collapse;margin:12px 16px}"
            "td,th{border:1px solid #bbb;padding:3px 8px;text-align:right;white-space:nowrap}"
            "th{background:#e8eef6}p{margin:8px 16px}"
            "</style></head><body>\n",
            STATUS_REFRESH_S);
    fprintf(f, "<div id=\"bar\">Loom job: ");
    html_str(f, job_state(n));
    fprintf(f, "</div>\n");
    if (s->failed) {
        fprintf(f, "<div id=\"failure\">Failure: ");
        html_str(f, s->failure);
        fprintf(f, "</div>\n");
    }
    fprintf(f, "<p id=\"summary\">scheduler ");
    html_str(f, n->address);
    fprintf(f,
            " &middot; %d server(s), %d worker(s), %" PRIu32 " done &middot; min clock %" PRId64
            " &middot; heartbeat every %d ms, dead after %d ms &middot; up %.0f s</p>\n",
            n->cfg.num_servers, n->cfg.num_workers, m.workers_done, s->min_clock,
            n->cfg.heartbeat_interval_ms, n->cfg.heartbeat_timeout_ms,
            (double)(now - s->started_ms) / 1000.0);
    fprintf(f, "<table id=\"nodes\"><tr><th>node</th><th>role</th><th>address</th><th>state</th>"
               "<th>clock</th><th>staleness</th><th>sent</th><th>received</th>"
               "<th>heartbeat age</th><th>dead in</th><th>metrics</th></tr>\n");
    for (uint32_t id = 0; id < listed(n); id++) {
        const node_record *r = &s->nodes[id];
        int rank;
        int role = node_peer_role(n, id, &rank);
        uint64_t age, left;
        heartbeat(n, id, now, &age, &left);
        fprintf(f, "<tr><td>%" PRIu32 "</td><td>%s %d</td><td>", id, role_text(role), rank);
        html_str(f, id == 0 ? n->address : n->peers[id].addr);
        fprintf(f, "</td><td>%s</td>", node_state(n, id));
        if (r->has_clock)
            fprintf(f, "<td>%" PRId64 "</td><td>%" PRId64 "</td>", r->clock,
                    r->clock - s->min_clock);
        else
            fprintf(f, "<td></td><td></td>");
        fprintf(f, "<td>");
        html_rate(f, r->send_rate);
        fprintf(f, "</td><td>");
        html_rate(f, r->recv_rate);
        fprintf(f, "</td><td>%" PRIu64 " ms</td><td>%" PRIu64 " ms</td><td>", age, left);
        for (uint32_t k = 0; k < r->metrics.count; k++)
            fprintf(f, "%s%s %.6g", k ? ", " : "", r->metrics.name[k], r->metrics.value[k]);
        fprintf(f, "</td></tr>\n");
    }
    fprintf(f, "</table>\n");
    if (n->nnodes > listed(n))
        fprintf(f, "<p>%" PRIu32 " more nodes not listed</p>\n", n->nnodes - listed(n));
    fprintf(f,
            "<p id=\"failures\">malformed messages dropped: %" PRIu64
            " &middot; registrations refused: %" PRIu64 " &middot; connections refused: %" PRIu64
            "</p>\n<p>JSON: <a href=\"/status.json%s%s\">/status.json</a></p>\n</body></html>\n",
            st.malformed_dropped, m.refused, st.connections_refused, s->token[0] ? "?token=" : "",
            s->token);
}

/* ---- HTTP ---- */

static const char *reason_phrase(int code)
{
    switch (code) {
    case 200:
        return "OK";
    case 400:
        return "Bad Request";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 413:
        return "Content Too Large";
    case 431:
        return "Request Header Fields Too Large";
    default:
        return "Internal Server Error";
    }
}

/* Build the whole response (head, and body unless head_only) into c->resp. */
static void respond(loom_node *n, conn *c, int code, const char *path, int head_only, uint64_t now)
{
    char *body = NULL;
    size_t body_len = 0;
    FILE *f = open_memstream(&body, &body_len);
    const char *type = "text/plain; charset=utf-8";
    if (f) {
        if (code == 200 && !strcmp(path, "/status.json")) {
            type = "application/json";
            write_json(n, f, now);
        } else if (code == 200) {
            type = "text/html; charset=utf-8";
            write_html(n, f, now);
        } else {
            fprintf(f, "%d %s\n", code, reason_phrase(code));
        }
        if (fclose(f)) body_len = 0;
    }
    if (code != 200) page_of(n)->bad_requests++;
    char *resp = NULL;
    size_t resp_len = 0;
    f = open_memstream(&resp, &resp_len);
    if (f) {
        fprintf(f,
                "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n%s"
                "Connection: close\r\n\r\n",
                code, reason_phrase(code), type, body_len,
                code == 405 ? "Allow: GET, HEAD\r\n" : "");
        if (!head_only && body_len) fwrite(body, 1, body_len, f);
        if (fclose(f)) {
            free(resp);
            resp = NULL;
        }
    }
    free(body);
    if (!resp) { /* out of memory: nothing to say */
        conn_close(c);
        return;
    }
    c->resp = resp;
    c->resp_len = resp_len;
    c->sent = 0;
    c->state = CONN_WRITING;
}

/* Whether a Host header's value names this page: localhost, a loopback address,
 * the address the client reached, what the page was bound to or this
 * machine's name, with the page's port or none. A browser sends the name in
 * its address bar, so a page of another site that a DNS trick made resolve to
 * this machine (DNS rebinding) still names that site, and is refused. */
static int host_ok(const status_page *s, const conn *c, char *value)
{
    size_t end = strlen(value);
    while (end && (value[end - 1] == ' ' || value[end - 1] == '\t')) value[--end] = '\0';
    const char *name = value, *port = NULL;
    size_t len;
    if (value[0] == '[') { /* "[::1]:port" */
        const char *close = strchr(value, ']');
        if (!close || (close[1] && close[1] != ':')) return 0;
        name = value + 1;
        len = (size_t)(close - name);
        if (close[1]) port = close + 2;
    } else {
        len = strcspn(value, ":");
        if (value[len]) port = value + len + 1;
    }
    if (port && strcmp(port, s->port)) return 0;
    const char *const known[] = {"localhost", "127.0.0.1",  "::1",
                                 c->local,    s->bind_host, s->hostname};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (len && strlen(known[i]) == len && !strncasecmp(name, known[i], len)) return 1;
    return 0;
}

/* Whether the query (NULL: none) has this page's token, if it needs one. The
 * comparison takes the same time wherever the first wrong digit is. */
static int token_ok(const status_page *s, const char *query)
{
    size_t want = strlen(s->token);
    if (!want) return 1;
    for (const char *q = query; q && *q;) {
        size_t len = strcspn(q, "&");
        if (len == 6 + want && !strncmp(q, "token=", 6)) {
            unsigned char diff = 0;
            for (size_t i = 0; i < want; i++) diff |= (unsigned char)(q[6 + i] ^ s->token[i]);
            if (!diff) return 1;
        }
        q += len + (q[len] == '&');
    }
    return 0;
}

/* The status code for a whole request head in c->req (NUL-terminated), and
 * the path and method it asks for. */
static int parse_request(const status_page *s, conn *c, char *path, size_t pathlen, int *head_only)
{
    char *line_end = strstr(c->req, "\r\n");
    char method[16], target[1024], version[16];
    int used = 0;
    *line_end = '\0';
    if (sscanf(c->req, "%15[A-Z] %1023[^ ] %15[^ ]%n", method, target, version, &used) != 3 ||
        c->req[used] != '\0' || target[0] != '/' || strncmp(version, "HTTP/1.", 7) ||
        (version[7] != '0' && version[7] != '1') || version[8])
        return 400;
    for (const char *t = target; *t; t++)
        if ((unsigned char)*t <= 0x20 || (unsigned char)*t >= 0x7f) return 400;
    /* Headers: "name: value" lines; a body is never accepted. */
    char *host = NULL;
    int hosts = 0;
    for (char *h = line_end + 2; *h && strncmp(h, "\r\n", 2);) {
        char *end = strstr(h, "\r\n");
        *end = '\0';
        char *colon = strchr(h, ':');
        if (!colon || colon == h) return 400;
        for (const char *t = h; *t; t++)
            if (((unsigned char)*t < 0x20 && *t != '\t') || (unsigned char)*t == 0x7f) return 400;
        size_t name_len = (size_t)(colon - h);
        char *value = colon + 1 + strspn(colon + 1, " \t");
        if (name_len == 17 && !strncasecmp(h, "Transfer-Encoding", 17)) return 413;
        if (name_len == 14 && !strncasecmp(h, "Content-Length", 14)) {
            if (!*value || strspn(value, "0123456789") != strlen(value)) return 400;
            if (strspn(value, "0") != strlen(value)) return 413;
        }
        if (name_len == 4 && !strncasecmp(h, "Host", 4)) {
            host = value;
            hosts++;
        }
        h = end + 2;
    }
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) return 405;
    /* HTTP/1.1 needs exactly one Host (RFC 9112, 3.2). An HTTP/1.0 request may
     * come without: browsers always send one, so it is no DNS rebinding. */
    if (hosts > 1 || (!hosts && version[7] == '1')) return 400;
    if (host && !host_ok(s, c, host)) return 403;
    *head_only = !strcmp(method, "HEAD");
    target[strcspn(target, "#")] = '\0';
    char *query = strchr(target, '?');
    if (query) *query++ = '\0';
    snprintf(path, pathlen, "%s", target);
    if (strcmp(path, "/") && strcmp(path, "/status.json") && strcmp(path, "/index.html"))
        return 404;
    return token_ok(s, query) ? 200 : 403;
}

static void on_readable(loom_node *n, conn *c, uint64_t now)
{
    if (c->state == CONN_DRAINING) {
        char sink[1024];
        ssize_t r = recv(c->fd, sink, sizeof sink, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) conn_close(c);
        return;
    }
    ssize_t r = recv(c->fd, c->req + c->got, STATUS_MAX_REQUEST - c->got, 0);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) { /* the client left, or the connection broke */
        conn_close(c);
        return;
    }
    c->got += (size_t)r;
    c->req[c->got] = '\0';
    char path[1024] = "/";
    int head_only = 0;
    if (memchr(c->req, '\0', c->got)) {
        respond(n, c, 400, path, 0, now);
    } else if (strstr(c->req, "\r\n\r\n")) {
        page_of(n)->requests++;
        int code = parse_request(page_of(n), c, path, sizeof path, &head_only);
        respond(n, c, code, path, head_only, now);
    } else if (strstr(c->req, "\n\n")) { /* lines must end in CRLF */
        respond(n, c, 400, path, 0, now);
    } else if (c->got == STATUS_MAX_REQUEST) {
        respond(n, c, 431, path, 0, now);
    }
}

static void on_writable(conn *c, uint64_t now)
{
    ssize_t w = send(c->fd, c->resp + c->sent, c->resp_len - c->sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (w < 0) {
        conn_close(c);
        return;
    }
    c->sent += (size_t)w;
    if (c->sent < c->resp_len) return;
    /* All sent. Closing now with unread input would reset the connection and
     * could destroy the answer in flight: say we are done and read what the
     * client still sends, briefly. */
    free(c->resp);
    c->resp = NULL;
    shutdown(c->fd, SHUT_WR);
    c->state = CONN_DRAINING;
    if (c->deadline_ms > now + STATUS_DRAIN_MS) c->deadline_ms = now + STATUS_DRAIN_MS;
}

/* Where a new connection goes: a free slot, else one whose connection may give
 * way to it, else NULL (the new one then waits in the kernel's backlog). Only a
 * connection already answered (draining) or open for STATUS_EVICT_MS may give
 * way, the answered first, then the oldest: evicting whatever was oldest, even
 * a connection accepted in the same round whose request had not been read yet,
 * is how 20 clients at once lost some of their answers. Idle and slow clients
 * still cannot keep others out for longer than STATUS_EVICT_MS. */
static conn *slot_for_new(status_page *s, uint64_t now)
{
    conn *victim = NULL;
    for (int i = 0; i < STATUS_MAX_CONNS; i++) {
        conn *c = &s->conns[i];
        if (c->state == CONN_FREE) return c;
        int answered = c->state == CONN_DRAINING;
        if (!answered && now - c->started_ms < STATUS_EVICT_MS) continue;
        int victim_answered = victim && victim->state == CONN_DRAINING;
        if (!victim || answered > victim_answered ||
            (answered == victim_answered && c->started_ms < victim->started_ms))
            victim = c;
    }
    return victim;
}

static void accept_all(loom_node *n, uint64_t now)
{
    status_page *s = page_of(n);
    for (int k = 0; k < STATUS_MAX_CONNS; k++) {
        conn *slot = slot_for_new(s, now);
        if (!slot) return;
        int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM))
            s->accept_paused_until_ms = now + STATUS_ACCEPT_PAUSE_MS;
        if (fd < 0) return; /* EAGAIN: no more; ECONNABORTED and such: the next one */
        if (slot->state != CONN_FREE) {
            s->evicted++;
            conn_close(slot);
        }
        slot->fd = fd;
        slot->state = CONN_READING;
        /* The address the client reached, one name a Host may give (host_ok). */
        struct sockaddr_storage sa;
        socklen_t len = sizeof sa;
        if (getsockname(fd, (struct sockaddr *)&sa, &len) ||
            getnameinfo((struct sockaddr *)&sa, len, slot->local, sizeof slot->local, NULL, 0,
                        NI_NUMERICHOST))
            slot->local[0] = '\0';
        if (!strncmp(slot->local, "::ffff:", 7) && strchr(slot->local, '.')) /* IPv4 over v6 */
            memmove(slot->local, slot->local + 7, strlen(slot->local + 7) + 1);
        slot->started_ms = now;
        slot->deadline_ms = now + STATUS_CONN_MS;
    }
}

/* The poll hook: the listener, then the open connections. */
static int page_poll(loom_node *n, void *ctx, struct pollfd *fds)
{
    (void)n;
    status_page *s = ctx;
    int ni = 0;
    /* The listener only while a new connection could be taken: a readable
     * listener that accept_all() leaves alone would make poll return at once. */
    uint64_t now = node_now_ms();
    short listen_events = now < s->accept_paused_until_ms || !slot_for_new(s, now) ? 0 : POLLIN;
    fds[ni++] = (struct pollfd){s->listen_fd, listen_events, 0};
    for (int i = 0; i < STATUS_MAX_CONNS; i++) {
        conn *c = &s->conns[i];
        if (c->state == CONN_FREE) continue;
        short events = c->state == CONN_WRITING ? POLLOUT : POLLIN;
        fds[ni++] = (struct pollfd){c->fd, events, 0};
    }
    return ni;
}

static conn *conn_of_fd(status_page *s, int fd)
{
    for (int i = 0; i < STATUS_MAX_CONNS; i++)
        if (s->conns[i].state != CONN_FREE && s->conns[i].fd == fd) return &s->conns[i];
    return NULL;
}

/* The serve hook: what the poll found on page_poll's descriptors. */
static void page_serve(loom_node *n, void *ctx, const struct pollfd *fds, int count, uint64_t now)
{
    status_page *s = ctx;
    /* The scheduler's own rates, from its counters. */
    rate_update(&s->nodes[0], atomic_load(&n->bytes_sent), atomic_load(&n->bytes_received), now);
    /* Connections first: accepting may close (evict) one whose item is in this round. */
    for (int i = 1; i < count; i++) {
        conn *c = conn_of_fd(s, fds[i].fd);
        if (!c) continue;
        if (fds[i].revents & ~(POLLIN | POLLOUT)) { /* an error, a hang-up */
            conn_close(c);
        } else if (c->state == CONN_WRITING && (fds[i].revents & POLLOUT)) {
            on_writable(c, now);
        } else if (c->state != CONN_WRITING && (fds[i].revents & POLLIN)) {
            on_readable(n, c, now);
            if (c->state == CONN_WRITING) on_writable(c, now); /* usually all of it at once */
        }
    }
    if (count > 0 && (fds[0].revents & POLLIN)) accept_all(n, now);
    for (int i = 0; i < STATUS_MAX_CONNS; i++) {
        conn *c = &s->conns[i];
        if (c->state != CONN_FREE && now >= c->deadline_ms) conn_close(c);
    }
}

static const node_hooks page_hooks = {
    .poll = page_poll, .serve = page_serve, .death = note_death, .destroy = page_close};

int status_attach(loom_node *n)
{
    status_page *s = NULL;
    if (n->cfg.status_port >= 0) {
        int rc = page_open(n, &s);
        if (!rc) rc = node_add_hooks(n, &page_hooks, s);
        if (rc) {
            if (s) page_close(s);
            return rc;
        }
    }
    node_set_handler(n, MSG_HEARTBEAT, on_heartbeat, s);
    node_set_handler(n, MSG_METRICS, on_metrics, s);
    return 0;
}
