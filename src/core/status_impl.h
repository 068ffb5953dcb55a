/* status_impl.h: what the status page keeps (status.c: the HTTP side and what
 * the scheduler learns) and its views read (status_view.c: HTML, JSON and
 * Prometheus's text format). Internal to src/core. */
#ifndef LOOM_CORE_STATUS_IMPL_H
#define LOOM_CORE_STATUS_IMPL_H

#include <netdb.h>
#include <stdint.h>
#include <stdio.h>

#include "core/msg.h"
#include "core/node_priv.h"
#include "core/status.h"

#define STATUS_MAX_REQUEST     4096 /* request line and headers */
#define STATUS_CONN_MS         5000 /* a whole exchange, from accept to the last byte sent */
#define STATUS_DRAIN_MS        1000 /* reading what a client still sends after our answer */
#define STATUS_MAX_LISTED      2048 /* nodes listed on the page (1,100 fit); the rest are counted */
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

/* The views (status_view.c), each written whole into f. */
void status_write_json(loom_node *n, status_page *s, FILE *f, uint64_t now);
void status_write_html(loom_node *n, status_page *s, FILE *f, uint64_t now);
void status_write_prometheus(loom_node *n, status_page *s, FILE *f, uint64_t now);

#endif
