/* updater: the registry of user updaters and the built-in update rules; see
 * updater.h and updater_impl.h.
 *
 * User updaters are registered by name in a fixed table of 64 entries
 * guarded by a mutex (registration may race with tables being created on
 * other threads). A table copies what it resolved into its ps_updater, so
 * applying never touches the registry; registering a name again only affects
 * tables created afterwards.
 *
 * The gradient rules (sgd, adagrad, ftrl) compute in double whatever the
 * table's float type, and store the value and its state back in that type:
 * one loop per (rule, type), each calling the same per-value step. */
#include "ps/updater_impl.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "loom/error.h"
#include "ps/rowops.h"

#define MAX_UPDATERS 64

typedef struct registered {
    char name[LOOM_MAX_NAME + 1];
    uint32_t state_per_value;
    loom_updater_fn fn;
    void *user;
} registered;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static registered registry[MAX_UPDATERS];
static int registry_len;

static const struct {
    const char *name;
    upd_kind kind;
    uint32_t state_per_value;
} builtins[] = {
    {"sum", UPD_SUM, 0},         {"assign", UPD_ASSIGN, 0}, {"sgd", UPD_SGD, 0},
    {"adagrad", UPD_ADAGRAD, 1}, {"ftrl", UPD_FTRL, 2},
};
#define NUM_BUILTINS (sizeof builtins / sizeof builtins[0])

static int builtin_index(const char *name)
{
    for (size_t i = 0; i < NUM_BUILTINS; i++)
        if (strcmp(builtins[i].name, name) == 0) return (int)i;
    return -1;
}

/* Index of name in the registry or -1; the caller holds registry_lock. */
static int registry_find(const char *name)
{
    for (int i = 0; i < registry_len; i++)
        if (strcmp(registry[i].name, name) == 0) return i;
    return -1;
}

int loom_updater_register(const char *name, uint32_t state_per_value, loom_updater_fn fn,
                          void *user)
{
    if (!name || !fn || name[0] == '\0' || strlen(name) > LOOM_MAX_NAME || state_per_value > 4 ||
        builtin_index(name) >= 0)
        return LOOM_EINVAL;
    int rc = 0;
    pthread_mutex_lock(&registry_lock);
    int i = registry_find(name);
    if (i < 0 && registry_len == MAX_UPDATERS) {
        rc = LOOM_ELIMIT;
    } else {
        if (i < 0) i = registry_len++;
        registered *r = &registry[i];
        strcpy(r->name, name);
        r->state_per_value = state_per_value;
        r->fn = fn;
        r->user = user;
    }
    pthread_mutex_unlock(&registry_lock);
    return rc;
}

int updater_resolve(const char *name, loom_type t, ps_updater *out)
{
    if (!name || !out || (unsigned)t > LOOM_I64) return LOOM_EINVAL;
    int b = builtin_index(name);
    if (b >= 0) {
        upd_kind kind = builtins[b].kind;
        int is_float = t == LOOM_F32 || t == LOOM_F64;
        if (!is_float && kind != UPD_SUM && kind != UPD_ASSIGN) return LOOM_EINVAL;
        *out = (ps_updater){kind, builtins[b].state_per_value, NULL, NULL};
        return 0;
    }
    int rc = LOOM_ENOTFOUND;
    pthread_mutex_lock(&registry_lock);
    int i = registry_find(name);
    if (i >= 0) {
        *out =
            (ps_updater){UPD_USER, registry[i].state_per_value, registry[i].fn, registry[i].user};
        rc = 0;
    }
    pthread_mutex_unlock(&registry_lock);
    return rc;
}

int updater_coalesces_by_sum(const ps_updater *u)
{
    return u->kind != UPD_ASSIGN;
}

static inline double sgd_step(const loom_table_opts *o, double w, double g)
{
    return w - o->lr * (g + o->l2 * w);
}

static inline double adagrad_step(const loom_table_opts *o, double w, double g, double *n)
{
    *n += g * g;
    return w - o->lr * g / (sqrt(*n) + o->eps);
}

/* FTRL-proximal (McMahan et al. 2013, Algorithm 1) for one coordinate. */
static inline double ftrl_step(const loom_table_opts *o, double w, double g, double *z, double *n)
{
    double alpha = o->lr;
    double sigma = (sqrt(*n + g * g) - sqrt(*n)) / alpha;
    *z += g - sigma * w;
    *n += g * g;
    if (fabs(*z) <= o->l1) return 0.0;
    double sign = *z < 0 ? -1.0 : 1.0;
    return -(*z - sign * o->l1) / ((o->beta + sqrt(*n)) / alpha + o->l2);
}

/* The gradient rules for one float type T: load as double, step, store as T.
 * State layout: adagrad n[width]; ftrl z[width] then n[width]. */
#define GRADIENT_LOOPS(T)                                                                          \
    do {                                                                                           \
        T *w = value, *s = state;                                                                  \
        const T *g = delta;                                                                        \
        switch (u->kind) {                                                                         \
        case UPD_SGD:                                                                              \
            for (uint32_t j = 0; j < width; j++) w[j] = (T)sgd_step(o, w[j], g[j]);                \
            break;                                                                                 \
        case UPD_ADAGRAD:                                                                          \
            for (uint32_t j = 0; j < width; j++) {                                                 \
                double n = s[j];                                                                   \
                w[j] = (T)adagrad_step(o, w[j], g[j], &n);                                         \
                s[j] = (T)n;                                                                       \
            }                                                                                      \
            break;                                                                                 \
        case UPD_FTRL:                                                                             \
            for (uint32_t j = 0; j < width; j++) {                                                 \
                double z = s[j], n = s[width + j];                                                 \
                w[j] = (T)ftrl_step(o, w[j], g[j], &z, &n);                                        \
                s[j] = (T)z;                                                                       \
                s[width + j] = (T)n;                                                               \
            }                                                                                      \
            break;                                                                                 \
        default:                                                                                   \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

void updater_apply(const ps_updater *u, const loom_table_opts *o, loom_type t, uint32_t width,
                   uint64_t key, void *value, void *state, const void *delta)
{
    switch (u->kind) {
    case UPD_SUM:
        rows_add(t, value, delta, width);
        return;
    case UPD_ASSIGN:
        memcpy(value, delta, (size_t)width * loom_type_size(t));
        return;
    case UPD_USER: {
        loom_update up = {t, width, key, value, state, delta, o};
        u->fn(&up, u->user);
        return;
    }
    case UPD_SGD:
    case UPD_ADAGRAD:
    case UPD_FTRL:
        /* updater_resolve() gives these to float tables only. */
        if (t == LOOM_F32)
            GRADIENT_LOOPS(float);
        else if (t == LOOM_F64)
            GRADIENT_LOOPS(double);
        return;
    }
}
