#!/usr/bin/env bash
# Two replacements at once (docs/FAULTS.md, "Taking the ranges back"): a job
# of 3 servers and 3 workers with --replicas 2 and --on-server-failure
# restart pushes known int64 deltas into a sum table; servers 1 and 2 are
# killed (SIGKILL) at the same moment, so both replacements join together
# (the one that registers second finds the first in its roster, still
# joining) and then take their ranges back one after the other. Before the
# fixes this test came with, the second never heard that the first was back
# and dropped the fence for it, so neither handback ended, and a handback
# started before the previous one's ranges opened left them closed for ever.
# The job, ended 100 clocks after both handbacks, must end with every key
# exact on every worker and exit 0.
# Usage: test_handback_two.sh LOOM FAILOVER_CHECK bsp|ssp|asp
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh" "$1" "$2"
# shellcheck source-path=SCRIPTDIR source=../lib/ft.sh
source "$(dirname "$0")/../lib/ft.sh"
MODE=${3:?mode}

LOOM_REPLICAS=2 LOOM_HEARTBEAT_MS=250 LOOM_VERBOSE=1 "$LOOM" run --servers 3 --workers 3 \
    --on-failure wait --on-server-failure restart --heartbeat-timeout 2000 --timeout 240 \
    --insecure --no-status \
    -- "$PS_CHECK" "$MODE" --pid-dir "$PIDS" --clocks 1500 --pace-ms 10 --end-file "$WORK/end" >"$WORK/job.out" 2>&1 &
launcher=$!
BG_PIDS+=("$launcher")
wait_for_files 7 30
wait_for_lines "$WORK/job.out" "^\[worker [0-2]\] worker [0-2] clock 50$" 3 60 "$launcher"
kill -KILL "$(<"$PIDS/server-1.pid")" "$(<"$PIDS/server-2.pid")"
for s in 1 2; do
    wait_for_lines "$WORK/job.out" "\[scheduler\] .*server $s took its ranges back\$" 1 120 "$launcher"
    wait_for_lines "$WORK/job.out" "^\[server $s\] .*ranges open: every worker sent again" 1 60 "$launcher"
done
end_job_after 100
job_ended_exact "[0-9]+" "0 1 2" "server [12] was killed by signal 9"
bad=$(grep -E "malformed HANDBACK|cannot reach server" "$WORK/job.out")
[[ -z $bad ]] || fail "a replacement refused a handback message or its peer: $bad"
echo "PASS"
