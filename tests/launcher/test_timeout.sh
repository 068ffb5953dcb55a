#!/usr/bin/env bash
# e) --timeout: a job that never ends is stopped after the given time, exit 124.
# shellcheck source-path=SCRIPTDIR source=../lib/launcher.sh
source "$(dirname "$0")/../lib/launcher.sh"

run_loom run --timeout 3 --servers 1 --workers 2 -- bash "$NODE" hang
expect_rc 124
expect_line "$WORK/err" "loom run: job exceeded --timeout 3 s; stopping it"
((ELAPSED_MS >= 2900)) || fail "stopped after ${ELAPSED_MS} ms, before the timeout"
expect_faster_than 9000
expect_no_survivors 4
echo PASS
