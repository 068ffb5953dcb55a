#!/usr/bin/env bash
# Fault-tolerance benchmarks of issue 12 (docs/BENCHMARKS.md). Five parts,
# chosen by name after the build directory (all five by default):
#
# checkpoints: the cost of one incremental checkpoint every
# 10 clocks (a full one every 10th), as the training time of the same job
# with and without --checkpoint-dir, runs interleaved and repeated (REPS), the
# median of each and their ratio measured in the same run (the machine may be
# shared, so only the ratio means something):
#   - LR on a generated 2M-row set (loom gen lr --rows 2000000), SGD + AdaGrad,
#     2 workers, 2 servers, minibatches of 1000 (1000 clocks per epoch);
#   - LDA on AP (../shared/data/ap, SOURCES.md), K = 50, 10 iterations of 10
#     clocks, 2 workers, 2 servers.
# Besides the two medians (noisy on a shared machine), the time the training
# actually waited for checkpoints is measured inside the checkpointed runs:
# each part's write time as logged, the slowest server's sum plus the slowest
# worker's, against that run's training time.
# Training time is the metrics file's time_s of the last epoch (from the end
# of data loading to the end of training), so the data reading both runs share
# does not dilute the overhead. The checkpoint directory is on the same disk
# as $TMPDIR; every file is fsync'd.
#
# failover: a server SIGKILLed mid-training with --replicas 1, heartbeats
# every 100 ms and a 500 ms timeout (FAILOVER_REPS runs, 10 by default): the
# time from the kill to the next clock every worker completed after it, and
# its parts, from the wall-clock times the processes log (LOOM_LOG_TIME=1,
# failover_check --stamps 1). The job is tests/ft/failover_check's: 3 servers,
# 3 workers, a BSP (FAILOVER_MODE) int64 sum table of 1000 keys, each clock
# pushes 50 known deltas, pulls every key and ends with loom_clock, then
# sleeps 20 ms; server 1 is killed once every worker has passed clock 30 of
# 150. Each run must end with every key exact (no update lost or applied
# twice) or the bench fails.
#   kill: the bench's own clock ($EPOCHREALTIME) just before kill -KILL;
#   detected: the scheduler's "server 1 ... died: no heartbeat" line;
#   redirected: the last worker's "sent again to its ranges' replicas" line
#     (it has taken the new masters and resent its pushes and pulls);
#   next clock: the first clock that every worker began (before its push)
#     after the kill, at the moment the last worker completed it (its
#     loom_clock returned, after its pull of every key). Such a clock needs the
#     dead server's ranges after the kill (a BSP pull of clock c needs rows of
#     clock c, which no cache holds); a clock begun before the kill may end
#     after it without needing them (its rows came before the kill), so it
#     does not count. This overstates the failover by up to one clock
#     (about 25 ms here).
#
# replication: bytes, not times. LR with --replicas 1, 3 servers, 4 workers:
# what the servers sent to replicas after aggregation (REPL) against what
# forwarding every push would have sent, summed from their LOOM_VERBOSE=2
# lines, for a9a (../shared/data/a9a, if present) under BSP and a generated
# sparse set under BSP and SSP(1). Forwarding counts, per push and range, a
# message header and the push's keys and deltas for each live replica; a REPL
# message is a header, the workers' push sequences and, per changed row, its
# key, values and updater state. The keys' share of the REPL bytes (8 bytes a
# row) says what a denser key encoding could save at most.
#
# restart: what --on-worker-failure restart costs. The same checkpointed job
# (LR on a generated RESTART_ROWS-row set, SGD + AdaGrad, 2 workers, 2
# servers, BSP, minibatches of 1000, 2 epochs, a checkpoint every 10 clocks)
# runs undisturbed and with worker 1 SIGKILLed once the checkpoint at half its
# clocks is committed, interleaved (REPS pairs): the wall-clock time of each
# `loom train` (data loading, the restart and the resume included), their
# ratio, the clock the restarted job resumed at, and the final training
# objective of both (two BSP workers are not bit-reproducible: the servers add
# their pushes in arrival order; tests/ft/test_ft_restart.sh checks one
# worker bit for bit).
#
# handback: a replacement taking its ranges back (docs/FAULTS.md, "Taking the
# ranges back"). The failover part's job, with 3000 clocks 1 ms apart (so
# that clocks follow each other closely) and --on-server-failure restart:
# server 1 is killed at clock 30, its
# replacement joins, is back and takes its ranges back while every worker
# pushes and pulls each clock (HANDBACK_REPS runs, 5 by default; each must
# end with every key exact). Per run, from the logged wall-clock times: the
# fence (the registry's "handing its ranges back" to its "took its ranges
# back"), the gate (that to the replacement's "ranges open"), and the clocks
# that overlap the handback: the longest of them against the run's median
# clock.
#
# Usage: bench/run_faults.sh [BUILD_DIR] [checkpoints] [failover] [replication] [restart] [handback]
#        (REPS=3, ROWS=2000000, AP_DIR=..., FAILOVER_REPS=10, FAILOVER_MODE=bsp,
#         A9A=..., RESTART_ROWS=500000, HANDBACK_REPS=5)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"

build=${1:-build}
shift $(($# > 0 ? 1 : 0))
parts=("$@")
((${#parts[@]})) || parts=(checkpoints failover replication restart handback)
for part in "${parts[@]}"; do
    [[ $part =~ ^(checkpoints|failover|replication|restart|handback)$ ]] ||
        { echo "run_faults.sh: unknown part '$part' (checkpoints, failover, replication, restart, handback)" >&2; exit 2; }
done
wants() { [[ " ${parts[*]} " == *" $1 "* ]]; }
here=$(cd "$(dirname "$0")/.." && pwd)
AP_DIR=${AP_DIR:-$here/../shared/data/ap}
REPS=${REPS:-3}
ROWS=${ROWS:-2000000}
FAILOVER_REPS=${FAILOVER_REPS:-10}
FAILOVER_MODE=${FAILOVER_MODE:-bsp}
A9A=${A9A:-$here/../shared/data/a9a/a9a}
RESTART_ROWS=${RESTART_ROWS:-500000}
HANDBACK_REPS=${HANDBACK_REPS:-5}
LOOM=$build/bin/loom
CHECK=$build/tests/ft/failover_check
FAILED_LOG=${FAILED_LOG:-${TMPDIR:-/tmp}/run_faults-failover.log}
bench_need_exe run_faults.sh " (build first)" "$LOOM"
work=$(bench_scratch loom-bench-faults)
launcher=
# Whatever way the bench ends: the failover job's launcher and every process
# that wrote a pid file.
cleanup() {
    [[ -n $launcher ]] && kill -KILL "$launcher" 2>/dev/null
    for f in "$work"/pids/*.pid; do [[ -e $f ]] && kill -KILL "$(<"$f")" 2>/dev/null; done
    wait 2>/dev/null
    [[ -n ${KEEP:-} ]] && echo "kept $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
bench_clear_env

last_time() { sed -n 's/.*"time_s": \([^,}]*\).*/\1/p' "$1" | tail -1; }
# Seconds the training waited for checkpoints, from the parts' "written in X ms"
# lines (LOOM_VERBOSE=1): the slowest server's total (its I/O thread does
# nothing else meanwhile) plus the slowest worker's.
blocked() {
    awk '/checkpoint part .* written .* ms$/ {
             n = split($0, p, "/"); f = p[n]; sub(/\.part.*/, "", f)
             t[f] += $(NF - 1)
         }
         END { for (k in t) { if (k ~ /^server/ && t[k] > s) s = t[k]; if (k ~ /^worker/ && t[k] > w) w = t[k] }
               printf "%.2f\n", (s + w) / 1000 }' "$1"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# ms_table HEADER NAME...: a table of the median, min and max of each column
# of the rows in ${runs[@]} (one space-separated number per NAME).
ms_table() {
    local i col
    echo "| $1 | median | min | max |"
    echo "|---|---:|---:|---:|"
    shift
    for ((i = 1; i <= $#; i++)); do
        col=$(printf '%s\n' "${runs[@]}" | cut -d' ' -f"$i")
        printf "| %s | %s | %s | %s |\n" "${!i}" "$(median <<<"$col")" \
            "$(sort -g <<<"$col" | head -1)" "$(sort -g <<<"$col" | tail -1)"
    done
}

# bench NAME ARGS...: REPS interleaved pairs of runs; prints a table row.
bench() {
    local name=$1
    shift
    local base=() ckpt=() waited=() bytes=0 count=0
    for ((r = 0; r < REPS; r++)); do
        "$LOOM" "$@" --metrics "$work/m" --quiet --insecure --no-status >/dev/null 2>"$work/err" ||
            { cat "$work/err" >&2; exit 1; }
        base+=("$(last_time "$work/m")")
        rm -rf "$work/ck"
        LOOM_VERBOSE=1 "$LOOM" "$@" --metrics "$work/m" --quiet --insecure --no-status \
            --checkpoint-dir "$work/ck" --checkpoint-every 10 >/dev/null 2>"$work/err" ||
            { cat "$work/err" >&2; exit 1; }
        ckpt+=("$(last_time "$work/m")")
        waited+=("$(blocked "$work/err")")
        count=$(grep -c "" <<<"$(ls -d "$work"/ck/ckpt-*)")
        bytes=$(du -sb "$work/ck" | cut -f1)
    done
    local b c wt
    b=$(printf '%s\n' "${base[@]}" | median)
    c=$(printf '%s\n' "${ckpt[@]}" | median)
    wt=$(printf '%s\n' "${waited[@]}" | median)
    printf "| %s | %.2f | %.2f | %+.1f%% | %.2f (%.1f%%) | %s | %.1f |\n" "$name" "$b" "$c" \
        "$(echo "($c / $b - 1) * 100" | bc -l)" "$wt" "$(echo "$wt / $c * 100" | bc -l)" \
        "${base[*]} / ${ckpt[*]}" "$(echo "$bytes / 1000000" | bc -l)"
    echo "  ($count checkpoint directories kept at the end)" >&2
}

if wants checkpoints; then
    echo "checkpoint every 10 clocks (full every 10th); $(nproc) cores; $(date -u +%Y-%m-%d); REPS=$REPS"
    echo
    echo "| job | training s, no checkpoints (median) | with checkpoints (median) | overhead (medians) | s waiting for checkpoints (median; share of training) | every run (s): without / with | MB on disk at the end |"
    echo "|---|---|---|---|---|---|---|"
    echo "generating $ROWS LR rows" >&2
    "$LOOM" gen lr --out "$work/lr.svm" --rows "$ROWS" --nnz 10 --quiet
    bench "LR, $ROWS rows, 2 workers, 2 servers" train lr --train "$work/lr.svm" --workers 2 \
        --servers 2 --updater adagrad --epochs 1 --minibatch 1000
    rm -f "$work/lr.svm"
    if [[ -r $AP_DIR/ap.dat ]]; then
        bench "LDA on AP, K=50, 2 workers, 2 servers" train lda --train "$AP_DIR/ap.dat" --topics 50 \
            --iterations 10 --syncs 10 --eval-every 0 --workers 2 --servers 2
    else
        echo "| LDA on AP | skipped: $AP_DIR/ap.dat not found | | | | | |"
    fi
fi

# wait_until SECONDS COMMAND...: polls COMMAND every 50 ms; fails the bench
# after SECONDS; returns 1 if the failover job's launcher has exited.
wait_until() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        kill -0 "$launcher" 2>/dev/null || return 1
        ((SECONDS < deadline)) || { tail -20 "$work/job.out" >&2; echo "run_faults.sh: timed out waiting for: $*" >&2; exit 1; }
        sleep 0.05
    done
}
pid_files() { (($(find "$work/pids" -name '*.pid' | wc -l) >= 7)); }
past_clock_30() { (($(grep -cE '^\[worker [0-2]\] worker [0-2] clock 30$' "$work/job.out") >= 3)); }

# A node other than the killed server 1 was declared dead (a heartbeat late
# on the loaded machine): the job ended or went on without it, and the run
# measures no failover of server 1.
false_death() {
    grep -E "died: no heartbeat|lost the scheduler" "$work/job.out" | grep -qv "server 1 (node"
}

# Bench failure: the job's output is kept as $FAILED_LOG.
broken() {
    cp "$work/job.out" "$FAILED_LOG"
    echo "run_faults.sh: $*; the job's output is in $FAILED_LOG" >&2
    exit 1
}

# One failover run; prints "total detected redirected first_clock" in ms, or
# "false-death" or "preempted" for a run that must be repeated.
failover_run() {
    rm -rf "$work/pids"
    mkdir "$work/pids"
    LOOM_REPLICAS=1 LOOM_HEARTBEAT_MS=100 LOOM_LOG_TIME=1 "$LOOM" run --servers 3 --workers 3 \
        --on-failure wait --heartbeat-timeout 500 --timeout 120 --insecure --no-status \
        -- "$CHECK" "$FAILOVER_MODE" --pid-dir "$work/pids" --clocks 150 --pace-ms 20 \
        --stamps 1 >"$work/job.out" 2>&1 &
    launcher=$!
    if ! wait_until 60 pid_files || ! wait_until 60 past_clock_30; then
        wait "$launcher" || true
        launcher=
        false_death && { echo false-death; return; }
        broken "the job ended before the kill"
    fi
    # The kill happened between two stamps: durations are measured from the
    # first, clocks "begun after the kill" are those begun after the second
    # (a loaded machine can preempt this shell between them: a run where they
    # are more than 10 ms apart is run again).
    local victim killed after
    victim=$(<"$work/pids/server-1.pid")
    killed=$EPOCHREALTIME
    kill -KILL "$victim"
    after=$EPOCHREALTIME
    local status=0
    wait "$launcher" || status=$?
    launcher=
    for w in 0 1 2; do
        grep -q "^\[worker $w\] worker $w: 150 clocks, all 1000 keys exact" "$work/job.out" && continue
        false_death && { echo false-death; return; }
        broken "worker $w did not end with every key exact (launcher status $status)"
    done
    awk -v killed="$killed" -v after="$after" '
        function stamp() { return match($0, / [0-9]+\.[0-9][0-9][0-9] /) ? substr($0, RSTART + 1, RLENGTH - 2) : 0 }
        /^\[scheduler\].* died: no heartbeat for .*the job goes on without it/ { detected = stamp() }
        /sent again to its ranges. replicas/ { if (stamp() > redirected) redirected = stamp() }
        / worker [0-9]+ clock [0-9]+ from [0-9.]+ to / {
            c = $6; t = $NF
            if ($8 > after) { if (!(c in last) || t > last[c]) last[c] = t; began[c]++ }
        }
        END {
            first = -1
            for (c in began) if (began[c] == 3 && (first < 0 || c + 0 < first)) first = c + 0
            if (after - killed > 0.010) { print "preempted"; exit }
            if (detected && detected < killed) { print "false-death"; exit } # server 1 itself, before the kill
            if (first < 0 || !detected || !redirected) { print "unparsed"; exit }
            printf "%.0f %.0f %.0f %.0f\n", (last[first] - killed) * 1000, (detected - killed) * 1000,
                (redirected - detected) * 1000, (last[first] - redirected) * 1000
        }' "$work/job.out"
}

if wants failover; then
    [[ -x $CHECK ]] || { echo "run_faults.sh: $CHECK not found (build the tests)" >&2; exit 2; }
    echo
    echo "failover: $FAILOVER_MODE, 3 servers, 3 workers, --replicas 1, heartbeat 100 ms, timeout 500 ms;" \
        "$(nproc) cores; $(date -u '+%Y-%m-%d %H:%M') UTC; FAILOVER_REPS=$FAILOVER_REPS; load before: $(bench_load)"
    echo
    runs=()
    false_deaths=0
    for ((r = 0; r < FAILOVER_REPS; r++)); do
        row=$(failover_run)
        [[ $row != preempted ]] || { echo "  run $r: the bench was preempted around the kill; again" >&2; r=$((r - 1)); continue; }
        if [[ $row == false-death ]]; then
            echo "  run $r: a live process was declared dead (heartbeat later than 500 ms); again" >&2
            false_deaths=$((false_deaths + 1)) r=$((r - 1))
            continue
        fi
        [[ $row != unparsed ]] || { tail -30 "$work/job.out" >&2; echo "run_faults.sh: could not read the run's times" >&2; exit 1; }
        runs+=("$row")
        echo "  run $r: kill to next clock $row (ms: total detected redirected first-clock); every key exact" >&2
    done
    ms_table "ms from the kill" "to the next completed clock" \
        "detection (kill to the scheduler's NODE_FAILED)" \
        "redirect and resend (to the last worker's resend)" \
        "first clock (resend to the clock's last worker)"
    echo
    echo "every run (total detected redirected first-clock): $(printf '%s; ' "${runs[@]}")"
    echo "lost updates: none (every key exact in all $FAILOVER_REPS runs); runs repeated because a live process was declared dead: $false_deaths; load after: $(bench_load)"
fi

# repl_bytes NAME ARGS...: one `loom train lr` with --replicas 1; prints a
# table row of the servers' summed REPL bytes against forwarding every push.
repl_bytes() {
    local name=$1
    shift
    LOOM_VERBOSE=2 "$LOOM" train lr "$@" --servers 3 --workers 4 --replicas 1 --epochs 2 \
        --insecure --no-status --quiet >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
    grep 'replicas: sent' "$work/err" | awk -v name="$name" '
        function num(re, skip) { match($0, re); return substr($0, RSTART + skip) + 0 }
        { r += num("sent [0-9]+ bytes", 5); f += num("have sent [0-9]+", 10)
          rows += num(": [0-9]+ rows", 2); msgs += num("rows in [0-9]+ messages", 8) }
        END { printf "| %s | %d | %d | %d | %d | %.2f | %.0f%% |\n", name, r, rows, msgs, f, r / f,
                     800 * rows / r }'
}

if wants replication; then
    echo
    echo "replication after aggregation against forwarding every push: lr, 3 servers, 4 workers," \
        "--replicas 1, 2 epochs; bytes summed over the servers; $(date -u '+%Y-%m-%d %H:%M') UTC"
    echo
    echo "| data, consistency | REPL bytes (after aggregation) | rows in them | REPL messages | forwarding every push (bytes) | ratio | keys' share of the REPL bytes |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
    if [[ -r $A9A ]]; then
        repl_bytes "a9a, BSP" --train "$A9A" --consistency bsp
    else
        echo "| a9a | skipped: $A9A not found | | | | | |"
    fi
    "$LOOM" gen lr --out "$work/sparse.svm" --rows 20000 --features 5000 --nnz 10 --quiet
    for mode in bsp ssp:1; do
        repl_bytes "generated, 5000 features, 10 per row, minibatch 100, $mode" \
            --train "$work/sparse.svm" --minibatch 100 --consistency "$mode"
    done
fi

# restart_run KILL_AT METRICS: one checkpointed run of the restart part's job
# in the background; with KILL_AT > 0, worker 1 is SIGKILLed once the
# checkpoint at clock KILL_AT is committed. Prints its wall-clock seconds.
restart_run() {
    local kill_at=$1 metrics=$2 t0 t1 c pid newest
    rm -rf "$work/ck"
    t0=$EPOCHREALTIME
    "$LOOM" train lr --train "$work/restart.svm" --workers 2 --servers 2 --consistency bsp \
        --updater adagrad --epochs 2 --minibatch 1000 --checkpoint-dir "$work/ck" \
        --checkpoint-every 10 --on-worker-failure restart --metrics "$metrics" --quiet \
        --insecure --no-status >/dev/null 2>"$work/err" &
    launcher=$!
    if ((kill_at)); then
        newest=0
        until ((newest >= kill_at)); do
            kill -0 "$launcher" 2>/dev/null || { cat "$work/err" >&2; echo "run_faults.sh: the job ended before the kill" >&2; exit 1; }
            sleep 0.01
            newest=0
            for m in "$work"/ck/ckpt-*/MANIFEST; do
                [[ -e $m ]] || continue
                m=${m#"$work"/ck/ckpt-}
                m=${m%%/*}
                ((10#$m > newest)) && newest=$((10#$m))
            done
        done
        for c in $(pgrep -P "$launcher"); do
            tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx LOOM_ROLE=worker &&
                tr '\0' '\n' <"/proc/$c/environ" | grep -qx LOOM_RANK=1 && pid=$c
        done
        kill -KILL "$pid"
    fi
    wait "$launcher" || { cat "$work/err" >&2; echo "run_faults.sh: the restart job failed" >&2; exit 1; }
    launcher=
    t1=$EPOCHREALTIME
    echo "$t1 - $t0" | bc -l
}

if wants restart; then
    echo
    echo "--on-worker-failure restart: LR, $RESTART_ROWS generated rows, 2 workers, 2 servers, BSP," \
        "2 epochs of minibatches of 1000, a checkpoint every 10 clocks; worker 1 killed once;" \
        "$(date -u '+%Y-%m-%d %H:%M') UTC; REPS=$REPS"
    "$LOOM" gen lr --out "$work/restart.svm" --rows "$RESTART_ROWS" --nnz 10 --quiet
    clocks=$((2 * RESTART_ROWS / 2 / 1000))
    kill_at=$((clocks / 2 / 10 * 10))
    objective() { sed -n 's/.*"objective": \([^,}]*\).*/\1/p' "$1" | tail -1; }
    plain=() restarted=() from=() objectives=()
    for ((r = 0; r < REPS; r++)); do
        plain+=("$(restart_run 0 "$work/plain.json")")
        restarted+=("$(restart_run "$kill_at" "$work/restarted.json")")
        grep -q "the job finished after 1 restart(s)" "$work/err" ||
            { cat "$work/err" >&2; echo "run_faults.sh: the job was not restarted once" >&2; exit 1; }
        from+=("$(sed -n 's/.*from its checkpoint at clock \([0-9]*\)$/\1/p' "$work/err")")
        objectives+=("$(objective "$work/plain.json")/$(objective "$work/restarted.json")")
    done
    p=$(printf '%s\n' "${plain[@]}" | median)
    q=$(printf '%s\n' "${restarted[@]}" | median)
    echo
    echo "| job | s undisturbed (median) | s with one restart (median) | ratio | killed after the checkpoint at clock (of $clocks) | resumed at clock | final objective, undisturbed/restarted | every run (s): undisturbed / restarted |"
    echo "|---|---:|---:|---:|---:|---|---|---|"
    printf "| LR %s rows | %.2f | %.2f | %.2f | %d | %s | %s | %s |\n" "$RESTART_ROWS" "$p" "$q" \
        "$(echo "$q / $p" | bc -l)" "$kill_at" "${from[*]}" "${objectives[*]}" \
        "$(printf '%.2f ' "${plain[@]}")/ $(printf '%.2f ' "${restarted[@]}")"
    echo "load after: $(bench_load)"
fi

# One handback run; prints "fence gate longest median" in ms, or
# "false-death" for a run that must be repeated.
handback_run() {
    rm -rf "$work/pids"
    mkdir "$work/pids"
    LOOM_REPLICAS=1 LOOM_HEARTBEAT_MS=100 LOOM_LOG_TIME=1 LOOM_VERBOSE=1 "$LOOM" run --servers 3 \
        --workers 3 --on-failure wait --on-server-failure restart --heartbeat-timeout 500 \
        --timeout 120 --insecure --no-status \
        -- "$CHECK" "$FAILOVER_MODE" --pid-dir "$work/pids" --clocks 3000 --pace-ms 1 \
        --stamps 1 >"$work/job.out" 2>&1 &
    launcher=$!
    if ! wait_until 60 pid_files || ! wait_until 60 past_clock_30; then
        wait "$launcher" || true
        launcher=
        false_death && { echo false-death; return; }
        broken "the job ended before the kill"
    fi
    kill -KILL "$(<"$work/pids/server-1.pid")"
    local status=0
    wait "$launcher" || status=$?
    launcher=
    for w in 0 1 2; do
        grep -q "^\[worker $w\] worker $w: 3000 clocks, all 1000 keys exact" "$work/job.out" && continue
        false_death && { echo false-death; return; }
        broken "worker $w did not end with every key exact (launcher status $status)"
    done
    grep -q "server 1 took its ranges back$" "$work/job.out" || broken "server 1 did not take its ranges back"
    awk '
        function stamp() { return match($0, / [0-9]+\.[0-9][0-9][0-9] /) ? substr($0, RSTART + 1, RLENGTH - 2) : 0 }
        /^\[scheduler\].*server 1: handing its ranges back/ { fence = stamp() }
        /^\[scheduler\].*server 1 took its ranges back$/ { commit = stamp() }
        /^\[server 1\].*ranges open: every worker sent again/ { open = stamp() }
        / worker [0-9]+ clock [0-9]+ from [0-9.]+ to / { n++; from[n] = $8; to[n] = $NF }
        END {
            if (!fence || !commit || !open) { print "unparsed"; exit }
            for (i = 1; i <= n; i++)
                if (to[i] >= fence && from[i] <= open && to[i] - from[i] > longest) longest = to[i] - from[i]
            printf "%.1f %.1f %.0f ", (commit - fence) * 1000, (open - commit) * 1000, longest * 1000
        }' "$work/job.out"
    grep -E " worker [0-9]+ clock [0-9]+ from [0-9.]+ to " "$work/job.out" |
        awk '{ printf "%.0f\n", ($NF - $8) * 1000 }' | median
}

if wants handback; then
    [[ -x $CHECK ]] || { echo "run_faults.sh: $CHECK not found (build the tests)" >&2; exit 2; }
    echo
    echo "handback: $FAILOVER_MODE, 3 servers, 3 workers, --replicas 1 --on-server-failure restart," \
        "heartbeat 100 ms, timeout 500 ms; $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M') UTC;" \
        "HANDBACK_REPS=$HANDBACK_REPS; load before: $(bench_load)"
    echo
    runs=()
    for ((r = 0; r < HANDBACK_REPS; r++)); do
        row=$(handback_run)
        if [[ $row == false-death ]]; then
            echo "  run $r: a live process was declared dead (heartbeat later than 500 ms); again" >&2
            r=$((r - 1))
            continue
        fi
        [[ $row != unparsed ]] || broken "could not read the run's times"
        runs+=("$row")
        echo "  run $r: $row (ms: fence gate longest-clock median-clock); every key exact" >&2
    done
    ms_table "ms" "fence (fence asked to commit)" "gate (commit to the ranges open)" \
        "longest clock overlapping the handback (0: none did)" "median clock of the run"
    echo
    echo "every run (fence gate longest median): $(printf '%s; ' "${runs[@]}")"
    echo "lost updates: none (every key exact in all $HANDBACK_REPS runs); load after: $(bench_load)"
fi
