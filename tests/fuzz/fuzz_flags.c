/* fuzz_flags: the command lines of `loom train lr|mf|lda|lasso` and the flag table parser
 * behind them and `loom run` (apps/common/flags.c), fed hostile arguments.
 *
 * Built two ways like fuzz_decode.c: a libFuzzer target (LOOM_FUZZ=ON, clang) and, in
 * every build, a plain replay driver (LOOM_FUZZ_DRIVER; corpus_flags/).
 *
 * Input: byte 0 picks the parser (byte0 % 4: lr, or lasso when bit 3 is set, mf, lda, or
 * app_flags_parse on a table of every kind of flag below, with a PROGRAM when bit 2 is
 * set, as `loom run` reads it); the rest is the arguments, separated by NUL bytes (at
 * most MAX_ARGS).
 *
 * Checks, for every input (besides the sanitizers'):
 *   - a parser returns 0, APP_FLAGS_HELP, or 2 with a sentence in err;
 *   - on the table below, what app_flags_parse accepts keeps the table's rules: every
 *     value given is in the flag's range or among its choices, as the command line spelt
 *     it (--name value or --name=value), no flag twice, no two flags that exclude each
 *     other, and PROGRAM (when asked for) the first argument that is not a flag;
 *   - its help prints. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_driver.h"
#include "lasso/lasso.h"
#include "lda/lda.h"
#include "lr/lr.h"
#include "mf/mf.h"

#define MAX_ARGS 32

/* One flag of every kind, whole-number ranges at both ends of uint64, and a pair that
 * excludes each other. */
static const app_flag table[] = {
    {.section = "test:", .name = "--on", .kind = APP_SWITCH, .help = "a switch"},
    {.name = "--count", .kind = APP_INT, .arg = "N", .lo = 5, .hi = 1000, .help = "an int"},
    {.name = "--big", .kind = APP_INT, .arg = "N", .lo = 0, .hi = UINT64_MAX, .help = "wide"},
    {.name = "--rate", .kind = APP_NUM, .arg = "X", .min = 0, .max = 1, .help = "a number"},
    {.name = "--name", .kind = APP_TEXT, .arg = "S", .help = "a text\non two lines"},
    {.name = "--mode", .kind = APP_CHOICE, .arg = "a|bb|ccc", .help = "a choice"},
    {.name = "--left", .kind = APP_SWITCH, .help = "one side", .excludes = "--right"},
    {.name = "--right", .kind = APP_SWITCH, .help = "the other"},
};
#define NTABLE (sizeof table / sizeof *table)

static struct {
    unsigned long parsed[5], refused[5], help[5];
} stats;

/* The flag an argument names ("--name" or "--name=value"), or NULL. */
static const app_flag *named(const char *arg)
{
    size_t len = strcspn(arg, "=");
    for (size_t f = 0; f < NTABLE; f++)
        if (strlen(table[f].name) == len && !strncmp(table[f].name, arg, len)) return &table[f];
    return NULL;
}

/* Parses with the table and checks what it accepted; returns the parser's result. */
static int check_table(int argc, char **argv, int with_program, char *err, size_t errlen)
{
    app_flag_value v[NTABLE];
    int program = -1;
    int rc = app_flags_parse(table, NTABLE, argc, argv, 1, v, with_program ? &program : NULL, err,
                             errlen);
    if (rc) return rc;
    int given[NTABLE] = {0};
    int end = with_program ? program : argc;
    FUZZ_CHECK(end >= 1 && end <= argc);
    for (int i = 1; i < end; i++) {
        if (with_program && !strcmp(argv[i], "--")) {
            FUZZ_CHECK(i + 1 == end);
            break;
        }
        const app_flag *f = named(argv[i]);
        FUZZ_CHECK(f != NULL);
        size_t k = (size_t)(f - table);
        FUZZ_CHECK(!given[k]++);
        const app_flag_value *x = &v[k];
        const char *eq = strchr(argv[i], '=');
        const char *text = f->kind == APP_SWITCH ? "" : eq ? eq + 1 : argv[++i];
        FUZZ_CHECK(x->text && !strcmp(x->text, text));
        if (f->kind == APP_INT) FUZZ_CHECK(x->u >= f->lo && x->u <= f->hi);
        if (f->kind == APP_NUM) FUZZ_CHECK(x->x >= f->min && x->x <= f->max);
        if (f->kind == APP_CHOICE) {
            static const char *const choices[] = {"a", "bb", "ccc"};
            FUZZ_CHECK(x->choice < 3 && !strcmp(choices[x->choice], text));
        }
        if (f->kind == APP_TEXT) FUZZ_CHECK(text[0]);
    }
    for (size_t k = 0; k < NTABLE; k++) FUZZ_CHECK(!v[k].text == !given[k]);
    FUZZ_CHECK(!(given[6] && given[7]));
    if (with_program) {
        FUZZ_CHECK(program < argc);
        FUZZ_CHECK(!strcmp(argv[program - 1], "--") || argv[program][0] != '-' ||
                   !argv[program][1]);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!size) return 0;
    int which = data[0] % 4, with_program = data[0] & 4;
    if (which == 0 && (data[0] & 8)) which = 4; /* lasso */
    /* The arguments, each a NUL-terminated copy of its own. */
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    static const char *const commands[] = {"train lr", "train mf", "train lda", "train lda",
                                           "train lasso"};
    argv[argc++] = strdup(commands[which]);
    for (size_t pos = 1; pos <= size && argc < MAX_ARGS;) {
        const uint8_t *nul = memchr(data + pos, 0, size - pos);
        size_t len = nul ? (size_t)(nul - (data + pos)) : size - pos;
        if (pos == size && !nul) break;
        char *a = malloc(len + 1);
        FUZZ_CHECK(a != NULL);
        memcpy(a, data + pos, len);
        a[len] = '\0';
        argv[argc++] = a;
        pos += len + 1;
    }
    argv[argc] = NULL;
    char err[1024] = "";
    int rc;
    switch (which) {
    case 0: {
        lr_cli c;
        rc = lr_parse_flags(argc, argv, &c, err, sizeof err);
        break;
    }
    case 1: {
        mf_cli c;
        rc = mf_parse_flags(argc, argv, &c, err, sizeof err);
        break;
    }
    case 2: {
        lda_cli c;
        rc = lda_parse_flags(argc, argv, &c, err, sizeof err);
        break;
    }
    case 4: {
        lasso_cli c;
        rc = lasso_parse_flags(argc, argv, &c, err, sizeof err);
        /* What it accepts keeps the engine's own rules that flags can check. */
        if (rc == 0)
            FUZZ_CHECK(c.parallel >= 1 && c.depth >= 1 && c.rho >= 0 && c.rho <= 1 &&
                       (!c.candidates || c.candidates >= c.parallel) &&
                       !(c.sequential && c.in_process));
        break;
    }
    default:
        rc = check_table(argc, argv, with_program, err, sizeof err);
        break;
    }
    FUZZ_CHECK(rc == 0 || rc == APP_FLAGS_HELP || (rc == 2 && err[0]));
    if (rc == 0)
        stats.parsed[which]++;
    else if (rc == 2)
        stats.refused[which]++;
    else
        stats.help[which]++;
    for (int i = 0; i < argc; i++) free(argv[i]);
    return 0;
}

#ifdef LOOM_FUZZ_DRIVER
/* ---- the plain driver: command lines, truncations, random and mutated ---- */

typedef fuzz_input input;

#define MAX_SEEDS 16

static struct {
    input in[MAX_SEEDS];
    const char *name[MAX_SEEDS];
    int n;
} seeds;

/* A seed: parser byte, then the arguments (a NULL-terminated list). */
static void seed_add(const char *name, uint8_t which, const char *const *args)
{
    FUZZ_CHECK(seeds.n < MAX_SEEDS);
    input *in = &seeds.in[seeds.n];
    seeds.name[seeds.n++] = name;
    in->len = 0;
    in->buf[in->len++] = which;
    for (int i = 0; args[i]; i++) {
        size_t len = strlen(args[i]);
        FUZZ_CHECK(in->len + len + 1 <= sizeof in->buf);
        if (i) in->buf[in->len++] = 0;
        memcpy(in->buf + in->len, args[i], len);
        in->len += len;
    }
}

static void make_seeds(void)
{
    seed_add("lr", 0,
             (const char *[]){"--train", "a.svm", "--test=b.svm", "--workers", "4", "--algo",
                              "dbpg", "--blocks", "8", "--delay=2", "--l1", "1e-4", "--zero-based",
                              "--model-out", "m.txt", "--quiet", NULL});
    seed_add("lr_sgd", 0,
             (const char *[]){"--train", "a.svm", "--updater", "ftrl", "--minibatch", "100",
                              "--consistency", "ssp:3", "--seed=7", "--lr", "0.5", NULL});
    seed_add("lr_bad", 0, (const char *[]){"--train", "a", "--epochs", "-1", "--bogus", NULL});
    seed_add("mf", 1,
             (const char *[]){"--train", "r.csv", "--rank", "8", "--epochs=3", "--lr-decay", "0.9",
                              "--merge", "sum", "--test-fraction", "0.2", "--format", "csv", NULL});
    seed_add("lda", 2,
             (const char *[]){"--train", "c.ldac", "--vocab", "v.txt", "--topics", "20",
                              "--alpha=0.5", "--iterations", "10", "--syncs", "2", "--eval-every",
                              "0", "--top-words", "5", "--format", "uci", NULL});
    seed_add("help", 2, (const char *[]){"--train", "x", "--help", NULL});
    seed_add("table", 3,
             (const char *[]){"--on", "--count", "5", "--big=18446744073709551615", "--rate", "1",
                              "--name", "x y", "--mode=ccc", "--left", NULL});
    seed_add("table_program", 3 | 4,
             (const char *[]){"--count=7", "--rate", "0.25", "prog", "--on", "--on", NULL});
    seed_add("table_dashdash", 3 | 4, (const char *[]){"--mode", "bb", "--", "-x", NULL});
    seed_add("table_bad", 3,
             (const char *[]){"--left", "--right", "--count", "1001", "--rate=nan", NULL});
    seed_add("lasso", 8,
             (const char *[]){"--train", "a.svm", "--schedule", "dynamic", "--parallel", "8",
                              "--candidates=32", "--rho", "0.1", "--depth", "3", "--workers", "2",
                              "--lambda", "0.5", "--reference", "r.model", NULL});
    seed_add("lasso_bad", 8,
             (const char *[]){"--train", "a.svm", "--sequential", "--schedule", "random",
                              "--candidates", "2", NULL});
}

static const char *seed(int i, input *in)
{
    *in = seeds.in[i];
    return seeds.name[i];
}

/* One random edit: a bit, a character of command lines, an insertion, a deletion or a
 * truncation; or another parser. */
static void mutate(input *in)
{
    static const char chars[] = "-=0123456789.e\0abx:";
    if (fuzz_rng() % 6 == 0 && in->len)
        in->buf[0] = (uint8_t)fuzz_rng();
    else
        fuzz_edit(in, 1, chars, sizeof chars - 1);
}

static void check_seeds(void)
{
    for (int k = 0; k < 5; k++) FUZZ_CHECK(stats.parsed[k] >= 1 && stats.refused[k] >= 1);
    FUZZ_CHECK(stats.help[2] >= 1);
    FILE *null = fopen("/dev/null", "w");
    FUZZ_CHECK(null != NULL);
    app_flags_help(null, table, NTABLE);
    lr_train_help(null);
    mf_train_help(null);
    fclose(null);
}

static void report(void)
{
    printf("parsed/refused: lr %lu/%lu, mf %lu/%lu, lda %lu/%lu, table %lu/%lu, lasso %lu/%lu\n",
           stats.parsed[0], stats.refused[0], stats.parsed[1], stats.refused[1], stats.parsed[2],
           stats.refused[2], stats.parsed[3], stats.refused[3], stats.parsed[4], stats.refused[4]);
}

int main(int argc, char **argv)
{
    make_seeds();
    return fuzz_driver_main(argc, argv,
                            &(fuzz_target){.name = "fuzz_flags",
                                           .rng_seed = 0x464C414753u,
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
