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
# exit with status 3 (docs/LAUNCHING.md, docs/CLUSTER.md). Detection is checked
# on the silence the detecting process itself measured and printed ("nothing
# heard from it for N ms", "no heartbeat for N ms"): the timeout plus up to one
# heartbeat interval (silence is checked once per interval: node_tick() in
# src/core/node_control.c, sched_tick() in scheduler.c) plus DETECT_SLACK_MS
# for a loaded machine. It stays below twice the timeout, so detection that
# takes twice as long as promised fails the test.
# The whole job's end is bounded more loosely: after detection each process
# lingers up to NODE_LINGER_MS, 1000 ms (src/core/node_priv.h), for its last
# messages, then exits; EXIT_SLACK_MS covers the launcher and exiting on a
# loaded 2-core machine under sanitizers (LeakSanitizer's exit scan alone took
# seconds in CI).
TIMEOUT_MS=3000
INTERVAL_MS=500
DETECT_SLACK_MS=1000
LINGER_MS=1000
EXIT_SLACK_MS=3000
DETECT_BOUND_MS=$((TIMEOUT_MS + INTERVAL_MS + DETECT_SLACK_MS))
BOUND_MS=$((TIMEOUT_MS + INTERVAL_MS + LINGER_MS + EXIT_SLACK_MS))

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
    "+ interval $INTERVAL_MS + linger $LINGER_MS + exit slack $EXIT_SLACK_MS)"
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
# How long the detecting processes heard nothing: every survivor for the
# scheduler, the scheduler for a server or worker.
if [[ $ROLE == scheduler ]]; then
    silences=$(grep -o "lost the scheduler: nothing heard from it for [0-9]* ms" "$WORK/job.out")
else
    silences=$(grep -o "^\[scheduler\] .*$ROLE $RANK (node [0-9]*) died: no heartbeat for [0-9]* ms" "$WORK/job.out")
fi
[[ -n $silences ]] || fail "no process said how long it heard nothing from $ROLE $RANK"
while read -r ms; do
    ((ms <= DETECT_BOUND_MS)) || fail "detected after $ms ms of silence, bound is $DETECT_BOUND_MS ms" \
        "(heartbeat timeout $TIMEOUT_MS + interval $INTERVAL_MS + slack $DETECT_SLACK_MS)"
done < <(grep -o "for [0-9]* ms" <<<"$silences" | grep -o "[0-9]*")
for who in "${survivors[@]}"; do
    grep -q "^\[$who\] .*$pattern" "$WORK/job.out" || fail "$who did not report: $pattern"
    grep -q "$who exited with status 3" "$WORK/job.out" || fail "$who did not exit with status 3"
done
echo "PASS"
