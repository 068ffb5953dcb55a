/* status: the scheduler's read-only status page (HTTP) and what it shows.
 *
 * The page is served by the scheduler's I/O thread from its poll loop: a
 * non-blocking listening socket and at most STATUS_MAX_CONNS non-blocking
 * connections sit in the same poll set as the ZeroMQ sockets, so a client
 * costs the loop a few system calls and can never make it wait (status.c). */
#ifndef LOOM_CORE_STATUS_H
#define LOOM_CORE_STATUS_H

#include <stdint.h>
#include <zmq.h>

#include "core/msg.h"
#include "core/node_impl.h"
#include "loom/node.h"

#define STATUS_MAX_CONNS  64
#define STATUS_POLL_ITEMS (1 + STATUS_MAX_CONNS)

typedef struct status_page status_page;

/* Scheduler: listen on cfg.status_bind (127.0.0.1 if empty), on
 * cfg.status_port (0 = any). Returns 0 (n->status stays NULL with status_port -1) or
 * LOOM_ETRANSPORT / LOOM_ENOMEM. */
int status_open(loom_node *n);
void status_close(loom_node *n);
/* "host:port" of the page, "" without one. */
const char *status_address(const loom_node *n);
/* The page's URL, "http://host:port/" and, for a job with a secret, "?token=T"
 * (derived from the secret; requests without it get 403); "" without a page. */
const char *status_url(const loom_node *n);

/* The I/O thread's poll set: status_poll_items() appends the page's items
 * (at most STATUS_POLL_ITEMS) and returns how many; status_serve() handles
 * their events and closes connections past their deadline. */
int status_poll_items(loom_node *n, zmq_pollitem_t *items);
void status_serve(loom_node *n, const zmq_pollitem_t *items, int count, uint64_t now);

/* What the scheduler's I/O thread learns for the page. */
void status_note_heartbeat(loom_node *n, uint32_t from, uint64_t bytes_sent,
                           uint64_t bytes_received, uint64_t now);
void status_note_metrics(loom_node *n, uint32_t from, const msg_metrics *m, uint64_t now);
void status_note_failure(loom_node *n, uint32_t dead, const char *why);
/* The scheduler's handler of METRICS: validated, hostile payloads dropped and counted. */
void status_on_metrics(loom_node *n, void *ctx, node_msg *m);
/* Worker: send the metrics its application reported since the last call, if any. */
void node_send_metrics(loom_node *n);

#endif
