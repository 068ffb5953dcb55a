#!/usr/bin/env bash
# run_lda_mh.sh: time to a log-likelihood on AP, SparseLDA against the exact
# Metropolis-Hastings sampler (--sampler mh, apps/lda/mh.c; issue 26, item 3).
#
#   bench/run_lda_mh.sh [BUILD_DIR]
#
# For every K of TOPICS and both samplers the sequential reference
# (tests/lda/lda_check, one thread) runs, evaluating every EVERY iterations;
# each evaluation prints the log-likelihood and the process's CPU seconds so
# far (reading and counting included). Prints, per run, a Markdown row: the
# log-likelihood after 10 and 30 iterations (where run), the CPU seconds to
# them, sampling tokens per wall second (lda_check's mean), the whole run's
# CPU and wall seconds (/usr/bin/time) and the load average before it; then,
# per K, the CPU seconds mh needs to reach SparseLDA's log-likelihood after
# 10 and after 30 iterations (the first evaluation at or above it; "not
# reached" if none within MH_ITERS).
#
# Environment (defaults in brackets):
#   AP_DIR [../shared/data/ap next to the repository]  ap.dat
#   TOPICS ["100 1000 10000"]  SPARSE_ITERS [30]  MH_ITERS [60]  EVERY [2]
#   TIMEOUT [3600] seconds allowed to each run
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
AP_DIR=${AP_DIR:-$here/../shared/data/ap}
TOPICS=${TOPICS:-"100 1000 10000"}
SPARSE_ITERS=${SPARSE_ITERS:-30}
MH_ITERS=${MH_ITERS:-60}
EVERY=${EVERY:-2}
TIMEOUT=${TIMEOUT:-3600}
CHECK=$build/tests/lda/lda_check
bench_need_exe run_lda_mh.sh " (build first: cmake --build $build)" "$CHECK"
[[ -r $AP_DIR/ap.dat ]] || { echo "run_lda_mh.sh: $AP_DIR/ap.dat not found" >&2; exit 2; }
work=$(bench_scratch loom-bench-mh)
trap 'rm -rf "$work"' EXIT
bench_clear_env

echo "AP, seed 1, evaluations every $EVERY iterations; $(bench_machine_mem); HEAD $(bench_head "$here")"
echo
echo "| K | sampler | iterations | LL after 10 | CPU s to 10 | LL after 30 | CPU s to 30 | sampling tokens/s (wall) | run CPU s | run wall s | load before |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for K in $TOPICS; do
    for s in sparse mh; do
        iters=$SPARSE_ITERS
        [[ $s == mh ]] && iters=$MH_ITERS
        load=$(bench_load)
        echo "K = $K, $s" >&2
        timeout "$TIMEOUT" /usr/bin/time -o "$work/time" -f "%e %U %S" "$CHECK" -- \
            --train "$AP_DIR/ap.dat" --topics "$K" --iterations "$iters" --eval-every "$EVERY" \
            --seed 1 --sampler "$s" >"$work/$K.$s" 2>&1 ||
            { echo "| $K | $s | failed: $(tail -n 1 "$work/$K.$s") |"; continue; }
        read -r wall user sys <"$work/time"
        # "lda_check: iteration I log-likelihood LL R tokens/s C CPU s"
        awk -v k="$K" -v s="$s" -v it="$iters" -v wall="$wall" -v cpu="$(awk -v u="$user" \
            -v y="$sys" 'BEGIN { print u + y }')" -v load="$load" '
            $2 == "iteration" { n++; rate += $6; ll[$3] = $5; c[$3] = $8 }
            function at(i) { return (i in ll) ? sprintf("%.4e | %.1f", ll[i], c[i]) : "- | -" }
            END { printf "| %s | %s | %s | %s | %s | %.0f | %.1f | %.1f | %s |\n",
                  k, s, it, at(10), at(30), rate / n, cpu, wall, load }' "$work/$K.$s"
    done
done
echo
echo "| K | SparseLDA after | its log-likelihood | its CPU s | mh reaches it after (iterations, CPU s) | mh's CPU s / SparseLDA's |"
echo "|---|---|---|---|---|---|"
for K in $TOPICS; do
    [[ -s $work/$K.sparse && -s $work/$K.mh ]] || continue
    for at in 10 30; do
        awk -v k="$K" -v at="$at" '
            FNR == 1 { f++ }
            f == 1 && $2 == "iteration" && $3 == at { target = $5; tc = $8 }
            f == 2 && $2 == "iteration" && !hit && target != "" && $5 >= target { hit = $3; hc = $8 }
            END { if (target == "") exit
                  if (hit) printf "| %s | %s | %.4e | %.1f | %s, %.1f | %.2f |\n", k, at, target, tc, hit, hc, hc / tc
                  else printf "| %s | %s | %.4e | %.1f | not reached | - |\n", k, at, target, tc }' \
            "$work/$K.sparse" "$work/$K.mh"
    done
done
