#!/usr/bin/env bash
# i) The summary names the node that failed, not the first process to exit:
# worker 1 stops answering; its peers say it died and exit 3, and the
# launcher, on the first of those exits, stops worker 1 with the rest. The one "failed:"
# line names worker 1; the peers' exits follow as consequences.
# shellcheck source-path=SCRIPTDIR source=../lib/launcher.sh
source "$(dirname "$0")/../lib/launcher.sh"

run_loom run --servers 1 --workers 2 -- bash "$NODE" frozen
expect_rc 1
expect_line "$WORK/err" "loom run: failed: worker 1 stopped responding: its peers declared it dead"
[[ $(grep -c "^loom run: failed:" "$WORK/err") == 1 ]] || fail "expected exactly one culprit in the summary"
expect_grep "$WORK/err" "^loom run: also failed: (scheduler|server 0|worker 0) exited with status 3 \(a peer failed\)$"
expect_faster_than 15000
expect_no_survivors 4
echo PASS
