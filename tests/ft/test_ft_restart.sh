#!/usr/bin/env bash
# --on-worker-failure restart (docs/FAULTS.md): a one-worker BSP job of MODEL
# (lr, mf, lda, and lr_parts, fm_parts: lr and fm with data parts handed out
# on demand; two servers) that checkpoints every EVERY clocks loses its
# worker (SIGKILL) twice: once after its K-th checkpoint has been committed (K
# drawn from SEED), and once more as soon as the restarted job's worker is up.
# Each time `loom train` must stop the job and start it again from its newest
# checkpoint, and the job must end with status 0 and the model of an
# uninterrupted run, byte for byte. Then:
#   - a job that has committed no checkpoint yet starts again from the
#     beginning, to the same model;
#   - out of restarts (--max-restarts 0), the job fails naming the killed
#     worker, and writes no model;
#   - a checkpoint directory that holds an earlier job's checkpoints is
#     refused (a restart would take them for the job's own) unless the job
#     resumes from it, and resuming from it ends with the same model;
# and no process of any of these jobs survives.
#
# Usage: test_ft_restart.sh LOOM MODEL SEED   (MODEL: lr, mf, lda, lr_parts, fm_parts)
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/ft.sh
source "$(dirname "$0")/../lib/ft.sh"

LOOM=${1:?usage: $0 LOOM MODEL SEED}
MODEL=${2:?usage: $0 LOOM MODEL SEED}
SEED=${3:?usage: $0 LOOM MODEL SEED}
work_setup ft-restart
cd "$WORK" || exit 1

# lr's job is over in about a second: 8 epochs, so that it outlasts two
# kills even when the checkpoint the first waits for comes late (a commit
# takes a few syncs; the scheduler plans the next one after it).
LR_EPOCHS=8 ft_model_job "$MODEL"
run "${ARGS[@]}" --model-out ref.model
[[ $RC == 0 && -s ref.model ]] || fail "uninterrupted run: exit status $RC"

RESTART=(--checkpoint-dir ck --checkpoint-full-every 3 --on-worker-failure restart)

# start MODEL_OUT FLAGS...: the job in the background, its output in ./out and ./err.
start() {
    local model=$1
    shift
    "$LOOM" "${ARGS[@]}" "${RESTART[@]}" --model-out "$model" "$@" >out 2>err &
    launcher=$!
    # A bound against a hang, not a timing: under a loaded sanitizer build a
    # BSP clock costs tens of milliseconds whatever its work, and CI once
    # took over two minutes for the three runs of the first job, and once
    # (fm_parts, ASan, beside three other ft jobs) over four; 48 s alone.
    deadline=$((SECONDS + 600))
}

# Bounded polls for a condition; the poll interval is not a synchronisation.
# until_true WHAT COMMAND...: wait until COMMAND succeeds, or fail naming WHAT.
until_true() {
    local what=$1
    shift
    until "$@"; do
        kill -0 "$launcher" 2>/dev/null || fail "the job ended before $what"
        ((SECONDS < deadline)) || fail "no $what within the time limit"
        poll_pause 0.005
    done
}
committed() { (($(newest ck) >= $1)); }
worker_up() { role_pid worker 0 >/dev/null; }

# finish: wait for the job's end (bounded by its own --timeout-free deadline);
# sets RC, checks that none of its processes survived.
finish() {
    local kids
    kids=$(pgrep -P "$launcher")
    while kill -0 "$launcher" 2>/dev/null && ((SECONDS < deadline)); do poll_pause 0.01; done
    if kill -0 "$launcher" 2>/dev/null; then
        # What the launcher and its children are doing: once (ASan) the
        # launcher had said the job finished and went on living.
        ps -o pid,ppid,stat,wchan:32,etime,args -p "$launcher" --ppid "$launcher" >&2
        grep -h . "/proc/$launcher/stack" "/proc/$launcher/task/"*/stat >&2 2>/dev/null
        fail "the job did not end within the time limit"
    fi
    wait "$launcher"
    RC=$?
    launcher=
    for pid in $kids; do
        [[ -e /proc/$pid ]] && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$pid/stat" 2>/dev/null &&
            fail "process $pid of the job outlived it"
    done
}

# Two deaths, two restarts.
K=$((1 + SEED % 3))
start cut.model --checkpoint-every $EVERY
# The worker is found first: finding it scans /proc, which on a loaded
# machine can take longer than the job's remaining clocks once the
# checkpoint is in.
until_true "worker 0" worker_up
first=$(role_pid worker 0) || fail "worker 0 not found"
until_true "checkpoint at clock $((K * EVERY))" committed $((K * EVERY))
kill -KILL "$first"
until_true "first restart" grep -q "restart 1 of 3" err
new_worker() { pid=$(role_pid worker 0) && [[ $pid != "$first" ]]; }
until_true "restarted worker 0" new_worker
kill -KILL "$pid"
finish
[[ $RC == 0 ]] || fail "the job that lost its worker twice: exit status $RC"
from=$(sed -n 's/.*restart 1 of 3: the job starts again from its checkpoint at clock \([0-9]*\)$/\1/p' err)
[[ -n $from ]] && ((from >= K * EVERY)) ||
    fail "the first restart did not start from the checkpoint at clock $((K * EVERY)) or later"
grep -q "restart 2 of 3" err && grep -q "the job finished after 2 restart(s)" err ||
    fail "the launcher did not restart the job twice"
cmp -s ref.model cut.model || fail "the restarted job's model differs from the uninterrupted one"
echo "restarted twice ($(grep -o 'restart [12] of 3: .*' err | tr '\n' ';'))"

# No checkpoint yet (one every million clocks): the job starts from the beginning.
rm -rf ck
start scratch.model --checkpoint-every 1000000
until_true "worker 0" worker_up
kill -KILL "$(role_pid worker 0)"
finish
[[ $RC == 0 ]] || fail "the job that lost its worker before any checkpoint: exit status $RC"
grep -q "restart 1 of 3: no checkpoint committed yet; the job starts again from the beginning" err ||
    fail "the launcher does not say that the job starts again from the beginning"
cmp -s ref.model scratch.model || fail "the job restarted from the beginning has another model"

# Out of restarts: the job fails.
rm -rf ck
start none.model --checkpoint-every $EVERY --max-restarts 0
until_true "checkpoint at clock $EVERY" committed $EVERY
kill -KILL "$(role_pid worker 0)"
finish
[[ $RC == 1 ]] || fail "--max-restarts 0 and a dead worker: exit status $RC, want 1"
grep -q "no restart left (--max-restarts 0)" err && grep -q "failed: worker 0 was killed" err ||
    fail "--max-restarts 0: the launcher does not say the job is out of restarts"
[[ -e none.model ]] && fail "the job out of restarts wrote a model"

# ck holds that job's checkpoints: refused for a new job, accepted to resume from.
expect 2 "already holds a checkpoint" "${ARGS[@]}" "${RESTART[@]}" --model-out stale.model
[[ -e stale.model ]] && fail "the refused job trained anyway"
run "${ARGS[@]}" "${RESTART[@]}" --checkpoint-every $EVERY --model-out resumed.model --resume ck
[[ $RC == 0 ]] || fail "resuming with --on-worker-failure restart: exit status $RC"
cmp -s ref.model resumed.model || fail "the resumed model differs from the uninterrupted one"
echo "PASS: $MODEL restarted bit for bit"
