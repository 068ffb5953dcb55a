# shellcheck shell=bash disable=SC2034 # NODE, ELAPSED_MS, ...: used by the tests
# tests/lib/launcher.sh: shared by the launcher tests (tests/launcher; builds
# on common.sh); sourced with the path of the `loom` binary as $1.
#
# Every test gets a scratch directory ($WORK) and a pid directory ($FAKE_DIR)
# where fake_node.sh records each process it plays. On exit, whatever way the
# test ends, everything recorded there and any launcher still running is
# SIGKILLed and the scratch directory removed.
set -u
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

LOOM=${1:?usage: $0 PATH_TO_LOOM_BINARY}
NODE="$TESTS_LIB/../launcher/fake_node.sh"
work_dir launcher
# loom run's throw-away secret goes here too: the test that SIGKILLs the launcher
# leaves it behind (docs/SECURITY.md), and the cleanup removes it with $WORK.
export TMPDIR=$WORK
export FAKE_DIR="$WORK/pids"
mkdir "$FAKE_DIR"
LAUNCHER_PID=""

# Start from a clean contract: nothing LOOM_* leaks in from the caller.
clear_env

cleanup() {
    local f pid
    [[ -n $LAUNCHER_PID ]] && kill -KILL "$LAUNCHER_PID" 2>/dev/null
    for f in "$FAKE_DIR"/*.pid "$FAKE_DIR"/*.sleep; do
        [[ -e $f ]] || continue
        pid=$(<"$f")
        kill -KILL -- "-$pid" "$pid" 2>/dev/null
    done
    remove_work
}
trap cleanup EXIT

# fail_show: what fail (common.sh) shows: the end of the launcher's output.
fail_show() {
    local f
    for f in out err; do
        [[ -s $WORK/$f ]] || continue
        echo "--- launcher $f (last 40 lines):"
        tail -n 40 "$WORK/$f"
    done
    return 0
}

# elapsed_since START_MS: sets ELAPSED_MS, for expect_faster_than.
elapsed_since() {
    ELAPSED_MS=$(($(now_ms) - $1))
}

# exec_loom COMMAND...: exec COMMAND without this shell's stray fds (CTest's,
# the terminal's): the env test checks that children see no fd they should not.
exec_loom() {
    local p fd
    for p in "/proc/$BASHPID/fd"/*; do
        fd=${p##*/}
        ((fd > 2 && fd != 255)) && eval "exec $fd>&-" 2>/dev/null
    done
    exec "$@"
}

# run_loom ARGS...: run the launcher to completion with stdout in $WORK/out and
# stderr in $WORK/err; sets RC and ELAPSED_MS. A launcher that hangs is
# SIGKILLed after 45 s (RC 137), so a broken launcher fails the test instead
# of hanging it; its children then die with it (PR_SET_PDEATHSIG) or in cleanup.
run_loom() {
    local start
    start=$(now_ms)
    (exec_loom timeout -s KILL 45 "$LOOM" "$@") >"$WORK/out" 2>"$WORK/err"
    RC=$?
    elapsed_since "$start"
}

# start_loom ARGS...: start the launcher in the background, output as for
# run_loom; sets LAUNCHER_PID.
start_loom() {
    (exec_loom "$LOOM" "$@") >"$WORK/out" 2>"$WORK/err" &
    LAUNCHER_PID=$!
}

# start_loom_in_own_group ARGS...: as start_loom, with the launcher leading a
# process group of its own, as a shell with job control does: then a signal
# to that group is what Ctrl-C in a terminal does.
start_loom_in_own_group() {
    (exec_loom setsid "$LOOM" "$@") >"$WORK/out" 2>"$WORK/err" &
    LAUNCHER_PID=$!
}

# wait_loom: wait at most 20 s for the background launcher to end; sets RC.
wait_loom() {
    local i
    for ((i = 0; i < 400; i++)); do
        kill -0 "$LAUNCHER_PID" 2>/dev/null || break
        poll_pause 0.05
    done
    kill -0 "$LAUNCHER_PID" 2>/dev/null && fail "the launcher did not end"
    wait "$LAUNCHER_PID"
    RC=$?
    LAUNCHER_PID=""
}

# wait_for_pid_files N: bounded wait until N processes have recorded themselves.
wait_for_pid_files() {
    local i files
    for ((i = 0; i < 200; i++)); do
        files=("$FAKE_DIR"/*.pid)
        [[ -e ${files[0]} ]] && ((${#files[@]} >= $1)) && return 0
        poll_pause 0.05
    done
    fail "only ${#files[@]} of $1 processes started"
}

# wait_for_line FILE LINE: bounded wait (10 s) until FILE ($WORK/out or err)
# has exactly this line: the launcher has got that far.
wait_for_line() {
    local i
    for ((i = 0; i < 200; i++)); do
        grep -qxF -- "$2" "$1" && return 0
        poll_pause 0.05
    done
    fail "no line '$2' in $(basename "$1") within 10 s"
}

# clean_pid_dir: forget the previous run's processes (all checked already).
clean_pid_dir() {
    rm -f "$FAKE_DIR"/*
}

# expect_no_survivors N: exactly N processes recorded themselves, and neither
# they, nor their helpers (*.sleep), nor anything in their process groups is
# still running. A killed process takes a moment to go, hence the short
# bounded retry.
expect_no_survivors() {
    local files=("$FAKE_DIR"/*.pid) f pid i left
    [[ -e ${files[0]} ]] || files=()
    ((${#files[@]} == $1)) || fail "expected $1 pid files, found ${#files[@]}"
    for ((i = 0; i < 20; i++)); do
        left=""
        for f in "${files[@]}"; do
            pid=$(<"$f")
            if alive "$pid" || group_alive "$pid"; then left+=" $(basename "$f" .pid)($pid)"; fi
        done
        for f in "$FAKE_DIR"/*.sleep; do
            [[ -e $f ]] || continue
            pid=$(<"$f")
            if alive "$pid"; then left+=" helper of $(basename "$f" .sleep)($pid)"; fi
        done
        [[ -z $left ]] && return 0
        poll_pause 0.1
    done
    fail "processes survived the launcher:$left"
}

expect_rc() {
    [[ $RC == "$1" ]] || fail "expected exit status $1, got $RC"
}

# expect_line FILE LINE: FILE ($WORK/out or err) has exactly this line.
expect_line() {
    grep -qxF -- "$2" "$1" || fail "no line '$2' in $(basename "$1")"
}

expect_grep() {
    grep -qE -- "$2" "$1" || fail "nothing matching '$2' in $(basename "$1")"
}

expect_faster_than() {
    ((ELAPSED_MS < $1)) || fail "took ${ELAPSED_MS} ms, expected less than $1 ms"
}
