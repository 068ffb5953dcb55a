/* team: a fixed set of compute threads that run one job at a time (see team.h).
 *
 * The helpers sleep on a condition variable between jobs. A job is published
 * by bumping `generation`; each helper runs it once and counts itself out in
 * `running`; the caller runs its own share (thread 0) and then waits for
 * `running` to reach 0. One mutex guards all of it, so a helper sees the job
 * and its argument that were published with the generation it woke for. */
#include "common/team.h"

#include <pthread.h>
#include <stdlib.h>

#include <loom/loom.h>

typedef struct helper {
    struct app_team *team;
    int index;
    pthread_t thread;
} helper;

struct app_team {
    int size;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    unsigned long generation; /* bumped per job */
    int running;              /* helpers still in the current job */
    int stopping;
    int (*job)(void *arg, int thread);
    void *arg;
    int *rc; /* per thread: the current job's result */
    helper *helpers;
    int started; /* helpers created */
};

static void *helper_main(void *p)
{
    helper *h = p;
    app_team *t = h->team;
    unsigned long seen = 0;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        while (!t->stopping && t->generation == seen) pthread_cond_wait(&t->wake, &t->mu);
        if (t->stopping) break;
        seen = t->generation;
        int (*job)(void *, int) = t->job;
        void *arg = t->arg;
        pthread_mutex_unlock(&t->mu);
        int rc = job(arg, h->index);
        pthread_mutex_lock(&t->mu);
        t->rc[h->index] = rc;
        if (--t->running == 0) pthread_cond_signal(&t->done);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

int app_team_start(app_team **team, int threads)
{
    *team = NULL;
    if (threads < 1 || threads > APP_MAX_THREADS) return LOOM_EINVAL;
    app_team *t = calloc(1, sizeof *t);
    if (!t) return LOOM_ENOMEM;
    t->size = threads;
    t->rc = calloc((size_t)threads, sizeof *t->rc);
    t->helpers = calloc((size_t)threads, sizeof *t->helpers);
    if (!t->rc || !t->helpers) {
        free(t->rc), free(t->helpers), free(t);
        return LOOM_ENOMEM;
    }
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->wake, NULL);
    pthread_cond_init(&t->done, NULL);
    for (int i = 1; i < threads; i++) {
        t->helpers[i] = (helper){.team = t, .index = i};
        if (pthread_create(&t->helpers[i].thread, NULL, helper_main, &t->helpers[i])) {
            app_team_stop(t);
            return LOOM_ENOMEM;
        }
        t->started = i;
    }
    *team = t;
    return 0;
}

int app_team_size(const app_team *team)
{
    return team->size;
}

int app_team_run(app_team *t, int (*job)(void *arg, int thread), void *arg)
{
    if (t->size == 1) return job(arg, 0);
    pthread_mutex_lock(&t->mu);
    t->job = job;
    t->arg = arg;
    t->running = t->size - 1;
    t->generation++;
    pthread_cond_broadcast(&t->wake);
    pthread_mutex_unlock(&t->mu);
    int rc0 = job(arg, 0);
    pthread_mutex_lock(&t->mu);
    while (t->running > 0) pthread_cond_wait(&t->done, &t->mu);
    t->rc[0] = rc0;
    int rc = 0;
    for (int i = 0; i < t->size && !rc; i++) rc = t->rc[i];
    pthread_mutex_unlock(&t->mu);
    return rc;
}

void app_team_stop(app_team *t)
{
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    t->stopping = 1;
    pthread_cond_broadcast(&t->wake);
    pthread_mutex_unlock(&t->mu);
    for (int i = 1; i <= t->started; i++) pthread_join(t->helpers[i].thread, NULL);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->wake);
    pthread_cond_destroy(&t->done);
    free(t->rc), free(t->helpers), free(t);
}

void app_team_split(size_t n, int parts, int part, size_t *lo, size_t *hi)
{
    /* The first n % parts parts hold one item more than the others. */
    size_t p = (size_t)part, size = n / (size_t)parts, extra = n % (size_t)parts;
    *lo = p * size + (p < extra ? p : extra);
    *hi = *lo + size + (p < extra);
}
