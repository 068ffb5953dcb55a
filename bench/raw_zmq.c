/* raw_zmq: the push/pull traffic of bench_pushpull, in plain ZeroMQ.
 *
 *   raw_zmq --servers S --workers W [--table] [flags of bench_pushpull]
 *
 * The baseline for bench_pushpull: the same bytes over the same kind of
 * sockets, with nothing else. Like a Loom job it runs one process per server
 * and per worker (forked by this program, which only waits for them):
 *
 *   server  one thread, a ROUTER bound to 127.0.0.1 on a port of the kernel's
 *           choice. A push is [header][keys][values]: it answers with an
 *           8-byte ack and looks at no value. A pull is [header][keys]: it
 *           answers with one frame of keys * width * 4 bytes, sent without
 *           copying from a buffer filled once at start-up (no table work).
 *   client  one thread with one DEALER per server (Loom's worker layout). Keys
 *           are split over the servers by the rule Loom uses for a table of R
 *           keys (server s holds [R*s/S, R*(s+1)/S)); the keys and values
 *           frames are sent without copying. A push sends to every server
 *           involved and waits for every ack; a pull sends the keys and waits
 *           for every reply, which it reads in place.
 *
 * With --table the programs also do the work that Loom's API makes necessary,
 * in the plainest way: each server keeps its slice of every table as a dense
 * float array, adds each pushed row into it, and answers a pull with a newly
 * allocated reply into which it gathers the rows; the client copies each
 * reply into its output array. The difference between the two modes is the
 * cost of that work; what Loom costs beyond it is its own overhead.
 *
 * Every socket has no high-water mark, as Loom's. The cases, keys, phases,
 * warm-up, iteration rule and figures are those of bench_pushpull (see there;
 * both take them from bench_util.h): workers meet at a process-shared barrier
 * before each phase, write their figures into shared memory, and worker 0
 * prints the same "case" and "rtt1" lines. The program ends when every worker
 * is done (servers are then sent SIGTERM); if any process fails, or --timeout
 * passes, it kills the others. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.h>

#include "bench_util.h"

#define MAX_PROCS 64

enum { OP_PUSH = 1, OP_PULL = 2 };

/* First frame of every request. */
typedef struct req_header {
    uint32_t op;
    uint32_t width;
} req_header;

struct options {
    struct bench_options bench; /* the flags of bench_pushpull */
    int servers, workers;
    long timeout_s;
    int table; /* --table: servers keep and update rows, clients copy replies out */
};

/* Shared by the worker processes. */
struct shared {
    pthread_barrier_t barrier;
    double stats[MAX_PROCS * STAT_FIELDS]; /* STAT_FIELDS figures of each worker */
};

static const char usage[] =
    "usage: raw_zmq [flags]\n"
    "  --servers S       server processes (default 1)\n"
    "  --workers W       worker processes (default 1)\n" BENCH_USAGE_FLAGS
    "  --timeout S       kill everything after S seconds (default 600)\n"
    "  --table           servers keep dense rows, add pushes into them and gather pulled\n"
    "                    rows into a new reply; clients copy replies into an array\n";

static void die(const char *what)
{
    fprintf(stderr, "raw_zmq: %s: %s\n", what, zmq_strerror(zmq_errno()));
    exit(1);
}

/* ---- flags ---- */

/* The flags of raw_zmq alone (see bench_flag_fn). */
static enum bench_flag own_flag(void *arg, const char *f, const char *v)
{
    struct options *o = arg;
    uint64_t u;
    if (!strcmp(f, "--table")) {
        o->table = 1;
        return BENCH_FLAG_SWITCH;
    }
    if (!v) return BENCH_FLAG_OTHER;
    if (!strcmp(f, "--servers")) {
        if (parse_u64(v, 1, MAX_PROCS, &u)) return BENCH_FLAG_BAD;
        o->servers = (int)u;
    } else if (!strcmp(f, "--workers")) {
        if (parse_u64(v, 1, MAX_PROCS, &u)) return BENCH_FLAG_BAD;
        o->workers = (int)u;
    } else if (!strcmp(f, "--timeout")) {
        if (parse_u64(v, 1, 86400, &u)) return BENCH_FLAG_BAD;
        o->timeout_s = (long)u;
    } else {
        return BENCH_FLAG_OTHER;
    }
    return BENCH_FLAG_VALUE;
}

static int parse_flags(int argc, char **argv, struct options *o)
{
    *o = (struct options){.servers = 1, .workers = 1, .timeout_s = 600};
    return bench_parse_flags(argc, argv, "raw_zmq", usage, &o->bench, own_flag, o);
}

static void set_no_hwm(void *s)
{
    int zero = 0;
    zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVHWM, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
}

/* ---- server ---- */

/* --table: the server's dense float32 rows of one width, keys [lo, hi). */
struct store {
    uint32_t width;
    float *rows;
};

struct server {
    const struct options *o;
    int fd;               /* where to write the endpoint, then closed */
    uint64_t lo, hi;      /* this server's slice of the key range */
    uint8_t *reply;       /* constant pull reply (without --table) */
    uint64_t reply_bytes; /* its size: the largest reply */
    struct store stores[MAX_LIST];
    uint8_t *scratch[2]; /* aligned copies of misaligned frames: keys, values */
    size_t scratch_len[2];
};

static struct store *store_of(struct server *sv, uint32_t width)
{
    for (int i = 0; i < sv->o->bench.nwidths; i++)
        if (sv->stores[i].width == width) return &sv->stores[i];
    return NULL;
}

/* A frame's data, 8-byte aligned (ZeroMQ may hand small frames misaligned);
 * slot 0 for keys, 1 for values. */
static const void *aligned(struct server *sv, zmq_msg_t *m, int slot)
{
    const void *p = zmq_msg_data(m);
    size_t len = zmq_msg_size(m);
    if (((uintptr_t)p & 7) == 0) return p;
    if (len > sv->scratch_len[slot]) {
        free(sv->scratch[slot]);
        sv->scratch[slot] = malloc(len);
        sv->scratch_len[slot] = sv->scratch[slot] ? len : 0;
        if (!sv->scratch[slot]) {
            fprintf(stderr, "raw_zmq: out of memory\n");
            exit(1);
        }
    }
    memcpy(sv->scratch[slot], p, len);
    return sv->scratch[slot];
}

static void free_reply(void *data, void *hint)
{
    (void)hint;
    free(data);
}

/* --table: add the pushed rows into the store (the "sum" updater's work). */
static int table_push(struct server *sv, struct store *st, zmq_msg_t *kf, zmq_msg_t *vf)
{
    size_t n = zmq_msg_size(kf) / 8, w = st->width;
    if (zmq_msg_size(vf) != n * w * 4) return -1;
    const uint64_t *keys = aligned(sv, kf, 0);
    const float *v = aligned(sv, vf, 1);
    for (size_t i = 0; i < n; i++) {
        if (keys[i] < sv->lo || keys[i] >= sv->hi) return -1;
        float *row = st->rows + (keys[i] - sv->lo) * w;
        for (size_t j = 0; j < w; j++) row[j] += v[i * w + j];
    }
    return 0;
}

/* --table: gather the requested rows into a new reply buffer. */
static int table_pull(struct server *sv, struct store *st, zmq_msg_t *kf, zmq_msg_t *out)
{
    size_t n = zmq_msg_size(kf) / 8, rb = (size_t)st->width * 4;
    const uint64_t *keys = aligned(sv, kf, 0);
    uint8_t *buf = malloc(n * rb + 1);
    if (!buf) return -1;
    for (size_t i = 0; i < n; i++) {
        if (keys[i] < sv->lo || keys[i] >= sv->hi) {
            free(buf);
            return -1;
        }
        memcpy(buf + i * rb, st->rows + (keys[i] - sv->lo) * st->width, rb);
    }
    zmq_msg_init_data(out, buf, n * rb, free_reply, NULL);
    return 0;
}

/* Bind, report the endpoint on sv->fd, answer requests until killed. */
static int server_main(struct server *sv)
{
    const struct options *o = sv->o;
    if (o->table) {
        for (int i = 0; i < o->bench.nwidths; i++) {
            sv->stores[i].width = o->bench.widths[i];
            sv->stores[i].rows = calloc((size_t)(sv->hi - sv->lo) * o->bench.widths[i] + 1, 4);
            if (!sv->stores[i].rows) {
                fprintf(stderr, "raw_zmq: out of memory\n");
                return 1;
            }
        }
    } else {
        sv->reply = malloc(sv->reply_bytes ? sv->reply_bytes : 1);
        if (!sv->reply) {
            fprintf(stderr, "raw_zmq: out of memory\n");
            return 1;
        }
        memset(sv->reply, 0x3c, sv->reply_bytes); /* fault every page in now */
    }
    void *ctx = zmq_ctx_new();
    void *sock = zmq_socket(ctx, ZMQ_ROUTER);
    if (!sock) die("socket");
    set_no_hwm(sock);
    if (zmq_bind(sock, "tcp://127.0.0.1:*")) die("bind");
    char ep[256];
    size_t eplen = sizeof ep;
    if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, ep, &eplen)) die("endpoint");
    if (write(sv->fd, ep, sizeof ep) != (ssize_t)sizeof ep) return 1;
    close(sv->fd);
    zmq_msg_t part[4];
    for (;;) {
        int n = 0, more = 1;
        while (more) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, sock, 0) < 0) die("receive");
            more = zmq_msg_more(&m);
            if (n < 4)
                part[n++] = m;
            else
                zmq_msg_close(&m);
        }
        req_header h = {0};
        if (n >= 2 && zmq_msg_size(&part[1]) == sizeof h)
            memcpy(&h, zmq_msg_data(&part[1]), sizeof h);
        size_t nkeys = n >= 3 ? zmq_msg_size(&part[2]) / 8 : 0;
        struct store *st = o->table ? store_of(sv, h.width) : NULL;
        zmq_msg_t out;
        int bad = o->table && !st;
        if (!bad && h.op == OP_PUSH && n == 4) {
            if (st) bad = table_push(sv, st, &part[2], &part[3]);
            uint64_t ack = nkeys;
            zmq_msg_init_size(&out, sizeof ack);
            memcpy(zmq_msg_data(&out), &ack, sizeof ack);
        } else if (!bad && h.op == OP_PULL && n == 3 && st) {
            bad = table_pull(sv, st, &part[2], &out);
        } else if (!bad && h.op == OP_PULL && n == 3 && nkeys * h.width * 4 <= sv->reply_bytes) {
            zmq_msg_init_data(&out, sv->reply, nkeys * h.width * 4, NULL, NULL);
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "raw_zmq: server got a malformed request\n");
            return 1;
        }
        if (zmq_msg_send(&part[0], sock, ZMQ_SNDMORE) < 0 || zmq_msg_send(&out, sock, 0) < 0)
            die("send");
        for (int i = 1; i < n; i++) zmq_msg_close(&part[i]);
    }
}

/* ---- worker ---- */

struct client {
    const struct options *o;
    struct shared *sh;
    int rank;
    void *sock[MAX_PROCS];
    struct bench_data d;
    size_t bound[MAX_PROCS + 1]; /* d.keys[bound[s], bound[s+1]) go to server s */
};

static void barrier(struct client *c)
{
    pthread_barrier_wait(&c->sh->barrier);
}

static void send_frame(void *sock, const void *data, size_t len, int more)
{
    zmq_msg_t m;
    zmq_msg_init_data(&m, (void *)data, len, NULL, NULL);
    if (zmq_msg_send(&m, sock, more ? ZMQ_SNDMORE : 0) < 0) die("send");
}

static void split_keys(struct client *c, size_t n)
{
    int S = c->o->servers;
    size_t i = 0;
    for (int s = 0; s < S; s++) {
        uint64_t start = (uint64_t)((unsigned __int128)c->d.range * (unsigned)s / (unsigned)S);
        while (i < n && c->d.keys[i] < start) i++;
        c->bound[s] = i;
    }
    c->bound[S] = n;
}

/* One push (op == OP_PUSH) or pull of the keys split by split_keys(), rows
 * of width values. */
static void run_op(struct client *c, int op, uint32_t width)
{
    int S = c->o->servers;
    req_header h = {(uint32_t)op, width};
    size_t row = (size_t)width * 4;
    for (int s = 0; s < S; s++) {
        size_t lo = c->bound[s], cnt = c->bound[s + 1] - lo;
        if (!cnt) continue;
        zmq_msg_t m;
        zmq_msg_init_size(&m, sizeof h);
        memcpy(zmq_msg_data(&m), &h, sizeof h);
        if (zmq_msg_send(&m, c->sock[s], ZMQ_SNDMORE) < 0) die("send");
        send_frame(c->sock[s], c->d.keys + lo, cnt * 8, op == OP_PUSH);
        if (op == OP_PUSH)
            send_frame(c->sock[s], (const uint8_t *)c->d.vals + lo * row, cnt * row, 0);
    }
    for (int s = 0; s < S; s++) {
        size_t cnt = c->bound[s + 1] - c->bound[s];
        if (!cnt) continue;
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, c->sock[s], 0) < 0) die("receive");
        size_t want = op == OP_PUSH ? 8 : cnt * row;
        if (zmq_msg_size(&m) != want || zmq_msg_more(&m)) {
            fprintf(stderr, "raw_zmq: reply of %zu bytes, expected %zu\n", zmq_msg_size(&m), want);
            exit(1);
        }
        if (op == OP_PULL && c->o->table)
            memcpy((uint8_t *)c->d.out + c->bound[s] * row, zmq_msg_data(&m), want);
        zmq_msg_close(&m);
    }
}

/* An operation of bench_phase() or bench_rtt(): op of the keys split by
 * split_keys(), rows of width values. */
struct op_arg {
    struct client *c;
    int op;
    uint32_t width;
};

static int phase_op(void *arg)
{
    struct op_arg *a = arg;
    run_op(a->c, a->op, a->width);
    return 0;
}

static int phase_sync(void *arg)
{
    barrier(((struct op_arg *)arg)->c);
    return 0;
}

static void run_phase(struct client *c, int op, size_t n, uint32_t width, double *st)
{
    struct op_arg a = {c, op, width};
    bench_phase(&c->o->bench, c->d.lat, n, phase_op, phase_sync, &a, st);
}

static int client_main(const struct options *o, struct shared *sh, int rank, char (*eps)[256])
{
    const struct bench_options *bo = &o->bench;
    struct client c = {.o = o, .sh = sh, .rank = rank};
    if (bench_data_init(&c.d, bo, "raw_zmq")) return 1;

    void *ctx = zmq_ctx_new();
    for (int s = 0; s < o->servers; s++) {
        c.sock[s] = zmq_socket(ctx, ZMQ_DEALER);
        if (!c.sock[s]) die("socket");
        set_no_hwm(c.sock[s]);
        if (zmq_connect(c.sock[s], eps[s])) die("connect");
    }
    int W = o->workers;
    if (rank == 0) {
        printf("raw%s: %d servers, %d workers, key range %llu, %.2f s per phase\n",
               o->table ? " (--table)" : "", o->servers, W, (unsigned long long)c.d.range,
               bo->seconds);
        fflush(stdout);
    }
    double *st = sh->stats + (size_t)rank * STAT_FIELDS;
    for (int wi = 0; wi < bo->nwidths; wi++) {
        uint32_t width = bo->widths[wi];
        for (int bi = 0; bi < bo->nbatches; bi++) {
            uint64_t n = bo->batches[bi];
            bench_fill_keys(&c.d, n);
            split_keys(&c, (size_t)n);
            barrier(&c);
            run_phase(&c, OP_PUSH, (size_t)n, width, st + ST_PUSH);
            run_phase(&c, OP_PULL, (size_t)n, width, st + ST_PULL);
            barrier(&c);
            if (rank == 0) bench_print_case(sh->stats, W, width, n);
        }
    }
    if (bo->rtt > 0) {
        barrier(&c);
        if (rank == 0) {
            c.d.keys[0] = 0;
            split_keys(&c, 1);
            struct op_arg pull = {&c, OP_PULL, bo->widths[0]}, push = {&c, OP_PUSH, bo->widths[0]};
            bench_rtt(bo, c.d.lat, phase_op, &pull, &push);
        }
    }
    barrier(&c);
    for (int s = 0; s < o->servers; s++) zmq_close(c.sock[s]);
    zmq_ctx_term(ctx);
    bench_data_free(&c.d);
    return 0;
}

/* ---- the parent: start, watch, stop ---- */

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
    got_signal = sig;
}

static pid_t spawn(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0) return pid;
    /* Die with the parent, whatever ends it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGALRM, SIG_DFL);
    _exit(fn(arg));
}

static int server_entry(void *p)
{
    struct server *sv = p;
    return server_main(sv);
}

struct client_arg {
    const struct options *o;
    struct shared *sh;
    int rank;
    char (*eps)[256];
};

static int client_entry(void *p)
{
    struct client_arg *a = p;
    return client_main(a->o, a->sh, a->rank, a->eps);
}

static void kill_all(pid_t *pids, int n, int sig)
{
    for (int i = 0; i < n; i++)
        if (pids[i] > 0) kill(pids[i], sig);
}

int main(int argc, char **argv)
{
    struct options o;
    if (parse_flags(argc, argv, &o)) return 2;
    struct sigaction sa = {0};
    sa.sa_handler = on_signal; /* no SA_RESTART: waitpid() returns EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    struct shared *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("raw_zmq: mmap");
        return 1;
    }
    pthread_barrierattr_t ba;
    pthread_barrierattr_init(&ba);
    pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
    if (pthread_barrier_init(&sh->barrier, &ba, (unsigned)o.workers)) {
        fprintf(stderr, "raw_zmq: cannot create the barrier\n");
        return 1;
    }

    uint64_t max_batch = bench_max_batch(&o.bench), max_width = bench_max_width(&o.bench);

    int S = o.servers, W = o.workers, np = 0;
    pid_t pids[2 * MAX_PROCS];
    static char eps[MAX_PROCS][256];
    alarm((unsigned)o.timeout_s);
    int status = 0;
    for (int s = 0; s < S; s++) {
        int fds[2];
        if (pipe(fds)) {
            perror("raw_zmq: pipe");
            status = 1;
            break;
        }
        /* Server s holds keys [R*s/S, R*(s+1)/S), as a Loom table of R keys. */
        uint64_t R = o.bench.key_range ? o.bench.key_range : max_batch;
        struct server a = {.o = &o,
                           .fd = fds[1],
                           .lo = (uint64_t)((unsigned __int128)R * (unsigned)s / (unsigned)S),
                           .hi = (uint64_t)((unsigned __int128)R * (unsigned)(s + 1) / (unsigned)S),
                           .reply_bytes = max_batch * max_width * 4};
        pids[np] = spawn(server_entry, &a);
        close(fds[1]);
        if (pids[np] < 0) {
            perror("raw_zmq: fork");
            close(fds[0]);
            status = 1;
            break;
        }
        np++;
        ssize_t got = 0;
        while (got < (ssize_t)sizeof eps[s]) {
            ssize_t r = read(fds[0], eps[s] + got, sizeof eps[s] - (size_t)got);
            if (r < 0 && errno == EINTR && !got_signal) continue;
            if (r <= 0) break;
            got += r;
        }
        close(fds[0]);
        if (got != (ssize_t)sizeof eps[s]) {
            fprintf(stderr, "raw_zmq: server %d did not report its address\n", s);
            status = 1;
            break;
        }
    }
    int first_client = np;
    for (int w = 0; w < W && !status; w++) {
        struct client_arg a = {&o, sh, w, eps};
        pids[np] = spawn(client_entry, &a);
        if (pids[np] < 0) {
            perror("raw_zmq: fork");
            status = 1;
            break;
        }
        np++;
    }
    /* Wait for the workers; any failure or a signal stops everything. */
    int clients_left = status ? 0 : W;
    while (clients_left > 0) {
        int ws;
        pid_t pid = waitpid(-1, &ws, 0);
        if (pid < 0) {
            if (errno == EINTR && !got_signal) continue;
            fprintf(stderr, "raw_zmq: %s, stopping\n",
                    got_signal == SIGALRM ? "timed out" : "interrupted");
            status = 1;
            break;
        }
        int i = 0;
        while (i < np && pids[i] != pid) i++;
        if (i == np) continue;
        pids[i] = -pids[i]; /* reaped */
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
            fprintf(stderr, "raw_zmq: %s %d failed\n", i < first_client ? "server" : "worker",
                    i < first_client ? i : i - first_client);
            status = 1;
            break;
        }
        if (i >= first_client)
            clients_left--;
        else {
            fprintf(stderr, "raw_zmq: server %d exited early\n", i);
            status = 1;
            break;
        }
    }
    kill_all(pids, np, status ? SIGKILL : SIGTERM);
    for (int i = 0; i < np; i++)
        while (pids[i] > 0 && waitpid(pids[i], NULL, 0) < 0 && errno == EINTR) continue;
    pthread_barrier_destroy(&sh->barrier);
    munmap(sh, sizeof *sh);
    return status;
}
