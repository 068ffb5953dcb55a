#!/usr/bin/env bash
# run_lda_threads.sh: `loom train lda --threads T` in one worker against the
# sequential sampler (issue 26, item 4: threads that help).
#
#   bench/run_lda_threads.sh [BUILD_DIR]
#
# On AP (../shared/data/ap/ap.dat), for each K in TOPICS, ROUNDS rounds of:
# the sequential sampler (tests/lda/lda_check, one thread), then
# `loom train lda` with one worker, one server and --threads T for each T in
# THREADS (and, with OLD_BUILD set, the same jobs with that build's binary,
# rows "old": e.g. a build of the commit before, to compare designs in one
# run). Per row (medians over the rounds): the CPU seconds of all the
# job's processes (user + system of every child, GNU time) per million
# tokens sampled, against the sequential's and against T = 1 of the same
# build; the wall-clock tokens/s the job reports (tokens x iterations over
# worker 0's time of them; meaningful only on a machine with T free cores);
# the peak resident set of the largest process (the worker's at these K);
# the log-likelihood after the last iteration against the sequential's,
# and the largest relative gap at any evaluation from iteration 10 on.
#
# Environment (defaults in brackets): TOPICS ["50 1000"], THREADS ["1 2 4"],
#   ITERATIONS [30], EVAL [5], ROUNDS [2], EXTRA [""]: flags for every run
#   (e.g. "--sampler mh"), AP_DIR [../shared/data/ap next to the repository],
#   SCRATCH [${TMPDIR:-/tmp}], OLD_BUILD [""], TIMEOUT [1800] s a run.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
AP_DIR=${AP_DIR:-$here/../shared/data/ap}
TOPICS=${TOPICS:-"50 1000"} THREADS=${THREADS:-"1 2 4"}
ITERATIONS=${ITERATIONS:-30} EVAL=${EVAL:-5} ROUNDS=${ROUNDS:-2} TIMEOUT=${TIMEOUT:-1800}
read -r -a extra <<<"${EXTRA:-}"
CHECK=$build/tests/lda/lda_check
builds=(new)
declare -A loom=([new]=$build/bin/loom)
[[ -n ${OLD_BUILD:-} ]] && builds+=(old) && loom[old]=$OLD_BUILD/bin/loom
bench_need_exe run_lda_threads.sh " (build first)" "$CHECK" "${loom[@]}"
[[ -x /usr/bin/time ]] || { echo "run_lda_threads.sh: needs GNU time" >&2; exit 2; }
file=$AP_DIR/ap.dat
[[ -r $file ]] || { echo "run_lda_threads.sh: $file not found (set AP_DIR)" >&2; exit 2; }
work=$(bench_scratch loom-lda-threads "${SCRATCH:-}")
trap 'rm -rf "$work"' EXIT
bench_clear_env
tokens=$(awk '{ for (i = 2; i <= NF; i++) { split($i, p, ":"); t += p[2] } } END { print t }' "$file")

# timed OUT CMD...: CMD bounded, output in OUT, "wall user sys maxrss_kb" in OUT.time.
timed() {
    local out=$1
    shift
    /usr/bin/time -f "%e %U %S %M" -o "$out.time" timeout -k 10 "$TIMEOUT" "$@" >"$out" 2>&1
}
# median: of the numbers on stdin.
median() { sort -g | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

log "load $(bench_load)"
echo "AP ($tokens tokens), ITERATIONS=$ITERATIONS EVAL=$EVAL ROUNDS=$ROUNDS EXTRA='${EXTRA:-}'; $(bench_machine_mem); $(date -u +%Y-%m-%d) at $(bench_head "$here")"
for K in $TOPICS; do
    common=(--train "$file" --topics "$K" --iterations "$ITERATIONS" --seed 1 --eval-every "$EVAL" "${extra[@]}")
    for r in $(seq "$ROUNDS"); do
        log "K=$K round $r: sequential"
        timed "$work/seq.out" "$CHECK" -- "${common[@]}" || { echo "sequential failed" >&2; exit 1; }
        read -r _ u s m <"$work/seq.out.time"
        echo "$(echo "$u + $s" | bc) $m" >>"$work/seq.$K"
        awk '/log-likelihood/ { print $3, $5 }' "$work/seq.out" >"$work/seq.ll"
        for b in "${builds[@]}"; do
            for T in $THREADS; do
                log "K=$K round $r: $b, --threads $T"
                rm -f "$work/m.json"
                timed "$work/job.out" "${loom[$b]}" train lda "${common[@]}" --workers 1 --servers 1 \
                    --threads "$T" --metrics "$work/m.json" --quiet --top-words 0 ||
                    { echo "$b --threads $T failed: $(tail -n 2 "$work/job.out")" >&2; exit 1; }
                read -r _ u s m <"$work/job.out.time"
                sed -n 's/.*"iteration": \([0-9]*\),.*"log_likelihood": \([-0-9.e+]*\).*/\1 \2/p' \
                    "$work/m.json" >"$work/job.ll"
                t=$(tail -n 1 "$work/m.json" | sed -n 's/.*"time_s": \([0-9.]*\).*/\1/p')
                ll=$(join "$work/seq.ll" "$work/job.ll" | awk '
                    { g = ($3 - $2) / ($2 < 0 ? -$2 : $2); if ($1 >= 10 && (g < 0 ? -g : g) > m) m = (g < 0 ? -g : g); f = $3 / $2 }
                    END { printf "%.4f %.4f", f, m }')
                echo "$(echo "$u + $s" | bc) $m $t $ll" >>"$work/$b.$K.$T"
            done
        done
    done
    s_cpu=$(cut -d' ' -f1 "$work/seq.$K" | median)
    s_rss=$(cut -d' ' -f2 "$work/seq.$K" | median)
    echo
    echo "#### K = $K"
    echo
    echo "| run | T | CPU s per M tokens | vs sequential | vs T = 1 | tokens/s (wall) | peak RSS MB | final LL / sequential's | largest LL gap from it. 10 |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    scpm=$(echo "scale=6; $s_cpu * 1000000 / ($tokens * $ITERATIONS)" | bc)
    printf "| sequential | 1 | %.3f | 1.00 | - | - | %.0f | 1 | 0 |\n" "$scpm" "$(echo "$s_rss / 1024" | bc -l)"
    for b in "${builds[@]}"; do
        one=
        for T in $THREADS; do
            f=$work/$b.$K.$T
            cpu=$(cut -d' ' -f1 "$f" | median) rss=$(cut -d' ' -f2 "$f" | median)
            t=$(cut -d' ' -f3 "$f" | median)
            read -r fin gap < <(tail -n 1 "$f" | cut -d' ' -f4-)
            cpm=$(echo "scale=6; $cpu * 1000000 / ($tokens * $ITERATIONS)" | bc)
            one=${one:-$cpm}
            awk -v b="$b" -v T="$T" -v cpm="$cpm" -v scpm="$scpm" -v one="$one" -v t="$t" \
                -v tok="$tokens" -v it="$ITERATIONS" -v rss="$rss" -v fin="$fin" -v gap="$gap" 'BEGIN {
                printf "| %s | %d | %.3f | %.2f | %.2f | %.0f | %.0f | %s | %s |\n",
                    b, T, cpm, cpm / scpm, cpm / one, tok * it / t, rss / 1024, fin, gap }'
        done
    done
done
log "load $(bench_load)"
