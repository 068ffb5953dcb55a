#!/usr/bin/env bash
# g) A PROGRAM that cannot be executed: the child says so and exits 127, which
# ends the job with a failure at once.
# shellcheck source-path=SCRIPTDIR source=../lib/launcher.sh
source "$(dirname "$0")/../lib/launcher.sh"

run_loom run -- /nonexistent/loom-test-program
[[ $RC != 0 ]] || fail "expected a failure"
expect_line "$WORK/err" "[scheduler] loom run: cannot execute /nonexistent/loom-test-program: No such file or directory"
expect_line "$WORK/err" "loom run: scheduler exited with status 127"
expect_faster_than 5000

touch "$WORK/not-executable"
chmod 644 "$WORK/not-executable"
run_loom run -- "$WORK/not-executable"
[[ $RC != 0 ]] || fail "expected a failure"
expect_line "$WORK/err" "[scheduler] loom run: cannot execute $WORK/not-executable: Permission denied"
expect_faster_than 5000
echo PASS
