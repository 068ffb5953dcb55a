/* curve: CURVE encryption and authentication of one node's sockets.
 *
 * With a job secret (loom_config.secret) every socket of the node uses CURVE
 * with the job's key pair: the ROUTER as server, each DEALER as client whose
 * server key is the job's public key. A ZAP handler in the node's ZeroMQ
 * context lets in only clients whose key is the job's, so a peer must hold
 * the secret to get past the handshake; one without it is refused by ZeroMQ
 * before any Loom message is read. A monitor on the ROUTER sees each refused
 * handshake: the first is logged, all are counted (loom_stats
 * .connections_refused). One thread, started by curve_start, answers the ZAP
 * requests and reads the monitor's events; it ends when the node's context
 * is terminated. */
#ifndef LOOM_CORE_CURVE_H
#define LOOM_CORE_CURVE_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct curve curve;

/* Derive the key pair from secret (Z85), bind the ZAP handler in zctx and start
 * the thread; its log lines carry `tag`, and it adds each refused handshake to
 * *refused (the node's counter, which must outlive c). LOOM_ECONFIG for a bad
 * secret, LOOM_ETRANSPORT if libzmq cannot (no CURVE support). */
int curve_start(void *zctx, const char *secret, const char *tag, _Atomic uint64_t *refused,
                curve **out);
/* Make router a CURVE server of the job and watch its handshakes; before bind. */
int curve_server(curve *c, void *router);
/* Make sock a CURVE server of the job without watching its handshakes (the
 * scheduler's heartbeat socket: a peer without the secret is refused there
 * as on the ROUTER, whose monitor already counts it); before bind. */
int curve_listen(curve *c, void *sock);
/* Make dealer a CURVE client of the job; before connect. */
int curve_client(const curve *c, void *dealer);
/* Make sock a CURVE client of the job whose secret is `secret` (Z85), for a
 * process that is no node (`loom leave`, leave_request.c); before connect.
 * 0, LOOM_ECONFIG (not a key), LOOM_ETRANSPORT. */
int curve_client_of(void *sock, const char *secret);
/* After zmq_ctx_term() of the context: wait for the thread and free c. */
void curve_stop(curve *c);

#endif
