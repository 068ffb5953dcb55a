#!/usr/bin/env bash
# run_scale.sh: what a job's size costs its scheduler (issue 27, "a job of a
# thousand nodes"): bench_scale at each number of workers in SIZES with
# SERVERS servers, one line each, then the scheduler's CPU per clock and per
# barrier divided by the number of workers, which stays flat when the cost
# grows linearly. bench_scale's header says what each figure is.
#
#   bench/run_scale.sh [BUILD_DIR]   (SIZES="64 128 256 512 1000" SERVERS=4 CLOCKS=200 PROCS=4)
#
# Every server and worker is a thread with its own ZeroMQ context, in PROCS
# processes: about 28 open files per worker, so the script raises the
# open-file limit to what the largest size needs per process (as root, the
# hard limit too, where the system allows) and stops if it cannot.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
build=${1:-build}
bench=$build/bin/bench_scale
bench_need_exe "run_scale" " (build first)" "$bench"
sizes=${SIZES:-64 128 256 512 1000} servers=${SERVERS:-4} clocks=${CLOCKS:-200}
procs=${PROCS:-4}
bench_clear_env
max=0
for w in $sizes; do ((w > max)) && max=$w; done
want=$(((max + servers) * 40 / procs + 4096))
if (($(ulimit -Hn) < want)); then ulimit -Hn "$want" 2>/dev/null || true; fi
ulimit -n "$(ulimit -Hn)"
if (($(ulimit -n) < want)); then
    echo "run_scale: $max workers in $procs processes need about $want open files each," \
        "the limit is $(ulimit -n) (raise it as root, ulimit -Hn $want, or PROCS)" >&2
    exit 1
fi
echo "# $(bench_machine_mem); head $(bench_head "$(dirname "$0")/..")"
for w in $sizes; do
    echo "# load before: $(bench_load)"
    line=$("$bench" --workers "$w" --servers "$servers" --clocks "$clocks" --procs "$procs")
    echo "$line"
    echo "$line" | awk '{
        for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "# per worker: clock_cpu_us %.2f, barrier_cpu_us %.2f\n",
            v["clock_cpu_us"] / v["workers"], v["barrier_cpu_us"] / v["workers"] }'
done
echo "# load after: $(bench_load)"
