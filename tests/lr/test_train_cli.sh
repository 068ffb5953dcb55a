#!/usr/bin/env bash
# loom train lr without the shared data: refused flags, malformed files, and a
# whole generated-data run (gen -> train -> predict).
# Usage: test_train_cli.sh LOOM
set -u
LOOM=$1
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
work_dir lr-cli
trap remove_work EXIT
clear_env
fail_show() { cat "$WORK/out" 2>/dev/null; }

# expect_usage "message" ARGS...: exit 2 and the message, before any process starts.
expect_usage() {
    local want=$1
    shift
    "$LOOM" train lr "$@" >"$WORK/out" 2>&1
    local rc=$?
    ((rc == 2)) || fail "train lr $* exited $rc, expected 2"
    grep -qF -- "$want" "$WORK/out" || fail "train lr $*: no '$want' in the message"
}
# expect_error "message" ARGS...: a non-zero exit and the message, no epoch run.
expect_error() {
    local want=$1
    shift
    "$LOOM" train lr "$@" >"$WORK/out" 2>&1 && fail "train lr $* succeeded"
    grep -qF -- "$want" "$WORK/out" || fail "train lr $*: no '$want' in the message"
    if grep -q "objective" "$WORK/out"; then fail "train lr $*: trained before failing"; fi
}
printf '+1 1:1\n-1 2:1\n' >"$WORK/ok.svm"
expect_usage "--train FILE is required" --workers 2
expect_usage "unknown flag '--bogus'" --train "$WORK/ok.svm" --bogus 1
expect_usage "--workers takes a whole number from 1 to 128, not 'x'" --train "$WORK/ok.svm" --workers x
expect_usage "--consistency takes bsp, asp or ssp:S" --train "$WORK/ok.svm" --consistency maybe
for t in 0 -1 257 1000000000000 x; do
    expect_usage "--threads takes a whole number from 1 to 256, not '$t'" --train "$WORK/ok.svm" --threads "$t"
done
expect_usage "--blocks is for --algo dbpg" --train "$WORK/ok.svm" --blocks 4
expect_usage "--minibatch is for --algo sgd" --train "$WORK/ok.svm" --algo dbpg --minibatch 10
expect_usage "--l1 needs --updater ftrl or --algo dbpg" --train "$WORK/ok.svm" --l1 0.1
expect_usage "cannot read $WORK/missing.svm: No such file or directory" --train "$WORK/missing.svm"
# Outputs that cannot be written are refused before training, not after it.
expect_usage "cannot write $WORK/none/m: No such file or directory" --train "$WORK/ok.svm" \
    --model-out "$WORK/none/m"
expect_usage "cannot write $WORK: Is a directory" --train "$WORK/ok.svm" --metrics "$WORK"
expect_usage "cannot write $WORK/ok.svm/m: Not a directory" --train "$WORK/ok.svm" \
    --metrics "$WORK/ok.svm/m"

# ... and so does every node of a job started by another launcher.
"$LOOM" run --workers 2 --servers 1 -- "$LOOM" train lr --train "$WORK/ok.svm" \
    --model-out "$WORK/none/m" >"$WORK/out" 2>&1 && fail "a job with an unwritable --model-out succeeded"
grep -qF "cannot write $WORK/none/m: No such file or directory" "$WORK/out" ||
    fail "no message for an unwritable --model-out under loom run"
grep -q objective "$WORK/out" && fail "trained with an unwritable --model-out"

# Malformed data: the job stops with FILE:LINE and a non-zero status.
printf '+1 1:1 2:1\n-1 3:abc\n+1 4:1\n' >"$WORK/bad.svm"
# Checking the outputs first neither leaves a new file behind nor empties an old one.
echo "an old model" >"$WORK/old.model"
"$LOOM" train lr --train "$WORK/bad.svm" --workers 1 --servers 1 --model-out "$WORK/old.model" \
    --metrics "$WORK/new.json" >"$WORK/out" 2>&1 && fail "training on a malformed file succeeded"
grep -q "bad.svm:2: " "$WORK/out" || fail "no FILE:LINE error for the malformed file"
[[ ! -e $WORK/new.json && $(cat "$WORK/old.model") == "an old model" ]] ||
    fail "a failed job left a new --metrics file behind or emptied the old --model-out"
# ... unless asked to skip, which is reported.
"$LOOM" train lr --train "$WORK/bad.svm" --workers 1 --servers 1 --skip-bad --epochs 1 \
    >"$WORK/out" 2>&1 || fail "--skip-bad did not get past the bad line"
grep -q "skipped 1 malformed line" "$WORK/out" || fail "the skipped line was not reported"

# A feature id valid in LIBSVM but beyond a dense model (2^63 + 1) is refused
# with its line, whichever worker reads it: never sized wrong and written past.
printf '+1 1:1\n-1 2:1 9223372036854775809:1\n+1 3:1\n-1 1:1\n' >"$WORK/huge.svm"
for w in 1 2; do
    "$LOOM" train lr --train "$WORK/huge.svm" --workers $w --servers 1 --epochs 1 \
        >"$WORK/out" 2>&1 && fail "training with feature id 2^63 + 1 succeeded ($w workers)"
    grep -q "huge.svm:2: feature id 9223372036854775809 is beyond" "$WORK/out" ||
        fail "no FILE:LINE error for feature id 2^63 + 1 ($w workers)"
done

# No training examples (an empty file, only blanks and comments, every line
# skipped) is an error, as an empty --test file is: not a model of nothing,
# nor accuracy 0 and AUC 0.
: >"$WORK/empty.svm"
printf '\n  \n# a comment\n' >"$WORK/blank.svm"
printf '1 1:x\n-1 2:y\n' >"$WORK/allbad.svm"
expect_error "empty.svm: no training examples" --train "$WORK/empty.svm" --epochs 1
expect_error "blank.svm: no training examples" --train "$WORK/blank.svm" --workers 2 --epochs 1
expect_error "allbad.svm: no training examples" --train "$WORK/allbad.svm" --skip-bad --epochs 1
expect_error "blank.svm: no test examples" --train "$WORK/ok.svm" --test "$WORK/blank.svm" \
    --epochs 1

# A diverged run fails at the epoch whose objective is not finite (weight
# decay of lr * l2 = 1e15 per step overflows), with or without --model-out.
"$LOOM" train lr --train "$WORK/ok.svm" --workers 2 --updater sgd --lr 1e6 --l2 1e9 --minibatch 1 \
    --epochs 30 >"$WORK/out" 2>&1 && fail "a diverged run succeeded"
at=$(sed -n 's/.*the objective is [-a-z]* after epoch \([0-9]*\): training diverged.*/\1/p' "$WORK/out")
[[ -n $at && $(grep -c "epoch .* objective" "$WORK/out") == "$at" ]] ||
    fail "no 'training diverged' message at the last epoch run"
# A full disk under --metrics stops the run at its first line, and under
# --model-out fails it (through a link, so that a removal takes only the link).
if [[ -c /dev/full && -w /dev/full ]]; then
    ln -s /dev/full "$WORK/full"
    for case in "--metrics 1" "--model-out 3"; do
        read -r out epochs <<<"$case"
        "$LOOM" train lr --train "$WORK/ok.svm" --epochs 3 "$out" "$WORK/full" >"$WORK/out" 2>&1 &&
            fail "$out on a full disk succeeded"
        grep -q "$WORK/full.*No space left on device" "$WORK/out" || fail "$out: no message"
        [[ $(grep -c "epoch .* objective" "$WORK/out") == "$epochs" ]] ||
            fail "$out on a full disk: not $epochs epoch(s) run"
    done
    [[ -L $WORK/full ]] || fail "the link to /dev/full was removed"
fi

# Generated data, end to end (the mechanics; accuracy is tested on a9a).
"$LOOM" gen lr --rows 20000 --features 2000 --nnz 15 --seed 3 --out "$WORK/train.svm" --quiet ||
    fail "gen lr (train) failed"
"$LOOM" train lr --train "$WORK/train.svm" --test "$WORK/train.svm" --workers 2 --servers 2 \
    --epochs 3 --model-out "$WORK/model" --metrics "$WORK/metrics" >"$WORK/out" 2>&1 ||
    fail "training on generated data failed"
[[ $(grep -c '"epoch": ' "$WORK/metrics") -eq 3 ]] || fail "expected a metrics line per epoch"
[[ $(grep -c 'epoch .* objective' "$WORK/out") -eq 3 ]] || fail "expected a progress line per epoch"
"$LOOM" predict lr --model "$WORK/model" --data "$WORK/train.svm" >"$WORK/pred" || fail "predict failed"
grep -q "accuracy" "$WORK/pred" || fail "predict printed no accuracy"
echo PASS
