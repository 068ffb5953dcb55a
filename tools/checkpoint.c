/* loom checkpoint: list, verify and export the checkpoints of a job
 * (`loom train --checkpoint-dir DIR`; docs/FAULTS.md).
 *
 *   loom checkpoint ls DIR                 every checkpoint directory: clock, whole or why not
 *   loom checkpoint verify DIR [--clock C] the newest (or clock C): every file, size, checksum
 *   loom checkpoint export DIR --out FILE [--clock C]
 *                                          the model as its app's model file (lr, fm, mf, lda)
 *
 * Everything is read through the public reader (include/loom/checkpoint.h),
 * which names the file and the problem of a checkpoint that does not verify.
 * Export rebuilds the model from the servers' tables with the model's own
 * writer: lr from "lr.w" (weights then the bias, apps/common/modelfile), fm
 * from "fm.w", "fm.v" and "fm.vrows", mf
 * from its factor and summary tables with the ids worker 0 saved, lda from
 * "lda.word_topic" and "lda.topics" with the priors worker 0 saved. */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "commands.h"
#include "common/app.h"
#include "fm/fm.h"
#include "lda/lda.h"
#include "lr/lr.h"
#include "mf/mf.h"

static const char usage[] =
    "Usage: loom checkpoint ls DIR\n"
    "       loom checkpoint verify DIR [--clock C]\n"
    "       loom checkpoint export DIR --out FILE [--clock C]\n"
    "\n"
    "The checkpoints `loom train --checkpoint-dir DIR` writes (docs/FAULTS.md):\n"
    "  ls      every checkpoint in DIR, oldest first: its clock and whether it is whole\n"
    "  verify  check the newest checkpoint (or the one at clock C): its manifest and\n"
    "          every file it names (present, size, CRC-32C, header)\n"
    "  export  write the model of the newest checkpoint (or of clock C) as the model\n"
    "          file of its app (lr, fm, mf, lda), for `loom predict` or to inspect\n"
    "\n"
    "Exit status: 0 on success; 1 if the checkpoint is missing or does not verify\n"
    "(ls: if none in DIR is committed and verifies); 2 for a usage error.\n";

/* ls: one line per checkpoint; ctx counts those that verify. */
static void print_entry(void *ctx, int64_t clock, int status)
{
    if (status) {
        printf("%12" PRId64 "  INVALID  %s\n", clock, loom_last_error());
    } else {
        printf("%12" PRId64 "  ok\n", clock);
        ++*(int *)ctx;
    }
}

/* ---- export ---- */

/* A table of weights, keys 0..dim-1, and the bias at key dim (lr.w, fm.w). */
typedef struct weights {
    uint64_t dim;
    double *w, *bias;
} weights;

static int weight_row(void *ctx, uint64_t key, const void *row)
{
    weights *t = ctx;
    double v;
    memcpy(&v, row, sizeof v);
    if (key == t->dim)
        *t->bias = v;
    else if (key < t->dim)
        t->w[key] = v;
    return 0;
}

typedef struct extent {
    uint64_t end, rows; /* the largest key + 1, the number of keys */
} extent;

static int count_key(void *ctx, uint64_t key, const void *row)
{
    (void)row;
    extent *e = ctx;
    uint64_t end = key == UINT64_MAX ? key : key + 1; /* saturated: still beyond any row count */
    if (end > e->end) e->end = end;
    e->rows++;
    return 0;
}

/* The number of keys 0..end-1 of a table the model is an array of (lr.w,
 * lda.word_topic), which sizes the model. Such a table is opened before the
 * job's first clock and every server's chain starts with a full part, so a
 * checkpoint holds every one of its keys: a key beyond the rows it holds is
 * refused, so that the memory export takes is bounded by the parts' size and
 * not by the value of a key. */
static int dense_extent(const loom_checkpoint *ck, const char *table, uint32_t *width,
                        size_t *vsize, uint64_t *end, char *err, size_t errlen)
{
    extent e = {0, 0};
    if (loom_checkpoint_rows(ck, table, width, vsize, count_key, &e))
        return app_error(err, errlen, "%s", loom_last_error());
    if (e.end > e.rows)
        return app_error(err, errlen,
                         "table %s of the checkpoint at clock %" PRId64 " has a row at key %" PRIu64
                         " but only %" PRIu64 " rows: not the whole table a job writes",
                         table, loom_checkpoint_clock(ck), e.end - 1, e.rows);
    *end = e.end;
    return 0;
}

static int export_lr(const loom_checkpoint *ck, const char *out, char *err, size_t errlen)
{
    uint32_t width;
    size_t vsize;
    uint64_t keys = 0;
    if (dense_extent(ck, "lr.w", &width, &vsize, &keys, err, errlen)) return -1;
    if (width != 1 || vsize != 8)
        return app_error(err, errlen,
                         "table lr.w has rows of %u values: a DBPG model, which has "
                         "no checkpoints",
                         width);
    /* The weights are keys 0..dim-1 and the bias key dim; rows never written are zero. */
    lr_model m = {.dim = keys ? keys - 1 : 0};
    m.w = calloc(m.dim ? m.dim : 1, sizeof *m.w);
    if (!m.w) return app_error(err, errlen, "out of memory");
    weights t = {m.dim, m.w, &m.bias};
    int rc = loom_checkpoint_rows(ck, "lr.w", NULL, NULL, weight_row, &t);
    if (rc) rc = app_error(err, errlen, "%s", loom_last_error());
    if (!rc) rc = lr_model_save(&m, out, err, errlen);
    free(m.w);
    return rc;
}

typedef struct lda_export {
    lda_model *m;
    uint32_t block, nblocks;
} lda_export;

/* A (word, block) row's counts into the model's rows (kept sparse where that is smaller). */
static int lda_word_row(void *ctx, uint64_t key, const void *row)
{
    lda_export *r = ctx;
    uint64_t word = key / r->nblocks, b = key % r->nblocks;
    const int32_t *v = row;
    for (uint32_t i = 0; word < r->m->p.vocab && i < r->block; i++)
        if (v[i] && lda_rows_add(&r->m->counts, word, (uint32_t)(b * r->block + i), v[i]))
            return LOOM_ENOMEM;
    return 0;
}

static int lda_totals_row(void *ctx, uint64_t key, const void *row)
{
    lda_model *m = ctx;
    if (key == 0) memcpy(m->totals, row, m->p.topics * sizeof *m->totals);
    return 0;
}

static int export_lda(const loom_checkpoint *ck, const char *out, char *err, size_t errlen)
{
    uint32_t topics, block;
    uint64_t keys = 0, one = 0;
    const void *state;
    size_t len;
    if (dense_extent(ck, "lda.topics", &topics, NULL, &one, err, errlen) ||
        dense_extent(ck, "lda.word_topic", &block, NULL, &keys, err, errlen))
        return -1;
    /* The priors are not in the tables: worker 0 saved them with its state. */
    if (loom_checkpoint_worker_state(ck, 0, &state, &len) || len < 64 || !block || topics % block)
        return app_error(err, errlen, "the checkpoint has no LDA state of worker 0");
    lda_model m = {0};
    uint32_t nblocks = topics / block;
    m.p.topics = topics;
    m.p.vocab = (keys + nblocks - 1) / nblocks;
    memcpy(&m.p.alpha, (const uint8_t *)state + 48, 8);
    memcpy(&m.p.beta, (const uint8_t *)state + 56, 8);
    int rows_rc = lda_rows_init(&m.counts, topics, (size_t)m.p.vocab);
    m.totals = calloc(topics, sizeof *m.totals);
    int rc = !rows_rc && m.totals ? 0 : app_error(err, errlen, "out of memory");
    lda_export r = {&m, block, nblocks};
    if (!rc && (loom_checkpoint_rows(ck, "lda.word_topic", NULL, NULL, lda_word_row, &r) ||
                loom_checkpoint_rows(ck, "lda.topics", NULL, NULL, lda_totals_row, &m)))
        rc = app_error(err, errlen, "%s", loom_last_error());
    for (uint32_t k = 0; !rc && k < topics; k++) m.tokens += (uint64_t)m.totals[k];
    if (!rc) rc = lda_model_save(&m, out, err, errlen);
    lda_model_free(&m);
    return rc;
}

/* mf: the factors from "mf.users" and "mf.items", the mean from the summary
 * sums ("mf.mean": sum, count), the range from "mf.range" ([max, -min]), the
 * file ids from worker 0's state (9 doubles, the counts, then the ids). */
typedef struct mf_rows {
    double *rows;
    size_t n, width;
} mf_rows;

static int mf_row(void *ctx, uint64_t key, const void *row)
{
    mf_rows *r = ctx;
    if (key < r->n) memcpy(r->rows + key * r->width, row, r->width * sizeof *r->rows);
    return 0;
}

static int export_mf(const loom_checkpoint *ck, const char *out, char *err, size_t errlen)
{
    const void *state;
    size_t len;
    uint64_t counts[2];
    const size_t head = 10 * 8; /* apps/mf/train.c: MF_STATE_DOUBLES */
    if (loom_checkpoint_worker_state(ck, 0, &state, &len) || len < head + 16)
        return app_error(err, errlen, "the checkpoint has no MF state of worker 0");
    memcpy(counts, (const uint8_t *)state + head, 16);
    if (counts[0] > len / 8 || counts[1] > len / 8 ||
        len != head + 16 + (counts[0] + counts[1]) * 8)
        return app_error(err, errlen, "worker 0's MF state is malformed");
    uint32_t width;
    extent users = {0, 0};
    if (loom_checkpoint_rows(ck, "mf.users", &width, NULL, count_key, &users) || width < 2)
        return app_error(err, errlen, "%s", loom_last_error());
    mf_model m;
    if (mf_model_alloc(&m, width - 1, counts[0], counts[1]))
        return app_error(err, errlen, "out of memory");
    memcpy(m.user_id, (const uint8_t *)state + head + 16, counts[0] * 8);
    memcpy(m.item_id, (const uint8_t *)state + head + 16 + counts[0] * 8, counts[1] * 8);
    mf_rows u = {m.user, counts[0], width}, i = {m.item, counts[1], width};
    double sums[5] = {0}, range[2] = {0};
    mf_rows su = {sums, 5, 1}, ra = {range, 1, 2};
    int rc = 0;
    if (loom_checkpoint_rows(ck, "mf.users", NULL, NULL, mf_row, &u) ||
        loom_checkpoint_rows(ck, "mf.items", NULL, NULL, mf_row, &i) ||
        loom_checkpoint_rows(ck, "mf.mean", NULL, NULL, mf_row, &su) ||
        loom_checkpoint_rows(ck, "mf.range", NULL, NULL, mf_row, &ra))
        rc = app_error(err, errlen, "%s", loom_last_error());
    m.mean = sums[1] > 0 ? sums[0] / sums[1] : 0;
    m.max = range[0];
    m.min = -range[1];
    if (!rc) rc = mf_model_save(&m, out, err, errlen);
    mf_model_free(&m);
    return rc;
}

/* fm: w and the bias from "fm.w" (keys 0..dim-1, the bias at key dim), and
 * V from "fm.v" for the features "fm.vrows" marks allocated, as the run's
 * own report reads them (apps/fm/train.c). */
static int fm_vrows_row(void *ctx, uint64_t key, const void *row)
{
    fm_model *m = ctx;
    double marked;
    memcpy(&marked, row, sizeof marked);
    if (key < m->dim && marked != 0 && !m->has_v[key]) {
        m->has_v[key] = 1;
        m->v_rows++;
    }
    return 0;
}

static int fm_v_row(void *ctx, uint64_t key, const void *row)
{
    fm_model *m = ctx;
    if (key < m->dim && m->has_v[key]) memcpy(m->v + key * m->k, row, m->k * sizeof *m->v);
    return 0;
}

static int export_fm(const loom_checkpoint *ck, const char *out, char *err, size_t errlen)
{
    uint32_t width, k;
    size_t vsize;
    uint64_t keys = 0;
    extent none = {0, 0};
    if (dense_extent(ck, "fm.w", &width, &vsize, &keys, err, errlen)) return -1;
    if (width != 1 || vsize != 8 || !keys)
        return app_error(err, errlen, "table fm.w has rows of %u values, not fm's", width);
    if (loom_checkpoint_rows(ck, "fm.v", &k, NULL, count_key, &none) || !k)
        return app_error(err, errlen, "%s", loom_last_error());
    fm_model m;
    if (fm_model_init(&m, keys - 1, k)) return app_error(err, errlen, "out of memory");
    int rc = 0;
    weights t = {m.dim, m.w, &m.bias};
    if (loom_checkpoint_rows(ck, "fm.w", NULL, NULL, weight_row, &t) ||
        (m.dim && loom_checkpoint_rows(ck, "fm.vrows", NULL, NULL, fm_vrows_row, &m)) ||
        loom_checkpoint_rows(ck, "fm.v", NULL, NULL, fm_v_row, &m))
        rc = app_error(err, errlen, "%s", loom_last_error());
    if (!rc) rc = fm_model_save(&m, out, err, errlen);
    fm_model_free(&m);
    return rc;
}

static const struct exporter {
    const char *model;
    int (*fn)(const loom_checkpoint *ck, const char *out, char *err, size_t errlen);
} exporters[] = {{"lr", export_lr}, {"fm", export_fm}, {"mf", export_mf}, {"lda", export_lda}};

/* ---- the command ---- */

static const app_flag flags[] = {
    {.name = "--clock",
     .kind = APP_INT,
     .arg = "C",
     .lo = 0,
     .hi = INT64_MAX,
     .help = "the checkpoint at clock C (default: the newest)"},
    {.name = "--out", .kind = APP_TEXT, .arg = "FILE", .help = "export: the model file to write"},
};
#define NFLAGS (sizeof flags / sizeof flags[0])

int cmd_checkpoint(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fputs(usage, stdout);
        app_flags_help(stdout, flags, NFLAGS);
        return 0;
    }
    if (argc < 3) return app_command_usage("loom checkpoint", "ls, verify or export, and a DIR");
    const char *what = argv[1], *dir = argv[2];
    app_flag_value v[NFLAGS];
    char err[1024];
    int rc = app_flags_parse(flags, NFLAGS, argc, argv, 3, v, NULL, err, sizeof err);
    if (rc == APP_FLAGS_HELP) {
        fputs(usage, stdout);
        return 0;
    }
    if (rc) return app_command_usage("loom checkpoint", "%s", err);
    const app_flag_value *clock = app_flag_get(flags, NFLAGS, v, "--clock");
    const app_flag_value *out = app_flag_get(flags, NFLAGS, v, "--out");
    if (!strcmp(what, "ls")) {
        if (clock || out) return app_command_usage("loom checkpoint", "ls takes only DIR");
        int ok = 0, n = loom_checkpoint_list(dir, print_entry, &ok);
        if (n < 0) {
            fprintf(stderr, "loom checkpoint: %s\n", loom_last_error());
            return 1;
        }
        if (n == 0) printf("no checkpoints in %s\n", dir);
        /* Status 1 as for verify: a job could resume from none of them. */
        if (!ok) {
            fprintf(stderr,
                    "loom checkpoint: %s: no committed checkpoint that verifies (nothing to "
                    "resume from)\n",
                    dir);
            return 1;
        }
        return 0;
    }
    if (strcmp(what, "verify") && strcmp(what, "export"))
        return app_command_usage("loom checkpoint", "unknown action '%s' (ls, verify, export)",
                                 what);
    int is_export = !strcmp(what, "export");
    if (is_export != (out != NULL))
        return app_command_usage("loom checkpoint",
                                 is_export ? "export needs --out FILE" : "--out is for export");
    loom_checkpoint *ck;
    if (loom_checkpoint_open(dir, clock ? (int64_t)clock->u : -1, &ck)) {
        fprintf(stderr, "loom checkpoint: %s\n", loom_last_error());
        return 1;
    }
    if (!is_export) {
        printf("%s: checkpoint at clock %" PRId64 " of model %s, %d servers, %d workers, %" PRIu64
               " bytes: ok\n",
               dir, loom_checkpoint_clock(ck), loom_checkpoint_model(ck),
               loom_checkpoint_num_servers(ck), loom_checkpoint_num_workers(ck),
               loom_checkpoint_bytes(ck));
        loom_checkpoint_close(ck);
        return 0;
    }
    rc = -2;
    for (size_t i = 0; i < sizeof exporters / sizeof exporters[0]; i++)
        if (!strcmp(loom_checkpoint_model(ck), exporters[i].model))
            rc = exporters[i].fn(ck, out->text, err, sizeof err);
    if (rc == -2)
        snprintf(err, sizeof err, "cannot export a checkpoint of model %s (lr, mf, lda only)",
                 loom_checkpoint_model(ck));
    loom_checkpoint_close(ck);
    if (rc) {
        fprintf(stderr, "loom checkpoint: %s\n", err);
        return 1;
    }
    return 0;
}
