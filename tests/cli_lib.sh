# shellcheck shell=bash
# The helpers of the tests that run `loom` commands as a user does, each in its
# own work directory ($WORK, the current directory): run a command with its
# output in ./out and ./err, expect an exit status and a message, fail showing
# both. Sourced after the script has set up $LOOM and changed into $WORK.

# fail MESSAGE: report, show the start of ./out and ./err, exit 1.
fail() {
    echo "FAIL: $*" >&2
    for f in out err; do
        [[ -s $f ]] && { echo "--- $f:" >&2; head -n 20 "$f" | head -c 2000 >&2; }
    done
    exit 1
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
