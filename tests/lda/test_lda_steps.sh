#!/usr/bin/env bash
# loom train lda --steps (docs/LDA.md, "Steps"): under BSP without a priority
# a step's refresh reads only the worker's own changes, so 2 workers' counts
# are bit for bit those of one step a clock; with managed communication (a
# priority under a budget: early sends and the servers' row pushes between
# steps) 3 workers' counts stay consistent at every evaluation; and --steps
# is refused with the rotation, which has no clocks.
# Usage: test_lda_steps.sh LOOM
set -u
LOOM=$1
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
work_dir lda-steps
trap remove_work EXIT
clear_env
fail_show() { cat "$WORK/out" 2>/dev/null; }

"$LOOM" gen lda --out "$WORK/g.dat" --docs 300 --vocab-size 500 --topics 8 --doc-length 60 \
    --seed 4 || fail "gen lda failed"
for steps in 1 3; do
    "$LOOM" train lda --train "$WORK/g.dat" --topics 8 --iterations 3 --workers 2 --servers 2 \
        --consistency bsp --steps $steps --top-words 0 --insecure --no-status \
        --model-out "$WORK/steps$steps.model" >"$WORK/out" 2>&1 || fail "2 workers, --steps $steps failed"
done
cmp -s "$WORK/steps1.model" "$WORK/steps3.model" || fail "BSP --steps 3 counts differ from --steps 1"

# 100 topics: a word's row is two table rows (blocks of 50), pushed and refreshed separately.
"$LOOM" train lda --train "$WORK/g.dat" --topics 100 --iterations 3 --workers 3 --servers 2 \
    --consistency ssp:1 --steps 4 --priority rel --queue-rows 20 --bandwidth 50 --top-words 0 \
    --insecure --no-status --metrics "$WORK/job.json" >"$WORK/out" 2>&1 ||
    fail "--steps 4 --priority rel failed"
[[ $(grep -c '"counts_consistent": true' "$WORK/job.json") -eq 3 ]] ||
    fail "--steps 4 --priority rel: counts not consistent: $(cat "$WORK/job.json")"

"$LOOM" train lda --train "$WORK/g.dat" --schedule rotation --steps 2 >"$WORK/out" 2>&1
rc=$?
((rc == 2)) || fail "--steps with --schedule rotation exited $rc, expected 2"
grep -qF -- "--steps is for --schedule data" "$WORK/out" || fail "--steps with rotation: no message"
echo PASS
