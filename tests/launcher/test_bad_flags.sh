#!/usr/bin/env bash
# f) Usage errors exit 2 with a message naming the culprit, before anything
# starts; the forms that are valid are accepted.
# shellcheck source-path=SCRIPTDIR source=../lib/launcher.sh
source "$(dirname "$0")/../lib/launcher.sh"

# bad PATTERN ARGS...: `loom run ARGS...` is refused with PATTERN in the message.
bad() {
    local pattern=$1
    shift
    run_loom run "$@"
    [[ $RC == 2 ]] || fail "loom run $*: expected exit status 2, got $RC"
    grep -qF -- "$pattern" "$WORK/err" || fail "loom run $*: message does not name '$pattern'"
    [[ -e $FAKE_DIR/scheduler-0.pid ]] && fail "loom run $*: started a process anyway"
    return 0
}
bad "--workers" --workers 0 bash "$NODE" env
bad "--servers" --servers abc bash "$NODE" env
bad "PROGRAM" --workers 2
bad "PROGRAM" --workers 2 --
bad "--workers needs a value" --workers
bad "--servers" --servers 99999999999999999999 bash "$NODE" env
bad "--servers" --servers 100000 bash "$NODE" env
bad "--workers" --workers " 3" bash "$NODE" env
bad "--servers" --servers=+1 bash "$NODE" env
bad "--timeout" --timeout -1 bash "$NODE" env
bad "--heartbeat-timeout" --heartbeat-timeout 5ms bash "$NODE" env
bad "--heartbeat-timeout" --heartbeat-timeout 0 bash "$NODE" env
bad "--on-failure" --on-failure maybe bash "$NODE" env
bad "--on-server-failure" --on-server-failure maybe bash "$NODE" env
bad "--on-server-failure restart needs replicas" --on-server-failure restart bash "$NODE" env
LOOM_REPLICAS=0 bad "--on-server-failure restart needs replicas" --on-server-failure restart bash "$NODE" env
bad "--bind" --bind "" bash "$NODE" env
bad "--verbose" --verbose=1 bash "$NODE" env
bad "unknown flag '--frobnicate'" --frobnicate bash "$NODE" env

# The subcommand dispatcher.
run_loom frobnicate
expect_rc 2
expect_line "$WORK/err" "loom: unknown subcommand 'frobnicate'"
expect_grep "$WORK/err" "^  run "
run_loom
expect_rc 2
run_loom version
expect_rc 0
expect_grep "$WORK/out" "^loom [0-9]+\.[0-9]+\.[0-9]+$"
run_loom help run
expect_rc 0
expect_grep "$WORK/out" "--on-failure stop\|wait"

# Control: the same flags, valid, in both spellings, with options after PROGRAM left to it.
run_loom run --servers=1 --workers 1 --timeout=30 --heartbeat-timeout 2000 --on-failure=wait \
    --bind 127.0.0.1 -- bash "$NODE" env --workers 0
expect_rc 0
expect_line "$WORK/out" "[worker 0] address_fd=unset args=env --workers 0"
echo PASS
