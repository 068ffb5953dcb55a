/* server_ckpt: what a server does for checkpoints (ps.h; src/ft writes them).
 *
 * src/ft plans a checkpoint at a job clock (ps_server_plan_cut). The server
 * cuts it when its min clock reaches that clock: every push of an earlier
 * clock is applied then and none of a later one (server_clock.c holds them
 * back), and src/ft's cut() reads the partitions, one section per table
 * (ps_server_encode). With replicas, the changed rows go to the replicas
 * first, and a server that took ranges over from a dead one cuts only once
 * every worker sent again what the dead server's replicas lacked
 * (cut_settled). When a table is created, restore() fills it from a
 * checkpoint (ps_snapshot_apply); ps_snapshot_read reads a section without a
 * server. Rows go in sections, and in replication rounds, as srv_put_row
 * writes them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/error.h"
#include "ps/server_impl.h"

/* ---- the cut ---- */

/* Whether a cut at `clock` holds every push of the clocks before it in the
 * ranges this server took over: every worker (not lost) handled the latest
 * death, so sent again what the dead server lacked, before the CLOCK that
 * ended its clock clock-1 (the same connection keeps them in order). The
 * deaths are counted over the whole job, replaced servers' too, as the
 * workers count them: a replacement coming back does not make an earlier
 * death the latest again. A worker whose first CLOCK saying so is the one
 * of a newer death may have handled this one earlier: skipped all the same,
 * which is safe. */
static int cut_settled(const server *s, int64_t clock)
{
    uint32_t moves = s->deaths + s->handbacks; /* a handback moves ranges too */
    if (!s->took_over || !moves) return 1;
    for (int w = 0; w < s->num_workers; w++)
        if (!s->lost[w] && (s->handled[w] < moves || s->handled_since[w] > clock)) return 0;
    return 1;
}

/* Cut the planned checkpoint now: the min clock is its clock, every push of
 * an earlier clock is applied and none of a later one. */
void srv_cut_now(server *s)
{
    int64_t job = s->cut_at;
    s->cut_at = -1;
    /* Rows' change marks are the replication rounds' too, and a cut reads
     * (and clears) them: the changes go to the replicas first, then the
     * part is written whole. */
    if (s->replicas) s->repl.cut(s->repl.ctx);
    if (s->fencing)
        s->ckpt.skip(s->ckpt.ctx, job, job, "ranges of this server are being handed back");
    else if (cut_settled(s, job - s->ckpt.base))
        s->ckpt.cut(s->ckpt.ctx, job, s->replicas != 0 || s->cut_full, s->deaths, s->handbacks);
    else
        s->ckpt.skip(s->ckpt.ctx, job, job,
                     "a worker ended the clock before it before sending again what a dead "
                     "server's replicas lacked");
}

/* Put one row in a row_writer's blob (server_impl.h: the rows' format). */
int srv_put_row(void *ctx, uint64_t key, const void *row, const void *state)
{
    row_writer *r = ctx;
    blob_put_u64(r->w, key);
    blob_put_bytes(r->w, row, r->row_bytes);
    if (r->state_bytes) blob_put_bytes(r->w, state, r->state_bytes);
    r->rows++;
    return r->w->bad ? LOOM_ENOMEM : 0;
}

/* ---- checkpoints ---- */

void ps_server_set_ckpt(loom_node *n, const ps_ckpt_hooks *hooks)
{
    server *s = node_layer(n, &ps_layer_def);
    s->ckpt = *hooks;
    s->cut_at = -1;
}

int64_t ps_server_plan_cut(loom_node *n, int64_t clock, int full)
{
    server *s = node_layer(n, &ps_layer_def);
    if (!s->ckpt.cut) return INT64_MAX;
    /* Where the job is for this server: its min clock, or the last one it
     * had if every worker finished (nothing is pushed after that), or past
     * the newest clock of a push applied as it came. */
    int64_t min = s->min_clock == PS_CLOCK_DONE ? s->last_min : s->min_clock;
    int64_t at = s->ckpt.base + min;
    int64_t now = s->applied_clock >= min ? s->ckpt.base + s->applied_clock + 1 : at;
    if (clock < now) return s->min_clock == PS_CLOCK_DONE ? INT64_MAX : now;
    s->cut_at = clock;
    s->cut_full = full;
    if (clock == at)
        srv_cut_now(s); /* the partitions are as they were when the min clock got here */
    /* A plan replacing one not cut yet (the scheduler gave it up): pushes
     * the old one held and the new one does not go in now, ahead of any
     * that comes after them. */
    for (uint32_t i = 0; i < s->cap; i++)
        if (s->tables[i] && s->tables[i]->held_head) srv_release_held(s, s->tables[i]);
    return -1;
}

/* A section: [u32 definition length][definition (canonical)][u32 row bytes]
 * [u32 state bytes][u64 rows], then the rows as srv_put_row writes them. */

int ps_server_encode(loom_node *n, int full, ps_section_fn emit, void *ctx)
{
    server *s = node_layer(n, &ps_layer_def);
    int rc = 0;
    for (uint32_t i = 0; i < s->cap && !rc; i++) {
        srv_table *t = s->tables[i];
        if (!t) continue;
        blob_writer w = {0};
        blob_writer def = {0};
        ps_def_encode(&t->def, &def);
        blob_put_u32(&w, (uint32_t)def.len);
        blob_put_bytes(&w, def.buf, def.len);
        free(def.buf);
        row_writer r = {&w, t->row_bytes, t->row_bytes * t->upd.state_per_value, 0};
        blob_put_u32(&w, (uint32_t)r.row_bytes);
        blob_put_u32(&w, (uint32_t)r.state_bytes);
        size_t count_at = w.len;
        blob_put_u64(&w, 0);
        if (def.bad || w.bad) rc = LOOM_ENOMEM;
        for (size_t j = 0; !rc && j < t->nparts; j++)
            if (ps_ring_master(&t->ring, t->parts[j].range, s->dead, s->returned) == loom_rank(n))
                rc = store_for_each(t->parts[j].store, !full, srv_put_row, &r);
        if (!rc) {
            msg_store_u64(w.buf + count_at, r.rows);
            rc = emit(ctx, t->def.name, w.buf, w.len);
        }
        free(w.buf);
    }
    return rc;
}

int ps_snapshot_apply(void *table, const void *data, size_t len, char *why, size_t whylen)
{
    srv_table *t = table;
    blob_reader r = {data, len, 0};
    uint32_t deflen = blob_get_u32(&r);
    if (r.bad || deflen > r.left) {
        snprintf(why, whylen, "table \"%s\": section truncated", t->def.name);
        return LOOM_EPROTO;
    }
    blob_writer mine = {0};
    if (ps_def_encode(&t->def, &mine)) return LOOM_ENOMEM;
    int same = mine.len == deflen && !memcmp(mine.buf, r.p, deflen);
    free(mine.buf);
    if (!same) {
        ps_table_def theirs;
        int ok = !ps_def_decode(r.p, deflen, &theirs);
        snprintf(why, whylen,
                 "table \"%s\" differs: the checkpoint has width %u, keys [%llu, %llu), "
                 "updater %s; this job width %u, keys [%llu, %llu), updater %s (or other "
                 "options)",
                 t->def.name, ok ? theirs.opts.width : 0,
                 (unsigned long long)(ok ? theirs.opts.key_begin : 0),
                 (unsigned long long)(ok ? theirs.opts.key_end : 0), ok ? theirs.updater : "?",
                 t->def.opts.width, (unsigned long long)t->def.opts.key_begin,
                 (unsigned long long)t->def.opts.key_end, t->def.updater);
        return LOOM_EMISMATCH;
    }
    r.p += deflen, r.left -= deflen;
    size_t row_bytes = blob_get_u32(&r), state_bytes = blob_get_u32(&r);
    uint64_t rows = blob_get_u64(&r);
    size_t mine_state = t->row_bytes * t->upd.state_per_value; /* parts or none */
    if (r.bad || row_bytes != t->row_bytes || state_bytes != mine_state) {
        snprintf(why, whylen, "table \"%s\": row or updater state size differs", t->def.name);
        return r.bad ? LOOM_EPROTO : LOOM_EMISMATCH;
    }
    size_t per = 8 + row_bytes + state_bytes;
    if (rows > r.left / per || rows * per != r.left) {
        snprintf(why, whylen, "table \"%s\": %llu rows do not fill the section", t->def.name,
                 (unsigned long long)rows);
        return LOOM_EPROTO;
    }
    for (uint64_t i = 0; i < rows; i++) {
        const uint8_t *p = r.p + i * per;
        uint64_t key = msg_load_u64(p);
        if (!ps_key_in_range(&t->def.opts, key)) {
            snprintf(why, whylen, "table \"%s\": key %llu is outside the table's keys %llu to %llu",
                     t->def.name, (unsigned long long)key,
                     (unsigned long long)t->def.opts.key_begin,
                     (unsigned long long)(ps_key_end(&t->def.opts) - 1));
            return LOOM_EPROTO;
        }
        srv_part *part = srv_part_of_key(t, key);
        if (!part) continue; /* another server's range */
        void *state;
        void *row = store_row(part->store, key, &state);
        if (!row) return LOOM_ENOMEM;
        memcpy(row, p + 8, row_bytes);
        if (state_bytes) memcpy(state, p + 8 + row_bytes, state_bytes);
        if (srv_mark_changed(t, part, key)) return LOOM_ENOMEM; /* changed-only pulls stay exact */
    }
    return 0;
}

int ps_snapshot_read(const void *data, size_t len, ps_table_def *def,
                     int (*fn)(void *ctx, uint64_t key, const void *row), void *ctx, char *why,
                     size_t whylen)
{
    blob_reader r = {data, len, 0};
    uint32_t deflen = blob_get_u32(&r);
    if (r.bad || deflen > r.left || ps_def_decode(r.p, deflen, def)) {
        snprintf(why, whylen, "its table definition is malformed");
        return LOOM_EPROTO;
    }
    def->opts.updater = def->updater;
    r.p += deflen, r.left -= deflen;
    size_t row_bytes = blob_get_u32(&r), state_bytes = blob_get_u32(&r);
    uint64_t rows = blob_get_u64(&r);
    size_t per = 8 + row_bytes + state_bytes;
    if (r.bad || row_bytes != (size_t)def->opts.width * loom_type_size(def->opts.type) ||
        state_bytes > 4 * row_bytes || rows > r.left / per || rows * per != r.left) {
        snprintf(why, whylen, "its row sizes or row count do not fit its length");
        return LOOM_EPROTO;
    }
    for (uint64_t i = 0; i < rows; i++) {
        uint64_t key = msg_load_u64(r.p + i * per);
        if (!ps_key_in_range(&def->opts, key)) {
            snprintf(why, whylen, "key %llu is outside the table's keys %llu to %llu",
                     (unsigned long long)key, (unsigned long long)def->opts.key_begin,
                     (unsigned long long)(ps_key_end(&def->opts) - 1));
            return LOOM_EPROTO;
        }
        int rc = fn(ctx, key, r.p + i * per + 8);
        if (rc) return rc;
    }
    return 0;
}
