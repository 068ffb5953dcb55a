/* launchenv: run under mpirun or srun with no Loom variables at all.
 *
 * Launchers tell every process its rank and the job's size in variables of
 * their own: Open MPI's mpirun (OMPI_COMM_WORLD_RANK/_SIZE), MPICH's Hydra
 * and other PMI launchers (PMI_RANK/PMI_SIZE), Slurm's srun (SLURM_PROCID
 * in a job step, i.e. with SLURM_STEP_ID), PMIx (PMIX_RANK). Ranks map to
 * roles: rank 0 is the scheduler, ranks 1..S the servers (S from
 * LOOM_NUM_SERVERS, default 1), the rest workers. No MPI call is made.
 *
 * Unless LOOM_SCHEDULER names it, the scheduler is found by rendezvous:
 *   - through a file. The scheduler binds (a free port, or LOOM_PORT), then
 *     writes "host:port" to DIR/loom-<job id>.addr through a temporary file
 *     and rename(), so a reader sees the whole line or no file; the others
 *     poll for the file for up to LOOM_CONNECT_TIMEOUT_MS. DIR is
 *     LOOM_RENDEZVOUS_DIR (a directory every host shares) or, when every rank
 *     runs on this host, the private ${TMPDIR:-/tmp}/loom-<uid>. The job id
 *     comes from the launcher and differs between jobs (and Slurm steps), so
 *     concurrent jobs never read each other's file;
 *   - under srun on several hosts without a shared directory: the first host
 *     of the step's node list (srun places rank 0 there) and a port derived
 *     from the job and step ids, or LOOM_PORT.
 * Anything else is an error that says which variable to set.
 *
 * Addresses: a process binds LOOM_INTERFACE's IPv4 address, or LOOM_BIND, or
 * by default the local end of its route to the scheduler (a UDP socket
 * connect()ed there and getsockname(): no packet is sent), so the address it
 * registers is one the others reach. A scheduler that others find by name
 * binds every interface; one that publishes its address binds the address it
 * publishes (127.0.0.1 when the job is on one host). */
#define _DEFAULT_SOURCE /* IFF_UP, IFF_LOOPBACK */
#include "core/launchenv.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/log.h"
#include "core/node_impl.h"
#include "loom/error.h"

#define MAX_RANKS       (1 + LOOM_MAX_SERVERS + LOOM_MAX_WORKERS) /* scheduler, servers, workers */
#define POLL_MAX_MS     200 /* longest pause between looks for the file */
#define PORT_BASE       20000
#define PORT_SPAN       10000
#define LOCAL_ADDRESS   "127.0.0.1"
#define WILDCARD_BIND   "0.0.0.0"
#define IPV4_TEXT_MAX   16
#define INTERFACES_LIST 256

/* Launcher names, as error messages show them. */
static const char OPEN_MPI[] = "mpirun (Open MPI)";
static const char PMI[] = "mpiexec (PMI)";
static const char SLURM[] = "srun (Slurm)";
static const char PMIX[] = "the PMIx launcher";

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int
fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return LOOM_ECONFIG;
}

/* A variable's value; NULL if it is unset or empty. */
static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

static int parse_long(const char *text, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(text, &end, 10);
    if (errno || end == text || *end || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

/* A whole number in [lo, hi] from `name` into *out; unset leaves *out alone. */
static int env_num(const char *name, long lo, long hi, int *out, char *err, size_t errlen)
{
    const char *v = env(name);
    long x;
    if (!v) return 0;
    if (parse_long(v, lo, hi, &x))
        return fail(err, errlen, "%s=\"%s\" is not a whole number from %ld to %ld", name, v, lo,
                    hi);
    *out = (int)x;
    return 0;
}

/* Like env_num for variables that only corroborate: unset or malformed is -1. */
static long env_hint(const char *name)
{
    const char *v = env(name);
    long x;
    return v && !parse_long(v, 0, INT32_MAX, &x) ? x : -1;
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

/* Append text to a job id, keeping it a safe file name component. */
static void id_append(char *id, size_t idlen, const char *text)
{
    size_t n = strlen(id);
    for (; *text && n + 1 < idlen; text++) {
        char c = *text;
        int safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '.' || c == '-' || c == '_';
        id[n++] = safe ? c : '_';
    }
    id[n] = '\0';
}

/* The job's id: LOOM_JOB_ID, else the launcher's own, else srun's job and
 * step, else (one host only) this host and the parent process, which every
 * local rank shares under Hydra and Open MPI. "" if none applies. */
static void job_id(launch_env *le, const char *slurm_id)
{
    char buf[160];
    const char *v;
    le->job_id[0] = '\0';
    if ((v = env("LOOM_JOB_ID"))) {
        id_append(le->job_id, sizeof le->job_id, v);
        return;
    }
    int ompi = le->launcher == OPEN_MPI;
    if (ompi && (v = env("OMPI_MCA_ess_base_jobid"))) {
        /* The job id has 16 bits of mpirun's identity; its contact URI
         * (address, port) tells concurrent mpiruns apart further. */
        const char *uri = env("OMPI_MCA_orte_hnp_uri");
        snprintf(buf, sizeof buf, "ompi-%s-%016llx", v, (unsigned long long)(uri ? fnv1a(uri) : 0));
    } else if ((ompi || le->launcher == PMIX) && (v = env("PMIX_NAMESPACE"))) {
        snprintf(buf, sizeof buf, "pmix-%016llx", (unsigned long long)fnv1a(v));
    } else if (slurm_id[0]) {
        snprintf(buf, sizeof buf, "%s", slurm_id);
    } else if (le->single_host) {
        char host[64] = "";
        gethostname(host, sizeof host - 1);
        snprintf(buf, sizeof buf, "local-%.63s-%ld", host, (long)getppid());
    } else {
        return;
    }
    id_append(le->job_id, sizeof le->job_id, buf);
}

int launch_detect(launch_env *le, char *err, size_t errlen)
{
    *le = (launch_env){.rank = -1, .size = -1};
    const char *rank_var, *size_var, *local_var = NULL;
    /* mpirun and mpiexec first: under Slurm they start their helpers with
     * srun, whose SLURM_PROCID then numbers hosts, not ranks. */
    if (env("OMPI_COMM_WORLD_RANK")) {
        le->launcher = OPEN_MPI;
        rank_var = "OMPI_COMM_WORLD_RANK", size_var = "OMPI_COMM_WORLD_SIZE";
        local_var = "OMPI_COMM_WORLD_LOCAL_SIZE";
    } else if (env("PMI_RANK")) {
        le->launcher = PMI;
        rank_var = "PMI_RANK", size_var = "PMI_SIZE";
        local_var = env("MPI_LOCALNRANKS") ? "MPI_LOCALNRANKS" : "PMI_LOCAL_SIZE";
    } else if (env("SLURM_PROCID") && env("SLURM_STEP_ID")) {
        /* SLURM_STEP_ID: started by srun, not the batch script (SLURM_PROCID=0 there). */
        le->launcher = SLURM;
        rank_var = "SLURM_PROCID";
        size_var = env("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
    } else if (env("PMIX_RANK")) {
        le->launcher = PMIX;
        rank_var = "PMIX_RANK", size_var = NULL;
    } else {
        return 0;
    }
    int rc = env_num(rank_var, 0, MAX_RANKS - 1, &le->rank, err, errlen);
    if (!rc && size_var) rc = env_num(size_var, 1, MAX_RANKS, &le->size, err, errlen);
    if (rc) return rc;
    if (!size_var) {
        le->size = 0;
    } else if (le->size < 0) {
        return fail(err, errlen, "%s is set but %s is not", rank_var, size_var);
    } else if (le->rank >= le->size) {
        return fail(err, errlen, "%s=%d is not below %s=%d", rank_var, le->rank, size_var,
                    le->size);
    }
    if (local_var && le->size > 0) le->single_host = env_hint(local_var) == le->size;

    /* srun's job step, when it is this very job: it names the job and lists
     * the hosts. (Under mpirun in a Slurm allocation the SLURM_ variables
     * describe something else, and rank or size tell.) */
    char slurm_id[128] = "";
    long slurm_size = env_hint("SLURM_STEP_NUM_TASKS");
    if (slurm_size < 0) slurm_size = env_hint("SLURM_NTASKS");
    if (env("SLURM_JOB_ID") && env("SLURM_STEP_ID") && env_hint("SLURM_PROCID") == le->rank &&
        slurm_size > 0 && (le->size == 0 || slurm_size == le->size)) {
        if (le->size == 0) le->size = (int)slurm_size;
        long nodes = env_hint("SLURM_STEP_NUM_NODES");
        if (nodes < 0) nodes = env_hint("SLURM_NNODES");
        if (nodes < 0) nodes = env_hint("SLURM_JOB_NUM_NODES");
        if (nodes == 1) le->single_host = 1;
        const char *list_var = env("SLURM_STEP_NODELIST")  ? "SLURM_STEP_NODELIST"
                               : env("SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST"
                                                           : "SLURM_NODELIST";
        const char *list = env(list_var);
        if (list && launch_first_host(list, le->first_host, sizeof le->first_host))
            return fail(err, errlen, "%s=\"%s\" is not a Slurm host list", list_var, list);
        const char *cluster = env("SLURM_CLUSTER_NAME");
        snprintf(slurm_id, sizeof slurm_id, "slurm-%.40s%s%.40s.%.20s", cluster ? cluster : "",
                 cluster ? "-" : "", env("SLURM_JOB_ID"), env("SLURM_STEP_ID"));
    }
    job_id(le, slurm_id);
    return 0;
}

int launch_first_host(const char *list, char *out, size_t outlen)
{
    size_t n = 0;
    const char *p = list;
    while (*p && *p != ',') {
        if (*p == ']') return LOOM_ECONFIG;
        if (*p != '[') {
            if (n + 1 >= outlen) return LOOM_ECONFIG;
            out[n++] = *p++;
            continue;
        }
        /* "[01-03,07]": the first number of the first range, zeros kept. */
        size_t digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++, digits++) {
            if (n + 1 >= outlen) return LOOM_ECONFIG;
            out[n++] = *p;
        }
        if (!digits || (*p != '-' && *p != ',' && *p != ']')) return LOOM_ECONFIG;
        p = strchr(p, ']');
        if (!p) return LOOM_ECONFIG;
        p++;
    }
    if (n == 0) return LOOM_ECONFIG;
    out[n] = '\0';
    return 0;
}

int launch_derived_port(const char *id)
{
    return PORT_BASE + (int)(fnv1a(id) % PORT_SPAN);
}

/* ---- addresses ---- */

static int interface_address(const char *name, char *out, size_t outlen, char *err, size_t errlen)
{
    struct ifaddrs *all, *ifa;
    if (getifaddrs(&all))
        return fail(err, errlen, "cannot list the network interfaces: %s", strerror(errno));
    char names[INTERFACES_LIST] = "";
    int found = 0;
    for (ifa = all; ifa && !found; ifa = ifa->ifa_next) {
        if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET) continue;
        if (!strcmp(ifa->ifa_name, name)) {
            const struct sockaddr_in *sin = (const struct sockaddr_in *)(void *)ifa->ifa_addr;
            found = inet_ntop(AF_INET, &sin->sin_addr, out, (socklen_t)outlen) != NULL;
        } else if (strlen(names) + strlen(ifa->ifa_name) + 3 < sizeof names) {
            if (names[0]) strcat(names, ", ");
            strcat(names, ifa->ifa_name);
        }
    }
    freeifaddrs(all);
    if (!found)
        return fail(err, errlen,
                    "LOOM_INTERFACE=\"%s\" is not a network interface with an IPv4 address "
                    "(these have one: %s)",
                    name, names[0] ? names : "none");
    return 0;
}

int loom_interface_address(const char *name, char *addr, size_t addrlen)
{
    if (!name || !addr || addrlen < IPV4_TEXT_MAX) return LOOM_EINVAL;
    return interface_address(name, addr, addrlen, NULL, 0);
}

int launch_explicit_bind(char *out, size_t outlen, char *err, size_t errlen)
{
    const char *ifname = env("LOOM_INTERFACE"), *bind = getenv("LOOM_BIND");
    out[0] = '\0';
    if (ifname && bind)
        return fail(err, errlen,
                    "LOOM_INTERFACE and LOOM_BIND are both set; set only one (an interface name, "
                    "or the address to bind)");
    if (ifname) return interface_address(ifname, out, outlen, err, errlen);
    if (!bind) return 0;
    if (!*bind || strlen(bind) >= outlen)
        return fail(err, errlen, "LOOM_BIND is empty or longer than %zu characters", outlen - 1);
    memcpy(out, bind, strlen(bind) + 1);
    return 0;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {
    }
}

int launch_route_source(const char *hostport, int timeout_ms, char *out, size_t outlen, char *err,
                        size_t errlen)
{
    const char *colon = strrchr(hostport, ':');
    char host[256];
    if (!colon || (size_t)(colon - hostport) >= sizeof host)
        return fail(err, errlen, "\"%s\" is not host:port", hostport);
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = '\0';
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res = NULL;
    uint64_t deadline = node_now_ms() + (uint64_t)timeout_ms;
    int rc;
    /* Not resolvable yet (a DNS name made when the scheduler starts): retry. */
    while ((rc = getaddrinfo(host, colon + 1, &hints, &res)) != 0 &&
           (rc == EAI_AGAIN || rc == EAI_NONAME) && node_now_ms() < deadline)
        sleep_ms(POLL_MAX_MS);
    if (rc)
        return fail(err, errlen,
                    "cannot resolve the scheduler's host \"%s\": %s (set LOOM_INTERFACE or "
                    "LOOM_BIND to choose this process's address yourself)",
                    host, gai_strerror(rc));
    struct sockaddr_in me;
    socklen_t melen = sizeof me;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    int ok = fd >= 0 && !connect(fd, res->ai_addr, res->ai_addrlen) &&
             !getsockname(fd, (struct sockaddr *)(void *)&me, &melen) &&
             inet_ntop(AF_INET, &me.sin_addr, out, (socklen_t)outlen);
    int saved = errno;
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    if (!ok)
        return fail(err, errlen,
                    "no route from this host to the scheduler at %s: %s (set LOOM_INTERFACE or "
                    "LOOM_BIND)",
                    hostport, strerror(saved));
    return 0;
}

/* An address of this host that other hosts reach: what its name resolves
 * to, unless that is loopback (Debian maps the name to 127.0.1.1); else the
 * first address of an interface that is up and not loopback. */
static int host_address(char *out, size_t outlen, char *err, size_t errlen)
{
    char name[256] = "";
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res, *ai;
    if (!gethostname(name, sizeof name - 1) && !getaddrinfo(name, NULL, &hints, &res)) {
        int found = 0;
        for (ai = res; ai && !found; ai = ai->ai_next) {
            const struct sockaddr_in *sin = (const struct sockaddr_in *)(void *)ai->ai_addr;
            if ((ntohl(sin->sin_addr.s_addr) >> 24) != 127)
                found = inet_ntop(AF_INET, &sin->sin_addr, out, (socklen_t)outlen) != NULL;
        }
        freeaddrinfo(res);
        if (found) return 0;
    }
    struct ifaddrs *all, *ifa;
    int found = 0;
    if (!getifaddrs(&all)) {
        for (ifa = all; ifa && !found; ifa = ifa->ifa_next) {
            if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET ||
                !(ifa->ifa_flags & IFF_UP) || (ifa->ifa_flags & IFF_LOOPBACK))
                continue;
            const struct sockaddr_in *sin = (const struct sockaddr_in *)(void *)ifa->ifa_addr;
            found = inet_ntop(AF_INET, &sin->sin_addr, out, (socklen_t)outlen) != NULL;
        }
        freeifaddrs(all);
    }
    if (found) return 0;
    return fail(err, errlen,
                "cannot find an address of this host (%s) that other hosts reach: set "
                "LOOM_INTERFACE or LOOM_BIND",
                name);
}

/* ---- the rendezvous file ---- */

/* ${TMPDIR:-/tmp}/loom-<uid>, made if needed; refused unless it is a
 * directory of this user that nobody else may write to. */
static int private_dir(char *out, size_t outlen, char *err, size_t errlen)
{
    const char *tmp = env("TMPDIR");
    struct stat st;
    if ((size_t)snprintf(out, outlen, "%s/loom-%ld", tmp ? tmp : "/tmp", (long)getuid()) >= outlen)
        return fail(err, errlen, "TMPDIR=\"%s\" is too long", tmp);
    if (mkdir(out, 0700) && errno != EEXIST)
        return fail(err, errlen, "cannot create %s (for the rendezvous of a job on one host): %s",
                    out, strerror(errno));
    if (lstat(out, &st)) return fail(err, errlen, "cannot use %s: %s", out, strerror(errno));
    if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 022))
        return fail(err, errlen,
                    "%s is not a directory that only this user can write to; Loom keeps the "
                    "scheduler's address of a job on one host there: remove it, or set TMPDIR",
                    out);
    return 0;
}

int launch_publish(const char *path, const char *address, char *err, size_t errlen)
{
    if (!strncmp(address, WILDCARD_BIND ":", strlen(WILDCARD_BIND) + 1))
        return fail(err, errlen,
                    "the scheduler listens on %s, which is no address for the others to use: set "
                    "LOOM_INTERFACE, or LOOM_BIND to one of this host's addresses",
                    address);
    char tmp[PATH_MAX + 32], line[300];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    int len = snprintf(line, sizeof line, "%s\n", address);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return fail(err, errlen, "cannot publish the scheduler's address in %s: %s", tmp,
                    strerror(errno));
    int ok = write(fd, line, (size_t)len) == len;
    int saved = errno;
    ok = !close(fd) && ok;
    if (ok && !rename(tmp, path)) return 0;
    if (ok) saved = errno;
    unlink(tmp);
    return fail(err, errlen, "cannot publish the scheduler's address in %s: %s", path,
                strerror(saved));
}

/* Poll for the scheduler's file until it holds "host:port\n". */
static int wait_for_file(const char *dir, const char *path, int shared, int timeout_ms, char *out,
                         size_t outlen, char *err, size_t errlen)
{
    uint64_t deadline = node_now_ms() + (uint64_t)timeout_ms;
    int pause = 5;
    for (;;) {
        /* Opening the directory makes NFS look at it afresh, so a file the
         * scheduler created on another host shows at once. */
        DIR *d = opendir(dir);
        if (d) closedir(d);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            char line[300];
            ssize_t n = read(fd, line, sizeof line - 1);
            close(fd);
            line[n > 0 ? n : 0] = '\0';
            line[strcspn(line, "\r\n")] = '\0';
            const char *colon = strrchr(line, ':');
            long port;
            if (!colon || colon == line || parse_long(colon + 1, 1, 65535, &port) ||
                strlen(line) >= outlen)
                return fail(err, errlen, "%s holds \"%s\", not the scheduler's host:port", path,
                            line);
            memcpy(out, line, strlen(line) + 1);
            return 0;
        }
        if (errno != ENOENT) return fail(err, errlen, "cannot read %s: %s", path, strerror(errno));
        if (node_now_ms() >= deadline) {
            fail(err, errlen,
                 "rank 0 (the scheduler) did not publish its address in %s within %d ms "
                 "(LOOM_CONNECT_TIMEOUT_MS): is rank 0 running%s?",
                 path, timeout_ms,
                 shared ? ", and is LOOM_RENDEZVOUS_DIR the same shared directory on every host"
                        : "");
            return LOOM_ETIMEDOUT;
        }
        sleep_ms(pause);
        pause = pause * 2 < POLL_MAX_MS ? pause * 2 : POLL_MAX_MS;
    }
}

/* The rendezvous. The scheduler's cfg->scheduler is the address it binds. */
static int find_scheduler(loom_config *cfg, launch_plan *plan, const char *bind, char *err,
                          size_t errlen)
{
    const launch_env *le = &plan->env;
    int is_sched = cfg->role == LOOM_SCHEDULER, port = -1;
    int rc = env_num("LOOM_PORT", 0, 65535, &port, err, errlen);
    if (rc) return rc;
    const char *given = env("LOOM_SCHEDULER");
    if (given) {
        const char *colon = strrchr(given, ':');
        long p;
        if (!colon || colon == given || parse_long(colon + 1, 1, 65535, &p) ||
            strlen(given) >= sizeof cfg->scheduler)
            return fail(err, errlen,
                        "LOOM_SCHEDULER=\"%s\" must be host:port with a port from 1 to 65535 "
                        "(under %s nobody could learn a port chosen by the system)",
                        given, le->launcher);
        if (is_sched)
            snprintf(cfg->scheduler, sizeof cfg->scheduler, "%s:%ld",
                     bind[0] ? bind : WILDCARD_BIND, p);
        else
            memcpy(cfg->scheduler, given, strlen(given) + 1);
        return 0;
    }
    const char *shared = env("LOOM_RENDEZVOUS_DIR");
    if (shared || le->single_host) {
        char dir[PATH_MAX];
        struct stat st;
        if (shared) {
            if (stat(shared, &st) || !S_ISDIR(st.st_mode))
                return fail(err, errlen, "LOOM_RENDEZVOUS_DIR=\"%s\" is not a directory", shared);
            snprintf(dir, sizeof dir, "%s", shared);
        } else if ((rc = private_dir(dir, sizeof dir, err, errlen))) {
            return rc;
        }
        if (!le->job_id[0])
            return fail(err, errlen,
                        "%s does not name the job, so its ranks cannot agree on a rendezvous "
                        "file: set LOOM_JOB_ID to one value for every rank of the job (and "
                        "another for every other job), or set LOOM_SCHEDULER",
                        le->launcher);
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/loom-%s.addr", dir, le->job_id) >= sizeof path)
            return fail(err, errlen, "LOOM_RENDEZVOUS_DIR=\"%s\" is too long", dir);
        if (!is_sched) {
            log_info("waiting up to %d ms for rank 0 (the scheduler) to publish its address in %s",
                     cfg->connect_timeout_ms, path);
            return wait_for_file(dir, path, shared != NULL, cfg->connect_timeout_ms, cfg->scheduler,
                                 sizeof cfg->scheduler, err, errlen);
        }
        char host[128] = LOCAL_ADDRESS;
        if (bind[0])
            snprintf(host, sizeof host, "%s", bind);
        else if (!le->single_host && (rc = host_address(host, sizeof host, err, errlen)))
            return rc;
        snprintf(cfg->scheduler, sizeof cfg->scheduler, "%s:%d", host, port < 0 ? 0 : port);
        memcpy(plan->publish_path, path, strlen(path) + 1);
        return 0;
    }
    if (le->first_host[0]) {
        if (port == 0)
            return fail(err, errlen,
                        "LOOM_PORT=0: under srun on several hosts the scheduler needs a fixed "
                        "port (leave LOOM_PORT unset for one derived from the job id)");
        if (port < 0) port = launch_derived_port(le->job_id);
        const char *me = env("SLURMD_NODENAME");
        if (is_sched && me && strcmp(me, le->first_host))
            return fail(err, errlen,
                        "rank 0 (the scheduler) runs on %s, but the other ranks look for it on "
                        "%s, the first host of the node list: set LOOM_RENDEZVOUS_DIR to a "
                        "directory every host shares, or LOOM_SCHEDULER",
                        me, le->first_host);
        snprintf(cfg->scheduler, sizeof cfg->scheduler, "%s:%d",
                 is_sched ? (bind[0] ? bind : WILDCARD_BIND) : le->first_host, port);
        return 0;
    }
    return fail(err, errlen,
                "%s started this job on several hosts (or does not say whether it did), and "
                "nothing tells where rank 0 (the scheduler) runs: set LOOM_RENDEZVOUS_DIR to a "
                "directory every host shares, or LOOM_SCHEDULER=host:port (rank 0's host and a "
                "free port)",
                le->launcher);
}

int launch_configure(loom_config *cfg, launch_plan *plan, const char *bind, char *err,
                     size_t errlen)
{
    launch_env *le = &plan->env;
    int rc = launch_detect(le, err, errlen);
    if (rc) return rc;
    if (!le->launcher)
        return fail(err, errlen,
                    "LOOM_ROLE is not set, and no launcher (mpirun, mpiexec, srun) started this "
                    "process: start it with `loom run`, mpirun or srun, or set LOOM_ROLE, "
                    "LOOM_SCHEDULER, LOOM_NUM_SERVERS and LOOM_NUM_WORKERS (see "
                    "docs/LAUNCHING.md)");
    if (getenv("LOOM_RANK"))
        return fail(err, errlen,
                    "LOOM_RANK is set but LOOM_ROLE is not: under %s the launcher's rank decides "
                    "the role; set both LOOM_ROLE and LOOM_RANK to choose them yourself",
                    le->launcher);
    int S = cfg->num_servers, workers_set = getenv("LOOM_NUM_WORKERS") != NULL;
    if (le->size == 0) {
        if (!workers_set)
            return fail(err, errlen,
                        "%s gives this process's rank but not the number of processes: set "
                        "LOOM_NUM_WORKERS",
                        le->launcher);
        le->size = 1 + S + cfg->num_workers;
        if (le->rank >= le->size)
            return fail(err, errlen,
                        "rank %d is beyond 1 scheduler + %d servers + %d workers "
                        "(LOOM_NUM_SERVERS, LOOM_NUM_WORKERS)",
                        le->rank, S, cfg->num_workers);
    }
    int W = le->size - 1 - S;
    if (W < 1)
        return fail(err, errlen,
                    "%s started %d process%s, but a job needs a scheduler, %d server%s "
                    "(LOOM_NUM_SERVERS) and at least one worker: start at least %d processes, or "
                    "use fewer servers",
                    le->launcher, le->size, le->size == 1 ? "" : "es", S, S == 1 ? "" : "s", S + 2);
    if (workers_set && cfg->num_workers != W)
        return fail(err, errlen,
                    "LOOM_NUM_WORKERS=%d, but %s started %d processes: a scheduler, %d server%s "
                    "(LOOM_NUM_SERVERS) and %d worker%s",
                    cfg->num_workers, le->launcher, le->size, S, S == 1 ? "" : "s", W,
                    W == 1 ? "" : "s");
    cfg->num_workers = W;
    if (le->rank == 0) {
        cfg->role = LOOM_SCHEDULER, cfg->rank = 0;
    } else if (le->rank <= S) {
        cfg->role = LOOM_SERVER, cfg->rank = le->rank - 1;
    } else {
        cfg->role = LOOM_WORKER, cfg->rank = le->rank - 1 - S;
    }
    return find_scheduler(cfg, plan, bind, err, errlen);
}

int loom_launched(void)
{
    if (getenv("LOOM_ROLE")) return 1;
    launch_env le;
    /* Malformed launcher variables count as launched: loom_init reports them. */
    if (launch_detect(&le, NULL, 0)) return 1;
    return le.launcher && le.size != 1;
}

/* The one place a job token comes from (docs/SECURITY.md, "Node identity"):
 * LOOM_JOB_TOKEN as given (loom run makes a random one), else the launcher's
 * job id, which every rank of an mpirun or srun job shares and no other job
 * has. That keeps jobs apart; it is no secret (job ids are public), so only
 * a random LOOM_JOB_TOKEN also stops a stranger who guesses it. */
int launch_job_token(const launch_plan *plan, char *out, size_t outlen, char *err, size_t errlen)
{
    const char *v = env("LOOM_JOB_TOKEN");
    out[0] = '\0';
    if (v) {
        size_t n = strlen(v);
        int printable = 1;
        for (size_t i = 0; i < n; i++) printable &= v[i] > ' ' && v[i] < 0x7f;
        if (n >= outlen || !printable) {
            if (err)
                snprintf(err, errlen,
                         "LOOM_JOB_TOKEN must be 1 to %zu printable characters without spaces",
                         outlen - 1);
            return LOOM_ECONFIG;
        }
        memcpy(out, v, n + 1);
    } else if (plan->env.launcher && plan->env.job_id[0]) {
        if (strlen(plan->env.job_id) < outlen)
            memcpy(out, plan->env.job_id, strlen(plan->env.job_id) + 1);
        else
            snprintf(out, outlen, "job-%016llx", (unsigned long long)fnv1a(plan->env.job_id));
    }
    return 0;
}
