#!/usr/bin/env bash
# run_pushpull_ab.sh: Loom's push/pull, two builds against each other.
#
#   bench/run_pushpull_ab.sh BEFORE_BUILD [AFTER_BUILD] [-- FLAGS...]
#
# For a change that must not make push/pull slower (a refactor, say): builds
# of the code before and after it, e.g. from `git worktree add ../before REV`.
# For each job shape SxW it runs, REPEAT times, interleaved and in alternating
# order (before first, then after first, so that a drift of the machine hits
# both sides alike),
#   BUILD/bin/loom run --insecure --servers S --workers W -- BUILD/bin/bench_pushpull FLAGS
# for both builds, and prints a Markdown table per shape of every case's
# median keys/s on each side and the ratio after/before, then the geometric
# mean of the ratios over all shapes.
#
# AFTER_BUILD defaults to "build"; FLAGS to --seconds 0.5 --batches
# 1,100,10000,1000000 --widths 1,64. Environment: CONFIGS (job shapes,
# default "1x1 2x2"), REPEAT (default 3), TIMEOUT (seconds per program,
# default 900), KEEP_LOGS=1 to keep each program's output.
set -euo pipefail
if [[ $# -lt 1 || $1 == -- ]]; then
    echo "usage: $0 BEFORE_BUILD [AFTER_BUILD] [-- FLAGS...]" >&2
    exit 2
fi
before=$1
shift
for exe in loom bench_pushpull; do
    if [[ ! -x $before/bin/$exe ]]; then
        echo "$0: $before/bin/$exe not found; build first" >&2
        exit 2
    fi
done

# shellcheck source-path=SCRIPTDIR source=pushpull_lib.sh
source "$(dirname "$0")/pushpull_lib.sh"
pushpull_setup "1x1 2x2" "push/pull: after against before" loom bench_pushpull -- "$@"
# shellcheck disable=SC2054 # the commas are bench_pushpull's list syntax
[[ ${#flags[@]} -gt 0 ]] || flags=(--seconds 0.5 --batches 1,100,10000,1000000 --widths 1,64)
echo "before: $before; after: $build; load average at the start: $(bench_load)"

# one SIDE DIR CFG REP: one run of bench_pushpull, its output in $logs/SIDE_CFG_REP.txt.
one() {
    run "$1_$3_$4" "$2/bin/loom" run --insecure --no-status --servers "$S" --workers "$W" \
        --timeout "$timeout_s" -- "$2/bin/bench_pushpull" "${flags[@]}"
}
files=()
for cfg in $configs; do
    shape "$cfg"
    for ((rep = 1; rep <= repeat; rep++)); do
        if ((rep % 2)); then
            one before "$before" "$cfg" "$rep"
            one after "$build" "$cfg" "$rep"
        else
            one after "$build" "$cfg" "$rep"
            one before "$before" "$cfg" "$rep"
        fi
        files+=("$logs/before_${cfg}_$rep.txt" "$logs/after_${cfg}_$rep.txt")
    done
done
echo "load average at the end: $(bench_load)"

for cfg in $configs; do
    echo
    echo "## $cfg (servers x workers)"
    echo
    awk "$PUSHPULL_AWK"'
        END {
            print "| width | batch | op | before keys/s | after keys/s | after/before |"
            print "|---:|---:|---|---:|---:|---:|"
            for (j = 0; j < n; j++) {
                k = order[j]; split(k, wb, " ")
                for (o = 0; o < 2; o++) {
                    op = o ? "pull" : "push"
                    a = med("before" SUBSEP k SUBSEP op SUBSEP 1); b = med("after" SUBSEP k SUBSEP op SUBSEP 1)
                    printf "| %s | %s | %s | %.0f | %.0f | %s |\n", wb[1], wb[2], op, a, b, ratio(b, a)
                    if (a > 0 && b > 0) printf "%.17g\n", log(b / a) >"'"$logs/ratios_$cfg"'"
                }
            }
        }' "$logs"/before_"${cfg}"_*.txt "$logs"/after_"${cfg}"_*.txt
done
echo
# Over every shape's cases: each shape's medians are its own.
cat "$logs"/ratios_* 2>/dev/null | awk '{ logs += $1; cases++ }
    END { if (cases) printf "geometric mean of after/before over %d cases: %.3f\n", cases, exp(logs / cases) }'
