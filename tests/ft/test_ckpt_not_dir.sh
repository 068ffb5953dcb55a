#!/usr/bin/env bash
# `--checkpoint-dir PATH` and `--resume PATH` naming something that exists and
# is not a directory (a regular file, a FIFO, a path through a file) are
# refused while the flags are read: exit status 2, the flag and the path
# named, before any process starts, and the file left as it was (docs/FAULTS.md).
#
# Usage: test_ckpt_not_dir.sh LOOM
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"

LOOM=${1:?usage: $0 LOOM}
work_setup ckpt-not-dir
cd "$WORK" || exit 1

run gen lr --out data --rows 200 --features 50 --nnz 5 --quiet
[[ $RC == 0 ]] || fail "gen: exit status $RC"
echo "a user's file" >file
mkfifo fifo
JOB=(--train data --workers 1 --servers 1 --insecure --no-status)

for model in lr mf lda; do
    for target in file fifo; do
        expect 2 "loom train $model: --checkpoint-dir $target: not a directory" \
            train "$model" "${JOB[@]}" --checkpoint-dir "$target" --checkpoint-every 5
        expect 2 "loom train $model: --resume $target: not a directory" \
            train "$model" "${JOB[@]}" --resume "$target"
    done
    # A path through a regular file: stat's own reason.
    expect 2 "loom train $model: --checkpoint-dir file/ck: Not a directory" \
        train "$model" "${JOB[@]}" --checkpoint-dir file/ck
done
[[ $(cat file) == "a user's file" && -p fifo ]] || fail "the refused paths were changed"
echo PASS
