#!/usr/bin/env bash
# Start order does not matter: servers and workers started before the
# scheduler wait for it. Started by hand with the documented variables, as
# any other launcher would.
source "$(dirname "$0")/lib.sh"
port=$("$PS_CHECK" free-port) || fail "no free port"
export LOOM_SCHEDULER=127.0.0.1:$port LOOM_NUM_SERVERS=1 LOOM_NUM_WORKERS=2
pids=()
LOOM_ROLE=worker LOOM_RANK=1 "$PS_CHECK" bsp >"$WORK/w1.out" 2>&1 & pids+=($!)
LOOM_ROLE=server LOOM_RANK=0 "$PS_CHECK" bsp >"$WORK/s0.out" 2>&1 & pids+=($!)
LOOM_ROLE=worker LOOM_RANK=0 "$PS_CHECK" bsp >"$WORK/w0.out" 2>&1 & pids+=($!)
BG_PIDS+=("${pids[@]}")
# Let them try to reach a scheduler that is not there yet: each process is
# running (not exited) before the scheduler starts.
for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null || fail "a process exited before the scheduler started"; done
LOOM_ROLE=scheduler "$PS_CHECK" bsp >"$WORK/sched.out" 2>&1 & pids+=($!)
BG_PIDS+=("${pids[@]}")
for p in "${pids[@]}"; do wait "$p" || fail "a process exited non-zero"; done
grep -q 'every pull exact' "$WORK/w0.out" || fail "worker 0 did not finish its checks"
echo "PASS"
