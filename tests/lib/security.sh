# shellcheck shell=bash
# tests/lib/security.sh: shared by the security tests; sourced with the paths
# of `loom`, ps_check and the attacker as $1, $2 and $3. Builds on mp.sh, the
# multi-process tests' harness (scratch directory $WORK, pid files in $PIDS,
# every process killed at exit).
# shellcheck source=mp.sh
source "$(dirname "${BASH_SOURCE[0]}")/mp.sh"
# shellcheck disable=SC2034 # for the tests that source this
ATTACKER=${3:?usage: $0 LOOM PS_CHECK ATTACKER}

# A job of 1 server and 2 workers under `loom run` running `ps_check bsp`, held
# after assembly until the test creates $WORK/go; its output in $WORK/job.out.
# Without a job secret (--insecure): these defences must hold without CURVE,
# and the attacker speaks plain ZMTP.
# shellcheck disable=SC2120 # the tests' own arguments to loom run, if any
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
