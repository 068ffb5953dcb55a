/* loop_wave: running a wavefront plan on the workers (loom/loop.h,
 * docs/LOOPS.md; the unimodular schedules of Orion, wei-thesis-bosen-orion.txt
 * 3.5).
 *
 * The planner skews the time index (time' = time + f space) so that every
 * dependence points to the same or a later space block and the same or a
 * later time block. Worker w holds space block w and runs its time blocks in
 * order, block b in step w + b: 2W - 1 steps a pass, every block after the
 * blocks it depends on. Arrays are kept by the space index; an access may
 * read up to LOOP_MAX_HALO rows before its own, A(i - k, ...), which for the
 * first rows of a block belong to the worker before. After each of its
 * steps a worker sends its last `halo` rows of every local array to the next
 * worker (one SCHED_BLOCK message on the loop's engine number, block W +
 * sender, the step as version), and before each of its steps a worker takes
 * the previous step's message from the one before into its halo rows: block
 * (w, b) then sees the rows of block (w - 1, b), all it may depend on there,
 * since a dependence never goes back in time blocks. */
#include <stdlib.h>
#include <string.h>

#include "loom/error.h"
#include "sched/loop_impl.h"
#include "sched/sched.h"

int loop_wave_bounds(loom_loop *l)
{
    uint64_t es = l->o.extents[l->space];
    if ((uint64_t)(l->W - 1) * l->halo > es) return LOOM_EINVAL;
    for (uint32_t b = 1; b < l->W; b++)
        if (l->sb[b] < l->sb[b - 1] + l->halo) l->sb[b] = l->sb[b - 1] + l->halo;
    return 0;
}

int loop_wave_open(loom_loop *l)
{
    for (size_t i = 0; i < l->narr; i++) {
        loop_array *a = &l->arr[i];
        if (a->role != ROLE_SPACE) continue;
        l->halo_bytes += l->halo * a->row_bytes;
        if (!(a->halo_rows = calloc(l->halo, a->row_bytes))) return LOOM_ENOMEM;
    }
    return (l->halo_msg = malloc(l->halo_bytes + 1)) ? 0 : LOOM_ENOMEM;
}

/* The last halo rows of every local array, into the message, or from it
 * into the halo rows. */
static void pack(loom_loop *l, int out)
{
    uint8_t *m = l->halo_msg;
    for (size_t i = 0; i < l->narr; i++) {
        loop_array *a = &l->arr[i];
        if (a->role != ROLE_SPACE) continue;
        size_t bytes = l->halo * a->row_bytes;
        if (out)
            memcpy(m, a->rows + (a->hi - a->lo) * a->row_bytes - bytes, bytes);
        else
            memcpy(a->halo_rows, m, bytes);
        m += bytes;
    }
}

int loop_wave_run(loom_loop *l, int64_t passes)
{
    uint32_t W = l->W, me = l->rank;
    int rc = 0;
    for (int64_t p = 0; p < passes && !rc; p++, l->pass++, l->wave_steps += 2 * W - 1)
        for (uint32_t b = 0; b < W && !rc; b++) { /* in step me + b */
            uint64_t step = l->wave_steps + me + b;
            if (me > 0 && l->halo) {
                rc = sched_take_block(l->node, l->id, (int)me - 1, W + me - 1, step - 1,
                                      l->halo_msg, l->halo_bytes, 0);
                if (!rc) pack(l, 0);
            }
            l->blk_end = l->bucket[b + 1];
            for (size_t i = l->bucket[b]; i < l->bucket[b + 1] && !rc; i++)
                rc = loop_run_one(l, &l->el[i], NULL);
            if (!rc) rc = loop_flush_all(l);
            if (!rc && me + 1 < W && l->halo) {
                pack(l, 1);
                rc = sched_send_block(l->node, l->id, (int)me + 1, W + me, step, l->halo_msg,
                                      l->halo_bytes, 0);
            }
        }
    return rc;
}
