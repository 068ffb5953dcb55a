#!/usr/bin/env bash
# The final checkpoint (docs/FAULTS.md, "Checkpoints"): a job of mf or lda
# with the default --checkpoint-every (1e) ends with a committed checkpoint
# of its last clock, so `loom checkpoint export` gives the model the job
# wrote (--model-out) byte for byte, and --resume with more epochs or
# iterations goes on from it. (lr: ft.refuse.)
#
# Usage: test_ckpt_final.sh LOOM MODEL
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"

LOOM=${1:?usage: $0 LOOM MODEL}
MODEL=${2:?usage: $0 LOOM MODEL}
work_setup ckpt-final
cd "$WORK" || exit 1

case $MODEL in
mf)
    run gen mf --out data --users 500 --items 800 --ratings 20000 --quiet
    LONG=--epochs
    set --
    ;;
lda)
    run gen lda --out data --docs 500 --vocab-size 300 --topics 5 --doc-length 40 --quiet
    LONG=--iterations
    set -- --topics 5
    ;;
*) fail "unknown model $MODEL" ;;
esac
[[ $RC == 0 ]] || fail "gen: exit status $RC"
JOB=(train "$MODEL" --train data "$@" --workers 2 --servers 2 --quiet --insecure --no-status)
run "${JOB[@]}" "$LONG" 6 --checkpoint-dir ck --model-out trained.model
[[ $RC == 0 ]] || fail "the checkpointed job: exit status $RC"
run checkpoint export ck --out exported.model
[[ $RC == 0 ]] && cmp -s trained.model exported.model ||
    fail "the newest checkpoint is not the trained model: $("$LOOM" checkpoint ls ck | tr '\n' ' ')"
run "${JOB[@]}" "$LONG" 8 --checkpoint-dir ck --resume ck --model-out more.model
[[ $RC == 0 && -s more.model ]] || fail "resume with more $LONG: exit status $RC"
cmp -s trained.model more.model && fail "resume with more $LONG trained nothing more"
echo "ok"
