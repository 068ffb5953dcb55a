#!/usr/bin/env bash
# Fault-tolerance benchmarks (docs/BENCHMARKS.md, "Checkpoints"). So far the
# checkpoint part of issue 12: the cost of one incremental checkpoint every
# 10 clocks (a full one every 10th), as the training time of the same job
# with and without --checkpoint-dir, runs interleaved and repeated (REPS), the
# median of each and their ratio measured in the same run (the machine may be
# shared, so only the ratio means something):
#   - LR on a generated 2M-row set (loom gen lr --rows 2000000), SGD + AdaGrad,
#     2 workers, 2 servers, minibatches of 1000 (1000 clocks per epoch);
#   - LDA on AP (../shared/data/ap, SOURCES.md), K = 50, 10 iterations of 10
#     clocks, 2 workers, 2 servers.
# Besides the two medians (noisy on a shared machine), the time the training
# actually waited for checkpoints is measured inside the checkpointed runs:
# each part's write time as logged, the slowest server's sum plus the slowest
# worker's, against that run's training time.
# Training time is the metrics file's time_s of the last epoch (from the end
# of data loading to the end of training), so the data reading both runs share
# does not dilute the overhead. The checkpoint directory is on the same disk
# as $TMPDIR; every file is fsync'd.
#
# Usage: bench/run_faults.sh [BUILD_DIR]   (REPS=3, ROWS=2000000, AP_DIR=...)
set -euo pipefail

build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
AP_DIR=${AP_DIR:-$here/../shared/data/ap}
REPS=${REPS:-3}
ROWS=${ROWS:-2000000}
LOOM=$build/bin/loom
[[ -x $LOOM ]] || { echo "run_faults.sh: $LOOM not found (build first)" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/loom-bench-faults.XXXXXX")
trap 'rm -rf "$work"' EXIT
for var in $(compgen -e); do [[ $var == LOOM_* ]] && unset "$var"; done

last_time() { sed -n 's/.*"time_s": \([^,}]*\).*/\1/p' "$1" | tail -1; }
# Seconds the training waited for checkpoints, from the parts' "written in X ms"
# lines (LOOM_VERBOSE=1): the slowest server's total (its I/O thread does
# nothing else meanwhile) plus the slowest worker's.
blocked() {
    awk '/checkpoint part .* written .* ms$/ {
             n = split($0, p, "/"); f = p[n]; sub(/\.part.*/, "", f)
             t[f] += $(NF - 1)
         }
         END { for (k in t) { if (k ~ /^server/ && t[k] > s) s = t[k]; if (k ~ /^worker/ && t[k] > w) w = t[k] }
               printf "%.2f\n", (s + w) / 1000 }' "$1"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# bench NAME ARGS...: REPS interleaved pairs of runs; prints a table row.
bench() {
    local name=$1
    shift
    local base=() ckpt=() waited=() bytes=0 count=0
    for ((r = 0; r < REPS; r++)); do
        "$LOOM" "$@" --metrics "$work/m" --quiet --insecure --no-status >/dev/null 2>"$work/err" ||
            { cat "$work/err" >&2; exit 1; }
        base+=("$(last_time "$work/m")")
        rm -rf "$work/ck"
        LOOM_VERBOSE=1 "$LOOM" "$@" --metrics "$work/m" --quiet --insecure --no-status \
            --checkpoint-dir "$work/ck" --checkpoint-every 10 >/dev/null 2>"$work/err" ||
            { cat "$work/err" >&2; exit 1; }
        ckpt+=("$(last_time "$work/m")")
        waited+=("$(blocked "$work/err")")
        count=$(grep -c "" <<<"$(ls -d "$work"/ck/ckpt-*)")
        bytes=$(du -sb "$work/ck" | cut -f1)
    done
    local b c wt
    b=$(printf '%s\n' "${base[@]}" | median)
    c=$(printf '%s\n' "${ckpt[@]}" | median)
    wt=$(printf '%s\n' "${waited[@]}" | median)
    printf "| %s | %.2f | %.2f | %+.1f%% | %.2f (%.1f%%) | %s | %.1f |\n" "$name" "$b" "$c" \
        "$(echo "($c / $b - 1) * 100" | bc -l)" "$wt" "$(echo "$wt / $c * 100" | bc -l)" \
        "${base[*]} / ${ckpt[*]}" "$(echo "$bytes / 1000000" | bc -l)"
    echo "  ($count checkpoint directories kept at the end)" >&2
}

echo "checkpoint every 10 clocks (full every 10th); $(nproc) cores; $(date -u +%Y-%m-%d); REPS=$REPS"
echo
echo "| job | training s, no checkpoints (median) | with checkpoints (median) | overhead (medians) | s waiting for checkpoints (median; share of training) | every run (s): without / with | MB on disk at the end |"
echo "|---|---|---|---|---|---|---|"
echo "generating $ROWS LR rows" >&2
"$LOOM" gen lr --out "$work/lr.svm" --rows "$ROWS" --nnz 10 --quiet
bench "LR, $ROWS rows, 2 workers, 2 servers" train lr --train "$work/lr.svm" --workers 2 \
    --servers 2 --updater adagrad --epochs 1 --minibatch 1000
rm -f "$work/lr.svm"
if [[ -r $AP_DIR/ap.dat ]]; then
    bench "LDA on AP, K=50, 2 workers, 2 servers" train lda --train "$AP_DIR/ap.dat" --topics 50 \
        --iterations 10 --syncs 10 --eval-every 0 --workers 2 --servers 2
else
    echo "| LDA on AP | skipped: $AP_DIR/ap.dat not found | | | | | |"
fi
