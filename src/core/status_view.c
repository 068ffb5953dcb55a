/* status_view: the status page's data in the three forms it serves: the HTML
 * page (GET /), the JSON document `loom status` reads (GET /status.json) and
 * Prometheus's text exposition format (GET /metrics, docs/USAGE.md), each
 * written whole into memory by status.c's respond(). All three show the same
 * facts: the job's state and size, each listed node's role, address, state,
 * traffic, heartbeat and (workers) clock, staleness and latest metrics, and
 * the failures. Names and values that came from other processes (addresses,
 * metric names, the failure text) are escaped for the form they go into. */
#define _GNU_SOURCE /* NI_MAXHOST, in status_impl.h */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/heartbeat.h"
#include "core/status_impl.h"
#include "loom/error.h"

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
static const char *node_state(const loom_node *n, const status_page *s, uint32_t id)
{
    const peer *p = &n->peers[id];
    if (s->failed && s->dead == id) return "dead";
    if (id == 0) return s->failed ? "failed" : "running";
    if (p->vacant) return p->left ? "left" : "free slot"; /* docs/ELASTIC.md */
    if (!p->registered) return "not registered";
    if (p->done) return "done";
    return p->joined ? "running (joined)" : "running";
}

static const char *job_state(const loom_node *n, const status_page *s)
{
    sched_summary m;
    sched_summary_of(n, &m);
    if (s->failed) return "failed";
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

void status_write_json(loom_node *n, status_page *s, FILE *f, uint64_t now)
{
    loom_stats st;
    loom_node_stats(n, &st);
    sched_summary m;
    sched_summary_of(n, &m);
    fprintf(f, "{\"job\": {\"state\": ");
    json_str(f, job_state(n, s));
    fprintf(f, ", \"scheduler\": ");
    json_str(f, n->address);
    fprintf(f,
            ", \"servers\": %d, \"workers\": %d, \"registered\": %" PRIu32
            ", \"workers_done\": %" PRIu32 ", \"joins\": %" PRIu32 ", \"leaves\": %" PRIu32
            ", \"uptime_ms\": %" PRIu64
            ", \"heartbeat_interval_ms\": %d, \"heartbeat_timeout_ms\": %d, \"min_clock\": %" PRId64
            "},\n",
            n->cfg.num_servers, n->cfg.num_workers, m.registered, m.workers_done, m.joins, m.leaves,
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
        json_str(f, node_state(n, s, id));
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

void status_write_html(loom_node *n, status_page *s, FILE *f, uint64_t now)
{
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
    html_str(f, job_state(n, s));
    fprintf(f, "</div>\n");
    if (s->failed) {
        fprintf(f, "<div id=\"failure\">Failure: ");
        html_str(f, s->failure);
        fprintf(f, "</div>\n");
    }
    fprintf(f, "<p id=\"summary\">scheduler ");
    html_str(f, n->address);
    fprintf(f,
            " &middot; %d server(s), %d worker(s), %" PRIu32 " done, %" PRIu32 " joined, %" PRIu32
            " left &middot; min clock %" PRId64
            " &middot; heartbeat every %d ms, dead after %d ms &middot; up %.0f s</p>\n",
            n->cfg.num_servers, n->cfg.num_workers, m.workers_done, m.joins, m.leaves, s->min_clock,
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
        fprintf(f, "</td><td>%s</td>", node_state(n, s, id));
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

/* ---- Prometheus's text exposition format (version 0.0.4) ---- */

/* A label value: backslash, quote and newline escaped as the format says, and
 * any byte outside printable ASCII as '?' (what other processes sent need not
 * be UTF-8). */
static void prom_label(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\\' || c == '"')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else
            fputc(c >= 0x20 && c < 0x7f ? c : '?', f);
    }
}

static void prom_value(FILE *f, double v)
{
    if (isnan(v))
        fputs("NaN", f);
    else if (isinf(v))
        fputs(v > 0 ? "+Inf" : "-Inf", f);
    else
        fprintf(f, "%.17g", v);
}

/* A family's HELP and TYPE lines; its samples follow, all together. */
static void prom_family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{node="ID",role="ROLE",rank="R"[,EXTRA]} VALUE for one node. */
static void prom_node(FILE *f, const loom_node *n, const char *name, uint32_t id,
                      const char *extra_label, const char *extra_value, double v)
{
    int rank;
    int role = node_peer_role(n, id, &rank);
    fprintf(f, "%s{node=\"%" PRIu32 "\",role=\"%s\",rank=\"%d\"", name, id, role_text(role), rank);
    if (extra_label && extra_value) {
        fprintf(f, ",%s=\"", extra_label);
        prom_label(f, extra_value);
        fputc('"', f);
    }
    fputs("} ", f);
    prom_value(f, v);
    fputc('\n', f);
}

/* The per-node families, one pass over the listed nodes each. */
enum prom_node_family {
    PROM_SENT,
    PROM_RECEIVED,
    PROM_SEND_RATE,
    PROM_RECV_RATE,
    PROM_HEARTBEAT_AGE,
    PROM_DEAD_IN,
    PROM_FAMILIES
};

void status_write_prometheus(loom_node *n, status_page *s, FILE *f, uint64_t now)
{
    static const struct {
        const char *name, *type, *help;
    } families[PROM_FAMILIES] = {
        {"loom_node_sent_bytes_total", "counter", "Bytes the node sent, as it last reported."},
        {"loom_node_received_bytes_total", "counter",
         "Bytes the node received, as it last reported."},
        {"loom_node_send_bytes_per_second", "gauge", "The node's recent send rate."},
        {"loom_node_receive_bytes_per_second", "gauge", "The node's recent receive rate."},
        {"loom_node_heartbeat_age_seconds", "gauge",
         "Time since the scheduler last heard from the node (0 for the scheduler)."},
        {"loom_node_dead_in_seconds", "gauge",
         "Time left before the scheduler would declare the node dead (0: not watched)."},
    };
    loom_stats st;
    loom_node_stats(n, &st);
    sched_summary m;
    sched_summary_of(n, &m);
    prom_family(f, "loom_job_info", "gauge", "The job: its state and scheduler (always 1).");
    fputs("loom_job_info{state=\"", f);
    prom_label(f, job_state(n, s));
    fputs("\",scheduler=\"", f);
    prom_label(f, n->address);
    fputs("\"} 1\n", f);
    prom_family(f, "loom_job_servers", "gauge", "Servers the job was started with.");
    fprintf(f, "loom_job_servers %d\n", n->cfg.num_servers);
    prom_family(f, "loom_job_workers", "gauge", "Workers the job was started with.");
    fprintf(f, "loom_job_workers %d\n", n->cfg.num_workers);
    prom_family(f, "loom_job_registered_nodes", "gauge", "Nodes registered with the scheduler.");
    fprintf(f, "loom_job_registered_nodes %" PRIu32 "\n", m.registered);
    prom_family(f, "loom_job_workers_done", "gauge", "Workers that have finished.");
    fprintf(f, "loom_job_workers_done %" PRIu32 "\n", m.workers_done);
    prom_family(f, "loom_job_min_clock", "gauge", "The slowest worker's clock.");
    fprintf(f, "loom_job_min_clock %" PRId64 "\n", s->min_clock);
    prom_family(f, "loom_job_uptime_seconds", "gauge", "Time since the status page started.");
    fprintf(f, "loom_job_uptime_seconds %.3f\n", (double)(now - s->started_ms) / 1000.0);
    prom_family(f, "loom_job_heartbeat_timeout_seconds", "gauge",
                "Silence after which a node is declared dead.");
    fprintf(f, "loom_job_heartbeat_timeout_seconds %.3f\n", n->cfg.heartbeat_timeout_ms / 1000.0);
    prom_family(f, "loom_job_failed", "gauge", "1 once a node failed the job.");
    fprintf(f, "loom_job_failed %d\n", s->failed ? 1 : 0);
    prom_family(f, "loom_malformed_messages_dropped_total", "counter",
                "Malformed messages the scheduler dropped.");
    fprintf(f, "loom_malformed_messages_dropped_total %" PRIu64 "\n", st.malformed_dropped);
    prom_family(f, "loom_registrations_refused_total", "counter",
                "Registrations the scheduler refused.");
    fprintf(f, "loom_registrations_refused_total %" PRIu64 "\n", m.refused);
    prom_family(f, "loom_connections_refused_total", "counter",
                "Connections the scheduler refused.");
    fprintf(f, "loom_connections_refused_total %" PRIu64 "\n", st.connections_refused);
    prom_family(f, "loom_status_requests_total", "counter", "Requests the status page answered.");
    fprintf(f, "loom_status_requests_total %" PRIu64 "\n", s->requests);

    prom_family(f, "loom_node_state", "gauge", "Each listed node's state (always 1).");
    for (uint32_t id = 0; id < listed(n); id++)
        prom_node(f, n, "loom_node_state", id, "state", node_state(n, s, id), 1);
    for (int k = 0; k < PROM_FAMILIES; k++) {
        prom_family(f, families[k].name, families[k].type, families[k].help);
        for (uint32_t id = 0; id < listed(n); id++) {
            const node_record *r = &s->nodes[id];
            uint64_t age, left;
            heartbeat(n, id, now, &age, &left);
            double v = k == PROM_SENT            ? (double)r->sent
                       : k == PROM_RECEIVED      ? (double)r->received
                       : k == PROM_SEND_RATE     ? r->send_rate
                       : k == PROM_RECV_RATE     ? r->recv_rate
                       : k == PROM_HEARTBEAT_AGE ? (double)age / 1000.0
                                                 : (double)left / 1000.0;
            prom_node(f, n, families[k].name, id, NULL, NULL, v);
        }
    }
    prom_family(f, "loom_worker_clock", "gauge", "The clock each worker last ended.");
    for (uint32_t id = 0; id < listed(n); id++)
        if (s->nodes[id].has_clock)
            prom_node(f, n, "loom_worker_clock", id, NULL, NULL, (double)s->nodes[id].clock);
    prom_family(f, "loom_worker_staleness", "gauge",
                "How many clocks a worker is ahead of the slowest.");
    for (uint32_t id = 0; id < listed(n); id++)
        if (s->nodes[id].has_clock)
            prom_node(f, n, "loom_worker_staleness", id, NULL, NULL,
                      (double)(s->nodes[id].clock - s->min_clock));
    prom_family(f, "loom_worker_metric", "gauge",
                "The latest value of each metric a worker's application reported.");
    for (uint32_t id = 0; id < listed(n); id++) {
        const msg_metrics *mm = &s->nodes[id].metrics;
        for (uint32_t k = 0; k < mm->count; k++)
            prom_node(f, n, "loom_worker_metric", id, "metric", mm->name[k], mm->value[k]);
    }
}
