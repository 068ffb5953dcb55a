#!/usr/bin/env bash
# kill -9 one worker of a serverless SVM job under NOTIFY-ACK (its neighbours wait for its
# models and acknowledgements): every survivor must notice by heartbeat, say which worker
# died and exit with status 3 within the bound of tests/lib/cli.sh's kill helpers, leaving
# no process behind. Skips (77) without ../shared/data/a9a.
# Usage: test_svm_kill.sh LOOM DATA_DIR
set -u
LOOM=${1:?loom} DATA=${2:?data dir}
TRAIN=$DATA/a9a/a9a
if [[ ! -r $TRAIN ]]; then
    echo "SKIP: $TRAIN is missing (../shared/data, see docs/TESTING.md)"
    exit 77
fi
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"
work_setup svmkill

kill_job_start 0 "epoch   1 " epoch train svm --train "$TRAIN" --graph ring --sync notify-ack \
    --epochs 100000 --batch 16
kill_worker1_and_check "scheduler" "worker 0" "worker 2"
echo PASS
