#!/usr/bin/env bash
# kill -9 worker 1 in the middle of a scheduled job: rotation MF (`loom train mf
# --schedule rotation`, item blocks passed from worker to worker on a ring) or dynamic
# Lasso (`loom train lasso --schedule dynamic`, plans from scheduler shards). The
# survivors wait for the dead worker's block or plan; each must notice by heartbeat,
# say which worker died and exit with status 3 within the bound below, leaving no
# process behind (the launcher is told not to stop them, as in tests/mp/test_kill.sh
# and tests/svm/test_svm_kill.sh, whose bound this reuses). Data are generated.
# Usage: test_sched_kill.sh LOOM mf|lasso
set -u
LOOM=${1:?loom} APP=${2:?mf or lasso}
for var in $(compgen -e); do [[ $var == LOOM_* ]] && unset "$var"; done
# Heartbeat timeout, one interval, the linger of a failing process, slack for a loaded
# machine (the reasoning of tests/mp/test_kill.sh).
TIMEOUT_MS=3000 INTERVAL_MS=500 LINGER_MS=1000 SLACK_MS=1500
BOUND_MS=$((TIMEOUT_MS + INTERVAL_MS + LINGER_MS + SLACK_MS))
WORK=$(mktemp -d "${TMPDIR:-/tmp}/loom-schedkill.XXXXXX")
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

# Jobs long enough never to finish before the kill; READY is the line that shows the
# engine has completed a full pass (so the kill lands while blocks or plans are in flight).
case $APP in
mf)
    "$LOOM" gen mf --users 300 --items 500 --ratings 20000 --rank 4 --seed 5 --quiet \
        --out "$WORK/data" || fail "gen mf failed"
    TRAIN=(train mf --train "$WORK/data" --schedule rotation --epochs 100000)
    SERVERS=1 READY="^\[worker 0\] epoch   1 "
    ;;
lasso)
    "$LOOM" gen lasso --rows 300 --features 200 --group 10 --corr 0.8 --nonzeros 12 --seed 5 \
        --out "$WORK/data" >/dev/null || fail "gen lasso failed"
    TRAIN=(train lasso --train "$WORK/data" --schedule dynamic --lambda-ratio 0.05 --tol 0
        --iterations 1000000)
    SERVERS=1 READY="^\[worker 0\] iteration    1 "
    ;;
*) echo "unknown application $APP" >&2; exit 2 ;;
esac

LOOM_HEARTBEAT_MS=$INTERVAL_MS "$LOOM" run --servers $SERVERS --workers 3 --on-failure wait \
    --heartbeat-timeout $TIMEOUT_MS --timeout 120 -- "$LOOM" "${TRAIN[@]}" >"$WORK/job.out" 2>&1 &
launcher=$!
deadline=$(($(now_ms) + 60000))
until grep -q "$READY" "$WORK/job.out"; do
    kill -0 "$launcher" 2>/dev/null || fail "the job ended before its first pass"
    (($(now_ms) < deadline)) || fail "no pass within 60 s"
    sleep 0.05
done
victim='' survivors=()
for pid in $(pgrep -P "$launcher"); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "LOOM_RANK=1" &&
        tr '\0' '\n' <"/proc/$pid/environ" | grep -qx "LOOM_ROLE=worker"; then
        victim=$pid
    else
        survivors+=("$pid")
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
for who in "scheduler" "server 0" "worker 0" "worker 2"; do
    grep -q "^\[$who\] .*worker 1 (node [0-9]*) died" "$WORK/job.out" || fail "$who did not report worker 1's death"
    grep -q "$who exited with status 3" "$WORK/job.out" || fail "$who did not exit with status 3"
done
for pid in "${survivors[@]}"; do
    kill -0 "$pid" 2>/dev/null && fail "process $pid outlived the launcher"
done
echo PASS
