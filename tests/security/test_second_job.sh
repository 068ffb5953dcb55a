#!/usr/bin/env bash
# A second job on the same fixed scheduler port (issue 9, found 3): two jobs
# started by hand with the documented variables, each with its own
# LOOM_JOB_TOKEN. The second job's scheduler cannot bind the port; its server
# and worker reach the first job's scheduler, which must refuse them as nodes
# of another job (they exit non-zero saying so) and go on unharmed. Before the
# token they took over the first job's ranks and killed it.
# shellcheck source-path=SCRIPTDIR source=../lib/security.sh
source "$(dirname "$0")/../lib/security.sh"
port=$("$PS_CHECK" free-port) || fail "no free port"
export LOOM_SCHEDULER=127.0.0.1:$port LOOM_NUM_SERVERS=1 LOOM_NUM_WORKERS=1
start() { # NAME TOKEN ROLE [RANK]: one process of a job, output in $WORK/NAME.out
    LOOM_JOB_TOKEN=$2 LOOM_ROLE=$3 LOOM_RANK=${4:--1} \
        "$PS_CHECK" bsp --clocks 5 --pid-dir "$PIDS" --hold "$WORK/go" >"$WORK/$1.out" 2>&1 &
    BG_PIDS+=($!)
    STARTED=$!
}
start a-sched first-job scheduler 0
a_sched=$STARTED
start a-server first-job server 0
a_server=$STARTED
start a-worker first-job worker 0
a_worker=$STARTED
wait_for_files 3 30 # job A is assembled

# Job B, same port: its processes are not in $PIDS (their ranks' pid files are A's).
for who in "b-sched scheduler 0" "b-server server 0" "b-worker worker 0"; do
    read -r name role rank <<<"$who"
    LOOM_JOB_TOKEN=second-job LOOM_ROLE=$role LOOM_RANK=$rank \
        "$PS_CHECK" bsp --clocks 5 >"$WORK/$name.out" 2>&1 &
    pid=$!
    BG_PIDS+=("$pid")
    wait "$pid" && fail "$name of the second job exited 0"
done
grep -qi "cannot listen" "$WORK/b-sched.out" || fail "the second scheduler did not say why it stopped"
for name in b-server b-worker; do
    grep -q "refused this node: a ${name#b-} of another job: its job token does not match" \
        "$WORK/$name.out" || fail "$name did not say why it was refused"
done
grep -q "refused a node: a worker of another job" "$WORK/a-sched.out" ||
    fail "the first job's scheduler did not log the refusal"

touch "$WORK/go"
for pid in "$a_sched" "$a_server" "$a_worker"; do
    wait "$pid" || fail "a process of the first job exited non-zero"
done
grep -q 'every pull exact' "$WORK/a-worker.out" || fail "the first job's worker did not finish its checks"
echo "PASS"
