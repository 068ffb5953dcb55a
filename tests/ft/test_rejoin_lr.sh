#!/usr/bin/env bash
# LR with a replacement server (docs/FAULTS.md, "A replacement server"): the
# same `loom train lr --replicas 1` (3 servers, 2 workers, SSP) runs once
# undisturbed and once with --on-server-failure restart, server 1 killed
# (SIGKILL) after the first epoch, its replacement joining and getting full
# copies of its ranges, and then server 2 killed after one more epoch (with
# one replica, the ranges held by servers 1 and 2 alone then live on only in
# the replacement). The second run must finish with exit status 0 and a final
# training objective within 1% of the undisturbed run's. Heartbeats every
# 250 ms, dead after 2 s of silence. With `dbpg`, the job runs --algo dbpg
# --l1 (whose tables' pushes and pulls go through a key cache per link, which
# the workers must start afresh with the replacement, now master of its
# ranges again after its handback). Usage: test_rejoin_lr.sh LOOM [dbpg]
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/ft.sh
source "$(dirname "$0")/../lib/ft.sh" # wait_for, within_1pct
LOOM=${1:?usage: $0 LOOM [dbpg]}
work_setup ft-rejoin
cd "$WORK" || exit 1
export LOOM_HEARTBEAT_MS=250 LOOM_HEARTBEAT_TIMEOUT_MS=2000

run gen lr --out data --rows 20000 --features 5000 --nnz 10 --quiet
[[ $RC == 0 ]] || fail "gen lr: exit status $RC"
# A replacement copies its ranges from replicas: without them, refused.
run train lr --train data --servers 3 --workers 2 --on-server-failure restart
[[ $RC == 2 ]] || fail "--on-server-failure restart without --replicas: exit status $RC, not 2"
grep -q -- "--on-server-failure restart needs --replicas 1 or more" err ||
    fail "--on-server-failure restart without --replicas: no message saying why"
# Long enough (about 4 s undisturbed on a quiet 2-core machine, 50 clocks an
# epoch per worker; each death stops the job for the 2 s until it is
# declared) for two deaths and a rejoin.
EPOCHS=40
ARGS=(train lr --train data --servers 3 --workers 2 --epochs $EPOCHS --insecure --no-status
    --replicas 1)
if [[ ${2:-} == dbpg ]]; then
    ARGS+=(--algo dbpg --l1 0.001)
else
    ARGS+=(--minibatch 200 --consistency ssp:1)
fi

final_objective() { sed -n "s/.*epoch *$EPOCHS  objective \([0-9.]*\).*/\1/p" "$1"; }
epochs_done() { grep -c "epoch *[0-9]*  objective" "$1"; }

run "${ARGS[@]}"
[[ $RC == 0 ]] || fail "undisturbed run: exit status $RC"
ref=$(final_objective err)
[[ -n $ref ]] || fail "undisturbed run printed no objective for epoch $EPOCHS"


"$LOOM" "${ARGS[@]}" --on-server-failure restart >killed.out 2>killed.err &
launcher=$!
wait_for killed.err "epoch   1 " "epoch 1"
kill_server 1
wait_for killed.err "server 1 rejoined: it holds full copies of its ranges again" "rejoin of server 1"
next=$(($(epochs_done killed.err) + 1))
wait_for killed.err "epoch *$next  objective" "epoch $next after the rejoin"
kill_server 2
wait "$launcher"
status=$?
launcher=
[[ $status == 0 ]] || fail "the run that lost servers 1 and 2 exited with status $status: $(tail -5 killed.err)"
grep -q "server 2 (node [0-9]*) died: .*the job goes on without it" killed.err ||
    fail "nobody said the job went on without server 2"
got=$(final_objective killed.err)
[[ -n $got ]] || fail "the run that lost servers 1 and 2 printed no objective for epoch $EPOCHS"
echo "final objective: undisturbed $ref, servers 1 and 2 killed (1 replaced) $got"
within_1pct "$ref" "$got"
echo "PASS"
