#!/usr/bin/env bash
# kill -9 one process of a running job: every other process must notice by
# heartbeat (the launcher is told not to stop them), say which node died, and
# exit non-zero within the heartbeat timeout plus a margin. Usage:
#   test_kill.sh LOOM PS_CHECK ROLE RANK     (ROLE: scheduler, server or worker)
source "$(dirname "$0")/lib.sh"
ROLE=${3:?role}
RANK=${4:?rank}
TIMEOUT_MS=2000
MARGIN_MS=4000

"$LOOM" run --servers 2 --workers 2 --on-failure wait --heartbeat-timeout $TIMEOUT_MS --timeout 60 \
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
((elapsed <= TIMEOUT_MS + MARGIN_MS)) || fail "took ${elapsed} ms, bound is $((TIMEOUT_MS + MARGIN_MS)) ms"
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
