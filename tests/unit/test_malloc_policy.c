/* malloc_policy: a node's process keeps the memory of a burst of freed
 * messages for the next burst (src/core/malloc_policy.c).
 *
 * A burst is four blocks of 3 MiB, each written through, then all freed: a
 * 1M-key push cut into parts as a server receives it. glibc's own
 * thresholds give such a burst back to the kernel once they settle at the
 * block size (so the next burst faults every page in again); with the
 * policy the next burst reuses the memory of the last. Measured with
 * mallinfo2: `arena` is the memory malloc's main heap holds from the
 * kernel, `hblkhd` what it mapped block by block. The sanitizers bring
 * their own allocator, so under them only the decision is checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <malloc.h>

#include "core/malloc_policy.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define OWN_ALLOCATOR 1
#else
#define OWN_ALLOCATOR 0
#endif

#define BLOCKS      4
#define BLOCK_BYTES ((size_t)3 << 20)

typedef struct burst {
    size_t heap_during;   /* the main heap's size with the blocks live */
    size_t mapped_during; /* bytes mapped block by block meanwhile */
    size_t heap_after;    /* the main heap's size once they are freed */
} burst;

static burst run_burst(void)
{
    void *b[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
        b[i] = malloc(BLOCK_BYTES);
        assert_non_null(b[i]);
        memset(b[i], i + 1, BLOCK_BYTES);
    }
    struct mallinfo2 during = mallinfo2();
    for (int i = 0; i < BLOCKS; i++) free(b[i]);
    struct mallinfo2 after = mallinfo2();
    return (burst){during.arena, during.hblkhd, after.arena};
}

/* With MALLOC_TRIM_THRESHOLD_ in the environment the policy leaves malloc
 * alone (in a child: the first call decides for the whole process). */
static void test_environment_wins(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("MALLOC_TRIM_THRESHOLD_", "131072", 1);
        _exit(malloc_policy_apply() == 0 && malloc_policy_apply() == 0 ? 0 : 1);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_bursts_reuse_memory(void **state)
{
    (void)state;
    if (OWN_ALLOCATOR) {
        int first = malloc_policy_apply();
        assert_int_equal(malloc_policy_apply(), first);
        return;
    }
    /* Without the policy: the first burst is mapped block by block; after
     * it glibc's thresholds sit at the block size, and the second burst,
     * from the heap, is trimmed off it again when freed. */
    burst b1 = run_burst();
    assert_true(b1.mapped_during >= BLOCKS * BLOCK_BYTES);
    burst b2 = run_burst();
    assert_true(b2.heap_during >= b2.heap_after + BLOCKS * BLOCK_BYTES);

    assert_int_equal(malloc_policy_apply(), 1);
    assert_int_equal(malloc_policy_apply(), 1);
    /* With it: the blocks come from the heap, which keeps them when freed,
     * and the next burst takes no new memory from the kernel. */
    burst b3 = run_burst();
    assert_true(b3.heap_after >= BLOCKS * BLOCK_BYTES);
    burst b4 = run_burst();
    assert_int_equal(b4.mapped_during, 0);
    assert_int_equal(b4.heap_during, b3.heap_after);
    assert_int_equal(b4.heap_after, b3.heap_after);

    /* Blocks above the mmap threshold are still mapped one by one, and
     * unmapped when freed. */
    size_t big = (size_t)MALLOC_POLICY_MMAP_THRESHOLD + (1u << 20);
    void *p = malloc(big);
    assert_non_null(p);
    memset(p, 1, big);
    assert_true(mallinfo2().hblkhd >= big);
    free(p);
    assert_int_equal(mallinfo2().hblkhd, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_environment_wins),
        cmocka_unit_test(test_bursts_reuse_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
