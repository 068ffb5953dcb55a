/* tracker: timestamps of asynchronous operations.
 *
 * Each asynchronous operation (a pull sent to three servers, a flush, a table
 * open) gets a timestamp with a count of outstanding parts. Parts complete
 * on the thread that handles the answers (the I/O thread, or a thread in
 * loom_wait); when the last one does, the timestamp's callbacks run and
 * waiters wake: those on the condition variable, and the one waiter that
 * polls the sockets itself, through its eventfd (tracker_set_waiter). Completed timestamps are
 * forgotten at once (a caller may never wait for a fire-and-forget push); the ones that failed are
 * remembered in a small ring so that a late loom_wait() still reports the error. */
#ifndef LOOM_CORE_TRACKER_H
#define LOOM_CORE_TRACKER_H

#include <pthread.h>
#include <stdint.h>

#include "core/u64map.h"
#include "loom/node.h"

#define TRACKER_ERROR_RING 64

typedef struct tracker_cb {
    loom_callback fn;
    void *arg;
    struct tracker_cb *next;
} tracker_cb;

typedef struct tracker_rec {
    loom_ts ts;
    uint32_t parts;
    int status;
    tracker_cb *callbacks;
    int waiter_fd;      /* eventfd written on completion, or -1 */
    uint32_t next_free; /* free-list link, valid while the record is unused */
} tracker_rec;

typedef struct tracker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    u64map index; /* ts -> record slot */
    tracker_rec *recs;
    uint32_t nrecs, cap, free_head;
    loom_ts next_ts;
    int fail_status; /* once set, every wait returns it */
    struct {
        loom_ts ts;
        int status;
    } errors[TRACKER_ERROR_RING];
    unsigned error_pos;
    unsigned nerrors; /* entries of errors[] in use */
} tracker;

int tracker_init(tracker *t);
void tracker_destroy(tracker *t);
/* 0 when out of memory. */
loom_ts tracker_new(tracker *t, uint32_t parts);
void tracker_done(tracker *t, loom_ts ts, int status);
int tracker_wait(tracker *t, loom_ts ts);
int tracker_test(tracker *t, loom_ts ts);
/* Have completion of ts also write 1 to the eventfd fd. Returns 0, or 1 if
 * ts is not live (completed, or failed) or already has such a waiter. */
int tracker_set_waiter(tracker *t, loom_ts ts, int fd);
int tracker_on_complete(tracker *t, loom_ts ts, loom_callback fn, void *arg);
/* Complete every outstanding timestamp with status and make later waits return it. */
void tracker_fail_all(tracker *t, int status);

#endif
