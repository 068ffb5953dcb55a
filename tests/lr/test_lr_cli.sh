#!/usr/bin/env bash
# `loom gen lr` and `loom predict lr` as a user runs them: same seed, same
# file; usage errors exit 2 naming the flag; the planted model, saved by gen
# and loaded by predict, scores its own data well above the majority class;
# --out writes one probability per row; I/O errors exit 1.
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"

LOOM=${1:?usage: $0 PATH_TO_LOOM_BINARY}
work_dir lr-cli
trap remove_work EXIT
cd "$WORK" || exit 1

# bad PATTERN ARGS...: `loom gen lr ARGS...` exits 2, names PATTERN, writes nothing.
bad() {
    local pattern=$1
    shift
    rm -f bad.svm
    run gen lr --out bad.svm "$@"
    [[ $RC == 2 ]] || fail "loom gen lr $*: expected exit status 2, got $RC"
    grep -qF -- "$pattern" err || fail "loom gen lr $*: message does not name '$pattern'"
    [[ -e bad.svm ]] && fail "loom gen lr $*: wrote a file anyway"
    return 0
}

GEN=(gen lr --rows 20000 --features 20000 --nnz 20 --quiet)

# Same seed, same bytes (to a file and to standard output); another seed differs.
run "${GEN[@]}" --seed 7 --out a.svm --planted-out a.model
[[ $RC == 0 ]] || fail "gen: exit status $RC"
[[ -s err ]] && fail "gen --quiet wrote to stderr"
run "${GEN[@]}" --seed 7 --out b.svm
cmp -s a.svm b.svm || fail "same seed, different files"
run "${GEN[@]}" --seed=7 --out=-
cmp -s a.svm out || fail "--out - differs from --out FILE"
run "${GEN[@]}" --seed 8 --out c.svm
cmp -s a.svm c.svm && fail "different seeds, same file"
[[ $(wc -l <a.svm) == 20000 ]] || fail "expected 20000 rows"
grep -qvE '^[+-]1( [0-9]+:1){20}$' a.svm && fail "a row is not '+-1' and 20 'id:1'"

# Progress on stderr unless --quiet.
run gen lr --rows 1000 --features 100 --nnz 5 --out p.svm
[[ $RC == 0 ]] || fail "gen with progress: exit status $RC"
expected=$(for i in 1 2 3 4 5 6 7 8 9 10; do echo "loom gen lr: $((i * 10))% ($((i * 100)) of 1000 rows)"; done)
[[ $(<err) == "$expected" ]] || fail "progress is not one line per 10%"

# Usage errors.
bad "--rows" --rows 0
bad "--rows" --rows abc
bad "--rows" --rows " 5"
bad "--rows" --rows +5
bad "--rows" --rows -5
bad "--rows" --rows 99999999999999999999
bad "--rows needs a value" --rows
bad "--rows given twice" --rows 5 --rows 6
bad "--features" --features 0
bad "--nnz" --nnz 0
bad "--nnz" --nnz 4294967296
bad "--nnz (11) must be at most --features (10)" --features 10 --nnz 11
bad "--seed" --seed 1x
bad "--zipf" --zipf -1
bad "--zipf" --zipf abc
bad "--zipf" --zipf inf
bad "--density" --density 0
bad "--density" --density 1.5
bad "--density" --density nan
bad "--quiet takes no value" --quiet=1
bad "--planted-out" --planted-out ""
bad "unknown flag '--frobnicate'" --frobnicate
bad "unexpected argument 'extra'" extra
run gen lr --rows 10
[[ $RC == 2 ]] && grep -qF -- "--out FILE is required" err || fail "missing --out accepted"
run gen
[[ $RC == 2 ]] && grep -qE '^  lr ' err || fail "bare 'loom gen' does not list the generators"
run gen nb
[[ $RC == 2 ]] && grep -qF "unknown model 'nb'" err || fail "'loom gen nb' accepted"
run help gen
[[ $RC == 0 ]] && grep -qF -- "--planted-out FILE" out || fail "'loom help gen' lacks --planted-out"
run gen lr --help
[[ $RC == 0 ]] && grep -qF -- "--zipf A" out || fail "'loom gen lr --help' failed"

# I/O errors exit 1, and leave no partial file.
run gen lr --rows 10 --features 10 --nnz 3 --out /nonexistent/dir/x.svm
[[ $RC == 1 ]] && grep -qF "/nonexistent/dir/x.svm: cannot create" err || fail "unwritable --out: $RC"
# A full disk: /dev/full through a link of our own, so that a gen that wrongly
# removes its output after the failure removes only the link.
if [[ -c /dev/full && -w /dev/full ]]; then
    ln -s /dev/full full
    run gen lr --rows 100000 --features 1000 --nnz 30 --quiet --out full
    [[ $RC == 1 ]] && grep -qF "full: write failed: No space left on device" err ||
        fail "full disk: exit status $RC"
    [[ -L full ]] || fail "gen removed a device after failing to write it"
    # Small enough to sit in the buffer until the file is closed.
    run gen lr --rows 10 --features 10 --nnz 3 --quiet --out full
    [[ $RC == 1 ]] && grep -qF "full: write failed: No space left on device" err ||
        fail "full disk at close: exit status $RC"
    run gen lr --rows 10 --features 10 --nnz 3 --quiet --out ok.svm --planted-out full
    [[ $RC == 1 ]] && grep -qF "full: write failed: No space left on device" err ||
        fail "--planted-out on a full disk: exit status $RC"
    [[ -L full ]] || fail "gen removed a device after failing to write the model to it"
fi

# The planted model against the majority class, computed here from the labels.
run predict lr --model a.model --data a.svm --out prob.txt
[[ $RC == 0 ]] || fail "predict: exit status $RC"
read -r rows accuracy auc logloss < <(awk '{print $2, $4, $6, $8}' out)
[[ $(awk '{print $1, $3, $5, $7}' out) == "rows accuracy auc logloss" ]] || fail "summary format"
[[ $rows == 20000 ]] || fail "predict counted $rows rows"
majority=$(awk '{p += ($1 == "+1")} END {q = p / NR; print (q > 0.5 ? q : 1 - q)}' a.svm)
echo "planted model: accuracy $accuracy (majority $majority), auc $auc, logloss $logloss"
numeric_check 'a > m + 0.05 && u > 0.75' a="$accuracy" m="$majority" u="$auc" ||
    fail "accuracy $accuracy is not well above the majority rate $majority"
[[ $(wc -l <prob.txt) == 20000 ]] || fail "--out: expected 20000 probabilities"
grep -qvE '^(0\.[0-9]{6}|1\.000000)$' prob.txt && fail "--out: a line is not a probability"
# The probabilities agree with the accuracy: p > 0.5 exactly for predicted +1.
acc2=$(paste -d' ' prob.txt a.svm | awk '{c += (($1 > 0.5) == ($2 == "+1"))} END {printf "%.6f", c / NR}')
[[ $acc2 == "$accuracy" ]] || fail "--out probabilities give accuracy $acc2, summary says $accuracy"
run predict lr --model a.model --data a.svm --out -
[[ $(wc -l <out) == 20000 ]] && grep -qE '^rows 20000 ' err || fail "--out - mixes up the outputs"
run predict lr --model a.model --data a.svm --one-based
[[ $RC == 0 && $(awk '{print $4}' out) == "$accuracy" ]] || fail "--one-based changed the result"

# Feature ids valid in LIBSVM but beyond any model (2^32 + 1, 2^63 + 1,
# 2^64 - 1 read 1-based) count as weight 0, as every id beyond dim does.
awk 'NR <= 100 { print $0, "4294967297:1 9223372036854775809:2 18446744073709551615:3" }' a.svm >huge.svm
head -n 100 a.svm >plain.svm
run predict lr --model a.model --data plain.svm
cp out plain.out
run predict lr --model a.model --data huge.svm
[[ $RC == 0 && $(cat out) == $(cat plain.out) ]] || fail "huge feature ids changed the prediction"

# predict errors.
pbad() {
    local want_rc=$1 pattern=$2
    shift 2
    run predict "$@"
    [[ $RC == "$want_rc" ]] || fail "loom predict $*: expected exit status $want_rc, got $RC"
    grep -qF -- "$pattern" err || fail "loom predict $*: message does not name '$pattern'"
}
pbad 2 "--model M is required" lr --data a.svm
pbad 2 "--data FILE is required" lr --model a.model
pbad 2 "--data needs a value" lr --model a.model --data
pbad 2 "--model given twice" lr --model a.model --model a.model --data a.svm
pbad 2 "unknown flag '--frobnicate'" lr --model a.model --data a.svm --frobnicate
pbad 2 "--one-based and --zero-based exclude each other" lr --model a.model --data a.svm --one-based --zero-based
pbad 2 "unknown model 'nb'" nb
pbad 1 "missing.model: cannot open" lr --model missing.model --data a.svm
# A model file of zeros without a newline is refused on its first line, not
# read whole (64 MiB from a pipe: a loader that regressed would read
# /dev/zero itself until the machine runs out of memory).
pbad 1 ":1: line longer than 1024 bytes, not a Loom LR model" \
    lr --model <(head -c 67108864 /dev/zero) --data a.svm
printf 'loom-lr 1 dim=10 nnz=1 bias=0\n12 0.5\n' >broken.model
pbad 1 "broken.model:2: feature id 12 is not below dim=10" lr --model broken.model --data a.svm
pbad 1 "missing.svm" lr --model a.model --data missing.svm
: >empty.svm
pbad 1 "empty.svm: no examples" lr --model a.model --data empty.svm
pbad 1 "/nonexistent/dir/p.txt: cannot create" lr --model a.model --data a.svm --out /nonexistent/dir/p.txt
echo PASS
