#!/usr/bin/env bash
# run_p2p.sh: serverless SVM on stochastic reduce (issue 14's targets), on a9a.
#
#   [SYNC_BATCH=512] bench/run_p2p.sh [BUILD_DIR] [EPOCHS]
#
# In one run, every job with 8 workers and no server (`loom train svm --servers 0`),
# same seed, step sizes and --batch:
#   1. graph: --graph allreduce and --graph expander under --sync notify-ack. The target is
#      all-reduce's best test accuracy (worker 0's replica, every epoch) minus 0.2 points;
#      for each graph, the first epoch that reaches it and the model bytes worker 0 sends per
#      epoch (its out-degree times the model per reduce). Targets: expander's epochs
#      <= 1.2 x all-reduce's, its bytes per epoch <= 2/(N-1) of all-reduce's.
#   2. sync: the expander with worker 3 slowed on purpose (--slow 3: it computes every
#      step twice), --sync bsp against --sync notify-ack, --batch SYNC_BATCH (512: with the
#      default 64 a reduce's messages cost far more than its rows' arithmetic, and a slower
#      processor would hardly matter); three alternating runs each, medians. Target accuracy as in 1; wall time
#      (time_s of the metrics, from the start of training) to the first epoch that reaches
#      it. BSP and NOTIFY-ACK average exactly the same models (tests/integration/
#      test_p2p_reduce.c), so the epochs are equal and only the waiting differs.
#      Target: NOTIFY-ACK >= 1.3x shorter.
# The machine is shared: only ratios within this run mean anything. Prints Markdown tables
# (stdout); progress on stderr.
set -euo pipefail
BUILD=${1:-build}
EPOCHS=${2:-12}
SYNC_BATCH=${SYNC_BATCH:-512} # rows per reduce in part 2: compute a slowed worker can be slow at
LOOM=$BUILD/bin/loom
DATA=${A9A_DIR:-$(dirname "$0")/../../shared/data/a9a}
TRAIN=$DATA/a9a TEST=$DATA/a9a.t
W=8
[[ -x $LOOM ]] || { echo "no $LOOM: build first" >&2; exit 1; }
[[ -r $TRAIN && -r $TEST ]] || { echo "a9a not found in $DATA (set A9A_DIR)" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/loom-p2p-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# run NAME ARGS...: one job, its metrics in $WORK/NAME.json
run() {
    local name=$1
    shift
    echo "run $name: $*" >&2
    "$LOOM" train svm --train "$TRAIN" --test "$TEST" --workers $W --servers 0 --insecure \
        --no-status --epochs "$EPOCHS" --quiet --metrics "$WORK/$name.json" "$@" 2>"$WORK/$name.err" ||
        { cat "$WORK/$name.err" >&2; exit 1; }
    grep -o 'spectral gap [0-9.]*' "$WORK/$name.err" >"$WORK/$name.gap" || true
}
field() { sed -n "s/.*\"$2\": \\([0-9.e+-]*\\).*/\\1/p" "$WORK/$1.json"; }
best() { field "$1" test_accuracy | sort -g | tail -1; }
# first_epoch NAME TARGET: "epoch time_s" of the first epoch with test_accuracy >= TARGET
first_epoch() {
    paste <(field "$1" epoch) <(field "$1" time_s) <(field "$1" test_accuracy) |
        awk -v t="$2" '$3 >= t { print $1, $2; found = 1; exit } END { if (!found) print "none none" }'
}
per_epoch_bytes() { field "$1" bytes_sent | tail -1 | awk -v e="$EPOCHS" '{ printf "%.0f", $1 / e }'; }

run allreduce --graph allreduce --sync notify-ack
run expander --graph expander --sync notify-ack
target=$(awk -v b="$(best allreduce)" 'BEGIN { printf "%.4f", b - 0.2 }')
read -r ar_epoch _ < <(first_epoch allreduce "$target")
read -r ex_epoch _ < <(first_epoch expander "$target")
ar_bytes=$(per_epoch_bytes allreduce) ex_bytes=$(per_epoch_bytes expander)
echo "## Graphs: SVM on a9a, $W workers, --sync notify-ack, $EPOCHS epochs"
echo
echo "Target: all-reduce's best test accuracy $(best allreduce)% minus 0.2 = $target%."
echo
echo "| graph | spectral gap | best accuracy % | epochs to target | bytes/epoch (worker 0) |"
echo "|---|---|---|---|---|"
echo "| allreduce | $(awk '{print $3}' "$WORK/allreduce.gap") | $(best allreduce) | $ar_epoch | $ar_bytes |"
echo "| expander | $(awk '{print $3}' "$WORK/expander.gap") | $(best expander) | $ex_epoch | $ex_bytes |"
echo
awk -v ae="$ar_epoch" -v ee="$ex_epoch" -v ab="$ar_bytes" -v eb="$ex_bytes" -v w=$W 'BEGIN {
    if (ee == "none" || ae == "none") print "epochs ratio: n/a (target not reached)";
    else printf "epochs ratio expander/all-reduce: %.2f (target <= 1.2)\n", ee / ae;
    printf "bytes per epoch ratio: %.3f (target <= 2/(N-1) = %.3f)\n", eb / ab, 2 / (w - 1) }'
echo

# Three alternating runs of each, medians compared (the machine's load varies by the second).
for rep in 1 2 3; do
    run bsp_slow_$rep --graph expander --sync bsp --slow 3 --batch "$SYNC_BATCH"
    run na_slow_$rep --graph expander --sync notify-ack --slow 3 --batch "$SYNC_BATCH"
done
median() { sort -g | sed -n 2p; }
echo "## Synchronisation: expander, worker 3 slowed (--slow 3), --batch $SYNC_BATCH, $EPOCHS epochs"
echo
echo "Target $target% as above; three runs of each, alternating."
echo
echo "| sync | run | epochs to target | time to target s | time for $EPOCHS epochs s |"
echo "|---|---|---|---|---|"
for mode in bsp na; do
    for rep in 1 2 3; do
        read -r e t < <(first_epoch ${mode}_slow_$rep "$target")
        echo "$t" >>"$WORK/$mode.target_times"
        field ${mode}_slow_$rep time_s | tail -1 >>"$WORK/$mode.total_times"
        echo "| $mode | $rep | $e | $t | $(field ${mode}_slow_$rep time_s | tail -1) |"
    done
done
echo
awk -v b="$(median <"$WORK/bsp.target_times")" -v n="$(median <"$WORK/na.target_times")" \
    -v bt="$(median <"$WORK/bsp.total_times")" -v nt="$(median <"$WORK/na.total_times")" 'BEGIN {
    if (b == "none" || n == "none") print "time-to-target ratio: n/a (target not reached)";
    else printf "median time to target bsp/notify-ack: %.2f (target >= 1.3)\n", b / n;
    printf "median time for all epochs bsp/notify-ack: %.2f\n", bt / nt }'
