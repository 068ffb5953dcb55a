/* test_svb_parts: sufficient-vector broadcasting's parts, in-process.
 *
 *   frames      svb_frame_check accepts a well-formed frame and refuses every
 *               cut, leftover byte, id beyond the replica and non-finite value
 *   select      loom_svb_select: c of n, ascending, deterministic, and never a
 *               duplicate of an SV already chosen (its residual is zero)
 *   handlers    a worker of a one-thread job (core/node_fuzz) drops malformed
 *               SVB messages and counts them (the SVB's and the node's
 *               counters), then applies a good peer SV at its clock: the
 *               replica is exactly u v^T */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/node_fuzz.h"
#include "core/node_impl.h"
#include "loom/loom.h"
#include "loom/svb.h"
#include "p2p/msg_types.h"
#include "p2p/svb.h"
#include "ps/ps.h"

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void putf(uint8_t *p, float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    put32(p, b);
}

/* One SV of width 2: u = (0.5, -2), v = {(1, 3), (4, 0.25)}: 4 + 8 + 16 bytes. */
static size_t one_sv(uint8_t *p)
{
    put32(p, 2);
    putf(p + 4, 0.5f), putf(p + 8, -2.0f);
    put32(p + 12, 1), put32(p + 16, 4);
    putf(p + 20, 3.0f), putf(p + 24, 0.25f);
    return 28;
}

static void frames(void **state)
{
    (void)state;
    uint8_t f[64];
    const char *why = NULL;
    size_t len = one_sv(f);
    assert_int_equal(svb_frame_check(f, len, 1, 2, 5, &why), 0);
    assert_int_not_equal(svb_frame_check(f, len, 1, 2, 4, &why), 0); /* id 4 of 4 rows */
    assert_int_not_equal(svb_frame_check(f, len, 1, 3, 5, &why), 0); /* another width */
    assert_int_not_equal(svb_frame_check(f, len, 2, 2, 5, &why), 0); /* one SV short */
    for (size_t cut = 0; cut < len; cut++)
        assert_int_not_equal(svb_frame_check(f, cut, 1, 2, 5, &why), 0);
    f[len] = 0;
    assert_int_not_equal(svb_frame_check(f, len + 1, 1, 2, 5, &why), 0); /* a byte left */
    putf(f + 8, NAN);
    assert_int_not_equal(svb_frame_check(f, len, 1, 2, 5, &why), 0);
    one_sv(f);
    putf(f + 24, INFINITY);
    assert_int_not_equal(svb_frame_check(f, len, 1, 2, 5, &why), 0);
    one_sv(f);
    put32(f, 0xFFFFFFFFu); /* a huge nnz must not wrap the bounds check */
    assert_int_not_equal(svb_frame_check(f, len, 1, 2, 5, &why), 0);
}

static void select_svs(void **state)
{
    (void)state;
    /* SVs 0 and 1 are the same; 2 and 3 differ from them and each other. */
    const double u[4 * 2] = {1, 2, 1, 2, -1, 0.5, 0.3, 1};
    const uint64_t idx[] = {0, 1, 0, 1, 2, 3, 1, 4};
    const float val[] = {1, 1, 1, 1, 2, 1, 1, 3};
    const size_t off[] = {0, 2, 4, 6, 8};
    size_t chosen[4], again[4];
    for (uint64_t seed = 1; seed < 200; seed++) {
        assert_int_equal(loom_svb_select(u, 2, idx, val, off, 4, 3, seed, chosen), 3);
        assert_true(chosen[0] < chosen[1] && chosen[1] < chosen[2]);
        /* Both duplicates never: the second has nothing left once one is in. */
        assert_false(chosen[0] == 0 && chosen[1] == 1);
        assert_int_equal(loom_svb_select(u, 2, idx, val, off, 4, 3, seed, again), 3);
        assert_memory_equal(chosen, again, sizeof chosen[0] * 3);
    }
    assert_int_equal(loom_svb_select(u, 2, idx, val, off, 4, 4, 1, chosen), 4);
}

static int attach(loom_node *n)
{
    int rc = ps_attach(n);
    return rc ? rc : svb_attach(n);
}

/* Deliver an SVB_SVS from worker 1 to worker 0 (node ids 2 and 3 of a job
 * with one server). */
static void send_svs(node_fuzz_job *j, int64_t clock, uint64_t count, uint64_t width,
                     const uint8_t *frame, size_t len)
{
    node_fuzz_msg m = {.from = 3, .dest = 2};
    msg_header h = {.type = MSG_SVB_SVS,
                    .sender = 3,
                    .clock = clock,
                    .a = count,
                    .b = width,
                    .nframes = frame ? 1 : 0};
    msg_encode_header(&h, m.hdr);
    if (frame) assert_int_equal(node_fuzz_msg_add_frame(&m, frame, len), 0);
    uint8_t rid[MSG_RID_SIZE];
    size_t rid_len;
    node_fuzz_rid(3, rid, &rid_len);
    node_fuzz_deliver(j, &m, rid, rid_len, MSG_HEADER_SIZE);
}

static void handlers(void **state)
{
    (void)state;
    node_fuzz_job *j;
    assert_int_equal(node_fuzz_job_new(1, 2, 1, 1, attach, 10000, &j), 0);
    loom_node *w0 = node_fuzz_job_node(j, 2), *w1 = node_fuzz_job_node(j, 3);
    loom_svb_opts o = LOOM_SVB_OPTS_DEFAULT;
    o.width = 2;
    o.rows = 5;
    loom_svb *s0, *s1, *again;
    assert_int_equal(loom_svb_open(w0, &o, &s0), 0);
    assert_int_equal(loom_svb_open(w1, &o, &s1), 0);
    assert_int_equal(loom_svb_open(w0, &o, &again), LOOM_ESTATE);

    uint8_t f[64];
    size_t len = one_sv(f);
    loom_stats before, after;
    loom_node_stats(w0, &before);
    send_svs(j, 0, 1, 2, f, len - 1); /* cut short */
    send_svs(j, 0, 2, 2, f, len);     /* count disagrees */
    send_svs(j, 0, 1, 3, f, len);     /* width */
    send_svs(j, 5, 1, 2, f, len);     /* out of clock order */
    send_svs(j, 0, 1, 2, NULL, 0);    /* a count without a frame */
    send_svs(j, 0, 0, 2, f, len);     /* a mark with a frame */
    putf(f + 4, NAN);
    send_svs(j, 0, 1, 2, f, len); /* not finite */
    loom_svb_stats st;
    loom_svb_get_stats(s0, &st);
    assert_int_equal(st.dropped, 7);
    assert_int_equal(st.svs_received, 0);
    loom_node_stats(w0, &after);
    assert_int_equal(after.malformed_dropped - before.malformed_dropped, 7);

    one_sv(f);
    send_svs(j, 0, 1, 2, f, len);
    assert_int_equal(loom_svb_clock(s0), 0);
    const double *w = loom_svb_replica(s0);
    double want[10] = {0};
    want[1 * 2 + 0] = 0.5 * 3.0, want[1 * 2 + 1] = -2.0 * 3.0;
    want[4 * 2 + 0] = 0.5 * 0.25, want[4 * 2 + 1] = -2.0 * 0.25;
    assert_memory_equal(w, want, sizeof want);
    loom_svb_get_stats(s0, &st);
    assert_int_equal(st.svs_received, 1);
    assert_int_equal(st.svs_applied, 1);
    assert_int_equal(st.sv_bytes_sent, MSG_HEADER_SIZE); /* a clock mark to worker 1 */
    loom_svb_close(s0);
    loom_svb_close(s1);
    node_fuzz_job_free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(frames),
        cmocka_unit_test(select_svs),
        cmocka_unit_test(handlers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
