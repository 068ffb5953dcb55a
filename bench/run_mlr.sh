#!/usr/bin/env bash
# run_mlr.sh: softmax regression by sufficient-vector broadcasting against the
# parameter server: bytes per clock, accuracy, time to a target accuracy.
#
#   bench/run_mlr.sh [BUILD_DIR]          (bench/run_p2p.sh calls it)
#
# Data: `loom gen mlr` with K = CLASSES classes and D = FEATURES features
# (defaults 20 and 100,000; NNZ 30 per row), ROWS + TEST_ROWS rows written
# once and split (one planted model), in a scratch directory.
#
# Runs, all with WORKERS workers (default 4), --minibatch 100, plain SGD at
# --lr LR without L2 (the arithmetic of its recorded figures), BSP unless
# said, EPOCHS epochs, one after the other in one invocation:
#   ps           --mode ps (the model on 1 server, "sum" updater)
#   svb          --mode svb, every SV to every worker
#   svb-sel      + SV selection: --select 25 of the 100 SVs of a minibatch
#   svb-sel-rm   + random multicast: --peers 2
#   svb-orpheus  + --consistency ssp:4 --average-every 100 (SSP and periodic
#                exact averaging, as Orpheus runs them)
# From each run's --metrics (JSON lines per epoch):
#   bytes/clock  the workers' bytes sent, per worker and clock: for ps all of
#                Loom's traffic (pushes of the touched rows, pulls, clocks);
#                for svb the SV messages (sv_bytes_sent) and, separately,
#                whole replicas (averaging); compared with the full K x (D+1)
#                f64 update matrix a worker would push per clock (dense), and
#                with the ps run's measured bytes;
#   accuracy     final test accuracy, and its difference from ps;
#   time         seconds to the target: the first epoch whose test accuracy
#                is >= (ps's final accuracy - 0.005).
# The machine is shared: times are comparable only within one run of this
# script (ratios); bytes do not depend on the load.
#
# Environment: SCRATCH [${TMPDIR:-/tmp}], KEEP=1 (keep the scratch dir),
#   CLASSES [20] FEATURES [100000] NNZ [30] ROWS [40000] TEST_ROWS [10000]
#   WORKERS [4] EPOCHS [6] LR [1] TIMEOUT [900] (seconds per run),
#   LOOM_HEARTBEAT_TIMEOUT_MS_BENCH [30000] (the jobs' heartbeat timeout).
set -u
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
BUILD=${1:-build}
LOOM=$BUILD/bin/loom
bench_need_exe run_mlr.sh " (build first)" "$LOOM"
CLASSES=${CLASSES:-20} FEATURES=${FEATURES:-100000} NNZ=${NNZ:-30}
ROWS=${ROWS:-40000} TEST_ROWS=${TEST_ROWS:-10000} WORKERS=${WORKERS:-4}
EPOCHS=${EPOCHS:-6} LR=${LR:-1} TIMEOUT=${TIMEOUT:-900}
WORK=$(bench_scratch loom-bench-mlr "${SCRATCH:-${TMPDIR:-/tmp}}")
[[ ${KEEP:-0} == 1 ]] || trap 'rm -rf "$WORK"' EXIT
bench_clear_env
# A machine shared by many builds can starve a node's I/O thread for seconds:
# a longer heartbeat timeout keeps such a stall from ending the run.
export LOOM_HEARTBEAT_TIMEOUT_MS=${LOOM_HEARTBEAT_TIMEOUT_MS_BENCH:-30000}

echo "generating $((ROWS + TEST_ROWS)) rows, K=$CLASSES, D=$FEATURES, nnz=$NNZ" >&2
"$LOOM" gen mlr --out "$WORK/all" --rows $((ROWS + TEST_ROWS)) --features "$FEATURES" \
    --classes "$CLASSES" --nnz "$NNZ" --seed 11 || exit 1
head -n "$ROWS" "$WORK/all" >"$WORK/train"
tail -n "$TEST_ROWS" "$WORK/all" >"$WORK/test"
rm "$WORK/all"

declare -A FLAGS=(
    [ps]="--mode ps"
    [svb]="--mode svb"
    [svb-sel]="--mode svb --select 25"
    [svb-sel-rm]="--mode svb --select 25 --peers 2"
    [svb-orpheus]="--mode svb --select 25 --peers 2 --consistency ssp:4 --average-every 100"
)
RUNS="ps svb svb-sel svb-sel-rm svb-orpheus"
for run in $RUNS; do
    echo "run $run: ${FLAGS[$run]}" >&2
    # shellcheck disable=SC2086 # the flags are split into words on purpose
    timeout "$TIMEOUT" "$LOOM" train mlr --train "$WORK/train" --test "$WORK/test" \
        --workers "$WORKERS" --epochs "$EPOCHS" --minibatch 100 --updater sgd --l2 0 --lr "$LR" \
        --quiet --insecure \
        --no-status ${FLAGS[$run]} --metrics "$WORK/$run.json" >"$WORK/$run.out" 2>&1 ||
        { echo "run $run failed:" >&2; tail "$WORK/$run.out" >&2; exit 1; }
done

field() { sed -n "s/.*\"$2\": \\([^,}]*\\).*/\\1/p" "$WORK/$1.json" | tail -1; }
# time_to RUN TARGET: time_s of the first epoch with test_accuracy >= TARGET, or "-".
time_to() {
    awk -v t="$2" '{
        match($0, /"time_s": [0-9.]+/); s = substr($0, RSTART + 10, RLENGTH - 10)
        match($0, /"test_accuracy": [0-9.]+/); a = substr($0, RSTART + 17, RLENGTH - 17)
        if (a + 0 >= t + 0) { print s; found = 1; exit }
    } END { if (!found) print "-" }' "$WORK/$1.json"
}

full=$(( (FEATURES + 1) * CLASSES * 8 ))
ps_acc=$(field ps test_accuracy)
target=$(awk -v a="$ps_acc" 'BEGIN { printf "%.4f", a - 0.005 }')
ps_clocks=$(field ps clocks)
ps_bpc=$(awk -v b="$(field ps bytes_sent)" -v c="$ps_clocks" -v w="$WORKERS" \
    'BEGIN { printf "%.0f", b / c / w }')
ps_time=$(time_to ps "$target")
echo
echo "K=$CLASSES classes, D=$FEATURES features, $NNZ non-zeros a row, $ROWS train /" \
    "$TEST_ROWS test rows, $WORKERS workers, minibatch 100, $EPOCHS epochs, target accuracy" \
    "$target (ps's final - 0.005). Full update matrix: $full bytes a worker and clock."
echo
echo "| run | bytes/clock/worker | full matrix / it | ps / it | replica bytes/clock | test accuracy | vs ps (points) | time to target (s) | ps time / it |"
echo "|---|---|---|---|---|---|---|---|---|"
for run in $RUNS; do
    clocks=$(field "$run" clocks) acc=$(field "$run" test_accuracy)
    if [[ $run == ps ]]; then
        bpc=$ps_bpc rep=0
    else
        bpc=$(awk -v b="$(field "$run" sv_bytes_sent)" -v c="$clocks" -v w="$WORKERS" \
            'BEGIN { printf "%.0f", b / c / w }')
        rep=$(awk -v b="$(field "$run" replica_bytes_sent)" -v c="$clocks" -v w="$WORKERS" \
            'BEGIN { printf "%.0f", b / c / w }')
    fi
    t=$(time_to "$run" "$target")
    awk -v run="$run" -v bpc="$bpc" -v full="$full" -v ps="$ps_bpc" -v rep="$rep" \
        -v acc="$acc" -v psacc="$ps_acc" -v t="$t" -v pst="$ps_time" 'BEGIN {
        speed = (t == "-" || pst == "-") ? "-" : sprintf("%.2fx", pst / t)
        printf "| %s | %d | %.1fx | %.2fx | %d | %.4f | %+.2f | %s | %s |\n", run, bpc,
            full / bpc, ps / bpc, rep, acc, (acc - psacc) * 100, t, speed }'
done
