#!/usr/bin/env bash
# Replicas and checkpoints together (docs/FAULTS.md): a job of 3 servers and
# 3 workers with --replicas 1 pushes known int64 deltas into a sum table and
# checkpoints every 5 clocks. Once every worker has passed clock 30, server 1
# is killed (SIGKILL): the job goes on, and its checkpoints go on being
# committed, server 1's ranges written by the servers that took them over
# (the manifest says "moved 1"). Once two such checkpoints are committed,
# every process of the job is killed at once. Then: every committed checkpoint
# holds, for every key, exactly the pushes of the clocks before its clock
# (failover_check check: computed by the test, not by the job), and `--resume`
# (LOOM_RESUME) with all three servers back on the original ring completes the
# job with every key exact. Heartbeats every 250 ms, a node declared dead
# after 2 s of silence. Usage:
#   test_failover_ckpt.sh LOOM FAILOVER_CHECK bsp|ssp|asp
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh" "$1" "$2"
# shellcheck source-path=SCRIPTDIR source=../lib/ft.sh
source "$(dirname "$0")/../lib/ft.sh" # newest
MODE=${3:?mode}
CLOCKS=600
CK=$WORK/ck


job() { # job PID_DIR OUT [VAR=VALUE...]: the job under `loom run`, in the background
    local pids=$1 out=$2
    shift 2
    env "$@" LOOM_REPLICAS=1 LOOM_HEARTBEAT_MS=250 LOOM_CHECKPOINT_DIR="$CK" LOOM_CHECKPOINT_EVERY=5 \
        LOOM_VERBOSE="${VERBOSE:-0}" "$LOOM" run --servers 3 --workers 3 --on-failure wait \
        --heartbeat-timeout 2000 --timeout 240 --insecure --no-status \
        -- "$PS_CHECK" "$MODE" --pid-dir "$pids" --clocks $CLOCKS --pace-ms 10 >"$out" 2>&1 &
    launcher=$!
    BG_PIDS+=("$launcher")
}

job "$PIDS" "$WORK/job.out"
wait_for_files 7 30
for w in 0 1 2; do wait_for_lines "$WORK/job.out" "^\[worker $w\] worker $w clock 30$" 1 60 "$launcher"; done
kill -KILL "$(<"$PIDS/server-1.pid")"
wait_for_lines "$WORK/job.out" "server 1 \(node [0-9]*\) died: no heartbeat.*the job goes on without it" 1 60 "$launcher"

# Two checkpoints committed after the failover (their manifests name server 1 as moved).
deadline=$((SECONDS + 120))
moved=0
while ((moved < 2)) && kill -0 "$launcher" 2>/dev/null && ((SECONDS < deadline)); do
    moved=$(grep -lx "moved 1" "$CK"/ckpt-*/MANIFEST 2>/dev/null | wc -l)
    poll_pause 0.05 # a poll, not a synchronisation: the condition is the manifests
done
# The newest checkpoint is known once every process is gone.
# shellcheck disable=SC2046 # one pid a word
kill_gone $(cat "$PIDS"/*.pid) "$launcher"
wait "$launcher" 2>/dev/null
last=$(newest "$CK")
((moved >= 2)) || fail "fewer than 2 checkpoints committed after the failover (newest: $last)"
grep -q "all 1000 keys exact" "$WORK/job.out" && fail "the job finished before it was killed: make it longer"
echo "killed after the checkpoint at clock $last ($moved committed after the failover)"

"$PS_CHECK" check "$CK" 3 || fail "a committed checkpoint is not exactly its cut"
"$LOOM" checkpoint verify "$CK" || fail "loom checkpoint verify refused the newest checkpoint"

# Resume with every server alive: the job completes from the newest checkpoint, exactly.
mkdir "$WORK/pids2"
job "$WORK/pids2" "$WORK/resume.out" LOOM_RESUME="$CK"
wait "$launcher"
status=$?
for w in 0 1 2; do
    grep -q "^\[worker $w\] worker $w resumed at clock $last$" "$WORK/resume.out" ||
        fail "resumed worker $w did not start from the checkpoint at clock $last"
done
for w in 0 1 2; do
    grep -q "^\[worker $w\] worker $w: $CLOCKS clocks, all 1000 keys exact" "$WORK/resume.out" ||
        fail "resumed worker $w did not end with every key exact"
done
((status == 0)) || fail "the resumed job exited with status $status"
"$PS_CHECK" check "$CK" 3 || fail "a checkpoint of the resumed job is not exactly its cut"
echo "PASS"
