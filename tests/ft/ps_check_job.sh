# shellcheck shell=bash
# What the tests of failover_check jobs under `loom run` with replacement
# servers share (test_rejoin.sh, test_handback*.sh; sourced after
# ../mp/lib.sh, with the job's output in $WORK/job.out and its launcher's pid
# in $launcher).

# last_clock W: the last clock worker W printed (every 10th), or nothing.
last_clock() {
    grep -oE "^\[worker $1\] worker $1 clock [0-9]+$" "$WORK/job.out" | tail -n 1 | grep -oE '[0-9]+$'
}

# wait_past W C: until worker W has printed a clock of at least C (bounded).
wait_past() {
    local w=$1 want=$2 deadline=$(($(now_ms) + 120000)) c
    while :; do
        c=$(last_clock "$w")
        ((${c:-0} >= want)) && return 0
        kill -0 "$launcher" 2>/dev/null || fail "the job ended before worker $w reached clock $want"
        (($(now_ms) > deadline)) && fail "worker $w did not reach clock $want within 120 s"
        sleep 0.05 # a poll, not a synchronisation: the condition is the log
    done
}

# advance N: until every worker has printed N more clocks.
advance() {
    local w
    for w in 0 1 2; do wait_past "$w" $(($(last_clock "$w") + $1)); done
}

# job_ended_exact CLOCKS WORKERS KILLED: wait for the job; every worker in
# WORKERS (e.g. "0 1 2") must have ended CLOCKS clocks (a regex) with every
# key exact, `loom run` exit 0, and no process have failed but those matching
# the regex KILLED.
job_ended_exact() {
    local w status=0 others
    wait "$launcher" || status=$?
    echo "launcher exited with status $status"
    for w in $2; do
        grep -qE "^\[worker $w\] worker $w: $1 clocks, all 1000 keys exact" "$WORK/job.out" ||
            fail "worker $w did not end with every key exact"
    done
    ((status == 0)) || fail "loom run exited with status $status"
    others=$(grep -E "^loom run: .*(exited with status [1-9]|killed by)" "$WORK/job.out" |
        grep -vE "$3")
    [[ -z $others ]] || fail "other processes failed: $others"
}
