#!/usr/bin/env bash
# run_pushpull_ab.sh: Loom's push/pull, two builds against each other.
#
#   bench/run_pushpull_ab.sh BEFORE_BUILD AFTER_BUILD [-- FLAGS...]
#
# For a change that must not make push/pull slower (a refactor, say): builds
# of the code before and after it, e.g. from `git worktree add ../before REV`.
# For each job shape SxW it runs
#   BUILD/bin/loom run --insecure --servers S --workers W -- BUILD/bin/bench_pushpull FLAGS
# for both builds, REPEAT times each, interleaved and in alternating order
# (before first, then after first), so that a disturbance or a drift of the
# machine hits both sides alike. It prints a Markdown table of every case's
# median keys/s per side and the ratio after/before, and the geometric mean
# of the ratios.
#
# FLAGS default to --seconds 0.5 --batches 1,100,10000,1000000 --widths 1,64.
# Environment: CONFIGS (job shapes, default "1x1 2x2"), REPEAT (default 4),
# TIMEOUT (seconds per program, default 300), KEEP_LOGS=1 keeps the runs'
# lines.
set -euo pipefail
if [[ $# -lt 2 ]]; then
    echo "usage: $0 BEFORE_BUILD AFTER_BUILD [-- FLAGS...]" >&2
    exit 2
fi
before=$1 after=$2
shift 2
[[ $# -gt 0 && $1 == -- ]] && shift
flags=("$@")
# shellcheck disable=SC2054 # the commas are bench_pushpull's list syntax
[[ ${#flags[@]} -gt 0 ]] || flags=(--seconds 0.5 --batches 1,100,10000,1000000 --widths 1,64)
for b in "$before" "$after"; do
    for p in loom bench_pushpull; do
        [[ -x $b/bin/$p ]] || { echo "$0: $b/bin/$p is missing (build it first)" >&2; exit 2; }
    done
done
configs=${CONFIGS:-"1x1 2x2"}
repeat=${REPEAT:-4}
timeout_s=${TIMEOUT:-300}
lines=$(mktemp "${TMPDIR:-/tmp}/pushpull-ab.XXXXXX")
if [[ ${KEEP_LOGS:-0} == 1 ]]; then echo "runs: $lines"; else trap 'rm -f "$lines"' EXIT; fi

echo "# push/pull: $after against $before"
echo
echo "$(nproc) cores, $(uname -sr); load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "flags: ${flags[*]}; shapes: $configs; $repeat runs of each side, interleaved"
echo

# One run of side A (before) or B (after): its "case" lines as
# "SIDE SHAPE WIDTH BATCH OP KEYS/S", push and pull.
one() {
    local side=$1 dir=$2
    timeout "$timeout_s" "$dir/bin/loom" run --insecure --no-status --servers "$S" --workers "$W" -- \
        "$dir/bin/bench_pushpull" "${flags[@]}" 2>&1 |
        awk -v side="$side" -v shape="${S}x$W" '/\] case /{
            print side, shape, $4, $5, "push", $7; print side, shape, $4, $5, "pull", $12 }' >>"$lines"
}
for cfg in $configs; do
    S=${cfg%x*} W=${cfg#*x}
    for ((rep = 0; rep < repeat; rep++)); do
        if ((rep % 2)); then
            one B "$after"
            one A "$before"
        else
            one A "$before"
            one B "$after"
        fi
    done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
awk '
    { v[$1 SUBSEP $2 SUBSEP $3 SUBSEP $4 SUBSEP $5] = v[$1 SUBSEP $2 SUBSEP $3 SUBSEP $4 SUBSEP $5] " " $6
      k = $2 SUBSEP $3 SUBSEP $4 SUBSEP $5; if (!(k in seen)) { seen[k] = 1; order[n++] = k } }
    function med(s,   a, m, i, j, t) {
        m = split(s, a, " ")
        for (i = 2; i <= m; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
        return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
    }
    END {
        print "| shape | width | batch | op | before keys/s | after keys/s | after/before |"
        print "|---|---:|---:|---|---:|---:|---:|"
        for (i = 0; i < n; i++) {
            split(order[i], f, SUBSEP)
            a = med(v["A" SUBSEP order[i]]); b = med(v["B" SUBSEP order[i]])
            if (a <= 0 || b <= 0) continue
            r = b / a; logs += log(r); cases++
            printf "| %s | %s | %s | %s | %.0f | %.0f | %.2f |\n", f[1], f[2], f[3], f[4], a, b, r
        }
        if (cases) printf "\ngeometric mean of after/before over %d cases: %.3f\n", cases, exp(logs / cases)
    }' "$lines"
