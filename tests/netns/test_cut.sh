#!/usr/bin/env bash
# (c) Cut one host's link in the middle of a `loom train lr` job across four
# hosts (`ip link set p<h> down` on the switch's side of the host's veth: the
# cable is pulled, both processes and host stay up). Within the bound below
# (the heartbeat timeout, as promised, plus what the code adds), every
# process must exit with status 3
# (LOOM_EXIT_PEER_FAILED) and none may hang:
#   - the scheduler says which node it lost: "<role> <rank> (node <id>) died: no heartbeat";
#   - the processes still connected to it are told, and name the same node;
#   - each process cut off from the scheduler says it "lost the scheduler".
# Usage: test_cut.sh LOOM DATA_DIR VICTIM, VICTIM being
#   worker     host 4, worker 1's;
#   server     host 2, where both servers run;
#   scheduler  host 1: everyone else loses the scheduler, which names one of them.
# shellcheck source-path=SCRIPTDIR source=../lib/netns.sh
source "$(dirname "$0")/../lib/netns.sh" || exit 1
VICTIM=${3:?usage: $0 LOOM DATA_DIR worker|server|scheduler}
# As in tests/mp/test_kill.sh: the docs promise detection within the heartbeat
# timeout; the code adds up to one heartbeat interval (silence is checked once
# per interval) and NODE_LINGER_MS, 1000 ms (src/core/node_priv.h), for a
# failing process's last messages; SLACK_MS is for a loaded 2-core machine.
# Below twice the timeout, so detection twice as slow as promised fails.
TIMEOUT_MS=3000
INTERVAL_MS=500
LINGER_MS=1000
SLACK_MS=1000
BOUND_MS=$((TIMEOUT_MS + INTERVAL_MS + LINGER_MS + SLACK_MS))
# orphans: the processes that can no longer reach the scheduler.
case $VICTIM in
worker) cut_host=4 orphans=(worker-1) dead_pattern='worker 1 \(node 4\)' ;;
server) cut_host=2 orphans=(server-0 server-1) dead_pattern='server [01] \(node [12]\)' ;;
scheduler) cut_host=1 orphans=(server-0 server-1 worker-0 worker-1) dead_pattern='(server|worker) [01] \(node [1-4]\)' ;;
*) echo "unknown victim '$VICTIM' (worker, server or scheduler)" >&2; exit 2 ;;
esac

make_hosts 4
EXTRA_ENV=("LOOM_HEARTBEAT_TIMEOUT_MS=$TIMEOUT_MS" "LOOM_HEARTBEAT_MS=$INTERVAL_MS")
# Far more epochs than the test waits for: the job is still training when the
# link goes down (and would run for minutes if it did not).
JOB_ARGS=(--train "$TRAIN" --test "$TEST" --workers 2 --servers 2 --consistency ssp:2 --epochs 1000
    --seed 7 --model-out "$WORK/model" --metrics "$WORK/metrics.json")
start_job 2 2

# Training is underway once worker 0 has reported an epoch.
deadline=$(($(now_ms) + 60000))
until [[ -s $WORK/metrics.json ]]; do
    reap
    [[ -z ${ENDED[*]} ]] || fail "a process ended before training got underway: ${!ENDED[*]}"
    (($(now_ms) < deadline)) || fail "no epoch finished within 60 s"
    poll_pause 0.05
done
echo "training is underway (epoch $(wc -l <"$WORK/metrics.json") done); cutting host $cut_host's link"

ip -n "$SWITCH" link set "p$cut_host" down || fail "cannot take p$cut_host down"
cut=$(now_ms)
# Bounded: fails naming whoever is still running after the bound (+1 s for
# the polling and the test's own commands).
wait_job $((BOUND_MS / 1000 + 1))
for name in "${NODES[@]}"; do
    echo "  $name exited with status ${STATUS[$name]} $((ENDED[$name] - cut)) ms after the cut"
done
for name in "${NODES[@]}"; do
    ((STATUS[$name] == 3)) || fail "$name exited with status ${STATUS[$name]}, expected 3 (LOOM_EXIT_PEER_FAILED)"
    ((ENDED[$name] - cut <= BOUND_MS)) ||
        fail "$name took $((ENDED[$name] - cut)) ms to exit, bound is $BOUND_MS ms (heartbeat timeout" \
            "$TIMEOUT_MS + interval $INTERVAL_MS + linger $LINGER_MS + slack $SLACK_MS)"
done

dead=$(grep -oE "$dead_pattern died: no heartbeat for [0-9]+ ms" "$WORK/scheduler.out") ||
    fail "the scheduler did not name the lost node ($dead_pattern died: no heartbeat)"
echo "  scheduler: $dead"
dead_node=${dead%% died:*}
for name in "${NODES[@]}"; do
    [[ $name == scheduler ]] && continue
    if [[ " ${orphans[*]} " == *" $name "* ]]; then
        msg=$(grep -oE 'lost the scheduler: nothing heard from it for [0-9]+ ms' "$WORK/$name.out") ||
            fail "$name, cut off, did not report: lost the scheduler"
    else
        msg=$(grep -oF "$dead_node died (reported by the scheduler)" "$WORK/$name.out") ||
            fail "$name did not report: $dead_node died (reported by the scheduler)"
    fi
    echo "  $name: $msg"
done
echo PASS
