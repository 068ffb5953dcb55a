#!/usr/bin/env bash
# A replacement server (docs/FAULTS.md, "A replacement server"): a job of 3
# servers and 3 workers with --replicas 1 and --on-server-failure restart
# pushes known int64 deltas into a sum table. Once every worker has passed
# clock 30, server 1 is killed (SIGKILL); the launcher starts a replacement,
# which joins, gets full copies of its ranges and is announced as holding
# them. Once every worker has passed 20 more clocks after that, server 2 is
# killed too. With one replica, the ranges held by servers 1 and 2 alone
# survive that second death only through the replacement's copies, so the
# job, ended 60 clocks after that death was seen, must still end with every key exactly equal to the sum of all pushes on
# every worker (no acknowledged update lost, none applied twice) and exit 0.
# Usage: test_rejoin.sh LOOM FAILOVER_CHECK bsp|ssp|asp
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh" "$1" "$2"
# shellcheck source-path=SCRIPTDIR source=../lib/ft.sh
source "$(dirname "$0")/../lib/ft.sh"
MODE=${3:?mode}

LOOM_REPLICAS=1 LOOM_HEARTBEAT_MS=250 LOOM_VERBOSE=${VERBOSE:-0} "$LOOM" run --servers 3 --workers 3 \
    --on-failure wait --on-server-failure restart --heartbeat-timeout 2000 --timeout 240 \
    --insecure --no-status \
    -- "$PS_CHECK" "$MODE" --pid-dir "$PIDS" --clocks "${CLOCKS:-1200}" --pace-ms 20 --end-file "$WORK/end" >"$WORK/job.out" 2>&1 &
launcher=$!
BG_PIDS+=("$launcher")
wait_for_files 7 30

for w in 0 1 2; do wait_past $w 30; done
old=$(<"$PIDS/server-1.pid")
kill -KILL "$old"
wait_for_lines "$WORK/job.out" "server 1 rejoined: it holds full copies of its ranges again" 1 120 "$launcher"
[[ $(<"$PIDS/server-1.pid") != "$old" ]] || fail "no replacement wrote its pid file"
advance 20
kill -KILL "$(<"$PIDS/server-2.pid")"
wait_for_lines "$WORK/job.out" "server 2 \(node [0-9]*\) died: no heartbeat.*the job goes on without it" 1 60 "$launcher"
end_job_after 60
job_ended_exact "[0-9]+" "0 1 2" "server [12] was killed by signal 9"
grep -E "rejoined|sent again|now master|copies" "$WORK/job.out" | head -12
echo "PASS"
