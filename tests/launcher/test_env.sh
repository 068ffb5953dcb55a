#!/usr/bin/env bash
# a) The environment contract: one scheduler, S servers, W workers, each with
# its role, rank, the job's size and the address the scheduler published; the
# address fd reaches the scheduler only; flags and inherited LOOM_* pass through;
# one random job token per job (the caller's, if set).
# shellcheck source-path=SCRIPTDIR source=../lib/launcher.sh
source "$(dirname "$0")/../lib/launcher.sh"

out=$WORK/out
export FAKE_PORT=$((20000 + RANDOM % 40000))
export LOOM_TEST_INHERITED=yes
run_loom run --servers 2 --workers 3 --heartbeat-timeout 7777 --verbose -- bash "$NODE" env a1 "two words"
expect_rc 0

count() { grep -cE -- "$1" "$out"; }
[[ $(count '^\[scheduler\] role=') == 1 ]] || fail "expected 1 scheduler"
[[ $(count '^\[server [0-9]+\] role=') == 2 ]] || fail "expected 2 servers"
[[ $(count '^\[worker [0-9]+\] role=') == 3 ]] || fail "expected 3 workers"
[[ $(count '\] extra=7777,1,yes$') == 6 ]] || fail "flags or inherited LOOM_* not seen by all 6"
[[ $(count '\] address_fd=.* args=env a1 two words$') == 6 ]] || fail "PROGRAM's arguments not passed to all 6"

expect_line "$out" "[scheduler] role=scheduler rank=0 servers=2 workers=3 scheduler=127.0.0.1:0 bind=127.0.0.1"
for rank in 0 1; do
    expect_line "$out" "[server $rank] role=server rank=$rank servers=2 workers=3 scheduler=127.0.0.1:$FAKE_PORT bind=127.0.0.1"
done
for rank in 0 1 2; do
    expect_line "$out" "[worker $rank] role=worker rank=$rank servers=2 workers=3 scheduler=127.0.0.1:$FAKE_PORT bind=127.0.0.1"
done

# The scheduler holds exactly the address fd; the others hold no extra fd.
fd=$(sed -n 's/^\[scheduler\] address_fd=\([0-9][0-9]*\) .*/\1/p' "$out")
[[ -n $fd ]] || fail "scheduler got no LOOM_ADDRESS_FD"
expect_line "$out" "[scheduler] fds=$fd"
[[ $(count '^\[(server|worker) [0-9]+\] address_fd=unset ') == 5 ]] || fail "LOOM_ADDRESS_FD leaked"
[[ $(count '^\[(server|worker) [0-9]+\] fds=$') == 5 ]] || fail "fds leaked into servers or workers"
expect_no_survivors 6
# One job token for the whole job: 32 hex digits, new for every job.
token=$(sed -n 's/^\[scheduler\] token=//p' "$out")
[[ $token =~ ^[0-9a-f]{32}$ ]] || fail "no random job token: '$token'"
[[ $(count "^\[(scheduler|server [0-9]+|worker [0-9]+)\] token=$token\$") == 6 ]] ||
    fail "not every process got the job's token"

# Defaults, --bind, and variables the launcher always sets overriding stale ones.
clean_pid_dir
export LOOM_VERBOSE=2 LOOM_ROLE=bogus LOOM_ADDRESS_FD=9
unset LOOM_TEST_INHERITED
run_loom run --bind 127.0.0.2 bash "$NODE" env
expect_rc 0
expect_line "$out" "[scheduler] role=scheduler rank=0 servers=1 workers=2 scheduler=127.0.0.2:0 bind=127.0.0.2"
expect_line "$out" "[server 0] role=server rank=0 servers=1 workers=2 scheduler=127.0.0.1:$FAKE_PORT bind=127.0.0.2"
expect_line "$out" "[worker 1] role=worker rank=1 servers=1 workers=2 scheduler=127.0.0.1:$FAKE_PORT bind=127.0.0.2"
[[ $(count '\] extra=unset,2,unset$') == 4 ]] || fail "defaults: unexpected LOOM_HEARTBEAT_TIMEOUT_MS/LOOM_VERBOSE"
[[ $(count '^\[(server|worker) [0-9]+\] address_fd=unset ') == 3 ]] || fail "inherited LOOM_ADDRESS_FD not removed"
second=$(sed -n 's/^\[scheduler\] token=//p' "$out")
[[ $second =~ ^[0-9a-f]{32}$ && $second != "$token" ]] || fail "the second job got no token of its own"
expect_no_survivors 4

# A job token the caller chose is kept.
clean_pid_dir
LOOM_JOB_TOKEN=my-own-token run_loom run bash "$NODE" env
expect_rc 0
[[ $(count '\] token=my-own-token$') == 4 ]] || fail "the caller's LOOM_JOB_TOKEN was replaced"
expect_no_survivors 4
echo PASS
