#!/usr/bin/env bash
# loom train svm on a9a with 4 workers on the root expander: --sync bsp and --sync notify-ack
# with a window of 3, stragglers on (--straggle 0.3: a worker's round takes twice its time
# now and then, so the workers drift apart within the window), must save byte-identical
# models: both average exactly the round-t models at round t (docs/P2P.md), whatever the
# timing. Skips (77) without ../shared/data/a9a.
# Usage: test_svm_window.sh LOOM DATA_DIR
set -u
LOOM=${1:?loom} DATA=${2:?data dir}
TRAIN=$DATA/a9a/a9a
if [[ ! -r $TRAIN ]]; then
    echo "SKIP: $TRAIN is missing (../shared/data, see docs/TESTING.md)"
    exit 77
fi
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
clear_env
work_dir svm-window
trap remove_work EXIT
for sync in bsp notify-ack; do
    timeout 200 "$LOOM" train svm --train "$TRAIN" --workers 4 --servers 0 --graph expander \
        --sync $sync --window 3 --straggle 0.3 --epochs 2 --quiet --model-out "$WORK/$sync.txt" \
        2>"$WORK/$sync.err" || {
        echo "FAIL: loom train svm --sync $sync failed" >&2
        tail -n 20 "$WORK/$sync.err" >&2
        exit 1
    }
done
cmp "$WORK/bsp.txt" "$WORK/notify-ack.txt" || {
    echo "FAIL: --sync notify-ack --window 3 saved another model than --sync bsp" >&2
    exit 1
}
echo PASS
