#!/usr/bin/env bash
# A job resumed with more epochs than the run it continues (--epochs,
# --iterations for lda) trains on to the new total: the tables' definitions
# do not depend on the run's length (the per-epoch statistics tables used to
# be sized by it: "table already opened with different options"). The
# resumed run's progress lines count on, one epoch after another, from the
# checkpoint's epoch to the new total.
#
# Usage: test_resume_epochs.sh LOOM DATA_DIR MODEL. lr trains on
# DATA_DIR/a9a/a9a (exit 77, skipped, without it); mf and lda on `loom gen` data.
# shellcheck disable=SC2015 # "A && B || fail": fail if either check fails, as meant
set -u
# shellcheck source-path=SCRIPTDIR source=../lib/cli.sh
source "$(dirname "$0")/../lib/cli.sh"

LOOM=${1:?usage: $0 LOOM DATA_DIR MODEL} DATA=${2:?} MODEL=${3:?}
case $MODEL in
lr)
    [[ -e $DATA/a9a/a9a ]] ||
        { echo "skipped: $DATA/a9a not found (the shared datasets are not part of a clone)"; exit 77; }
    TRAIN=$(cd "$DATA/a9a" && pwd)/a9a
    ;;
esac
work_setup resume-epochs
cd "$WORK" || exit 1

# WORD: the progress lines' unit; LEN: the flag of the run's length.
case $MODEL in
lr)
    ARGS=(train lr --train "$TRAIN" --checkpoint-every 50)
    WORD=epoch LEN=--epochs
    ;;
mf)
    run gen mf --out data --users 300 --items 400 --ratings 20000 --quiet
    ARGS=(train mf --train data --syncs 5 --checkpoint-every 2)
    WORD=epoch LEN=--epochs
    ;;
lda)
    run gen lda --out data --docs 300 --vocab-size 300 --topics 5 --doc-length 40 --quiet
    ARGS=(train lda --train data --topics 5 --syncs 5 --checkpoint-every 2)
    WORD=iteration LEN=--iterations
    ;;
*) fail "unknown model $MODEL" ;;
esac
[[ ${RC:-0} == 0 ]] || fail "gen $MODEL: exit status $RC"
ARGS+=(--workers 2 --servers 2 --checkpoint-dir ck --insecure --no-status)

# progress: the numbers of the progress lines ("epoch N", "iteration N") in ./err.
progress() { sed -n "s/^\[worker 0\] $WORD *\([0-9][0-9]*\) .*/\1/p" err; }

run "${ARGS[@]}" "$LEN" 2
[[ $RC == 0 ]] || fail "the first run ($LEN 2): exit status $RC"
[[ $(progress | tail -n 1) == 2 ]] || fail "the first run did not end at $WORD 2"
run checkpoint ls ck
[[ $RC == 0 ]] || fail "the first run committed no checkpoint"

run "${ARGS[@]}" "$LEN" 4 --resume ck
[[ $RC == 0 ]] || fail "resume with $LEN 4: exit status $RC"
mapfile -t seen < <(progress)
((${#seen[@]} >= 2)) || fail "the resumed run reported ${#seen[@]} ${WORD}s: ${seen[*]}"
# The checkpoint was cut within the first run (2 at the latest), so the
# resumed run goes on from there: consecutive numbers, ending at 4.
((seen[0] <= 3)) || fail "the resumed run started at $WORD ${seen[0]}"
for ((i = 1; i < ${#seen[@]}; i++)); do
    ((seen[i] == seen[i - 1] + 1)) || fail "the resumed run's ${WORD}s are not consecutive: ${seen[*]}"
done
((seen[-1] == 4)) || fail "the resumed run ended at $WORD ${seen[-1]}, not 4: ${seen[*]}"
echo "resumed: ${WORD}s ${seen[*]}"
echo PASS
