/* cli: `loom gen mf` and `loom predict mf`.
 *
 * tools/gen.c and tools/predict.c each have one row pointing here, so the
 * matrix-factorisation commands live with the application they belong to.
 * Both take "--flag value" or "--flag=value", each flag once; usage errors
 * exit 2, failures to read or write exit 1. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <loom/loom.h>

#include "mf/mf.h"

const char mf_gen_help[] =
    "usage: loom gen mf --out FILE [options]\n"
    "\n"
    "Write ratings \"user item rating timestamp\" (TSV, ids 1-based, sorted by user then\n"
    "item, distinct pairs) from a planted model mean + b_u + b_i + p_u.q_i plus Gaussian\n"
    "noise, rounded to half stars in [0.5, 5] like MovieLens. User activity and item\n"
    "popularity follow power laws. The same options give the same file. See docs/MF.md.\n"
    "\n"
    "options:\n"
    "  --out FILE          where to write the ratings; - for standard output (required)\n"
    "  --users U           default 1000\n"
    "  --items I           default 2000\n"
    "  --ratings N         default 100000; at most U x I/3 (a user rates at most a\n"
    "                      third of the items)\n"
    "  --rank K            rank of the planted factors (default 8)\n"
    "  --noise S           standard deviation of the noise (default 0.5)\n"
    "  --seed S            default 1\n"
    "  --real              real-valued ratings (no rounding, no clipping)\n"
    "  --planted-out FILE  also save the planted model (a `loom predict mf` model): the\n"
    "                      RMSE it gets is the noise level, the best a model can do\n"
    "  --quiet             no progress messages\n"
    "\n"
    "Exit status: 0 on success, 1 if writing failed, 2 for a usage error.\n";

const char mf_predict_help[] =
    "usage: loom predict mf --model M --data RATINGS [--out FILE] [--format tsv|csv|space]\n"
    "\n"
    "Prints \"ratings N  rmse R  mae A  unknown_users U  unknown_items I\" for the ratings\n"
    "file: the errors of the model's predictions, clipped to the training ratings' range.\n"
    "Users or items the model has not seen get zero factors and bias (mean + the known\n"
    "bias). See docs/MF.md.\n"
    "\n"
    "options:\n"
    "  --model M       the model file of `loom train mf --model-out` (required)\n"
    "  --data FILE     ratings \"user item rating [timestamp]\" (required)\n"
    "  --out FILE      also write every rating's prediction, one per line in file order\n"
    "                  (%.6f); - for standard output (the summary then goes to stderr)\n"
    "  --format NAME   field separator: tsv, csv or space (default: detect)\n"
    "\n"
    "Exit status: 0 on success, 1 if a file could not be read or written, 2 for a\n"
    "usage error.\n";

static int usage(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int usage(const char *cmd, const char *fmt, ...)
{
    fprintf(stderr, "%s: ", cmd);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s --help'.\n", cmd);
    return 2;
}

/* Flags of one command: names, whether each takes a value, and the values. */
typedef struct flagset {
    const char *cmd;
    const char *const *names;
    const char *values[16];
    int n;
} flagset;

/* A flag's name without the '!' that marks a flag taking no value. */
static size_t name_len(const char *name)
{
    size_t n = strlen(name);
    return name[n - 1] == '!' ? n - 1 : n;
}

/* 0 parsed; 2 usage error (reported); -1 help printed. Flags without a
 * value (names ending in '!') get "" when present. */
static int parse(flagset *fs, int argc, char **argv, const char *help)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            fputs(help, stdout);
            return -1;
        }
        if (strncmp(arg, "--", 2)) return usage(fs->cmd, "unexpected argument '%s'", arg);
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        int f = 0;
        while (f < fs->n && !(name_len(fs->names[f]) == len && !strncmp(fs->names[f], arg, len)))
            f++;
        if (f == fs->n) return usage(fs->cmd, "unknown flag '%.*s'", (int)len, arg);
        if (fs->values[f]) return usage(fs->cmd, "%.*s given twice", (int)len, arg);
        if (fs->names[f][strlen(fs->names[f]) - 1] == '!') {
            if (eq) return usage(fs->cmd, "%.*s takes no value", (int)len, arg);
            fs->values[f] = "";
        } else if (eq) {
            fs->values[f] = eq + 1;
        } else if (i + 1 < argc) {
            fs->values[f] = argv[++i];
        } else {
            return usage(fs->cmd, "%s needs a value", arg);
        }
    }
    return 0;
}

static int get_u64(const char *cmd, const char *flag, const char *v, uint64_t lo, uint64_t hi,
                   uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = v[0] >= '0' && v[0] <= '9' ? strtoull(v, &end, 10) : 0;
    if (!(v[0] >= '0' && v[0] <= '9') || *end || errno || x < lo || x > hi)
        return usage(cmd, "%s takes a whole number from %llu to %llu, not '%s'", flag,
                     (unsigned long long)lo, (unsigned long long)hi, v);
    *out = x;
    return 0;
}

/* Open path for writing ("-": standard output); NULL after reporting why.
 * *regular says whether a failed write may remove it (never /dev/full or a FIFO). */
static FILE *open_out(const char *cmd, const char *path, int *regular)
{
    *regular = 0;
    if (!strcmp(path, "-")) return stdout;
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "%s: %s: cannot create: %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    *regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    return f;
}

/* Close (flush standard output); 1 after reporting a failed write. */
static int close_out(const char *cmd, const char *path, FILE *f, int regular, int failed)
{
    int bad = failed || ferror(f);
    if ((f == stdout ? fflush(f) : fclose(f)) != 0) bad = 1;
    if (bad) {
        fprintf(stderr, "%s: %s: write failed\n", cmd, f == stdout ? "standard output" : path);
        if (regular) remove(path);
    }
    return bad;
}

/* ---- loom gen mf ---- */

int mf_gen_main(int argc, char **argv)
{
    static const char *const names[] = {"--out",   "--users", "--items", "--ratings",
                                        "--rank",  "--noise", "--seed",  "--planted-out",
                                        "--real!", "--quiet!"};
    enum { OUT, USERS, ITEMS, RATINGS, RANK, NOISE, SEED, PLANTED, REAL, QUIET };
    const char *cmd = "loom gen mf";
    flagset fs = {.cmd = cmd, .names = names, .n = sizeof names / sizeof names[0]};
    int rc = parse(&fs, argc, argv, mf_gen_help);
    if (rc) return rc < 0 ? 0 : rc;
    mf_gen_opts o = MF_GEN_OPTS_DEFAULT;
    uint64_t rank = o.rank;
    const char **v = fs.values;
    if (!v[OUT] || !v[OUT][0]) return usage(cmd, "--out FILE is required (- for standard output)");
    if ((v[USERS] && get_u64(cmd, "--users", v[USERS], 1, 100000000, &o.users)) ||
        (v[ITEMS] && get_u64(cmd, "--items", v[ITEMS], 1, 100000000, &o.items)) ||
        (v[RATINGS] && get_u64(cmd, "--ratings", v[RATINGS], 1, 10000000000ull, &o.ratings)) ||
        (v[RANK] && get_u64(cmd, "--rank", v[RANK], 1, 1024, &rank)) ||
        (v[SEED] && get_u64(cmd, "--seed", v[SEED], 0, UINT64_MAX, &o.seed)))
        return 2;
    o.rank = (uint32_t)rank;
    if (v[NOISE]) {
        char *end;
        o.noise = strtod(v[NOISE], &end);
        if (end == v[NOISE] || *end || !(o.noise >= 0 && o.noise <= 100))
            return usage(cmd, "--noise takes a number from 0 to 100, not '%s'", v[NOISE]);
    }
    if (v[PLANTED] && !v[PLANTED][0]) return usage(cmd, "--planted-out expects a file name");
    o.real = v[REAL] != NULL;
    int regular;
    FILE *f = open_out(cmd, v[OUT], &regular);
    if (!f) return 1;
    static char buf[1 << 20];
    setvbuf(f, buf, _IOFBF, sizeof buf);
    char err[512];
    mf_model planted = {0};
    rc = mf_generate(&o, f, v[PLANTED] ? &planted : NULL, !v[QUIET], err, sizeof err);
    if (rc) {
        if (f != stdout) fclose(f);
        if (regular) remove(v[OUT]);
        if (rc == 2) return usage(cmd, "%s", err);
        fprintf(stderr, "%s: %s: %s\n", cmd, v[OUT], err);
        return 1;
    }
    if (close_out(cmd, v[OUT], f, regular, 0)) {
        mf_model_free(&planted);
        return 1;
    }
    if (v[PLANTED]) {
        rc = mf_model_save(&planted, v[PLANTED], err, sizeof err);
        mf_model_free(&planted);
        if (rc) {
            fprintf(stderr, "%s: %s\n", cmd, err);
            return 1;
        }
    }
    return 0;
}

/* ---- loom predict mf ---- */

int mf_predict_main(int argc, char **argv)
{
    static const char *const names[] = {"--model", "--data", "--out", "--format"};
    enum { MODEL, DATA, OUT, FORMAT };
    const char *cmd = "loom predict mf";
    flagset fs = {.cmd = cmd, .names = names, .n = sizeof names / sizeof names[0]};
    int rc = parse(&fs, argc, argv, mf_predict_help);
    if (rc) return rc < 0 ? 0 : rc;
    const char **v = fs.values;
    if (!v[MODEL] || !v[MODEL][0]) return usage(cmd, "--model M is required");
    if (!v[DATA] || !v[DATA][0]) return usage(cmd, "--data FILE is required");
    loom_ratings_opts ro = LOOM_RATINGS_OPTS_DEFAULT;
    if (v[FORMAT]) {
        if (!strcmp(v[FORMAT], "tsv"))
            ro.separator = '\t';
        else if (!strcmp(v[FORMAT], "csv"))
            ro.separator = ',';
        else if (!strcmp(v[FORMAT], "space"))
            ro.separator = ' ';
        else
            return usage(cmd, "--format takes tsv, csv or space, not '%s'", v[FORMAT]);
    }
    char err[1024];
    mf_model m;
    if (mf_model_load(v[MODEL], &m, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        return 1;
    }
    loom_ratings *r;
    if (loom_ratings_read(v[DATA], 0, 1, &ro, &r, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", cmd, err);
        mf_model_free(&m);
        return 1;
    }
    rc = 0;
    FILE *f = NULL;
    int regular = 0;
    if (r->n == 0) {
        fprintf(stderr, "%s: %s: no ratings\n", cmd, v[DATA]);
        rc = 1;
    } else if (v[OUT] && !(f = open_out(cmd, v[OUT], &regular))) {
        rc = 1;
    }
    double sse = 0, sae = 0;
    size_t unknown_u = 0, unknown_i = 0;
    /* Every id of the file, looked up once (the reader's indices are dense). */
    int64_t *umap = malloc((r->users ? r->users : 1) * sizeof *umap);
    int64_t *imap = malloc((r->items ? r->items : 1) * sizeof *imap);
    if (!rc && (!umap || !imap)) {
        fprintf(stderr, "%s: out of memory\n", cmd);
        rc = 1;
    }
    for (size_t u = 0; !rc && u < r->users; u++) {
        umap[u] = mf_model_user(&m, r->user_id[u]);
        unknown_u += umap[u] < 0;
    }
    for (size_t i = 0; !rc && i < r->items; i++) {
        imap[i] = mf_model_item(&m, r->item_id[i]);
        unknown_i += imap[i] < 0;
    }
    for (size_t k = 0; !rc && k < r->n; k++) {
        double p = mf_model_predict(&m, umap[r->user[k]], imap[r->item[k]]);
        double e = r->rating[k] - p;
        sse += e * e;
        sae += fabs(e);
        if (f) fprintf(f, "%.6f\n", p);
    }
    if (f && close_out(cmd, v[OUT], f, regular, rc)) rc = 1;
    if (!rc) {
        FILE *summary = f == stdout ? stderr : stdout;
        fprintf(summary, "ratings %zu  rmse %.6f  mae %.6f  unknown_users %zu  unknown_items %zu\n",
                r->n, sqrt(sse / (double)r->n), sae / (double)r->n, unknown_u, unknown_i);
        if (fflush(summary)) rc = 1;
    }
    free(umap);
    free(imap);
    loom_ratings_free(r);
    mf_model_free(&m);
    return rc;
}
