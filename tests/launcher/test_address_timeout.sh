#!/usr/bin/env bash
# A scheduler that neither publishes nor closes LOOM_ADDRESS_FD is stopped
# after 30 s. (This test takes that long.)
# shellcheck source-path=SCRIPTDIR source=../lib/launcher.sh
source "$(dirname "$0")/../lib/launcher.sh"

run_loom run --servers 1 --workers 1 -- bash "$NODE" silent
expect_rc 1
expect_line "$WORK/err" "loom run: scheduler did not publish its address within 30 s; stopping it"
((ELAPSED_MS >= 29500)) || fail "gave up after ${ELAPSED_MS} ms"
expect_faster_than 40000
expect_no_survivors 1
echo PASS
