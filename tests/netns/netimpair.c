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
 * Usage, inside the host's network namespace:
 *   netimpair --queue N --delay-ms D --loss P --seed S --ready FILE
 *   iptables -A OUTPUT -o eth0 -j NFQUEUE --queue-num N
 * --ready FILE is created once the queue is bound, so a script knows when it
 * may add the rule. On SIGTERM or SIGINT the packets still held are accepted
 * and one line "netimpair: queue N: P packets, D dropped" goes to stdout. */
#include <arpa/inet.h>
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

static int on_packet(struct nfq_q_handle *q, struct nfgenmsg *msg, struct nfq_data *nfa, void *arg)
{
    (void)msg;
    impairer *im = arg;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (!ph) return 0;
    uint32_t id = ntohl(ph->packet_id);
    im->packets++;
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

static int usage(void)
{
    fprintf(stderr, "usage: netimpair --queue N --delay-ms D --loss P [--seed S] [--ready FILE]\n");
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
    if (!im.q || nfq_set_mode(im.q, NFQNL_COPY_META, 0) < 0) {
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
    printf("netimpair: queue %ld: %llu packets, %llu dropped\n", queue,
           (unsigned long long)im.packets, (unsigned long long)im.dropped);
    nfq_destroy_queue(im.q);
    nfq_close(h);
    return 0;
}
