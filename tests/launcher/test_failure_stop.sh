#!/usr/bin/env bash
# c) --on-failure stop (the default): worker 1 exits 3; the launcher reports
# it, stops the others (server 0 ignores SIGTERM, so it needs the SIGKILL
# after the 3 s grace), exits 1 soon, and leaves no process behind.
# shellcheck source-path=SCRIPTDIR source=../lib/launcher.sh
source "$(dirname "$0")/../lib/launcher.sh"

run_loom run --servers 2 --workers 3 -- bash "$NODE" fail
expect_rc 1
expect_line "$WORK/out" "[worker 1] worker 1 gives up"
expect_line "$WORK/err" "loom run: worker 1 exited with status 3"
expect_line "$WORK/err" "loom run: server 0 did not stop within 3 s; killing it"
expect_line "$WORK/err" "loom run: failed: worker 1 exited with status 3"
# The processes the launcher stopped are not failures of their own.
[[ $(grep -c "^loom run: failed:" "$WORK/err") == 1 ]] || fail "expected exactly one failure in the summary"
((ELAPSED_MS >= 2900)) || fail "server 0 ignores SIGTERM, but the job ended after ${ELAPSED_MS} ms, before the grace period"
expect_faster_than 15000
expect_no_survivors 6
echo PASS
