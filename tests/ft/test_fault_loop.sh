#!/usr/bin/env bash
# Seeded fault-injection loop (issue 12, item 4): short jobs of 3 servers and
# 3 workers with --replicas 2 and --on-worker-failure continue, each losing
# two random servers and two random workers (SIGKILL, in a random order, at
# random clocks at least 10 apart), so 4 kills a job, jobs until KILLS kills
# (50 by default: 13 jobs, 52 kills; ctest runs 24). The consistency model
# rotates through BSP, SSP and ASP.
#
# Every job must end with the surviving worker's check (failover_check
# --workers-may-die) passing: in every key of the int64 sum table, each
# worker's part (a bit field of its own) is exact for the surviving worker
# and for each killed one equal to its pushes of every clock it had recorded
# as acknowledged and ended, plus its push of the next clock or not (the
# part docs/FAULTS.md says may survive) — no acknowledged update lost, none
# applied twice. No process but the killed ones may fail.
#
# Kills are at least 10 clocks apart as the live workers print them. Under
# BSP each kill also waits until the scheduler has declared the previous
# victim dead and a live worker has printed a clock since: a BSP push is
# acknowledged on arrival and reaches the replicas only after its clock has
# ended everywhere, and a dead worker cannot send it again, so a worker and a
# server dying within that moment can lose the worker's last clock
# (docs/FAULTS.md, "What is not"); the wait is short, since under BSP the
# others stall until the death is declared anyway. (Without this wait, kills
# a few milliseconds apart did lose a BSP worker's last clock.) Under SSP and ASP a push
# is acknowledged only once the replicas hold it, and kills follow each other
# without waiting.
#
# The seed and each job's choices are printed, so a failure can be replayed:
#   test_fault_loop.sh LOOM FAILOVER_CHECK [SEED [KILLS]]
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh" "$1" "$2"
SEED=${3:-1}
KILLS=${4:-50}
CLOCKS=150
RANDOM=$SEED
modes=(bsp ssp asp)
kills=0
echo "seed $SEED, $KILLS kills"

# job_failed MESSAGE: fail, showing the job's log without its progress lines.
job_failed() {
    grep -v " clock [0-9]*\$" "$out" | tail -n 60 >"$WORK/job.out"
    rm -f "$WORK"/job[0-9]*.out
    fail "job $job: $*"
}
for ((job = 0; kills < KILLS; job++)); do
    mode=${modes[job % 3]}
    # Four distinct clocks out of 10, 20, ..., 80, in order. The job has 150:
    # a kill lands a few clocks after the line it waits for, and under BSP
    # each kill's wait for the previous death takes 10 clocks or more.
    slots=(10 20 30 40 50 60 70 80)
    at=()
    for ((i = 0; i < 4; i++)); do
        pick=$((RANDOM % ${#slots[@]}))
        at+=("${slots[pick]}")
        slots=("${slots[@]:0:pick}" "${slots[@]:pick+1}")
    done
    mapfile -t at < <(printf '%s\n' "${at[@]}" | sort -n)
    # Two servers and two workers, in a random order.
    s1=$((RANDOM % 3)) w1=$((RANDOM % 3))
    s2=$(((s1 + 1 + RANDOM % 2) % 3)) w2=$(((w1 + 1 + RANDOM % 2) % 3))
    victims=("server $s1" "server $s2" "worker $w1" "worker $w2")
    for ((i = 3; i > 0; i--)); do
        j=$((RANDOM % (i + 1)))
        v=${victims[i]} victims[i]=${victims[j]} victims[j]=$v
    done
    plan=""
    for i in 0 1 2 3; do plan+="${plan:+, }${victims[i]} after clock ${at[i]}"; done
    echo "job $job: $mode, $plan"

    rm -f "$PIDS"/*
    out="$WORK/job$job.out"
    LOOM_REPLICAS=2 LOOM_HEARTBEAT_MS=250 LOOM_ON_WORKER_FAILURE=continue \
        "$LOOM" run --servers 3 --workers 3 --on-failure wait --heartbeat-timeout 2000 \
        --timeout 120 --insecure --no-status \
        -- "$PS_CHECK" "$mode" --pid-dir "$PIDS" --clocks $CLOCKS --pace-ms 20 --workers-may-die \
        >"$out" 2>&1 &
    launcher=$!
    BG_PIDS+=("$launcher")
    wait_for_files 7 30
    live=(0 1 2)
    from=1
    for i in 0 1 2 3; do
        if [[ $mode == bsp ]] && ((i > 0)); then
            died="^\[scheduler\] .*${victims[i - 1]} \(node [0-9]+\) died"
            wait_for_lines "$out" "$died" 1 60 "$launcher"
            from=$(grep -nE -m1 -- "$died" "$out" | cut -d: -f1)
        fi
        # Once a live worker has printed the clock or a later one (a dead
        # one's old lines do not count), after line $from.
        who=$(IFS='|' && echo "${live[*]}")
        later=$(seq -s '|' "${at[i]}" 10 $((CLOCKS - 10)))
        wait_for_lines "$out" "^\[worker ($who)\] worker ($who) clock ($later)\$" 1 60 "$launcher" "$from"
        read -r role rank <<<"${victims[i]}"
        kill -KILL "$(<"$PIDS/$role-$rank.pid")"
        [[ $role == worker ]] && mapfile -t live < <(printf '%s\n' "${live[@]}" | grep -vx "$rank")
    done
    kills=$((kills + 4))
    wait "$launcher"
    w=${live[0]}
    grep -q "^\[worker $w\] worker $w: $CLOCKS clocks, all 1000 keys exact" "$out" ||
        job_failed "worker $w did not end with every part exact"
    grep "^\[worker $w\] worker $w: worker [0-9] was lost" "$out"
    for v in $w1 $w2; do
        grep -q "^\[worker $w\] worker $w: worker $v was lost after clock" "$out" ||
            job_failed "worker $w did not check killed worker $v"
    done
    others=$(grep -E "^loom run: .*(exited with status [1-9]|killed by)" "$out" |
        grep -vE "(server ($s1|$s2)|worker ($w1|$w2)) was killed by signal 9")
    [[ -z $others ]] || job_failed "other processes failed: $others"
done
echo "PASS: $job jobs, $kills processes killed (servers and workers), every part exact (seed $SEED)"
