#!/usr/bin/env bash
# run_fm.sh: factorization machines against logistic regression (issue 30, item 1;
# docs/FM.md), one markdown table row per run:
#   1. a9a (../shared/data): lr (FTRL, the same --lr) and fm with their defaults;
#   2. generated click logs, w8a-sized in rows (`loom gen fm --rows 70000 --features
#      100000 --nnz 30`, the first 50,000 rows to train on, the last 20,000 to test):
#      lr, and fm with --threshold 0, 10, 50 (the default) and 200, and at --dim 64
#      with --threshold 0 and 50 (the thesis's k), for the V rows the servers allocate;
#   3. the same logs without interactions (--interactions 0): lr and fm;
#   (2 and 3 also with --lr 0.5 for both, where lr's default rate is slow to converge)
#   4. filters of fm's tables on the logs: none, quant:8 on pushes and pull replies,
#      and quant:8,lz4 on both.
# Every job: 2 workers, 1 server, SSP(2) (the defaults), EPOCHS epochs (3); the
# numbers are worker 0's last metrics line (time_s: from the start of training;
# MB sent: every worker's bytes sent; table MB raw and wire: the workers' pushes,
# pull requests and pull replies as plain rows and as they went, docs/FILTERS.md).
#   bench/run_fm.sh [BUILD_DIR] [EPOCHS]
set -u
BUILD=${1:-build} EPOCHS=${2:-3}
LOOM=$BUILD/bin/loom
DATA=$(cd "$(dirname "$0")/../.." && pwd)/shared/data
[[ -x $LOOM ]] || { echo "run_fm.sh: $LOOM not found (build first)" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/loom-fm-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

metric() { tail -n 1 "$1" | sed -n "s/.*\"$2\": \([-0-9.e+]*\).*/\1/p"; }
best() { sed -n 's/.*"test_logloss": \([0-9.]*\).*/\1/p' "$1" | sort -g | head -n 1; }

# run NAME MODEL TRAIN TEST FLAGS...: one job, one table row.
run() {
    local name=$1 model=$2 train=$3 test=$4
    shift 4
    "$LOOM" train "$model" --train "$train" --test "$test" --epochs "$EPOCHS" --quiet \
        --metrics "$WORK/m.json" "$@" >"$WORK/out" 2>&1 || { cat "$WORK/out"; exit 1; }
    local m=$WORK/m.json
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" \
        "$(metric "$m" test_logloss)" "$(best "$m")" "$(metric "$m" v_rows)" "$(metric "$m" v_nnz)" \
        "$(awk -v b="$(metric "$m" bytes_sent)" 'BEGIN { printf "%.1f", b / 1e6 }')" \
        "$(awk -v b="$(metric "$m" bytes_raw)" 'BEGIN { printf "%.1f", b / 1e6 }')" \
        "$(awk -v b="$(metric "$m" bytes_wire)" 'BEGIN { printf "%.1f", b / 1e6 }')" \
        "$(metric "$m" time_s)"
}

header() {
    echo
    echo "$1"
    echo
    echo "| run | test logloss | best epoch's | V rows | V nnz | MB sent | table MB raw | table MB wire | s |"
    echo "|---|---|---|---|---|---|---|---|---|"
}

echo "uptime: $(uptime)"
if [[ -r $DATA/a9a/a9a ]]; then
    header "a9a ($EPOCHS epochs)"
    run "lr, FTRL --lr 0.1" lr "$DATA/a9a/a9a" "$DATA/a9a/a9a.t" --updater ftrl
    run "fm, defaults" fm "$DATA/a9a/a9a" "$DATA/a9a/a9a.t"
fi

for inter in 2 0; do
    "$LOOM" gen fm --out "$WORK/all" --rows 70000 --features 100000 --nnz 30 \
        --interactions $inter --quiet
    head -n 50000 "$WORK/all" >"$WORK/tr$inter"
    tail -n 20000 "$WORK/all" >"$WORK/te$inter"
done
header "generated click logs, planted interactions ($EPOCHS epochs)"
run "lr, FTRL --lr 0.1" lr "$WORK/tr2" "$WORK/te2" --updater ftrl
for t in 0 10 50 200; do
    run "fm --threshold $t" fm "$WORK/tr2" "$WORK/te2" --threshold $t
done
run "lr, FTRL --lr 0.5" lr "$WORK/tr2" "$WORK/te2" --updater ftrl --lr 0.5
run "fm --lr 0.5" fm "$WORK/tr2" "$WORK/te2" --lr 0.5
for t in 0 50; do
    run "fm --dim 64 --threshold $t" fm "$WORK/tr2" "$WORK/te2" --dim 64 --threshold $t
done
header "generated click logs, no interactions ($EPOCHS epochs)"
run "lr, FTRL --lr 0.1" lr "$WORK/tr0" "$WORK/te0" --updater ftrl
run "fm, defaults" fm "$WORK/tr0" "$WORK/te0"
run "lr, FTRL --lr 0.5" lr "$WORK/tr0" "$WORK/te0" --updater ftrl --lr 0.5
run "fm --lr 0.5" fm "$WORK/tr0" "$WORK/te0" --lr 0.5
header "filters of fm's tables, click logs with interactions ($EPOCHS epochs)"
run "fm, no filter" fm "$WORK/tr2" "$WORK/te2"
run "fm --filter quant:8 --filter-pull quant:8" fm "$WORK/tr2" "$WORK/te2" \
    --filter quant:8 --filter-pull quant:8
run "fm --filter quant:8,lz4 --filter-pull quant:8,lz4" fm "$WORK/tr2" "$WORK/te2" \
    --filter quant:8,lz4 --filter-pull quant:8,lz4
run "fm --filter lz4 --filter-pull lz4" fm "$WORK/tr2" "$WORK/te2" --filter lz4 --filter-pull lz4
echo
echo "uptime: $(uptime)"
