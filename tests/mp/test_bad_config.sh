#!/usr/bin/env bash
# Misconfigured jobs end with a clear message and non-zero status, never hang:
# a worker started for another job size is refused; a job missing a worker
# times out naming it; bad variables are named.
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh"
port=$("$PS_CHECK" free-port) || fail "no free port"
export LOOM_SCHEDULER=127.0.0.1:$port LOOM_NUM_SERVERS=1 LOOM_NUM_WORKERS=2 LOOM_CONNECT_TIMEOUT_MS=3000
LOOM_ROLE=scheduler "$PS_CHECK" bsp >"$WORK/sched.out" 2>&1 &
sched=$!
BG_PIDS+=("$sched")
LOOM_ROLE=worker LOOM_RANK=0 LOOM_NUM_WORKERS=3 "$PS_CHECK" bsp >"$WORK/wrong.out" 2>&1 &&
    fail "a worker started for 3 workers joined a 2-worker job"
grep -q "started for 1 servers and 3 workers, but this job has 1 and 2" "$WORK/wrong.out" ||
    fail "the refused worker did not say why"
# Only one of the two workers comes: the scheduler gives up and names the missing one.
LOOM_ROLE=server LOOM_RANK=0 "$PS_CHECK" bsp >"$WORK/server.out" 2>&1 &
BG_PIDS+=($!)
LOOM_ROLE=worker LOOM_RANK=0 "$PS_CHECK" bsp >"$WORK/w0.out" 2>&1 &
BG_PIDS+=($!)
wait "$sched" && fail "the scheduler exited 0 although a worker never came"
grep -q "missing: worker 1" "$WORK/sched.out" || fail "the scheduler did not name the missing worker"
LOOM_ROLE=worker LOOM_RANK=x "$PS_CHECK" bsp >"$WORK/badvar.out" 2>&1 && fail "LOOM_RANK=x accepted"
grep -q 'LOOM_RANK="x" is not a whole number' "$WORK/badvar.out" || fail "bad LOOM_RANK not named"
unset LOOM_SCHEDULER
LOOM_ROLE=worker "$PS_CHECK" bsp >"$WORK/noenv.out" 2>&1 && fail "started without LOOM_SCHEDULER"
grep -q 'LOOM_SCHEDULER must be set' "$WORK/noenv.out" || fail "missing LOOM_SCHEDULER not named"
echo "PASS"
