#!/usr/bin/env bash
# (e) The job's last acknowledgement lost on the wire: netimpair on each
# worker's host drops the first segment that carries the scheduler's DONE_ACK
# (the bytes done_ack_frame prints). For the worker that finishes last, the
# scheduler has ended the job and closed its sockets before the kernel resends
# the DONE_ACK. The resent one must still arrive: every node exits 0, and both
# drops happened. It did not when a worker kept sending status heartbeats
# after its DONE: the scheduler's kernel, receiving data on a connection its
# process had closed, reset it, and the worker ended a finished job with
# "lost the scheduler" (status 3) after the heartbeat timeout. Heartbeats every
# 20 ms and a 20 ms delay towards the workers made that certain.
# Usage: test_done_ack.sh LOOM DATA_DIR DONE_ACK_FRAME [NETIMPAIR]
# shellcheck source-path=SCRIPTDIR source=../lib/netns.sh
source "$(dirname "$0")/../lib/netns.sh" || exit 1
FRAME=${3:?usage: $0 LOOM DATA_DIR DONE_ACK_FRAME [NETIMPAIR]}
IMPAIRER=${4:-}
BOUND_S=60

[[ -n $IMPAIRER && -x $IMPAIRER ]] ||
    skip "netimpair was not built (libnetfilter-queue-dev, scripts/install-deps.sh)"
command -v iptables >/dev/null || skip "no 'iptables' for netimpair"
pattern=$("$FRAME") || fail "done_ack_frame failed"
make_hosts 4
IMPAIR_PID=()
for h in 3 4; do
    ready=$WORK/impair-$h.ready
    ip netns exec "${HOSTS[h]}" "$IMPAIRER" --queue 1 --delay-ms 20 --loss 0 \
        --drop-once "$pattern" --ready "$ready" >"$WORK/impair-$h.log" 2>&1 &
    IMPAIR_PID[h]=$!
    deadline=$(($(now_ms) + 5000))
    until [[ -e $ready ]]; do
        kill -0 "${IMPAIR_PID[h]}" 2>/dev/null ||
            skip "netimpair cannot run: $(cat "$WORK/impair-$h.log")"
        (($(now_ms) < deadline)) || fail "netimpair on host $h did not start within 5 s"
        poll_pause 0.02
    done
    if ! err=$(ip netns exec "${HOSTS[h]}" iptables -A INPUT -i eth0 -j NFQUEUE --queue-num 1 2>&1); then
        skip "iptables cannot add an NFQUEUE rule ($err)"
    fi
done
echo "netimpair on the workers' hosts: 20 ms delay in, the first DONE_ACK dropped"

EXTRA_ENV=(LOOM_HEARTBEAT_MS=20)
JOB_ARGS=(--train "$TRAIN" --test "$TEST" --workers 2 --servers 2 --epochs 1 --minibatch 2000 --seed 7
    --quiet --model-out "$WORK/model")
start=$(now_ms)
start_job 2 2
wait_job "$BOUND_S"
echo "the job took $(($(now_ms) - start)) ms"
check_clean_exit

for h in 3 4; do kill -TERM "${IMPAIR_PID[h]}"; done
for h in 3 4; do
    wait "${IMPAIR_PID[h]}" || fail "netimpair on host $h failed"
    cat "$WORK/impair-$h.log"
    grep -q ', 1 targeted$' "$WORK/impair-$h.log" ||
        fail "host $h's DONE_ACK was not dropped: the test did not test what it says"
done
echo PASS
