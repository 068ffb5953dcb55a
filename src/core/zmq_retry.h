/* zmq_retry: ZeroMQ calls made again when a signal interrupts them.
 *
 * ZeroMQ fails a send, a read or a ZMQ_EVENTS query with EINTR when a
 * signal with a handler arrives during it (a worker's SIGTERM asking it to
 * leave: docs/ELASTIC.md), even a call that does not wait, as each one first
 * processes the socket's pending commands. Nothing was sent or read then,
 * so the call goes again. Every frame of a multipart message must go this
 * way: a frame given up would leave the message open, and the next
 * message's frames would join it. */
#ifndef LOOM_CORE_ZMQ_RETRY_H
#define LOOM_CORE_ZMQ_RETRY_H

#include <errno.h>
#include <stddef.h>
#include <zmq.h>

static inline int zmq_retry_send(void *sock, const void *data, size_t len, int flags)
{
    int rc;
    do rc = zmq_send(sock, data, len, flags);
    while (rc < 0 && zmq_errno() == EINTR);
    return rc;
}

static inline int zmq_retry_msg_send(zmq_msg_t *msg, void *sock, int flags)
{
    int rc;
    do rc = zmq_msg_send(msg, sock, flags);
    while (rc < 0 && zmq_errno() == EINTR);
    return rc;
}

static inline int zmq_retry_msg_recv(zmq_msg_t *msg, void *sock, int flags)
{
    int rc;
    do rc = zmq_msg_recv(msg, sock, flags);
    while (rc < 0 && zmq_errno() == EINTR);
    return rc;
}

/* The socket's ZMQ_EVENTS into *events; 0 or -1 (errno set by ZeroMQ). */
static inline int zmq_retry_events(void *sock, int *events)
{
    size_t len = sizeof *events;
    int rc;
    do rc = zmq_getsockopt(sock, ZMQ_EVENTS, events, &len);
    while (rc < 0 && zmq_errno() == EINTR);
    return rc;
}

#endif
