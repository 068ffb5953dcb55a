#!/usr/bin/env bash
# LR with a replacement server in a resumed job (docs/FAULTS.md, "Checkpoints
# with replicas"): `loom train lr --replicas 1` (3 servers, 2 workers, SSP)
# runs once undisturbed; then once with --checkpoint-dir, every process killed
# (SIGKILL) after its second epoch; then resumed from that directory with
# `--resume` and --on-server-failure restart, server 1 killed (SIGKILL) once
# the resumed job has committed a checkpoint of its own (so the directory's
# newest checkpoint is no longer the one it resumed from), and replaced. The
# resumed run must finish with exit status 0 and a final training objective
# within 1% of the undisturbed run's, its newest checkpoint must be newer than
# the newest when the replacement was back and name a part of server 1 (the
# replacement's), and pass `loom checkpoint verify`.
#
# With "restart" as a second argument the resume is a whole-job restart
# instead: one run with --on-worker-failure restart and --on-server-failure
# restart loses worker 1 (SIGKILL) after its second epoch, `loom run` starts
# the job again from its newest checkpoint, and server 1 of the restarted job
# is killed and replaced as above; the same checks follow.
#
# Heartbeats every 250 ms, dead after 2 s of silence.
# Usage: test_rejoin_resumed_lr.sh LOOM [restart]
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/ft.sh
source "$(dirname "$0")/../lib/ft.sh" # newest, wait_for, within_1pct, replacement_part_after
LOOM=${1:?usage: $0 LOOM}
MODE=${2:-resume}
work_setup ft-rejoin-resumed
cd "$WORK" || exit 1
export LOOM_HEARTBEAT_MS=250 LOOM_HEARTBEAT_TIMEOUT_MS=2000

run gen lr --out data --rows 20000 --features 5000 --nnz 10 --quiet
[[ $RC == 0 ]] || fail "gen lr: exit status $RC"
# 50 clocks an epoch per worker; long enough (about 4 s undisturbed on a quiet
# 2-core machine, each death stopping it for the 2 s until it is declared) for
# a kill, a resume, a death and a rejoin.
EPOCHS=40
ARGS=(train lr --train data --servers 3 --workers 2 --epochs "$EPOCHS" --minibatch 200
    --consistency ssp:1 --insecure --no-status --replicas 1)
CKPT=(--checkpoint-dir ck --checkpoint-every 20)

final_objective() { sed -n "s/.*epoch *$EPOCHS  objective \([0-9.]*\).*/\1/p" "$1"; }

run "${ARGS[@]}"
[[ $RC == 0 ]] || fail "undisturbed run: exit status $RC"
ref=$(final_objective err)
[[ -n $ref ]] || fail "undisturbed run printed no objective for epoch $EPOCHS"

# wait_newer C WHAT: until a checkpoint newer than clock C is committed in ck.
wait_newer() {
    local deadline=$((SECONDS + 120))
    while (($(newest ck) <= $1)); do
        ((SECONDS < deadline)) || fail "no checkpoint committed $2 within 120 s"
        kill -0 "$launcher" 2>/dev/null || fail "the job ended before a checkpoint $2"
        poll_pause 0.05 # a poll, not a synchronisation: the condition is the manifests
    done
}


if [[ $MODE == restart ]]; then
    # One launcher: worker 1 killed after epoch 2, the job restarted from its newest checkpoint.
    "$LOOM" "${ARGS[@]}" "${CKPT[@]}" --on-worker-failure restart --on-server-failure restart \
        >job.out 2>job.err &
    launcher=$!
    wait_for job.err "epoch   2 " "epoch 2"
    wait_newer 0 "before worker 1 is killed"
    pid=$(role_pid worker 1) || fail "worker 1 of the job not found"
    kill -KILL "$pid"
    started="restart 1 of [0-9]*: the job starts again from its checkpoint at clock"
    wait_for job.err "$started [0-9]*" "restart after worker 1's death"
    from=$(sed -n "s/.*$started \([0-9]*\).*/\1/p" job.err)
else
    # The first run, killed whole after its second epoch; then resumed with --resume.
    "$LOOM" "${ARGS[@]}" "${CKPT[@]}" >first.out 2>first.err &
    launcher=$!
    wait_for first.err "epoch   2 " "epoch 2 of the first run"
    wait_newer 0 "in the first run"
    # shellcheck disable=SC2046 # one pid a word
    kill_gone $(pgrep -P "$launcher") "$launcher"
    wait "$launcher" 2>/dev/null
    launcher=
    from=$(newest ck)
    grep -q "epoch *$EPOCHS  objective" first.err && fail "the first run finished before it was killed"
    "$LOOM" "${ARGS[@]}" "${CKPT[@]}" --resume ck --on-server-failure restart >job.out 2>job.err &
    launcher=$!
fi

# Server 1 of the resumed job killed once the directory has moved on from $from.
wait_newer "$from" "after the resume from clock $from"
kill_server 1
wait_for job.err "server 1 rejoined: it holds full copies of its ranges again" "rejoin of server 1"
back=$(newest ck)
wait "$launcher"
status=$?
launcher=
[[ $status == 0 ]] || fail "the resumed run that lost server 1 exited with status $status: $(tail -5 job.err)"
[[ $MODE != restart ]] || grep -q "the job finished after 1 restart(s)" job.err ||
    fail "loom run did not say the job finished after one restart"
got=$(final_objective job.err)
[[ -n $got ]] || fail "the resumed run printed no objective for epoch $EPOCHS"
replacement_part_after "$back"
last=$LAST
echo "resumed at clock $from; the replacement back after clock $back; newest checkpoint at clock $last"
echo "final objective: undisturbed $ref, resumed and server 1 replaced $got"
within_1pct "$ref" "$got"
echo "PASS"
