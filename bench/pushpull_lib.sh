# pushpull_lib.sh: what the scripts that compare push/pull runs share
# (run_pushpull.sh: Loom vs raw ZeroMQ; run_curve.sh: Loom with and without
# CURVE; run_pushpull_cpu.sh: CPU per operation, which uses only the setup).
# Sourced after `set -euo pipefail`; the script's own usage line is in its
# header. Provides:
#   pushpull_setup DEFAULT_CONFIGS TITLE PROGRAM... -- ARGS...
#       reads [BUILD_DIR] [-- FLAGS...] from ARGS into $build and flags[],
#       CONFIGS, REPEAT, TIMEOUT into $configs, $repeat, $timeout_s; checks
#       that $build/bin/PROGRAM exists for each PROGRAM; makes $logs (removed
#       at exit unless KEEP_LOGS=1); prints the title and the machine.
#   run NAME COMMAND...       one program, its output into $logs/NAME.txt
#   shape CFG                 S and W of a job shape "SxW"
#   $PUSHPULL_AWK             awk functions and rules that read the programs'
#       "case" and "rtt1" lines, by file name prefix (the text before the first
#       "_"): med(SRC SUBSEP WIDTH" "BATCH SUBSEP OP SUBSEP I) is the median
#       of field I (1 keys/s, 2 MB/s, 3 p50 us, 4 p99 us), med(SRC SUBSEP "rtt"
#       SUBSEP OP SUBSEP "p50"|"p99") a round trip's; order[0..n-1] the cases
#       in the order seen, samples the round trips' count; ratio(a, b).
# Builds on bench/lib.sh (the header every run_*.sh shares), sourced here.
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

pushpull_setup() {
    local default_configs=$1 title=$2
    shift 2
    local programs=()
    while [[ $# -gt 0 && $1 != -- ]]; do
        programs+=("$1")
        shift
    done
    shift
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
    configs=${CONFIGS:-$default_configs}
    repeat=${REPEAT:-3}
    timeout_s=${TIMEOUT:-900}
    local cfg exe
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
    for exe in "${programs[@]}"; do
        bench_need_exe "$0" "; build first (cmake --build $build)" "$build/bin/$exe"
    done
    logs=$(bench_scratch "$(basename "$0" .sh)")
    trap pushpull_cleanup EXIT
    echo "# $title"
    echo
    echo "machine: $(bench_machine)"
    echo "flags: ${flags[*]:-(defaults)}; each figure is the median of $repeat runs"
    echo "started: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
}

pushpull_cleanup() {
    if [[ ${KEEP_LOGS:-0} == 1 ]]; then
        echo "logs kept in $logs" >&2
    else
        rm -rf "$logs"
    fi
}

run() {
    local name=$1
    shift
    if ! "$@" >"$logs/$name.txt" 2>&1; then
        echo "$0: failed: $*" >&2
        cat "$logs/$name.txt" >&2
        exit 1
    fi
}

shape() {
    [[ $1 =~ ^([0-9]+)x([0-9]+)$ ]]
    S=${BASH_REMATCH[1]}
    W=${BASH_REMATCH[2]}
}

# The "case" and "rtt1" lines of the programs have the same layout:
#   case WIDTH BATCH  ITERS KEYS/S MB/S P50 P99 (push)  ITERS KEYS/S MB/S P50 P99 (pull)
#   rtt1 OP COUNT P50 P99
# (Loom's lines carry the launcher's "[worker 0] " prefix, removed here.)
# shellcheck disable=SC2034 # used by the scripts that source this file
PUSHPULL_AWK='
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
'
