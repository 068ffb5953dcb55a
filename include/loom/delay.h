/* Bounded delay: the task-dependency rule of the Parameter Server.
 *
 * Tasks are numbered 0, 1, 2, ... in the order they are started. With delay
 * tau, task t may start only once every task numbered below t - tau has
 * finished: tau = 0 runs tasks one after another (sequential), a very large tau
 * lets them all run at once (eventual). tau may change while tasks run.
 *
 *     loom_delay *d; loom_delay_create(2, &d);
 *     for (...) {
 *         int64_t t; loom_delay_start(d, &t);      // waits as the rule requires
 *         loom_push_async(w, keys, n, grad, &ts);
 *         loom_delay_finish_on(d, node, t, ts);    // task t ends when ts completes
 *     }
 *
 * All functions are thread-safe; loom_delay_finish() may be called from any
 * thread, including from a loom_on_complete() callback. */
#ifndef LOOM_DELAY_H
#define LOOM_DELAY_H

#include <stdint.h>

#include "node.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_delay loom_delay;

#define LOOM_DELAY_UNBOUNDED INT64_MAX

int loom_delay_create(int64_t tau, loom_delay **out);
void loom_delay_destroy(loom_delay *d);
/* Change tau; waiting starters re-check at once. */
int loom_delay_set_tau(loom_delay *d, int64_t tau);
/* Number the next task and block until the rule lets it start. */
int loom_delay_start(loom_delay *d, int64_t *task);
/* 1 if the next task could start now without waiting, else 0. */
int loom_delay_ready(loom_delay *d);
/* Mark a started task finished (each task exactly once). */
int loom_delay_finish(loom_delay *d, int64_t task);
/* Mark task finished when ts completes (immediately if it already has). */
int loom_delay_finish_on(loom_delay *d, loom_node *node, int64_t task, loom_ts ts);
/* Block until every started task has finished. */
int loom_delay_drain(loom_delay *d);

#ifdef __cplusplus
}
#endif
#endif
