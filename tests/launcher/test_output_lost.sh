#!/usr/bin/env bash
# k) A job whose output cannot be written does not exit 0: with stdout on a
# full disk (/dev/full), every process succeeds, yet loom run exits 1 and says
# why, since the job's results were lost. A reader that goes away (EPIPE, as in
# `loom run ... | head -1`) is not a failure: the job runs to its end.
# shellcheck source-path=SCRIPTDIR source=../lib/launcher.sh
source "$(dirname "$0")/../lib/launcher.sh"

(exec_loom timeout -s KILL 45 "$LOOM" run --workers 1 -- bash "$NODE" env) >/dev/full 2>"$WORK/err"
RC=$?
expect_rc 1
expect_line "$WORK/err" "loom run: failed: cannot write the job's output: No space left on device"
expect_no_survivors 3

# The same job with a reader that has gone: a closed pipe. The job ends well.
clean_pid_dir
set -o pipefail
(exec_loom timeout -s KILL 45 "$LOOM" run --workers 1 -- bash "$NODE" env) 2>"$WORK/err" | true
statuses=("${PIPESTATUS[@]}")
RC=${statuses[0]}
expect_rc 0
grep -q "cannot write" "$WORK/err" && fail "a closed pipe was reported as lost output"
expect_no_survivors 3
echo PASS
