#!/usr/bin/env bash
# loom train lr with real processes, checked against the sequential reference
# (lr_check, bit for bit) and against liblinear's accuracy:
#   equiv_gen   generated data (`loom gen lr`): a one-worker job (1 and 2
#               servers) saves exactly the reference's weights, for each
#               updater under BSP and for DBPG with L1
#   a9a_equiv   the same on the real a9a data (../shared/data/a9a, never committed)
#   a9a_ssp     4 workers, 2 servers, SSP(2): test accuracy >= 0.848 (liblinear: 0.8495)
#   a9a_dbpg    DBPG with L1 on 4 workers: a sparse model of comparable accuracy
# Usage: test_lr_train.sh LOOM LR_CHECK DATA_DIR CASE. The a9a_* cases exit 77
# (skipped) with a message when DATA_DIR/a9a is absent.
set -u
source "$(dirname "$0")/../numeric_check.sh"
LOOM=$1 LR_CHECK=$2 DATA=$3 CASE=$4
TRAIN=$DATA/a9a/a9a TEST=$DATA/a9a/a9a.t
need_a9a() {
    if [[ ! -r $TRAIN || ! -r $TEST ]]; then
        echo "skipped: $DATA/a9a not found (the shared datasets are not part of a clone)"
        exit 77
    fi
}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/loom-lr.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
for var in $(compgen -e); do [[ $var == LOOM_* ]] && unset "$var"; done
fail() { echo "FAIL: $*" >&2; tail -n 30 "$WORK/job.out" >&2 2>/dev/null; exit 1; }

# accuracy MODEL: the test accuracy loom predict reports.
accuracy() {
    "$LOOM" predict lr --model "$1" --data "$TEST" | sed -n 's/.*accuracy \([0-9.]*\).*/\1/p'
}

# equivalent LOOM_FLAGS...: for each updater under BSP and for DBPG with L1, a
# one-worker job on $TRAIN saves exactly the weights of the sequential reference.
equivalent() {
    local flags consistency args
    for flags in "--updater adagrad --lr 0.1 --l2 0.0001" "--updater ftrl --lr 0.1 --l1 0.0005 --l2 0.0001" \
                 "--updater sgd --lr 0.5 --l2 0.001" "--algo dbpg --blocks 5 --delay 1 --l1 0.001"; do
        consistency="--consistency bsp --minibatch 200"
        [[ $flags == *dbpg* ]] && consistency=""
        # shellcheck disable=SC2206 # the flags are split into words on purpose
        args=(--train "$TRAIN" --epochs 2 --seed 7 $consistency $flags)
        "$LOOM" train lr "${args[@]}" --workers 1 "$@" --quiet --model-out "$WORK/m" \
            >"$WORK/job.out" 2>&1 || fail "training with $flags $* failed"
        "$LR_CHECK" "$WORK/m" -- "${args[@]}" || fail "weights differ from the reference ($flags $*)"
    done
}

case $CASE in
equiv_gen)
    "$LOOM" gen lr --rows 4000 --features 3000 --nnz 12 --seed 11 --quiet --out "$WORK/gen.svm" ||
        fail "gen lr failed"
    TRAIN=$WORK/gen.svm
    equivalent --servers 1
    equivalent --servers 2
    ;;
a9a_equiv)
    need_a9a
    equivalent --servers 1
    ;;
a9a_ssp)
    need_a9a
    "$LOOM" train lr --train "$TRAIN" --test "$TEST" --workers 4 --servers 2 --consistency ssp:2 \
        --updater adagrad --lr 0.1 --epochs 6 --metrics "$WORK/metrics.json" \
        --model-out "$WORK/m" >"$WORK/job.out" 2>&1 || fail "training failed"
    acc=$(accuracy "$WORK/m")
    echo "4 workers, SSP(2): test accuracy $acc"
    numeric_check 'a >= 0.848' a="$acc" || fail "test accuracy $acc < 0.848"
    [[ $(wc -l <"$WORK/metrics.json") -eq 6 ]] || fail "expected 6 metric lines"
    for key in epoch time_s objective train_logloss test_logloss test_accuracy test_auc nnz_weights \
               examples_per_s bytes_sent bytes_received; do
        grep -q "\"$key\": " "$WORK/metrics.json" || fail "metrics lack $key"
    done
    ;;
a9a_dbpg)
    need_a9a
    "$LOOM" train lr --train "$TRAIN" --test "$TEST" --workers 4 --servers 2 --algo dbpg --blocks 8 \
        --delay 2 --l1 20 --epochs 10 --metrics "$WORK/metrics.json" --model-out "$WORK/m" \
        >"$WORK/job.out" 2>&1 || fail "training failed"
    acc=$(accuracy "$WORK/m")
    nnz=$(head -1 "$WORK/m" | sed -n 's/.*nnz=\([0-9]*\).*/\1/p')
    dim=$(head -1 "$WORK/m" | sed -n 's/.*dim=\([0-9]*\).*/\1/p')
    echo "DBPG with L1: test accuracy $acc, $nnz of $dim weights non-zero"
    numeric_check 'a >= 0.84' a="$acc" || fail "test accuracy $acc < 0.84"
    ((nnz < dim * 3 / 4)) || fail "the L1 model is not sparse ($nnz of $dim)"
    ;;
*) echo "unknown case $CASE" >&2; exit 2 ;;
esac
echo PASS
