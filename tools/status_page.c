/* status_page: what `loom status` makes of a status page's body; see status_page.h. */
#include "status_page.h"

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <string.h>

/* Nesting the page needs: 4 (root, nodes, a node, its metrics); deeper is not a page. */
#define MAX_DEPTH 8
/* A string of the page as printed: each byte at most 4 characters (\xNN), and "...". */
#define TEXT_BUF (4 * STATUS_PAGE_MAX_TEXT + 4)

json_object *status_page_parse(const char *body, size_t len)
{
    /* A NUL byte would end the text the tokener sees early; no page holds one. */
    if (len > STATUS_PAGE_MAX_BODY || memchr(body, '\0', len)) return NULL;
    json_tokener *tok = json_tokener_new_ex(MAX_DEPTH);
    if (!tok) return NULL;
    /* Strict: no NaN or Infinity literals, no raw control characters in strings. */
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *root = json_tokener_parse_ex(tok, body, (int)len);
    int whole = json_tokener_get_error(tok) == json_tokener_success;
    json_tokener_free(tok);
    json_object *job = NULL, *nodes = NULL;
    if (!whole || !json_object_is_type(root, json_type_object) ||
        !json_object_object_get_ex(root, "job", &job) ||
        !json_object_is_type(job, json_type_object) ||
        !json_object_object_get_ex(root, "nodes", &nodes) ||
        !json_object_is_type(nodes, json_type_array)) {
        json_object_put(root);
        return NULL;
    }
    return root;
}

/* Member key of o if o is an object and the member has type t, else NULL. */
static json_object *typed(json_object *o, const char *key, json_type t)
{
    json_object *v = NULL;
    if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
        return NULL;
    return json_object_is_type(v, t) ? v : NULL;
}

/* s[0..len) as printed: printable ASCII as it is but for the backslash (\\), any
 * other byte as \xNN, at most STATUS_PAGE_MAX_TEXT bytes of it and then "...". */
static const char *escape(char *buf, const char *s, size_t len)
{
    size_t at = 0;
    for (size_t i = 0; i < len && i < STATUS_PAGE_MAX_TEXT; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\')
            at += (size_t)snprintf(buf + at, TEXT_BUF - at, "\\\\");
        else if (c >= 0x20 && c < 0x7f)
            buf[at++] = (char)c;
        else
            at += (size_t)snprintf(buf + at, TEXT_BUF - at, "\\x%02x", c);
    }
    buf[at] = '\0';
    if (len > STATUS_PAGE_MAX_TEXT) strcat(buf, "...");
    return buf;
}

/* A string member, escaped into buf; "?" if it is missing or not a string. */
static const char *text(char *buf, json_object *o, const char *key)
{
    json_object *v = typed(o, key, json_type_string);
    if (!v) return "?";
    return escape(buf, json_object_get_string(v), (size_t)json_object_get_string_len(v));
}

/* An integer member in decimal into buf (at least 24 bytes); "?" if it is missing or
 * not an integer. */
static const char *integer(char *buf, json_object *o, const char *key)
{
    json_object *v = typed(o, key, json_type_int);
    if (!v) return "?";
    snprintf(buf, 24, "%" PRId64, json_object_get_int64(v));
    return buf;
}

/* A number member (integer or not) if it is finite: 1 and *x, else 0. */
static int number(json_object *o, const char *key, double *x)
{
    json_object *v = typed(o, key, json_type_double);
    if (!v) v = typed(o, key, json_type_int);
    if (!v) return 0;
    *x = json_object_get_double(v);
    return isfinite(*x);
}

static const char *rate(char *buf, size_t len, json_object *o, const char *key)
{
    double bytes_per_s;
    if (!number(o, key, &bytes_per_s)) return "?";
    if (fabs(bytes_per_s) >= 1e6)
        snprintf(buf, len, "%.1f MB/s", bytes_per_s / 1e6);
    else
        snprintf(buf, len, "%.1f kB/s", bytes_per_s / 1e3);
    return buf;
}

static void print_metrics(FILE *out, json_object *metrics)
{
    if (!metrics) return;
    size_t shown = 0, count = (size_t)json_object_object_length(metrics);
    json_object_object_foreach(metrics, name, value)
    {
        if (shown == STATUS_PAGE_MAX_METRICS) break;
        char esc[TEXT_BUF];
        int is_number = json_object_is_type(value, json_type_int) ||
                        json_object_is_type(value, json_type_double);
        double x = is_number ? json_object_get_double(value) : 0;
        if (is_number && isfinite(x))
            fprintf(out, " %s %.9g", escape(esc, name, strlen(name)), x);
        else
            fprintf(out, " %s ?", escape(esc, name, strlen(name)));
        shown++;
    }
    if (count > shown) fprintf(out, " (%zu more)", count - shown);
}

static void print_node(FILE *out, json_object *nd)
{
    char id[24], rank[24], role[TEXT_BUF + 32], name[TEXT_BUF], address[TEXT_BUF], state[TEXT_BUF],
        clock_buf[24], stale_buf[24], sent[32], recv_[32], age[24], left[24];
    snprintf(role, sizeof role, "%s %s", text(name, nd, "role"), integer(rank, nd, "rank"));
    /* A worker's clock: null until its first clock; nodes of other roles have none. */
    const char *clock = "", *stale = "";
    json_object *c = NULL;
    if (json_object_object_get_ex(nd, "clock", &c) && !json_object_is_type(c, json_type_null)) {
        clock = integer(clock_buf, nd, "clock");
        stale = integer(stale_buf, nd, "staleness");
    }
    fprintf(out, "%4s %-13s %-21s %-14s %6s %6s %11s %11s %6s ms %6s ms ", integer(id, nd, "id"),
            role, text(address, nd, "address"), text(state, nd, "state"), clock, stale,
            rate(sent, sizeof sent, nd, "send_bytes_per_s"),
            rate(recv_, sizeof recv_, nd, "recv_bytes_per_s"), integer(age, nd, "heartbeat_age_ms"),
            integer(left, nd, "dead_in_ms"));
    print_metrics(out, typed(nd, "metrics", json_type_object));
    fputc('\n', out);
}

void status_page_print(FILE *out, json_object *page)
{
    json_object *job = typed(page, "job", json_type_object),
                *nodes = typed(page, "nodes", json_type_array);
    char state[TEXT_BUF], sched[TEXT_BUF], servers[24], workers[24], done[24], min_clock[24],
        interval[24], timeout[24], up[32] = "?";
    double uptime_ms;
    if (number(job, "uptime_ms", &uptime_ms)) snprintf(up, sizeof up, "%.1f", uptime_ms / 1000.0);
    fprintf(out,
            "job %s  scheduler %s  %s server(s)  %s worker(s), %s done  min clock %s  up %s s\n",
            text(state, job, "state"), text(sched, job, "scheduler"),
            integer(servers, job, "servers"), integer(workers, job, "workers"),
            integer(done, job, "workers_done"), integer(min_clock, job, "min_clock"), up);
    fprintf(out, "heartbeat every %s ms, a node is declared dead after %s ms of silence\n\n",
            integer(interval, job, "heartbeat_interval_ms"),
            integer(timeout, job, "heartbeat_timeout_ms"));
    fprintf(out, "%4s %-13s %-21s %-14s %6s %6s %11s %11s %9s %9s  %s\n", "node", "role", "address",
            "state", "clock", "stale", "sent", "received", "heartbeat", "dead in", "metrics");
    size_t count = json_object_array_length(nodes), not_nodes = 0;
    for (size_t i = 0; i < count && i < STATUS_PAGE_MAX_NODES; i++) {
        json_object *nd = json_object_array_get_idx(nodes, i);
        if (json_object_is_type(nd, json_type_object))
            print_node(out, nd);
        else
            not_nodes++;
    }
    if (count > STATUS_PAGE_MAX_NODES)
        fprintf(out, "(%zu more entries not shown)\n", count - STATUS_PAGE_MAX_NODES);
    if (not_nodes) fprintf(out, "(%zu entries of \"nodes\" are not nodes: ignored)\n", not_nodes);
    char more[24];
    json_object *not_listed = typed(page, "nodes_not_listed", json_type_int);
    if (not_listed && json_object_get_int64(not_listed))
        fprintf(out, "(%s more nodes not listed)\n", integer(more, page, "nodes_not_listed"));
    json_object *f = typed(page, "failures", json_type_object), *dead = NULL;
    char node[24], reason[TEXT_BUF], dropped[24], refused[24], conns[24];
    fprintf(out, "\nfailures: ");
    if (json_object_object_get_ex(f, "failed_node", &dead) &&
        !json_object_is_type(dead, json_type_null))
        fprintf(out, "node %s: %s\n          ", integer(node, f, "failed_node"),
                text(reason, f, "reason"));
    else
        fprintf(out, "no node failed; ");
    fprintf(out,
            "malformed messages dropped %s, registrations refused %s, connections refused %s\n",
            integer(dropped, f, "malformed_dropped"), integer(refused, f, "registrations_refused"),
            integer(conns, f, "connections_refused"));
}

void status_page_print_raw(FILE *out, const char *body, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)body[i];
        if (c == '\r')
            c = ' ';
        else if ((c < 0x20 || c >= 0x7f) && c != '\n' && c != '\t')
            c = '?';
        fputc(c, out);
    }
}
