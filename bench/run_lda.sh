#!/usr/bin/env bash
# run_lda.sh: `loom train lda` sampling throughput against the sequential
# in-process reference, on the AP corpus.
#
#   bench/run_lda.sh [BUILD_DIR]
#
# For K = 50 and 1000 topics, in one run:
#   1. the sequential reference (tests/lda/lda_check: the same sampler and
#      sweeps, no Loom, one thread): tokens/s over ITERATIONS sweeps, and the
#      log-likelihood after them;
#   2. `loom train lda --eval-every 0` with 1, 2 and 4 workers (1, 1 and 2
#      servers) under --consistency bsp, ssp:1 and asp: tokens/s as the job
#      reports it (tokens x iterations / worker 0's wall time of the
#      iterations: sampling, pushing, clocks and pulls, not the start-up or
#      the final evaluation), the log-likelihood after the same number of
#      iterations, the bytes all workers sent and received, and the wall time
#      of the whole command (start-up and reading included).
# It prints a Markdown table per K (stdout) with the ratios to the sequential
# reference; progress goes to stderr.
#
# Environment (defaults in brackets):
#   AP_DIR [../shared/data/ap next to the repository]  ap.dat
#   ITERATIONS [20]  sweeps per run
#   TOPICS ["50 1000"]
#   TIMEOUT [300]    seconds allowed to each run
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
AP_DIR=${AP_DIR:-$here/../shared/data/ap}
ITERATIONS=${ITERATIONS:-20}
TOPICS=${TOPICS:-"50 1000"}
TIMEOUT=${TIMEOUT:-300}
LOOM=$build/bin/loom
CHECK=$build/tests/lda/lda_check
bench_need_exe run_lda.sh " (build first: cmake --build $build)" "$LOOM" "$CHECK"
[[ -r $AP_DIR/ap.dat ]] || { echo "run_lda.sh: $AP_DIR/ap.dat not found" >&2; exit 2; }
work=$(bench_scratch loom-bench-lda)
trap 'rm -rf "$work"' EXIT
bench_clear_env

field() { sed -n "s/.*\"$1\": \\([^,}]*\\).*/\\1/p" "$2" | tail -1; }

echo "AP: $(grep -c . "$AP_DIR/ap.dat") documents; $ITERATIONS iterations per run; $(nproc) cores; $(date -u +%Y-%m-%d)"
for K in $TOPICS; do
    common=(--train "$AP_DIR/ap.dat" --topics "$K" --iterations "$ITERATIONS" --seed 1)
    echo "sequential reference, K=$K" >&2
    start=$(date +%s.%N)
    "$CHECK" -- "${common[@]}" --eval-every 0 >"$work/seq.out"
    seq_wall=$(echo "$(date +%s.%N) - $start" | bc)
    seq_tps=$(awk '{ v = $(NF - 1) } END { print v }' "$work/seq.out")
    seq_ll=$(awk '{ v = $5 } END { print v }' "$work/seq.out")
    echo
    echo "#### K = $K topics"
    echo
    echo "| workers | servers | consistency | tokens/s | vs sequential | log-likelihood | vs sequential | sent MB | received MB | wall s |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    printf "| sequential | - | - | %.0f | 1.00 | %.6e | - | - | - | %.1f |\n" "$seq_tps" "$seq_ll" "$seq_wall"
    for W in 1 2 4; do
        S=$((W == 4 ? 2 : 1))
        for C in bsp ssp:1 asp; do
            echo "K=$K W=$W S=$S $C" >&2
            start=$(date +%s.%N)
            if ! timeout "$TIMEOUT" "$LOOM" train lda "${common[@]}" --workers "$W" --servers "$S" \
                --consistency "$C" --eval-every 0 --top-words 0 --quiet \
                --metrics "$work/m.json" >"$work/job.out" 2>&1; then
                echo "| $W | $S | $C | failed | | | | | | |"
                tail -5 "$work/job.out" >&2
                continue
            fi
            wall=$(echo "$(date +%s.%N) - $start" | bc)
            tps=$(field tokens_per_s "$work/m.json") ll=$(field log_likelihood "$work/m.json")
            sent=$(field bytes_sent "$work/m.json") recv=$(field bytes_received "$work/m.json")
            awk -v W="$W" -v S="$S" -v C="$C" -v t="$tps" -v st="$seq_tps" -v l="$ll" -v sl="$seq_ll" \
                -v s="$sent" -v r="$recv" -v wall="$wall" 'BEGIN {
                printf "| %d | %d | %s | %.0f | %.2f | %.6e | %+.2f%% | %.0f | %.0f | %.1f |\n",
                       W, S, C, t, t / st, l, (l - sl) / -sl * 100, s / 1e6, r / 1e6, wall }'
        done
    done
done
