#!/usr/bin/env bash
# The README's main job: the demo under the local launcher ends well.
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh"
DEMO=${3:?demo binary}
"$LOOM" run --servers 2 --workers 3 --timeout 120 -- "$DEMO" --clocks 8 >"$WORK/job.out" 2>&1 ||
    fail "the demo job failed"
[[ $(grep -c 'BSP tally exact' "$WORK/job.out") -eq 3 ]] || fail "not every worker checked the tally"
echo "PASS"
