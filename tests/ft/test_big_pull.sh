#!/usr/bin/env bash
# Heartbeats that never wait for work (docs/FAULTS.md, "Liveness and long
# operations"): a job of one server and one worker whose server handles a
# 1 GiB push and then a 1 GiB pull (2^20 rows of 1 KiB, in a scattered key
# order), each as one message (LOOM_MAX_FRAME_MIB=2047) that holds its I/O
# thread for seconds, while a node is declared dead after 1 s without a
# heartbeat (every 100 ms). No node may be declared dead, every pulled value
# must be exact, and every process must exit 0. About 5 GiB of memory at the
# peak (the worker's keys and rows, the server's table, the messages). CTest
# sets BIG_PULL_LOG2_ROWS=19 (512 MiB messages) in Release and 18 (256 MiB)
# under the sanitizers, which still hold the I/O thread for several times the
# timeout. Usage:
#   test_big_pull.sh LOOM BIG_PULL
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh" "$1" "$2"
LOG2_ROWS=${BIG_PULL_LOG2_ROWS:-20}

LOOM_HEARTBEAT_MS=100 LOOM_MAX_FRAME_MIB=2047 "$LOOM" run --servers 1 --workers 1 \
    --heartbeat-timeout 1000 --timeout 500 --no-status \
    -- "$PS_CHECK" --pid-dir "$PIDS" --log2-rows "$LOG2_ROWS" >"$WORK/job.out" 2>&1 &
launcher=$!
BG_PIDS+=("$launcher")
wait "$launcher"
status=$?
grep -E "^\[worker 0\] (pushed|pulled)" "$WORK/job.out"
grep -E "died|no heartbeat|lost the scheduler|declared" "$WORK/job.out" &&
    fail "a live node was declared dead"
((status == 0)) || fail "the job exited with status $status"
grep -q "^\[worker 0\] all $((1 << LOG2_ROWS)) rows exact$" "$WORK/job.out" ||
    fail "the pull did not give back every value exactly"
echo "PASS"
