/* malloc_policy: a node's process keeps the memory of freed messages mapped
 * (malloc_policy.c). Only core/ and its unit test include this file. */
#ifndef LOOM_CORE_MALLOC_POLICY_H
#define LOOM_CORE_MALLOC_POLICY_H

/* The thresholds malloc_policy_apply() sets: blocks up to the first come
 * from malloc's heaps, and a heap keeps up to the second of free memory
 * before it returns any to the kernel. */
#define MALLOC_POLICY_MMAP_THRESHOLD ((int)32 << 20)
#define MALLOC_POLICY_TRIM_THRESHOLD ((int)64 << 20)

/* Fix glibc's malloc thresholds for this process, once (node_start calls
 * it; later calls do nothing and return what the first did). 1: set; 0:
 * left as they are, because the environment tunes malloc (MALLOC_*_
 * variables, glibc.malloc in GLIBC_TUNABLES) or the C library is not glibc. */
int malloc_policy_apply(void);

#endif
