/* fuzz_driver: what the fuzz targets (fuzz_decode.c, fuzz_readers.c) share: FUZZ_CHECK,
 * and the plain replay driver (fuzz_driver.c, linked into each fuzz_*_driver; libFuzzer
 * brings its own main()).
 *
 * The driver's main() (fuzz_driver_main) replays the corpus directories and files named on
 * the command line, every truncation of every seed of the target and its other variants
 * of the seeds, then deterministic random inputs and seeds with a few random edits each;
 * `--write-seeds DIR` writes the seeds as DIR/seed-NN-NAME instead. */
#ifndef LOOM_TESTS_FUZZ_DRIVER_H
#define LOOM_TESTS_FUZZ_DRIVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond);          \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifdef LOOM_FUZZ_DRIVER
#define FUZZ_MAX_INPUT 4096

typedef struct fuzz_input {
    uint8_t buf[FUZZ_MAX_INPUT];
    size_t len;
} fuzz_input;

/* A target, as its driver runs it. */
typedef struct fuzz_target {
    const char *name;         /* "fuzz_decode": in messages */
    uint64_t rng_seed;        /* of fuzz_rng() */
    int nseeds;               /* the built-in seeds */
    const char *variant_kind; /* what variants() makes, in the summary: "resized" */
    /* Seed i into in; returns its name. */
    const char *(*seed)(int i, fuzz_input *in);
    /* Runs the target's other variants of seed i (in, not truncated), or NULL. */
    void (*variants)(int i, fuzz_input *in);
    /* After the seeds and their variants: checks that they reached the success paths. */
    void (*check_seeds)(void);
    int random; /* random inputs, of fuzz_rng() % random_len bytes */
    size_t random_len;
    /* Byte k of a random input, or NULL for any byte ((uint8_t)fuzz_rng()). */
    uint8_t (*random_byte)(size_t k);
    int mutated; /* seeds with 1 to 4 random edits by mutate() */
    void (*mutate)(fuzz_input *in);
    /* The end of the summary line: what succeeded, and "\n". */
    void (*report)(void);
} fuzz_target;

/* Runs LLVMFuzzerTestOneInput on an exact-size heap copy of p, so that a read past the
 * input is caught too. */
void fuzz_run(const uint8_t *p, size_t len);
/* splitmix64: deterministic, so a failure reproduces. */
uint64_t fuzz_rng(void);
/* One random edit of in->buf[from..]: a flipped bit, a byte replaced or inserted (a
 * byte of `alphabet`, or any byte if it is NULL), a byte deleted, or the input cut
 * there. Bytes before `from` (a target's option bytes) are left alone. */
void fuzz_edit(fuzz_input *in, size_t from, const void *alphabet, size_t alphabet_len);
/* The driver's main(). */
int fuzz_driver_main(int argc, char **argv, const fuzz_target *t);
#endif

#endif
