#!/usr/bin/env bash
# run_curve.sh: the cost of CURVE (docs/SECURITY.md): Loom's push/pull benchmark with and
# without a job secret, same cases, same run.
#
#   bench/run_curve.sh [BUILD_DIR] [-- FLAGS...]
#
# For each job shape SxW it runs, REPEAT times and interleaved:
#   BUILD_DIR/bin/loom run --insecure ...  -- BUILD_DIR/bin/bench_pushpull FLAGS   (plain)
#   BUILD_DIR/bin/loom run --secret KEY ... -- BUILD_DIR/bin/bench_pushpull FLAGS  (CURVE)
# and prints a Markdown table per shape: for every case the medians of both and the ratio
# CURVE/plain (throughput: lower means slower; latency: higher means slower), then the
# one-key round trips. BUILD_DIR defaults to "build"; FLAGS go to bench_pushpull
# unchanged. Environment: CONFIGS (default "1x1 2x2"), REPEAT (default 3), TIMEOUT
# (seconds per run, default 900), KEEP_LOGS=1 to keep each run's output.
set -euo pipefail

build=build
if [[ $# -gt 0 && $1 != -- ]]; then
    build=$1
    shift
fi
if [[ $# -gt 0 ]]; then
    if [[ $1 != -- ]]; then
        echo "usage: $0 [BUILD_DIR] [-- FLAGS...]" >&2
        exit 2
    fi
    shift
fi
flags=("$@")
configs=${CONFIGS:-"1x1 2x2"}
repeat=${REPEAT:-3}
timeout_s=${TIMEOUT:-900}
for cfg in $configs; do
    if [[ ! $cfg =~ ^([0-9]+)x([0-9]+)$ ]]; then
        echo "$0: bad job shape '$cfg' in CONFIGS (want SxW, e.g. 2x1)" >&2
        exit 2
    fi
done
if [[ ! $repeat =~ ^[1-9][0-9]*$ ]]; then
    echo "$0: REPEAT must be a positive number" >&2
    exit 2
fi
loom=$build/bin/loom
bench=$build/bin/bench_pushpull
for exe in "$loom" "$bench"; do
    if [[ ! -x $exe ]]; then
        echo "$0: $exe not found; build first (cmake --build $build)" >&2
        exit 2
    fi
done

logs=$(mktemp -d "${TMPDIR:-/tmp}/run_curve.XXXXXX")
cleanup() {
    if [[ ${KEEP_LOGS:-0} == 1 ]]; then
        echo "logs kept in $logs" >&2
    else
        rm -rf "$logs"
    fi
}
trap cleanup EXIT
"$loom" keygen "$logs/job.secret"

echo "# push/pull: Loom with CURVE vs without"
echo
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(uname -sr)"
echo "flags: ${flags[*]:-(defaults)}; each figure is the median of $repeat runs"
echo "started: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"

run() {
    local name=$1
    shift
    if ! "$@" >"$logs/$name.txt" 2>&1; then
        echo "$0: failed: $*" >&2
        cat "$logs/$name.txt" >&2
        exit 1
    fi
}

for cfg in $configs; do
    [[ $cfg =~ ^([0-9]+)x([0-9]+)$ ]]
    S=${BASH_REMATCH[1]}
    W=${BASH_REMATCH[2]}
    files=()
    for ((rep = 1; rep <= repeat; rep++)); do
        run "plain_${cfg}_$rep" "$loom" run --insecure --servers "$S" --workers "$W" \
            --timeout "$timeout_s" -- "$bench" "${flags[@]}"
        run "curve_${cfg}_$rep" "$loom" run --secret "$logs/job.secret" --servers "$S" \
            --workers "$W" --timeout "$timeout_s" -- "$bench" "${flags[@]}"
        files+=("$logs/plain_${cfg}_$rep.txt" "$logs/curve_${cfg}_$rep.txt")
    done
    echo
    echo "## S=$S servers, W=$W workers"
    echo
    # Lines of bench_pushpull (bench/run_pushpull.sh describes them):
    #   case WIDTH BATCH  ITERS KEYS/S MB/S P50 P99 (push)  ITERS KEYS/S MB/S P50 P99 (pull)
    #   rtt1 OP COUNT P50 P99
    awk '
        function ratio(a, b) { return b > 0 ? sprintf("%.2f", a / b) : "-" }
        function add(key, x) { cnt[key]++; val[key, cnt[key]] = x + 0 }
        function med(key,    n, i, j, t, a) {
            n = cnt[key]
            if (!n) return -1
            for (i = 1; i <= n; i++) a[i] = val[key, i]
            for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        { sub(/^\[worker 0\] /, "") }
        FNR == 1 { src = FILENAME; sub(/.*\//, "", src); sub(/_.*/, "", src) }
        $1 == "case" {
            k = $2 " " $3
            if (!(k in seen)) { seen[k] = 1; order[n++] = k }
            for (i = 0; i < 5; i++) { add(src SUBSEP k SUBSEP "push" SUBSEP i, $(4 + i)); add(src SUBSEP k SUBSEP "pull" SUBSEP i, $(9 + i)) }
        }
        $1 == "rtt1" { add(src SUBSEP "rtt" SUBSEP $2 SUBSEP "p50", $4); add(src SUBSEP "rtt" SUBSEP $2 SUBSEP "p99", $5); samples = $3 }
        END {
            print "| width | batch | op | plain Mkeys/s | CURVE Mkeys/s | CURVE/plain | plain MB/s | CURVE MB/s | plain p50 us | CURVE p50 us | CURVE/plain p50 |"
            print "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
            for (j = 0; j < n; j++) {
                k = order[j]; split(k, wb, " ")
                for (o = 0; o < 2; o++) {
                    op = o ? "pull" : "push"
                    for (i = 1; i <= 3; i++) { P[i] = med("plain" SUBSEP k SUBSEP op SUBSEP i); C[i] = med("curve" SUBSEP k SUBSEP op SUBSEP i) }
                    if (P[1] < 0 || C[1] < 0) continue
                    printf "| %s | %s | %s | %.3f | %.3f | %s | %.0f | %.0f | %.0f | %.0f | %s |\n",
                        wb[1], wb[2], op, P[1] / 1e6, C[1] / 1e6, ratio(C[1], P[1]), P[2], C[2], P[3], C[3], ratio(C[3], P[3])
                }
            }
            print ""
            print "| one-key round trip, " samples " samples | plain p50 us | CURVE p50 us | CURVE/plain p50 | plain p99 us | CURVE p99 us |"
            print "|---|---:|---:|---:|---:|---:|"
            for (o = 0; o < 2; o++) {
                op = o ? "push" : "pull"
                p50 = med("plain" SUBSEP "rtt" SUBSEP op SUBSEP "p50"); c50 = med("curve" SUBSEP "rtt" SUBSEP op SUBSEP "p50")
                if (p50 < 0 || c50 < 0) continue
                printf "| %s | %.1f | %.1f | %s | %.1f | %.1f |\n", op, p50, c50, ratio(c50, p50),
                    med("plain" SUBSEP "rtt" SUBSEP op SUBSEP "p99"), med("curve" SUBSEP "rtt" SUBSEP op SUBSEP "p99")
            }
        }' "${files[@]}"
done
echo
echo "finished: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
