/* curve: see curve.h.
 *
 * ZAP (ZeroMQ RFC 27) is how a CURVE server asks whether a client may
 * connect: libzmq sends each handshake's client key to a REP socket bound at
 * inproc://zeromq.zap.01 in the same context and waits for "200" or "400".
 * Without a handler it would let in any client that knows the server's
 * public key; with ours only the job's own key passes, which proves the
 * client holds the secret (CURVE's handshake checks that the client owns the
 * key it presents). */
#include "core/curve.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "core/log.h"
#include "core/zmq_retry.h"
#include "loom/error.h"
#include "loom/secret.h"

#define ZAP_ENDPOINT     "inproc://zeromq.zap.01"
#define MONITOR_ENDPOINT "inproc://loom-curve-monitor"
#define KEY_BYTES        32
#define REFUSED_EVENTS                                                                             \
    (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |                  \
     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

struct curve {
    char secret[LOOM_SECRET_LEN + 1], public_key[LOOM_SECRET_LEN + 1];
    uint8_t public_bin[KEY_BYTES];
    char tag[48];
    void *zap;     /* REP: ZAP requests (curve thread) */
    void *monitor; /* PAIR: the ROUTER's handshake events (curve thread) */
    pthread_t thread;
    _Atomic uint64_t *refused;
};

static int frame_is(const zmq_msg_t *m, const char *text)
{
    size_t len = strlen(text);
    return zmq_msg_size((zmq_msg_t *)m) == len && !memcmp(zmq_msg_data((zmq_msg_t *)m), text, len);
}

/* One ZAP request: [version][request id][domain][address][routing id]
 * [mechanism][client key]; answer [version][request id][status][text][user][metadata]. */
static void answer_zap(curve *c)
{
    enum { MAXF = 8 };
    zmq_msg_t f[MAXF];
    int n = 0, more = 1;
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_retry_msg_recv(&part, c->zap, n ? 0 : ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&part);
            if (n == 0) return;
            break;
        }
        more = zmq_msg_more(&part);
        if (n < MAXF)
            f[n++] = part;
        else
            zmq_msg_close(&part);
    }
    int ok = n == 7 && frame_is(&f[0], "1.0") && frame_is(&f[5], "CURVE") &&
             zmq_msg_size(&f[6]) == KEY_BYTES &&
             !memcmp(zmq_msg_data(&f[6]), c->public_bin, KEY_BYTES);
    const char *status = ok ? "200" : "400", *text = ok ? "OK" : "not the job's key";
    zmq_retry_send(c->zap, "1.0", 3, ZMQ_SNDMORE);
    if (n >= 2)
        zmq_retry_send(c->zap, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE);
    else
        zmq_retry_send(c->zap, "", 0, ZMQ_SNDMORE);
    zmq_retry_send(c->zap, status, 3, ZMQ_SNDMORE);
    zmq_retry_send(c->zap, text, strlen(text), ZMQ_SNDMORE);
    zmq_retry_send(c->zap, ok ? "loom" : "", ok ? 4 : 0, ZMQ_SNDMORE);
    zmq_retry_send(c->zap, "", 0, 0);
    for (int i = 0; i < n; i++) zmq_msg_close(&f[i]);
}

static void describe_refusal(uint16_t event, uint32_t value, char *buf, size_t len)
{
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        snprintf(buf, len, "its CURVE key is not the job's");
    else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
             value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
        snprintf(buf, len, "it does not use CURVE");
    else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
             value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
        snprintf(buf, len, "its handshake is not encrypted for the job's key");
    else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
        snprintf(buf, len, "ZMTP protocol error 0x%x in the handshake", value);
    else
        snprintf(buf, len, "the connection failed during the handshake (%s)",
                 zmq_strerror((int)value));
}

/* One monitor event: [6 bytes: event (uint16), value (uint32)][endpoint]. */
static void read_event(curve *c)
{
    zmq_msg_t head, endpoint;
    zmq_msg_init(&head);
    zmq_msg_init(&endpoint);
    if (zmq_retry_msg_recv(&head, c->monitor, ZMQ_DONTWAIT) < 0) goto out;
    if (zmq_msg_more(&head)) zmq_retry_msg_recv(&endpoint, c->monitor, 0);
    if (zmq_msg_size(&head) < 6) goto out;
    uint16_t event;
    uint32_t value;
    memcpy(&event, zmq_msg_data(&head), sizeof event);
    memcpy(&value, (const uint8_t *)zmq_msg_data(&head) + 2, sizeof value);
    if (!(event & REFUSED_EVENTS)) goto out;
    /* A peer that keeps trying must not flood the log: one line, then a count. */
    if (atomic_fetch_add(c->refused, 1) == 0 || log_level() >= LOG_DEBUG) {
        char why[128];
        describe_refusal(event, value, why, sizeof why);
        log_warn("refused a connection to %.*s: %s; it does not hold the job's secret "
                 "(further refusals are counted, not logged)",
                 (int)zmq_msg_size(&endpoint), (const char *)zmq_msg_data(&endpoint), why);
    }
out:
    zmq_msg_close(&head);
    zmq_msg_close(&endpoint);
}

static void *curve_main(void *arg)
{
    curve *c = arg;
    log_set_tag(c->tag);
    zmq_pollitem_t items[2] = {{c->zap, 0, ZMQ_POLLIN, 0}, {c->monitor, 0, ZMQ_POLLIN, 0}};
    for (;;) {
        /* Ends with ETERM when the node terminates its context. */
        if (zmq_poll(items, 2, -1) < 0) {
            if (zmq_errno() == EINTR) continue;
            break;
        }
        if (items[0].revents & ZMQ_POLLIN) answer_zap(c);
        if (items[1].revents & ZMQ_POLLIN) read_event(c);
    }
    zmq_close(c->zap);
    zmq_close(c->monitor);
    return NULL;
}

int curve_start(void *zctx, const char *secret, const char *tag, _Atomic uint64_t *refused,
                curve **out)
{
    *out = NULL;
    if (!zmq_has("curve")) {
        log_error("this libzmq was built without CURVE: it cannot use a job secret");
        return LOOM_ETRANSPORT;
    }
    curve *c = calloc(1, sizeof *c);
    if (!c) return LOOM_ENOMEM;
    snprintf(c->tag, sizeof c->tag, "%s", tag);
    c->refused = refused;
    if (strlen(secret) != LOOM_SECRET_LEN || zmq_curve_public(c->public_key, secret) ||
        !zmq_z85_decode(c->public_bin, c->public_key)) {
        free(c);
        log_error("the job secret is not a Z85-encoded CURVE key");
        return LOOM_ECONFIG;
    }
    memcpy(c->secret, secret, LOOM_SECRET_LEN + 1);
    int zero = 0;
    c->zap = zmq_socket(zctx, ZMQ_REP);
    c->monitor = zmq_socket(zctx, ZMQ_PAIR);
    int rc = !c->zap || !c->monitor;
    if (!rc) {
        zmq_setsockopt(c->zap, ZMQ_LINGER, &zero, sizeof zero);
        zmq_setsockopt(c->monitor, ZMQ_LINGER, &zero, sizeof zero);
        /* inproc allows connecting before the ROUTER's monitor binds the endpoint. */
        rc = zmq_bind(c->zap, ZAP_ENDPOINT) || zmq_connect(c->monitor, MONITOR_ENDPOINT);
    }
    if (!rc) rc = pthread_create(&c->thread, NULL, curve_main, c);
    if (rc) {
        log_error("cannot start the CURVE authentication handler: %s", zmq_strerror(zmq_errno()));
        if (c->zap) zmq_close(c->zap);
        if (c->monitor) zmq_close(c->monitor);
        free(c);
        return LOOM_ETRANSPORT;
    }
    *out = c;
    return 0;
}

int curve_listen(curve *c, void *sock)
{
    int one = 1;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, c->secret, LOOM_SECRET_LEN) ||
        zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, "loom", 4)) {
        log_error("cannot set up CURVE on a listening socket: %s", zmq_strerror(zmq_errno()));
        return LOOM_ETRANSPORT;
    }
    return 0;
}

int curve_server(curve *c, void *router)
{
    if (curve_listen(c, router)) return LOOM_ETRANSPORT;
    if (zmq_socket_monitor(router, MONITOR_ENDPOINT, REFUSED_EVENTS)) {
        log_error("cannot watch the handshakes of the listening socket: %s",
                  zmq_strerror(zmq_errno()));
        return LOOM_ETRANSPORT;
    }
    return 0;
}

int curve_client(const curve *c, void *dealer)
{
    if (zmq_setsockopt(dealer, ZMQ_CURVE_SERVERKEY, c->public_key, LOOM_SECRET_LEN) ||
        zmq_setsockopt(dealer, ZMQ_CURVE_PUBLICKEY, c->public_key, LOOM_SECRET_LEN) ||
        zmq_setsockopt(dealer, ZMQ_CURVE_SECRETKEY, c->secret, LOOM_SECRET_LEN)) {
        log_error("cannot set up CURVE on a connection: %s", zmq_strerror(zmq_errno()));
        return LOOM_ETRANSPORT;
    }
    return 0;
}

int curve_client_of(void *sock, const char *secret)
{
    char public_key[LOOM_SECRET_LEN + 1];
    if (strlen(secret) != LOOM_SECRET_LEN || zmq_curve_public(public_key, secret))
        return LOOM_ECONFIG;
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, public_key, LOOM_SECRET_LEN) ||
        zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, public_key, LOOM_SECRET_LEN) ||
        zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, secret, LOOM_SECRET_LEN))
        return LOOM_ETRANSPORT;
    return 0;
}

void curve_stop(curve *c)
{
    if (!c) return;
    pthread_join(c->thread, NULL);
    memset(c->secret, 0, sizeof c->secret);
    free(c);
}
