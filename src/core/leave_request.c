/* leave_request: `loom leave`'s side of a leave request (loom_request_leave;
 * docs/ELASTIC.md).
 *
 * A process that is no node of the job asks its scheduler that a worker or a
 * server leave. It speaks to the scheduler's ROUTER as a node that registers
 * does: a DEALER of its own with a routing id of Loom's form (MSG_RID_TAG,
 * then 8 random bytes), a CURVE client of the job's key pair when the job has
 * a secret (the scheduler refuses anyone else before a message is read), and
 * one message, MSG_LEAVE, whose payload is a REGISTER's (msg_register: the
 * node's role and rank, the job's token and sizes, and, for the scheduler's
 * log, who asks). The answers come back on that connection
 * (scheduler_leave.c): a REJECT with the reason, or LEAVE_ACK a = 0 (accepted)
 * and then a = 1 (gone). Every wait is bounded by the caller's timeout; a
 * scheduler that does not answer (not running, another secret: the handshake
 * fails silently) is LOOM_ETIMEDOUT. */
#define _DEFAULT_SOURCE /* gethostname under strict C11 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "core/curve.h"
#include "core/msg.h"
#include "core/zmq_retry.h"
#include "loom/error.h"
#include "loom/node.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Send the request: a header and the REGISTER-shaped payload. */
static int send_request(void *sock, const loom_config *cfg, loom_role role, int rank)
{
    msg_register r = {.role = (int)role,
                      .rank = rank,
                      .num_servers = (uint32_t)cfg->num_servers,
                      .num_workers = (uint32_t)cfg->num_workers};
    snprintf(r.token, sizeof r.token, "%s", cfg->job_token);
    char host[128] = "";
    if (gethostname(host, sizeof host - 1)) snprintf(host, sizeof host, "?");
    snprintf(r.address, sizeof r.address, "%s (pid %ld)", host, (long)getpid());
    blob_writer w = {0};
    msg_register_encode(&r, &w);
    msg_header h = {.type = MSG_LEAVE, .nframes = 1};
    uint8_t hdr[MSG_HEADER_SIZE];
    msg_encode_header(&h, hdr);
    int rc = w.bad ? LOOM_ENOMEM : 0;
    if (!rc && (zmq_retry_send(sock, hdr, sizeof hdr, ZMQ_SNDMORE) < 0 ||
                zmq_retry_send(sock, w.buf, w.len, 0) < 0))
        rc = LOOM_ETRANSPORT;
    free(w.buf);
    return rc;
}

/* One answer (REJECT or LEAVE_ACK) by the deadline: 0 with its header and
 * text, or LOOM_ETIMEDOUT. Anything else on the connection is skipped. */
static int receive_answer(void *sock, int64_t deadline, msg_header *h, char *text, size_t len)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0) return LOOM_ETIMEDOUT;
        zmq_pollitem_t item = {sock, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&item, 1, (long)left) <= 0) continue;
        zmq_msg_t part[2];
        int nparts = 0, more = 1;
        while (more) {
            zmq_msg_t f;
            zmq_msg_init(&f);
            if (zmq_retry_msg_recv(&f, sock, 0) < 0) {
                zmq_msg_close(&f);
                break;
            }
            more = zmq_msg_more(&f);
            if (nparts < 2) {
                zmq_msg_init(&part[nparts]);
                zmq_msg_move(&part[nparts++], &f);
            }
            zmq_msg_close(&f);
        }
        int ok =
            nparts == 2 &&
            msg_decode_header(zmq_msg_data(&part[0]), zmq_msg_size(&part[0]), 1, h) == MSG_OK &&
            (h->type == MSG_REJECT || h->type == MSG_LEAVE_ACK);
        if (ok) {
            blob_reader r = {zmq_msg_data(&part[1]), zmq_msg_size(&part[1]), 0};
            blob_get_str(&r, text, len);
            ok = !r.bad;
        }
        for (int i = 0; i < nparts; i++) zmq_msg_close(&part[i]);
        if (ok) return 0;
    }
}

/* The request on an open connection: 0 or the outcome's code, with the text. */
static int ask(void *sock, const loom_config *cfg, loom_role role, int rank, int timeout_ms,
               int wait_gone, int *accepted, char *msg, size_t msglen)
{
    int rc = send_request(sock, cfg, role, rank);
    if (rc) {
        snprintf(msg, msglen, "cannot send the request to %s: %s", cfg->scheduler,
                 zmq_strerror(zmq_errno()));
        return rc;
    }
    int64_t deadline = now_ms() + timeout_ms;
    msg_header h;
    char text[512];
    for (;;) {
        rc = receive_answer(sock, deadline, &h, text, sizeof text);
        if (rc && *accepted) {
            snprintf(msg, msglen,
                     "the scheduler accepted the leave, but the %s had not left "
                     "within %d ms",
                     role == LOOM_SERVER ? "server" : "worker", timeout_ms);
            return rc;
        }
        if (rc) {
            snprintf(msg, msglen,
                     "no answer from the scheduler at %s within %d ms (is the job running there, "
                     "and is the secret, LOOM_SECRET_FILE, the job's?)",
                     cfg->scheduler, timeout_ms);
            return rc;
        }
        if (h.type == MSG_REJECT) {
            snprintf(msg, msglen, "the scheduler refused: %s", text);
            return h.a > 0 && h.a < LOOM_ERROR_COUNT_ ? (int)h.a : LOOM_EPROTO;
        }
        snprintf(msg, msglen, "%s", text);
        if (h.a == 0) *accepted = 1;
        if (h.a == 1 || !wait_gone) return 0;
    }
}

int loom_request_leave(const loom_config *cfg, loom_role role, int rank, int timeout_ms,
                       int wait_gone, int *accepted, char *msg, size_t msglen)
{
    char spare[8];
    int spare_accepted;
    if (!msg || !msglen) msg = spare, msglen = sizeof spare;
    if (!accepted) accepted = &spare_accepted;
    *accepted = 0;
    msg[0] = '\0';
    if (!cfg || (role != LOOM_WORKER && role != LOOM_SERVER) || rank < 0 || timeout_ms <= 0 ||
        !cfg->scheduler[0] || cfg->num_servers < 0 || cfg->num_workers < 0) {
        snprintf(msg, msglen, "invalid arguments");
        return LOOM_EINVAL;
    }
    uint8_t rid[MSG_RID_SIZE] = {MSG_RID_TAG};
    if (getrandom(rid + 1, MSG_RID_SIZE - 1, 0) != MSG_RID_SIZE - 1) {
        snprintf(msg, msglen, "cannot draw a routing id");
        return LOOM_ENOMEM;
    }
    void *ctx = zmq_ctx_new();
    void *sock = ctx ? zmq_socket(ctx, ZMQ_DEALER) : NULL;
    if (!sock) {
        snprintf(msg, msglen, "cannot create a socket: %s", zmq_strerror(zmq_errno()));
        if (ctx) zmq_ctx_term(ctx);
        return LOOM_ETRANSPORT;
    }
    int zero = 0, rc = 0;
    zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
    /* The answers are a header and a sentence: nothing larger is read. */
    int64_t max_frame = 4096;
    zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max_frame, sizeof max_frame);
    if (cfg->secret[0]) {
        rc = curve_client_of(sock, cfg->secret);
        if (rc) snprintf(msg, msglen, "the job secret is not a Z85-encoded CURVE key");
    }
    char ep[sizeof cfg->scheduler + 8];
    snprintf(ep, sizeof ep, "tcp://%s", cfg->scheduler);
    if (!rc && (zmq_setsockopt(sock, ZMQ_ROUTING_ID, rid, sizeof rid) || zmq_connect(sock, ep))) {
        snprintf(msg, msglen, "cannot connect to %s: %s", ep, zmq_strerror(zmq_errno()));
        rc = LOOM_ETRANSPORT;
    }
    if (!rc) rc = ask(sock, cfg, role, rank, timeout_ms, wait_gone, accepted, msg, msglen);
    zmq_close(sock);
    zmq_ctx_term(ctx);
    return rc;
}
