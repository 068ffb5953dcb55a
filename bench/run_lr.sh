#!/usr/bin/env bash
# run_lr.sh: `loom train lr` against liblinear: time to a target test logloss.
#
#   bench/run_lr.sh [--install] [--quick] [BUILD_DIR]
#
# Two data sets:
#   a9a  the LIBSVM a9a files (train a9a, test a9a.t), from $A9A_DIR;
#   gen  `loom gen lr` rows (default 2,000,000 train + 100,000 test rows,
#        1,000,000 features, 30 non-zeros per row), written to a scratch dir.
#        `loom gen lr` draws the planted model and the rows from one seed, and
#        the first N rows of a file do not depend on --rows, so the script
#        writes ROWS + TEST_ROWS rows once and splits them: the first ROWS
#        lines train, the last TEST_ROWS lines test (same planted model).
#
# On each data set, in this order and in one run:
#   1. liblinear-train -s 0 (L2-regularised logistic regression, primal
#      trust-region Newton) -B 1 -c C, timed; then liblinear-predict -b 1 on
#      the test file, and the test logloss, accuracy and AUC of its
#      probabilities (awk). liblinear's reading time alone is measured with
#      `-c 0`: liblinear reads the whole file, then rejects C <= 0 and exits.
#   2. target = 1.01 x liblinear's test logloss.
#   3. `loom train lr --metrics` with 1, 2 and 4 workers (1, 1 and 2 servers)
#      and each of --consistency bsp, ssp:2, asp (SGD, AdaGrad updater), plus
#      --algo dbpg: time to target = time_s of the first epoch whose
#      test_logloss <= target (time_s counts from after reading the data and
#      opening the tables; it includes preparing the share, i.e. sorting its
#      feature ids (and, for DBPG, a column index), and every epoch's
#      evaluation), and the end-to-end time to target (wall time of the
#      process minus the epochs after the target: launch and reading too).
#   4. build/bin/read_libsvm on the training file with 1, 2 and 4 shares:
#      MB/s of LIBSVM parsed per share (one worker's read) and all shares at
#      once (threads).
# It prints Markdown tables (stdout) with the ratios Loom/liblinear and mode
# against mode; progress goes to stderr.
#
# Options:
#   --install   install liblinear-tools with apt-get if it is missing (root only)
#   --quick     a small generated set (200,000 + 20,000 rows, 100,000 features)
#               to try the script out in about a minute; figures not meaningful
#   BUILD_DIR   the CMake build with bin/loom and bin/read_libsvm (default build)
#
# Environment (defaults in brackets):
#   A9A_DIR [../shared/data/a9a next to the repository]   a9a and a9a.t
#   SCRATCH [${TMPDIR:-/tmp}]  the script makes a new directory in it for the
#           generated data, models and logs; about 1.2 GB with the default sizes
#   KEEP=1  keep the scratch directory (removed at the end otherwise)
#   ROWS [2000000] TEST_ROWS [100000] FEATURES [1000000] NNZ [30]  generated set
#   TIMEOUT [400]   seconds allowed to each training run
#   SETS ["a9a gen"] WORKERS ["1 2 4"] MODES ["bsp ssp:2 asp dbpg"]  a subset of
#           the runs (e.g. SETS=gen WORKERS="1 2" MODES="ssp:2 dbpg" on a busy machine)
#
# The hyperparameters (chosen in a short tuning pass, docs/BENCHMARKS.md):
#   liblinear      -c 1 on a9a, -c 0.1 on the generated set (the best test
#                  logloss of C in {0.01, 0.03, 0.1, 0.3, 1})
#   Loom SGD       AdaGrad, no l2; a9a: --lr 0.1 --minibatch 100 (the
#                  defaults), 10 epochs; generated: --lr 0.07 --minibatch 1000,
#                  3 epochs
#   Loom DBPG      the defaults (64 blocks, eta 1, delay 2), --l2 = 1/C (liblinear's
#                  objective, but for liblinear's penalty on the bias), 10 epochs
#
# Takes 12-16 minutes on a 2-vCPU machine with the default sizes (--quick: about 1).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

usage() {
    cat >&2 <<'EOF'
usage: bench/run_lr.sh [--install] [--quick] [BUILD_DIR]
  --install   install liblinear-tools with apt-get if missing (root only)
  --quick     small generated set, to try the script out (figures not meaningful)
  BUILD_DIR   CMake build with bin/loom and bin/read_libsvm (default build)
environment: A9A_DIR, SCRATCH, KEEP=1, ROWS, TEST_ROWS, FEATURES, NNZ, TIMEOUT
(see the comment at the top of this script)
EOF
    exit 2
}

install=0
quick=0
build=build
while [[ $# -gt 0 ]]; do
    case $1 in
        --install) install=1 ;;
        --quick) quick=1 ;;
        -h | --help) usage ;;
        -*)
            echo "$0: unknown option '$1'" >&2
            usage
            ;;
        *) build=$1 ;;
    esac
    shift
done

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
a9a_dir=${A9A_DIR:-$(dirname "$repo")/shared/data/a9a}
if [[ $quick == 1 ]]; then
    rows=${ROWS:-200000} test_rows=${TEST_ROWS:-20000} features=${FEATURES:-100000}
else
    rows=${ROWS:-2000000} test_rows=${TEST_ROWS:-100000} features=${FEATURES:-1000000}
fi
nnz=${NNZ:-30}
timeout_s=${TIMEOUT:-400}
sets=${SETS:-a9a gen}
workers=${WORKERS:-1 2 4}
modes=${MODES:-bsp ssp:2 asp dbpg}
for v in rows test_rows features nnz timeout_s; do
    if [[ ! ${!v} =~ ^[1-9][0-9]*$ ]]; then
        echo "$0: $v must be a positive whole number, not '${!v}'" >&2
        exit 2
    fi
done

# ---- tools and data ----

if ! command -v liblinear-train >/dev/null || ! command -v liblinear-predict >/dev/null; then
    if [[ $install == 1 && $(id -u) == 0 ]]; then
        echo "installing liblinear-tools" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y liblinear-tools >&2
    else
        echo "$0: liblinear-train and liblinear-predict are needed (Debian/Ubuntu package" >&2
        echo "liblinear-tools): run 'apt-get install liblinear-tools' as root, or this" >&2
        echo "script with --install as root." >&2
        exit 1
    fi
fi
loom=$build/bin/loom
reader=$build/bin/read_libsvm
for exe in "$loom" "$reader"; do
    if [[ ! -x $exe ]]; then
        echo "$0: $exe not found; build first (cmake --build $build)" >&2
        exit 2
    fi
done
for f in "$a9a_dir/a9a" "$a9a_dir/a9a.t"; do
    if [[ ! -r $f ]]; then
        echo "$0: $f not found; set A9A_DIR to the directory with a9a and a9a.t" >&2
        exit 2
    fi
done

scratch_parent=${SCRATCH:-${TMPDIR:-/tmp}}
mkdir -p "$scratch_parent"
scratch=$(bench_scratch run_lr "$scratch_parent")
cleanup() {
    if [[ ${KEEP:-0} == 1 ]]; then
        echo "scratch files kept in $scratch" >&2
    else
        rm -rf "$scratch"
    fi
}
trap cleanup EXIT

# secs START END: END - START, 3 decimals.
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
head_rev=$(bench_head "$repo")
load_start=$(bench_load)
t_script=$EPOCHREALTIME

gen_train=$scratch/gen.train
gen_test=$scratch/gen.test
gen_s=0 planted="not generated"
if [[ " $sets " == *" gen "* ]]; then
log "generating $((rows + test_rows)) rows x $features features x $nnz nnz into $scratch"
t0=$EPOCHREALTIME
"$loom" gen lr --out "$scratch/gen.all" --rows $((rows + test_rows)) --features "$features" \
    --nnz "$nnz" --seed 1 --planted-out "$scratch/planted.model" --quiet
head -n "$rows" "$scratch/gen.all" >"$gen_train"
tail -n "$test_rows" "$scratch/gen.all" >"$gen_test"
rm -f "$scratch/gen.all"
gen_s=$(secs "$t0" "$EPOCHREALTIME")
# The planted model is the Bayes-optimal classifier: the floor for any model.
planted=$("$loom" predict lr --model "$scratch/planted.model" --data "$gen_test" 2>&1)
fi

# ---- liblinear ----

# eval_probs TEST PRED: "logloss accuracy auc" of liblinear-predict -b 1
# output PRED (header "labels 1 -1", then "label p1 p2") against TEST's labels.
eval_probs() {
    local test=$1 pred=$2
    awk 'NR == FNR { y[NR] = ($1 + 0 > 0); next }
         FNR == 1 { for (i = 2; i <= NF; i++) if ($i + 0 == 1) col = i; next }
         { print y[FNR - 1], $col }' "$test" "$pred" |
        sort -g -k2,2 |
        awk '{ y[NR] = $1; p[NR] = $2 }
             END {
                 n = NR; ll = 0; ok = 0; pos = 0; ranks = 0
                 for (i = 1; i <= n; i++) {
                     q = y[i] ? p[i] : 1 - p[i]
                     if (q < 1e-15) q = 1e-15
                     ll -= log(q)
                     ok += (p[i] > 0.5) == y[i]
                 }
                 # AUC from the rank sum of the positives, ties at mean rank.
                 for (i = 1; i <= n; i = j) {
                     for (j = i; j <= n && p[j] == p[i]; j++) {}
                     r = (i + j - 1) / 2
                     for (k = i; k < j; k++) if (y[k]) { pos++; ranks += r }
                 }
                 neg = n - pos
                 auc = pos && neg ? (ranks - pos * (pos + 1) / 2) / (pos * neg) : 0.5
                 printf "%.6f %.4f %.4f\n", ll / n, ok / n, auc
             }'
}

# liblinear NAME TRAIN TEST C: sets ll_read ll_train ll_logloss ll_acc ll_auc.
liblinear() {
    local name=$1 train=$2 test=$3 c=$4 t0 out
    log "$name: liblinear reading only (-c 0)"
    t0=$EPOCHREALTIME
    out=$(timeout "$timeout_s" liblinear-train -q -s 0 -c 0 -B 1 "$train" "$scratch/none" 2>&1 || true)
    if [[ $out == *"C <= 0"* ]]; then
        ll_read=$(secs "$t0" "$EPOCHREALTIME")
    else
        ll_read=n/a
    fi
    log "$name: liblinear-train -s 0 -c $c -B 1"
    t0=$EPOCHREALTIME
    timeout "$timeout_s" liblinear-train -s 0 -c "$c" -B 1 "$train" "$scratch/$name.liblinear" \
        >"$scratch/$name.liblinear.log"
    ll_train=$(secs "$t0" "$EPOCHREALTIME")
    liblinear-predict -b 1 "$test" "$scratch/$name.liblinear" "$scratch/$name.pred" \
        >>"$scratch/$name.liblinear.log"
    read -r ll_logloss ll_acc ll_auc < <(eval_probs "$test" "$scratch/$name.pred")
    log "$name: liblinear $ll_train s (reading $ll_read s), test logloss $ll_logloss"
}

# ---- Loom ----

# summarise METRICS TARGET: one line from a --metrics file:
# epochs reach_epoch reach_time_s final_time_s logloss accuracy auc ex_per_s mb_per_epoch
summarise() {
    awk -v target="$2" '
        function get(key,   s) {
            if (!match($0, "\"" key "\": [^,}]*")) return ""
            s = substr($0, RSTART, RLENGTH)
            sub(/^[^:]*: /, "", s)
            return s
        }
        {
            n++
            ll = get("test_logloss")
            t = get("time_s")
            if (reach == "" && ll != "null" && ll + 0 <= target) { reach = n; reach_t = t }
            ex += get("examples_per_s")
            last_t = t; last_ll = ll; acc = get("test_accuracy"); auc = get("test_auc")
            bytes = get("bytes_sent") + get("bytes_received")
        }
        END {
            if (!n) { print "0 - - - - - - - -"; exit }
            printf "%d %s %s %s %.5f %.4f %.4f %.0f %.1f\n", n, reach == "" ? "-" : reach,
                reach == "" ? "-" : reach_t, last_t, last_ll, acc, auc, ex / n, bytes / n / 1e6
        }' "$1"
}

results=$scratch/results.tsv
: >"$results"

# train_loom NAME TRAIN TEST TARGET W S MODE EPOCHS FLAGS...: one run, one
# line of $results.
train_loom() {
    local name=$1 train=$2 test=$3 target=$4 w=$5 s=$6 mode=$7 epochs=$8
    shift 8
    local tag="$name.w$w.${mode/:/}" t0 wall rc=0
    log "$name: loom train lr --workers $w --servers $s $mode --epochs $epochs $*"
    t0=$EPOCHREALTIME
    timeout "$timeout_s" "$loom" train lr --train "$train" --test "$test" --workers "$w" \
        --servers "$s" --epochs "$epochs" --metrics "$scratch/$tag.json" "$@" \
        >"$scratch/$tag.log" 2>&1 || rc=$?
    wall=$(secs "$t0" "$EPOCHREALTIME")
    local sum
    sum=$(summarise "$scratch/$tag.json" "$target")
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$w" "$s" "$mode" "$rc" "$wall" "$epochs" \
        "$sum" >>"$results"
    log "$name: rc $rc, wall $wall s, summary $sum"
}

# loom_all NAME TRAIN TEST TARGET SGD_EPOCHS DBPG_EPOCHS L2_DBPG SGD_FLAGS...
loom_all() {
    local name=$1 train=$2 test=$3 target=$4 e_sgd=$5 e_dbpg=$6 l2=$7
    shift 7
    local w s mode
    for w in $workers; do
        s=1
        if [[ $w == 4 ]]; then s=2; fi
        for mode in $modes; do
            if [[ $mode == dbpg ]]; then
                train_loom "$name" "$train" "$test" "$target" "$w" "$s" dbpg "$e_dbpg" \
                    --algo dbpg --l2 "$l2"
            else
                train_loom "$name" "$train" "$test" "$target" "$w" "$s" "$mode" "$e_sgd" \
                    --algo sgd --updater adagrad --consistency "$mode" "$@"
            fi
        done
    done
}

# ---- the runs ----

declare -A LL_READ LL_TRAIN LL_LOSS LL_ACC LL_AUC TARGET BYTES NROWS CPARAM
run_set() {
    local name=$1 train=$2 test=$3 c=$4 e_sgd=$5 e_dbpg=$6
    shift 6
    liblinear "$name" "$train" "$test" "$c"
    LL_READ[$name]=$ll_read LL_TRAIN[$name]=$ll_train LL_LOSS[$name]=$ll_logloss
    LL_ACC[$name]=$ll_acc LL_AUC[$name]=$ll_auc
    TARGET[$name]=$(awk -v l="$ll_logloss" 'BEGIN { printf "%.6f", l * 1.01 }')
    BYTES[$name]=$(stat -c %s "$train")
    NROWS[$name]=$(wc -l <"$train")
    CPARAM[$name]=$c
    local l2
    l2=$(awk -v c="$c" 'BEGIN { printf "%g", 1 / c }')
    loom_all "$name" "$train" "$test" "${TARGET[$name]}" "$e_sgd" "$e_dbpg" "$l2" "$@"
}

for name in $sets; do
    case $name in
        a9a) run_set a9a "$a9a_dir/a9a" "$a9a_dir/a9a.t" 1 10 10 --lr 0.1 --minibatch 100 ;;
        gen) run_set gen "$gen_train" "$gen_test" 0.1 3 10 --lr 0.07 --minibatch 1000 ;;
        *)
            echo "$0: SETS may hold a9a and gen, not '$name'" >&2
            exit 2
            ;;
    esac
done

# Reading: per share and all shares at once (best of R runs after a warm read).
reading=$scratch/reading.tsv
: >"$reading"
for name in $sets; do
    if [[ $name == a9a ]]; then f=$a9a_dir/a9a rep=10; else f=$gen_train rep=2; fi
    for n in 1 2 4; do
        log "$name: read_libsvm --shards $n --repeat $rep"
        out=$(timeout "$timeout_s" "$reader" "$f" --shards "$n" --repeat "$rep")
        echo "$out" >"$scratch/$name.read$n.txt"
        awk -v name="$name" -v n="$n" '
            /^naive/ { naive = $(NF - 1) }
            /^share / { sum += $3; k++; if (min == "" || $3 < min) min = $3 }
            /threads/ { thr = $4 }
            END { printf "%s\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\n", name, n, naive, sum / k, min,
                         thr, thr / n }' <<<"$out" >>"$reading"
    done
done
total_s=$(secs "$t_script" "$EPOCHREALTIME")
load_end=$(bench_load)

# ---- tables ----

machine=$(bench_machine_mem)
llver=$(dpkg-query -W -f '${Version}' liblinear-tools 2>/dev/null || echo unknown)

echo "# Logistic regression: Loom vs liblinear, time to target"
echo
echo "- machine: $machine"
echo "- liblinear-tools $llver; loom: $loom (repository HEAD $head_rev at the start)"
echo "- started $started; whole script $total_s s (generating the data $gen_s s);"
echo "  load average (1, 5, 15 min) $load_start at the start, $load_end at the end"
echo "- generated set: $rows train + $test_rows test rows, $features features, $nnz non-zeros per row, seed 1;"
echo "  planted (Bayes-optimal) model on the test rows: $planted"
echo
echo "## liblinear (-s 0 -B 1), the reference"
echo
echo "| data | train rows | train MB | C | read s | train s (read + solve) | solve s | test logloss | accuracy | AUC | target logloss (x1.01) |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for name in $sets; do
    awk -v n="$name" -v r="${NROWS[$name]}" -v b="${BYTES[$name]}" -v c="${CPARAM[$name]}" \
        -v rd="${LL_READ[$name]}" -v tr="${LL_TRAIN[$name]}" -v l="${LL_LOSS[$name]}" \
        -v a="${LL_ACC[$name]}" -v u="${LL_AUC[$name]}" -v t="${TARGET[$name]}" 'BEGIN {
        solve = rd == "n/a" ? "n/a" : sprintf("%.2f", tr - rd)
        printf "| %s | %d | %.1f | %s | %s | %.2f | %s | %.5f | %.4f | %.4f | %.5f |\n",
            n, r, b / 1e6, c, rd, tr, solve, l, a, u, t }'
done

for name in $sets; do
    echo
    echo "## $name: Loom, time to target logloss ${TARGET[$name]}"
    echo
    echo "train s = time_s of the first epoch at or below the target (from after reading"
    echo "and opening the tables: preparing the share and evaluation included). e2e s ="
    echo "process wall time to that epoch (launch and reading too). Ratios Loom/liblinear:"
    echo "train s against liblinear's solve time, e2e s against its read + solve time."
    echo "\"vs 1w bsp\" = train s / train s of 1 worker, BSP. ex/s: all workers, mean"
    echo "over epochs; MB/epoch: bytes sent + received by all workers."
    echo
    echo "| W | S | mode | epochs to target | train s | e2e s | Loom/liblinear (train) | Loom/liblinear (e2e) | vs 1w bsp | final logloss | accuracy | AUC | ex/s | MB/epoch | wall s | exit |"
    echo "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    awk -F'\t' -v n="$name" -v rd="${LL_READ[$name]}" -v tr="${LL_TRAIN[$name]}" '
        $1 != n { next }
        {
            split($8, f, " ")
            # f: epochs reach reach_t last_t ll acc auc ex mb
            line[NR] = $0; w[NR] = $2; s[NR] = $3; mode[NR] = $4; rc[NR] = $5; wall[NR] = $6
            ep[NR] = $7; done_[NR] = f[1]; reach[NR] = f[2]; rt[NR] = f[3]; lt[NR] = f[4]
            ll[NR] = f[5]; acc[NR] = f[6]; auc[NR] = f[7]; ex[NR] = f[8]; mb[NR] = f[9]
            if ($2 == 1 && $4 == "bsp" && f[2] != "-") ref = f[3]
            order[++k] = NR
        }
        END {
            solve = rd == "n/a" ? "" : tr - rd
            for (i = 1; i <= k; i++) {
                r = order[i]
                if (reach[r] == "-") {
                    ept = "not in " done_[r]; t = "-"; e2e = "-"; q1 = "-"; q2 = "-"; q3 = "-"
                } else {
                    ept = reach[r]; t = sprintf("%.2f", rt[r])
                    e2e_v = wall[r] - (lt[r] - rt[r]); e2e = sprintf("%.2f", e2e_v)
                    q1 = solve == "" ? "n/a" : sprintf("%.2f", rt[r] / solve)
                    q2 = sprintf("%.2f", e2e_v / tr)
                    q3 = ref == "" ? "n/a" : sprintf("%.2f", rt[r] / ref)
                }
                printf "| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %s |\n",
                    w[r], s[r], mode[r], ept, t, e2e, q1, q2, q3, ll[r], acc[r], auc[r], ex[r],
                    mb[r], wall[r], rc[r]
            }
        }' "$results"
    echo
    echo "Mode against mode, train s to target (ratio to BSP with the same workers):"
    echo
    echo "| W | bsp | ssp:2 | asp | dbpg |"
    echo "|---:|---:|---:|---:|---:|"
    awk -F'\t' -v n="$name" '
        $1 != n { next }
        { split($8, f, " "); t[$2, $4] = f[2] == "-" ? "" : f[3] }
        END {
            for (w = 1; w <= 4; w *= 2) {
                if (!((w, "bsp") in t) && !((w, "ssp:2") in t) && !((w, "asp") in t) && !((w, "dbpg") in t)) continue
                b = t[w, "bsp"]
                printf "| %d |", w
                split("bsp ssp:2 asp dbpg", m, " ")
                for (j = 1; j <= 4; j++) {
                    v = t[w, m[j]]
                    if (!((w, m[j]) in t)) printf " not run |"
                    else if (v == "") printf " not reached |"
                    else if (b == "" || j == 1) printf " %.2f s |", v
                    else printf " %.2f s (%.2fx) |", v, v / b
                }
                printf "\n"
            }
        }' "$results"
done

echo
echo "## Reading throughput (read_libsvm, ids auto, page cache warm)"
echo
echo "MB = 10^6 bytes of LIBSVM text. per share = one share read alone (what one"
echo "worker parses per second); N threads = all shares at once, whole file / wall"
echo "time, and that divided by N (per worker when N workers share the machine)."
echo
echo "| data | shares N | naive fgets+strtod MB/s | per share MB/s (mean) | per share MB/s (slowest) | N threads MB/s | per worker MB/s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
awk -F'\t' '{ printf "| %s | %d | %d | %d | %d | %d | %d |\n", $1, $2, $3, $4, $5, $6, $7 }' "$reading"
echo
echo "liblinear reads the same files at: a9a $(awk -v b="${BYTES[a9a]:-0}" -v t="${LL_READ[a9a]:-n/a}" 'BEGIN { if (t == "n/a") print "n/a"; else printf "%.0f MB/s", b / t / 1e6 }'), gen $(awk -v b="${BYTES[gen]:-0}" -v t="${LL_READ[gen]:-n/a}" 'BEGIN { if (t == "n/a") print "n/a"; else printf "%.0f MB/s", b / t / 1e6 }') (one thread, whole process: start, read, exit)."
