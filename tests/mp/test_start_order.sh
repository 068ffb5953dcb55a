#!/usr/bin/env bash
# Start order does not matter: servers and workers started before the
# scheduler wait for it. Started by hand with the documented variables, as
# any other launcher would. The scheduler starts only once every other
# process has said (LOOM_VERBOSE=1) that it asked the scheduler to join and is
# waiting: a node that gave up on a missing scheduler, or whose request was
# lost because nobody listened yet, fails the job (within the connect timeout).
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh"
port=$("$PS_CHECK" free-port) || fail "no free port"
export LOOM_SCHEDULER=127.0.0.1:$port LOOM_NUM_SERVERS=1 LOOM_NUM_WORKERS=2
export LOOM_VERBOSE=1 LOOM_CONNECT_TIMEOUT_MS=20000
pids=()
LOOM_ROLE=worker LOOM_RANK=1 "$PS_CHECK" bsp >"$WORK/w1.out" 2>&1 & pids+=($!)
LOOM_ROLE=server LOOM_RANK=0 "$PS_CHECK" bsp >"$WORK/s0.out" 2>&1 & pids+=($!)
LOOM_ROLE=worker LOOM_RANK=0 "$PS_CHECK" bsp >"$WORK/w0.out" 2>&1 & pids+=($!)
BG_PIDS+=("${pids[@]}")
outs=(w1 s0 w0)
for i in "${!outs[@]}"; do
    wait_for_lines "$WORK/${outs[i]}.out" "asked the scheduler at 127\.0\.0\.1:$port to join; waiting" 1 30 "${pids[i]}"
done
LOOM_ROLE=scheduler "$PS_CHECK" bsp >"$WORK/sched.out" 2>&1 & pids+=($!)
BG_PIDS+=("${pids[@]}")
for p in "${pids[@]}"; do wait "$p" || fail "a process exited non-zero"; done
grep -q 'job assembled: 1 server(s), 2 worker(s)' "$WORK/sched.out" || fail "the job did not assemble"
grep -q 'every pull exact' "$WORK/w0.out" || fail "worker 0 did not finish its checks"
echo "PASS"
