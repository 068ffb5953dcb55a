#!/usr/bin/env bash
# Elastic servers (issue 30, item 4; docs/ELASTIC.md, docs/BENCHMARKS.md): a
# server joins a running lr job and leaves it again. The data: `loom gen lr`
# with ROWS rows (100000) of FEATURES features (500000), 20 per row. The job:
# `loom run --servers 1 --max-servers 2 --workers 2`, lr with --data-parts 16,
# --replicas 1, SSP(2), minibatch 100, EPOCHS epochs (8), REPS times (2).
# Once epoch JOIN_AFTER (1) is over a server joins (`loom join --role
# server`); once epoch LEAVE_AFTER (5) is over it gets SIGTERM and leaves.
# Per job:
#   join -> first pull   ms from starting `loom join` to the joiner's log line
#                        "served its first pull" (its first pull answered as a
#                        master, after its handback), and to the scheduler's
#                        "server 1 took its ranges back"
#   bytes                what the joiner had received by then (its own count in
#                        that line: the copies of its ranges in the replication
#                        rounds, with their updater state and sequences, and
#                        the pushes sent again at the handback) against the
#                        ranges' rows: the model's non-zeros (worker 0's nnz)
#                        x 16 bytes (key and f64 value)
#   leave                ms from SIGTERM to the scheduler's "server 1 left"
#   epochs               worker 0's seconds per epoch: before the join, the
#                        epoch(s) the join and handback ran in, with 2
#                        servers, the epoch of the leave, and after it
#   cpu                  user + sys of every process of the job and the joiner
# The polls below only bound how late a time is read (20 ms), they
# synchronise nothing. The machine may be shared: the load is printed.
#
# Usage: bench/run_elastic_servers.sh BUILD_DIR
set -u
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
BUILD=${1:?usage: $0 BUILD_DIR}
LOOM=$BUILD/bin/loom
bench_need_exe "run_elastic_servers" "" "$LOOM"
EPOCHS=${EPOCHS:-8} REPS=${REPS:-2} ROWS=${ROWS:-100000} FEATURES=${FEATURES:-500000}
JOIN_AFTER=${JOIN_AFTER:-1} LEAVE_AFTER=${LEAVE_AFTER:-5}
bench_clear_env
DIR=$(bench_scratch loom-elastic-servers)
trap 'rm -rf "$DIR"' EXIT
cd "$DIR" || exit 1
"$LOOM" gen lr --out data --rows "$ROWS" --features "$FEATURES" --nnz 20 --quiet || exit 1
train=(train lr --train data --epochs "$EPOCHS" --minibatch 100 --data-parts 16 --servers 2
    --replicas 1 --consistency ssp:2)

ms() { date +%s%3N; }

# wait_for FILE PATTERN: until an extended-regex line is in FILE (or the job ended).
wait_for() {
    until grep -Eq "$2" "$1"; do
        kill -0 "$launcher" 2>/dev/null || return 1
        sleep 0.02
    done
}

job() {
    local rc jrc user sys wall juser jsys t0 t_pull t_back t_term t_left bytes nnz
    rm -f out srv.out job.time jtime
    export LOOM_JOB_TOKEN=bench-$$ LOOM_VERBOSE=1
    /usr/bin/time -q -f "%U %S %e" -o job.time "$LOOM" run --servers 1 --max-servers 2 \
        --workers 2 --insecure --no-status -- "$LOOM" "${train[@]}" >out 2>&1 &
    launcher=$!
    wait_for out "^\[scheduler\] info: parts: epoch $((JOIN_AFTER - 1)) over" || return 1
    local addr
    addr=$(sed -n 's/^loom run: scheduler is at //p' out)
    t0=$(ms)
    /usr/bin/time -q -f "%U %S %e" -o jtime "$LOOM" join "$addr" --role server --servers 2 \
        --workers 2 -- "$LOOM" "${train[@]}" >srv.out 2>&1 &
    local joiner=$!
    until grep -q 'served its first pull' srv.out; do
        kill -0 "$joiner" 2>/dev/null || break
        sleep 0.02
    done
    t_pull=$(ms)
    grep -q '^\[scheduler\] warning: server 1 took its ranges back' out || wait_for out \
        '^\[scheduler\] warning: server 1 took its ranges back'
    t_back=$(ms)
    wait_for out "^\[scheduler\] info: parts: epoch $((LEAVE_AFTER - 1)) over" || true
    t_term=$(ms)
    pkill -TERM -P "$joiner" # the server, not /usr/bin/time
    wait_for out '^\[scheduler\] warning: server 1 left the running job' || true
    t_left=$(ms)
    wait "$joiner"
    jrc=$?
    wait "$launcher"
    rc=$?
    ((rc == 0 && jrc == 0)) || { tail -n 5 out srv.out >&2; }
    read -r user sys wall <job.time
    read -r juser jsys _ <jtime
    bytes=$(sed -n 's/.*served its first pull: \([0-9]*\) bytes received.*/\1/p' srv.out)
    nnz=$(awk '/^\[worker 0\] epoch +[0-9]+ / { for (i = 1; i < NF; i++) if ($i == "nnz") n = $(i + 1) } END { print n }' out)
    # Worker 0's epoch ends (seconds since its start) and the epochs in which
    # the join was handed back and the leave happened, by the scheduler's
    # order of lines: the epoch a line falls in is 1 + the epochs over before it.
    local e_back e_left
    e_back=$(awk '/parts: epoch [0-9]+ over/ { e++ } /server 1 took its ranges back/ { print e + 1; exit }' out)
    e_left=$(awk '/parts: epoch [0-9]+ over/ { e++ } /server 1 left the running job/ { print e + 1; exit }' out)
    local epochs
    epochs=$(awk -v jb="$JOIN_AFTER" -v hb="$e_back" -v lf="$e_left" '
        /^\[worker 0\] epoch +[0-9]+ / { t[$4 + 0] = $(NF - 1); last = $4 + 0 }
        END {
            prev = 0
            for (e = 1; e <= last; e++) {
                d = t[e] - prev; prev = t[e]
                if (e <= jb) k = "1 server"
                else if (e <= hb) k = "joining"
                else if (e < lf) k = "2 servers"
                else if (e == lf) k = "leaving"
                else k = "1 server again"
                s[k] += d; n[k]++
                if (!(k in seen)) { seen[k] = 1; order[++no] = k }
            }
            for (i = 1; i <= no; i++) {
                sep = i > 1 ? ", " : ""
                printf "%s%s %.2f s x%d", sep, order[i], s[order[i]] / n[order[i]], n[order[i]]
            }
        }' out)
    printf "status %d/%d  join -> first pull %d ms (ranges back %d ms)  bytes %s for %s rows (%.2f MB of keys and values: x%.2f)  leave %d ms  cpu %.2f s  wall %.2f s\n  epochs (mean s each): %s\n" \
        "$rc" "$jrc" $((t_pull - t0)) $((t_back - t0)) "$bytes" "$nnz" \
        "$(echo "$nnz * 16 / 1000000" | bc -l)" "$(echo "$bytes / ($nnz * 16)" | bc -l)" \
        $((t_left - t_term)) "$(echo "$user + $sys + $juser + $jsys" | bc)" "$wall" "$epochs"
}

echo "# $(bench_machine); load $(bench_load); loom $(bench_head "$(dirname "$0")/..")"
for ((r = 1; r <= REPS; r++)); do job; done
echo "# load after: $(bench_load)"
