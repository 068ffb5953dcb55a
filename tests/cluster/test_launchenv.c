/* launchenv: what a process makes of a launcher's variables, in-process.
 *
 * Slurm host lists and the derived port; launcher detection (srun, mpirun,
 * Hydra, an sbatch script that is no launch at all, mpirun inside a Slurm
 * allocation); the rank -> role mapping and its errors; the rendezvous file
 * (published, found, waited for in vain); interfaces and bind addresses. Each
 * test starts from an environment without launcher or LOOM_ variables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/launchenv.h"
#include "loom/error.h"
#include "loom/node.h"

extern char **environ;

static char tmpdir[] = "/tmp/loom-launchenv-XXXXXX";

/* Unset every variable a launcher or Loom sets, then point TMPDIR at ours. */
static void clear_env(void)
{
    static const char *const prefixes[] = {"LOOM_", "OMPI_", "PMI_", "PMIX_", "SLURM", "MPI_"};
    for (int again = 1; again;) {
        again = 0;
        for (char **e = environ; *e && !again; e++)
            for (size_t p = 0; p < sizeof prefixes / sizeof *prefixes; p++) {
                if (strncmp(*e, prefixes[p], strlen(prefixes[p]))) continue;
                char name[256];
                size_t len = strcspn(*e, "=");
                snprintf(name, sizeof name, "%.*s", (int)len, *e);
                unsetenv(name);
                again = 1; /* environ changed under us: start over */
                break;
            }
    }
    setenv("TMPDIR", tmpdir, 1);
}

static int setup(void **state)
{
    (void)state;
    clear_env();
    return 0;
}

/* srun's variables for task `rank` of `size` on `nodes` hosts. */
static void srun_env(int rank, int size, int nodes, const char *job)
{
    char text[32];
    snprintf(text, sizeof text, "%d", rank);
    setenv("SLURM_PROCID", text, 1);
    setenv("SLURM_LOCALID", text, 1);
    snprintf(text, sizeof text, "%d", size);
    setenv("SLURM_NTASKS", text, 1);
    setenv("SLURM_STEP_NUM_TASKS", text, 1);
    snprintf(text, sizeof text, "%d", nodes);
    setenv("SLURM_NNODES", text, 1);
    setenv("SLURM_STEP_NUM_NODES", text, 1);
    setenv("SLURM_JOB_ID", job, 1);
    setenv("SLURM_STEP_ID", "0", 1);
    setenv("SLURM_JOB_NODELIST", nodes == 1 ? "localhost" : "localhost,cn[02-04]", 1);
    setenv("SLURM_STEP_NODELIST", nodes == 1 ? "localhost" : "localhost,cn[02-04]", 1);
}

static void first_host_expands_lists(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"node[01-03,07],gpu5", "node01"},
        {"gpu5,node[1-2]", "gpu5"},
        {"rack[2-3]-n[04-05]", "rack2-n04"},
        {"localhost", "localhost"},
        {"n[007]", "n007"},
        {"a[9,1-3]b", "a9b"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        assert_int_equal(launch_first_host(cases[i][0], out, sizeof out), 0);
        assert_string_equal(out, cases[i][1]);
    }
    static const char *const bad[] = {"", ",a", "n[", "n[a-b]", "n]1", "n[1-2", "n[]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(launch_first_host(bad[i], out, sizeof out), LOOM_ECONFIG);
    assert_int_equal(launch_first_host("averylonghostname", out, 8), LOOM_ECONFIG);
}

static void derived_port_is_stable_and_in_range(void **state)
{
    (void)state;
    int seen_differ = 0;
    for (int job = 1; job < 200; job++) {
        char a[32], b[32];
        snprintf(a, sizeof a, "slurm-%d.0", job);
        snprintf(b, sizeof b, "slurm-%d.1", job);
        int pa = launch_derived_port(a), pb = launch_derived_port(b);
        assert_true(pa >= 20000 && pa <= 29999);
        assert_int_equal(pa, launch_derived_port(a));
        seen_differ += pa != pb;
    }
    assert_true(seen_differ > 190);
}

static void detects_srun(void **state)
{
    (void)state;
    launch_env le;
    char err[512];
    srun_env(3, 6, 4, "4242");
    setenv("SLURM_CLUSTER_NAME", "blue", 1);
    assert_int_equal(launch_detect(&le, err, sizeof err), 0);
    assert_non_null(le.launcher);
    assert_int_equal(le.rank, 3);
    assert_int_equal(le.size, 6);
    assert_int_equal(le.single_host, 0);
    assert_string_equal(le.job_id, "slurm-blue-4242.0");
    assert_string_equal(le.first_host, "localhost");
    assert_int_equal(loom_launched(), 1);
    /* The batch script: SLURM_PROCID=0 but no job step. Not a launch. */
    unsetenv("SLURM_STEP_ID");
    assert_int_equal(launch_detect(&le, err, sizeof err), 0);
    assert_null(le.launcher);
    assert_int_equal(loom_launched(), 0);
}

static void detects_mpirun_inside_slurm(void **state)
{
    (void)state;
    launch_env le;
    char err[512];
    /* mpirun started its helper with srun: SLURM_PROCID numbers hosts. */
    srun_env(1, 2, 2, "77");
    setenv("OMPI_COMM_WORLD_RANK", "5", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
    setenv("OMPI_MCA_ess_base_jobid", "401866753", 1);
    setenv("OMPI_MCA_orte_hnp_uri", "401866752.0;tcp://192.0.2.2:44699", 1);
    assert_int_equal(launch_detect(&le, err, sizeof err), 0);
    assert_int_equal(le.rank, 5);
    assert_int_equal(le.size, 8);
    assert_int_equal(le.single_host, 0);
    assert_string_equal(le.first_host, ""); /* the Slurm step is not this job */
    assert_memory_equal(le.job_id, "ompi-401866753-", 15);
    char first[sizeof le.job_id];
    memcpy(first, le.job_id, sizeof first);
    setenv("OMPI_MCA_orte_hnp_uri", "401866752.0;tcp://192.0.2.2:44700", 1);
    assert_int_equal(launch_detect(&le, err, sizeof err), 0);
    assert_string_not_equal(le.job_id, first); /* another mpirun, same 16-bit job family */
    setenv("LOOM_JOB_ID", "my job/1", 1);
    assert_int_equal(launch_detect(&le, err, sizeof err), 0);
    assert_string_equal(le.job_id, "my_job_1");
}

static void detects_hydra_on_one_host(void **state)
{
    (void)state;
    launch_env le;
    char err[512];
    setenv("PMI_RANK", "2", 1);
    setenv("PMI_SIZE", "4", 1);
    setenv("MPI_LOCALNRANKS", "4", 1);
    assert_int_equal(launch_detect(&le, err, sizeof err), 0);
    assert_int_equal(le.single_host, 1);
    assert_memory_equal(le.job_id, "local-", 6); /* the ranks' common parent */
    setenv("MPI_LOCALNRANKS", "2", 1);
    assert_int_equal(launch_detect(&le, err, sizeof err), 0);
    assert_string_equal(le.job_id, ""); /* several hosts and no job id */
}

static void malformed_launcher_variables_are_named(void **state)
{
    (void)state;
    launch_env le;
    char err[512];
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "many", 1);
    assert_int_equal(launch_detect(&le, err, sizeof err), LOOM_ECONFIG);
    assert_non_null(strstr(err, "OMPI_COMM_WORLD_SIZE=\"many\""));
    assert_int_equal(loom_launched(), 1); /* so that loom_init reports it */
    setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
    assert_int_equal(launch_detect(&le, err, sizeof err), LOOM_ECONFIG);
    assert_non_null(strstr(err, "OMPI_COMM_WORLD_RANK=1 is not below OMPI_COMM_WORLD_SIZE=1"));
    setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    assert_int_equal(launch_detect(&le, err, sizeof err), 0);
    assert_int_equal(loom_launched(), 0); /* a job of one process: `loom train` runs it locally */
}

static void ranks_map_to_roles(void **state)
{
    (void)state;
    loom_config cfg;
    launch_plan plan;
    char err[1024];
    setenv("LOOM_NUM_SERVERS", "2", 1);
    setenv("LOOM_SCHEDULER", "127.0.0.1:7000", 1); /* nothing to wait for */
    static const struct {
        int rank;
        loom_role role;
        int role_rank;
    } want[] = {{0, LOOM_SCHEDULER, 0}, {1, LOOM_SERVER, 0}, {2, LOOM_SERVER, 1},
                {3, LOOM_WORKER, 0},    {4, LOOM_WORKER, 1}, {5, LOOM_WORKER, 2}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        srun_env(want[i].rank, 6, 2, "9");
        assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), 0);
        assert_int_equal(cfg.role, want[i].role);
        assert_int_equal(cfg.rank, want[i].role_rank);
        assert_int_equal(cfg.num_servers, 2);
        assert_int_equal(cfg.num_workers, 3);
        assert_string_equal(plan.publish_path, "");
        if (want[i].role == LOOM_SCHEDULER) {
            assert_string_equal(cfg.scheduler, "0.0.0.0:7000"); /* others come by name */
        } else {
            assert_string_equal(cfg.scheduler, "127.0.0.1:7000");
            assert_string_equal(cfg.bind_host, "127.0.0.1"); /* the route to the scheduler */
        }
    }
}

/* A serverless job (LOOM_NUM_SERVERS=0, docs/P2P.md): rank 0 schedules, every other
 * rank is a worker. */
static void serverless_ranks_are_workers(void **state)
{
    (void)state;
    loom_config cfg;
    launch_plan plan;
    char err[1024];
    setenv("LOOM_NUM_SERVERS", "0", 1);
    setenv("LOOM_SCHEDULER", "127.0.0.1:7000", 1);
    for (int rank = 0; rank < 4; rank++) {
        srun_env(rank, 4, 2, "9");
        assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), 0);
        assert_int_equal(cfg.role, rank == 0 ? LOOM_SCHEDULER : LOOM_WORKER);
        assert_int_equal(cfg.rank, rank == 0 ? 0 : rank - 1);
        assert_int_equal(cfg.num_servers, 0);
        assert_int_equal(cfg.num_workers, 3);
    }
}

/* The job token: LOOM_JOB_TOKEN as given, else the launcher's job id (the same
 * on every rank of a job, different for another job), else none; a malformed
 * LOOM_JOB_TOKEN is refused by name. */
static void job_token_sources(void **state)
{
    (void)state;
    loom_config cfg;
    launch_plan plan;
    char err[1024];
    setenv("LOOM_SCHEDULER", "127.0.0.1:7000", 1);
    char first[sizeof cfg.job_token];
    for (int rank = 0; rank < 3; rank++) {
        srun_env(rank, 3, 1, "9");
        assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), 0);
        assert_string_equal(cfg.job_token, plan.env.job_id);
        if (rank == 0) memcpy(first, cfg.job_token, sizeof first);
        assert_string_equal(cfg.job_token, first);
    }
    assert_true(first[0] != '\0');
    srun_env(1, 3, 1, "10"); /* another job */
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), 0);
    assert_string_not_equal(cfg.job_token, first);
    setenv("LOOM_JOB_TOKEN", "0123456789abcdef", 1); /* given: wins */
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), 0);
    assert_string_equal(cfg.job_token, "0123456789abcdef");
    static const char *const bad[] = {
        "with space", "tab\there",
        "x0123456789012345678901234567890123456789012345678901234567890123"}; /* 65 */
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("LOOM_JOB_TOKEN", bad[i], 1);
        assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), LOOM_ECONFIG);
        assert_non_null(strstr(err, "LOOM_JOB_TOKEN"));
    }
    unsetenv("LOOM_JOB_TOKEN"); /* a hand launch without one: no token */
    clear_env();
    setenv("LOOM_ROLE", "worker", 1);
    setenv("LOOM_SCHEDULER", "127.0.0.1:7000", 1);
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), 0);
    assert_string_equal(cfg.job_token, "");
}

static void role_mapping_errors(void **state)
{
    (void)state;
    loom_config cfg;
    launch_plan plan;
    char err[1024];
    srun_env(1, 3, 1, "9");
    setenv("LOOM_NUM_SERVERS", "2", 1);
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), LOOM_ECONFIG);
    assert_non_null(strstr(err, "started 3 processes, but a job needs a scheduler, 2 servers"));
    unsetenv("LOOM_NUM_SERVERS");
    setenv("LOOM_NUM_WORKERS", "2", 1);
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), LOOM_ECONFIG);
    assert_non_null(strstr(err, "LOOM_NUM_WORKERS=2, but srun (Slurm) started 3 processes"));
    unsetenv("LOOM_NUM_WORKERS");
    setenv("LOOM_RANK", "1", 1);
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), LOOM_ECONFIG);
    assert_non_null(strstr(err, "LOOM_RANK is set but LOOM_ROLE is not"));
    clear_env();
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), LOOM_ECONFIG);
    assert_non_null(strstr(err, "LOOM_ROLE is not set, and no launcher"));
    /* Open MPI across hosts with neither a shared directory nor LOOM_SCHEDULER. */
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    setenv("OMPI_MCA_ess_base_jobid", "5", 1);
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), LOOM_ECONFIG);
    assert_non_null(strstr(err, "set LOOM_RENDEZVOUS_DIR"));
    setenv("LOOM_SCHEDULER", "node1:0", 1);
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), LOOM_ECONFIG);
    assert_non_null(strstr(err, "LOOM_SCHEDULER=\"node1:0\" must be host:port with a port from 1"));
}

static void srun_on_several_hosts_uses_the_first(void **state)
{
    (void)state;
    loom_config cfg;
    launch_plan plan;
    char err[1024];
    srun_env(2, 4, 2, "31");
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), 0);
    char want[64];
    snprintf(want, sizeof want, "localhost:%d", launch_derived_port("slurm-31.0"));
    assert_string_equal(cfg.scheduler, want);
    setenv("LOOM_PORT", "23456", 1);
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), 0);
    assert_string_equal(cfg.scheduler, "localhost:23456");
    srun_env(0, 4, 2, "31");
    setenv("SLURMD_NODENAME", "cn02", 1);
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), LOOM_ECONFIG);
    assert_non_null(strstr(err, "rank 0 (the scheduler) runs on cn02"));
    setenv("SLURMD_NODENAME", "localhost", 1);
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), 0);
    assert_string_equal(cfg.scheduler, "0.0.0.0:23456");
    unsetenv("SLURMD_NODENAME");
}

static void rendezvous_file_on_one_host(void **state)
{
    (void)state;
    loom_config cfg;
    launch_plan plan;
    char err[1024];
    srun_env(0, 3, 1, "555");
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), 0);
    assert_int_equal(cfg.role, LOOM_SCHEDULER);
    assert_string_equal(cfg.scheduler, "127.0.0.1:0");
    char want[512];
    snprintf(want, sizeof want, "%s/loom-%ld/loom-slurm-555.0.addr", tmpdir, (long)getuid());
    assert_string_equal(plan.publish_path, want);
    /* A worker finds what the scheduler publishes... */
    assert_int_equal(launch_publish(plan.publish_path, "127.0.0.1:4321", err, sizeof err), 0);
    srun_env(2, 3, 1, "555");
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), 0);
    assert_int_equal(cfg.role, LOOM_WORKER);
    assert_string_equal(cfg.scheduler, "127.0.0.1:4321");
    /* ...but not another job's, and gives up naming the file it waited for. */
    srun_env(2, 3, 1, "556");
    setenv("LOOM_CONNECT_TIMEOUT_MS", "100", 1);
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), LOOM_ETIMEDOUT);
    assert_non_null(strstr(err, "rank 0 (the scheduler) did not publish its address in"));
    assert_non_null(strstr(err, "loom-slurm-556.0.addr within 100 ms"));
    assert_int_equal(launch_publish(want, "0.0.0.0:1", err, sizeof err), LOOM_ECONFIG);
    unlink(want);
}

static void interfaces_and_bind_addresses(void **state)
{
    (void)state;
    loom_config cfg;
    launch_plan plan;
    char err[1024], addr[64];
    assert_int_equal(loom_interface_address("lo", addr, sizeof addr), 0);
    assert_string_equal(addr, "127.0.0.1");
    assert_int_equal(loom_interface_address("nosuch0", addr, sizeof addr), LOOM_ECONFIG);
    setenv("LOOM_ROLE", "worker", 1);
    setenv("LOOM_SCHEDULER", "127.0.0.1:7000", 1);
    setenv("LOOM_INTERFACE", "nosuch0", 1);
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), LOOM_ECONFIG);
    assert_non_null(strstr(err, "LOOM_INTERFACE=\"nosuch0\" is not a network interface"));
    assert_non_null(strstr(err, "lo")); /* the interfaces there are */
    setenv("LOOM_INTERFACE", "lo", 1);
    setenv("LOOM_BIND", "127.0.0.1", 1);
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), LOOM_ECONFIG);
    assert_non_null(strstr(err, "LOOM_INTERFACE and LOOM_BIND are both set"));
    unsetenv("LOOM_BIND");
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), 0);
    assert_string_equal(cfg.bind_host, "127.0.0.1");
    /* A scheduler binds LOOM_SCHEDULER's port on the chosen address. */
    setenv("LOOM_ROLE", "scheduler", 1);
    setenv("LOOM_SCHEDULER", "loom-scheduler:7070", 1);
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), 0);
    assert_string_equal(cfg.scheduler, "127.0.0.1:7070");
    unsetenv("LOOM_INTERFACE");
    assert_int_equal(config_from_env(&cfg, &plan, err, sizeof err), 0);
    assert_string_equal(cfg.scheduler, "loom-scheduler:7070");
    assert_null(plan.env.launcher);
}

int main(void)
{
    if (!mkdtemp(tmpdir)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(first_host_expands_lists, setup),
        cmocka_unit_test_setup(derived_port_is_stable_and_in_range, setup),
        cmocka_unit_test_setup(detects_srun, setup),
        cmocka_unit_test_setup(detects_mpirun_inside_slurm, setup),
        cmocka_unit_test_setup(detects_hydra_on_one_host, setup),
        cmocka_unit_test_setup(malformed_launcher_variables_are_named, setup),
        cmocka_unit_test_setup(ranks_map_to_roles, setup),
        cmocka_unit_test_setup(serverless_ranks_are_workers, setup),
        cmocka_unit_test_setup(role_mapping_errors, setup),
        cmocka_unit_test_setup(job_token_sources, setup),
        cmocka_unit_test_setup(srun_on_several_hosts_uses_the_first, setup),
        cmocka_unit_test_setup(rendezvous_file_on_one_host, setup),
        cmocka_unit_test_setup(interfaces_and_bind_addresses, setup),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    char dir[512], file[600];
    snprintf(dir, sizeof dir, "%s/loom-%ld", tmpdir, (long)getuid());
    snprintf(file, sizeof file, "%s/loom-slurm-555.0.addr", dir); /* left if a test failed */
    unlink(file);
    rmdir(dir);
    rmdir(tmpdir);
    return failed;
}
