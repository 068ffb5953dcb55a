#!/usr/bin/env bash
# run_lda_scale.sh: how LDA's cost grows with the corpus, the topics and the
# workers (issue 26), against the sequential sampler.
#
#   bench/run_lda_scale.sh [--quick] [BUILD_DIR]
#
# Corpora: AP (../shared/data/ap/ap.dat, 436k tokens), and `loom gen lda`
# corpora of about 10M tokens (50,000 documents of 200 tokens, V = 50,000) and
# 50M tokens (250,000 documents, V = 100,000). For each corpus, each K and
# each number of workers W, in one run:
#   1. the sequential sampler (tests/lda/lda_check: the same sampler, one
#      process, no Loom);
#   2. `loom train lda` with W workers and ceil(W / 4) servers, data parallel
#      (SSP(1)) and with --schedule rotation.
# Each row gives: tokens/s as the job reports it (tokens x iterations over
# worker 0's time of the iterations, evaluations included) and against the
# sequential's (its sampling time); the sampling tokens/s of both (tokens
# sampled over the time of the iterations without the evaluations, as each
# program prints it) against each other; the
# log-likelihood after the last iteration against the sequential's, and the
# largest relative gap at any evaluation from iteration 20 on; bytes sent by
# all workers per token sampled; the peak resident set of the largest
# process; and the CPU seconds of all processes of the job (user + system of
# every child, from getrusage through GNU time) per million tokens sampled,
# against the sequential's. The last figure does not depend on how many cores
# the machine has: it is the one to judge scaling by on a small machine (8
# workers at 1.25x the sequential's CPU per token would run 6x faster on 8
# free cores).
#
# Environment (defaults in brackets):
#   CORPORA ["ap gen10m gen50m"]   TOPICS ["50 1000 10000 100000"]
#   WORKERS ["1 2 4 8"]            SCHEDULES ["data rotation"]
#   ITERATIONS [30]   EVAL [5] (evaluate every EVAL iterations, both sides)
#   CONSISTENCY [ssp:1]: the data-parallel rows' --consistency
#   A name in CORPORA that is a readable file is taken as a corpus file.
#   AP_DIR [../shared/data/ap next to the repository]   SCRATCH [${TMPDIR:-/tmp}]
#   CORPUS_DIR [the run's scratch, deleted at the end]: where the generated
#   corpora are written, and found by later runs (gen50m takes minutes);
#   TIMEOUT [3600] seconds per run; a run that fails or times out is a row
#   saying so, and the script goes on.
# --quick: AP only, K = 50 and 1000, 1 and 2 workers, 10 iterations (minutes).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

build=build quick=0
for arg; do
    case $arg in
        --quick) quick=1 ;;
        -*) echo "usage: bench/run_lda_scale.sh [--quick] [BUILD_DIR]" >&2; exit 2 ;;
        *) build=$arg ;;
    esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
AP_DIR=${AP_DIR:-$here/../shared/data/ap}
if [[ $quick == 1 ]]; then
    CORPORA=${CORPORA:-ap} TOPICS=${TOPICS:-"50 1000"} WORKERS=${WORKERS:-"1 2"}
    ITERATIONS=${ITERATIONS:-10}
fi
CORPORA=${CORPORA:-"ap gen10m gen50m"}
TOPICS=${TOPICS:-"50 1000 10000 100000"}
WORKERS=${WORKERS:-"1 2 4 8"}
SCHEDULES=${SCHEDULES:-"data rotation"}
ITERATIONS=${ITERATIONS:-30}
EVAL=${EVAL:-5}
CONSISTENCY=${CONSISTENCY:-ssp:1}
TIMEOUT=${TIMEOUT:-3600}
LOOM=$build/bin/loom
CHECK=$build/tests/lda/lda_check
bench_need_exe run_lda_scale.sh " (build first: cmake --build $build)" "$LOOM" "$CHECK"
[[ -x /usr/bin/time ]] || { echo "run_lda_scale.sh: needs GNU time (apt-get install time)" >&2; exit 2; }
work=$(bench_scratch loom-lda-scale "${SCRATCH:-}")
trap 'rm -rf "$work"' EXIT
gen_dir=${CORPUS_DIR:-$work}
mkdir -p "$gen_dir"
bench_clear_env

# corpus NAME: the path of corpus NAME, generated on first use.
corpus() {
    case $1 in
        ap) echo "$AP_DIR/ap.dat" ;;
        gen10m | gen50m)
            local docs=50000 vocab=50000
            [[ $1 == gen50m ]] && docs=250000 vocab=100000
            if [[ ! -s $gen_dir/$1.dat ]]; then
                log "generating $1 ($docs documents of 200 tokens, V = $vocab)"
                "$LOOM" gen lda --out "$gen_dir/$1.dat.part" --docs "$docs" --vocab-size "$vocab" \
                    --topics 100 --doc-length 200 --seed 7 >/dev/null 2>&1
                mv "$gen_dir/$1.dat.part" "$gen_dir/$1.dat"
            fi
            echo "$gen_dir/$1.dat"
            ;;
        *)
            [[ -r $1 ]] || { echo "run_lda_scale.sh: unknown corpus $1" >&2; exit 2; }
            echo "$1"
            ;;
    esac
}

# timed OUT CMD...: run CMD bounded, its output in OUT; GNU time's
# "wall user system maxrss_kb" in OUT.time. Status of the command.
timed() {
    local out=$1
    shift
    /usr/bin/time -f "%e %U %S %M" -o "$out.time" timeout -k 10 "$TIMEOUT" "$@" >"$out" 2>&1
}

# lls FILE KIND: "iteration log-likelihood" lines from lda_check's output (seq)
# or a metrics file (job).
lls() {
    if [[ $2 == seq ]]; then
        awk '/log-likelihood/ { print $3, $5 }' "$1"
    else
        sed -n 's/.*"iteration": \([0-9]*\),.*"log_likelihood": \([-0-9.e+]*\).*/\1 \2/p' "$1"
    fi
}

log "load $(bench_load); $(bench_machine_mem)"
echo "ITERATIONS=$ITERATIONS EVAL=$EVAL CONSISTENCY=$CONSISTENCY; $(bench_machine_mem); $(date -u +%Y-%m-%d) at $(bench_head "$here")"
for name in $CORPORA; do
    file=$(corpus "$name")
    [[ -r $file ]] || { echo "run_lda_scale.sh: $file not found" >&2; exit 2; }
    tokens=$(awk '{ for (i = 2; i <= NF; i++) { split($i, p, ":"); t += p[2] } } END { print t }' "$file")
    for K in $TOPICS; do
        common=(--train "$file" --topics "$K" --iterations "$ITERATIONS" --seed 1 --eval-every "$EVAL")
        log "$name K=$K: sequential"
        if timed "$work/seq.out" "$CHECK" -- "${common[@]}"; then seq_ok=1; else seq_ok=0; fi
        read -r _ s_user s_sys s_rss <"$work/seq.out.time"
        lls "$work/seq.out" seq >"$work/seq.ll"
        s_cpu=$(echo "$s_user + $s_sys" | bc)
        # tokens sampled over the sampling time: the harmonic mean of the
        # evaluations' figures (each after EVAL iterations)
        s_tps=$(awk '{ for (i = 2; i <= NF; i++) if ($i == "tokens/s" && $(i - 1) > 0) { n++; v += 1 / $(i - 1) } }
            END { if (n) printf "%.0f", n / v }' "$work/seq.out")
        s_ll=$(tail -n 1 "$work/seq.ll" | cut -d' ' -f2)
        echo
        echo "#### ${name##*/} ($tokens tokens), K = $K"
        echo
        echo "| run | W | S | tokens/s | vs seq (LL) | sampling tokens/s vs seq | final LL vs seq | largest LL gap from it. 20 | bytes/token | peak RSS MB | CPU s per M tokens | vs seq |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        s_cpm=$(echo "scale=3; $s_cpu * 1000000 / ($tokens * $ITERATIONS)" | bc)
        if [[ $seq_ok == 1 ]]; then
            printf "| sequential | 1 | - | %s | 1.00 (%.6g) | 1.00 | - | - | 0 | %.0f | %.3f | 1.00 |\n" \
                "$s_tps" "$s_ll" "$(echo "$s_rss / 1024" | bc -l)" "$s_cpm"
        else
            echo "| sequential | 1 | - | failed: $(tail -n 1 "$work/seq.out") | | | | | | | | |"
        fi
        for W in $WORKERS; do
            S=$(((W + 3) / 4))
            for sched in $SCHEDULES; do
                log "$name K=$K: $W workers, $S servers, $sched"
                flags=(--workers "$W" --servers "$S" --metrics "$work/m.json" --quiet)
                if [[ $sched == rotation ]]; then flags+=(--schedule rotation); else flags+=(--consistency "$CONSISTENCY"); fi
                rm -f "$work/m.json"
                if ! timed "$work/job.out" "$LOOM" train lda "${common[@]}" "${flags[@]}"; then
                    echo "| $sched | $W | $S | failed: $(tail -n 1 "$work/job.out" | cut -c1-80) | | | | | | | | |"
                    continue
                fi
                read -r _ j_user j_sys j_rss <"$work/job.out.time"
                lls "$work/m.json" job >"$work/job.ll"
                last=$(tail -n 1 "$work/m.json")
                j_time=$(sed -n 's/.*"time_s": \([0-9.]*\).*/\1/p' <<<"$last")
                j_bytes=$(sed -n 's/.*"bytes_sent": \([0-9]*\).*/\1/p' <<<"$last")
                j_ll=$(tail -n 1 "$work/job.ll" | cut -d' ' -f2)
                j_stps=$(sed -n 's/.*"tokens_per_s": \([0-9.]*\).*/\1/p' "$work/m.json" |
                    awk '$1 > 0 { n++; v += 1 / $1 } END { if (n) printf "%.0f", n / v }')
                gap=$(join "$work/seq.ll" "$work/job.ll" |
                    awk '$1 >= 20 { g = ($3 - $2) / ($2 < 0 ? -$2 : $2); if (g < 0) g = -g; if (g > m) m = g } END { printf "%.4f", m }')
                awk -v W="$W" -v S="$S" -v sched="$sched" -v tokens="$tokens" -v it="$ITERATIONS" \
                    -v t="$j_time" -v sps="$s_tps" -v ll="$j_ll" -v sll="$s_ll" -v gap="$gap" \
                    -v bytes="$j_bytes" -v rss="$j_rss" -v cpu="$(echo "$j_user + $j_sys" | bc)" \
                    -v scpm="$s_cpm" -v stps="${j_stps:-0}" 'BEGIN {
                        tps = tokens * it / t; cpm = cpu * 1e6 / (tokens * it)
                        printf "| %s | %d | %d | %.0f | %.2f | %.2f | %.4f | %s | %.1f | %.0f | %.3f | %.2f |\n",
                            sched, W, S, tps, tps / sps, stps / sps, ll / sll, gap,
                            bytes / (tokens * it), rss / 1024, cpm, cpm / scpm }'
            done
        done
    done
done
log "load $(bench_load)"
