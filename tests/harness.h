/* harness: run a whole Loom job inside one test process.
 *
 * The scheduler, S servers and W workers each get a thread and a real node
 * talking TCP over loopback, with failures reported as error codes
 * (LOOM_ON_FAILURE_RETURN) instead of ending the process. The worker function
 * runs between loom_node_start() and loom_finalize(); its return value and the
 * other nodes' results are collected so a test can assert on all of them. */
#ifndef LOOM_TESTS_HARNESS_H
#define LOOM_TESTS_HARNESS_H

#include <stdio.h>

#include <loom/loom.h>

/* For worker functions: report a failed check (file, line, what) and return 1. */
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)
#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_) {                                                                                 \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, loom_strerror(rc_));     \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

#define HARNESS_MAX_NODES 16

typedef int (*harness_worker_fn)(loom_node *node, int rank, void *arg);

typedef struct harness_result {
    int scheduler;                   /* loom_serve() of the scheduler */
    int servers[HARNESS_MAX_NODES];  /* loom_serve() of each server */
    int workers[HARNESS_MAX_NODES];  /* the worker function, or a start/finalize error */
    int finalize[HARNESS_MAX_NODES]; /* loom_finalize() of each worker */
} harness_result;

/* Run a job; returns 0 if every node ended cleanly and every worker returned 0. */
int harness_run(int servers, int workers, harness_worker_fn fn, void *arg, harness_result *res);

/* If set (before harness_run): every node's loom_config.secret, a job secret in Z85. */
extern const char *harness_secret;

/* If set by harness_on_scheduler: the "host:port" servers and workers connect to instead of
 * the scheduler's own address (a proxy that relays to it). */
extern char harness_connect_to[256];

/* Called by harness_run with the scheduler's node before the others start. */
extern void (*harness_on_scheduler)(loom_node *scheduler);

/* Called by harness_run on each server's thread with that server's node once it joined the
 * job, before it serves; the node stays valid until the last worker has finalized. Workers may
 * start before this runs: a test that needs the pointer in a worker must wait for it. */
extern void (*harness_on_server)(loom_node *server, int rank);

/* loom_config.max_frame_mib of every node of the next jobs (0: the default). */
extern int harness_max_frame_mib;

/* Removes a test's temporary directory: its files, its folders' (not
 * following links) and it. */
void harness_remove_tree(const char *path);

#endif
