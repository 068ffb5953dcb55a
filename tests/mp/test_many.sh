#!/usr/bin/env bash
# A job of 256 worker processes and 2 servers on one machine (issue 27, "a
# job of a thousand nodes"): it assembles, runs 100 BSP clocks in which every
# worker adds to an int64 sum table, finds the table exact and ends. The time
# it took and the load are printed, not asserted (docs/BENCHMARKS.md records
# them); the job's --timeout and the test's own bound it, and the launcher
# takes every process down with it however it ends.
#
# --insecure: with a job secret, every one of the 768 connections of the
# workers (to the scheduler's two sockets and to both servers) makes a CURVE
# handshake as the job assembles, and on a 2-core machine these took longer
# than the heartbeat timeout (libsodium's guarded key memory: mmap, mprotect
# and mlock per connection); docs/BENCHMARKS.md, "A job of a thousand nodes",
# has the measurements. The rest of the job's path is the same either way.
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh"
WORKERS=256 SERVERS=2 CLOCKS=100
start=$(now_ms)
"$LOOM" run --insecure --servers "$SERVERS" --workers "$WORKERS" --timeout 110 -- \
    "$PS_CHECK" sum --clocks "$CLOCKS" >"$WORK/job.out" 2>&1 ||
    fail "the job of $WORKERS workers failed"
elapsed=$(($(now_ms) - start))
grep -q "sum: $WORKERS workers, $CLOCKS clocks, the table exact" "$WORK/job.out" ||
    fail "worker 0 did not report the table exact"
echo "$WORKERS workers, $SERVERS servers, $CLOCKS BSP clocks: ${elapsed} ms from launch to end" \
    "(load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores)"
echo "PASS"
