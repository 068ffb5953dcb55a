/* tracker: see tracker.h. Records live in one array recycled through a free
 * list and are found by timestamp through a u64map, so lookups stay O(1)
 * however many operations are in flight. The map has no deletion, so it is
 * rebuilt from the live records whenever it grows much larger than they are. */
#include "core/tracker.h"

#include <stdlib.h>
#include <unistd.h>

#include "loom/error.h"

#define NO_SLOT UINT32_MAX

int tracker_init(tracker *t)
{
    *t = (tracker){0};
    t->next_ts = 1;
    t->free_head = NO_SLOT;
    if (u64map_init(&t->index, 64)) return LOOM_ENOMEM;
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
    return 0;
}

void tracker_destroy(tracker *t)
{
    for (uint32_t i = 0; i < t->cap; i++) {
        tracker_cb *cb = t->recs[i].callbacks;
        while (cb) {
            tracker_cb *next = cb->next;
            free(cb);
            cb = next;
        }
    }
    free(t->recs);
    u64map_free(&t->index);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
}

/* The live record of ts, or NULL if ts completed (or never existed). */
static tracker_rec *find(tracker *t, loom_ts ts)
{
    uint32_t slot;
    if (!u64map_get(&t->index, ts, &slot)) return NULL;
    tracker_rec *r = &t->recs[slot];
    return r->ts == ts ? r : NULL;
}

/* Drop stale map entries (completed timestamps) once they dominate the map. */
static void compact_index(tracker *t)
{
    if (u64map_size(&t->index) < 4096 || u64map_size(&t->index) < 4 * (size_t)t->nrecs) return;
    u64map_clear(&t->index);
    for (uint32_t i = 0; i < t->cap; i++) {
        int inserted;
        if (t->recs[i].ts) u64map_put(&t->index, t->recs[i].ts, i, &inserted);
    }
}

loom_ts tracker_new(tracker *t, uint32_t parts)
{
    pthread_mutex_lock(&t->mu);
    loom_ts ts = 0;
    if (t->free_head == NO_SLOT) {
        uint32_t cap = t->cap ? t->cap * 2 : 64;
        tracker_rec *nr = realloc(t->recs, cap * sizeof *nr);
        if (!nr) goto out;
        t->recs = nr;
        for (uint32_t i = cap; i-- > t->cap;) {
            t->recs[i] = (tracker_rec){.next_free = t->free_head};
            t->free_head = i;
        }
        t->cap = cap;
    }
    uint32_t slot = t->free_head;
    compact_index(t);
    int inserted;
    if (u64map_put(&t->index, t->next_ts, slot, &inserted) == UINT32_MAX) goto out;
    t->free_head = t->recs[slot].next_free;
    ts = t->next_ts++;
    t->recs[slot] = (tracker_rec){.ts = ts, .parts = parts ? parts : 1, .waiter_fd = -1};
    t->nrecs++;
    if (t->fail_status) {
        /* The job already failed: the operation can never complete normally. */
        t->recs[slot].status = t->fail_status;
    }
out:
    pthread_mutex_unlock(&t->mu);
    return ts;
}

static void remember_error(tracker *t, loom_ts ts, int status)
{
    t->errors[t->error_pos].ts = ts;
    t->errors[t->error_pos].status = status;
    t->error_pos = (t->error_pos + 1) % TRACKER_ERROR_RING;
    if (t->nerrors < TRACKER_ERROR_RING) t->nerrors++;
}

/* Remove a finished record; returns its callbacks for the caller to run unlocked. */
static tracker_cb *retire(tracker *t, tracker_rec *r)
{
    tracker_cb *cbs = r->callbacks;
    if (r->status) remember_error(t, r->ts, r->status);
    if (r->waiter_fd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(r->waiter_fd, &one, sizeof one); /* cannot fail short of EBADF */
        (void)w;
    }
    uint32_t slot = (uint32_t)(r - t->recs);
    *r = (tracker_rec){.next_free = t->free_head};
    t->free_head = slot;
    t->nrecs--;
    pthread_cond_broadcast(&t->cv);
    return cbs;
}

static void run_callbacks(tracker_cb *cb, int status)
{
    while (cb) {
        tracker_cb *next = cb->next;
        cb->fn(cb->arg, status);
        free(cb);
        cb = next;
    }
}

void tracker_done(tracker *t, loom_ts ts, int status)
{
    pthread_mutex_lock(&t->mu);
    tracker_rec *r = find(t, ts);
    tracker_cb *cbs = NULL;
    int final = 0;
    if (r) {
        if (status && !r->status) r->status = status;
        if (--r->parts == 0) {
            final = r->status;
            cbs = retire(t, r);
        }
    }
    pthread_mutex_unlock(&t->mu);
    run_callbacks(cbs, final);
}

/* Status of a timestamp that is no longer live. */
static int past_status(const tracker *t, loom_ts ts)
{
    if (t->fail_status) return t->fail_status;
    for (unsigned i = 0; i < t->nerrors; i++)
        if (t->errors[i].ts == ts) return t->errors[i].status;
    return 0;
}

int tracker_wait(tracker *t, loom_ts ts)
{
    pthread_mutex_lock(&t->mu);
    int rc;
    if (ts == 0 || ts >= t->next_ts) {
        rc = LOOM_EINVAL;
    } else {
        while (find(t, ts) && !t->fail_status) pthread_cond_wait(&t->cv, &t->mu);
        rc = past_status(t, ts);
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

int tracker_test(tracker *t, loom_ts ts)
{
    pthread_mutex_lock(&t->mu);
    int done = ts != 0 && ts < t->next_ts && (!find(t, ts) || t->fail_status);
    pthread_mutex_unlock(&t->mu);
    return done;
}

int tracker_set_waiter(tracker *t, loom_ts ts, int fd)
{
    pthread_mutex_lock(&t->mu);
    tracker_rec *r = find(t, ts);
    int busy = !r || t->fail_status || r->waiter_fd >= 0;
    if (!busy) r->waiter_fd = fd;
    pthread_mutex_unlock(&t->mu);
    return busy;
}

int tracker_on_complete(tracker *t, loom_ts ts, loom_callback fn, void *arg)
{
    if (!fn) return LOOM_EINVAL;
    pthread_mutex_lock(&t->mu);
    if (ts == 0 || ts >= t->next_ts) {
        pthread_mutex_unlock(&t->mu);
        return LOOM_EINVAL;
    }
    tracker_rec *r = find(t, ts);
    if (r && !t->fail_status) {
        tracker_cb *cb = malloc(sizeof *cb);
        if (!cb) {
            pthread_mutex_unlock(&t->mu);
            return LOOM_ENOMEM;
        }
        *cb = (tracker_cb){fn, arg, r->callbacks};
        r->callbacks = cb;
        pthread_mutex_unlock(&t->mu);
        return 0;
    }
    int status = past_status(t, ts);
    pthread_mutex_unlock(&t->mu);
    fn(arg, status);
    return 0;
}

void tracker_fail_all(tracker *t, int status)
{
    pthread_mutex_lock(&t->mu);
    t->fail_status = status;
    tracker_cb *all = NULL;
    for (uint32_t i = 0; i < t->cap; i++) {
        tracker_rec *r = &t->recs[i];
        if (!r->ts) continue;
        r->status = status;
        tracker_cb *cbs = retire(t, r);
        while (cbs) { /* splice into one list to run after unlocking */
            tracker_cb *next = cbs->next;
            cbs->next = all;
            all = cbs;
            cbs = next;
        }
    }
    pthread_mutex_unlock(&t->mu);
    run_callbacks(all, status);
}
