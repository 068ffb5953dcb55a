/* fuzz_readers: the dataset readers (ratings, bag-of-words, LIBSVM) fed arbitrary files.
 *
 * Built two ways from this one file, like fuzz_decode.c (tests/fuzz/CMakeLists.txt):
 *   - with LOOM_FUZZ=ON and clang: a libFuzzer target (-fsanitize=fuzzer,address,undefined);
 *   - always: a plain driver (LOOM_FUZZ_DRIVER) whose main() replays the seed corpus
 *     (tests/fuzz/corpus_readers/), every truncation of every built-in seed and a few
 *     thousand deterministic random and mutated inputs; `--write-seeds DIR` writes the seeds.
 *
 * Input layout: byte 0 picks the reader and its options, the rest is the file:
 *   bits 0-1  reader: 0 ratings, 1 bag-of-words, 2 LIBSVM, 3 bag-of-words
 *   bit  2    skip_bad
 *   bits 3-4  shares n - 1 (1 to 4)
 *   bits 5-6  ratings: separator auto, ',', '\t', ' '; bow: format AUTO, LDAC, UCI, AUTO;
 *             LIBSVM: ids AUTO, one-based, zero-based, AUTO
 *   bit  7    LIBSVM: real labels
 * The readers take a path, so the file is written to one scratch file per process
 * (in /dev/shm when there is one) and read as one share and as n shares.
 *
 * Checks, for every input (the sanitizers watch every read of the mapping, which ends
 * exactly at the file's last byte):
 *   - an error has a message naming the file, and no result;
 *   - a result is well formed: ratings' indices below users/items, ids strictly
 *     ascending, line numbers ascending from first_line, ratings finite; a corpus' offsets
 *     non-decreasing up to nnz, counts >= 1, word ids below vocab, tokens the sum of the
 *     counts; LIBSVM rows likewise, ids ascending within a row and below max_feature;
 *   - if the single-share read succeeds, so does every one of the n shares, and the
 *     shares in order are exactly the single read: same ratings and the same id mapping
 *     in every share; same documents with first_doc counting those before; same rows.
 *
 * A UCI header may ask for up to 2^32 - 1 documents, which the last share holds (8 bytes
 * each, empty): inputs whose first number is above 10^5 are not given to the
 * bag-of-words reader, to stay within libFuzzer's memory limit. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_driver.h"
#include "loom/data.h"
#include "loom/error.h"

/* What read successfully, so the driver can tell its seeds reach the parsers' success
 * paths. */
static struct {
    unsigned long ratings_ok, bow_ok, libsvm_ok;
} stats;

/* ---- the scratch file ---- */

static char scratch[256];

static void remove_scratch(void)
{
    unlink(scratch);
}

static void write_scratch(const uint8_t *p, size_t len)
{
    if (!scratch[0]) {
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
        snprintf(scratch, sizeof scratch, "%s/loom-fuzz-readers-%ld", dir ? dir : "/tmp",
                 (long)getpid());
        atexit(remove_scratch);
    }
    FILE *f = fopen(scratch, "wb");
    FUZZ_CHECK(f != NULL);
    FUZZ_CHECK(len == 0 || fwrite(p, 1, len, f) == len);
    FUZZ_CHECK(fclose(f) == 0);
}

static void check_error(int rc, const void *out, const char *err)
{
    FUZZ_CHECK(rc > 0 && rc < LOOM_ERROR_COUNT_);
    FUZZ_CHECK(out == NULL);
    FUZZ_CHECK(strncmp(err, scratch, strlen(scratch)) == 0 && err[strlen(scratch)] == ':');
}

/* ---- ratings ---- */

static void check_ratings(const loom_ratings *r)
{
    for (size_t u = 1; u < r->users; u++) FUZZ_CHECK(r->user_id[u - 1] < r->user_id[u]);
    for (size_t i = 1; i < r->items; i++) FUZZ_CHECK(r->item_id[i - 1] < r->item_id[i]);
    for (size_t k = 0; k < r->n; k++) {
        FUZZ_CHECK(r->user[k] < r->users && r->item[k] < r->items);
        FUZZ_CHECK(isfinite(r->rating[k]));
        FUZZ_CHECK(r->line[k] >= r->first_line && (k == 0 || r->line[k] > r->line[k - 1]));
        FUZZ_CHECK(loom_ratings_user_index(r, r->user_id[r->user[k]]) == r->user[k]);
    }
}

static void fuzz_ratings(unsigned sel, int n)
{
    static const char seps[4] = {0, ',', '\t', ' '};
    loom_ratings_opts o = {seps[(sel >> 5) & 3], (sel >> 2) & 1};
    loom_ratings *all = NULL, *r = NULL;
    char err[512] = "";
    int rc = loom_ratings_read(scratch, 0, 1, &o, &all, err, sizeof err);
    if (rc) {
        check_error(rc, all, err);
        return;
    }
    stats.ratings_ok++;
    check_ratings(all);
    size_t k = 0, skipped = 0;
    for (int i = 0; i < n; i++) {
        rc = loom_ratings_read(scratch, i, n, &o, &r, err, sizeof err);
        FUZZ_CHECK(rc == 0);
        check_ratings(r);
        FUZZ_CHECK(r->users == all->users && r->items == all->items);
        FUZZ_CHECK(!memcmp(r->user_id, all->user_id, all->users * sizeof *r->user_id));
        FUZZ_CHECK(!memcmp(r->item_id, all->item_id, all->items * sizeof *r->item_id));
        FUZZ_CHECK(k + r->n <= all->n);
        FUZZ_CHECK(r->n == 0 || !memcmp(r->user, all->user + k, r->n * sizeof *r->user));
        FUZZ_CHECK(r->n == 0 || !memcmp(r->item, all->item + k, r->n * sizeof *r->item));
        FUZZ_CHECK(r->n == 0 || !memcmp(r->rating, all->rating + k, r->n * sizeof *r->rating));
        FUZZ_CHECK(r->n == 0 || !memcmp(r->line, all->line + k, r->n * sizeof *r->line));
        k += r->n;
        skipped += r->skipped;
        loom_ratings_free(r);
    }
    FUZZ_CHECK(k == all->n && skipped == all->skipped);
    loom_ratings_free(all);
}

/* ---- bag of words ---- */

static void check_corpus(const loom_corpus *c)
{
    uint64_t tokens = 0;
    FUZZ_CHECK(c->doc[0] == 0 && c->doc[c->docs] == c->nnz);
    FUZZ_CHECK(c->format == LOOM_BOW_LDAC || c->format == LOOM_BOW_UCI);
    for (size_t d = 0; d < c->docs; d++) FUZZ_CHECK(c->doc[d] <= c->doc[d + 1]);
    for (size_t k = 0; k < c->nnz; k++) {
        FUZZ_CHECK(c->count[k] >= 1 && c->word[k] < c->vocab);
        tokens += c->count[k];
    }
    FUZZ_CHECK(tokens == c->tokens);
}

/* Whether the file's first number (after blanks and blank lines) exceeds 10^5. */
static int big_first_number(const uint8_t *p, size_t len)
{
    size_t i = 0;
    while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n')) i++;
    uint64_t v = 0;
    for (; i < len && p[i] >= '0' && p[i] <= '9'; i++)
        if (v <= 100000) v = v * 10 + (uint64_t)(p[i] - '0');
    return v > 100000;
}

static void fuzz_bow(unsigned sel, int n)
{
    static const loom_bow_format fmts[4] = {LOOM_BOW_AUTO, LOOM_BOW_LDAC, LOOM_BOW_UCI,
                                            LOOM_BOW_AUTO};
    loom_bow_opts o = {fmts[(sel >> 5) & 3], (sel >> 2) & 1};
    loom_corpus *all = NULL, *c = NULL;
    char err[512] = "";
    int rc = loom_bow_read(scratch, 0, 1, &o, &all, err, sizeof err);
    if (rc) {
        check_error(rc, all, err);
        return;
    }
    stats.bow_ok++;
    check_corpus(all);
    size_t docs = 0, nnz = 0, skipped = 0;
    for (int i = 0; i < n; i++) {
        rc = loom_bow_read(scratch, i, n, &o, &c, err, sizeof err);
        FUZZ_CHECK(rc == 0);
        check_corpus(c);
        FUZZ_CHECK(c->format == all->format && c->first_doc == docs);
        FUZZ_CHECK(docs + c->docs <= all->docs);
        for (size_t d = 0; d < c->docs; d++)
            FUZZ_CHECK(c->doc[d + 1] - c->doc[d] == all->doc[docs + d + 1] - all->doc[docs + d]);
        FUZZ_CHECK(c->nnz == 0 || !memcmp(c->word, all->word + nnz, c->nnz * sizeof *c->word));
        FUZZ_CHECK(c->nnz == 0 || !memcmp(c->count, all->count + nnz, c->nnz * sizeof *c->count));
        if (c->format == LOOM_BOW_UCI) FUZZ_CHECK(c->vocab == all->vocab);
        docs += c->docs;
        nnz += c->nnz;
        skipped += c->skipped;
        loom_corpus_free(c);
    }
    FUZZ_CHECK(docs == all->docs && nnz == all->nnz && skipped == all->skipped);
    loom_corpus_free(all);
}

/* ---- LIBSVM ---- */

static void check_dataset(const loom_dataset *d)
{
    FUZZ_CHECK(d->row[0] == 0 && d->row[d->rows] == d->nnz);
    for (size_t i = 0; i < d->rows; i++) {
        FUZZ_CHECK(d->row[i] <= d->row[i + 1] && isfinite(d->label[i]));
        for (size_t k = d->row[i]; k < d->row[i + 1]; k++) {
            FUZZ_CHECK(k == d->row[i] || d->idx[k - 1] < d->idx[k]);
            FUZZ_CHECK(d->idx[k] < d->max_feature && isfinite(d->val[k]));
        }
    }
}

static void fuzz_libsvm(unsigned sel, int n)
{
    static const loom_id_base ids[4] = {LOOM_IDS_AUTO, LOOM_IDS_ONE_BASED, LOOM_IDS_ZERO_BASED,
                                        LOOM_IDS_AUTO};
    loom_libsvm_opts o = {ids[(sel >> 5) & 3], sel >> 7 ? LOOM_LABELS_REAL : LOOM_LABELS_CLASS, 0,
                          (sel >> 2) & 1};
    loom_dataset *all = NULL, *d = NULL;
    char err[512] = "";
    int rc = loom_libsvm_read(scratch, 0, 1, &o, &all, err, sizeof err);
    if (rc) {
        check_error(rc, all, err);
        return;
    }
    stats.libsvm_ok++;
    check_dataset(all);
    size_t rows = 0, nnz = 0;
    for (int i = 0; i < n; i++) {
        rc = loom_libsvm_read(scratch, i, n, &o, &d, err, sizeof err);
        FUZZ_CHECK(rc == 0);
        check_dataset(d);
        FUZZ_CHECK(rows + d->rows <= all->rows);
        FUZZ_CHECK(d->rows == 0 ||
                   !memcmp(d->label, all->label + rows, d->rows * sizeof *d->label));
        FUZZ_CHECK(d->nnz == 0 || !memcmp(d->idx, all->idx + nnz, d->nnz * sizeof *d->idx));
        FUZZ_CHECK(d->nnz == 0 || !memcmp(d->val, all->val + nnz, d->nnz * sizeof *d->val));
        rows += d->rows;
        nnz += d->nnz;
        loom_dataset_free(d);
    }
    FUZZ_CHECK(rows == all->rows && nnz == all->nnz);
    loom_dataset_free(all);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    unsigned sel = data[0];
    int n = 1 + (int)((sel >> 3) & 3);
    write_scratch(data + 1, size - 1);
    switch (sel & 3) {
    case 0:
        fuzz_ratings(sel, n);
        break;
    case 2:
        fuzz_libsvm(sel, n);
        break;
    default:
        if (!big_first_number(data + 1, size - 1)) fuzz_bow(sel, n);
        break;
    }
    return 0;
}

#ifdef LOOM_FUZZ_DRIVER
/* ---- the plain driver ---- */

typedef fuzz_input input;

/* The seeds: a selector byte and a small file each, reaching every reader's success
 * path in several shapes. */
static const struct {
    const char *name;
    unsigned sel;
    const char *text;
} seeds[] = {
    {"ratings_csv", 0x18,
     "userId,movieId,rating,timestamp\n1,31,2.5,1260759144\n"
     "1,1029,3.0,1260759179\n2,10,4.0,835355493\n7,31,-0.5e1,0\n"},
    {"ratings_tab", 0x08, "196\t242\t3\t881250949\n186\t302\t3\t891717742\r\n22\t377\t1\n"},
    {"ratings_spaces", 0x7c, "1 2 3\n\n-4  5\t6.25\n1 5 x\n9223372036854775807 2 1e-3"},
    {"ldac", 0x19, "2 0:1 6:3\n0\n\n1 2:7\r\n3 9:1 4:2 5:1\n"},
    {"uci", 0x59, "6\n10\n6\n1 1 1\n1 7 3\n3 3 7\n4 10 1\n4 5 2\n5 6 1\n"},
    {"uci_skip", 0x1d, "5\n4\n7\n1 1 1\n1 9 1\n2 x 1\nx 1 1\n4 2 2\n4 2 0\n9 1 1"},
    {"libsvm", 0x1a, "+1 1:0.5 3:2\n-1 qid:3 2:1.5e-1\n# c\n1 4:-3.5e-2 7:1 # t\n0 1:1"},
    {"libsvm_real", 0x9e, "2.5 0:1 5:0.25\n-3\n1e3 2:7\n"},
};
enum { NSEEDS = sizeof seeds / sizeof *seeds };

static const char *seed_input(int i, input *in)
{
    in->buf[0] = (uint8_t)seeds[i].sel;
    size_t len = strlen(seeds[i].text);
    memcpy(in->buf + 1, seeds[i].text, len);
    in->len = 1 + len;
    return seeds[i].name;
}

/* One random edit: a byte set to a character the formats care about or to anything,
 * a byte inserted, deleted or duplicated, a truncation, or another selector. */
static void mutate(input *in)
{
    static const char interesting[] = "0123456789 \t\n\r,:.-+eE#xqid\0";
    size_t pos = in->len > 1 ? 1 + (size_t)(fuzz_rng() % (in->len - 1)) : 1;
    switch (fuzz_rng() % 7) {
    case 0:
        if (pos < in->len)
            in->buf[pos] = (uint8_t)interesting[fuzz_rng() % (sizeof interesting - 1)];
        break;
    case 1:
        if (pos < in->len) in->buf[pos] = (uint8_t)fuzz_rng();
        break;
    case 2:
    case 3:
        if (in->len < FUZZ_MAX_INPUT && pos <= in->len) {
            memmove(in->buf + pos + 1, in->buf + pos, in->len - pos);
            in->buf[pos] = fuzz_rng() % 2 && pos > 1
                               ? in->buf[pos - 1]
                               : (uint8_t)interesting[fuzz_rng() % (sizeof interesting - 1)];
            in->len++;
        }
        break;
    case 4:
        if (pos < in->len) {
            memmove(in->buf + pos, in->buf + pos + 1, in->len - pos - 1);
            in->len--;
        }
        break;
    case 5:
        if (pos < in->len) in->len = pos;
        break;
    default:
        in->buf[0] = (uint8_t)fuzz_rng();
        break;
    }
}

/* Seed i with every share count. */
static void resharded(int i, input *in)
{
    for (unsigned shares = 0; shares < 4; shares++) {
        in->buf[0] = (uint8_t)((seeds[i].sel & ~0x18u) | shares << 3);
        fuzz_run(in->buf, in->len);
    }
}

static void check_seeds(void)
{
    FUZZ_CHECK(stats.ratings_ok >= 3 && stats.bow_ok >= 3 && stats.libsvm_ok >= 2);
}

/* Random bytes, every other one (but the selector) a character the formats care about. */
static uint8_t random_byte(size_t k)
{
    return k && fuzz_rng() % 2 ? (uint8_t) "0123456789 \n:,\t"[fuzz_rng() % 16]
                               : (uint8_t)fuzz_rng();
}

static void report(void)
{
    printf("read ok: ratings %lu, bow %lu, libsvm %lu\n", stats.ratings_ok, stats.bow_ok,
           stats.libsvm_ok);
}

int main(int argc, char **argv)
{
    return fuzz_driver_main(argc, argv,
                            &(fuzz_target){.name = "fuzz_readers",
                                           .rng_seed = 0x5EED5EEDFEEDu,
                                           .nseeds = NSEEDS,
                                           .variant_kind = "resharded",
                                           .seed = seed_input,
                                           .variants = resharded,
                                           .check_seeds = check_seeds,
                                           .random = 2000,
                                           .random_len = 300,
                                           .random_byte = random_byte,
                                           .mutated = 8000,
                                           .mutate = mutate,
                                           .report = report});
}
#endif
