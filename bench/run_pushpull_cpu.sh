#!/usr/bin/env bash
# run_pushpull_cpu.sh: CPU time and context switches per push and pull, Loom
# against raw ZeroMQ and raw+table: figures that do not depend on how loaded
# or how large the machine is (issue 27: "per-operation CPU time and context
# switches as load-independent figures").
#
#   bench/run_pushpull_cpu.sh [BUILD_DIR]
#
# For each job shape SxW and case WIDTH:BATCH:N, each of the three programs of
# bench/run_pushpull.sh (raw_zmq, raw_zmq --table, bench_pushpull under
# `loom run --insecure`) runs twice, with exactly N and exactly 2N timed
# operations per phase (--min-iters = --max-iters, no time limit, no round
# trips), under /usr/bin/time, which sums the user and system seconds and
# context switches of every process of the job (each parent waits for its
# children). The second run less the first is the cost of N more pushes and N
# more pulls on each of the W workers, free of start-up, table creation,
# warm-up operations and exit; divided by W * N it is the cost of one push
# plus one pull of BATCH keys, and divided by BATCH too, the CPU per key.
# Servers' CPU counts: a push's cost includes applying it.
#
# Where perf can read the kernel's syscall tracepoints (root, or
# perf_event_paranoid allowing it), each run is also under `perf stat`, and
# the table adds the system calls and the poll() calls per push plus pull
# (counts: the steadiest figures of all); elsewhere those columns say "-".
#
# Environment: CONFIGS (default "1x1 4x4"), CASES (default
# "1:10000:2000 1:1000000:30 64:10000:500"; 64:1000000:N moves 256 MB an
# operation, and on a 2-core machine with 4x4 its page faults, not the
# protocol, decide the figures), REPEAT (default 3; each figure is the median
# of the repetitions' differences, the programs interleaved), TIMEOUT
# (seconds per program, default 900). About 15 minutes on 2 cores.
set -euo pipefail

# shellcheck source=pushpull_lib.sh
source "$(dirname "$0")/pushpull_lib.sh"
pushpull_setup "1x1 4x4" "push/pull CPU per operation: Loom vs raw ZeroMQ" \
    loom bench_pushpull raw_zmq -- "$@"
cases=${CASES:-1:10000:2000 1:1000000:30 64:10000:500}
for c in $cases; do
    [[ $c =~ ^[0-9]+:[0-9]+:[0-9]+$ ]] || {
        echo "$0: bad case '$c' in CASES (want WIDTH:BATCH:N, e.g. 1:10000:2000)" >&2
        exit 2
    }
done
echo "load before: $(bench_load)"
loom=$build/bin/loom
bench=$build/bin/bench_pushpull
raw=$build/bin/raw_zmq

events=raw_syscalls:sys_enter,syscalls:sys_enter_poll
perf=()
if perf stat -x, -e "$events" -o /dev/null -- true >/dev/null 2>&1; then
    # shellcheck disable=SC2054 # "-x ," is one flag and its separator
    perf=(perf stat -x, -o "$logs/perf.txt" -e "$events" --)
else
    echo "no system call counts: perf cannot read the syscall tracepoints here"
fi

# timed NAME COMMAND...: run COMMAND under /usr/bin/time (and perf stat);
# append "NAME USER+SYS_SECONDS CONTEXT_SWITCHES SYSCALLS POLLS" to
# $logs/cpu.txt ("-" for the counts without perf).
timed() {
    local name=$1 counts="- -"
    shift
    "${perf[@]}" /usr/bin/time -o "$logs/time.txt" -f "%U %S %w %c" "$@" >"$logs/out.txt" 2>&1 || {
        echo "$0: failed: $*" >&2
        cat "$logs/out.txt" >&2
        exit 1
    }
    if ((${#perf[@]})); then
        counts=$(awk -F, '$3 ~ /sys_enter$/ { s = $1 } $3 ~ /sys_enter_poll$/ { p = $1 }
                          END { print s, p }' "$logs/perf.txt")
    fi
    awk -v n="$name" -v c="$counts" '{ print n, $1 + $2, $3 + $4, c }' "$logs/time.txt" >>"$logs/cpu.txt"
}

for cfg in $configs; do
    shape "$cfg"
    for c in $cases; do
        IFS=: read -r width batch n <<<"$c"
        for ((rep = 1; rep <= repeat; rep++)); do
            for iters in "$n" $((2 * n)); do
                flags=(--widths "$width" --batches "$batch" --seconds 3600 --min-iters "$iters"
                    --max-iters "$iters" --rtt 0)
                timed "raw $cfg $c $rep $iters" "$raw" --servers "$S" --workers "$W" \
                    --timeout "$timeout_s" "${flags[@]}"
                timed "table $cfg $c $rep $iters" "$raw" --table --servers "$S" --workers "$W" \
                    --timeout "$timeout_s" "${flags[@]}"
                timed "loom $cfg $c $rep $iters" "$loom" run --insecure --servers "$S" \
                    --workers "$W" --timeout "$timeout_s" -- "$bench" "${flags[@]}"
            done
        done
    done
done
echo "load after: $(bench_load)"
echo
echo "| shape | width | batch | N | Loom us CPU per push+pull | raw | raw+table | Loom/raw+table | Loom ns CPU per key | raw+table ns per key | Loom switches per push+pull | raw | raw+table | Loom system calls per push+pull | raw+table | Loom polls | raw+table |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
# cpu.txt lines: "PROGRAM SHAPE W:B:N REP ITERS CPU SWITCHES SYSCALLS POLLS";
# per (program, shape, case, rep) the 2N run less the N run, divided by
# W * N; medians.
awk '
    function count(key) { return cnt[key] ? sprintf("%.1f", med(key)) : "-" }
    function med(key,    k, i, j, t, a) {
        k = cnt[key]
        for (i = 1; i <= k; i++) a[i] = val[key, i]
        for (i = 2; i <= k; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
        return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
    }
    {
        split($3, c, ":"); split($2, s, "x")
        id = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4
        if ($5 == c[3]) { cpu1[id] = $6; sw1[id] = $7; sc1[id] = $8; po1[id] = $9; next }
        ops = s[2] * c[3]
        key = $1 SUBSEP $2 SUBSEP $3
        cnt[key]++; val[key, cnt[key]] = ($6 - cpu1[id]) / ops * 1e6
        cnt[key, "sw"]++; val[key SUBSEP "sw", cnt[key, "sw"]] = ($7 - sw1[id]) / ops
        if ($8 != "-") {
            cnt[key, "sc"]++; val[key SUBSEP "sc", cnt[key, "sc"]] = ($8 - sc1[id]) / ops
            cnt[key, "po"]++; val[key SUBSEP "po", cnt[key, "po"]] = ($9 - po1[id]) / ops
        }
        if (!(($2 SUBSEP $3) in seen)) { seen[$2 SUBSEP $3] = 1; order[n++] = $2 SUBSEP $3 }
    }
    END {
        for (i = 0; i < n; i++) {
            split(order[i], k, SUBSEP); split(k[2], c, ":")
            L = med("loom" SUBSEP order[i]); R = med("raw" SUBSEP order[i]); T = med("table" SUBSEP order[i])
            printf "| %s | %s | %s | %s | %.1f | %.1f | %.1f | %s | %.2f | %.2f | %.1f | %.1f | %.1f | %s | %s | %s | %s |\n",
                k[1], c[1], c[2], c[3], L, R, T, (T > 0 ? sprintf("%.2f", L / T) : "-"),
                L * 1000 / c[2], T * 1000 / c[2],
                med("loom" SUBSEP order[i] SUBSEP "sw"), med("raw" SUBSEP order[i] SUBSEP "sw"),
                med("table" SUBSEP order[i] SUBSEP "sw"),
                count("loom" SUBSEP order[i] SUBSEP "sc"), count("table" SUBSEP order[i] SUBSEP "sc"),
                count("loom" SUBSEP order[i] SUBSEP "po"), count("table" SUBSEP order[i] SUBSEP "po")
        }
    }' "$logs/cpu.txt"
