#!/usr/bin/env bash
# --on-worker-failure restart under `loom run`, exactly (docs/FAULTS.md): a
# job of 3 servers and 3 workers pushes known int64 deltas into a sum table
# (failover_check MODE) and checkpoints every 5 clocks (LOOM_CHECKPOINT_DIR).
# Worker 1 is killed (SIGKILL) once every worker has passed clock 30; the
# launcher must start the whole job again from its newest checkpoint. Once the
# restarted job is up, worker 2 is killed too: a second restart. The job must
# then end with status 0, every worker finding every key exact (each worker's
# part of each key is exactly its pushes of every clock, once: nothing of the
# clocks before the checkpoint lost, nothing after it applied twice), every
# committed checkpoint exactly its cut (failover_check check), and the
# launcher saying it restarted twice. Integer sums do not depend on the order
# of the additions, so this holds with several workers under BSP, SSP and ASP
# alike. Usage:
#   test_restart_exact.sh LOOM FAILOVER_CHECK bsp|ssp|asp
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh" "$1" "$2"
MODE=${3:?mode}
CLOCKS=300
CK=$WORK/ck
OUT=$WORK/job.out

LOOM_CHECKPOINT_DIR="$CK" LOOM_CHECKPOINT_EVERY=5 "$LOOM" run --servers 3 --workers 3 \
    --on-worker-failure restart --heartbeat-timeout 2000 --timeout 240 --insecure --no-status \
    -- "$PS_CHECK" "$MODE" --pid-dir "$PIDS" --clocks $CLOCKS --pace-ms 5 >"$OUT" 2>&1 &
launcher=$!
BG_PIDS+=("$launcher")

wait_for_files 7 30
for w in 0 1 2; do wait_for_lines "$OUT" "^\[worker $w\] worker $w clock 30$" 1 60 "$launcher"; done
old2=$(<"$PIDS/worker-2.pid")
kill -KILL "$(<"$PIDS/worker-1.pid")"
wait_for_lines "$OUT" "restart 1 of 3: the job starts again from its checkpoint at clock" 1 60 "$launcher"

# The restarted job's worker 2, once it has written its pid file.
deadline=$((SECONDS + 60))
until pid=$(<"$PIDS/worker-2.pid") && [[ $pid != "$old2" ]] && kill -0 "$pid" 2>/dev/null; do
    kill -0 "$launcher" 2>/dev/null || fail "the job ended before its restarted worker 2 was up"
    ((SECONDS < deadline)) || fail "the restarted job's worker 2 did not come up within 60 s"
    poll_pause 0.01 # a poll, not a synchronisation: the condition is the pid file
done
kill -KILL "$pid"
wait_for_lines "$OUT" "restart 2 of 3: the job starts again from" 1 60 "$launcher"

wait "$launcher"
status=$?
((status == 0)) || fail "the job that lost two workers exited with status $status"
grep -q "the job finished after 2 restart(s)" "$OUT" || fail "the launcher does not say it restarted twice"
for w in 0 1 2; do
    n=$(grep -c "^\[worker $w\] worker $w: $CLOCKS clocks, all 1000 keys exact" "$OUT")
    ((n == 1)) || fail "worker $w did not end once with every key exact ($n times)"
    grep -q "^\[worker $w\] worker $w resumed at clock" "$OUT" ||
        fail "worker $w never resumed from a checkpoint"
done
"$PS_CHECK" check "$CK" 3 || fail "a committed checkpoint is not exactly its cut"
echo "PASS: $(grep -o 'restart [12] of 3: .*' "$OUT" | tr '\n' ';')"
