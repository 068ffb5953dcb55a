/* minclock: the slowest of a job's workers' clocks, kept as they move.
 *
 * The scheduler's registry and every server keep each worker's completed
 * clocks and the minimum over them (the min clock), and both hear a CLOCK
 * from every worker at every clock. Finding the minimum by scanning all W
 * clocks at each CLOCK costs O(W) per message, O(W^2) per clock of the job:
 * at 1,000 workers a million comparisons per clock on the scheduler and on
 * each server, for an answer that changes at most once per clock. So the
 * tracker also counts the workers still at the minimum; a worker leaving it
 * costs O(1), and only the last one to leave pays a scan, which happens once
 * per value the minimum takes. Clocks only grow (PS_CLOCK_DONE, INT64_MAX,
 * is a worker's end), so the minimum only grows and there are at most as
 * many scans as clocks: O(W) per clock of the job, amortised. */
#ifndef LOOM_PS_MINCLOCK_H
#define LOOM_PS_MINCLOCK_H

#include <stdint.h>

typedef struct ps_minclock {
    int64_t *of; /* per worker rank: the clocks it completed (read it freely, set it here) */
    int n;
    int64_t min; /* the minimum over `of` (INT64_MAX with no workers) */
    int at_min;  /* how many workers are at `min` */
} ps_minclock;

/* n workers, every one at clock 0. 0, or -1 when memory runs out. */
int ps_minclock_init(ps_minclock *m, int n);
void ps_minclock_free(ps_minclock *m);
/* Worker w completed `clock` clocks (not fewer than it had: the caller
 * checks); returns the minimum after. */
int64_t ps_minclock_set(ps_minclock *m, int w, int64_t clock);
/* A worker joins the running job (docs/ELASTIC.md) in slot w, which was done
 * (PS_CLOCK_DONE: a free slot, or a worker that left), at clock `clock`,
 * raised to the minimum if below it: the one move down a worker's clock
 * makes, and never below the minimum, which so never goes back. A scan:
 * once per join. Returns the clock it joined at. */
int64_t ps_minclock_join(ps_minclock *m, int w, int64_t clock);

#endif
