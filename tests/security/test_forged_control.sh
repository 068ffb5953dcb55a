#!/usr/bin/env bash
# Forged control messages (issue 9, found 2): a process that is not a node
# connects to a server's and a worker's ROUTER as "the scheduler" and sends
# NODE_FAILED and SHUTDOWN, and sends the scheduler DONE as each worker. Before
# node identity, one NODE_FAILED killed the job blaming a healthy node, SHUTDOWN
# stopped a server and the DONEs ended the job. Now each is dropped, counted and
# logged; the job finishes with exact results.
# shellcheck source-path=SCRIPTDIR source=../lib/security.sh
source "$(dirname "$0")/../lib/security.sh"
start_held_job
# Worker node ids are 1 + servers + rank: 2 and 3.
for who in server-0 worker-0; do
    "$ATTACKER" control "$(<"$PIDS/$who.addr")" >"$WORK/attack-$who.log" 2>&1 ||
        fail "the attack on $who did not go out: $(cat "$WORK/attack-$who.log")"
done
"$ATTACKER" done "$(<"$PIDS/scheduler-0.addr")" 2 3 >"$WORK/attack-scheduler.log" 2>&1 ||
    fail "the attack on the scheduler did not go out"
# Every forged message is dropped with a line of its own (the first five are
# logged): 4 at each of the server and the worker, 3 at the scheduler.
stranger='from a connection that is no node of this job'
for who in "server 0" "worker 0"; do
    wait_for_lines "$WORK/job.out" "^\[$who\] .*dropped a malformed message: NODE_FAILED $stranger" 2 20
    wait_for_lines "$WORK/job.out" "^\[$who\] .*dropped a malformed message: SHUTDOWN $stranger" 2 20
done
wait_for_lines "$WORK/job.out" "^\[scheduler\] .*dropped a malformed message: DONE $stranger" 3 20
finish_job
# Nothing was acted on, and the totals count exactly the forged messages.
grep -q 'died' "$WORK/job.out" && fail "a node was declared dead"
for who in "server 0:4" "worker 0:4" "scheduler:3"; do
    grep -q "^\[${who%:*}\] .*dropped ${who#*:} malformed message(s) in all" "$WORK/job.out" ||
        fail "${who%:*} did not count exactly ${who#*:} dropped messages"
done
echo "PASS"
