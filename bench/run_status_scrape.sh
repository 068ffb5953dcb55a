#!/usr/bin/env bash
# run_status_scrape.sh: what scraping the status page's /metrics costs the
# scheduler, in two jobs:
#   lr    `loom train lr` on generated data, 1 server, 2 workers: a scheduler
#         busy with their clocks;
#   idle  2 servers and 8 workers of tests' ps_check holding after 2 clocks:
#         a page of 11 nodes and a scheduler doing nothing but heartbeats, so
#         the cost of a request stands out of the noise.
# Each job runs for a window of WINDOW seconds. The scheduler's CPU time
# (user + system, /proc/PID/stat) is read at the window's start and end, with
# nobody reading the page, with /metrics fetched once a second (Prometheus's
# scrape_interval: 1s) and with REQUESTS fetches back to back; ROUNDS times
# each, interleaved. It prints the scheduler's CPU as a share of one core and,
# from the back-to-back runs, the CPU one request costs: (their CPU - the
# undisturbed run's) / REQUESTS, which at one request a second is that share.
#
#   bench/run_status_scrape.sh [BUILD_DIR]   (WINDOW=30 ROUNDS=3 REQUESTS=2000)
#
# CPU seconds do not depend on how many cores the machine has; on a loaded
# machine they still move with cache and scheduling noise, hence the
# interleaving and the idle job.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
build=${1:-build}
loom=$build/bin/loom ps_check=$build/tests/mp/ps_check
bench_need_exe "run_status_scrape" " (build first)" "$loom" "$ps_check"
window=${WINDOW:-30} rounds=${ROUNDS:-3} requests=${REQUESTS:-2000}
bench_clear_env
scratch=$(bench_scratch status-scrape)
trap 'rm -rf "$scratch"' EXIT
"$loom" gen lr --out "$scratch/data" --rows 200000 --features 10000 --nnz 20 --quiet
hz=$(getconf CLK_TCK)

# scheduler_of PID: the pid of the scheduler among the launcher PID's children.
scheduler_of() {
    local p
    for p in $(pgrep -P "$1"); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx 'LOOM_ROLE=scheduler'; then
            echo "$p"
            return
        fi
    done
}

# one_run KIND SCRAPE: the scheduler's CPU share of one core over the window
# of a job of KIND (lr or idle); SCRAPE: none, 1hz or burst.
one_run() {
    local kind=$1 scrape=$2 out=$scratch/job.out pid='' url='' job
    if [[ $kind == lr ]]; then
        "$loom" train lr --train "$scratch/data" --epochs 100000 --workers 2 >"$out" 2>&1 &
    else
        rm -rf "$scratch/pids" && mkdir "$scratch/pids"
        "$loom" run --servers 2 --workers 8 -- "$ps_check" status --clocks 2 \
            --pid-dir "$scratch/pids" --hold "$scratch/never" >"$out" 2>&1 &
    fi
    job=$!
    for _ in $(seq 300); do
        url=$(grep -o 'http://[^ ]*token=[0-9a-f]*' "$out" | head -n 1 || true)
        pid=$(scheduler_of "$job")
        [[ -n $url && -n $pid ]] && break
        sleep 0.1
    done
    [[ -n $pid && -n $url ]] || { echo "no scheduler found:" >&2; cat "$out" >&2; exit 1; }
    local metrics="${url%%\?*}metrics?${url#*\?}"
    sleep 3 # past the start
    local t0 t1 end=$((SECONDS + window))
    t0=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    if [[ $scrape == burst ]]; then
        for _ in $(seq "$requests"); do printf 'url = "%s"\noutput = /dev/null\n' "$metrics"; done |
            curl -s -K - >/dev/null
    fi
    while ((SECONDS < end)); do
        if [[ $scrape == 1hz ]]; then curl -s -o /dev/null "$metrics"; fi
        sleep 1
    done
    t1=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    kill "$job" 2>/dev/null || true
    wait "$job" 2>/dev/null || true
    awk -v a="$t0" -v b="$t1" -v hz="$hz" -v w="$window" \
        'BEGIN { printf "%.3f", 100 * (b - a) / hz / w }'
}

median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

log "load $(bench_load); $(bench_machine)"
for kind in lr idle; do
    echo
    echo "job: $kind; the scheduler's CPU, % of one core, over $window s"
    echo
    echo "| round | no scraping | /metrics once a second | $requests requests back to back |"
    echo "|---:|---:|---:|---:|"
    plain=() scraped=() burst=()
    for r in $(seq "$rounds"); do
        a=$(one_run "$kind" none)
        b=$(one_run "$kind" 1hz)
        c=$(one_run "$kind" burst)
        plain+=("$a") scraped+=("$b") burst+=("$c")
        echo "| $r | $a | $b | $c |"
    done
    m0=$(median "${plain[@]}") m1=$(median "${scraped[@]}") m2=$(median "${burst[@]}")
    echo
    echo "medians: $m0 without, $m1 once a second, $m2 back to back; one request:" \
        "$(awk -v a="$m0" -v c="$m2" -v n="$requests" -v w="$window" \
            'BEGIN { printf "%.1f us of CPU, %.4f%% of a core at one a second", (c - a) / 100 * w / n * 1e6, (c - a) * w / n }')"
done
echo
log "load $(bench_load)"
