#!/usr/bin/env bash
# h) A scheduler that never publishes its address: if it exits, the launcher
# says so with its status; if it closes the pipe and stays, or publishes
# nonsense, the launcher stops it. Either way at once, and no server or
# worker is started.
# shellcheck source-path=SCRIPTDIR source=../lib/launcher.sh
source "$(dirname "$0")/../lib/launcher.sh"

run_loom run --servers 2 --workers 2 -- bash "$NODE" noaddr
expect_rc 1
expect_line "$WORK/err" "loom run: scheduler exited with status 5"
expect_line "$WORK/err" "loom run: scheduler exited before publishing its address"
expect_faster_than 5000
expect_no_survivors 1

clean_pid_dir
run_loom run --servers 2 --workers 2 -- bash "$NODE" closeaddr
expect_rc 1
expect_line "$WORK/err" "loom run: scheduler closed LOOM_ADDRESS_FD without publishing its address; stopping it"
expect_faster_than 5000
expect_no_survivors 1

clean_pid_dir
run_loom run --servers 2 --workers 2 -- bash "$NODE" badaddr
expect_rc 1
expect_line "$WORK/err" "loom run: scheduler published an invalid address 'no port here' (expected host:port)"
expect_faster_than 5000
expect_no_survivors 1
echo PASS
