# shellcheck shell=bash
# tests/lib/netns.sh (builds on common.sh): multi-host tests on one machine: each "host" is a network namespace with one
# interface, eth0, plugged by a veth pair into a bridge that lives in a
# namespace of its own (the "switch"). Nothing is created in the namespace the
# test runs in: the links and the test-only addresses 10.77.0.0/24 exist only
# inside the namespaces this test run creates, so concurrent runs never see
# each other (every name carries this shell's pid and a random suffix).
#
# Sourced with the paths of the `loom` binary and of the shared data directory
# as $1 and $2. Skips (exit 77, with a message) without root, iproute2, the a9a
# data (unless the test sets NEEDS_A9A=0 before sourcing) or the kernel's
# namespaces, veth or bridge support. Whatever way the
# test ends (success, failure, a signal), the EXIT trap kills every process
# started in the test's namespaces and deletes the namespaces, which removes
# every link with them.
#
# Layout of a job (start_job): the scheduler on host 1, every server on host 2,
# worker r on host 3 + r; host h has address 10.77.0.h. Each process's output
# goes to $WORK/<name>.out, names being scheduler, server-R and worker-R.
set -u
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

LOOM=${1:?usage: $0 LOOM_BINARY DATA_DIR}
DATA=${2:?usage: $0 LOOM_BINARY DATA_DIR}
TRAIN=$DATA/a9a/a9a
TEST=$DATA/a9a/a9a.t
SUBNET=10.77.0
SCHED_PORT=7070

# Nodes are started with LOOM_* variables only: nothing inherited from an
# enclosing job (loom run, mpirun, srun) may make them think otherwise.
clear_env_matching '^(LOOM|OMPI|PMI|PMIX|MPI|SLURM|SLURMD)_'

[[ ${NEEDS_A9A:-1} == 0 || (-r $TRAIN && -r $TEST) ]] || skip "$DATA/a9a not found (the shared datasets are not part of a clone)"
((EUID == 0)) || skip "network namespaces need root (CI runs these tests as root)"
command -v ip >/dev/null || skip "no 'ip' command: install iproute2 (scripts/install-deps.sh)"

work_dir netns
TAG=loomnet-$$-$RANDOM
SWITCH=$TAG-sw
HOSTS=()      # HOSTS[h] is host h's namespace (h from 1)
NAMESPACES=() # every namespace created, for the cleanup
NODES=()      # names of the processes started, in order
declare -A PID=() STATUS=() ENDED=()
PGROUPS=()    # process groups (started with setsid) to kill, whole, at the end

cleanup() {
    local ns pid name
    # Processes first: this shell's children (the nodes, also one started so
    # recently that its pid was not noted yet) and anything else running in
    # the test's namespaces. Bash's "Killed" notices are silenced here.
    {
        for pid in "${PGROUPS[@]}"; do kill -KILL -- "-$pid"; done
        for pid in $(jobs -p); do kill -KILL "$pid"; done
        for name in "${NODES[@]}"; do [[ -n ${ENDED[$name]:-} ]] || kill -KILL "${PID[$name]}"; done
        for ns in "${NAMESPACES[@]}"; do
            for pid in $(ip netns pids "$ns"); do kill -KILL "$pid"; done
        done
        wait
    } 2>/dev/null
    # A namespace is listed before it is created, so one created just before
    # a signal is not missed; only those that exist are deleted.
    for ns in "${NAMESPACES[@]}"; do
        [[ -e /var/run/netns/$ns ]] || continue
        ip netns delete "$ns" || echo "warning: could not delete network namespace $ns" >&2
    done
    remove_work
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# fail_show: what fail (common.sh) shows: the end of every process's output.
fail_show() {
    local f
    for f in "$WORK"/*.out; do
        [[ -s $f ]] || continue
        echo "--- $(basename "$f") (last 30 lines):"
        tail -n 30 "$f"
    done
    return 0
}

# make_hosts N: the switch namespace with bridge br0, and hosts 1..N, host h
# with eth0 = 10.77.0.h/24 plugged into the bridge port p<h>, and lo up.
make_hosts() {
    local n=$1 h ns err deadline
    NAMESPACES+=("$SWITCH")
    if ! err=$(ip netns add "$SWITCH" 2>&1); then
        skip "cannot create a network namespace here ($err)"
    fi
    if ! err=$(ip -n "$SWITCH" link add br0 type bridge 2>&1); then
        skip "cannot create a bridge in a network namespace ($err)"
    fi
    ip -n "$SWITCH" link set br0 up || fail "cannot bring the bridge up"
    for ((h = 1; h <= n; h++)); do
        ns=$TAG-h$h
        NAMESPACES+=("$ns")
        ip netns add "$ns" || fail "cannot create namespace $ns"
        HOSTS[h]=$ns
        if ((h == 1)) && ! err=$(ip netns exec "$ns" true 2>&1); then
            skip "cannot run a command in a network namespace ($err)"
        fi
        if ! err=$(ip -n "$SWITCH" link add "p$h" type veth peer name eth0 netns "$ns" 2>&1); then
            ((h == 1)) && skip "cannot create a veth pair ($err)"
            fail "cannot create the veth pair of host $h: $err"
        fi
        if ! { ip -n "$SWITCH" link set "p$h" master br0 up &&
            ip -n "$ns" addr add "$SUBNET.$h/24" dev eth0 &&
            ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up; }; then
            fail "cannot configure host $h"
        fi
    done
    # The links are usable once every port forwards and every eth0 has carrier.
    deadline=$(($(now_ms) + 10000))
    for ((h = 1; h <= n; h++)); do
        until ip -n "$SWITCH" -d -o link show p"$h" | grep -q 'state forwarding' &&
            ip -n "${HOSTS[h]}" -o link show eth0 | grep -q LOWER_UP; do
            (($(now_ms) < deadline)) || fail "the link of host $h did not come up within 10 s"
            poll_pause 0.05
        done
    done
    echo "hosts: ${HOSTS[*]} (10.77.0.1-$n), switch $SWITCH"
}

# link_bytes H: bytes that went through host H's link so far, both directions.
link_bytes() {
    ip netns exec "${HOSTS[$1]}" cat /sys/class/net/eth0/statistics/rx_bytes \
        /sys/class/net/eth0/statistics/tx_bytes | awk '{ s += $1 } END { print s }'
}

# start_node NAME HOST ROLE RANK W S: starts `"${PROGRAM[@]}" "${JOB_ARGS[@]}"`
# (by default `loom train lr ...`) as one node of a job of S servers and W
# workers, in host HOST's namespace, with the variables of EXTRA_ENV (an array
# of VAR=value) added.
EXTRA_ENV=()
JOB_ARGS=()
PROGRAM=("$LOOM" train lr)
start_node() {
    local name=$1 host=$2 role=$3 rank=$4 w=$5 s=$6
    ip netns exec "${HOSTS[host]}" env LOOM_ROLE="$role" LOOM_RANK="$rank" \
        LOOM_SCHEDULER="$SUBNET.1:$SCHED_PORT" LOOM_BIND="$SUBNET.$host" \
        LOOM_NUM_SERVERS="$s" LOOM_NUM_WORKERS="$w" "${EXTRA_ENV[@]}" \
        "${PROGRAM[@]}" "${JOB_ARGS[@]}" >"$WORK/$name.out" 2>&1 </dev/null &
    PID[$name]=$!
    NODES+=("$name")
}

# start_job W S: the scheduler on host 1, servers 0..S-1 on host 2, worker r on
# host 3 + r, every one running `loom train lr "${JOB_ARGS[@]}"`.
start_job() {
    local w=$1 s=$2 r
    NODES=() PID=() STATUS=() ENDED=()
    start_node scheduler 1 scheduler 0 "$w" "$s"
    for ((r = 0; r < s; r++)); do start_node "server-$r" 2 server "$r" "$w" "$s"; done
    for ((r = 0; r < w; r++)); do start_node "worker-$r" $((3 + r)) worker "$r" "$w" "$s"; done
}

# reap: notes the exit status and time (ms) of every node that has ended
# since the last call. Bash collects ended children by itself, so a pid that
# no longer exists has ended and `wait` returns its saved status.
reap() {
    local name st
    for name in "${NODES[@]}"; do
        [[ -n ${ENDED[$name]:-} ]] && continue
        kill -0 "${PID[$name]}" 2>/dev/null && continue
        wait "${PID[$name]}"
        st=$?
        STATUS[$name]=$st
        ENDED[$name]=$(now_ms)
    done
}

# running: the names of the nodes still running (after reap).
running() {
    local name out=()
    for name in "${NODES[@]}"; do [[ -n ${ENDED[$name]:-} ]] || out+=("$name"); done
    echo "${out[*]}"
}

# wait_job SECONDS: until every node has ended; fails naming the nodes still
# running when SECONDS pass.
wait_job() {
    local deadline=$(($(now_ms) + $1 * 1000)) left
    while :; do
        reap
        left=$(running)
        [[ -z $left ]] && return 0
        (($(now_ms) < deadline)) || fail "still running after $1 s: $left"
        poll_pause 0.05
    done
}

# check_clean_exit: every node exited 0.
check_clean_exit() {
    local name
    for name in "${NODES[@]}"; do
        ((STATUS[$name] == 0)) || fail "$name exited with status ${STATUS[$name]}"
    done
}

# accuracy MODEL: the test accuracy loom predict reports.
accuracy() {
    "$LOOM" predict lr --model "$1" --data "$TEST" | sed -n 's/.*accuracy \([0-9.]*\).*/\1/p'
}
