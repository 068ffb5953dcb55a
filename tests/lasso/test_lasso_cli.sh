#!/usr/bin/env bash
# `loom gen lasso`, `loom train lasso --sequential` and `loom predict lasso`
# as a user runs them: same seed, same file; the metrics JSONL has a line per
# pass with the objective, train_rmse and nnz, the objective never growing;
# the planted beta predicts its own data to the noise; bad flags exit 2 naming
# the flag, malformed data and model files exit 1 naming FILE:LINE.
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"

LOOM=${1:?usage: $0 PATH_TO_LOOM_BINARY}
work_dir lasso-cli
trap remove_work EXIT
cd "$WORK" || exit 1

GEN=(gen lasso --rows 400 --features 300 --group 10 --corr 0.9 --nonzeros 15 --noise 0.2)

# Same seed, same bytes; another seed differs; --out - is the same file.
run "${GEN[@]}" --seed 3 --out a.svm --planted-out planted.model
[[ $RC == 0 ]] || fail "gen: exit status $RC"
run "${GEN[@]}" --seed 3 --out b.svm
cmp -s a.svm b.svm || fail "same seed, different files"
run "${GEN[@]}" --seed=3 --out=-
cmp -s a.svm out || fail "--out - differs from --out FILE"
run "${GEN[@]}" --seed 4 --out c.svm
cmp -s a.svm c.svm && fail "different seeds, same file"
[[ $(wc -l <a.svm) == 400 ]] || fail "expected 400 rows"
grep -qvE '^-?[0-9.e+-]+( [0-9]+:-?[0-9.e+-]+)+$' a.svm && fail "a row is not LIBSVM regression"
[[ $(head -n 1 planted.model) == "loom-lasso 2 dim=300 nnz=15 lambda=0 intercept=0" ]] ||
    fail "planted model header: $(head -n 1 planted.model)"

# The planted beta predicts y up to the noise (standard deviation 0.2).
run predict lasso --model planted.model --data a.svm
[[ $RC == 0 ]] || fail "predict planted: exit status $RC"
rmse=$(awk '{print $4}' out)
numeric_check 'r > 0.17 && r < 0.23' r="$rmse" || fail "planted rmse $rmse is not about 0.2"

# Training: one JSON line per pass, objective never growing, nnz counted.
run train lasso --train a.svm --sequential --lambda-ratio 0.05 --metrics m.jsonl \
    --model-out m.model --quiet
[[ $RC == 0 ]] || fail "train: exit status $RC"
[[ -s err ]] && fail "train --quiet wrote to stderr"
[[ $(wc -l <m.jsonl) -ge 2 ]] || fail "fewer than 2 metrics lines"
grep -qvE '^\{"iteration": [0-9]+, "time_s": [0-9.]+, "updates": [0-9]+, "objective": [0-9.e+-]+, "train_rmse": [0-9.e+-]+, "nnz": [0-9]+, "max_change": [0-9.e+-]+\}$' m.jsonl &&
    fail "a metrics line is not as documented: $(head -n 1 m.jsonl)"
awk -F'"objective": ' '{split($2, a, ","); if (NR > 1 && a[1] > prev * (1 + 1e-12)) bad = 1; prev = a[1]}
    END {exit bad}' m.jsonl || fail "the objective grew between passes"
nnz=$(tail -n 1 m.jsonl | sed 's/.*"nnz": \([0-9]*\).*/\1/')
[[ $(head -n 1 m.model) == "loom-lasso 2 dim=300 nnz=$nnz "* ]] ||
    fail "the model's nnz is not the last metrics line's $nnz: $(head -n 1 m.model)"
run predict lasso --model m.model --data a.svm --out pred.txt
[[ $RC == 0 ]] || fail "predict: exit status $RC"
[[ $(wc -l <pred.txt) == 400 ]] || fail "--out: expected 400 predictions"
train_rmse=$(tail -n 1 m.jsonl | sed 's/.*"train_rmse": \([^,]*\),.*/\1/')
rmse=$(awk '{print $4}' out)
numeric_check 'r - t < 1e-6 && t - r < 1e-6' r="$rmse" t="$train_rmse" ||
    fail "predict's rmse $rmse is not train_rmse $train_rmse"
# Progress lines without --quiet.
run train lasso --train a.svm --sequential --iterations 3 --tol 0
[[ $RC == 0 ]] || fail "train with progress: exit status $RC"
[[ $(grep -c '^iteration ' err) == 3 ]] || fail "expected 3 progress lines"

# Usage errors: exit 2, naming the flag.
expect 2 "--out FILE is required" gen lasso
expect 2 "--nonzeros (20) must be at most --features (10)" gen lasso --out x --features 10
expect 2 "--group (20) must be at most --features (10)" gen lasso --out x --features 10 --nonzeros 1 --group 20
expect 2 "--corr" gen lasso --out x --corr 1
expect 2 "--rows" gen lasso --out x --rows 0
expect 2 "--density" gen lasso --out x --density 0
expect 2 "unknown flag '--bogus'" gen lasso --out x --bogus 1
[[ -e x ]] && fail "a usage error wrote a file"
expect 2 "--schedule" train lasso --train a.svm --sequential --schedule random
expect 2 "--parallel is for the scheduled engine" train lasso --train a.svm --sequential --parallel 4
expect 2 "--train FILE is required" train lasso --sequential
expect 2 "--lambda takes a number above 0" train lasso --train a.svm --sequential --lambda 0
expect 2 "--lambda-ratio takes a number in (0, 1]" train lasso --train a.svm --sequential --lambda-ratio 0
expect 2 "--lambda-ratio" train lasso --train a.svm --sequential --lambda 1 --lambda-ratio 0.5
expect 2 "--iterations" train lasso --train a.svm --sequential --iterations 0
expect 2 "cannot read missing.svm" train lasso --train missing.svm --sequential
expect 2 "cannot write nodir/m.model" train lasso --train a.svm --sequential --model-out nodir/m.model
expect 2 "--model M is required" predict lasso --data a.svm

# Malformed data and models: exit 1 with FILE:LINE.
printf '1.5 1:0.5 2:1\n2.0 1:x\n' >bad.svm
expect 1 "bad.svm:2:" train lasso --train bad.svm --sequential
expect 1 "bad.svm:2:" predict lasso --model m.model --data bad.svm
: >empty.svm
expect 1 "empty.svm: no examples" train lasso --train empty.svm --sequential
# Two rows with feature id 4000000000: the columns (64 GB) do not fit the 1 GB given here,
# and the message names them and the id, not the 2 rows. An AddressSanitizer build needs
# terabytes of address space for its shadow, so there its allocator sets the limit.
printf '1 4000000000:1\n2 1:1\n' >bigid.svm
(
    if grep -q __asan_init "$LOOM"; then
        export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1:max_allocation_size_mb=1000
    else
        ulimit -v 1000000
    fi
    expect 1 "out of memory for 4000000000 columns (96 GB): the largest feature id is 4000000000" \
        train lasso --train bigid.svm --sequential
)
(($? == 0)) || exit 1
printf 'loom-lasso 1 dim=3 nnz=1 lambda=1\n7 1\n' >bad.model
expect 1 "bad.model:2: feature id 7 is not below dim=3" predict lasso --model bad.model --data a.svm
# Writing to a full disk fails with exit 1 and says so.
if [[ -w /dev/full ]]; then
    expect 1 "write failed" gen lasso --out /dev/full --rows 2000
fi
echo "lasso cli: all checks passed"
