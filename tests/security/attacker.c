/* attacker: a hostile process against a running Loom job, for the security
 * tests. It is not a Loom node: it speaks ZMTP through libzmq (or, for the
 * oversized frame, by hand over a plain TCP socket), as anyone who can reach a
 * job's ports could.
 *
 *   attacker control HOST:PORT
 *       Connect to a server's or worker's ROUTER twice, once with the routing
 *       id the scheduler had before routing ids were random (node id 0, four
 *       bytes) and once with a routing id of the form nodes use now, and send
 *       NODE_FAILED (naming node 1) and SHUTDOWN from "the scheduler" on each:
 *       4 messages, each of which the node must drop and count.
 *   attacker done HOST:PORT ID...
 *       Send the scheduler a DONE from each worker node id ID, on a
 *       connection whose routing id is that node id (the old form), and one
 *       more claiming the first ID on a connection with a routing id of the
 *       new form: one message per ID plus one, each to be dropped.
 *   attacker bigframe HOST:PORT PID
 *       Complete a ZMTP 3 handshake as a DEALER, announce a message frame of
 *       1 GiB, then stream up to 128 MiB of it. Passes (exit 0) if the peer
 *       closes the connection before all of it was taken and process PID's
 *       resident memory grew by less than 32 MiB.
 *
 * The messages are flushed before the program exits (linger); every line it
 * prints says what it did. Exit 0 when the attack went out as planned (for
 * bigframe: was fended off), 1 otherwise, 2 on bad usage. */
#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

#include "core/msg.h"

#define LINGER_MS 5000

static int usage(void)
{
    fprintf(stderr, "usage: attacker control HOST:PORT | done HOST:PORT ID... | "
                    "bigframe HOST:PORT PID\n");
    return 2;
}

static void *dealer(void *ctx, const char *addr, const void *rid, size_t rid_len)
{
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int linger = LINGER_MS;
    char ep[300];
    snprintf(ep, sizeof ep, "tcp://%s", addr);
    if (!s || zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger) ||
        zmq_setsockopt(s, ZMQ_ROUTING_ID, rid, rid_len) || zmq_connect(s, ep)) {
        fprintf(stderr, "attacker: cannot connect to %s: %s\n", ep, zmq_strerror(zmq_errno()));
        exit(1);
    }
    return s;
}

/* One header-only Loom message. */
static void send_header(void *s, uint8_t type, uint32_t sender, uint64_t a)
{
    uint8_t h[MSG_HEADER_SIZE];
    msg_encode_header(&(msg_header){.type = type, .sender = sender, .a = a}, h);
    if (zmq_send(s, h, sizeof h, 0) != (int)sizeof h) {
        fprintf(stderr, "attacker: send failed: %s\n", zmq_strerror(zmq_errno()));
        exit(1);
    }
    printf("sent %s claiming node %u\n", msg_type_name(type), sender);
}

static void old_rid(uint8_t rid[4], uint32_t id)
{
    for (int i = 0; i < 4; i++) rid[i] = (uint8_t)(id >> (8 * i));
}

/* A routing id of the form nodes use, but one no node drew. */
static const uint8_t new_rid[MSG_RID_SIZE] = {MSG_RID_TAG, 'a', 't', 't', 'a', 'c', 'k', 'e', 'r'};

static int control(const char *addr)
{
    void *ctx = zmq_ctx_new();
    uint8_t rid0[4];
    old_rid(rid0, 0);
    void *socks[2] = {dealer(ctx, addr, rid0, sizeof rid0),
                      dealer(ctx, addr, new_rid, sizeof new_rid)};
    for (int i = 0; i < 2; i++) {
        send_header(socks[i], MSG_NODE_FAILED, 0, 1);
        send_header(socks[i], MSG_SHUTDOWN, 0, 0);
        zmq_close(socks[i]);
    }
    zmq_ctx_term(ctx); /* returns once everything was sent (or the linger ran out) */
    return 0;
}

static int done(const char *addr, int nids, char **ids)
{
    void *ctx = zmq_ctx_new();
    uint32_t first = 0;
    for (int i = 0; i < nids; i++) {
        char *end;
        unsigned long id = strtoul(ids[i], &end, 10);
        if (*end || id == 0 || id > UINT32_MAX) return usage();
        if (i == 0) first = (uint32_t)id;
        uint8_t rid[4];
        old_rid(rid, (uint32_t)id);
        void *s = dealer(ctx, addr, rid, sizeof rid);
        send_header(s, MSG_DONE, (uint32_t)id, 0);
        zmq_close(s);
    }
    void *s = dealer(ctx, addr, new_rid, sizeof new_rid);
    send_header(s, MSG_DONE, first, 0);
    zmq_close(s);
    zmq_ctx_term(ctx);
    return 0;
}

/* ---- an oversized frame, by hand ---- */

static long rss_kib(long pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
    fclose(f);
    return kib;
}

static int tcp_connect(const char *addr)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (!colon || (size_t)(colon - addr) >= sizeof host) return -1;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, colon + 1, &hints, &ai)) return -1;
    int fd = socket(ai->ai_family, ai->ai_socktype, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen)) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

/* Send all of buf; 0, or -1 once the peer has closed the connection. */
static int send_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
    uint8_t *p = buf;
    while (len) {
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int bigframe(const char *addr, long pid)
{
    enum { MIB = 1 << 20, BODY_MIB = 128, GROWTH_LIMIT_MIB = 32 };
    long before = rss_kib(pid);
    int fd = tcp_connect(addr);
    if (before < 0 || fd < 0) {
        fprintf(stderr, "attacker: cannot read the memory of %ld or connect to %s\n", pid, addr);
        return 1;
    }
    /* ZMTP 3.0 greeting (64 bytes): signature, version 3.0, mechanism NULL, as-server 0. */
    uint8_t greeting[64] = {0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 3, 0};
    memcpy(greeting + 12, "NULL", 4);
    uint8_t theirs[64];
    if (send_all(fd, greeting, sizeof greeting) || read_all(fd, theirs, sizeof theirs)) {
        fprintf(stderr, "attacker: no ZMTP greeting from %s\n", addr);
        return 1;
    }
    /* READY with Socket-Type DEALER, as a command frame (flag 0x04, short size). */
    static const char ready_body[] = "\x05READY\x0BSocket-Type\x00\x00\x00\x06"
                                     "DEALER";
    uint8_t ready[2 + sizeof ready_body - 1] = {0x04, (uint8_t)(sizeof ready_body - 1)};
    memcpy(ready + 2, ready_body, sizeof ready_body - 1);
    /* One message frame (flag 0x02: 8-byte size, last frame) announcing 1 GiB. */
    uint8_t frame[9] = {0x02};
    uint64_t announced = (uint64_t)1 << 30;
    for (int i = 0; i < 8; i++) frame[1 + i] = (uint8_t)(announced >> (8 * (7 - i)));
    if (send_all(fd, ready, sizeof ready) || send_all(fd, frame, sizeof frame)) {
        fprintf(stderr, "attacker: the handshake with %s failed\n", addr);
        return 1;
    }
    printf("announced a frame of %llu bytes\n", (unsigned long long)announced);
    static uint8_t chunk[MIB];
    memset(chunk, 'x', sizeof chunk);
    int sent = 0;
    while (sent < BODY_MIB && !send_all(fd, chunk, sizeof chunk)) sent++;
    long after = rss_kib(pid);
    close(fd);
    long grew = after - before;
    printf("peer took %d MiB of the frame before %s; its memory grew by %ld KiB\n", sent,
           sent < BODY_MIB ? "closing the connection" : "the attacker stopped", grew);
    if (sent >= BODY_MIB) {
        fprintf(stderr, "attacker: %s took %d MiB of an oversized frame without closing\n", addr,
                sent);
        return 1;
    }
    if (after < 0 || grew >= GROWTH_LIMIT_MIB * 1024L) {
        fprintf(stderr, "attacker: process %ld grew by %ld KiB\n", pid, grew);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) return usage();
    if (!strcmp(argv[1], "control") && argc == 3) return control(argv[2]);
    if (!strcmp(argv[1], "done") && argc >= 4) return done(argv[2], argc - 3, argv + 3);
    if (!strcmp(argv[1], "bigframe") && argc == 4) return bigframe(argv[2], atol(argv[3]));
    return usage();
}
