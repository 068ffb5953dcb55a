#!/usr/bin/env bash
# kill -9 one worker of a serverless SVM job under NOTIFY-ACK (its neighbours wait for its
# models and acknowledgements): every survivor must notice by heartbeat, say which worker
# died and exit with status 3 within the bound below (the launcher is told not to stop them,
# as in tests/mp/test_kill.sh). Skips (77) without ../shared/data/a9a.
# Usage: test_svm_kill.sh LOOM DATA_DIR
set -u
LOOM=${1:?loom} DATA=${2:?data dir}
TRAIN=$DATA/a9a/a9a
if [[ ! -r $TRAIN ]]; then
    echo "SKIP: $TRAIN is missing (../shared/data, see docs/TESTING.md)"
    exit 77
fi
for var in $(compgen -e); do [[ $var == LOOM_* ]] && unset "$var"; done
# Heartbeat timeout, one interval, the linger of a failing process, slack for a loaded
# machine (the reasoning of tests/mp/test_kill.sh).
TIMEOUT_MS=3000 INTERVAL_MS=500 LINGER_MS=1000 SLACK_MS=1500
BOUND_MS=$((TIMEOUT_MS + INTERVAL_MS + LINGER_MS + SLACK_MS))
WORK=$(mktemp -d "${TMPDIR:-/tmp}/loom-svmkill.XXXXXX")
launcher=
cleanup() {
    [[ -n $launcher ]] && pkill -KILL -P "$launcher" 2>/dev/null
    [[ -n $launcher ]] && kill -KILL "$launcher" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*" >&2
    tail -n 30 "$WORK/job.out" >&2
    exit 1
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

LOOM_HEARTBEAT_MS=$INTERVAL_MS "$LOOM" run --servers 0 --workers 3 --on-failure wait \
    --heartbeat-timeout $TIMEOUT_MS --timeout 120 -- "$LOOM" train svm --train "$TRAIN" \
    --graph ring --sync notify-ack --epochs 100000 --batch 16 >"$WORK/job.out" 2>&1 &
launcher=$!
deadline=$(($(now_ms) + 60000))
until grep -q "epoch   1 " "$WORK/job.out"; do
    kill -0 "$launcher" 2>/dev/null || fail "the job ended before its first epoch"
    (($(now_ms) < deadline)) || fail "no epoch within 60 s"
    sleep 0.05
done
victim=
for pid in $(pgrep -P "$launcher"); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "LOOM_RANK=1" &&
        tr '\0' '\n' <"/proc/$pid/environ" | grep -qx "LOOM_ROLE=worker"; then
        victim=$pid
    fi
done
[[ -n $victim ]] || fail "cannot find worker 1's process"
start=$(now_ms)
kill -KILL "$victim"
wait "$launcher"
status=$?
launcher=
elapsed=$(($(now_ms) - start))
echo "job ended with status $status ${elapsed} ms after the kill"
((status != 0)) || fail "the job exited 0 although worker 1 was killed"
((elapsed <= BOUND_MS)) || fail "took ${elapsed} ms, bound is $BOUND_MS ms"
for who in "scheduler" "worker 0" "worker 2"; do
    grep -q "^\[$who\] .*worker 1 (node [0-9]*) died" "$WORK/job.out" || fail "$who did not report worker 1's death"
    grep -q "$who exited with status 3" "$WORK/job.out" || fail "$who did not exit with status 3"
done
echo PASS
