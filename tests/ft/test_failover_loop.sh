#!/usr/bin/env bash
# Seeded server-kill loop (issue 12, item 4, servers only): JOBS short jobs of
# 3 servers and 2 workers with --replicas 2, each losing two random servers
# (SIGKILL) at random clocks, so 2 x JOBS kills per run (50 by default). The
# consistency model rotates through BSP, SSP and ASP. Every job must end with
# every key of its int64 sum table exact (failover_check: no acknowledged
# push lost, none applied twice) and no process but the killed ones failing.
# The seed and each job's choices are printed, so a failure can be replayed:
#   test_failover_loop.sh LOOM FAILOVER_CHECK [SEED [JOBS]]
source "$(dirname "$0")/../mp/lib.sh" "$1" "$2"
SEED=${3:-1}
JOBS=${4:-25}
RANDOM=$SEED
modes=(bsp ssp asp)
kills=0
for ((job = 0; job < JOBS; job++)); do
    mode=${modes[job % 3]}
    first=$((RANDOM % 3))
    second=$(((first + 1 + RANDOM % 2) % 3))
    at1=$((10 * (1 + RANDOM % 4)))     # clock 10..40
    at2=$((at1 + 10 * (1 + RANDOM % 3))) # 10..30 clocks later
    echo "job $job: $mode, server $first after clock $at1, server $second after clock $at2"
    rm -f "$PIDS"/*.pid
    out="$WORK/job$job.out"
    LOOM_REPLICAS=2 LOOM_HEARTBEAT_MS=250 "$LOOM" run --servers 3 --workers 2 --on-failure wait \
        --heartbeat-timeout 2000 --timeout 120 --insecure --no-status \
        -- "$PS_CHECK" "$mode" --pid-dir "$PIDS" --clocks 120 --pace-ms 20 >"$out" 2>&1 &
    launcher=$!
    BG_PIDS+=("$launcher")
    wait_for_files 6 30
    wait_for_lines "$out" "^\[worker [01]\] worker [01] clock $at1\$" 1 60 "$launcher"
    kill -KILL "$(<"$PIDS/server-$first.pid")"
    wait_for_lines "$out" "^\[worker [01]\] worker [01] clock $at2\$" 1 60 "$launcher"
    kill -KILL "$(<"$PIDS/server-$second.pid")"
    kills=$((kills + 2))
    wait "$launcher"
    for w in 0 1; do
        grep -q "^\[worker $w\] worker $w: 120 clocks, all 1000 keys exact" "$out" ||
            { cp "$out" "$WORK/job.out"; fail "job $job: worker $w did not end with every key exact"; }
    done
    others=$(grep -E "^loom run: .*(exited with status [1-9]|killed by)" "$out" |
        grep -vE "server ($first|$second) was killed by signal 9")
    [[ -z $others ]] || { cp "$out" "$WORK/job.out"; fail "job $job: other processes failed: $others"; }
done
echo "PASS: $JOBS jobs, $kills servers killed, every key exact (seed $SEED)"
