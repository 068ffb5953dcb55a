#!/usr/bin/env bash
# Data parts handed out on demand (loom/parts.h, src/sched/parts*.c) under
# `loom train lr --data-parts N`, checked by the scheduler's accounting
# (LOOM_VERBOSE=1: "part P to worker W", "part P finished by worker W",
# "part P back in the pool (worker W lost)", "epoch E over") and against each
# worker's own count ("trained N parts of P in E epochs").
#
#   exact  3 workers, 2 servers, 7 parts, 3 epochs, under BSP, SSP(1) and ASP:
#          every part of every epoch finished exactly once, none back in the
#          pool, each epoch's end said once, a metrics line per epoch (status 0;
#          under BSP with --threads 2); one worker with one part in 2 lanes
#          saves the model of a fixed share in 2 lanes byte for byte (with
#          and without --l2);
#          and bad --data-parts and --part-timeout flags refused (status 2). Workers handed different numbers of minibatches
#          would deadlock at an epoch's end if idle workers did not keep pace
#          (loom/parts.h, "Clocks"); a deadlock fails the run's time bound.
#   kill   3 workers, 2 servers, 6 parts, 3 epochs, BSP, --on-worker-failure
#          continue: once worker 1 is handed a part of epoch 1 it is stopped
#          (SIGSTOP) at a moment the scheduler's accounting says it holds a
#          part, then SIGKILLed. The scheduler says the worker's data goes
#          to the others (not that its share is lost), puts that part back
#          in the pool, a survivor finishes it in the same epoch, every part of
#          every epoch is finished exactly once, the metrics say no rows were
#          lost, and the job ends with status 0.
#   timeout  3 workers, ASP, 6 parts, 3 epochs, --part-timeout 1: worker 1 is
#          stopped (SIGSTOP; the heartbeat timeout is 30 s, so it is not declared
#          dead) at a moment it holds a part of epoch 1; the part goes back to the pool after
#          1 s and another worker finishes it; worker 1, continued, finishes it
#          too and the scheduler logs that finish as not counted; every part of
#          every epoch is finished once and the job ends with status 0.
#   restart, restart_ssp  3 workers, 2 servers, 7 parts, 3 epochs, BSP
#          (SSP(1)), a checkpoint every 40 clocks, --on-worker-failure
#          restart: worker 1 is SIGKILLed once a checkpoint of epoch 1 or
#          later is committed; the restarted scheduler rebuilds the pool
#          from the workers' states, and every part of every epoch is
#          finished exactly once across the restart (epochs before the
#          resumed one in the first run, the others in the second with the
#          parts finished before the cut), a part held at the cut by the
#          worker that held it.
#   a9a    lr on ../shared/data's a9a with 2 workers, a fixed share each and
#          --data-parts auto (8 parts): the test accuracies within 0.005 of
#          each other, both at least 0.84 (exit 77 without the data).
#
# Usage: test_parts.sh LOOM CASE [DATA_DIR]
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/ft.sh
source "$(dirname "$0")/../lib/ft.sh" # newest

LOOM=${1:?usage: $0 LOOM CASE [DATA_DIR]}
CASE=${2:?usage: $0 LOOM CASE [DATA_DIR]}
DATA=${3:-}
work_setup parts
cd "$WORK" || exit 1

# exactly_once FILE PARTS EPOCHS [LATE]: the scheduler's "finished" lines of
# FILE name every part of every epoch once, and nothing else; no finish went
# uncounted (LATE given: some did); and the workers that ended say they
# trained as many parts as the scheduler counted finished by them.
exactly_once() {
    local want got
    want=$(for ((e = 0; e < $3; e++)); do for ((p = 0; p < $2; p++)); do echo "$e $p"; done; done)
    got=$(sed -n 's/^\[scheduler\] info: parts: epoch \([0-9]*\): part \([0-9]*\) finished by worker [0-9]*$/\1 \2/p' "$1" | sort -n -k1,1 -k2,2)
    [[ $got == "$want" ]] || {
        diff <(echo "$want") <(echo "$got") | head -20 >&2
        fail "$1: the parts finished are not every part of every epoch once"
    }
    if [[ -z ${4:-} ]]; then
        grep -q "not counted" "$1" && fail "$1: a finish was not counted (no part timed out)"
    fi
    [[ $(grep -c "^\[scheduler\] info: parts: epoch [0-9]* over: $2 parts finished" "$1") == "$3" ]] ||
        fail "$1: not $3 epoch ends of $2 parts"
    local w said counted late ended=0
    for w in 0 1 2; do
        said=$(sed -n "s/^\[worker $w\] trained \([0-9]*\) parts of $2 in $3 epochs$/\1/p" "$1")
        [[ -z $said ]] && continue # it did not end (killed)
        counted=$(grep -c "^\[scheduler\] info: parts: epoch [0-9]*: part [0-9]* finished by worker $w$" "$1")
        late=$(grep -c "^\[scheduler\] info: parts: epoch [0-9]*: part [0-9]* finished late by worker $w; not counted$" "$1")
        ((said == counted + late)) ||
            fail "$1: worker $w says it trained $said parts, the scheduler counted $counted (+$late late)"
        ended=$((ended + 1))
    done
    ((ended >= 2)) || fail "$1: only $ended workers said how many parts they trained"
}

# stop_holding: stop worker 1 (SIGSTOP) at a moment it holds a part. Stopped,
# it can neither finish nor ask: what the scheduler last handed it and has not
# heard finished is what it holds (if nothing, it is continued and stopped
# again). Only a part nobody held before it in the epoch counts: on a loaded
# machine parts time out everywhere, and a part handed on after a timeout may
# still be finished first by the worker it timed out at, never timing out at
# worker 1. Sets victim, epoch and part; the deadline is the caller's.
stop_holding() {
    local held=''
    victim=$(role_pid worker 1) || { cp job.out err; fail "cannot find worker 1's process"; }
    while :; do
        kill -STOP "$victim"
        held=$(awk '/^\[scheduler\] info: parts: epoch [0-9]*: part [0-9]* to worker [0-9]*$/ {
                        k = $5 " " $7
                        if ($NF == 1) h = (k in given) ? "" : k
                        given[k] = 1
                    }
                    /^\[scheduler\] info: parts: epoch [0-9]*: part [0-9]* finished by worker 1$/ { h = "" }
                    /^\[scheduler\] .*parts: epoch [0-9]*: part [0-9]* back in the pool \(worker 1 / { h = "" }
                    /^\[scheduler\] info: parts: epoch [0-9]* over/ { h = "" }
                    END { print h }' job.out)
        [[ -n $held ]] && break
        kill -CONT "$victim"
        (($(now_ms) < deadline)) || { cp job.out err; fail "worker 1 never held a part"; }
        sleep 0.01
    done
    epoch=${held%%:*} part=${held##* }
}

# wait_part_of_epoch1: wait (60 s at most, from now: sets deadline) until the
# scheduler hands worker 1 a part of epoch 1. A part is 334 minibatches of 10
# rows, a second or more: far longer than the scheduler's log line takes to
# reach job.out, so stop_holding then finds it holding the part.
wait_part_of_epoch1() {
    deadline=$(($(now_ms) + 60000))
    # The poll interval is not a synchronisation.
    until grep -q "^\[scheduler\] info: parts: epoch 1: part [0-9]* to worker 1$" job.out; do
        kill -0 "$launcher" 2>/dev/null || { cp job.out err; fail "the job ended before epoch 1"; }
        (($(now_ms) < deadline)) || { cp job.out err; fail "worker 1 got no part of epoch 1 in 60 s"; }
        sleep 0.01
    done
}

# job_end: wait for the job; it must end with status 0 (its output in err
# for fail to show).
job_end() {
    local status
    wait "$launcher"
    status=$?
    launcher=
    cp job.out err
    ((status == 0)) || fail "exit status $status"
}

case $CASE in
exact)
    run gen lr --out data --rows 20000 --features 2000 --nnz 10 --quiet
    [[ $RC == 0 ]] || fail "gen lr: exit status $RC"
    # Refused before anything starts, naming the flag.
    expect 2 "--data-parts 0: give auto or a number of parts from 1 to 1048576" train lr \
        --train data --data-parts 0
    expect 2 "--part-timeout needs --data-parts" train lr --train data --part-timeout 5
    expect 2 "--data-parts does not work with --algo dbpg: each of its clocks" train lr \
        --train data --data-parts auto --algo dbpg
    expect 2 "--data-parts with --checkpoint-dir needs --consistency bsp or ssp" train fm \
        --train data --data-parts auto --consistency asp --workers 2 --checkpoint-dir ck
    expect 2 "--data-parts x: give auto" train fm --train data --data-parts x
    # One worker with one part cut into 2 lanes (--threads 2) trains exactly
    # what it trains on a fixed share in 2 lanes: the same lanes, orders,
    # minibatches and --l2 weights; the model files are equal byte for byte.
    head -n 3000 data >small
    for l2 in 0 0.01; do
        for how in share parts; do
            extra=()
            [[ $how == parts ]] && extra=(--data-parts 1)
            timeout 60 "$LOOM" train lr --train small --epochs 2 --minibatch 25 --workers 1 \
                --threads 2 --consistency bsp --l2 $l2 --insecure --no-status --quiet \
                --model-out model.$how "${extra[@]}" >job.$how 2>&1 ||
                { rc=$?; cp job.$how err; fail "--threads 2 on a $how (--l2 $l2): exit status $rc"; }
        done
        cmp -s model.share model.parts ||
            fail "--threads 2 --l2 $l2: one part's model differs from a fixed share's"
    done
    echo "--threads 2 on one part = on a fixed share, byte for byte (--l2 0 and 0.01)"
    for cons in bsp ssp:1 asp; do
        # BSP's run with 2 compute threads a worker: each part in 2 lanes.
        threads=1
        [[ $cons == bsp ]] && threads=2
        LOOM_VERBOSE=1 timeout 60 "$LOOM" train lr --train data --epochs 3 --workers 3 \
            --servers 2 --data-parts 7 --consistency $cons --threads $threads --insecure --no-status \
            --metrics m.$cons >job.$cons 2>&1
        rc=$?
        ((rc == 0)) || { cp job.$cons err; fail "$cons: exit status $rc"; }
        exactly_once job.$cons 7 3
        grep -q "back in the pool (worker" job.$cons && fail "$cons: a part went back to the pool"
        [[ $(wc -l <m.$cons) == 3 ]] || fail "$cons: not 3 metrics lines"
        echo "$cons: 21 parts finished once each over 3 epochs"
    done
    ;;
kill)
    run gen lr --out data --rows 20000 --features 2000 --nnz 10 --quiet
    [[ $RC == 0 ]] || fail "gen lr: exit status $RC"
    export LOOM_HEARTBEAT_MS=250 LOOM_HEARTBEAT_TIMEOUT_MS=2000 LOOM_VERBOSE=1
    "$LOOM" train lr --train data --epochs 3 --minibatch 10 --workers 3 --servers 2 \
        --data-parts 6 --consistency bsp --on-worker-failure continue --insecure --no-status \
        --metrics m >job.out 2>&1 &
    launcher=$!
    wait_part_of_epoch1
    stop_holding
    echo "worker 1 holds part $part of epoch $epoch; killing it"
    kill -KILL "$victim"
    job_end
    grep -q "^\[scheduler\] warning: parts: epoch $epoch: part $part back in the pool (worker 1 lost)" job.out ||
        fail "the scheduler did not put part $part of epoch $epoch back in the pool"
    grep -q "^\[scheduler\] warning: worker 1 .* died: .*: its data goes to the other workers (worker 1 of 3)" \
        job.out || fail "the scheduler's line about the dead worker does not say its data goes to the others"
    by=$(sed -n "s/^\[scheduler\] info: parts: epoch $epoch: part $part finished by worker \([0-9]*\)$/\1/p" job.out)
    [[ $by == 0 || $by == 2 ]] || fail "part $part of epoch $epoch finished by '$by', not a survivor"
    exactly_once job.out 6 3
    [[ $(last_value m workers_lost) == 1 ]] || fail "metrics without workers_lost 1"
    [[ $(last_value m rows_lost) == 0 ]] || fail "metrics say $(last_value m rows_lost) rows lost"
    echo "part $part of epoch $epoch went back to the pool and worker $by finished it; every part once per epoch"
    ;;
timeout)
    run gen lr --out data --rows 20000 --features 2000 --nnz 10 --quiet
    [[ $RC == 0 ]] || fail "gen lr: exit status $RC"
    export LOOM_HEARTBEAT_MS=250 LOOM_HEARTBEAT_TIMEOUT_MS=30000 LOOM_VERBOSE=1
    "$LOOM" train lr --train data --epochs 3 --minibatch 10 --workers 3 --servers 1 \
        --data-parts 6 --part-timeout 1 --consistency asp --insecure --no-status \
        >job.out 2>&1 &
    launcher=$!
    wait_part_of_epoch1
    stop_holding
    # The part worker 1 holds times out after 1 s and goes to another worker.
    until grep -q "^\[scheduler\] warning: parts: epoch $epoch: part $part back in the pool (worker 1 timed out)$" job.out; do
        (($(now_ms) < deadline)) || { kill -CONT "$victim"; cp job.out err; fail "worker 1's part never timed out"; }
        sleep 0.05
    done
    until grep -q "^\[scheduler\] info: parts: epoch $epoch: part $part finished by worker [02]$" job.out; do
        (($(now_ms) < deadline)) || { kill -CONT "$victim"; cp job.out err; fail "nobody finished part $part"; }
        sleep 0.05
    done
    kill -CONT "$victim"
    job_end
    grep -q "part $part finished late by worker 1; not counted" job.out ||
        fail "worker 1's late finish of part $part was not logged as not counted"
    exactly_once job.out 6 3 late
    echo "part $part of epoch $epoch timed out at worker 1 (stopped), another worker finished it, worker 1's late finish not counted"
    ;;
restart | restart_ssp)
    # --on-worker-failure restart with parts: the job starts again from its
    # newest checkpoint, whose workers' states say which parts of the epoch
    # were finished and held at the cut (loom/parts.h, "Checkpoints").
    # Under SSP(1) a worker can hear an epoch's end a clock before another
    # finished its last part: the cut must still put them in one epoch.
    cons=bsp
    [[ $CASE == restart_ssp ]] && cons=ssp:1
    run gen lr --out data --rows 12000 --features 2000 --nnz 10 --quiet
    [[ $RC == 0 ]] || fail "gen lr: exit status $RC"
    export LOOM_VERBOSE=1
    "$LOOM" train lr --train data --epochs 3 --minibatch 10 --workers 3 --servers 2 \
        --data-parts 7 --consistency $cons --checkpoint-dir ck --checkpoint-every 40 \
        --on-worker-failure restart --insecure --no-status --metrics m >job.out 2>&1 &
    launcher=$!
    wait_part_of_epoch1
    # A checkpoint committed after that (in epoch 1 or later), then the kill.
    # The poll interval is not a synchronisation.
    since=$(newest ck)
    until (($(newest ck) > since)); do
        kill -0 "$launcher" 2>/dev/null || { cp job.out err; fail "the job ended before a checkpoint in epoch 1"; }
        (($(now_ms) < deadline)) || { cp job.out err; fail "no checkpoint in epoch 1 in 60 s"; }
        sleep 0.01
    done
    victim=$(role_pid worker 1) || { cp job.out err; fail "cannot find worker 1's process"; }
    kill -KILL "$victim"
    job_end
    grep -q "restart 1 of 3: the job starts again from its checkpoint at clock" job.out ||
        fail "the job did not start again from a checkpoint"
    # The runs before and after the restart, and where the second resumed.
    line=$(grep -n "restart 1 of 3" job.out | head -n 1 | cut -d: -f1)
    head -n "$line" job.out >run1
    tail -n +"$line" job.out >run2
    resumed=$(grep -oE "parts: resumed in epoch [0-9]+: [0-9]+ parts finished, [0-9]+ held, [0-9]+ in the pool" run2) ||
        fail "the restarted scheduler did not say where the parts resumed"
    E=${resumed#parts: resumed in epoch }
    E=${E%%:*}
    ((E >= 1)) || fail "resumed in epoch $E, not after the first"
    # Every part of every epoch exactly once: epochs before E in the first
    # run; E and later in the second, counting the parts the workers' states
    # say were finished before the cut.
    want=$(for ((e = 0; e < 3; e++)); do for ((p = 0; p < 7; p++)); do echo "$e $p"; done; done)
    got=$({
        sed -n 's/^\[scheduler\] info: parts: epoch \([0-9]*\): part \([0-9]*\) finished by worker [0-9]*$/\1 \2/p' run1 |
            awk -v E="$E" '$1 < E'
        sed -n 's/^\[scheduler\] info: parts: epoch \([0-9]*\): part \([0-9]*\) finished by worker [0-9]*\( before the cut\)\{0,1\}$/\1 \2/p' run2
    } | sort -n -k1,1 -k2,2)
    [[ $got == "$want" ]] || {
        diff <(echo "$want") <(echo "$got") | head -20 >&2
        fail "across the restart, the parts finished are not every part of every epoch once"
    }
    # A part held at the cut is finished, in the second run, by the worker that held it.
    while read -r p w; do
        grep -q "^\[scheduler\] info: parts: epoch $E: part $p finished by worker $w$" run2 ||
            fail "part $p, held by worker $w at the cut, was not finished by it"
    done < <(sed -n "s/^\[scheduler\] info: parts: epoch $E: part \([0-9]*\) held by worker \([0-9]*\) at the cut$/\1 \2/p" run2)
    [[ $(wc -l <m) -ge 3 ]] || fail "not a metrics line per epoch"
    echo "restarted $(grep -o 'from its checkpoint at clock [0-9]*' job.out | head -n 1); $resumed; every part once per epoch"
    ;;
a9a)
    [[ -n $DATA && -f $DATA/a9a/a9a ]] || skip "$DATA/a9a not found (the shared datasets are not part of a clone)"
    acc=()
    for mode in share parts; do
        extra=()
        [[ $mode == parts ]] && extra=(--data-parts auto)
        timeout 60 "$LOOM" train lr --train "$DATA/a9a/a9a" --test "$DATA/a9a/a9a.t" --epochs 5 \
            --workers 2 --servers 1 --insecure --no-status --metrics m.$mode "${extra[@]}" \
            >job.$mode 2>&1
        rc=$?
        ((rc == 0)) || { cp job.$mode err; fail "$mode: exit status $rc"; }
        acc+=("$(last_value m.$mode test_accuracy)")
    done
    echo "a9a test accuracy after 5 epochs: fixed shares ${acc[0]}, data parts on demand ${acc[1]}"
    numeric_check 'a >= 0.84 && b >= 0.84 && a - b < 0.005 && b - a < 0.005' a="${acc[0]}" b="${acc[1]}" ||
        fail "accuracies ${acc[0]} (shares) and ${acc[1]} (parts) differ by 0.005 or more, or are below 0.84"
    ;;
*) fail "unknown case $CASE" ;;
esac
echo PASS
