# shellcheck shell=bash
# bench/lib.sh: the header every bench/run_*.sh shares, sourced first. Each
# helper prints exactly what the scripts printed before they shared it.
#   bench_need_exe PREFIX SUFFIX FILE...  each FILE executable, or
#                           "PREFIX: FILE not foundSUFFIX" on stderr and exit 2
#   bench_scratch NAME [PARENT]  a new directory PARENT/NAME.XXXXXX (PARENT:
#                           ${TMPDIR:-/tmp}), its path on stdout
#   bench_clear_env         unset the caller's LOOM_* variables (a bench job
#                           gets only the flags and variables the script gives)
#   bench_load              the load average (1, 5 and 15 minutes)
#   bench_cpu               the CPU's model name
#   bench_mem               the memory, as "N GB"
#   bench_machine           "N CPUs, MODEL, KERNEL": the machine line
#   bench_machine_mem       "N CPUs, MODEL, N GB, KERNEL"
#   bench_head REPO         the short hash of REPO's HEAD, or '?'
#   log MESSAGE             "[HH:MM:SS] MESSAGE" on stderr
# bench/pushpull_lib.sh builds on it for the push/pull scripts.

bench_need_exe() {
    local prefix=$1 suffix=$2 f
    shift 2
    for f; do
        [[ -x $f ]] || { echo "$prefix: $f not found$suffix" >&2; exit 2; }
    done
}

bench_scratch() { mktemp -d "${2:-${TMPDIR:-/tmp}}/$1.XXXXXX"; }

bench_clear_env() {
    local var
    for var in $(compgen -e); do [[ $var == LOOM_* ]] && unset "$var"; done
    return 0
}

bench_load() { cut -d' ' -f1-3 /proc/loadavg; }

bench_cpu() { grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'; }

bench_mem() { awk '/MemTotal/ { printf "%.0f GB", $2 / 1048576 }' /proc/meminfo; }

bench_machine() { echo "$(nproc) CPUs, $(bench_cpu), $(uname -sr)"; }

bench_machine_mem() { echo "$(nproc) CPUs, $(bench_cpu), $(bench_mem), $(uname -sr)"; }

bench_head() { git -C "$1" rev-parse --short HEAD 2>/dev/null || echo '?'; }

log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
