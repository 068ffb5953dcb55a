#!/usr/bin/env bash
# run_lightlda.sh: Loom's LDA against LightLDA (Microsoft's, Yuan et al.,
# WWW 2015) on AP, one sampling thread each (issue 26, item 5).
#
#   bench/run_lightlda.sh LIGHTLDA_DIR [BUILD_DIR]     (or LIGHTLDA=DIR)
#
# LIGHTLDA_DIR is a LightLDA checkout built with its Makefile (it holds
# bin/lightlda and bin/dump_binary); LightLDA is not part of Loom and is not
# built here (docs/BENCHMARKS.md, "LDA against LightLDA on AP", says how it
# was built). Without it the script says so and exits 0 (skipped).
#
# AP (LDA-C, 0-based word ids) is converted to LightLDA's input: its libsvm
# text ("doc<TAB>word:count ...") and word dictionary ("word<TAB>text<TAB>
# count"), then dump_binary's block. For every K of TOPICS, ROUNDS times,
# each of these runs twice, with SHORT and LONG iterations, one after the
# other (so the ratios of a round are taken under the same load):
#   lightlda  -num_local_workers 1 -mh_steps 2 (its default), one block
#   lda_check --sampler S   (Loom's sequential reference) for S in SAMPLERS
#             (sparse only up to SPARSE_MAX_K: its iteration is O(K))
# Each run is timed by /usr/bin/time (wall, user + system CPU of all the
# run's threads, peak RSS). The figure the table compares is the CPU cost of
# an iteration, (CPU(LONG) - CPU(SHORT)) / (LONG - SHORT): it leaves out the
# start-up, loading and the final model output of both, and does not depend
# on the machine's load; "tokens/CPU-s" is AP's tokens over it. Wall-clock
# rates are printed as well (tokens x iterations / wall of the LONG run,
# start-up included) but mean little on a loaded machine. LightLDA's own
# "Training Time" lines are clock(), the CPU time of its whole process, not
# wall: their sum over the LONG run's iterations (sampling only, alias builds
# not counted) is the "own" column. The log-likelihood is that of the LONG
# run's last evaluation: Loom's at its end, LightLDA's (doc + word +
# normalisation, the three terms it prints) at the last iteration it
# evaluates (every 5th, from 0), so the two are not taken after the same
# number of iterations unless LONG - 1 is a multiple of 5.
# With JOB=1, also `loom train lda --workers 1 --servers 1 --sampler mh`
# LONG iterations (CPU and peak RSS of its largest process).
#
# Environment (defaults in brackets):
#   AP_DIR [../shared/data/ap next to the repository]   TOPICS ["1000 10000 100000"]
#   SAMPLERS ["sparse mh"]   SPARSE_MAX_K [10000]   SHORT [2]   LONG [6]
#   ROUNDS [1]   JOB [0]   TIMEOUT [1800] seconds allowed to each run
#   KEEP [""]  non-empty: keep the scratch directory (the runs' outputs)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

LIGHTLDA=${1:-${LIGHTLDA:-}}
build=${2:-build}
if [[ -z $LIGHTLDA || ! -x $LIGHTLDA/bin/lightlda || ! -x $LIGHTLDA/bin/dump_binary ]]; then
    echo "run_lightlda.sh: skipped: no LightLDA build given (LIGHTLDA_DIR with" \
        "bin/lightlda and bin/dump_binary; got '${LIGHTLDA}')" >&2
    exit 0
fi
here=$(cd "$(dirname "$0")/.." && pwd)
AP_DIR=${AP_DIR:-$here/../shared/data/ap}
TOPICS=${TOPICS:-"1000 10000 100000"}
SAMPLERS=${SAMPLERS:-"sparse mh"}
SPARSE_MAX_K=${SPARSE_MAX_K:-10000}
SHORT=${SHORT:-2}
LONG=${LONG:-6}
ROUNDS=${ROUNDS:-1}
JOB=${JOB:-0}
TIMEOUT=${TIMEOUT:-1800}
LOOM=$build/bin/loom
CHECK=$build/tests/lda/lda_check
bench_need_exe run_lightlda.sh " (build first: cmake --build $build)" "$LOOM" "$CHECK"
[[ -r $AP_DIR/ap.dat && -r $AP_DIR/vocab.txt ]] ||
    { echo "run_lightlda.sh: $AP_DIR/ap.dat or vocab.txt not found" >&2; exit 2; }
((LONG > SHORT)) || { echo "run_lightlda.sh: LONG must exceed SHORT" >&2; exit 2; }
work=$(bench_scratch loom-bench-lightlda)
[[ -n ${KEEP:-} ]] || trap 'rm -rf "$work"' EXIT
bench_clear_env

# AP in LightLDA's formats: documents numbered from 1, word ids kept (0-based).
awk '{ printf "%d\t", NR; for (i = 2; i <= NF; i++) printf "%s%s", $i, (i < NF ? " " : "") ; print "" }' \
    "$AP_DIR/ap.dat" >"$work/ap.libsvm"
awk 'NR == FNR { v[FNR - 1] = $1; next }
     { for (i = 2; i <= NF; i++) { split($i, p, ":"); c[p[1]] += p[2] } }
     END { for (w in c) printf "%d\t%s\t%d\n", w, v[w], c[w] }' \
    "$AP_DIR/vocab.txt" "$AP_DIR/ap.dat" >"$work/ap.dict"
mkdir "$work/blocks"
"$LIGHTLDA/bin/dump_binary" "$work/ap.libsvm" "$work/ap.dict" "$work/blocks" 0 >"$work/dump.out" ||
    { echo "run_lightlda.sh: dump_binary failed: $(tail -n 1 "$work/dump.out")" >&2; exit 1; }
tokens=$(awk '{ for (i = 2; i <= NF; i++) { split($i, p, ":"); n += p[2] } } END { print n }' \
    "$AP_DIR/ap.dat")
docs=$(wc -l <"$AP_DIR/ap.dat")
vocab=$(wc -l <"$AP_DIR/vocab.txt")

# timed NAME CMD...: run CMD under /usr/bin/time into $work/NAME.{time,out};
# prints "wall cpu rss_mb", or nothing when it failed.
timed() {
    local name=$1
    shift
    if timeout "$TIMEOUT" /usr/bin/time -o "$work/$name.time" -f "%e %U %S %M" "$@" \
        >"$work/$name.out" 2>&1; then
        awk '{ printf "%s %.2f %.0f\n", $1, $2 + $3, $4 / 1024 }' "$work/$name.time"
    fi
}
lightlda() { # K N: from the blocks' directory (LightLDA writes its model files there)
    (cd "$work/blocks" && timed "ll$2" "$LIGHTLDA/bin/lightlda" -num_vocabs "$vocab" \
        -num_topics "$1" -num_iterations "$2" -alpha 0.1 -beta 0.01 -mh_steps 2 \
        -num_local_workers 1 -num_blocks 1 -max_num_document "$((docs + 1))" \
        -input_dir "$work/blocks" -data_capacity 64)
}
loomseq() { # K N SAMPLER
    timed "lo$2" "$CHECK" --ll-out "$work/ll$2" -- --train "$AP_DIR/ap.dat" --topics "$1" \
        --iterations "$2" --eval-every "$2" --seed 1 --sampler "$3"
}
# row K RUN "wall cpu rss"(SHORT) "wall cpu rss"(LONG) LL OWN LOAD
row() {
    if [[ -z $3 || -z $4 ]]; then echo "| $1 | $2 | failed | | | | | | |"; return; fi
    awk -v k="$1" -v r="$2" -v s="$3" -v l="$4" -v ll="$5" -v own="$6" -v load="$7" \
        -v t="$tokens" -v n1="$SHORT" -v n2="$LONG" 'BEGIN {
            split(s, a, " "); split(l, b, " ")
            per = (b[2] - a[2]) / (n2 - n1)
            printf "| %s | %s | %.3f | %s | %s | %.0f | %.1f | %s | %.0f | %s |\n", k, r, per,
                (per > 0 ? sprintf("%.0f", t / per) : "n/a"), own, t * n2 / b[1], b[2], ll,
                b[3], load }'
}

echo "AP: $tokens tokens, $docs documents, V = $vocab; alpha 0.1, beta 0.01; iterations" \
    "$SHORT and $LONG; $(bench_machine_mem); Loom HEAD $(bench_head "$here");" \
    "LightLDA $(bench_head "$LIGHTLDA")"
echo
echo "| K | run | CPU s / iteration | tokens/CPU-s | own figure, tokens/CPU-s | tokens/s (wall, whole run) | CPU s ($LONG it.) | log-likelihood | peak RSS MB | load before |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for ((round = 1; round <= ROUNDS; round++)); do
    for K in $TOPICS; do
        load=$(bench_load)
        log "round $round, K = $K: LightLDA"
        a=$(lightlda "$K" "$SHORT")
        b=$(lightlda "$K" "$LONG")
        ll=$(awk '/doc likelihood/ { d = $NF } /word likelihood/ { w = $NF }
                  /Normalized likelihood/ { n = $NF } END { if (n != "") printf "%.6e", d + w + n }' \
            "$work/ll$LONG.out")
        own=$(awk -v t="$tokens" '/Training Time used/ { s += $(NF - 1) }
                  END { if (s > 0) printf "%.0f", t * NR_IT / s }' NR_IT="$LONG" "$work/ll$LONG.out")
        row "$K" "LightLDA, 1 thread" "$a" "$b" "${ll:-?}" "${own:-?}" "$load"
        for s in $SAMPLERS; do
            [[ $s == sparse && $K -gt $SPARSE_MAX_K ]] && continue
            load=$(bench_load)
            log "round $round, K = $K: Loom lda_check --sampler $s"
            a=$(loomseq "$K" "$SHORT" "$s")
            b=$(loomseq "$K" "$LONG" "$s")
            ll=$(awk 'END { printf "%.6e", $2 }' "$work/ll$LONG" 2>/dev/null || true)
            row "$K" "Loom lda_check, $s" "$a" "$b" "${ll:-?}" "" "$load"
        done
        if [[ $JOB == 1 ]]; then
            load=$(bench_load)
            log "round $round, K = $K: loom train lda, 1 worker + 1 server, mh"
            b=$(timed job "$LOOM" train lda --train "$AP_DIR/ap.dat" --topics "$K" \
                --iterations "$LONG" --eval-every "$LONG" --seed 1 --sampler mh --workers 1 \
                --servers 1 --top-words 0 --quiet)
            if [[ -n $b ]]; then
                awk -v k="$K" -v b="$b" -v t="$tokens" -v n="$LONG" -v load="$load" 'BEGIN {
                    split(b, x, " ")
                    printf "| %s | loom train lda, 1+1, mh | | %.0f (whole run) | | %.0f | %.1f | | %.0f | %s |\n",
                        k, t * n / x[2], t * n / x[1], x[2], x[3], load }'
            else
                echo "| $K | loom train lda, 1+1, mh | failed | | | | | | | |"
            fi
        fi
    done
done
