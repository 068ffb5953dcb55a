#!/usr/bin/env bash
# loom train leaves its standard input alone (as loom run does, which it
# starts): in a shell `while read` loop, a training started once per line
# runs once per line, and the lines are never echoed as a node's output
# ("[(null)] ...").
# Usage: test_train_stdin.sh LOOM
set -u
LOOM=$1
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
work_dir lr-stdin
trap remove_work EXIT
clear_env
fail_show() { cat "$WORK/out" 2>/dev/null; }

"$LOOM" gen lr --rows 200 --features 50 --nnz 5 --out "$WORK/train.svm" --quiet || fail "gen lr failed"
runs=0
while read -r seed; do
    timeout -s KILL 120 "$LOOM" train lr --train "$WORK/train.svm" --workers 1 --epochs 1 \
        --seed "$seed" >"$WORK/out" 2>&1 || fail "training with seed $seed failed"
    grep -q 'epoch .* objective' "$WORK/out" || fail "seed $seed: no progress line"
    grep -F "(null)" "$WORK/out" && fail "the loop's input was echoed as a node's output"
    runs=$((runs + 1))
done < <(printf '%s\n' 1 2 3)
[[ $runs == 3 ]] || fail "the loop ran $runs times instead of 3: loom train read its standard input"
echo PASS
