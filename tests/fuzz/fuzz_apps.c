/* fuzz_apps: the applications' files, from data to model and back (apps/lr, apps/mf,
 * apps/lda, apps/lasso), fed hostile input.
 *
 * Built two ways like fuzz_decode.c: a libFuzzer target (LOOM_FUZZ=ON, clang) and, in
 * every build, a plain replay driver (LOOM_FUZZ_DRIVER; corpus_apps/).
 *
 * Input: byte 0 picks what runs (byte0 % 6) and byte 1 its options; the rest is one or two
 * files, split at the first NUL byte (the second file is optional):
 *   0 lr model     lr_model_load; a model it accepts is saved and loaded again, equal
 *   1 mf model     mf_model_load; the same round trip
 *   2 lda model    lda_model_load and lda_vocab_load (second file); the round trip, and
 *                  the top words of an accepted model with and without the vocabulary
 *   3 lr train     `loom train lr` on the training file (and --test on the second)
 *   4 mf train     `loom train mf` on the ratings file (and --test on the second)
 *   5 lda train    `loom train lda` on the corpus (and --vocab on the second)
 *   6 lasso model  lasso_model_load; the round trip
 *   7 lasso train  `loom train lasso --sequential` or `--in-process` (the dynamic
 *                  engine's rounds: schedule, depth, rho and parallel updates from
 *                  byte 1), in this process, on data whose feature ids stay below 2^16
 * Training is end to end in this process: lr_train_node(), mf_train_node() and
 * lda_train_node(), as `loom train` calls them, on a one-worker, one-server job whose
 * nodes are in this thread (src/core/node_fuzz.h; loom_init joins it), with options
 * from byte 1 (algorithm, consistency, id base, --skip-bad) and tiny epochs, so that the
 * reader, the sizes the workers agree on, the mapping of ids to rows, the tables, the
 * training and the model file written at the end all run on the input.
 *
 * Sizes: the models are dense, and a few bytes of input may announce billions of
 * weights (a model header's dim=, a feature or word id near 2^32), which the loaders and
 * trainers allocate by design. So that such inputs measure the error paths and not the
 * machine, AddressSanitizer refuses any single allocation above 64 MiB here (it returns
 * NULL, which the code must handle: a crash on it is a finding), and `loom train lr` gets
 * max_features 2^16 (larger ids are refused with FILE:LINE, as beyond 2^32 in use).
 *
 * Checks, for every input (besides the sanitizers'):
 *   - a loader either accepts the file or says why; what it accepts survives a save and
 *     a load unchanged (bit for bit; NaN as NaN);
 *   - a training run ends (its traffic is bounded) with status 0 or 1, and a model it
 *     wrote loads. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/node_fuzz.h"
#include "fuzz_driver.h"
#include "lasso/lasso.h"
#include "lda/lda.h"
#include "lr/lr.h"
#include "mf/mf.h"
#include "ps/ps.h"

/* AddressSanitizer's options for this target (see Sizes above); the environment's
 * ASAN_OPTIONS still override them. Unused without AddressSanitizer. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1:max_allocation_size_mb=64";
}

#define LR_FUZZ_MAX_FEATURES ((uint64_t)1 << 16)

enum {
    LR_MODEL,
    MF_MODEL,
    LDA_MODEL,
    LR_TRAIN,
    MF_TRAIN,
    LDA_TRAIN,
    LASSO_MODEL,
    LASSO_TRAIN,
    KINDS
};

#define MAX_DELIVERIES 2000000 /* far above what a 4 KiB input trains with */

static struct {
    unsigned long loaded[KINDS], trained[KINDS], runs[KINDS];
} stats;

/* ---- scratch files ---- */

static char dir[512];
static char in1[600], in2[600], out1[600];

static void setup(void)
{
    if (dir[0]) return;
    /* TMPDIR first: the fuzz.apps test points it at a directory it removes (a
     * libFuzzer run has no end at which to clean up). */
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/loom-fuzz-apps-%ld", base, (long)getpid());
    FUZZ_CHECK(mkdir(dir, 0700) == 0 || errno == EEXIST);
    snprintf(in1, sizeof in1, "%s/in1", dir);
    snprintf(in2, sizeof in2, "%s/in2", dir);
    snprintf(out1, sizeof out1, "%s/out1", dir);
}

static void write_file(const char *path, const uint8_t *p, size_t len)
{
    FILE *f = fopen(path, "wb");
    FUZZ_CHECK(f != NULL);
    FUZZ_CHECK(fwrite(p, 1, len, f) == len || len == 0);
    FUZZ_CHECK(fclose(f) == 0);
}

static int same_double(double a, double b)
{
    return (isnan(a) && isnan(b)) || !memcmp(&a, &b, sizeof a);
}

static int same_doubles(const double *a, const double *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!same_double(a[i], b[i])) return 0;
    return 1;
}

/* ---- the loaders ---- */

static void lr_model_round_trip(void)
{
    char err[1024] = "";
    lr_model m, again;
    if (lr_model_load(in1, &m, err, sizeof err)) {
        FUZZ_CHECK(err[0]);
        return;
    }
    stats.loaded[LR_MODEL]++;
    FUZZ_CHECK(lr_model_save(&m, out1, err, sizeof err) == 0);
    FUZZ_CHECK(lr_model_load(out1, &again, err, sizeof err) == 0);
    FUZZ_CHECK(again.dim == m.dim && same_double(again.bias, m.bias));
    FUZZ_CHECK(same_doubles(again.w, m.w, (size_t)m.dim));
    lr_model_free(&m);
    lr_model_free(&again);
}

static void mf_model_round_trip(void)
{
    char err[1024] = "";
    mf_model m, again;
    if (mf_model_load(in1, &m, err, sizeof err)) {
        FUZZ_CHECK(err[0]);
        return;
    }
    stats.loaded[MF_MODEL]++;
    FUZZ_CHECK(mf_model_save(&m, out1, err, sizeof err) == 0);
    FUZZ_CHECK(mf_model_load(out1, &again, err, sizeof err) == 0);
    FUZZ_CHECK(again.rank == m.rank && again.users == m.users && again.items == m.items);
    FUZZ_CHECK(same_double(again.mean, m.mean) && same_double(again.min, m.min) &&
               same_double(again.max, m.max));
    FUZZ_CHECK(!memcmp(again.user_id, m.user_id, m.users * sizeof *m.user_id));
    FUZZ_CHECK(!memcmp(again.item_id, m.item_id, m.items * sizeof *m.item_id));
    FUZZ_CHECK(same_doubles(again.user, m.user, m.users * (m.rank + 1)));
    FUZZ_CHECK(same_doubles(again.item, m.item, m.items * (m.rank + 1)));
    for (size_t u = 0; u < m.users; u++) FUZZ_CHECK(mf_model_user(&m, m.user_id[u]) == (int64_t)u);
    mf_model_free(&m);
    mf_model_free(&again);
}

static void lda_model_round_trip(int have_vocab)
{
    char err[1024] = "";
    lda_vocab v = {0};
    int vocab_ok = have_vocab && !lda_vocab_load(in2, &v, err, sizeof err);
    FUZZ_CHECK(!have_vocab || vocab_ok || err[0]);
    lda_model m, again;
    err[0] = '\0';
    if (lda_model_load(in1, &m, err, sizeof err)) {
        FUZZ_CHECK(err[0]);
        if (vocab_ok) lda_vocab_free(&v);
        return;
    }
    stats.loaded[LDA_MODEL]++;
    FUZZ_CHECK(lda_model_save(&m, out1, err, sizeof err) == 0);
    FUZZ_CHECK(lda_model_load(out1, &again, err, sizeof err) == 0);
    FUZZ_CHECK(again.p.topics == m.p.topics && again.p.vocab == m.p.vocab);
    FUZZ_CHECK(same_double(again.p.alpha, m.p.alpha) && same_double(again.p.beta, m.p.beta));
    FUZZ_CHECK(again.tokens == m.tokens);
    FUZZ_CHECK(lda_rows_equal(&again.counts, &m.counts));
    FUZZ_CHECK(!memcmp(again.totals, m.totals, m.p.topics * sizeof *m.totals));
    FILE *null = fopen("/dev/null", "w");
    FUZZ_CHECK(null != NULL);
    lda_print_top_words(null, &m, NULL, 3);
    if (vocab_ok) lda_print_top_words(null, &m, &v, 3);
    fclose(null);
    lda_model_free(&m);
    lda_model_free(&again);
    if (vocab_ok) lda_vocab_free(&v);
}

static void lasso_model_round_trip(void)
{
    char err[1024] = "";
    lasso_model m, again;
    if (lasso_model_load(in1, &m, err, sizeof err)) {
        FUZZ_CHECK(err[0]);
        return;
    }
    stats.loaded[LASSO_MODEL]++;
    FUZZ_CHECK(lasso_model_save(&m, out1, err, sizeof err) == 0);
    FUZZ_CHECK(lasso_model_load(out1, &again, err, sizeof err) == 0);
    FUZZ_CHECK(again.dim == m.dim && same_double(again.lambda, m.lambda));
    FUZZ_CHECK(same_doubles(again.beta, m.beta, (size_t)m.dim));
    lasso_model_free(&m);
    lasso_model_free(&again);
}

/* `loom train lasso` in this process: the sequential reference or the dynamic
 * engine's rounds (no job), options from o. */
static void lasso_train(uint8_t o)
{
    char err[1024] = "";
    /* Ids up to 2^32 are valid and dense: keep the run small (as lr's max_features). */
    loom_libsvm_opts lo = LOOM_LIBSVM_OPTS_DEFAULT;
    lo.labels = LOOM_LABELS_REAL;
    loom_dataset *d = NULL;
    if (loom_libsvm_read(in1, 0, 1, &lo, &d, err, sizeof err) == 0) {
        int big = d->max_feature > ((uint64_t)1 << 16);
        loom_dataset_free(d);
        if (big) return;
    }
    const char *argv[32];
    int argc = 0;
    argv[argc++] = "train";
    argv[argc++] = "--train", argv[argc++] = in1;
    argv[argc++] = "--model-out", argv[argc++] = out1;
    argv[argc++] = "--quiet";
    argv[argc++] = "--iterations", argv[argc++] = "3";
    if (o & 64) argv[argc++] = "--lambda", argv[argc++] = "0.01";
    if (o & 1) {
        argv[argc++] = "--sequential";
    } else {
        static const char *const schedules[] = {"dynamic", "random", "rotation", "dynamic"};
        static const char *const parallel[] = {"1", "2", "3", "8"};
        argv[argc++] = "--in-process";
        argv[argc++] = "--schedule", argv[argc++] = schedules[(o >> 1) & 3];
        argv[argc++] = "--parallel", argv[argc++] = parallel[(o >> 4) & 3];
        if (o & 8) argv[argc++] = "--depth", argv[argc++] = "2";
        if (o & 128) argv[argc++] = "--rho", argv[argc++] = "1";
    }
    lasso_cli c;
    FUZZ_CHECK(lasso_parse_flags(argc, (char **)argv, &c, err, sizeof err) == 0);
    unlink(out1);
    int rc = lasso_train_here(&c);
    FUZZ_CHECK(rc == 0 || rc == 1);
    if (rc || access(out1, F_OK)) return;
    stats.trained[LASSO_TRAIN]++;
    lasso_model m;
    FUZZ_CHECK(lasso_model_load(out1, &m, err, sizeof err) == 0);
    lasso_model_free(&m);
}

/* ---- training, end to end ---- */

/* argv of `loom train MODEL` for kind and the option byte. */
static int train_args(int kind, uint8_t o, int have_second, const char **argv)
{
    int argc = 0;
    argv[argc++] = "train";
    argv[argc++] = "--train";
    argv[argc++] = in1;
    argv[argc++] = "--model-out";
    argv[argc++] = out1;
    argv[argc++] = "--quiet";
    argv[argc++] = "--workers";
    argv[argc++] = "1";
    static const char *const consistency[] = {"bsp", "ssp:1", "asp", "ssp:0"};
    if (kind != LR_TRAIN || !(o & 8)) /* dbpg has a delay instead */
        argv[argc++] = "--consistency", argv[argc++] = consistency[o & 3];
    if (o & 4) argv[argc++] = "--skip-bad";
    switch (kind) {
    case LR_TRAIN:
        if (have_second) argv[argc++] = "--test", argv[argc++] = in2;
        argv[argc++] = "--epochs", argv[argc++] = "2";
        if (o & 8) {
            argv[argc++] = "--algo", argv[argc++] = "dbpg";
            argv[argc++] = "--blocks", argv[argc++] = "2";
            argv[argc++] = "--delay", argv[argc++] = o & 1 ? "0" : "1";
        } else {
            argv[argc++] = "--minibatch", argv[argc++] = "3";
            static const char *const updaters[] = {"adagrad", "sgd", "ftrl", "adagrad"};
            argv[argc++] = "--updater", argv[argc++] = updaters[(o >> 4) & 3];
        }
        if (o & 64) argv[argc++] = o & 128 ? "--one-based" : "--zero-based";
        break;
    case MF_TRAIN:
        if (have_second) argv[argc++] = "--test", argv[argc++] = in2;
        argv[argc++] = "--epochs", argv[argc++] = "2";
        argv[argc++] = "--rank", argv[argc++] = "2";
        if (o & 8) argv[argc++] = "--syncs", argv[argc++] = "2";
        if (o & 16) argv[argc++] = "--merge", argv[argc++] = "sum";
        if (!have_second && (o & 32)) argv[argc++] = "--test-fraction", argv[argc++] = "0.3";
        break;
    default:
        if (have_second) argv[argc++] = "--vocab", argv[argc++] = in2;
        argv[argc++] = "--iterations", argv[argc++] = "2";
        argv[argc++] = "--topics", argv[argc++] = "3";
        argv[argc++] = "--top-words", argv[argc++] = o & 8 ? "2" : "0";
        if (o & 16) argv[argc++] = "--syncs", argv[argc++] = "2";
        if (o & 32) argv[argc++] = "--eval-every", argv[argc++] = "0";
        break;
    }
    return argc;
}

/* The job a training run joins: loom_init() in the trainer becomes worker 0 of it. */
static node_fuzz_job *job_for_training(void)
{
    setenv("LOOM_ROLE", "worker", 1);
    setenv("LOOM_RANK", "0", 1);
    setenv("LOOM_NUM_SERVERS", "1", 1);
    setenv("LOOM_NUM_WORKERS", "1", 1);
    setenv("LOOM_SCHEDULER", "127.0.0.1:1", 1);
    setenv("LOOM_BIND", "127.0.0.1", 1);
    node_fuzz_job *j;
    FUZZ_CHECK(node_fuzz_job_new(1, 1, 1, 0, ps_attach, MAX_DELIVERIES, &j) == 0);
    node_fuzz_job_install(j);
    return j;
}

static void train(int kind, uint8_t o, int have_second)
{
    const char *argv[40];
    int argc = train_args(kind, o, have_second, argv);
    char err[1024] = "";
    unlink(out1);
    node_fuzz_job *j = job_for_training();
    int rc;
    if (kind == LR_TRAIN) {
        lr_cli c;
        FUZZ_CHECK(lr_parse_flags(argc, (char **)argv, &c, err, sizeof err) == 0);
        c.data.max_features = LR_FUZZ_MAX_FEATURES;
        rc = lr_train_node(&c);
    } else if (kind == MF_TRAIN) {
        mf_cli c;
        FUZZ_CHECK(mf_parse_flags(argc, (char **)argv, &c, err, sizeof err) == 0);
        rc = mf_train_node(&c);
    } else {
        lda_cli c;
        FUZZ_CHECK(lda_parse_flags(argc, (char **)argv, &c, err, sizeof err) == 0);
        rc = lda_train_node(&c);
    }
    FUZZ_CHECK(!node_fuzz_job_overrun(j));
    node_fuzz_job_free(j);
    FUZZ_CHECK(rc == 0 || rc == 1);
    if (rc) return;
    stats.trained[kind]++;
    /* The model it wrote loads. */
    if (access(out1, F_OK)) return;
    if (kind == LR_TRAIN) {
        lr_model m;
        FUZZ_CHECK(lr_model_load(out1, &m, err, sizeof err) == 0);
        lr_model_free(&m);
    } else if (kind == MF_TRAIN) {
        mf_model m;
        FUZZ_CHECK(mf_model_load(out1, &m, err, sizeof err) == 0);
        mf_model_free(&m);
    } else {
        lda_model m;
        FUZZ_CHECK(lda_model_load(out1, &m, err, sizeof err) == 0);
        lda_model_free(&m);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    if (size < 2) return 0;
    int kind = data[0] % KINDS;
    uint8_t o = data[1];
    const uint8_t *rest = data + 2, *nul = memchr(rest, 0, size - 2);
    size_t len1 = nul ? (size_t)(nul - rest) : size - 2;
    write_file(in1, rest, len1);
    int have_second = nul != NULL;
    if (have_second) write_file(in2, nul + 1, size - 2 - len1 - 1);
    stats.runs[kind]++;
    switch (kind) {
    case LR_MODEL:
        lr_model_round_trip();
        break;
    case MF_MODEL:
        mf_model_round_trip();
        break;
    case LDA_MODEL:
        lda_model_round_trip(have_second);
        break;
    case LASSO_MODEL:
        lasso_model_round_trip();
        break;
    case LASSO_TRAIN:
        lasso_train(o);
        break;
    default:
        train(kind, o, have_second);
        break;
    }
    return 0;
}

#ifdef LOOM_FUZZ_DRIVER
/* ---- the plain driver: files of each kind, truncations, random and mutated ---- */

typedef fuzz_input input;

#define MAX_SEEDS 24

static struct {
    input in[MAX_SEEDS];
    const char *name[MAX_SEEDS];
    int n;
} seeds;

/* A seed: kind, option byte, the first file and (if second is not NULL) the second. */
static void seed_add(const char *name, int kind, uint8_t o, const char *first, const char *second)
{
    FUZZ_CHECK(seeds.n < MAX_SEEDS);
    input *in = &seeds.in[seeds.n];
    seeds.name[seeds.n++] = name;
    size_t l1 = strlen(first), l2 = second ? strlen(second) + 1 : 0;
    FUZZ_CHECK(2 + l1 + l2 <= sizeof in->buf);
    in->buf[0] = (uint8_t)kind;
    in->buf[1] = o;
    memcpy(in->buf + 2, first, l1);
    if (second) {
        in->buf[2 + l1] = 0;
        memcpy(in->buf + 3 + l1, second, l2 - 1);
    }
    in->len = 2 + l1 + l2;
}

static const char libsvm[] = "+1 1:0.5 3:1 7:2\n"
                             "-1 2:1 3:-0.5\n"
                             "+1 1:1 7:1 9:0.25\n"
                             "-1 2:0.5 4:1\n"
                             "+1 3:1 7:0.5\n"
                             "-1 2:2 4:0.5 9:1\n";
static const char ratings[] = "1\t10\t4\n1\t11\t3\n2\t10\t5\n2\t12\t1\n3\t11\t2\n3\t12\t4\n"
                              "4\t10\t3\n4\t13\t5\n";
static const char ldac[] = "3 0:2 1:1 4:3\n2 2:1 3:2\n3 0:1 3:1 5:2\n2 1:2 4:1\n";
static const char uci[] = "3\n6\n7\n1 1 2\n1 2 1\n1 5 3\n2 3 1\n2 4 2\n3 1 1\n3 6 2\n";
static const char vocab[] = "apple\nbanana\ncherry\ndate\nelder\nfig\n";
static const char lasso_rows[] = "1.5 1:0.5 3:1 7:2\n-0.25 2:1 3:-0.5\n2 1:1 7:1 9:0.25\n"
                                 "-1 2:0.5 4:1\n0.75 3:1 7:0.5 8:1\n-2 2:2 4:0.5 9:1 5:1 6:1\n";

static void make_seeds(void)
{
    seed_add("lr_model", LR_MODEL, 0,
             "loom-lr 1 dim=10 nnz=3 bias=-0.25\n1 0.5\n3 -1.25\n9 1e-300\n", NULL);
    seed_add("lr_model_empty", LR_MODEL, 0, "loom-lr 1 dim=0 nnz=0 bias=0\n", NULL);
    seed_add("mf_model", MF_MODEL, 0,
             "loom-mf 1 rank=2 users=2 items=1 mean=3.5 min=1 max=5\n"
             "u 7 0.1 0.2 -0.3\nu 9 0 1 2\ni 4 -0.5 0.25 0.125\n",
             NULL);
    seed_add("lda_model_vocab", LDA_MODEL, 0,
             "loom-lda 1 topics=2 vocab=3 alpha=0.1 beta=0.01 tokens=6\n0 0:2 1:1\n2 1:3\n",
             "alpha\nbeta\ngamma\n");
    /* A NUL byte in the vocabulary made lda_vocab_load write through NULL (fixed). */
    seed_add("lda_vocab_nul", LDA_MODEL, 0,
             "loom-lda 1 topics=1 vocab=2 alpha=0.1 beta=0.1 tokens=1\n0 0:1\n", "ab\ncd");
    seeds.in[seeds.n - 1].buf[seeds.in[seeds.n - 1].len - 2] = 0;
    seed_add("lda_model", LDA_MODEL, 0,
             "loom-lda 1 topics=3 vocab=2 alpha=0.5 beta=0.1 tokens=2\n1 2:2\n", NULL);
    seed_add("lr_train_sgd", LR_TRAIN, 0x10, libsvm, NULL);
    seed_add("lr_train_dbpg_test", LR_TRAIN, 0x08 | 0x40 | 0x80, libsvm, libsvm);
    seed_add("lr_train_asp_ftrl_skip", LR_TRAIN, 2 | 4 | 0x20,
             "+1 1:1 2:x\n-1 2:1\n+1 1:1\n# comment\n-1 3:1\n", NULL);
    seed_add("mf_train", MF_TRAIN, 0, ratings, NULL);
    seed_add("mf_train_test_syncs", MF_TRAIN, 1 | 8 | 16, ratings, "1\t12\t2\n4\t11\t4\n");
    seed_add("mf_train_fraction_csv", MF_TRAIN, 2 | 32, "1,10,4\n1,11,3\n2,10,5\n2,12,1\n3,11,2\n",
             NULL);
    seed_add("lda_train_ldac_vocab", LDA_TRAIN, 8, ldac, vocab);
    seed_add("lda_train_uci_syncs", LDA_TRAIN, 1 | 16 | 32, uci, NULL);
    seed_add("lasso_model", LASSO_MODEL, 0,
             "loom-lasso 1 dim=10 nnz=2 lambda=0.5\n2 -1.5\n9 0.25\n", NULL);
    seed_add("lasso_train_sequential", LASSO_TRAIN, 1, lasso_rows, NULL);
    seed_add("lasso_train_dynamic", LASSO_TRAIN, 0x10, lasso_rows, NULL);
    seed_add("lasso_train_random_depth", LASSO_TRAIN, 2 | 8 | 64, lasso_rows, NULL);
    seed_add("lasso_train_rotation_rho1", LASSO_TRAIN, 4 | 128, lasso_rows, NULL);
}

static const char *seed(int i, input *in)
{
    *in = seeds.in[i];
    return seeds.name[i];
}

/* One random edit of the files (bytes 2 on): a bit, a character of these formats,
 * an insertion, a deletion or a truncation; or another option byte. */
static void mutate(input *in)
{
    static const char chars[] = "0123456789+-.:e \n\tx,";
    if (fuzz_rng() % 6 == 0)
        in->buf[1] = (uint8_t)fuzz_rng();
    else
        fuzz_edit(in, 2, chars, sizeof chars - 1);
}

/* Each kind's seeds reach its success path. */
static void check_seeds(void)
{
    for (int k = LR_MODEL; k <= LDA_MODEL; k++) FUZZ_CHECK(stats.loaded[k] >= 1);
    for (int k = LR_TRAIN; k <= LDA_TRAIN; k++) FUZZ_CHECK(stats.trained[k] >= 2);
    FUZZ_CHECK(stats.loaded[LASSO_MODEL] >= 1);
    FUZZ_CHECK(stats.trained[LASSO_TRAIN] >= 4);
}

static void report(void)
{
    static const char *const names[KINDS] = {"lr model", "mf model",  "lda model",   "lr train",
                                             "mf train", "lda train", "lasso model", "lasso train"};
    for (int k = 0; k < KINDS; k++)
        printf("%s %lu/%lu%s", names[k],
               k < LR_TRAIN || k == LASSO_MODEL ? stats.loaded[k] : stats.trained[k], stats.runs[k],
               k + 1 < KINDS ? ", " : " accepted\n");
}

int main(int argc, char **argv)
{
    make_seeds();
    int rc = fuzz_driver_main(argc, argv,
                              &(fuzz_target){.name = "fuzz_apps",
                                             .rng_seed = 0x41505053u,
                                             .nseeds = seeds.n,
                                             .variant_kind = "unchanged",
                                             .seed = seed,
                                             .check_seeds = check_seeds,
                                             .random = 200,
                                             .random_len = 256,
                                             .mutated = 1500,
                                             .mutate = mutate,
                                             .report = report});
    unlink(in1), unlink(in2), unlink(out1);
    rmdir(dir);
    return rc;
}
#endif
