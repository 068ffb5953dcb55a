# shellcheck shell=bash
# Shared by the multi-process tests; sourced with the paths of the `loom`
# binary and of ps_check as $1 and $2. Gives each test a scratch directory
# ($WORK) and, whatever way the test ends, kills every process whose pid file
# is in $WORK/pids (and its process group) and any launcher still running.
set -u

LOOM=${1:?usage: $0 LOOM_BINARY PS_CHECK_BINARY}
PS_CHECK=${2:?usage: $0 LOOM_BINARY PS_CHECK_BINARY}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/loom-mp.XXXXXX")
PIDS="$WORK/pids"
mkdir "$PIDS"
BG_PIDS=()

for var in $(compgen -e); do
    [[ $var == LOOM_* ]] && unset "$var"
done

cleanup() {
    local f pid
    for pid in "${BG_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
    for f in "$PIDS"/*.pid; do
        [[ -e $f ]] || continue
        pid=$(<"$f")
        kill -KILL "$pid" 2>/dev/null
    done
    wait 2>/dev/null
    [[ -n ${KEEP:-} ]] && echo "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
    echo "FAIL: $*" >&2
    for f in "$WORK"/*.out; do
        [[ -s $f ]] || continue
        echo "--- $f (last 40 lines):" >&2
        tail -n 40 "$f" >&2
    done
    exit 1
}

now_ms() {
    echo $(($(date +%s%N) / 1000000))
}

# wait_for_files N SECONDS: until $PIDS holds N pid files (the processes are up).
wait_for_files() {
    local want=$1 deadline=$(($(now_ms) + $2 * 1000)) n
    while :; do
        n=$(find "$PIDS" -name '*.pid' | wc -l)
        ((n >= want)) && return 0
        (($(now_ms) > deadline)) && fail "only $n of $want processes came up within $2 s"
        sleep 0.05
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
        n=$(tail -n +"$from" "$file" 2>/dev/null | grep -cE -- "$pattern")
        ((${n:-0} >= want)) && return 0
        [[ -z $pid ]] || kill -0 "$pid" 2>/dev/null ||
            fail "process $pid exited with ${n:-0} of $want lines matching '$pattern' in $file"
        (($(now_ms) > deadline)) && fail "$file: ${n:-0} of $want lines matching '$pattern' within $4 s"
        sleep 0.05
    done
}
