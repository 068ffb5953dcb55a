#!/usr/bin/env bash
# A server's link is cut mid-job with --replicas 1 (docs/FAULTS.md, "A cut
# link, a partition, a paused server"). Seven hosts: the scheduler on host 1,
# server r on host 2 + r, worker r on host 5 + r; the job is failover_check
# (tests/ft): 3 workers push known int64 deltas into a sum table for 200
# clocks. Once every worker has passed clock 30, server 1's link goes down
# (`ip link set p3 down` on the switch: the cable is pulled, the process and
# its host stay up). In every variant the job must go on and end with every
# key exactly the sum of all pushes (no acknowledged update lost or applied
# twice), every other process exiting 0, and the scheduler must say that
# server 1 died and the job went on.
#   cut     the link stays down: the cut-off server must stop itself, saying it
#           lost the scheduler (status 3), within the heartbeat bound.
#   return  the link comes back once the scheduler has declared server 1 dead.
#           The cut-off server is kept alive over the cut (its own heartbeat
#           timeout is 60 s, like a server that was paused or is slow to
#           notice), so it returns with its stale rows and what the network
#           held for it: the workers' pushes and the scheduler's heartbeats
#           queued during the cut arrive, and it replicates and acknowledges
#           as if it were still master. The others must drop all it sends
#           (none of it may reach the new masters' rows), and the scheduler
#           must tell it that it was declared dead: it stops, saying so, with
#           status 3.
#   partition  only the scheduler and server 1 lose each other (iptables on
#           server 1's host): the workers and the other servers still reach
#           server 1, which is kept alive for 12 s after the cut (its own
#           heartbeat timeout) while the job goes on without it, then must
#           stop itself, saying it lost the scheduler. Whatever it sends once
#           the others know it dead is dropped.
# Usage: test_cut_failover.sh LOOM DATA_DIR FAILOVER_CHECK cut|return|partition bsp|ssp|asp
NEEDS_A9A=0
# shellcheck source-path=SCRIPTDIR source=../lib/netns.sh
source "$(dirname "$0")/../lib/netns.sh" || exit 1
CHECK=${3:?usage: $0 LOOM DATA_DIR FAILOVER_CHECK cut|return|partition bsp|ssp|asp}
VARIANT=${4:?cut, return or partition}
MODE=${5:?bsp, ssp or asp}
[[ $VARIANT =~ ^(cut|return|partition)$ ]] || { echo "unknown variant '$VARIANT'" >&2; exit 2; }

# As in test_cut.sh: a cut-off server stops within its heartbeat timeout, plus
# one interval (silence is checked once per interval), NODE_LINGER_MS
# (src/core/node_priv.h) and slack for a loaded 2-core machine under ASan.
# 4 s of silence before a node is declared dead: with 2 s, a machine at load
# 15 once stalled a healthy scheduler long enough to lose a second server.
TIMEOUT_MS=4000
INTERVAL_MS=250
LINGER_MS=1000
SLACK_MS=2000
# After the link comes back, TCP resends what it held only when its
# retransmission timer (backed off exponentially during the cut) fires next:
# seconds, not milliseconds.
RETURN_BOUND_S=30
VICTIM=server-1
VICTIM_HOST=3
W=3 S=3
# The victim's own heartbeat timeout: how long it lives on, unaware, after the
# cut (a cut-off server hears nothing, so it stops after this).
case $VARIANT in
cut) VICTIM_TIMEOUT_MS=$TIMEOUT_MS ;;
return) VICTIM_TIMEOUT_MS=60000 ;;
partition) VICTIM_TIMEOUT_MS=12000 ;;
esac

make_hosts 7
if [[ $VARIANT == partition ]] && ! ip netns exec "${HOSTS[VICTIM_HOST]}" iptables -S >/dev/null 2>&1; then
    skip "cannot filter packets with iptables in a network namespace (install iptables: scripts/install-deps.sh)"
fi
mkdir "$WORK/pids"
PROGRAM=("$CHECK" "$MODE")
# 200 clocks of at least 20 ms; a partition stalls nobody (the workers still
# reach server 1), so its job runs 400, to outlast the scheduler's timeout
# after the cut at clock 30 however fast the machine is.
CLOCKS=200
[[ $VARIANT == partition ]] && CLOCKS=400
JOB_ARGS=(--pid-dir "$WORK/pids" --clocks $CLOCKS --pace-ms 20)
job_env=(LOOM_REPLICAS=1 "LOOM_HEARTBEAT_MS=$INTERVAL_MS" "LOOM_HEARTBEAT_TIMEOUT_MS=$TIMEOUT_MS")
EXTRA_ENV=("${job_env[@]}")
start_node scheduler 1 scheduler 0 $W $S
for ((r = 0; r < S; r++)); do
    EXTRA_ENV=("${job_env[@]}")
    [[ server-$r == "$VICTIM" ]] && EXTRA_ENV+=("LOOM_HEARTBEAT_TIMEOUT_MS=$VICTIM_TIMEOUT_MS")
    start_node "server-$r" $((2 + r)) server "$r" $W $S
done
EXTRA_ENV=("${job_env[@]}")
for ((r = 0; r < W; r++)); do start_node "worker-$r" $((5 + r)) worker "$r" $W $S; done

# wait_for NAME REGEX SECONDS: until NAME's output has a line matching REGEX;
# fails if any node ends first, or after SECONDS.
wait_for() {
    local deadline=$(($(now_ms) + $3 * 1000))
    until grep -qE -- "$2" "$WORK/$1.out"; do
        reap
        [[ -z ${ENDED[*]} ]] || fail "a process ended before $1 printed '$2': ${!ENDED[*]}"
        (($(now_ms) < deadline)) || fail "$1 did not print '$2' within $3 s"
        poll_pause 0.05
    done
}

for ((r = 0; r < W; r++)); do wait_for "worker-$r" "^worker $r clock 30$" 60; done
if [[ $VARIANT == partition ]]; then
    echo "every worker passed clock 30; cutting host $VICTIM_HOST ($VICTIM) off host 1 (the scheduler) only"
    if ! { ip netns exec "${HOSTS[VICTIM_HOST]}" iptables -A INPUT -s "$SUBNET.1" -j DROP &&
        ip netns exec "${HOSTS[VICTIM_HOST]}" iptables -A OUTPUT -d "$SUBNET.1" -j DROP; }; then
        fail "cannot add the iptables rules that cut host $VICTIM_HOST off host 1"
    fi
else
    echo "every worker passed clock 30; cutting the link of host $VICTIM_HOST ($VICTIM)"
    ip -n "$SWITCH" link set "p$VICTIM_HOST" down || fail "cannot take p$VICTIM_HOST down"
fi
cut=$(now_ms)

died='server 1 \(node [0-9]+\) died: no heartbeat for [0-9]+ ms; the job goes on without it'
if [[ $VARIANT == return ]]; then
    wait_for scheduler "$died" 30
    reap
    [[ -z ${ENDED[$VICTIM]:-} ]] || fail "$VICTIM ended before its link came back"
    ip -n "$SWITCH" link set "p$VICTIM_HOST" up || fail "cannot bring p$VICTIM_HOST up"
    up=$(now_ms)
    echo "the scheduler declared $VICTIM dead $((up - cut)) ms after the cut; its link is up again"
fi

wait_job 120
for name in "${NODES[@]}"; do
    echo "  $name exited with status ${STATUS[$name]} $((ENDED[$name] - cut)) ms after the cut"
done
for name in "${NODES[@]}"; do
    [[ $name == "$VICTIM" ]] && continue
    ((STATUS[$name] == 0)) || fail "$name exited with status ${STATUS[$name]}"
done
for ((r = 0; r < W; r++)); do
    grep -q "^worker $r: $CLOCKS clocks, all 1000 keys exact" "$WORK/worker-$r.out" ||
        fail "worker $r did not end with every key exact"
done
grep -qE "$died" "$WORK/scheduler.out" || fail "the scheduler did not say that server 1 died and the job went on"
((STATUS[$VICTIM] == 3)) || fail "$VICTIM exited with status ${STATUS[$VICTIM]}, expected 3 (LOOM_EXIT_PEER_FAILED)"
if [[ $VARIANT == return ]]; then
    msg=$(grep -oE 'the scheduler declared this node dead[^;]*' "$WORK/$VICTIM.out") ||
        fail "$VICTIM, back on the network, was not told that it had been declared dead"
    ((ENDED[$VICTIM] - up <= RETURN_BOUND_S * 1000)) ||
        fail "$VICTIM took $((ENDED[$VICTIM] - up)) ms after its link came back to stop (bound ${RETURN_BOUND_S} s)"
    # It did talk again: the scheduler heard its heartbeats, and dropped them.
    grep -qE "ignoring [A-Z_]+ from server 1 \(node [0-9]+\) and whatever it sends next" "$WORK/scheduler.out" ||
        fail "the scheduler did not say that it ignored the returning server 1"
else
    msg=$(grep -oE 'lost the scheduler: nothing heard from it for [0-9]+ ms' "$WORK/$VICTIM.out") ||
        fail "$VICTIM, cut off, did not say it lost the scheduler"
    bound=$((VICTIM_TIMEOUT_MS + INTERVAL_MS + LINGER_MS + SLACK_MS))
    ((ENDED[$VICTIM] - cut <= bound)) ||
        fail "$VICTIM took $((ENDED[$VICTIM] - cut)) ms to stop, bound is $bound ms (its heartbeat timeout" \
            "$VICTIM_TIMEOUT_MS + interval $INTERVAL_MS + linger $LINGER_MS + slack $SLACK_MS)"
fi
echo "  $VICTIM: $msg"
grep -hE "ignoring [A-Z_]+ from server 1" "$WORK"/*.out
grep -hE "sent again|now master" "$WORK"/*.out | head -6
echo PASS
