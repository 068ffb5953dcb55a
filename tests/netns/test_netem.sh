#!/usr/bin/env bash
# (b) `loom train lr` on a9a across four hosts over bad links: every link
# delays each packet by 20 ms and drops 1% of them, at both of its ends, so
# host to host is 40 ms one way and an 80 ms round trip. The job must still
# finish, within a bound, with test accuracy >= 0.848, and the links must
# really have dropped packets.
#
# The impairment is tc netem on both ends of every veth. Where the kernel has
# no netem (sch_netem), netimpair (an NFQUEUE program, netimpair.c) does the
# same at the hosts: each host's packets are held 20 ms and dropped with
# probability 1% once when they leave eth0 and once when they arrive, which
# is what netem at the host's and the switch's end of its link would do.
# Skipped (exit 77) when neither can be set up.
# Usage: test_netem.sh LOOM DATA_DIR [NETIMPAIR]
# shellcheck source-path=SCRIPTDIR source=../lib/netns.sh
source "$(dirname "$0")/../lib/netns.sh" || exit 1
IMPAIRER=${3:-}
BOUND_S=180
DELAY_MS=20
LOSS_PCT=1
NETEM=(netem delay ${DELAY_MS}ms loss ${LOSS_PCT}%)

command -v tc >/dev/null || skip "no 'tc' command: install iproute2 (scripts/install-deps.sh)"
make_hosts 4
if err=$(tc -n "${HOSTS[1]}" qdisc add dev eth0 root "${NETEM[@]}" 2>&1); then
    MODE=netem
    for h in 1 2 3 4; do
        ((h == 1)) || tc -n "${HOSTS[h]}" qdisc add dev eth0 root "${NETEM[@]}" ||
            fail "cannot add netem to host $h's eth0"
        tc -n "$SWITCH" qdisc add dev "p$h" root "${NETEM[@]}" ||
            fail "cannot add netem to switch port p$h"
    done
    echo "netem on every link, both ends: ${NETEM[*]:1}"
    tc -n "${HOSTS[3]}" qdisc show dev eth0
else
    why="the kernel has no netem qdisc ($err)"
    [[ -n $IMPAIRER && -x $IMPAIRER ]] ||
        skip "$why, and netimpair was not built (libnetfilter-queue-dev, scripts/install-deps.sh)"
    command -v iptables >/dev/null || skip "$why, and there is no 'iptables' for netimpair"
    MODE=netimpair
    # Two stages per host, queue 0 on the way out and queue 1 on the way in,
    # each started and bound before its rule sends it packets.
    for h in 1 2 3 4; do
        for q in 0 1; do
            ready=$WORK/impair-$h-$q.ready
            ip netns exec "${HOSTS[h]}" "$IMPAIRER" --queue $q --delay-ms $DELAY_MS \
                --loss "0.0$LOSS_PCT" --seed $((h * 2 + q)) --ready "$ready" \
                >"$WORK/impair-$h-$q.log" 2>&1 &
            IMPAIR_PID[h * 2 + q]=$!
            deadline=$(($(now_ms) + 5000))
            until [[ -e $ready ]]; do
                kill -0 "${IMPAIR_PID[h * 2 + q]}" 2>/dev/null ||
                    skip "$why, and netimpair cannot run: $(cat "$WORK/impair-$h-$q.log")"
                (($(now_ms) < deadline)) || fail "netimpair on host $h did not start within 5 s"
                poll_pause 0.02
            done
        done
        if ! err=$(ip netns exec "${HOSTS[h]}" iptables -A OUTPUT -o eth0 -j NFQUEUE \
            --queue-num 0 2>&1); then
            skip "$why, and iptables cannot add an NFQUEUE rule ($err)"
        fi
        ip netns exec "${HOSTS[h]}" iptables -A INPUT -i eth0 -j NFQUEUE --queue-num 1 ||
            fail "cannot add the incoming NFQUEUE rule on host $h"
    done
    echo "$why: netimpair on every host, out and in: delay ${DELAY_MS} ms, loss ${LOSS_PCT}%"
fi

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
numeric_check 'a >= 0.848' a="$acc" || fail "test accuracy $acc < 0.848"

# 1% of several thousand packets: some must have been dropped, or the links
# were not impaired.
dropped=0
if [[ $MODE == netem ]]; then
    for h in 1 2 3 4; do
        d=$(tc -s -n "${HOSTS[h]}" qdisc show dev eth0 | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1)
        dropped=$((dropped + ${d:-0}))
    done
else
    for i in "${!IMPAIR_PID[@]}"; do kill -TERM "${IMPAIR_PID[i]}"; done
    for i in "${!IMPAIR_PID[@]}"; do wait "${IMPAIR_PID[i]}" || fail "netimpair $i failed"; done
    cat "$WORK"/impair-*.log
    d=$(cat "$WORK"/impair-*.log | sed -n 's/.*, \([0-9]*\) dropped$/\1/p' | awk '{ s += $1 } END { print s + 0 }')
    dropped=$d
fi
echo "$MODE dropped $dropped packets"
((dropped > 0)) || fail "$MODE dropped no packet: the links were not impaired"
echo PASS
