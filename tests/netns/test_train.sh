#!/usr/bin/env bash
# (a) `loom train lr` on a9a across four hosts (network namespaces: scheduler,
# servers, worker 0, worker 1 each on a host of its own, talking through a
# bridge) learns what the same command learns on loopback:
#   bsp  one worker, BSP: the model file is byte-identical to the loopback
#        run's (a one-worker BSP job is deterministic, whatever the network);
#   ssp  two workers, two servers, SSP(2): test accuracy >= 0.848 in both
#        setups, within 0.003 of each other (two workers are not bit-exact:
#        the servers apply their pushes in arrival order);
# and the traffic went over the hosts' links. Usage: test_train.sh LOOM DATA_DIR
# shellcheck source-path=SCRIPTDIR source=../lib/netns.sh
source "$(dirname "$0")/../lib/netns.sh" || exit 1
# Each run takes about a second; four runs of at most BOUND_S seconds stay
# within the CTest timeout (300 s), which kills without letting us clean up.
BOUND_S=60

make_hosts 4

# train_netns W S: a W-worker, S-server job across the hosts with JOB_ARGS.
train_netns() {
    local start
    start=$(now_ms)
    start_job "$1" "$2"
    wait_job "$BOUND_S"
    check_clean_exit
    echo "  across hosts: $(($(now_ms) - start)) ms"
}

# train_loopback: the same command typed by a user: a local job on 127.0.0.1
# (`loom run` and its processes). It runs in a process group of its own, which
# the cleanup kills whole if the test ends early.
train_loopback() {
    local start pid
    start=$(now_ms)
    setsid "$LOOM" train lr "${JOB_ARGS[@]}" >"$WORK/loopback.out" 2>&1 </dev/null &
    pid=$!
    PGROUPS+=("$pid")
    while kill -0 "$pid" 2>/dev/null; do
        (($(now_ms) - start < BOUND_S * 1000)) || fail "the loopback run took over $BOUND_S s"
        poll_pause 0.05
    done
    wait "$pid" || fail "the loopback run of: loom train lr ${JOB_ARGS[*]} failed"
    PGROUPS=()
    echo "  on loopback:  $(($(now_ms) - start)) ms"
}

echo "bsp: 1 worker, 2 servers, BSP, 3 epochs"
common=(--train "$TRAIN" --test "$TEST" --workers 1 --servers 2 --consistency bsp --epochs 3 --seed 7 --quiet)
JOB_ARGS=("${common[@]}" --model-out "$WORK/bsp-loopback.model")
train_loopback
before=()
for h in 1 2 3; do before[h]=$(link_bytes $h); done
JOB_ARGS=("${common[@]}" --model-out "$WORK/bsp-netns.model")
train_netns 1 2
for h in 1 2 3; do
    bytes=$(($(link_bytes $h) - before[h]))
    echo "  host $h's link carried $bytes bytes"
    ((bytes > 100000)) || fail "host $h's link carried only $bytes bytes: did the job talk over the links?"
done
acc_lo=$(accuracy "$WORK/bsp-loopback.model")
acc_ns=$(accuracy "$WORK/bsp-netns.model")
echo "  test accuracy: loopback $acc_lo, across hosts $acc_ns"
cmp "$WORK/bsp-loopback.model" "$WORK/bsp-netns.model" ||
    fail "the one-worker BSP model across hosts differs from the loopback one"
echo "  the two models are byte-identical"

echo "ssp: 2 workers, 2 servers, SSP(2), 6 epochs"
common=(--train "$TRAIN" --test "$TEST" --workers 2 --servers 2 --consistency ssp:2 --updater adagrad --lr 0.1
    --epochs 6 --seed 7)
JOB_ARGS=("${common[@]}" --model-out "$WORK/ssp-loopback.model")
train_loopback
JOB_ARGS=("${common[@]}" --model-out "$WORK/ssp-netns.model" --metrics "$WORK/ssp-netns.json")
train_netns 2 2
acc_lo=$(accuracy "$WORK/ssp-loopback.model")
acc_ns=$(accuracy "$WORK/ssp-netns.model")
echo "  test accuracy: loopback $acc_lo, across hosts $acc_ns"
numeric_check 'a >= 0.848 && b >= 0.848' a="$acc_lo" b="$acc_ns" ||
    fail "test accuracy below 0.848 (loopback $acc_lo, across hosts $acc_ns)"
numeric_check 'a - b <= 0.003 && b - a <= 0.003' a="$acc_lo" b="$acc_ns" ||
    fail "test accuracies differ by more than 0.003 (loopback $acc_lo, across hosts $acc_ns)"
lines=$(wc -l <"$WORK/ssp-netns.json")
((lines == 6)) || fail "worker 0 wrote $lines metric lines, expected 6"
echo PASS
