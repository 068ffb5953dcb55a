/* test_msg_types: the wire's type numbers: core's (core/msg.h) and each layer's
 * (<layer>/msg_types.h), which the layers register when they attach.
 *
 *   layers      every layer a node has attaches in this process (a one-thread job,
 *               core/node_fuzz, with layers_attach), so none of their numbers
 *               collides with core's or another layer's; each number core and the
 *               layers' headers declare is known under its name, and no other is
 *   refused     a registration with a number core or a layer has, one below
 *               MSG_LAYER_TYPE_MIN, a number twice or an entry without a name fails
 *               and registers none of its entries (msg_register_types says which);
 *               the same entries registered again succeed, other entries with their
 *               numbers do not; node_layer_register refuses a layer whose type is
 *               taken with LOOM_EINVAL and gives it no slot */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/msg.h"
#include "core/node_fuzz.h"
#include "core/node_impl.h"
#include "ft/msg_types.h"
#include "layers.h"
#include "loom/error.h"
#include "p2p/msg_types.h"
#include "ps/msg_types.h"
#include "sched/msg_types.h"

/* Every type of the wire by number, as core's and the layers' headers declare them
 * (docs/PROTOCOL.md). Two names of one number would initialise one element twice, which
 * -Wextra reports (gcc's -Woverride-init, clang's -Winitializer-overrides) and the build's
 * -Werror makes an error. */
#define T(t) [MSG_##t] = #t
static const char *const declared[MSG_TYPE_LIMIT] = {
    /* core */
    T(REGISTER),
    T(ROSTER),
    T(ROSTER_ACK),
    T(REJECT),
    T(HEARTBEAT),
    T(BARRIER),
    T(BARRIER_RELEASE),
    T(DONE),
    T(DONE_ACK),
    T(SHUTDOWN),
    T(SHUTDOWN_ACK),
    T(NODE_FAILED),
    T(METRICS),
    T(NODE_REJOINED),
    T(LEAVE),
    T(LEAVE_ACK),
    T(WORKER_LOST),
    /* ps */
    T(TABLE_OPEN),
    T(TABLE_CREATE),
    T(TABLE_CREATED),
    T(TABLE_OPENED),
    T(PUSH),
    T(PUSH_ACK),
    T(PULL),
    T(PULL_REPLY),
    T(CLOCK),
    T(MIN_CLOCK),
    T(JOIN_CLOCK),
    T(PUSH_ENC),
    T(PULL_SINCE),
    T(PULL_REPLY_ENC),
    T(ROWS_PUSH),
    T(ROWS_PUSH_ACK),
    T(REPL),
    T(REPL_ACK),
    T(REJOIN_COPY),
    T(REJOIN_COPIED),
    T(REJOIN_READY),
    T(HANDBACK),
    T(HANDBACK_ACK),
    T(PARKED),
    /* ft */
    T(CKPT_PART),
    T(CKPT_BASE),
    T(CKPT_PLAN),
    T(CKPT_SKIP),
    T(CKPT_EPOCH),
    T(CKPT_FINAL),
    /* sched */
    T(SCHED_BLOCK),
    T(PARTS_REQ),
    T(PARTS_GIVE),
    T(DYN_START),
    T(DYN_PLAN_REQ),
    T(DYN_PLAN),
    T(DYN_PSUM),
    T(DYN_SUM),
    T(DYN_END),
    /* p2p */
    T(P2P_MODEL),
    T(P2P_ACK),
    T(SVB_SVS),
    T(SVB_REPLICA),
};
#undef T

/* Numbers no layer has (docs/PROTOCOL.md), for the registrations below. */
enum { FREE_A = 200, FREE_B = 201 };

static int known(unsigned type)
{
    return strcmp(msg_type_name(type), "UNKNOWN") != 0;
}

/* Every layer attached, as on a node of a job: the group's state is the job. */
static int attach_every_layer(void **state)
{
    node_fuzz_job *j;
    if (node_fuzz_job_new(1, 1, 1, 1, layers_attach, 1000, &j)) return -1;
    *state = j;
    return 0;
}

static int free_job(void **state)
{
    node_fuzz_job_free(*state);
    return 0;
}

static void test_every_layer_registers_its_declared_numbers(void **state)
{
    (void)state;
    for (unsigned t = 0; t < MSG_TYPE_LIMIT; t++)
        assert_string_equal(msg_type_name(t), declared[t] ? declared[t] : "UNKNOWN");
}

/* A registration refused at entry `at`, which leaves FREE_A and FREE_B unknown. */
static void refused_at(const msg_type_info *types, size_t count, size_t at)
{
    size_t refused = count;
    assert_int_equal(msg_register_types(types, count, &refused), -1);
    assert_int_equal(refused, at);
    assert_false(known(FREE_A));
    assert_false(known(FREE_B));
}

static void test_taken_numbers_are_refused(void **state)
{
    (void)state;
    static const msg_type_info clash_core[] = {{FREE_A, "A", 0, 0, MSG_BY_WORKER},
                                               {MSG_WORKER_LOST, "LOST", 0, 0, MSG_BY_WORKER}};
    refused_at(clash_core, 2, 1);
    static const msg_type_info below[] = {{MSG_LEAVE_ACK + 1, "GAP", 0, 0, MSG_BY_WORKER}};
    refused_at(below, 1, 0);
    static const msg_type_info clash_layer[] = {{FREE_A, "A", 0, 0, MSG_BY_WORKER},
                                                {FREE_B, "B", 0, 0, MSG_BY_WORKER},
                                                {MSG_SCHED_BLOCK, "BLOCK", 1, 1, MSG_BY_WORKER}};
    refused_at(clash_layer, 3, 2);
    assert_string_equal(msg_type_name(MSG_SCHED_BLOCK), "SCHED_BLOCK");
    static const msg_type_info twice[] = {{FREE_A, "A", 0, 0, MSG_BY_WORKER},
                                          {FREE_B, "B", 0, 0, MSG_BY_WORKER},
                                          {FREE_A, "A2", 0, 0, MSG_BY_WORKER}};
    refused_at(twice, 3, 2);
    static const msg_type_info unnamed[] = {{FREE_A, NULL, 0, 0, MSG_BY_WORKER}};
    refused_at(unnamed, 1, 0);

    static const msg_type_info fresh[] = {{FREE_A, "A", 0, 0, MSG_BY_WORKER},
                                          {FREE_B, "B", 0, 0, MSG_BY_WORKER}};
    assert_int_equal(msg_register_types(fresh, 2, NULL), 0);
    assert_int_equal(msg_register_types(fresh, 2, NULL), 0);
    assert_string_equal(msg_type_name(FREE_A), "A");
    static const msg_type_info copy[] = {{FREE_B, "B", 0, 0, MSG_BY_WORKER}};
    assert_int_equal(msg_register_types(copy, 1, NULL), -1);
}

static void test_layer_with_taken_type_is_refused(void **state)
{
    (void)state;
    static const msg_type_info types[] = {{MSG_PUSH, "PUSH", 1, 2, MSG_BY_WORKER}};
    static node_layer_def clash = {"clash", types, 1, 0};
    assert_int_equal(node_layer_register(&clash), LOOM_EINVAL);
    assert_int_equal(atomic_load(&clash.slot), 0);
    assert_null(node_layer(node_fuzz_job_node(*state, 0), &clash));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_layer_registers_its_declared_numbers),
        cmocka_unit_test(test_taken_numbers_are_refused),
        cmocka_unit_test(test_layer_with_taken_type_is_refused),
    };
    return cmocka_run_group_tests(tests, attach_every_layer, free_job);
}
