# shellcheck shell=bash
# tests/lib/common.sh: what every test script shares, sourced (directly or
# through one of the topical files beside it: cli.sh, mp.sh, ft.sh, cluster.sh,
# launcher.sh, netns.sh, security.sh) before anything else:
#   clear_env              unset the caller's LOOM_* variables
#   clear_env_matching RE  unset the caller's variables whose names match RE
#   work_dir NAME          a scratch directory $WORK, loom-NAME.XXXXXX
#   remove_work            remove it (kept, and said so, when KEEP is set)
#   fail MESSAGE           "FAIL: MESSAGE", then what fail_show shows, exit 1
#   show_tails N FILE...   the last N lines of each non-empty FILE, headed
#   skip REASON            "skipped: REASON", exit 77 (CTest's SKIP_RETURN_CODE)
#   now_ms                 milliseconds since the epoch (set_now_ms: into NOW_MS)
#   numeric_check EXPR NAME=VALUE...
#   alive PID, group_alive PGID, live_since PID, kill_gone PID...
#   poll_pause SECONDS     the pause of a polling loop, without a process
# Nothing here starts a process (but mkfifo, once) or sets a trap: the script
# or its topical file does (work_dir's caller decides how the work directory
# goes).

# shellcheck disable=SC2034 # for the scripts that source this file
TESTS_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# clear_env_matching REGEX: unset every exported variable whose name matches
# the extended regular expression REGEX: a test starts from a clean contract,
# nothing inherited from the caller (or an enclosing job) leaks in.
clear_env_matching() {
    local var
    for var in $(compgen -e); do
        [[ $var =~ $1 ]] && unset "$var"
    done
    return 0
}

# clear_env: unset the caller's LOOM_* variables.
clear_env() { clear_env_matching '^LOOM_'; }

# work_dir NAME: sets WORK to a new directory ${TMPDIR:-/tmp}/loom-NAME.XXXXXX.
work_dir() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/loom-$1.XXXXXX")
}

# remove_work: remove $WORK, or with KEEP set keep it and say where it is.
remove_work() {
    if [[ -n ${KEEP:-} ]]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}

# fail MESSAGE: report, show what the test's fail_show (if it defines one)
# shows of its output, on stderr, and exit 1.
fail() {
    echo "FAIL: $*" >&2
    if declare -F fail_show >/dev/null; then fail_show >&2; fi
    exit 1
}

# show_tails N FILE...: each non-empty FILE's last N lines under a line
# "--- FILE (last N lines):".
show_tails() {
    local n=$1 f
    shift
    for f; do
        [[ -s $f ]] || continue
        echo "--- $f (last $n lines):"
        tail -n "$n" "$f"
    done
}

# skip REASON: the test cannot run here: say why and exit 77, which CTest
# counts as skipped (SKIP_RETURN_CODE 77; docs/TESTING.md).
skip() {
    echo "skipped: $*"
    exit 77
}

# now_ms: milliseconds since the epoch (no program run).
now_ms() {
    set_now_ms
    echo "$NOW_MS"
}

# set_now_ms: sets NOW_MS to now_ms's value without the subshell that
# $(now_ms) costs (for polling loops).
set_now_ms() {
    local t=${EPOCHREALTIME//[!0-9]/}
    NOW_MS=$((10#$t / 1000))
}

# numeric_check EXPR NAME=VALUE...: whether the awk expression EXPR holds for
# the named values. Each value must be a number as the programs print them
# (nan and inf are not): a missing or garbled value fails the check, naming it,
# where awk alone would compare an empty string as text and could pass.
#   numeric_check 'acc >= 0.848' acc="$acc" || fail "test accuracy $acc < 0.848"
numeric_check() {
    local expr=$1 arg vars=()
    shift
    for arg in "$@"; do
        if [[ ! ${arg#*=} =~ ^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ ]]; then
            echo "${arg%%=*} is '${arg#*=}', not a number (missing from the output?)" >&2
            return 1
        fi
        vars+=(-v "$arg")
    done
    awk "${vars[@]}" "BEGIN { exit !($expr) }"
}

# ---- processes, read from /proc in bash (no program run per poll) ----

# alive PID: a process that is not a zombie has this pid.
alive() {
    local stat
    [[ $1 =~ ^[0-9]+$ ]] || fail "'$1' is not a pid"
    read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

# group_alive PGID: some process that is not a zombie is in this process group.
group_alive() {
    local f stat fields
    for f in /proc/[0-9]*/stat; do
        read -r stat 2>/dev/null <"$f" || continue
        read -ra fields <<<"${stat##*) }" # state ppid pgrp ...
        [[ ${fields[0]} != Z && ${fields[2]} == "$1" ]] && return 0
    done
    return 1
}

# live_since PID: the start time (clock ticks since boot) of the process PID
# if it is alive and not a zombie; nothing otherwise.
live_since() {
    local stat fields
    read -r stat 2>/dev/null <"/proc/$1/stat" || return 0
    read -ra fields <<<"${stat##*) }" # state ppid pgrp ... (field 22, starttime, is [19])
    [[ ${fields[0]} == Z ]] || echo "${fields[19]}"
}

# poll_pause SECONDS: wait SECONDS (a fraction) between two looks of a polling
# loop, without starting a process. `sleep 0.02` forks and execs sleep(1) 50
# times a second in each loop: in ft.fault_mix, whose loops watch a job for
# minutes, those sleeps and their forks took a third of the test's CPU time,
# which the suite's other tests then waited for. This is `read -t` on a FIFO
# the shell holds open for reading and writing, to which nothing is ever
# written: the read always times out. (A subshell inherits the descriptor.)
poll_pause() {
    if [[ -z ${POLL_FD:-} ]]; then
        local fifo
        fifo=$(mktemp -u "${TMPDIR:-/tmp}/loom-poll.XXXXXX")
        mkfifo -m 600 "$fifo" || fail "poll_pause: cannot make a FIFO at $fifo"
        exec {POLL_FD}<>"$fifo"
        rm -f "$fifo"
    fi
    read -r -t "$1" -u "$POLL_FD" _ || true
}

# kill_gone PID...: SIGKILL each process and wait until every one is gone:
# exited, a zombie, or its pid taken by a later process. SIGKILL is
# delivered asynchronously, and a process inside a sync (a checkpoint's
# fsync) on a loaded disk dies only once that returns: 60 s bound.
kill_gone() {
    local pid deadline
    local -A start=()
    for pid; do start[$pid]=$(live_since "$pid"); done
    kill -KILL "$@" 2>/dev/null
    for pid; do
        [[ -n ${start[$pid]} ]] || continue
        deadline=$((SECONDS + 60))
        while [[ $(live_since "$pid") == "${start[$pid]}" ]]; do
            ((SECONDS < deadline)) ||
                fail "process $pid of the killed job survived SIGKILL for 60 s ($(cat "/proc/$pid/stat" 2>/dev/null), in $(cat "/proc/$pid/wchan" 2>/dev/null))"
            poll_pause 0.01
        done
    done
}
