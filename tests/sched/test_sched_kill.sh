#!/usr/bin/env bash
# kill -9 worker 1 in the middle of a scheduled job: rotation MF (`loom train mf
# --schedule rotation`, item blocks passed from worker to worker on a ring) or dynamic
# Lasso (`loom train lasso --schedule dynamic`, plans from scheduler shards). The
# survivors wait for the dead worker's block or plan; each must notice by heartbeat,
# say which worker died and exit with status 3 within the bound of tests/lib/cli.sh's
# kill helpers, leaving no process behind. Data are generated.
# Usage: test_sched_kill.sh LOOM mf|lasso
set -u
LOOM=${1:?loom} APP=${2:?mf or lasso}
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"
work_setup schedkill

# Jobs long enough never to finish before the kill; READY is the line that shows the
# engine has completed a full pass (so the kill lands while blocks or plans are in flight).
case $APP in
mf)
    "$LOOM" gen mf --users 300 --items 500 --ratings 20000 --rank 4 --seed 5 --quiet \
        --out "$WORK/data" || job_fail "gen mf failed"
    TRAIN=(train mf --train "$WORK/data" --schedule rotation --epochs 100000)
    READY="^\[worker 0\] epoch   1 "
    ;;
lasso)
    "$LOOM" gen lasso --rows 300 --features 200 --group 10 --corr 0.8 --nonzeros 12 --seed 5 \
        --out "$WORK/data" >/dev/null || job_fail "gen lasso failed"
    TRAIN=(train lasso --train "$WORK/data" --schedule dynamic --lambda-ratio 0.05 --tol 0
        --iterations 1000000)
    READY="^\[worker 0\] iteration    1 "
    ;;
*) echo "unknown application $APP" >&2; exit 2 ;;
esac

kill_job_start 1 "$READY" pass "${TRAIN[@]}"
kill_worker1_and_check "scheduler" "server 0" "worker 0" "worker 2"
echo PASS
