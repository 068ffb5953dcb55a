#!/usr/bin/env bash
# Server failover with --replicas 1 (docs/FAULTS.md): a job of 3 servers and
# 3 workers pushes known int64 deltas into a sum table; once every worker has
# passed clock 30 of 200, server 1 is killed with SIGKILL. The job must go on:
# every worker ends with every key exactly equal to the sum of all pushes (no
# acknowledged update lost, none applied twice) and exits 0; the survivors say
# the server died and the job went on. Heartbeats every 250 ms, a node is
# declared dead after 2 s of silence (a loaded machine must not kill others). Usage:
#   test_failover.sh LOOM FAILOVER_CHECK bsp|ssp|asp
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh" "$1" "$2"
MODE=${3:?mode}

LOOM_REPLICAS=1 LOOM_HEARTBEAT_MS=250 LOOM_VERBOSE=${VERBOSE:-0} "$LOOM" run --servers 3 --workers 3 --on-failure wait \
    --heartbeat-timeout 2000 --timeout 120 --insecure --no-status \
    -- "$PS_CHECK" "$MODE" --pid-dir "$PIDS" --clocks 200 --pace-ms 20 >"$WORK/job.out" 2>&1 &
launcher=$!
BG_PIDS+=("$launcher")
wait_for_files 7 30
for w in 0 1 2; do wait_for_lines "$WORK/job.out" "^\[worker $w\] worker $w clock 30$" 1 60 "$launcher"; done
kill -KILL "$(<"$PIDS/server-1.pid")"
wait "$launcher"
echo "launcher exited with status $?"
for w in 0 1 2; do
    grep -q "^\[worker $w\] worker $w: 200 clocks, all 1000 keys exact" "$WORK/job.out" ||
        fail "worker $w did not end with every key exact"
done
grep -q "server 1 (node [0-9]*) died: no heartbeat.*the job goes on without it" "$WORK/job.out" ||
    fail "the scheduler did not say that server 1 died and the job went on"
# The launcher reports only failures: the killed server, and nobody else.
others=$(grep -E "^loom run: .*(exited with status [1-9]|killed by)" "$WORK/job.out" | grep -v "server 1 was killed by signal 9")
[[ -z $others ]] || fail "other processes failed: $others"
grep -E "sent again|now master" "$WORK/job.out" | head -8
echo "PASS"
