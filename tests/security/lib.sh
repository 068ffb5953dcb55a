# shellcheck shell=bash
# Shared by the security tests; sourced with the paths of `loom`, ps_check and
# the attacker as $1, $2 and $3. Builds on the multi-process tests' harness
# (scratch directory $WORK, pid files in $PIDS, every process killed at exit).
source "$(dirname "${BASH_SOURCE[0]}")/../mp/lib.sh"
ATTACKER=${3:?usage: $0 LOOM PS_CHECK ATTACKER}

# wait_for_lines FILE PATTERN COUNT SECONDS: until FILE has COUNT lines matching
# the extended regex PATTERN (a node logged what the test waits for).
wait_for_lines() {
    local file=$1 pattern=$2 want=$3 deadline=$(($(now_ms) + $4 * 1000)) n
    while :; do
        n=$(grep -cE -- "$pattern" "$file" 2>/dev/null)
        ((${n:-0} >= want)) && return 0
        (($(now_ms) > deadline)) && fail "$file: ${n:-0} of $want lines matching '$pattern' within $4 s"
        sleep 0.05
    done
}

# A job of 1 server and 2 workers under `loom run` running `ps_check bsp`, held
# after assembly until the test creates $WORK/go; its output in $WORK/job.out.
# Without a job secret (--insecure): these defences must hold without CURVE,
# and the attacker speaks plain ZMTP.
start_held_job() {
    "$LOOM" run --insecure --servers 1 --workers 2 --timeout 100 "$@" \
        -- "$PS_CHECK" bsp --clocks 5 --pid-dir "$PIDS" --hold "$WORK/go" >"$WORK/job.out" 2>&1 &
    JOB=$!
    BG_PIDS+=("$JOB")
    wait_for_files 4 30
}

# Release the held job and check it ended well: exit 0, both workers exact.
finish_job() {
    touch "$WORK/go"
    wait "$JOB" || fail "the job exited with status $? after the attack"
    local n
    n=$(grep -c 'every pull exact' "$WORK/job.out")
    ((n == 2)) || fail "$n of 2 workers finished their exact checks"
}
