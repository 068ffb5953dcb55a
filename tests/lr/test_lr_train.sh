#!/usr/bin/env bash
# loom train lr with real processes, checked against the sequential reference
# (lr_check, bit for bit) and against liblinear's accuracy:
#   equiv_gen   generated data (`loom gen lr`): a one-worker job (1 and 2
#               servers) saves exactly the reference's weights, for each
#               updater under BSP and for DBPG with L1
#   threads_gen the same with --threads 3, against the reference of 3 lanes
#   a9a_equiv   the same on the real a9a data (../shared/data/a9a, never committed)
#   a9a_ssp     4 workers, 2 servers, SSP(2): test accuracy >= 0.848 (liblinear: 0.8495)
#   a9a_dbpg    DBPG with L1 on 4 workers: a sparse model of comparable accuracy
#   a9a_ftrl    FTRL-proximal with L1, one worker under BSP, against
#               ftrl_reference.py (McMahan et al.'s Algorithm 1 written from the
#               paper in Python): the same weights and test logloss to 1e-9,
#               and the objective Loom reports is the one FTRL minimises
#   l2_gen      generated data: with --l2, every updater ends at the minimiser of
#               the objective it reports (computed by lr_minimum; also with two
#               workers on fixed shares and on data parts), the objective
#               decreases, and a larger l2 gives a smaller ||w||
#   dbpg_gen    generated data: DBPG with its default step lowers the objective
#               at every epoch (1 and 2 workers) where the old default diverged,
#               and ends at the minimiser of the objective it reports
# Usage: test_lr_train.sh LOOM LR_CHECK DATA_DIR CASE [LR_MINIMUM]. The a9a_* cases exit 77
# (skipped) with a message when DATA_DIR/a9a is absent (a9a_ftrl also without python3).
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
LOOM=$1 LR_CHECK=$2 DATA=$3 CASE=$4 LR_MINIMUM=${5:-}
TRAIN=$DATA/a9a/a9a TEST=$DATA/a9a/a9a.t
need_a9a() {
    if [[ ! -r $TRAIN || ! -r $TEST ]]; then
        echo "skipped: $DATA/a9a not found (the shared datasets are not part of a clone)"
        exit 77
    fi
}
work_dir lr
trap remove_work EXIT
clear_env
fail_show() { tail -n 30 "$WORK/job.out" 2>/dev/null; }

# accuracy MODEL: the test accuracy loom predict reports.
accuracy() {
    "$LOOM" predict lr --model "$1" --data "$TEST" | sed -n 's/.*accuracy \([0-9.]*\).*/\1/p'
}

# equivalent LOOM_FLAGS...: for each updater under BSP and for DBPG with L1, a
# one-worker job on $TRAIN saves exactly the weights of the sequential reference
# (given the same LOOM_FLAGS: --threads changes the reference).
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
        "$LR_CHECK" "$WORK/m" -- "${args[@]}" "$@" ||
            fail "weights differ from the reference ($flags $*)"
    done
}

# objectives METRICS: the objective of every epoch, one per line.
objectives() { sed -n 's/.*"objective": \([^,]*\),.*/\1/p' "$1"; }

# at_minimum L2 TOL FLAGS...: train on $TRAIN with --l2 L2, then lr_minimum
# checks every weight within TOL of the regularised objective's minimiser and
# the reported last objective within 2e-3 of the minimum; sets NORM to ||w||.
at_minimum() {
    local l2=$1 tol=$2
    shift 2
    "$LOOM" train lr --train "$TRAIN" --l2 "$l2" --quiet --metrics "$WORK/met" \
        --model-out "$WORK/m" "$@" >"$WORK/job.out" 2>&1 || fail "training with $* failed"
    "$LR_MINIMUM" "$WORK/m" "$tol" -- --train "$TRAIN" --l2 "$l2" >"$WORK/min.out" ||
        fail "not at the minimiser with --l2 $l2 $*: $(cat "$WORK/min.out")"
    cat "$WORK/min.out"
    local last minimum
    last=$(objectives "$WORK/met" | tail -1)
    minimum=$(sed -n 's/.*minimum \([0-9.]*\) .*/\1/p' "$WORK/min.out")
    numeric_check 'o - m <= 2e-3' o="$last" m="$minimum" ||
        fail "last objective $last, minimum $minimum ($*)"
    numeric_check 'first > last' first="$(objectives "$WORK/met" | head -1)" last="$last" ||
        fail "the objective did not decrease ($*)"
    NORM=$(sed -n 's/.*norm \([0-9.]*\).*/\1/p' "$WORK/min.out")
}

case $CASE in
l2_gen)
    # --l2 means the objective reported: with every updater, minibatches
    # that miss features (25 rows of 1500 over 80 features) and one or two
    # workers, training ends at the minimiser of mean log loss + l2/2 ||w||^2.
    # Tolerance: 0.1 on the weights (norm ~2.9); the runs land within 0.01-0.06
    # (stochastic noise of the minibatches), while decaying only the features
    # of each minibatch (the old rule) left AdaGrad's weights 0.27 away.
    "$LOOM" gen lr --rows 1500 --features 80 --nnz 6 --seed 5 --quiet --out "$WORK/gen.svm" ||
        fail "gen lr failed"
    TRAIN=$WORK/gen.svm
    run=(--consistency bsp --minibatch 25 --epochs 60)
    for flags in "--updater adagrad --lr 0.5" "--updater sgd --lr 0.2" "--updater ftrl --lr 0.5"; do
        # shellcheck disable=SC2086 # the flags are split into words on purpose
        at_minimum 0.01 0.1 --workers 1 "${run[@]}" $flags
    done
    # Two workers whose shares hold mostly different features (the second half
    # of the rows moved to features 81-160): each decays its own features, so
    # without scaling by W / shares those would get half the l2 (0.45 away).
    awk 'NR <= 750 { print; next } { printf "%s", $1
        for (i = 2; i <= NF; i++) { split($i, a, ":"); printf " %d:%s", a[1] + 80, a[2] }
        print "" }' "$WORK/gen.svm" >"$WORK/split.svm"
    TRAIN=$WORK/split.svm
    at_minimum 0.01 0.1 --workers 2 --consistency bsp --minibatch 13 --epochs 150 --updater adagrad \
        --lr 0.5
    # The same with 4 data parts handed out on demand: parts 0-1 hold features
    # 1-80 and parts 2-3 features 81-160, so each feature's decay is scaled by
    # the parts, 4 / 2, whoever trains them (without it: half the l2 again).
    at_minimum 0.01 0.1 --workers 2 --data-parts 4 --consistency bsp --minibatch 13 --epochs 150 \
        --updater adagrad --lr 0.5 --insecure --no-status
    TRAIN=$WORK/gen.svm
    # Full batch: SGD is gradient descent (step 1 < 2 / curvature bound 1.76),
    # so the objective falls at every epoch.
    "$LOOM" train lr --train "$TRAIN" --l2 0.01 --quiet --metrics "$WORK/met" --workers 1 \
        --consistency bsp --minibatch 1500 --epochs 50 --updater sgd --lr 1 >"$WORK/job.out" 2>&1 ||
        fail "full-batch training failed"
    objectives "$WORK/met" | awk 'NR > 1 && $1 >= prev { bad = 1 } { prev = $1 } END { exit bad }' ||
        fail "full-batch SGD: the objective rose: $(objectives "$WORK/met" | tr '\n' ' ')"
    small=$NORM
    at_minimum 0.1 0.1 --workers 1 "${run[@]}" --updater adagrad --lr 0.5
    numeric_check 'big < small' big="$NORM" small="$small" ||
        fail "--l2 0.1 gives ||w|| $NORM, not below --l2 0.01's $small"
    ;;
dbpg_gen)
    # 40,000 rows over 20,000 features, 30 per row: blocks of correlated
    # features, where the old defaults (8 blocks, eta 0.25, curvature without
    # the window's overlap) diverged: objective 1.57, 28.2, 14105, ... with
    # --l2 1 and NaN at epoch 3 without l2. The curvature bound over the steps
    # in flight (lr_dbpg_window) makes every epoch lower the objective.
    "$LOOM" gen lr --rows 40000 --features 20000 --seed 2 --quiet --out "$WORK/gen.svm" ||
        fail "gen lr failed"
    for flags in "--workers 1 --l2 1" "--workers 1" "--workers 2 --l2 1"; do
        # shellcheck disable=SC2086 # the flags are split into words on purpose
        "$LOOM" train lr --train "$WORK/gen.svm" --algo dbpg --epochs 8 --quiet \
            --metrics "$WORK/met" $flags >"$WORK/job.out" 2>&1 || fail "DBPG $flags failed"
        objectives "$WORK/met" | awk 'NR > 1 && !($1 < prev) { bad = 1 } { prev = $1 }
                                      END { exit bad || NR != 8 }' ||
            fail "DBPG $flags: the objective did not fall at every epoch: $(objectives "$WORK/met" | tr '\n' ' ')"
        echo "DBPG $flags: objective $(objectives "$WORK/met" | tr '\n' ' ')"
    done
    # DBPG's l2 is on the summed loss and spares the bias, as its reported
    # objective says: with --l2 15 on 1500 rows it must end at the minimiser of
    # mean log loss + 0.01/2 ||w||^2 (lr_minimum, bias unpenalised). Tolerance
    # 1e-3 (weights of norm ~2.9): DBPG is a deterministic descent method, so
    # unlike SGD it has no minibatch noise; penalising the bias as before moved
    # it by more than that.
    "$LOOM" gen lr --rows 1500 --features 80 --nnz 6 --seed 5 --quiet --out "$WORK/small.svm" ||
        fail "gen lr failed"
    TRAIN=$WORK/small.svm
    "$LOOM" train lr --train "$TRAIN" --algo dbpg --l2 15 --epochs 200 --quiet --metrics "$WORK/met" \
        --model-out "$WORK/m" >"$WORK/job.out" 2>&1 || fail "DBPG --l2 15 failed"
    "$LR_MINIMUM" "$WORK/m" 1e-3 -- --train "$TRAIN" --l2 0.01 >"$WORK/min.out" ||
        fail "DBPG is not at the minimiser: $(cat "$WORK/min.out")"
    cat "$WORK/min.out"
    ;;
equiv_gen)
    "$LOOM" gen lr --rows 4000 --features 3000 --nnz 12 --seed 11 --quiet --out "$WORK/gen.svm" ||
        fail "gen lr failed"
    TRAIN=$WORK/gen.svm
    equivalent --servers 1
    equivalent --servers 2
    ;;
threads_gen)
    # --threads: one worker with 3 compute threads (SGD: 3 lanes whose
    # gradients meet in the update buffer; DBPG: each step's work split)
    # saves exactly the weights of the reference computed with 3 lanes. The
    # lanes do change SGD's result: a reference of 1 lane must differ.
    # --insecure: CI runs this under TSan, where the CURVE thread is reported
    # as leaked now and then (not joined when a node process ends); this test
    # is about the compute threads.
    "$LOOM" gen lr --rows 4000 --features 3000 --nnz 12 --seed 11 --quiet --out "$WORK/gen.svm" ||
        fail "gen lr failed"
    TRAIN=$WORK/gen.svm
    equivalent --threads 3 --servers 2 --insecure
    args=(--train "$TRAIN" --epochs 2 --seed 7)
    "$LR_CHECK" "$WORK/m" -- "${args[@]}" --algo dbpg --blocks 5 --delay 1 --l1 0.001 ||
        fail "DBPG with 3 threads differs from the one-thread reference"
    args+=(--consistency bsp --minibatch 200)
    "$LOOM" train lr "${args[@]}" --workers 1 --threads 3 --insecure --quiet --model-out "$WORK/m" \
        >"$WORK/job.out" 2>&1 || fail "training with 3 threads failed"
    if "$LR_CHECK" "$WORK/m" -- "${args[@]}" >/dev/null; then
        fail "3 lanes gave the weights of one: the lanes were not used"
    fi
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
a9a_ftrl)
    need_a9a
    if ! command -v python3 >/dev/null; then
        echo "skipped: python3 not found (the FTRL reference is a Python script)"
        exit 77
    fi
    ref=$(dirname "$0")/ftrl_reference.py
    # Per example, as in the paper (--minibatch 1), on the first 6000 rows so
    # that 12,000 BSP round trips stay short; then minibatches of 50 on all of
    # a9a, where the reported objective must be the one FTRL minimises.
    head -n 6000 "$TRAIN" >"$WORK/head.svm"
    for run in "$WORK/head.svm 1 0.1 1" "$TRAIN 50 0.3 2"; do
        read -r train mb alpha l1 <<<"$run"
        "$LOOM" train lr --train "$train" --test "$TEST" --workers 1 --consistency bsp --epochs 2 \
            --seed 7 --updater ftrl --minibatch "$mb" --lr "$alpha" --l1 "$l1" --quiet \
            --metrics "$WORK/met" --model-out "$WORK/m" >"$WORK/job.out" 2>&1 ||
            fail "FTRL training ($run) failed"
        python3 "$ref" "$train" "$WORK/m" --test "$TEST" --alpha "$alpha" --l1 "$l1" --epochs 2 \
            --seed 7 --minibatch "$mb" --objective "$(objectives "$WORK/met" | tail -1)" ||
            fail "FTRL differs from the reference (minibatch $mb, alpha $alpha, l1 $l1)"
    done
    ;;
*) echo "unknown case $CASE" >&2; exit 2 ;;
esac
echo PASS
