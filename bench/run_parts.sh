#!/usr/bin/env bash
# Data parts on demand (issue 30, docs/BENCHMARKS.md): lr on a9a
# (../shared/data/a9a) with 2 workers and 1 server, SGD + AdaGrad, SSP(2),
# EPOCHS epochs (20), as four jobs run back to back, REPS times (2) in turn:
#   share       each worker reads a fixed share (the default)
#   parts       --data-parts auto (8 parts handed out on demand)
#   share+kill  as share, --on-worker-failure continue, worker 1 SIGKILLed once
#               worker 0 has reported epoch 5 (its share is lost from then on)
#   parts+kill  as parts, the same kill (its part goes back to the pool)
# Heartbeats every 250 ms, a worker declared dead after 2000 ms silent (in
# every job, so the four pay the same heartbeat traffic). Per job: the CPU
# seconds of all its processes (user + sys of the launcher and its children,
# /usr/bin/time), the wall time, and the last epoch's test accuracy and test
# logloss from the metrics. The machine may be shared: compare CPU seconds
# and quality, measured back to back, rather than wall time.
#
# Usage: bench/run_parts.sh BUILD_DIR [DATA_DIR]
set -u
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
BUILD=${1:?usage: $0 BUILD_DIR [DATA_DIR]}
DATA=${2:-$(dirname "$0")/../../shared/data}
LOOM=$BUILD/bin/loom
bench_need_exe "run_parts" "" "$LOOM"
[[ -f $DATA/a9a/a9a ]] || { echo "run_parts: $DATA/a9a/a9a not found" >&2; exit 2; }
EPOCHS=${EPOCHS:-20} REPS=${REPS:-2}
bench_clear_env
export LOOM_HEARTBEAT_MS=250 LOOM_HEARTBEAT_TIMEOUT_MS=2000
DIR=$(bench_scratch loom-parts)
trap 'rm -rf "$DIR"' EXIT
cd "$DIR" || exit 1

# job NAME: one job, its line of results on stdout.
job() {
    local name=$1 args=(train lr --train "$DATA/a9a/a9a" --test "$DATA/a9a/a9a.t"
        --epochs "$EPOCHS" --workers 2 --servers 1 --insecure --no-status --metrics m)
    [[ $name == parts* ]] && args+=(--data-parts auto)
    [[ $name == *kill ]] && args+=(--on-worker-failure continue)
    rm -f m
    /usr/bin/time -f "%U %S %e" -o time "$LOOM" "${args[@]}" >out 2>&1 &
    local launcher=$! victim='' c
    if [[ $name == *kill ]]; then
        until grep -q "^\[worker 0\] epoch   5 " out; do
            kill -0 "$launcher" 2>/dev/null || break
            sleep 0.01
        done
        for c in $(pgrep -P "$(pgrep -P "$launcher")"); do
            tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "LOOM_ROLE=worker" &&
                tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx "LOOM_RANK=1" && victim=$c
        done
        [[ -n $victim ]] && kill -KILL "$victim"
    fi
    wait "$launcher"
    local rc=$? acc loss lost
    acc=$(tail -1 m | sed -n 's/.*"test_accuracy": \([^,}]*\).*/\1/p')
    loss=$(tail -1 m | sed -n 's/.*"test_logloss": \([^,}]*\).*/\1/p')
    lost=$(tail -1 m | sed -n 's/.*"rows_lost": \([^,}]*\).*/\1/p')
    read -r user sys wall <time
    printf "%-11s status %d  cpu %6.2f s (user %5.2f sys %5.2f)  wall %6.2f s  test acc %.4f  logloss %.4f  rows lost %s\n" \
        "$name" "$rc" "$(echo "$user + $sys" | bc)" "$user" "$sys" "$wall" "$acc" "$loss" "${lost:-0}"
}

echo "# $(bench_machine); load $(bench_load); loom $(bench_head "$(dirname "$0")/..")"
for ((r = 1; r <= REPS; r++)); do
    for name in share parts share+kill parts+kill; do job "$name"; done
done
echo "# load after: $(bench_load)"
