/* loom status: print a running job's status page in a terminal.
 *
 * Reads the JSON endpoint of the scheduler's status page (src/core/status.c;
 * its address is the first line `loom run` and `loom train` print) and lays
 * it out as a table: the job, one line per node, the failures. Every wait is
 * bounded by --timeout; an address that does not answer, an answer that is
 * not HTTP 200, or a body that is not the page's JSON is a one-line error and
 * exit status 1. */
#define _DEFAULT_SOURCE /* getaddrinfo and friends under strict C11 */
#include "commands.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/app.h"
#include "status_page.h"

/* The body and the head before it (a power of two, as the buffer grows by doubling). */
#define MAX_RESPONSE (2 * STATUS_PAGE_MAX_BODY)

static const app_flag status_flags[] = {
    {.name = "--timeout",
     .kind = APP_INT,
     .arg = "SECONDS",
     .lo = 1,
     .hi = 3600,
     .def = "5",
     .help = "give up if the page has not answered within SECONDS"},
    {.name = "--json", .kind = APP_SWITCH, .help = "print the page's JSON as it came"},
};
#define NFLAGS (sizeof status_flags / sizeof status_flags[0])

static void print_help(FILE *out)
{
    fputs("Usage: loom status [OPTIONS] ADDRESS\n"
          "\n"
          "Print the status of a running job: its nodes with their roles, clocks,\n"
          "staleness, bytes per second and heartbeats, the metrics its workers\n"
          "reported, and its failures. ADDRESS is the status page's URL that\n"
          "`loom run` and `loom train` print first (http://host:port/?token=T; the\n"
          "token is there when the job has a secret), or its host:port.\n"
          "\n"
          "Options:\n",
          out);
    app_flags_help(out, status_flags, NFLAGS);
    fputs("  -h, --help              show this help\n"
          "\n"
          "Exit status: 0 printed, 1 the page could not be read, 2 usage error.\n",
          out);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until fd is ready for events or the deadline passes: 0, or -1 with
 * errno ETIMEDOUT. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd p = {fd, events, 0};
        int r = poll(&p, 1, (int)left);
        if (r > 0) return 0;
        if (r < 0 && errno != EINTR) return -1;
    }
}

/* The token of the page's URL ("...?token=T", T hex digits) into token (65
 * bytes), "" if it has none; -1 if it is not hex digits: it goes into our
 * request line. */
static int url_token(const char *addr, char *token)
{
    token[0] = '\0';
    const char *q = strchr(addr, '?');
    for (q = q ? q + 1 : NULL; q && *q;) {
        size_t len = strcspn(q, "&#");
        if (!strncmp(q, "token=", 6)) {
            size_t n = len - 6;
            if (n == 0 || n > 64 || strspn(q + 6, "0123456789abcdefABCDEF") < n) return -1;
            memcpy(token, q + 6, n);
            token[n] = '\0';
        }
        if (q[len] != '&') break;
        q += len + 1;
    }
    return 0;
}

/* "host:port", "http://host:port/...", "[::1]:port": host and port. */
static int split_address(const char *addr, char *host, size_t hostlen, char *port, size_t portlen)
{
    if (!strncmp(addr, "http://", 7)) addr += 7;
    size_t len = strcspn(addr, "/?#");
    char hp[300];
    if (len == 0 || len >= sizeof hp) return -1;
    memcpy(hp, addr, len);
    hp[len] = '\0';
    char *colon = strrchr(hp, ':');
    if (!colon || colon == hp || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1))
        return -1;
    *colon = '\0';
    char *h = hp;
    if (h[0] == '[' && colon[-1] == ']') {
        h++;
        colon[-1] = '\0';
    }
    if (strlen(h) >= hostlen || strlen(colon + 1) >= portlen) return -1;
    strcpy(host, h);
    strcpy(port, colon + 1);
    return 0;
}

static int connect_to(const char *host, const char *port, int64_t deadline, char *err,
                      size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai;
    int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai) {
        snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(gai));
        return -1;
    }
    int fd = -1, saved = 0;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        int rc = connect(fd, a->ai_addr, a->ai_addrlen);
        if (rc < 0 && errno == EINPROGRESS && wait_fd(fd, POLLOUT, deadline) == 0) {
            socklen_t l = sizeof saved;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &saved, &l);
            rc = saved ? -1 : 0;
            errno = saved;
        }
        if (rc < 0) {
            saved = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0)
        snprintf(err, errlen, "cannot connect to %s:%s: %s", host, port,
                 saved == ETIMEDOUT ? "no answer in time" : strerror(saved));
    return fd;
}

/* GET /status.json; the body (malloc'd, *body_len bytes and a NUL) or NULL with err set. */
static char *fetch(const char *host, const char *port, const char *token, int timeout_s,
                   size_t *body_len, char *err, size_t errlen)
{
    int64_t deadline = now_ms() + (int64_t)timeout_s * 1000;
    int fd = connect_to(host, port, deadline, err, errlen);
    if (fd < 0) return NULL;
    char req[512];
    int reqlen = snprintf(req, sizeof req,
                          "GET /status.json%s%s HTTP/1.1\r\nHost: %s%s%s:%s\r\n"
                          "Accept: application/json\r\nConnection: close\r\n\r\n",
                          token[0] ? "?token=" : "", token, strchr(host, ':') ? "[" : "", host,
                          strchr(host, ':') ? "]" : "", port);
    size_t sent = 0, cap = 65536, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        snprintf(err, errlen, "out of memory");
        close(fd);
        return NULL;
    }
    while (sent < (size_t)reqlen) {
        ssize_t w = send(fd, req + sent, (size_t)reqlen - sent, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EINTR) && wait_fd(fd, POLLOUT, deadline) == 0)
            continue;
        if (w < 0) goto io_error;
        sent += (size_t)w;
    }
    for (;;) {
        if (len + 1 == cap) {
            if (cap >= MAX_RESPONSE) {
                snprintf(err, errlen, "%s:%s sent more than %u MiB: not a status page", host, port,
                         MAX_RESPONSE >> 20);
                goto fail;
            }
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                snprintf(err, errlen, "out of memory");
                goto fail;
            }
            buf = bigger;
            cap *= 2;
        }
        ssize_t r = recv(fd, buf + len, cap - 1 - len, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR) && wait_fd(fd, POLLIN, deadline) == 0)
            continue;
        if (r < 0) goto io_error;
        if (r == 0) break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = '\0';
    int code = 0;
    char *body = strstr(buf, "\r\n\r\n");
    if (sscanf(buf, "HTTP/1.%*[01] %d", &code) != 1 || !body) {
        snprintf(err, errlen, "%s:%s did not answer with HTTP: not a status page", host, port);
        free(buf);
        return NULL;
    }
    if (code == 403) {
        snprintf(err, errlen, "%s:%s answered HTTP 403 to GET /status.json: %s", host, port,
                 token[0] ? "the token is not this job's, or the page refuses this host name"
                          : "the job has a secret: give the whole URL it printed "
                            "(http://HOST:PORT/?token=...)");
        free(buf);
        return NULL;
    }
    if (code != 200) {
        snprintf(err, errlen, "%s:%s answered HTTP %d to GET /status.json", host, port, code);
        free(buf);
        return NULL;
    }
    body += 4;
    *body_len = len - (size_t)(body - buf);
    memmove(buf, body, *body_len + 1);
    return buf;
io_error:
    snprintf(err, errlen, "reading from %s:%s: %s", host, port,
             errno == ETIMEDOUT ? "no complete answer in time" : strerror(errno));
fail:
    close(fd);
    free(buf);
    return NULL;
}

int cmd_status(int argc, char **argv)
{
    app_flag_value values[NFLAGS];
    char err[512];
    /* ADDRESS comes last; everything before it is a flag. */
    int has_address = argc > 1 && (argv[argc - 1][0] != '-' || !argv[argc - 1][1]);
    int rc = app_flags_parse(status_flags, NFLAGS, argc - has_address, argv, 1, values, NULL, err,
                             sizeof err);
    if (rc == APP_FLAGS_HELP) {
        print_help(stdout);
        return 0;
    }
    if (rc) return app_command_usage("loom status", "%s", err);
    if (!has_address) return app_command_usage("loom status", "missing ADDRESS");
    const char *address = argv[argc - 1];
    char host[256], port[16];
    if (split_address(address, host, sizeof host, port, sizeof port))
        return app_command_usage("loom status",
                                 "ADDRESS '%s' is not host:port or http://host:port/", address);
    const app_flag_value *t = app_flag_get(status_flags, NFLAGS, values, "--timeout");
    const app_flag_value *json = app_flag_get(status_flags, NFLAGS, values, "--json");
    size_t len = 0;
    char token[65];
    if (url_token(address, token))
        return app_command_usage("loom status", "the token in '%s' is not hex digits", address);
    char *body = fetch(host, port, token, t ? (int)t->u : 5, &len, err, sizeof err);
    if (!body) {
        fprintf(stderr, "loom status: %s\n", err);
        return 1;
    }
    json_object *root = status_page_parse(body, len);
    if (!root) {
        fprintf(stderr, "loom status: %s:%s/status.json is not a Loom status page\n", host, port);
        free(body);
        return 1;
    }
    if (json)
        status_page_print_raw(stdout, body, len);
    else
        status_page_print(stdout, root);
    json_object_put(root);
    free(body);
    return 0;
}
