#!/usr/bin/env bash
# --on-failure wait: worker 1 crashes (exits 7); the launcher reports it but
# lets the others notice on their own (they exit 3, as Loom's heartbeat makes
# them do) instead of killing them. The summary names worker 1 as the failure
# and lists the others after it, as consequences.
# shellcheck source-path=SCRIPTDIR source=../lib/launcher.sh
source "$(dirname "$0")/../lib/launcher.sh"

run_loom run --on-failure wait --servers 1 --workers 3 -- bash "$NODE" peer
expect_rc 1
expect_line "$WORK/err" "loom run: worker 1 exited with status 7"
for who in scheduler "server 0" "worker 0" "worker 2"; do
    expect_line "$WORK/out" "[$who] ${who/ /-}$([[ $who == scheduler ]] && echo -0): worker 1 is gone"
    expect_line "$WORK/err" "loom run: also failed: $who exited with status 3 (a peer failed)"
done
[[ $(grep "^loom run: failed:" "$WORK/err") == "loom run: failed: worker 1 exited with status 7" ]] ||
    fail "the summary does not name worker 1, and it alone, as the failure"
[[ $(grep -c "^loom run: also failed:" "$WORK/err") == 4 ]] || fail "expected 4 other failures in the summary"
grep -q "killed by signal" "$WORK/err" && fail "the launcher killed processes in --on-failure wait mode"
expect_faster_than 15000
expect_no_survivors 5
echo PASS
