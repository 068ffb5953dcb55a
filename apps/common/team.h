/* team: the compute threads of one worker process (`loom train --threads T`).
 *
 * A worker process runs T compute threads that share its Loom client (one
 * cache, one update buffer, one clock: docs/USAGE.md). The applications use
 * them in the same shape every clock:
 *
 *   1. app_team_run: every thread works on its own part of the worker's
 *      data (app_team_split), pulling through the shared client and
 *      accumulating its changes in buffers of its own;
 *   2. the caller (thread 0) pushes the threads' buffers in thread order and
 *      calls loom_clock() once.
 *
 * No thread pushes while another may still pull, so what a thread reads in a
 * clock never depends on how fast the others are, and the update buffer adds
 * the threads' deltas in the same order every run: under BSP a run with T
 * threads is a fixed sequential computation, which the tests recompute bit
 * for bit. With T = 1 there is no other thread and app_team_run calls the job
 * directly: the program is exactly the one-threaded one. */
#ifndef LOOM_APPS_COMMON_TEAM_H
#define LOOM_APPS_COMMON_TEAM_H

#include <stddef.h>

/* The most compute threads per worker process --threads accepts. */
#define APP_MAX_THREADS 256

typedef struct app_team app_team;

/* A team of `threads` (1..APP_MAX_THREADS): threads - 1 helper threads start
 * and wait; the caller is thread 0. Returns 0 or a LOOM_E* code. */
int app_team_start(app_team **team, int threads);
/* Run job(arg, t) on every thread t of the team (t = 0 on the caller) and
 * return when all have finished: the first non-zero result in thread order,
 * else 0. Jobs must not call app_team_run. */
int app_team_run(app_team *team, int (*job)(void *arg, int thread), void *arg);
int app_team_size(const app_team *team);
/* Stop and join the helper threads (NULL: nothing). */
void app_team_stop(app_team *team);

/* Part `part` of `parts` of n items: the contiguous range [lo, hi); the parts
 * cover [0, n) in order and their sizes differ by at most one. */
void app_team_split(size_t n, int parts, int part, size_t *lo, size_t *hi);

#endif
