#!/usr/bin/env bash
# run_loop_lda.sh: LDA on the loop API (bench/loop_lda.c) against the
# hand-written rotation of `loom train lda --schedule rotation`, on AP.
#
#   bench/run_loop_lda.sh [BUILD_DIR]
#
# For each K, one after the other, WORKERS workers and 1 server, seed 1:
#   1. both with the log-likelihood after every pass: a table of the two per
#      pass and their relative gap, and the mean tokens/s each reports (the
#      passes' time, not the evaluations');
#   2. both with the log-likelihood after the last pass only, under
#      /usr/bin/time: wall, user and system seconds of all the job's
#      processes (`loom run` / `loom train` and the nodes it starts), peak
#      RSS of the largest, and CPU microseconds (user + system) per token
#      sampled (tokens x passes; start-up, reading and the counting pass
#      included).
# Markdown on stdout, progress on stderr.
#
# Environment (defaults in brackets):
#   AP_DIR [../shared/data/ap next to the repository]  ap.dat
#   TOPICS ["50 1000"]   PASSES [20]   WORKERS [4]
#   DELAY [10000]        loop_lda's --delay: the topic totals' buffer bound
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
AP_DIR=${AP_DIR:-$here/../shared/data/ap}
TOPICS=${TOPICS:-"50 1000"}
PASSES=${PASSES:-20}
WORKERS=${WORKERS:-4}
DELAY=${DELAY:-10000}
LOOM=$build/bin/loom
LOOP=$build/bin/loop_lda
bench_need_exe run_loop_lda.sh " (build first: cmake --build $build)" "$LOOM" "$LOOP"
[[ -r $AP_DIR/ap.dat ]] || { echo "run_loop_lda.sh: $AP_DIR/ap.dat not found" >&2; exit 2; }
work=$(bench_scratch loom-bench-loop-lda)
trap 'rm -rf "$work"' EXIT
bench_clear_env
TOKENS=435838 # AP's (../shared/data/SOURCES.md)

app() { # app K EVAL OUT
    /usr/bin/time -f "%e %U %S %M" -o "$3.time" "$LOOM" train lda --train "$AP_DIR/ap.dat" \
        --topics "$1" --iterations "$PASSES" --eval-every "$2" --seed 1 --schedule rotation \
        --workers "$WORKERS" --servers 1 --top-words 0 >"$3" 2>&1
}
loop() { # loop K EVAL OUT
    /usr/bin/time -f "%e %U %S %M" -o "$3.time" "$LOOM" run --servers 1 --workers "$WORKERS" -- \
        "$LOOP" --train "$AP_DIR/ap.dat" --topics "$1" --passes "$PASSES" --eval-every "$2" \
        --seed 1 --delay "$DELAY" >"$3" 2>&1
}
cpu_row() { # cpu_row NAME TIMEFILE
    awk -v name="$1" -v t="$TOKENS" -v p="$PASSES" '{
        printf "| %s | %.2f | %.2f | %.2f | %.0f | %.2f |\n", name, $1, $2, $3, $4 / 1024,
            ($2 + $3) * 1e6 / (t * p) }' "$2"
}

echo "AP, $WORKERS workers, 1 server, $PASSES passes, seed 1, loop_lda --delay $DELAY;" \
    "$(bench_machine); load $(bench_load) at the start; $(date -u '+%Y-%m-%d %H:%M') UTC;" \
    "commit $(bench_head "$here")"
for K in $TOPICS; do
    log "K=$K: the log-likelihood per pass"
    app "$K" 1 "$work/app.out"
    loop "$K" 1 "$work/loop.out"
    sed -n 's/.*iteration *\([0-9]*\)  log-likelihood \([^ ]*\)  \([0-9]*\) tokens.*/\1 \2 \3/p' \
        "$work/app.out" >"$work/app.ll"
    sed -n 's/.*pass *\([0-9]*\)  log-likelihood \([^ ]*\)  \([0-9]*\) tokens.*/\1 \2 \3/p' \
        "$work/loop.out" >"$work/loop.ll"
    echo
    echo "#### K = $K"
    echo
    echo "| pass | \`loom train lda --schedule rotation\` | loop API | gap |"
    echo "|---|---|---|---|"
    join "$work/app.ll" "$work/loop.ll" | awk '{
        g = ($4 - $2) / -$2 * 100; a = g < 0 ? -g : g; if (a > m) m = a
        printf "| %d | %.6e | %.6e | %+.3f%% |\n", $1, $2, $4, g
        at += $3; lt += $5; n++ }
        END { printf "\nlargest gap %.3f%%; mean tokens/s of the passes: app %.0f, loop %.0f (%.2fx)\n",
              m, at / n, lt / n, (lt / n) / (at / n) }'
    log "K=$K: CPU, the log-likelihood at the end only"
    app "$K" 0 "$work/app0.out"
    loop "$K" 0 "$work/loop0.out"
    echo
    echo "| run | wall s | user s | sys s | peak RSS MB | CPU us per token |"
    echo "|---|---|---|---|---|---|"
    cpu_row "\`loom train lda --schedule rotation\`" "$work/app0.out.time"
    cpu_row "loop API" "$work/loop0.out.time"
done
echo
echo "load $(bench_load) at the end"
