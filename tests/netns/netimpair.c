/* netimpair: delay and drop a host's outgoing packets, for kernels without netem.
 *
 * The multi-host test (b) wants every link to delay packets and lose some.
 * tc's netem qdisc does that, but some kernels are built without it. Every
 * kernel with netfilter's NFQUEUE target can do the same thing another way:
 * an iptables rule hands each packet leaving eth0 to this program through a
 * netlink queue, and the packet stays in the kernel until we give a verdict.
 * We drop a packet with probability --loss (verdict DROP, counted) and accept
 * every other one --delay-ms after it arrived. The delay is the same for
 * every packet, so packets leave in the order they came, as on a real link.
 *
 * --drop-once HEX drops, besides, the first TCP segment whose payload holds
 * those bytes: one message lost at a chosen moment, which a test of what
 * happens then needs, where random loss would only make it likely.
 *
 * Usage, inside the host's network namespace:
 *   netimpair --queue N --delay-ms D --loss P --seed S [--drop-once HEX] --ready FILE
 *   iptables -A OUTPUT -o eth0 -j NFQUEUE --queue-num N
 * --ready FILE is created once the queue is bound, so a script knows when it
 * may add the rule. On SIGTERM or SIGINT the packets still held are accepted
 * and one line "netimpair: queue N: P packets, D dropped" goes to stdout
 * (with ", T targeted" when --drop-once was given: 1 if its segment came). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <libnetfilter_queue/libnetfilter_queue.h>

/* More than a loopback-fast job sends in one delay period. */
#define HELD_MAX (1u << 16)

typedef struct held {
    uint32_t id;
    int64_t due_ns;
} held;

typedef struct impairer {
    struct nfq_q_handle *q;
    int64_t delay_ns;
    double loss;
    uint64_t rng;
    held ring[HELD_MAX];
    uint32_t head, count;
    uint64_t packets, dropped;
    uint8_t target[256]; /* --drop-once: the bytes, and whether still to come */
    size_t target_len;
    int target_pending;
} impairer;

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double uniform(uint64_t *state) /* splitmix64 */
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

/* Whether an IPv4 packet is a TCP segment whose payload holds the target. */
static int holds_target(const impairer *im, const uint8_t *ip, int len)
{
    if (len < 20 || (ip[0] >> 4) != 4 || ip[9] != 6) return 0;
    int ihl = (ip[0] & 15) * 4;
    if (len < ihl + 20) return 0;
    int payload = ihl + (ip[ihl + 12] >> 4) * 4;
    for (int i = payload; i + (int)im->target_len <= len; i++)
        if (!memcmp(ip + i, im->target, im->target_len)) return 1;
    return 0;
}

static int on_packet(struct nfq_q_handle *q, struct nfgenmsg *msg, struct nfq_data *nfa, void *arg)
{
    (void)msg;
    impairer *im = arg;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (!ph) return 0;
    uint32_t id = ntohl(ph->packet_id);
    im->packets++;
    unsigned char *ip;
    int len;
    if (im->target_pending && (len = nfq_get_payload(nfa, &ip)) > 0 && holds_target(im, ip, len)) {
        im->target_pending = 0;
        return nfq_set_verdict(q, id, NF_DROP, 0, NULL);
    }
    if (uniform(&im->rng) < im->loss) {
        im->dropped++;
        return nfq_set_verdict(q, id, NF_DROP, 0, NULL);
    }
    /* The ring holds what the kernel holds for us; when full, pass the packet on now. */
    if (im->count == HELD_MAX) return nfq_set_verdict(q, id, NF_ACCEPT, 0, NULL);
    im->ring[(im->head + im->count++) % HELD_MAX] = (held){id, now_ns() + im->delay_ns};
    return 0;
}

/* Accept every held packet due by `until`; returns ms to the next due one, or -1. */
static int release(impairer *im, int64_t until)
{
    while (im->count) {
        held *h = &im->ring[im->head];
        if (h->due_ns > until) return (int)((h->due_ns - until + 999999) / 1000000);
        nfq_set_verdict(im->q, h->id, NF_ACCEPT, 0, NULL);
        im->head = (im->head + 1) % HELD_MAX;
        im->count--;
    }
    return -1;
}

/* --drop-once's bytes; returns where parsing stopped (at the end if all were hex). */
static char *parse_hex(char *hex, impairer *im)
{
    size_t n = 0;
    unsigned byte;
    while (hex[0] && hex[1] && n < sizeof im->target && sscanf(hex, "%2x", &byte) == 1 &&
           isxdigit((unsigned char)hex[0]) && isxdigit((unsigned char)hex[1])) {
        im->target[n++] = (uint8_t)byte;
        hex += 2;
    }
    im->target_len = n;
    im->target_pending = n > 0;
    return n ? hex : hex + (*hex == 0); /* nothing parsed: not at the end, so a usage error */
}

static int usage(void)
{
    fprintf(stderr, "usage: netimpair --queue N --delay-ms D --loss P [--seed S] [--drop-once HEX]"
                    " [--ready FILE]\n");
    return 2;
}

int main(int argc, char **argv)
{
    static impairer im;
    long queue = -1;
    double delay_ms = 0;
    const char *ready = NULL;
    im.rng = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        char *end;
        if (!strcmp(argv[i], "--queue"))
            queue = strtol(argv[i + 1], &end, 10);
        else if (!strcmp(argv[i], "--delay-ms"))
            delay_ms = strtod(argv[i + 1], &end);
        else if (!strcmp(argv[i], "--loss"))
            im.loss = strtod(argv[i + 1], &end);
        else if (!strcmp(argv[i], "--seed"))
            im.rng = strtoull(argv[i + 1], &end, 10);
        else if (!strcmp(argv[i], "--drop-once"))
            end = parse_hex(argv[i + 1], &im);
        else if (!strcmp(argv[i], "--ready"))
            ready = argv[i + 1], end = argv[i + 1] + strlen(argv[i + 1]);
        else
            return usage();
        if (*end) return usage();
    }
    if (argc % 2 == 0 || queue < 0 || queue > 65535 || delay_ms < 0 || im.loss < 0 || im.loss > 1)
        return usage();
    im.delay_ns = (int64_t)(delay_ms * 1e6);

    struct nfq_handle *h = nfq_open();
    if (!h) {
        perror("netimpair: cannot open a netfilter queue handle");
        return 1;
    }
    im.q = nfq_create_queue(h, (uint16_t)queue, on_packet, &im);
    /* The payload comes up only when a segment is to be looked for. */
    int mode = im.target_len ? NFQNL_COPY_PACKET : NFQNL_COPY_META;
    if (!im.q || nfq_set_mode(im.q, (uint8_t)mode, 0xffff) < 0) {
        fprintf(stderr, "netimpair: cannot bind queue %ld (is NFQUEUE in this kernel?)\n", queue);
        return 1;
    }
    nfq_set_queue_maxlen(im.q, HELD_MAX);
    nfnl_rcvbufsiz(nfq_nfnlh(h), 16 << 20);
    int fd = nfq_fd(h);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (ready) {
        FILE *f = fopen(ready, "w");
        if (!f || fclose(f)) {
            perror("netimpair: cannot create the --ready file");
            return 1;
        }
    }

    static char buf[1 << 16];
    while (!stop) {
        int wait_ms = release(&im, now_ns());
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = poll(&p, 1, wait_ms);
        if (n < 0 && errno != EINTR) {
            perror("netimpair: poll");
            return 1;
        }
        for (;;) {
            ssize_t len = recv(fd, buf, sizeof buf, 0);
            if (len < 0 && errno == ENOBUFS) continue; /* the kernel dropped some: a loss too */
            if (len <= 0) break;
            nfq_handle_packet(h, buf, (int)len);
        }
    }
    release(&im, INT64_MAX);
    printf("netimpair: queue %ld: %llu packets, %llu dropped", queue,
           (unsigned long long)im.packets, (unsigned long long)im.dropped);
    if (im.target_len) printf(", %d targeted", !im.target_pending);
    printf("\n");
    nfq_destroy_queue(im.q);
    nfq_close(h);
    return 0;
}
