#!/usr/bin/env bash
# A replacement server and checkpoints together (docs/FAULTS.md, "Checkpoints
# with replicas"): a job of 3 servers and 3 workers with --replicas 1 and
# --on-server-failure restart pushes known int64 deltas into a sum table and
# checkpoints every 5 clocks. Once every worker has passed clock 30, server 1
# is killed (SIGKILL): the launcher starts a replacement, which joins, gets
# full copies of its ranges and is back. Once two checkpoints newer than the
# newest committed when it was back are committed, every process of the job
# is killed at once. Then: every committed checkpoint holds, for every key,
# exactly the pushes of the clocks before its clock (failover_check check:
# computed by the test, not by the job), and `--resume` (LOOM_RESUME) with
# all three servers on the original ring completes the job with every key
# exact. Heartbeats every 250 ms, a node declared dead after 2 s of silence.
#
# With "moved" as a fourth argument, server 2 is killed too once those two
# checkpoints are committed, and replaced in turn: with one replica, a range
# held by servers 2 and 1 alone has server 1's replacement as its master after
# that death, and keeps it when server 2's replacement comes back (it came
# back first: ring.h). Two more checkpoints must be committed after that
# return, every committed checkpoint must be exactly its cut, and the resume
# from the newest must end exact. (When the master rule took the first BACK
# holder in ring order, that return moved the range on the servers but not on
# the workers, and committed checkpoints missed pushes of that range.)
#
# With "resumed" as a fourth argument, the job above is itself a resumed job:
# a first run is killed once a checkpoint at clock 30 or later is committed,
# and the job resumes from it (LOOM_RESUME) before anything above happens.
# Server 1 is killed only once two checkpoints of the resumed job are
# committed, so that the directory's newest checkpoint is no longer the one
# the job resumed from: the replacement must name its parts by the job's
# clocks all the same (the scheduler tells it where they start: CKPT_BASE),
# and take no rows from the directory. Server 2 is then killed and replaced as
# with "moved", which makes server 1's replacement the master of the ranges
# held by servers 2 and 1 alone: its parts then hold rows, so a part named by
# another clock than its cut would make a checkpoint inexact. (Before, the
# scheduler of a resumed job stopped committing once a server was replaced.)
# Usage: test_rejoin_ckpt.sh LOOM FAILOVER_CHECK bsp|ssp|asp [moved|resumed]
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh" "$1" "$2"
# shellcheck source-path=SCRIPTDIR source=../lib/ft.sh
source "$(dirname "$0")/../lib/ft.sh" # newest
MODE=${3:?mode}
SECOND=${4:-}
CLOCKS=1200
CK=$WORK/ck


job() { # job PID_DIR OUT [VAR=VALUE...]: the job under `loom run`, in the background
    local pids=$1 out=$2
    shift 2
    env "$@" LOOM_REPLICAS=1 LOOM_HEARTBEAT_MS=250 LOOM_CHECKPOINT_DIR="$CK" LOOM_CHECKPOINT_EVERY=5 \
        LOOM_VERBOSE="${VERBOSE:-0}" "$LOOM" run --servers 3 --workers 3 --on-failure wait \
        --on-server-failure restart --heartbeat-timeout 2000 --timeout 240 --insecure --no-status \
        -- "$PS_CHECK" "$MODE" --pid-dir "$pids" --clocks $CLOCKS --pace-ms 10 >"$out" 2>&1 &
    launcher=$!
    BG_PIDS+=("$launcher")
}

# kill_job: SIGKILL every process of the job at once and wait until they are gone.
kill_job() {
    # The newest checkpoint is known once every process is gone.
    # shellcheck disable=SC2046 # one pid a word
    kill_gone $(cat "$PIDS"/*.pid) "$launcher"
    wait "$launcher" 2>/dev/null
}

# commits_after C: how many committed checkpoints are newer than clock C.
commits_after() {
    local m c n=0
    for m in "$CK"/ckpt-*/MANIFEST; do
        [[ -e $m ]] || continue
        c=${m#"$CK"/ckpt-}
        c=${c%%/*}
        ((10#$c > $1)) && n=$((n + 1))
    done
    echo "$n"
}
# wait_commits C WHAT: until two checkpoints newer than clock C are committed.
wait_commits() {
    local deadline=$((SECONDS + 120))
    while (($(commits_after "$1") < 2)); do
        kill -0 "$launcher" 2>/dev/null || fail "the job ended with fewer than 2 checkpoints committed $2"
        ((SECONDS < deadline)) || fail "fewer than 2 checkpoints committed $2 within 120 s (newest: $(newest "$CK"))"
        poll_pause 0.05 # a poll, not a synchronisation: the condition is the manifests
    done
}
RESUMED=()
if [[ $SECOND == resumed ]]; then
    job "$PIDS" "$WORK/first.out"
    deadline=$((SECONDS + 120))
    while (($(newest "$CK") < 30)); do
        kill -0 "$launcher" 2>/dev/null || fail "the first run ended before a checkpoint at clock 30"
        ((SECONDS < deadline)) || fail "no checkpoint at clock 30 or later within 120 s"
        poll_pause 0.05 # a poll, not a synchronisation: the condition is the manifests
    done
    kill_job
    rm "$PIDS"/*.pid
    from=$(newest "$CK")
    echo "the first run was killed after the checkpoint at clock $from"
    RESUMED=(LOOM_RESUME="$CK")
    VERBOSE=1 # the log says which servers restored rows, and what the replacement was told
fi
job "$PIDS" "$WORK/job.out" "${RESUMED[@]}"
wait_for_files 7 30
if [[ $SECOND == resumed ]]; then
    for w in 0 1 2; do
        wait_for_lines "$WORK/job.out" "^\[worker $w\] worker $w resumed at clock $from$" 1 60 "$launcher"
    done
    wait_commits "$from" "after the resume (from clock $from)"
else
    for w in 0 1 2; do wait_for_lines "$WORK/job.out" "^\[worker $w\] worker $w clock 30$" 1 60 "$launcher"; done
fi
old=$(<"$PIDS/server-1.pid")
kill -KILL "$old"
wait_for_lines "$WORK/job.out" "server 1 rejoined: it holds full copies of its ranges again" 1 120 "$launcher"
[[ $(<"$PIDS/server-1.pid") != "$old" ]] || fail "no replacement wrote its pid file"
back=$(newest "$CK")
wait_commits "$back" "after the replacement was back (at clock $back)"
if [[ $SECOND == moved || $SECOND == resumed ]]; then
    old=$(<"$PIDS/server-2.pid")
    kill -KILL "$old"
    wait_for_lines "$WORK/job.out" "server 2 rejoined: it holds full copies of its ranges again" 1 120 "$launcher"
    back=$(newest "$CK")
    wait_commits "$back" "after the second replacement was back (at clock $back)"
fi
kill_job
last=$(newest "$CK")
# Its newest manifest names a part of server 1 of its own clock: the replacement's.
grep -q "^part server 1 full ckpt-$(printf %012d "$last")/server-1.part " \
    "$CK/ckpt-$(printf %012d "$last")/MANIFEST" ||
    fail "the checkpoint at clock $last has no part written by server 1's replacement"
grep -q "all 1000 keys exact" "$WORK/job.out" && fail "the job finished before it was killed: make it longer"
if [[ $SECOND == resumed ]]; then
    # Every original server read the directory and restored the table, the
    # replacement neither (LOOM_REJOIN=1); it was told the job's clock.
    for s in 0 1 2; do
        n=$(grep -c "^\[server $s\] .*resuming from $CK at clock $from$" "$WORK/job.out")
        ((n == 1)) || fail "server $s read the checkpoint directory $n times, not once (the replacement must not)"
        n=$(grep -c "^\[server $s\] .*table \"failover\" restored from the checkpoint at clock $from$" "$WORK/job.out")
        ((n == 1)) || fail "server $s restored the table $n times, not once (the replacement must not)"
    done
    grep -q "^\[server 1\] .*the job resumed at clock $from: this replacement's checkpoint parts" "$WORK/job.out" ||
        fail "the replacement did not learn the clock the job resumed at ($from)"
fi
echo "killed after the checkpoint at clock $last (the replacement was back after clock $back)"
grep -E "rejoined:|skipped|dropped" "$WORK/job.out" | head -12

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
