#!/usr/bin/env bash
# Checkpoint, kill every process, resume (docs/FAULTS.md): a one-worker BSP
# job of MODEL (lr, mf, lda, fm, or lr_parts and fm_parts: with data parts
# handed out on demand; two servers) writes a checkpoint every few
# clocks; once the K-th has been committed (K drawn from SEED) the test
# SIGKILLs every process of the job at once, wherever they are (possibly in
# the middle of writing the next checkpoint); `loom train ... --resume`
# then finishes the job, whose model must equal, byte for byte, the model of
# the same job run without interruption. The interrupted run must really
# have been interrupted (no model written), and no process may survive.
# With REPLICAS (1), every run has --replicas REPLICAS (so the checkpoints are
# cut by servers that replicate), and the checkpoint also resumes without
# replicas to the same model: a checkpoint holds each range once, whatever
# the ring that wrote it.
#
# Usage: test_ft_resume.sh LOOM MODEL SEED [REPLICAS]   (MODEL: lr, mf, lda, fm, lr_parts, fm_parts)
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/ft.sh
source "$(dirname "$0")/../lib/ft.sh"

LOOM=${1:?usage: $0 LOOM MODEL SEED}
MODEL=${2:?usage: $0 LOOM MODEL SEED}
SEED=${3:?usage: $0 LOOM MODEL SEED}
REPLICAS=${4:-0}
work_setup ft-resume
cd "$WORK" || exit 1

ft_model_job "$MODEL"
((REPLICAS)) && ARGS+=(--replicas "$REPLICAS")

# The uninterrupted run.
run "${ARGS[@]}" --model-out ref.model
[[ $RC == 0 && -s ref.model ]] || fail "uninterrupted run: exit status $RC"

# The interrupted run: killed once its K-th checkpoint (K in 2..6) is committed.
# (Commits trail the training by the time the disk takes to sync: the jobs
# above are long enough, hundreds of clocks, for that not to reach the end.)
K=$((2 + SEED % 5))
"$LOOM" "${ARGS[@]}" --model-out cut.model --checkpoint-dir ck --checkpoint-every $EVERY \
    --checkpoint-full-every 3 >out 2>err &
launcher=$!
deadline=$((SECONDS + 120))
# Wait for the condition (a committed checkpoint), bounded; the poll interval is not a synchronisation.
while (($(newest ck) < K * EVERY)) && kill -0 "$launcher" 2>/dev/null && ((SECONDS < deadline)); do
    poll_pause 0.005
done
# shellcheck disable=SC2046 # one pid a word
kill_gone $(pgrep -P "$launcher") "$launcher"
wait "$launcher" 2>/dev/null
launcher=
(($(newest ck) >= K * EVERY)) || fail "no checkpoint at clock $((K * EVERY)) within the time limit"
[[ -e cut.model ]] && fail "the job finished before it was killed: make it longer"
echo "killed after the checkpoint at clock $(newest ck) (K=$K)"

run checkpoint verify ck
[[ $RC == 0 ]] || fail "checkpoint verify after the kill: exit status $RC"
cp -r ck ck_copy

# Resume into the same directory, and compare.
run "${ARGS[@]}" --model-out resumed.model --checkpoint-dir ck --checkpoint-every $EVERY \
    --checkpoint-full-every 3 --resume ck
[[ $RC == 0 ]] || fail "resumed run: exit status $RC"
cmp -s ref.model resumed.model || fail "the resumed model differs from the uninterrupted one"
if ((REPLICAS)); then
    NOREPL=("${ARGS[@]:0:${#ARGS[@]}-2}") # the same flags without --replicas
    run "${NOREPL[@]}" --model-out norepl.model --resume ck_copy
    [[ $RC == 0 ]] || fail "resumed without replicas: exit status $RC"
    cmp -s ref.model norepl.model || fail "resumed without replicas, the model differs"
fi
if [[ $MODEL == mf ]]; then
    # A clock's ratings and merge depend on --steps: another --steps is refused.
    OTHER=()
    for a in "${ARGS[@]}"; do [[ ${OTHER[-1]:-} == --steps ]] && OTHER+=(3) || OTHER+=("$a"); done
    run "${OTHER[@]}" --model-out other.model --resume ck
    [[ $RC != 0 ]] && grep -qF -- "--steps" err || fail "resume with another --steps: exit status $RC"
    [[ -e other.model ]] && fail "resume with another --steps trained anyway"
fi
if [[ $MODEL == *_parts ]]; then
    # The workers' states are of 7 (6) parts: another --data-parts is refused.
    OTHER=()
    prev=
    for a in "${ARGS[@]}"; do
        [[ $prev == --data-parts ]] && OTHER+=(5) || OTHER+=("$a")
        prev=$a
    done
    run "${OTHER[@]}" --model-out other.model --resume ck
    [[ $RC != 0 ]] && grep -qF "the checkpoint does not fit this job" err ||
        fail "resume with another --data-parts: exit status $RC"
    [[ -e other.model ]] && fail "resume with another --data-parts trained anyway"
fi
# The newest checkpoint exports as a model file its app reads.
run checkpoint export ck --out exported.model
[[ $RC == 0 && -s exported.model ]] || fail "checkpoint export: exit status $RC"
if [[ $MODEL != lda ]]; then
    run predict "${MODEL%_parts}" --model exported.model --data data
    [[ $RC == 0 ]] || fail "loom predict ${MODEL%_parts} cannot use the exported model"
fi
echo "PASS: $MODEL resumed bit for bit"
