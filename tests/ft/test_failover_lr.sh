#!/usr/bin/env bash
# LR survives a server's death with --replicas 1 (docs/FAULTS.md): the same
# `loom train lr` (3 servers, 2 workers, SSP) runs once undisturbed and once
# with server 1 killed (SIGKILL) after the first epoch; the second run must
# finish with exit status 0 and a final training objective within 1% of the
# undisturbed run's (SSP runs differ a little from run to run anyway; a lost
# or doubled minibatch gradient of a whole range would not stay that close
# without the failover; without replicas the job ends with a failure, which
# the test also checks). Heartbeats every 250 ms, dead after 2 s of silence.
# Usage: test_failover_lr.sh LOOM
set -u
# shellcheck source-path=SCRIPTDIR source=../cli_lib.sh
source "$(dirname "$0")/../cli_lib.sh"
LOOM=${1:?usage: $0 LOOM}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/loom-ft-failover.XXXXXX")
JOB=
cleanup() {
    if [[ -n $JOB ]]; then
        pkill -KILL -P "$JOB" 2>/dev/null
        kill -KILL "$JOB" 2>/dev/null
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK" || exit 1
export LOOM_HEARTBEAT_MS=250 LOOM_HEARTBEAT_TIMEOUT_MS=2000

run gen lr --out data --rows 20000 --features 5000 --nnz 10 --quiet
[[ $RC == 0 ]] || fail "gen lr: exit status $RC"
ARGS=(train lr --train data --servers 3 --workers 2 --epochs 8 --minibatch 100
    --consistency ssp:1 --insecure --no-status)

final_objective() { sed -n 's/.*epoch   8  objective \([0-9.]*\).*/\1/p' "$1"; }

run "${ARGS[@]}" --replicas 1
[[ $RC == 0 ]] || fail "undisturbed run: exit status $RC"
ref=$(final_objective err)
[[ -n $ref ]] || fail "undisturbed run printed no objective for epoch 8"

# kill_server_1 LOG: once LOG (a stderr) shows epoch 1, SIGKILL the job's server 1.
kill_server_1() {
    local deadline=$((SECONDS + 60)) c
    until grep -q "epoch   1 " "$1"; do
        ((SECONDS < deadline)) || fail "no epoch 1 within 60 s"
        kill -0 "$JOB" 2>/dev/null || fail "the job ended before epoch 1"
        sleep 0.05
    done
    for c in $(pgrep -P "$JOB"); do
        if tr '\0' '\n' <"/proc/$c/environ" 2>/dev/null | grep -qx LOOM_ROLE=server &&
            tr '\0' '\n' <"/proc/$c/environ" | grep -qx LOOM_RANK=1; then
            kill -KILL "$c"
            return 0
        fi
    done
    fail "server 1 of the job not found"
}

"$LOOM" "${ARGS[@]}" --replicas 1 >killed.out 2>killed.err &
JOB=$!
kill_server_1 killed.err
wait "$JOB"
status=$?
JOB=
[[ $status == 0 ]] || fail "the run that lost server 1 exited with status $status: $(tail -5 killed.err)"
grep -q "the job goes on without it" killed.err || fail "nobody said the job went on without server 1"
got=$(final_objective killed.err)
[[ -n $got ]] || fail "the run that lost server 1 printed no objective for epoch 8"
echo "final objective: undisturbed $ref, server 1 killed $got"
awk -v a="$ref" -v b="$got" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01 * a) }' ||
    fail "objective $got is not within 1% of $ref"

# Without replicas the same kill ends the job (status 3), as before.
"$LOOM" "${ARGS[@]}" >plain.out 2>plain.err &
JOB=$!
kill_server_1 plain.err
wait "$JOB"
status=$?
JOB=
[[ $status != 0 ]] || fail "without replicas the job survived a dead server"
echo "without replicas: exit status $status"
echo "PASS"
