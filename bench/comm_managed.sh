#!/usr/bin/env bash
# comm_managed.sh: managed communication (docs/USAGE.md#managed-communication)
# against SSP alone at the same bandwidth budget, in iterations to a target.
#
# Loopback is otherwise unlimited, so the budget itself makes bandwidth
# scarce: every multi-worker run has `--bandwidth B` (pushes, pull replies and
# managed sends of every process paced to B Mbit/s). SSP alone sends only at
# clock ends (--priority none); the managed runs also send buffered rows
# between clocks and let servers push changed rows to the workers caching
# them, with each priority policy. Both run the same --steps (a clock is
# several pull-train-push steps, so that there is something to send early and
# a cache to refresh; MF damps each step the same way in both), so the
# comparison measures only what managed communication brings. Each table also
# has a one-worker run (the sequential algorithm: no staleness at all, the
# fewest iterations any data-parallel run can hope for) and SSP alone with one
# step (the plain baseline). Results are iterations (epochs) to a target, the
# primary measure on a loaded machine; wall times are from the same run and
# only their ratios mean anything.
#
# One function per experiment, each printing a markdown section:
#   comm_managed_mf  BUILD   MF on ml-latest-small, 4 workers, 2 servers, SSP(2):
#                            epochs to test RMSE 0.87
#   comm_managed_lda BUILD   LDA on AP, K = LDA_TOPICS, 4 workers, 2 servers, SSP(2):
#                            iterations to the log-likelihood SSP alone (one
#                            step) reaches in its last iteration
# bench/run_comm.sh sources this file and calls them; run on its own it runs
# both:  bench/comm_managed.sh build   (about 5 minutes on a loaded 2-core box)
# Environment: DATA (default ../shared/data next to the repository), MF_MBITS
# (200), MF_STEPS (3), MF_EPOCHS (30), LDA_MBITS (20), LDA_STEPS (4),
# LDA_TOPICS (50), LDA_ITERATIONS (20), KEEP=1 keeps logs, PLOTS=DIR keeps the
# runs' metrics in DIR and draws them there with `loom plot` (objective against
# iterations, seconds and bytes; needs gnuplot).
set -u

comm_managed_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# comm_managed_run LOOM METRICS LOG ARGS...: one job; prints "rc wall_s".
comm_managed_run() {
    local loom=$1 metrics=$2 log=$3 t0 rc=0
    shift 3
    t0=$EPOCHREALTIME
    timeout "${TIMEOUT:-900}" "$loom" "$@" --metrics "$metrics" --quiet --insecure --no-status \
        >"$log" 2>&1 || rc=$?
    echo "$rc $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')"
}

# comm_managed_reach METRICS KEY TARGET DIRECTION WORKERS: "iterations-to-target
# last-value MB-sent-by-the-workers rows-refreshed-per-worker-and-iteration",
# DIRECTION le (RMSE) or ge (log-likelihood).
comm_managed_reach() {
    awk -v key="$2" -v t="$3" -v dir="$4" -v w="$5" '
        function get(k,   s) {
            if (!match($0, "\"" k "\": [^,}]*")) return ""
            s = substr($0, RSTART, RLENGTH); sub(/^[^:]*: /, "", s); return s
        }
        {
            n++; v = get(key); b = get("bytes_sent"); p = get("pushed_rows_received")
            ok = v != "null" && v != "" && v !~ /nan|inf/   # a diverged run reaches nothing
            if (ok && hit == "" && (dir == "le" ? v + 0 <= t : v + 0 >= t)) hit = n
            last = v
        }
        END { printf "%s %s %.1f %.0f\n", hit == "" ? "-" : hit, last == "" ? "-" : last, b / 1e6,
                     n ? p / w / n : 0 }' "$1"
}

# comm_managed_plot LOOM DIR PREFIX YKEY TITLE: PREFIX-{iterations,time,bytes}.png
# in DIR from DIR/PREFIX-*.jsonl.
comm_managed_plot() {
    local loom=$1 dir=$2 prefix=$3 y=$4 title=$5 x
    for x in epoch time_s bytes; do
        "$loom" plot "$dir/$prefix"-*.jsonl --x "$x" --y "$y" --title "$title" \
            --out "$dir/$prefix-$([[ $x == epoch ]] && echo iterations || echo "${x%_s}").png" ||
            echo "comm_managed.sh: loom plot failed (gnuplot missing?)" >&2
    done
}

# comm_managed_table LOOM WORK KEY TARGET DIRECTION ROWS...: one table row per
# run; each ROW is "name|workers|extra flags", run with the section's common
# flags (the array `common`), its metrics kept as WORK/NAME.jsonl; a run
# already made (its "rc wall" in the caller's `done_runs`) is not made again.
comm_managed_table() {
    local loom=$1 work=$2 key=$3 target=$4 direction=$5 row name workers extra rc wall
    shift 5
    for row in "$@"; do
        IFS='|' read -r name workers extra <<<"$row"
        if [[ -n ${done_runs[$name]:-} ]]; then
            read -r rc wall <<<"${done_runs[$name]}"
        else
            # shellcheck disable=SC2086 # extra is a list of flags
            read -r rc wall < <(comm_managed_run "$loom" "$work/$name.jsonl" "$work/$name.log" \
                "${common[@]}" --workers "$workers" $extra)
        fi
        # shellcheck disable=SC2046 # four words
        set -- $(comm_managed_reach "$work/$name.jsonl" "$key" "$target" "$direction" "$workers")
        echo "| $name | \`$extra\` | $1 | $2 | $3 | $4 | $wall | $rc |"
    done
}

comm_managed_mf() {
    local build=$1 loom=$1/bin/loom data=${DATA:-$comm_managed_repo/../shared/data}
    local mbits=${MF_MBITS:-200} epochs=${MF_EPOCHS:-30} steps=${MF_STEPS:-3} work p
    work=${PLOTS:-$(mktemp -d "${TMPDIR:-/tmp}/comm_managed_mf.XXXXXX")}
    mkdir -p "$work"
    local common=(train mf --train "$data/ml-latest-small/ratings.csv" --test-fraction 0.1
        --epochs "$epochs" --servers 2 --consistency ssp:2 --queue-rows 1000)
    local rows=("mf-1-worker|1|--steps 1" "mf-ssp-1-step|4|--steps 1 --bandwidth $mbits --priority none"
        "mf-ssp-alone|4|--steps $steps --bandwidth $mbits --priority none")
    for p in rel abs random roundrobin; do
        rows+=("mf-managed-$p|4|--steps $steps --bandwidth $mbits --priority $p")
    done
    echo "### MF, ml-latest-small, 4 workers, 2 servers, SSP(2), budget $mbits Mbit/s, $steps steps a clock"
    echo
    echo "\`loom ${common[*]} --workers W FLAGS --metrics NAME.jsonl\` (DATA=$data)"
    echo
    echo "| run | FLAGS | epochs to test RMSE 0.87 | final test RMSE | MB sent by the workers | rows refreshed by server pushes / worker / epoch | wall s | exit |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|"
    local -A done_runs=()
    comm_managed_table "$loom" "$work" test_rmse 0.87 le "${rows[@]}"
    echo
    if [[ -n ${PLOTS:-} ]]; then
        comm_managed_plot "$loom" "$work" mf test_rmse "MF, 4 workers, $mbits Mbit/s: test RMSE"
    elif [[ ${KEEP:-0} == 1 ]]; then echo "(logs kept in $work)"; else rm -rf "$work"; fi
}

comm_managed_lda() {
    local build=$1 loom=$1/bin/loom data=${DATA:-$comm_managed_repo/../shared/data}
    local mbits=${LDA_MBITS:-20} iters=${LDA_ITERATIONS:-20} steps=${LDA_STEPS:-4}
    local topics=${LDA_TOPICS:-50} work target p
    work=${PLOTS:-$(mktemp -d "${TMPDIR:-/tmp}/comm_managed_lda.XXXXXX")}
    mkdir -p "$work"
    local common=(train lda --train "$data/ap/ap.dat" --topics "$topics" --iterations "$iters"
        --seed 1 --servers 2 --consistency ssp:2 --queue-rows 500 --top-words 0)
    local base="--steps 1 --bandwidth $mbits --priority none"
    local rows=("lda-1-worker|1|--steps 1" "lda-ssp-1-step|4|$base"
        "lda-ssp-alone|4|--steps $steps --bandwidth $mbits --priority none")
    for p in rel random abs roundrobin; do
        rows+=("lda-managed-$p|4|--steps $steps --bandwidth $mbits --priority $p")
    done
    rows+=("lda-managed-rel-no-budget|4|--steps $steps --priority rel"
        "lda-ssp-4-clocks|4|--syncs $steps --bandwidth $mbits --priority none")
    echo "### LDA, AP, K = $topics, 4 workers, 2 servers, SSP(2), budget $mbits Mbit/s, $steps steps a clock"
    echo
    echo "\`loom ${common[*]} --workers W FLAGS --metrics NAME.jsonl\` (DATA=$data)"
    echo
    local -A done_runs=()
    # shellcheck disable=SC2086 # base is a list of flags
    done_runs[lda-ssp-1-step]=$(comm_managed_run "$loom" "$work/lda-ssp-1-step.jsonl" \
        "$work/lda-ssp-1-step.log" "${common[@]}" --workers 4 $base)
    target=$(awk '{ if (match($0, /"log_likelihood": [^,}]*/)) v = substr($0, RSTART + 18, RLENGTH - 18) }
                  END { print v }' "$work/lda-ssp-1-step.jsonl")
    echo "Target: the log-likelihood SSP alone with one step reaches after $iters iterations, $target."
    echo
    echo "| run | FLAGS | iterations to target | final log-likelihood | MB sent by the workers | rows refreshed by server pushes / worker / iteration | wall s | exit |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|"
    comm_managed_table "$loom" "$work" log_likelihood "$target" ge "${rows[@]}"
    echo
    if [[ -n ${PLOTS:-} ]]; then
        comm_managed_plot "$loom" "$work" lda log_likelihood "LDA, AP, K = $topics, 4 workers, $mbits Mbit/s: log-likelihood"
    elif [[ ${KEEP:-0} == 1 ]]; then echo "(logs kept in $work)"; else rm -rf "$work"; fi
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    build=${1:-build}
    [[ -x $build/bin/loom ]] || { echo "$0: $build/bin/loom not found; build first" >&2; exit 2; }
    echo "## Managed communication ($(date -u '+%Y-%m-%d %H:%M UTC'), HEAD $(git -C "$comm_managed_repo" rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg))"
    echo
    comm_managed_mf "$build"
    comm_managed_lda "$build"
fi
