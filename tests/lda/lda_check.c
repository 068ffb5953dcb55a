/* lda_check: the sequential reference of `loom train lda`, in-process, from
 * the same flags, for tests and benchmarks to compare a job with.
 *
 *   lda_check [--ll-out FILE] [--model-out FILE] -- TRAIN_FLAGS...
 *
 * TRAIN_FLAGS are those given to `loom train lda` (at least --train FILE).
 * Writes the log-likelihood of every evaluated iteration ("ITERATION LL",
 * LL with %.17g, as the job's metrics print it) and the final model in the
 * job's format, so a one-worker BSP job's files can be compared byte for
 * byte. Prints one line per evaluation with the sampling speed and the
 * process's CPU seconds so far (clock(): benchmarks read the time to a
 * log-likelihood from it), and with
 * --test the held-out perplexity of the final counts ("test perplexity P",
 * %.17g, scored as the job's last evaluation scores it). Exit 0, or 2 when
 * the flags or the data are bad. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <loom/loom.h>

#include "lda/lda.h"

typedef struct sink {
    FILE *ll;
    uint64_t tokens;
    int last;
} sink;

static void report(void *arg, int it, double ll, double sample_s)
{
    sink *s = arg;
    int iters = it - s->last;
    s->last = it;
    printf("lda_check: iteration %d log-likelihood %.17g %.0f tokens/s %.2f CPU s\n", it + 1, ll,
           sample_s > 0 ? (double)s->tokens * iters / sample_s : 0,
           (double)clock() / CLOCKS_PER_SEC);
    if (s->ll) fprintf(s->ll, "%d %.17g\n", it + 1, ll);
}

/* The held-out perplexity of the final counts, with the streams of the last
 * iteration's evaluation. */
static int test_perplexity(const lda_cli *cli, const lda_model *m)
{
    char err[512];
    loom_corpus *c;
    if (loom_bow_read(cli->job.test_path, 0, 1, &cli->data, &c, err, sizeof err)) {
        fprintf(stderr, "lda_check: %s\n", err);
        return 1;
    }
    const size_t K = m->p.topics;
    lda_heldout h;
    int32_t *rows = NULL;
    if (lda_heldout_build(c, m->p.vocab, &h) ||
        !(rows = malloc((h.d.nwords ? h.d.nwords : 1) * K * sizeof *rows))) {
        fprintf(stderr, "lda_check: out of memory\n");
        return 1;
    }
    for (size_t w = 0; w < h.d.nwords; w++) lda_rows_expand(&m->counts, h.d.vocab[w], rows + w * K);
    double ll =
        lda_heldout_ll(&m->p, &h, rows, m->totals, cli->train.seed, cli->train.iterations - 1);
    printf("lda_check: test perplexity %.17g\n", exp(-ll / (double)h.scored));
    free(rows);
    lda_heldout_free(&h);
    loom_corpus_free(c);
    return 0;
}

int main(int argc, char **argv)
{
    const char *ll_path = NULL, *model_path = NULL;
    int i = 1;
    for (; i + 1 < argc && strcmp(argv[i], "--"); i += 2) {
        if (!strcmp(argv[i], "--ll-out"))
            ll_path = argv[i + 1];
        else if (!strcmp(argv[i], "--model-out"))
            model_path = argv[i + 1];
        else
            break;
    }
    if (i >= argc || strcmp(argv[i], "--")) {
        fprintf(stderr, "usage: lda_check [--ll-out FILE] [--model-out FILE] -- TRAIN_FLAGS...\n");
        return 2;
    }
    lda_cli cli;
    char err[512];
    /* lda_parse_flags skips argv[0]: hand it the "--" as the command name. */
    if (lda_parse_flags(argc - i, argv + i, &cli, err, sizeof err)) {
        fprintf(stderr, "lda_check: %s\n", err);
        return 2;
    }
    loom_corpus *c;
    if (loom_bow_read(cli.job.train_path, 0, 1, &cli.data, &c, err, sizeof err)) {
        fprintf(stderr, "lda_check: %s\n", err);
        return 2;
    }
    /* The vocabulary size the job agrees on: the corpus's, or the --vocab file's if longer. */
    uint64_t vocab = c->vocab;
    lda_vocab names = {0};
    if (cli.vocab_path) {
        if (lda_vocab_load(cli.vocab_path, &names, err, sizeof err)) {
            fprintf(stderr, "lda_check: %s\n", err);
            return 2;
        }
        if (names.n > vocab) vocab = names.n;
    }
    sink s = {.tokens = c->tokens, .last = -1};
    if (ll_path && !(s.ll = fopen(ll_path, "w"))) {
        fprintf(stderr, "lda_check: cannot write %s\n", ll_path);
        return 2;
    }
    lda_model m;
    int rc = lda_train_sequential(&cli.train, c, vocab, report, &s, &m);
    if (rc) {
        fprintf(stderr, "lda_check: %s\n", loom_strerror(rc));
        return 2;
    }
    if (s.ll && fclose(s.ll)) return 2;
    if (cli.job.test_path && test_perplexity(&cli, &m)) return 2;
    if (model_path && lda_model_save(&m, model_path, err, sizeof err)) {
        fprintf(stderr, "lda_check: %s\n", err);
        return 2;
    }
    lda_model_free(&m);
    lda_vocab_free(&names);
    loom_corpus_free(c);
    return 0;
}
