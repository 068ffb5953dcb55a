#!/usr/bin/env bash
# (b) `loom train lr` on a9a across four hosts over bad links: every link
# delays each packet by 20 ms and drops 1% of them, in both directions (tc
# netem on both ends of every veth, so host to host is 40 ms one way and an
# 80 ms round trip). The job must still finish, within a bound, with test
# accuracy >= 0.848, and netem must really have dropped packets.
# Skipped (exit 77) where tc or the kernel's netem qdisc (sch_netem) is
# missing. Usage: test_netem.sh LOOM DATA_DIR
source "$(dirname "$0")/lib.sh" || exit 1
BOUND_S=180
NETEM=(netem delay 20ms loss 1%)

command -v tc >/dev/null || skip "no 'tc' command: install iproute2 (scripts/install-deps.sh)"
make_hosts 4
if ! err=$(tc -n "${HOSTS[1]}" qdisc add dev eth0 root "${NETEM[@]}" 2>&1); then
    skip "cannot add a netem qdisc ($err): the kernel lacks sch_netem (modprobe sch_netem)"
fi
for h in 1 2 3 4; do
    ((h == 1)) || tc -n "${HOSTS[h]}" qdisc add dev eth0 root "${NETEM[@]}" ||
        fail "cannot add netem to host $h's eth0"
    tc -n "$SWITCH" qdisc add dev "p$h" root "${NETEM[@]}" || fail "cannot add netem to switch port p$h"
done
echo "netem on every link, both directions: ${NETEM[*]:1}"
tc -n "${HOSTS[3]}" qdisc show dev eth0

# Minibatches of 200 and 3 epochs: 246 clocks per worker, which on loopback
# reach 0.849-0.851 (so do BSP and ASP), and keep the run short at 80 ms a round trip.
JOB_ARGS=(--train "$TRAIN" --test "$TEST" --workers 2 --servers 2 --consistency ssp:2 --minibatch 200
    --epochs 3 --lr 0.1 --seed 7 --model-out "$WORK/model" --metrics "$WORK/metrics.json")
start=$(now_ms)
start_job 2 2
wait_job "$BOUND_S"
elapsed=$(($(now_ms) - start))
check_clean_exit
acc=$(accuracy "$WORK/model")
echo "the job took $elapsed ms (bound ${BOUND_S} s); test accuracy $acc"
sed 's/^/  /' "$WORK/metrics.json"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.848) }' || fail "test accuracy $acc < 0.848"

# 1% of several thousand packets: netem must have dropped some, or it did nothing.
dropped=0
for h in 1 2 3 4; do
    d=$(tc -s -n "${HOSTS[h]}" qdisc show dev eth0 | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1)
    dropped=$((dropped + ${d:-0}))
done
echo "netem dropped $dropped packets leaving the hosts"
((dropped > 0)) || fail "netem dropped no packet: the links were not impaired"
echo PASS
