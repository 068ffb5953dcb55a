/* harness: see harness.h. */
#include "harness.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *harness_secret;
char harness_connect_to[256];
void (*harness_on_scheduler)(loom_node *scheduler);
void (*harness_on_server)(loom_node *server, int rank);
int harness_max_frame_mib;

typedef struct slot {
    loom_config cfg;
    harness_worker_fn fn;
    void *arg;
    int *result;
    int *finalize;
} slot;

static void *server_main(void *p)
{
    slot *s = p;
    loom_node *n;
    int rc = loom_node_start(&s->cfg, &n);
    if (!rc && harness_on_server) harness_on_server(n, s->cfg.rank);
    *s->result = rc ? rc : loom_serve(n);
    return NULL;
}

static void *worker_main(void *p)
{
    slot *s = p;
    loom_node *n;
    int rc = loom_node_start(&s->cfg, &n);
    if (rc) {
        *s->result = rc;
        return NULL;
    }
    *s->result = s->fn(n, s->cfg.rank, s->arg);
    *s->finalize = loom_finalize(n);
    return NULL;
}

static void *scheduler_main(void *p)
{
    void **args = p;
    *(int *)args[1] = loom_serve(args[0]);
    return NULL;
}

int harness_run(int servers, int workers, harness_worker_fn fn, void *arg, harness_result *res)
{
    memset(res, 0, sizeof *res);
    if (servers > HARNESS_MAX_NODES || workers > HARNESS_MAX_NODES) return -1;
    loom_config base;
    loom_config_default(&base);
    base.num_servers = servers;
    base.num_workers = workers;
    base.on_failure = LOOM_ON_FAILURE_RETURN;
    base.heartbeat_interval_ms = 200;
    base.heartbeat_timeout_ms = 10000;
    base.connect_timeout_ms = 20000;
    base.max_frame_mib = harness_max_frame_mib;
    snprintf(base.scheduler, sizeof base.scheduler, "127.0.0.1:0");
    const char *verbose = getenv("LOOM_VERBOSE");
    if (verbose) base.verbose = verbose[0] - '0';
    if (harness_secret) snprintf(base.secret, sizeof base.secret, "%s", harness_secret);

    loom_config sc = base;
    sc.role = LOOM_SCHEDULER;
    sc.rank = 0;
    loom_node *sched;
    int rc = loom_node_start(&sc, &sched);
    if (rc) {
        fprintf(stderr, "harness: scheduler failed to start: %s\n", loom_strerror(rc));
        return rc;
    }
    harness_connect_to[0] = '\0';
    if (harness_on_scheduler) harness_on_scheduler(sched);
    snprintf(base.scheduler, sizeof base.scheduler, "%s",
             harness_connect_to[0] ? harness_connect_to : loom_node_address(sched));

    pthread_t st, threads[2 * HARNESS_MAX_NODES];
    slot slots[2 * HARNESS_MAX_NODES];
    void *sargs[2] = {sched, &res->scheduler};
    pthread_create(&st, NULL, scheduler_main, sargs);
    int nt = 0;
    for (int i = 0; i < servers; i++, nt++) {
        slots[nt] = (slot){base, NULL, NULL, &res->servers[i], NULL};
        slots[nt].cfg.role = LOOM_SERVER;
        slots[nt].cfg.rank = i;
        pthread_create(&threads[nt], NULL, server_main, &slots[nt]);
    }
    for (int i = 0; i < workers; i++, nt++) {
        slots[nt] = (slot){base, fn, arg, &res->workers[i], &res->finalize[i]};
        slots[nt].cfg.role = LOOM_WORKER;
        slots[nt].cfg.rank = i;
        pthread_create(&threads[nt], NULL, worker_main, &slots[nt]);
    }
    for (int i = 0; i < nt; i++) pthread_join(threads[i], NULL);
    pthread_join(st, NULL);
    rc = res->scheduler;
    for (int i = 0; i < servers; i++) rc = rc ? rc : res->servers[i];
    for (int i = 0; i < workers; i++)
        rc = rc ? rc : res->workers[i] ? res->workers[i] : res->finalize[i];
    return rc;
}

void harness_remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        struct stat st;
        if (!lstat(p, &st) && S_ISDIR(st.st_mode))
            harness_remove_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(path);
}
