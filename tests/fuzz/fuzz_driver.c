/* fuzz_driver: the plain replay driver of the fuzz targets; see fuzz_driver.h. */
#include "fuzz_driver.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

static unsigned long inputs; /* runs of LLVMFuzzerTestOneInput */
static uint64_t rng_state;

void fuzz_run(const uint8_t *p, size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);
    FUZZ_CHECK(copy != NULL);
    if (len) memcpy(copy, p, len);
    inputs++;
    LLVMFuzzerTestOneInput(copy, len);
    free(copy);
}

uint64_t fuzz_rng(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

void fuzz_edit(fuzz_input *in, size_t from, const void *alphabet, size_t alphabet_len)
{
    if (in->len < from) return;
    size_t pos = in->len > from ? from + (size_t)(fuzz_rng() % (in->len - from)) : from;
    const uint8_t *chars = alphabet;
    uint8_t byte = chars ? chars[fuzz_rng() % alphabet_len] : (uint8_t)fuzz_rng();
    int have = pos < in->len; /* a byte at pos to change, delete or cut at */
    switch (fuzz_rng() % 5) {
    case 0:
        if (have) in->buf[pos] ^= (uint8_t)(1u << (fuzz_rng() % 8));
        break;
    case 1:
        if (have) in->buf[pos] = byte;
        break;
    case 2:
        if (in->len < sizeof in->buf) {
            memmove(in->buf + pos + 1, in->buf + pos, in->len - pos);
            in->buf[pos] = byte;
            in->len++;
        }
        break;
    case 3:
        if (have) {
            memmove(in->buf + pos, in->buf + pos + 1, in->len - pos - 1);
            in->len--;
        }
        break;
    default:
        in->len = pos;
        break;
    }
}

/* Runs the file at path, or every file below the directory; returns how many, or -1. */
static int run_path(const fuzz_target *t, const char *path)
{
    struct stat st;
    if (stat(path, &st)) {
        fprintf(stderr, "%s: cannot read %s\n", t->name, path);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        DIR *dir = opendir(path);
        if (!dir) return -1;
        int files = 0;
        struct dirent *e;
        while ((e = readdir(dir))) {
            if (e->d_name[0] == '.') continue;
            char sub[4096];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            int got = run_path(t, sub);
            if (got < 0) {
                closedir(dir);
                return -1;
            }
            files += got;
        }
        closedir(dir);
        return files;
    }
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    static uint8_t buf[1 << 20];
    size_t len = fread(buf, 1, sizeof buf, fp);
    fclose(fp);
    fuzz_run(buf, len);
    return 1;
}

static int write_seeds(const fuzz_target *t, const char *dir)
{
    for (int i = 0; i < t->nseeds; i++) {
        static fuzz_input in;
        char path[4096];
        snprintf(path, sizeof path, "%s/seed-%02d-%s", dir, i, t->seed(i, &in));
        FILE *fp = fopen(path, "wb");
        if (!fp || fwrite(in.buf, 1, in.len, fp) != in.len || fclose(fp)) {
            fprintf(stderr, "%s: cannot write %s\n", t->name, path);
            return 1;
        }
    }
    printf("%s: wrote %d seeds to %s\n", t->name, t->nseeds, dir);
    return 0;
}

int fuzz_driver_main(int argc, char **argv, const fuzz_target *t)
{
    rng_state = t->rng_seed;
    if (argc == 3 && !strcmp(argv[1], "--write-seeds")) return write_seeds(t, argv[2]);

    /* The corpus directories and files named on the command line. */
    int files = 0;
    for (int i = 1; i < argc; i++) {
        int got = run_path(t, argv[i]);
        if (got < 0) return 1;
        files += got;
    }
    /* The seeds, each at every truncation and in the target's variants. */
    unsigned long before = inputs;
    static fuzz_input in;
    for (int i = 0; i < t->nseeds; i++) {
        t->seed(i, &in);
        for (size_t len = 0; len <= in.len; len++) fuzz_run(in.buf, len);
        if (t->variants) t->variants(i, &in);
    }
    t->check_seeds();
    unsigned long structured = inputs - before;

    /* Random inputs, then seeds with a few random edits each. */
    for (int i = 0; i < t->random; i++) {
        in.len = (size_t)(fuzz_rng() % t->random_len);
        for (size_t k = 0; k < in.len; k++)
            in.buf[k] = t->random_byte ? t->random_byte(k) : (uint8_t)fuzz_rng();
        fuzz_run(in.buf, in.len);
    }
    for (int i = 0; i < t->mutated; i++) {
        t->seed((int)(fuzz_rng() % (uint64_t)t->nseeds), &in);
        int edits = 1 + (int)(fuzz_rng() % 4);
        for (int k = 0; k < edits; k++) t->mutate(&in);
        fuzz_run(in.buf, in.len);
    }
    printf("%s: %d corpus file(s), %d seeds, %lu truncated or %s, %d random, %d mutated: %lu "
           "inputs; ",
           t->name, files, t->nseeds, structured, t->variant_kind, t->random, t->mutated, inputs);
    t->report();
    return 0;
}
