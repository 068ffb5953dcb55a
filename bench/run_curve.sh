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

# shellcheck source=pushpull_lib.sh
source "$(dirname "$0")/pushpull_lib.sh"
pushpull_setup "1x1 2x2" "push/pull: Loom with CURVE vs without" loom bench_pushpull -- "$@"
loom=$build/bin/loom
bench=$build/bin/bench_pushpull
"$loom" keygen "$logs/job.secret"

for cfg in $configs; do
    shape "$cfg"
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
    # The programs' lines, read by $PUSHPULL_AWK (pushpull_lib.sh); medians over the repetitions.
    awk "$PUSHPULL_AWK"'
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
