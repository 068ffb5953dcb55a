/* page_faults: what a fresh page of memory costs on this machine.
 *
 *   build/bin/page_faults [MIB] [ROUNDS]
 *
 * Maps MIB MiB (default 64) of fresh anonymous memory ROUNDS times (default
 * 3) and writes one byte per 4 KiB page, so that every write is a page
 * fault, and prints the time per page. docs/BENCHMARKS.md ("Fixed costs per
 * epoch") uses it: on the benchmarks' VM a page fault costs 20 us at rest and
 * several times that under load, so a buffer touched for the first time costs
 * more than copying it, and a job's fixed costs are mostly fresh pages. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    long mib = argc > 1 ? atol(argv[1]) : 64, rounds = argc > 2 ? atol(argv[2]) : 3;
    if (mib < 1 || rounds < 1) {
        fprintf(stderr, "usage: page_faults [MIB] [ROUNDS]\n");
        return 2;
    }
    size_t len = (size_t)mib << 20, pages = len / 4096;
    for (long r = 0; r < rounds; r++) {
        volatile char *p =
            mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            perror("page_faults: mmap");
            return 1;
        }
        double t0 = now_s();
        for (size_t i = 0; i < pages; i++) p[i * 4096] = 1;
        double t1 = now_s();
        printf("%.2f us per fresh page (%zu pages)\n", (t1 - t0) / (double)pages * 1e6, pages);
        munmap((void *)p, len);
    }
    return 0;
}
