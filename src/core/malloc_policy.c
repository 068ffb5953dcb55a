/* malloc_policy: keep the memory of freed messages mapped, so that the next
 * burst of messages does not fault every page of it in again.
 *
 * glibc serves a block above its mmap threshold (128 KiB at first) with a
 * mapping of its own, and returns the free memory at the top of a heap to
 * the kernel once it exceeds the trim threshold (twice the mmap threshold).
 * Both rise only when a mapped block is freed, to that block's size: they
 * settle at about the size of the largest message seen. A node that
 * receives several messages of a few MiB in a row (a 1M-key push cut into
 * parts, the replies of a large pull, ZeroMQ allocating each one) frees
 * more than that at once; glibc hands it back and the next burst takes page
 * faults on every page again, and copies into cold memory. On the 2-vCPU
 * VM a 1M-key push cut into four 3 MiB parts ran at a fifth of the speed
 * of one 12 MiB message (docs/BENCHMARKS.md, "Push/pull: freed messages
 * kept mapped"); every fresh page is a page fault, about 20 us on that VM
 * ("Fixed costs per epoch").
 *
 * So the first node of a process fixes the thresholds at the ceiling of
 * glibc's own adjustment (32 MiB and 64 MiB on 64-bit systems), which it
 * would reach after freeing one 32 MiB block: blocks up to 32 MiB come from
 * the heaps, and each heap keeps up to 64 MiB of free memory. That bounds
 * what a process holds beyond its live data; larger blocks are still mapped
 * and unmapped one by one. A user who tunes malloc through the environment
 * keeps their settings, and other allocators (the sanitizers') are left
 * alone.
 */
#include "core/malloc_policy.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int applied;

#ifdef __GLIBC__
/* glibc reads these at its first allocation; one set means the user chose. */
static int environment_tunes_malloc(void)
{
    static const char *const vars[] = {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_",
                                       "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return 1;
    const char *tunables = getenv("GLIBC_TUNABLES");
    return tunables && strstr(tunables, "glibc.malloc.") != NULL;
}

static void apply_once(void)
{
    if (environment_tunes_malloc()) return;
    /* mallopt returns 1 on success; the sanitizers' stand-ins return 0. */
    applied = mallopt(M_MMAP_THRESHOLD, MALLOC_POLICY_MMAP_THRESHOLD) == 1 &&
              mallopt(M_TRIM_THRESHOLD, MALLOC_POLICY_TRIM_THRESHOLD) == 1;
}
#else
static void apply_once(void) {}
#endif

int malloc_policy_apply(void)
{
    pthread_once(&once, apply_once);
    return applied;
}
