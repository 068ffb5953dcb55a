/* tabledef: checking, encoding and partitioning table definitions.
 *
 * A table is defined by its name and options; workers send the definition to
 * the scheduler, which forwards it to the servers. The encoding is canonical
 * (fixed field order, defaults applied) so that "the same options" is a byte
 * comparison, and decoding re-checks everything, since the bytes come off the
 * network. Keys are split over S servers in equal contiguous slices of the
 * table's key range, computed in 128-bit arithmetic so the full uint64 range
 * (end = 2^64) needs no special case. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "loom/error.h"
#include "ps/filter.h"
#include "ps/ps.h"

size_t loom_type_size(loom_type t)
{
    switch (t) {
    case LOOM_F32:
    case LOOM_I32:
        return 4;
    case LOOM_F64:
    case LOOM_I64:
        return 8;
    default:
        return 0;
    }
}

static int name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n > 0 && n <= LOOM_MAX_NAME;
}

static int check_def(const ps_table_def *d, char *why, size_t whylen)
{
    const loom_table_opts *o = &d->opts;
#define BAD(...) return (why ? snprintf(why, whylen, __VA_ARGS__) : 0), LOOM_EINVAL
    if (!name_ok(d->name)) BAD("table name must be 1 to %d characters", LOOM_MAX_NAME);
    size_t vsize = loom_type_size(o->type);
    if (!vsize) BAD("unknown value type %d", (int)o->type);
    if (o->width == 0 || (size_t)o->width * vsize > PS_MAX_ROW_BYTES)
        BAD("row width %u is out of range (1 to %zu bytes per row)", o->width, PS_MAX_ROW_BYTES);
    if (o->storage != LOOM_DENSE && o->storage != LOOM_SPARSE)
        BAD("unknown storage %d", (int)o->storage);
    if ((ps_u128)o->key_begin >= ps_key_end(o)) BAD("empty key range");
    if (o->storage == LOOM_DENSE && !o->key_end) BAD("a dense table needs a finite key_end");
    if (o->consistency != LOOM_ASP && o->consistency != LOOM_SSP && o->consistency != LOOM_BSP)
        BAD("unknown consistency model %d", (int)o->consistency);
    if (o->staleness < 0 || o->staleness > 1000000)
        BAD("staleness %d is out of range", o->staleness);
    if (!name_ok(d->updater)) BAD("updater name must be 1 to %d characters", LOOM_MAX_NAME);
    if (o->init != LOOM_INIT_ZERO && o->init != LOOM_INIT_UNIFORM && o->init != LOOM_INIT_NORMAL)
        BAD("unknown initialiser %d", (int)o->init);
    if (o->init != LOOM_INIT_ZERO && (o->type == LOOM_I32 || o->type == LOOM_I64))
        BAD("integer tables can only start at zero");
    const double hp[] = {o->lr, o->beta, o->l1, o->l2, o->eps, o->init_a, o->init_b};
    for (size_t i = 0; i < sizeof hp / sizeof *hp; i++)
        if (!isfinite(hp[i])) BAD("hyper-parameters must be finite numbers");
    for (int i = 0; i < LOOM_MAX_PARAMS; i++)
        if (!isfinite(o->params[i])) BAD("params[%d] must be a finite number", i);
    if (o->lr < 0 || o->l1 < 0 || o->l2 < 0 || o->eps < 0 || o->beta < 0)
        BAD("lr, beta, l1, l2 and eps must not be negative");
    if (o->lr == 0 && (!strcmp(d->updater, "sgd") || !strcmp(d->updater, "adagrad") ||
                       !strcmp(d->updater, "ftrl")))
        BAD("updater \"%s\" needs a learning rate lr > 0", d->updater);
    if (o->init == LOOM_INIT_UNIFORM && !(o->init_a < o->init_b))
        BAD("uniform initialisation needs init_a < init_b");
    if (o->init == LOOM_INIT_NORMAL && o->init_b < 0)
        BAD("normal initialisation needs a standard deviation init_b >= 0");
    const char *specs[2] = {d->filter_push, d->filter_pull};
    for (int dir = 0; dir < 2; dir++) {
        filter_spec spec;
        filter_chain *c;
        char err[160];
        filter_dir fd = dir ? FILTER_PULL : FILTER_PUSH;
        if (filter_spec_parse_dir(specs[dir], fd, &spec, err, sizeof err) ||
            filter_chain_create(&spec, fd, o->type, o->width, 0, &c, err, sizeof err))
            BAD("%s filters: %s", dir ? "pull" : "push", err);
        filter_chain_destroy(c);
    }
    if (!isfinite(o->bandwidth_mbits) || o->bandwidth_mbits < 0 || o->bandwidth_mbits > 1e6)
        BAD("bandwidth_mbits must be 0 (no budget) to 1e6");
    if (o->priority < LOOM_PRIORITY_NONE || o->priority > LOOM_PRIORITY_REL)
        BAD("unknown priority %d", (int)o->priority);
    if (o->queue_rows > 1000000) BAD("queue_rows must be at most 1000000");
#undef BAD
    return 0;
}

int ps_def_from_user(ps_table_def *def, const char *name, const loom_table_opts *opts, char *why,
                     size_t whylen)
{
    static const loom_table_opts defaults = LOOM_TABLE_OPTS_DEFAULT;
    memset(def, 0, sizeof *def);
    def->opts = opts ? *opts : defaults;
    const char *upd = def->opts.updater ? def->opts.updater : "sum";
    if (!name_ok(name) || !name_ok(upd)) {
        if (why)
            snprintf(why, whylen, "table and updater names must be 1 to %d characters",
                     LOOM_MAX_NAME);
        return LOOM_EINVAL;
    }
    snprintf(def->name, sizeof def->name, "%s", name);
    snprintf(def->updater, sizeof def->updater, "%s", upd);
    const char *fp = def->opts.filter_push ? def->opts.filter_push : "";
    const char *fl = def->opts.filter_pull ? def->opts.filter_pull : "";
    if (strlen(fp) > PS_MAX_FILTER_SPEC || strlen(fl) > PS_MAX_FILTER_SPEC) {
        if (why)
            snprintf(why, whylen, "filter specs must be at most %d characters", PS_MAX_FILTER_SPEC);
        return LOOM_EINVAL;
    }
    snprintf(def->filter_push, sizeof def->filter_push, "%s", fp);
    snprintf(def->filter_pull, sizeof def->filter_pull, "%s", fl);
    ps_def_fix_pointers(def);
    /* Staleness means something only for SSP; BSP is SSP(0). */
    if (def->opts.consistency == LOOM_BSP) def->opts.staleness = 0;
    if (def->opts.consistency == LOOM_ASP) def->opts.staleness = 0;
    return check_def(def, why, whylen);
}

int ps_def_encode(const ps_table_def *d, blob_writer *w)
{
    const loom_table_opts *o = &d->opts;
    blob_put_str(w, d->name);
    blob_put_str(w, d->updater);
    blob_put_u8(w, (uint8_t)o->type);
    blob_put_u32(w, o->width);
    blob_put_u8(w, (uint8_t)o->storage);
    blob_put_u64(w, o->key_begin);
    blob_put_u64(w, o->key_end);
    blob_put_u8(w, (uint8_t)o->consistency);
    blob_put_u32(w, (uint32_t)o->staleness);
    blob_put_f64(w, o->lr);
    blob_put_f64(w, o->beta);
    blob_put_f64(w, o->l1);
    blob_put_f64(w, o->l2);
    blob_put_f64(w, o->eps);
    for (int i = 0; i < LOOM_MAX_PARAMS; i++) blob_put_f64(w, o->params[i]);
    blob_put_u8(w, (uint8_t)o->init);
    blob_put_f64(w, o->init_a);
    blob_put_f64(w, o->init_b);
    blob_put_u64(w, o->init_seed);
    blob_put_str(w, d->filter_push);
    blob_put_str(w, d->filter_pull);
    blob_put_f64(w, o->bandwidth_mbits);
    blob_put_u8(w, (uint8_t)o->priority);
    blob_put_u32(w, o->queue_rows);
    return w->bad ? LOOM_ENOMEM : 0;
}

void ps_def_fix_pointers(ps_table_def *d)
{
    d->opts.updater = d->updater;
    d->opts.filter_push = d->filter_push;
    d->opts.filter_pull = d->filter_pull;
}

int ps_def_decode(const void *data, size_t len, ps_table_def *d)
{
    static const loom_table_opts defaults = LOOM_TABLE_OPTS_DEFAULT;
    blob_reader r = {data, len, 0};
    memset(d, 0, sizeof *d);
    loom_table_opts *o = &d->opts;
    *o = defaults;
    blob_get_str(&r, d->name, sizeof d->name);
    blob_get_str(&r, d->updater, sizeof d->updater);
    o->updater = d->updater;
    o->type = (loom_type)blob_get_u8(&r);
    o->width = blob_get_u32(&r);
    o->storage = (loom_storage)blob_get_u8(&r);
    o->key_begin = blob_get_u64(&r);
    o->key_end = blob_get_u64(&r);
    o->consistency = (loom_consistency)blob_get_u8(&r);
    o->staleness = (int)blob_get_u32(&r);
    o->lr = blob_get_f64(&r);
    o->beta = blob_get_f64(&r);
    o->l1 = blob_get_f64(&r);
    o->l2 = blob_get_f64(&r);
    o->eps = blob_get_f64(&r);
    for (int i = 0; i < LOOM_MAX_PARAMS; i++) o->params[i] = blob_get_f64(&r);
    o->init = (loom_init_kind)blob_get_u8(&r);
    o->init_a = blob_get_f64(&r);
    o->init_b = blob_get_f64(&r);
    o->init_seed = blob_get_u64(&r);
    blob_get_str(&r, d->filter_push, sizeof d->filter_push);
    blob_get_str(&r, d->filter_pull, sizeof d->filter_pull);
    o->bandwidth_mbits = blob_get_f64(&r);
    o->priority = (loom_priority)blob_get_u8(&r);
    o->queue_rows = blob_get_u32(&r);
    ps_def_fix_pointers(d);
    if (r.bad || r.left) return LOOM_EPROTO;
    return check_def(d, NULL, 0) ? LOOM_EPROTO : 0;
}

ps_u128 ps_slice_start(const loom_table_opts *o, int num_servers, int s)
{
    ps_u128 begin = o->key_begin, span = ps_key_end(o) - begin;
    return begin + span * (ps_u128)s / (ps_u128)num_servers;
}

int ps_server_of(const loom_table_opts *o, int num_servers, uint64_t key)
{
    ps_u128 begin = o->key_begin, span = ps_key_end(o) - begin;
    /* Invert start(s) = begin + span*s/S, then fix the rounding by one step. */
    int s = (int)(((ps_u128)key - begin) * (ps_u128)num_servers / span);
    if (s >= num_servers) s = num_servers - 1;
    while (s > 0 && (ps_u128)key < ps_slice_start(o, num_servers, s)) s--;
    while (s + 1 < num_servers && (ps_u128)key >= ps_slice_start(o, num_servers, s + 1)) s++;
    return s;
}
