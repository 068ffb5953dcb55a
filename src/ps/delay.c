/* delay: the bounded-delay rule for tasks (see include/loom/delay.h).
 *
 * Tasks are numbered in start order. `low` is the smallest task not yet
 * finished; tasks finished out of order above it are marked in a window of
 * flags that slides up as `low` advances. Task t may start once
 * low >= t - tau, i.e. every task below t - tau has finished. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "loom/delay.h"
#include "loom/error.h"

struct loom_delay {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t tau;
    int64_t next;        /* number of the next task to start */
    int64_t low;         /* smallest unfinished task (== next when none) */
    unsigned char *done; /* done[i]: task low + i finished */
    size_t cap;
};

int loom_delay_create(int64_t tau, loom_delay **out)
{
    if (!out || tau < 0) return LOOM_EINVAL;
    loom_delay *d = calloc(1, sizeof *d);
    if (!d) return LOOM_ENOMEM;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    d->tau = tau;
    *out = d;
    return 0;
}

void loom_delay_destroy(loom_delay *d)
{
    if (!d) return;
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    free(d->done);
    free(d);
}

int loom_delay_set_tau(loom_delay *d, int64_t tau)
{
    if (!d || tau < 0) return LOOM_EINVAL;
    pthread_mutex_lock(&d->mu);
    d->tau = tau;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    return 0;
}

static int may_start(const loom_delay *d, int64_t t)
{
    /* t - tau computed without overflow for tau up to INT64_MAX. */
    return t - d->low <= d->tau;
}

int loom_delay_start(loom_delay *d, int64_t *task)
{
    if (!d || !task) return LOOM_EINVAL;
    pthread_mutex_lock(&d->mu);
    int64_t t = d->next++;
    size_t span = (size_t)(d->next - d->low);
    if (span > d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 64;
        while (cap < span) cap *= 2;
        unsigned char *nd = realloc(d->done, cap);
        if (!nd) {
            d->next--;
            pthread_mutex_unlock(&d->mu);
            return LOOM_ENOMEM;
        }
        memset(nd + d->cap, 0, cap - d->cap);
        d->done = nd;
        d->cap = cap;
    }
    while (!may_start(d, t)) pthread_cond_wait(&d->cv, &d->mu);
    pthread_mutex_unlock(&d->mu);
    *task = t;
    return 0;
}

int loom_delay_ready(loom_delay *d)
{
    if (!d) return 0;
    pthread_mutex_lock(&d->mu);
    int ready = may_start(d, d->next);
    pthread_mutex_unlock(&d->mu);
    return ready;
}

int loom_delay_finish(loom_delay *d, int64_t task)
{
    if (!d) return LOOM_EINVAL;
    pthread_mutex_lock(&d->mu);
    int rc = 0;
    if (task < d->low || task >= d->next || d->done[task - d->low]) {
        rc = LOOM_EINVAL; /* never started, or finished twice */
    } else {
        d->done[task - d->low] = 1;
        size_t k = 0, span = (size_t)(d->next - d->low);
        while (k < span && d->done[k]) k++;
        if (k) {
            memmove(d->done, d->done + k, span - k);
            memset(d->done + span - k, 0, k);
            d->low += (int64_t)k;
            pthread_cond_broadcast(&d->cv);
        }
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

typedef struct finish_ctx {
    loom_delay *d;
    int64_t task;
} finish_ctx;

static void finish_cb(void *arg, int result)
{
    (void)result; /* a failed task is still over; the failure reaches loom_wait callers */
    finish_ctx *f = arg;
    loom_delay_finish(f->d, f->task);
    free(f);
}

int loom_delay_finish_on(loom_delay *d, loom_node *node, int64_t task, loom_ts ts)
{
    if (!d || !node) return LOOM_EINVAL;
    finish_ctx *f = malloc(sizeof *f);
    if (!f) return LOOM_ENOMEM;
    *f = (finish_ctx){d, task};
    int rc = loom_on_complete(node, ts, finish_cb, f);
    if (rc) free(f);
    return rc;
}

int loom_delay_drain(loom_delay *d)
{
    if (!d) return LOOM_EINVAL;
    pthread_mutex_lock(&d->mu);
    while (d->low < d->next) pthread_cond_wait(&d->cv, &d->mu);
    pthread_mutex_unlock(&d->mu);
    return 0;
}
