/* Liveness against the clock it is measured on (node_silence, heartbeat.c).
 *
 * A node declares a peer dead when the peer has been silent for the
 * heartbeat timeout while this node listened on schedule. Time in which this
 * node's own heartbeat tick ran late (its heartbeat thread descheduled by
 * an overloaded machine) is not counted against the peer: the peer's
 * heartbeats of that time may still wait unread. These tests drive the ticks
 * with explicit times, so nothing depends on the machine: a stall of the
 * observer does not make a live peer look dead, and a dead peer is still
 * found dead after the timeout of on-schedule listening. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/heartbeat.h"
#include "core/node_priv.h"

enum { INTERVAL = 100, TIMEOUT = 500 };

typedef struct observer {
    loom_node n;
    peer peers[2];
} observer;

static void observer_init(observer *o)
{
    memset(o, 0, sizeof *o);
    o->n.cfg.heartbeat_interval_ms = INTERVAL;
    o->n.cfg.heartbeat_timeout_ms = TIMEOUT;
    o->n.peers = o->peers;
    o->n.nnodes = 2;
}

/* What node_heard does, at a chosen time. */
static void heard_at(observer *o, uint64_t t)
{
    o->peers[1].last_heard_ms = t;
    o->peers[1].deaf_at_heard_ms = o->n.deaf_ms;
}

/* Ticks every INTERVAL from `from` to `to`, both included. */
static void ticks_on_time(observer *o, uint64_t from, uint64_t to)
{
    for (uint64_t t = from; t <= to; t += INTERVAL) node_note_tick(&o->n, t);
}

/* On schedule, silence is the time since the peer was last heard. */
static void test_on_time_silence_is_plain_age(void **state)
{
    (void)state;
    observer o;
    observer_init(&o);
    ticks_on_time(&o, 1000, 1200);
    heard_at(&o, 1200);
    ticks_on_time(&o, 1300, 1800);
    assert_int_equal(node_silence(&o.n, 1, 1800), 600);
    assert_int_equal(o.n.deaf_ms, 0);
}

/* The observer's loop stalls for 600 ms right after hearing the peer: the
 * stall beyond one interval (500 ms) is not the peer's silence. */
static void test_observer_stall_is_not_peer_silence(void **state)
{
    (void)state;
    observer o;
    observer_init(&o);
    ticks_on_time(&o, 1000, 1200);
    heard_at(&o, 1200);
    node_note_tick(&o.n, 1800);
    assert_int_equal(o.n.deaf_ms, 500);
    assert_int_equal(node_silence(&o.n, 1, 1800), 100);
    assert_true(node_silence(&o.n, 1, 1800) <= TIMEOUT);
    /* Once it is heard again, the earlier stall no longer matters. */
    heard_at(&o, 1805);
    ticks_on_time(&o, 1900, 2300);
    assert_int_equal(node_silence(&o.n, 1, 2300), 495);
}

/* A dead peer: after the stall, the observer runs on schedule again and
 * finds the peer silent beyond the timeout once it has listened that long. */
static void test_dead_peer_still_found_after_stall(void **state)
{
    (void)state;
    observer o;
    observer_init(&o);
    ticks_on_time(&o, 1000, 1200);
    heard_at(&o, 1200);
    node_note_tick(&o.n, 1800); /* stalled: 500 ms deaf */
    ticks_on_time(&o, 1900, 2200);
    assert_int_equal(node_silence(&o.n, 1, 2200), 500);
    node_note_tick(&o.n, 2300);
    assert_true(node_silence(&o.n, 1, 2300) > TIMEOUT);
}

/* Ticks up to two intervals apart are jitter, not a stall: nothing is
 * forgiven, so a busy observer still finds a death after the timeout. */
static void test_jitter_is_not_a_stall(void **state)
{
    (void)state;
    observer o;
    observer_init(&o);
    node_note_tick(&o.n, 1000);
    heard_at(&o, 1000);
    for (uint64_t t = 1150; t <= 1600; t += 150) node_note_tick(&o.n, t);
    node_note_tick(&o.n, 1800); /* exactly two intervals: still jitter */
    assert_int_equal(o.n.deaf_ms, 0);
    assert_int_equal(node_silence(&o.n, 1, 1800), 800);
}

/* A stall before the peer was last heard is no credit for later silence. */
static void test_stall_before_last_heard_does_not_count(void **state)
{
    (void)state;
    observer o;
    observer_init(&o);
    node_note_tick(&o.n, 1000);
    node_note_tick(&o.n, 2000); /* 900 ms deaf */
    heard_at(&o, 2000);
    ticks_on_time(&o, 2100, 2600);
    assert_int_equal(node_silence(&o.n, 1, 2600), 600);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_on_time_silence_is_plain_age),
        cmocka_unit_test(test_observer_stall_is_not_peer_silence),
        cmocka_unit_test(test_dead_peer_still_found_after_stall),
        cmocka_unit_test(test_jitter_is_not_a_stall),
        cmocka_unit_test(test_stall_before_last_heard_does_not_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
