#!/usr/bin/env bash
# run_threads.sh: compute threads against worker processes (`--threads`).
#
#   bench/run_threads.sh [--rounds N] [BUILD_DIR]
#
# For each model, three shapes of the same job (1 server each):
#   1x1  one worker process, one compute thread
#   1x2  one worker process, two compute threads (--threads 2)
#   2x1  two worker processes, one thread each
# on the shared data sets (never committed; ../shared/data next to the
# repository, or $DATA):
#   lr   a9a (32,561 rows), the default flags (adagrad, minibatch 100,
#        SSP(2)), 4 epochs: examples/s
#   mf   ml-latest-small ratings (100,836), --test-fraction 0.1, the default
#        flags (rank 16, SSP(2), one clock per epoch), 10 epochs: updates/s
#   lda  AP (2,246 documents, 10,473 words, 398k tokens), 50 topics, the
#        default flags (SSP(1), one clock per iteration), 10 iterations: tokens/s
# The shapes run interleaved, round after round (1x1, 1x2, 2x1, 1x1, ...), so
# that a machine loaded by other work slows them alike. Per run: the median
# over epochs (iterations) after the first of the throughput the metrics
# line reports (summed over workers, over worker 0's time in the epoch's
# clocks), and the bytes the workers sent plus received per epoch after the
# first (from the metrics' cumulative bytes_sent and bytes_received; the
# first epoch also carries the start). Per shape: the median over rounds, and
# the ratio to 1x1 of the same round, median over rounds. The quality line
# (last epoch) shows the shapes train comparably: more lanes per clock is not
# the same algorithm as fewer. Prints a Markdown table (stdout); progress on
# stderr.
#
# Options: --rounds N (default 3); BUILD_DIR with bin/loom (default build).
# Environment: DATA [../shared/data next to the repository], SCRATCH
# [${TMPDIR:-/tmp}], KEEP=1 keeps the scratch directory.
#
# Needs bash, sed and awk. Takes about 2 minutes with 3 rounds on a 2-vCPU
# machine.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

rounds=3
build=build
while [[ $# -gt 0 ]]; do
    case $1 in
        --rounds) rounds=$2; shift ;;
        -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d'; exit 0 ;;
        -*) echo "$0: unknown option '$1'" >&2; exit 2 ;;
        *) build=$1 ;;
    esac
    shift
done
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
data=${DATA:-$(dirname "$repo")/shared/data}
loom=$(cd "$repo" && cd "$build" && pwd)/bin/loom
[[ -x $loom ]] || { echo "$0: no $loom (build first)" >&2; exit 2; }
for f in a9a/a9a ml-latest-small/ratings.csv ap/ap.dat; do
    [[ -r $data/$f ]] || { echo "$0: $data/$f not found (set DATA)" >&2; exit 2; }
done
work=$(bench_scratch loom-threads "${SCRATCH:-${TMPDIR:-/tmp}}")
[[ ${KEEP:-0} == 1 ]] || trap 'rm -rf "$work"' EXIT

declare -A args rate quality
args[lr]="lr --train $data/a9a/a9a --epochs 4"
args[mf]="mf --train $data/ml-latest-small/ratings.csv --test-fraction 0.1 --epochs 10"
args[lda]="lda --train $data/ap/ap.dat --topics 50 --iterations 10 --top-words 0"
rate[lr]=examples_per_s rate[mf]=updates_per_s rate[lda]=tokens_per_s
quality[lr]=train_logloss quality[mf]=test_rmse quality[lda]=log_likelihood
shapes=("1 1" "1 2" "2 1")

# field KEY FILE: KEY's value on every line of a metrics file.
field() { sed -n "s/.*\"$1\": \([^,}]*\).*/\1/p" "$2"; }
# summarise MODEL METRICS: "rate bytes_per_epoch quality" of one run.
summarise() {
    paste <(field "${rate[$1]}" "$2") <(field bytes_sent "$2") <(field bytes_received "$2") \
        <(field "${quality[$1]}" "$2") | awk -F'\t' '
        { r[NR] = $1; b[NR] = $2 + $3; q = $4 }
        END {
            n = 0
            for (i = 2; i <= NR; i++) {   # insertion sort of the epochs after the first
                x = r[i]; j = ++n
                while (j > 1 && v[j - 1] > x) { v[j] = v[j - 1]; j-- }
                v[j] = x
            }
            med = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
            printf "%.1f %.0f %s\n", med, (b[NR] - b[1]) / (NR - 1), q
        }'
}

results=$work/results.tsv
: >"$results"
for ((round = 1; round <= rounds; round++)); do
    for model in lr mf lda; do
        for shape in "${shapes[@]}"; do
            read -r w t <<<"$shape"
            echo "round $round: $model ${w}x$t" >&2
            # shellcheck disable=SC2086 # the model's flags are split into words on purpose
            "$loom" train ${args[$model]} --workers "$w" --threads "$t" --servers 1 --quiet \
                --metrics "$work/m.json" >"$work/out" 2>&1 || {
                cat "$work/out" >&2
                exit 1
            }
            printf '%s\t%s\t%sx%s\t%s\n' "$round" "$model" "$w" "$t" \
                "$(summarise "$model" "$work/m.json")" >>"$results"
        done
    done
done

echo "| model | shape | throughput (median) | vs 1x1 (median of rounds) | MB per epoch | vs 1x1 | last epoch |"
echo "|---|---|---|---|---|---|---|"
awk -F'\t' '
    { split($4, v, " "); key = $2 SUBSEP $3
      r[key, $1] = v[1]; b[key, $1] = v[2]; q[key, $1] = v[3]; n = $1 > n ? $1 : n }
    function median(a, k,   i, j, t, c) {
        for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    }
    END {
        split("lr mf lda", models, " "); split("1x1 1x2 2x1", shapes, " ")
        unit["lr"] = "examples/s"; unit["mf"] = "updates/s"; unit["lda"] = "tokens/s"
        for (m = 1; m <= 3; m++) for (s = 1; s <= 3; s++) {
            M = models[m]; S = shapes[s]
            for (i = 1; i <= n; i++) {
                rr[i] = r[M, S, i]; bb[i] = b[M, S, i]
                rq[i] = r[M, S, i] / r[M, "1x1", i]; bq[i] = b[M, S, i] / b[M, "1x1", i]
            }
            printf "| %s | %s | %.0f %s | %.2f | %.2f | %.2f | %s |\n", M, S, median(rr, n), unit[M],
                median(rq, n), median(bb, n) / 1e6, median(bq, n), q[M, S, n]
        }
    }' "$results"
