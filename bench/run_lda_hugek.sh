#!/usr/bin/env bash
# run_lda_hugek.sh: LDA with many topics on AP (issue 26, item 3), sampler
# sparse (SparseLDA) against mh (Metropolis-Hastings, apps/lda/mh.c).
#
#   bench/run_lda_hugek.sh [BUILD_DIR]
#
# For every K of TOPICS and sampler of SAMPLERS, the sequential reference
# (tests/lda/lda_check, one thread) runs ITERATIONS sweeps; with WORKERS set,
# also `loom train lda` with that many workers and one server. Each run is
# timed by /usr/bin/time: wall seconds, CPU seconds (user + sys of all its
# processes: the figure that does not depend on what else the machine runs),
# and the peak RSS of its largest process. Prints a Markdown table (stdout):
# tokens per wall second and per CPU second over the whole run (reading,
# counting and the final evaluation included), the log-likelihood after the
# last iteration, the peak RSS, and the load average before the run.
#
# Environment (defaults in brackets):
#   AP_DIR [../shared/data/ap next to the repository]  ap.dat
#   TOPICS ["1000 10000"]   SAMPLERS ["sparse mh"]   ITERATIONS [10]
#   WORKERS [""]  workers of the job runs (none: sequential only)
#   TIMEOUT [1800] seconds allowed to each run
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
AP_DIR=${AP_DIR:-$here/../shared/data/ap}
TOPICS=${TOPICS:-"1000 10000"}
SAMPLERS=${SAMPLERS:-"sparse mh"}
ITERATIONS=${ITERATIONS:-10}
WORKERS=${WORKERS:-}
TIMEOUT=${TIMEOUT:-1800}
LOOM=$build/bin/loom
CHECK=$build/tests/lda/lda_check
bench_need_exe run_lda_hugek.sh " (build first: cmake --build $build)" "$LOOM" "$CHECK"
[[ -r $AP_DIR/ap.dat ]] || { echo "run_lda_hugek.sh: $AP_DIR/ap.dat not found" >&2; exit 2; }
work=$(bench_scratch loom-bench-hugek)
trap 'rm -rf "$work"' EXIT
bench_clear_env
tokens=$(awk '{ for (i = 2; i <= NF; i++) { split($i, p, ":"); n += p[2] } } END { print n }' \
    "$AP_DIR/ap.dat")

echo "AP: $tokens tokens, $ITERATIONS iterations; $(bench_machine_mem); HEAD $(bench_head "$here")"
echo
echo "| K | sampler | run | tokens/s (wall) | tokens/CPU-s | CPU s | log-likelihood | peak RSS MB | load before |"
echo "|---|---|---|---|---|---|---|---|---|"
# row K SAMPLER RUN LL_FILE: the table's line from $work/time ("wall user sys maxrss_kb").
row() {
    read -r wall user sys rss <"$work/time"
    awk -v k="$1" -v s="$2" -v r="$3" -v ll="$4" -v t="$tokens" -v it="$ITERATIONS" \
        -v wall="$wall" -v cpu="$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" \
        -v rss="$rss" -v load="$5" 'BEGIN {
            printf "| %s | %s | %s | %.0f | %.0f | %.1f | %s | %.0f | %s |\n",
                k, s, r, t * it / wall, t * it / cpu, cpu, ll, rss / 1024, load }'
}
for K in $TOPICS; do
    for s in $SAMPLERS; do
        args=(--train "$AP_DIR/ap.dat" --topics "$K" --iterations "$ITERATIONS"
            --eval-every "$ITERATIONS" --seed 1 --sampler "$s")
        load=$(bench_load)
        echo "K = $K, $s: sequential" >&2
        timeout "$TIMEOUT" /usr/bin/time -o "$work/time" -f "%e %U %S %M" \
            "$CHECK" --ll-out "$work/ll" -- "${args[@]}" >"$work/out" 2>&1 ||
            { echo "| $K | $s | sequential | failed: $(tail -n 1 "$work/out") |"; continue; }
        row "$K" "$s" sequential "$(awk 'END { print $2 }' "$work/ll")" "$load"
        for W in $WORKERS; do
            load=$(bench_load)
            echo "K = $K, $s: $W workers" >&2
            timeout "$TIMEOUT" /usr/bin/time -o "$work/time" -f "%e %U %S %M" \
                "$LOOM" train lda "${args[@]}" --workers "$W" --servers 1 --top-words 0 \
                --metrics "$work/job.json" >"$work/out" 2>&1 ||
                { echo "| $K | $s | $W x 1 | failed: $(grep -m1 -v '^\[' "$work/out") |"; continue; }
            ll=$(sed -n 's/.*"log_likelihood": \([^,]*\),.*/\1/p' "$work/job.json" | tail -n 1)
            row "$K" "$s" "$W x 1 job" "$ll" "$load"
        done
    done
done
