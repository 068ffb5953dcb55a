/* svb_frame: the wire format of a set of sufficient vectors (svb.h), its
 * check, and the arithmetic of applying SVs to a replica.
 *
 * Everything a receiver applies passed svb_frame_check first: a peer's
 * frame is trusted for nothing, so a short, over-long or inconsistent frame,
 * an id beyond the replica or a non-finite value drops the message whole
 * (counted) instead of touching the replica. */
#include "p2p/svb.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loom/error.h"

static uint32_t load32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static float loadf(const uint8_t *p)
{
    uint32_t b = load32(p);
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

void loom_svb_apply(double *w, uint32_t width, const float *u, const uint64_t *idx,
                    const float *val, uint32_t nnz)
{
    for (uint32_t e = 0; e < nnz; e++) {
        double *row = w + idx[e] * width, x = val[e];
        for (uint32_t k = 0; k < width; k++) row[k] += (double)u[k] * x;
    }
}

void loom_svb_adagrad_step(double *w, double *acc, double *g, uint32_t width, const uint64_t *rows,
                           size_t n, double lr)
{
    for (size_t t = 0; t < n; t++)
        for (size_t e = rows[t] * width; e < (rows[t] + 1) * width; e++) {
            acc[e] += g[e] * g[e];
            w[e] = w[e] - lr * g[e] / (sqrt(acc[e]) + 1e-8);
            g[e] = 0;
        }
}

int svb_adagrad_init(svb_adagrad *a, uint64_t rows, uint32_t width, double lr)
{
    *a = (svb_adagrad){.lr = lr,
                       .acc = calloc((size_t)rows * width, sizeof(double)),
                       .grad = calloc((size_t)rows * width, sizeof(double)),
                       .mark = calloc((size_t)rows, 1),
                       .touched = malloc((size_t)rows * sizeof(uint64_t))};
    if (a->acc && a->grad && a->mark && a->touched) return 0;
    svb_adagrad_free(a);
    return LOOM_ENOMEM;
}

int svb_adagrad_step(double *w, svb_adagrad *a, uint32_t width)
{
    if (!a->ntouched) return 0;
    loom_svb_adagrad_step(w, a->acc, a->grad, width, a->touched, a->ntouched, a->lr);
    for (size_t t = 0; t < a->ntouched; t++) a->mark[a->touched[t]] = 0;
    a->ntouched = 0;
    return 1;
}

void svb_adagrad_free(svb_adagrad *a)
{
    free(a->acc), free(a->grad), free(a->mark), free(a->touched);
    *a = (svb_adagrad){0};
}

int svb_frame_check(const uint8_t *p, size_t len, uint64_t count, uint32_t width, uint64_t rows,
                    const char **why)
{
    size_t off = 0;
    for (uint64_t i = 0; i < count; i++) {
        if (len - off < 4) return *why = "a sufficient vector is cut short", -1;
        uint64_t nnz = load32(p + off);
        off += 4;
        if ((len - off) / 4 < (uint64_t)width || (len - off - 4 * (size_t)width) / 8 < nnz)
            return *why = "a sufficient vector is cut short", -1;
        for (uint32_t k = 0; k < width; k++, off += 4)
            if (!isfinite(loadf(p + off))) return *why = "a value of u is not finite", -1;
        for (uint64_t e = 0; e < nnz; e++, off += 4)
            if (load32(p + off) >= rows) return *why = "an id of v is beyond the replica", -1;
        for (uint64_t e = 0; e < nnz; e++, off += 4)
            if (!isfinite(loadf(p + off))) return *why = "a value of v is not finite", -1;
    }
    if (off != len) return *why = "bytes left after the last sufficient vector", -1;
    return 0;
}

int svb_frame_apply(double *w, svb_adagrad *ag, uint32_t width, const uint8_t *p, uint64_t count,
                    svb_scratch *s)
{
    size_t off = 0;
    for (uint64_t i = 0; i < count; i++) {
        uint32_t nnz = load32(p + off);
        off += 4;
        size_t need = nnz > width ? nnz : width;
        if (need > s->cap) {
            float *u = realloc(s->u, need * sizeof *u), *val = realloc(s->val, need * sizeof *val);
            uint64_t *idx = realloc(s->idx, need * sizeof *idx);
            if (u) s->u = u;
            if (val) s->val = val;
            if (idx) s->idx = idx;
            if (!u || !val || !idx) return LOOM_ENOMEM;
            s->cap = need;
        }
        for (uint32_t k = 0; k < width; k++, off += 4) s->u[k] = loadf(p + off);
        for (uint32_t e = 0; e < nnz; e++, off += 4) s->idx[e] = load32(p + off);
        for (uint32_t e = 0; e < nnz; e++, off += 4) s->val[e] = loadf(p + off);
        if (!ag) {
            loom_svb_apply(w, width, s->u, s->idx, s->val, nnz);
            continue;
        }
        loom_svb_apply(ag->grad, width, s->u, s->idx, s->val, nnz);
        for (uint32_t e = 0; e < nnz; e++)
            if (!ag->mark[s->idx[e]])
                ag->mark[s->idx[e]] = 1, ag->touched[ag->ntouched++] = s->idx[e];
    }
    return 0;
}

void svb_scratch_free(svb_scratch *s)
{
    free(s->u), free(s->val), free(s->idx);
    *s = (svb_scratch){0};
}
