#!/usr/bin/env bash
# run_comm.sh: what Loom's communication costs, and what its filters, sparse
# rows and managed communication save (issue 11; docs/BENCHMARKS.md).
#
#   bench/run_comm.sh [BUILD_DIR] [SECTION...]
#
# One function per experiment; with no SECTION every one runs. Each prints a
# Markdown table (stdout), progress goes to stderr. Ratios are measured in one
# run of this script, on whatever else the machine is doing.
#
#   filters_lda   LDA on AP (K topics, 2 workers, 1 server), the same seed and
#                 iterations three ways: the sequential sampler (tests/lda/lda_check),
#                 rows forced dense and whole (--filter dense --filter-pull dense:
#                 what the table layer sent before sparse rows), and the default
#                 (sparse rows when smaller, pulls of only the rows that changed).
#                 Bytes per iteration (table payload as sent, bytes_wire, and all
#                 bytes the workers sent and received), tokens/s, log-likelihood.
#   filters_dbpg  DBPG L1 logistic regression on generated click-like data
#                 (`loom gen lr`), 2 workers: no filters and dense rows (--filter dense
#                 --filter-pull dense) against the default of --l1 (keycache,zstd both
#                 ways and on the pull requests' key lists, sparse rows, the workers'
#                 kkt at l1/W), without kkt (--filter keycache,zstd: the exact
#                 filters alone), and --filter kkt:0.9*l1,keycache,zstd: table
#                 bytes per epoch (pushes, pull requests and replies), final objective.
#   comm_managed_mf   managed communication against SSP alone at the same budget:
#                 MF on ml-latest-small, epochs to test RMSE 0.87 per priority
#                 (bench/comm_managed.sh, which this script sources).
#   comm_managed_lda  the same for LDA on AP, K = 50: iterations to the
#                 log-likelihood SSP alone reaches (bench/comm_managed.sh).
#
# Environment (defaults in brackets):
#   AP_DIR [../shared/data/ap next to the repository]  ap.dat or ap.dat.bz2
#   TOPICS [1000]  ITERATIONS [20]   the LDA runs
#   LR_ROWS [200000] LR_FEATURES [1000000] EPOCHS [5] BLOCKS [16] L1 [20]  the DBPG runs
#   TIMEOUT [1800]  seconds allowed to each run
#   DATA, MF_MBITS, MF_STEPS, MF_EPOCHS, LDA_MBITS, LDA_STEPS, LDA_TOPICS,
#   LDA_ITERATIONS, KEEP, PLOTS  the managed-communication runs (see
#                   bench/comm_managed.sh; PLOTS=DIR keeps their metrics and PNG plots)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

build=${1:-build}
[[ $# -gt 0 ]] && shift
sections=("$@")
[[ ${#sections[@]} -gt 0 ]] || sections=(filters_lda filters_dbpg comm_managed_mf comm_managed_lda)
here=$(cd "$(dirname "$0")/.." && pwd)
# comm_managed_mf and comm_managed_lda, one function per experiment
source "$here/bench/comm_managed.sh"
AP_DIR=${AP_DIR:-$here/../shared/data/ap}
TOPICS=${TOPICS:-1000}
ITERATIONS=${ITERATIONS:-20}
LR_ROWS=${LR_ROWS:-200000}
LR_FEATURES=${LR_FEATURES:-1000000}
EPOCHS=${EPOCHS:-5}
BLOCKS=${BLOCKS:-16}
L1=${L1:-20}
TIMEOUT=${TIMEOUT:-1800}
LOOM=$build/bin/loom
LDA_CHECK=$build/tests/lda/lda_check
bench_need_exe run_comm.sh " (build first: cmake --build $build)" "$LOOM" "$LDA_CHECK"
work=$(bench_scratch loom-bench-comm)
trap 'rm -rf "$work"' EXIT
bench_clear_env
# The machine is shared: a process starved of CPU for a few seconds must not
# be declared dead.
export LOOM_HEARTBEAT_TIMEOUT_MS=120000

# The value of JSON key $1 on the last line of file $2.
field() { sed -n "s/.*\"$1\": \\([^,}]*\\).*/\\1/p" "$2" | tail -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b == 0 ? 0 : a / b) }'; }

# The AP corpus as plain text in $work (decompressed if it is stored as bz2).
ap_corpus() {
    if [[ -r $AP_DIR/ap.dat ]]; then
        echo "$AP_DIR/ap.dat"
    elif [[ -r $AP_DIR/ap.dat.bz2 ]]; then
        bzip2 -dc "$AP_DIR/ap.dat.bz2" >"$work/ap.dat"
        echo "$work/ap.dat"
    else
        echo "run_comm.sh: no ap.dat or ap.dat.bz2 in $AP_DIR" >&2
        exit 2
    fi
}

filters_lda() {
    local ap
    ap=$(ap_corpus)
    local common=(--train "$ap" --topics "$TOPICS" --iterations "$ITERATIONS" --seed 1)
    echo "LDA K=$TOPICS: sequential sampler" >&2
    "$LDA_CHECK" -- "${common[@]}" --eval-every 0 >"$work/seq.out"
    local seq_tps seq_ll
    seq_tps=$(awk '{ v = $(NF - 1) } END { print v }' "$work/seq.out")
    seq_ll=$(awk '{ v = $5 } END { print v }' "$work/seq.out")
    echo
    echo "#### LDA, AP, K = $TOPICS, 2 workers, 1 server, $ITERATIONS iterations (ssp:1)"
    echo
    echo "| rows on the wire | table MB / iteration (as sent) | as plain rows | node MB sent+received / iteration | vs dense | tokens/s | vs sequential | log-likelihood | vs sequential |"
    echo "|---|---|---|---|---|---|---|---|---|"
    printf "| sequential sampler | - | - | - | - | %.0f | 1.00 | %.6e | - |\n" "$seq_tps" "$seq_ll"
    local dense_bytes=0 mode spec
    for mode in dense default; do
        spec=$([[ $mode == dense ]] && echo dense || echo none)
        echo "LDA K=$TOPICS: 2 workers, rows $mode" >&2
        "$LOOM" train lda "${common[@]}" --workers 2 --servers 1 --eval-every 0 --insecure --quiet \
            --filter "$spec" --filter-pull "$spec" --metrics "$work/lda_$mode.jsonl" \
            >/dev/null 2>"$work/lda_$mode.err" || {
            echo "run_comm.sh: the $mode LDA run failed:" >&2
            tail -5 "$work/lda_$mode.err" >&2
            return 1
        }
        local m=$work/lda_$mode.jsonl
        local wire raw node tps ll
        wire=$(field bytes_wire "$m")
        raw=$(field bytes_raw "$m")
        node=$(awk -v s="$(field bytes_sent "$m")" -v r="$(field bytes_received "$m")" 'BEGIN { print s + r }')
        tps=$(field tokens_per_s "$m")
        ll=$(field log_likelihood "$m")
        [[ $mode == dense ]] && dense_bytes=$node
        printf "| %s | %.2f | %.2f | %.2f | %s | %.0f | %s | %.6e | %+.3f%% |\n" "$mode" \
            "$(awk -v b="$wire" -v i="$ITERATIONS" 'BEGIN { print b / i / 1e6 }')" \
            "$(awk -v b="$raw" -v i="$ITERATIONS" 'BEGIN { print b / i / 1e6 }')" \
            "$(awk -v b="$node" -v i="$ITERATIONS" 'BEGIN { print b / i / 1e6 }')" \
            "$(ratio "$dense_bytes" "$node")x fewer" "$tps" "$(ratio "$tps" "$seq_tps")" "$ll" \
            "$(awk -v a="$ll" -v b="$seq_ll" 'BEGIN { print (a - b) / (b < 0 ? -b : b) * 100 }')"
    done
}

filters_dbpg() {
    echo "DBPG: generating $LR_ROWS rows x $LR_FEATURES features" >&2
    "$LOOM" gen lr --out "$work/lr.svm" --rows "$LR_ROWS" --features "$LR_FEATURES" --quiet
    echo
    echo "#### DBPG L1 logistic regression, generated data ($LR_ROWS rows, $LR_FEATURES features), 2 workers, $BLOCKS blocks, --l1 $L1, $EPOCHS epochs"
    echo
    echo "| push filters | table MB / epoch (as sent) | as plain rows | vs no filters | node MB sent / epoch | final objective | vs no filters |"
    echo "|---|---|---|---|---|---|---|"
    local none_wire=0 none_obj=0 name spec
    for name in none default exact kkt; do
        case $name in
        none) spec=(--filter dense --filter-pull dense) ;;
        default) spec=() ;;
        exact) spec=(--filter keycache,zstd) ;;
        kkt) spec=(--filter "kkt:$(awk -v l="$L1" 'BEGIN { print l * 0.9 }'),keycache,zstd") ;;
        esac
        echo "DBPG: filters $name" >&2
        "$LOOM" train lr --train "$work/lr.svm" --algo dbpg --l1 "$L1" --blocks "$BLOCKS" \
            --epochs "$EPOCHS" --workers 2 --servers 1 --insecure --quiet "${spec[@]}" \
            --metrics "$work/dbpg_$name.jsonl" >/dev/null 2>"$work/dbpg_$name.err" || {
            echo "run_comm.sh: the DBPG run with filters $name failed:" >&2
            tail -5 "$work/dbpg_$name.err" >&2
            continue
        }
        local m=$work/dbpg_$name.jsonl
        local wire raw sent obj
        wire=$(field bytes_wire "$m")
        raw=$(field bytes_raw "$m")
        sent=$(field bytes_sent "$m")
        obj=$(field objective "$m")
        if [[ $name == none ]]; then none_wire=$wire none_obj=$obj; fi
        printf "| %s | %.3f | %.3f | %sx fewer | %.3f | %.9g | %+.4f%% |\n" \
            "$([[ $name == none ]] && echo "none, dense rows" || echo "${spec[*]:-default of --l1: keycache,zstd, kkt at l1/W in the workers}")" \
            "$(awk -v b="$wire" -v e="$EPOCHS" 'BEGIN { print b / e / 1e6 }')" \
            "$(awk -v b="$raw" -v e="$EPOCHS" 'BEGIN { print b / e / 1e6 }')" \
            "$(ratio "$none_wire" "$wire")" \
            "$(awk -v b="$sent" -v e="$EPOCHS" 'BEGIN { print b / e / 1e6 }')" "$obj" \
            "$(awk -v a="$obj" -v b="$none_obj" 'BEGIN { print (a - b) / (b < 0 ? -b : b) * 100 }')"
    done
}

echo "$(nproc) cores, load $(bench_load); $(date -u +%Y-%m-%d)"
for s in "${sections[@]}"; do
    declare -F "$s" >/dev/null || { echo "run_comm.sh: no section $s" >&2; exit 2; }
    "$s" "$build" # the comm_managed_* functions take the build directory
done
