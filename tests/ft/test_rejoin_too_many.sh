#!/usr/bin/env bash
# More deaths than replicas under --on-server-failure restart (docs/LAUNCHING.md,
# "Failures, signals, timeouts"): `loom train lr --servers 3 --replicas 1
# --on-server-failure restart` loses servers 1 and 2 at the same moment
# (SIGKILL), one more than its replicas cover, so the scheduler gives up once
# their heartbeats stop (2 s). The launcher must then start no replacement
# and stop the ones it already started: before the fix they waited out their
# 60 s connect timeout, and the summary blamed one of them ("failed: server 2
# exited with status 1"). The job must end with a non-zero status within
# the test's own bound (timeout 30, far below the connect timeout; status 124
# is a failure), its summary must name both deaths and the replicas, and no
# process of the job may outlive it. Usage: test_rejoin_too_many.sh LOOM
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/ft.sh
source "$(dirname "$0")/../lib/ft.sh" # wait_for
LOOM=${1:?usage: $0 LOOM}
work_setup ft-rejoin-too-many
cd "$WORK" || exit 1
export LOOM_HEARTBEAT_MS=250 LOOM_HEARTBEAT_TIMEOUT_MS=2000

run gen lr --out data --rows 20000 --features 1000 --nnz 8 --quiet
[[ $RC == 0 ]] || fail "gen lr: exit status $RC"

# Far more epochs than the job lives: it must end because of the deaths.
timeout 30 "$LOOM" train lr --train data --servers 3 --workers 2 --epochs 100000 --insecure \
    --no-status --replicas 1 --on-server-failure restart >job.out 2>job.err &
bounded=$!
# `loom train` is timeout's child; its children are the job (role_pid).
until launcher=$(pgrep -P "$bounded"); do
    kill -0 "$bounded" 2>/dev/null || fail "the job ended before it started: $(tail -5 job.err)"
    poll_pause 0.05 # a poll, not a synchronisation: the condition is the process
done
wait_for job.err "epoch   1 " "epoch 1"
s1=$(role_pid server 1) || fail "server 1 of the job not found"
s2=$(role_pid server 2) || fail "server 2 of the job not found"
others=$(pgrep -P "$launcher")
kill -KILL "$s1" "$s2" # one kill: the same moment
wait "$bounded"
status=$?
launcher=
[[ $status != 124 ]] || fail "the job did not end within 30 s of its start: $(tail -5 job.err)"
[[ $status != 0 ]] || fail "the job exited 0 although it lost two servers with --replicas 1"
summary=$(grep "^loom run: failed:" job.err)
echo "exit status $status; $summary"
grep -q "more servers died than LOOM_REPLICAS=1 allows" job.err ||
    fail "the scheduler did not say that more servers died than the replicas allow"
[[ $summary == *"2 servers died before their replacements were back, more than LOOM_REPLICAS=1"* &&
    $summary == *"server 1 was killed by signal 9"* &&
    $summary == *"server 2 was killed by signal 9"* ]] ||
    fail "the summary does not name the two deaths: $summary"
bad=$(grep -E "^loom run: (also )?failed: server [12] exited" job.err)
[[ -z $bad ]] || fail "the summary blames a replacement: $bad"
for pid in $others; do
    kill -0 "$pid" 2>/dev/null && fail "process $pid of the job outlived it"
done
echo "PASS"
