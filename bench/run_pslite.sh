#!/usr/bin/env bash
# run_pslite.sh: Loom's push and pull side by side with ps-lite's
# (dmlc/ps-lite, the Parameter Server thesis's own library) and raw ZeroMQ
# with a table, the same cases in the same run (issue 27).
#
#   bench/run_pslite.sh PSLITE_DIR [BUILD_DIR] [-- FLAGS...]     (or PSLITE=DIR)
#
# PSLITE_DIR is a ps-lite checkout built with its own CMake (its
# build/libpslite.a and build/meta.pb.h; it needs Debian's libzmq3-dev,
# libprotobuf-dev and protobuf-compiler). ps-lite is not part of Loom and is
# not built here (docs/BENCHMARKS.md, "Push/pull side by side with
# ps-lite", says how it was built). Without it the script says so and exits
# 0 (skipped). The driver, bench/pslite/bench_pslite.cc, is compiled against
# it into a scratch directory.
#
# The shape is ps-lite's own benchmark's (tests/test_kv_app_benchmark.cc:
# every worker pushes, then pulls, one batch of keys spread over the whole
# key space, f32 values), with the table ps-lite's default server keeps
# replaced by a dense array, as Loom's and raw+table's servers keep: so all
# three add pushed rows into memory and gather pulled ones. For each job
# shape SxW, REPEAT times and interleaved:
#   BUILD_DIR/bin/raw_zmq --table --servers S --workers W FLAGS          (raw+table)
#   loom run --insecure --servers S --workers W -- bench_pushpull FLAGS  (Loom)
#   bench_pslite FLAGS under ps-lite's scheduler, S servers, W workers   (ps-lite)
# and prints per case Loom's, ps-lite's and raw+table's throughput, the
# ratios, and the median latencies; medians of the repetitions.
#
# FLAGS go to all three (default: --batches 10000,1000000 --widths 1,64
# --rtt 0). Environment: CONFIGS (default "1x1 2x2"), REPEAT (default 3),
# TIMEOUT (seconds per program, default 900), KEEP_LOGS=1.
set -euo pipefail

pslite=${PSLITE:-}
if [[ $# -gt 0 && $1 != -- && -z $pslite ]]; then
    pslite=$1
    shift
fi
if [[ -z $pslite || ! -f $pslite/build/libpslite.a || ! -f $pslite/include/ps/ps.h ]]; then
    echo "$0: skipped: no built ps-lite checkout given (PSLITE_DIR with build/libpslite.a)" >&2
    exit 0
fi
[[ $# -gt 0 ]] || set -- build -- --batches 10000,1000000 --widths 1,64 --rtt 0

# shellcheck source=pushpull_lib.sh
source "$(dirname "$0")/pushpull_lib.sh"
pushpull_setup "1x1 2x2" "push/pull: Loom vs ps-lite vs raw ZeroMQ with a table" \
    loom bench_pushpull raw_zmq -- "$@"
echo "ps-lite: $pslite at $(bench_head "$pslite")"
loom=$build/bin/loom
bench=$build/bin/bench_pushpull
raw=$build/bin/raw_zmq

driver=$logs/bench_pslite
g++ -O2 -std=c++11 -I"$pslite/include" -I"$pslite/build" "$(dirname "$0")/pslite/bench_pslite.cc" \
    "$pslite/build/libpslite.a" -lprotobuf -lzmq -lpthread -o "$driver"

# A ps-lite job: its scheduler on a free loopback port, S servers, W workers,
# every node on loopback; worker 0 prints the cases. Bounded by $timeout_s.
run_pslite() {
    local port pids=() rc=0 role i
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    for role in scheduler server worker; do
        local count=1
        [[ $role == server ]] && count=$S
        [[ $role == worker ]] && count=$W
        for ((i = 0; i < count; i++)); do
            DMLC_ROLE=$role DMLC_NUM_SERVER=$S DMLC_NUM_WORKER=$W DMLC_PS_ROOT_URI=127.0.0.1 \
                DMLC_PS_ROOT_PORT=$port DMLC_NODE_HOST=127.0.0.1 \
                timeout "$timeout_s" "$driver" "${flags[@]}" &
            pids+=($!)
        done
    done
    for i in "${pids[@]}"; do wait "$i" || rc=$?; done
    return "$rc"
}

for cfg in $configs; do
    shape "$cfg"
    files=()
    for ((rep = 1; rep <= repeat; rep++)); do
        run "table_${cfg}_$rep" "$raw" --table --servers "$S" --workers "$W" --timeout "$timeout_s" \
            "${flags[@]}"
        run "loom_${cfg}_$rep" "$loom" run --insecure --servers "$S" --workers "$W" \
            --timeout "$timeout_s" -- "$bench" "${flags[@]}"
        run "pslite_${cfg}_$rep" run_pslite
        files+=("$logs/table_${cfg}_$rep.txt" "$logs/loom_${cfg}_$rep.txt" "$logs/pslite_${cfg}_$rep.txt")
    done
    echo
    echo "## S=$S servers, W=$W workers"
    echo
    awk "$PUSHPULL_AWK"'
        END {
            print "| width | batch | op | Loom Mkeys/s | ps-lite Mkeys/s | Loom/ps-lite | raw+table Mkeys/s | Loom/raw+table | Loom p50 us | ps-lite p50 us | raw+table p50 us |"
            print "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
            for (j = 0; j < n; j++) {
                k = order[j]; split(k, wb, " ")
                for (o = 0; o < 2; o++) {
                    op = o ? "pull" : "push"
                    L = med("loom" SUBSEP k SUBSEP op SUBSEP 1); P = med("pslite" SUBSEP k SUBSEP op SUBSEP 1)
                    T = med("table" SUBSEP k SUBSEP op SUBSEP 1)
                    printf "| %s | %s | %s | %.3f | %.3f | %s | %.3f | %s | %.0f | %.0f | %.0f |\n",
                        wb[1], wb[2], op, L / 1e6, P / 1e6, ratio(L, P), T / 1e6, ratio(L, T),
                        med("loom" SUBSEP k SUBSEP op SUBSEP 3), med("pslite" SUBSEP k SUBSEP op SUBSEP 3),
                        med("table" SUBSEP k SUBSEP op SUBSEP 3)
                }
            }
        }' "${files[@]}"
done
echo
echo "finished: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
