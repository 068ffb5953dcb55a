/* test_ft_plan: the scheduler's checkpoint plans (src/ft/plan.c,
 * docs/FAULTS.md "Which clock"), one message at a time in a one-thread job
 * (core/node_fuzz) of 2 servers and 1 worker, checkpoints every clock.
 *
 * Clock 1, the interval's first, is planned before the job starts, with no
 * message: nothing else is planned while it is in progress:
 * parts of clock 2 count for nothing, and no second plan goes out. Once clock 1 is committed it
 * plans the next. A worker 1000 clocks past that when the plan came says so: the plan is given up,
 * its directory removed, and the next plan is past the worker's clock and asks for full server
 * parts. A worker's last clock then displaces the plan still collecting parts: it is planned at
 * once as the final checkpoint, and committed.
 *
 * And the worker's side: a plan given up, and the next one heard, after
 * loom_checkpoint_due() said 1 and before the application's
 * loom_checkpoint_save() (it gathers its state meanwhile): the save writes
 * nothing and succeeds; a save at a clock never said due is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/msg.h"
#include "core/node_fuzz.h"
#include "ft/ft.h"
#include "ft/msg_types.h"
#include "layers.h"
#include "loom/loom.h"

#define SCHEDULER 0
#define SERVER(r) (1u + (r))
#define WORKER    3u

static char dir[64];

static void deliver(node_fuzz_job *j, uint32_t from, const msg_header *h0, const void *frame,
                    size_t len)
{
    node_fuzz_msg m = {.from = from, .dest = SCHEDULER};
    msg_header h = *h0;
    h.sender = from;
    h.nframes = frame ? 1 : 0;
    msg_encode_header(&h, m.hdr);
    if (frame) assert_int_equal(node_fuzz_msg_add_frame(&m, frame, len), 0);
    uint8_t rid[MSG_RID_SIZE];
    size_t rid_len;
    node_fuzz_rid(from, rid, &rid_len);
    node_fuzz_deliver(j, &m, rid, rid_len, MSG_HEADER_SIZE);
}

/* Node `from` tells the scheduler its part of `clock` is on disk (an empty
 * file, made here: the committer syncs every part a manifest names). */
static void send_part(node_fuzz_job *j, uint32_t from, int64_t clock)
{
    const char *role = from == WORKER ? "worker" : "server";
    uint32_t rank = from == WORKER ? 0 : from - 1;
    char rel[FT_PATH_MAX], path[256];
    snprintf(rel, sizeof rel, "ckpt-%012lld/%s-%u.part", (long long)clock, role, rank);
    snprintf(path, sizeof path, "%s/ckpt-%012lld", dir, (long long)clock);
    mkdir(path, 0750);
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
    msg_header h = {.type = MSG_CKPT_PART, .clock = clock, .a = 1};
    deliver(j, from, &h, w.buf, w.len);
    free(w.buf);
}

static int exists(int64_t clock, const char *file)
{
    char path[256];
    snprintf(path, sizeof path, "%s/ckpt-%012lld%s%s", dir, (long long)clock, *file ? "/" : "",
             file);
    return access(path, F_OK) == 0;
}

/* The plans in the queue, delivered: their clock (all alike, one to each
 * server and the worker), -1 if none; *full its servers' flag. Other
 * messages are delivered too. */
static int64_t plans(node_fuzz_job *j, int *full)
{
    int64_t clock = -1;
    int sent = 0;
    node_fuzz_msg m;
    while (node_fuzz_job_take(j, &m)) {
        msg_header h;
        assert_int_equal(msg_decode_header(m.hdr, MSG_HEADER_SIZE, m.nframes, &h), MSG_OK);
        if (h.type == MSG_CKPT_PLAN && !h.b) {
            assert_true(clock < 0 || clock == h.clock);
            clock = h.clock;
            if (full) *full = (int)h.a;
            sent++;
        }
        uint8_t rid[MSG_RID_SIZE];
        size_t rid_len;
        node_fuzz_rid(m.from, rid, &rid_len);
        node_fuzz_deliver(j, &m, rid, rid_len, MSG_HEADER_SIZE);
    }
    assert_true(sent == 0 || sent == 3);
    return clock;
}

/* Tick until the committer has written checkpoint `clock`'s manifest and
 * the scheduler heard it is done: the next plan (bounded: 10 s). */
static int64_t after_commit(node_fuzz_job *j, int64_t clock, int *full)
{
    for (int i = 0; i < 10000; i++) {
        node_fuzz_job_tick(j);
        int64_t next = plans(j, full);
        if (next >= 0) {
            assert_true(exists(clock, "MANIFEST"));
            return next;
        }
        nanosleep(&(struct timespec){0, 1000000}, NULL); /* the committer runs on its own thread */
    }
    fail_msg("checkpoint %lld was not committed in 10 s", (long long)clock);
    return -1;
}

/* A job of 2 servers and 1 worker checkpointing every clock into a new
 * directory (dir). */
static node_fuzz_job *new_job(void)
{
    snprintf(dir, sizeof dir, "%s", "/tmp/loom-ft-plan.XXXXXX");
    assert_non_null(mkdtemp(dir));
    setenv("LOOM_CHECKPOINT_DIR", dir, 1);
    setenv("LOOM_CHECKPOINT_EVERY", "1", 1);
    setenv("LOOM_CHECKPOINT_FULL_EVERY", "100", 1);
    node_fuzz_job *j;
    assert_int_equal(node_fuzz_job_new(2, 1, 1, 1, layers_attach, 100000, &j), 0);
    return j;
}

static void remove_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void one_at_a_time(void **state)
{
    (void)state;
    node_fuzz_job *j = new_job();

    /* Clock 1 is planned from the start, with no message: every node
     * takes the interval's first clock as planned (ft_first_plan). */
    int full = 0;
    node_fuzz_job_tick(j);
    assert_int_equal(plans(j, &full), -1);

    /* Clock 2 is not planned: its part counts for nothing (nor is its
     * directory removed: no plan reached that clock, so no node of the job
     * wrote it), and clock 1's parts complete clock 1 alone. */
    send_part(j, SERVER(0), 2);
    send_part(j, SERVER(1), 2);
    send_part(j, WORKER, 2);
    assert_false(exists(2, "MANIFEST"));
    send_part(j, SERVER(0), 1);
    send_part(j, SERVER(1), 1);
    node_fuzz_job_tick(j);
    assert_int_equal(plans(j, NULL), -1); /* one checkpoint at a time */
    send_part(j, WORKER, 1);
    /* Past clock 1 by as much as the nodes' pace since then says. */
    int64_t second = after_commit(j, 1, &full);
    assert_true(second > 1);
    assert_int_equal(full, 0);

    /* The worker was 1000 clocks past: given up, and planned past its clock. */
    send_part(j, SERVER(0), second);
    assert_true(exists(second, "server-0.part"));
    msg_header skip = {.type = MSG_CKPT_SKIP, .clock = second, .a = (uint64_t)second + 1001};
    deliver(j, WORKER, &skip, NULL, 0);
    assert_false(exists(second, ""));
    node_fuzz_job_tick(j);
    int64_t next = plans(j, &full);
    assert_true(next > second + 1000);
    assert_int_equal(full, 1); /* the given-up part may have been another's base */

    /* A late part of the given-up clock goes too. */
    send_part(j, SERVER(1), second);
    assert_false(exists(second, ""));

    /* The worker's last clock: the plan still collecting parts gives way. */
    send_part(j, SERVER(0), next);
    msg_header final = {.type = MSG_CKPT_FINAL, .clock = next + 7};
    deliver(j, WORKER, &final, NULL, 0);
    assert_false(exists(next, ""));
    node_fuzz_job_tick(j);
    assert_int_equal(plans(j, &full), next + 7);
    send_part(j, SERVER(0), next + 7);
    send_part(j, SERVER(1), next + 7);
    send_part(j, WORKER, next + 7);

    node_fuzz_job_free(j); /* the committer finishes the commit queued */
    assert_true(exists(1, "MANIFEST"));
    assert_true(exists(next + 7, "MANIFEST"));
    remove_dir();
}

/* Whether the queue holds a message of `type`; every message is delivered. */
static int sent(node_fuzz_job *j, uint8_t type)
{
    int seen = 0;
    node_fuzz_msg m;
    while (node_fuzz_job_take(j, &m)) {
        msg_header h;
        assert_int_equal(msg_decode_header(m.hdr, MSG_HEADER_SIZE, m.nframes, &h), MSG_OK);
        seen |= h.type == type;
        uint8_t rid[MSG_RID_SIZE];
        size_t rid_len;
        node_fuzz_rid(m.from, rid, &rid_len);
        node_fuzz_deliver(j, &m, rid, rid_len, MSG_HEADER_SIZE);
    }
    return seen;
}

static void plan_moved_before_save(void **state)
{
    (void)state;
    node_fuzz_job *j = new_job();
    loom_node *w = node_fuzz_job_node(j, WORKER);
    assert_non_null(w);
    static const char app_state[] = "where the worker is";

    /* Clock 1 is planned from the start; the worker ends it and is told. */
    assert_int_equal(loom_clock(w), 0);
    sent(j, MSG_CKPT_PART);
    assert_int_equal(loom_checkpoint_due(w), 1);
    /* The scheduler gives it up and plans clock 5, as the worker gathers its state. */
    node_fuzz_msg m = {.from = SCHEDULER, .dest = WORKER};
    msg_header plan = {.type = MSG_CKPT_PLAN, .sender = SCHEDULER, .clock = 5};
    msg_encode_header(&plan, m.hdr);
    uint8_t rid[MSG_RID_SIZE];
    size_t rid_len;
    node_fuzz_rid(SCHEDULER, rid, &rid_len);
    node_fuzz_deliver(j, &m, rid, rid_len, MSG_HEADER_SIZE);
    assert_int_equal(loom_checkpoint_due(w), 0);
    assert_int_equal(loom_checkpoint_save(w, app_state, sizeof app_state), 0);
    assert_false(exists(1, "worker-0.part"));
    assert_false(sent(j, MSG_CKPT_PART));
    assert_int_equal(loom_checkpoint_final(w), 0); /* this clock is done with */

    /* Clock 2: never said due, so a save there is the application's mistake. */
    assert_int_equal(loom_clock(w), 0);
    sent(j, MSG_CKPT_PART);
    assert_int_equal(loom_checkpoint_save(w, app_state, sizeof app_state), LOOM_ESTATE);
    assert_false(exists(2, "worker-0.part"));

    node_fuzz_job_free(j);
    remove_dir();
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(one_at_a_time),
                                       cmocka_unit_test(plan_moved_before_save)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
