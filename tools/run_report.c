/* run_report: how a `loom run` job ended, in its last lines and exit status.
 *
 * The first process to fail is often not the cause: when one dies, its peers
 * notice and exit with LOOM_EXIT_PEER_FAILED, and when the scheduler gives up
 * assembling the job, those that came are refused. So the report names the
 * culprit first (run_print_failures says in what order it looks for one),
 * then the others. The exit status is the one `loom run --help` documents:
 * 128+N after signal N, 124 after --timeout, 1 if anything failed, else 0;
 * but a job that went on without dead servers whose ranges had replicas (no
 * more of them than LOOM_REPLICAS) succeeded. */
#include "run_impl.h"

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <loom/node.h>

/* "exited with status 3" / "was killed by signal 9 (Killed)" */
const char *run_describe_status(int status, char *buf, size_t size)
{
    if (WIFEXITED(status))
        snprintf(buf, size, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, size, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, size, "ended with wait status %d", status);
    return buf;
}

/* LOOM_REPLICAS: how many servers the job may lose at a time. */
static long replicas(void)
{
    const char *v = getenv("LOOM_REPLICAS");
    return v ? strtol(v, NULL, 10) : 0;
}

/* The servers killed and replaced whose replacements were not back: more of
 * them than the replicas cover is what ended the job (the scheduler gave up
 * on the one too many, and everyone else ended with LOOM_EXIT_PEER_FAILED or
 * was stopped). Names them, in the order they died, in one `failed:` line
 * and returns 1; 0 if there are not that many. */
static int print_lost_servers(const struct job *job)
{
    char how[128], list[768] = "";
    size_t used = 0;
    int lost = 0;
    for (int seq = 1; seq <= job->deaths; seq++)
        for (int i = 1; i <= job->opt->servers; i++) {
            const struct child *c = &job->children[i];
            if (c->died != seq) continue;
            lost++;
            int n = snprintf(list + used, sizeof list - used, "%s%s %s", used ? ", " : "", c->label,
                             run_describe_status(c->died_status, how, sizeof how));
            if (n > 0) used = (size_t)n < sizeof list - used ? used + (size_t)n : sizeof list - 1;
        }
    if (lost <= replicas()) return 0;
    run_say(
        "failed: %d servers died before their replacements were back, more than LOOM_REPLICAS=%ld "
        "allows, and the scheduler ended the job: %s",
        lost, replicas(), list);
    return 1;
}

/* The scheduler gave up assembling the job: the processes that had come then
 * exit with an error of their own (they were refused), but the cause is the
 * ones that never registered (never started, frozen, stuck before joining).
 * Names them in one `failed:` line and returns 1; 0 if the scheduler named
 * none. */
static int print_missing(const struct job *job)
{
    char how[128], list[768] = "";
    size_t used = 0;
    for (int i = 1; i < job->nchildren; i++) {
        const struct child *c = &job->children[i];
        if (!c->missing) continue;
        char it[160] = "";
        if (c->failed)
            snprintf(it, sizeof it, " (it %s)", run_describe_status(c->status, how, sizeof how));
        int n = snprintf(list + used, sizeof list - used, "%s%s%s", used ? ", " : "", c->label, it);
        if (n > 0) used = (size_t)n < sizeof list - used ? used + (size_t)n : sizeof list - 1;
    }
    if (!used) return 0;
    run_say("failed: %s never registered with the scheduler, which gave up assembling the job "
            "(LOOM_CONNECT_TIMEOUT_MS)",
            list);
    return 1;
}

static int peer_failed(int status)
{
    return WIFEXITED(status) && WEXITSTATUS(status) == LOOM_EXIT_PEER_FAILED;
}

static int survived(const struct job *job);

/* The failure that brought the job down, and then the others, so that the
 * last words of `loom run` name the culprit, not the first process to go:
 * the processes that never registered if the job did not assemble; else the
 * first process that failed with a reason of its own (any status but
 * LOOM_EXIT_PEER_FAILED, which only says a peer failed first, or a signal);
 * else the process its peers named dead; else the replaced servers that died
 * one too many for the replicas; else the first to fail. Returns how many
 * failed. */
int run_print_failures(const struct job *job)
{
    char how[128];
    int root = -1;
    if (!job->failures) return 0;
    int told = print_missing(job);
    for (int seq = 1; seq <= job->failures && root < 0 && !told; seq++)
        for (int i = 0; i < job->nchildren; i++)
            if (job->children[i].failed == seq && !peer_failed(job->children[i].status)) root = i;
    /* Not a replaced server the peers named dead: its rank is up again, and
     * a later failure is another process's (ft.fault_mix: a server frozen
     * until declared dead stops with LOOM_EXIT_PEER_FAILED, and the summary
     * named a server replaced long before). */
    if (root < 0 && !told && job->named_dead >= 0 && !job->children[job->named_dead].replaced)
        root = job->named_dead;
    if (root < 0 && !told) told = print_lost_servers(job);
    for (int seq = 1; seq <= job->failures && root < 0 && !told; seq++)
        for (int i = 0; i < job->nchildren; i++)
            if (job->children[i].failed == seq) root = i;
    if (root < 0 && !told) return 0;

    /* A job that went on without servers whose ranges had replicas succeeded
     * (run_exit_status): their deaths are losses it survived, not its failure. */
    const char *what =
        !job->error && !job->exit_signal && !job->timed_out && survived(job) ? "lost" : "failed";
    const struct child *r = root >= 0 ? &job->children[root] : NULL;
    if (r && r->failed)
        run_say("%s: %s %s", what, r->label, run_describe_status(r->status, how, sizeof how));
    else if (r)
        run_say("%s: %s stopped responding: its peers declared it dead", what, r->label);
    for (int seq = 1; seq <= job->failures; seq++)
        for (int i = 0; i < job->nchildren; i++) {
            const struct child *c = &job->children[i];
            if (c->failed != seq || i == root || c->missing) continue; /* told already */
            run_say("also %s: %s %s%s", what, c->label,
                    run_describe_status(c->status, how, sizeof how),
                    peer_failed(c->status) ? " (a peer failed)" : "");
        }
    return job->failures;
}

/* With LOOM_REPLICAS=K the job goes on without up to K dead servers
 * (docs/FAULTS.md): if only servers failed, no more than K, and every other
 * process ended well, the job succeeded. */
static int survived(const struct job *job)
{
    long k = replicas();
    int dead = 0;
    for (int i = 0; i < job->nchildren; i++) {
        if (!job->children[i].failed) continue;
        if (i == 0 || i > (int)job->opt->servers) return 0;
        dead++;
    }
    return dead > 0 && dead <= k;
}

int run_exit_status(const struct job *job, int failed)
{
    if (job->exit_signal) return 128 + job->exit_signal;
    if (job->timed_out) return 124;
    if (failed && !job->error && survived(job)) {
        run_say("the job went on without its dead server(s): their ranges had replicas");
        return 0;
    }
    return failed || job->error ? 1 : 0;
}
