#!/usr/bin/env bash
# A server's leave as a fenced handover against the failover leave (issue 30,
# item 4; docs/ELASTIC.md, docs/BENCHMARKS.md). The job of
# bench/run_elastic_servers.sh: `loom gen lr` data (ROWS rows of FEATURES
# features, 20 per row), `loom run --servers 1 --max-servers 2 --workers 2`,
# lr with --data-parts 16, --replicas 1, CONSISTENCY (ssp:2), EPOCHS epochs
# (6). A server joins once epoch 1 is over and takes its ranges back; once
# epoch LEAVE_AFTER (3) is over it gets SIGTERM and leaves. The same job
# runs with BUILD_DIR's loom (the fenced handover) and BASE_DIR's (a build
# from before it: the failover leave), alternately, REPS times (3) each.
# Per job:
#   leave ms       from SIGTERM to the server's exit (polled every 5 ms)
#   resent         pushes the workers sent again because the leaving server
#                  had not reported them replicated (failover: "server 1
#                  died: N pushes ... sent again")
#   redirected     pushes it had parked or not applied, sent to the new
#                  masters (fenced: "N pushes it had not applied")
#   again          pushes that reached a new master before it heard of the
#                  leave, parked there and sent once more ("sent N parked
#                  pushes", logged after the SIGTERM; either leave)
#   fence bytes    what the leaving server's last replication round sent
#                  after its fence (its log line; none in a failover leave)
#   cpu            user + sys of the job's and the joiner's processes
# The machine may be shared: the load is printed.
#
# Usage: bench/run_fenced_leave.sh BUILD_DIR BASE_DIR
set -u
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "$0")/lib.sh"
BUILD=${1:?usage: $0 BUILD_DIR BASE_DIR}
BASE=${2:?usage: $0 BUILD_DIR BASE_DIR}
bench_need_exe "run_fenced_leave" "" "$BUILD/bin/loom" "$BASE/bin/loom"
EPOCHS=${EPOCHS:-6} REPS=${REPS:-3} ROWS=${ROWS:-100000} FEATURES=${FEATURES:-500000}
LEAVE_AFTER=${LEAVE_AFTER:-3} CONSISTENCY=${CONSISTENCY:-ssp:2}
bench_clear_env
DIR=$(bench_scratch loom-fenced-leave)
trap 'rm -rf "$DIR"' EXIT
cd "$DIR" || exit 1
"$BUILD/bin/loom" gen lr --out data --rows "$ROWS" --features "$FEATURES" --nnz 20 --quiet || exit 1

ms() { date +%s%3N; }

# wait_for FILE PATTERN: until an extended-regex line is in FILE (or the job ended).
wait_for() {
    until grep -Eq "$2" "$1"; do
        kill -0 "$launcher" 2>/dev/null || return 1
        sleep 0.02
    done
}

# job LOOM NAME: one job with that loom; prints its line.
job() {
    local loom=$1 name=$2 rc jrc user sys juser jsys t_term t_exit srv resent redirected again fence
    local from
    local train=(train lr --train data --epochs "$EPOCHS" --minibatch 100 --data-parts 16
        --servers 2 --replicas 1 --consistency "$CONSISTENCY")
    rm -f out srv.out job.time jtime
    export LOOM_JOB_TOKEN=bench-$$ LOOM_VERBOSE=1
    /usr/bin/time -q -f "%U %S %e" -o job.time "$loom" run --servers 1 --max-servers 2 \
        --workers 2 --insecure --no-status -- "$loom" "${train[@]}" >out 2>&1 &
    launcher=$!
    wait_for out "^\[scheduler\] info: parts: epoch 0 over" || return 1
    local addr
    addr=$(sed -n 's/^loom run: scheduler is at //p' out)
    /usr/bin/time -q -f "%U %S %e" -o jtime "$loom" join "$addr" --role server --servers 2 \
        --workers 2 -- "$loom" "${train[@]}" >srv.out 2>&1 &
    local joiner=$!
    wait_for out '^\[scheduler\] warning: server 1 took its ranges back' || return 1
    wait_for out "^\[scheduler\] info: parts: epoch $((LEAVE_AFTER - 1)) over" || return 1
    srv=$(pgrep -P "$joiner") # the server, not /usr/bin/time
    from=$(($(wc -l <out) + 1)) # what the leave logs, not the join's handback
    t_term=$(ms)
    kill -TERM "$srv"
    while kill -0 "$srv" 2>/dev/null; do sleep 0.005; done
    t_exit=$(ms)
    wait "$joiner"
    jrc=$?
    wait "$launcher"
    rc=$?
    ((rc == 0 && jrc == 0)) || { tail -n 5 out srv.out >&2; }
    read -r user sys _ <job.time
    read -r juser jsys _ <jtime
    resent=$(tail -n "+$from" out | sed -n 's/.*server 1 died: \([0-9]*\) pushes.*/\1/p' |
        awk '{s += $1} END {print s + 0}')
    redirected=$(tail -n "+$from" out |
        sed -n 's/.*server 1 left after handing its ranges over: \([0-9]*\) pushes.*/\1/p' |
        awk '{s += $1} END {print s + 0}')
    again=$(tail -n "+$from" out | sed -n 's/.*sent \([0-9]*\) parked pushes.*/\1/p' |
        awk '{s += $1} END {print s + 0}')
    fence=$(sed -n 's/.*(\([0-9]*\) bytes sent since the fence).*/\1/p' srv.out)
    printf "%-8s status %d/%d  leave %5d ms  resent %3d  redirected %3d  again %3d  fence bytes %8s  cpu %6.2f s\n" \
        "$name" "$rc" "$jrc" $((t_exit - t_term)) "$resent" "$redirected" "$again" "${fence:--}" \
        "$(echo "$user + $sys + $juser + $jsys" | bc)"
}

echo "fenced leave vs failover leave: lr $ROWS x $FEATURES, $CONSISTENCY, leave after epoch $LEAVE_AFTER; load: $(uptime | sed 's/.*load average: //')"
for ((i = 0; i < REPS; i++)); do
    job "$BUILD/bin/loom" fenced
    job "$BASE/bin/loom" failover
done
echo "load after: $(uptime | sed 's/.*load average: //')"
