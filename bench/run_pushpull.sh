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
configs=${CONFIGS:-"1x1 2x1 1x2 2x2"}
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
raw=$build/bin/raw_zmq
for exe in "$loom" "$bench" "$raw"; do
    if [[ ! -x $exe ]]; then
        echo "$0: $exe not found; build first (cmake --build $build)" >&2
        exit 2
    fi
done

logs=$(mktemp -d "${TMPDIR:-/tmp}/run_pushpull.XXXXXX")
cleanup() {
    if [[ ${KEEP_LOGS:-0} == 1 ]]; then
        echo "logs kept in $logs" >&2
    else
        rm -rf "$logs"
    fi
}
trap cleanup EXIT

echo "# push/pull: Loom vs raw ZeroMQ"
echo
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(uname -sr)"
echo "flags: ${flags[*]:-(defaults)}; each figure is the median of $repeat runs"
echo "started: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"


# run NAME COMMAND...: run one program, its output into $logs/NAME.txt.
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
    # The "case" and "rtt1" lines of the programs have the same layout:
    #   case WIDTH BATCH  ITERS KEYS/S MB/S P50 P99 (push)  ITERS KEYS/S MB/S P50 P99 (pull)
    #   rtt1 OP COUNT P50 P99
    # (Loom's lines carry the launcher's "[worker 0] " prefix, removed here.)
    # Every figure is the median over the repetitions.
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
