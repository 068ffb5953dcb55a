#!/usr/bin/env bash
# Under --on-worker-failure continue only a worker killed by a signal is lost
# (docs/FAULTS.md): a worker that exits with an error status fails the job.
# A job of 2 servers and 3 workers (failover_check, BSP) runs with
# LOOM_ON_WORKER_FAILURE=continue:
#   1. worker 1 exits with status 1 after its clock 20 (an application error):
#      `loom run` must exit non-zero, name worker 1 as the failure and stop
#      every other process (none may survive it), no worker ending its run;
#   2. worker 1 is SIGKILLed once it has passed clock 20: the job goes on
#      without it, the other workers end with every key exact (worker 1's
#      part as far as it got) and `loom run` exits 0.
# Usage: test_worker_error_exit.sh LOOM FAILOVER_CHECK
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh" "$1" "$2"
export LOOM_ON_WORKER_FAILURE=continue LOOM_HEARTBEAT_MS=250

# start_job EXTRA...: the job in the background (launcher), its output in $WORK/job.out.
start_job() {
    rm -f "$PIDS"/*
    "$LOOM" run --servers 2 --workers 3 --heartbeat-timeout 2000 --timeout 120 --insecure \
        --no-status -- "$PS_CHECK" bsp --pid-dir "$PIDS" --clocks 60 --pace-ms 20 \
        --workers-may-die "$@" >"$WORK/job.out" 2>&1 &
    launcher=$!
    BG_PIDS+=("$launcher")
    wait_for_files 6 30
}

# 1. An error exit.
start_job --error-exit 1:20
wait "$launcher"
status=$?
echo "worker 1 exited with status 1: loom run exited with status $status"
((status != 0)) || fail "loom run exited 0 although worker 1 exited with status 1"
grep -q "^\[worker 1\] worker 1: exits with status 1 after clock 20" "$WORK/job.out" ||
    fail "worker 1 did not exit as asked"
grep -q "^loom run: failed: worker 1 exited with status 1" "$WORK/job.out" ||
    fail "loom run did not name worker 1 as the failure"
grep -q "the job goes on without it" "$WORK/job.out" && fail "the job went on without worker 1"
grep -q "keys exact" "$WORK/job.out" && fail "a worker ended its run: the job was not stopped"
for f in "$PIDS"/*.pid; do
    kill -0 "$(<"$f")" 2>/dev/null && fail "$(basename "$f" .pid) outlived loom run"
done

# 2. A kill by a signal, for contrast: the job goes on without worker 1.
start_job
wait_for_lines "$WORK/job.out" "^\[worker 1\] worker 1 clock 20\$" 1 60 "$launcher"
kill -KILL "$(<"$PIDS/worker-1.pid")"
wait "$launcher"
status=$?
echo "worker 1 killed by SIGKILL: loom run exited with status $status"
((status == 0)) || fail "loom run exited with status $status after worker 1 was killed"
grep -q "^loom run: worker 1 was killed by signal 9.*; the job goes on without it" "$WORK/job.out" ||
    fail "loom run did not say the job goes on without worker 1"
for w in 0 2; do
    grep -q "^\[worker $w\] worker $w: 60 clocks, all 1000 keys exact" "$WORK/job.out" ||
        fail "worker $w did not end with every key exact"
done
echo PASS
