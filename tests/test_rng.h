/* test_rng: the deterministic generator the unit tests draw their data from
 * (xorshift64: fast, and the same sequence on every machine). Each test file
 * sets TEST_RNG_SEED before including it to get its own sequence. */
#ifndef LOOM_TESTS_TEST_RNG_H
#define LOOM_TESTS_TEST_RNG_H

#include <stdint.h>

#ifndef TEST_RNG_SEED
#define TEST_RNG_SEED 0x9e3779b97f4a7c15ULL
#endif

static uint64_t rng_state = TEST_RNG_SEED;

static inline uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

#endif
