#!/usr/bin/env bash
# SSP(2) across real processes with one slow worker: bounded reads and clocks.
# shellcheck source-path=SCRIPTDIR source=../lib/mp.sh
source "$(dirname "$0")/../lib/mp.sh"
"$LOOM" run --servers 2 --workers 3 --timeout 90 -- "$PS_CHECK" ssp --staleness 2 --clocks 20 \
    --log "$WORK" >"$WORK/job.out" 2>&1 || fail "the SSP job failed"
grep -q 'within staleness 2' "$WORK/job.out" || fail "worker 0 did not report the clock check"
echo "PASS"
