#!/usr/bin/env bash
# A worker frozen before the job is assembled is the culprit, not the
# processes that gave up waiting for it: real Loom nodes (`loom train lr`,
# a tiny generated data set) under `loom run --servers 1 --workers 2`, with
# a 3 s assembly timeout (LOOM_CONNECT_TIMEOUT_MS); worker 1 stops itself
# (SIGSTOP) before it execs, so it never registers. The scheduler must say
# once that the job did not assemble, naming worker 1, and the one "failed:"
# line must name worker 1 (before the fix: "failed: server 0 exited with
# status 1"); the launcher kills the frozen worker after its grace, so no
# process survives.
# shellcheck source-path=SCRIPTDIR source=../lib/launcher.sh
source "$(dirname "$0")/../lib/launcher.sh"

"$LOOM" gen lr --out "$WORK/data" --rows 2000 --features 100 --nnz 8 --quiet ||
    fail "gen lr failed"
cat >"$WORK/node.sh" <<'NODE'
me="$LOOM_ROLE-$LOOM_RANK"
echo $$ >"$FAKE_DIR/$me.tmp" && mv "$FAKE_DIR/$me.tmp" "$FAKE_DIR/$me.pid"
# Frozen before it could register: only SIGKILL (or SIGCONT) ends it.
[[ $me == worker-1 ]] && kill -STOP $$
exec "$1" train lr --train "$2" --epochs 1000
NODE

LOOM_CONNECT_TIMEOUT_MS=3000 run_loom run --servers 1 --workers 2 --insecure --no-status -- \
    bash "$WORK/node.sh" "$LOOM" "$WORK/data"
expect_rc 1
expect_grep "$WORK/err" "^\[scheduler\] .*the job did not assemble: only 2 of 3 nodes registered within 3000 ms; missing: worker 1 \(node [0-9]+\)$"
expect_line "$WORK/err" "loom run: failed: worker 1 never registered with the scheduler, which gave up assembling the job (LOOM_CONNECT_TIMEOUT_MS)"
[[ $(grep -c "^loom run: failed:" "$WORK/err") == 1 ]] || fail "expected exactly one culprit in the summary"
grep -q "^\[scheduler\] .*refused a node" "$WORK/err" &&
    fail "the scheduler reported the nodes that came as refused"
expect_no_survivors 4
echo PASS
