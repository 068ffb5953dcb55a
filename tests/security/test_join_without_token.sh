#!/usr/bin/env bash
# Joining a job while it assembles (issue 9, found 4): a job started by hand
# with LOOM_JOB_TOKEN waits for its second worker; a worker without the token
# and one with another token arrive first (with and without a rank). The
# scheduler must refuse both (they exit non-zero saying why) and take the real
# worker, and the job must finish with exact results. Before the token, the
# intruder took the free rank and the real worker was turned away.
# shellcheck source-path=SCRIPTDIR source=../lib/security.sh
source "$(dirname "$0")/../lib/security.sh"
port=$("$PS_CHECK" free-port) || fail "no free port"
export LOOM_SCHEDULER=127.0.0.1:$port LOOM_NUM_SERVERS=1 LOOM_NUM_WORKERS=2
pids=()
for who in "sched scheduler 0" "server server 0" "w0 worker 0"; do
    read -r name role rank <<<"$who"
    LOOM_JOB_TOKEN=the-job LOOM_ROLE=$role LOOM_RANK=$rank \
        "$PS_CHECK" bsp --clocks 5 >"$WORK/$name.out" 2>&1 &
    pids+=($!)
    BG_PIDS+=($!)
done
# The intruders, one after the other, while worker 1 is missing.
for who in "no-token:1" "other-token:-1"; do
    name=${who%:*} rank=${who#*:}
    token=()
    [[ $name == other-token ]] && token=(LOOM_JOB_TOKEN=another-job)
    env "${token[@]}" LOOM_ROLE=worker LOOM_RANK="$rank" \
        "$PS_CHECK" bsp --clocks 5 >"$WORK/$name.out" 2>&1 &
    pid=$!
    BG_PIDS+=("$pid")
    wait "$pid" && fail "the intruder ($name) exited 0"
    grep -q "refused this node: a worker of another job: its job token does not match" \
        "$WORK/$name.out" || fail "the intruder ($name) was not told why"
done
grep -q "it has no LOOM_JOB_TOKEN" "$WORK/no-token.out" || fail "no-token intruder: reason not precise"
# A worker of the job, but started with another frame limit (its frames could
# get it or its peers disconnected): refused with the reason, too.
status=0
LOOM_JOB_TOKEN=the-job LOOM_MAX_FRAME_MIB=64 LOOM_ROLE=worker LOOM_RANK=1 \
    "$PS_CHECK" bsp --clocks 5 >"$WORK/frame-limit.out" 2>&1 || status=$?
((status != 0)) || fail "the worker with another frame limit exited 0"
grep -q "refused this node: a worker was started with a frame limit of 64 MiB, but this job's is 256 MiB" \
    "$WORK/frame-limit.out" || fail "the worker with another frame limit was not told why"
LOOM_JOB_TOKEN=the-job LOOM_ROLE=worker LOOM_RANK=1 "$PS_CHECK" bsp --clocks 5 >"$WORK/w1.out" 2>&1 &
pids+=($!)
BG_PIDS+=($!)
for p in "${pids[@]}"; do wait "$p" || fail "a process of the job exited non-zero"; done
for w in w0 w1; do grep -q 'every pull exact' "$WORK/$w.out" || fail "$w did not finish its checks"; done
echo "PASS"
