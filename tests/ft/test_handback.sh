#!/usr/bin/env bash
# Taking the ranges back (docs/FAULTS.md, "Taking the ranges back"): a job of
# 3 servers and 3 workers with --replicas 1 and --on-server-failure restart
# pushes known int64 deltas into a sum table while servers are killed
# (SIGKILL) one after another: 1, 2, 0, then 1 again. Each is replaced; once
# the replacement is back the registry hands it its ranges back, fencing them
# at their acting masters while pushes flow. Each kill waits for the previous
# handback, so every server in turn has been the acting master of another's
# ranges and then handed them back. Then server 2 is killed once more and,
# the moment its replacement is back, server 0 too: that kill lands around
# server 2's handback (before it, during its fence, which it then aborts, or
# after it), and both replacements must still take their ranges back.
#
# The job ends 100 clocks after the last handback (at most 3000), and must end with every key exactly equal to the sum of all pushes on
# every worker (no acknowledged update lost, none applied twice) and exit 0,
# and every handback must have moved ranges (the logs say how many).
# Usage: test_handback.sh LOOM FAILOVER_CHECK bsp|ssp|asp
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh" "$1" "$2"
# shellcheck source-path=SCRIPTDIR source=../lib/ft.sh
source "$(dirname "$0")/../lib/ft.sh"
MODE=${3:?mode}

LOOM_REPLICAS=1 LOOM_HEARTBEAT_MS=250 LOOM_VERBOSE=1 "$LOOM" run --servers 3 --workers 3 \
    --on-failure wait --on-server-failure restart --heartbeat-timeout 2000 --timeout 300 \
    --insecure --no-status \
    -- "$PS_CHECK" "$MODE" --pid-dir "$PIDS" --clocks "${CLOCKS:-3000}" --pace-ms 10 --end-file "$WORK/end" >"$WORK/job.out" 2>&1 &
launcher=$!
BG_PIDS+=("$launcher")
wait_for_files 7 30

took_back() { grep -c "server $1 took its ranges back\$" "$WORK/job.out"; }

advance 30
kills=0
for victim in 1 2 0 1; do
    before=$(took_back $victim)
    kill -KILL "$(<"$PIDS/server-$victim.pid")"
    kills=$((kills + 1))
    wait_for_lines "$WORK/job.out" "\[scheduler\] .*server $victim took its ranges back\$" \
        $((before + 1)) 120 "$launcher"
    advance 20
done
# Server 0's kill lands around server 2's handback.
before2=$(took_back 2)
before0=$(took_back 0)
rejoined=$(grep -c "server 2 rejoined: it holds full copies of its ranges again" "$WORK/job.out")
kill -KILL "$(<"$PIDS/server-2.pid")"
wait_for_lines "$WORK/job.out" "server 2 rejoined: it holds full copies of its ranges again" \
    $((rejoined + 1)) 120 "$launcher"
kill -KILL "$(<"$PIDS/server-0.pid")"
kills=$((kills + 2))
wait_for_lines "$WORK/job.out" "\[scheduler\] .*server 2 took its ranges back\$" $((before2 + 1)) 120 "$launcher"
wait_for_lines "$WORK/job.out" "\[scheduler\] .*server 0 took its ranges back\$" $((before0 + 1)) 120 "$launcher"
end_job_after 100
job_ended_exact "[0-9]+" "0 1 2" "server [012] was killed by signal 9"
handbacks=$(grep -cE "^\[scheduler\] .*server [012] took its ranges back$" "$WORK/job.out")
((handbacks == kills)) || fail "$handbacks handbacks for $kills kills"
# Every handback moved ranges: each was fenced somewhere and opened at its server.
fenced=$(grep -cE "info: fenced [1-9][0-9]* ranges to hand back to server" "$WORK/job.out")
opened=$(grep -cE "info: [1-9][0-9]* ranges open: every worker sent again" "$WORK/job.out")
((fenced >= kills && opened >= kills)) || fail "$kills handbacks, but $fenced fences and $opened openings"
grep -E "handback aborted|parked pushes and [0-9]+ refused pulls again" "$WORK/job.out" | head -5
echo "$kills kills, $handbacks handbacks, $fenced fences, $opened openings"
echo "PASS"
