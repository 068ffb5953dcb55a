/* status: the scheduler's read-only status page (HTTP: HTML and
 * /status.json). It attaches to the scheduler's node at start-up
 * (status_attach) and is served from the I/O thread's poll loop through the
 * node's hooks (node_priv.h): a non-blocking listening socket and at most
 * STATUS_MAX_CONNS non-blocking connections sit in the same poll set as the
 * ZeroMQ sockets, so a client costs the loop a few system calls and can never
 * make it wait (status.c). */
#ifndef LOOM_CORE_STATUS_H
#define LOOM_CORE_STATUS_H

#include <zmq.h> /* which its includers (tests/integration/test_status_http.c) rely on */

#include "loom/node.h"

#define STATUS_MAX_CONNS  64
#define STATUS_POLL_ITEMS (1 + STATUS_MAX_CONNS) /* the listener and the connections */

/* The scheduler, at start-up (before the layers): the handlers of HEARTBEAT
 * and METRICS, and, unless cfg.status_port is -1, the page, which listens on
 * cfg.status_bind (127.0.0.1 if empty), on cfg.status_port (0 = any). 0, or
 * LOOM_ETRANSPORT / LOOM_ENOMEM. */
int status_attach(loom_node *n);

#endif
