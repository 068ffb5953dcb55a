/* fuzz_mlr: what apps/mlr and the SV layer read from outside, fed hostile input.
 *
 * A plain replay driver (LOOM_FUZZ_DRIVER; corpus_mlr/). Byte 0 picks what runs
 * (byte0 % 4), byte 1 its option; the rest is the input:
 *   0 flags     `loom train mlr`'s command line (NUL-separated arguments):
 *               mlr_parse_flags accepts it, prints help, or says why (exit 2)
 *   1 model     mlr_model_load; a model it accepts is saved and loaded again, equal
 *   2 data      a LIBSVM file read with real labels: mlr_check_labels either names
 *               the first bad row or gives K, and the data is evaluated with a
 *               K-class model
 *   3 SV frame  svb_frame_check with width 1 + byte1 % 8 and 16 rows on the rest,
 *               and a frame it accepts applied to a replica: every value it reads is
 *               inside the frame and every id inside the replica (ASan tells) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_driver.h"
#include "mlr/mlr.h"
#include "p2p/svb.h"

enum { FLAGS, MODEL, DATA, FRAME, KINDS };

static struct {
    unsigned long runs[KINDS], accepted[KINDS];
} stats;

static char in1[64], out1[64];

static void setup(void)
{
    if (in1[0]) return;
    snprintf(in1, sizeof in1, "/tmp/fuzz-mlr-in.%ld", (long)getpid());
    snprintf(out1, sizeof out1, "/tmp/fuzz-mlr-out.%ld", (long)getpid());
}

static void write_file(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f && fwrite(p, 1, n, f) == n && fclose(f) == 0);
}

static int flags(const uint8_t *p, size_t n)
{
    char *argv[34];
    int argc = 0;
    argv[argc++] = strdup("train mlr");
    for (size_t pos = 0; pos < n && argc < 33;) {
        const uint8_t *nul = memchr(p + pos, 0, n - pos);
        size_t len = nul ? (size_t)(nul - (p + pos)) : n - pos;
        argv[argc] = malloc(len + 1);
        FUZZ_CHECK(argv[argc]);
        memcpy(argv[argc], p + pos, len);
        argv[argc++][len] = '\0';
        pos += len + 1;
    }
    argv[argc] = NULL;
    mlr_cli c;
    char err[1024] = "";
    int rc = mlr_parse_flags(argc, argv, &c, err, sizeof err);
    FUZZ_CHECK(rc == 0 || rc == APP_FLAGS_HELP || (rc == 2 && err[0]));
    if (rc == 0) FUZZ_CHECK(c.job.train_path && c.train.epochs >= 1 && c.train.minibatch >= 1);
    for (int i = 0; i < argc; i++) free(argv[i]);
    return rc == 0;
}

static int model(const uint8_t *p, size_t n)
{
    write_file(in1, p, n);
    char err[1024] = "";
    mlr_model m, again;
    if (mlr_model_load(in1, &m, err, sizeof err)) {
        FUZZ_CHECK(err[0]);
        return 0;
    }
    FUZZ_CHECK(mlr_model_save(&m, out1, err, sizeof err) == 0);
    FUZZ_CHECK(mlr_model_load(out1, &again, err, sizeof err) == 0);
    FUZZ_CHECK(again.classes == m.classes && again.dim == m.dim);
    FUZZ_CHECK(!memcmp(again.w, m.w, (size_t)(m.dim + 1) * m.classes * sizeof(double)));
    mlr_model_free(&m);
    mlr_model_free(&again);
    return 1;
}

static int data(const uint8_t *p, size_t n)
{
    write_file(in1, p, n);
    loom_libsvm_opts o = LOOM_LIBSVM_OPTS_DEFAULT;
    o.labels = LOOM_LABELS_REAL;
    o.max_features = 1 << 12;
    loom_dataset *d;
    char err[1024] = "";
    if (loom_libsvm_read(in1, 0, 1, &o, &d, err, sizeof err)) {
        FUZZ_CHECK(err[0]);
        return 0;
    }
    uint32_t K = 0;
    size_t bad = mlr_check_labels(d, &K);
    int ok = 0;
    if (!bad && d->rows && K <= 64) {
        mlr_model m = {.classes = K, .dim = d->max_feature};
        m.w = calloc((size_t)(m.dim + 1) * K, sizeof *m.w);
        FUZZ_CHECK(m.w);
        mlr_metrics mt;
        FUZZ_CHECK(mlr_evaluate(&m, d, &mt) == 0 && mt.n == d->rows);
        free(m.w);
        ok = 1;
    } else if (bad) {
        FUZZ_CHECK(bad <= d->rows);
    }
    loom_dataset_free(d);
    return ok;
}

static int frame(uint8_t option, const uint8_t *p, size_t n)
{
    uint32_t width = 1 + option % 8;
    const char *why = NULL;
    /* The count: the SVs the frame holds if well formed, one more if option says so. */
    uint64_t count = (option >> 3) & 7;
    if (svb_frame_check(p, n, count, width, 16, &why)) {
        FUZZ_CHECK(why != NULL);
        return 0;
    }
    double w[16 * 8] = {0};
    svb_scratch s = {0};
    FUZZ_CHECK(svb_frame_apply(w, NULL, width, p, count, &s) == 0);
    svb_scratch_free(&s);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t size)
{
    setup();
    if (size < 2) return 0;
    int kind = d[0] % KINDS;
    stats.runs[kind]++;
    int ok = kind == FLAGS   ? flags(d + 2, size - 2)
             : kind == MODEL ? model(d + 2, size - 2)
             : kind == DATA  ? data(d + 2, size - 2)
                             : frame(d[1], d + 2, size - 2);
    stats.accepted[kind] += ok;
    return 0;
}

#ifdef LOOM_FUZZ_DRIVER
typedef fuzz_input input;

#define MAX_SEEDS 16
static struct {
    input in[MAX_SEEDS];
    const char *name[MAX_SEEDS];
    int n;
} seeds;

static void seed_add(const char *name, uint8_t kind, uint8_t option, const void *p, size_t n)
{
    FUZZ_CHECK(seeds.n < MAX_SEEDS && n + 2 <= FUZZ_MAX_INPUT);
    input *in = &seeds.in[seeds.n];
    seeds.name[seeds.n++] = name;
    in->buf[0] = kind, in->buf[1] = option;
    memcpy(in->buf + 2, p, n);
    in->len = n + 2;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void make_seeds(void)
{
    static const char f1[] = "--train\0a.svm\0--mode\0svb\0--select\0025\0--peers=2\0--svlog\0"
                             "l\0--rollback\0003\0--model-out\0m\0--consistency\0ssp:4";
    seed_add("flags_svb", FLAGS, 0, f1, sizeof f1 - 1);
    static const char f2[] = "--train\0a\0--select\0003";
    seed_add("flags_bad", FLAGS, 0, f2, sizeof f2 - 1);
    static const char m1[] = "loom-mlr 1 dim=6 nnz=3 classes=2\n0 1.5\n3 -0.25\n5 1e-300\n";
    seed_add("model", MODEL, 0, m1, sizeof m1 - 1);
    static const char m2[] = "loom-mlr 1 dim=7 nnz=0 classes=2\n";
    seed_add("model_bad", MODEL, 0, m2, sizeof m2 - 1);
    static const char d1[] = "0 1:1 3:0.5\n2 2:1\n1 4:2\n";
    seed_add("data", DATA, 0, d1, sizeof d1 - 1);
    static const char d2[] = "0 1:1\n1.5 2:1\n";
    seed_add("data_bad", DATA, 0, d2, sizeof d2 - 1);
    /* One SV of width 2 (option 1 | count 1 << 3): u = (1, 2), v = {(3, 0.5)}. */
    uint8_t fr[20];
    float u0 = 1, u1 = 2, v0 = 0.5f;
    uint32_t b;
    put32(fr, 1);
    memcpy(&b, &u0, 4), put32(fr + 4, b);
    memcpy(&b, &u1, 4), put32(fr + 8, b);
    put32(fr + 12, 3);
    memcpy(&b, &v0, 4), put32(fr + 16, b);
    seed_add("frame", FRAME, 1 | 1 << 3, fr, sizeof fr);
}

static const char *seed(int i, input *in)
{
    *in = seeds.in[i];
    return seeds.name[i];
}

static void mutate(input *in)
{
    static const char chars[] = "-=0123456789.e\0\n :abx";
    fuzz_edit(in, 2, in->buf[0] % KINDS == FRAME ? NULL : chars, sizeof chars - 1);
}

static void check_seeds(void)
{
    for (int k = 0; k < KINDS; k++) FUZZ_CHECK(stats.accepted[k] >= 1);
    FUZZ_CHECK(stats.runs[FLAGS] > stats.accepted[FLAGS]);
}

static void report(void)
{
    printf("accepted/run: flags %lu/%lu, model %lu/%lu, data %lu/%lu, frame %lu/%lu\n",
           stats.accepted[FLAGS], stats.runs[FLAGS], stats.accepted[MODEL], stats.runs[MODEL],
           stats.accepted[DATA], stats.runs[DATA], stats.accepted[FRAME], stats.runs[FRAME]);
    remove(in1);
    remove(out1);
}

int main(int argc, char **argv)
{
    make_seeds();
    return fuzz_driver_main(argc, argv,
                            &(fuzz_target){.name = "fuzz_mlr",
                                           .rng_seed = 0x4D4C52u,
                                           .nseeds = seeds.n,
                                           .variant_kind = "unchanged",
                                           .seed = seed,
                                           .check_seeds = check_seeds,
                                           .random = 300,
                                           .random_len = 128,
                                           .mutated = 3000,
                                           .mutate = mutate,
                                           .report = report});
}
#endif
