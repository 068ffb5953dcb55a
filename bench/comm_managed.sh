#!/usr/bin/env bash
# comm_managed.sh: managed communication (docs/USAGE.md#managed-communication)
# against SSP alone at the same bandwidth budget, in iterations to a target.
#
# Loopback is otherwise unlimited, so the budget itself makes bandwidth
# scarce: every run, the baseline included, has `--bandwidth B` (pushes, pull
# replies and managed sends of every process paced to B Mbit/s). The
# baseline sends only at clock ends (--priority none); the managed runs also
# send buffered rows between clocks and let servers push changed rows to the
# workers caching them, with each priority policy. Results are iterations
# (epochs) to a target, the primary measure on a loaded machine; wall times
# are from the same run and only their ratios mean anything.
#
# One function per experiment, each printing a markdown section:
#   comm_managed_mf  BUILD   MF on ml-latest-small, 4 workers, 2 servers, SSP(2):
#                            epochs to test RMSE 0.87 (--steps MF_STEPS for every run)
#   comm_managed_lda BUILD   LDA on AP, K = 100, 4 workers, 2 servers, SSP(2):
#                            iterations to the log-likelihood SSP alone reaches
#                            in its last iteration
# bench/run_comm.sh sources this file and calls them; run on its own it runs
# both:  bench/comm_managed.sh build   (about 6 minutes on a loaded 2-core box)
# Environment: DATA (default ../shared/data next to the repository), MF_MBITS
# (200), MF_STEPS (3), LDA_MBITS (20), MF_EPOCHS (30), LDA_ITERATIONS (30),
# KEEP=1 keeps logs.
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

# comm_managed_reach METRICS KEY TARGET DIRECTION: "iterations-to-target last-value
# MB-sent-by-the-workers", DIRECTION le (RMSE) or ge (log-likelihood).
comm_managed_reach() {
    awk -v key="$2" -v t="$3" -v dir="$4" '
        function get(k,   s) {
            if (!match($0, "\"" k "\": [^,}]*")) return ""
            s = substr($0, RSTART, RLENGTH); sub(/^[^:]*: /, "", s); return s
        }
        {
            n++; v = get(key); b = get("bytes_sent")
            ok = v != "null" && v != "" && v !~ /nan|inf/   # a diverged run reaches nothing
            if (ok && hit == "" && (dir == "le" ? v + 0 <= t : v + 0 >= t)) hit = n
            last = v
        }
        END { printf "%s %s %.1f\n", hit == "" ? "-" : hit, last == "" ? "-" : last, b / 1e6 }' "$1"
}

comm_managed_mf() {
    local build=$1 loom=$1/bin/loom data=${DATA:-$comm_managed_repo/../shared/data}
    local mbits=${MF_MBITS:-200} epochs=${MF_EPOCHS:-30} work tag rc wall
    work=$(mktemp -d "${TMPDIR:-/tmp}/comm_managed_mf.XXXXXX")
    local common=(train mf --train "$data/ml-latest-small/ratings.csv" --test-fraction 0.1
        --epochs "$epochs" --workers 4 --servers 2 --consistency ssp:2 --steps "${MF_STEPS:-3}"
        --queue-rows 1000 --bandwidth "$mbits")
    echo "### MF, ml-latest-small, 4 workers, 2 servers, SSP(2), budget $mbits Mbit/s"
    echo
    echo "\`loom ${common[*]} --priority P\` (DATA=$data)"
    echo
    echo "| priority | epochs to test RMSE 0.87 | final test RMSE | MB sent by the workers | wall s | exit |"
    echo "|---|---:|---:|---:|---:|---:|"
    for tag in none abs rel random roundrobin; do
        read -r rc wall < <(comm_managed_run "$loom" "$work/$tag.json" "$work/$tag.log" \
            "${common[@]}" --priority "$tag")
        set -- $(comm_managed_reach "$work/$tag.json" test_rmse 0.87 le)
        echo "| $tag$([[ $tag == none ]] && echo ' (SSP alone)') | $1 | $2 | $3 | $wall | $rc |"
    done
    echo
    if [[ ${KEEP:-0} == 1 ]]; then echo "(logs kept in $work)"; else rm -rf "$work"; fi
}

comm_managed_lda() {
    local build=$1 loom=$1/bin/loom data=${DATA:-$comm_managed_repo/../shared/data}
    local mbits=${LDA_MBITS:-20} iters=${LDA_ITERATIONS:-30} work tag rc wall target
    work=$(mktemp -d "${TMPDIR:-/tmp}/comm_managed_lda.XXXXXX")
    local common=(train lda --train "$data/ap/ap.dat" --topics 100 --iterations "$iters" --seed 1
        --workers 4 --servers 2 --consistency ssp:2 --queue-rows 500 --bandwidth "$mbits")
    echo "### LDA, AP, K = 100, 4 workers, 2 servers, SSP(2), budget $mbits Mbit/s"
    echo
    echo "\`loom ${common[*]} --priority P\` (DATA=$data)"
    echo
    read -r rc wall < <(comm_managed_run "$loom" "$work/none.json" "$work/none.log" \
        "${common[@]}" --priority none)
    target=$(awk '{ if (match($0, /"log_likelihood": [^,}]*/)) v = substr($0, RSTART + 18, RLENGTH - 18) }
                  END { print v }' "$work/none.json")
    echo "Target: the log-likelihood SSP alone reaches after $iters iterations, $target."
    echo
    echo "| priority | iterations to target | final log-likelihood | MB sent by the workers | wall s | exit |"
    echo "|---|---:|---:|---:|---:|---:|"
    for tag in none rel random abs roundrobin; do
        if [[ $tag != none ]]; then
            read -r rc wall < <(comm_managed_run "$loom" "$work/$tag.json" "$work/$tag.log" \
                "${common[@]}" --priority "$tag")
        fi
        set -- $(comm_managed_reach "$work/$tag.json" log_likelihood "$target" ge)
        echo "| $tag$([[ $tag == none ]] && echo ' (SSP alone)') | $1 | $2 | $3 | $wall | $rc |"
    done
    echo
    if [[ ${KEEP:-0} == 1 ]]; then echo "(logs kept in $work)"; else rm -rf "$work"; fi
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    build=${1:-build}
    [[ -x $build/bin/loom ]] || { echo "$0: $build/bin/loom not found; build first" >&2; exit 2; }
    echo "## Managed communication ($(date -u '+%Y-%m-%d %H:%M UTC'), HEAD $(git -C "$comm_managed_repo" rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg))"
    echo
    comm_managed_mf "$build"
    comm_managed_lda "$build"
fi
