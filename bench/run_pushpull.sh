#!/usr/bin/env bash
# run_pushpull.sh: Loom push/pull against raw ZeroMQ, same cases, same run.
#
#   bench/run_pushpull.sh [BUILD_DIR] [-- FLAGS...]
#
# For each job shape SxW (S servers, W workers) it runs, REPEAT times and
# interleaved:
#   BUILD_DIR/bin/raw_zmq --servers S --workers W FLAGS           (raw)
#   BUILD_DIR/bin/raw_zmq --table --servers S --workers W FLAGS   (raw+table)
#   BUILD_DIR/bin/loom run --insecure --servers S --workers W -- BUILD_DIR/bin/bench_pushpull FLAGS
# (--insecure: raw ZeroMQ runs without CURVE, so Loom does too; bench/run_curve.sh
# measures what the job secret costs)
# and prints a Markdown table per shape: for every case and operation, Loom's
# and raw ZeroMQ's throughput and latency and the ratios Loom/raw (throughput:
# higher is better; latency: lower is better), each figure the median of the
# repetitions. raw+table is raw ZeroMQ plus the work Loom's API cannot avoid
# (servers add pushed rows into a dense array and gather pulled rows into a
# new reply; clients copy replies into their array).
#
# BUILD_DIR defaults to "build". FLAGS (e.g. --seconds 1 --batches 1,1000000)
# go to all three programs unchanged. Environment: CONFIGS (job shapes,
# default "1x1 2x1 1x2 2x2"), REPEAT (default 3), TIMEOUT (seconds per
# program, default 900), KEEP_LOGS=1 to keep each program's output (otherwise
# removed at the end).
set -euo pipefail

# shellcheck source=pushpull_lib.sh
source "$(dirname "$0")/pushpull_lib.sh"
pushpull_setup "1x1 2x1 1x2 2x2" "push/pull: Loom vs raw ZeroMQ" loom bench_pushpull raw_zmq -- "$@"
loom=$build/bin/loom
bench=$build/bin/bench_pushpull
raw=$build/bin/raw_zmq

for cfg in $configs; do
    shape "$cfg"
    files=()
    for ((rep = 1; rep <= repeat; rep++)); do
        # Interleaved, so that a disturbance hits one repetition of each rather than one side.
        run "raw_${cfg}_$rep" "$raw" --servers "$S" --workers "$W" --timeout "$timeout_s" "${flags[@]}"
        run "table_${cfg}_$rep" "$raw" --table --servers "$S" --workers "$W" --timeout "$timeout_s" \
            "${flags[@]}"
        run "loom_${cfg}_$rep" "$loom" run --insecure --servers "$S" --workers "$W" --timeout "$timeout_s" -- \
            "$bench" "${flags[@]}"
        files+=("$logs/raw_${cfg}_$rep.txt" "$logs/table_${cfg}_$rep.txt" "$logs/loom_${cfg}_$rep.txt")
    done
    echo
    echo "## S=$S servers, W=$W workers"
    echo
    # The programs' lines, read by $PUSHPULL_AWK (pushpull_lib.sh); medians over the repetitions.
    awk "$PUSHPULL_AWK"'
        END {
            print "| width | batch | op | Loom Mkeys/s | raw Mkeys/s | Loom/raw | raw+table Mkeys/s | Loom/raw+table | Loom MB/s | raw MB/s | Loom p50 us | raw p50 us | Loom/raw p50 | Loom p99 us | raw p99 us |"
            print "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            for (j = 0; j < n; j++) {
                k = order[j]; split(k, wb, " ")
                for (o = 0; o < 2; o++) {
                    op = o ? "pull" : "push"
                    for (i = 1; i <= 4; i++) {
                        L[i] = med("loom" SUBSEP k SUBSEP op SUBSEP i)
                        R[i] = med("raw" SUBSEP k SUBSEP op SUBSEP i)
                    }
                    T = med("table" SUBSEP k SUBSEP op SUBSEP 1)
                    if (L[1] < 0 || R[1] < 0) continue
                    printf "| %s | %s | %s | %.3f | %.3f | %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %s | %.0f | %.0f |\n",
                        wb[1], wb[2], op, L[1] / 1e6, R[1] / 1e6, ratio(L[1], R[1]),
                        T < 0 ? "-" : sprintf("%.3f", T / 1e6), T < 0 ? "-" : ratio(L[1], T),
                        L[2], R[2], L[3], R[3], ratio(L[3], R[3]), L[4], R[4]
                }
            }
            hdr = 0
            for (o = 0; o < 2; o++) {
                op = o ? "push" : "pull"
                l50 = med("loom" SUBSEP "rtt" SUBSEP op SUBSEP "p50"); r50 = med("raw" SUBSEP "rtt" SUBSEP op SUBSEP "p50")
                t50 = med("table" SUBSEP "rtt" SUBSEP op SUBSEP "p50")
                if (l50 < 0 || r50 < 0) continue
                if (!hdr++) {
                    print ""
                    print "| one-key round trip, " samples " samples | Loom p50 us | raw p50 us | Loom/raw p50 | raw+table p50 us | Loom p99 us | raw p99 us |"
                    print "|---|---:|---:|---:|---:|---:|---:|"
                }
                printf "| %s | %.1f | %.1f | %s | %s | %.1f | %.1f |\n", op, l50, r50, ratio(l50, r50),
                    t50 < 0 ? "-" : sprintf("%.1f", t50),
                    med("loom" SUBSEP "rtt" SUBSEP op SUBSEP "p99"), med("raw" SUBSEP "rtt" SUBSEP op SUBSEP "p99")
            }
        }' "${files[@]}"
done
echo
echo "finished: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
