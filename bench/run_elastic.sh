#!/usr/bin/env bash
# Elastic workers (issue 30, item 4; docs/ELASTIC.md, docs/BENCHMARKS.md): lr
# on a9a (../shared/data/a9a) with --data-parts 16, 1 server, SSP(2), EPOCHS
# epochs (10), minibatch 10, as three jobs run back to back, REPS times (2) in
# turn, every job started by `loom run --workers W --max-workers 2`:
#   fixed1  1 worker throughout (one free slot, never taken)
#   grow    1 worker, a second joins (`loom join`) once epoch 0 is over
#   fixed2  2 workers from the start (what the joiner grows towards)
# Per job: the CPU seconds of all its processes (user + sys of the launcher
# and its children, and of the joiner; /usr/bin/time), the wall time of the
# job, worker 0's mean seconds per epoch after the first (the joiner's epochs),
# and the last epoch's test accuracy and logloss from the metrics. The
# machine may be shared: compare CPU seconds and quality, measured back to
# back; wall time says what the load let it say (the load is printed).
#
# Usage: bench/run_elastic.sh BUILD_DIR [DATA_DIR]
set -u
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
BUILD=${1:?usage: $0 BUILD_DIR [DATA_DIR]}
DATA=${2:-$(dirname "$0")/../../shared/data}
LOOM=$BUILD/bin/loom
bench_need_exe "run_elastic" "" "$LOOM"
[[ -f $DATA/a9a/a9a ]] || { echo "run_elastic: $DATA/a9a/a9a not found" >&2; exit 2; }
EPOCHS=${EPOCHS:-10} REPS=${REPS:-2}
bench_clear_env
DIR=$(bench_scratch loom-elastic)
trap 'rm -rf "$DIR"' EXIT
cd "$DIR" || exit 1
train=(train lr --train "$DATA/a9a/a9a" --epochs "$EPOCHS" --minibatch 10 --data-parts 16
    --consistency ssp:2)

# job NAME: one job, its line of results on stdout.
job() {
    local name=$1 workers=1 joiner="" rc jrc=0 user sys wall juser=0 jsys=0 acc loss
    [[ $name == fixed2 ]] && workers=2
    rm -f m out join.out job.time jtime
    export LOOM_JOB_TOKEN=bench-$$-$name LOOM_VERBOSE=1
    /usr/bin/time -q -f "%U %S %e" -o job.time "$LOOM" run --servers 1 --workers "$workers" \
        --max-workers 2 --insecure --no-status -- "$LOOM" "${train[@]}" \
        --test "$DATA/a9a/a9a.t" --metrics m >out 2>&1 &
    local launcher=$!
    if [[ $name == grow ]]; then
        # The poll interval is not a synchronisation: it only bounds how late the join starts.
        until grep -q '^\[scheduler\] info: parts: epoch 0 over' out; do
            kill -0 "$launcher" 2>/dev/null || break
            sleep 0.02
        done
        local addr
        addr=$(sed -n 's/^loom run: scheduler is at //p' out)
        /usr/bin/time -q -f "%U %S %e" -o jtime "$LOOM" join "$addr" --role worker --servers 1 \
            --workers 2 -- "$LOOM" "${train[@]}" >join.out 2>&1 &
        joiner=$!
    fi
    wait "$launcher"
    rc=$?
    ((rc == 0)) || tail -n 5 out >&2
    [[ -n $joiner ]] && { wait "$joiner"; jrc=$?; read -r juser jsys _ <jtime; }
    read -r user sys wall <job.time
    acc=$(tail -1 m | sed -n 's/.*"test_accuracy": \([^,}]*\).*/\1/p')
    loss=$(tail -1 m | sed -n 's/.*"test_logloss": \([^,}]*\).*/\1/p')
    local parts_joiner epoch_s
    parts_joiner=$(grep -c 'finished by worker 1$' out)
    # Worker 0's seconds per epoch after the first (the joiner is in from epoch 1
    # on): its report's time is since the start, at each epoch's end.
    epoch_s=$(awk '/^\[worker 0\] epoch +[0-9]+ / { t[$4] = $(NF - 1); last = $4 }
        END { if (last > 1) printf "%.2f", (t[last] - t[1]) / (last - 1) }' out)
    printf "%-7s status %d/%d  cpu %6.2f s (job %5.2f + joiner %5.2f)  wall %6.2f s  epochs 2-%d %5s s each  test acc %.4f  logloss %.4f  parts by worker 1: %d of %d\n" \
        "$name" "$rc" "$jrc" "$(echo "$user + $sys + $juser + $jsys" | bc)" "$(echo "$user + $sys" | bc)" \
        "$(echo "$juser + $jsys" | bc)" "$wall" "$EPOCHS" "$epoch_s" "$acc" "$loss" "$parts_joiner" $((16 * EPOCHS))
}

echo "# $(bench_machine); load $(bench_load); loom $(bench_head "$(dirname "$0")/..")"
for ((r = 1; r <= REPS; r++)); do
    for name in fixed1 grow fixed2; do job "$name"; done
done
echo "# load after: $(bench_load)"
