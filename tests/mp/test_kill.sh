#!/usr/bin/env bash
# kill -9 one process of a running job: every other process must notice by
# heartbeat (the launcher is told not to stop them), say which node died, and
# exit with status 3 within the bound below. Usage:
#   test_kill.sh LOOM PS_CHECK ROLE RANK     (ROLE: scheduler, server or worker)
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh"
ROLE=${3:?role}
RANK=${4:?rank}
# The docs promise that the others notice within the heartbeat timeout and
# exit with status 3 (docs/LAUNCHING.md, docs/CLUSTER.md). On top of the
# timeout the code takes up to one heartbeat interval (silence is checked
# once per interval: node_tick() in src/core/node_control.c, sched_tick() in scheduler.c)
# and up to NODE_LINGER_MS, 1000 ms (src/core/node_priv.h), for a failing
# process's last messages before it exits; SLACK_MS is for the launcher and a
# loaded 2-core machine under sanitizers. The bound stays below twice the
# timeout, so detection that takes twice as long as promised fails the test.
TIMEOUT_MS=3000
INTERVAL_MS=500
LINGER_MS=1000
SLACK_MS=1000
BOUND_MS=$((TIMEOUT_MS + INTERVAL_MS + LINGER_MS + SLACK_MS))

LOOM_HEARTBEAT_MS=$INTERVAL_MS "$LOOM" run --servers 2 --workers 2 --on-failure wait --heartbeat-timeout $TIMEOUT_MS --timeout 60 \
    -- "$PS_CHECK" run --pid-dir "$PIDS" >"$WORK/job.out" 2>&1 &
launcher=$!
BG_PIDS+=("$launcher")
wait_for_files 5 30
victim=$(<"$PIDS/$ROLE-$RANK.pid")
start=$(now_ms)
kill -KILL "$victim"
wait "$launcher"
status=$?
elapsed=$(($(now_ms) - start))
echo "job ended with status $status ${elapsed} ms after the kill"
((status != 0)) || fail "the job exited 0 although $ROLE $RANK was killed"
((elapsed <= BOUND_MS)) || fail "took ${elapsed} ms, bound is $BOUND_MS ms (heartbeat timeout $TIMEOUT_MS" \
    "+ interval $INTERVAL_MS + linger $LINGER_MS + slack $SLACK_MS)"
# Every survivor names the dead node (the scheduler as "lost the scheduler").
if [[ $ROLE == scheduler ]]; then
    pattern="lost the scheduler"
    survivors=("server 0" "server 1" "worker 0" "worker 1")
else
    pattern="$ROLE $RANK (node [0-9]*) died"
    survivors=()
    for who in "scheduler" "server 0" "server 1" "worker 0" "worker 1"; do
        [[ $who == "$ROLE $RANK" ]] || survivors+=("$who")
    done
fi
for who in "${survivors[@]}"; do
    grep -q "^\[$who\] .*$pattern" "$WORK/job.out" || fail "$who did not report: $pattern"
    grep -q "$who exited with status 3" "$WORK/job.out" || fail "$who did not exit with status 3"
done
echo "PASS"
