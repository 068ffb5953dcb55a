#!/usr/bin/env bash
# `loom plot` as a user runs it: two metrics files overlaid into a valid PNG
# of the size asked for (signature, IHDR), the image depends on the data (the
# same input twice gives the same bytes, other values under the same names a
# different image), and every bad input or flag gets a clear message: exit 2
# for usage errors, 1 for bad files, a missing key, an unwritable output or a
# missing gnuplot, never an image on standard output.
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"

LOOM=${1:?usage: $0 PATH_TO_LOOM_BINARY}
work_dir plot
trap remove_work EXIT
cd "$WORK" || exit 1

# expect_plot STATUS PATTERN ARGS...: `loom plot ARGS...` exits STATUS, says PATTERN, prints nothing.
expect_plot() {
    expect "$1" "$2" plot "${@:3}"
    [[ -s out ]] && fail "loom plot $*: wrote to standard output"
    return 0
}

# metrics FILE SCALE: five epochs of an objective falling like SCALE / epoch.
metrics() {
    local e
    for e in 1 2 3 4 5; do
        echo "{\"epoch\": $e, \"time_s\": $((e * 2)).5, \"objective\": $(($1 * 100 / e)), \"test_rmse\": null, \"bytes_sent\": $((e * 1000)), \"bytes_received\": $((e * 300))}"
    done >"$1"
}

# png_size FILE: "WIDTH HEIGHT" from a PNG's IHDR, after checking the signature.
png_size() {
    local head
    head=$(od -An -tx1 -N24 -v "$1" | tr -d ' \n')
    [[ ${head:0:16} == 89504e470d0a1a0a ]] || fail "$1: not a PNG (starts $head)"
    [[ ${head:24:8} == 49484452 ]] || fail "$1: no IHDR chunk first"
    echo "$((16#${head:32:8})) $((16#${head:40:8}))"
}

mkdir a b c
metrics 3 && mv 3 a/run.jsonl
metrics 7 && mv 7 a/other.jsonl
metrics 3 && mv 3 b/run.jsonl
metrics 9 && mv 9 c/run.jsonl

run plot a/run.jsonl a/other.jsonl --y objective --out one.png
[[ $RC == 0 ]] || fail "plotting two runs: exit status $RC"
[[ -s out ]] && fail "plotting wrote to standard output"
[[ $(png_size one.png) == "900 560" ]] || fail "one.png: size $(png_size one.png), not 900 560"

for x in time_s bytes; do
    run plot a/run.jsonl a/other.jsonl --x "$x" --y objective --out "x_$x.png"
    [[ $RC == 0 && $(png_size "x_$x.png") == "900 560" ]] || fail "--x $x: exit status $RC"
    cmp -s one.png "x_$x.png" && fail "--x $x draws the same image as --x epoch"
done

# The same data under the same names: the same image, byte for byte; other
# values under the same names (the legend is the file names): another image.
run plot b/run.jsonl a/other.jsonl --y objective --out same.png
[[ $RC == 0 ]] && cmp -s one.png same.png || fail "the same data gave a different image"
mkdir d && cp c/run.jsonl d/run.jsonl && cp a/other.jsonl d/other.jsonl
run plot d/run.jsonl d/other.jsonl --y objective --out other.png
[[ $RC == 0 ]] || fail "plotting other data: exit status $RC"
cmp -s one.png other.png && fail "other data gave the same image"

# Without --y, the model's main metric: here objective (test_rmse is null), the same image.
run plot a/run.jsonl a/other.jsonl --out default.png
[[ $RC == 0 ]] && cmp -s one.png default.png || fail "without --y: not the objective's image"
printf '{"epoch": 1, "loss": 2}\n' >nomain.jsonl
expect_plot 1 "nomain.jsonl: its first line has none of the usual metrics" nomain.jsonl --out x.png

# Files with the same name: the legend uses their paths, and both are drawn.
run plot a/run.jsonl c/run.jsonl --y objective --out paths.png
[[ $RC == 0 && $(png_size paths.png) == "900 560" ]] || fail "two run.jsonl: exit status $RC"

# Usage errors: exit 2.
expect_plot 2 "--x takes epoch, time_s or bytes, not 'steps'" a/run.jsonl --x steps --y objective --out x.png
expect_plot 2 "no METRICS.jsonl file given" --y objective --out x.png
expect_plot 2 "--y needs a non-empty KEY" a/run.jsonl --y '' --out x.png
expect_plot 2 "--out FILE.png is required" a/run.jsonl --y objective
expect_plot 2 "unknown flag '--z'" a/run.jsonl --y objective --out x.png --z 1
expect_plot 2 "--out given twice" a/run.jsonl --y objective --out x.png --out y.png
# Bad data: exit 1, naming the file and line.
expect_plot 1 'a/run.jsonl:1: no key "accuracy"' a/run.jsonl --y accuracy --out x.png
expect_plot 1 '"test_rmse" is never a number' a/run.jsonl --y test_rmse --out x.png
printf '{"epoch": 1, "objective": 2}\n{"epoch": 2, "objective": [1]}\n' >bad.jsonl
expect_plot 1 "bad.jsonl:2: not a flat JSON object" bad.jsonl --y objective --out x.png
printf '{"epoch": 1, "objective": 2} trailing\n' >trail.jsonl
expect_plot 1 "trail.jsonl:1: not a flat JSON object" trail.jsonl --y objective --out x.png
printf '{"time_s": 1, "objective": 2}\n' >noepoch.jsonl
expect_plot 1 'noepoch.jsonl:1: no numeric "epoch" or "iteration"' noepoch.jsonl --y objective --out x.png
: >empty.jsonl
expect_plot 1 "empty.jsonl: no metrics lines" empty.jsonl --y objective --out x.png
expect_plot 1 "cannot read missing.jsonl" missing.jsonl --y objective --out x.png
expect_plot 1 "cannot write nodir/x.png" a/run.jsonl --y objective --out nodir/x.png
[[ -e x.png ]] && fail "a failed plot left x.png behind"
# LDA's metrics count iterations: --x epoch takes them.
printf '{"iteration": 1, "log_likelihood": -9.5}\n{"iteration": 2, "log_likelihood": -9.1}\n' >lda.jsonl
run plot lda.jsonl --y log_likelihood --out lda.png
[[ $RC == 0 && $(png_size lda.png) == "900 560" ]] || fail "LDA metrics: exit status $RC"
# Without gnuplot on PATH.
env PATH=/nonexistent "$LOOM" plot a/run.jsonl --y objective --out x.png >out 2>err
RC=$?
[[ $RC == 1 ]] && grep -qF "gnuplot is not installed" err || fail "without gnuplot: exit status $RC"
echo "loom plot: ok"
