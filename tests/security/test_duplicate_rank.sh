#!/usr/bin/env bash
# A duplicate of a live rank (issue 9, found 3): a second process started with
# a running node's exact environment (read from /proc, job token included)
# must be refused with "already running" and exit non-zero, while the node it
# copies and the job go on unharmed. Before node identity it took over the
# node's connection at the scheduler (same routing id, ROUTER handover) and
# the real node was declared dead. Tried for a worker and for a server.
# shellcheck source-path=SCRIPTDIR source=../lib/security.sh
source "$(dirname "$0")/../lib/security.sh"
start_held_job
for who in worker-0 server-0; do
    mapfile -d '' environment <"/proc/$(<"$PIDS/$who.pid")/environ" ||
        fail "cannot read the environment of $who"
    status=0
    env -i "${environment[@]}" "$PS_CHECK" bsp >"$WORK/dup-$who.log" 2>&1 || status=$?
    ((status != 0)) || fail "the duplicate of $who exited 0"
    grep -q "refused this node: ${who%-*} ${who#*-} is already running" "$WORK/dup-$who.log" ||
        fail "the duplicate of $who did not say why: $(cat "$WORK/dup-$who.log")"
    grep -q "did not answer" "$WORK/dup-$who.log" && fail "the duplicate of $who blamed the scheduler"
done
grep -q "^\[scheduler\] .*refused a node: worker 0 is already running" "$WORK/job.out" ||
    fail "the scheduler did not log the refusal"
finish_job
grep -q 'died' "$WORK/job.out" && fail "a node was declared dead"
echo "PASS"
