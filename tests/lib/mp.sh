# shellcheck shell=bash
# tests/lib/mp.sh: shared by the multi-process tests (tests/mp, and the ft and
# security tests of ps_check or failover_check jobs); sourced with the paths of
# the `loom` binary and of ps_check (or the test's checker) as $1 and $2. Gives
# each test a scratch directory ($WORK) and, whatever way the test ends, kills
# every process whose pid file is in $WORK/pids and any process in BG_PIDS.
# Builds on common.sh.
set -u
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# shellcheck disable=SC2034 # LOOM and PS_CHECK are for the tests that source this
LOOM=${1:?usage: $0 LOOM_BINARY PS_CHECK_BINARY}
# shellcheck disable=SC2034
PS_CHECK=${2:?usage: $0 LOOM_BINARY PS_CHECK_BINARY}
work_dir mp
PIDS="$WORK/pids"
mkdir "$PIDS"
BG_PIDS=()

clear_env

cleanup() {
    local f pid
    for pid in "${BG_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
    for f in "$PIDS"/*.pid; do
        [[ -e $f ]] || continue
        pid=$(<"$f")
        kill -KILL "$pid" 2>/dev/null
    done
    wait 2>/dev/null
    remove_work
}
trap cleanup EXIT

# fail_show: what fail (common.sh) shows: the end of every process's output.
fail_show() { show_tails 40 "$WORK"/*.out; }

# wait_for_files N SECONDS: until $PIDS holds N pid files (the processes are up).
wait_for_files() {
    local want=$1 deadline=$(($(now_ms) + $2 * 1000)) n
    while :; do
        n=$(find "$PIDS" -name '*.pid' | wc -l)
        ((n >= want)) && return 0
        (($(now_ms) > deadline)) && fail "only $n of $want processes came up within $2 s"
        poll_pause 0.05
    done
}

# wait_for_lines FILE PATTERN COUNT SECONDS [PID [FROM]]: until FILE has COUNT
# lines matching the extended regex PATTERN (a process logged what the test
# waits for), counting from its line FROM (1: all), failing after SECONDS, or
# at once if process PID exits first.
wait_for_lines() {
    local file=$1 pattern=$2 want=$3 deadline=$(($(now_ms) + $4 * 1000)) pid=${5:-} n
    local from=${6:-1}
    while :; do
        if ((from == 1)); then # one process a look, not three: tests poll for minutes
            n=$(grep -cE -- "$pattern" "$file" 2>/dev/null)
        else
            n=$(tail -n +"$from" "$file" 2>/dev/null | grep -cE -- "$pattern")
        fi
        ((${n:-0} >= want)) && return 0
        [[ -z $pid ]] || kill -0 "$pid" 2>/dev/null ||
            fail "process $pid exited with ${n:-0} of $want lines matching '$pattern' in $file"
        set_now_ms
        ((NOW_MS > deadline)) && fail "$file: ${n:-0} of $want lines matching '$pattern' within $4 s"
        poll_pause 0.05
    done
}
