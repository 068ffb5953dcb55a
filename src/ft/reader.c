/* reader: a checkpoint directory seen from outside a job (loom checkpoint
 * ls|verify|export; include/loom/checkpoint.h).
 *
 * Opening verifies everything the manifest names (size, CRC-32C, header), so
 * a checkpoint that opens is whole; errors go to loom_last_error() with the
 * file, without printing: the tool decides what to say. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/u64map.h"
#include "ft/ft.h"
#include "loom/checkpoint.h"
#include "loom/error.h"
#include "ps/ps.h"

struct loom_checkpoint {
    char dir[PATH_MAX];
    ft_manifest m;
    uint8_t **data; /* per part, verified */
    uint64_t bytes;
};

void loom_checkpoint_close(loom_checkpoint *ck)
{
    if (!ck) return;
    for (size_t i = 0; ck->data && i < ck->m.nparts; i++) free(ck->data[i]);
    free(ck->data);
    ft_manifest_free(&ck->m);
    free(ck);
}

int loom_checkpoint_open(const char *dir, int64_t clock, loom_checkpoint **out)
{
    if (!dir || !out) return LOOM_EINVAL;
    *out = NULL;
    loom_checkpoint *ck = calloc(1, sizeof *ck);
    if (!ck) return LOOM_ENOMEM;
    snprintf(ck->dir, sizeof ck->dir, "%s", dir);
    char why[1024];
    int rc = ft_manifest_load(dir, clock, &ck->m, why, sizeof why);
    if (!rc) {
        ck->data = calloc(ck->m.nparts ? ck->m.nparts : 1, sizeof *ck->data);
        if (!ck->data) rc = LOOM_ENOMEM;
    }
    for (size_t i = 0; !rc && i < ck->m.nparts; i++) {
        rc = ft_part_load(dir, &ck->m, &ck->m.parts[i], &ck->data[i], why, sizeof why);
        ck->bytes += ck->m.parts[i].size;
    }
    if (rc) {
        log_set_error("%s", rc == LOOM_ENOMEM ? "out of memory" : why);
        loom_checkpoint_close(ck);
        return rc;
    }
    *out = ck;
    return 0;
}

int64_t loom_checkpoint_clock(const loom_checkpoint *ck)
{
    return ck->m.clock;
}
const char *loom_checkpoint_model(const loom_checkpoint *ck)
{
    return ck->m.model;
}
int loom_checkpoint_num_servers(const loom_checkpoint *ck)
{
    return (int)ck->m.servers;
}
int loom_checkpoint_num_workers(const loom_checkpoint *ck)
{
    return (int)ck->m.workers;
}
uint64_t loom_checkpoint_bytes(const loom_checkpoint *ck)
{
    return ck->bytes;
}

int loom_checkpoint_worker_state(const loom_checkpoint *ck, int rank, const void **state,
                                 size_t *len)
{
    if (!ck || !state || !len) return LOOM_EINVAL;
    for (size_t i = 0; i < ck->m.nparts; i++) {
        const ft_part *p = &ck->m.parts[i];
        if (p->kind == FT_WORKER && (int)p->rank == rank) {
            *state = ck->data[i] + FT_HEADER_SIZE;
            *len = (size_t)p->size - FT_HEADER_SIZE;
            return 0;
        }
    }
    return LOOM_ENOTFOUND;
}

/* The newest value of every key: later parts of a chain overwrite earlier ones. */
typedef struct merge {
    const char *name;
    u64map map;
    uint8_t *rows;
    size_t row_bytes, count, cap;
    ps_table_def def;
    int found;
    char why[256]; /* a malformed section: how */
} merge;

static int merge_row(void *ctx, uint64_t key, const void *row)
{
    merge *mg = ctx;
    int inserted;
    uint32_t slot = u64map_put(&mg->map, key, (uint32_t)mg->count, &inserted);
    if (slot == UINT32_MAX) return LOOM_ENOMEM;
    if (inserted) {
        if (mg->count == mg->cap) {
            size_t cap = mg->cap ? 2 * mg->cap : 1024;
            uint8_t *g = realloc(mg->rows, cap * mg->row_bytes);
            if (!g) return LOOM_ENOMEM;
            mg->rows = g;
            mg->cap = cap;
        }
        mg->count++;
    }
    memcpy(mg->rows + (size_t)slot * mg->row_bytes, row, mg->row_bytes);
    return 0;
}

static int count_nothing(void *ctx, uint64_t key, const void *row)
{
    (void)ctx, (void)key, (void)row;
    return 0;
}

/* Whether two definitions are the same table (their canonical encodings). */
static int same_def(const ps_table_def *a, const ps_table_def *b)
{
    blob_writer x = {0}, y = {0};
    int same = !ps_def_encode(a, &x) && !ps_def_encode(b, &y) && x.len == y.len &&
               !memcmp(x.buf, y.buf, x.len);
    free(x.buf);
    free(y.buf);
    return same;
}

static int merge_table(void *ctx, const char *name, const uint8_t *data, size_t len)
{
    merge *mg = ctx;
    if (strcmp(name, mg->name)) return 0;
    ps_table_def def;
    int rc = ps_snapshot_read(data, len, &def, count_nothing, NULL, mg->why, sizeof mg->why);
    if (rc) return rc;
    /* Every part's keys were checked against its own definition: the parts
     * must agree on it for the rows to be one table's. */
    if (mg->found && !same_def(&def, &mg->def)) {
        snprintf(mg->why, sizeof mg->why, "its definition differs from an earlier part's");
        return LOOM_EPROTO;
    }
    mg->found = 1;
    mg->def = def;
    ps_def_fix_pointers(&mg->def);
    mg->row_bytes = (size_t)def.opts.width * loom_type_size(def.opts.type);
    return ps_snapshot_read(data, len, &def, merge_row, mg, mg->why, sizeof mg->why);
}

int loom_checkpoint_rows(const loom_checkpoint *ck, const char *name, uint32_t *width,
                         size_t *value_size, loom_checkpoint_row_fn fn, void *ctx)
{
    if (!ck || !name || !fn) return LOOM_EINVAL;
    merge mg = {.name = name};
    if (u64map_init(&mg.map, 0)) return LOOM_ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < ck->m.nparts && !rc; i++) {
        const ft_part *p = &ck->m.parts[i];
        if (p->kind != FT_SERVER) continue;
        mg.why[0] = '\0';
        rc = ft_sections(ck->data[i] + FT_HEADER_SIZE, (size_t)p->size - FT_HEADER_SIZE,
                         merge_table, &mg);
        if (rc == LOOM_EPROTO)
            log_set_error("%s/%s: malformed section of table \"%s\"%s%s", ck->dir, p->path, name,
                          mg.why[0] ? ": " : "", mg.why);
    }
    if (!rc && !mg.found) {
        log_set_error("%s: no table \"%s\" in the checkpoint at clock %" PRId64, ck->dir, name,
                      ck->m.clock);
        rc = LOOM_ENOTFOUND;
    }
    if (!rc) {
        if (width) *width = mg.def.opts.width;
        if (value_size) *value_size = loom_type_size(mg.def.opts.type);
        if (mg.map.slots)
            for (size_t b = 0; b <= mg.map.mask && !rc; b++)
                if (mg.map.slots[b])
                    rc = fn(ctx, mg.map.keys[b],
                            mg.rows + (size_t)(mg.map.slots[b] - 1) * mg.row_bytes);
    }
    u64map_free(&mg.map);
    free(mg.rows);
    return rc;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The clocks of DIR's ckpt-<clock> directories, ascending, into *out (NULL
 * when none). Returns their number, or -1 if DIR cannot be read. */
static long scan_clocks(const char *dir, int64_t **out)
{
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) return -1;
    int64_t *clocks = NULL, c;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!ft_ckpt_name(e->d_name, &c)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *g = realloc(clocks, cap * sizeof *g);
            if (!g) break;
            clocks = g;
        }
        clocks[n++] = c;
    }
    closedir(d);
    if (n) qsort(clocks, n, sizeof *clocks, cmp_i64);
    *out = clocks;
    return (long)n;
}

/* Whether DIR's ckpt-<clock> directory is gone: a running job removes an old
 * checkpoint by renaming it (ft_dir_remove_ckpt) once a newer one is in. */
static int ckpt_gone(const char *dir, int64_t clock)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/ckpt-%012" PRId64, dir, clock);
    return faccessat(AT_FDCWD, path, F_OK, AT_SYMLINK_NOFOLLOW) && errno == ENOENT;
}

typedef struct listed {
    int64_t clock;
    int status;
    char *why; /* loom_last_error() after a failed open */
} listed;

static void free_listed(listed *l, long n)
{
    for (long i = 0; i < n; i++) free(l[i].why);
    free(l);
}

/* Every checkpoint of one scan of DIR opened into *out; *gone says whether one
 * vanished between the scan and its opening. Returns their number, -1 if DIR
 * cannot be read, -2 without memory. */
static long open_all(const char *dir, listed **out, int *gone)
{
    int64_t *clocks;
    long n = scan_clocks(dir, &clocks);
    *out = NULL;
    *gone = 0;
    if (n <= 0) return n;
    listed *l = calloc((size_t)n, sizeof *l);
    long k = 0;
    for (long i = 0; l && i < n; i++) {
        loom_checkpoint *ck;
        loom_clear_last_error();
        int rc = loom_checkpoint_open(dir, clocks[i], &ck);
        if (!rc) loom_checkpoint_close(ck);
        if (rc && ckpt_gone(dir, clocks[i])) {
            *gone = 1;
            continue;
        }
        if (rc == LOOM_ENOTFOUND) log_set_error("partial: no MANIFEST (never committed)");
        l[k] = (listed){clocks[i], rc, rc ? strdup(loom_last_error()) : NULL};
        k++;
    }
    free(clocks);
    if (!l) return -2;
    *out = l;
    return k;
}

/* A job may be checkpointing into DIR while it is listed: between the scan and
 * the opening of each checkpoint it can commit a new one and remove the old,
 * and a list of the old alone would say nothing resumable is there. So a scan
 * in which a checkpoint vanished is made again (a few times at most), and
 * the checkpoints are reported once one scan saw them all. */
int loom_checkpoint_list(const char *dir, loom_checkpoint_list_fn fn, void *ctx)
{
    if (!dir || !fn) return -LOOM_EINVAL;
    listed *l = NULL;
    long n = 0;
    int gone = 1;
    for (int scan = 0; gone && scan < 4; scan++) {
        free_listed(l, n);
        n = open_all(dir, &l, &gone);
        if (n == -1) {
            log_set_error("%s: cannot read the directory", dir);
            return -LOOM_ENOTFOUND;
        }
        if (n < 0) {
            log_set_error("out of memory");
            return -LOOM_ENOMEM;
        }
    }
    for (long i = 0; i < n; i++) {
        loom_clear_last_error();
        if (l[i].status) log_set_error("%s", l[i].why ? l[i].why : "out of memory");
        fn(ctx, l[i].clock, l[i].status);
    }
    free_listed(l, n);
    return (int)n;
}
