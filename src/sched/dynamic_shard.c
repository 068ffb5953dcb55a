/* dynamic_shard: what one scheduler shard of the dynamic engine decides.
 *
 * STRADS's two-phase schedule (kim-thesis-strads.txt 5.1): phase I samples
 * L candidates of the shard's range with probability proportional to their
 * priority, (last change)^2 + eta; phase II drops one of every candidate pair
 * whose coupling exceeds rho, keeping the higher priority (candidates are
 * visited in decreasing priority and one is kept only if it is below rho
 * with every one kept before), and stops at P. Dropped candidates keep their
 * priority and are likely drawn again next round.
 *
 * A parameter not updated yet has no change to be prioritised by, so every
 * parameter is first visited once, uniformly without replacement; eta, the
 * floor that lets converged parameters be drawn again (Lee et al., NIPS
 * 2014), is `floor` times the mean (change)^2 of those first visits, so it
 * scales with the problem. A planned parameter has weight 0 until its change
 * comes back: it is never planned twice while in flight. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rand.h"
#include "loom/error.h"
#include "sched/dynamic.h"

static uint64_t next_random(dyn_shard *s)
{
    return rand_splitmix64(&s->rng);
}

/* Uniform in [0, n), n >= 1. */
static uint64_t random_below(dyn_shard *s, uint64_t n)
{
    return next_random(s) % n;
}

static double random_unit(dyn_shard *s)
{
    return rand_unit(next_random(s));
}

/* ---- the Fenwick tree of weights ---- */

static void set_weight(dyn_shard *s, size_t k, double w)
{
    double diff = w - s->weight[k];
    s->weight[k] = w;
    for (size_t i = k + 1; i <= s->size; i += i & (~i + 1)) s->tree[i] += diff;
}

static void rebuild_tree(dyn_shard *s)
{
    memset(s->tree, 0, (s->size + 1) * sizeof *s->tree);
    for (size_t i = 1; i <= s->size; i++) {
        s->tree[i] += s->weight[i - 1];
        size_t up = i + (i & (~i + 1));
        if (up <= s->size) s->tree[up] += s->tree[i];
    }
}

/* The offset whose cumulative weight interval holds u. */
static size_t find_weight(const dyn_shard *s, double u)
{
    size_t pos = 0, step = 1;
    while (step * 2 <= s->size) step *= 2;
    for (; step; step /= 2)
        if (pos + step <= s->size && s->tree[pos + step] <= u) {
            pos += step;
            u -= s->tree[pos];
        }
    return pos < s->size ? pos : s->size - 1;
}

static double total_weight(const dyn_shard *s)
{
    double t = 0;
    for (size_t i = s->size; i; i -= i & (~i + 1)) t += s->tree[i];
    return t;
}

int dyn_shard_init(dyn_shard *s, const loom_dyn_opts *o, const loom_dyn_app *app, uint64_t lo,
                   uint64_t hi, uint64_t stream)
{
    memset(s, 0, sizeof *s);
    s->o = *o;
    s->app = app;
    s->lo = lo;
    s->hi = hi;
    s->size = (size_t)(hi - lo);
    s->rng = o->seed * RAND_GOLDEN ^ (stream + 1) * 0xD1B54A32D192ED03ull;
    size_t l = o->candidates > o->parallel ? o->candidates : o->parallel;
    s->weight = calloc(s->size, sizeof *s->weight);
    s->tree = calloc(s->size + 1, sizeof *s->tree);
    s->unvisited = malloc(s->size * sizeof *s->unvisited);
    s->in_flight = calloc(s->size, 1);
    s->visited = calloc(s->size, 1);
    s->flying = malloc((size_t)o->depth * o->parallel * sizeof *s->flying);
    s->cand = malloc(l * sizeof *s->cand);
    s->cand_weight = malloc(l * sizeof *s->cand_weight);
    if (!s->weight || !s->tree || !s->unvisited || !s->in_flight || !s->visited || !s->flying ||
        !s->cand || !s->cand_weight) {
        dyn_shard_free(s);
        return LOOM_ENOMEM;
    }
    for (size_t k = 0; k < s->size; k++) s->unvisited[k] = k;
    s->unvisited_left = s->size;
    return 0;
}

void dyn_shard_free(dyn_shard *s)
{
    free(s->weight);
    free(s->tree);
    free(s->unvisited);
    free(s->in_flight);
    free(s->visited);
    free(s->flying);
    free(s->cand);
    free(s->cand_weight);
    memset(s, 0, sizeof *s);
}

/* Phase I while parameters are unvisited: up to l distinct unvisited ones
 * (a partial Fisher-Yates shuffle of the unvisited list's head). */
static size_t sample_unvisited(dyn_shard *s, size_t l)
{
    size_t n = l < s->unvisited_left ? l : s->unvisited_left;
    for (size_t i = 0; i < n; i++) {
        size_t j = i + (size_t)random_below(s, s->unvisited_left - i);
        uint64_t t = s->unvisited[i];
        s->unvisited[i] = s->unvisited[j];
        s->unvisited[j] = t;
        s->cand[i] = s->unvisited[i];
        s->cand_weight[i] = 0;
    }
    return n;
}

/* All parameters were visited: weights become (change)^2 + eta. */
static void start_priorities(dyn_shard *s)
{
    double mean = s->first_count ? s->first_sum / (double)s->first_count : 0;
    s->eta = mean > 0 ? s->o.floor * mean : 1; /* nothing moved yet: uniform */
    for (size_t k = 0; k < s->size; k++)
        if (!s->in_flight[k] && s->visited[k]) s->weight[k] += s->eta;
    rebuild_tree(s);
}

/* Phase I by priority: up to l distinct draws, each taken out of the tree
 * (weight 0) so that it is not drawn twice; the caller puts back the ones it
 * does not plan. */
static size_t sample_weighted(dyn_shard *s, size_t l)
{
    size_t n = 0;
    for (size_t tries = 0; n < l && tries < 4 * l; tries++) {
        double total = total_weight(s);
        if (!(total > 0)) break;
        size_t k = find_weight(s, random_unit(s) * total);
        if (s->weight[k] <= 0) continue; /* rounding put u past the last positive weight */
        s->cand[n] = k;
        s->cand_weight[n++] = s->weight[k];
        set_weight(s, k, 0);
    }
    return n;
}

/* Phase I without priorities: up to l distinct parameters not in flight. */
static size_t sample_uniform(dyn_shard *s, size_t l)
{
    size_t n = 0;
    for (size_t tries = 0; n < l && tries < 8 * l; tries++) {
        size_t k = (size_t)random_below(s, s->size);
        int again = s->in_flight[k];
        for (size_t i = 0; i < n && !again; i++) again = s->cand[i] == k;
        if (again) continue;
        s->cand[n] = k;
        s->cand_weight[n++] = 0;
    }
    return n;
}

static int by_weight_desc(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return (x[0] < y[0]) - (x[0] > y[0]);
}

/* Phase II: keep candidates (in order) whose coupling with every kept one,
 * and with every key of this shard still in flight (pipelining: those
 * updates are not yet in the residual this round reads), is at most rho, up
 * to P; keys receives them. */
static size_t check_dependencies(dyn_shard *s, size_t ncand, uint64_t *keys)
{
    size_t kept = 0;
    for (size_t i = 0; i < ncand && kept < s->o.parallel; i++) {
        uint64_t key = s->lo + s->cand[i];
        int ok = 1;
        for (size_t j = 0; j < kept && ok; j++)
            ok = !(s->app->coupling(s->app->arg, key, keys[j]) > s->o.rho);
        for (size_t j = 0; j < s->nflying && ok; j++)
            ok = !(s->app->coupling(s->app->arg, key, s->flying[j]) > s->o.rho);
        if (ok) keys[kept++] = key;
    }
    return kept;
}

static void mark_planned(dyn_shard *s, const uint64_t *keys, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t k = (size_t)(keys[i] - s->lo);
        s->in_flight[k] = 1;
        s->flying[s->nflying++] = keys[i];
        if (s->o.schedule != LOOM_DYN_PRIORITY) continue;
        if (s->weight[k] != 0) set_weight(s, k, 0);
        if (!s->visited[k]) {
            /* Leaves the unvisited list (it is among the list's head). */
            for (size_t j = 0; j < s->unvisited_left; j++)
                if (s->unvisited[j] == k) {
                    s->unvisited[j] = s->unvisited[--s->unvisited_left];
                    break;
                }
            s->visited[k] = 1;
            if (!s->unvisited_left) start_priorities(s);
        }
    }
}

static int plan_user(dyn_shard *s, uint64_t round, uint64_t *keys, size_t *n, char *err,
                     size_t errlen)
{
    size_t got = s->app->schedule(s->app->arg, round, s->lo, s->hi, keys, s->o.parallel);
    if (got > s->o.parallel) got = s->o.parallel;
    for (size_t i = 0; i < got; i++) {
        const char *why = NULL;
        if (keys[i] < s->lo || keys[i] >= s->hi)
            why = "outside the shard";
        else if (s->in_flight[keys[i] - s->lo])
            why = "still in flight or named twice";
        if (why) {
            if (err)
                snprintf(err, errlen,
                         "round %llu: the schedule named key %llu, %s [%llu, %llu) of the %llu "
                         "parameters",
                         (unsigned long long)round, (unsigned long long)keys[i], why,
                         (unsigned long long)s->lo, (unsigned long long)s->hi,
                         (unsigned long long)s->o.dim);
            for (size_t j = 0; j < i; j++) s->in_flight[keys[j] - s->lo] = 0;
            return LOOM_EKEYRANGE;
        }
        s->in_flight[keys[i] - s->lo] = 1; /* catches a key named twice */
    }
    for (size_t i = 0; i < got; i++) s->in_flight[keys[i] - s->lo] = 0;
    mark_planned(s, keys, got);
    *n = got;
    return 0;
}

int dyn_shard_plan(dyn_shard *s, uint64_t round, uint64_t *keys, size_t *n, char *err,
                   size_t errlen)
{
    size_t l = s->o.candidates > s->o.parallel ? s->o.candidates : s->o.parallel;
    size_t ncand = 0;
    *n = 0;
    /* At most depth rounds are in flight, so flying never holds more than
     * depth * parallel keys; a plan beyond that means the rounds' sums did
     * not come back as the coordinator's stream order promises. */
    if (s->nflying + s->o.parallel > (size_t)s->o.depth * s->o.parallel) {
        if (err)
            snprintf(err, errlen, "round %llu: more than %u rounds in flight",
                     (unsigned long long)round, (unsigned)s->o.depth);
        return LOOM_EPROTO;
    }
    switch (s->o.schedule) {
    case LOOM_DYN_USER:
        return plan_user(s, round, keys, n, err, errlen);
    case LOOM_DYN_ROUND_ROBIN:
        for (size_t tries = 0; *n < s->o.parallel && tries < s->size; tries++) {
            uint64_t k = s->cursor;
            s->cursor = (s->cursor + 1) % s->size;
            if (!s->in_flight[k]) keys[(*n)++] = s->lo + k;
        }
        mark_planned(s, keys, *n);
        return 0;
    case LOOM_DYN_RANDOM:
        ncand = sample_uniform(s, s->o.parallel);
        for (size_t i = 0; i < ncand; i++) keys[i] = s->lo + s->cand[i];
        *n = ncand;
        mark_planned(s, keys, *n);
        return 0;
    case LOOM_DYN_UNIFORM:
        ncand = sample_uniform(s, l);
        break;
    default: /* LOOM_DYN_PRIORITY */
        if (s->unvisited_left) {
            ncand = sample_unvisited(s, l);
        } else {
            ncand = sample_weighted(s, l);
            /* Highest priority first: it wins its conflicts. cand and
             * cand_weight are sorted together as (weight, offset) pairs. */
            double(*pairs)[2] = malloc(ncand * sizeof *pairs);
            if (pairs) {
                for (size_t i = 0; i < ncand; i++) {
                    pairs[i][0] = s->cand_weight[i];
                    pairs[i][1] = (double)s->cand[i];
                }
                qsort(pairs, ncand, sizeof *pairs, by_weight_desc);
                for (size_t i = 0; i < ncand; i++) {
                    s->cand_weight[i] = pairs[i][0];
                    s->cand[i] = (uint64_t)pairs[i][1];
                }
                free(pairs);
            }
        }
        break;
    }
    *n = check_dependencies(s, ncand, keys);
    mark_planned(s, keys, *n);
    /* Candidates drawn out of the tree but not planned get their weight back. */
    for (size_t i = 0; i < ncand; i++)
        if (s->cand_weight[i] > 0 && !s->in_flight[s->cand[i]])
            set_weight(s, s->cand[i], s->cand_weight[i]);
    return 0;
}

void dyn_shard_done(dyn_shard *s, const uint64_t *keys, size_t n, const double *change)
{
    for (size_t i = 0; i < n; i++) {
        if (keys[i] < s->lo || keys[i] >= s->hi) continue;
        size_t k = (size_t)(keys[i] - s->lo);
        double c2 = change[i] * change[i];
        s->in_flight[k] = 0;
        for (size_t j = 0; j < s->nflying; j++)
            if (s->flying[j] == keys[i]) {
                s->flying[j] = s->flying[--s->nflying];
                break;
            }
        if (s->o.schedule != LOOM_DYN_PRIORITY) continue;
        if (s->unvisited_left || s->eta == 0) {
            /* A first visit: its change sets eta's scale; its weight waits
             * for start_priorities. */
            s->first_sum += c2;
            s->first_count++;
            s->weight[k] = c2; /* not in the tree yet (rebuilt then) */
        } else {
            set_weight(s, k, c2 + s->eta);
        }
    }
}
