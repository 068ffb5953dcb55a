# shellcheck shell=bash
# tests/lib/cli.sh: the helpers of the tests that run `loom` commands as a user
# does, each in its own work directory ($WORK, the current directory): run a
# command with its output in ./out and ./err, expect an exit status and a
# message, fail showing both. Sourced after the script has set up $LOOM;
# work_setup gives it $WORK. Builds on common.sh (fail, now_ms, ...).
# At the end, the helpers of the tests that kill a worker of a running job
# (kill_job_start, kill_worker1_and_check).
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# work_setup NAME: no LOOM_* variables of the caller's, a work directory $WORK
# (loom-NAME.XXXXXX), and, whatever way the test ends, its removal, after the
# job the test started in the background as $launcher (if any: empty when
# none runs) and that job's children are killed.
work_setup() {
    clear_env
    work_dir "$1"
    launcher=
    trap work_cleanup EXIT
}

work_cleanup() {
    if [[ -n $launcher ]]; then
        pkill -KILL -P "$launcher" 2>/dev/null
        kill -KILL "$launcher" 2>/dev/null
    fi
    wait 2>/dev/null
    remove_work
}

# fail_show: what fail (common.sh) shows: the start of ./out and ./err.
fail_show() {
    local f
    for f in out err; do
        [[ -s $f ]] && { echo "--- $f:"; head -n 20 "$f" | head -c 2000; }
    done
    return 0
}

# run ARGS...: `loom ARGS...` with stdout in ./out, stderr in ./err; sets RC.
run() {
    "$LOOM" "$@" >out 2>err
    RC=$?
}

# expect STATUS PATTERN ARGS...: `loom ARGS...` exits STATUS and says PATTERN on stderr.
expect() {
    local status=$1 pattern=$2
    shift 2
    run "$@"
    [[ $RC == "$status" ]] || fail "loom $*: expected exit status $status, got $RC"
    grep -qF -- "$pattern" err || fail "loom $*: message does not say '$pattern'"
}

# role_pid ROLE RANK: the pid of the ROLE RANK process of the job $launcher
# (`loom train` or `loom run`) started; nothing (status 1) if there is none now.
role_pid() {
    local c
    for c in $(pgrep -P "$launcher"); do
        if tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "LOOM_ROLE=$1" &&
            tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "LOOM_RANK=$2"; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

# kill_server RANK: SIGKILL server RANK of the job $launcher started.
kill_server() {
    local pid
    pid=$(role_pid server "$1") || fail "server $1 of the job not found"
    kill -KILL "$pid"
}

# last_value FILE KEY: KEY's value in the last line of a metrics file (JSON lines).
last_value() { tail -1 "$1" | sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p"; }

# ---- a job one of whose workers is killed (tests/sched/test_sched_kill.sh,
# tests/svm/test_svm_kill.sh): every survivor must notice by heartbeat, say which
# worker died and exit with status 3 within KILL_BOUND_MS, leaving no process behind
# (the launcher is told not to stop them, as in tests/mp/test_kill.sh). ----

# Heartbeat timeout, one interval, the linger of a failing process, slack for a loaded
# machine (the reasoning of tests/mp/test_kill.sh).
KILL_TIMEOUT_MS=3000 KILL_INTERVAL_MS=500 KILL_LINGER_MS=1000 KILL_SLACK_MS=1500
KILL_BOUND_MS=$((KILL_TIMEOUT_MS + KILL_INTERVAL_MS + KILL_LINGER_MS + KILL_SLACK_MS))


# job_fail MESSAGE: report, show the end of the job's output, exit 1.
job_fail() {
    echo "FAIL: $*" >&2
    tail -n 30 "$WORK/job.out" >&2
    exit 1
}

# kill_job_start SERVERS READY WHAT ARGS...: `loom run` SERVERS servers and 3 workers
# of `loom ARGS...` in the background (launcher), and wait (60 s at most) for the
# line READY (a regular expression) in its output: its first WHAT ("epoch") is done.
kill_job_start() {
    local servers=$1 ready=$2 what=$3
    shift 3
    LOOM_HEARTBEAT_MS=$KILL_INTERVAL_MS "$LOOM" run --servers "$servers" --workers 3 \
        --on-failure wait --heartbeat-timeout $KILL_TIMEOUT_MS --timeout 120 -- "$LOOM" "$@" \
        >"$WORK/job.out" 2>&1 &
    launcher=$!
    local deadline=$(($(now_ms) + 60000))
    until grep -q "$ready" "$WORK/job.out"; do
        kill -0 "$launcher" 2>/dev/null || job_fail "the job ended before its first $what"
        (($(now_ms) < deadline)) || job_fail "no $what within 60 s"
        poll_pause 0.05
    done
}

# kill_worker1_and_check WHO...: kill -9 worker 1, then check that the job failed
# within KILL_BOUND_MS, that each of WHO ("scheduler", "worker 0", ...) reported worker
# 1's death and exited with status 3, and that no other process of the job outlived it.
kill_worker1_and_check() {
    local victim='' survivors=() pid who
    for pid in $(pgrep -P "$launcher"); do
        if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "LOOM_RANK=1" &&
            tr '\0' '\n' <"/proc/$pid/environ" | grep -qx "LOOM_ROLE=worker"; then
            victim=$pid
        else
            survivors+=("$pid")
        fi
    done
    [[ -n $victim ]] || job_fail "cannot find worker 1's process"
    local start status elapsed
    start=$(now_ms)
    kill -KILL "$victim"
    wait "$launcher"
    status=$?
    launcher=
    elapsed=$(($(now_ms) - start))
    echo "job ended with status $status ${elapsed} ms after the kill"
    ((status != 0)) || job_fail "the job exited 0 although worker 1 was killed"
    ((elapsed <= KILL_BOUND_MS)) || job_fail "took ${elapsed} ms, bound is $KILL_BOUND_MS ms"
    for who in "$@"; do
        grep -q "^\[$who\] .*worker 1 (node [0-9]*) died" "$WORK/job.out" ||
            job_fail "$who did not report worker 1's death"
        grep -q "$who exited with status 3" "$WORK/job.out" ||
            job_fail "$who did not exit with status 3"
    done
    for pid in "${survivors[@]}"; do
        kill -0 "$pid" 2>/dev/null && job_fail "process $pid outlived the launcher"
    done
    return 0
}
