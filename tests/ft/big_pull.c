/* big_pull: the program of ft.big_pull (test_big_pull.sh), a job whose one
 * server spends seconds on single operations while the heartbeat timeout is
 * short.
 *
 *   big_pull --pid-dir DIR [--log2-rows R]
 *
 * Every node writes DIR/<role>-<rank>.pid once the job is assembled (so the
 * test can kill whatever is left). The worker opens a dense f32 table of 2^R
 * rows (default 2^20) of width 256, 1 KiB a row (1 GiB at the default),
 * pushes every row in one range push, then pulls every row in one pull by a
 * key list in a scattered order (a permutation of the keys: the server looks
 * each row up and the client sorts the keys and puts the rows back in the
 * caller's order), and checks every value. Run with LOOM_MAX_FRAME_MIB=2047,
 * so that the push and the pull each travel as one message and the server
 * handles each in one go on its I/O thread. Each value is an integer below
 * 2^24, exact in f32, so the pull must give back exactly what was pushed.
 * Prints "pushed N rows in S s", "pulled N rows in S s", then "all N rows
 * exact" and exits 0, or names the first wrong value and exits 1. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <loom/loom.h>

#define WIDTH 256

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int write_pid(const char *dir, loom_node *n)
{
    static const char *const roles[] = {"scheduler", "server", "worker"};
    char path[4096];
    snprintf(path, sizeof path, "%s/%s-%d.pid", dir, roles[loom_node_role(n)], loom_rank(n));
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "%ld\n", (long)getpid());
    return fclose(f);
}

/* Value j of row k: an integer below 2^24, so f32 holds it exactly (a mask,
 * not a division: the check must cost little next to the pull). */
static float value(uint64_t k, int j)
{
    return (float)((k * WIDTH + (uint64_t)j) & 0xffffffu);
}

static int run_worker(loom_node *node, int log2_rows)
{
    uint64_t rows = (uint64_t)1 << log2_rows;
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_F32;
    o.width = WIDTH;
    o.storage = LOOM_DENSE;
    o.key_begin = 0;
    o.key_end = rows;
    o.consistency = LOOM_ASP;
    o.cache = 0; /* a second GiB in the process cache would test nothing */
    loom_table *t;
    int rc = loom_table_open(node, "big", &o, &t);
    if (rc) {
        fprintf(stderr, "big_pull: table: %s\n", loom_strerror(rc));
        return 1;
    }
    float *vals = malloc(rows * WIDTH * sizeof *vals);
    uint64_t *keys = malloc(rows * sizeof *keys);
    if (!vals || !keys) {
        fprintf(stderr, "big_pull: out of memory\n");
        return 1;
    }
    for (uint64_t k = 0; k < rows; k++)
        for (int j = 0; j < WIDTH; j++) vals[k * WIDTH + j] = value(k, j);
    double t0 = now_s();
    loom_ts ts;
    rc = loom_push_range_async(t, 0, rows, vals, &ts);
    if (!rc) rc = loom_wait(node, ts);
    if (rc) {
        fprintf(stderr, "big_pull: push: %s\n", loom_strerror(rc));
        return 1;
    }
    printf("pushed %" PRIu64 " rows in %.2f s\n", rows, now_s() - t0);
    /* An odd multiplier permutes the keys modulo a power of two. */
    for (uint64_t i = 0; i < rows; i++) keys[i] = (i * 2654435761u) & (rows - 1);
    memset(vals, 0xff, rows * WIDTH * sizeof *vals); /* NaN: a row never written shows */
    t0 = now_s();
    rc = loom_pull(t, keys, rows, vals);
    if (rc) {
        fprintf(stderr, "big_pull: pull: %s\n", loom_strerror(rc));
        return 1;
    }
    printf("pulled %" PRIu64 " rows in %.2f s\n", rows, now_s() - t0);
    for (uint64_t i = 0; i < rows; i++)
        for (int j = 0; j < WIDTH; j++)
            if (vals[i * WIDTH + j] != value(keys[i], j)) {
                printf("row %" PRIu64 " value %d: %g, expected %g\n", keys[i], j,
                       (double)vals[i * WIDTH + j], (double)value(keys[i], j));
                return 1;
            }
    printf("all %" PRIu64 " rows exact\n", rows);
    free(keys);
    free(vals);
    return 0;
}

int main(int argc, char **argv)
{
    const char *pid_dir = NULL;
    int log2_rows = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--pid-dir") && i + 1 < argc)
            pid_dir = argv[++i];
        else if (!strcmp(argv[i], "--log2-rows") && i + 1 < argc)
            log2_rows = atoi(argv[++i]);
        else
            pid_dir = NULL, i = argc;
    }
    if (!pid_dir || log2_rows < 1 || log2_rows > 22) {
        fprintf(stderr, "usage: big_pull --pid-dir DIR [--log2-rows R (1-22)]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    loom_node *node;
    int rc = loom_init(&node, NULL, NULL);
    if (rc) {
        fprintf(stderr, "big_pull: %s\n", loom_strerror(rc));
        return 1;
    }
    if (write_pid(pid_dir, node)) {
        fprintf(stderr, "big_pull: cannot write a pid file in %s\n", pid_dir);
        return 1;
    }
    if (!loom_is_worker(node)) return loom_serve(node);
    int status = run_worker(node, log2_rows);
    rc = loom_finalize(node);
    return status ? status : rc ? 1 : 0;
}
