#!/usr/bin/env bash
# A refusal is reported as a refusal (issue 9, found 11): when the job does
# not assemble in time (here a worker never comes), the scheduler refuses the
# nodes that came with its reason. They must print that reason and exit
# non-zero, and not add that the scheduler "did not answer (is it running
# ...?)" as they did before. The scheduler's deadline is short and the nodes'
# long, so the refusal comes first.
# shellcheck source-path=SCRIPTDIR source=../lib/security.sh
source "$(dirname "$0")/../lib/security.sh"
port=$("$PS_CHECK" free-port) || fail "no free port"
export LOOM_SCHEDULER=127.0.0.1:$port LOOM_NUM_SERVERS=1 LOOM_NUM_WORKERS=2
pids=()
for who in "sched scheduler 0 1500" "server server 0 60000" "w0 worker 0 60000"; do
    read -r name role rank timeout <<<"$who"
    LOOM_CONNECT_TIMEOUT_MS=$timeout LOOM_ROLE=$role LOOM_RANK=$rank \
        "$PS_CHECK" bsp --clocks 1 >"$WORK/$name.out" 2>&1 &
    pids+=($!)
    BG_PIDS+=($!)
done
for p in "${pids[@]}"; do wait "$p" && fail "a process exited 0 although the job never assembled"; done
for name in server w0; do
    grep -q "refused this node: only 2 of 3 nodes registered within 1500 ms; missing: worker 1" \
        "$WORK/$name.out" || fail "$name did not give the scheduler's reason"
    grep -q "did not answer" "$WORK/$name.out" && fail "$name said the scheduler did not answer"
done
echo "PASS"
