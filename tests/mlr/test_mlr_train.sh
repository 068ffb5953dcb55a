#!/usr/bin/env bash
# loom train mlr with real processes, checked against the sequential reference:
#   equiv_ps   generated data: a one-worker BSP job (1 and 2 servers) saves
#              exactly the reference's weights (mlr_check, bit for bit), with
#              the servers' AdaGrad (the default) and with --updater sgd
#   equiv_svb  the same for --mode svb, with all SVs and with SV selection, and
#              with averaging and rotation (no-ops for one worker) on
#   svb_bsp    3 workers under BSP, SVs broadcast to all: worker 0's replica is
#              exactly its log's SVs replayed from zero, every worker's log
#              holds every SV of the job once and all three replicas are equal
#              (their logs replay to the same matrix); --mode ps, svb and reduce
#              on 3 workers reach the reference's test accuracy within 0.5 points
#              (plain SGD without L2 in every mode, so the arithmetic is alike)
#   rollback   --rollback T restores exactly the model a run that stopped at
#              clock T saved (1 and 2 workers)
#   cli        bad flags, labels and files end with a clear message and exit 2 or 1
#   letter     the 26-class letter set (../shared/data/letter), every mode with its
#              defaults on 4 workers: test accuracy at least liblinear -s 0's
#              (liblinear-tools; else scikit-learn's liblinear solver, the same
#              one-vs-rest C = 1 problem) less 1 point
#   sector     the 105-class sector set (bz2, decompressed to a temporary
#              directory): svb on 3 workers likewise (ps: see docs/MLR.md)
# Usage: test_mlr_train.sh LOOM MLR_CHECK DATA_DIR CASE.
set -u
LOOM=$1 MLR_CHECK=$2 DATA=$3 CASE=$4
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
work_dir mlr
trap remove_work EXIT
clear_env
fail_show() { tail -n 30 "$WORK/job.out" 2>/dev/null; }

# gen: a training and a test file from one planted model (one file, split).
gen() {
    "$LOOM" gen mlr --out "$WORK/all" --rows 6000 --features 400 --classes 8 --nnz 15 --seed 3 ||
        fail "loom gen mlr failed"
    head -n 4500 "$WORK/all" >"$WORK/train"
    tail -n 1500 "$WORK/all" >"$WORK/test"
    TRAIN=$WORK/train TEST=$WORK/test
}

# train FLAGS...: loom train mlr, output in job.out.
train() {
    "$LOOM" train mlr --quiet "$@" >"$WORK/job.out" 2>&1 || fail "loom train mlr $* failed"
}

accuracy() {
    "$LOOM" predict mlr --model "$1" --data "$TEST" | sed -n 's/.*accuracy \([0-9.]*\).*/\1/p'
}

# equivalent FLAGS...: a one-worker BSP job saves exactly the reference's weights.
equivalent() {
    local args=(--train "$TRAIN" --epochs 2 --seed 7 --minibatch 50 --lr 0.5 "$@")
    local servers
    for servers in 1 2; do
        train "${args[@]}" --workers 1 --servers $servers --model-out "$WORK/m"
        "$MLR_CHECK" "$WORK/m" -- "${args[@]}" || fail "weights differ from the reference ($*)"
    done
}

# near REF GOT WHAT: GOT within 0.5 points of REF.
near() {
    numeric_check 'g >= r - 0.005' r="$1" g="$2" || fail "$3: accuracy $2, reference $1"
    echo "$3: accuracy $2 (reference $1)"
}

# three_workers REF_MODE "MODES" EPOCHS FLAGS...: each of MODES on 3 workers
# within 0.5 points of the one-worker reference (a one-worker job of REF_MODE,
# which equiv_ps and equiv_svb prove is the sequential reference).
three_workers() {
    local ref_mode=$1 modes=$2 epochs=$3 mode ref
    shift 3
    train --train "$TRAIN" --workers 1 --epochs "$epochs" --mode "$ref_mode" "$@" \
        --model-out "$WORK/ref"
    ref=$(accuracy "$WORK/ref")
    for mode in $modes; do
        train --train "$TRAIN" --workers 3 --epochs "$epochs" --mode "$mode" "$@" \
            --model-out "$WORK/m3"
        near "$ref" "$(accuracy "$WORK/m3")" "--mode $mode, 3 workers"
    done
}

# shared NAME FILE TESTFILE: the class ids 1..K of a LIBSVM set of
# ../shared/data as 0..K-1 (bz2 decompressed), or exit 77 when it is absent.
shared() {
    if [[ ! -r $DATA/$2 ]]; then
        echo "skipped: $DATA/$2 not found (the shared datasets are not part of a clone)"
        exit 77
    fi
    local f
    for f in "$2" "$3"; do
        if [[ $f == *.bz2 ]]; then bzcat "$DATA/$f"; else cat "$DATA/$f"; fi |
            awk '{ $1 = $1 - 1; print }' >"$WORK/$(basename "$f")"
    done
    TRAIN=$WORK/$(basename "$2") TEST=$WORK/$(basename "$3")
}

# liblinear_accuracy: the test accuracy of liblinear -s 0 (L2-regularised
# logistic regression, one-vs-rest, C = 1, no bias) trained on TRAIN, from
# liblinear-tools, or else from scikit-learn's liblinear solver on the same
# problem; exit 77 with neither.
liblinear_accuracy() {
    if command -v liblinear-train >/dev/null; then
        liblinear-train -s 0 -q "$TRAIN" "$WORK/ll.model" >/dev/null || fail "liblinear-train failed"
        liblinear-predict "$TEST" "$WORK/ll.model" "$WORK/ll.out" |
            awk '/^Accuracy/ { sub("%", "", $3); print $3 / 100 }'
        return
    fi
    /usr/bin/python3 -c 'import sklearn' 2>/dev/null || {
        echo "skipped: neither liblinear-tools nor python3-sklearn to compare with (scripts/install-deps.sh)"
        exit 77
    }
    /usr/bin/python3 - "$TRAIN" "$TEST" <<'PY' || fail "the scikit-learn reference failed"
import sys
from sklearn.datasets import load_svmlight_files
from sklearn.linear_model import LogisticRegression
xtr, ytr, xte, yte = load_svmlight_files(sys.argv[1:3])
m = LogisticRegression(solver="liblinear", C=1.0, fit_intercept=False, tol=0.01).fit(xtr, ytr)
print(m.score(xte, yte))
PY
}

case $CASE in
equiv_ps)
    gen
    equivalent
    equivalent --consistency ssp:0
    equivalent --updater sgd
    ;;
equiv_svb)
    gen
    equivalent --mode svb
    equivalent --mode svb --updater sgd
    equivalent --mode svb --select 10
    equivalent --mode svb --average-every 3 --rotate-every 5 --peers 1
    ;;
svb_bsp)
    gen
    args=(--train "$TRAIN" --epochs 2 --minibatch 50 --mode svb --workers 3)
    train "${args[@]}" --svlog "$WORK/log" --model-out "$WORK/m" --metrics "$WORK/met"
    "$MLR_CHECK" "$WORK/m" --replay 9000 "$WORK/log.0" "$WORK/log.1" "$WORK/log.2" ||
        fail "replicas differ from their SVs"
    three_workers ps "ps svb reduce" 4 --minibatch 50 --updater sgd --l2 0
    ;;
rollback)
    gen
    # 4500 rows, minibatch 100: 45 clocks an epoch with one worker, 15 with 3.
    for w in 1 2; do
        per=$(((4500 / w + 99) / 100))
        args=(--train "$TRAIN" --mode svb --workers $w --select 40 --seed 5)
        train "${args[@]}" --epochs 1 --model-out "$WORK/one"
        train "${args[@]}" --epochs 3 --svlog "$WORK/log" --rollback $per --model-out "$WORK/back"
        cmp -s "$WORK/one" "$WORK/back" || fail "$w worker(s): rollback to clock $per differs"
        train "${args[@]}" --epochs 3 --svlog "$WORK/log" --rollback 0 --model-out "$WORK/zero"
        [[ $(head -1 "$WORK/zero") == *" nnz=0 "* ]] || fail "rollback to clock 0 is not zero"
        echo "$w worker(s): rollback to clock $per restores that clock's model exactly"
    done
    ;;
cli)
    gen
    cd "$WORK" || exit 1
    # shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
    source "$(dirname "$0")/../lib/cli.sh"
    expect 2 "--select is for --mode svb" train mlr --train train --select 3
    expect 2 "--rollback needs --svlog" train mlr --train train --mode svb --rollback 3
    expect 2 "--mode takes ps, svb or reduce" train mlr --train train --mode xyz
    expect 2 "takes --consistency bsp or ssp" train mlr --train train --mode svb --consistency asp
    expect 2 "--graph is for --mode reduce" train mlr --train train --mode svb --graph ring
    expect 2 "--l2 is for --mode ps and reduce" train mlr --train train --mode svb --l2 0.1
    expect 2 "--servers 0: loom train mlr" train mlr --train train --mode svb --servers 0
    expect 1 "--graph nograph" train mlr --train train --mode reduce --graph nograph --workers 2
    printf '1 1:1\n2.5 2:1\n' >badlabel
    expect 1 "not a class id" train mlr --train badlabel --workers 1
    printf '0 1:1\n0 2:1\n' >oneclass
    expect 1 "only one class" train mlr --train oneclass --workers 1
    "$LOOM" gen mlr --out /dev/null --features 400 --classes 8 --planted-out planted || fail "gen"
    expect 1 "not a class id" predict mlr --model planted --data badlabel
    echo 'loom-mlr 1 dim=7 nnz=0 classes=2' >badmodel
    expect 1 "badmodel:1: dim=7 is not" predict mlr --model badmodel --data train
    expect 1 "rollback 100000" train mlr --train train --workers 1 --mode svb --svlog log \
        --rollback 100000 --model-out m
    # A full disk under the SV log (worker W writes LOG.W; here /dev/full): the file and
    # the system's reason, and an I/O error, not a transport failure.
    ln -s /dev/full full.0
    expect 1 "sufficient-vector log full.0: cannot write: No space left on device" \
        train mlr --train train --workers 1 --mode svb --svlog full --epochs 1
    grep -qF ": a file could not be read or written" err || fail "--svlog on /dev/full: no I/O error"
    grep -qF "transport failure" err && fail "--svlog on /dev/full: called a transport failure"
    expect 2 "--nnz (30) must be at most --features (10)" gen mlr --out x --features 10 --nnz 30
    ;;
letter)
    shared letter letter/letter.scale letter/letter.scale.t
    ref=$(liblinear_accuracy)
    for mode in ps reduce svb; do
        train --train "$TRAIN" --workers 4 --mode $mode --model-out "$WORK/m"
        got=$(accuracy "$WORK/m")
        numeric_check 'g >= r - 0.01' r="$ref" g="$got" ||
            fail "--mode $mode, its defaults, 4 workers: accuracy $got, liblinear -s 0 $ref"
        echo "--mode $mode, its defaults, 4 workers: accuracy $got (liblinear -s 0: $ref)"
    done
    ;;
sector)
    # ps moves about 300 MB an epoch here (105 x 55k weights): svb only.
    shared sector sector/sector.scale.bz2 sector/sector.t.scale.bz2
    three_workers svb "svb" 10 --minibatch 100 --updater sgd --lr 10
    ;;
*) fail "unknown case $CASE" ;;
esac
echo "ok: $CASE"
