/* cli: `loom gen lda`, the planted-corpus generator's command line (the
 * `loom gen` table in tools/gen.c hands it its arguments), read against the
 * flag table below, which also prints its help (apps/common). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/files.h"
#include "lda/lda.h"

static const app_flag flags[] = {
    APP_FLAG_GEN_OUT("corpus"),
    {.name = "--docs",
     .kind = APP_INT,
     .arg = "D",
     .lo = 1,
     .hi = 1099511627776.0,
     .def = "1000",
     .help = "number of documents"},
    {.name = "--vocab-size",
     .kind = APP_INT,
     .arg = "V",
     .lo = 1,
     .hi = 4294967296.0,
     .def = "2000",
     .help = "number of words, at least --topics"},
    {.name = "--topics",
     .kind = APP_INT,
     .arg = "K",
     .lo = 1,
     .hi = LDA_MAX_TOPICS,
     .def = "10",
     .help = "planted topics"},
    {.name = "--doc-length",
     .kind = APP_INT,
     .arg = "L",
     .lo = 1,
     .hi = 1000000,
     .def = "100",
     .help = "mean tokens per document, uniform in [L/2, 3L/2]"},
    {.name = "--alpha",
     .kind = APP_NUM,
     .arg = "A",
     .min = 1e-6,
     .max = 1e6,
     .def = "0.1",
     .help = "Dirichlet prior of the documents' topic mixes"},
    {.name = "--beta",
     .kind = APP_NUM,
     .arg = "B",
     .min = 1e-6,
     .max = 1e6,
     .def = "0.1",
     .help = "Dirichlet prior of a topic's weights in its block"},
    {.name = "--seed",
     .kind = APP_INT,
     .arg = "S",
     .lo = 0,
     .hi = 2147483647,
     .def = "1",
     .help = "random seed"},
    {.name = "--format",
     .kind = APP_CHOICE,
     .arg = "ldac|uci",
     .def = "ldac",
     .help = "LDA-C lines or UCI docword"},
    {.name = "--vocab-out",
     .kind = APP_TEXT,
     .arg = "FILE",
     .help = "also write the word names, one per line (for --vocab)"},
    {.name = "--quiet",
     .kind = APP_SWITCH,
     .help = "accepted for symmetry (gen lda prints nothing on success)"},
};
#define NFLAGS (sizeof flags / sizeof flags[0])

static void help(FILE *out)
{
    fputs("usage: loom gen lda --out FILE [options]\n"
          "\n"
          "Writes a bag-of-words corpus drawn from a planted LDA model whose topics use\n"
          "disjoint blocks of the vocabulary: a trained model's top words show whether it\n"
          "found them. Word names (--vocab-out) are tTT_wWWWW: planted topic TT, word WWWW of\n"
          "its block. The same options give the same file on every machine. See docs/LDA.md.\n"
          "\n"
          "options:\n",
          out);
    app_flags_help(out, flags, NFLAGS);
    fputs("\nExit status: 0 on success, 1 if writing failed, 2 for a usage error.\n", out);
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
    char err[256];
    app_flag_value v[NFLAGS];
    int parsed = app_command_flags("loom gen lda", flags, NFLAGS, v, argc, argv, help);
    if (parsed) return parsed < 0 ? 0 : parsed;
    const app_flag_value *x;
#define GIVEN(name) (x = app_flag_get(flags, NFLAGS, v, name))
    const char *out = GIVEN("--out") ? x->text : NULL;
    const char *vocab_out = GIVEN("--vocab-out") ? x->text : NULL;
    if (GIVEN("--docs")) o.docs = (uint64_t)x->u;
    if (GIVEN("--vocab-size")) o.vocab = (uint64_t)x->u;
    if (GIVEN("--topics")) o.topics = (uint32_t)x->u;
    if (GIVEN("--doc-length")) o.doc_length = (uint32_t)x->u;
    if (GIVEN("--alpha")) o.alpha = x->x;
    if (GIVEN("--beta")) o.beta = x->x;
    if (GIVEN("--seed")) o.seed = (uint64_t)x->u;
    if (GIVEN("--format")) o.format = x->choice ? LOOM_BOW_UCI : LOOM_BOW_LDAC;
#undef GIVEN
    if (!out || !out[0])
        return app_command_usage("loom gen lda", "--out FILE is required (- for standard output)");
    if (o.vocab < o.topics)
        return app_command_usage("loom gen lda", "--vocab-size must be at least --topics");
    app_out f;
    if (app_out_open(&f, "loom gen lda", out)) return 1;
    int rc = lda_generate(&o, f.f, err, sizeof err);
    if (rc) fprintf(stderr, "loom gen lda: %s: %s\n", app_out_name(&f), err);
    if (app_out_close(&f, "loom gen lda", rc != 0)) return 1;
    return vocab_out ? write_vocab(&o, vocab_out) : 0;
}
