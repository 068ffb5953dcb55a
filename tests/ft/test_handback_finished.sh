#!/usr/bin/env bash
# A replacement server that joins after a worker finished (docs/FAULTS.md,
# "Taking the ranges back"): an SSP job of 3 servers and 3 workers with
# --replicas 1 and --on-server-failure restart, where worker 0 finishes after
# clock 20 and exits while the others run 400 clocks. Once it has, server 1 is
# killed; its replacement never hears from worker 0, so the scheduler relays
# worker 0's end (CLOCK) to it. It then takes its ranges back: without the
# relay its min clock would wait for worker 0 for ever, and the other
# workers' SSP pulls of its ranges with it. The job must end with every key
# exact on workers 1 and 2 (worker 0's part: its pushes of clocks 0..20) and
# exit 0.
# Usage: test_handback_finished.sh LOOM FAILOVER_CHECK
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh" "$1" "$2"
# shellcheck source-path=SCRIPTDIR source=../lib/ft.sh
source "$(dirname "$0")/../lib/ft.sh"

LOOM_REPLICAS=1 LOOM_HEARTBEAT_MS=250 LOOM_VERBOSE=1 "$LOOM" run --servers 3 --workers 3 \
    --on-failure wait --on-server-failure restart --heartbeat-timeout 2000 --timeout 240 \
    --insecure --no-status \
    -- "$PS_CHECK" ssp --pid-dir "$PIDS" --clocks 400 --pace-ms 20 --finish-early 0:20 \
    >"$WORK/job.out" 2>&1 &
launcher=$!
BG_PIDS+=("$launcher")
wait_for_files 7 30
wait_for_lines "$WORK/job.out" "^\[worker 0\] worker 0: finishes after clock 20, as asked" 1 60 "$launcher"
worker0=$(<"$PIDS/worker-0.pid")
deadline=$(($(now_ms) + 30000))
while kill -0 "$worker0" 2>/dev/null; do
    (($(now_ms) < deadline)) || fail "worker 0 did not exit within 30 s of finishing"
    poll_pause 0.05
done
kill -KILL "$(<"$PIDS/server-1.pid")"
wait_for_lines "$WORK/job.out" "\[scheduler\] .*server 1 took its ranges back\$" 1 120 "$launcher"
job_ended_exact "400" "1 2" "server 1 was killed by signal 9"
grep -qE "info: [1-9][0-9]* ranges open: every worker sent again" "$WORK/job.out" ||
    fail "the replacement did not open the ranges it took back"
echo "PASS"
