#!/usr/bin/env bash
# A worker dies mid-run, under each --on-worker-failure policy
# (docs/FAULTS.md). A BSP job of MODEL (lr, mf, lda; 2 servers, 3 workers) is
# started by `loom train`; once it has trained a few epochs the test SIGKILLs
# worker 1's process.
#   fail (the default): the job ends (non-zero) within the heartbeat timeout
#     plus slack, the launcher naming worker 1 as its failure; no model.
#     (`loom train`'s local launcher stops the others at once; without it
#     they exit with status 3 after the heartbeat timeout, as
#     sched.kill_* and ft.scheduler_kill check.)
#   continue: the job completes (status 0) without worker 1: the scheduler
#     names it and its share (the rows or ratings it reported), the metrics'
#     last line carries "workers_lost": 1 and the same share, and the model is
#     close in quality to a fault-free run's (lr: accuracy on the whole data
#     within 0.02; mf: train rmse within 5 %; lda: its counts still consistent).
#   restart (tests/ft/test_ft_restart.sh): refused without checkpoints (loom
#     train without --checkpoint-dir, loom run without LOOM_CHECKPOINT_DIR),
#     and so is --max-restarts without it, before any process starts.
# No process may survive the job.
#
# Usage: test_ft_worker_failure.sh LOOM MODEL
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"

LOOM=${1:?usage: $0 LOOM MODEL}
MODEL=${2:?usage: $0 LOOM MODEL}
work_setup ft-workerfail
cd "$WORK" || exit 1
export LOOM_HEARTBEAT_MS=250 LOOM_HEARTBEAT_TIMEOUT_MS=2000
BOUND_MS=$((2000 + 250 + 1000 + 3000))

case $MODEL in
lr)
    run gen lr --out data --rows 30000 --features 5000 --nnz 10 --quiet
    ARGS=(train lr --train data --epochs 30 --minibatch 100)
    UNIT=rows READY="^\[worker 0\] epoch   3 "
    ;;
mf)
    run gen mf --out data --users 1000 --items 2000 --ratings 100000 --quiet
    ARGS=(train mf --train data --epochs 40 --syncs 20)
    UNIT=ratings READY="^\[worker 0\] epoch   3 "
    ;;
lda)
    run gen lda --out data --docs 3000 --vocab-size 1000 --topics 10 --doc-length 80 --quiet
    ARGS=(train lda --train data --topics 10 --iterations 40 --syncs 10 --eval-every 1)
    UNIT=documents READY="^\[worker 0\] iteration    3 "
    ;;
*) fail "unknown model $MODEL" ;;
esac
[[ $RC == 0 ]] || fail "gen $MODEL: exit status $RC"
ARGS+=(--workers 3 --servers 2 --consistency bsp --insecure --no-status)

# start_and_kill POLICY: start the job, SIGKILL worker 1 once worker 0 has
# trained a few epochs, wait for the job; sets STATUS and ELAPSED (ms from the
# kill to the end), leaves the job's output in job.out.
start_and_kill() {
    "$LOOM" "${ARGS[@]}" --on-worker-failure "$1" --metrics "m.$1" --model-out "model.$1" \
        >job.out 2>&1 &
    launcher=$!
    local deadline=$(($(now_ms) + 90000)) victim='' pid
    # Wait for the condition (a few epochs), bounded; the poll interval is not a synchronisation.
    until grep -q "$READY" job.out; do
        kill -0 "$launcher" 2>/dev/null || { cp job.out err; fail "$1: the job ended before epoch 3"; }
        (($(now_ms) < deadline)) || { cp job.out err; fail "$1: no epoch 3 within 90 s"; }
        poll_pause 0.02
    done
    KIDS=$(pgrep -P "$launcher")
    for pid in $KIDS; do
        tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "LOOM_ROLE=worker" &&
            tr '\0' '\n' <"/proc/$pid/environ" | grep -qx "LOOM_RANK=1" && victim=$pid
    done
    [[ -n $victim ]] || { cp job.out err; fail "$1: cannot find worker 1's process"; }
    local start
    start=$(now_ms)
    kill -KILL "$victim"
    wait "$launcher"
    STATUS=$?
    launcher=
    ELAPSED=$(($(now_ms) - start))
    cp job.out err
    for pid in $KIDS; do
        kill -0 "$pid" 2>/dev/null && fail "$1: process $pid outlived the job"
    done
    echo "$1: the job ended with status $STATUS ${ELAPSED} ms after worker 1 was killed"
}

# fail: the whole job ends, naming worker 1.
start_and_kill fail
((STATUS != 0)) || fail "fail: the job exited 0 although worker 1 was killed"
((ELAPSED <= BOUND_MS)) || fail "fail: took ${ELAPSED} ms, the bound is $BOUND_MS ms"
grep -q "^loom run: failed: worker 1 was killed by signal 9" job.out ||
    fail "fail: the launcher did not name worker 1 as the failure"
[[ -e model.fail ]] && fail "fail: a model was written"

# continue: the job completes without worker 1 and says what was lost.
start_and_kill continue
((STATUS == 0)) || fail "continue: exit status $STATUS"
[[ -s model.continue ]] || fail "continue: no model"
line=$(grep "^\[scheduler\] .*worker 1 (node [0-9]*) died.*going on without it" job.out) ||
    fail "continue: the scheduler did not say it goes on without worker 1"
share=$(sed -n 's/.*(worker 1 of 3, \([0-9]*\) rows, ratings or documents).*/\1/p' <<<"$line")
[[ -n $share ]] && ((share > 0)) || fail "continue: the scheduler did not name worker 1's share"
[[ $(last_value m.continue workers_lost) == 1 ]] || fail "continue: metrics without workers_lost 1"
[[ $(last_value m.continue ${UNIT}_lost) == "$share" ]] ||
    fail "continue: metrics say $(last_value m.continue ${UNIT}_lost) $UNIT lost, the scheduler $share"
for who in "worker 0" "worker 2"; do
    grep -q "^\[$who\] .*worker 1 (node [0-9]*) died; the job goes on without it" job.out ||
        fail "continue: $who did not hear of the loss"
done

# The fault-free run, and the quality of both.
run "${ARGS[@]}" --metrics m.ref --model-out model.ref
[[ $RC == 0 ]] || fail "fault-free run: exit status $RC"
if [[ $MODEL == lr ]]; then
    run predict lr --model model.ref --data data
    ref=$(sed -n 's/.*accuracy \([0-9.]*\).*/\1/p' out)
    run predict lr --model model.continue --data data
    got=$(sed -n 's/.*accuracy \([0-9.]*\).*/\1/p' out)
    echo "accuracy on the whole data: fault-free $ref, without worker 1 $got"
    awk -v a="$ref" -v b="$got" 'BEGIN { d = a - b; exit !(d < 0.02 && d > -0.02) }' ||
        fail "continue: accuracy $got, fault-free $ref"
elif [[ $MODEL == lda ]]; then
    # The counts still add up (the lost documents keep their last topics),
    # except the topic totals when worker 1 died while sending its last
    # clock to the two servers (one got it, the other not): then worker 0
    # says so and goes on.
    if [[ $(last_value m.continue counts_consistent) != true ]]; then
        grep -q "warning: topic .* a lost worker's last clock reached only some servers" job.out || {
            # What the job said of its counts, for whoever reads a failure (err and out
            # are the fault-free run's by now).
            echo "metrics' last line: $(tail -1 m.continue)" >&2
            grep -E "warning|counts|died" job.out >&2
            fail "continue: lda's counts are not consistent after the loss"
        }
        echo "the topic totals differ from the columns: worker 1's last clock was torn"
    fi
else
    ref=$(last_value m.ref train_rmse)
    got=$(last_value m.continue train_rmse)
    echo "train rmse: fault-free $ref, without worker 1 $got"
    awk -v a="$ref" -v b="$got" 'BEGIN { exit !(b < a * 1.05 && b > a * 0.95) }' ||
        fail "continue: train rmse $got, fault-free $ref"
fi

# restart (tests/ft/test_ft_restart.sh) without what it needs: refused before anything starts.
expect 2 "--on-worker-failure restart needs --checkpoint-dir" "${ARGS[@]}" --on-worker-failure restart
expect 2 "--max-restarts needs --on-worker-failure restart" "${ARGS[@]}" --max-restarts 2 \
    --checkpoint-dir ck
[[ -e ck ]] && fail "restart: a refused job created its checkpoint directory"
expect 2 "needs checkpoints to restart from: LOOM_CHECKPOINT_DIR" run --on-worker-failure restart \
    -- /bin/true
echo PASS
