/* run_output: the lines of a `loom run` job, relayed and read.
 *
 * Each child's stdout and stderr are pipes that the loop reads without
 * blocking. Complete lines are re-emitted on the launcher's stdout or stderr
 * with the child's label in front ("[worker 0] "), each in one write so that
 * the lines of different children never mix; a line longer than LINE_BUF is
 * relayed in pieces. The library's own prefix naming the same process
 * ("loom[worker 0] ", "loom[scheduler 0] ") is dropped from such a line, so
 * that it reads "[worker 0] warning: ..." rather than naming it twice. The launcher's own messages
 * (run_say) go to stderr the same way. Some lines the launcher also reads: the address the
 * scheduler writes into its LOOM_ADDRESS_FD pipe, which lets the servers and workers start; and on
 * stderr the library's messages that name a node dead (whom the report blames, run_report.c), that
 * the scheduler gave up, which processes never registered, and that a replacement server is back.
 */
#include "run_impl.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ADDRESS_EOF_MS 1000 /* see run_read_address() */

/* The first error other than EPIPE in writing the job's output (a full
 * disk, an I/O error), 0 if none: the job's results were lost, so a job that
 * otherwise succeeded must not exit 0. */
int run_output_errno;

void run_write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            /* Nobody reads our output any more (EPIPE, `loom run ... | head`):
             * the job goes on regardless. */
            if (n < 0 && errno != EPIPE && !run_output_errno) run_output_errno = errno;
            return;
        }
        buf += n;
        len -= (size_t)n;
    }
}

/* A launcher message on stderr, as one write so it never splits a line. */
void run_say(const char *fmt, ...)
{
    char line[1024] = "loom run: ";
    size_t n = strlen(line);
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    if (len < 0) return;
    n += (size_t)len < sizeof line - n - 1 ? (size_t)len : sizeof line - n - 2;
    line[n++] = '\n';
    run_write_all(STDERR_FILENO, line, n);
}
/* --- output streams ------------------------------------------------------ */

/* When a process stops answering, it does not fail by itself: its peers
 * notice, say which node died, and exit with LOOM_EXIT_PEER_FAILED. Their
 * messages (src/core/node_control.c) read "... worker 1 (node 5) died: ..." or
 * "... lost the scheduler: ...". The first node so named, while the job
 * still runs, is the culprit to report if no process failed by itself. */
static void note_named_dead(struct job *job, const char *text);
/* The scheduler's messages that change what the launcher does: "...;
 * stopping" (node_fail in src/core/node_control.c) says it gave up on the job, "the
 * job did not assemble: ...; missing: worker 1 (node 3)" (src/core/
 * scheduler.c) which processes never registered, and "server 1 rejoined: it
 * holds full copies ..." (src/ps/registry.c) that a replacement is back, so
 * that server's death no longer counts against the replicas. */
static void note_scheduler_line(struct job *job, const char *text);

/* The length of the library's prefix "loom[TAG] " at the start of data when
 * TAG names the process whose label is `label` (the scheduler's tag may carry
 * its rank, "scheduler 0"); 0 if there is none. */
static size_t own_log_prefix(const char *label, const char *data, size_t len)
{
    size_t n = strlen(label);
    if (len < 5 + n + 2 || memcmp(data, "loom[", 5) || memcmp(data + 5, label, n)) return 0;
    const char *p = data + 5 + n;
    if (!strcmp(label, "scheduler") && len >= 5 + n + 4 && !memcmp(p, " 0] ", 4)) return 5 + n + 4;
    return memcmp(p, "] ", 2) ? 0 : 5 + n + 2;
}

static void emit_line(const struct stream *s, const char *data, size_t len)
{
    char line[LABEL_MAX + 4 + LINE_BUF + 1];
    size_t skip = own_log_prefix(s->label, data, len);
    int n = snprintf(line, sizeof line, "[%s] ", s->label);
    memcpy(line + n, data + skip, len - skip);
    line[(size_t)n + len - skip] = '\n';
    run_write_all(s->dest, line, (size_t)n + len - skip + 1);
    if (s->dest == STDERR_FILENO) {
        /* The notes read the line as the library wrote it, prefix and all
         * (a library message starts with "loom"). */
        char raw[LINE_BUF + 1];
        memcpy(raw, data, len);
        raw[len] = '\0';
        note_named_dead(s->job, raw);
        if (s == &s->job->children[0].err) note_scheduler_line(s->job, raw);
    }
}

/* Emit every complete line in s->buf and keep the unfinished tail, unless
 * the buffer is full (the line is split) or the stream ended (flushed). */
static void flush_lines(struct stream *s, int at_eof)
{
    size_t start = 0;
    const char *nl;
    while ((nl = memchr(s->buf + start, '\n', s->len - start)) != NULL) {
        size_t end = (size_t)(nl - s->buf);
        emit_line(s, s->buf + start, end - start);
        start = end + 1;
    }
    if (start < s->len && (at_eof || (start == 0 && s->len == sizeof s->buf))) {
        emit_line(s, s->buf + start, s->len - start);
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
}

static void close_stream(struct stream *s)
{
    if (s->fd < 0) return;
    flush_lines(s, 1);
    close(s->fd);
    s->fd = -1;
}

/* One read: 1 if data came, 0 if nothing is available now, -1 once closed. */
int run_read_stream(struct stream *s)
{
    ssize_t n = read(s->fd, s->buf + s->len, sizeof s->buf - s->len);
    if (n > 0) {
        s->len += (size_t)n;
        flush_lines(s, 0);
        return 1;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    close_stream(s);
    return -1;
}

/* After the child is reaped everything it wrote is already in the pipe. Read
 * it all, then close: a grandchild holding the pipe open must not keep the
 * launcher waiting. */
void run_drain_stream(struct stream *s)
{
    while (s->fd >= 0 && run_read_stream(s) > 0) {
    }
    close_stream(s);
}

/* --- the scheduler's address --------------------------------------------- */

/* "host:port" with a non-empty host and a port from 1 to 65535. */
static int valid_address(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr) return 0;
    char *end;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    return end != colon + 1 && *end == '\0' && errno == 0 && port >= 1 && port <= 65535;
}

static void publish_address(struct job *job)
{
    close(job->addr_fd);
    job->addr_fd = -1;
    job->addr[strcspn(job->addr, "\r\n")] = '\0';
    if (!valid_address(job->addr)) {
        run_say("scheduler published an invalid address '%s' (expected host:port)", job->addr);
        job->error = 1;
        run_begin_stop(job);
        return;
    }
    job->published = 1;
    /* Workers that join an elastic job need it (loom join ADDRESS). */
    if (job->opt->verbose || job->opt->max_workers || job->opt->max_servers)
        run_say("scheduler is at %s", job->addr);
    if (!job->stopping) run_start_servers_and_workers(job);
}

/* The scheduler writes "host:port\n" and closes the pipe. */
void run_read_address(struct job *job)
{
    ssize_t n = read(job->addr_fd, job->addr + job->addr_len, sizeof job->addr - 1 - job->addr_len);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n > 0) {
        job->addr_len += (size_t)n;
        job->addr[job->addr_len] = '\0';
        if (memchr(job->addr, '\n', job->addr_len) || job->addr_len == sizeof job->addr - 1)
            publish_address(job);
        return;
    }
    if (job->addr_len > 0) { /* a last line without newline still counts */
        publish_address(job);
        return;
    }
    /* Closed without an address. Usually the scheduler is exiting, and the
     * kernel closes its files before it becomes reapable, so wait a moment
     * for it: then the error can name the scheduler's exit status. */
    close(job->addr_fd);
    job->addr_fd = -1;
    job->addr_eof = 1;
    int64_t soon = run_now_ms() + ADDRESS_EOF_MS;
    if (soon < job->addr_deadline) job->addr_deadline = soon;
}

/* --- what the lines say -------------------------------------------------- */

static void note_named_dead(struct job *job, const char *text)
{
    if (job->named_dead >= 0 || job->stopping || strncmp(text, "loom", 4) != 0) return;
    if (strstr(text, "lost the scheduler")) {
        job->named_dead = 0;
        return;
    }
    const char *died = strstr(text, " died");
    if (!died) return;
    for (int i = 0; i < job->nchildren; i++) {
        const char *label = job->children[i].label;
        size_t len = strlen(label);
        for (const char *p = strstr(text, label); p && p < died; p = strstr(p + 1, label)) {
            const char *after = p + len, *paren;
            int whole_name = p > text && p[-1] == ' ';
            int named = after == died || (strncmp(after, " (node ", 7) == 0 &&
                                          (paren = strchr(after, ')')) && paren + 1 == died);
            if (whole_name && named) {
                job->named_dead = i;
                return;
            }
        }
    }
}

static void note_scheduler_line(struct job *job, const char *text)
{
    static const char gave_up[] = "; stopping";
    size_t len = strlen(text), tail = sizeof gave_up - 1;
    if (strncmp(text, "loom", 4) != 0) return;
    if (len >= tail && !strcmp(text + len - tail, gave_up)) {
        run_scheduler_ended(job);
        return;
    }
    const char *missing = strstr(text, "; missing: ");
    for (int i = 1; missing && strstr(text, "the job did not assemble: ") && i < job->nchildren;
         i++) {
        struct child *c = &job->children[i];
        size_t n = strlen(c->label);
        /* "worker 1 (node 3)", not the "worker 1" of "worker 12 (node 14)" */
        for (const char *p = strstr(missing, c->label); p; p = strstr(p + 1, c->label))
            if (p[-1] == ' ' && !strncmp(p + n, " (node ", 7)) c->missing = 1;
    }
    const char *back = strstr(text, " rejoined: it holds full copies");
    for (int i = 1; back && i <= job->opt->servers; i++) {
        struct child *c = &job->children[i];
        size_t n = strlen(c->label);
        if ((size_t)(back - text) > n && back[-(ptrdiff_t)n - 1] == ' ' &&
            !strncmp(back - n, c->label, n))
            c->died = 0;
    }
}
