#!/usr/bin/env bash
# Stall reports (docs/FAULTS.md, "When a job stops moving"): a request that has
# waited LOOM_STALL_REPORT_MS (here 1000 ms; 30 s by default) is named once in
# the log, with what it waits for. A failover_check job (1 server, 2 workers,
# a 60 s heartbeat timeout, so nobody is declared dead) has one process
# stopped (SIGSTOP) once its workers passed clock 10, and continued once the
# reports are in (30 s at most):
#
#   worker  BSP, worker 1 stopped: the scheduler names worker 1 as the one
#           the others wait for, and worker 0 says its loom_clock has waited
#           for the slowest worker;
#   server  ASP (no clock wait), the server stopped: each worker names its
#           request waiting on server 0 (a pull, or a push's acknowledgement).
#
# Either way the job then ends with every key exact and exit status 0.
# Usage: test_stall_report.sh LOOM FAILOVER_CHECK worker|server
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh" "$1" "$2"
CASE=${3:?usage: $0 LOOM FAILOVER_CHECK worker|server}
case $CASE in
worker) mode=bsp victim=worker-1 ;;
server) mode=asp victim=server-0 ;;
*) fail "unknown case '$CASE'" ;;
esac

LOOM_STALL_REPORT_MS=1000 "$LOOM" run --servers 1 --workers 2 --heartbeat-timeout 60000 \
    --insecure --no-status -- "$PS_CHECK" "$mode" --pid-dir "$PIDS" --clocks 150 --pace-ms 20 \
    >"$WORK/job.out" 2>&1 &
launcher=$!
BG_PIDS+=("$launcher")
wait_for_files 4 60
wait_for_lines "$WORK/job.out" '^\[worker [01]\] worker [01] clock 10$' 2 60 "$launcher"
pid=$(<"$PIDS/$victim.pid")
kill -STOP "$pid"
if [[ $CASE == worker ]]; then
    wait_for_lines "$WORK/job.out" \
        '^\[scheduler\] warning: worker 1 has not finished clock [0-9]+ in [0-9]+ s, and 1 worker\(s\) that have may wait for it$' \
        1 30 "$launcher"
    wait_for_lines "$WORK/job.out" \
        '^\[worker 0\] warning: loom_clock has waited [0-9]+ s for the slowest worker: this worker has finished [0-9]+ clocks, the slowest [0-9]+ ' \
        1 30 "$launcher"
else
    for w in 0 1; do
        wait_for_lines "$WORK/job.out" \
            "^\\[worker $w\\] warning: a (pull of table 0 has waited [0-9]+ s for server 0 \\(up\\), [0-9]+ pull part\\(s\\) unanswered in all|push to table 0 has waited [0-9]+ s for server 0's acknowledgement \\(up\\))\$" \
            1 30 "$launcher"
    done
fi
kill -CONT "$pid"
wait "$launcher"
status=$?
((status == 0)) || fail "the job exited with status $status"
for w in 0 1; do
    grep -q "^\[worker $w\] worker $w: 150 clocks, all 1000 keys exact$" "$WORK/job.out" ||
        fail "worker $w did not find every key exact"
done
grep -E "warning: (worker [0-9]+ has not finished|loom_clock has waited|a (pull|push) )" "$WORK/job.out"
echo "PASS"
