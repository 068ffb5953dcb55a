/* cli: `loom gen lda`, the planted-corpus generator's command line (the
 * `loom gen` table in tools/gen.c hands it its arguments). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "lda/lda.h"

const char lda_gen_help[] =
    "loom gen lda --out FILE [OPTIONS]\n"
    "\n"
    "Writes a bag-of-words corpus drawn from a planted LDA model whose topics use\n"
    "disjoint blocks of the vocabulary: a trained model's top words show whether it\n"
    "found them. Word names (--vocab-out) are tTT_wWWWW: planted topic TT, word WWWW of\n"
    "its block. The same options give the same file on every machine. See docs/LDA.md.\n"
    "\n"
    "Options:\n"
    "  --out FILE          where to write the corpus; - for standard output (required)\n"
    "  --docs D            number of documents (default 1000)\n"
    "  --vocab-size V      number of words, at least --topics (default 2000)\n"
    "  --topics K          planted topics (default 10)\n"
    "  --doc-length L      mean tokens per document, uniform in [L/2, 3L/2] (default 100)\n"
    "  --alpha A           Dirichlet prior of the documents' topic mixes (default 0.1)\n"
    "  --beta B            Dirichlet prior of a topic's weights in its block (default 0.1)\n"
    "  --seed S            random seed (default 1)\n"
    "  --format ldac|uci   LDA-C lines (default) or UCI docword\n"
    "  --vocab-out FILE    also write the word names, one per line (for --vocab)\n"
    "  --quiet             accepted for symmetry (gen lda prints nothing on success)\n"
    "  -h, --help          show this help\n"
    "\n"
    "Exit status: 0 on success, 1 if writing failed, 2 for a usage error.\n";

static int usage(const char *msg)
{
    fprintf(stderr, "loom gen lda: %s\nTry 'loom gen lda --help'.\n", msg);
    return 2;
}

static int write_vocab(const lda_gen_opts *o, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "loom gen lda: %s: cannot create: %s\n", path, strerror(errno));
        return 1;
    }
    char name[64];
    for (uint64_t w = 0; w < o->vocab; w++) {
        lda_gen_word_name(o, w, name, sizeof name);
        fprintf(f, "%s\n", name);
    }
    if (ferror(f) | fclose(f)) {
        fprintf(stderr, "loom gen lda: %s: write failed\n", path);
        return 1;
    }
    return 0;
}

int lda_gen_main(int argc, char **argv)
{
    lda_gen_opts o = LDA_GEN_OPTS_DEFAULT;
    const char *out = NULL, *vocab_out = NULL;
    char err[256];
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            fputs(lda_gen_help, stdout);
            return 0;
        }
        if (!strcmp(f, "--quiet")) continue;
        if (i + 1 >= argc) {
            snprintf(err, sizeof err, "%s needs a value", f);
            return usage(strncmp(f, "--", 2) ? "unexpected argument" : err);
        }
        const char *v = argv[++i];
        long n = 0;
        double x = 0;
        int rc = 0;
        if (!strcmp(f, "--out")) {
            out = v;
        } else if (!strcmp(f, "--vocab-out")) {
            vocab_out = v;
        } else if (!strcmp(f, "--docs")) {
            if (!(rc = app_parse_int(f, v, 1, 1L << 40, &n, err, sizeof err))) o.docs = (uint64_t)n;
        } else if (!strcmp(f, "--vocab-size")) {
            if (!(rc = app_parse_int(f, v, 1, 1L << 32, &n, err, sizeof err)))
                o.vocab = (uint64_t)n;
        } else if (!strcmp(f, "--topics")) {
            if (!(rc = app_parse_int(f, v, 1, LDA_MAX_TOPICS, &n, err, sizeof err)))
                o.topics = (uint32_t)n;
        } else if (!strcmp(f, "--doc-length")) {
            if (!(rc = app_parse_int(f, v, 1, 1000000, &n, err, sizeof err)))
                o.doc_length = (uint32_t)n;
        } else if (!strcmp(f, "--alpha")) {
            if (!(rc = app_parse_num(f, v, 1e-6, 1e6, &x, err, sizeof err))) o.alpha = x;
        } else if (!strcmp(f, "--beta")) {
            if (!(rc = app_parse_num(f, v, 1e-6, 1e6, &x, err, sizeof err))) o.beta = x;
        } else if (!strcmp(f, "--seed")) {
            if (!(rc = app_parse_int(f, v, 0, 2147483647L, &n, err, sizeof err)))
                o.seed = (uint64_t)n;
        } else if (!strcmp(f, "--format")) {
            if (!strcmp(v, "ldac"))
                o.format = LOOM_BOW_LDAC;
            else if (!strcmp(v, "uci"))
                o.format = LOOM_BOW_UCI;
            else
                rc = app_usage(err, sizeof err, "--format takes ldac or uci, not '%s'", v);
        } else {
            snprintf(err, sizeof err, "unknown option '%s'", f);
            rc = 2;
        }
        if (rc) return usage(err);
    }
    if (!out || !out[0]) return usage("--out FILE is required (- for standard output)");
    if (o.vocab < o.topics) return usage("--vocab-size must be at least --topics");
    int to_stdout = !strcmp(out, "-");
    FILE *f = to_stdout ? stdout : fopen(out, "w");
    if (!f) {
        fprintf(stderr, "loom gen lda: %s: cannot create: %s\n", out, strerror(errno));
        return 1;
    }
    struct stat st;
    int regular = !to_stdout && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    int rc = lda_generate(&o, f, err, sizeof err);
    int closed = to_stdout ? fflush(f) : fclose(f);
    if (!rc && closed) {
        snprintf(err, sizeof err, "write failed: %s", strerror(errno));
        rc = -1;
    }
    if (rc) {
        fprintf(stderr, "loom gen lda: %s: %s\n", to_stdout ? "standard output" : out, err);
        if (regular) remove(out); /* no half-written corpus left behind */
        return 1;
    }
    return vocab_out ? write_vocab(&o, vocab_out) : 0;
}
