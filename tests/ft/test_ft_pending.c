/* test_ft_pending: the scheduler's bound on checkpoints waiting for parts
 * (src/ft/ft.c, docs/FAULTS.md "Inside"), in a one-thread job (core/node_fuzz)
 * of 2 servers and 1 worker with checkpoints every clock.
 *
 * Server 0 announces its parts of clocks 1..40 and nobody else does: the
 * scheduler keeps the newest 16 only. So clock 5, whose other parts come
 * next, is never committed, while clock 30 is. Once 30 is committed, parts of
 * clocks at or before it are dropped and counted as malformed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/msg.h"
#include "core/node_fuzz.h"
#include "ft/ft.h"
#include "layers.h"
#include "loom/loom.h"

#define SCHEDULER 0
#define SERVER(r) (1u + (r))
#define WORKER    3u

static char dir[64];

static const char *role_of(uint32_t id)
{
    return id == WORKER ? "worker" : "server";
}

/* Node `from` tells the scheduler its part of `clock` is on disk (an empty
 * file, made here: the committer syncs every part a manifest names). */
static void send_part(node_fuzz_job *j, uint32_t from, int64_t clock)
{
    uint32_t rank = from == WORKER ? 0 : from - 1;
    char rel[FT_PATH_MAX], path[256];
    snprintf(rel, sizeof rel, "ckpt-%012lld/%s-%u.part", (long long)clock, role_of(from), rank);
    snprintf(path, sizeof path, "%s/ckpt-%012lld", dir, (long long)clock);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);

    blob_writer w = {0};
    blob_put_u32(&w, from == WORKER ? FT_WORKER : FT_SERVER);
    blob_put_u32(&w, rank);
    blob_put_u32(&w, 1);
    blob_put_str(&w, rel);
    blob_put_u64(&w, 0);
    blob_put_u32(&w, 0);
    assert_false(w.bad);
    node_fuzz_msg m = {.from = from, .dest = SCHEDULER};
    msg_header h = {.type = MSG_CKPT_PART, .sender = from, .clock = clock, .a = 1, .nframes = 1};
    msg_encode_header(&h, m.hdr);
    m.nframes = 1;
    zmq_msg_init_size(&m.frames[0], w.len);
    memcpy(zmq_msg_data(&m.frames[0]), w.buf, w.len);
    free(w.buf);
    uint8_t rid[MSG_RID_SIZE];
    size_t rid_len;
    node_fuzz_rid(from, rid, &rid_len);
    node_fuzz_deliver(j, &m, rid, rid_len, MSG_HEADER_SIZE);
}

static int committed(int64_t clock)
{
    char path[256];
    snprintf(path, sizeof path, "%s/ckpt-%012lld/MANIFEST", dir, (long long)clock);
    return access(path, F_OK) == 0;
}

static void bounded(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "%s", "/tmp/loom-ft-pending.XXXXXX");
    assert_non_null(mkdtemp(dir));
    setenv("LOOM_CHECKPOINT_DIR", dir, 1);
    setenv("LOOM_CHECKPOINT_EVERY", "1", 1);
    node_fuzz_job *j;
    assert_int_equal(node_fuzz_job_new(2, 1, 1, 1, layers_attach, 10000, &j), 0);
    loom_node *sched = node_fuzz_job_node(j, SCHEDULER);

    for (int64_t c = 1; c <= 40; c++) send_part(j, SERVER(0), c);
    /* Clock 5 fell out of the 16 kept: its other parts do not complete it. */
    send_part(j, SERVER(1), 5);
    send_part(j, WORKER, 5);
    /* Clock 30 is kept: its other parts complete it. */
    send_part(j, SERVER(1), 30);
    send_part(j, WORKER, 30);

    loom_stats before, after;
    loom_node_stats(sched, &before);
    send_part(j, SERVER(1), 29); /* superseded by the commit of 30 */
    send_part(j, WORKER, 12);
    loom_node_stats(sched, &after);
    assert_int_equal(after.malformed_dropped - before.malformed_dropped, 2);

    node_fuzz_job_free(j); /* the committer finishes the commits queued */
    assert_true(committed(30));
    assert_false(committed(5));
    assert_false(committed(29));
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(bounded)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
