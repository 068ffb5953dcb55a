/* fuzz_launchenv: how a process finds its place in a job (src/core/config.c and
 * src/core/launchenv.c), fed hostile environment values and rendezvous files.
 *
 * Built two ways like fuzz_decode.c: a libFuzzer target (LOOM_FUZZ=ON, clang) and, in
 * every build, a plain replay driver (LOOM_FUZZ_DRIVER; corpus_launchenv/).
 *
 * Input: records of a variable byte (index into vars[] below, modulo its size), a length
 * byte and that many bytes of value (the value ends at its first NUL, as a C string does).
 * The pseudo-variable RENDEZVOUS_FILE is the content of the scheduler's address file,
 * written where the process will look for it; SECRET_FILE the content of the job's
 * secret, in a scratch file (mode 0600) that LOOM_SECRET_FILE names. Every variable that config.c
 * and launchenv.c read is cleared before each input, so inputs do not leak into each other.
 *
 * What stays out of the fuzzer's hands, so that an input cannot touch the machine or wait
 * on the network: TMPDIR is a scratch directory (the private rendezvous directory is made
 * below it), LOOM_CONNECT_TIMEOUT_MS is at most 1 (the wait for the file is bounded),
 * and LOOM_BIND is always set (127.0.0.1 unless the input gives one), so that no host
 * name is resolved; launch_route_source() is called directly on numeric addresses only.
 *
 * Checks, for every input (besides the sanitizers'):
 *   - config_from_env() and launch_detect() return 0 or a loom error with a message,
 *     never a silent failure;
 *   - a configuration they accept is one node_start() accepts: a known role, a rank in
 *     range for it, job sizes in range, a heartbeat timeout above the interval, and a
 *     scheduler address "host:port"; with a secret file, it holds the whole key;
 *   - launch_first_host() of every value either fails or gives a non-empty host name
 *     that fits; launch_derived_port() is in [20000, 29999]. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/launchenv.h"
#include "fuzz_driver.h"
#include "loom/error.h"
#include "loom/secret.h"

#define RENDEZVOUS_FILE "(rendezvous file)"
#define SECRET_FILE     "(secret file)"

/* Every variable config.c and launchenv.c read, and the rendezvous file. */
static const char *const vars[] = {"LOOM_ROLE",
                                   "LOOM_RANK",
                                   "LOOM_NUM_SERVERS",
                                   "LOOM_NUM_WORKERS",
                                   "LOOM_SCHEDULER",
                                   "LOOM_BIND",
                                   "LOOM_INTERFACE",
                                   "LOOM_PORT",
                                   "LOOM_JOB_ID",
                                   "LOOM_RENDEZVOUS_DIR",
                                   "LOOM_HEARTBEAT_MS",
                                   "LOOM_HEARTBEAT_TIMEOUT_MS",
                                   "LOOM_CONNECT_TIMEOUT_MS",
                                   "LOOM_VERBOSE",
                                   "OMPI_COMM_WORLD_RANK",
                                   "OMPI_COMM_WORLD_SIZE",
                                   "OMPI_COMM_WORLD_LOCAL_SIZE",
                                   "OMPI_MCA_ess_base_jobid",
                                   "OMPI_MCA_orte_hnp_uri",
                                   "PMI_RANK",
                                   "PMI_SIZE",
                                   "PMI_LOCAL_SIZE",
                                   "MPI_LOCALNRANKS",
                                   "PMIX_RANK",
                                   "PMIX_NAMESPACE",
                                   "SLURM_PROCID",
                                   "SLURM_STEP_ID",
                                   "SLURM_JOB_ID",
                                   "SLURM_NTASKS",
                                   "SLURM_STEP_NUM_TASKS",
                                   "SLURM_NODELIST",
                                   "SLURM_JOB_NODELIST",
                                   "SLURM_STEP_NODELIST",
                                   "SLURM_NNODES",
                                   "SLURM_JOB_NUM_NODES",
                                   "SLURM_STEP_NUM_NODES",
                                   "SLURMD_NODENAME",
                                   "SLURM_CLUSTER_NAME",
                                   RENDEZVOUS_FILE,
                                   SECRET_FILE};
#define NVARS (sizeof vars / sizeof *vars)

static struct {
    unsigned long inputs, configured, detected, rendezvous_read, first_hosts, secrets;
} stats;

static char scratch[1024];

static void setup(void)
{
    if (scratch[0]) return;
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch, sizeof scratch, "%s/loom-fuzz-env-%ld", tmp && *tmp ? tmp : "/tmp",
             (long)getpid());
    FUZZ_CHECK(mkdir(scratch, 0700) == 0 || errno == EEXIST);
}

static int numeric_host(const char *hostport)
{
    for (const char *p = hostport; *p; p++)
        if (!strchr("0123456789.:[]", *p)) return 0;
    return 1;
}

/* What node.c's validate_config() requires of a configuration. */
static void check_config(const loom_config *c)
{
    FUZZ_CHECK(c->role == LOOM_SCHEDULER || c->role == LOOM_SERVER || c->role == LOOM_WORKER);
    FUZZ_CHECK(c->num_servers >= 0 && c->num_servers <= 1000); /* 0: a serverless job */
    FUZZ_CHECK(c->num_workers >= 1 && c->num_workers <= 65536);
    int max_rank = c->role == LOOM_SERVER   ? c->num_servers
                   : c->role == LOOM_WORKER ? c->num_workers
                                            : 1;
    FUZZ_CHECK(c->rank >= (c->role == LOOM_SCHEDULER ? 0 : -1) && c->rank < max_rank);
    FUZZ_CHECK(c->heartbeat_interval_ms >= 1 && c->heartbeat_timeout_ms > c->heartbeat_interval_ms);
    FUZZ_CHECK(c->connect_timeout_ms >= 1);
    FUZZ_CHECK(memchr(c->scheduler, '\0', sizeof c->scheduler) && strchr(c->scheduler, ':'));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    for (size_t i = 0; i + 2 < NVARS; i++) unsetenv(vars[i]);
    unsetenv("LOOM_SECRET_FILE");
    setenv("TMPDIR", scratch, 1);
    setenv("LOOM_BIND", "127.0.0.1", 1);
    char file[256] = "";
    int have_file = 0;
    for (size_t pos = 0; pos + 2 <= size;) {
        const char *name = vars[data[pos] % NVARS];
        size_t len = data[pos + 1];
        pos += 2;
        if (len > size - pos) len = size - pos;
        char value[256];
        memcpy(value, data + pos, len);
        value[len] = '\0';
        pos += len;
        if (!strcmp(name, RENDEZVOUS_FILE)) {
            memcpy(file, value, len + 1);
            have_file = 1;
            continue;
        }
        if (!strcmp(name, SECRET_FILE)) {
            char path[sizeof scratch + 16];
            snprintf(path, sizeof path, "%s/secret", scratch);
            FILE *fp = fopen(path, "w");
            FUZZ_CHECK(fp != NULL && chmod(path, 0600) == 0);
            fwrite(data + pos - len, 1, len, fp); /* NUL bytes included */
            FUZZ_CHECK(fclose(fp) == 0);
            setenv("LOOM_SECRET_FILE", path, 1);
            continue;
        }
        if (!strcmp(name, "LOOM_CONNECT_TIMEOUT_MS")) {
            char *end;
            long v = strtol(value, &end, 10);
            if (end != value && v > 1) snprintf(value, sizeof value, "1");
        }
        setenv(name, value, 1);
        if (!strcmp(name, "SLURM_NODELIST") || !strcmp(name, "SLURM_STEP_NODELIST")) {
            char host[64];
            if (!launch_first_host(value, host, sizeof host)) {
                FUZZ_CHECK(host[0] && strlen(host) < sizeof host);
                stats.first_hosts++;
            }
        }
        if (!strcmp(name, "LOOM_JOB_ID")) {
            int port = launch_derived_port(value);
            FUZZ_CHECK(port >= 20000 && port <= 29999);
        }
    }
    if (!getenv("LOOM_CONNECT_TIMEOUT_MS")) setenv("LOOM_CONNECT_TIMEOUT_MS", "1", 1);
    stats.inputs++;

    char err[1024] = "";
    launch_env le;
    int rc = launch_detect(&le, err, sizeof err);
    FUZZ_CHECK(rc == 0 || (rc == LOOM_ECONFIG && err[0]));
    if (!rc && le.launcher) stats.detected++;

    /* The scheduler's address file, where a rank of this job looks for it. */
    char path[PATH_MAX] = "";
    if (have_file && !rc && le.job_id[0]) {
        const char *shared = getenv("LOOM_RENDEZVOUS_DIR");
        int n = shared && *shared
                    ? snprintf(path, sizeof path, "%s/loom-%s.addr", shared, le.job_id)
                    : snprintf(path, sizeof path, "%s/loom-%ld/loom-%s.addr", scratch,
                               (long)getuid(), le.job_id);
        if (n < 0 || (size_t)n >= sizeof path) path[0] = '\0';
        /* Only below the scratch directory: a value may name any directory. */
        if (strncmp(path, scratch, strlen(scratch)) || strstr(path, "..")) path[0] = '\0';
        char dir[sizeof scratch + 32];
        snprintf(dir, sizeof dir, "%s/loom-%ld", scratch, (long)getuid());
        mkdir(dir, 0700);
        FILE *fp = path[0] ? fopen(path, "w") : NULL;
        if (fp) {
            fputs(file, fp);
            fclose(fp);
        } else {
            path[0] = '\0';
        }
    }

    loom_config cfg;
    launch_plan plan;
    err[0] = '\0';
    rc = config_from_env(&cfg, &plan, err, sizeof err);
    FUZZ_CHECK(rc == 0 || (rc > 0 && rc < LOOM_ERROR_COUNT_ && err[0]));
    if (!rc) {
        check_config(&cfg);
        stats.configured++;
        if (getenv("LOOM_SECRET_FILE")) {
            FUZZ_CHECK(strlen(cfg.secret) == LOOM_SECRET_LEN);
            stats.secrets++;
        }
        if (path[0] && cfg.role != LOOM_SCHEDULER) stats.rendezvous_read++;
    }
    if (path[0]) unlink(path);

    const char *sched = getenv("LOOM_SCHEDULER");
    if (sched && numeric_host(sched)) {
        char local[64];
        rc = launch_route_source(sched, 1, local, sizeof local, err, sizeof err);
        FUZZ_CHECK(rc == 0 ? local[0] != '\0' : err[0] != '\0');
    }
    return 0;
}

#ifdef LOOM_FUZZ_DRIVER
/* ---- the plain driver: environments of every launcher, truncations, random and mutated ---- */

typedef fuzz_input input;

static void in_var(input *in, const char *name, const char *value)
{
    size_t k = 0;
    while (k < NVARS && strcmp(vars[k], name)) k++;
    FUZZ_CHECK(k < NVARS);
    size_t len = strlen(value);
    FUZZ_CHECK(len <= 255 && in->len + 2 + len <= sizeof in->buf);
    in->buf[in->len++] = (uint8_t)k;
    in->buf[in->len++] = (uint8_t)len;
    memcpy(in->buf + in->len, value, len);
    in->len += len;
}

#define MAX_SEEDS 16

static struct {
    input in[MAX_SEEDS];
    const char *name[MAX_SEEDS];
    int n;
} seeds;

static input *seed_new(const char *name)
{
    FUZZ_CHECK(seeds.n < MAX_SEEDS);
    seeds.name[seeds.n] = name;
    input *in = &seeds.in[seeds.n++];
    in->len = 0;
    return in;
}

static void make_seeds(void)
{
    input *in = seed_new("loom_role_worker");
    in_var(in, "LOOM_ROLE", "worker");
    in_var(in, "LOOM_RANK", "1");
    in_var(in, "LOOM_NUM_SERVERS", "2");
    in_var(in, "LOOM_NUM_WORKERS", "4");
    in_var(in, "LOOM_SCHEDULER", "127.0.0.1:7000");
    in_var(in, "LOOM_HEARTBEAT_TIMEOUT_MS", "3000");

    in = seed_new("loom_role_scheduler");
    in_var(in, "LOOM_ROLE", "scheduler");
    in_var(in, "LOOM_SCHEDULER", "0.0.0.0:0");
    in_var(in, "LOOM_BIND", "127.0.0.1");

    /* Open MPI, one host: rank 2 of 4 finds the scheduler's file. */
    in = seed_new("ompi_rendezvous");
    in_var(in, "OMPI_COMM_WORLD_RANK", "2");
    in_var(in, "OMPI_COMM_WORLD_SIZE", "4");
    in_var(in, "OMPI_COMM_WORLD_LOCAL_SIZE", "4");
    in_var(in, "OMPI_MCA_ess_base_jobid", "1234");
    in_var(in, "OMPI_MCA_orte_hnp_uri", "1234.0;tcp://10.0.0.1:4000");
    in_var(in, RENDEZVOUS_FILE, "127.0.0.1:41234\n");

    in = seed_new("ompi_scheduler");
    in_var(in, "OMPI_COMM_WORLD_RANK", "0");
    in_var(in, "OMPI_COMM_WORLD_SIZE", "3");
    in_var(in, "OMPI_COMM_WORLD_LOCAL_SIZE", "3");
    in_var(in, "LOOM_JOB_ID", "job-7");

    /* Hydra (PMI), an explicit job id and a bad rendezvous file. */
    in = seed_new("pmi_bad_file");
    in_var(in, "PMI_RANK", "1");
    in_var(in, "PMI_SIZE", "3");
    in_var(in, "MPI_LOCALNRANKS", "3");
    in_var(in, "LOOM_JOB_ID", "hydra 42/x");
    in_var(in, RENDEZVOUS_FILE, "no-port-here\n");

    /* srun on several hosts without a shared directory: first host, derived port. */
    in = seed_new("slurm_hosts");
    in_var(in, "SLURM_PROCID", "3");
    in_var(in, "SLURM_STEP_ID", "0");
    in_var(in, "SLURM_JOB_ID", "9876");
    in_var(in, "SLURM_STEP_NUM_TASKS", "5");
    in_var(in, "SLURM_STEP_NODELIST", "node[01-03,07],gpu5");
    in_var(in, "SLURM_STEP_NUM_NODES", "5");
    in_var(in, "LOOM_NUM_SERVERS", "1");

    in = seed_new("slurm_scheduler_elsewhere");
    in_var(in, "SLURM_PROCID", "0");
    in_var(in, "SLURM_STEP_ID", "1");
    in_var(in, "SLURM_JOB_ID", "55");
    in_var(in, "SLURM_NTASKS", "3");
    in_var(in, "SLURM_NODELIST", "a-[9-10]");
    in_var(in, "SLURM_NNODES", "2");
    in_var(in, "SLURMD_NODENAME", "b-1");
    in_var(in, "LOOM_PORT", "31000");

    in = seed_new("pmix");
    in_var(in, "PMIX_RANK", "1");
    in_var(in, "PMIX_NAMESPACE", "prterun-host-1234@1");
    in_var(in, "LOOM_SCHEDULER", "10.1.2.3:6000");

    /* A job secret (Z85, as loom keygen writes it), and one a character short. */
    in = seed_new("secret");
    in_var(in, "LOOM_ROLE", "server");
    in_var(in, "LOOM_RANK", "0");
    in_var(in, "LOOM_SCHEDULER", "127.0.0.1:7000");
    in_var(in, SECRET_FILE, "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\n");
    in = seed_new("secret_short");
    in_var(in, "LOOM_ROLE", "worker");
    in_var(in, "LOOM_SCHEDULER", "127.0.0.1:7000");
    in_var(in, SECRET_FILE, "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf");

    /* Values out of range and malformed. */
    in = seed_new("bad_values");
    in_var(in, "LOOM_ROLE", "server");
    in_var(in, "LOOM_RANK", "99999999999999999999");
    in_var(in, "LOOM_NUM_WORKERS", "-1");
    in_var(in, "LOOM_HEARTBEAT_MS", "5000");
    in_var(in, "LOOM_HEARTBEAT_TIMEOUT_MS", "4000");
    in_var(in, "LOOM_INTERFACE", "no-such-interface0");
    in_var(in, "LOOM_SCHEDULER", "[::1]:");
}

static const char *seed(int i, input *in)
{
    *in = seeds.in[i];
    return seeds.name[i];
}

/* One random edit: flip a bit, set a byte to a character launchers' values hold, insert,
 * delete or truncate. */
static void mutate(input *in)
{
    static const char chars[] = "0123456789[],-:./ x\n";
    fuzz_edit(in, 0, chars, sizeof chars - 1);
}

static void check_seeds(void)
{
    FUZZ_CHECK(stats.configured >= 5 && stats.detected >= 5);
    FUZZ_CHECK(stats.rendezvous_read >= 1 && stats.first_hosts >= 2 && stats.secrets >= 1);
}

static void report(void)
{
    printf("%lu configured, %lu launchers detected, %lu rendezvous files read, %lu first hosts, "
           "%lu secrets\n",
           stats.configured, stats.detected, stats.rendezvous_read, stats.first_hosts,
           stats.secrets);
}

int main(int argc, char **argv)
{
    make_seeds();
    int rc = fuzz_driver_main(argc, argv,
                              &(fuzz_target){.name = "fuzz_launchenv",
                                             .rng_seed = 0x454E5649524F4E31u,
                                             .nseeds = seeds.n,
                                             .variant_kind = "unchanged",
                                             .seed = seed,
                                             .check_seeds = check_seeds,
                                             .random = 300,
                                             .random_len = 256,
                                             .mutated = 1500,
                                             .mutate = mutate,
                                             .report = report});
    char dir[sizeof scratch + 32];
    snprintf(dir, sizeof dir, "%s/loom-%ld", scratch, (long)getuid());
    rmdir(dir);
    snprintf(dir, sizeof dir, "%s/secret", scratch);
    unlink(dir);
    rmdir(scratch);
    return rc;
}
#endif
