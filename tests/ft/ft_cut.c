/* ft_cut: a job whose exact state at every clock is known, to check that a
 * checkpoint is the consistent cut docs/FAULTS.md promises under every
 * consistency model: at clock C, every update of the clocks < C and none of
 * a later one, even when workers run clocks apart (SSP, ASP).
 *
 *   ft_cut job CONSISTENCY CLOCKS   one node of a job (under `loom run`, with
 *                                   LOOM_CHECKPOINT_DIR/EVERY set): worker r
 *                                   pushes (r + 1)(c + 1)(k + 1) to every key k
 *                                   of an i64 table in its clock c, worker 1
 *                                   more slowly than worker 0; at the end
 *                                   worker 0 checks the totals (no update lost
 *                                   or applied twice)
 *   ft_cut check DIR WORKERS        every committed checkpoint in DIR: each key
 *                                   holds exactly the sum over the clocks < C,
 *                                   and each worker saved its state at C
 * Exit status 0 when every check holds, 1 (with the first difference) if not. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <loom/loom.h>

#define KEYS 64

static int64_t value(int rank, int64_t clock, uint64_t key)
{
    return (int64_t)(rank + 1) * (clock + 1) * (int64_t)(key + 1);
}

/* The sum over workers and clocks [0, clocks) for key. */
static int64_t expected(int workers, int64_t clocks, uint64_t key)
{
    int64_t s = 0;
    for (int r = 0; r < workers; r++)
        for (int64_t c = 0; c < clocks; c++) s += value(r, c, key);
    return s;
}

static int worker(loom_node *n, const char *consistency, int64_t clocks, const char *filter)
{
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = LOOM_I64;
    o.storage = LOOM_DENSE;
    o.key_end = KEYS;
    o.cache = 0;
    o.consistency = !strcmp(consistency, "bsp")   ? LOOM_BSP
                    : !strcmp(consistency, "asp") ? LOOM_ASP
                                                  : LOOM_SSP;
    o.staleness = 3;
    o.filter_push = filter; /* NULL: plain pushes; else held pushes arrive encoded */
    loom_table *t;
    int rc = loom_table_open(n, "cut.sum", &o, &t);
    int rank = loom_rank(n);
    uint64_t keys[KEYS];
    int64_t vals[KEYS];
    for (uint64_t k = 0; k < KEYS; k++) keys[k] = k;
    for (int64_t c = 0; c < clocks && !rc; c++) {
        for (uint64_t k = 0; k < KEYS; k++) vals[k] = value(rank, c, k);
        rc = loom_push(t, keys, KEYS, vals);
        /* Worker 1 is slower: the others run ahead as far as the consistency lets them. */
        if (!rc && rank == 1) nanosleep(&(struct timespec){0, 2000000}, NULL);
        if (!rc) rc = loom_clock(n);
        int64_t now = loom_current_clock(n);
        if (!rc && loom_checkpoint_due(n)) rc = loom_checkpoint_save(n, &now, sizeof now);
    }
    if (!rc) rc = loom_barrier(n);
    loom_filter_stats fs;
    if (!rc && filter && !loom_table_filter_stats(t, LOOM_DIR_PUSH, &fs) &&
        fs.messages != (uint64_t)clocks * (uint64_t)loom_num_servers(n)) {
        fprintf(stderr,
                "ft_cut: %" PRIu64 " of %" PRId64 " push messages went through the filter\n",
                fs.messages, clocks * loom_num_servers(n));
        rc = 1;
    }
    if (!rc && rank == 0) {
        rc = loom_pull(t, keys, KEYS, vals);
        for (uint64_t k = 0; !rc && k < KEYS; k++)
            if (vals[k] != expected(loom_num_workers(n), clocks, k)) {
                fprintf(stderr,
                        "ft_cut: key %" PRIu64 " holds %" PRId64 " at the end, not %" PRId64 "\n",
                        k, vals[k], expected(loom_num_workers(n), clocks, k));
                rc = 1;
            }
    }
    if (rc > 1) fprintf(stderr, "ft_cut: %s\n", loom_strerror(rc));
    int frc = loom_finalize(n);
    return rc || frc ? 1 : 0;
}

typedef struct check {
    int workers;
    int64_t clock;
    int bad, rows;
} check;

static int check_row(void *ctx, uint64_t key, const void *row)
{
    check *c = ctx;
    int64_t v;
    memcpy(&v, row, sizeof v);
    c->rows++;
    if (key < KEYS && v == expected(c->workers, c->clock, key)) return 0;
    fprintf(stderr,
            "ft_cut: checkpoint at clock %" PRId64 ": key %" PRIu64 " holds %" PRId64
            ", the cut is %" PRId64 "\n",
            c->clock, key, v, key < KEYS ? expected(c->workers, c->clock, key) : -1);
    c->bad = 1;
    return 1;
}

static int checked;
static const char *dir_checked;
static int workers_checked, failed;

static void check_one(void *ctx, int64_t clock, int status)
{
    (void)ctx;
    if (status) return; /* partial or removed: only committed ones are promised */
    loom_checkpoint *ck;
    if (loom_checkpoint_open(dir_checked, clock, &ck)) {
        fprintf(stderr, "ft_cut: %s\n", loom_last_error());
        failed = 1;
        return;
    }
    check c = {workers_checked, clock, 0, 0};
    if (loom_checkpoint_rows(ck, "cut.sum", NULL, NULL, check_row, &c) || c.rows != KEYS) {
        if (!c.bad)
            fprintf(stderr, "ft_cut: checkpoint at clock %" PRId64 ": %d rows\n", clock, c.rows);
        failed = 1;
    }
    for (int r = 0; r < workers_checked; r++) {
        const void *st;
        size_t len;
        int64_t saved = -1;
        if (!loom_checkpoint_worker_state(ck, r, &st, &len) && len == sizeof saved)
            memcpy(&saved, st, sizeof saved);
        if (saved != clock) {
            fprintf(stderr,
                    "ft_cut: checkpoint at clock %" PRId64 ": worker %d saved clock %" PRId64 "\n",
                    clock, r, saved);
            failed = 1;
        }
    }
    loom_checkpoint_close(ck);
    checked++;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "check")) {
        dir_checked = argv[2];
        workers_checked = atoi(argv[3]);
        if (loom_checkpoint_list(dir_checked, check_one, NULL) < 0 || !checked) {
            fprintf(stderr, "ft_cut: no committed checkpoint in %s\n", dir_checked);
            return 1;
        }
        printf("%d committed checkpoint(s) hold exactly their cut\n", checked);
        return failed;
    }
    if ((argc != 4 && argc != 5) || strcmp(argv[1], "job")) {
        fprintf(stderr,
                "usage: ft_cut job bsp|ssp|asp CLOCKS [FILTER] | ft_cut check DIR WORKERS\n");
        return 2;
    }
    loom_node *n;
    int rc = loom_init(&n, NULL, NULL);
    if (rc) {
        fprintf(stderr, "ft_cut: %s\n", loom_strerror(rc));
        return 1;
    }
    if (!loom_is_worker(n)) return loom_serve(n) ? 1 : 0;
    return worker(n, argv[2], atoll(argv[3]), argc == 5 ? argv[4] : NULL);
}
