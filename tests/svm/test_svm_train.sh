#!/usr/bin/env bash
# loom train svm on a9a with 4 workers and no server, on the root expander, under one
# synchronisation mode: worker 0's model (loom predict svm) must reach the sequential
# reference's test accuracy (svm_seq, the same epochs and step sizes) within TOLERANCE
# points (0.5; 1.0 under async, below). Skips (77) without ../shared/data/a9a.
# Usage: test_svm_train.sh LOOM SVM_SEQ DATA_DIR bsp|async|notify-ack
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
LOOM=${1:?loom} SEQ=${2:?svm_seq} DATA=${3:?data dir} MODE=${4:?mode}
EPOCHS=4 TOLERANCE=0.5
# Under async a worker averages with whatever its neighbours have sent so far, so
# its last epoch depends on how the processes were scheduled: alone it ends at
# 84.09-84.38% against the reference's 84.40%, but once at 83.77% in the ASan
# suite with other tests loading both cores. A model that does not learn ends
# near the majority class's 76%, so a point still tells learning apart.
[[ $MODE == async ]] && TOLERANCE=1.0
TRAIN=$DATA/a9a/a9a TEST=$DATA/a9a/a9a.t
if [[ ! -r $TRAIN || ! -r $TEST ]]; then
    echo "SKIP: $TRAIN or $TEST is missing (../shared/data, see docs/TESTING.md)"
    exit 77
fi
clear_env
work_dir svm
trap remove_work EXIT
fail_show() { tail -n 20 "$WORK/train.err"; }
seq_acc=$("$SEQ" "$TRAIN" "$TEST" "$EPOCHS" 0.01 0.0001 1 | awk 'END { print $4 }')
timeout 240 "$LOOM" train svm --train "$TRAIN" --test "$TEST" --workers 4 --servers 0 \
    --graph expander --sync "$MODE" --epochs "$EPOCHS" --model-out "$WORK/m.txt" \
    --metrics "$WORK/metrics.json" 2>"$WORK/train.err" || fail "loom train svm --sync $MODE failed"
grep -q "spectral gap 0.666667" "$WORK/train.err" || fail "no spectral gap line for expander(4)"
[[ $(wc -l <"$WORK/metrics.json") == "$EPOCHS" ]] || fail "metrics: not $EPOCHS lines"
acc=$("$LOOM" predict svm --model "$WORK/m.txt" --data "$TEST" | sed -n 's/.*accuracy \([0-9.]*\)%.*/\1/p')
echo "sync $MODE: accuracy $acc%, sequential reference $seq_acc%"
numeric_check 'a >= s - t' a="$acc" s="$seq_acc" t="$TOLERANCE" ||
    fail "accuracy $acc% is more than $TOLERANCE points below the reference's $seq_acc%"
echo PASS
