#!/usr/bin/env bash
# LR with a replacement server and checkpoints (docs/FAULTS.md, "Checkpoints
# with replicas"): `loom train lr --replicas 1 --on-server-failure restart
# --checkpoint-dir DIR` (3 servers, 2 workers, SSP) loses server 1 (SIGKILL)
# after its first epoch; the replacement joins and is back, and the job goes
# on checkpointing: it must finish with exit status 0, its newest checkpoint
# must be newer than the newest when the replacement was back, name a part of
# server 1 (the replacement's) and pass `loom checkpoint verify`. Heartbeats
# every 250 ms, dead after 2 s of silence. Usage: test_rejoin_ckpt_lr.sh LOOM
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"
# shellcheck source-path=SCRIPTDIR source=../lib/ft.sh
source "$(dirname "$0")/../lib/ft.sh" # newest, wait_for, within_1pct, replacement_part_after
LOOM=${1:?usage: $0 LOOM}
work_setup ft-rejoin-ckpt
cd "$WORK" || exit 1
export LOOM_HEARTBEAT_MS=250 LOOM_HEARTBEAT_TIMEOUT_MS=2000

run gen lr --out data --rows 20000 --features 5000 --nnz 10 --quiet
[[ $RC == 0 ]] || fail "gen lr: exit status $RC"


# 100 clocks an epoch per worker; long enough (about 10 s undisturbed) for a death and a rejoin.
"$LOOM" train lr --train data --servers 3 --workers 2 --epochs 40 --minibatch 100 \
    --consistency ssp:1 --insecure --no-status --replicas 1 --on-server-failure restart \
    --checkpoint-dir ck --checkpoint-every 20 >job.out 2>job.err &
launcher=$!
wait_for job.err "epoch   1 " "epoch 1"
kill_server 1
wait_for job.err "server 1 rejoined: it holds full copies of its ranges again" "rejoin of server 1"
back=$(newest ck)
wait "$launcher"
status=$?
launcher=
[[ $status == 0 ]] || fail "the run that lost server 1 exited with status $status: $(tail -5 job.err)"
replacement_part_after "$back"
last=$LAST
echo "checkpoints: newest at clock $last, the replacement back after clock $back; $(cat out)"
echo "PASS"
