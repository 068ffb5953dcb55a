/* minclock: the slowest worker's clock in O(1) amortised per CLOCK
 * (minclock.h says why). */
#include "ps/minclock.h"

#include <stdlib.h>

/* The minimum and the workers at it, from scratch: once per value it takes. */
static void rescan(ps_minclock *m)
{
    int64_t min = INT64_MAX;
    int at = 0;
    for (int w = 0; w < m->n; w++) {
        if (m->of[w] < min) {
            min = m->of[w];
            at = 0;
        }
        at += m->of[w] == min;
    }
    m->min = min;
    m->at_min = at;
}

int ps_minclock_init(ps_minclock *m, int n)
{
    m->of = calloc(n > 0 ? (size_t)n : 1, sizeof *m->of);
    m->n = n;
    if (!m->of) return -1;
    rescan(m);
    return 0;
}

void ps_minclock_free(ps_minclock *m)
{
    free(m->of);
    m->of = NULL;
}

int64_t ps_minclock_join(ps_minclock *m, int w, int64_t clock)
{
    m->of[w] = INT64_MAX; /* PS_CLOCK_DONE: leaves it out of the minimum below */
    rescan(m);
    if (clock < m->min && m->min != INT64_MAX) clock = m->min;
    m->of[w] = clock;
    rescan(m);
    return clock;
}

int64_t ps_minclock_set(ps_minclock *m, int w, int64_t clock)
{
    int64_t old = m->of[w];
    m->of[w] = clock;
    if (old == m->min && clock != old && --m->at_min == 0) rescan(m);
    return m->min;
}
