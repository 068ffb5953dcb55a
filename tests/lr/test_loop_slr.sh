#!/usr/bin/env bash
# bench/loop_slr (sparse LR written as a loop with its gradient in a write
# buffer and its weights prefetched per minibatch, loom/loop.h) against
# `loom train lr` at the same settings on a9a:
# 2 workers, 1 server, 3 passes, lr 0.1, minibatch 100, the sgd updater,
# asp. Both are asynchronous, so the check is a tolerance: the loop's test
# logloss after each pass within 2% of the app's (docs/BENCHMARKS.md records
# 0.5% at 4 workers), and its last test accuracy at least 0.84 (liblinear:
# 0.8495). Usage: test_loop_slr.sh LOOM LOOP_SLR DATA_DIR; exits 77 (skipped)
# when DATA_DIR/a9a is absent.
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
LOOM=$1 LOOP_SLR=$2 DATA=$3
TRAIN=$DATA/a9a/a9a TEST=$DATA/a9a/a9a.t
[[ -r $TRAIN && -r $TEST ]] || skip "$DATA/a9a not found (the shared datasets are not part of a clone)"
work_dir loop_slr
trap remove_work EXIT
clear_env
fail_show() { show_tails 20 "$WORK/loop.out" "$WORK/app.out"; }

"$LOOM" run --servers 1 --workers 2 -- "$LOOP_SLR" --train "$TRAIN" --test "$TEST" --passes 3 \
    --lr 0.1 --minibatch 100 >"$WORK/loop.out" 2>&1 || fail "loop_slr failed"
"$LOOM" train lr --train "$TRAIN" --test "$TEST" --workers 2 --servers 1 --updater sgd --lr 0.1 \
    --minibatch 100 --epochs 3 --consistency asp >"$WORK/app.out" 2>&1 || fail "loom train lr failed"
grep -q "1D over index 0: no dependence" "$WORK/loop.out" || fail "the loop was not planned 1D"
mapfile -t loop < <(sed -n 's/.*pass *[0-9]* .*test logloss \([0-9.]*\).*/\1/p' "$WORK/loop.out")
mapfile -t app < <(sed -n 's/.*epoch *[0-9]* .*test logloss \([0-9.]*\).*/\1/p' "$WORK/app.out")
[[ ${#loop[@]} == 3 && ${#app[@]} == 3 ]] || fail "expected 3 passes of each, got ${#loop[@]} and ${#app[@]}"
for p in 0 1 2; do
    numeric_check 'l <= a * 1.02 && l >= a * 0.98' "l=${loop[p]}" "a=${app[p]}" ||
        fail "pass $((p + 1)): the loop's test logloss ${loop[p]} is not within 2% of the app's ${app[p]}"
done
acc=$(sed -n 's/.*pass *3 .*  acc \([0-9.]*\).*/\1/p' "$WORK/loop.out")
numeric_check 'acc >= 0.84' "acc=$acc" || fail "the loop's test accuracy $acc is below 0.84"
echo "PASS: loop ${loop[*]}, app ${app[*]}, accuracy $acc"
