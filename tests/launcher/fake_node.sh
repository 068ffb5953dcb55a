#!/usr/bin/env bash
# Acts out one process of a Loom job for the launcher tests.
#
# The tests start it through `loom run ... -- bash fake_node.sh MODE`; like the
# real library it learns its role from LOOM_ROLE/LOOM_RANK/..., and like the
# real scheduler it publishes an address on LOOM_ADDRESS_FD. Every process
# first writes its pid to $FAKE_DIR/ROLE-RANK.pid so the test can check
# afterwards that none survived. MODE says what to do next:
#   env        print the environment contract and the open fds, exit 0
#   output     write lines to stdout and stderr (many, long, unterminated), exit 0
#   fail       worker 1 exits 3 once every process is up; server 0 ignores
#              SIGTERM (so it must be SIGKILLed); the others run forever
#   peer       worker 1 exits 7 once every process is up; the others notice
#              that it is gone (as Loom's heartbeat would) and exit 3 themselves
#   frozen     worker 1 stops answering (runs forever) once every process is
#              up; the others say so as Loom does ("worker 1 (node 4) died:
#              ...") and exit 3
#   hang       every process runs forever; one that gets SIGINT records it
#              in ROLE-RANK.sigint (only the launcher should ever get one)
#   stubborn   every process ignores SIGTERM and runs forever
#   noaddr     the scheduler exits 5 without publishing an address
#   closeaddr  the scheduler closes LOOM_ADDRESS_FD unwritten and runs forever
#   badaddr    the scheduler publishes something that is not host:port
#   silent     the scheduler never publishes and never closes the fd
set -u
mode=${1:?usage: fake_node.sh MODE}
me="$LOOM_ROLE-$LOOM_RANK"
: "${FAKE_DIR:?FAKE_DIR must name a directory}"
# Port 1 is never really used: the fake processes do not connect anywhere.
port=${FAKE_PORT:-1}

# Signal dispositions first: once the pid file exists, the test may signal.
case $mode:$me in
fail:server-0 | stubborn:*)
    # An ignored signal stays ignored in `sleep` too: only SIGKILL ends these.
    trap '' TERM
    ;;
hang:*) trap 'touch "$FAKE_DIR/$me.sigint"; exit 1' INT ;;
esac
echo $$ >"$FAKE_DIR/$me.tmp" && mv "$FAKE_DIR/$me.tmp" "$FAKE_DIR/$me.pid"

# The "work" the launcher has to kill: a helper process (sleep, recorded in
# ROLE-RANK.sleep) that only a signal to the whole process group reaches.
# Nothing here waits for anything by sleeping.
run_forever() {
    while :; do
        sleep 1000 &
        # Atomically: the test must never read a half-written file.
        echo $! >"$FAKE_DIR/$me.tmp" && mv "$FAKE_DIR/$me.tmp" "$FAKE_DIR/$me.sleep"
        wait $!
    done
}

publish() {
    echo "127.0.0.1:$port" >&"$LOOM_ADDRESS_FD"
    eval "exec $LOOM_ADDRESS_FD>&-"
}

# Prints the open fds other than stdio and bash's own script fd (255). Not
# to be called in $(...): that would show the substitution's pipe.
print_open_fds() {
    local p fd list=""
    for p in "/proc/$$/fd"/*; do
        fd=${p##*/}
        # The glob's own directory fd is already closed again: skip it.
        [[ -e $p && $fd -gt 2 && $fd -ne 255 ]] && list+="$fd,"
    done
    echo "fds=${list%,}"
}

# Bounded wait until every process of the job has written its pid file.
wait_for_everyone() {
    local want=$((1 + LOOM_NUM_SERVERS + LOOM_NUM_WORKERS)) i files
    for ((i = 0; i < 400; i++)); do
        files=("$FAKE_DIR"/*.pid)
        ((${#files[@]} >= want)) && return 0
        sleep 0.05
    done
    echo "fake_node: not every process started" >&2
    exit 99
}

if [[ $LOOM_ROLE == scheduler ]]; then
    case $mode in
    noaddr) exit 5 ;;
    closeaddr)
        eval "exec $LOOM_ADDRESS_FD>&-"
        run_forever
        ;;
    silent) run_forever ;;
    badaddr)
        echo "no port here" >&"$LOOM_ADDRESS_FD"
        run_forever
        ;;
    env) print_open_fds ;; # before publish, which closes the address fd
    esac
    publish
fi

case $mode in
env)
    echo "role=$LOOM_ROLE rank=$LOOM_RANK servers=$LOOM_NUM_SERVERS workers=$LOOM_NUM_WORKERS" \
        "scheduler=$LOOM_SCHEDULER bind=$LOOM_BIND"
    echo "extra=${LOOM_HEARTBEAT_TIMEOUT_MS-unset},${LOOM_VERBOSE-unset},${LOOM_TEST_INHERITED-unset}"
    echo "address_fd=${LOOM_ADDRESS_FD-unset} args=$*"
    echo "stdin=$(readlink "/proc/$$/fd/0")"
    echo "token=${LOOM_JOB_TOKEN-unset}"
    [[ $LOOM_ROLE == scheduler ]] || print_open_fds
    ;;
output)
    for ((i = 0; i < 200; i++)); do
        echo "out $i from $me"
        echo "err $i from $me" >&2
    done
    if [[ $me == worker-0 ]]; then
        printf 'x%.0s' {1..10000}
        echo
    fi
    printf 'last words of %s' "$me"
    ;;
fail)
    if [[ $me == worker-1 ]]; then
        wait_for_everyone
        echo "worker 1 gives up"
        exit 3
    fi
    run_forever
    ;;
peer)
    wait_for_everyone
    [[ $me == worker-1 ]] && exit 7
    pid=$(<"$FAKE_DIR/worker-1.pid")
    for ((i = 0; i < 400; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "$me: worker 1 is gone"
            exit 3
        fi
        sleep 0.05
    done
    exit 0
    ;;
frozen)
    wait_for_everyone
    [[ $me == worker-1 ]] && run_forever
    # As in Loom: the scheduler misses the heartbeats, the others hear it from it.
    if [[ $me == scheduler-0 ]]; then
        echo "loom[scheduler] error: worker 1 (node 4) died: no heartbeat for 5000 ms; stopping" >&2
    else
        echo "loom[$me] error: worker 1 (node 4) died (reported by the scheduler); stopping" >&2
    fi
    exit 3
    ;;
*) run_forever ;;
esac
