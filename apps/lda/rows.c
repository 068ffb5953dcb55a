/* rows: word-topic counts stored per word in the smaller of two forms, as
 * LightLDA keeps its model (Yuan et al., WWW 2015, "hybrid data structure").
 *
 * A word with c tokens has at most min(c, K) non-zero topics. Kept as sorted
 * (topic, count) pairs that is at most 8 min(c, K) bytes, against 4K for a
 * dense row: so a word is dense when its count (the row's sum) reaches K/2,
 * sparse below. Most of a corpus's words are rare, and a word's count does
 * not change while topics are sampled (a token moves between topics of its
 * own word), so at K = 100,000 on AP every word is sparse and the rows take
 * a few MB where dense ones took 4.2 GB; at K = 1000 the few hundred
 * frequent words are dense and cost what they did.
 *
 * Sparse pairs are packed as topic << 32 | count, ascending by topic (so by
 * value), and grow by doubling. Walks over a row (lda_rows_next) give the
 * non-zero counts by ascending topic in either form, so a sum over them adds
 * in the order a scan of the dense row would. */
#include <stdlib.h>
#include <string.h>

#include <loom/loom.h>

#include "lda/lda.h"

#define PAIR(k, c) ((uint64_t)(k) << 32 | (uint32_t)(c))
#define PTOPIC(e)  ((uint32_t)((e) >> 32))
#define PCOUNT(e)  ((int32_t)(uint32_t)(e))
#define DENSE      UINT32_MAX

int lda_rows_init(lda_rows *r, uint32_t topics, size_t n)
{
    *r = (lda_rows){.topics = topics, .n = n};
    r->row = calloc(n ? n : 1, sizeof *r->row);
    return r->row ? 0 : LOOM_ENOMEM;
}

void lda_rows_free(lda_rows *r)
{
    for (size_t w = 0; r->row && w < r->n; w++) free(r->row[w].v);
    free(r->row);
    *r = (lda_rows){0};
}

/* Is a row of `sum` tokens kept dense? */
static int dense_for(const lda_rows *r, int64_t sum)
{
    return 2 * sum >= (int64_t)r->topics;
}

int lda_rows_dense(const lda_rows *r, size_t w)
{
    return r->row[w].cap == DENSE;
}

int64_t lda_rows_sum(const lda_rows *r, size_t w)
{
    return r->row[w].sum;
}

size_t lda_rows_bytes(const lda_rows *r)
{
    size_t b = r->n * sizeof *r->row;
    for (size_t w = 0; w < r->n; w++)
        b +=
            r->row[w].cap == DENSE ? r->topics * sizeof(int32_t) : r->row[w].cap * sizeof(uint64_t);
    return b;
}

/* The position of topic k among a sparse row's pairs, or where it would go. */
static uint32_t find(const lda_row *row, uint32_t k)
{
    const uint64_t *e = row->v;
    uint32_t lo = 0, hi = row->nnz;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (PTOPIC(e[mid]) < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int32_t lda_rows_get(const lda_rows *r, size_t w, uint32_t k)
{
    const lda_row *row = &r->row[w];
    if (row->cap == DENSE) return ((const int32_t *)row->v)[k];
    uint32_t j = find(row, k);
    return j < row->nnz && PTOPIC(((const uint64_t *)row->v)[j]) == k
               ? PCOUNT(((const uint64_t *)row->v)[j])
               : 0;
}

/* Word w's row becomes dense, with the same counts. */
static int to_dense(lda_rows *r, size_t w)
{
    lda_row *row = &r->row[w];
    int32_t *d = calloc(r->topics, sizeof *d);
    if (!d) return LOOM_ENOMEM;
    const uint64_t *e = row->v;
    for (uint32_t j = 0; j < row->nnz; j++) d[PTOPIC(e[j])] = PCOUNT(e[j]);
    free(row->v);
    row->v = d;
    row->cap = DENSE;
    row->nnz = 0;
    return 0;
}

int lda_rows_add(lda_rows *r, size_t w, uint32_t k, int32_t by)
{
    lda_row *row = &r->row[w];
    row->sum += by;
    if (row->cap != DENSE && dense_for(r, row->sum) && to_dense(r, w)) return LOOM_ENOMEM;
    if (row->cap == DENSE) {
        ((int32_t *)row->v)[k] += by;
        return 0;
    }
    uint64_t *e = row->v;
    uint32_t j = find(row, k);
    if (j < row->nnz && PTOPIC(e[j]) == k) {
        int32_t c = PCOUNT(e[j]) + by;
        if (c) {
            e[j] = PAIR(k, c);
        } else { /* a zero count leaves the row */
            memmove(e + j, e + j + 1, (row->nnz - j - 1) * sizeof *e);
            row->nnz--;
        }
        return 0;
    }
    if (!by) return 0;
    if (row->nnz == row->cap) {
        uint32_t cap = row->cap ? 2 * row->cap : 4;
        uint64_t *g = realloc(row->v, cap * sizeof *g);
        if (!g) return LOOM_ENOMEM;
        row->v = e = g;
        row->cap = cap;
    }
    memmove(e + j + 1, e + j, (row->nnz - j) * sizeof *e);
    e[j] = PAIR(k, by);
    row->nnz++;
    return 0;
}

int lda_rows_next(const lda_rows *r, size_t w, size_t *pos, uint32_t *k, int32_t *c)
{
    const lda_row *row = &r->row[w];
    if (row->cap == DENSE) {
        const int32_t *d = row->v;
        size_t j = *pos;
        while (j < r->topics && !d[j]) j++;
        if (j == r->topics) return 0;
        *k = (uint32_t)j, *c = d[j], *pos = j + 1;
        return 1;
    }
    if (*pos >= row->nnz) return 0;
    uint64_t e = ((const uint64_t *)row->v)[(*pos)++];
    *k = PTOPIC(e), *c = PCOUNT(e);
    return 1;
}

void lda_rows_expand(const lda_rows *r, size_t w, int32_t *out)
{
    const lda_row *row = &r->row[w];
    if (row->cap == DENSE) {
        memcpy(out, row->v, r->topics * sizeof *out);
        return;
    }
    memset(out, 0, r->topics * sizeof *out);
    const uint64_t *e = row->v;
    for (uint32_t j = 0; j < row->nnz; j++) out[PTOPIC(e[j])] = PCOUNT(e[j]);
}

/* Does word w's row hold exactly the dense counts `d`? */
static int same(const lda_rows *r, size_t w, const int32_t *d)
{
    const lda_row *row = &r->row[w];
    if (row->cap == DENSE) return !memcmp(row->v, d, r->topics * sizeof *d);
    const uint64_t *e = row->v;
    uint32_t j = 0;
    for (uint32_t k = 0; k < r->topics; k++) {
        if (!d[k]) continue;
        if (j == row->nnz || e[j] != PAIR(k, d[k])) return 0;
        j++;
    }
    return j == row->nnz;
}

/* Word w's row takes the form a row of `sum` tokens and nnz non-zero counts
 * is kept in, with room for them; a sparse row is left empty, a dense one
 * holds counts to be overwritten. 0 or LOOM_ENOMEM. */
static int reshape(lda_rows *r, size_t w, int64_t sum, uint32_t nnz)
{
    lda_row *row = &r->row[w];
    row->sum = sum;
    if (dense_for(r, sum)) {
        if (row->cap != DENSE) {
            int32_t *g = malloc(r->topics * sizeof *g);
            if (!g) return LOOM_ENOMEM;
            free(row->v);
            row->v = g;
            row->cap = DENSE;
            row->nnz = 0;
        }
        return 0;
    }
    if (row->cap == DENSE || row->cap < nnz) {
        uint64_t *g = malloc((nnz ? nnz : 1) * sizeof *g);
        if (!g) return LOOM_ENOMEM;
        free(row->v);
        row->v = g;
        row->cap = nnz ? nnz : 1;
    }
    row->nnz = 0;
    return 0;
}

int lda_rows_assign(lda_rows *r, size_t w, const int32_t *d, int *changed)
{
    const size_t K = r->topics;
    if (changed) *changed = 0;
    if (same(r, w, d)) return 0;
    if (changed) *changed = 1;
    int64_t sum = 0;
    uint32_t nnz = 0;
    for (size_t k = 0; k < K; k++) sum += d[k], nnz += d[k] != 0;
    if (reshape(r, w, sum, nnz)) return LOOM_ENOMEM;
    lda_row *row = &r->row[w];
    if (row->cap == DENSE) {
        memcpy(row->v, d, K * sizeof *d);
        return 0;
    }
    uint64_t *e = row->v;
    for (size_t k = 0; k < K; k++)
        if (d[k]) e[row->nnz++] = PAIR(k, d[k]);
    return 0;
}

/* Does word w's row hold exactly the nnz counts c at topics k (ascending,
 * none zero)? A sparse row compares its pairs, a dense one its K counts. */
static int same_sparse(const lda_rows *r, size_t w, const uint32_t *k, const int32_t *c,
                       uint32_t nnz)
{
    const lda_row *row = &r->row[w];
    if (row->cap != DENSE) {
        if (row->nnz != nnz) return 0;
        const uint64_t *e = row->v;
        for (uint32_t j = 0; j < nnz; j++)
            if (e[j] != PAIR(k[j], c[j])) return 0;
        return 1;
    }
    const int32_t *d = row->v;
    uint32_t j = 0;
    for (uint32_t t = 0; t < r->topics; t++) {
        if (!d[t]) continue;
        if (j == nnz || k[j] != t || c[j] != d[t]) return 0;
        j++;
    }
    return j == nnz;
}

int lda_rows_assign_sparse(lda_rows *r, size_t w, const uint32_t *k, const int32_t *c, uint32_t nnz,
                           int *changed)
{
    if (changed) *changed = 0;
    if (same_sparse(r, w, k, c, nnz)) return 0;
    if (changed) *changed = 1;
    int64_t sum = 0;
    for (uint32_t j = 0; j < nnz; j++) sum += c[j];
    if (reshape(r, w, sum, nnz)) return LOOM_ENOMEM;
    lda_row *row = &r->row[w];
    if (row->cap == DENSE) {
        memset(row->v, 0, r->topics * sizeof(int32_t));
        for (uint32_t j = 0; j < nnz; j++) ((int32_t *)row->v)[k[j]] = c[j];
        return 0;
    }
    uint64_t *e = row->v;
    for (uint32_t j = 0; j < nnz; j++) e[j] = PAIR(k[j], c[j]);
    row->nnz = nnz;
    return 0;
}

int lda_rows_equal(const lda_rows *a, const lda_rows *b)
{
    if (a->n != b->n || a->topics != b->topics) return 0;
    for (size_t w = 0; w < a->n; w++) {
        size_t pa = 0, pb = 0;
        for (;;) {
            uint32_t ka = 0, kb = 0;
            int32_t ca = 0, cb = 0;
            int more = lda_rows_next(a, w, &pa, &ka, &ca);
            if (more != lda_rows_next(b, w, &pb, &kb, &cb) || ka != kb || ca != cb) return 0;
            if (!more) break;
        }
    }
    return 1;
}

/* Do two rows (of the same K) hold the same counts? */
static int row_same(const lda_row *a, const lda_row *b, uint32_t topics)
{
    if (a->cap == DENSE && b->cap == DENSE) return !memcmp(a->v, b->v, topics * sizeof(int32_t));
    if (a->cap != DENSE && b->cap != DENSE)
        return a->nnz == b->nnz && (!a->nnz || !memcmp(a->v, b->v, a->nnz * sizeof(uint64_t)));
    const lda_row *d = a->cap == DENSE ? a : b, *s = a->cap == DENSE ? b : a;
    const int32_t *dv = d->v;
    const uint64_t *e = s->v;
    uint32_t j = 0;
    for (uint32_t k = 0; k < topics; k++) {
        if (!dv[k]) continue;
        if (j == s->nnz || e[j] != PAIR(k, dv[k])) return 0;
        j++;
    }
    return j == s->nnz;
}

int lda_rows_copy(lda_rows *dst, size_t dw, const lda_rows *src, size_t sw, int *changed)
{
    const lda_row *a = &src->row[sw];
    lda_row *b = &dst->row[dw];
    if (changed) *changed = 0;
    if (row_same(a, b, src->topics)) return 0;
    if (changed) *changed = 1;
    size_t bytes = a->cap == DENSE ? src->topics * sizeof(int32_t) : a->nnz * sizeof(uint64_t);
    if (a->cap == DENSE ? b->cap != DENSE : b->cap == DENSE || b->cap < a->nnz) {
        void *g = malloc(bytes ? bytes : 1);
        if (!g) return LOOM_ENOMEM;
        free(b->v);
        b->v = g;
        b->cap = a->cap == DENSE ? DENSE : (a->nnz ? a->nnz : 1);
    }
    if (bytes) memcpy(b->v, a->v, bytes);
    b->nnz = a->nnz;
    b->sum = a->sum;
    return 0;
}
