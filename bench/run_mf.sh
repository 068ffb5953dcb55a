#!/usr/bin/env bash
# run_mf.sh: `loom train mf` against its sequential in-process reference:
# updates/s and time to a target test RMSE.
#
#   bench/run_mf.sh [--quick] [BUILD_DIR]
#
# Two data sets, each with a seeded 90/10 split (--test-fraction 0.1, seed 1):
#   ml   MovieLens ml-latest-small/ratings.csv (100,836 ratings), from $ML_DIR;
#        rank 16, the default flags, 40 epochs; target test RMSE 0.90
#   gen  `loom gen mf` ratings (default 3,000,000 ratings of 30,000 users on
#        10,000 items, planted rank 8, noise 0.8: the planted model's RMSE is
#        about 0.76, biases alone give about 0.89), --reg 0.05, 10 epochs;
#        targets 0.90 (the biases) and 0.85 (needs the factors)
#
# On each, in this order and in one run:
#   1. bin/mf_seq: the sequential reference (the same algorithm in one
#      process, no Loom) with the same flags, timed the same way;
#   2. `loom train mf --metrics` with 1, 2 and 4 workers (1, 1 and 2 servers)
#      and each of --consistency bsp, ssp:2, asp, one clock per epoch (the
#      default); on ml also with --syncs 10 (a clock per tenth of an epoch).
# time_s counts from after reading the data and includes the evaluation of
# the training and test ratings after every epoch (the reference does the
# same); updates/s counts the SGD part of an epoch (pulls, SGD, pushes,
# clocks), summed over workers, mean over epochs. It prints Markdown tables
# (stdout); progress goes to stderr.
#
# Options:
#   --quick     300,000 generated ratings (3,000 users x 2,000 items) and 10
#               epochs on ml: to try the script out; figures not meaningful
#   BUILD_DIR   the CMake build with bin/loom and bin/mf_seq (default build)
#
# Environment: ML_DIR [../shared/data/ml-latest-small next to the repository],
# SCRATCH [${TMPDIR:-/tmp}], KEEP=1 keeps the scratch directory, TIMEOUT [600]
# seconds per run, GEN_RATINGS, GEN_USERS, GEN_ITEMS.
#
# Takes about 5 minutes on a 2-vCPU machine (--quick: about 1).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
    echo "usage: bench/run_mf.sh [--quick] [BUILD_DIR]   (see the comment at the top)" >&2
    exit 2
}
quick=0
build=build
while [[ $# -gt 0 ]]; do
    case $1 in
        --quick) quick=1 ;;
        -h | --help) usage ;;
        -*) echo "$0: unknown option '$1'" >&2; usage ;;
        *) build=$1 ;;
    esac
    shift
done
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
ml_dir=${ML_DIR:-$(dirname "$repo")/shared/data/ml-latest-small}
if [[ $quick == 1 ]]; then
    gen_ratings=${GEN_RATINGS:-300000} gen_users=${GEN_USERS:-3000} gen_items=${GEN_ITEMS:-2000}
    ml_epochs=10
else
    gen_ratings=${GEN_RATINGS:-3000000} gen_users=${GEN_USERS:-30000} gen_items=${GEN_ITEMS:-10000}
    ml_epochs=40
fi
timeout_s=${TIMEOUT:-600}
loom=$build/bin/loom
seq=$build/bin/mf_seq
for exe in "$loom" "$seq"; do
    bench_need_exe "$0" "; build first (cmake --build $build)" "$exe"
done
[[ -r $ml_dir/ratings.csv ]] ||
    { echo "$0: $ml_dir/ratings.csv not found; set ML_DIR" >&2; exit 2; }

scratch=$(bench_scratch run_mf "${SCRATCH:-${TMPDIR:-/tmp}}")
cleanup() { if [[ ${KEEP:-0} == 1 ]]; then echo "kept $scratch" >&2; else rm -rf "$scratch"; fi; }
trap cleanup EXIT
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
head_rev=$(bench_head "$repo")
load_start=$(bench_load)
t_script=$EPOCHREALTIME

log "generating $gen_ratings ratings ($gen_users users x $gen_items items)"
t0=$EPOCHREALTIME
"$loom" gen mf --out "$scratch/gen.tsv" --users "$gen_users" --items "$gen_items" \
    --ratings "$gen_ratings" --rank 8 --noise 0.8 --seed 1 --planted-out "$scratch/planted" --quiet
gen_s=$(secs "$t0" "$EPOCHREALTIME")
planted=$("$loom" predict mf --model "$scratch/planted" --data "$scratch/gen.tsv")

# summarise METRICS TARGET1 TARGET2: "epochs reach1 t1 reach2 t2 last_t rmse ups mb"
summarise() {
    awk -v a="$2" -v b="$3" '
        function get(key,   s) {
            if (!match($0, "\"" key "\": [^,}]*")) return ""
            s = substr($0, RSTART, RLENGTH); sub(/^[^:]*: /, "", s); return s
        }
        {
            n++; r = get("test_rmse"); t = get("time_s")
            if (r1 == "" && r != "null" && r + 0 <= a) { r1 = n; t1 = t }
            if (r2 == "" && r != "null" && r + 0 <= b) { r2 = n; t2 = t }
            ups += get("updates_per_s"); last_t = t; last_r = r
            bytes = get("bytes_sent") + get("bytes_received")
        }
        END {
            if (!n) { print "0 - - - - - - - -"; exit }
            printf "%d %s %s %s %s %s %.4f %.0f %.1f\n", n, r1 == "" ? "-" : r1, r1 == "" ? "-" : t1,
                r2 == "" ? "-" : r2, r2 == "" ? "-" : t2, last_t, last_r, ups / n, bytes / n / 1e6
        }' "$1"
}

results=$scratch/results.tsv
: >"$results"
# run SET TAG W S MODE TARGET1 TARGET2 COMMAND...: one run, one line of $results.
run() {
    local set=$1 tag=$2 w=$3 s=$4 mode=$5 a=$6 b=$7 t0 wall rc=0
    shift 7
    log "$set $tag: $*"
    t0=$EPOCHREALTIME
    timeout "$timeout_s" "$@" --metrics "$scratch/$set.$tag.json" >"$scratch/$set.$tag.log" 2>&1 ||
        rc=$?
    wall=$(secs "$t0" "$EPOCHREALTIME")
    local sum
    sum=$(summarise "$scratch/$set.$tag.json" "$a" "$b")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$set" "$tag" "$w" "$s" "$mode" "$rc" "$wall" "$sum" \
        >>"$results"
    log "$set $tag: rc $rc, wall $wall s, $sum"
}

# one_set SET TARGET1 TARGET2 SYNCS_LIST FLAGS...
one_set() {
    local set=$1 a=$2 b=$3 syncs_list=$4 w s mode sy
    shift 4
    run "$set" seq 1 0 seq "$a" "$b" "$seq" "$@"
    for sy in $syncs_list; do
        for w in 1 2 4; do
            s=1
            [[ $w == 4 ]] && s=2
            for mode in bsp ssp:2 asp; do
                run "$set" "w$w.${mode/:/}.s$sy" "$w" "$s" "$mode" "$a" "$b" "$loom" train mf "$@" \
                    --workers "$w" --servers "$s" --consistency "$mode" --syncs "$sy" --quiet
            done
        done
    done
}

one_set ml 0.90 0.87 "1 10" --train "$ml_dir/ratings.csv" --test-fraction 0.1 --epochs "$ml_epochs"
one_set gen 0.90 0.85 "1" --train "$scratch/gen.tsv" --test-fraction 0.1 --epochs 10 --reg 0.05
total_s=$(secs "$t_script" "$EPOCHREALTIME")
load_end=$(bench_load)

machine=$(bench_machine)
echo "# Matrix factorisation: Loom vs the sequential reference"
echo
echo "- machine: $machine; repository HEAD $head_rev; started $started"
echo "- whole script $total_s s (generating $gen_ratings ratings: $gen_s s); load average $load_start at the start, $load_end at the end"
echo "- planted model on the generated ratings: $planted"
for set in ml gen; do
    if [[ $set == ml ]]; then a=0.90 b=0.87; else a=0.90 b=0.85; fi
    echo
    echo "## $set: time to test RMSE $a and $b"
    echo
    echo "| run | W | S | mode | clocks/epoch | epochs to $a | s to $a | epochs to $b | s to $b | vs seq (s to $b) | final test RMSE | updates/s | vs seq (updates/s) | MB/epoch | wall s | exit |"
    echo "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    awk -F'\t' -v set="$set" '
        $1 != set { next }
        {
            split($8, f, " ")  # epochs r1 t1 r2 t2 last_t rmse ups mb
            if ($2 == "seq") { seq_t = f[5]; seq_u = f[8] }
            sy = $2 == "seq" ? "-" : substr($2, match($2, /\.s[0-9]+$/) + 2)
            q1 = f[5] == "-" || seq_t == "" || seq_t == "-" ? "-" : sprintf("%.2f", f[5] / seq_t)
            q2 = seq_u == "" || seq_u == 0 ? "-" : sprintf("%.2f", f[8] / seq_u)
            printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                $2 == "seq" ? "sequential" : "loom", $3, $2 == "seq" ? "-" : $4, $5, sy,
                f[2], f[3], f[4], f[5], q1, f[7], f[8], q2, f[9], $7, $6
        }' "$results"
done
