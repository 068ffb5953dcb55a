/* cluster_check: the Loom program the cluster tests start under launcher
 * variables (tests/cluster).
 *
 *   cluster_check [--clocks N]
 *   cluster_check free-port      print a TCP port of 127.0.0.1 that is free now
 *
 * Every process prints one line saying what it became and where it listens:
 *
 *     node: worker 1 of 3 (servers 2) at 127.0.0.1:40123
 *
 * Then each worker r pushes r + 1 to key 0 and 1 to key 1 + r at every clock
 * of a BSP table, and after each clock checks that key 0 holds the sum over
 * all workers of the clocks so far and that its own key counts its clocks:
 * both exact only if every worker joined the same job. Worker 0 ends with
 * "sum: N clocks of W workers exact". Exit 0 when every check held. */
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <loom/loom.h>

static int die(const char *what, int rc)
{
    fprintf(stderr, "cluster_check: %s: %s\n", what, loom_strerror(rc));
    return 1;
}

static int check_sums(loom_node *n, int clocks)
{
    int rank = loom_rank(n), W = loom_num_workers(n);
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_I64;
    o.consistency = LOOM_BSP;
    loom_table *t;
    int rc = loom_table_open(n, "sums", &o, &t);
    if (rc) return die("open", rc);
    uint64_t keys[2] = {0, 1 + (uint64_t)rank};
    int64_t deltas[2] = {rank + 1, 1}, got[2];
    for (int c = 1; c <= clocks; c++) {
        if ((rc = loom_push(t, keys, 2, deltas))) return die("push", rc);
        if ((rc = loom_clock(n))) return die("clock", rc);
        if ((rc = loom_pull(t, keys, 2, got))) return die("pull", rc);
        int64_t want = (int64_t)c * W * (W + 1) / 2;
        if (got[0] != want || got[1] != c) {
            fprintf(stderr, "cluster_check: worker %d, clock %d: sum %lld (want %lld), own %lld\n",
                    rank, c, (long long)got[0], (long long)want, (long long)got[1]);
            return 1;
        }
    }
    if (rank == 0) printf("sum: %d clocks of %d workers exact\n", clocks, W);
    return 0;
}

static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) ||
        getsockname(fd, (struct sockaddr *)&a, &len)) {
        perror("cluster_check: free-port");
        return 1;
    }
    close(fd);
    printf("%d\n", ntohs(a.sin_port));
    return 0;
}

int main(int argc, char **argv)
{
    int clocks = 5;
    if (argc == 2 && !strcmp(argv[1], "free-port")) return free_port();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--clocks") && i + 1 < argc) {
            clocks = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: cluster_check [--clocks N]\n");
            return 2;
        }
    }
    loom_node *n;
    int rc = loom_init(&n, &argc, &argv);
    if (rc) return die("init", rc);
    static const char *const roles[] = {"scheduler", "server", "worker"};
    loom_role role = loom_node_role(n);
    int of = role == LOOM_SCHEDULER ? 1
             : role == LOOM_SERVER  ? loom_num_servers(n)
                                    : loom_num_workers(n);
    printf("node: %s %d of %d (servers %d) at %s\n", roles[role], loom_rank(n), of,
           loom_num_servers(n), loom_node_address(n));
    fflush(stdout);
    if (!loom_is_worker(n)) return loom_serve(n) ? 1 : 0;
    int failed = check_sums(n, clocks);
    rc = loom_finalize(n);
    if (rc && !failed) return die("finalize", rc);
    return failed;
}
