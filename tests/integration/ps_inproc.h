/* ps_inproc.h: what the in-process PS jobs (test_ps_inproc.c, test_ps_wire.c)
 * share: the filters and managed communication of every table they open, and
 * opts_of(), which applies them. */
#ifndef LOOM_TESTS_INTEGRATION_PS_INPROC_H
#define LOOM_TESTS_INTEGRATION_PS_INPROC_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* The filters of every table the tests open, both directions: the
 * environment's LOOM_TEST_FILTER. CTest runs the consistency tests again with
 * each exact filter and with sparse rows forced (tests/integration/CMakeLists.txt). */
static const char *test_filter;
/* Managed communication for the tables opts_of() makes: the property tests
 * run again with each priority and a budget (with_managed). */
static loom_priority managed_priority = LOOM_PRIORITY_NONE;
static double managed_mbits;

static inline loom_table_opts opts_of(loom_type type, uint32_t width, loom_consistency c, int s)
{
    loom_table_opts o = LOOM_TABLE_OPTS_DEFAULT;
    o.type = type;
    o.width = width;
    o.consistency = c;
    o.staleness = s;
    o.filter_push = o.filter_pull = test_filter;
    o.priority = managed_priority;
    o.bandwidth_mbits = managed_mbits;
    o.queue_rows = 2; /* many small early sends */
    return o;
}

#endif
