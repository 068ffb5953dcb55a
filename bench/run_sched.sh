#!/usr/bin/env bash
# run_sched.sh: scheduled model parallelism (the static engine, docs/SCHED.md)
# against data parallelism and the sequential references, in passes and
# objective (machine-independent) and in throughput (same-run ratios).
#
#   bench/run_sched.sh [BUILD_DIR]
#
# MF on ml-latest-small (90/10 split, seed 1, the default flags, EPOCHS epochs):
#   the sequential reference (bin/mf_seq), 4 workers data-parallel (SSP(2),
#   the default), 4 workers --schedule rotation with 1 and 8 rotations per
#   epoch (--syncs): epochs to test RMSE 0.87, the best test RMSE, updates/s.
# LDA on AP (seed 1, ITERATIONS iterations, log-likelihood every 5), for
#   K = 50 and 1000: the sequential reference (tests/lda/lda_check), 4 workers
#   data-parallel (SSP(1), the default) and 4 workers --schedule rotation:
#   the log-likelihood's relative gap to the reference's at every evaluation
#   from iteration 20 on (the largest is printed), and tokens/s (mean over the
#   evaluations; the job counts sampling, pushes, pulls and clocks, not the
#   evaluations), with rotation/data-parallel in the same run.
# Lasso on the dynamic engine (bench/sched_lasso.sh) on the problem where
#   Shotgun's bound dim / rho(X^T X) is below P = 8 (docs/BENCHMARKS.md, "Third
#   problem"): sequential, dynamic, uniform candidates + check, priority
#   without check, random (Shotgun): coordinate updates to F* (1 + 1e-4).
# Markdown tables on stdout; progress on stderr.
#
# A run that fails leaves its row empty (its exit status is logged on stderr).
#
# Environment: ML_DIR, AP_DIR [../shared/data/... next to the repository],
# EPOCHS [30], ITERATIONS [40], TOPICS ["50 1000"], TIMEOUT [900] s per run,
# LOOM_HEARTBEAT_TIMEOUT_MS [60000], PLOT_DIR [none: when set, the metrics
# are kept there, one JSONL file per run, with loom plot's PNGs mf_rmse.png
# and lda_K<K>_ll.png; the Lasso's files and plots go to PLOT_DIR/lasso],
# PARTS ["mf lda lasso": which parts to run], LASSO_ITERATIONS [2500: the
# Lasso runs' cap, in rounds of dim / 8; about 1.2x the sequential updates
# for the dynamic runs, which take one coordinate per group (2 per round)].
set -uo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
ML_DIR=${ML_DIR:-$here/../shared/data/ml-latest-small}
AP_DIR=${AP_DIR:-$here/../shared/data/ap}
EPOCHS=${EPOCHS:-30}
ITERATIONS=${ITERATIONS:-40}
TOPICS=${TOPICS:-"50 1000"}
TIMEOUT=${TIMEOUT:-900}
PARTS=${PARTS:-"mf lda lasso"}
LASSO_ITERATIONS=${LASSO_ITERATIONS:-2500}
LOOM=$build/bin/loom MF_SEQ=$build/bin/mf_seq LDA_CHECK=$build/tests/lda/lda_check
bench_need_exe run_sched.sh " (build first)" "$LOOM" "$MF_SEQ" "$LDA_CHECK"
part() { [[ " $PARTS " == *" $1 "* ]]; }
for f in "$ML_DIR/ratings.csv" "$AP_DIR/ap.dat"; do
    [[ $f == "$ML_DIR"* ]] && ! part mf && continue
    [[ $f == "$AP_DIR"* ]] && ! part lda && continue
    [[ -r $f ]] || { echo "run_sched.sh: $f not found" >&2; exit 2; }
done
work=$(bench_scratch loom-bench-sched)
trap 'rm -rf "$work"' EXIT
bench_clear_env
# On a loaded 2-core machine a server busy with a K = 1000 table (40 MB pulls)
# misses the default 5 s heartbeat deadline and the job is declared failed.
export LOOM_HEARTBEAT_TIMEOUT_MS=${LOOM_HEARTBEAT_TIMEOUT_MS:-60000}
# values KEY FILE: KEY's value on every line of a metrics file.
values() { sed -n "s/.*\"$1\": \\([^,}]*\\).*/\\1/p" "$2"; }

echo "run_sched.sh on $(nproc) cores, load $(bench_load) at the start," \
    "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')"
if part mf; then
    echo
    echo "### MF, ml-latest-small, $EPOCHS epochs"
    echo
    echo "| run | epochs to 0.87 | best test RMSE | updates/s (mean) |"
    echo "|---|---|---|---|"
    mf=(--train "$ML_DIR/ratings.csv" --test-fraction 0.1 --seed 1 --epochs "$EPOCHS")
    mf_row() { # mf_row NAME METRICS
        local to best ups
        to=$(values test_rmse "$2" | awk '$1 <= 0.87 { print NR; exit }')
        best=$(values test_rmse "$2" | sort -g | head -1)
        ups=$(values updates_per_s "$2" | awk '{ s += $1 } END { printf "%.0f", s / NR }')
        echo "| $1 | ${to:-not reached} | $best | $ups |"
    }
    log "mf: sequential reference"
    timeout "$TIMEOUT" "$MF_SEQ" "${mf[@]}" --metrics "$work/mf.seq" >/dev/null 2>&1
    mf_row "sequential reference" "$work/mf.seq"
    log "mf: 4 workers, data-parallel"
    timeout "$TIMEOUT" "$LOOM" train mf "${mf[@]}" --workers 4 --servers 2 --quiet \
        --metrics "$work/mf.data" >"$work/log" 2>&1
    mf_row "4 workers, data-parallel SSP(2)" "$work/mf.data"
    for r in 1 8; do
        log "mf: 4 workers, rotation, --syncs $r"
        timeout "$TIMEOUT" "$LOOM" train mf "${mf[@]}" --workers 4 --servers 2 --quiet \
            --schedule rotation --syncs "$r" --metrics "$work/mf.rot$r" >"$work/log" 2>&1 ||
            log "mf rotation $r: exit $?"
        mf_row "4 workers, rotation, $r rotation(s)/epoch" "$work/mf.rot$r"
    done
    if [[ -n ${PLOT_DIR:-} ]]; then
        mkdir -p "$PLOT_DIR"
        cp "$work/mf.seq" "$PLOT_DIR/mf-sequential.jsonl"
        cp "$work/mf.data" "$PLOT_DIR/mf-data-parallel.jsonl"
        cp "$work/mf.rot1" "$PLOT_DIR/mf-rotation-syncs1.jsonl"
        cp "$work/mf.rot8" "$PLOT_DIR/mf-rotation-syncs8.jsonl"
        "$LOOM" plot "$PLOT_DIR"/mf-*.jsonl --y test_rmse --out "$PLOT_DIR/mf_rmse.png" \
            --title "MF, ml-latest-small, 4 workers: test RMSE per epoch" >&2 || log "mf plot failed"
    fi
fi

if part lda; then
    for K in $TOPICS; do
        echo
        echo "### LDA, AP, K = $K, $ITERATIONS iterations"
        echo
        lda=(--train "$AP_DIR/ap.dat" --topics "$K" --iterations "$ITERATIONS" --seed 1 --eval-every 5)
        log "lda K=$K: sequential reference"
        timeout "$TIMEOUT" "$LDA_CHECK" --ll-out "$work/ref.ll" -- "${lda[@]}" >"$work/ref.out"
        seq_tps=$(sed -n 's/.* \([0-9]*\) tokens\/s$/\1/p' "$work/ref.out" |
            awk '{ s += $1 } END { printf "%.0f", s / NR }')
        echo "| run | LL at 20 | largest gap to the reference, iterations >= 20 | LL at $ITERATIONS | tokens/s (mean) | vs data-parallel |"
        echo "|---|---|---|---|---|---|"
        echo "| sequential reference | $(awk '$1 == 20 { printf "%.6e", $2 }' "$work/ref.ll") | 0 |" \
            "$(awk -v n="$ITERATIONS" '$1 == n { printf "%.6e", $2 }' "$work/ref.ll") | $seq_tps | |"
        data_tps=
        for mode in data rotation; do
            log "lda K=$K: 4 workers, $mode"
            timeout "$TIMEOUT" "$LOOM" train lda "${lda[@]}" --workers 4 --servers 2 --top-words 0 \
                --quiet --schedule "$mode" --metrics "$work/lda.$mode" >"$work/log" 2>&1 ||
                log "lda K=$K $mode: exit $?: $(tail -n 3 "$work/log")"
            paste <(values iteration "$work/lda.$mode") <(values log_likelihood "$work/lda.$mode") \
                >"$work/$mode.ll"
            gap=$(awk 'NR == FNR { ref[$1] = $2; next }
                       $1 >= 20 && ($1 in ref) { g = ($2 - ref[$1]) / -ref[$1]; if (g < 0) g = -g
                                                if (g > m) m = g }
                       END { printf "%.3f%%", 100 * m }' "$work/ref.ll" "$work/$mode.ll")
            tps=$(values tokens_per_s "$work/lda.$mode" | awk '{ s += $1 } END { printf "%.0f", s / NR }')
            ratio=
            if [[ $mode == data ]]; then data_tps=$tps; else
                ratio=$(awk -v a="$tps" -v b="$data_tps" 'BEGIN { printf "%.2fx", a / b }'); fi
            name="4 workers, data-parallel SSP(1)"
            [[ $mode == rotation ]] && name="4 workers, rotation"
            echo "| $name | $(awk '$1 == 20 { printf "%.6e", $2 }' "$work/$mode.ll") | $gap |" \
                "$(awk -v n="$ITERATIONS" '$1 == n { printf "%.6e", $2 }' "$work/$mode.ll") | $tps | $ratio |"
            [[ -n ${PLOT_DIR:-} ]] && cp "$work/lda.$mode" "$PLOT_DIR/lda-K$K-$mode.jsonl"
        done
        if [[ -n ${PLOT_DIR:-} ]]; then
            awk '{ printf "{\"iteration\": %d, \"log_likelihood\": %s}\n", $1, $2 }' "$work/ref.ll" \
                >"$PLOT_DIR/lda-K$K-sequential.jsonl"
            "$LOOM" plot "$PLOT_DIR"/lda-K"$K"-*.jsonl --y log_likelihood \
                --out "$PLOT_DIR/lda_K${K}_ll.png" \
                --title "LDA, AP, K = $K, 4 workers: log-likelihood per iteration" >&2 ||
                log "lda plot failed"
        fi
    done
fi

if part lasso; then
    # The third problem of docs/BENCHMARKS.md: two groups of 50 000 features
    # correlated at 0.9, so dim / rho(X^T X) is about 2, below P = 8.
    lasso_out=${PLOT_DIR:+$PLOT_DIR/lasso}
    echo
    echo "### Lasso, 100k features in 2 groups correlated at 0.9, P = 8"
    echo
    log "lasso: bench/sched_lasso.sh"
    ROWS=1000 GROUP=50000 CORR=0.9 DENSITY=0.02 NONZEROS=50 LAMBDA=0.1 \
        ITERATIONS=$LASSO_ITERATIONS TIMEOUT=$((TIMEOUT * 10)) JOB=0 \
        SCHEDULES="dynamic dynamic-nopri dynamic-nocheck random" \
        "$here/bench/sched_lasso.sh" "$build" "${lasso_out:-$work/lasso}" ||
        log "lasso: exit $?"
fi
