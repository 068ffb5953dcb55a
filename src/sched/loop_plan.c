/* loop_plan: dependence vectors and the parallel schedule of a loop whose
 * accesses are declared (loom/loop.h; Orion, wei-thesis-bosen-orion.txt
 * 3.5-3.6; docs/LOOPS.md).
 *
 * Dependences. Two accesses x, y of one array, at least one a write, touch
 * the same element from iterations p and q when every subscript pair agrees.
 * For an array dimension subscripted p_v + a in x and p_v + b in y that means
 * p_v - q_v = b - a, a known distance along v; '*' on either side agrees
 * with anything; two constants agree or never do (then there is no
 * dependence); any other pair (an index against a constant, two different
 * indices) says nothing exact about a distance, so the planner keeps
 * LOOM_DEP_ANY there unless another dimension pins it. Dropping such
 * constraints only adds dependences, never loses one: the plan stays safe.
 * The vector of an access with itself is skipped when it is all zeros (the
 * same iteration, whose body runs serially), as is one of two accesses
 * within one iteration.
 *
 * Orientation. A vector d and -d describe the same pairs; it is stored with
 * its first non-zero component positive, the source of the dependence first
 * in serial order. When that component is unknown, the vector stands for
 * three: with it LOOM_DEP_POS (any value from 1 up) and the rest as they are,
 * with it LOOM_DEP_POS and the rest negated (the pairs taken the other way),
 * and with it 0 (orient the rest). So ordered MF, whose W gives (0, ANY),
 * has (0, POS): the later j of one i comes later.
 *
 * Choice, in order (the first that fits):
 *   1D        an index with distance 0 in every vector;
 *   2D        unordered loops: indices a, b such that every vector has a 0
 *             at a or at b;
 *   wavefront indices a, b and the smallest skew f >= 0 for which every
 *             vector (as oriented for an ordered loop, either way for an
 *             unordered one) has d_a >= 0 and d_b + f d_a >= 0 for every
 *             value it stands for: a dependent iteration then lies in a
 *             block whose space and time numbers are both at least its
 *             source's, so it runs in a later step or later in the same
 *             block;
 *   serial    otherwise.
 * Among candidates the planner prefers the index more accesses subscript
 * (their arrays are then local to a worker: less to move), then the longer
 * extent, then the lower number. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/error.h"
#include "loom/loop.h"

#define ANY LOOM_DEP_ANY
#define POS LOOM_DEP_POS

struct loom_loop_plan {
    loom_loop_kind kind;
    uint32_t dims, space, time;
    int64_t skew;
    int ordered;
    size_t ndeps;
    int64_t (*deps)[LOOM_LOOP_MAX_DIMS];
    char why[256];
};

static int fail(char *err, size_t errlen, const char *what)
{
    if (err && errlen) snprintf(err, errlen, "%s", what);
    return LOOM_EINVAL;
}

static int check(uint32_t dims, const loom_access *acc, size_t nacc, char *err, size_t errlen)
{
    char msg[200];
    if (dims < 1 || dims > LOOM_LOOP_MAX_DIMS) {
        snprintf(msg, sizeof msg, "a loop has 1 to %d indices, not %u", LOOM_LOOP_MAX_DIMS, dims);
        return fail(err, errlen, msg);
    }
    if (nacc > LOOM_LOOP_MAX_ACCESSES || (nacc && !acc)) {
        snprintf(msg, sizeof msg, "a loop declares at most %d accesses, not %zu",
                 LOOM_LOOP_MAX_ACCESSES, nacc);
        return fail(err, errlen, msg);
    }
    for (size_t i = 0; i < nacc; i++) {
        const loom_access *a = &acc[i];
        if (a->ndims < 1 || a->ndims > LOOM_LOOP_MAX_DIMS) {
            snprintf(msg, sizeof msg,
                     "access %zu (array %u): an array has 1 to %d dimensions, not %u", i, a->array,
                     LOOM_LOOP_MAX_DIMS, a->ndims);
            return fail(err, errlen, msg);
        }
        for (uint32_t k = 0; k < a->ndims; k++) {
            const loom_subscript *s = &a->sub[k];
            if (s->kind != LOOM_SUB_INDEX && s->kind != LOOM_SUB_ALL && s->kind != LOOM_SUB_CONST) {
                snprintf(msg, sizeof msg,
                         "access %zu (array %u), dimension %u: unknown subscript kind %d", i,
                         a->array, k, (int)s->kind);
                return fail(err, errlen, msg);
            }
            if (s->kind == LOOM_SUB_INDEX && s->index >= dims) {
                snprintf(msg, sizeof msg,
                         "access %zu (array %u), dimension %u: loop index %u, but the loop has %u",
                         i, a->array, k, s->index, dims);
                return fail(err, errlen, msg);
            }
            /* distances are differences of offsets: keep them far from overflow */
            if (s->kind == LOOM_SUB_INDEX && (s->offset > INT32_MAX || s->offset < -INT32_MAX)) {
                snprintf(msg, sizeof msg,
                         "access %zu (array %u), dimension %u: offset %lld is beyond +-2^31", i,
                         a->array, k, (long long)s->offset);
                return fail(err, errlen, msg);
            }
        }
        for (size_t j = 0; j < i; j++)
            if (acc[j].array == a->array && acc[j].ndims != a->ndims) {
                snprintf(msg, sizeof msg,
                         "accesses %zu and %zu name array %u with %u and %u dimensions", j, i,
                         a->array, acc[j].ndims, a->ndims);
                return fail(err, errlen, msg);
            }
    }
    return 0;
}

/* The distance vector of accesses x (from iteration p) and y (from q = p - d)
 * into d: 1, or 0 when they never touch one element. */
static int distance(uint32_t dims, const loom_access *x, const loom_access *y, int64_t *d)
{
    for (uint32_t v = 0; v < LOOM_LOOP_MAX_DIMS; v++) d[v] = v < dims ? ANY : 0;
    for (uint32_t k = 0; k < x->ndims; k++) {
        const loom_subscript *a = &x->sub[k], *b = &y->sub[k];
        if (a->kind == LOOM_SUB_ALL || b->kind == LOOM_SUB_ALL) continue;
        if (a->kind == LOOM_SUB_CONST && b->kind == LOOM_SUB_CONST) {
            if (a->offset != b->offset) return 0;
            continue;
        }
        if (a->kind == LOOM_SUB_INDEX && b->kind == LOOM_SUB_INDEX && a->index == b->index) {
            /* p_v + a = q_v + b */
            int64_t dist = b->offset - a->offset;
            if (d[a->index] != ANY && d[a->index] != dist) return 0;
            d[a->index] = dist;
        }
    }
    return 1;
}

/* Add d to the plan's vectors unless it is there already. */
static void add_dep(loom_loop_plan *p, const int64_t *d)
{
    for (size_t k = 0; k < p->ndeps; k++)
        if (!memcmp(p->deps[k], d, sizeof *p->deps)) return;
    memcpy(p->deps[p->ndeps++], d, sizeof *p->deps);
}

/* Add the oriented forms of d from component v on (components before v are
 * 0): see the top. An unknown component there stands for a positive one (d
 * taken forwards), a negative one (d taken backwards) or 0 (orient the rest). */
static void add_oriented(loom_loop_plan *p, int64_t *d, uint32_t v)
{
    while (v < p->dims && d[v] == 0) v++;
    if (v == p->dims) return; /* the same iteration */
    int64_t back[LOOM_LOOP_MAX_DIMS];
    for (uint32_t u = 0; u < LOOM_LOOP_MAX_DIMS; u++) back[u] = d[u] == ANY ? ANY : -d[u];
    if (d[v] != ANY) {
        add_dep(p, d[v] > 0 ? d : back);
        return;
    }
    d[v] = back[v] = LOOM_DEP_POS;
    add_dep(p, d);
    add_dep(p, back);
    d[v] = 0;
    add_oriented(p, d, v + 1);
}

/* The smallest skew f >= 0 with which vector d, taken the way `sign`, has
 * d_a >= 0 and d_b + f d_a >= 0 for every value its components stand for;
 * -1 if none does. LOOM_DEP_POS is every value from 1 up (taken backwards,
 * every value from -1 down), so d_a = POS needs f >= -d_b (at d_a = 1). */
static int64_t skew_needed(const int64_t *d, uint32_t a, uint32_t b, int sign)
{
    int64_t da = d[a], db = d[b];
    if (da == ANY || db == ANY) return -1;
    if (da == POS) {
        if (sign < 0) return -1;
        return db == POS || db >= 0 ? 0 : -db;
    }
    da *= sign;
    if (da < 0) return -1;
    if (db == POS) return sign > 0 ? 0 : -1;
    db *= sign;
    if (db >= 0) return 0;
    return da == 0 ? -1 : (-db + da - 1) / da;
}

/* The smallest skew with which the wavefront on (a, b) fits every vector, or
 * -1. Each vector fits every skew from its own smallest on, so the loop's is
 * the largest of those: an ordered loop takes each vector as oriented, an
 * unordered one either way. */
static int64_t wavefront_skew(const loom_loop_plan *p, uint32_t a, uint32_t b)
{
    int64_t f = 0;
    for (size_t i = 0; i < p->ndeps; i++) {
        const int64_t *d = p->deps[i];
        int64_t fw = skew_needed(d, a, b, 1), bw = p->ordered ? -1 : skew_needed(d, a, b, -1);
        int64_t need = fw < 0 ? bw : bw < 0 ? fw : fw < bw ? fw : bw;
        if (need < 0) return -1;
        if (need > f) f = need;
    }
    return f;
}

/* How strongly index v is preferred (see the top): accesses subscripting it,
 * then its extent. */
static void prefer(uint32_t v, const loom_access *acc, size_t nacc, const uint64_t *extents,
                   uint64_t *uses, uint64_t *extent)
{
    *uses = 0;
    for (size_t i = 0; i < nacc; i++)
        for (uint32_t k = 0; k < acc[i].ndims; k++)
            if (acc[i].sub[k].kind == LOOM_SUB_INDEX && acc[i].sub[k].index == v) {
                (*uses)++;
                break;
            }
    *extent = extents ? extents[v] : 0;
}

static int better(uint32_t v, uint32_t best, const loom_access *acc, size_t nacc,
                  const uint64_t *extents)
{
    uint64_t uv, ev, ub, eb;
    prefer(v, acc, nacc, extents, &uv, &ev);
    prefer(best, acc, nacc, extents, &ub, &eb);
    return uv != ub ? uv > ub : ev > eb;
}

static int zero_at(const int64_t *d, uint32_t v)
{
    return d[v] == 0;
}

/* Is the pair (a, b) preferred to (c, e) (see the top)? Both orders. */
static int better_pair(uint32_t a, uint32_t b, uint32_t c, uint32_t e, const loom_access *acc,
                       size_t nacc, const uint64_t *extents)
{
    uint64_t ua, ea, ub, eb, uc, ec, ue, ee;
    prefer(a, acc, nacc, extents, &ua, &ea);
    prefer(b, acc, nacc, extents, &ub, &eb);
    prefer(c, acc, nacc, extents, &uc, &ec);
    prefer(e, acc, nacc, extents, &ue, &ee);
    if (ua + ub != uc + ue) return ua + ub > uc + ue;
    return ea + eb > ec + ee;
}

static void choose(loom_loop_plan *p, const loom_access *acc, size_t nacc, const uint64_t *extents)
{
    uint32_t D = p->dims;
    int found = 0;
    for (uint32_t v = 0; v < D; v++) { /* 1D */
        int ok = 1;
        for (size_t i = 0; i < p->ndeps && ok; i++) ok = zero_at(p->deps[i], v);
        if (ok && (!found || better(v, p->space, acc, nacc, extents))) p->space = v, found = 1;
    }
    if (found) {
        p->kind = LOOM_LOOP_1D;
        p->time = p->space;
        snprintf(p->why, sizeof p->why,
                 "1D over index %u: no dependence crosses it (%zu dependence vectors)", p->space,
                 p->ndeps);
        return;
    }
    for (uint32_t a = 0; a < D && !p->ordered; a++) /* 2D, unordered */
        for (uint32_t b = a + 1; b < D; b++) {
            int ok = 1;
            for (size_t i = 0; i < p->ndeps && ok; i++)
                ok = zero_at(p->deps[i], a) || zero_at(p->deps[i], b);
            if (!ok || (found && !better_pair(a, b, p->space, p->time, acc, nacc, extents)))
                continue;
            /* space: the preferred of the two, whose arrays stay put */
            int swap = better(b, a, acc, nacc, extents);
            p->space = swap ? b : a, p->time = swap ? a : b, found = 1;
        }
    if (found) {
        p->kind = LOOM_LOOP_2D;
        snprintf(p->why, sizeof p->why,
                 "2D: space index %u, time index %u; every dependence keeps one of them fixed",
                 p->space, p->time);
        return;
    }
    int64_t best = -1;
    for (uint32_t a = 0; a < D; a++)
        for (uint32_t b = 0; b < D; b++) {
            int64_t f = a == b ? -1 : wavefront_skew(p, a, b);
            if (f < 0 ||
                (best >= 0 && (f > best || (f == best && !better_pair(a, b, p->space, p->time, acc,
                                                                      nacc, extents)))))
                continue;
            best = f, p->space = a, p->time = b;
        }
    if (best >= 0) {
        p->kind = LOOM_LOOP_WAVEFRONT;
        p->skew = best;
        snprintf(p->why, sizeof p->why,
                 "wavefront: space index %u, time index %u skewed by %lld x index %u; every "
                 "dependence points forward in both",
                 p->space, p->time, (long long)best, p->space);
        return;
    }
    p->kind = LOOM_LOOP_SERIAL;
    p->space = p->time = 0;
    snprintf(p->why, sizeof p->why,
             "serial: no index is free of dependences, no two share them out, and no skew orders "
             "them (%zu dependence vectors); writes through a buffer would lift that",
             p->ndeps);
}

int loom_loop_plan_make(uint32_t dims, const loom_access *acc, size_t nacc, int ordered,
                        const uint64_t *extents, loom_loop_plan **out, char *err, size_t errlen)
{
    if (!out) return fail(err, errlen, "no place for the plan");
    *out = NULL;
    int rc = check(dims, acc, nacc, err, errlen);
    if (rc) return rc;
    loom_loop_plan *p = calloc(1, sizeof *p);
    /* each pair of accesses gives at most 2^dims - 1 oriented vectors */
    size_t cap = (nacc * (nacc + 1) / 2) * ((size_t)1 << dims) + 1;
    if (p) p->deps = malloc(cap * sizeof *p->deps);
    if (!p || !p->deps) {
        if (p) free(p->deps);
        free(p);
        return LOOM_ENOMEM;
    }
    p->dims = dims;
    p->ordered = ordered != 0;
    for (size_t i = 0; i < nacc; i++)
        for (size_t j = i; j < nacc; j++) {
            const loom_access *x = &acc[i], *y = &acc[j];
            if (x->array != y->array || !(x->write || y->write) || (i == j && !x->write)) continue;
            int64_t d[LOOM_LOOP_MAX_DIMS];
            if (distance(dims, x, y, d)) add_oriented(p, d, 0);
        }
    choose(p, acc, nacc, extents);
    *out = p;
    return 0;
}

void loom_loop_plan_free(loom_loop_plan *p)
{
    if (!p) return;
    free(p->deps);
    free(p);
}

loom_loop_kind loom_loop_plan_kind(const loom_loop_plan *p)
{
    return p->kind;
}

void loom_loop_plan_axes(const loom_loop_plan *p, uint32_t *space, uint32_t *time, int64_t *skew)
{
    if (space) *space = p->space;
    if (time) *time = p->time;
    if (skew) *skew = p->skew;
}

int loom_loop_plan_prefer_space(loom_loop_plan *p, uint32_t index)
{
    if (!p || index >= p->dims) return 0;
    if (p->space == index) return 1;
    if (p->kind == LOOM_LOOP_2D && p->time == index) {
        p->time = p->space;
        p->space = index;
        snprintf(p->why, sizeof p->why,
                 "2D: space index %u (as asked), time index %u; every dependence keeps one of "
                 "them fixed",
                 p->space, p->time);
        return 1;
    }
    if (p->kind != LOOM_LOOP_1D) return 0;
    for (size_t i = 0; i < p->ndeps; i++)
        if (!zero_at(p->deps[i], index)) return 0;
    p->space = p->time = index;
    snprintf(p->why, sizeof p->why,
             "1D over index %u (as asked): no dependence crosses it (%zu dependence vectors)",
             index, p->ndeps);
    return 1;
}

const char *loom_loop_plan_explain(const loom_loop_plan *p)
{
    return p->why;
}

size_t loom_loop_plan_deps(const loom_loop_plan *p)
{
    return p->ndeps;
}

int loom_loop_plan_dep(const loom_loop_plan *p, size_t i, int64_t *out)
{
    if (!p || i >= p->ndeps || !out) return LOOM_EINVAL;
    memcpy(out, p->deps[i], p->dims * sizeof *out);
    return 0;
}

uint32_t loom_loop_steps(const loom_loop_plan *p, uint32_t workers)
{
    if (!workers) return 0;
    switch (p->kind) {
    case LOOM_LOOP_2D:
        return workers;
    case LOOM_LOOP_WAVEFRONT:
        return 2 * workers - 1;
    default:
        return 1;
    }
}

int loom_loop_task(const loom_loop_plan *p, uint32_t workers, uint32_t step, uint32_t worker,
                   uint32_t *space_block, uint32_t *time_block)
{
    if (worker >= workers || step >= loom_loop_steps(p, workers)) return 0;
    uint32_t s = worker, t;
    switch (p->kind) {
    case LOOM_LOOP_1D:
        t = 0;
        break;
    case LOOM_LOOP_2D:
        t = (worker + step) % workers;
        break;
    case LOOM_LOOP_WAVEFRONT:
        if (step < worker || step - worker >= workers) return 0;
        t = step - worker;
        break;
    default:
        if (worker) return 0;
        s = t = 0;
    }
    *space_block = s;
    *time_block = t;
    return 1;
}

void loom_loop_coords(const loom_loop_plan *p, const int64_t *index, int64_t *space, int64_t *time)
{
    *space = index[p->space];
    *time = index[p->time] + p->skew * index[p->space];
}

int loom_loop_balance(const uint64_t *hist, size_t n, uint32_t parts, size_t *bounds)
{
    if (!parts || !bounds || (n && !hist)) return LOOM_EINVAL;
    uint64_t total = 0;
    for (size_t c = 0; c < n; c++) total += hist[c];
    /* range b ends at the first coordinate where the running count reaches
     * b/parts of the total (rounded to the nearer side of that coordinate) */
    size_t c = 0;
    uint64_t seen = 0;
    bounds[0] = 0;
    for (uint32_t b = 1; b < parts; b++) {
        unsigned __int128 goal = (unsigned __int128)total * b / parts;
        while (c < n && seen + hist[c] <= goal) seen += hist[c++];
        /* take coordinate c too when that lands nearer the goal */
        if (c < n && seen + hist[c] - goal < goal - seen) seen += hist[c++];
        bounds[b] = c;
    }
    bounds[parts] = n;
    return 0;
}
