/* rand: the small, fast, reproducible random numbers every layer uses.
 *
 * splitmix64 is both a generator (a counter stepped by the golden ratio and
 * mixed) and, as rand_mix64, a hash: its finaliser is a bijection in which
 * every output bit depends on every input bit, so consecutive or structured
 * inputs (keys, ranks, clocks) give independent-looking outputs. It seeds
 * xoshiro256** (Blackman and Vigna), the generator for long streams: four
 * words of state, period 2^256 - 1, and no correlation that the statistical
 * suites find. Neither is cryptographic; Loom draws secrets from the kernel.
 *
 * Header-only: these run in per-key and per-row loops, where a call would
 * cost more than the arithmetic. */
#ifndef LOOM_CORE_RAND_H
#define LOOM_CORE_RAND_H

#include <stdint.h>

/* splitmix64's finaliser: a bijection of 64-bit words, for hashing. */
static inline uint64_t rand_mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The step of splitmix64's counter: 2^64 over the golden ratio. */
#define RAND_GOLDEN 0x9e3779b97f4a7c15ULL

/* splitmix64 as a function of its counter: the output after counter x. */
static inline uint64_t rand_hash64(uint64_t x)
{
    return rand_mix64(x + RAND_GOLDEN);
}

/* The next splitmix64 output of the counter *state (advanced). */
static inline uint64_t rand_splitmix64(uint64_t *state)
{
    *state += RAND_GOLDEN;
    return rand_mix64(*state);
}

/* Fill xoshiro256** state s from one 64-bit seed (never all zero). */
static inline void rand_seed(uint64_t s[4], uint64_t seed)
{
    for (int i = 0; i < 4; i++) s[i] = rand_splitmix64(&seed);
}

static inline uint64_t rand_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* The next xoshiro256** output of state s (advanced). */
static inline uint64_t rand_next(uint64_t s[4])
{
    uint64_t result = rand_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rand_rotl(s[3], 45);
    return result;
}

/* A uniform double in [0, 1) from the top 53 bits of a random word. */
static inline double rand_unit(uint64_t r)
{
    return (double)(r >> 11) * 0x1.0p-53;
}

#endif
