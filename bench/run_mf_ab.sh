#!/usr/bin/env bash
# run_mf_ab.sh: two builds of `loom train mf` (A, B: before and after a
# change) against the sequential reference, interleaved, on ml-latest-small.
#
#   bench/run_mf_ab.sh BUILD_A BUILD_B [ROUNDS]
#
# Each round runs, one after the other: BUILD_B's bin/mf_seq, BUILD_A's and
# BUILD_B's `bin/loom train mf --train ratings.csv --test-fraction 0.1
# --workers 1 --consistency bsp --quiet` (default flags: rank 16, 40 epochs,
# one clock per epoch), each under /usr/bin/time. On a loaded machine single
# runs vary by 2x, so it prints medians over ROUNDS (default 15) rounds of:
# the time to test RMSE 0.87 (time_s of the first epoch at or below it), the
# reference's time over Loom's in the same round (its quartiles too), the
# time of all epochs, the wall time per epoch after the target epoch (the
# steady state), and the CPU seconds of all of a job's processes.
#
# Environment: ML_DIR [../shared/data/ml-latest-small next to the repository],
# TARGET [0.87; every run must reach it], LOOM_EXTRA (more flags for the two
# Loom runs, e.g. --insecure).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
[[ $# -ge 2 ]] || { echo "usage: bench/run_mf_ab.sh BUILD_A BUILD_B [ROUNDS]" >&2; exit 2; }
a=$1 b=$2 rounds=${3:-15}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
ml=${ML_DIR:-$(dirname "$repo")/shared/data/ml-latest-small}/ratings.csv
target=${TARGET:-0.87}
[[ -r $ml ]] || { echo "$0: $ml not found; set ML_DIR" >&2; exit 2; }
bench_need_exe "$0" "" "$a/bin/loom" "$b/bin/loom" "$b/bin/mf_seq"
scratch=$(bench_scratch run_mf_ab)
trap 'rm -rf "$scratch"' EXIT
flags=(--train "$ml" --test-fraction 0.1)
read -ra loom_extra <<<"${LOOM_EXTRA:-}"

# one NAME COMMAND...: run it, print "t_target t_last epoch_target epochs cpu_s".
one() {
    local name=$1
    shift
    /usr/bin/time -f "%U %S" -o "$scratch/$name.time" "$@" --metrics "$scratch/$name.json" \
        >/dev/null 2>"$scratch/$name.err" || { echo "$name failed:" >&2; tail "$scratch/$name.err" >&2; exit 1; }
    awk -v t="$target" -v cpu="$(awk '{ print $1 + $2 }' "$scratch/$name.time")" '
        function get(key,   s) {
            if (!match($0, "\"" key "\": [^,}]*")) return ""
            s = substr($0, RSTART, RLENGTH); sub(/^[^:]*: /, "", s); return s
        }
        { r = get("test_rmse"); ts = get("time_s"); e = get("epoch")
          if (hit == "" && r != "null" && r + 0 <= t) { hit = ts; he = e }
          last = ts; le = e }
        END { print (hit == "" ? "-" : hit), last, (he == "" ? "-" : he), le, cpu }' \
        "$scratch/$name.json"
}

load_start=$(bench_load)
for ((i = 0; i < rounds; i++)); do
    echo "seq $(one seq "$b/bin/mf_seq" "${flags[@]}")" \
        "A $(one a "$a/bin/loom" train mf "${flags[@]}" --workers 1 --consistency bsp --quiet "${loom_extra[@]}")" \
        "B $(one b "$b/bin/loom" train mf "${flags[@]}" --workers 1 --consistency bsp --quiet "${loom_extra[@]}")" \
        >>"$scratch/rounds"
    echo "round $((i + 1))/$rounds: $(tail -n 1 "$scratch/rounds")" >&2
done
load_end=$(bench_load)

echo "# MF, one worker under BSP: A = $a, B = $b, $rounds interleaved rounds"
echo
echo "- load average $load_start at the start, $load_end at the end; medians over the rounds"
echo
awk '
    function median(x, n,   i, j, t) {
        for (i = 2; i <= n; i++) for (j = i; j > 1 && x[j - 1] > x[j]; j--) { t = x[j]; x[j] = x[j - 1]; x[j - 1] = t }
        return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
    }
    function quart(x, n, q,   i, j, t) { median(x, n); return x[int(q * (n - 1)) + 1] }
    # fields: seq t_hit t_last e_hit e_last cpu A ... B ...
    {
        n++
        for (k = 0; k < 3; k++) {
            o = 1 + 6 * k
            hit[k, n] = $(o + 1); last[k, n] = $(o + 2); eh[k] = $(o + 3); el[k] = $(o + 4)
            cpu[k, n] = $(o + 5)
            per[k, n] = ($(o + 2) - $(o + 1)) / ($(o + 4) - $(o + 3)) * 1000
            ratio[k, n] = $(o + 1) / $2 ? $2 / $(o + 1) : 0
        }
    }
    END {
        name[0] = "reference"; name[1] = "A"; name[2] = "B"
        printf "| | %s | %s | %s |\n|---|---:|---:|---:|\n", name[0], name[1], name[2]
        row("s to the target", hit); row("s for all epochs", last)
        row("ms per epoch after the target epoch", per); row("CPU s of all processes", cpu)
        printf "| reference s / s to the target, per round | 1"
        for (k = 1; k < 3; k++) {
            for (i = 1; i <= n; i++) x[i] = ratio[k, i]
            printf " | %.2f (quartiles %.2f-%.2f)", median(x, n), quart(x, n, 0.25), quart(x, n, 0.75)
        }
        printf " |\n"
        printf "| epoch of the target, epochs | %s of %s | %s of %s | %s of %s |\n", eh[0], el[0], eh[1], el[1], eh[2], el[2]
    }
    function row(label, v,   k, i, x) {
        printf "| %s", label
        for (k = 0; k < 3; k++) { for (i = 1; i <= n; i++) x[i] = v[k, i]; printf " | %.3f", median(x, n) }
        printf " |\n"
    }' "$scratch/rounds"
